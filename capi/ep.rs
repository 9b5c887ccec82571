//! Endpoint objects: active MSG endpoints (with their msg/rma/cm ops),
//! passive endpoints, and connection-request handles.

use std::collections::HashSet;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::domain::DomainObj;
use super::ep_shared::{self, msg_parts};
use super::eq::EqObj;
use super::prov::{control_nosys, ops_open_nosys, FabricObj};
use super::util::*;
use crate::cq::OpKind;
use crate::ep::{desc_lkey, ConnReq, MsgEp, Pep};
use crate::error::{FiError, FiResult};
use crate::info::CM_DATA_SIZE;
use crate::sys;
use crate::verbs::{Iov, SendOp};

// ---- connection-request handles ----

#[repr(C)]
pub struct ConnReqObj {
    pub fid: fid,
    pub inner: Arc<ConnReq>,
}

static CONNREQ_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(connreq_close),
    bind: None,
    control: None,
    ops_open: None,
    tostr: None,
    ops_set: None,
};

/// Live connection-request handles. Handles are checked against this set
/// before use, so a stale or foreign handle gives `-FI_EINVAL`, never a wild read.
static CONNREQS: Lazy<Mutex<HashSet<usize>>> = Lazy::new(|| Mutex::new(HashSet::new()));

/// Creates the C handle for a connection request (put in `fi_info->handle`).
pub fn connreq_new(req: Arc<ConnReq>) -> *mut fid {
    let o = into_c(ConnReqObj {
        fid: fid { fclass: FI_CLASS_CONNREQ, context: std::ptr::null_mut(), ops: &CONNREQ_FI_OPS as *const _ as *mut _ },
        inner: req,
    });
    CONNREQS.lock().insert(o as usize);
    o as *mut fid
}

/// The connection request behind a handle, if it is a live one of ours.
///
/// # Safety
/// None beyond the fid contract: the pointer is only dereferenced if registered.
pub unsafe fn connreq_lookup(h: *mut fid) -> Option<Arc<ConnReq>> {
    if CONNREQS.lock().contains(&(h as usize)) {
        // SAFETY: registered pointers are live ConnReqObj boxes.
        Some(unsafe { &*(h as *const ConnReqObj) }.inner.clone())
    } else {
        None
    }
}

/// Frees a handle (after accept-side endpoint creation or reject).
fn connreq_free(h: *mut fid) {
    if CONNREQS.lock().remove(&(h as usize)) {
        // SAFETY: it was registered, so it is a live box from connreq_new; removed once.
        unsafe { free_c(h as *mut ConnReqObj) };
    }
}

unsafe extern "C" fn connreq_close(f: *mut fid) -> c_int {
    connreq_free(f);
    0
}

// ---- active endpoints ----

#[repr(C)]
pub struct EpObj {
    pub fid: fid_ep,
    pub inner: Arc<MsgEp>,
}

impl FiObject for EpObj {
    const CLASS: usize = FI_CLASS_EP;
    const NAME: &'static str = "endpoint";
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
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_size_left),
    tx_size_left: Some(ep_size_left),
};

static EP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: std::mem::size_of::<fi_ops_cm>(),
    setname: Some(ep_setname),
    getname: Some(ep_getname),
    getpeer: Some(ep_getpeer),
    connect: Some(ep_connect),
    listen: Some(ep_listen),
    accept: Some(ep_accept),
    reject: Some(pep_reject),
    shutdown: Some(ep_shutdown),
    join: Some(ep_join),
};

static EP_MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: std::mem::size_of::<fi_ops_msg>(),
    recv: Some(ep_recv),
    recvv: Some(ep_recvv),
    recvmsg: Some(ep_recvmsg),
    send: Some(ep_send),
    sendv: Some(ep_sendv),
    sendmsg: Some(ep_sendmsg),
    inject: Some(ep_inject),
    senddata: Some(ep_senddata),
    injectdata: Some(ep_injectdata),
};

