//! Completion-queue objects.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::domain::DomainObj;
use super::prov::{bind_nosys, ops_open_nosys};
use super::util::*;
use crate::cq::{Completion, Cq};
use crate::error::{FiError, FiResult};

#[repr(C)]
pub struct CqObj {
    pub fid: fid_cq,
    pub inner: Arc<Cq>,
}

impl FiObject for CqObj {
    const CLASS: usize = FI_CLASS_CQ;
    const NAME: &'static str = "completion queue";
    fn fi_ops() -> *const fi_ops {
        &CQ_FI_OPS
    }
}

static CQ_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(cq_close),
    bind: Some(bind_nosys),
    control: Some(cq_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

/// One operations table per entry format (`F`): each reader writes its
/// format's entries with no test of the format per entry.
const fn cq_ops<const F: u32>() -> fi_ops_cq {
    fi_ops_cq {
        size: std::mem::size_of::<fi_ops_cq>(),
        read: Some(cq_read::<F>),
        readfrom: Some(cq_readfrom::<F>),
        readerr: Some(cq_readerr),
        sread: Some(cq_sread),
        sreadfrom: Some(cq_sreadfrom),
        signal: Some(cq_signal),
        strerror: Some(cq_strerror),
    }
}
static CQ_OPS_CONTEXT: fi_ops_cq = cq_ops::<FI_CQ_FORMAT_CONTEXT>();
static CQ_OPS_MSG: fi_ops_cq = cq_ops::<FI_CQ_FORMAT_MSG>();
static CQ_OPS_DATA: fi_ops_cq = cq_ops::<FI_CQ_FORMAT_DATA>();
static CQ_OPS_TAGGED: fi_ops_cq = cq_ops::<FI_CQ_FORMAT_TAGGED>();

/// The operations table of a CQ of `format` (resolved: never UNSPEC).
fn ops_of(format: u32) -> &'static fi_ops_cq {
    match format {
        FI_CQ_FORMAT_MSG => &CQ_OPS_MSG,
        FI_CQ_FORMAT_DATA => &CQ_OPS_DATA,
        FI_CQ_FORMAT_TAGGED => &CQ_OPS_TAGGED,
        _ => &CQ_OPS_CONTEXT,
    }
}

pub unsafe extern "C" fn cq_open(domain: *mut fid_domain, attr: *mut fi_cq_attr, out: *mut *mut fid_cq, context: *mut c_void) -> c_int {
    guard("fi_cq_open", || {
        // SAFETY: domain is a fid per the API.
        let d = unsafe { obj::<DomainObj>(domain as *const fid) }?;
        let out = nonnull(out, "fi_cq_open: cq")?;
        let attr = nonnull(attr, "fi_cq_open: attr")?;
        // SAFETY: checked non-NULL, valid per fi_cq(3).
        let a = unsafe { &*attr };
        if a.wait_cond != FI_CQ_COND_NONE {
            return crate::fail!(FiError::NOSYS, "fi_cq_open: wait conditions are not supported");
        }
        let ws = if a.wait_obj == FI_WAIT_SET {
            // SAFETY: wait_set is a fid per the API (NULL and class checked by obj).
            Some(unsafe { obj::<super::wait::WaitObj>(a.wait_set as *const fid) }?.inner.clone())
        } else {
            None
        };
        let cq = Cq::open(&d.inner, a.size, a.format, a.wait_obj, a.flags)?;
        if let Some(ws) = &ws {
            cq.join(ws)?;
        }
        let max = d.inner.attr.max_cqe.max(1) as usize;
        if a.size > max {
            // Larger than the device can hold (ofi_rxm asks (tx+rx) x universe
            // size = 262144 by default): the CQ is clamped to max_cqe and says so
            // in attr.size; endpoints binding beyond it fail fi_enable (-FI_ENOSPC).
            // SAFETY: attr is the caller's writable fi_cq_attr (checked non-NULL).
            unsafe { (*attr).size = max };
        }
        let o = into_c(CqObj {
            fid: fid_cq {
                fid: fid { fclass: FI_CLASS_CQ, context, ops: &CQ_FI_OPS as *const _ as *mut _ },
                ops: ops_of(cq.format) as *const _ as *mut _,
            },
            inner: cq,
        });
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_cq };
        Ok(0)
    })
}

unsafe extern "C" fn cq_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(cq)", || unsafe { close_obj::<CqObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn cq_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(cq)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<CqObj>(f) }?;
        // SAFETY: arg per fi_control(3).
        unsafe { super::eq::wait_control("cq", o.inner.wait.as_ref().map(|w| w.fd()), o.inner.wait_obj, command, arg) }
    })
}

