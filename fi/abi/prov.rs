//! `providers/fi_prov.h` and the parts of `fi_ext.h` a core provider may meet (`fi_export_fid()`, the logging import).

use super::*;

/// What `fi_prov_ini()` returns. `version` is the provider's version, `fi_version` the libfabric
/// API version it was written for (`FI_VERSION(1, 17)`); `context` belongs to libfabric.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_provider {
    pub version: u32,
    pub fi_version: u32,
    pub context: fi_context,
    pub name: *const c_char,
    pub getinfo: Option<
        unsafe extern "C" fn(
            version: u32,
            node: *const c_char,
            service: *const c_char,
            flags: u64,
            hints: *const fi_info,
            info: *mut *mut fi_info,
        ) -> c_int,
    >,
    pub fabric: Option<
        unsafe extern "C" fn(
            attr: *mut fi_fabric_attr,
            fabric: *mut *mut fid_fabric,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cleanup: Option<unsafe extern "C" fn()>,
}

// ---------------------------------------------------------------------------------------------
// fi_ext.h (only the parts a core provider may meet: fi_export_fid() and the logging import)
// ---------------------------------------------------------------------------------------------

/// Argument of `fi_control(FI_EXPORT_FID)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fid_export {
    pub fid: *mut *mut fid,
    pub flags: u64,
    pub context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_log {
    pub size: usize,
    pub enabled: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: fi_log_level,
            subsys: fi_log_subsys,
            flags: u64,
        ) -> c_int,
    >,
    pub ready: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: fi_log_level,
            subsys: fi_log_subsys,
            flags: u64,
            showtime: *mut u64,
        ) -> c_int,
    >,
    pub log: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: fi_log_level,
            subsys: fi_log_subsys,
            func: *const c_char,
            line: c_int,
            msg: *const c_char,
        ),
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_logging {
    pub fid: fid,
    pub ops: *mut fi_ops_log,
}
