//! Safe wrappers over libibverbs (this file) and librdmacm (`cm.rs`), built on
//! the `rdma-sys` bindings.
//!
//! `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq` are
//! `static inline` in `<infiniband/verbs.h>` (calls through `ibv_context.ops`);
//! rdma-sys re-implements them in Rust, and we call those.
//!
//! Ownership: device contexts come from `rdma_get_devices()` (so that rdma-cm
//! ids bind to the very same contexts) and live for the whole process. Every
//! other object owns its verbs handle and releases it on `Drop`.
#![allow(unsafe_code)]

pub mod cm;
pub mod mem;
pub mod ud;

use std::ffi::CStr;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;

use once_cell::sync::OnceCell;
use rdma_sys as ffi;

/// A positive errno value returned by a verbs call.
pub type Errno = i32;

pub(crate) fn errno() -> Errno {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Maps a verbs return code (0, -errno or errno, with errno set) to a Result.
#[inline(always)]
pub(crate) fn check(ret: i32) -> Result<(), Errno> {
    match ret {
        0 => Ok(()),
        r if r < 0 => {
            let e = errno();
            Err(if e != 0 { e } else { -r })
        }
        r => Err(r),
    }
}

/// An RDMA device context from `rdma_get_devices()`.
#[derive(Debug)]
pub struct Context {
    ptr: NonNull<ffi::ibv_context>,
    name: String,
    inline_probe: OnceCell<u32>,
}

// SAFETY: ibv_context is designed for use from any thread (libibverbs locks internally),
// and we never free it (rdmacm owns it for the life of the process).
unsafe impl Send for Context {}
// SAFETY: as above; all methods take &self and call thread-safe verbs.
unsafe impl Sync for Context {}

static DEVICES: OnceCell<Vec<Arc<Context>>> = OnceCell::new();

/// All RDMA devices rdma-cm knows, opened once per process.
pub fn devices() -> &'static [Arc<Context>] {
    DEVICES.get_or_init(|| {
        let mut n: i32 = 0;
        // SAFETY: returns a NULL-terminated array of contexts (or NULL); the
        // contexts stay open for the life of the process (librdmacm owns them).
        let list = unsafe { ffi::rdma_get_devices(&mut n) };
        let mut out = Vec::new();
        if list.is_null() {
            return out;
        }
        for i in 0..n.max(0) as usize {
            // SAFETY: i < n, the array holds n entries.
            let p = unsafe { *list.add(i) };
            if let Some(ptr) = NonNull::new(p) {
                // SAFETY: a valid context has a valid device whose name is a C string.
                let name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name((*p).device)) }
                    .to_string_lossy()
                    .into_owned();
                out.push(Arc::new(Context { ptr, name, inline_probe: OnceCell::new() }));
            }
        }
        // SAFETY: `list` came from rdma_get_devices and is not used after this;
        // only the array is freed: "devices remain opened while the librdmacm
        // is loaded" (rdma_cma.h), so the contexts copied above stay valid.
        // (Found by LeakSanitizer: the array leaked.)
        unsafe { ffi::rdma_free_devices(list) };
        out
    })
}

/// Finds the process-wide context object for a raw context pointer (as found in a cm id).
pub(crate) fn context_for_raw(p: *mut ffi::ibv_context) -> Option<Arc<Context>> {
    devices().iter().find(|c| c.ptr.as_ptr() == p).cloned()
}

/// The device attributes the provider uses (a copy of `ibv_device_attr` fields).
#[derive(Debug, Clone, Default)]
pub struct DeviceAttr {
    pub fw_ver: String,
    pub node_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub max_qp: i32,
    pub max_qp_wr: i32,
    pub max_sge: i32,
    pub max_cq: i32,
    pub max_cqe: i32,
    pub max_mr: i32,
    pub max_pd: i32,
    pub max_qp_rd_atom: i32,
    pub max_qp_init_rd_atom: i32,
    pub max_srq: i32,
    pub max_srq_wr: i32,
    pub max_srq_sge: i32,
    pub atomic_cap: u32,
    pub phys_port_cnt: u8,
}

/// The port attributes the provider uses.
#[derive(Debug, Clone, Default)]
pub struct PortAttr {
    pub state: u32,
    /// The port's LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: i32,
    pub max_msg_sz: u32,
    pub link_layer: u8,
    pub active_speed: u8,
    pub active_width: u8,
}

