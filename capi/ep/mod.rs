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

mod msg;
mod pep;
mod rma;

pub(crate) use msg::{bufs, bufs_dir, iovec_list, MAX_IOV, MSG_RX_FLAGS};
pub(crate) use rma::{rma1, rma_msg_parts};
pub use pep::{pep_lookup, pep_open, PepObj};
pub(crate) use pep::{PEP_CM_OPS, PEP_OPS};
use msg::*;
use pep::*;
use rma::*;

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
