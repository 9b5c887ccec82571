//! `fi_atomic.h`: atomic attributes, messages and ops.

use super::*;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_atomic_attr {
    pub count: usize,
    pub size: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_atomic {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_ioc,
    pub rma_iov_count: usize,
    pub datatype: fi_datatype,
    pub op: fi_op,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_fetch {
    pub msg_iov: *mut fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_compare {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_atomic {
    pub size: usize,
    pub write: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub writev: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const fi_ioc,
            desc: *mut *mut c_void,
            count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub writemsg: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_atomic, flags: u64) -> isize,
    >,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
        ) -> isize,
    >,
    pub readwrite: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub readwritev: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const fi_ioc,
            desc: *mut *mut c_void,
            count: usize,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub readwritemsg: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            msg: *const fi_msg_atomic,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            flags: u64,
        ) -> isize,
    >,
    pub compwrite: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            compare: *const c_void,
            compare_desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub compwritev: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const fi_ioc,
            desc: *mut *mut c_void,
            count: usize,
            comparev: *const fi_ioc,
            compare_desc: *mut *mut c_void,
            compare_count: usize,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub compwritemsg: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            msg: *const fi_msg_atomic,
            comparev: *const fi_ioc,
            compare_desc: *mut *mut c_void,
            compare_count: usize,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            flags: u64,
        ) -> isize,
    >,
    pub writevalid: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            datatype: fi_datatype,
            op: fi_op,
            count: *mut usize,
        ) -> c_int,
    >,
    pub readwritevalid: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            datatype: fi_datatype,
            op: fi_op,
            count: *mut usize,
        ) -> c_int,
    >,
    pub compwritevalid: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            datatype: fi_datatype,
            op: fi_op,
            count: *mut usize,
        ) -> c_int,
    >,
}
