//! Atomics on RDM endpoints: what verbs does natively, nothing more.
//!
//! Supported: one 64-bit element (`FI_INT64`/`FI_UINT64`, count 1) with
//! `FI_SUM` (`fi_atomic`, `fi_inject_atomic`, `fi_fetch_atomic`),
//! `FI_ATOMIC_READ` (`fi_fetch_atomic`, as a fetch-add of 0) and `FI_CSWAP`
//! (`fi_compare_atomic`). Everything else is `-FI_EOPNOTSUPP`, which
//! `fi_atomicvalid` & co and `fi_query_atomic` report honestly.

use std::ffi::{c_int, c_void};

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::ep::bufs;
use super::rdm::ep;
use super::util::*;
use crate::error::{FiError, FiResult};
use crate::rdm::ep::{AtomicOp, AtomicReq};
use crate::verbs::Iov;

/// The three families of atomic calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Write,
    Fetch,
    Compare,
}

/// Whether (datatype, op) is supported for `family`.
pub fn supported(family: Family, datatype: u32, op: u32) -> bool {
    if datatype != FI_INT64 && datatype != FI_UINT64 {
        return false;
    }
    match family {
        Family::Write => op == FI_SUM,
        Family::Fetch => op == FI_SUM || op == FI_ATOMIC_READ,
        Family::Compare => op == FI_CSWAP,
    }
}

fn check(family: Family, datatype: u32, op: u32, count: usize) -> FiResult<()> {
    if !supported(family, datatype, op) {
        return crate::fail!(
            FiError::OPNOTSUPP,
            "{family:?} atomic: datatype {datatype} / op {op} not supported (64-bit FI_SUM, FI_ATOMIC_READ, FI_CSWAP only)"
        );
    }
    if count != 1 {
        return crate::fail!(FiError::OPNOTSUPP, "atomic: count {count}; one 64-bit element per operation is supported");
    }
    Ok(())
}

/// Reads the 64-bit operand at `p` (the application's buffer).
///
/// # Safety
/// `p` must be NULL or point to 8 readable bytes (fi_atomic(3): `count` elements).
unsafe fn operand(p: *const c_void, what: &str) -> FiResult<u64> {
    if p.is_null() {
        return crate::fail!(FiError::INVAL, "atomic: {what} buffer is NULL");
    }
    // SAFETY: per the contract.
    Ok(unsafe { (p as *const u64).read_unaligned() })
}

/// The result buffer as an Iov with its local key, and whether it had a
/// descriptor (the endpoint registers it otherwise, or refuses it under
/// `FI_MR_LOCAL`).
///
/// # Safety
/// `result` must be NULL or 8 writable bytes valid until the operation completes.
unsafe fn result_iov(result: *mut c_void, desc: *mut c_void) -> FiResult<(Iov, bool)> {
    let mut d = desc;
    // SAFETY: one buffer and one descriptor, per the contract.
    let b = unsafe { bufs::<1>(&[(result as u64, 8)], Some(&mut d)) }?;
    Ok((b.iov()[0], b.descs_ok))
}

#[allow(clippy::too_many_arguments)]
unsafe fn submit(
    e: *mut fid_ep,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    result: Option<(Iov, bool)>,
    op: AtomicOp,
    ctx: *mut c_void,
    flags: Option<u64>,
    inject: bool,
) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    let flags = flags.unwrap_or_else(|| o.inner.tx_op_flags());
    let result_keyed = result.is_none_or(|r| r.1);
    let result = result.map(|r| r.0);
    o.inner.atomic(AtomicReq { dest, raddr: addr, rkey: key, result, result_keyed, op, context: ctx as u64, flags, no_completion: inject })?;
    Ok(0)
}

/// One `fi_ioc` of exactly one element.
///
/// # Safety
/// `iov` must hold `count` entries.
unsafe fn one_ioc(iov: *const fi_ioc, count: usize, what: &str) -> FiResult<fi_ioc> {
    if count != 1 || iov.is_null() {
        return crate::fail!(FiError::OPNOTSUPP, "{what}: exactly one ioc is supported, got {count}");
    }
    // SAFETY: one entry per the contract.
    Ok(unsafe { *iov })
}

