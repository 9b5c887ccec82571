//! C shims of shared receive contexts (`fi_srx_context`, MSG endpoints):
//! an `fid_ep` of class `FI_CLASS_SRX_CTX` whose receive calls post to the
//! SRQ (`crate::srx`); the send, RMA, tagged and CM calls of the object
//! answer `-FI_ENOSYS` (or `-FI_EINVAL`: not an endpoint).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::cq::CqObj;
use super::domain::DomainObj;
use super::ep::{bufs_dir, iovec_list, MAX_IOV, MSG_RX_FLAGS};
use super::prov::ops_open_nosys;
use super::util::*;
use crate::error::{FiError, FiResult};
use crate::info::RxAttr;
use crate::srx::Srx;

#[repr(C)]
pub struct SrxObj {
    pub fid: fid_ep,
    pub inner: Arc<Srx>,
}

impl FiObject for SrxObj {
    const CLASS: usize = FI_CLASS_SRX_CTX;
    const NAME: &'static str = "shared receive context";
    fn fi_ops() -> *const fi_ops {
        &SRX_FI_OPS
    }
}

static SRX_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(srx_close),
    bind: Some(srx_bind),
    control: Some(srx_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static SRX_MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: std::mem::size_of::<fi_ops_msg>(),
    recv: Some(srx_recv),
    recvv: Some(srx_recvv),
    recvmsg: Some(srx_recvmsg),
    send: Some(srx_send),
    sendv: Some(srx_sendv),
    sendmsg: Some(srx_sendmsg),
    inject: Some(srx_inject),
    senddata: Some(srx_senddata),
    injectdata: Some(srx_injectdata),
};

/// `fi_srx_context` (the domain's `srx_ctx` op).
pub unsafe extern "C" fn srx_ctx(domain: *mut fid_domain, attr: *mut fi_rx_attr, out: *mut *mut fid_ep, context: *mut c_void) -> c_int {
    guard("fi_srx_context", || {
        // SAFETY: domain is a fid per the API.
        let d = unsafe { obj::<DomainObj>(domain as *const fid) }?;
        let out = nonnull(out, "fi_srx_context: rx_ep")?;
        // SAFETY: attr NULL or a valid fi_rx_attr per the API.
        let a: Option<RxAttr> = unsafe { attr.as_ref() }.map(super::info::rx_from_c);
        let srx = Srx::open(&d.inner, a.as_ref())?;
        let o = into_c(SrxObj {
            fid: fid_ep {
                fid: fid { fclass: FI_CLASS_SRX_CTX, context, ops: &SRX_FI_OPS as *const _ as *mut _ },
                ops: &super::ep::PEP_OPS as *const _ as *mut _,
                cm: &super::ep::PEP_CM_OPS as *const _ as *mut _,
                msg: &SRX_MSG_OPS as *const _ as *mut _,
                rma: &super::ep::EP_RMA_OPS as *const _ as *mut _,
                tagged: &super::ep::EP_TAGGED_OPS as *const _ as *mut _,
                atomic: &super::nosys::ATOMIC_NOSYS as *const _ as *mut _,
                collective: &super::nosys::COLLECTIVE_NOSYS as *const _ as *mut _,
            },
            inner: srx,
        });
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_ep };
        Ok(0)
    })
}

unsafe fn srx<'a>(p: *mut fid_ep) -> FiResult<&'a SrxObj> {
    // SAFETY: p is a fid per the API.
    unsafe { obj::<SrxObj>(p as *const fid) }
}

unsafe extern "C" fn srx_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(srx)", || unsafe { close_obj::<SrxObj>(f, |o| o.inner.close()) })
}

/// `fi_ep_bind(srx, cq, FI_RECV)`: receives may complete on that CQ.
unsafe extern "C" fn srx_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard("fi_ep_bind(srx)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<SrxObj>(f) }?;
        // SAFETY: bfid is a fid per the API.
        match unsafe { class_of(bfid) }? {
            FI_CLASS_CQ => {
                if flags & !(FI_RECV | FI_TRANSMIT | FI_SELECTIVE_COMPLETION) != 0 || flags & FI_RECV == 0 {
                    return crate::fail!(FiError::BADFLAGS, "fi_ep_bind(srx): a CQ binds with FI_RECV (flags {flags:#x})");
                }
                // SAFETY: as above.
                o.inner.attach_cq(&unsafe { obj::<CqObj>(bfid) }?.inner)?;
                Ok(0)
            }
            c => crate::fail!(FiError::INVAL, "fi_ep_bind(srx): cannot bind an object of class {c}"),
        }
    })
}