pub const PORT_ACTIVE: u32 = ffi::ibv_port_state::IBV_PORT_ACTIVE;
/// `IBV_LINK_LAYER_ETHERNET` (an anonymous enum in verbs.h).
pub const LINK_LAYER_ETHERNET: u8 = 2;

/// Converts an `ibv_mtu` enum value to bytes.
pub fn mtu_bytes(mtu: u32) -> usize {
    match mtu {
        1 => 256,
        2 => 512,
        3 => 1024,
        4 => 2048,
        5 => 4096,
        _ => 0,
    }
}

impl Context {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_context {
        self.ptr.as_ptr()
    }

    pub fn query_device(&self) -> Result<DeviceAttr, Errno> {
        // SAFETY: ibv_device_attr is POD; zero is a valid initial value.
        let mut a: ffi::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: valid context, valid out pointer.
        check(unsafe { ffi::ibv_query_device(self.raw(), &mut a) })?;
        // SAFETY: fw_ver is a NUL-terminated char array filled by the driver.
        let fw = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) }.to_string_lossy().into_owned();
        Ok(DeviceAttr {
            fw_ver: fw,
            node_guid: u64::from_be(a.node_guid),
            max_mr_size: a.max_mr_size,
            page_size_cap: a.page_size_cap,
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            max_sge: a.max_sge,
            max_cq: a.max_cq,
            max_cqe: a.max_cqe,
            max_mr: a.max_mr,
            max_pd: a.max_pd,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            max_srq: a.max_srq,
            max_srq_wr: a.max_srq_wr,
            max_srq_sge: a.max_srq_sge,
            atomic_cap: a.atomic_cap,
            phys_port_cnt: a.phys_port_cnt,
        })
    }

    pub fn query_port(&self, port: u8) -> Result<PortAttr, Errno> {
        // SAFETY: ibv_port_attr is POD; zero is a valid initial value.
        let mut a: ffi::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: valid context, valid out pointer of the size the call expects.
        check(unsafe { ffi::___ibv_query_port(self.raw(), port, &mut a) })?;
        Ok(PortAttr {
            state: a.state,
            lid: a.lid,
            max_mtu: a.max_mtu,
            active_mtu: a.active_mtu,
            gid_tbl_len: a.gid_tbl_len,
            max_msg_sz: a.max_msg_sz,
            link_layer: a.link_layer,
            active_speed: a.active_speed,
            active_width: a.active_width,
        })
    }

    pub fn query_gid(&self, port: u8, index: i32) -> Result<[u8; 16], Errno> {
        // SAFETY: ibv_gid is a 16-byte union; zero is valid.
        let mut g: ffi::ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: valid context and out pointer.
        check(unsafe { ffi::ibv_query_gid(self.raw(), port, index, &mut g) })?;
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        Ok(unsafe { g.raw })
    }

    pub fn alloc_pd(self: &Arc<Self>) -> Result<Arc<Pd>, Errno> {
        // SAFETY: valid context.
        let p = unsafe { ffi::ibv_alloc_pd(self.raw()) };
        let ptr = NonNull::new(p).ok_or_else(errno)?;
        Ok(Arc::new(Pd { ptr, ctx: self.clone() }))
    }

    pub fn create_comp_channel(self: &Arc<Self>) -> Result<CompChannel, Errno> {
        // SAFETY: valid context.
        let p = unsafe { ffi::ibv_create_comp_channel(self.raw()) };
        let ptr = NonNull::new(p).ok_or_else(errno)?;
        let ch = CompChannel { ptr, _ctx: self.clone() };
        crate::sys::set_nonblocking(ch.fd())?;
        Ok(ch)
    }

    /// Creates a CQ with at least `cqe` entries, optionally tied to a completion channel.
    pub fn create_cq(self: &Arc<Self>, cqe: i32, channel: Option<Arc<CompChannel>>) -> Result<Cq, Errno> {
        let ch = channel.as_ref().map_or(std::ptr::null_mut(), |c| c.ptr.as_ptr());
        // SAFETY: valid context, channel NULL or valid (kept alive by the Cq).
        let p = unsafe { ffi::ibv_create_cq(self.raw(), cqe, std::ptr::null_mut(), ch, 0) };
        let ptr = NonNull::new(p).ok_or_else(errno)?;
        Ok(Cq { ptr, channel, _ctx: self.clone() })
    }

    /// The largest inline size an RC QP on this device accepts (probed once:
    /// `ibv_query_device` does not report it).
    pub fn max_inline(self: &Arc<Self>) -> u32 {
        *self.inline_probe.get_or_init(|| self.probe_inline().unwrap_or(0))
    }

    fn probe_inline(self: &Arc<Self>) -> Result<u32, Errno> {
        let pd = self.alloc_pd()?;
        let cq = self.create_cq(2, None)?;
        let try_inline = |n: u32| -> bool {
            // SAFETY: ibv_qp_init_attr is POD; zero is valid.
            let mut a: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
            a.send_cq = cq.ptr.as_ptr();
            a.recv_cq = cq.ptr.as_ptr();
            a.qp_type = ffi::ibv_qp_type::IBV_QPT_RC;
            a.cap.max_send_wr = 1;
            a.cap.max_recv_wr = 1;
            a.cap.max_send_sge = 1;
            a.cap.max_recv_sge = 1;
            a.cap.max_inline_data = n;
            // SAFETY: valid PD and CQs, valid attributes; the QP is destroyed at once.
            let qp = unsafe { ffi::ibv_create_qp(pd.ptr.as_ptr(), &mut a) };
            if qp.is_null() {
                false
            } else {
                // SAFETY: qp was just created by us.
                unsafe { ffi::ibv_destroy_qp(qp) };
                true
            }
        };
        // Binary search the largest accepted value in [0, 8192].
        let (mut lo, mut hi) = (0u32, 8192u32);
        if try_inline(hi) {
            return Ok(hi);
        }
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if try_inline(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

/// A protection domain.
#[derive(Debug)]
pub struct Pd {
    ptr: NonNull<ffi::ibv_pd>,
    ctx: Arc<Context>,
}
// SAFETY: PDs are usable from any thread; the handle is only freed in Drop.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: we own the PD; every object using it holds an Arc<Pd>, so none is left.
        unsafe { ffi::ibv_dealloc_pd(self.ptr.as_ptr()) };
    }
}

