//! DGRAM endpoint and address-vector objects: `fi_endpoint` for
//! `FI_EP_DGRAM` (dispatched from `ep.rs`), `fi_av_open` on a DGRAM domain
//! (dispatched from `av.rs`), and their ops tables. The logic is in
//! `crate::dgram`.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use super::domain::DomainObj;
use super::ep::{bufs, iovec_list, MAX_IOV};
use super::ep_shared::{self, msg_parts};
use super::prov::{control_nosys, ops_open_nosys};
use super::util::*;
use crate::av::AvAttr;
use crate::dgram::av::DgramAv;
use crate::dgram::ep::{DgramEp, RecvReq, SendReq};
use crate::dgram::{straddr, UdName, NAME_LEN};
use crate::error::{FiError, FiResult};
use crate::fi::abi::*;
use crate::fi::consts::*;
use crate::info::Info;

// ---- address vectors ----

#[repr(C)]
pub struct DgramAvObj {
    pub fid: fid_av,
    pub inner: Arc<DgramAv>,
}

impl FiObject for DgramAvObj {
    const CLASS: usize = FI_CLASS_AV;
    const NAME: &'static str = "DGRAM address vector";
    fn fi_ops() -> *const fi_ops {
        &AV_FI_OPS
    }
}

static AV_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(av_close),
    bind: Some(av_bind),
    control: Some(control_nosys),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static AV_OPS: fi_ops_av = fi_ops_av {
    size: std::mem::size_of::<fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(av_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(av_set),
};

/// `fi_av_open` on a domain opened for `FI_EP_DGRAM` (called by `av.rs`).
///
/// # Safety
/// `out` is a valid out pointer.
pub unsafe fn av_open(d: &DomainObj, a: &AvAttr, out: *mut *mut fid_av, context: *mut c_void) -> FiResult<c_int> {
    let av = DgramAv::open(&d.inner, a)?;
    let o = into_c(DgramAvObj {
        fid: fid_av {
            fid: fid { fclass: FI_CLASS_AV, context, ops: &AV_FI_OPS as *const _ as *mut _ },
            ops: &AV_OPS as *const _ as *mut _,
        },
        inner: av,
    });
    // SAFETY: per the contract.
    unsafe { *out = o as *mut fid_av };
    Ok(0)
}

unsafe fn av<'a>(p: *mut fid_av) -> FiResult<&'a DgramAvObj> {
    // SAFETY: p is a fid per the API.
    unsafe { obj::<DgramAvObj>(p as *const fid) }
}

unsafe extern "C" fn av_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(av)", || unsafe { close_obj::<DgramAvObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn av_bind(f: *mut fid, _bfid: *mut fid, _flags: u64) -> c_int {
    guard("fi_av_bind", || {
        // SAFETY: f is a fid per the API.
        unsafe { obj::<DgramAvObj>(f) }?;
        crate::fail!(FiError::NOSYS, "fi_av_bind: asynchronous inserts (an EQ) are not supported")
    })
}

unsafe extern "C" fn av_insert(a: *mut fid_av, addr: *const c_void, count: usize, fi_addr: *mut fi_addr_t, flags: u64, context: *mut c_void) -> c_int {
    guard("fi_av_insert", || {
        // SAFETY: a is a fid per the API.
        let o = unsafe { av(a) }?;
        if flags & !(FI_MORE | FI_SYNC_ERR) != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_av_insert: unsupported flags {flags:#x}");
        }
        if count == 0 {
            return Ok(0);
        }
        if addr.is_null() {
            return crate::fail!(FiError::INVAL, "fi_av_insert: addr is NULL with count {count}");
        }
        // SAFETY: the buffer packs `count` ofi_ib_ud_ep_name (FI_ADDR_IB_UD, fi_av(3)).
        let b = unsafe { std::slice::from_raw_parts(addr as *const u8, count * NAME_LEN) };
        let names: Vec<Option<UdName>> = b.chunks(NAME_LEN).map(UdName::from_bytes).collect();
        let res = o.inner.insert(&names);
        let mut ok = 0;
        for (i, r) in res.iter().enumerate() {
            if !fi_addr.is_null() {
                // SAFETY: fi_addr holds `count` entries when non-NULL.
                unsafe { *fi_addr.add(i) = *r.as_ref().unwrap_or(&FI_ADDR_NOTAVAIL) };
            }
            if flags & FI_SYNC_ERR != 0 && !context.is_null() {
                // SAFETY: with FI_SYNC_ERR, context holds `count` ints (fi_av(3)).
                unsafe { *(context as *mut c_int).add(i) = r.as_ref().map_or_else(|e| e.neg(), |_| 0) };
            }
            match r {
                Ok(_) => ok += 1,
                Err(e) => tracing::warn!("fi_av_insert: address {i} refused ({})", e.0),
            }
        }
        Ok(ok)
    })
}