pub(crate) static EP_RMA_OPS: fi_ops_rma = fi_ops_rma {
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

pub(crate) static EP_TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: std::mem::size_of::<fi_ops_tagged>(),
    recv: Some(tagged_recv),
    recvv: Some(tagged_recvv),
    recvmsg: Some(tagged_recvmsg),
    send: Some(tagged_send),
    sendv: Some(tagged_sendv),
    sendmsg: Some(tagged_sendmsg),
    inject: Some(tagged_inject),
    senddata: Some(tagged_senddata),
    injectdata: Some(tagged_injectdata),
};

unsafe fn ep_common(domain: *mut fid_domain, info: *mut fi_info, out: *mut *mut fid_ep, flags: u64, context: *mut c_void) -> FiResult<c_int> {
    // SAFETY: domain is a fid per the API.
    let d = unsafe { obj::<DomainObj>(domain as *const fid) }?;
    let out = nonnull(out, "fi_endpoint: ep")?;
    let info = nonnull(info, "fi_endpoint: info")?;
    if flags != 0 {
        return crate::fail!(FiError::BADFLAGS, "fi_endpoint2: flags {flags:#x} not supported");
    }
    // SAFETY: a valid fi_info per the API.
    let handle = unsafe { (*info).handle };
    // SAFETY: as above.
    let i = unsafe { super::info::from_c(info, 0) }?;
    if !handle.is_null() && i.handle.is_none() && i.pep.is_none() {
        return crate::fail!(
            FiError::INVAL,
            "fi_endpoint: info->handle is neither a pending connection request nor a passive endpoint of this provider"
        );
    }
    if i.ep.type_ == FI_EP_RDM {
        // SAFETY: `out` checked non-NULL above.
        return unsafe { super::rdm::open(d, &i, out, context) };
    }
    if i.ep.type_ == FI_EP_DGRAM {
        // SAFETY: `out` checked non-NULL above.
        return unsafe { super::dgram::open(d, &i, out, context) };
    }
    let ep = MsgEp::open(&d.inner, &i)?;
    if !handle.is_null() {
        // The endpoint now owns the connection; the handle is spent.
        connreq_free(handle);
    }
    let o = into_c(EpObj {
        fid: fid_ep {
            fid: fid { fclass: FI_CLASS_EP, context, ops: &EP_FI_OPS as *const _ as *mut _ },
            ops: &EP_OPS as *const _ as *mut _,
            cm: &EP_CM_OPS as *const _ as *mut _,
            msg: &EP_MSG_OPS as *const _ as *mut _,
            rma: &EP_RMA_OPS as *const _ as *mut _,
            tagged: &EP_TAGGED_OPS as *const _ as *mut _,
            atomic: &super::nosys::ATOMIC_NOSYS as *const _ as *mut _,
            collective: &super::nosys::COLLECTIVE_NOSYS as *const _ as *mut _,
        },
        inner: ep,
    });
    // SAFETY: o is our fresh box.
    unsafe { (*o).inner.set_fid(o as usize) };
    // SAFETY: checked non-NULL.
    unsafe { *out = o as *mut fid_ep };
    Ok(0)
}

pub unsafe extern "C" fn ep_open(domain: *mut fid_domain, info: *mut fi_info, out: *mut *mut fid_ep, context: *mut c_void) -> c_int {
    // SAFETY: arguments per fi_endpoint(3).
    guard("fi_endpoint", || unsafe { ep_common(domain, info, out, 0, context) })
}

pub unsafe extern "C" fn ep_open2(domain: *mut fid_domain, info: *mut fi_info, out: *mut *mut fid_ep, flags: u64, context: *mut c_void) -> c_int {
    // SAFETY: arguments per fi_endpoint(3).
    guard("fi_endpoint2", || unsafe { ep_common(domain, info, out, flags, context) })
}

#[inline(always)]
unsafe fn ep<'a>(p: *mut fid_ep) -> FiResult<&'a EpObj> {
    // SAFETY: p is a fid per the API.
    unsafe { obj::<EpObj>(p as *const fid) }
}

