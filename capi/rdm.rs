//! RDM endpoint objects: `fi_endpoint` for `FI_EP_RDM` (dispatched from
//! `ep.rs`) and their ops tables (msg, tagged, rma, atomic, cm, ep).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::fi::abi::*;
use super::av::AvObj;
use crate::fi::consts::*;
use super::domain::DomainObj;
use super::prov::ops_open_nosys;
use super::ep_shared::{self, msg_parts};
use super::ep::{bufs, bufs_dir, iovec_list, rma1, rma_msg_parts, MAX_IOV};
use super::util::*;
use crate::error::{FiError, FiResult};
use crate::info::Info;
use crate::rdm::ep::{RdmEp, RecvReq, RmaReq, SendReq};
use crate::sys;

#[repr(C)]
pub struct RdmEpObj {
    pub fid: fid_ep,
    pub inner: Arc<RdmEp>,
}

impl FiObject for RdmEpObj {
    const CLASS: usize = FI_CLASS_EP;
    const NAME: &'static str = "RDM endpoint";
    fn fi_ops() -> *const fi_ops {
        &RDM_FI_OPS
    }
}

static RDM_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(rdm_close),
    bind: Some(rdm_bind),
    control: Some(rdm_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static RDM_EP_OPS: fi_ops_ep = fi_ops_ep {
    size: std::mem::size_of::<fi_ops_ep>(),
    cancel: Some(rdm_cancel),
    getopt: Some(rdm_getopt),
    setopt: Some(rdm_setopt),
    tx_ctx: Some(ep_shared::tx_ctx_nosys),
    rx_ctx: Some(ep_shared::rx_ctx_nosys),
    rx_size_left: Some(rdm_size_left),
    tx_size_left: Some(rdm_size_left),
};

static RDM_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: std::mem::size_of::<fi_ops_cm>(),
    setname: Some(rdm_setname),
    getname: Some(rdm_getname),
    getpeer: Some(rdm_getpeer),
    connect: Some(rdm_connect),
    listen: Some(ep_shared::listen_nosys),
    accept: Some(ep_shared::accept_nosys),
    reject: Some(ep_shared::reject_nosys),
    shutdown: Some(ep_shared::shutdown_nosys),
    join: Some(rdm_join),
};

static RDM_MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: std::mem::size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
};

static RDM_TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: std::mem::size_of::<fi_ops_tagged>(),
    recv: Some(tag_recv),
    recvv: Some(tag_recvv),
    recvmsg: Some(tag_recvmsg),
    send: Some(tag_send),
    sendv: Some(tag_sendv),
    sendmsg: Some(tag_sendmsg),
    inject: Some(tag_inject),
    senddata: Some(tag_senddata),
    injectdata: Some(tag_injectdata),
};

static RDM_RMA_OPS: fi_ops_rma = fi_ops_rma {
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

/// `fi_endpoint` for an `FI_EP_RDM` info (called by `ep.rs`).
///
/// # Safety
/// `out` must be a valid out pointer (checked non-NULL by the caller).
pub unsafe fn open(d: &DomainObj, info: &Info, out: *mut *mut fid_ep, context: *mut c_void) -> FiResult<c_int> {
    let ep = RdmEp::open(&d.inner, info)?;
    let o = into_c(RdmEpObj {
        fid: fid_ep {
            fid: fid { fclass: FI_CLASS_EP, context, ops: &RDM_FI_OPS as *const _ as *mut _ },
            ops: &RDM_EP_OPS as *const _ as *mut _,
            cm: &RDM_CM_OPS as *const _ as *mut _,
            msg: &RDM_MSG_OPS as *const _ as *mut _,
            rma: &RDM_RMA_OPS as *const _ as *mut _,
            tagged: &RDM_TAGGED_OPS as *const _ as *mut _,
            atomic: &super::rdm_atomic::RDM_ATOMIC_OPS as *const _ as *mut _,
            collective: &super::nosys::COLLECTIVE_NOSYS as *const _ as *mut _,
        },
        inner: ep,
    });
    // SAFETY: o is our fresh box.
    unsafe { (*o).inner.set_fid(o as usize) };
    // SAFETY: the caller checked `out`.
    unsafe { *out = o as *mut fid_ep };
    Ok(0)
}

#[inline(always)]
pub(crate) unsafe fn ep<'a>(p: *mut fid_ep) -> FiResult<&'a RdmEpObj> {
    // SAFETY: p is a fid per the API.
    unsafe { obj::<RdmEpObj>(p as *const fid) }
}

unsafe extern "C" fn rdm_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(rdm ep)", || unsafe { close_obj::<RdmEpObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn rdm_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard("fi_ep_bind", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<RdmEpObj>(f) }?;
        // SAFETY: bfid is a fid per the API.
        unsafe {
            ep_shared::bind(&*o.inner, bfid, flags, |class| match class {
                // SAFETY: as above.
                FI_CLASS_AV => Some(obj::<AvObj>(bfid).and_then(|a| o.inner.bind_av(&a.inner, flags))),
                FI_CLASS_EQ => Some(crate::fail!(FiError::NOSYS, "fi_ep_bind: RDM endpoints report no events through an EQ (none is needed)")),
                FI_CLASS_SRX_CTX | FI_CLASS_STX_CTX => Some(crate::fail!(FiError::NOSYS, "fi_ep_bind: shared contexts are not supported yet")),
                _ => None,
            })
        }
    })
}

