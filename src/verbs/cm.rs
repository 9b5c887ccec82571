//! Safe wrappers over librdmacm: event channels, connection ids, events.
//!
//! Events are copied out and acknowledged at once, so `rdma_destroy_id` (which
//! waits for every delivered event of its id to be acknowledged) never blocks.
#![allow(unsafe_code)]

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;

use once_cell::sync::OnceCell;
use rdma_sys as ffi;

use super::{check, errno, Context, Cq, Errno, Pd, Qp, QpCaps, Srq};
use crate::sys;

/// An rdma-cm event channel (non-blocking fd).
#[derive(Debug)]
pub struct EventChannel {
    ptr: NonNull<ffi::rdma_event_channel>,
}
// SAFETY: the channel is an fd wrapper; librdmacm calls on it are thread-safe.
unsafe impl Send for EventChannel {}
// SAFETY: as above.
unsafe impl Sync for EventChannel {}

/// The kinds of rdma-cm event the provider handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmEventKind {
    AddrResolved,
    AddrError,
    RouteResolved,
    RouteError,
    ConnectRequest,
    ConnectResponse,
    ConnectError,
    Unreachable,
    Rejected,
    Established,
    Disconnected,
    DeviceRemoval,
    TimewaitExit,
    AddrChange,
    Other(u32),
}

impl CmEventKind {
    fn from_raw(e: u32) -> Self {
        use ffi::rdma_cm_event_type as t;
        match e {
            t::RDMA_CM_EVENT_ADDR_RESOLVED => Self::AddrResolved,
            t::RDMA_CM_EVENT_ADDR_ERROR => Self::AddrError,
            t::RDMA_CM_EVENT_ROUTE_RESOLVED => Self::RouteResolved,
            t::RDMA_CM_EVENT_ROUTE_ERROR => Self::RouteError,
            t::RDMA_CM_EVENT_CONNECT_REQUEST => Self::ConnectRequest,
            t::RDMA_CM_EVENT_CONNECT_RESPONSE => Self::ConnectResponse,
            t::RDMA_CM_EVENT_CONNECT_ERROR => Self::ConnectError,
            t::RDMA_CM_EVENT_UNREACHABLE => Self::Unreachable,
            t::RDMA_CM_EVENT_REJECTED => Self::Rejected,
            t::RDMA_CM_EVENT_ESTABLISHED => Self::Established,
            t::RDMA_CM_EVENT_DISCONNECTED => Self::Disconnected,
            t::RDMA_CM_EVENT_DEVICE_REMOVAL => Self::DeviceRemoval,
            t::RDMA_CM_EVENT_TIMEWAIT_EXIT => Self::TimewaitExit,
            t::RDMA_CM_EVENT_ADDR_CHANGE => Self::AddrChange,
            o => Self::Other(o),
        }
    }
}

/// A copied-out, already acknowledged rdma-cm event.
#[derive(Debug)]
pub struct CmEvent {
    pub kind: CmEventKind,
    pub status: i32,
    /// The token of the id the event is about (for a connect request: the listener's).
    pub token: u64,
    /// For a connect request: the new id, owned by the receiver of the event.
    pub new_id: Option<CmId>,
    pub private_data: Vec<u8>,
    pub initiator_depth: u8,
    pub responder_resources: u8,
}

impl EventChannel {
    pub fn new() -> Result<Self, Errno> {
        // SAFETY: plain constructor.
        let p = unsafe { ffi::rdma_create_event_channel() };
        let ptr = NonNull::new(p).ok_or_else(errno)?;
        let ch = EventChannel { ptr };
        sys::set_nonblocking(ch.fd())?;
        Ok(ch)
    }

    pub fn fd(&self) -> RawFd {
        // SAFETY: valid channel; fd is a plain field.
        unsafe { (*self.ptr.as_ptr()).fd }
    }