unsafe extern "C" fn av_insertsvc(a: *mut fid_av, _n: *const c_char, _s: *const c_char, _fa: *mut fi_addr_t, _f: u64, _c: *mut c_void) -> c_int {
    guard("fi_av_insertsvc", || {
        // SAFETY: a is a fid per the API.
        unsafe { av(a) }?;
        crate::fail!(FiError::NOSYS, "fi_av_insertsvc: not supported on DGRAM address vectors (insert fi_getname's address)")
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn av_insertsym(
    a: *mut fid_av,
    _n: *const c_char,
    _nc: usize,
    _s: *const c_char,
    _sc: usize,
    _fa: *mut fi_addr_t,
    _f: u64,
    _c: *mut c_void,
) -> c_int {
    guard("fi_av_insertsym", || {
        // SAFETY: a is a fid per the API.
        unsafe { av(a) }?;
        crate::fail!(FiError::NOSYS, "fi_av_insertsym: not supported on DGRAM address vectors")
    })
}

unsafe extern "C" fn av_remove(a: *mut fid_av, fi_addr: *mut fi_addr_t, count: usize, flags: u64) -> c_int {
    guard("fi_av_remove", || {
        // SAFETY: a is a fid per the API.
        let o = unsafe { av(a) }?;
        // SAFETY: fi_addr holds `count` values per the API.
        unsafe { super::av::remove_checked(fi_addr, count, flags, |v| o.inner.remove(v)) }
    })
}

unsafe extern "C" fn av_lookup(a: *mut fid_av, fi_addr: fi_addr_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard("fi_av_lookup", || {
        // SAFETY: a is a fid per the API.
        let o = unsafe { av(a) }?;
        let addrlen = nonnull(addrlen, "fi_av_lookup: addrlen")?;
        let Some(n) = o.inner.lookup(fi_addr) else {
            return crate::fail!(FiError::NOENT, "fi_av_lookup: fi_addr {fi_addr:#x} is not in the address vector");
        };
        // SAFETY: (addr, addrlen) per fi_av(3); addrlen checked non-NULL.
        unsafe { write_addr_truncated(&n.to_bytes(), addr, addrlen) };
        Ok(0)
    })
}

unsafe extern "C" fn av_straddr(a: *mut fid_av, addr: *const c_void, buf: *mut c_char, len: *mut usize) -> *const c_char {
    let r = std::panic::catch_unwind(|| -> FiResult<()> {
        // SAFETY: a is a fid per the API.
        unsafe { av(a) }?;
        let len = nonnull(len, "fi_av_straddr: len")?;
        if addr.is_null() {
            return crate::fail!(FiError::INVAL, "fi_av_straddr: addr is NULL");
        }
        // SAFETY: an FI_ADDR_IB_UD address is NAME_LEN bytes (fi_av(3): of the AV's format).
        let n = UdName::from_bytes(unsafe { std::slice::from_raw_parts(addr as *const u8, NAME_LEN) }).ok_or(FiError::INVAL)?;
        let s = straddr(&n);
        // SAFETY: caller-owned size_t; buf has *len bytes.
        unsafe {
            copy_cstr(&s, buf, *len);
            *len = s.len() + 1;
        }
        Ok(())
    });
    match r {
        Ok(Ok(())) => buf,
        _ => std::ptr::null(),
    }
}

unsafe extern "C" fn av_set(a: *mut fid_av, _attr: *mut fi_av_set_attr, _set: *mut *mut fid_av_set, _ctx: *mut c_void) -> c_int {
    guard("fi_av_set", || {
        // SAFETY: a is a fid per the API.
        unsafe { av(a) }?;
        crate::fail!(FiError::NOSYS, "fi_av_set: AV sets (collectives) are not supported")
    })
}

// ---- endpoints ----

#[repr(C)]
pub struct DgramEpObj {
    pub fid: fid_ep,
    pub inner: Arc<DgramEp>,
}

impl FiObject for DgramEpObj {
    const CLASS: usize = FI_CLASS_EP;
    const NAME: &'static str = "DGRAM endpoint";
    fn fi_ops() -> *const fi_ops {
        &EP_FI_OPS
    }
}

static EP_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(ep_close),
    bind: Some(ep_bind),
    control: Some(ep_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: std::mem::size_of::<fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_shared::tx_ctx_nosys),
    rx_ctx: Some(ep_shared::rx_ctx_nosys),
    rx_size_left: Some(ep_rx_size_left),
    tx_size_left: Some(ep_tx_size_left),
};

static CM_OPS: fi_ops_cm = fi_ops_cm {
    size: std::mem::size_of::<fi_ops_cm>(),
    setname: Some(ep_setname),
    getname: Some(ep_getname),
    getpeer: Some(ep_getpeer),
    connect: Some(ep_connect),
    listen: Some(ep_shared::listen_nosys),
    accept: Some(ep_shared::accept_nosys),
    reject: Some(ep_shared::reject_nosys),
    shutdown: Some(ep_shared::shutdown_nosys),
    join: Some(ep_join),
};

static MSG_OPS: fi_ops_msg = fi_ops_msg {
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

/// `fi_endpoint` for an `FI_EP_DGRAM` info (called by `ep.rs`).
///
/// # Safety
/// `out` must be a valid out pointer (checked non-NULL by the caller).
pub unsafe fn open(d: &DomainObj, info: &Info, out: *mut *mut fid_ep, context: *mut c_void) -> FiResult<c_int> {
    let ep = DgramEp::open(&d.inner, info)?;
    let o = into_c(DgramEpObj {
        fid: fid_ep {
            fid: fid { fclass: FI_CLASS_EP, context, ops: &EP_FI_OPS as *const _ as *mut _ },
            ops: &EP_OPS as *const _ as *mut _,
            cm: &CM_OPS as *const _ as *mut _,
            msg: &MSG_OPS as *const _ as *mut _,
            rma: &super::nosys::RMA_NOSYS as *const _ as *mut _,
            tagged: &super::ep::EP_TAGGED_OPS as *const _ as *mut _,
            atomic: &super::nosys::ATOMIC_NOSYS as *const _ as *mut _,
            collective: &super::nosys::COLLECTIVE_NOSYS as *const _ as *mut _,
        },
        inner: ep,
    });
    // SAFETY: the caller checked `out`.
    unsafe { *out = o as *mut fid_ep };
    Ok(0)
}

unsafe fn ep<'a>(p: *mut fid_ep) -> FiResult<&'a DgramEpObj> {
    // SAFETY: p is a fid per the API.
    unsafe { obj::<DgramEpObj>(p as *const fid) }
}

unsafe extern "C" fn ep_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(dgram ep)", || unsafe { close_obj::<DgramEpObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn ep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard("fi_ep_bind", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<DgramEpObj>(f) }?;
        // SAFETY: bfid is a fid per the API.
        unsafe {
            ep_shared::bind(&*o.inner, bfid, flags, |class| match class {
                // SAFETY: as above (an AV of another kind is refused by `obj`).
                FI_CLASS_AV => Some(obj::<DgramAvObj>(bfid).and_then(|a| o.inner.bind_av(&a.inner, flags))),
                FI_CLASS_EQ => Some(crate::fail!(FiError::NOSYS, "fi_ep_bind: DGRAM endpoints report no events through an EQ")),
                FI_CLASS_SRX_CTX | FI_CLASS_STX_CTX => {
                    Some(crate::fail!(FiError::NOSYS, "fi_ep_bind: shared contexts are not supported on DGRAM endpoints"))
                }
                _ => None,
            })
        }
    })
}