unsafe extern "C" fn srx_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(srx)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<SrxObj>(f) }?;
        match command {
            FI_GETOPSFLAG | FI_SETOPSFLAG => {
                let get = |tx: bool| if tx { 0 } else { o.inner.rx_op_flags() };
                let set = |tx: bool, bits: u64| {
                    if tx {
                        return crate::fail!(FiError::INVAL, "FI_SETOPSFLAG: a shared receive context has no transmit flags");
                    }
                    if bits & !MSG_RX_FLAGS != 0 {
                        return crate::fail!(FiError::BADFLAGS, "FI_SETOPSFLAG: unsupported flags {:#x}", bits & !MSG_RX_FLAGS);
                    }
                    o.inner.set_rx_op_flags(bits);
                    Ok(())
                };
                // SAFETY: arg per fi_control(3).
                unsafe { super::ep_shared::ops_flag_control(command, arg, get, set) }
            }
            FI_ENABLE => Ok(0),
            c => crate::fail!(FiError::NOSYS, "fi_control(srx): command {c} not supported"),
        }
    })
}

unsafe fn do_recv<const N: usize>(e: *mut fid_ep, b: &[(u64, usize)], desc: Option<*mut *mut c_void>, ctx: *mut c_void) -> FiResult<isize> {
    // SAFETY: e is a fid per the API.
    let o = unsafe { srx(e) }?;
    // SAFETY: buffers and descriptors per fi_msg(3).
    let v = unsafe { bufs_dir::<N>(b, desc, true) }?;
    o.inner.post(v.iov(), v.descs_ok, ctx as u64)?;
    Ok(0)
}

unsafe extern "C" fn srx_recv(e: *mut fid_ep, buf: *mut c_void, len: usize, desc: *mut c_void, _src: fi_addr_t, ctx: *mut c_void) -> isize {
    guard_size("fi_recv(srx)", || {
        let mut d = desc;
        // SAFETY: arguments per fi_msg(3).
        unsafe { do_recv::<1>(e, &[(buf as u64, len)], Some(&mut d), ctx) }
    })
}

unsafe extern "C" fn srx_recvv(
    e: *mut fid_ep,
    iov: *const libc::iovec,
    desc: *mut *mut c_void,
    count: usize,
    _src: fi_addr_t,
    ctx: *mut c_void,
) -> isize {
    guard_size("fi_recvv(srx)", || {
        // SAFETY: arguments per fi_msg(3).
        let b = unsafe { iovec_list(iov, count) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &b, Some(desc), ctx) }
    })
}

unsafe extern "C" fn srx_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    guard_size("fi_recvmsg(srx)", || {
        let msg = nonnull(msg as *mut fi_msg, "fi_recvmsg: msg")?;
        if flags & FI_MULTI_RECV != 0 {
            return crate::fail!(FiError::OPNOTSUPP, "fi_recvmsg(srx): FI_MULTI_RECV is not supported on MSG endpoints");
        }
        if flags & !MSG_RX_FLAGS != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_recvmsg(srx): unsupported flags {:#x}", flags & !MSG_RX_FLAGS);
        }
        // SAFETY: checked non-NULL; a valid fi_msg per the API.
        let m = unsafe { &*msg };
        // SAFETY: as above.
        let b = unsafe { iovec_list(m.msg_iov, m.iov_count) }?;
        // SAFETY: as above.
        unsafe { do_recv::<MAX_IOV>(e, &b, Some(m.desc), m.context) }
    })
}

fn no_send(what: &str) -> isize {
    tracing::info!("{what}: a shared receive context does not send");
    FiError::NOSYS.neg() as isize
}

unsafe extern "C" fn srx_send(_e: *mut fid_ep, _b: *const c_void, _l: usize, _d: *mut c_void, _a: fi_addr_t, _c: *mut c_void) -> isize {
    no_send("fi_send")
}
unsafe extern "C" fn srx_sendv(
    _e: *mut fid_ep,
    _i: *const libc::iovec,
    _d: *mut *mut c_void,
    _n: usize,
    _a: fi_addr_t,
    _c: *mut c_void,
) -> isize {
    no_send("fi_sendv")
}
unsafe extern "C" fn srx_sendmsg(_e: *mut fid_ep, _m: *const fi_msg, _f: u64) -> isize {
    no_send("fi_sendmsg")
}
unsafe extern "C" fn srx_inject(_e: *mut fid_ep, _b: *const c_void, _l: usize, _a: fi_addr_t) -> isize {
    no_send("fi_inject")
}
unsafe extern "C" fn srx_senddata(
    _e: *mut fid_ep,
    _b: *const c_void,
    _l: usize,
    _d: *mut c_void,
    _x: u64,
    _a: fi_addr_t,
    _c: *mut c_void,
) -> isize {
    no_send("fi_senddata")
}
unsafe extern "C" fn srx_injectdata(_e: *mut fid_ep, _b: *const c_void, _l: usize, _x: u64, _a: fi_addr_t) -> isize {
    no_send("fi_injectdata")
}