    /// Reads one event without blocking. `Ok(None)` when none is pending.
    pub fn get_event(&self) -> Result<Option<CmEvent>, Errno> {
        let mut ev: *mut ffi::rdma_cm_event = std::ptr::null_mut();
        // SAFETY: valid channel whose fd is non-blocking; valid out pointer.
        let r = unsafe { ffi::rdma_get_cm_event(self.ptr.as_ptr(), &mut ev) };
        if r != 0 {
            let e = errno();
            return if e == libc::EAGAIN || e == libc::EWOULDBLOCK { Ok(None) } else { Err(e) };
        }
        // SAFETY: on success `ev` is a valid event until we ack it below.
        let e = unsafe { &*ev };
        let kind = CmEventKind::from_raw(e.event);
        let (token, new_id) = if kind == CmEventKind::ConnectRequest {
            // SAFETY: listen_id is valid for a connect request; context is our token.
            let lt = unsafe { (*e.listen_id).context } as u64;
            let nid = NonNull::new(e.id).map(|p| CmId::from_raw(p, true));
            (lt, nid)
        } else {
            // SAFETY: id is valid for every event; context is our token.
            (unsafe { (*e.id).context } as u64, None)
        };
        // SAFETY: for connection events param.conn is the active union member.
        let conn = unsafe { &e.param.conn };
        let private_data = if conn.private_data.is_null() || conn.private_data_len == 0 {
            Vec::new()
        } else {
            // SAFETY: librdmacm says the buffer holds private_data_len bytes until the ack.
            unsafe { std::slice::from_raw_parts(conn.private_data as *const u8, conn.private_data_len as usize) }
                .to_vec()
        };
        let out = CmEvent {
            kind,
            status: e.status,
            token,
            new_id,
            private_data,
            initiator_depth: conn.initiator_depth,
            responder_resources: conn.responder_resources,
        };
        // SAFETY: acknowledge the event exactly once, after copying what we need.
        unsafe { ffi::rdma_ack_cm_event(ev) };
        Ok(Some(out))
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: we own the channel; ids on it were migrated away or destroyed first
        // (the EQ refuses to close while objects are bound to it).
        unsafe { ffi::rdma_destroy_event_channel(self.ptr.as_ptr()) };
    }
}

/// Transport retries of an RC connection (the IB retry count: each a local
/// ACK timeout long). 6, not the field's maximum 7: Soft-RoCE treats 7 as
/// "retry forever" (as the RNR retry count's 7 is by the spec), so a peer
/// whose host vanished would never fail the sends on the wire; measured by
/// `rdm_inject_fail`, where with 7 nothing failed in 60 s. On other devices
/// 6 is one retry fewer.
pub const RC_RETRY_COUNT: u8 = 6;
/// RNR retries: 7 = retry forever (a receiver that is slow to post is not an error).
pub const RNR_RETRY_FOREVER: u8 = 7;

/// Connection parameters for connect/accept.
#[derive(Debug, Clone, Default)]
pub struct ConnParam<'a> {
    pub private_data: &'a [u8],
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
}

impl ConnParam<'_> {
    fn raw(&self) -> ffi::rdma_conn_param {
        ffi::rdma_conn_param {
            private_data: if self.private_data.is_empty() {
                std::ptr::null()
            } else {
                self.private_data.as_ptr() as *const libc::c_void
            },
            private_data_len: self.private_data.len().min(255) as u8,
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: 1,
            retry_count: self.retry_count,
            rnr_retry_count: self.rnr_retry_count,
            srq: 0,
            qp_num: 0,
        }
    }
}

/// An rdma-cm id (`RDMA_PS_TCP`, reliable connected). Owns its QP, if any.
pub struct CmId {
    ptr: NonNull<ffi::rdma_cm_id>,
    qp: OnceCell<Qp>,
    /// Connect-request ids that were never accepted are rejected on drop.
    pending_request: std::sync::atomic::AtomicBool,
    /// Keeps the PD (and CQ owners) the QP uses alive as long as the QP.
    keep: OnceCell<(Arc<Pd>, Vec<Arc<dyn Send + Sync>>)>,
}
// SAFETY: librdmacm calls on an id may come from any thread; the provider serialises
// state-changing calls per endpoint, and the handle is freed only in Drop.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId").field("local", &self.local_addr()).field("peer", &self.peer_addr()).finish()
    }
}

