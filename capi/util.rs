//! Helpers every exported function uses: panic guards, error mapping, object
//! validation, C memory helpers.
//!
//! Every C-visible object is a `#[repr(C)]` box whose first field is the
//! libfabric `fid_*` struct, followed by the Rust object. A `fid` pointer from
//! the application is accepted only if its class *and* its `ops` table are
//! ours, so a wrong object class or another provider's object gives
//! `-FI_EINVAL`, not a wild cast.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::fi::abi::*;
use crate::error::{FiError, FiResult};

/// Runs `f`, mapping errors to negative codes and panics to `-FI_EOTHER`.
pub fn guard(name: &str, f: impl FnOnce() -> FiResult<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.neg(),
        Err(_) => {
            tracing::error!("{name}: internal panic caught at the C boundary");
            FiError::OTHER.neg()
        }
    }
}

/// As `guard`, for functions returning `ssize_t`.
pub fn guard_size(name: &str, f: impl FnOnce() -> FiResult<isize>) -> isize {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.neg() as isize,
        Err(_) => {
            tracing::error!("{name}: internal panic caught at the C boundary");
            FiError::OTHER.neg() as isize
        }
    }
}

/// Checks an out-pointer argument.
pub fn nonnull<T>(p: *mut T, what: &str) -> FiResult<*mut T> {
    if p.is_null() {
        return crate::fail!(FiError::INVAL, "{what} is NULL");
    }
    Ok(p)
}

/// A C object of ours: knows its fid class and its `fi_ops` table.
pub trait FiObject: Sized {
    const CLASS: usize;
    const NAME: &'static str;
    fn fi_ops() -> *const fi_ops;
}

/// Validates an application-supplied `fid` as one of our `T` objects.
///
/// # Safety
/// `p` must be NULL or point to a readable `struct fid` (the libfabric contract
/// for every fid argument). Nothing past the fid header is read unless the
/// class and ops table prove the object is a `T`.
#[inline(always)]
pub unsafe fn obj<'a, T: FiObject>(p: *const fid) -> FiResult<&'a T> {
    if p.is_null() {
        return crate::fail!(FiError::INVAL, "{}: NULL object", T::NAME);
    }
    // SAFETY: caller guarantees a readable fid header.
    let (class, ops) = unsafe { ((*p).fclass, (*p).ops as *const fi_ops) };
    if class != T::CLASS {
        return crate::fail!(FiError::INVAL, "expected a {} object (class {}), got class {class}", T::NAME, T::CLASS);
    }
    if ops != T::fi_ops() {
        return crate::fail!(FiError::INVAL, "a {} object of another provider (foreign ops table)", T::NAME);
    }
    // SAFETY: class and ops table are ours, so `p` is the first field of a live `T`
    // (boxed, #[repr(C)], fid first) that we created and have not freed.
    Ok(unsafe { &*(p as *const T) })
}

/// The class of an application-supplied fid, or an error for NULL.
///
/// # Safety
/// `p` must be NULL or point to a readable `struct fid`.
pub unsafe fn class_of(p: *const fid) -> FiResult<usize> {
    if p.is_null() {
        return crate::fail!(FiError::INVAL, "NULL object");
    }
    // SAFETY: caller guarantees a readable fid header.
    Ok(unsafe { (*p).fclass })
}

/// Boxes a new object and returns the pointer C sees.
pub fn into_c<T>(o: T) -> *mut T {
    Box::into_raw(Box::new(o))
}

/// Frees an object created by `into_c`.
///
/// # Safety
/// `p` must come from `into_c::<T>` and not have been freed.
pub unsafe fn free_c<T>(p: *mut T) {
    // SAFETY: per the contract, `p` is a live Box<T>.
    drop(unsafe { Box::from_raw(p) });
}

