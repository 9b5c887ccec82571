//! Ops tables for operation classes an endpoint does not offer. libfabric's
//! inline wrappers call through these pointers unconditionally, so they must
//! never be NULL: every entry logs and returns `-FI_ENOSYS`.

use std::ffi::{c_int, c_void};

use crate::fi::abi::*;
use crate::error::FiError;

macro_rules! nosys {
    ($what:literal, $name:ident, ($($arg:ident : $ty:ty),*) -> $ret:ty) => {
        unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            $(let _ = $arg;)*
            tracing::info!(concat!($what, ": not supported on this endpoint"));
            FiError::NOSYS.neg() as $ret
        }
    };
}

nosys!("fi_atomic", at_write, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, a: fi_addr_t, ad: u64, k: u64, t: fi_datatype, o: fi_op, c: *mut c_void) -> isize);
nosys!("fi_atomicv", at_writev, (e: *mut fid_ep, v: *const fi_ioc, d: *mut *mut c_void, n: usize, a: fi_addr_t, ad: u64, k: u64, t: fi_datatype, o: fi_op, c: *mut c_void) -> isize);
nosys!("fi_atomicmsg", at_writemsg, (e: *mut fid_ep, m: *const fi_msg_atomic, f: u64) -> isize);
nosys!("fi_inject_atomic", at_inject, (e: *mut fid_ep, b: *const c_void, n: usize, a: fi_addr_t, ad: u64, k: u64, t: fi_datatype, o: fi_op) -> isize);
nosys!("fi_fetch_atomic", at_readwrite, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, ad: u64, k: u64, t: fi_datatype, o: fi_op, c: *mut c_void) -> isize);
nosys!("fi_fetch_atomicv", at_readwritev, (e: *mut fid_ep, v: *const fi_ioc, d: *mut *mut c_void, n: usize, r: *mut fi_ioc, rd: *mut *mut c_void, rn: usize, a: fi_addr_t, ad: u64, k: u64, t: fi_datatype, o: fi_op, c: *mut c_void) -> isize);
nosys!("fi_fetch_atomicmsg", at_readwritemsg, (e: *mut fid_ep, m: *const fi_msg_atomic, r: *mut fi_ioc, rd: *mut *mut c_void, rn: usize, f: u64) -> isize);
nosys!("fi_compare_atomic", at_compwrite, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, cmp: *const c_void, cd: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, ad: u64, k: u64, t: fi_datatype, o: fi_op, c: *mut c_void) -> isize);
nosys!("fi_compare_atomicv", at_compwritev, (e: *mut fid_ep, v: *const fi_ioc, d: *mut *mut c_void, n: usize, cv: *const fi_ioc, cd: *mut *mut c_void, cn: usize, r: *mut fi_ioc, rd: *mut *mut c_void, rn: usize, a: fi_addr_t, ad: u64, k: u64, t: fi_datatype, o: fi_op, c: *mut c_void) -> isize);
nosys!("fi_compare_atomicmsg", at_compwritemsg, (e: *mut fid_ep, m: *const fi_msg_atomic, cv: *const fi_ioc, cd: *mut *mut c_void, cn: usize, r: *mut fi_ioc, rd: *mut *mut c_void, rn: usize, f: u64) -> isize);
nosys!("fi_atomicvalid", at_writevalid, (e: *mut fid_ep, t: fi_datatype, o: fi_op, n: *mut usize) -> c_int);
nosys!("fi_fetch_atomicvalid", at_readwritevalid, (e: *mut fid_ep, t: fi_datatype, o: fi_op, n: *mut usize) -> c_int);
nosys!("fi_compare_atomicvalid", at_compwritevalid, (e: *mut fid_ep, t: fi_datatype, o: fi_op, n: *mut usize) -> c_int);

/// Atomics: not offered on MSG endpoints.
pub static ATOMIC_NOSYS: fi_ops_atomic = fi_ops_atomic {
    size: std::mem::size_of::<fi_ops_atomic>(),
    write: Some(at_write),
    writev: Some(at_writev),
    writemsg: Some(at_writemsg),
    inject: Some(at_inject),
    readwrite: Some(at_readwrite),
    readwritev: Some(at_readwritev),
    readwritemsg: Some(at_readwritemsg),
    compwrite: Some(at_compwrite),
    compwritev: Some(at_compwritev),
    compwritemsg: Some(at_compwritemsg),
    writevalid: Some(at_writevalid),
    readwritevalid: Some(at_readwritevalid),
    compwritevalid: Some(at_compwritevalid),
};