unsafe extern "C" fn ep_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(ep)", || unsafe { close_obj::<EpObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn ep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard("fi_ep_bind", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<EpObj>(f) }?;
        // SAFETY: bfid is a fid per the API.
        unsafe {
            ep_shared::bind(&*o.inner, bfid, flags, |class| match class {
                // SAFETY: as above.
                FI_CLASS_EQ => Some(obj::<EqObj>(bfid).and_then(|q| o.inner.bind_eq(&q.inner, flags))),
                FI_CLASS_AV => Some(crate::fail!(FiError::INVAL, "fi_ep_bind: MSG endpoints take no address vector")),
                // SAFETY: as above.
                FI_CLASS_SRX_CTX => Some(obj::<super::srx::SrxObj>(bfid).and_then(|x| o.inner.bind_srx(&x.inner, flags))),
                FI_CLASS_STX_CTX => Some(crate::fail!(
                    FiError::NOSYS,
                    "fi_ep_bind: shared transmit contexts are not supported (verbs has no shared send queue)"
                )),
                _ => None,
            })
        }
    })
}

unsafe extern "C" fn ep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(ep)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<EpObj>(f) }?;
        let check = |tx: bool, bits: u64| {
            if !tx && bits & FI_MULTI_RECV != 0 {
                return crate::fail!(FiError::OPNOTSUPP, "FI_SETOPSFLAG: FI_MULTI_RECV is not supported on MSG endpoints");
            }
            let allowed = if tx { MSG_TX_FLAGS } else { MSG_RX_FLAGS };
            if bits & !allowed != 0 {
                return crate::fail!(FiError::BADFLAGS, "FI_SETOPSFLAG: unsupported flags {:#x}", bits & !allowed);
            }
            Ok(())
        };
        // SAFETY: arg per fi_control(3).
        unsafe { ep_shared::control("ep", &*o.inner, command, arg, check) }
    })
}

unsafe extern "C" fn ep_cancel(f: fid_t, _context: *mut c_void) -> isize {
    guard_size("fi_cancel", || {
        // SAFETY: f is a fid per the API.
        unsafe { obj::<EpObj>(f) }?;
        crate::fail!(FiError::NOSYS, "fi_cancel: verbs cannot cancel single posted requests on MSG endpoints")
    })
}

unsafe extern "C" fn ep_getopt(f: fid_t, level: c_int, optname: c_int, optval: *mut c_void, optlen: *mut usize) -> c_int {
    guard("fi_getopt", || {
        // SAFETY: f is a fid per the API (an EP or a PEP).
        let class = unsafe { class_of(f) }?;
        if class == FI_CLASS_EP {
            // SAFETY: as above.
            unsafe { obj::<EpObj>(f) }?;
        } else {
            // SAFETY: as above.
            unsafe { obj::<PepObj>(f) }?;
        }
        if level != FI_OPT_ENDPOINT {
            return crate::fail!(FiError::NOPROTOOPT(), "fi_getopt: level {level} not supported");
        }
        match optname {
            FI_OPT_CM_DATA_SIZE => {
                let optlen = nonnull(optlen, "fi_getopt: optlen")?;
                // SAFETY: caller-owned size_t.
                if unsafe { *optlen } < std::mem::size_of::<usize>() || optval.is_null() {
                    // SAFETY: as above.
                    unsafe { *optlen = std::mem::size_of::<usize>() };
                    return crate::fail!(FiError::TOOSMALL, "fi_getopt: buffer too small for FI_OPT_CM_DATA_SIZE");
                }
                // SAFETY: the caller said a size_t fits.
                unsafe {
                    *(optval as *mut usize) = CM_DATA_SIZE;
                    *optlen = std::mem::size_of::<usize>();
                }
                Ok(0)
            }
            o => crate::fail!(FiError::NOPROTOOPT(), "fi_getopt: option {o} not supported"),
        }
    })
}

impl FiError {
    #[allow(non_snake_case)]
    fn NOPROTOOPT() -> FiError {
        FiError(FI_ENOPROTOOPT)
    }
}

