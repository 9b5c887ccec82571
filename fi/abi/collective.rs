//! `fi_collective.h`: AV sets and collective ops.

use super::*;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_av_set {
    pub size: usize,
    pub set_union:
        Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub intersect:
        Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub diff: Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub insert: Option<unsafe extern "C" fn(set: *mut fid_av_set, addr: fi_addr_t) -> c_int>,
    pub remove: Option<unsafe extern "C" fn(set: *mut fid_av_set, addr: fi_addr_t) -> c_int>,
    pub addr:
        Option<unsafe extern "C" fn(set: *mut fid_av_set, coll_addr: *mut fi_addr_t) -> c_int>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_av_set {
    pub fid: fid,
    pub ops: *mut fi_ops_av_set,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_collective_attr {
    pub op: fi_op,
    pub datatype: fi_datatype,
    pub datatype_attr: fi_atomic_attr,
    pub max_members: usize,
    pub mode: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_collective_addr {
    pub set: *const fid_av_set,
    pub coll_addr: fi_addr_t,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_collective {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub coll_addr: fi_addr_t,
    pub root_addr: fi_addr_t,
    pub coll: fi_collective_op,
    pub datatype: fi_datatype,
    pub op: fi_op,
    pub context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_collective {
    pub size: usize,
    pub barrier: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, coll_addr: fi_addr_t, context: *mut c_void) -> isize,
    >,
    pub broadcast: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            count: usize,
            desc: *mut c_void,
            coll_addr: fi_addr_t,
            root_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub alltoall: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub allreduce: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            datatype: fi_datatype,
            op: fi_op,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub allgather: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub reduce_scatter: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            datatype: fi_datatype,
            op: fi_op,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub reduce: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            root_addr: fi_addr_t,
            datatype: fi_datatype,
            op: fi_op,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub scatter: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            root_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub gather: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            root_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub msg: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            msg: *const fi_msg_collective,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            flags: u64,
        ) -> isize,
    >,
    pub barrier2: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            coll_addr: fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
}