impl CmId {
    fn from_raw(ptr: NonNull<ffi::rdma_cm_id>, pending_request: bool) -> Self {
        CmId {
            ptr,
            qp: OnceCell::new(),
            pending_request: std::sync::atomic::AtomicBool::new(pending_request),
            keep: OnceCell::new(),
        }
    }

    /// Creates a synchronous id (no channel): address and route resolution block
    /// until done. Migrate it to an event channel before connecting or listening.
    pub fn new_sync() -> Result<Self, Errno> {
        let mut id: *mut ffi::rdma_cm_id = std::ptr::null_mut();
        // SAFETY: NULL channel = synchronous id; valid out pointer.
        check(unsafe {
            ffi::rdma_create_id(std::ptr::null_mut(), &mut id, std::ptr::null_mut(), ffi::rdma_port_space::RDMA_PS_TCP)
        })?;
        Ok(Self::from_raw(NonNull::new(id).ok_or(libc::ENOMEM)?, false))
    }

    fn raw(&self) -> *mut ffi::rdma_cm_id {
        self.ptr.as_ptr()
    }

    /// Sets the token reported in this id's events.
    pub fn set_token(&self, token: u64) {
        // SAFETY: context is a user field of the id; we own the id.
        unsafe { (*self.raw()).context = token as usize as *mut libc::c_void };
    }

    pub fn bind_addr(&self, addr: &SocketAddr) -> Result<(), Errno> {
        let mut ss = sys::sockaddr_storage(addr);
        // SAFETY: valid id and sockaddr.
        check(unsafe { ffi::rdma_bind_addr(self.raw(), &mut ss as *mut _ as *mut libc::sockaddr) })
    }

    /// Resolves `dst` (and binds to `src` if given). Blocks on a synchronous id.
    pub fn resolve_addr(&self, src: Option<&SocketAddr>, dst: &SocketAddr, timeout_ms: i32) -> Result<(), Errno> {
        let mut s = src.map(sys::sockaddr_storage);
        let mut d = sys::sockaddr_storage(dst);
        let sp = s.as_mut().map_or(std::ptr::null_mut(), |s| s as *mut _ as *mut libc::sockaddr);
        // SAFETY: valid id, valid (or NULL) source and valid destination sockaddrs.
        check(unsafe { ffi::rdma_resolve_addr(self.raw(), sp, &mut d as *mut _ as *mut libc::sockaddr, timeout_ms) })
    }

    pub fn resolve_route(&self, timeout_ms: i32) -> Result<(), Errno> {
        // SAFETY: valid id.
        check(unsafe { ffi::rdma_resolve_route(self.raw(), timeout_ms) })
    }

    pub fn listen(&self, backlog: i32) -> Result<(), Errno> {
        // SAFETY: valid, bound id.
        check(unsafe { ffi::rdma_listen(self.raw(), backlog) })
    }

    pub fn migrate(&self, ch: &EventChannel) -> Result<(), Errno> {
        // SAFETY: valid id and channel; all events of the id were acked on read.
        check(unsafe { ffi::rdma_migrate_id(self.raw(), ch.ptr.as_ptr()) })
    }

    pub fn connect(&self, p: &ConnParam) -> Result<(), Errno> {
        let mut raw = p.raw();
        // SAFETY: valid id; the param and its private data outlive the call (copied).
        check(unsafe { ffi::rdma_connect(self.raw(), &mut raw) })
    }

    pub fn accept(&self, p: &ConnParam) -> Result<(), Errno> {
        let mut raw = p.raw();
        // SAFETY: valid id; the param and its private data outlive the call (copied).
        let r = check(unsafe { ffi::rdma_accept(self.raw(), &mut raw) });
        if r.is_ok() {
            self.pending_request.store(false, std::sync::atomic::Ordering::Release);
        }
        r
    }

    pub fn reject(&self, data: &[u8]) -> Result<(), Errno> {
        let p = if data.is_empty() { std::ptr::null() } else { data.as_ptr() as *const libc::c_void };
        // SAFETY: valid id of a connect request; data is copied by the call.
        let r = check(unsafe { ffi::rdma_reject(self.raw(), p, data.len().min(255) as u8) });
        self.pending_request.store(false, std::sync::atomic::Ordering::Release);
        r
    }