unsafe extern "C" fn rdm_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(rdm ep)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<RdmEpObj>(f) }?;
        // SAFETY: arg per fi_control(3).
        unsafe { ep_shared::control("rdm ep", &*o.inner, command, arg, |_, _| Ok(())) }
    })
}

unsafe extern "C" fn rdm_cancel(f: fid_t, context: *mut c_void) -> isize {
    guard_size("fi_cancel", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<RdmEpObj>(f) }?;
        o.inner.cancel(context as u64)?;
        Ok(0)
    })
}

unsafe extern "C" fn rdm_getopt(f: fid_t, level: c_int, optname: c_int, optval: *mut c_void, optlen: *mut usize) -> c_int {
    guard("fi_getopt", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<RdmEpObj>(f) }?;
        if level != FI_OPT_ENDPOINT {
            return crate::fail!(FiError(FI_ENOPROTOOPT), "fi_getopt: level {level} not supported");
        }
        match optname {
            FI_OPT_MIN_MULTI_RECV => {
                let optlen = nonnull(optlen, "fi_getopt: optlen")?;
                // SAFETY: caller-owned size_t.
                if unsafe { *optlen } < std::mem::size_of::<usize>() || optval.is_null() {
                    // SAFETY: as above.
                    unsafe { *optlen = std::mem::size_of::<usize>() };
                    return crate::fail!(FiError::TOOSMALL, "fi_getopt: buffer too small for FI_OPT_MIN_MULTI_RECV");
                }
                // SAFETY: the caller said a size_t fits.
                unsafe {
                    *(optval as *mut usize) = o.inner.min_multi_recv();
                    *optlen = std::mem::size_of::<usize>();
                }
                Ok(0)
            }
            n => crate::fail!(FiError(FI_ENOPROTOOPT), "fi_getopt: option {n} not supported on RDM endpoints"),
        }
    })
}

unsafe extern "C" fn rdm_setopt(f: fid_t, level: c_int, optname: c_int, optval: *const c_void, optlen: usize) -> c_int {
    guard("fi_setopt", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<RdmEpObj>(f) }?;
        if level != FI_OPT_ENDPOINT {
            return crate::fail!(FiError(FI_ENOPROTOOPT), "fi_setopt: level {level} not supported");
        }
        match optname {
            FI_OPT_MIN_MULTI_RECV => {
                if optval.is_null() || optlen < std::mem::size_of::<usize>() {
                    return crate::fail!(FiError::INVAL, "fi_setopt: FI_OPT_MIN_MULTI_RECV takes a size_t");
                }
                // SAFETY: checked non-NULL; a size_t per fi_endpoint(3).
                let v = unsafe { (optval as *const usize).read_unaligned() };
                o.inner.set_min_multi_recv(v);
                Ok(0)
            }
            n => crate::fail!(FiError(FI_ENOPROTOOPT), "fi_setopt: option {n} not supported on RDM endpoints"),
        }
    })
}

unsafe extern "C" fn rdm_size_left(_e: *mut fid_ep) -> isize {
    FiError::NOSYS.neg() as isize
}

unsafe extern "C" fn rdm_setname(f: fid_t, addr: *mut c_void, addrlen: usize) -> c_int {
    guard("fi_setname", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<RdmEpObj>(f) }?;
        // SAFETY: addr has addrlen bytes.
        let Some(a) = (unsafe { super::info::read_addr(addr, addrlen, "fi_setname") })? else {
            return crate::fail!(FiError::INVAL, "fi_setname: no address");
        };
        o.inner.setname(a).map(|_| 0)
    })
}

