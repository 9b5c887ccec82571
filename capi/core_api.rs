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

// ---- fi_info memory ----------------------------------------------------------------

/// `fi_allocinfo()`: a zeroed fi_info with all five attribute structs.
fn allocinfo() -> *mut fi_info {
    let p = c_calloc::<fi_info>();
    if p.is_null() {
        return p;
    }
    // SAFETY: fresh zeroed info, ours.
    unsafe {
        (*p).tx_attr = c_calloc();
        (*p).rx_attr = c_calloc();
        (*p).ep_attr = c_calloc();
        (*p).domain_attr = c_calloc::<fi_domain_attr_ext>() as *mut fi_domain_attr;
        (*p).fabric_attr = c_calloc();
        let i = &*p;
        if i.tx_attr.is_null() || i.rx_attr.is_null() || i.ep_attr.is_null() || i.domain_attr.is_null() || i.fabric_attr.is_null() {
            super::info::free_chain(p);
            return std::ptr::null_mut();
        }
    }
    super::embed::note_infos(1, 0);
    p
}

/// Copies `n` bytes of an attribute struct into a fresh zeroed C-heap `T`.
///
/// # Safety
/// `src` NULL or `n` readable bytes; `n <= size_of::<T>()`.
unsafe fn dup_prefix<T>(src: *const T, n: usize) -> Result<*mut T, ()> {
    if src.is_null() {
        return Ok(std::ptr::null_mut());
    }
    let d = c_calloc::<T>();
    if d.is_null() {
        return Err(());
    }
    // SAFETY: per the contract; d has size_of::<T>() >= n bytes.
    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, d as *mut u8, n.min(size_of::<T>())) };
    Ok(d)
}

/// Sets `*slot` to a C-heap copy of the whole attribute struct at `src` (NULL
/// stays NULL), then lets `deep` replace the pointers the copy shares with
/// `src` by copies of their own. `deep` clears every such pointer before it
/// allocates, so that when it fails the caller's cleanup (which frees what the
/// copy points to) frees nothing of `src`.
///
/// # Safety
/// `src` NULL or a valid `T`.
unsafe fn dup_attr<T>(slot: &mut *mut T, src: *const T, deep: impl FnOnce(&mut T, &T) -> Result<(), ()>) -> Result<(), ()> {
    // SAFETY: per the contract.
    *slot = unsafe { dup_prefix(src, size_of::<T>()) }?;
    if slot.is_null() {
        return Ok(());
    }
    // SAFETY: *slot is our fresh copy of `src`, which is therefore non-NULL and valid.
    unsafe { deep(&mut **slot, &*src) }
}