unsafe extern "C" fn ep_setopt(f: fid_t, level: c_int, optname: c_int, _optval: *const c_void, _optlen: usize) -> c_int {
    guard("fi_setopt", || {
        // SAFETY: f is a fid per the API.
        let _ = unsafe { class_of(f) }?;
        if level != FI_OPT_ENDPOINT {
            return crate::fail!(FiError::NOPROTOOPT(), "fi_setopt: level {level} not supported");
        }
        match optname {
            FI_OPT_CM_DATA_SIZE => crate::fail!(FiError::INVAL, "fi_setopt: FI_OPT_CM_DATA_SIZE is read-only"),
            o => crate::fail!(FiError::NOPROTOOPT(), "fi_setopt: option {o} not supported on MSG endpoints"),
        }
    })
}

unsafe extern "C" fn ep_tx_ctx(_s: *mut fid_ep, _i: c_int, _a: *mut fi_tx_attr, _t: *mut *mut fid_ep, _c: *mut c_void) -> c_int {
    FiError::NOSYS.neg()
}
unsafe extern "C" fn ep_rx_ctx(_s: *mut fid_ep, _i: c_int, _a: *mut fi_rx_attr, _t: *mut *mut fid_ep, _c: *mut c_void) -> c_int {
    FiError::NOSYS.neg()
}
unsafe extern "C" fn ep_size_left(_e: *mut fid_ep) -> isize {
    FiError::NOSYS.neg() as isize
}

unsafe extern "C" fn ep_setname(_f: fid_t, _addr: *mut c_void, _len: usize) -> c_int {
    tracing::info!("fi_setname: not supported on active MSG endpoints (set info->src_addr)");
    FiError::NOSYS.neg()
}

unsafe extern "C" fn ep_getname(f: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard("fi_getname", || {
        // SAFETY: f is a fid per the API.
        let a = match unsafe { class_of(f) }? {
            // SAFETY: as above.
            FI_CLASS_PEP => unsafe { obj::<PepObj>(f) }?.inner.local_addr(),
            // SAFETY: as above.
            _ => unsafe { obj::<EpObj>(f) }?.inner.local_addr(),
        };
        let Some(a) = a else {
            return crate::fail!(FiError::ADDRNOTAVAIL(), "fi_getname: endpoint has no address yet");
        };
        // SAFETY: (addr, addrlen) per fi_cm(3).
        unsafe { write_addr(&sys::sockaddr_bytes(&a), addr, addrlen) }
    })
}

impl FiError {
    #[allow(non_snake_case)]
    fn ADDRNOTAVAIL() -> FiError {
        FiError(FI_EADDRNOTAVAIL)
    }
}

unsafe extern "C" fn ep_getpeer(e: *mut fid_ep, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard("fi_getpeer", || {
        // SAFETY: e is a fid per the API.
        let o = unsafe { ep(e) }?;
        let Some(a) = o.inner.peer_addr() else {
            return crate::fail!(FiError::NOTCONN, "fi_getpeer: endpoint has no peer");
        };
        // SAFETY: (addr, addrlen) per fi_cm(3).
        unsafe { write_addr(&sys::sockaddr_bytes(&a), addr, addrlen) }
    })
}

/// Reads CM private data from the application.
/// More than FI_OPT_CM_DATA_SIZE bytes: `-FI_EINVAL`, as libfabric's verbs
/// provider answers (and fabtests' fi_cm_data expects); nothing is truncated.
unsafe fn cm_param<'a>(param: *const c_void, len: usize, what: &str) -> FiResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if param.is_null() {
        return crate::fail!(FiError::INVAL, "CM data pointer is NULL with length {len}");
    }
    if len > CM_DATA_SIZE {
        return crate::fail!(FiError::INVAL, "{what}: {len} bytes of CM data, more than FI_OPT_CM_DATA_SIZE ({CM_DATA_SIZE})");
    }
    // SAFETY: the caller passes `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(param as *const u8, len) })
}

