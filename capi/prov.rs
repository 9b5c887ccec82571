//! The provider entry point (`fi_prov_ini`), the `fi_provider` struct, and
//! fabric objects.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Arc;

use once_cell::sync::OnceCell;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::util::*;
use crate::error::{FiError, FiResult};
use crate::fabric::Fabric;
use crate::info::{self, Request, PROV_VERSION};

struct ProvPtr(*mut fi_provider);
// SAFETY: the provider struct is created once and then only read by us; the
// libfabric core writes its private `context` field under its own lock.
unsafe impl Send for ProvPtr {}
// SAFETY: as above.
unsafe impl Sync for ProvPtr {}

static PROVIDER: OnceCell<ProvPtr> = OnceCell::new();
static PROV_NAME: OnceCell<CString> = OnceCell::new();

/// The registered provider name (`verbs`, or `FI_RSVERBS_NAME`).
pub fn prov_name() -> &'static str {
    PROV_NAME
        .get_or_init(|| CString::new(crate::config::get().prov_name.clone()).unwrap_or_else(|_| CString::from(c"verbs")))
        .to_str()
        .unwrap_or("verbs")
}

/// The provider name as a C string (static storage).
pub fn provider_name_ptr() -> *const c_char {
    prov_name();
    PROV_NAME.get().map_or(c"verbs".as_ptr(), |c| c.as_ptr())
}

/// The provider struct libfabric receives (allocated once, never freed).
pub fn provider() -> *mut fi_provider {
    PROVIDER
        .get_or_init(|| {
            prov_name();
            let p = Box::new(fi_provider {
                version: PROV_VERSION,
                // The loading core's version (capi/version.rs): that core
                // hands rsverbs every application asking for it or less.
                fi_version: super::version::provider_fi_version(),
                context: fi_context { internal: [std::ptr::null_mut(); 4] },
                name: PROV_NAME.get().expect("initialised").as_ptr(),
                getinfo: Some(prov_getinfo),
                fabric: Some(prov_fabric),
                cleanup: Some(prov_cleanup),
            });
            ProvPtr(Box::into_raw(p))
        })
        .0
}

/// Entry point libfabric calls after `dlopen` of `librsverbs-fi.so`.
#[no_mangle]
pub extern "C" fn fi_prov_ini() -> *mut fi_provider {
    match std::panic::catch_unwind(|| {
        crate::log::init();
        super::embed::note_prov_ini();
        super::version::detect_core();
        tracing::info!("rsverbs {} registering as provider '{}'", env!("CARGO_PKG_VERSION"), prov_name());
        provider()
    }) {
        Ok(p) => p,
        Err(_) => std::ptr::null_mut(),
    }
}

// fi_getinfo flags the libfabric core itself adds when it calls a provider
// (libfabric's internal include/ofi.h, not installed, so not in consts.rs,
// whose constants the ABI test checks against the public headers): utility
// providers such as ofi_rxm ask their core provider with OFI_CORE_PROV_ONLY.
// They only steer the core's own provider selection; a provider ignores them.
const OFI_GETINFO_INTERNAL: u64 = 1 << 58;
const OFI_CORE_PROV_ONLY: u64 = 1 << 59;
const OFI_GETINFO_HIDDEN: u64 = 1 << 60;
const OFI_OFFLOAD_PROV_ONLY: u64 = 1 << 61;

/// Runs getinfo; `prov_name` is written into the results only when given.
///
/// # Safety
/// Arguments as for `fi_getinfo(3)`.
pub unsafe fn getinfo_common(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
    set_prov_name: bool,
) -> FiResult<c_int> {
    let info = nonnull(info, "fi_getinfo: info")?;
    // SAFETY: checked non-NULL.
    unsafe { *info = std::ptr::null_mut() };
    let core_internal = OFI_GETINFO_INTERNAL | OFI_CORE_PROV_ONLY | OFI_GETINFO_HIDDEN | OFI_OFFLOAD_PROV_ONLY;
    let known = FI_SOURCE | FI_NUMERICHOST | FI_PROV_ATTR_ONLY | FI_RMA_EVENT | core_internal;
    if flags & !known != 0 {
        return crate::fail!(FiError::BADFLAGS, "fi_getinfo: unknown flags {:#x}", flags & !known);
    }
    if flags & OFI_CORE_PROV_ONLY != 0 {
        tracing::info!("fi_getinfo: asked as the core provider of a utility provider (e.g. ofi_rxm)");
    }
    let req = Request {
        version,
        // SAFETY: NULL or C strings (fi_getinfo(3)).
        node: unsafe { cstr_opt(node) },
        // SAFETY: as above.
        service: unsafe { cstr_opt(service) },
        flags: flags & !core_internal,
        // SAFETY: hints is NULL or a valid fi_info.
        hints: if hints.is_null() { None } else { Some(unsafe { super::info::from_c(hints, version) }?) },
    };
    let list = info::getinfo(&req)?;
    let name = if set_prov_name { Some(prov_name()) } else { None };
    let chain = super::info::chain_to_c(&list, name)?;
    // SAFETY: checked non-NULL.
    unsafe { *info = chain };
    Ok(0)
}

