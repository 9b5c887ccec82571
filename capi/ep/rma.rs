//! The fi_ops_rma shims of MSG endpoints, and their fi_ops_tagged table's
//! entries, which answer -FI_ENOSYS (no tagged messages on MSG endpoints).

use super::*;

/// `flags`: None for the endpoint's default op flags (the calls without a
/// flags argument). Inlined into each shim: the endpoint is checked once,
/// and a one-buffer call makes one call frame, not three.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn do_rma<const N: usize>(
    e: *mut fid_ep,
    read: bool,
    b: &[(u64, usize)],
    desc: Option<*mut *mut c_void>,
    rma: &[fi_rma_iov],
    data: Option<u64>,
    ctx: *mut c_void,
    flags: Option<u64>,
    no_completion: bool,
) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    let mut flags = flags.unwrap_or_else(|| o.inner.tx_op_flags());
    if data.is_some() {
        flags |= FI_REMOTE_CQ_DATA;
    }
    if rma.len() != 1 {
        return crate::fail!(FiError::INVAL, "RMA: exactly one remote iov is supported (rma_iov_limit 1), got {}", rma.len());
    }
    let r = rma[0];
    let Ok(rkey) = u32::try_from(r.key) else {
        return crate::fail!(FiError::INVAL, "RMA: key {:#x} is not a verbs key", r.key);
    };
    // SAFETY: buffers and descriptors per fi_rma(3).
    let v = unsafe { bufs::<N>(b, desc) }?;
    if r.len < v.total {
        return crate::fail!(FiError::INVAL, "RMA: {} local bytes exceed the remote iov of {}", v.total, r.len);
    }
    if data.is_some() && o.inner.info.rx.mode & FI_RX_CQ_DATA == 0 {
        // Remote CQ data on a write consumes a receive at the peer: only with FI_RX_CQ_DATA.
        return crate::fail!(FiError::OPNOTSUPP, "fi_writedata: needs mode FI_RX_CQ_DATA (requested in the hints)");
    }
    let (op, kind) = if read {
        (SendOp::Read { raddr: r.addr, rkey }, OpKind::Read)
    } else if let Some(d) = data {
        (SendOp::WriteImm { raddr: r.addr, rkey, imm: d as u32 }, OpKind::Write)
    } else {
        (SendOp::Write { raddr: r.addr, rkey }, OpKind::Write)
    };
    o.inner.post_tx(op, kind, v.iov(), v.descs_ok, v.total, ctx as u64, flags, no_completion)?;
    Ok(0)
}

/// One remote buffer (MSG and RDM endpoints alike).
pub(crate) fn rma1(addr: u64, len: usize, key: u64) -> [fi_rma_iov; 1] {
    [fi_rma_iov { addr, len, key }]
}

/// `fi_read`/`fi_write`: one local buffer, the endpoint's default op flags.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn rma_one(e: *mut fid_ep, read: bool, buf: u64, len: usize, desc: *mut c_void, addr: u64, key: u64, ctx: *mut c_void) -> FiResult<isize> {
    let mut d = desc;
    // SAFETY: arguments per fi_rma(3).
    unsafe { do_rma::<1>(e, read, &[(buf, len)], Some(&mut d), &rma1(addr, len, key), None, ctx, None, false) }
}

/// `fi_readv`/`fi_writev`: an iovec list, the endpoint's default op flags.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn rma_vec(
    e: *mut fid_ep,
    read: bool,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> FiResult<isize> {
    // SAFETY: arguments per fi_rma(3).
    let b = unsafe { iovec_list(iov, count) }?;
    let total = b.iter().map(|x| x.1).sum();
    // SAFETY: as above.
    unsafe { do_rma::<MAX_IOV>(e, read, &b, Some(desc), &rma1(addr, total, key), None, ctx, None, false) }
}

pub(super) unsafe extern "C" fn rma_read(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    _src: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_read", || unsafe { rma_one(e, true, buf as u64, len, desc, addr, key, ctx) })
}

pub(super) unsafe extern "C" fn rma_readv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    _src: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_readv", || unsafe { rma_vec(e, true, iov, desc, count, addr, key, ctx) })
}

pub(super) const RMA_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_REMOTE_CQ_DATA
    | FI_MORE
    | FI_FENCE;

/// An `fi_msg_rma` read and checked: the message, its local buffers, its
/// remote ones and (for a write with FI_REMOTE_CQ_DATA) the immediate data.
pub(crate) struct RmaMsg<'a> {
    pub m: &'a fi_msg_rma,
    pub bufs: Vec<(u64, usize)>,
    pub rma: &'a [fi_rma_iov],
    pub data: Option<u64>,
}

/// `fi_readmsg`/`fi_writemsg`'s argument checks, shared with RDM endpoints:
/// `flags` must lie within `allowed`.
///
/// # Safety
/// `msg` NULL or valid per fi_rma(3) for the operation's duration.
pub(crate) unsafe fn rma_msg_parts<'a>(msg: *const fi_msg_rma, flags: u64, read: bool, allowed: u64) -> FiResult<RmaMsg<'a>> {
    let msg = nonnull(msg as *mut fi_msg_rma, "RMA msg")?;
    if flags & !allowed != 0 {
        return crate::fail!(FiError::BADFLAGS, "RMA msg: unsupported flags {:#x}", flags & !allowed);
    }
    // SAFETY: checked non-NULL; valid per fi_rma(3).
    let m = unsafe { &*msg };
    // SAFETY: as above.
    let bufs = unsafe { iovec_list(m.msg_iov, m.iov_count) }?;
    if m.rma_iov_count > 0 && m.rma_iov.is_null() {
        return crate::fail!(FiError::INVAL, "RMA msg: rma_iov is NULL");
    }
    let rma = if m.rma_iov_count == 0 {
        &[][..]
    } else {
        // SAFETY: rma_iov holds rma_iov_count entries.
        unsafe { std::slice::from_raw_parts(m.rma_iov, m.rma_iov_count) }
    };
    let data = if !read && flags & FI_REMOTE_CQ_DATA != 0 { Some(m.data) } else { None };
    Ok(RmaMsg { m, bufs, rma, data })
}

