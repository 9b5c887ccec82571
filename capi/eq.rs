//! Event-queue objects.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::prov::{bind_nosys, ops_open_nosys, FabricObj};
use super::util::*;
use crate::eq::{Eq, EqEntry};
use crate::error::{FiError, FiResult};

#[repr(C)]
pub struct EqObj {
    pub fid: fid_eq,
    pub inner: Arc<Eq>,
    writable: bool,
}

impl FiObject for EqObj {
    const CLASS: usize = FI_CLASS_EQ;
    const NAME: &'static str = "event queue";
    fn fi_ops() -> *const fi_ops {
        &EQ_FI_OPS
    }
}

static EQ_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(eq_close),
    bind: Some(bind_nosys),
    control: Some(eq_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static EQ_OPS: fi_ops_eq = fi_ops_eq {
    size: std::mem::size_of::<fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
};

pub unsafe extern "C" fn eq_open(fabric: *mut fid_fabric, attr: *mut fi_eq_attr, out: *mut *mut fid_eq, context: *mut c_void) -> c_int {
    guard("fi_eq_open", || {
        // SAFETY: fabric is a fid per the API.
        let f = unsafe { obj::<FabricObj>(fabric as *const fid) }?;
        let out = nonnull(out, "fi_eq_open: eq")?;
        let attr = nonnull(attr, "fi_eq_open: attr")?;
        // SAFETY: checked non-NULL, valid per fi_eq(3).
        let a = unsafe { &*attr };
        let ws = if a.wait_obj == FI_WAIT_SET {
            // SAFETY: wait_set is a fid per the API (NULL and class checked by obj).
            Some(unsafe { obj::<super::wait::WaitObj>(a.wait_set as *const fid) }?.inner.clone())
        } else {
            None
        };
        let eq = Eq::open(&f.inner, a.size, a.wait_obj, a.flags)?;
        if let Some(ws) = &ws {
            eq.join(ws)?;
        }
        let o = into_c(EqObj {
            fid: fid_eq {
                fid: fid { fclass: FI_CLASS_EQ, context, ops: &EQ_FI_OPS as *const _ as *mut _ },
                ops: &EQ_OPS as *const _ as *mut _,
            },
            inner: eq,
            writable: a.flags & FI_WRITE != 0,
        });
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_eq };
        Ok(0)
    })
}

unsafe extern "C" fn eq_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(eq)", || unsafe { close_obj::<EqObj>(f, |o| o.inner.close()) })
}

/// `fi_control(FI_GETWAIT / FI_GETWAITOBJ)`, shared with CQs.
///
/// # Safety
/// `arg` must point to an int (GETWAIT) or an `enum fi_wait_obj` (GETWAITOBJ).
pub unsafe fn wait_control(what: &str, fd: Option<c_int>, wait_obj: u32, command: c_int, arg: *mut c_void) -> FiResult<c_int> {
    match command {
        FI_GETWAIT => {
            let Some(fd) = fd else {
                return crate::fail!(FiError::NODATA, "{what}: FI_GETWAIT on an object without a wait object");
            };
            let p = nonnull(arg as *mut c_int, "FI_GETWAIT argument")?;
            // SAFETY: checked; an int per fi_control(3).
            unsafe { *p = fd };
            Ok(0)
        }
        FI_GETWAITOBJ => {
            let p = nonnull(arg as *mut u32, "FI_GETWAITOBJ argument")?;
            let v = if wait_obj == FI_WAIT_UNSPEC { FI_WAIT_FD } else { wait_obj };
            // SAFETY: checked; an enum fi_wait_obj per fi_control(3).
            unsafe { *p = v };
            Ok(0)
        }
        c => crate::fail!(FiError::NOSYS, "{what}: fi_control command {c} not supported"),
    }
}

unsafe extern "C" fn eq_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(eq)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<EqObj>(f) }?;
        // SAFETY: arg per fi_control(3).
        unsafe { wait_control("eq", o.inner.wait.as_ref().map(|w| w.fd()), o.inner.wait_obj, command, arg) }
    })
}

/// Writes one entry into the caller's buffer. Returns the bytes written.
unsafe fn write_entry(e: &EqEntry, event: *mut u32, buf: *mut c_void, len: usize) -> FiResult<isize> {
    // A CM entry needs room for its fixed part; its data is cut to the buffer
    // (fi_eq(3): the data returned is limited to the buffer space provided).
    let (need, ev) = match e {
        EqEntry::Cm { event, data, .. } => {
            let base = std::mem::size_of::<fi_eq_cm_entry>();
            (base + data.len().min(len.saturating_sub(base)), *event)
        }
        EqEntry::User { event, bytes } => (bytes.len(), *event),
    };
    let min = match e {
        EqEntry::Cm { .. } => std::mem::size_of::<fi_eq_cm_entry>(),
        EqEntry::User { bytes, .. } => bytes.len(),
    };
    if buf.is_null() || len < min {
        return crate::fail!(FiError::TOOSMALL, "fi_eq_read: buffer of {len} bytes, event needs {min}");
    }
    match e {
        EqEntry::Cm { fid: f, info, data, .. } => {
            let ip = match info {
                Some(i) => super::info::to_c(i, Some(super::prov::prov_name()))?,
                None => std::ptr::null_mut(),
            };
            let ent = buf as *mut fi_eq_cm_entry;
            // SAFETY: the buffer holds `need` bytes (checked); the entry may be unaligned
            // in a byte buffer, so write field by field unaligned.
            unsafe {
                std::ptr::write_unaligned(std::ptr::addr_of_mut!((*ent).fid), *f as *mut fid);
                std::ptr::write_unaligned(std::ptr::addr_of_mut!((*ent).info), ip);
                let base = std::mem::size_of::<fi_eq_cm_entry>();
                let dp = (buf as *mut u8).add(base);
                std::ptr::copy_nonoverlapping(data.as_ptr(), dp, need - base);
            }
        }
        EqEntry::User { bytes, .. } => {
            // SAFETY: the buffer holds `need` bytes (checked).
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len()) };
        }
    }
    if !event.is_null() {
        // SAFETY: non-NULL out pointer per fi_eq(3).
        unsafe { *event = ev };
    }
    Ok(need as isize)
}

