//! Counter objects (`fi_cntr_open`).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::domain::DomainObj;
use super::prov::{bind_nosys, ops_open_nosys};
use super::util::*;
use super::wait::WaitObj;
use crate::cntr::Cntr;
use crate::error::FiResult;

#[repr(C)]
pub struct CntrObj {
    pub fid: fid_cntr,
    pub inner: Arc<Cntr>,
}

impl FiObject for CntrObj {
    const CLASS: usize = FI_CLASS_CNTR;
    const NAME: &'static str = "counter";
    fn fi_ops() -> *const fi_ops {
        &CNTR_FI_OPS
    }
}

static CNTR_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(cntr_close),
    bind: Some(bind_nosys),
    control: Some(cntr_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static CNTR_OPS: fi_ops_cntr = fi_ops_cntr {
    size: std::mem::size_of::<fi_ops_cntr>(),
    read: Some(cntr_read),
    readerr: Some(cntr_readerr),
    add: Some(cntr_add),
    set: Some(cntr_set),
    wait: Some(cntr_wait),
    adderr: Some(cntr_adderr),
    seterr: Some(cntr_seterr),
};

pub unsafe extern "C" fn cntr_open(domain: *mut fid_domain, attr: *mut fi_cntr_attr, out: *mut *mut fid_cntr, context: *mut c_void) -> c_int {
    guard("fi_cntr_open", || {
        // SAFETY: domain is a fid per the API.
        let d = unsafe { obj::<DomainObj>(domain as *const fid) }?;
        let out = nonnull(out, "fi_cntr_open: cntr")?;
        // fi_cntr(3): attr may be NULL (defaults: FI_CNTR_EVENTS_COMP, FI_WAIT_NONE).
        let a = if attr.is_null() {
            fi_cntr_attr { events: FI_CNTR_EVENTS_COMP, wait_obj: FI_WAIT_NONE, wait_set: std::ptr::null_mut(), flags: 0 }
        } else {
            // SAFETY: checked non-NULL, valid per fi_cntr(3).
            unsafe { *attr }
        };
        let ws = if a.wait_obj == FI_WAIT_SET {
            // SAFETY: wait_set is a fid per the API (checked for NULL/class by obj).
            Some(unsafe { obj::<WaitObj>(a.wait_set as *const fid) }?.inner.clone())
        } else {
            None
        };
        let c = Cntr::open(&d.inner, a.events, a.wait_obj, a.flags)?;
        if let Some(ws) = &ws {
            c.join(ws)?;
        }
        let o = into_c(CntrObj {
            fid: fid_cntr {
                fid: fid { fclass: FI_CLASS_CNTR, context, ops: &CNTR_FI_OPS as *const _ as *mut _ },
                ops: &CNTR_OPS as *const _ as *mut _,
            },
            inner: c,
        });
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_cntr };
        Ok(0)
    })
}

unsafe extern "C" fn cntr_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(cntr)", || unsafe { close_obj::<CntrObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn cntr_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(cntr)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<CntrObj>(f) }?;
        // SAFETY: arg per fi_control(3).
        unsafe { super::eq::wait_control("cntr", o.inner.wait.as_ref().map(|w| w.fd()), o.inner.wait_obj, command, arg) }
    })
}

/// The counter behind `c`; bad objects are logged (the value calls have no error return).
unsafe fn cntr_of<'a>(c: *mut fid_cntr) -> FiResult<&'a CntrObj> {
    // SAFETY: c is a fid per the API.
    unsafe { obj::<CntrObj>(c as *const fid) }
}

fn guard_u64(name: &str, f: impl FnOnce() -> FiResult<u64>) -> u64 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        // fi_cntr_read/readerr have no error return: 0 (logged by the failing check).
        Ok(Err(_)) => 0,
        Err(_) => {
            tracing::error!("{name}: internal panic caught at the C boundary");
            0
        }
    }
}

unsafe extern "C" fn cntr_read(c: *mut fid_cntr) -> u64 {
    // SAFETY: per fi_cntr(3).
    guard_u64("fi_cntr_read", || Ok(unsafe { cntr_of(c) }?.inner.read()))
}

unsafe extern "C" fn cntr_readerr(c: *mut fid_cntr) -> u64 {
    // SAFETY: per fi_cntr(3).
    guard_u64("fi_cntr_readerr", || Ok(unsafe { cntr_of(c) }?.inner.read_err()))
}

unsafe extern "C" fn cntr_add(c: *mut fid_cntr, value: u64) -> c_int {
    guard("fi_cntr_add", || {
        // SAFETY: per fi_cntr(3).
        unsafe { cntr_of(c) }?.inner.app_add(value);
        Ok(0)
    })
}

unsafe extern "C" fn cntr_set(c: *mut fid_cntr, value: u64) -> c_int {
    guard("fi_cntr_set", || {
        // SAFETY: per fi_cntr(3).
        unsafe { cntr_of(c) }?.inner.set(value);
        Ok(0)
    })
}

unsafe extern "C" fn cntr_adderr(c: *mut fid_cntr, value: u64) -> c_int {
    guard("fi_cntr_adderr", || {
        // SAFETY: per fi_cntr(3).
        unsafe { cntr_of(c) }?.inner.app_add_err(value);
        Ok(0)
    })
}

unsafe extern "C" fn cntr_seterr(c: *mut fid_cntr, value: u64) -> c_int {
    guard("fi_cntr_seterr", || {
        // SAFETY: per fi_cntr(3).
        unsafe { cntr_of(c) }?.inner.set_err(value);
        Ok(0)
    })
}

unsafe extern "C" fn cntr_wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    guard("fi_cntr_wait", || {
        // SAFETY: per fi_cntr(3).
        unsafe { cntr_of(c) }?.inner.wait(threshold, timeout)?;
        Ok(0)
    })
}