/// Access flags for memory registration (`IBV_ACCESS_*`).
pub mod access {
    pub const LOCAL_WRITE: i32 = rdma_sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32;
    pub const REMOTE_WRITE: i32 = rdma_sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0 as i32;
    pub const REMOTE_READ: i32 = rdma_sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0 as i32;
    pub const REMOTE_ATOMIC: i32 = rdma_sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0 as i32;
}

impl Pd {
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Registers `[addr, addr+len)` with the device. The kernel validates and pins
    /// the pages (a bad range fails with EFAULT); registration never dereferences
    /// the memory from Rust. Keeping the memory alive while registered is the
    /// application's contract (fi_mr(3)).
    pub fn reg_mr(self: &Arc<Self>, addr: u64, len: usize, access: i32) -> Result<Mr, Errno> {
        // SAFETY: valid PD; the kernel checks the range, no Rust memory is aliased.
        let p = unsafe { ffi::ibv_reg_mr(self.ptr.as_ptr(), addr as usize as *mut libc::c_void, len, access) };
        let ptr = NonNull::new(p).ok_or_else(errno)?;
        // SAFETY: a freshly registered MR; lkey/rkey are plain fields.
        let (lkey, rkey) = unsafe { ((*p).lkey, (*p).rkey) };
        Ok(Mr { ptr, lkey, rkey, addr, len, _pd: self.clone() })
    }
}

/// A registered memory region.
#[derive(Debug)]
pub struct Mr {
    ptr: NonNull<ffi::ibv_mr>,
    pub lkey: u32,
    pub rkey: u32,
    pub addr: u64,
    pub len: usize,
    _pd: Arc<Pd>,
}
// SAFETY: MR handles are immutable after creation and freed only in Drop.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: we own the MR.
        unsafe { ffi::ibv_dereg_mr(self.ptr.as_ptr()) };
    }
}

/// A completion channel: an fd that becomes readable when an armed CQ has an event.
#[derive(Debug)]
pub struct CompChannel {
    ptr: NonNull<ffi::ibv_comp_channel>,
    _ctx: Arc<Context>,
}
// SAFETY: the channel is a kernel fd wrapper; verbs calls on it are thread-safe.
unsafe impl Send for CompChannel {}
// SAFETY: as above.
unsafe impl Sync for CompChannel {}

impl CompChannel {
    pub fn fd(&self) -> RawFd {
        // SAFETY: valid channel; fd is a plain field.
        unsafe { (*self.ptr.as_ptr()).fd }
    }