/// # Safety
/// `p` NULL or `n` readable bytes.
unsafe fn dup_bytes(p: *const c_void, n: usize) -> Result<*mut c_void, ()> {
    if p.is_null() || n == 0 {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: per the contract.
    let d = c_memdup(unsafe { std::slice::from_raw_parts(p as *const u8, n) });
    if d.is_null() {
        Err(())
    } else {
        Ok(d)
    }
}

/// # Safety
/// `p` NULL or a C string.
unsafe fn dup_str(p: *const c_char) -> Result<*mut c_char, ()> {
    if p.is_null() {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: per the contract.
    let d = unsafe { libc::strdup(p) };
    if d.is_null() {
        Err(())
    } else {
        Ok(d)
    }
}

/// `fi_dupinfo(info)` for a current-layout info: a deep copy of the head only.
///
/// # Safety
/// `src` a valid fi_info.
unsafe fn dupinfo_deep(src: *const fi_info) -> *mut fi_info {
    // SAFETY: per the contract, every pointer is NULL or valid.
    unsafe {
        let s = &*src;
        let d = c_calloc::<fi_info>();
        if d.is_null() {
            return d;
        }
        *d = *s;
        let dd = &mut *d;
        dd.next = std::ptr::null_mut();
        dd.src_addr = std::ptr::null_mut();
        dd.dest_addr = std::ptr::null_mut();
        dd.tx_attr = std::ptr::null_mut();
        dd.rx_attr = std::ptr::null_mut();
        dd.ep_attr = std::ptr::null_mut();
        dd.domain_attr = std::ptr::null_mut();
        dd.fabric_attr = std::ptr::null_mut();
        dd.nic = std::ptr::null_mut();
        let ok = (|| -> Result<(), ()> {
            dd.src_addr = dup_bytes(s.src_addr, s.src_addrlen)?;
            dd.dest_addr = dup_bytes(s.dest_addr, s.dest_addrlen)?;
            dd.tx_attr = dup_prefix(s.tx_attr, size_of::<fi_tx_attr>())?;
            dd.rx_attr = dup_prefix(s.rx_attr, size_of::<fi_rx_attr>())?;
            dup_attr(&mut dd.ep_attr, s.ep_attr, |e, o| {
                e.auth_key = std::ptr::null_mut();
                e.auth_key = dup_bytes(o.auth_key as *const c_void, o.auth_key_size)? as *mut u8;
                Ok(())
            })?;
            // Today's layout is libfabric 2.5's (fi_domain_attr_ext).
            let mut dom: *mut fi_domain_attr_ext = std::ptr::null_mut();
            let r = dup_attr(&mut dom, s.domain_attr as *const fi_domain_attr_ext, |x, o| {
                (x.base.name, x.base.auth_key) = (std::ptr::null_mut(), std::ptr::null_mut());
                x.base.name = dup_str(o.base.name)?;
                x.base.auth_key = dup_bytes(o.base.auth_key as *const c_void, o.base.auth_key_size)? as *mut u8;
                Ok(())
            });
            dd.domain_attr = dom as *mut fi_domain_attr;
            r?;
            dup_attr(&mut dd.fabric_attr, s.fabric_attr, |x, o| {
                (x.name, x.prov_name) = (std::ptr::null_mut(), std::ptr::null_mut());
                x.name = dup_str(o.name)?;
                x.prov_name = dup_str(o.prov_name)?;
                Ok(())
            })?;
            if !s.nic.is_null() {
                // As libfabric: the nic duplicates itself (fi_control(FI_DUP)).
                let nic = s.nic as *mut fid;
                let ops = (*nic).ops;
                let ctl = if ops.is_null() { None } else { (*ops).control };
                let Some(ctl) = ctl else { return Err(()) };
                let mut out: *mut fid_nic = std::ptr::null_mut();
                if ctl(nic, FI_DUP, &mut out as *mut *mut fid_nic as *mut c_void) != 0 {
                    return Err(());
                }
                dd.nic = out;
            }
            Ok(())
        })();
        if ok.is_err() {
            free_one(d);
            tracing::warn!("fi_dupinfo: out of memory");
            return std::ptr::null_mut();
        }
        super::embed::note_infos(1, 0);
        d
    }
}

/// Frees one info (not its `next`), closing its nic as libfabric does.
///
/// # Safety
/// `p` an info of C-heap pieces, not used afterwards.
unsafe fn free_one(p: *mut fi_info) {
    // SAFETY: per the contract.
    unsafe {
        let nic = (*p).nic;
        if !nic.is_null() {
            let f = nic as *mut fid;
            if !(*f).ops.is_null() {
                if let Some(close) = (*(*f).ops).close {
                    close(f);
                }
            }
            (*p).nic = std::ptr::null_mut();
        }
        (*p).next = std::ptr::null_mut();
        super::info::free_chain(p);
    }
}

/// The struct sizes of an old fi_info ABI (each struct is a prefix of today's).
#[derive(Clone, Copy)]
struct OldAbi {
    info: usize,
    tx: usize,
    ep: usize,
    domain: usize,
    fabric: usize,
}

const ABI_1_0: OldAbi = OldAbi {
    info: offset_of!(fi_info, nic),
    tx: offset_of!(fi_tx_attr, tclass),
    ep: offset_of!(fi_ep_attr, auth_key_size),
    domain: offset_of!(fi_domain_attr, cntr_cnt),
    fabric: offset_of!(fi_fabric_attr, api_version),
};
const ABI_1_1: OldAbi = OldAbi {
    info: offset_of!(fi_info, nic),
    tx: offset_of!(fi_tx_attr, tclass),
    ep: size_of::<fi_ep_attr>(),
    domain: offset_of!(fi_domain_attr, tclass),
    fabric: size_of::<fi_fabric_attr>(),
};
const ABI_1_2: OldAbi = OldAbi { info: size_of::<fi_info>(), ..ABI_1_1 };
/// FABRIC_1.3: libfabric 1.5 to 1.19 (Debian 12's 1.17): `fi_domain_attr` ends at `tclass`.
const ABI_1_3: OldAbi = OldAbi {
    info: size_of::<fi_info>(),
    tx: size_of::<fi_tx_attr>(),
    ep: size_of::<fi_ep_attr>(),
    domain: domain_attr_size(FI_VERSION(1, 17)),
    fabric: size_of::<fi_fabric_attr>(),
};
/// FABRIC_1.7: libfabric 1.20 to 1.22 (`max_ep_auth_key`).
const ABI_1_7: OldAbi = OldAbi { domain: domain_attr_size(FI_VERSION(1, 20)), ..ABI_1_3 };
/// FABRIC_1.8: libfabric 2.0 to 2.4 (`max_group_id`). Today's, FABRIC_1.9, is 2.5's.
const ABI_1_8: OldAbi = OldAbi { domain: domain_attr_size(FI_VERSION(2, 0)), ..ABI_1_3 };

/// A current-layout shell around an old-layout info: the structs are copied
/// (new fields zeroed), strings and addresses are borrowed. Free with `free_shell`.
///
/// # Safety
/// `old` a valid info of the `abi` layout.
unsafe fn upgrade_shell(old: *const c_void, abi: OldAbi) -> Option<*mut fi_info> {
    // SAFETY: per the contract: every struct is at least as long as `abi` says.
    unsafe {
        let n = dup_prefix(old as *const fi_info, abi.info).ok()?;
        let i = &mut *n;
        i.next = std::ptr::null_mut();
        if abi.info <= offset_of!(fi_info, nic) {
            i.nic = std::ptr::null_mut();
        }
        let r = (|| -> Result<(), ()> {
            i.tx_attr = dup_prefix(i.tx_attr, abi.tx)?;
            i.rx_attr = dup_prefix(i.rx_attr, size_of::<fi_rx_attr>())?;
            i.ep_attr = dup_prefix(i.ep_attr, abi.ep)?;
            i.domain_attr = dup_prefix(i.domain_attr as *const fi_domain_attr_ext, abi.domain)? as *mut fi_domain_attr;
            i.fabric_attr = dup_prefix(i.fabric_attr, abi.fabric)?;
            Ok(())
        })();
        if r.is_err() {
            free_shell(n);
            return None;
        }
        Some(n)
    }
}

/// # Safety
/// `p` from `upgrade_shell`.
unsafe fn free_shell(p: *mut fi_info) {
    // SAFETY: per the contract: the shells are ours, their contents borrowed.
    unsafe {
        let i = &*p;
        for q in [i.tx_attr as *mut c_void, i.rx_attr as _, i.ep_attr as _, i.domain_attr as _, i.fabric_attr as _] {
            libc::free(q);
        }
        libc::free(p as *mut c_void);
    }
}

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

// ---- logging -------------------------------------------------------------------------

/// libfabric's log levels (`enum fi_log_level`) in rank order; rsverbs' FI_LOG_LEVEL maps onto them.
fn level_enabled(level: u32) -> bool {
    use tracing::Level;
    let Some(l) = crate::log::effective_level(std::env::var("FI_LOG_LEVEL").ok().as_deref()) else { return false };
    let rank = match l {
        Level::ERROR | Level::WARN => FI_LOG_WARN,
        Level::INFO => FI_LOG_INFO,
        Level::DEBUG | Level::TRACE => FI_LOG_DEBUG,
    };
    level < FI_LOG_MAX && level <= rank
}

unsafe extern "C" fn core_log_enabled(_prov: *const fi_provider, level: fi_log_level, _subsys: fi_log_subsys) -> c_int {
    std::panic::catch_unwind(|| level_enabled(level) as c_int).unwrap_or(0)
}

unsafe extern "C" fn core_log_ready(_prov: *const fi_provider, level: fi_log_level, _subsys: fi_log_subsys, showtime: *mut u64) -> c_int {
    std::panic::catch_unwind(|| {
        if !showtime.is_null() {
            // SAFETY: a caller's u64.
            unsafe { *showtime = 0 };
        }
        level_enabled(level) as c_int
    })
    .unwrap_or(0)
}

const LEVELS: [&str; 4] = ["warn", "trace", "info", "debug"];
const SUBSYS: [&str; 10] = ["core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr"];

/// The formatted `fi_log` line from capi/c/varargs.c.
///
/// # Safety
/// Pointers NULL or valid C strings / provider.
#[no_mangle]
pub unsafe extern "C" fn rsverbs_core_log(prov: *const fi_provider, level: c_int, subsys: c_int, func: *const c_char, line: c_int, msg: *const c_char) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: per the contract.
        let (pname, func, msg) = unsafe {
            let pname = if prov.is_null() { None } else { cstr_opt((*prov).name) };
            (pname, cstr_opt(func), cstr_opt(msg))
        };
        let lvl = LEVELS.get(level as usize).copied().unwrap_or("?");
        let sub = SUBSYS.get(subsys as usize).copied().unwrap_or("?");
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        eprint!(
            "libfabric:{}:{secs}:{}:{sub}:{}():{line}<{lvl}> {}",
            std::process::id(),
            pname.unwrap_or_else(|| "core".into()),
            func.unwrap_or_default(),
            msg.unwrap_or_default()
        );
    });
}

