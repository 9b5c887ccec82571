//! Wait sets (`fi_wait_open`) and poll sets (`fi_poll_open`).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::fi::abi::*;
use super::cntr::CntrObj;
use crate::fi::consts::*;
use super::cq::CqObj;
use super::domain::DomainObj;
use super::prov::{bind_nosys, ops_open_nosys, FabricObj};
use super::util::*;
use crate::error::FiError;
use crate::fabric::Hold;
use crate::wait::{Pollable, PollSet, WaitSet};

#[repr(C)]
pub struct WaitObj {
    pub fid: fid_wait,
    pub inner: Arc<WaitSet>,
}

impl FiObject for WaitObj {
    const CLASS: usize = FI_CLASS_WAIT;
    const NAME: &'static str = "wait set";
    fn fi_ops() -> *const fi_ops {
        &WAIT_FI_OPS
    }
}

static WAIT_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(wait_close),
    bind: Some(bind_nosys),
    control: Some(wait_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static WAIT_OPS: fi_ops_wait = fi_ops_wait { size: std::mem::size_of::<fi_ops_wait>(), wait: Some(wait_wait) };

pub unsafe extern "C" fn wait_open(fabric: *mut fid_fabric, attr: *mut fi_wait_attr, out: *mut *mut fid_wait) -> c_int {
    guard("fi_wait_open", || {
        // SAFETY: fabric is a fid per the API.
        let f = unsafe { obj::<FabricObj>(fabric as *const fid) }?;
        let out = nonnull(out, "fi_wait_open: waitset")?;
        let attr = nonnull(attr, "fi_wait_open: attr")?;
        // SAFETY: checked non-NULL, valid per fi_poll(3).
        let a = unsafe { *attr };
        let ws = WaitSet::open(&f.inner, a.wait_obj, a.flags)?;
        let o = into_c(WaitObj {
            fid: fid_wait {
                fid: fid { fclass: FI_CLASS_WAIT, context: std::ptr::null_mut(), ops: &WAIT_FI_OPS as *const _ as *mut _ },
                ops: &WAIT_OPS as *const _ as *mut _,
            },
            inner: ws,
        });
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_wait };
        Ok(0)
    })
}

unsafe extern "C" fn wait_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(wait set)", || unsafe { close_obj::<WaitObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn wait_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(wait set)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<WaitObj>(f) }?;
        // SAFETY: arg per fi_control(3).
        unsafe { super::eq::wait_control("wait set", Some(o.inner.fd()), o.inner.wait_obj, command, arg) }
    })
}

unsafe extern "C" fn wait_wait(ws: *mut fid_wait, timeout: c_int) -> c_int {
    guard("fi_wait", || {
        // SAFETY: ws is a fid per the API.
        unsafe { obj::<WaitObj>(ws as *const fid) }?.inner.wait(timeout)?;
        Ok(0)
    })
}

// ---- poll sets ----

#[repr(C)]
pub struct PollObj {
    pub fid: fid_poll,
    pub inner: Arc<PollSet>,
}

impl FiObject for PollObj {
    const CLASS: usize = FI_CLASS_POLL;
    const NAME: &'static str = "poll set";
    fn fi_ops() -> *const fi_ops {
        &POLL_FI_OPS
    }
}

static POLL_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(poll_close),
    bind: Some(bind_nosys),
    control: Some(super::prov::control_nosys),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static POLL_OPS: fi_ops_poll = fi_ops_poll {
    size: std::mem::size_of::<fi_ops_poll>(),
    poll: Some(poll_poll),
    poll_add: Some(poll_add),
    poll_del: Some(poll_del),
};

pub unsafe extern "C" fn poll_open(domain: *mut fid_domain, attr: *mut fi_poll_attr, out: *mut *mut fid_poll) -> c_int {
    guard("fi_poll_open", || {
        // SAFETY: domain is a fid per the API.
        let d = unsafe { obj::<DomainObj>(domain as *const fid) }?;
        let out = nonnull(out, "fi_poll_open: pollset")?;
        let attr = nonnull(attr, "fi_poll_open: attr")?;
        // SAFETY: checked non-NULL, valid per fi_poll(3).
        let flags = unsafe { (*attr).flags };
        let ps = PollSet::open(&d.inner, flags)?;
        let o = into_c(PollObj {
            fid: fid_poll {
                fid: fid { fclass: FI_CLASS_POLL, context: std::ptr::null_mut(), ops: &POLL_FI_OPS as *const _ as *mut _ },
                ops: &POLL_OPS as *const _ as *mut _,
            },
            inner: ps,
        });
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_poll };
        Ok(0)
    })
}

unsafe extern "C" fn poll_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(poll set)", || unsafe { close_obj::<PollObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn poll_add(ps: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int {
    guard("fi_poll_add", || {
        // SAFETY: ps is a fid per the API.
        let p = unsafe { obj::<PollObj>(ps as *const fid) }?;
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_poll_add: flags {flags:#x} (must be 0)");
        }
        // SAFETY: event_fid is a fid per the API.
        let (member, ctx, domain): (Box<dyn Pollable>, u64, _) = match unsafe { class_of(event_fid) }? {
            FI_CLASS_CQ => {
                // SAFETY: as above.
                let c = unsafe { obj::<CqObj>(event_fid) }?;
                (Box::new(Hold::new(&c.inner)), c.fid.fid.context as u64, c.inner.domain.get().clone())
            }
            FI_CLASS_CNTR => {
                // SAFETY: as above.
                let c = unsafe { obj::<CntrObj>(event_fid) }?;
                (Box::new(Hold::new(&c.inner)), c.fid.fid.context as u64, c.inner.domain.get().clone())
            }
            c => return crate::fail!(FiError::INVAL, "fi_poll_add: only CQs and counters go in a poll set (class {c})"),
        };
        if !Arc::ptr_eq(&domain, p.inner.domain.get()) {
            return crate::fail!(FiError::DOMAIN, "fi_poll_add: object belongs to another domain");
        }
        p.inner.add(event_fid as usize, ctx, member)?;
        Ok(0)
    })
}

unsafe extern "C" fn poll_del(ps: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int {
    guard("fi_poll_del", || {
        // SAFETY: ps is a fid per the API.
        let p = unsafe { obj::<PollObj>(ps as *const fid) }?;
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_poll_del: flags {flags:#x} (must be 0)");
        }
        if event_fid.is_null() {
            return crate::fail!(FiError::INVAL, "fi_poll_del: NULL object");
        }
        p.inner.del(event_fid as usize)?;
        Ok(0)
    })
}

unsafe extern "C" fn poll_poll(ps: *mut fid_poll, context: *mut *mut c_void, count: c_int) -> c_int {
    guard("fi_poll", || {
        // SAFETY: ps is a fid per the API.
        let p = unsafe { obj::<PollObj>(ps as *const fid) }?;
        if count < 0 || (count > 0 && context.is_null()) {
            return crate::fail!(FiError::INVAL, "fi_poll: bad context array (count {count})");
        }
        let mut i = 0usize;
        let n = p.inner.poll(count as usize, &mut |ctx| {
            // SAFETY: the caller's array has `count` entries; poll hands out at most that many.
            unsafe { *context.add(i) = ctx as usize as *mut c_void };
            i += 1;
        });
        Ok(n as c_int)
    })
}