unsafe extern "C" fn ep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(dgram ep)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<DgramEpObj>(f) }?;
        // SAFETY: arg per fi_control(3).
        unsafe { ep_shared::control("dgram ep", &*o.inner, command, arg, |_, _| Ok(())) }
    })
}

unsafe extern "C" fn ep_cancel(f: fid_t, _context: *mut c_void) -> isize {
    guard_size("fi_cancel", || {
        // SAFETY: f is a fid per the API.
        unsafe { obj::<DgramEpObj>(f) }?;
        crate::fail!(FiError::NOSYS, "fi_cancel: not supported on DGRAM endpoints (fi_close flushes posted receives)")
    })
}

unsafe extern "C" fn ep_getopt(f: fid_t, _level: c_int, optname: c_int, _v: *mut c_void, _l: *mut usize) -> c_int {
    guard("fi_getopt", || {
        // SAFETY: f is a fid per the API.
        unsafe { obj::<DgramEpObj>(f) }?;
        // fabtests ask on every run: not worth a warning.
        tracing::info!("fi_getopt: option {optname} not supported on DGRAM endpoints");
        Err(FiError(FI_ENOPROTOOPT))
    })
}

unsafe extern "C" fn ep_setopt(f: fid_t, _level: c_int, optname: c_int, _v: *const c_void, _l: usize) -> c_int {
    guard("fi_setopt", || {
        // SAFETY: f is a fid per the API.
        unsafe { obj::<DgramEpObj>(f) }?;
        // fabtests ask on every run: not worth a warning.
        tracing::info!("fi_setopt: option {optname} not supported on DGRAM endpoints");
        Err(FiError(FI_ENOPROTOOPT))
    })
}