/// Writes completion `i` in format `F` into `buf`.
///
/// # Safety
/// `buf` must have room for `i + 1` entries of `format`.
#[inline(always)]
unsafe fn write_completion<const F: u32>(buf: *mut c_void, i: usize, c: &Completion) {
    let ctx = c.op_context as usize as *mut c_void;
    // SAFETY: per the contract; entries are naturally aligned in the caller's array.
    unsafe {
        match F {
            FI_CQ_FORMAT_MSG => {
                *(buf as *mut fi_cq_msg_entry).add(i) = fi_cq_msg_entry { op_context: ctx, flags: c.flags, len: c.len };
            }
            FI_CQ_FORMAT_DATA => {
                *(buf as *mut fi_cq_data_entry).add(i) = fi_cq_data_entry {
                    op_context: ctx,
                    flags: c.flags,
                    len: c.len,
                    buf: c.buf as usize as *mut c_void,
                    data: c.data,
                };
            }
            FI_CQ_FORMAT_TAGGED => {
                *(buf as *mut fi_cq_tagged_entry).add(i) = fi_cq_tagged_entry {
                    op_context: ctx,
                    flags: c.flags,
                    len: c.len,
                    buf: c.buf as usize as *mut c_void,
                    data: c.data,
                    tag: c.tag,
                };
            }
            _ => *(buf as *mut fi_cq_entry).add(i) = fi_cq_entry { op_context: ctx },
        }
    }
}

/// `write_completion` in the CQ's format read at run time: for the
/// blocking reads, which need no copy of their own per format.
///
/// # Safety
/// As `write_completion`.
unsafe fn write_completion_dyn(format: u32, buf: *mut c_void, i: usize, c: &Completion) {
    // SAFETY: per the contract.
    unsafe {
        match format {
            FI_CQ_FORMAT_MSG => write_completion::<FI_CQ_FORMAT_MSG>(buf, i, c),
            FI_CQ_FORMAT_DATA => write_completion::<FI_CQ_FORMAT_DATA>(buf, i, c),
            FI_CQ_FORMAT_TAGGED => write_completion::<FI_CQ_FORMAT_TAGGED>(buf, i, c),
            _ => write_completion::<FI_CQ_FORMAT_CONTEXT>(buf, i, c),
        }
    }
}

/// A read of up to `count` entries into `buf` (and their sources into `src`
/// if not NULL): non-blocking with `timeout` `None`, blocking otherwise.
/// `write` writes one entry in the CQ's format; the non-blocking readers
/// pass their format's own `write_completion`, inlined here.
#[inline(always)]
unsafe fn read_common(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
    timeout: Option<c_int>,
    write: unsafe fn(u32, *mut c_void, usize, &Completion),
) -> FiResult<isize> {
    // SAFETY: cq is a fid per the API.
    let o = unsafe { obj::<CqObj>(cq as *const fid) }?;
    if count > 0 && buf.is_null() {
        return crate::fail!(FiError::INVAL, "fi_cq_read: buf is NULL");
    }
    let format = o.inner.format;
    let mut i = 0usize;
    let mut out = |c: &Completion| {
        // SAFETY: `count` entries of the CQ's format fit in buf (fi_cq(3)); the core hands out at most `count`.
        unsafe { write(format, buf, i, c) };
        if !src.is_null() {
            // SAFETY: src has `count` entries when non-NULL.
            unsafe { *src.add(i) = c.src };
        }
        i += 1;
    };
    let n = match timeout {
        None => o.inner.read(count, &mut out)?,
        Some(t) => o.inner.sread(count, t, &mut out)?,
    };
    Ok(n as isize)
}

/// The entry writer of the non-blocking readers of format `F` (the CQ's: its
/// operations table is its format's, `ops_of`).
///
/// # Safety
/// As `write_completion`.
#[inline(always)]
unsafe fn write_as<const F: u32>(format: u32, buf: *mut c_void, i: usize, c: &Completion) {
    debug_assert_eq!(format, F, "a CQ's operations table is its format's");
    // SAFETY: per the contract.
    unsafe { write_completion::<F>(buf, i, c) }
}

unsafe extern "C" fn cq_read<const F: u32>(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: arguments per fi_cq(3).
    guard_size("fi_cq_read", || unsafe { read_common(cq, buf, count, std::ptr::null_mut(), None, write_as::<F>) })
}

unsafe extern "C" fn cq_readfrom<const F: u32>(cq: *mut fid_cq, buf: *mut c_void, count: usize, src: *mut fi_addr_t) -> isize {
    // SAFETY: arguments per fi_cq(3).
    guard_size("fi_cq_readfrom", || unsafe { read_common(cq, buf, count, src, None, write_as::<F>) })
}

