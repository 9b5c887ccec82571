//! libfabric's core API, exported by the same library so it can stand in for
//! `libfabric.so.1` (drop-in) or be linked directly (embedded). There is no
//! core and no other provider: `fi_getinfo` calls rsverbs' getinfo directly
//! and does what libfabric's core adds (API version check, `FI_PROVIDER`
//! filtering, `prov_name`, `FI_PROV_ATTR_ONLY`, `verbs;ofi_rxm`).
//!
//! Symbol versions: every function is defined under an internal name and
//! given its libfabric name and version with `.symver` (below); the version
//! nodes come from `capi/libfabric.map` (build.rs passes it and `-Bsymbolic`
//! to the cdylib link). Old ABI versions (FABRIC_1.0–1.2) convert the older,
//! shorter structs as libfabric's compatibility layer does.
//!
//! Memory: every `fi_info` rsverbs hands out (here or through the provider
//! entry) is C-heap memory, one allocation per struct/string, so
//! `fi_freeinfo` (ours or libfabric's) frees what `fi_allocinfo`/
//! `fi_dupinfo`/`fi_getinfo` (ours or libfabric's) allocated, and an
//! application may put `strdup`ed strings into hints.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::{offset_of, size_of};

use parking_lot::Mutex;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::util::*;
use super::version::{domain_attr_size, fi_domain_attr_ext, API_VERSION_MAX, API_VERSION_MIN};
use crate::error::{FiError, FiResult};

// ---- symbol versions --------------------------------------------------------