unsafe extern "C" fn ep_rx_size_left(e: *mut fid_ep) -> isize {
    // SAFETY: e is a fid per the API.
    guard_size("fi_rx_size_left", || Ok(unsafe { ep(e) }?.inner.rx_left() as isize))
}
unsafe extern "C" fn ep_tx_size_left(e: *mut fid_ep) -> isize {
    // SAFETY: e is a fid per the API.
    guard_size("fi_tx_size_left", || Ok(unsafe { ep(e) }?.inner.tx_left() as isize))
}

unsafe extern "C" fn ep_setname(f: fid_t, addr: *mut c_void, addrlen: usize) -> c_int {
    guard("fi_setname", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<DgramEpObj>(f) }?;
        if addr.is_null() || addrlen < NAME_LEN {
            return crate::fail!(FiError::INVAL, "fi_setname: a DGRAM address is a {NAME_LEN}-byte FI_ADDR_IB_UD name ({addrlen} given)");
        }
        // SAFETY: addr has addrlen >= NAME_LEN bytes.
        let n = UdName::from_bytes(unsafe { std::slice::from_raw_parts(addr as *const u8, NAME_LEN) }).ok_or(FiError::INVAL)?;
        o.inner.setname(&n).map(|_| 0)
    })
}

unsafe extern "C" fn ep_getname(f: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard("fi_getname", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<DgramEpObj>(f) }?;
        // SAFETY: (addr, addrlen) per fi_cm(3).
        unsafe { write_addr(&o.inner.getname().to_bytes(), addr, addrlen) }
    })
}

unsafe extern "C" fn ep_getpeer(_e: *mut fid_ep, _a: *mut c_void, _l: *mut usize) -> c_int {
    tracing::info!("fi_getpeer: DGRAM endpoints are connectionless");
    FiError::NOSYS.neg()
}
unsafe extern "C" fn ep_connect(_e: *mut fid_ep, _a: *const c_void, _p: *const c_void, _l: usize) -> c_int {
    tracing::info!("fi_connect: DGRAM endpoints are connectionless");
    FiError::NOSYS.neg()
}
unsafe extern "C" fn ep_join(_e: *mut fid_ep, _a: *const c_void, _f: u64, _mc: *mut *mut fid_mc, _c: *mut c_void) -> c_int {
    tracing::info!("fi_join: multicast is not supported on DGRAM endpoints");
    FiError::NOSYS.neg()
}

// ---- messages ----

/// `fi_sendmsg` flags: the DGRAM op flags and `FI_DELIVERY_COMPLETE`. fi_cq(3)
/// says delivery complete applies only to reliable endpoints; on an unreliable
/// one the strongest completion is "delivered to the fabric", which is what a
/// DGRAM send completion reports. libfabric's verbs DGRAM takes the flag the
/// same way, and fabtests 1.22's in-band `ft_sync` sends with it on DGRAM
/// endpoints (`fi_dgram_waitset`). `FI_COMMIT_COMPLETE` and
/// `FI_MATCH_COMPLETE` stay refused (`-FI_EBADFLAGS`).
const TX_FLAGS: u64 = crate::dgram::info::DGRAM_OP_FLAGS | FI_DELIVERY_COMPLETE;
const RX_FLAGS: u64 = FI_COMPLETION | FI_MORE;