unsafe fn msg_target(m: &fi_msg_atomic) -> FiResult<fi_rma_ioc> {
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return crate::fail!(FiError::OPNOTSUPP, "atomic msg: exactly one remote ioc is supported, got {}", m.rma_iov_count);
    }
    // SAFETY: one entry per the contract.
    let r = unsafe { *m.rma_iov };
    if r.count != 1 {
        return crate::fail!(FiError::OPNOTSUPP, "atomic msg: remote count {} (one element supported)", r.count);
    }
    Ok(r)
}

const ATOMIC_FLAGS: u64 = FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MORE;

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_write(
    e: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_atomic", || {
        check(Family::Write, dt, op, count)?;
        // SAFETY: buf holds `count` (1) elements.
        let v = unsafe { operand(buf, "operand") }?;
        // SAFETY: arguments per fi_atomic(3).
        unsafe { submit(e, dest, addr, key, None, AtomicOp::FetchAdd(v), ctx, None, false) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_writev(
    e: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_atomicv", || {
        // SAFETY: iov holds `count` entries.
        let i = unsafe { one_ioc(iov, count, "fi_atomicv") }?;
        check(Family::Write, dt, op, i.count)?;
        // SAFETY: the ioc names `count` (1) elements.
        let v = unsafe { operand(i.addr, "operand") }?;
        // SAFETY: arguments per fi_atomic(3).
        unsafe { submit(e, dest, addr, key, None, AtomicOp::FetchAdd(v), ctx, None, false) }
    })
}