// ---- parameters ------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Param {
    env: String,
    type_: fi_param_type,
    help: String,
}

/// Defined parameters by environment variable name. rsverbs' own knobs are
/// defined up front (as its provider would have defined them in a core).
static PARAMS: Mutex<Option<BTreeMap<String, Param>>> = Mutex::new(None);

fn env_name(prov: Option<&str>, name: &str) -> String {
    match prov {
        Some(p) => format!("FI_{}_{}", p.to_ascii_uppercase().replace(';', "_"), name.to_ascii_uppercase()),
        None => format!("FI_{}", name.to_ascii_uppercase()),
    }
}

fn with_params<R>(f: impl FnOnce(&mut BTreeMap<String, Param>) -> R) -> R {
    let mut g = PARAMS.lock();
    let m = g.get_or_insert_with(|| {
        let mut m = BTreeMap::new();
        let own: &[(Option<&str>, &str, fi_param_type, &str)] = &[
            (None, "provider", FI_PARAM_STRING, "Only use specified provider (default: all available)"),
            (None, "log_level", FI_PARAM_STRING, "Specify logging level: warn, info, debug, trace (default: warn)"),
            (Some("verbs"), "iface", FI_PARAM_STRING, "Only use IP addresses of interfaces whose name starts with this"),
            (Some("verbs"), "device_name", FI_PARAM_STRING, "Only use RDMA devices whose name starts with this"),
            (Some("verbs"), "tx_size", FI_PARAM_SIZE_T, "Default transmit queue depth (384)"),
            (Some("verbs"), "rx_size", FI_PARAM_SIZE_T, "Default receive queue depth (384)"),
            (Some("verbs"), "inline_size", FI_PARAM_SIZE_T, "Largest inject/inline size offered (default: the device's)"),
            (Some("verbs"), "tx_iov_limit", FI_PARAM_SIZE_T, "Default transmit iov limit (4)"),
            (Some("verbs"), "rx_iov_limit", FI_PARAM_SIZE_T, "Default receive iov limit (4)"),
            (Some("verbs"), "gid_idx", FI_PARAM_INT, "GID index naming the fabric (0)"),
            (Some("verbs"), "cqread_bunch_size", FI_PARAM_SIZE_T, "Completions polled from verbs per batch (8)"),
            (Some("rsverbs"), "name", FI_PARAM_STRING, "Provider name rsverbs registers (verbs)"),
            (Some("rsverbs"), "eager_size", FI_PARAM_SIZE_T, "RDM: largest message sent eagerly (16384)"),
            (Some("rsverbs"), "peer_credits", FI_PARAM_SIZE_T, "RDM: receive buffers an endpoint posts per peer (32)"),
        ];
        for &(p, n, t, h) in own {
            let env = env_name(p, n);
            m.insert(env.clone(), Param { env, type_: t, help: h.to_string() });
        }
        m
    });
    f(m)
}