unsafe extern "C" fn ep_connect(e: *mut fid_ep, addr: *const c_void, param: *const c_void, len: usize) -> c_int {
    guard("fi_connect", || {
        // SAFETY: e is a fid per the API.
        let o = unsafe { ep(e) }?;
        // SAFETY: addr is NULL or a sockaddr per fi_cm(3).
        let a = unsafe { sys::sockaddr_from_ptr(addr as *const libc::sockaddr) };
        if !addr.is_null() && a.is_none() {
            return crate::fail!(FiError::INVAL, "fi_connect: address is not sockaddr_in/sockaddr_in6");
        }
        // SAFETY: param has len bytes.
        let data = unsafe { cm_param(param, len, "fi_connect") }?;
        o.inner.connect(a, data).map(|_| 0)
    })
}

unsafe extern "C" fn ep_listen(_p: *mut fid_pep) -> c_int {
    FiError::NOSYS.neg()
}

unsafe extern "C" fn ep_accept(e: *mut fid_ep, param: *const c_void, len: usize) -> c_int {
    guard("fi_accept", || {
        // SAFETY: e is a fid per the API.
        let o = unsafe { ep(e) }?;
        // SAFETY: param has len bytes.
        let data = unsafe { cm_param(param, len, "fi_accept") }?;
        o.inner.accept(data).map(|_| 0)
    })
}

unsafe extern "C" fn ep_shutdown(e: *mut fid_ep, flags: u64) -> c_int {
    guard("fi_shutdown", || {
        // SAFETY: e is a fid per the API.
        unsafe { ep(e) }?.inner.shutdown(flags).map(|_| 0)
    })
}

unsafe extern "C" fn ep_join(_e: *mut fid_ep, _a: *const c_void, _f: u64, _mc: *mut *mut fid_mc, _c: *mut c_void) -> c_int {
    FiError::NOSYS.neg()
}

// ---- data path ----

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

const MSG_TX_FLAGS: u64 = FI_COMPLETION
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
unsafe fn do_send<const N: usize>(
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

unsafe extern "C" fn ep_send(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, _dest: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_send", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], Some(&mut d), None, ctx, None, false) }
    })
}

unsafe extern "C" fn ep_sendv(
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

unsafe extern "C" fn ep_sendmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_sendmsg", || {
        // SAFETY: a valid fi_msg per the API.
        let m = unsafe { msg_parts("fi_sendmsg", msg, flags, MSG_TX_FLAGS, None) }?;
        // SAFETY: as above.
        unsafe { do_send::<MAX_IOV>(e, &m.bufs, Some(m.desc), m.data, m.context, Some(flags), false) }
    })
}

unsafe extern "C" fn ep_inject(e: *mut fid_ep, buf: *const c_void, len: usize, _dest: fi_addr_t) -> isize {
    // SAFETY: arguments per fi_msg(3); inject data is copied before return.
    guard_size("fi_inject", || unsafe { do_send::<1>(e, &[(buf as u64, len)], None, None, std::ptr::null_mut(), Some(FI_INJECT), true) })
}

unsafe extern "C" fn ep_senddata(
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

unsafe extern "C" fn ep_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, _dest: fi_addr_t) -> isize {
    guard_size("fi_injectdata", || {
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_send::<1>(e, &[(buf as u64, len)], None, Some(data), std::ptr::null_mut(), Some(FI_INJECT), true) }
    })
}

/// `flags`: None for the endpoint's default op flags.
#[inline(always)]
unsafe fn do_recv<const N: usize>(e: *mut fid_ep, b: &[(u64, usize)], desc: Option<*mut *mut c_void>, ctx: *mut c_void, flags: Option<u64>) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { ep(e) }?;
    // SAFETY: buffers and descriptors per fi_msg(3).
    let v = unsafe { bufs_dir::<N>(b, desc, true) }?;
    let flags = flags.unwrap_or_else(|| o.inner.rx_op_flags());
    o.inner.post_rx(v.iov(), v.descs_ok, ctx as u64, flags)?;
    Ok(0)
}