nosys!("fi_barrier", co_barrier, (e: *mut fid_ep, a: fi_addr_t, c: *mut c_void) -> isize);
nosys!("fi_broadcast", co_broadcast, (e: *mut fid_ep, b: *mut c_void, n: usize, d: *mut c_void, a: fi_addr_t, r: fi_addr_t, t: fi_datatype, f: u64, c: *mut c_void) -> isize);
nosys!("fi_alltoall", co_alltoall, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, t: fi_datatype, f: u64, c: *mut c_void) -> isize);
nosys!("fi_allreduce", co_allreduce, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, t: fi_datatype, o: fi_op, f: u64, c: *mut c_void) -> isize);
nosys!("fi_allgather", co_allgather, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, t: fi_datatype, f: u64, c: *mut c_void) -> isize);
nosys!("fi_reduce_scatter", co_reduce_scatter, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, t: fi_datatype, o: fi_op, f: u64, c: *mut c_void) -> isize);
nosys!("fi_reduce", co_reduce, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, ra: fi_addr_t, t: fi_datatype, o: fi_op, f: u64, c: *mut c_void) -> isize);
nosys!("fi_scatter", co_scatter, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, ra: fi_addr_t, t: fi_datatype, f: u64, c: *mut c_void) -> isize);
nosys!("fi_gather", co_gather, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, r: *mut c_void, rd: *mut c_void, a: fi_addr_t, ra: fi_addr_t, t: fi_datatype, f: u64, c: *mut c_void) -> isize);
nosys!("fi_collective_msg", co_msg, (e: *mut fid_ep, m: *const fi_msg_collective, r: *mut fi_ioc, rd: *mut *mut c_void, rn: usize, f: u64) -> isize);
nosys!("fi_barrier2", co_barrier2, (e: *mut fid_ep, a: fi_addr_t, f: u64, c: *mut c_void) -> isize);

/// Collectives: not offered.
pub static COLLECTIVE_NOSYS: fi_ops_collective = fi_ops_collective {
    size: std::mem::size_of::<fi_ops_collective>(),
    barrier: Some(co_barrier),
    broadcast: Some(co_broadcast),
    alltoall: Some(co_alltoall),
    allreduce: Some(co_allreduce),
    allgather: Some(co_allgather),
    reduce_scatter: Some(co_reduce_scatter),
    reduce: Some(co_reduce),
    scatter: Some(co_scatter),
    gather: Some(co_gather),
    msg: Some(co_msg),
    barrier2: Some(co_barrier2),
};

nosys!("fi_read", rma_read, (e: *mut fid_ep, b: *mut c_void, n: usize, d: *mut c_void, s: fi_addr_t, ad: u64, k: u64, c: *mut c_void) -> isize);
nosys!("fi_readv", rma_readv, (e: *mut fid_ep, v: *const libc::iovec, d: *mut *mut c_void, n: usize, s: fi_addr_t, ad: u64, k: u64, c: *mut c_void) -> isize);
nosys!("fi_readmsg", rma_readmsg, (e: *mut fid_ep, m: *const fi_msg_rma, f: u64) -> isize);
nosys!("fi_write", rma_write, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, s: fi_addr_t, ad: u64, k: u64, c: *mut c_void) -> isize);
nosys!("fi_writev", rma_writev, (e: *mut fid_ep, v: *const libc::iovec, d: *mut *mut c_void, n: usize, s: fi_addr_t, ad: u64, k: u64, c: *mut c_void) -> isize);
nosys!("fi_writemsg", rma_writemsg, (e: *mut fid_ep, m: *const fi_msg_rma, f: u64) -> isize);
nosys!("fi_inject_write", rma_inject, (e: *mut fid_ep, b: *const c_void, n: usize, s: fi_addr_t, ad: u64, k: u64) -> isize);
nosys!("fi_writedata", rma_writedata, (e: *mut fid_ep, b: *const c_void, n: usize, d: *mut c_void, x: u64, s: fi_addr_t, ad: u64, k: u64, c: *mut c_void) -> isize);
nosys!("fi_inject_writedata", rma_injectdata, (e: *mut fid_ep, b: *const c_void, n: usize, x: u64, s: fi_addr_t, ad: u64, k: u64) -> isize);

/// RMA: not offered on DGRAM endpoints.
pub static RMA_NOSYS: fi_ops_rma = fi_ops_rma {
    size: std::mem::size_of::<fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_readv),
    readmsg: Some(rma_readmsg),
    write: Some(rma_write),
    writev: Some(rma_writev),
    writemsg: Some(rma_writemsg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
};