/// The provider name fi_param_* use: NULL means the core ("FI_<NAME>").
///
/// # Safety
/// `prov` NULL or a valid provider.
unsafe fn param_prov(prov: *const fi_provider) -> Option<String> {
    if prov.is_null() {
        None
    } else {
        // SAFETY: per the contract.
        unsafe { cstr_opt((*prov).name) }
    }
}

/// `fi_param_define` after capi/c/varargs.c formatted the help text.
///
/// # Safety
/// Pointers NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rsverbs_core_param_define(prov: *const fi_provider, name: *const c_char, type_: c_int, help: *const c_char) -> c_int {
    guard("fi_param_define", || {
        // SAFETY: per the contract.
        let (p, n, h) = unsafe { (param_prov(prov), cstr_opt(name), cstr_opt(help)) };
        let Some(n) = n else { return crate::fail!(FiError::INVAL, "fi_param_define: name is NULL") };
        if !(FI_PARAM_STRING as c_int..=FI_PARAM_SIZE_T as c_int).contains(&type_) {
            return crate::fail!(FiError::INVAL, "fi_param_define: type {type_} unknown");
        }
        let env = env_name(p.as_deref(), &n);
        with_params(|m| {
            if m.contains_key(&env) {
                tracing::info!("fi_param_define: {env} already defined");
                return Err(FiError::ALREADY);
            }
            m.insert(env.clone(), Param { env, type_: type_ as fi_param_type, help: h.unwrap_or_default() });
            Ok(0)
        })
    })
}