    /// Reads one pending CQ event (non-blocking) and acknowledges it on `cq`.
    /// Returns false when none was pending.
    pub fn consume_event(&self, cq: &Cq) -> bool {
        let mut out_cq: *mut ffi::ibv_cq = std::ptr::null_mut();
        let mut ctx: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: valid channel (non-blocking fd), valid out pointers.
        let r = unsafe { ffi::ibv_get_cq_event(self.ptr.as_ptr(), &mut out_cq, &mut ctx) };
        if r != 0 {
            return false;
        }
        // Each channel serves exactly one CQ in this provider, so out_cq == cq.
        // SAFETY: acknowledging the event we just read on its CQ.
        unsafe { ffi::ibv_ack_cq_events(if out_cq.is_null() { cq.ptr.as_ptr() } else { out_cq }, 1) };
        true
    }
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        // SAFETY: we own the channel; the CQ using it holds an Arc and is gone.
        unsafe { ffi::ibv_destroy_comp_channel(self.ptr.as_ptr()) };
    }
}

/// A work completion, as polled from a CQ.
#[repr(transparent)]
pub struct Wc(ffi::ibv_wc);

/// `ibv_wc_status` values the provider distinguishes.
pub mod wc_status {
    pub const SUCCESS: u32 = rdma_sys::ibv_wc_status::IBV_WC_SUCCESS;
    pub const LOC_LEN_ERR: u32 = rdma_sys::ibv_wc_status::IBV_WC_LOC_LEN_ERR;
    pub const LOC_PROT_ERR: u32 = rdma_sys::ibv_wc_status::IBV_WC_LOC_PROT_ERR;
    pub const WR_FLUSH_ERR: u32 = rdma_sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR;
    pub const REM_INV_REQ_ERR: u32 = rdma_sys::ibv_wc_status::IBV_WC_REM_INV_REQ_ERR;
    pub const REM_ACCESS_ERR: u32 = rdma_sys::ibv_wc_status::IBV_WC_REM_ACCESS_ERR;
    pub const REM_OP_ERR: u32 = rdma_sys::ibv_wc_status::IBV_WC_REM_OP_ERR;
    pub const RETRY_EXC_ERR: u32 = rdma_sys::ibv_wc_status::IBV_WC_RETRY_EXC_ERR;
    pub const RNR_RETRY_EXC_ERR: u32 = rdma_sys::ibv_wc_status::IBV_WC_RNR_RETRY_EXC_ERR;
}

/// `ibv_wc_opcode` values.
pub mod wc_opcode {
    pub const SEND: u32 = rdma_sys::ibv_wc_opcode::IBV_WC_SEND;
    pub const RDMA_WRITE: u32 = rdma_sys::ibv_wc_opcode::IBV_WC_RDMA_WRITE;
    pub const RDMA_READ: u32 = rdma_sys::ibv_wc_opcode::IBV_WC_RDMA_READ;
    pub const COMP_SWAP: u32 = rdma_sys::ibv_wc_opcode::IBV_WC_COMP_SWAP;
    pub const FETCH_ADD: u32 = rdma_sys::ibv_wc_opcode::IBV_WC_FETCH_ADD;
    pub const RECV: u32 = rdma_sys::ibv_wc_opcode::IBV_WC_RECV;
    pub const RECV_RDMA_WITH_IMM: u32 = rdma_sys::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM;
}

impl Wc {
    pub fn zeroed() -> Wc {
        // SAFETY: ibv_wc is POD (integers and a union of integers); zero is valid.
        Wc(unsafe { std::mem::zeroed() })
    }
    /// A completion with these fields (tests of what reads them).
    #[cfg(test)]
    pub fn for_test(wr_id: u64, status: u32, opcode: u32, qp_num: u32, byte_len: u32, imm: Option<u32>) -> Wc {
        let mut w = Wc::zeroed();
        w.0.wr_id = wr_id;
        w.0.status = status;
        w.0.opcode = opcode;
        w.0.qp_num = qp_num;
        w.0.byte_len = byte_len;
        if let Some(v) = imm {
            w.0.wc_flags |= ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0;
            w.0.imm_data_invalidated_rkey_union.imm_data = v.to_be();
        }
        w
    }
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }
    pub fn status(&self) -> u32 {
        self.0.status
    }
    pub fn opcode(&self) -> u32 {
        self.0.opcode
    }
    pub fn vendor_err(&self) -> u32 {
        self.0.vendor_err
    }
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }
    /// The completion carries immediate data.
    #[inline]
    pub fn has_imm(&self) -> bool {
        self.0.wc_flags & ffi::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0
    }
    /// Immediate data in host order, if the completion carries any.
    pub fn imm_data(&self) -> Option<u32> {
        if self.has_imm() {
            // SAFETY: WITH_IMM says the union holds imm_data.
            Some(u32::from_be(unsafe { self.0.imm_data_invalidated_rkey_union.imm_data }))
        } else {
            None
        }
    }
    pub fn status_str(&self) -> &'static str {
        status_str(self.0.status)
    }
}