unsafe extern "C" fn ep_recv(e: *mut fid_ep, buf: *mut c_void, len: usize, desc: *mut c_void, _src: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_recv", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_recv::<1>(e, &[(buf as u64, len)], Some(&mut d), ctx, None) }
    })
}

unsafe extern "C" fn ep_recvv(
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

unsafe extern "C" fn ep_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_recvmsg", || {
        // SAFETY: a valid fi_msg per the API.
        let m = unsafe { msg_parts("fi_recvmsg", msg, flags, MSG_RX_FLAGS, Some((FiError::OPNOTSUPP, "MSG"))) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &m.bufs, Some(m.desc), m.context, Some(flags)) }
    })
}

// ---- RMA ----

/// `flags`: None for the endpoint's default op flags (the calls without a
/// flags argument). Inlined into each shim: the endpoint is checked once,
/// and a one-buffer call makes one call frame, not three.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn do_rma<const N: usize>(
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
unsafe fn rma_one(e: *mut fid_ep, read: bool, buf: u64, len: usize, desc: *mut c_void, addr: u64, key: u64, ctx: *mut c_void) -> FiResult<isize> {
    let mut d = desc;
    // SAFETY: arguments per fi_rma(3).
    unsafe { do_rma::<1>(e, read, &[(buf, len)], Some(&mut d), &rma1(addr, len, key), None, ctx, None, false) }
}

