//! Memory the RDM core hands to the device or copies through: provider-owned
//! registered buffers (bounce buffers) and the application's buffers named by
//! `Iov`s. Raw memory access is `unsafe`, so it lives here, with the other
//! verbs wrappers; the RDM core in `src/rdm` stays safe.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::verbs::{Errno, Iov, Mr, Pd};

/// Bytes copied out of the application's buffers: up to 64 without an allocation.
pub type Bytes = smallvec::SmallVec<[u8; 64]>;

/// A zeroed, page-aligned buffer registered with the device, owned by the
/// provider. The device reads and writes it through `Iov`s made by
/// [`RegBuf::iov`]; Rust touches it only through [`RegBuf::slice`] and
/// [`RegBuf::write`], on ranges no posted work request uses (the RDM core
/// reads a receive slot only after its completion and before reposting it,
/// and fills a send slot only while it is free).
///
/// Whoever posts work requests on it must keep it alive until their QP is
/// destroyed (the RDM endpoint passes it in the QP's keep-alive list).
pub struct RegBuf {
    ptr: NonNull<u8>,
    layout: Layout,
    mr: Option<Mr>,
}

// SAFETY: the buffer is plain memory owned by this object; concurrent access is
// governed by the slot discipline above (the RDM endpoint serialises it under its lock).
unsafe impl Send for RegBuf {}
// SAFETY: as above.
unsafe impl Sync for RegBuf {}

impl std::fmt::Debug for RegBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegBuf").field("addr", &self.addr()).field("len", &self.len()).finish()
    }
}

impl RegBuf {
    /// Allocates `len` bytes (> 0) and registers them with `access` (verbs flags).
    pub fn new(pd: &Arc<Pd>, len: usize, access: i32) -> Result<RegBuf, Errno> {
        let layout = Layout::from_size_align(len.max(1), 4096).map_err(|_| libc::EINVAL)?;
        // SAFETY: non-zero size, valid alignment.
        let p = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(p).ok_or(libc::ENOMEM)?;
        match pd.reg_mr(ptr.as_ptr() as u64, layout.size(), access) {
            Ok(mr) => Ok(RegBuf { ptr, layout, mr: Some(mr) }),
            Err(e) => {
                // SAFETY: allocated above with this layout, never shared.
                unsafe { dealloc(ptr.as_ptr(), layout) };
                Err(e)
            }
        }
    }

    #[inline]
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.layout.size()
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    #[inline]
    pub fn lkey(&self) -> u32 {
        self.mr.as_ref().map_or(0, |m| m.lkey)
    }
    pub fn rkey(&self) -> u32 {
        self.mr.as_ref().map_or(0, |m| m.rkey)
    }

    #[inline]
    fn check(&self, off: usize, len: usize) {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len()), "RegBuf range {off}+{len} out of {}", self.len());
    }

    /// The device's view of `[off, off+len)`.
    #[inline]
    pub fn iov(&self, off: usize, len: usize) -> Iov {
        self.check(off, len);
        // SAFETY: the range is inside our registered allocation, which outlives
        // every QP posting it (see the type's contract).
        unsafe { Iov::new(self.addr() + off as u64, len as u32, self.lkey()) }
    }

    /// Reads `[off, off+len)`: a range the device is not writing.
    #[inline]
    pub fn slice(&self, off: usize, len: usize) -> &[u8] {
        self.check(off, len);
        // SAFETY: in bounds; per the slot discipline nothing writes the range meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) }
    }

    /// Writes `data` at `off`: a range the device is not using.
    #[inline]
    pub fn write(&self, off: usize, data: &[u8]) {
        self.check(off, data.len());
        // SAFETY: in bounds; per the slot discipline nothing else reads or writes the range meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len()) };
    }
}

impl RegBuf {
    /// Gathers `len` bytes of the application buffers `iovs` to `off` (a free
    /// send slot). Returns the bytes copied (less when the buffers are shorter).
    ///
    /// The `Iov`s come from a send the application posted (readable until it
    /// completes, which is after this copy: see `copy_from_iovs`).
    #[inline]
    pub fn fill_from_iovs(&self, off: usize, iovs: &[Iov], len: usize) -> usize {
        self.check(off, len);
        // SAFETY: `len` bytes from `off` are inside our allocation (checked),
        // unused by the device; the sources per `gather_raw`'s contract.
        unsafe { gather_raw(self.ptr.as_ptr().add(off), iovs, len) }
    }
}

/// Copies up to `len` bytes of the buffers `iovs`, in order, to `dst`;
/// returns the bytes copied (less when the buffers are shorter).
///
/// # Safety
/// `dst` must be writable for `len` bytes and not overlap the sources; the
/// `Iov`s come from an operation the application posted (readable during
/// the call, per `Iov::new`'s contract).
#[inline]
unsafe fn gather_raw(dst: *mut u8, iovs: &[Iov], len: usize) -> usize {
    let mut done = 0;
    for v in iovs {
        let n = (v.len() as usize).min(len - done);
        if n > 0 {
            // SAFETY: per the contract; done + n <= len.
            unsafe { std::ptr::copy_nonoverlapping(v.addr() as usize as *const u8, dst.add(done), n) };
        }
        done += n;
        if done == len {
            break;
        }
    }
    done
}