unsafe extern "C" fn rdm_getname(f: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard("fi_getname", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<RdmEpObj>(f) }?;
        let Some(a) = o.inner.getname() else {
            return crate::fail!(FiError(FI_EADDRNOTAVAIL), "fi_getname: the RDM endpoint has no address until fi_enable");
        };
        // SAFETY: (addr, addrlen) per fi_cm(3).
        unsafe { write_addr(&sys::sockaddr_bytes(&a), addr, addrlen) }
    })
}

unsafe extern "C" fn rdm_getpeer(_e: *mut fid_ep, _a: *mut c_void, _l: *mut usize) -> c_int {
    tracing::info!("fi_getpeer: RDM endpoints are connectionless");
    FiError::NOSYS.neg()
}
unsafe extern "C" fn rdm_connect(_e: *mut fid_ep, _a: *const c_void, _p: *const c_void, _l: usize) -> c_int {
    tracing::info!("fi_connect: RDM endpoints connect by themselves");
    FiError::NOSYS.neg()
}
unsafe extern "C" fn rdm_join(_e: *mut fid_ep, _a: *const c_void, _f: u64, _mc: *mut *mut fid_mc, _c: *mut c_void) -> c_int {
    FiError::NOSYS.neg()
}

// ---- buffers ----

const TX_FLAGS: u64 =
    FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA | FI_MORE;
const RX_FLAGS: u64 = FI_COMPLETION | FI_MORE | FI_MULTI_RECV;
const TRX_FLAGS: u64 = FI_COMPLETION | FI_MORE | FI_PEEK | FI_CLAIM | FI_DISCARD;

// ---- messages ----

/// One send, from any of the msg/tagged entry points.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn do_send<const N: usize>(
    e: *mut fid_ep,
    b: &[(u64, usize)],
    desc: Option<*mut *mut c_void>,
    dest: fi_addr_t,
    tag: Option<u64>,
    data: Option<u64>,
    ctx: *mut c_void,
    flags: Option<u64>,
    inject: bool,
) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    // SAFETY: buffers and descriptors per fi_msg(3)/fi_tagged(3).
    let v = unsafe { bufs::<N>(b, desc) }?;
    let mut flags = flags.unwrap_or_else(|| o.inner.tx_op_flags());
    if inject {
        flags |= FI_INJECT;
    }
    if data.is_some() {
        flags |= FI_REMOTE_CQ_DATA;
    }
    o.inner.send(SendReq {
        iov: v.iov(),
        descs: v.descs(),
        dest,
        tag,
        data,
        context: ctx as u64,
        flags,
        no_completion: inject,
    })?;
    Ok(0)
}

#[inline(always)]
unsafe fn do_recv<const N: usize>(
    e: *mut fid_ep,
    b: &[(u64, usize)],
    desc: Option<*mut *mut c_void>,
    src: fi_addr_t,
    tag: Option<(u64, u64)>,
    ctx: *mut c_void,
    flags: Option<u64>,
) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    // SAFETY: buffers and descriptors per fi_msg(3)/fi_tagged(3).
    let v = unsafe { bufs_dir::<N>(b, desc, true) }?;
    let flags = flags.unwrap_or_else(|| o.inner.rx_op_flags());
    o.inner.recv(RecvReq { iov: v.iov(), descs_ok: v.descs_ok, src, tag, context: ctx as u64, flags })?;
    Ok(0)
}

unsafe extern "C" fn msg_send(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, dest: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_send", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), dest, None, None, ctx, None, false) }
    })
}

unsafe extern "C" fn msg_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_sendv", || {
        // SAFETY: arguments per fi_msg(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: as above.
        unsafe { do_send::<MAX_IOV>(e, &b, Some(desc), dest, None, None, ctx, None, false) }
    })
}

unsafe extern "C" fn msg_sendmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_sendmsg", || {
        // SAFETY: a valid fi_msg per the API.
        let m = unsafe { msg_parts("fi_sendmsg", msg, flags, TX_FLAGS, None) }?;
        // SAFETY: as above.
        unsafe { do_send::<MAX_IOV>(e, &m.bufs, Some(m.desc), m.addr, None, m.data, m.context, Some(flags), false) }
    })
}

unsafe extern "C" fn msg_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize {
    // SAFETY: arguments per fi_msg(3); inject data is copied before return.
    guard_size("fi_inject", || unsafe { do_send::<1>(e, &[(buf as u64, len)], None, dest, None, None, std::ptr::null_mut(), None, true) })
}