    pub fn disconnect(&self) -> Result<(), Errno> {
        // SAFETY: valid id.
        check(unsafe { ffi::rdma_disconnect(self.raw()) })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        // SAFETY: the route's address storage lives inside the id; it holds a sockaddr.
        unsafe { sys::sockaddr_from_ptr(&(*self.raw()).route.addr.src_addr_union.src_storage as *const _ as *const libc::sockaddr) }
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        // SAFETY: as local_addr, for the destination.
        unsafe { sys::sockaddr_from_ptr(&(*self.raw()).route.addr.dst_addr_union.dst_storage as *const _ as *const libc::sockaddr) }
    }

    /// The device this id is bound to, once bound or resolved.
    pub fn device(&self) -> Option<Arc<Context>> {
        // SAFETY: verbs is NULL or one of rdma_get_devices()'s contexts.
        let v = unsafe { (*self.raw()).verbs };
        if v.is_null() {
            None
        } else {
            super::context_for_raw(v)
        }
    }

    pub fn port_num(&self) -> u8 {
        // SAFETY: plain field of a valid id.
        unsafe { (*self.raw()).port_num }
    }

    /// Creates the id's RC QP. `keep` holds whatever owns the CQs, so they outlive the QP.
    pub fn create_qp(
        &self,
        pd: &Arc<Pd>,
        send_cq: &Cq,
        recv_cq: &Cq,
        srq: Option<&Srq>,
        caps: QpCaps,
        keep: Vec<Arc<dyn Send + Sync>>,
    ) -> Result<&Qp, Errno> {
        if self.qp.get().is_some() {
            return Err(libc::EEXIST);
        }
        // SAFETY: ibv_qp_init_attr is POD; zero is valid.
        let mut a: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        a.send_cq = send_cq.raw();
        a.recv_cq = recv_cq.raw();
        a.qp_type = ffi::ibv_qp_type::IBV_QPT_RC;
        a.sq_sig_all = 0;
        a.cap.max_send_wr = caps.max_send_wr;
        a.cap.max_send_sge = caps.max_send_sge;
        a.cap.max_inline_data = caps.max_inline;
        match srq {
            // Receives come from the SRQ: the QP has no receive queue of its own.
            Some(s) => a.srq = s.raw(),
            None => {
                a.cap.max_recv_wr = caps.max_recv_wr;
                a.cap.max_recv_sge = caps.max_recv_sge;
            }
        }
        // SAFETY: valid id (bound to pd's device), valid PD, CQs and SRQ (the
        // caller keeps the SRQ alive in `keep`), valid attributes.
        check(unsafe { ffi::rdma_create_qp(self.raw(), pd_raw(pd), &mut a) })?;
        // SAFETY: on success the id's qp field holds the new QP.
        let qp = NonNull::new(unsafe { (*self.raw()).qp }).ok_or(libc::EIO)?;
        let real = QpCaps {
            max_send_wr: a.cap.max_send_wr,
            max_recv_wr: a.cap.max_recv_wr,
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline: a.cap.max_inline_data.max(caps.max_inline.min(a.cap.max_inline_data)),
        };
        let _ = self.keep.set((pd.clone(), keep));
        let _ = self.qp.set(Qp { ptr: qp, caps: real });
        Ok(self.qp.get().expect("just set"))
    }

    pub fn qp(&self) -> Option<&Qp> {
        self.qp.get()
    }
}

fn pd_raw(pd: &Pd) -> *mut ffi::ibv_pd {
    pd.ptr.as_ptr()
}

impl Drop for CmId {
    fn drop(&mut self) {
        if self.pending_request.load(std::sync::atomic::Ordering::Acquire) {
            // A connect request nobody answered: tell the peer now rather than let it time out.
            // SAFETY: valid id of an unanswered connect request.
            unsafe { ffi::rdma_reject(self.raw(), std::ptr::null(), 0) };
        }
        if self.qp.get().is_some() {
            // SAFETY: the QP belongs to this id and nothing else references it any more.
            unsafe { ffi::rdma_destroy_qp(self.raw()) };
        }
        // SAFETY: we own the id; all its delivered events were acknowledged on read.
        unsafe { ffi::rdma_destroy_id(self.raw()) };
    }
}
