//! `fi_eq.h`: wait sets, poll sets, event queues, completion queues and counters.

use super::*;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_wait_attr {
    pub wait_obj: fi_wait_obj,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_wait {
    pub size: usize,
    pub wait: Option<unsafe extern "C" fn(waitset: *mut fid_wait, timeout: c_int) -> c_int>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_wait {
    pub fid: fid,
    pub ops: *mut fi_ops_wait,
}

/// What `fi_control(FI_GETWAIT)` returns for `FI_WAIT_MUTEX_COND`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mutex_cond {
    pub mutex: *mut pthread_mutex_t,
    pub cond: *mut pthread_cond_t,
}

/// What `fi_control(FI_GETWAIT)` returns for `FI_WAIT_POLLFD`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_wait_pollfd {
    pub change_index: u64,
    pub nfds: usize,
    pub fd: *mut pollfd,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_poll_attr {
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_poll {
    pub size: usize,
    pub poll: Option<
        unsafe extern "C" fn(
            pollset: *mut fid_poll,
            context: *mut *mut c_void,
            count: c_int,
        ) -> c_int,
    >,
    pub poll_add: Option<
        unsafe extern "C" fn(pollset: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int,
    >,
    pub poll_del: Option<
        unsafe extern "C" fn(pollset: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_poll {
    pub fid: fid,
    pub ops: *mut fi_ops_poll,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_attr {
    pub size: usize,
    pub flags: u64,
    pub wait_obj: fi_wait_obj,
    pub signaling_vector: c_int,
    pub wait_set: *mut fid_wait,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_err_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
    pub err: c_int,
    pub prov_errno: c_int,
    /// Valid until the next read of the EQ.
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

/// `data` is a C flexible array member (`uint8_t data[]`): connection data follows the struct,
/// up to the buffer length the user passed to fi_eq_read().
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_cm_entry {
    pub fid: fid_t,
    /// The user must call fi_freeinfo() on it.
    pub info: *mut fi_info,
    pub data: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_eq {
    pub size: usize,
    pub read: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: *mut u32,
            buf: *mut c_void,
            len: usize,
            flags: u64,
        ) -> isize,
    >,
    pub readerr: Option<
        unsafe extern "C" fn(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> isize,
    >,
    pub write: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: u32,
            buf: *const c_void,
            len: usize,
            flags: u64,
        ) -> isize,
    >,
    pub sread: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: *mut u32,
            buf: *mut c_void,
            len: usize,
            timeout: c_int,
            flags: u64,
        ) -> isize,
    >,
    pub strerror: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: usize,
        ) -> *const c_char,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_eq {
    pub fid: fid,
    pub ops: *mut fi_ops_eq,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_entry {
    pub op_context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_msg_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_data_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_tagged_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
}

/// Note: libfabric 1.20 appended `fi_addr_t src_addr` (copied only for API versions >= 1.20);
/// the 1.17 struct ends with `err_data_size` (80 bytes), so a provider built for 1.17 must not
/// write past it. Applications asking for API < 1.5 use an even older, shorter layout (without
/// `err_data_size`): fi_cq_readerr() should honour `fid_fabric.api_version`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_err_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: c_int,
    pub prov_errno: c_int,
    /// Valid until the next read of the CQ.
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_attr {
    pub size: usize,
    pub flags: u64,
    pub format: fi_cq_format,
    pub wait_obj: fi_wait_obj,
    pub signaling_vector: c_int,
    pub wait_cond: fi_cq_wait_cond,
    pub wait_set: *mut fid_wait,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cq {
    pub size: usize,
    pub read:
        Option<unsafe extern "C" fn(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize>,
    pub readfrom: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            src_addr: *mut fi_addr_t,
        ) -> isize,
    >,
    pub readerr: Option<
        unsafe extern "C" fn(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, flags: u64) -> isize,
    >,
    pub sread: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            cond: *const c_void,
            timeout: c_int,
        ) -> isize,
    >,
    pub sreadfrom: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            src_addr: *mut fi_addr_t,
            cond: *const c_void,
            timeout: c_int,
        ) -> isize,
    >,
    pub signal: Option<unsafe extern "C" fn(cq: *mut fid_cq) -> c_int>,
    pub strerror: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: usize,
        ) -> *const c_char,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_cq {
    pub fid: fid,
    pub ops: *mut fi_ops_cq,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cntr_attr {
    pub events: fi_cntr_events,
    pub wait_obj: fi_wait_obj,
    pub wait_set: *mut fid_wait,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cntr {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(cntr: *mut fid_cntr) -> u64>,
    pub readerr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr) -> u64>,
    pub add: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub set: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub wait:
        Option<unsafe extern "C" fn(cntr: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int>,
    pub adderr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub seterr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_cntr {
    pub fid: fid,
    pub ops: *mut fi_ops_cntr,
}