/// `fi_parse_bool`: libfabric's accepted spellings.
fn parse_bool(s: &str) -> Option<c_int> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Some(1),
        "0" | "false" | "no" | "off" | "n" => Some(0),
        _ => None,
    }
}

unsafe extern "C" fn core_param_get(prov: *mut fi_provider, name: *const c_char, value: *mut c_void) -> c_int {
    guard("fi_param_get", || {
        // SAFETY: per fi_param_get's contract.
        let (p, n) = unsafe { (param_prov(prov), cstr_opt(name)) };
        let Some(n) = n else { return crate::fail!(FiError::INVAL, "fi_param_get: name is NULL") };
        let value = nonnull(value, "fi_param_get: value")?;
        let env = env_name(p.as_deref(), &n);
        let Some(param) = with_params(|m| m.get(&env).cloned()) else {
            tracing::info!("fi_param_get: {env} is not defined");
            return Err(FiError::NOENT);
        };
        let Ok(cenv) = CString::new(param.env.clone()) else { return Err(FiError::INVAL) };
        // SAFETY: getenv with a C string; the result points into the environment.
        let raw = unsafe { libc::getenv(cenv.as_ptr()) };
        if raw.is_null() {
            return Err(FiError::NODATA);
        }
        // SAFETY: getenv returned a C string.
        let s = unsafe { CStr::from_ptr(raw) }.to_string_lossy().into_owned();
        let num = |s: &str| -> i64 {
            let t = s.trim();
            let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) { (h, 16) } else { (t, 10) };
            i64::from_str_radix(digits, radix).unwrap_or(0)
        };
        // SAFETY: `value` points to the type the parameter was defined with (fi_param(3)).
        unsafe {
            match param.type_ {
                FI_PARAM_STRING => *(value as *mut *const c_char) = raw,
                FI_PARAM_INT => *(value as *mut c_int) = num(&s) as c_int,
                FI_PARAM_BOOL => match parse_bool(&s) {
                    Some(b) => *(value as *mut c_int) = b,
                    None => return crate::fail!(FiError::INVAL, "fi_param_get: {env}={s} is not a boolean"),
                },
                _ => *(value as *mut usize) = num(&s) as usize,
            }
        }
        Ok(0)
    })
}