unsafe extern "C" fn msg_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_senddata", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), dest, None, Some(data), ctx, None, false) }
    })
}

unsafe extern "C" fn msg_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t) -> isize {
    guard_size("fi_injectdata", || {
        // SAFETY: arguments per fi_msg(3); copied before return.
        unsafe { do_send::<1>(e, &[(buf as u64, len)], None, dest, None, Some(data), std::ptr::null_mut(), None, true) }
    })
}

unsafe extern "C" fn msg_recv(e: *mut fid_ep, buf: *mut c_void, len: usize, desc: *mut c_void, src: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_recv", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_recv::<1>(e, &[(buf as u64, len)], Some(&mut d), src, None, ctx, None) }
    })
}

unsafe extern "C" fn msg_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_recvv", || {
        // SAFETY: arguments per fi_msg(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &b, Some(desc), src, None, ctx, None) }
    })
}

unsafe extern "C" fn msg_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_recvmsg", || {
        // SAFETY: a valid fi_msg per the API.
        let m = unsafe { msg_parts("fi_recvmsg", msg, flags, RX_FLAGS, None) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &m.bufs, Some(m.desc), m.addr, None, m.context, Some(flags)) }
    })
}

// ---- tagged ----

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recv(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_trecv", || {
        let mut d = desc;
        // SAFETY: arguments per fi_tagged(3).
        unsafe { do_recv::<1>(e, &[(buf as u64, len)], Some(&mut d), src, Some((tag, ignore)), ctx, None) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_trecvv", || {
        // SAFETY: arguments per fi_tagged(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &b, Some(desc), src, Some((tag, ignore)), ctx, None) }
    })
}

unsafe extern "C" fn tag_recvmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    guard_size("fi_trecvmsg", || {
        let msg = nonnull(msg as *mut fi_msg_tagged, "fi_trecvmsg: msg")?;
        if flags & !TRX_FLAGS != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_trecvmsg: unsupported flags {:#x}", flags & !TRX_FLAGS);
        }
        // SAFETY: checked non-NULL; a valid fi_msg_tagged per the API.
        let m = unsafe { &*msg };
        // SAFETY: as above.
        let b = unsafe { iovec_list(m.msg_iov, m.iov_count) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &b, Some(m.desc), m.addr, Some((m.tag, m.ignore)), m.context, Some(flags)) }
    })
}

unsafe extern "C" fn tag_send(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_tsend", || {
        let mut d = desc;
        // SAFETY: arguments per fi_tagged(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), dest, Some(tag), None, ctx, None, false) }
    })
}

unsafe extern "C" fn tag_sendv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_tsendv", || {
        // SAFETY: arguments per fi_tagged(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: as above.
        unsafe { do_send::<MAX_IOV>(e, &b, Some(desc), dest, Some(tag), None, ctx, None, false) }
    })
}

unsafe extern "C" fn tag_sendmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    guard_size("fi_tsendmsg", || {
        let msg = nonnull(msg as *mut fi_msg_tagged, "fi_tsendmsg: msg")?;
        if flags & !TX_FLAGS != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_tsendmsg: unsupported flags {:#x}", flags & !TX_FLAGS);
        }
        // SAFETY: checked non-NULL; a valid fi_msg_tagged per the API.
        let m = unsafe { &*msg };
        // SAFETY: as above.
        let b = unsafe { iovec_list(m.msg_iov, m.iov_count) }?;
        let data = if flags & FI_REMOTE_CQ_DATA != 0 { Some(m.data) } else { None };
        // SAFETY: as above.
        unsafe { do_send::<MAX_IOV>(e, &b, Some(m.desc), m.addr, Some(m.tag), data, m.context, Some(flags), false) }
    })
}

unsafe extern "C" fn tag_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t, tag: u64) -> isize {
    guard_size("fi_tinject", || {
        // SAFETY: arguments per fi_tagged(3); copied before return.
        unsafe { do_send::<1>(e, &[(buf as u64, len)], None, dest, Some(tag), None, std::ptr::null_mut(), None, true) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_tsenddata", || {
        let mut d = desc;
        // SAFETY: arguments per fi_tagged(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), dest, Some(tag), Some(data), ctx, None, false) }
    })
}

unsafe extern "C" fn tag_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t, tag: u64) -> isize {
    guard_size("fi_tinjectdata", || {
        // SAFETY: arguments per fi_tagged(3); copied before return.
        unsafe { do_send::<1>(e, &[(buf as u64, len)], None, dest, Some(tag), Some(data), std::ptr::null_mut(), None, true) }
    })
}

