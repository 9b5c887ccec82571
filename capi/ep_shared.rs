//! Pieces of the endpoint shims that every endpoint kind (MSG in `ep.rs`, RDM
//! in `rdm.rs`, DGRAM in `dgram.rs`) needs in the same form: `fi_control`'s
//! enable and op-flag commands, the CQ/counter half of `fi_ep_bind`, the
//! checking and conversion of an `fi_msg`, and the entry points that are
//! `-FI_ENOSYS` on every connectionless endpoint. One copy, so a fix to the
//! checks reaches all kinds.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::cntr::CntrObj;
use super::cq::CqObj;
use super::ep::iovec_list;
use super::util::{class_of, nonnull, obj};
use crate::cntr::Cntr;
use crate::cq::Cq;
use crate::error::{FiError, FiResult};
use crate::fi::abi::*;
use crate::fi::consts::*;

/// What the shared shims call on an endpoint of the core.
pub(crate) trait ActiveEp {
    fn enable(&self) -> FiResult<()>;
    fn tx_op_flags(&self) -> u64;
    fn rx_op_flags(&self) -> u64;
    fn set_tx_op_flags(&self, f: u64);
    fn set_rx_op_flags(&self, f: u64);
    fn bind_cq(&self, cq: &Arc<Cq>, flags: u64) -> FiResult<()>;
    fn bind_cntr(&self, cntr: &Arc<Cntr>, flags: u64) -> FiResult<()>;
}

/// Implements [`ActiveEp`] by the endpoint's inherent methods of the same names.
macro_rules! active_ep {
    ($($t:ty),*) => {$(
        impl ActiveEp for $t {
            fn enable(&self) -> FiResult<()> { <$t>::enable(self) }
            fn tx_op_flags(&self) -> u64 { <$t>::tx_op_flags(self) }
            fn rx_op_flags(&self) -> u64 { <$t>::rx_op_flags(self) }
            fn set_tx_op_flags(&self, f: u64) { <$t>::set_tx_op_flags(self, f) }
            fn set_rx_op_flags(&self, f: u64) { <$t>::set_rx_op_flags(self, f) }
            fn bind_cq(&self, cq: &Arc<Cq>, flags: u64) -> FiResult<()> { <$t>::bind_cq(self, cq, flags) }
            fn bind_cntr(&self, cntr: &Arc<Cntr>, flags: u64) -> FiResult<()> { <$t>::bind_cntr(self, cntr, flags) }
        }
    )*};
}
active_ep!(crate::ep::MsgEp, crate::rdm::ep::RdmEp, crate::dgram::ep::DgramEp);

/// `fi_control` on an endpoint: `FI_ENABLE`, `FI_GETOPSFLAG` and
/// `FI_SETOPSFLAG`; `check(tx, bits)` vets the flags before they are set.
/// `what` names the object in the log ("rdm ep").
///
/// # Safety
/// `arg` per fi_control(3) for `command`.
pub(crate) unsafe fn control<E: ActiveEp>(
    what: &str,
    ep: &E,
    command: c_int,
    arg: *mut c_void,
    check: impl FnOnce(bool, u64) -> FiResult<()>,
) -> FiResult<c_int> {
    match command {
        FI_ENABLE => ep.enable().map(|_| 0),
        FI_GETOPSFLAG | FI_SETOPSFLAG => {
            let get = |tx: bool| if tx { ep.tx_op_flags() } else { ep.rx_op_flags() };
            let set = |tx: bool, bits: u64| {
                check(tx, bits)?;
                if tx {
                    ep.set_tx_op_flags(bits)
                } else {
                    ep.set_rx_op_flags(bits)
                }
                Ok(())
            };
            // SAFETY: arg per fi_control(3), the caller's contract.
            unsafe { ops_flag_control(command, arg, get, set) }
        }
        c => crate::fail!(FiError::NOSYS, "fi_control({what}): command {c} not supported"),
    }
}

/// `fi_ep_bind`: binds a CQ or a counter to `ep`; an object of another class
/// goes to `other(class)`, which binds it or refuses it (`None`: a class no
/// endpoint takes).
///
/// # Safety
/// `bfid` is NULL or a readable fid (the libfabric contract).
pub(crate) unsafe fn bind<E: ActiveEp>(ep: &E, bfid: *mut fid, flags: u64, other: impl FnOnce(usize) -> Option<FiResult<()>>) -> FiResult<c_int> {
    // SAFETY: bfid is a fid per the API.
    match unsafe { class_of(bfid) }? {
        // SAFETY: as above.
        FI_CLASS_CQ => ep.bind_cq(&unsafe { obj::<CqObj>(bfid) }?.inner, flags)?,
        // SAFETY: as above.
        FI_CLASS_CNTR => ep.bind_cntr(&unsafe { obj::<CntrObj>(bfid) }?.inner, flags)?,
        c => match other(c) {
            Some(r) => r?,
            None => return crate::fail!(FiError::INVAL, "fi_ep_bind: cannot bind an object of class {c}"),
        },
    }
    Ok(0)
}