std::arch::global_asm!(
    ".globl rsverbs_sv_getinfo_1_9", ".set rsverbs_sv_getinfo_1_9, {getinfo}", ".symver rsverbs_sv_getinfo_1_9, fi_getinfo@@FABRIC_1.9",
    ".globl rsverbs_sv_getinfo_1_8", ".set rsverbs_sv_getinfo_1_8, {getinfo_1_8}", ".symver rsverbs_sv_getinfo_1_8, fi_getinfo@FABRIC_1.8",
    ".globl rsverbs_sv_getinfo_1_7", ".set rsverbs_sv_getinfo_1_7, {getinfo_1_7}", ".symver rsverbs_sv_getinfo_1_7, fi_getinfo@FABRIC_1.7",
    ".globl rsverbs_sv_getinfo_1_3", ".set rsverbs_sv_getinfo_1_3, {getinfo_1_3}", ".symver rsverbs_sv_getinfo_1_3, fi_getinfo@FABRIC_1.3",
    ".globl rsverbs_sv_getinfo_1_2", ".set rsverbs_sv_getinfo_1_2, {getinfo_1_2}", ".symver rsverbs_sv_getinfo_1_2, fi_getinfo@FABRIC_1.2",
    ".globl rsverbs_sv_getinfo_1_1", ".set rsverbs_sv_getinfo_1_1, {getinfo_1_1}", ".symver rsverbs_sv_getinfo_1_1, fi_getinfo@FABRIC_1.1",
    ".globl rsverbs_sv_getinfo_1_0", ".set rsverbs_sv_getinfo_1_0, {getinfo_1_0}", ".symver rsverbs_sv_getinfo_1_0, fi_getinfo@FABRIC_1.0",
    ".globl rsverbs_sv_freeinfo_1_9", ".set rsverbs_sv_freeinfo_1_9, {freeinfo}", ".symver rsverbs_sv_freeinfo_1_9, fi_freeinfo@@FABRIC_1.9",
    ".globl rsverbs_sv_freeinfo_1_8", ".set rsverbs_sv_freeinfo_1_8, {freeinfo}", ".symver rsverbs_sv_freeinfo_1_8, fi_freeinfo@FABRIC_1.8",
    ".globl rsverbs_sv_freeinfo_1_7", ".set rsverbs_sv_freeinfo_1_7, {freeinfo}", ".symver rsverbs_sv_freeinfo_1_7, fi_freeinfo@FABRIC_1.7",
    ".globl rsverbs_sv_freeinfo_1_3", ".set rsverbs_sv_freeinfo_1_3, {freeinfo}", ".symver rsverbs_sv_freeinfo_1_3, fi_freeinfo@FABRIC_1.3",
    ".globl rsverbs_sv_freeinfo_1_2", ".set rsverbs_sv_freeinfo_1_2, {freeinfo}", ".symver rsverbs_sv_freeinfo_1_2, fi_freeinfo@FABRIC_1.2",
    ".globl rsverbs_sv_freeinfo_1_1", ".set rsverbs_sv_freeinfo_1_1, {freeinfo}", ".symver rsverbs_sv_freeinfo_1_1, fi_freeinfo@FABRIC_1.1",
    ".globl rsverbs_sv_freeinfo_1_0", ".set rsverbs_sv_freeinfo_1_0, {freeinfo}", ".symver rsverbs_sv_freeinfo_1_0, fi_freeinfo@FABRIC_1.0",
    ".globl rsverbs_sv_dupinfo_1_9", ".set rsverbs_sv_dupinfo_1_9, {dupinfo}", ".symver rsverbs_sv_dupinfo_1_9, fi_dupinfo@@FABRIC_1.9",
    ".globl rsverbs_sv_dupinfo_1_8", ".set rsverbs_sv_dupinfo_1_8, {dupinfo_1_8}", ".symver rsverbs_sv_dupinfo_1_8, fi_dupinfo@FABRIC_1.8",
    ".globl rsverbs_sv_dupinfo_1_7", ".set rsverbs_sv_dupinfo_1_7, {dupinfo_1_7}", ".symver rsverbs_sv_dupinfo_1_7, fi_dupinfo@FABRIC_1.7",
    ".globl rsverbs_sv_dupinfo_1_3", ".set rsverbs_sv_dupinfo_1_3, {dupinfo_1_3}", ".symver rsverbs_sv_dupinfo_1_3, fi_dupinfo@FABRIC_1.3",
    ".globl rsverbs_sv_dupinfo_1_2", ".set rsverbs_sv_dupinfo_1_2, {dupinfo_1_2}", ".symver rsverbs_sv_dupinfo_1_2, fi_dupinfo@FABRIC_1.2",
    ".globl rsverbs_sv_dupinfo_1_1", ".set rsverbs_sv_dupinfo_1_1, {dupinfo_1_1}", ".symver rsverbs_sv_dupinfo_1_1, fi_dupinfo@FABRIC_1.1",
    ".globl rsverbs_sv_dupinfo_1_0", ".set rsverbs_sv_dupinfo_1_0, {dupinfo_1_0}", ".symver rsverbs_sv_dupinfo_1_0, fi_dupinfo@FABRIC_1.0",
    ".globl rsverbs_sv_fabric_1_1", ".set rsverbs_sv_fabric_1_1, {fabric}", ".symver rsverbs_sv_fabric_1_1, fi_fabric@@FABRIC_1.1",
    ".globl rsverbs_sv_fabric2_1_8", ".set rsverbs_sv_fabric2_1_8, {fabric2}", ".symver rsverbs_sv_fabric2_1_8, fi_fabric2@@FABRIC_1.8",
    ".globl rsverbs_sv_fabric_1_0", ".set rsverbs_sv_fabric_1_0, {fabric_1_0}", ".symver rsverbs_sv_fabric_1_0, fi_fabric@FABRIC_1.0",
    ".globl rsverbs_sv_version", ".set rsverbs_sv_version, {version}", ".symver rsverbs_sv_version, fi_version@@FABRIC_1.0",
    ".globl rsverbs_sv_strerror", ".set rsverbs_sv_strerror, {strerror}", ".symver rsverbs_sv_strerror, fi_strerror@@FABRIC_1.0",
    ".globl rsverbs_sv_tostr", ".set rsverbs_sv_tostr, {tostr}", ".symver rsverbs_sv_tostr, fi_tostr@@FABRIC_1.0",
    ".globl rsverbs_sv_tostr_r", ".set rsverbs_sv_tostr_r, {tostr_r}", ".symver rsverbs_sv_tostr_r, fi_tostr_r@@FABRIC_1.4",
    ".globl rsverbs_sv_param_get", ".set rsverbs_sv_param_get, {param_get}", ".symver rsverbs_sv_param_get, fi_param_get@@FABRIC_1.0",
    ".globl rsverbs_sv_getparams", ".set rsverbs_sv_getparams, {getparams}", ".symver rsverbs_sv_getparams, fi_getparams@@FABRIC_1.0",
    ".globl rsverbs_sv_freeparams", ".set rsverbs_sv_freeparams, {freeparams}", ".symver rsverbs_sv_freeparams, fi_freeparams@@FABRIC_1.0",
    ".globl rsverbs_sv_log_enabled", ".set rsverbs_sv_log_enabled, {log_enabled}", ".symver rsverbs_sv_log_enabled, fi_log_enabled@@FABRIC_1.0",
    ".globl rsverbs_sv_log_ready", ".set rsverbs_sv_log_ready, {log_ready}", ".symver rsverbs_sv_log_ready, fi_log_ready@@FABRIC_1.6",
    ".globl rsverbs_sv_open", ".set rsverbs_sv_open, {open}", ".symver rsverbs_sv_open, fi_open@@FABRIC_1.5",
    getinfo = sym core_getinfo,
    getinfo_1_8 = sym core_getinfo_1_8,
    getinfo_1_7 = sym core_getinfo_1_7,
    getinfo_1_3 = sym core_getinfo_1_3,
    getinfo_1_2 = sym core_getinfo_1_2,
    getinfo_1_1 = sym core_getinfo_1_1,
    getinfo_1_0 = sym core_getinfo_1_0,
    freeinfo = sym core_freeinfo,
    dupinfo = sym core_dupinfo,
    dupinfo_1_8 = sym core_dupinfo_1_8,
    dupinfo_1_7 = sym core_dupinfo_1_7,
    dupinfo_1_3 = sym core_dupinfo_1_3,
    dupinfo_1_2 = sym core_dupinfo_1_2,
    dupinfo_1_1 = sym core_dupinfo_1_1,
    dupinfo_1_0 = sym core_dupinfo_1_0,
    fabric = sym core_fabric,
    fabric2 = sym core_fabric2,
    fabric_1_0 = sym core_fabric_1_0,
    version = sym core_version,
    strerror = sym core_strerror,
    tostr = sym core_tostr,
    tostr_r = sym core_tostr_r,
    param_get = sym core_param_get,
    getparams = sym core_getparams,
    freeparams = sym core_freeparams,
    log_enabled = sym core_log_enabled,
    log_ready = sym core_log_ready,
    open = sym core_open,
);