// ---- RMA ----

#[allow(clippy::too_many_arguments)]
unsafe fn do_rma<const N: usize>(
    e: *mut fid_ep,
    read: bool,
    b: &[(u64, usize)],
    desc: Option<*mut *mut c_void>,
    dest: fi_addr_t,
    rma: &[fi_rma_iov],
    data: Option<u64>,
    ctx: *mut c_void,
    flags: Option<u64>,
    inject: bool,
) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    if rma.len() != 1 {
        return crate::fail!(FiError::INVAL, "RMA: exactly one remote iov is supported (rma_iov_limit 1), got {}", rma.len());
    }
    let r = rma[0];
    // SAFETY: buffers and descriptors per fi_rma(3).
    let v = unsafe { bufs::<N>(b, desc) }?;
    let total = v.total;
    if r.len < total {
        return crate::fail!(FiError::INVAL, "RMA: {total} local bytes exceed the remote iov of {}", r.len);
    }
    let mut flags = flags.unwrap_or_else(|| o.inner.tx_op_flags());
    if inject {
        flags |= FI_INJECT;
    }
    o.inner.rma(RmaReq {
        read,
        iov: v.iov(),
        descs_ok: v.descs_ok,
        dest,
        raddr: r.addr,
        rkey: r.key,
        data,
        context: ctx as u64,
        flags,
        no_completion: inject,
    })?;
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_read(
    e: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_read", || {
        let mut d = desc;
        // SAFETY: arguments per fi_rma(3).
        unsafe { do_rma::<1>(e, true, &[(buf as u64, len)], Some(&mut d), src, &rma1(addr, len, key), None, ctx, None, false) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_readv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_readv", || {
        // SAFETY: arguments per fi_rma(3).
        let b = unsafe { iovec_list(iov, count) }?;
        let total = b.iter().map(|x| x.1).sum();
        // SAFETY: as above.
        unsafe { do_rma::<MAX_IOV>(e, true, &b, Some(desc), src, &rma1(addr, total, key), None, ctx, None, false) }
    })
}

const RMA_FLAGS: u64 =
    FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA | FI_MORE;

unsafe fn rma_msg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64, read: bool) -> FiResult<isize> {
    // SAFETY: msg per fi_rma(3).
    let r = unsafe { rma_msg_parts(msg, flags, read, RMA_FLAGS) }?;
    // SAFETY: as above.
    unsafe { do_rma::<MAX_IOV>(e, read, &r.bufs, Some(r.m.desc), r.m.addr, r.rma, r.data, r.m.context, Some(flags), false) }
}

unsafe extern "C" fn rma_readmsg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_readmsg", || unsafe { rma_msg(e, msg, flags, true) })
}

unsafe extern "C" fn rma_writemsg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_writemsg", || unsafe { rma_msg(e, msg, flags, false) })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_write(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_write", || {
        let mut d = desc;
        // SAFETY: arguments per fi_rma(3).
        unsafe { do_rma::<1>(e, false, &[(buf as u64, len)], Some(&mut d), dest, &rma1(addr, len, key), None, ctx, None, false) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_writev(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_writev", || {
        // SAFETY: arguments per fi_rma(3).
        let b = unsafe { iovec_list(iov, count) }?;
        let total = b.iter().map(|x| x.1).sum();
        // SAFETY: as above.
        unsafe { do_rma::<MAX_IOV>(e, false, &b, Some(desc), dest, &rma1(addr, total, key), None, ctx, None, false) }
    })
}

unsafe extern "C" fn rma_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t, addr: u64, key: u64) -> isize {
    guard_size("fi_inject_write", || {
        // SAFETY: arguments per fi_rma(3); copied before return.
        unsafe { do_rma::<1>(e, false, &[(buf as u64, len)], None, dest, &rma1(addr, len, key), None, std::ptr::null_mut(), None, true) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_writedata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_writedata", || {
        let mut d = desc;
        // SAFETY: arguments per fi_rma(3).
        unsafe { do_rma::<1>(e, false, &[(buf as u64, len)], Some(&mut d), dest, &rma1(addr, len, key), Some(data), ctx, None, false) }
    })
}

unsafe extern "C" fn rma_injectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    guard_size("fi_inject_writedata", || {
        // SAFETY: arguments per fi_rma(3); copied before return.
        unsafe {
            do_rma::<1>(e, false, &[(buf as u64, len)], None, dest, &rma1(addr, len, key), Some(data), std::ptr::null_mut(), None, true)
        }
    })
}