/// An `fi_msg`, checked and converted.
pub(crate) struct Msg {
    pub bufs: Vec<(u64, usize)>,
    pub desc: *mut *mut c_void,
    pub addr: fi_addr_t,
    pub context: *mut c_void,
    /// `m.data` when the flags carry `FI_REMOTE_CQ_DATA`.
    pub data: Option<u64>,
}

/// Checks the arguments of `fi_sendmsg`/`fi_recvmsg` (`what`) and converts
/// the message: `msg` non-NULL, `FI_MULTI_RECV` refused with `multi_recv`'s
/// code and endpoint kind when given, no flag outside `allowed`, at most
/// `MAX_IOV` iovecs.
///
/// # Safety
/// `msg` is NULL or a valid `fi_msg` whose `msg_iov` holds `iov_count` entries.
pub(crate) unsafe fn msg_parts(what: &str, msg: *const fi_msg, flags: u64, allowed: u64, multi_recv: Option<(FiError, &str)>) -> FiResult<Msg> {
    if msg.is_null() {
        return crate::fail!(FiError::INVAL, "{what}: msg is NULL");
    }
    if let Some((err, kind)) = multi_recv {
        if flags & FI_MULTI_RECV != 0 {
            return crate::fail!(err, "{what}: FI_MULTI_RECV is not supported on {kind} endpoints");
        }
    }
    if flags & !allowed != 0 {
        return crate::fail!(FiError::BADFLAGS, "{what}: unsupported flags {:#x}", flags & !allowed);
    }
    // SAFETY: checked non-NULL; a valid fi_msg per the contract.
    let m = unsafe { &*msg };
    // SAFETY: as above.
    let bufs = unsafe { iovec_list(m.msg_iov, m.iov_count) }?;
    let data = if flags & FI_REMOTE_CQ_DATA != 0 { Some(m.data) } else { None };
    Ok(Msg { bufs, desc: m.desc, addr: m.addr, context: m.context, data })
}

/// `fi_control(FI_GETOPSFLAG | FI_SETOPSFLAG, arg)` of an endpoint or a shared context:
/// `arg` is a u64 that names exactly one of FI_TRANSMIT (`tx` true) and
/// FI_RECV; `get(tx)` reads that side's op flags, `set(tx, bits)` vets and
/// replaces them.
///
/// # Safety
/// `arg` NULL or a readable and writable u64 (fi_control(3)).
pub(crate) unsafe fn ops_flag_control(
    command: c_int,
    arg: *mut c_void,
    get: impl FnOnce(bool) -> u64,
    set: impl FnOnce(bool, u64) -> FiResult<()>,
) -> FiResult<c_int> {
    let p = nonnull(arg as *mut u64, "fi_control: flags argument")?;
    // SAFETY: a u64 per the contract.
    let v = unsafe { *p };
    let tx = v & FI_TRANSMIT != 0;
    let rx = v & FI_RECV != 0;
    if tx == rx {
        return crate::fail!(FiError::INVAL, "fi_control: give exactly one of FI_TRANSMIT/FI_RECV");
    }
    let bits = v & !(FI_TRANSMIT | FI_RECV);
    if command == FI_SETOPSFLAG {
        set(tx, bits)?;
    } else {
        // SAFETY: as above.
        unsafe { *p = get(tx) | (v & (FI_TRANSMIT | FI_RECV)) };
    }
    Ok(0)
}

// ---- entry points no connectionless endpoint (RDM, DGRAM) offers ----

pub(crate) unsafe extern "C" fn tx_ctx_nosys(_s: *mut fid_ep, _i: c_int, _a: *mut fi_tx_attr, _t: *mut *mut fid_ep, _c: *mut c_void) -> c_int {
    tracing::info!("fi_tx_context: scalable endpoints are not supported");
    FiError::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn rx_ctx_nosys(_s: *mut fid_ep, _i: c_int, _a: *mut fi_rx_attr, _t: *mut *mut fid_ep, _c: *mut c_void) -> c_int {
    tracing::info!("fi_rx_context: scalable endpoints are not supported");
    FiError::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn listen_nosys(_p: *mut fid_pep) -> c_int {
    FiError::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn accept_nosys(_e: *mut fid_ep, _p: *const c_void, _l: usize) -> c_int {
    FiError::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn reject_nosys(_p: *mut fid_pep, _h: fid_t, _param: *const c_void, _l: usize) -> c_int {
    FiError::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn shutdown_nosys(_e: *mut fid_ep, _f: u64) -> c_int {
    FiError::NOSYS.neg()
}