/// The verbs text for a completion status.
pub fn status_str(status: u32) -> &'static str {
    // SAFETY: ibv_wc_status_str returns a static string for any value.
    let p = unsafe { ffi::ibv_wc_status_str(status) };
    if p.is_null() {
        return "unknown";
    }
    // SAFETY: static NUL-terminated string from libibverbs.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("unknown")
}

/// Room for up to `N` work completions, filled by the device: nothing is
/// zeroed (this sits on the busy-poll path).
pub struct WcBuf<const N: usize> {
    buf: [std::mem::MaybeUninit<Wc>; N],
}

impl<const N: usize> WcBuf<N> {
    pub fn new() -> Self {
        WcBuf { buf: [const { std::mem::MaybeUninit::uninit() }; N] }
    }
}

impl<const N: usize> Default for WcBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    ptr: NonNull<ffi::ibv_cq>,
    channel: Option<Arc<CompChannel>>,
    _ctx: Arc<Context>,
}
// SAFETY: libibverbs serialises polling internally; the handle is freed only in Drop.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

impl Cq {
    /// Polls up to `out.len()` completions. Returns how many were written.
    pub fn poll(&self, out: &mut [Wc]) -> Result<usize, Errno> {
        let n = out.len().min(i32::MAX as usize) as i32;
        // SAFETY: valid CQ; `out` has room for n entries (Wc is repr(transparent) over ibv_wc).
        let r = unsafe { ffi::ibv_poll_cq(self.ptr.as_ptr(), n, out.as_mut_ptr() as *mut ffi::ibv_wc) };
        if r < 0 {
            return Err(-r.max(-4095));
        }
        Ok(r as usize)
    }

    /// Polls up to `max` completions into `b`; returns the filled part.
    pub fn poll_buf<'a, const N: usize>(&self, b: &'a mut WcBuf<N>, max: usize) -> Result<&'a [Wc], Errno> {
        let n = max.min(N).min(i32::MAX as usize) as i32;
        // SAFETY: valid CQ; the buffer has room for n entries (Wc is repr(transparent)
        // over ibv_wc); the driver initialises the first `r` of them.
        let r = unsafe { ffi::ibv_poll_cq(self.ptr.as_ptr(), n, b.buf.as_mut_ptr() as *mut ffi::ibv_wc) };
        if r < 0 {
            return Err(-r.max(-4095));
        }
        // SAFETY: the first r entries were written by ibv_poll_cq.
        Ok(unsafe { std::slice::from_raw_parts(b.buf.as_ptr() as *const Wc, r as usize) })
    }

    /// Arms the CQ: its channel fd becomes readable on the next completion.
    pub fn req_notify(&self) -> Result<(), Errno> {
        // SAFETY: valid CQ.
        check(unsafe { ffi::ibv_req_notify_cq(self.ptr.as_ptr(), 0) })
    }

    pub fn channel(&self) -> Option<&Arc<CompChannel>> {
        self.channel.as_ref()
    }

    /// The CQ's real capacity.
    pub fn capacity(&self) -> i32 {
        // SAFETY: valid CQ; cqe is a plain field.
        unsafe { (*self.ptr.as_ptr()).cqe }
    }

    pub fn resize(&self, cqe: i32) -> Result<(), Errno> {
        // SAFETY: valid CQ.
        check(unsafe { ffi::ibv_resize_cq(self.ptr.as_ptr(), cqe) })
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_cq {
        self.ptr.as_ptr()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: we own the CQ; QPs using it hold an Arc to their CQ owner, so they are gone.
        unsafe { ffi::ibv_destroy_cq(self.ptr.as_ptr()) };
    }
}

/// A local buffer handed to the device: address, length and local key.
///
/// Constructing one is `unsafe`: the caller promises the memory stays valid
/// for the operation (the libfabric contract of fi_msg(3)/fi_rma(3)), and, for
/// sends posted inline, that it is readable right now. The device itself
/// checks every access against the key's registration.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct Iov(ffi::ibv_sge);