/// `fi_readv`/`fi_writev`: an iovec list, the endpoint's default op flags.
#[allow(clippy::too_many_arguments)]
unsafe fn rma_vec(
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

unsafe extern "C" fn rma_read(
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

unsafe extern "C" fn rma_readv(
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

const RMA_FLAGS: u64 = FI_COMPLETION
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

unsafe fn rma_msg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64, read: bool) -> FiResult<isize> {
    // SAFETY: msg per fi_rma(3).
    let r = unsafe { rma_msg_parts(msg, flags, read, RMA_FLAGS) }?;
    // SAFETY: as above.
    unsafe { do_rma::<MAX_IOV>(e, read, &r.bufs, Some(r.m.desc), r.rma, r.data, r.m.context, Some(flags), false) }
}

unsafe extern "C" fn rma_readmsg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_readmsg", || unsafe { rma_msg(e, msg, flags, true) })
}

unsafe extern "C" fn rma_writemsg(e: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: arguments per fi_rma(3).
    guard_size("fi_writemsg", || unsafe { rma_msg(e, msg, flags, false) })
}

unsafe extern "C" fn rma_write(
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

unsafe extern "C" fn rma_writev(
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

unsafe extern "C" fn rma_inject(e: *mut fid_ep, buf: *const c_void, len: usize, _dest: fi_addr_t, addr: u64, key: u64) -> isize {
    guard_size("fi_inject_write", || {
        // SAFETY: arguments per fi_rma(3); inject data is copied before return.
        unsafe { do_rma::<1>(e, false, &[(buf as u64, len)], None, &rma1(addr, len, key), None, std::ptr::null_mut(), Some(FI_INJECT), true) }
    })
}

unsafe extern "C" fn rma_writedata(
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

unsafe extern "C" fn rma_injectdata(
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

fn tagged_nosys() -> isize {
    tracing::info!("tagged messages are not supported on MSG endpoints (caps has no FI_TAGGED)");
    FiError::NOSYS.neg() as isize
}
unsafe extern "C" fn tagged_recv(_e: *mut fid_ep, _b: *mut c_void, _l: usize, _d: *mut c_void, _s: fi_addr_t, _t: u64, _i: u64, _c: *mut c_void) -> isize {
    tagged_nosys()
}
unsafe extern "C" fn tagged_recvv(
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
unsafe extern "C" fn tagged_recvmsg(_e: *mut fid_ep, _m: *const fi_msg_tagged, _f: u64) -> isize {
    tagged_nosys()
}
unsafe extern "C" fn tagged_send(_e: *mut fid_ep, _b: *const c_void, _l: usize, _d: *mut c_void, _a: fi_addr_t, _t: u64, _c: *mut c_void) -> isize {
    tagged_nosys()
}
unsafe extern "C" fn tagged_sendv(
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
unsafe extern "C" fn tagged_sendmsg(_e: *mut fid_ep, _m: *const fi_msg_tagged, _f: u64) -> isize {
    tagged_nosys()
}
unsafe extern "C" fn tagged_inject(_e: *mut fid_ep, _b: *const c_void, _l: usize, _a: fi_addr_t, _t: u64) -> isize {
    tagged_nosys()
}
unsafe extern "C" fn tagged_senddata(
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
unsafe extern "C" fn tagged_injectdata(_e: *mut fid_ep, _b: *const c_void, _l: usize, _x: u64, _a: fi_addr_t, _t: u64) -> isize {
    tagged_nosys()
}

// ---- passive endpoints ----

#[repr(C)]
pub struct PepObj {
    pub fid: fid_pep,
    pub inner: Arc<Pep>,
}

impl FiObject for PepObj {
    const CLASS: usize = FI_CLASS_PEP;
    const NAME: &'static str = "passive endpoint";
    fn fi_ops() -> *const fi_ops {
        &PEP_FI_OPS
    }
}

static PEP_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(pep_close),
    bind: Some(pep_bind),
    control: Some(pep_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

pub(crate) static PEP_OPS: fi_ops_ep = fi_ops_ep {
    size: std::mem::size_of::<fi_ops_ep>(),
    cancel: Some(pep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_size_left),
    tx_size_left: Some(ep_size_left),
};

pub(crate) static PEP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: std::mem::size_of::<fi_ops_cm>(),
    setname: Some(pep_setname),
    getname: Some(ep_getname),
    getpeer: Some(pep_getpeer),
    connect: Some(pep_connect),
    listen: Some(pep_listen),
    accept: Some(pep_accept),
    reject: Some(pep_reject),
    shutdown: Some(pep_shutdown),
    join: Some(ep_join),
};

pub unsafe extern "C" fn pep_open(fabric: *mut fid_fabric, info: *mut fi_info, out: *mut *mut fid_pep, context: *mut c_void) -> c_int {
    guard("fi_passive_ep", || {
        // SAFETY: fabric is a fid per the API.
        let f = unsafe { obj::<FabricObj>(fabric as *const fid) }?;
        let out = nonnull(out, "fi_passive_ep: pep")?;
        let info = nonnull(info, "fi_passive_ep: info")?;
        // SAFETY: a valid fi_info per the API.
        let i = unsafe { super::info::from_c(info, 0) }?;
        let pep = Pep::open(&f.inner, &i)?;
        let o = into_c(PepObj {
            fid: fid_pep {
                fid: fid { fclass: FI_CLASS_PEP, context, ops: &PEP_FI_OPS as *const _ as *mut _ },
                ops: &PEP_OPS as *const _ as *mut _,
                cm: &PEP_CM_OPS as *const _ as *mut _,
            },
            inner: pep,
        });
        // SAFETY: o is our fresh box.
        unsafe { (*o).inner.set_fid(o as usize) };
        PEPS.lock().insert(o as usize);
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_pep };
        Ok(0)
    })
}

/// The passive endpoint behind an `fi_info->handle`, if it is one of ours.
///
/// # Safety
/// `h` must point to a readable `struct fid` (the libfabric contract).
pub unsafe fn pep_lookup(h: *mut fid) -> Option<Arc<Pep>> {
    let peps = PEPS.lock();
    if !peps.contains(&(h as usize)) {
        return None;
    }
    // SAFETY: registered pointers are live PepObj boxes (removed before they are freed, under this lock).
    Some(unsafe { &*(h as *const PepObj) }.inner.clone())
}

/// Live passive endpoints: an `info->handle` is dereferenced only if it is
/// one of them (a bogus handle gives `-FI_EINVAL`, never a wild read).
static PEPS: Lazy<Mutex<HashSet<usize>>> = Lazy::new(|| Mutex::new(HashSet::new()));

unsafe fn pep<'a>(p: *mut fid_pep) -> FiResult<&'a PepObj> {
    // SAFETY: p is a fid per the API.
    unsafe { obj::<PepObj>(p as *const fid) }
}

unsafe extern "C" fn pep_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(pep)", || unsafe {
        close_obj::<PepObj>(f, |o| {
            o.inner.close()?;
            PEPS.lock().remove(&(f as usize));
            Ok(())
        })
    })
}

unsafe extern "C" fn pep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard("fi_pep_bind", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<PepObj>(f) }?;
        // SAFETY: bfid is a fid per the API.
        match unsafe { class_of(bfid) }? {
            // SAFETY: as above.
            FI_CLASS_EQ => o.inner.bind_eq(&unsafe { obj::<EqObj>(bfid) }?.inner, flags).map(|_| 0),
            c => crate::fail!(FiError::INVAL, "fi_pep_bind: cannot bind an object of class {c} (only an EQ)"),
        }
    })
}

unsafe extern "C" fn pep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(pep)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<PepObj>(f) }?;
        match command {
            FI_BACKLOG => {
                let p = nonnull(arg as *mut c_int, "FI_BACKLOG argument")?;
                // SAFETY: an int per fi_control(3).
                let v = unsafe { *p };
                if v <= 0 {
                    return crate::fail!(FiError::INVAL, "FI_BACKLOG: {v} is not positive");
                }
                o.inner.set_backlog(v as u32);
                Ok(0)
            }
            // SAFETY: delegated with the same arguments.
            c => Ok(unsafe { control_nosys(f, c, arg) }),
        }
    })
}