#[allow(clippy::too_many_arguments)]
unsafe fn do_send<const N: usize>(
    e: *mut fid_ep,
    b: &[(u64, usize)],
    desc: Option<*mut *mut c_void>,
    dest: fi_addr_t,
    data: Option<u64>,
    ctx: *mut c_void,
    flags: Option<u64>,
    inject: bool,
) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    // SAFETY: buffers and descriptors per fi_msg(3); inject buffers are readable now.
    let v = unsafe { bufs::<N>(b, desc) }?;
    let flags = flags.unwrap_or_else(|| o.inner.tx_op_flags());
    let inject = inject || flags & FI_INJECT != 0;
    o.inner.send(SendReq { iov: v.iov(), descs_ok: v.descs_ok, dest, data, context: ctx as u64, flags, inject })?;
    Ok(0)
}

unsafe fn do_recv<const N: usize>(e: *mut fid_ep, b: &[(u64, usize)], desc: Option<*mut *mut c_void>, ctx: *mut c_void, flags: Option<u64>) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    // SAFETY: buffers and descriptors per fi_msg(3).
    let v = unsafe { bufs::<N>(b, desc) }?;
    let flags = flags.unwrap_or_else(|| o.inner.rx_op_flags());
    o.inner.recv(RecvReq { iov: v.iov(), descs_ok: v.descs_ok, context: ctx as u64, flags })?;
    Ok(0)
}

unsafe extern "C" fn msg_send(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, dest: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_send", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), dest, None, ctx, None, false) }
    })
}

unsafe extern "C" fn msg_sendv(e: *mut fid_ep, iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, dest: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_sendv", || {
        // SAFETY: iov holds count entries per fi_msg(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<MAX_IOV>(e, &b, Some(desc), dest, None, ctx, None, false) }
    })
}

unsafe extern "C" fn msg_sendmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_sendmsg", || {
        // SAFETY: a valid fi_msg per the API.
        let m = unsafe { msg_parts("fi_sendmsg", msg, flags, TX_FLAGS, None) }?;
        // SAFETY: as above.
        unsafe { do_send::<MAX_IOV>(e, &m.bufs, Some(m.desc), m.addr, m.data, m.context, Some(flags), false) }
    })
}

unsafe extern "C" fn msg_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize {
    // SAFETY: arguments per fi_msg(3); inject data is copied before return.
    guard_size("fi_inject", || unsafe { do_send::<1>(e, &[(buf as u64, len)], None, dest, None, std::ptr::null_mut(), None, true) })
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
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), dest, Some(data), ctx, None, false) }
    })
}

unsafe extern "C" fn msg_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t) -> isize {
    guard_size("fi_injectdata", || {
        // SAFETY: arguments per fi_msg(3); inject data is copied before return.
        unsafe { do_send::<1>(e, &[(buf as u64, len)], None, dest, Some(data), std::ptr::null_mut(), None, true) }
    })
}

unsafe extern "C" fn msg_recv(e: *mut fid_ep, buf: *mut c_void, len: usize, desc: *mut c_void, _src: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_recv", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_recv::<1>(e, &[(buf as u64, len)], Some(&mut d), ctx, None) }
    })
}

unsafe extern "C" fn msg_recvv(e: *mut fid_ep, iov: *const libc::iovec, desc: *mut *mut c_void, count: usize, _src: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_recvv", || {
        // SAFETY: iov holds count entries per fi_msg(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_recv::<MAX_IOV>(e, &b, Some(desc), ctx, None) }
    })
}

unsafe extern "C" fn msg_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_recvmsg", || {
        // SAFETY: a valid fi_msg per the API.
        let m = unsafe { msg_parts("fi_recvmsg", msg, flags, RX_FLAGS, Some((FiError::NOSYS, "DGRAM"))) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &m.bufs, Some(m.desc), m.context, Some(flags)) }
    })
}