unsafe extern "C" fn at_writemsg(e: *mut fid_ep, msg: *const fi_msg_atomic, flags: u64) -> isize {
    guard_size("fi_atomicmsg", || {
        let msg = nonnull(msg as *mut fi_msg_atomic, "fi_atomicmsg: msg")?;
        if flags & !ATOMIC_FLAGS != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_atomicmsg: unsupported flags {:#x}", flags & !ATOMIC_FLAGS);
        }
        // SAFETY: checked non-NULL; valid per fi_atomic(3).
        let m = unsafe { &*msg };
        // SAFETY: as above.
        let i = unsafe { one_ioc(m.msg_iov, m.iov_count, "fi_atomicmsg") }?;
        check(Family::Write, m.datatype, m.op, i.count)?;
        // SAFETY: as above.
        let r = unsafe { msg_target(m) }?;
        // SAFETY: as above.
        let v = unsafe { operand(i.addr, "operand") }?;
        let inject = flags & FI_INJECT != 0 && flags & FI_COMPLETION == 0;
        // SAFETY: as above.
        unsafe { submit(e, m.addr, r.addr, r.key, None, AtomicOp::FetchAdd(v), m.context, Some(flags), inject) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_inject(
    e: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
) -> isize {
    guard_size("fi_inject_atomic", || {
        check(Family::Write, dt, op, count)?;
        // SAFETY: buf holds `count` (1) elements, read now.
        let v = unsafe { operand(buf, "operand") }?;
        // SAFETY: arguments per fi_atomic(3).
        unsafe { submit(e, dest, addr, key, None, AtomicOp::FetchAdd(v), std::ptr::null_mut(), Some(FI_INJECT), true) }
    })
}

/// The fetch operand: FI_ATOMIC_READ takes none (a fetch-add of 0).
unsafe fn fetch_op(op: u32, buf: *const c_void) -> FiResult<AtomicOp> {
    if op == FI_ATOMIC_READ {
        return Ok(AtomicOp::FetchAdd(0));
    }
    // SAFETY: buf holds one element per fi_atomic(3).
    Ok(AtomicOp::FetchAdd(unsafe { operand(buf, "operand") }?))
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_readwrite(
    e: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    result: *mut c_void,
    result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_fetch_atomic", || {
        check(Family::Fetch, dt, op, count)?;
        // SAFETY: per fi_atomic(3).
        let a = unsafe { fetch_op(op, buf) }?;
        // SAFETY: as above.
        let res = unsafe { result_iov(result, result_desc) }?;
        // SAFETY: as above.
        unsafe { submit(e, dest, addr, key, Some(res), a, ctx, None, false) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_readwritev(
    e: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_fetch_atomicv", || {
        // SAFETY: per fi_atomic(3).
        let i = unsafe { one_ioc(iov, count, "fi_fetch_atomicv") }?;
        // SAFETY: as above.
        let r = unsafe { one_ioc(resultv, result_count, "fi_fetch_atomicv result") }?;
        check(Family::Fetch, dt, op, i.count.max(r.count))?;
        // SAFETY: as above.
        let a = unsafe { fetch_op(op, i.addr) }?;
        // SAFETY: result_desc is NULL or holds one descriptor per the contract.
        let rd = if result_desc.is_null() { std::ptr::null_mut() } else { unsafe { *result_desc } };
        // SAFETY: as above.
        let res = unsafe { result_iov(r.addr, rd) }?;
        // SAFETY: as above.
        unsafe { submit(e, dest, addr, key, Some(res), a, ctx, None, false) }
    })
}

unsafe extern "C" fn at_readwritemsg(
    e: *mut fid_ep,
    msg: *const fi_msg_atomic,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    guard_size("fi_fetch_atomicmsg", || {
        let msg = nonnull(msg as *mut fi_msg_atomic, "fi_fetch_atomicmsg: msg")?;
        if flags & !ATOMIC_FLAGS != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_fetch_atomicmsg: unsupported flags {:#x}", flags & !ATOMIC_FLAGS);
        }
        // SAFETY: checked non-NULL; valid per fi_atomic(3).
        let m = unsafe { &*msg };
        // SAFETY: as above.
        let r = unsafe { one_ioc(resultv, result_count, "fi_fetch_atomicmsg result") }?;
        check(Family::Fetch, m.datatype, m.op, r.count)?;
        let a = if m.op == FI_ATOMIC_READ {
            AtomicOp::FetchAdd(0)
        } else {
            // SAFETY: as above.
            let i = unsafe { one_ioc(m.msg_iov, m.iov_count, "fi_fetch_atomicmsg") }?;
            // SAFETY: as above.
            AtomicOp::FetchAdd(unsafe { operand(i.addr, "operand") }?)
        };
        // SAFETY: as above.
        let t = unsafe { msg_target(m) }?;
        // SAFETY: result_desc is NULL or holds one descriptor per the contract.
        let rd = if result_desc.is_null() { std::ptr::null_mut() } else { unsafe { *result_desc } };
        // SAFETY: as above.
        let res = unsafe { result_iov(r.addr, rd) }?;
        // SAFETY: as above.
        unsafe { submit(e, m.addr, t.addr, t.key, Some(res), a, m.context, Some(flags), false) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwrite(
    e: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    compare: *const c_void,
    _compare_desc: *mut c_void,
    result: *mut c_void,
    result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_compare_atomic", || {
        check(Family::Compare, dt, op, count)?;
        // SAFETY: per fi_atomic(3): one element each.
        let swap = unsafe { operand(buf, "operand") }?;
        // SAFETY: as above.
        let cmp = unsafe { operand(compare, "compare") }?;
        // SAFETY: as above.
        let res = unsafe { result_iov(result, result_desc) }?;
        // SAFETY: as above.
        unsafe { submit(e, dest, addr, key, Some(res), AtomicOp::CompSwap { compare: cmp, swap }, ctx, None, false) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwritev(
    e: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    comparev: *const fi_ioc,
    _compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_compare_atomicv", || {
        // SAFETY: per fi_atomic(3).
        let i = unsafe { one_ioc(iov, count, "fi_compare_atomicv") }?;
        // SAFETY: as above.
        let c = unsafe { one_ioc(comparev, compare_count, "fi_compare_atomicv compare") }?;
        // SAFETY: as above.
        let r = unsafe { one_ioc(resultv, result_count, "fi_compare_atomicv result") }?;
        check(Family::Compare, dt, op, i.count.max(c.count).max(r.count))?;
        // SAFETY: as above.
        let swap = unsafe { operand(i.addr, "operand") }?;
        // SAFETY: as above.
        let cmp = unsafe { operand(c.addr, "compare") }?;
        // SAFETY: result_desc is NULL or holds one descriptor per the contract.
        let rd = if result_desc.is_null() { std::ptr::null_mut() } else { unsafe { *result_desc } };
        // SAFETY: as above.
        let res = unsafe { result_iov(r.addr, rd) }?;
        // SAFETY: as above.
        unsafe { submit(e, dest, addr, key, Some(res), AtomicOp::CompSwap { compare: cmp, swap }, ctx, None, false) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwritemsg(
    e: *mut fid_ep,
    msg: *const fi_msg_atomic,
    comparev: *const fi_ioc,
    _compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    guard_size("fi_compare_atomicmsg", || {
        let msg = nonnull(msg as *mut fi_msg_atomic, "fi_compare_atomicmsg: msg")?;
        if flags & !ATOMIC_FLAGS != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_compare_atomicmsg: unsupported flags {:#x}", flags & !ATOMIC_FLAGS);
        }
        // SAFETY: checked non-NULL; valid per fi_atomic(3).
        let m = unsafe { &*msg };
        // SAFETY: as above.
        let i = unsafe { one_ioc(m.msg_iov, m.iov_count, "fi_compare_atomicmsg") }?;
        // SAFETY: as above.
        let c = unsafe { one_ioc(comparev, compare_count, "fi_compare_atomicmsg compare") }?;
        // SAFETY: as above.
        let r = unsafe { one_ioc(resultv, result_count, "fi_compare_atomicmsg result") }?;
        check(Family::Compare, m.datatype, m.op, i.count.max(c.count).max(r.count))?;
        // SAFETY: as above.
        let t = unsafe { msg_target(m) }?;
        // SAFETY: as above.
        let swap = unsafe { operand(i.addr, "operand") }?;
        // SAFETY: as above.
        let cmp = unsafe { operand(c.addr, "compare") }?;
        // SAFETY: result_desc is NULL or holds one descriptor per the contract.
        let rd = if result_desc.is_null() { std::ptr::null_mut() } else { unsafe { *result_desc } };
        // SAFETY: as above.
        let res = unsafe { result_iov(r.addr, rd) }?;
        // SAFETY: as above.
        unsafe { submit(e, m.addr, t.addr, t.key, Some(res), AtomicOp::CompSwap { compare: cmp, swap }, m.context, Some(flags), false) }
    })
}

unsafe fn valid(e: *mut fid_ep, family: Family, dt: u32, op: u32, count: *mut usize) -> FiResult<c_int> {
    // SAFETY: e is a fid per the API.
    unsafe { ep(e) }?;
    let count = nonnull(count, "atomic valid: count")?;
    if !supported(family, dt, op) {
        tracing::info!("{family:?} atomic: datatype {dt} / op {op} not supported");
        return Err(FiError::OPNOTSUPP);
    }
    // SAFETY: checked non-NULL, caller-owned.
    unsafe { *count = 1 };
    Ok(0)
}

unsafe extern "C" fn at_writevalid(e: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: arguments per fi_atomic(3).
    guard("fi_atomicvalid", || unsafe { valid(e, Family::Write, dt, op, count) })
}
unsafe extern "C" fn at_readwritevalid(e: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: arguments per fi_atomic(3).
    guard("fi_fetch_atomicvalid", || unsafe { valid(e, Family::Fetch, dt, op, count) })
}
unsafe extern "C" fn at_compwritevalid(e: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: arguments per fi_atomic(3).
    guard("fi_compare_atomicvalid", || unsafe { valid(e, Family::Compare, dt, op, count) })
}

pub static RDM_ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_set_is_what_verbs_does() {
        assert!(supported(Family::Write, FI_UINT64, FI_SUM));
        assert!(supported(Family::Fetch, FI_INT64, FI_SUM));
        assert!(supported(Family::Fetch, FI_UINT64, FI_ATOMIC_READ));
        assert!(supported(Family::Compare, FI_UINT64, FI_CSWAP));
        assert!(!supported(Family::Write, FI_UINT64, FI_CSWAP));
        assert!(!supported(Family::Compare, FI_UINT64, FI_SUM));
        assert!(!supported(Family::Fetch, FI_UINT32, FI_SUM));
        assert!(!supported(Family::Write, FI_UINT64, FI_ATOMIC_WRITE));
    }
}