unsafe extern "C" fn pep_cancel(_f: fid_t, _c: *mut c_void) -> isize {
    FiError::NOSYS.neg() as isize
}

unsafe extern "C" fn pep_setname(f: fid_t, addr: *mut c_void, addrlen: usize) -> c_int {
    guard("fi_setname", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<PepObj>(f) }?;
        // SAFETY: addr has addrlen bytes.
        let Some(a) = (unsafe { super::info::read_addr(addr, addrlen, "fi_setname") })? else {
            return crate::fail!(FiError::INVAL, "fi_setname: no address");
        };
        o.inner.setname(&a).map(|_| 0)
    })
}

unsafe extern "C" fn pep_getpeer(_e: *mut fid_ep, _a: *mut c_void, _l: *mut usize) -> c_int {
    FiError::NOSYS.neg()
}
unsafe extern "C" fn pep_connect(_e: *mut fid_ep, _a: *const c_void, _p: *const c_void, _l: usize) -> c_int {
    FiError::NOSYS.neg()
}
unsafe extern "C" fn pep_accept(_e: *mut fid_ep, _p: *const c_void, _l: usize) -> c_int {
    FiError::NOSYS.neg()
}
unsafe extern "C" fn pep_shutdown(_e: *mut fid_ep, _f: u64) -> c_int {
    FiError::NOSYS.neg()
}

unsafe extern "C" fn pep_listen(p: *mut fid_pep) -> c_int {
    guard("fi_listen", || {
        // SAFETY: p is a fid per the API.
        unsafe { pep(p) }?.inner.listen().map(|_| 0)
    })
}

unsafe extern "C" fn pep_reject(p: *mut fid_pep, handle: fid_t, param: *const c_void, len: usize) -> c_int {
    guard("fi_reject", || {
        // SAFETY: p is a fid per the API.
        unsafe { pep(p) }?;
        // SAFETY: only registered handles are dereferenced.
        let Some(req) = (unsafe { connreq_lookup(handle) }) else {
            return crate::fail!(FiError::INVAL, "fi_reject: not a pending connection request");
        };
        // SAFETY: param has len bytes.
        let data = unsafe { cm_param(param, len, "fi_reject") }?;
        let r = req.reject(data);
        connreq_free(handle);
        r.map(|_| 0)
    })
}