// ---- provider names and FI_PROVIDER ---------------------------------------------

/// The utility-provider suffix rsverbs answers itself (its native RDM endpoint).
const RXM: &str = "ofi_rxm";

/// What a `prov_name` in hints asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum ProvRequest {
    /// Any of our infos (no name, or our name alone).
    Ours,
    /// `<ours>;ofi_rxm`: RDM infos only, reported under that name.
    OursRxm,
    /// Another provider: nothing.
    Other,
}

/// Classifies a hints `prov_name` (`ours` is our registered name).
pub fn classify_prov_name(name: Option<&str>, ours: &str) -> ProvRequest {
    let Some(name) = name else { return ProvRequest::Ours };
    let parts: Vec<&str> = name.split(';').collect();
    match parts.as_slice() {
        [p] if p.eq_ignore_ascii_case(ours) => ProvRequest::Ours,
        [p, r] if p.eq_ignore_ascii_case(ours) && r.eq_ignore_ascii_case(RXM) => ProvRequest::OursRxm,
        _ => ProvRequest::Other,
    }
}

/// libfabric's `FI_PROVIDER` filter: a comma list of names, or `^`-prefixed to exclude them.
pub fn provider_filter_allows(filter: Option<&str>, ours: &str) -> bool {
    let Some(f) = filter.map(str::trim).filter(|f| !f.is_empty()) else { return true };
    let (negated, list) = match f.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, f),
    };
    let hit = list.split(',').map(str::trim).any(|n| {
        n.eq_ignore_ascii_case(ours) || n.split(';').next().is_some_and(|first| first.eq_ignore_ascii_case(ours))
    });
    hit != negated
}

mod info_mem;
mod log;
mod params;

use info_mem::*;
use log::*;
use params::*;

// ---- fi_getinfo ----------------------------------------------------------------

/// Counts a chain's nodes.
///
/// # Safety
/// `p` NULL or a valid chain.
unsafe fn chain_len(mut p: *const fi_info) -> u64 {
    let mut n = 0;
    while !p.is_null() {
        n += 1;
        // SAFETY: valid chain.
        p = unsafe { (*p).next };
    }
    n
}