unsafe extern "C" fn cq_sread(cq: *mut fid_cq, buf: *mut c_void, count: usize, _cond: *const c_void, timeout: c_int) -> isize {
    // SAFETY: arguments per fi_cq(3).
    guard_size("fi_cq_sread", || unsafe { read_common(cq, buf, count, std::ptr::null_mut(), Some(timeout), write_completion_dyn) })
}

unsafe extern "C" fn cq_sreadfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: arguments per fi_cq(3).
    guard_size("fi_cq_sreadfrom", || unsafe { read_common(cq, buf, count, src, Some(timeout), write_completion_dyn) })
}

/// The fields of `fi_cq_err_entry` that every API version's layout has, up
/// to `prov_errno` (`fi_cq_err_entry_1_0` ends with `err_data` after them).
#[repr(C)]
struct CqErrHead {
    op_context: *mut c_void,
    flags: u64,
    len: usize,
    buf: *mut c_void,
    data: u64,
    tag: u64,
    olen: usize,
    err: c_int,
    prov_errno: c_int,
}
const _: () = assert!(std::mem::size_of::<CqErrHead>() == std::mem::offset_of!(fi_cq_err_entry, err_data));

unsafe extern "C" fn cq_readerr(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, flags: u64) -> isize {
    guard_size("fi_cq_readerr", || {
        // SAFETY: cq is a fid per the API.
        let o = unsafe { obj::<CqObj>(cq as *const fid) }?;
        let buf = nonnull(buf, "fi_cq_readerr: buf")?;
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_cq_readerr: unsupported flags {flags:#x}");
        }
        let (e, data_ptr) = o.inner.read_err()?;
        // The caller's struct has the layout of its API version (ofi_cq_err_memcpy):
        // before 1.5 it ends at err_data (no err_data_size); from 1.20 on it
        // has src_addr after err_data_size. Only those bytes are touched.
        let api = o.inner.domain.fabric.api_version;
        let b = buf;
        // SAFETY: buf is the caller's fi_cq_err_entry of its API's layout: every
        // field written below exists in that layout.
        unsafe {
            if api >= FI_VERSION(1, 5) {
                // A caller buffer in err_data/err_data_size receives a copy.
                let (want, dst) = ((*b).err_data_size, (*b).err_data);
                if want > 0 && !dst.is_null() {
                    let n = want.min(e.err_data.len());
                    // SAFETY: the caller says err_data has err_data_size bytes.
                    std::ptr::copy_nonoverlapping(e.err_data.as_ptr(), dst as *mut u8, n);
                    (*b).err_data_size = n;
                } else {
                    (*b).err_data = data_ptr as *mut c_void;
                    (*b).err_data_size = e.err_data.len();
                }
                if api >= FI_VERSION(1, 20) {
                    // The source is not reported with errors (no FI_SOURCE_ERR).
                    (b as *mut u8).add(std::mem::size_of::<fi_cq_err_entry>()).cast::<u64>().write_unaligned(FI_ADDR_NOTAVAIL);
                }
            } else {
                (*b).err_data = data_ptr as *mut c_void;
            }
        }
        // SAFETY: as above; the fields from op_context to prov_errno are in every layout.
        let b = unsafe { &mut *(b as *mut CqErrHead) };
        b.op_context = e.op_context as usize as *mut c_void;
        b.flags = e.flags;
        b.len = e.len;
        b.buf = e.buf as usize as *mut c_void;
        b.data = e.data;
        b.tag = e.tag;
        b.olen = e.olen;
        b.err = e.err;
        b.prov_errno = e.prov_errno;
        Ok(1)
    })
}

unsafe extern "C" fn cq_signal(cq: *mut fid_cq) -> c_int {
    guard("fi_cq_signal", || {
        // SAFETY: cq is a fid per the API.
        unsafe { obj::<CqObj>(cq as *const fid) }?.inner.wake();
        Ok(0)
    })
}

unsafe extern "C" fn cq_strerror(_cq: *mut fid_cq, prov_errno: c_int, _err_data: *const c_void, buf: *mut c_char, len: usize) -> *const c_char {
    // The provider error is a verbs completion status, or (negative) the
    // libfabric error of an entry rsverbs made itself (`soft_prov_errno`).
    static FALLBACK: &std::ffi::CStr = c"verbs completion error";
    if buf.is_null() || len == 0 {
        return FALLBACK.as_ptr();
    }
    let soft;
    let s = if prov_errno < 0 {
        // SAFETY: fi_strerror's text is a valid C string.
        let t = unsafe { std::ffi::CStr::from_ptr(super::core_api::strerror_text(prov_errno)) };
        soft = format!("rsverbs: {}", t.to_string_lossy());
        soft.as_str()
    } else {
        crate::verbs::status_str(prov_errno as u32)
    };
    // SAFETY: buf has len bytes per fi_cq(3).
    unsafe { copy_cstr(s, buf, len) };
    buf
}