unsafe fn read_common(eq: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64, timeout: Option<c_int>) -> FiResult<isize> {
    // SAFETY: eq is a fid per the API.
    let o = unsafe { obj::<EqObj>(eq as *const fid) }?;
    if flags & !FI_PEEK != 0 {
        return crate::fail!(FiError::BADFLAGS, "fi_eq_read: unsupported flags {flags:#x}");
    }
    // Peek first so that an entry too large for the buffer stays queued.
    let e = match timeout {
        None => o.inner.read(true)?,
        Some(t) => o.inner.sread(true, t)?,
    };
    // SAFETY: buffer per fi_eq(3).
    let n = unsafe { write_entry(&e, event, buf, len) }?;
    if flags & FI_PEEK == 0 {
        let _ = o.inner.read(false);
    }
    Ok(n)
}

unsafe extern "C" fn eq_read(eq: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
    // SAFETY: arguments per fi_eq(3).
    guard_size("fi_eq_read", || unsafe { read_common(eq, event, buf, len, flags, None) })
}

unsafe extern "C" fn eq_sread(eq: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, timeout: c_int, flags: u64) -> isize {
    // SAFETY: arguments per fi_eq(3).
    guard_size("fi_eq_sread", || unsafe { read_common(eq, event, buf, len, flags, Some(timeout)) })
}

unsafe extern "C" fn eq_readerr(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> isize {
    guard_size("fi_eq_readerr", || {
        // SAFETY: eq is a fid per the API.
        let o = unsafe { obj::<EqObj>(eq as *const fid) }?;
        let buf = nonnull(buf, "fi_eq_readerr: buf")?;
        if flags & !FI_PEEK != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_eq_readerr: unsupported flags {flags:#x}");
        }
        let (e, data_ptr) = o.inner.read_err(flags & FI_PEEK != 0)?;
        // SAFETY: buf is a caller-owned fi_eq_err_entry.
        let b = unsafe { &mut *buf };
        // API >= 1.5: a caller buffer in err_data/err_data_size receives a copy.
        // Older callers leave those fields uninitialised, so they are not read then.
        let api = o.inner.fabric.api_version;
        let user_buf = api >= FI_VERSION(1, 5) && b.err_data_size > 0 && !b.err_data.is_null();
        if user_buf {
            let n = b.err_data_size.min(e.err_data.len());
            // SAFETY: the caller says err_data has err_data_size bytes.
            unsafe { std::ptr::copy_nonoverlapping(e.err_data.as_ptr(), b.err_data as *mut u8, n) };
            b.err_data_size = n;
        } else {
            b.err_data = data_ptr as *mut c_void;
            b.err_data_size = e.err_data.len();
        }
        b.fid = e.fid as *mut fid;
        b.context = e.context as *mut c_void;
        b.data = e.data;
        b.err = e.err;
        b.prov_errno = e.prov_errno;
        Ok(std::mem::size_of::<fi_eq_err_entry>() as isize)
    })
}

unsafe extern "C" fn eq_write(eq: *mut fid_eq, event: u32, buf: *const c_void, len: usize, flags: u64) -> isize {
    guard_size("fi_eq_write", || {
        // SAFETY: eq is a fid per the API.
        let o = unsafe { obj::<EqObj>(eq as *const fid) }?;
        if !o.writable {
            return crate::fail!(FiError::INVAL, "fi_eq_write: EQ was not opened with FI_WRITE");
        }
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_eq_write: unsupported flags {flags:#x}");
        }
        if buf.is_null() || len == 0 {
            return crate::fail!(FiError::INVAL, "fi_eq_write: empty event");
        }
        // SAFETY: the caller passes `len` readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(buf as *const u8, len) }.to_vec();
        o.inner.push(Ok(EqEntry::User { event, bytes }))?;
        Ok(len as isize)
    })
}

unsafe extern "C" fn eq_strerror(eq: *mut fid_eq, prov_errno: c_int, _err_data: *const c_void, buf: *mut c_char, len: usize) -> *const c_char {
    let _ = eq;
    let s = std::io::Error::from_raw_os_error(prov_errno.abs()).to_string();
    static UNKNOWN: &std::ffi::CStr = c"rdma-cm error";
    // SAFETY: buf has len bytes per fi_eq(3).
    unsafe { copy_cstr(&s, buf, len) };
    if buf.is_null() || len == 0 {
        UNKNOWN.as_ptr()
    } else {
        buf
    }
}