pub(super) unsafe fn rma_msg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64, read: bool) -> FiResult<isize> {
    // SAFETY: msg per fi_rma(3).
    let r = unsafe { rma_msg_parts(msg, flags, read, RMA_FLAGS) }?;
    // SAFETY: as above.
    unsafe { do_rma::<MAX_IOV>(e, read, &r.bufs, Some(r.m.desc), r.rma, r.data, r.m.context, Some(flags), false) }
}

pub(super) unsafe extern "C" fn rma_readmsg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_readmsg", || unsafe { rma_msg(e, msg, flags, true) })
}

pub(super) unsafe extern "C" fn rma_writemsg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_writemsg", || unsafe { rma_msg(e, msg, flags, false) })
}

pub(super) unsafe extern "C" fn rma_write(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    _dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_write", || unsafe { rma_one(e, false, buf as u64, len, desc, addr, key, ctx) })
}

pub(super) unsafe extern "C" fn rma_writev(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    _dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_writev", || unsafe { rma_vec(e, false, iov, desc, count, addr, key, ctx) })
}

pub(super) unsafe extern "C" fn rma_inject(e: *mut fid_ep, buf: *const c_void, len: usize, _dest: fi_addr_t, addr: u64, key: u64) -> isize {
    guard_size("fi_inject_write", || {
        // SAFETY: arguments per fi_rma(3); inject data is copied before return.
        unsafe { do_rma::<1>(e, false, &[(buf as u64, len)], None, &rma1(addr, len, key), None, std::ptr::null_mut(), Some(FI_INJECT), true) }
    })
}

pub(super) unsafe extern "C" fn rma_writedata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    _dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_writedata", || {
        let mut d = desc;
        // SAFETY: arguments per fi_rma(3).
        unsafe { do_rma::<1>(e, false, &[(buf as u64, len)], Some(&mut d), &rma1(addr, len, key), Some(data), ctx, None, false) }
    })
}

pub(super) unsafe extern "C" fn rma_injectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    _dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    guard_size("fi_inject_writedata", || {
        // SAFETY: arguments per fi_rma(3); inject data is copied before return.
        unsafe {
            do_rma::<1>(
                e,
                false,
                &[(buf as u64, len)],
                None,
                &rma1(addr, len, key),
                Some(data),
                std::ptr::null_mut(),
                Some(FI_INJECT),
                true,
            )
        }
    })
}

// ---- tagged: not offered on MSG endpoints ----

pub(super) fn tagged_nosys() -> isize {
    tracing::info!("tagged messages are not supported on MSG endpoints (caps has no FI_TAGGED)");
    FiError::NOSYS.neg() as isize
}
pub(super) unsafe extern "C" fn tagged_recv(_e: *mut fid_ep, _b: *mut c_void, _l: usize, _d: *mut c_void, _s: fi_addr_t, _t: u64, _i: u64, _c: *mut c_void) -> isize {
    tagged_nosys()
}
pub(super) unsafe extern "C" fn tagged_recvv(
    _e: *mut fid_ep,
    _v: *const libc::iovec,
    _d: *mut *mut c_void,
    _n: usize,
    _s: fi_addr_t,
    _t: u64,
    _i: u64,
    _c: *mut c_void,
) -> isize {
    tagged_nosys()
}
pub(super) unsafe extern "C" fn tagged_recvmsg(_e: *mut fid_ep, _m: *const fi_msg_tagged, _f: u64) -> isize {
    tagged_nosys()
}
pub(super) unsafe extern "C" fn tagged_send(_e: *mut fid_ep, _b: *const c_void, _l: usize, _d: *mut c_void, _a: fi_addr_t, _t: u64, _c: *mut c_void) -> isize {
    tagged_nosys()
}
pub(super) unsafe extern "C" fn tagged_sendv(
    _e: *mut fid_ep,
    _v: *const libc::iovec,
    _d: *mut *mut c_void,
    _n: usize,
    _a: fi_addr_t,
    _t: u64,
    _c: *mut c_void,
) -> isize {
    tagged_nosys()
}
pub(super) unsafe extern "C" fn tagged_sendmsg(_e: *mut fid_ep, _m: *const fi_msg_tagged, _f: u64) -> isize {
    tagged_nosys()
}
pub(super) unsafe extern "C" fn tagged_inject(_e: *mut fid_ep, _b: *const c_void, _l: usize, _a: fi_addr_t, _t: u64) -> isize {
    tagged_nosys()
}
pub(super) unsafe extern "C" fn tagged_senddata(
    _e: *mut fid_ep,
    _b: *const c_void,
    _l: usize,
    _d: *mut c_void,
    _x: u64,
    _a: fi_addr_t,
    _t: u64,
    _c: *mut c_void,
) -> isize {
    tagged_nosys()
}
pub(super) unsafe extern "C" fn tagged_injectdata(_e: *mut fid_ep, _b: *const c_void, _l: usize, _x: u64, _a: fi_addr_t, _t: u64) -> isize {
    tagged_nosys()
}