unsafe extern "C" fn core_getparams(params: *mut *mut fi_param, count: *mut c_int) -> c_int {
    guard("fi_getparams", || {
        let params = nonnull(params, "fi_getparams: params")?;
        let count = nonnull(count, "fi_getparams: count")?;
        let list: Vec<Param> = with_params(|m| m.values().cloned().collect());
        // One extra zeroed entry ends the array, as in libfabric.
        // SAFETY: calloc of list.len()+1 entries (all-zero fi_param is valid).
        let arr = unsafe { libc::calloc(list.len() + 1, size_of::<fi_param>()) } as *mut fi_param;
        if arr.is_null() {
            return crate::fail!(FiError::NOMEM, "fi_getparams: out of memory");
        }
        for (i, p) in list.iter().enumerate() {
            let value = std::env::var(&p.env).ok();
            // SAFETY: i < list.len(), inside the array.
            unsafe {
                *arr.add(i) = fi_param {
                    name: c_strdup(&p.env),
                    type_: p.type_,
                    help_string: c_strdup(&p.help),
                    value: value.as_deref().map_or(std::ptr::null(), |v| c_strdup(v) as *const c_char),
                };
            }
        }
        // SAFETY: checked non-NULL.
        unsafe {
            *params = arr;
            *count = list.len() as c_int;
        }
        Ok(0)
    })
}

unsafe extern "C" fn core_freeparams(params: *mut fi_param) {
    if params.is_null() {
        return;
    }
    let mut i = 0;
    // SAFETY: an array from core_getparams, ended by an entry with a NULL name.
    unsafe {
        loop {
            let p = &*params.add(i);
            if p.name.is_null() {
                break;
            }
            libc::free(p.name as *mut c_void);
            libc::free(p.help_string as *mut c_void);
            libc::free(p.value as *mut c_void);
            i += 1;
        }
        libc::free(params as *mut c_void);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prov_names() {
        assert_eq!(classify_prov_name(None, "verbs"), ProvRequest::Ours);
        assert_eq!(classify_prov_name(Some("VERBS"), "verbs"), ProvRequest::Ours);
        assert_eq!(classify_prov_name(Some("verbs;ofi_rxm"), "verbs"), ProvRequest::OursRxm);
        assert_eq!(classify_prov_name(Some("verbs;ofi_rxd"), "verbs"), ProvRequest::Other);
        assert_eq!(classify_prov_name(Some("tcp"), "verbs"), ProvRequest::Other);
        assert_eq!(classify_prov_name(Some("tcp;ofi_rxm"), "verbs"), ProvRequest::Other);
    }

    #[test]
    fn fi_provider_filter() {
        assert!(provider_filter_allows(None, "verbs"));
        assert!(provider_filter_allows(Some(""), "verbs"));
        assert!(provider_filter_allows(Some("verbs"), "verbs"));
        assert!(provider_filter_allows(Some("tcp,verbs"), "verbs"));
        assert!(provider_filter_allows(Some("verbs;ofi_rxm"), "verbs"));
        assert!(!provider_filter_allows(Some("tcp"), "verbs"));
        assert!(!provider_filter_allows(Some("^verbs"), "verbs"));
        assert!(provider_filter_allows(Some("^tcp,udp"), "verbs"));
    }

    #[test]
    fn param_env_names() {
        assert_eq!(env_name(Some("verbs"), "iface"), "FI_VERBS_IFACE");
        assert_eq!(env_name(None, "log_level"), "FI_LOG_LEVEL");
    }

    #[test]
    fn old_abi_sizes_are_prefixes() {
        assert_eq!(ABI_1_0.tx, 72);
        assert_eq!(ABI_1_0.fabric, 28);
        assert!(ABI_1_0.domain < ABI_1_1.domain && ABI_1_1.domain < size_of::<fi_domain_attr>());
        assert_eq!(ABI_1_2.info, size_of::<fi_info>());
    }

    #[test]
    fn strerror_texts() {
        // SAFETY: fi_strerror returns C strings.
        let s = |e| unsafe { CStr::from_ptr(core_strerror(e)) }.to_str().unwrap().to_string();
        assert_eq!(s(-FI_ETRUNC), "Truncation error");
        assert_eq!(s(FI_EOTHER), "Unspecified error");
        assert_eq!(s(9999), "Unspecified error");
        assert_eq!(s(-22), "Invalid argument");
    }
}