/// Largest send [`post_staged`] stages (the device's inline limit is at most this in practice).
pub const INLINE_STAGE: usize = 512;

/// Posts a send whose bytes the device copies while it is posted (inline):
/// `hdr`, then `len` bytes of `iovs`, staged on the stack, so no registered
/// memory (no send slot, possibly cold) is written for it. `post` gets the
/// staged bytes as one SGE, valid only during the call (an inline post
/// reads it before returning). `None` (nothing posted) if `hdr.len() + len`
/// exceeds [`INLINE_STAGE`].
#[inline]
pub fn post_staged<R>(hdr: &[u8], iovs: &[Iov], len: usize, post: impl FnOnce(Iov) -> R) -> Option<R> {
    let h = hdr.len();
    if h + len > INLINE_STAGE {
        return None;
    }
    let mut stage = std::mem::MaybeUninit::<[u8; INLINE_STAGE]>::uninit();
    let p = stage.as_mut_ptr() as *mut u8;
    // SAFETY: h + len <= INLINE_STAGE bytes of our stack array are written:
    // the header, then the application's buffers (gather_raw's contract).
    let n = unsafe {
        std::ptr::copy_nonoverlapping(hdr.as_ptr(), p, h);
        h + gather_raw(p.add(h), iovs, len)
    };
    // SAFETY: the first n bytes were written above and stay on this frame
    // until `post` returns; an inline post copies them during the call.
    Some(post(unsafe { Iov::new(p as u64, n as u32, 0) }))
}

