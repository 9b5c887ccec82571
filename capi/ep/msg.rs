//! The data path of MSG endpoints: the application's buffers and
//! descriptors turned into `Iov`s (shared with RDM and DGRAM endpoints), and
//! the fi_ops_msg shims (send, inject, receive).

use super::*;

/// Buffers one operation may name (MSG and RDM endpoints alike).
pub(crate) const MAX_IOV: usize = 32;

/// The `i`th buffer of an operation as a verbs SGE, with its descriptor (0 for
/// none) and whether that descriptor gave a key (an empty buffer needs none).
/// Shared with RDM endpoints (`rdm::bufs`).
///
/// # Safety
/// `desc` must be NULL or hold more than `i` descriptors; the buffer must stay
/// valid for the operation (fi_msg(3)).
#[inline(always)]
pub(crate) unsafe fn sge(i: usize, addr: u64, len: usize, desc: Option<*mut *mut c_void>, rx: bool) -> FiResult<(Iov, u64, bool)> {
    if len > u32::MAX as usize {
        return crate::fail!(FiError::MSGSIZE, "buffer of {len} bytes exceeds a verbs SGE");
    }
    let d = match desc {
        // SAFETY: desc holds more than i entries per the contract.
        Some(p) if !p.is_null() => (unsafe { *p.add(i) }) as u64,
        _ => 0,
    };
    let len = if addr == 0 && len > 0 {
        if !rx || d != 0 {
            return crate::fail!(FiError::INVAL, "NULL buffer with length {len}");
        }
        // A receive into NULL without a descriptor: nothing can be written
        // there, but an empty message fits (fabtests' fi_shared_ctx -e msg
        // posts such receives for its empty messages, and libfabric's verbs
        // accepts them). It counts as an empty buffer (which needs no
        // descriptor): a message with data gets a truncation or length error
        // completion, never a write to address 0.
        tracing::warn!("receive: NULL buffer with length {len} and no descriptor, taken as an empty buffer (only empty messages fit)");
        0
    } else {
        len
    };
    let key = desc_lkey(d)?;
    // SAFETY: the application's buffer, valid for the operation per fi_msg(3).
    let iov = unsafe { Iov::new(addr, len as u32, key.unwrap_or(0)) };
    Ok((iov, d, key.is_some() || len == 0))
}

/// The application's buffers of one operation, on the stack (no allocation
/// per call on the data path). `N`: room for that many (1 for the
/// single-buffer calls, which then touch a few bytes, not `MAX_IOV` slots).
pub(crate) struct Bufs<const N: usize> {
    iov: [std::mem::MaybeUninit<Iov>; N],
    descs: [std::mem::MaybeUninit<u64>; N],
    n: usize,
    /// Their bytes, all together.
    pub total: usize,
    /// Every non-empty buffer came with a descriptor.
    pub descs_ok: bool,
}

impl<const N: usize> Bufs<N> {
    pub fn iov(&self) -> &[Iov] {
        // SAFETY: `bufs` initialises the first n entries.
        unsafe { std::slice::from_raw_parts(self.iov.as_ptr() as *const Iov, self.n) }
    }
    pub fn descs(&self) -> &[u64] {
        // SAFETY: `bufs` initialises the first n entries.
        unsafe { std::slice::from_raw_parts(self.descs.as_ptr() as *const u64, self.n) }
    }
}

/// # Safety
/// `desc` must be NULL or hold `bufs.len()` descriptors; the buffers must stay
/// valid for the operation (fi_msg(3)); for injects, readable now.
#[inline(always)]
pub(crate) unsafe fn bufs<const N: usize>(bufs: &[(u64, usize)], desc: Option<*mut *mut c_void>) -> FiResult<Bufs<N>> {
    // SAFETY: the caller's contract.
    unsafe { bufs_dir(bufs, desc, false) }
}

/// # Safety
/// As [`bufs`]. `rx`: a receive's buffers (a NULL one counts as empty, `ep::sge`).
#[inline(always)]
pub(crate) unsafe fn bufs_dir<const N: usize>(bufs: &[(u64, usize)], desc: Option<*mut *mut c_void>, rx: bool) -> FiResult<Bufs<N>> {
    if bufs.len() > N {
        return crate::fail!(FiError::INVAL, "{} iovs exceed the limit of {N}", bufs.len());
    }
    let mut out = Bufs { iov: [std::mem::MaybeUninit::uninit(); N], descs: [std::mem::MaybeUninit::uninit(); N], n: 0, total: 0, descs_ok: true };
    for (i, &(addr, len)) in bufs.iter().enumerate() {
        // SAFETY: desc holds bufs.len() entries; the buffers are valid (both per the contract).
        let (iov, d, keyed) = unsafe { sge(i, addr, len, desc, rx) }?;
        out.descs_ok &= keyed;
        out.total += iov.len() as usize;
        out.iov[i] = std::mem::MaybeUninit::new(iov);
        out.descs[i] = std::mem::MaybeUninit::new(d);
        out.n = i + 1;
    }
    Ok(out)
}