impl Iov {
    /// # Safety
    /// `[addr, addr+len)` must stay valid (and, if sent inline, readable now)
    /// until the operation completes.
    #[inline]
    pub unsafe fn new(addr: u64, len: u32, lkey: u32) -> Iov {
        Iov(ffi::ibv_sge { addr, length: len, lkey })
    }
    pub fn addr(&self) -> u64 {
        self.0.addr
    }
    pub fn len(&self) -> u32 {
        self.0.length
    }
    pub fn is_empty(&self) -> bool {
        self.0.length == 0
    }
    pub fn lkey(&self) -> u32 {
        self.0.lkey
    }
    /// The same memory under another local key (one the caller registered
    /// for it): the validity contract of `new` carries over.
    pub fn with_lkey(&self, lkey: u32) -> Iov {
        Iov(ffi::ibv_sge { addr: self.0.addr, length: self.0.length, lkey })
    }

    /// The bytes of `iovs` in all; one buffer (most operations) without the
    /// summing loop's set-up.
    #[inline(always)]
    pub fn total(iovs: &[Iov]) -> usize {
        match iovs {
            [one] => one.len() as usize,
            _ => iovs.iter().map(|v| v.len() as usize).sum(),
        }
    }
}

/// A send-queue operation.
#[derive(Debug, Clone, Copy)]
pub enum SendOp {
    Send,
    SendImm(u32),
    Write { raddr: u64, rkey: u32 },
    WriteImm { raddr: u64, rkey: u32, imm: u32 },
    Read { raddr: u64, rkey: u32 },
    CompSwap { raddr: u64, rkey: u32, compare: u64, swap: u64 },
    FetchAdd { raddr: u64, rkey: u32, add: u64 },
}

/// Send flags.
pub mod send_flags {
    pub const SIGNALED: u32 = rdma_sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
    pub const INLINE: u32 = rdma_sys::ibv_send_flags::IBV_SEND_INLINE.0;
    pub const FENCE: u32 = rdma_sys::ibv_send_flags::IBV_SEND_FENCE.0;
    pub const SOLICITED: u32 = rdma_sys::ibv_send_flags::IBV_SEND_SOLICITED.0;
}

/// A connected QP's timers as the device holds them (IB encodings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpTimers {
    pub min_rnr_timer: u8,
    /// Local ACK timeout: 4.096 µs × 2^t (0 = wait forever).
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
}

/// Capacities requested for a QP.
#[derive(Debug, Clone, Copy, Default)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline: u32,
}

/// A queue pair (owned by the rdma-cm id it was created on).
#[derive(Debug)]
pub struct Qp {
    ptr: NonNull<ffi::ibv_qp>,
    pub caps: QpCaps,
}
// SAFETY: ibv_post_send/ibv_post_recv are thread-safe per QP in libibverbs providers.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

impl Qp {
    pub fn qp_num(&self) -> u32 {
        // SAFETY: valid QP; qp_num is a plain field.
        unsafe { (*self.ptr.as_ptr()).qp_num }
    }