/// `fi_close` of one of our objects: validates `f` as a `T`, runs `close` (which
/// may refuse, e.g. a domain still in use, and then nothing is freed), then
/// frees the object (dropping it releases what it holds).
///
/// # Safety
/// `f` NULL or a readable fid (the libfabric contract for every fid argument);
/// after a successful close the application no longer uses it.
pub unsafe fn close_obj<T: FiObject>(f: *mut fid, close: impl FnOnce(&T) -> FiResult<()>) -> FiResult<c_int> {
    // SAFETY: per the contract.
    let o = unsafe { obj::<T>(f) }?;
    close(o)?;
    // SAFETY: validated as our live T (from into_c), freed once: the application
    // does not use a closed fid.
    unsafe { free_c(f as *mut T) };
    Ok(0)
}

/// A C string argument (may be NULL).
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
pub unsafe fn cstr_opt(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: per the contract.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

/// `strdup` into C-heap memory (freed by libfabric's `free()`).
pub fn c_strdup(s: &str) -> *mut c_char {
    let bytes = s.as_bytes();
    // SAFETY: malloc of len+1 bytes; we fill them all before handing the pointer out.
    unsafe {
        let p = libc::malloc(bytes.len() + 1) as *mut u8;
        if p.is_null() {
            return std::ptr::null_mut();
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        *p.add(bytes.len()) = 0;
        p as *mut c_char
    }
}

/// Copies bytes into fresh C-heap memory.
pub fn c_memdup(b: &[u8]) -> *mut c_void {
    if b.is_empty() {
        return std::ptr::null_mut();
    }
    // SAFETY: malloc of len bytes, filled before use.
    unsafe {
        let p = libc::malloc(b.len()) as *mut u8;
        if !p.is_null() {
            std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len());
        }
        p as *mut c_void
    }
}

/// A zeroed C-heap object (freed by libfabric's `free()`).
pub fn c_calloc<T>() -> *mut T {
    // SAFETY: calloc returns zeroed memory of the right size or NULL; every type
    // we allocate this way is valid when all-zero.
    unsafe { libc::calloc(1, std::mem::size_of::<T>()) as *mut T }
}

/// Writes a sockaddr to a caller's (addr, addrlen) pair, as fi_getname does:
/// `-FI_ETOOSMALL` with the needed size when the buffer is short.
///
/// # Safety
/// `addrlen` must be valid; `addr` must have `*addrlen` writable bytes.
pub unsafe fn write_addr(bytes: &[u8], addr: *mut c_void, addrlen: *mut usize) -> FiResult<c_int> {
    let addrlen = nonnull(addrlen, "addrlen")?;
    // SAFETY: checked non-NULL; the caller owns it.
    let have = unsafe { *addrlen };
    // SAFETY: as above.
    unsafe { *addrlen = bytes.len() };
    if have < bytes.len() || addr.is_null() {
        if have == 0 {
            // A size query (fi_cm(3): a zero addrlen asks for the size; ofi_rxm does
            // it on every endpoint): not worth a warning.
            tracing::debug!("address size query: {} bytes needed", bytes.len());
            return Err(FiError::TOOSMALL);
        }
        return crate::fail!(FiError::TOOSMALL, "address buffer of {have} bytes, {} needed", bytes.len());
    }
    // SAFETY: the caller said `have` >= len bytes are writable at addr.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
    Ok(0)
}

/// Writes an address to a caller's (addr, addrlen) pair, as fi_av_lookup
/// does (fi_av(3)): a short buffer gets a truncated address; `*addrlen`
/// always gets the full size.
///
/// # Safety
/// `addrlen` must be valid (checked non-NULL by the caller); `addr` NULL or
/// with `*addrlen` writable bytes.
pub unsafe fn write_addr_truncated(bytes: &[u8], addr: *mut c_void, addrlen: *mut usize) {
    // SAFETY: caller-owned size_t.
    let have = unsafe { *addrlen };
    let n = have.min(bytes.len());
    if n > 0 && !addr.is_null() {
        // SAFETY: the caller says `have` bytes are writable at addr; n <= have.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, n) };
    }
    // SAFETY: as above.
    unsafe { *addrlen = bytes.len() };
}

/// Copies a provider string into a caller buffer (for *_strerror).
///
/// # Safety
/// `buf` must be NULL or have `len` writable bytes.
pub unsafe fn copy_cstr(s: &str, buf: *mut c_char, len: usize) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = s.len().min(len - 1);
    // SAFETY: n + 1 <= len bytes are writable.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
}