/// The drop-in `fi_getinfo` (current ABI).
///
/// # Safety
/// As fi_getinfo(3).
pub unsafe fn getinfo_direct(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> FiResult<c_int> {
    crate::log::init();
    super::embed::note_getinfo();
    let info = nonnull(info, "fi_getinfo: info")?;
    // SAFETY: checked non-NULL.
    unsafe { *info = std::ptr::null_mut() };
    if version < API_VERSION_MIN || version > API_VERSION_MAX {
        return crate::fail!(
            FiError::NOSYS,
            "fi_getinfo: API version {}.{} is not supported (1.0 to {}.{})",
            FI_MAJOR(version),
            FI_MINOR(version),
            FI_MAJOR(API_VERSION_MAX),
            FI_MINOR(API_VERSION_MAX)
        );
    }
    let ours = super::prov::prov_name();
    if !provider_filter_allows(std::env::var("FI_PROVIDER").ok().as_deref(), ours) {
        tracing::info!("fi_getinfo: FI_PROVIDER excludes '{ours}'");
        return Err(FiError::NODATA);
    }
    // SAFETY: hints NULL or valid, its fabric_attr NULL or valid.
    let hint_name = unsafe {
        if hints.is_null() || (*hints).fabric_attr.is_null() {
            None
        } else {
            cstr_opt((*(*hints).fabric_attr).prov_name)
        }
    };
    let req = classify_prov_name(hint_name.as_deref(), ours);
    let report_name = match req {
        ProvRequest::Ours => ours.to_string(),
        ProvRequest::OursRxm => format!("{ours};{RXM}"),
        ProvRequest::Other => {
            tracing::info!("fi_getinfo: provider '{}' is not available (only '{ours}' and '{ours};{RXM}')", hint_name.unwrap_or_default());
            return Err(FiError::NODATA);
        }
    };
    if req == ProvRequest::OursRxm {
        // SAFETY: hints is non-NULL here (it named a provider); ep_attr NULL or valid.
        let t = unsafe { (*hints).ep_attr.as_ref().map_or(FI_EP_UNSPEC, |e| e.type_) };
        if t != FI_EP_UNSPEC && t != FI_EP_RDM {
            tracing::info!("fi_getinfo: '{report_name}' offers only FI_EP_RDM");
            return Err(FiError::NODATA);
        }
    }
    if flags & FI_PROV_ATTR_ONLY != 0 {
        let p = allocinfo();
        if p.is_null() {
            return crate::fail!(FiError::NOMEM, "fi_getinfo: out of memory");
        }
        // SAFETY: fresh info with all attributes.
        unsafe {
            let f = &mut *(*p).fabric_attr;
            f.prov_name = c_strdup(&report_name);
            f.prov_version = crate::info::PROV_VERSION;
            f.api_version = version;
            if req == ProvRequest::OursRxm {
                (*(*p).ep_attr).type_ = FI_EP_RDM;
            }
            *info = p;
        }
        return Ok(0);
    }
    let mut chain: *mut fi_info = std::ptr::null_mut();
    // The provider getinfo checks the hints' prov_name's first component only.
    // SAFETY: arguments as for fi_getinfo(3).
    unsafe { super::prov::getinfo_common(version, node, service, flags, hints, &mut chain, false) }?;
    // Keep RDM only for ";ofi_rxm", name every result as the core would.
    let mut head: *mut fi_info = std::ptr::null_mut();
    let mut tail: *mut fi_info = std::ptr::null_mut();
    let mut cur = chain;
    // SAFETY: `chain` is the provider's fresh chain of C-heap infos.
    unsafe {
        while !cur.is_null() {
            let next = (*cur).next;
            (*cur).next = std::ptr::null_mut();
            let keep = req != ProvRequest::OursRxm || (!(*cur).ep_attr.is_null() && (*(*cur).ep_attr).type_ == FI_EP_RDM);
            if keep {
                let f = &mut *(*cur).fabric_attr;
                libc::free(f.prov_name as *mut c_void);
                f.prov_name = c_strdup(&report_name);
                if tail.is_null() {
                    head = cur;
                } else {
                    (*tail).next = cur;
                }
                tail = cur;
            } else {
                super::info::free_chain(cur);
            }
            cur = next;
        }
        if head.is_null() {
            tracing::info!("fi_getinfo: no '{report_name}' info matches the hints");
            return Err(FiError::NODATA);
        }
        super::embed::note_infos(chain_len(head), 0);
        *info = head;
    }
    Ok(0)
}

unsafe extern "C" fn core_getinfo(v: u32, n: *const c_char, s: *const c_char, f: u64, h: *const fi_info, i: *mut *mut fi_info) -> c_int {
    // SAFETY: the application's fi_getinfo arguments.
    guard("fi_getinfo", || unsafe { getinfo_direct(v, n, s, f, h, i) })
}

/// fi_getinfo of an old ABI: hints converted to today's layout (results are
/// today's structs, a superset, as libfabric returns them too).
///
/// # Safety
/// As fi_getinfo(3) for that ABI.
unsafe fn getinfo_old(
    abi: OldAbi,
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const c_void,
    info: *mut *mut fi_info,
) -> c_int {
    guard("fi_getinfo", || {
        let shell = if hints.is_null() {
            std::ptr::null_mut()
        } else {
            // SAFETY: hints of the old layout.
            match unsafe { upgrade_shell(hints, abi) } {
                Some(s) => s,
                None => return crate::fail!(FiError::NOMEM, "fi_getinfo: out of memory"),
            }
        };
        // SAFETY: shell is NULL or a valid current-layout info.
        let r = unsafe { getinfo_direct(version, node, service, flags, shell, info) };
        if !shell.is_null() {
            // SAFETY: from upgrade_shell.
            unsafe { free_shell(shell) };
        }
        r
    })
}

unsafe extern "C" fn core_getinfo_1_8(v: u32, n: *const c_char, s: *const c_char, f: u64, h: *const c_void, i: *mut *mut fi_info) -> c_int {
    // SAFETY: ABI 1.8 arguments.
    unsafe { getinfo_old(ABI_1_8, v, n, s, f, h, i) }
}
unsafe extern "C" fn core_getinfo_1_7(v: u32, n: *const c_char, s: *const c_char, f: u64, h: *const c_void, i: *mut *mut fi_info) -> c_int {
    // SAFETY: ABI 1.7 arguments.
    unsafe { getinfo_old(ABI_1_7, v, n, s, f, h, i) }
}
unsafe extern "C" fn core_getinfo_1_3(v: u32, n: *const c_char, s: *const c_char, f: u64, h: *const c_void, i: *mut *mut fi_info) -> c_int {
    // SAFETY: ABI 1.3 arguments.
    unsafe { getinfo_old(ABI_1_3, v, n, s, f, h, i) }
}
unsafe extern "C" fn core_getinfo_1_2(v: u32, n: *const c_char, s: *const c_char, f: u64, h: *const c_void, i: *mut *mut fi_info) -> c_int {
    // SAFETY: ABI 1.2 arguments.
    unsafe { getinfo_old(ABI_1_2, v, n, s, f, h, i) }
}
unsafe extern "C" fn core_getinfo_1_1(v: u32, n: *const c_char, s: *const c_char, f: u64, h: *const c_void, i: *mut *mut fi_info) -> c_int {
    // SAFETY: ABI 1.1 arguments.
    unsafe { getinfo_old(ABI_1_1, v, n, s, f, h, i) }
}
unsafe extern "C" fn core_getinfo_1_0(v: u32, n: *const c_char, s: *const c_char, f: u64, h: *const c_void, i: *mut *mut fi_info) -> c_int {
    // SAFETY: ABI 1.0 arguments.
    unsafe { getinfo_old(ABI_1_0, v, n, s, f, h, i) }
}

/// `fi_freeinfo`: the whole chain (every ABI version; old infos are ours, so today's layout).
unsafe extern "C" fn core_freeinfo(info: *mut fi_info) {
    let _ = std::panic::catch_unwind(|| {
        let mut p = info;
        let mut n = 0;
        while !p.is_null() {
            // SAFETY: a chain of C-heap infos (fi_freeinfo(3)).
            let next = unsafe { (*p).next };
            // SAFETY: as above; each node freed once.
            unsafe { free_one(p) };
            n += 1;
            p = next;
        }
        super::embed::note_infos(0, n);
    });
}

/// `fi_dupinfo`: `NULL` allocates a fresh info (`fi_allocinfo`).
unsafe extern "C" fn core_dupinfo(info: *const fi_info) -> *mut fi_info {
    std::panic::catch_unwind(|| {
        if info.is_null() {
            allocinfo()
        } else {
            // SAFETY: a valid info (fi_dupinfo(3)).
            unsafe { dupinfo_deep(info) }
        }
    })
    .unwrap_or(std::ptr::null_mut())
}

/// # Safety
/// `info` NULL or an info of the `abi` layout.
unsafe fn dupinfo_old(abi: OldAbi, info: *const c_void) -> *mut fi_info {
    std::panic::catch_unwind(|| {
        if info.is_null() {
            return allocinfo();
        }
        // SAFETY: per the contract.
        let Some(shell) = (unsafe { upgrade_shell(info, abi) }) else { return std::ptr::null_mut() };
        // SAFETY: a valid current-layout shell; freed after the deep copy.
        unsafe {
            let d = dupinfo_deep(shell);
            free_shell(shell);
            d
        }
    })
    .unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn core_dupinfo_1_8(info: *const c_void) -> *mut fi_info {
    // SAFETY: ABI 1.8 info.
    unsafe { dupinfo_old(ABI_1_8, info) }
}
unsafe extern "C" fn core_dupinfo_1_7(info: *const c_void) -> *mut fi_info {
    // SAFETY: ABI 1.7 info.
    unsafe { dupinfo_old(ABI_1_7, info) }
}
unsafe extern "C" fn core_dupinfo_1_3(info: *const c_void) -> *mut fi_info {
    // SAFETY: ABI 1.3 info.
    unsafe { dupinfo_old(ABI_1_3, info) }
}
unsafe extern "C" fn core_dupinfo_1_2(info: *const c_void) -> *mut fi_info {
    // SAFETY: ABI 1.2 info.
    unsafe { dupinfo_old(ABI_1_2, info) }
}
unsafe extern "C" fn core_dupinfo_1_1(info: *const c_void) -> *mut fi_info {
    // SAFETY: ABI 1.1 info.
    unsafe { dupinfo_old(ABI_1_1, info) }
}
unsafe extern "C" fn core_dupinfo_1_0(info: *const c_void) -> *mut fi_info {
    // SAFETY: ABI 1.0 info.
    unsafe { dupinfo_old(ABI_1_0, info) }
}

// ---- fi_fabric ---------------------------------------------------------------------

/// The drop-in `fi_fabric`: `attr->prov_name` (if set) must name us (or us;ofi_rxm).
///
/// # Safety
/// As fi_fabric(3).
unsafe fn fabric_direct(attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> FiResult<c_int> {
    crate::log::init();
    super::embed::note_fabric();
    let attr = nonnull(attr, "fi_fabric: attr")?;
    let ours = super::prov::prov_name();
    // SAFETY: attr valid; prov_name NULL or a C string.
    let name = unsafe { cstr_opt((*attr).prov_name) };
    if classify_prov_name(name.as_deref(), ours) == ProvRequest::Other {
        return crate::fail!(FiError::NODATA, "fi_fabric: provider '{}' is not available", name.unwrap_or_default());
    }
    // SAFETY: per the contract.
    unsafe { super::prov::fabric_common(attr, fabric, context) }
}

unsafe extern "C" fn core_fabric(attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int {
    // SAFETY: the application's arguments.
    guard("fi_fabric", || unsafe { fabric_direct(attr, fabric, context) })
}

/// `fi_fabric2` (libfabric 2.0, FABRIC_1.8): the fabric of `info->fabric_attr`.
unsafe extern "C" fn core_fabric2(info: *mut fi_info, fabric: *mut *mut fid_fabric, flags: u64, context: *mut c_void) -> c_int {
    guard("fi_fabric2", || {
        let info = nonnull(info, "fi_fabric2: info")?;
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_fabric2: unknown flags {flags:#x}");
        }
        // SAFETY: info is a valid fi_info per fi_fabric(3).
        let attr = unsafe { (*info).fabric_attr };
        if attr.is_null() {
            return crate::fail!(FiError::INVAL, "fi_fabric2: info->fabric_attr is NULL");
        }
        // SAFETY: the application's fabric attributes.
        unsafe { fabric_direct(attr, fabric, context) }
    })
}

/// ABI 1.0 `fi_fabric`: the attr has no `api_version` (libfabric then assumes 1.0).
unsafe extern "C" fn core_fabric_1_0(attr: *mut c_void, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int {
    guard("fi_fabric", || {
        if attr.is_null() {
            return crate::fail!(FiError::INVAL, "fi_fabric: attr is NULL");
        }
        let mut a: fi_fabric_attr = fi_fabric_attr {
            fabric: std::ptr::null_mut(),
            name: std::ptr::null_mut(),
            prov_name: std::ptr::null_mut(),
            prov_version: 0,
            api_version: 0,
        };
        // SAFETY: an ABI 1.0 fabric attr has ABI_1_0.fabric readable bytes.
        unsafe { std::ptr::copy_nonoverlapping(attr as *const u8, &mut a as *mut fi_fabric_attr as *mut u8, ABI_1_0.fabric) };
        a.api_version = FI_VERSION(1, 0);
        // SAFETY: `a` is a valid attr for the call.
        unsafe { fabric_direct(&mut a, fabric, context) }
    })
}

// ---- small functions ---------------------------------------------------------------

/// The drop-in's `fi_version()`: the newest API version rsverbs speaks.
extern "C" fn core_version() -> u32 {
    API_VERSION_MAX
}

/// The drop-in `fi_version` (so the provider entry can tell itself from a loading core).
pub fn fi_version_fn() -> extern "C" fn() -> u32 {
    core_version
}

/// libfabric's messages for its own codes (FI_ERRNO_OFFSET..), index = code - 256.
const ERRSTR: [&str; 14] = [
    "Unspecified error\0",
    "Provided buffer is too small\0",
    "Operation not permitted in current state\0",
    "Error available\0",
    "Flags not supported\0",
    "Missing or unavailable event queue\0",
    "Invalid resource domain\0",
    "Missing or unavailable completion queue\0",
    "CRC error\0",
    "Truncation error\0",
    "Required key not available\0",
    "Missing or unavailable address vector\0",
    "Queue has been overrun\0",
    "Receiver not ready, no receive buffers available\0",
];

/// `fi_strerror`: `strerror` below FI_ERRNO_OFFSET, libfabric's own texts above.
extern "C" fn core_strerror(errnum: c_int) -> *const c_char {
    strerror_text(errnum)
}

/// The text `fi_strerror` gives for `errnum` (either sign).
pub(crate) fn strerror_text(errnum: c_int) -> *const c_char {
    let e = errnum.unsigned_abs() as usize;
    if e < FI_ERRNO_OFFSET as usize {
        // SAFETY: strerror returns a valid C string (glibc: a static or thread buffer).
        return unsafe { libc::strerror(e as c_int) };
    }
    let i = (e - FI_ERRNO_OFFSET as usize).min(ERRSTR.len());
    ERRSTR.get(i).unwrap_or(&ERRSTR[0]).as_ptr() as *const c_char
}

unsafe extern "C" fn core_tostr(data: *const c_void, datatype: fi_type) -> *mut c_char {
    // SAFETY: as fi_tostr(3).
    unsafe { super::tostr::tostr(data, datatype) }
}

unsafe extern "C" fn core_tostr_r(buf: *mut c_char, len: usize, data: *const c_void, datatype: fi_type) -> *mut c_char {
    // SAFETY: as fi_tostr(3).
    unsafe { super::tostr::tostr_r(buf, len, data, datatype) }
}

/// `fi_open`: libfabric 1.17 offers "mr_cache" and "logging" here, services of its
/// core that rsverbs does not have.
unsafe extern "C" fn core_open(
    _version: u32,
    name: *const c_char,
    _attr: *mut c_void,
    _attr_len: usize,
    _flags: u64,
    _fid: *mut *mut fid,
    _context: *mut c_void,
) -> c_int {
    guard("fi_open", || {
        // SAFETY: name NULL or a C string.
        let n = unsafe { cstr_opt(name) };
        crate::fail!(FiError::NOSYS, "fi_open: '{}': rsverbs has no libfabric core services", n.unwrap_or_default())
    })
}
#[cfg(test)]
mod tests;