    /// Posts one send-queue work request. `Err(ENOMEM)` means the queue is full.
    #[inline(always)]
    pub fn post_send(&self, wr_id: u64, op: SendOp, sges: &[Iov], flags: u32) -> Result<(), Errno> {
        use ffi::ibv_wr_opcode as o;
        // SAFETY: ibv_send_wr is POD (integers, pointers, unions of those); zero is valid.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = sges.as_ptr() as *mut ffi::ibv_sge;
        wr.num_sge = sges.len() as i32;
        wr.send_flags = flags;
        match op {
            SendOp::Send => wr.opcode = o::IBV_WR_SEND,
            SendOp::SendImm(imm) => {
                wr.opcode = o::IBV_WR_SEND_WITH_IMM;
                wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
            }
            SendOp::Write { raddr, rkey } => {
                wr.opcode = o::IBV_WR_RDMA_WRITE;
                wr.wr.rdma = ffi::rdma_t { remote_addr: raddr, rkey };
            }
            SendOp::WriteImm { raddr, rkey, imm } => {
                wr.opcode = o::IBV_WR_RDMA_WRITE_WITH_IMM;
                wr.wr.rdma = ffi::rdma_t { remote_addr: raddr, rkey };
                wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
            }
            SendOp::Read { raddr, rkey } => {
                wr.opcode = o::IBV_WR_RDMA_READ;
                wr.wr.rdma = ffi::rdma_t { remote_addr: raddr, rkey };
            }
            SendOp::CompSwap { raddr, rkey, compare, swap } => {
                wr.opcode = o::IBV_WR_ATOMIC_CMP_AND_SWP;
                wr.wr.atomic = ffi::atomic_t { remote_addr: raddr, compare_add: compare, swap, rkey };
            }
            SendOp::FetchAdd { raddr, rkey, add } => {
                wr.opcode = o::IBV_WR_ATOMIC_FETCH_AND_ADD;
                wr.wr.atomic = ffi::atomic_t { remote_addr: raddr, compare_add: add, swap: 0, rkey };
            }
        }
        let mut bad: *mut ffi::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: valid QP; `wr` and the SGE array outlive the call (the driver copies
        // them); the SGEs were built under Iov::new's contract.
        check(unsafe { ffi::ibv_post_send(self.ptr.as_ptr(), &mut wr, &mut bad) })
    }

    /// Posts one receive work request. `Err(ENOMEM)` means the queue is full.
    #[inline(always)]
    pub fn post_recv(&self, wr_id: u64, sges: &[Iov]) -> Result<(), Errno> {
        let mut wr = recv_wr(wr_id, sges);
        let mut bad: *mut ffi::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: valid QP; `wr` and the SGE array outlive the call (copied by the driver).
        check(unsafe { ffi::ibv_post_recv(self.ptr.as_ptr(), &mut wr, &mut bad) })
    }

    /// Sets the RNR NAK timer this QP's responder advertises (RTS to RTS; the
    /// IB encoding, 0..=31: 12 = 0.64 ms, 0 = 655 ms) and reads back what the
    /// device holds, with the QP's transport retry settings. rdma-cm leaves
    /// the timer at 0, the longest: a send that beats the peer's receive by a
    /// moment would then wait 655 ms.
    pub fn set_min_rnr_timer(&self, v: u8) -> Result<QpTimers, Errno> {
        use ffi::ibv_qp_attr_mask as m;
        // SAFETY: ibv_qp_attr is POD; zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.min_rnr_timer = v.min(31);
        // SAFETY: valid QP and attribute struct; only the masked field is read.
        check(unsafe { ffi::ibv_modify_qp(self.ptr.as_ptr(), &mut a, m::IBV_QP_MIN_RNR_TIMER.0 as i32) })?;
        // SAFETY: ibv_qp_attr is POD; zero is valid (an out-struct the driver fills).
        let mut q: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ibv_qp_init_attr is POD (integers, pointers); zero is valid.
        let mut init: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        let mask = m::IBV_QP_MIN_RNR_TIMER.0 | m::IBV_QP_TIMEOUT.0 | m::IBV_QP_RETRY_CNT.0 | m::IBV_QP_RNR_RETRY.0;
        // SAFETY: valid QP; both out-structs are live for the call.
        check(unsafe { ffi::ibv_query_qp(self.ptr.as_ptr(), &mut q, mask as i32, &mut init) })?;
        Ok(QpTimers { min_rnr_timer: q.min_rnr_timer, timeout: q.timeout, retry_cnt: q.retry_cnt, rnr_retry: q.rnr_retry })
    }

    /// Moves the QP to the error state, which flushes every outstanding request.
    pub fn to_error(&self) -> Result<(), Errno> {
        // SAFETY: ibv_qp_attr is POD; zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ffi::ibv_qp_state::IBV_QPS_ERR;
        // SAFETY: valid QP and attribute struct.
        check(unsafe { ffi::ibv_modify_qp(self.ptr.as_ptr(), &mut a, ffi::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32) })
    }
}

/// One receive work request over `sges` (no chaining), for a QP's or an SRQ's receive queue.
fn recv_wr(wr_id: u64, sges: &[Iov]) -> ffi::ibv_recv_wr {
    ffi::ibv_recv_wr {
        wr_id,
        next: std::ptr::null_mut(),
        sg_list: sges.as_ptr() as *mut ffi::ibv_sge,
        num_sge: sges.len() as i32,
    }
}

/// A shared receive queue: receive buffers posted once, consumed by whichever
/// QP attached to it a message arrives on (the completion's `qp_num` says which).
#[derive(Debug)]
pub struct Srq {
    ptr: NonNull<ffi::ibv_srq>,
    /// Work requests the SRQ holds (as the device granted, >= the request).
    pub max_wr: u32,
    _pd: Arc<Pd>,
}
// SAFETY: ibv_post_srq_recv is thread-safe in libibverbs providers; the handle
// is freed only in Drop.
unsafe impl Send for Srq {}
// SAFETY: as above.
unsafe impl Sync for Srq {}

impl Pd {
    /// Creates a shared receive queue of at least `max_wr` work requests with
    /// `max_sge` scatter entries each.
    pub fn create_srq(self: &Arc<Self>, max_wr: u32, max_sge: u32) -> Result<Srq, Errno> {
        // SAFETY: ibv_srq_init_attr is POD; zero is valid (no context, no limit).
        let mut a: ffi::ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        a.attr.max_wr = max_wr;
        a.attr.max_sge = max_sge;
        // SAFETY: valid PD and attributes; the driver writes the granted sizes back.
        let p = unsafe { ffi::ibv_create_srq(self.ptr.as_ptr(), &mut a) };
        let ptr = NonNull::new(p).ok_or_else(errno)?;
        Ok(Srq { ptr, max_wr: a.attr.max_wr, _pd: self.clone() })
    }
}

impl Srq {
    /// Posts one receive work request. `Err(ENOMEM)` means the queue is full.
    #[inline(always)]
    pub fn post_recv(&self, wr_id: u64, sges: &[Iov]) -> Result<(), Errno> {
        let mut wr = recv_wr(wr_id, sges);
        let mut bad: *mut ffi::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: valid SRQ; `wr` and the SGE array outlive the call (copied by the
        // driver); the SGEs were built under Iov::new's contract.
        check(unsafe { ffi::ibv_post_srq_recv(self.ptr.as_ptr(), &mut wr, &mut bad) })
    }

    /// Posts one single-SGE receive per `(wr_id, sge)` of `reqs` (at most
    /// `RECV_CHAIN` of them; the rest are left), chained in one call: one
    /// trip into the driver and one lock of its queue for them all. Returns
    /// how many were posted, from the front, and the error that stopped the
    /// others (`ENOMEM`: the queue is full).
    pub fn post_recvs(&self, reqs: impl IntoIterator<Item = (u64, Iov)>) -> (usize, Option<Errno>) {
        let mut sges = [std::mem::MaybeUninit::<Iov>::uninit(); RECV_CHAIN];
        let mut wrs = [std::mem::MaybeUninit::<ffi::ibv_recv_wr>::uninit(); RECV_CHAIN];
        let sp = sges.as_mut_ptr() as *mut Iov;
        let wp = wrs.as_mut_ptr() as *mut ffi::ibv_recv_wr;
        let mut n = 0;
        for (wr_id, iov) in reqs.into_iter().take(RECV_CHAIN) {
            // SAFETY: n < RECV_CHAIN (take), so both writes stay in their
            // arrays; each entry is written whole before anything reads it.
            // The previous entry's `next` is pointed at this one.
            unsafe {
                sp.add(n).write(iov);
                wp.add(n).write(ffi::ibv_recv_wr { wr_id, next: std::ptr::null_mut(), sg_list: sp.add(n) as *mut ffi::ibv_sge, num_sge: 1 });
                if n > 0 {
                    (*wp.add(n - 1)).next = wp.add(n);
                }
            }
            n += 1;
        }
        if n == 0 {
            return (0, None);
        }
        let mut bad: *mut ffi::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: valid SRQ; the first `n` entries of `wrs` and `sges` are
        // initialised, chained, and outlive the call (the driver copies
        // them); the SGEs were built under Iov::new's contract.
        match check(unsafe { ffi::ibv_post_srq_recv(self.ptr.as_ptr(), wp, &mut bad) }) {
            Ok(()) => (n, None),
            Err(e) => {
                // The driver names the first request it did not post; those before it were.
                let posted = if bad.is_null() { 0 } else { (bad as usize).wrapping_sub(wp as usize) / std::mem::size_of::<ffi::ibv_recv_wr>() };
                (posted.min(n), Some(e))
            }
        }
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_srq {
        self.ptr.as_ptr()
    }
}

/// The most receives `Srq::post_recvs` chains in one call.
pub const RECV_CHAIN: usize = 32;

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: we own the SRQ; every QP attached to it holds an Arc to it
        // (keep-alive list), so none is left.
        unsafe { ffi::ibv_destroy_srq(self.ptr.as_ptr()) };
    }
}