impl Drop for RegBuf {
    fn drop(&mut self) {
        // Deregister first, then free.
        self.mr.take();
        // SAFETY: allocated in `new` with this layout; the device no longer uses it.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// Copies `data` into the application buffers `iovs`, starting `offset` bytes
/// into them; stops at their end. Returns the bytes copied.
///
/// The `Iov`s were made (in the C shims) from a receive the application
/// posted, under `Iov::new`'s contract: the memory stays valid and writable
/// until the receive completes, which is after this copy.
#[inline]
pub fn copy_to_iovs(iovs: &[Iov], offset: usize, data: &[u8]) -> usize {
    let mut skip = offset;
    let mut done = 0;
    for v in iovs {
        let l = v.len() as usize;
        if skip >= l {
            skip -= l;
            continue;
        }
        let n = (l - skip).min(data.len() - done);
        if n > 0 {
            // SAFETY: [addr+skip, addr+skip+n) lies inside the application's
            // buffer (n <= l - skip), valid and writable per Iov::new's contract.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(done), (v.addr() as usize as *mut u8).add(skip), n) };
        }
        done += n;
        skip = 0;
        if done == data.len() {
            break;
        }
    }
    done
}

/// Gathers the application buffers `iovs` into `out` (up to `out.len()` bytes).
/// Returns the bytes copied.
///
/// The `Iov`s were made from a send (or inject) the application posted, under
/// `Iov::new`'s contract: readable until the send completes (inject: now).
pub fn copy_from_iovs(iovs: &[Iov], out: &mut [u8]) -> usize {
    // SAFETY: `out` is writable for its length and is ours (no overlap); the
    // sources per Iov::new's contract.
    unsafe { gather_raw(out.as_mut_ptr(), iovs, out.len()) }
}

/// The first `len` bytes of the application buffers `iovs`, copied (inject:
/// the buffers may be reused as soon as the call returns); up to 64 bytes
/// without an allocation. Shorter buffers give fewer bytes.
pub fn gather(iovs: &[Iov], len: usize) -> Bytes {
    let mut v = Bytes::with_capacity(len);
    // SAFETY: the destination is the vector's spare capacity (len bytes);
    // the sources per Iov::new's contract.
    let done = unsafe { gather_raw(v.as_mut_ptr(), iovs, len) };
    // SAFETY: the first `done` bytes were initialised just above.
    unsafe { v.set_len(done) };
    v
}

/// An `Iov` over part of another (same memory, same key).
pub fn sub_iov(v: &Iov, off: usize, len: usize) -> Iov {
    assert!(off + len <= v.len() as usize, "sub_iov out of range");
    // SAFETY: a sub-range of an Iov made under Iov::new's contract inherits it.
    unsafe { Iov::new(v.addr() + off as u64, len as u32, v.lkey()) }
}

/// The bytes `off..off + n` of the buffers `iov` (taken as one): hands
/// `out` the part of each iov that range covers, in order (an RMA operation
/// split into pieces; `n` within the total).
pub fn iov_range(iov: &[Iov], off: usize, n: usize, mut out: impl FnMut(Iov)) {
    let (mut base, mut lo, mut left) = (0usize, off, n);
    for v in iov {
        if left == 0 {
            break;
        }
        let vl = v.len() as usize;
        if lo < base + vl {
            let o = lo - base;
            let k = (vl - o).min(left);
            out(sub_iov(v, o, k));
            lo += k;
            left -= k;
        }
        base += vl;
    }
}

/// An `Iov` for tests of the safe core that only look at its fields.
#[cfg(test)]
pub fn test_iov(addr: u64, len: u32, lkey: u32) -> Iov {
    // SAFETY: tests never post it nor dereference its address.
    unsafe { Iov::new(addr, len, lkey) }
}

/// An `Iov` with the same memory as `v` and another local key (a provider
/// registration covering it).
pub fn rekey_iov(v: &Iov, lkey: u32) -> Iov {
    // SAFETY: the same memory, under the same contract; the key only tells the
    // device which registration to check it against.
    unsafe { Iov::new(v.addr(), v.len(), lkey) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iov_range_cuts_pieces_at_iov_bounds() {
        // SAFETY: the Iovs are only compared, never dereferenced.
        let iovs = unsafe { [Iov::new(1000, 10, 7), Iov::new(5000, 5, 8), Iov::new(9000, 20, 9)] };
        let got = |off, n| {
            let mut v = Vec::new();
            iov_range(&iovs, off, n, |x| v.push((x.addr(), x.len(), x.lkey())));
            v
        };
        assert_eq!(got(0, 35), vec![(1000, 10, 7), (5000, 5, 8), (9000, 20, 9)], "the whole");
        assert_eq!(got(3, 4), vec![(1003, 4, 7)], "inside one iov");
        assert_eq!(got(8, 10), vec![(1008, 2, 7), (5000, 5, 8), (9000, 3, 9)], "across three");
        assert_eq!(got(10, 5), vec![(5000, 5, 8)], "exactly one iov");
        assert_eq!(got(34, 1), vec![(9019, 1, 9)], "the last byte");
        assert_eq!(got(12, 0), vec![], "nothing");
        // Consecutive pieces cover the whole without gaps or overlaps.
        let mut all = Vec::new();
        for off in (0..35).step_by(4) {
            all.extend(got(off, 4.min(35 - off)));
        }
        let bytes: usize = all.iter().map(|x| x.1 as usize).sum();
        assert_eq!(bytes, 35);
        assert_eq!(all.first(), Some(&(1000, 4, 7)));
        assert_eq!(all.last(), Some(&(9017, 3, 9)));
    }

    #[test]
    fn copies_scatter_and_gather_across_iovs() {
        let mut a = [0u8; 4];
        let mut b = [0u8; 6];
        // SAFETY: test buffers live until the end of the test.
        let iovs = unsafe { [Iov::new(a.as_mut_ptr() as u64, 4, 0), Iov::new(b.as_mut_ptr() as u64, 6, 0)] };
        assert_eq!(copy_to_iovs(&iovs, 2, b"hello world"), 8, "bounded by the buffers");
        assert_eq!(&a, &[0, 0, b'h', b'e']);
        assert_eq!(&b, b"llo wo");
        let mut out = [0u8; 7];
        assert_eq!(copy_from_iovs(&iovs, &mut out), 7);
        assert_eq!(&out, b"\0\0hello");
        assert_eq!(copy_to_iovs(&iovs, 10, b"x"), 0, "offset past the end copies nothing");
        assert_eq!(gather(&iovs, 5).as_slice(), b"\0\0hel");
        assert_eq!(gather(&iovs, 100).len(), 10, "bounded by the buffers");
        let s = sub_iov(&iovs[1], 2, 3);
        assert_eq!((s.addr(), s.len()), (b.as_ptr() as u64 + 2, 3));
    }

    #[test]
    fn staged_inline_sends_carry_header_then_payload() {
        let a = *b"abc";
        let b = *b"defgh";
        // SAFETY: test buffers live until the end of the test.
        let iovs = unsafe { [Iov::new(a.as_ptr() as u64, 3, 0), Iov::new(b.as_ptr() as u64, 5, 0)] };
        let read = |sge: Iov| {
            // SAFETY: post_staged's SGE is readable during the call.
            unsafe { std::slice::from_raw_parts(sge.addr() as usize as *const u8, sge.len() as usize) }.to_vec()
        };
        assert_eq!(post_staged(b"HDR", &iovs, 6, read).as_deref(), Some(&b"HDRabcdef"[..]), "header, then len bytes across iovs");
        assert_eq!(post_staged(b"HDR", &iovs, 8, read).as_deref(), Some(&b"HDRabcdefgh"[..]));
        assert_eq!(post_staged(b"", &iovs[..1], 0, read).as_deref(), Some(&b""[..]), "nothing to stage");
        let big = [7u8; INLINE_STAGE];
        // SAFETY: as above.
        let big_iov = unsafe { [Iov::new(big.as_ptr() as u64, INLINE_STAGE as u32, 0)] };
        assert_eq!(post_staged(b"", &big_iov, INLINE_STAGE, read).map(|v| v.len()), Some(INLINE_STAGE), "exactly the stage");
        let mut called = false;
        assert!(post_staged(b"H", &big_iov, INLINE_STAGE, |_| called = true).is_none(), "one byte over the stage");
        assert!(!called, "nothing is posted when it does not fit");
    }
}