/// # Safety
/// `iov` must hold `count` iovecs.
pub(crate) unsafe fn iovec_list(iov: *const libc::iovec, count: usize) -> FiResult<Vec<(u64, usize)>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if iov.is_null() {
        return crate::fail!(FiError::INVAL, "iov array is NULL with count {count}");
    }
    if count > MAX_IOV {
        return crate::fail!(FiError::INVAL, "{count} iovs exceed the limit of {MAX_IOV}");
    }
    // SAFETY: the caller passes `count` iovecs.
    let s = unsafe { std::slice::from_raw_parts(iov, count) };
    Ok(s.iter().map(|v| (v.iov_base as u64, v.iov_len)).collect())
}

pub(super) const MSG_TX_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_REMOTE_CQ_DATA
    | FI_MORE
    | FI_FENCE;
pub(crate) const MSG_RX_FLAGS: u64 = FI_COMPLETION | FI_MORE;

#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn do_send<const N: usize>(
    e: *mut fid_ep,
    b: &[(u64, usize)],
    desc: Option<*mut *mut c_void>,
    data: Option<u64>,
    ctx: *mut c_void,
    flags: Option<u64>,
    no_completion: bool,
) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    // SAFETY: buffers and descriptors per fi_msg(3).
    let v = unsafe { bufs::<N>(b, desc) }?;
    // None: the endpoint's default op flags (the calls without a flags argument).
    let mut flags = flags.unwrap_or_else(|| o.inner.tx_op_flags());
    if data.is_some() {
        flags |= FI_REMOTE_CQ_DATA;
    }
    let op = match data {
        Some(d) => SendOp::SendImm(d as u32),
        None => SendOp::Send,
    };
    o.inner.post_tx(op, OpKind::Send, v.iov(), v.descs_ok, v.total, ctx as u64, flags, no_completion)?;
    Ok(0)
}

pub(super) unsafe extern "C" fn ep_send(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, _dest: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_send", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), None, ctx, None, false) }
    })
}

pub(super) unsafe extern "C" fn ep_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    _dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_sendv", || {
        // SAFETY: arguments per fi_msg(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: as above.
        unsafe { do_send::<MAX_IOV>(e, &b, Some(desc), None, ctx, None, false) }
    })
}

pub(super) unsafe extern "C" fn ep_sendmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_sendmsg", || {
        // SAFETY: a valid fi_msg per the API.
        let m = unsafe { msg_parts("fi_sendmsg", msg, flags, MSG_TX_FLAGS, None) }?;
        // SAFETY: as above.
        unsafe { do_send::<MAX_IOV>(e, &m.bufs, Some(m.desc), m.data, m.context, Some(flags), false) }
    })
}

pub(super) unsafe extern "C" fn ep_inject(e: *mut fid_ep, buf: *const c_void, len: usize, _dest: fi_addr_t) -> isize {
    // SAFETY: arguments per fi_msg(3); inject data is copied before return.
    guard_size("fi_inject", || unsafe { do_send::<1>(e, &[(buf as u64, len)], None, None, std::ptr::null_mut(), Some(FI_INJECT), true) })
}

pub(super) unsafe extern "C" fn ep_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    _dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_senddata", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), Some(data), ctx, None, false) }
    })
}

pub(super) unsafe extern "C" fn ep_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, _dest: fi_addr_t) -> isize {
    guard_size("fi_injectdata", || {
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], None, Some(data), std::ptr::null_mut(), Some(FI_INJECT), true) }
    })
}

/// `flags`: None for the endpoint's default op flags.
#[inline(always)]
pub(super) unsafe fn do_recv<const N: usize>(e: *mut fid_ep, b: &[(u64, usize)], desc: Option<*mut *mut c_void>, ctx: *mut c_void, flags: Option<u64>) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    // SAFETY: buffers and descriptors per fi_msg(3).
    let v = unsafe { bufs_dir::<N>(b, desc, true) }?;
    let flags = flags.unwrap_or_else(|| o.inner.rx_op_flags());
    o.inner.post_rx(v.iov(), v.descs_ok, ctx as u64, flags)?;
    Ok(0)
}

pub(super) unsafe extern "C" fn ep_recv(e: *mut fid_ep, buf: *mut c_void, len: usize, desc: *mut c_void, _src: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_recv", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_recv::<1>(e, &[(buf as u64, len)], Some(&mut d), ctx, None) }
    })
}

pub(super) unsafe extern "C" fn ep_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    _src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_recvv", || {
        // SAFETY: arguments per fi_msg(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &b, Some(desc), ctx, None) }
    })
}

pub(super) unsafe extern "C" fn ep_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_recvmsg", || {
        // SAFETY: a valid fi_msg per the API.
        let m = unsafe { msg_parts("fi_recvmsg", msg, flags, MSG_RX_FLAGS, Some((FiError::OPNOTSUPP, "MSG"))) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &m.bufs, Some(m.desc), m.context, Some(flags)) }
    })
}