unsafe extern "C" fn prov_getinfo(v: u32, n: *const c_char, s: *const c_char, f: u64, h: *const fi_info, i: *mut *mut fi_info) -> c_int {
    // SAFETY: the libfabric core passes fi_getinfo's arguments through.
    guard("getinfo", || unsafe { getinfo_common(v, n, s, f, h, i, false) })
}

unsafe extern "C" fn prov_cleanup() {}

// ---- fabric ----

#[repr(C)]
pub struct FabricObj {
    pub fid: fid_fabric,
    pub inner: Arc<Fabric>,
}

impl FiObject for FabricObj {
    const CLASS: usize = FI_CLASS_FABRIC;
    const NAME: &'static str = "fabric";
    fn fi_ops() -> *const fi_ops {
        &FABRIC_FI_OPS
    }
}

static FABRIC_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(fabric_close),
    bind: Some(bind_nosys),
    control: Some(control_nosys),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static FABRIC_OPS: fi_ops_fabric = fi_ops_fabric {
    size: std::mem::size_of::<fi_ops_fabric>(),
    domain: Some(super::domain::domain_open),
    passive_ep: Some(super::ep::pep_open),
    eq_open: Some(super::eq::eq_open),
    wait_open: Some(super::wait::wait_open),
    trywait: Some(fabric_trywait),
    domain2: Some(super::domain::domain_open2),
};

/// Opens a fabric object for `attr` (shared by the provider entry and drop-in `fi_fabric`).
///
/// # Safety
/// Arguments as for `fi_fabric(3)`.
pub unsafe fn fabric_common(attr: *mut fi_fabric_attr, out: *mut *mut fid_fabric, context: *mut c_void) -> FiResult<c_int> {
    let attr = nonnull(attr, "fi_fabric: attr")?;
    let out = nonnull(out, "fi_fabric: fabric")?;
    // SAFETY: checked non-NULL; name is NULL or a C string.
    let (name, api) = unsafe { (cstr_opt((*attr).name), (*attr).api_version) };
    let Some(name) = name else {
        return crate::fail!(FiError::INVAL, "fi_fabric: attr->name is NULL");
    };
    let fab = Fabric::open(&name, api)?;
    let obj = into_c(FabricObj {
        fid: fid_fabric {
            fid: fid { fclass: FI_CLASS_FABRIC, context, ops: &FABRIC_FI_OPS as *const _ as *mut _ },
            ops: &FABRIC_OPS as *const _ as *mut _,
            api_version: api,
        },
        inner: fab,
    });
    // SAFETY: checked non-NULL.
    unsafe { *out = obj as *mut fid_fabric };
    Ok(0)
}

unsafe extern "C" fn prov_fabric(attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int {
    // SAFETY: arguments from the libfabric core.
    guard("fi_fabric", || unsafe { fabric_common(attr, fabric, context) })
}

unsafe extern "C" fn fabric_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(fabric)", || unsafe { close_obj::<FabricObj>(f, |o| o.inner.refs.check_idle("fabric")) })
}

unsafe extern "C" fn fabric_trywait(fabric: *mut fid_fabric, fids: *mut *mut fid, count: c_int) -> c_int {
    guard("fi_trywait", || {
        // SAFETY: fabric is a fid per the API.
        unsafe { obj::<FabricObj>(fabric as *const fid) }?;
        if count < 0 || (count > 0 && fids.is_null()) {
            return crate::fail!(FiError::INVAL, "fi_trywait: bad fid array");
        }
        for i in 0..count as usize {
            // SAFETY: the caller passes `count` fid pointers.
            let f = unsafe { *fids.add(i) };
            // SAFETY: f is a fid per the API.
            match unsafe { class_of(f) }? {
                FI_CLASS_CQ => unsafe { obj::<super::cq::CqObj>(f) }?.inner.trywait()?,
                FI_CLASS_EQ => unsafe { obj::<super::eq::EqObj>(f) }?.inner.trywait()?,
                FI_CLASS_CNTR => unsafe { obj::<super::cntr::CntrObj>(f) }?.inner.trywait()?,
                FI_CLASS_WAIT => unsafe { obj::<super::wait::WaitObj>(f) }?.inner.trywait()?,
                c => return crate::fail!(FiError::INVAL, "fi_trywait: objects of class {c} have no wait object here"),
            }
        }
        Ok(0)
    })
}

// ---- shared "not supported" entries for fi_ops ----

pub unsafe extern "C" fn bind_nosys(_f: *mut fid, _b: *mut fid, _flags: u64) -> c_int {
    FiError::NOSYS.neg()
}
pub unsafe extern "C" fn control_nosys(_f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    tracing::info!("fi_control: command {command} not supported on this object");
    FiError::NOSYS.neg()
}
pub unsafe extern "C" fn ops_open_nosys(
    _f: *mut fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut *mut c_void,
    _ctx: *mut c_void,
) -> c_int {
    FiError::NOSYS.neg()
}
