//! MSG endpoints over RC QPs (rdma-cm), passive endpoints and connection
//! requests.
//!
//! States of an active endpoint: `Idle` → (`fi_enable`) `Enabled` →
//! (`fi_connect`/`fi_accept`) `Connecting` → (`RDMA_CM_EVENT_ESTABLISHED`)
//! `Connected` → (disconnect, from either side) `Shutdown`. Receives may be
//! posted from `Enabled` on; sends, RMA and atomics need `Connected`.
//!
//! CM private data travels behind a one-byte length header, the layout
//! libfabric's own verbs provider uses, so the two interoperate.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use once_cell::sync::OnceCell;
use parking_lot::Mutex;

use crate::fi::consts::*;
use crate::cntr::{CntrBinds, Cntr};
use crate::cq::{Cq, CqErr, OpKind, QpCounters};
use crate::progress::Progress;
use crate::domain::Domain;
use crate::eq::{CmHandler, Eq, EqEntry, EqErr};
use crate::error::{FiError, FiResult};
use crate::fabric::{Fabric, Hold};
use crate::info::{Info, CM_DATA_SIZE};
use crate::mr::lkey_of;
use crate::srx::Srx;
use crate::verbs::cm::{CmEvent, CmEventKind, CmId, ConnParam};
use crate::verbs::{send_flags, Iov, QpCaps, SendOp};

/// Encodes application CM data behind its length byte.
/// Data longer than `CM_DATA_SIZE` (`FI_OPT_CM_DATA_SIZE`) is refused with
/// `-FI_EINVAL`, as libfabric's verbs provider does and fabtests' `fi_cm_data`
/// expects (fi_cm(3) speaks of silent truncation; nothing is cut here, so no
/// application data is lost unnoticed).
pub fn cm_data_encode(data: &[u8], what: &str) -> FiResult<Vec<u8>> {
    if data.len() > CM_DATA_SIZE {
        return crate::fail!(
            FiError::INVAL,
            "{what}: {} bytes of CM data, more than FI_OPT_CM_DATA_SIZE ({CM_DATA_SIZE})",
            data.len()
        );
    }
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(data.len() as u8);
    v.extend_from_slice(data);
    Ok(v)
}

/// Decodes CM data received from a peer. Malformed data (a length beyond what
/// arrived) is treated as none: a peer cannot make us read past the buffer.
pub fn cm_data_decode(raw: &[u8]) -> Vec<u8> {
    match raw.split_first() {
        Some((&len, rest)) if (len as usize) <= rest.len() && (len as usize) <= CM_DATA_SIZE => rest[..len as usize].to_vec(),
        Some((&len, rest)) => {
            tracing::warn!("ignoring malformed CM data: header says {len} bytes, {} arrived", rest.len());
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// A connection request, waiting for `fi_endpoint` + `fi_accept` or `fi_reject`.
#[derive(Debug)]
pub struct ConnReq {
    id: Mutex<Option<CmId>>,
    initiator_depth: u8,
    responder_resources: u8,
}

impl ConnReq {
    fn take_id(&self) -> Option<CmId> {
        self.id.lock().take()
    }

    /// `fi_reject`.
    pub fn reject(&self, data: &[u8]) -> FiResult<()> {
        let enc = cm_data_encode(data, "fi_reject")?;
        let Some(id) = self.take_id() else {
            return crate::fail!(FiError::INVAL, "fi_reject: connection request already answered");
        };
        id.reject(&enc).map_err(|e| {
            tracing::warn!("fi_reject: rdma_reject failed: errno {e}");
            FiError::from_errno(e)
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum EpState {
    Idle = 0,
    Enabled = 1,
    Connecting = 2,
    Connected = 3,
    Shutdown = 4,
}

impl EpState {
    fn from_u32(v: u32) -> EpState {
        match v {
            1 => EpState::Enabled,
            2 => EpState::Connecting,
            3 => EpState::Connected,
            4 => EpState::Shutdown,
            _ => EpState::Idle,
        }
    }
}

#[derive(Debug, Default)]
struct Binds {
    tx_cq: Option<(Hold<Cq>, bool)>,
    rx_cq: Option<(Hold<Cq>, bool)>,
    eq: Option<(Hold<Eq>, u64)>,
    cntrs: CntrBinds,
    /// The shared receive context the endpoint receives from.
    srx: Option<Hold<Srx>>,
}

/// The data path of an enabled endpoint (immutable once set).
#[derive(Debug)]
struct Path {
    tx_cq: Option<Arc<Cq>>,
    rx_cq: Option<Arc<Cq>>,
    tx_selective: bool,
    rx_selective: bool,
    inline_max: usize,
    credits: Arc<QpCounters>,
    qp_num: u32,
    /// Hidden CQ for a direction the application did not bind.
    _hidden: Option<Arc<crate::verbs::Cq>>,
}

/// An active MSG endpoint.
pub struct MsgEp {
    pub domain: Hold<Domain>,
    pub info: Info,
    id: CmId,
    /// true when created from a connection request (the passive side).
    from_connreq: bool,
    connreq_depth: (u8, u8),
    state: AtomicU32,
    /// The C `struct fid_ep *`, reported in CM events.
    fid: AtomicUsize,
    binds: Mutex<Binds>,
    path: OnceCell<Path>,
    tx_op_flags: AtomicU64,
    rx_op_flags: AtomicU64,
    /// Serialises control operations (enable/connect/accept/shutdown/close).
    ctl: Mutex<()>,
    self_ref: OnceCell<Weak<MsgEp>>,
}

impl std::fmt::Debug for MsgEp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgEp").field("state", &self.state()).finish()
    }
}

fn ioerr(e: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(e)
}

impl MsgEp {
    /// `fi_endpoint` for `FI_EP_MSG`.
    pub fn open(domain: &Arc<Domain>, info: &Info) -> FiResult<Arc<MsgEp>> {
        if info.ep.type_ != FI_EP_MSG {
            return crate::fail!(FiError::INVAL, "fi_endpoint: endpoint type {} is not FI_EP_MSG", info.ep.type_);
        }
        let (id, from_connreq, depth) = if let Some(req) = &info.handle {
            let Some(id) = req.take_id() else {
                return crate::fail!(FiError::INVAL, "fi_endpoint: connection request already used or rejected");
            };
            (id, true, (req.initiator_depth, req.responder_resources))
        } else {
            // A passive endpoint in info->handle lends its rdma-cm id, bound
            // to its address (fi_getname then reports that address).
            let (id, stolen) = match &info.pep {
                Some(p) => {
                    let id = p.take_id()?;
                    let bound = id.local_addr().filter(|a| a.port() != 0);
                    tracing::debug!("fi_endpoint: taking over the passive endpoint's rdma-cm id (address {bound:?})");
                    (id, bound.is_some())
                }
                None => (CmId::new_sync().map_err(FiError::from_errno)?, false),
            };
            if let Some(dst) = &info.dest_addr {
                // A bound id keeps its address: rdma_resolve_addr binds only unbound ids.
                let src = info.src_addr.filter(|s| !s.ip().is_unspecified() && !stolen);
                if let Err(e) = id.resolve_addr(src.as_ref(), dst, 2000) {
                    return crate::fail!(FiError::from_errno(e), "fi_endpoint: cannot resolve {dst}: {}", ioerr(e));
                }
                if let Err(e) = id.resolve_route(2000) {
                    return crate::fail!(FiError::from_errno(e), "fi_endpoint: cannot resolve a route to {dst}: {}", ioerr(e));
                }
            } else if let (Some(src), false) = (&info.src_addr, stolen) {
                if let Err(e) = id.bind_addr(src) {
                    return crate::fail!(FiError::from_errno(e), "fi_endpoint: cannot bind {src}: {}", ioerr(e));
                }
            }
            (id, false, (0, 0))
        };
        if let Some(dev) = id.device() {
            if !Arc::ptr_eq(&dev, &domain.dev) {
                return crate::fail!(
                    FiError::INVAL,
                    "fi_endpoint: the address is on device {}, the domain on {}",
                    dev.name(),
                    domain.dev.name()
                );
            }
        }
        let mut stored = info.clone();
        stored.pep = None;
        let ep = Arc::new(MsgEp {
            domain: Hold::new(domain),
            info: stored,
            id,
            from_connreq,
            connreq_depth: depth,
            state: AtomicU32::new(EpState::Idle as u32),
            fid: AtomicUsize::new(0),
            binds: Mutex::new(Binds::default()),
            path: OnceCell::new(),
            tx_op_flags: AtomicU64::new(info.tx.op_flags),
            rx_op_flags: AtomicU64::new(info.rx.op_flags),
            ctl: Mutex::new(()),
            self_ref: OnceCell::new(),
        });
        let _ = ep.self_ref.set(Arc::downgrade(&ep));
        Ok(ep)
    }

    pub fn set_fid(&self, fid: usize) {
        self.fid.store(fid, Ordering::Release);
    }

    pub fn state(&self) -> EpState {
        EpState::from_u32(self.state.load(Ordering::Acquire))
    }

    fn set_state(&self, s: EpState) {
        self.state.store(s as u32, Ordering::Release);
    }

    /// `fi_ep_bind` to a CQ.
    pub fn bind_cq(&self, cq: &Arc<Cq>, flags: u64) -> FiResult<()> {
        let _g = self.ctl.lock();
        if self.state() != EpState::Idle {
            return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
        }
        let mut b = self.binds.lock();
        let b = &mut *b;
        crate::cq::bind_cq(self.domain.get(), &mut b.tx_cq, &mut b.rx_cq, cq, flags)
    }

    /// `fi_ep_bind` to a counter (`FI_SEND`/`FI_RECV`/`FI_READ`/`FI_WRITE`).
    pub fn bind_cntr(&self, cntr: &Arc<Cntr>, flags: u64) -> FiResult<()> {
        let _g = self.ctl.lock();
        if self.state() != EpState::Idle {
            return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
        }
        if !Arc::ptr_eq(cntr.domain.get(), self.domain.get()) {
            return crate::fail!(FiError::DOMAIN, "fi_ep_bind: counter belongs to another domain");
        }
        self.binds.lock().cntrs.bind(cntr, flags)
    }

    /// `fi_ep_bind` to a shared receive context (`fi_srx_context`): the QP
    /// receives from its SRQ; receives are posted there, not here.
    pub fn bind_srx(&self, srx: &Arc<Srx>, flags: u64) -> FiResult<()> {
        let _g = self.ctl.lock();
        if self.state() != EpState::Idle {
            return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
        }
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: unsupported shared receive context bind flags {flags:#x}");
        }
        if !Arc::ptr_eq(srx.domain.get(), self.domain.get()) {
            return crate::fail!(FiError::DOMAIN, "fi_ep_bind: shared receive context belongs to another domain");
        }
        let mut b = self.binds.lock();
        if b.srx.is_some() {
            return crate::fail!(FiError::INVAL, "fi_ep_bind: a shared receive context is already bound");
        }
        b.srx = Some(Hold::new(srx));
        Ok(())
    }

    /// `fi_ep_bind` to an EQ.
    pub fn bind_eq(self: &Arc<Self>, eq: &Arc<Eq>, flags: u64) -> FiResult<()> {
        let _g = self.ctl.lock();
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: unsupported EQ bind flags {flags:#x}");
        }
        if !Arc::ptr_eq(eq.fabric.get(), self.domain.fabric.get()) {
            return crate::fail!(FiError::INVAL, "fi_ep_bind: EQ belongs to another fabric");
        }
        let mut b = self.binds.lock();
        if b.eq.is_some() {
            return crate::fail!(FiError::INVAL, "fi_ep_bind: an EQ is already bound");
        }
        let weak: Weak<dyn CmHandler> = Arc::downgrade(self) as Weak<dyn CmHandler>;
        let token = eq.register(weak);
        self.id.set_token(token);
        if let Err(e) = self.id.migrate(&eq.channel) {
            eq.unregister(token);
            return crate::fail!(FiError::from_errno(e), "fi_ep_bind: rdma_migrate_id failed: {}", ioerr(e));
        }
        b.eq = Some((Hold::new(eq), token));
        Ok(())
    }

    /// `fi_enable`: creates the QP.
    pub fn enable(&self) -> FiResult<()> {
        let _g = self.ctl.lock();
        if self.state() != EpState::Idle {
            return crate::fail!(FiError::OPBADSTATE, "fi_enable: endpoint already enabled");
        }
        let b = self.binds.lock();
        if b.eq.is_none() {
            return crate::fail!(FiError::NOEQ, "fi_enable: MSG endpoints need an EQ bound first");
        }
        if b.tx_cq.is_none() && b.rx_cq.is_none() {
            return crate::fail!(FiError::NOCQ, "fi_enable: no CQ bound");
        }
        let d = self.domain.get();
        let tx_size = self.info.tx.size.max(1);
        let rx_size = self.info.rx.size.max(1);
        let dev_inline = d.dev.max_inline() as usize;
        let inline = self.info.tx.inject_size.min(dev_inline);
        let caps = QpCaps {
            max_send_wr: tx_size as u32,
            max_recv_wr: rx_size as u32,
            max_send_sge: self.info.tx.iov_limit.max(1) as u32,
            max_recv_sge: self.info.rx.iov_limit.max(1) as u32,
            max_inline: inline as u32,
        };
        let tx_cq = b.tx_cq.as_ref().map(|(c, s)| (c.get().clone(), *s));
        let rx_cq = b.rx_cq.as_ref().map(|(c, s)| (c.get().clone(), *s));
        // Completions are counted as a CQ polls them: a counted direction needs its CQ.
        let cntrs = b.cntrs.set();
        if (cntrs.send.is_some() || cntrs.read.is_some() || cntrs.write.is_some()) && tx_cq.is_none() {
            return crate::fail!(FiError::NOCQ, "fi_enable: transmit counters need a transmit CQ bound too");
        }
        if cntrs.recv.is_some() && rx_cq.is_none() {
            return crate::fail!(FiError::NOCQ, "fi_enable: a receive counter needs a receive CQ bound too");
        }
        let srx = b.srx.as_ref().map(|h| h.get().clone());
        if srx.is_none() && self.info.ep.rx_ctx_cnt == FI_SHARED_CONTEXT {
            return crate::fail!(FiError::INVAL, "fi_enable: rx_ctx_cnt is FI_SHARED_CONTEXT but no shared receive context is bound");
        }
        if srx.is_some() && rx_cq.is_none() {
            return crate::fail!(FiError::NOCQ, "fi_enable: receiving from a shared receive context needs a receive CQ bound");
        }
        drop(b);
        // A counter that can be waited on sleeps on the CQs' completion
        // channels: a CQ opened with FI_WAIT_NONE gets one now.
        if cntrs.all().any(|c| c.wait.is_some()) {
            for (q, _) in [&tx_cq, &rx_cq].into_iter().flatten() {
                q.want_channel();
            }
        }
        // Reserve CQ room for every request that can be outstanding (the
        // first reservation creates the verbs CQ).
        // With a shared receive context the receive room is the SRQ's, reserved
        // once per CQ (Srx::attach_cq), not per endpoint.
        if let (Some(s), Some((c, _))) = (&srx, &rx_cq) {
            s.attach_cq(c)?;
        }
        let rx_size = if srx.is_some() { 0 } else { rx_size };
        let same = matches!((&tx_cq, &rx_cq), (Some((a, _)), Some((b, _))) if Arc::ptr_eq(a, b));
        if let Some((c, _)) = &tx_cq {
            c.commit(if same { tx_size + rx_size } else { tx_size })?;
        }
        if let (Some((c, _)), false) = (&rx_cq, same) {
            if let Err(e) = c.commit(rx_size) {
                if let Some((t, _)) = &tx_cq {
                    t.uncommit(tx_size);
                }
                return Err(e);
            }
        }
        let uncommit = || {
            if let Some((c, _)) = &tx_cq {
                c.uncommit(if same { tx_size + rx_size } else { tx_size });
            }
            if let (Some((c, _)), false) = (&rx_cq, same) {
                c.uncommit(rx_size);
            }
        };
        let hidden = if tx_cq.is_none() || rx_cq.is_none() {
            let n = if tx_cq.is_none() { tx_size } else { rx_size };
            match d.dev.create_cq(n as i32, None) {
                Ok(c) => Some(Arc::new(c)),
                Err(e) => {
                    uncommit();
                    return crate::fail!(FiError::from_errno(e), "fi_enable: ibv_create_cq failed: errno {e}");
                }
            }
        } else {
            None
        };
        fn committed(c: &Arc<Cq>) -> &crate::verbs::Cq {
            c.verbs_cq().expect("commit created the verbs CQ")
        }
        let scq: &crate::verbs::Cq = tx_cq.as_ref().map(|(c, _)| committed(c)).unwrap_or_else(|| hidden.as_ref().expect("hidden"));
        let rcq: &crate::verbs::Cq = rx_cq.as_ref().map(|(c, _)| committed(c)).unwrap_or_else(|| hidden.as_ref().expect("hidden"));
        let mut keep: Vec<Arc<dyn Send + Sync>> = Vec::new();
        if let Some((c, _)) = &tx_cq {
            keep.push(c.clone());
        }
        if let Some((c, _)) = &rx_cq {
            keep.push(c.clone());
        }
        if let Some(h) = &hidden {
            keep.push(h.clone());
        }
        if let Some(s) = &srx {
            keep.push(s.srq.clone());
        }
        let qp = match self.id.create_qp(&d.pd, scq, rcq, srx.as_ref().map(|s| &*s.srq), caps, keep) {
            Ok(q) => q,
            Err(e) => {
                uncommit();
                return crate::fail!(
                    FiError::from_errno(e),
                    "fi_enable: rdma_create_qp(send {tx_size}, recv {rx_size}, inline {inline}) failed: {}",
                    ioerr(e)
                );
            }
        };
        let inline_max = (qp.caps.max_inline as usize).min(inline);
        for c in cntrs.all() {
            for (q, _) in [&tx_cq, &rx_cq].into_iter().flatten() {
                let src: Weak<dyn Progress> = Arc::downgrade(q) as Weak<dyn Progress>;
                if let Err(e) = c.add_source(src) {
                    uncommit();
                    return Err(e);
                }
            }
        }
        let credits = Arc::new(QpCounters::new(tx_size, rx_size).with_cntrs(cntrs).with_srq(srx.as_ref().map(|s| s.credits.clone())));
        let qp_num = qp.qp_num();
        if let Some((c, _)) = &tx_cq {
            c.attach(qp_num, credits.clone());
        }
        if let Some((c, _)) = &rx_cq {
            c.attach(qp_num, credits.clone());
        }
        let _ = self.path.set(Path {
            credits,
            qp_num,
            tx_selective: tx_cq.as_ref().is_some_and(|(_, s)| *s),
            rx_selective: rx_cq.as_ref().is_some_and(|(_, s)| *s),
            tx_cq: tx_cq.map(|(c, _)| c),
            rx_cq: rx_cq.map(|(c, _)| c),
            inline_max,
            _hidden: hidden,
        });
        self.set_state(EpState::Enabled);
        Ok(())
    }

    fn conn_param<'a>(&self, data: &'a [u8]) -> ConnParam<'a> {
        let a = &self.domain.attr;
        let (init, resp) = if self.from_connreq {
            // Answer with no more than the peer asked for and the device allows.
            (
                (self.connreq_depth.1 as i32).min(a.max_qp_init_rd_atom) as u8,
                (self.connreq_depth.0 as i32).min(a.max_qp_rd_atom) as u8,
            )
        } else {
            (a.max_qp_init_rd_atom.clamp(0, 255) as u8, a.max_qp_rd_atom.clamp(0, 255) as u8)
        };
        ConnParam { private_data: data, responder_resources: resp, initiator_depth: init, retry_count: crate::verbs::cm::RC_RETRY_COUNT, rnr_retry_count: crate::verbs::cm::RNR_RETRY_FOREVER }
    }

    /// `fi_connect`.
    pub fn connect(&self, addr: Option<SocketAddr>, data: &[u8]) -> FiResult<()> {
        let enc = cm_data_encode(data, "fi_connect")?;
        let _g = self.ctl.lock();
        if self.from_connreq {
            return crate::fail!(FiError::INVAL, "fi_connect: endpoint was created from a connection request; use fi_accept");
        }
        match self.state() {
            EpState::Enabled => {}
            EpState::Idle => return crate::fail!(FiError::OPBADSTATE, "fi_connect: endpoint not enabled"),
            EpState::Shutdown => {
                return crate::fail!(FiError::OPBADSTATE, "fi_connect: endpoint was shut down or refused; open a new one")
            }
            _ => return crate::fail!(FiError::ISCONN, "fi_connect: endpoint already connecting or connected"),
        }
        let peer = self.id.peer_addr().filter(|p| !p.ip().is_unspecified());
        match (addr, peer) {
            (Some(a), Some(p)) if a != p => {
                return crate::fail!(FiError::INVAL, "fi_connect: endpoint was opened for {p}, not {a}");
            }
            (None, None) => return crate::fail!(FiError::INVAL, "fi_connect: no destination address"),
            (Some(_), None) => {
                return crate::fail!(FiError::INVAL, "fi_connect: open the endpoint with info->dest_addr set (the QP needs the route)");
            }
            _ => {}
        }
        self.set_state(EpState::Connecting);
        if let Err(e) = self.id.connect(&self.conn_param(&enc)) {
            self.set_state(EpState::Enabled);
            return crate::fail!(FiError::from_errno(e), "fi_connect: rdma_connect failed: {}", ioerr(e));
        }
        Ok(())
    }

    /// `fi_accept`.
    pub fn accept(&self, data: &[u8]) -> FiResult<()> {
        let enc = cm_data_encode(data, "fi_accept")?;
        let _g = self.ctl.lock();
        if !self.from_connreq {
            return crate::fail!(FiError::INVAL, "fi_accept: endpoint was not created from a connection request");
        }
        match self.state() {
            EpState::Enabled => {}
            EpState::Idle => return crate::fail!(FiError::OPBADSTATE, "fi_accept: endpoint not enabled"),
            _ => return crate::fail!(FiError::ISCONN, "fi_accept: already accepted"),
        }
        self.set_state(EpState::Connecting);
        if let Err(e) = self.id.accept(&self.conn_param(&enc)) {
            self.set_state(EpState::Enabled);
            return crate::fail!(FiError::from_errno(e), "fi_accept: rdma_accept failed: {}", ioerr(e));
        }
        Ok(())
    }

    /// `fi_shutdown`.
    pub fn shutdown(&self, flags: u64) -> FiResult<()> {
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_shutdown: flags must be 0");
        }
        let _g = self.ctl.lock();
        match self.state() {
            EpState::Connected | EpState::Connecting => {
                if let Err(e) = self.id.disconnect() {
                    tracing::info!("fi_shutdown: rdma_disconnect: {}", ioerr(e));
                }
                self.set_state(EpState::Shutdown);
                Ok(())
            }
            EpState::Shutdown => Ok(()),
            _ => crate::fail!(FiError::NOTCONN, "fi_shutdown: endpoint not connected"),
        }
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.id.local_addr().or(self.info.src_addr)
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.id.peer_addr().filter(|p| !p.ip().is_unspecified()).or(self.info.dest_addr)
    }

    /// `fi_close`: disconnects and releases everything; completions still in
    /// the CQs for this endpoint are flushed with errors by the device.
    pub fn close(&self) -> FiResult<()> {
        let _g = self.ctl.lock();
        if matches!(self.state(), EpState::Connected | EpState::Connecting) {
            let _ = self.id.disconnect();
        }
        if let Some(qp) = self.id.qp() {
            let _ = qp.to_error();
        }
        self.set_state(EpState::Shutdown);
        let mut b = self.binds.lock();
        if let Some((eq, token)) = b.eq.take() {
            eq.unregister(token);
        }
        if let Some(p) = self.path.get() {
            for c in [&p.tx_cq, &p.rx_cq].into_iter().flatten() {
                c.detach(p.qp_num);
            }
        }
        let tx_size = self.info.tx.size.max(1);
        // Receive room of a shared receive context stays with it (Srx::close).
        let rx_size = if b.srx.is_some() { 0 } else { self.info.rx.size.max(1) };
        if self.path.get().is_some() {
            let same = matches!((&b.tx_cq, &b.rx_cq), (Some((a, _)), Some((c, _))) if Arc::ptr_eq(a.get(), c.get()));
            if let Some((c, _)) = &b.tx_cq {
                c.uncommit(if same { tx_size + rx_size } else { tx_size });
            }
            if let (Some((c, _)), false) = (&b.rx_cq, same) {
                c.uncommit(rx_size);
            }
        }
        b.tx_cq = None;
        b.rx_cq = None;
        b.cntrs.clear();
        b.srx = None;
        Ok(())
    }

    // ---- data path ----

    fn path(&self) -> FiResult<(&Path, &crate::verbs::Qp)> {
        match (self.path.get(), self.id.qp()) {
            (Some(p), Some(q)) => Ok((p, q)),
            _ => crate::fail!(FiError::OPBADSTATE, "endpoint not enabled"),
        }
    }

    /// `Ok` on a connected endpoint (inlined into every post: one load and
    /// a compare; the refusal, which logs, is out of line).
    #[inline(always)]
    fn check_connected(&self) -> FiResult<()> {
        match self.state() {
            EpState::Connected => Ok(()),
            s => Self::not_connected(s),
        }
    }

    #[cold]
    #[inline(never)]
    fn not_connected(s: EpState) -> FiResult<()> {
        match s {
            EpState::Shutdown => crate::fail!(FiError::NOTCONN, "endpoint is shut down"),
            s => crate::fail!(FiError::OPBADSTATE, "endpoint not connected ({s:?})"),
        }
    }

    pub fn tx_op_flags(&self) -> u64 {
        self.tx_op_flags.load(Ordering::Relaxed)
    }
    pub fn rx_op_flags(&self) -> u64 {
        self.rx_op_flags.load(Ordering::Relaxed)
    }
    pub fn set_tx_op_flags(&self, f: u64) {
        self.tx_op_flags.store(f, Ordering::Relaxed)
    }
    pub fn set_rx_op_flags(&self, f: u64) {
        self.rx_op_flags.store(f, Ordering::Relaxed)
    }
    pub fn inject_size(&self) -> usize {
        self.path.get().map_or(self.info.tx.inject_size, |p| p.inline_max)
    }

    fn post_err(e: i32, what: &str) -> FiError {
        if e == libc::ENOMEM || e == libc::EAGAIN {
            FiError::AGAIN
        } else {
            tracing::warn!("{what}: post failed: {}", ioerr(e));
            FiError::from_errno(e)
        }
    }

    /// Posts a send-queue operation. `iov` carries the local buffers (already
    /// checked and keyed), `flags` the libfabric op flags in force.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn post_tx(
        &self,
        op: SendOp,
        kind: OpKind,
        iov: &[Iov],
        descs_ok: bool,
        total: usize,
        ctx: u64,
        flags: u64,
        no_completion: bool,
    ) -> FiResult<()> {
        let (p, qp) = self.path()?;
        self.check_connected()?;
        if iov.len() > self.info.tx.iov_limit.max(1) {
            return crate::fail!(FiError::INVAL, "too many iovs: {} > iov_limit {}", iov.len(), self.info.tx.iov_limit);
        }
        let Some(cq) = &p.tx_cq else {
            return crate::fail!(FiError::NOCQ, "no transmit CQ bound");
        };
        if total > self.info.ep.max_msg_size {
            if matches!(kind, OpKind::Read | OpKind::Write) && flags & FI_INJECT == 0 {
                return self.post_split(p, qp, cq, op, kind, iov, descs_ok, total, ctx, flags, no_completion);
            }
            return crate::fail!(FiError::MSGSIZE, "message of {total} bytes exceeds max_msg_size {}", self.info.ep.max_msg_size);
        }
        let inject = flags & FI_INJECT != 0;
        let mut vflags = send_flags::SIGNALED;
        if inject || (total <= p.inline_max && matches!(kind, OpKind::Send | OpKind::Write)) {
            if total > p.inline_max {
                return crate::fail!(FiError::MSGSIZE, "inject of {total} bytes exceeds inject_size {}", p.inline_max);
            }
            if total > 0 {
                vflags |= send_flags::INLINE;
            }
        } else if !descs_ok {
            return crate::fail!(FiError::INVAL, "missing memory descriptor for a {total}-byte buffer (FI_MR_LOCAL)");
        }
        if flags & FI_FENCE != 0 {
            vflags |= send_flags::FENCE;
        }
        let silent = no_completion || (p.tx_selective && flags & FI_COMPLETION == 0);
        if !p.credits.take_tx() {
            cq.progress();
            if !p.credits.take_tx() {
                return Err(FiError::AGAIN);
            }
        }
        if no_completion && (vflags & send_flags::INLINE != 0 || total == 0) && !p.credits.counted() {
            // Inject: the buffer is copied at post time and nothing but an
            // error is ever reported, so most are posted unsignalled (no
            // device completion to write and poll), see QpCounters::unsignalled.
            // Not with a counter bound: each inject must count when it
            // completes, and an unsignalled one is seen only at the next
            // signalled one, which may never come.
            return match p.credits.unsignalled() {
                None => qp
                    .post_send(Cq::batch_wr_id(kind, 0), op, iov, vflags & !send_flags::SIGNALED)
                    .map_err(|e| Self::post_err(e, "send queue")),
                Some(n) => qp.post_send(Cq::batch_wr_id(kind, n), op, iov, vflags).map_err(|e| {
                    p.credits.unabsorb(n);
                    Self::post_err(e, "send queue")
                }),
            };
        }
        let wr_id = cq.wr_id(kind, ctx, silent);
        qp.post_send(wr_id, op, iov, vflags).map_err(|e| {
            p.credits.give_tx();
            Self::post_err(e, "send queue")
        })
    }

    /// Posts an RMA operation longer than `max_msg_size` (the device's
    /// largest message) as several requests of at most that size, all at
    /// once (each takes a place in the send queue: the operation needs at
    /// most `tx_attr->size` of them, else `-FI_EMSGSIZE`; fewer free:
    /// `-FI_EAGAIN`). The pieces report nothing (`Cq::piece_wr_id`); the last
    /// request, posted after them on the same QP, completes after them and
    /// reports the operation, once, with the first piece's error if one
    /// failed. `fi_writedata`: the last request carries the data.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn post_split(
        &self,
        p: &Path,
        qp: &crate::verbs::Qp,
        cq: &Cq,
        op: SendOp,
        kind: OpKind,
        iov: &[Iov],
        descs_ok: bool,
        total: usize,
        ctx: u64,
        flags: u64,
        no_completion: bool,
    ) -> FiResult<()> {
        let piece = self.info.ep.max_msg_size.max(1);
        let n = total.div_ceil(piece);
        if n > p.credits.tx_max {
            return crate::fail!(
                FiError::MSGSIZE,
                "RMA of {total} bytes needs {n} requests of at most max_msg_size {piece}, more than the send queue holds ({})",
                p.credits.tx_max
            );
        }
        if !descs_ok {
            return crate::fail!(FiError::INVAL, "missing memory descriptor for a {total}-byte buffer (FI_MR_LOCAL)");
        }
        let (raddr, rkey) = match op {
            SendOp::Read { raddr, rkey } | SendOp::Write { raddr, rkey } | SendOp::WriteImm { raddr, rkey, .. } => (raddr, rkey),
            _ => return crate::fail!(FiError::INVAL, "only RMA reads and writes are split"),
        };
        // Every piece's place in the send queue, or none.
        let take = |want: usize| (0..want).take_while(|_| p.credits.take_tx()).count();
        let mut got = take(n);
        if got < n {
            cq.progress();
            got += take(n - got);
            if got < n {
                for _ in 0..got {
                    p.credits.give_tx();
                }
                return Err(FiError::AGAIN);
            }
        }
        let silent = no_completion || (p.tx_selective && flags & FI_COMPLETION == 0);
        let mut sges: smallvec::SmallVec<[Iov; 4]> = smallvec::SmallVec::new();
        for i in 0..n {
            let off = i * piece;
            let len = piece.min(total - off);
            let ra = raddr.wrapping_add(off as u64);
            sges.clear();
            crate::verbs::mem::iov_range(iov, off, len, |v| sges.push(v));
            let last = i + 1 == n;
            let pop = match op {
                SendOp::Read { .. } => SendOp::Read { raddr: ra, rkey },
                SendOp::WriteImm { imm, .. } if last => SendOp::WriteImm { raddr: ra, rkey, imm },
                _ => SendOp::Write { raddr: ra, rkey },
            };
            let mut vflags = send_flags::SIGNALED;
            if i == 0 && flags & FI_FENCE != 0 {
                vflags |= send_flags::FENCE;
            }
            let wr_id = if last { cq.wr_id(kind, ctx, silent) } else { Cq::piece_wr_id(kind) };
            if let Err(e) = qp.post_send(wr_id, pop, &sges, vflags) {
                // The pieces posted complete by themselves (their credits
                // come back then); the rest of the places are free now.
                for _ in i..n {
                    p.credits.give_tx();
                }
                return Err(Self::post_err(e, "send queue"));
            }
        }
        tracing::debug!("RMA of {total} bytes posted as {n} requests");
        Ok(())
    }

    /// Posts a receive.
    #[inline(always)]
    pub fn post_rx(&self, iov: &[Iov], descs_ok: bool, ctx: u64, flags: u64) -> FiResult<()> {
        let (p, qp) = self.path()?;
        if self.state() == EpState::Shutdown {
            return crate::fail!(FiError::NOTCONN, "fi_recv: endpoint is shut down");
        }
        if iov.len() > self.info.rx.iov_limit.max(1) {
            return crate::fail!(FiError::INVAL, "too many iovs: {} > iov_limit {}", iov.len(), self.info.rx.iov_limit);
        }
        if !descs_ok {
            return crate::fail!(FiError::INVAL, "fi_recv: missing memory descriptor (FI_MR_LOCAL)");
        }
        let Some(cq) = &p.rx_cq else {
            return crate::fail!(FiError::NOCQ, "no receive CQ bound");
        };
        if p.credits.srq.is_some() {
            return crate::fail!(FiError::OPNOTSUPP, "fi_recv: the endpoint receives from its shared receive context: post there");
        }
        let silent = p.rx_selective && flags & FI_COMPLETION == 0;
        if !p.credits.take_rx() {
            cq.progress();
            if !p.credits.take_rx() {
                return Err(FiError::AGAIN);
            }
        }
        let wr_id = cq.wr_id(OpKind::Recv, ctx, silent);
        qp.post_recv(wr_id, iov).map_err(|e| {
            p.credits.give_rx();
            Self::post_err(e, "receive queue")
        })
    }

    /// Pushes an error completion made locally (e.g. for an op refused after posting began).
    pub fn tx_error(&self, e: CqErr) {
        if let Some(Some(cq)) = self.path.get().map(|p| p.tx_cq.as_ref()) {
            cq.push_error(e);
        }
    }
}

/// Gives a freshly connected QP the configured RNR NAK timer
/// (`FI_VERBS_MIN_RNR_TIMER`, default 12 = 0.64 ms): rdma-cm leaves the
/// longest, 655 ms, so a send that arrives a moment before the peer's
/// receive would stall that long. A device that refuses keeps rdma-cm's
/// value; the connection works either way.
pub fn set_rnr_timer(qp: &crate::verbs::Qp, what: &str) {
    let want = crate::config::get().min_rnr_timer;
    match qp.set_min_rnr_timer(want) {
        Ok(t) => {
            tracing::debug!("{what}: QP {} min_rnr_timer {} (asked {want})", qp.qp_num(), t.min_rnr_timer);
            tracing::debug!("{what}: QP {} ack timeout {} retry_cnt {} rnr_retry {}", qp.qp_num(), t.timeout, t.retry_cnt, t.rnr_retry);
        }
        Err(e) => tracing::warn!("{what}: QP {}: cannot set min_rnr_timer {want}: errno {e}", qp.qp_num()),
    }
}

/// Converts an application descriptor to a local key (`None` for a NULL descriptor).
#[inline]
pub fn desc_lkey(desc: u64) -> FiResult<Option<u32>> {
    if desc == 0 {
        return Ok(None);
    }
    match lkey_of(desc) {
        Some(k) => Ok(Some(k)),
        None => crate::fail!(FiError::INVAL, "invalid memory descriptor {desc:#x} (not from fi_mr_desc of this provider)"),
    }
}

impl CmHandler for MsgEp {
    fn on_cm_event(&self, ev: CmEvent) -> Option<Result<EqEntry, EqErr>> {
        let fid = self.fid.load(Ordering::Acquire);
        match ev.kind {
            CmEventKind::Established => {
                if let Some(qp) = self.id.qp() {
                    set_rnr_timer(qp, "msg");
                }
                self.set_state(EpState::Connected);
                Some(Ok(EqEntry::Cm { event: FI_CONNECTED, fid, info: None, data: cm_data_decode(&ev.private_data) }))
            }
            CmEventKind::Disconnected => {
                self.set_state(EpState::Shutdown);
                if let Some(qp) = self.id.qp() {
                    // Flush what is still posted, so every operation completes (in error).
                    let _ = qp.to_error();
                }
                Some(Ok(EqEntry::Cm { event: FI_SHUTDOWN, fid, info: None, data: Vec::new() }))
            }
            CmEventKind::Rejected => {
                // rdma-cm does not let a refused id connect again.
                self.set_state(EpState::Shutdown);
                Some(Err(EqErr {
                    fid,
                    err: FI_ECONNREFUSED,
                    prov_errno: ev.status,
                    err_data: cm_data_decode(&ev.private_data),
                    ..Default::default()
                }))
            }
            CmEventKind::Unreachable | CmEventKind::ConnectError | CmEventKind::AddrError | CmEventKind::RouteError => {
                self.set_state(EpState::Shutdown);
                let err = if ev.kind == CmEventKind::Unreachable { FI_EHOSTUNREACH } else { FI_ECONNABORTED };
                tracing::info!("endpoint: connection failed: {:?} (status {})", ev.kind, ev.status);
                Some(Err(EqErr { fid, err, prov_errno: ev.status, ..Default::default() }))
            }
            CmEventKind::DeviceRemoval => {
                self.set_state(EpState::Shutdown);
                if let Some(qp) = self.id.qp() {
                    // As on DISCONNECTED: every posted operation completes (flushed).
                    let _ = qp.to_error();
                }
                Some(Err(EqErr { fid, err: FI_ENODEV, prov_errno: ev.status, ..Default::default() }))
            }
            _ => {
                tracing::debug!("endpoint: ignoring CM event {:?}", ev.kind);
                None
            }
        }
    }
}

/// A passive (listening) endpoint.
pub struct Pep {
    pub fabric: Hold<Fabric>,
    pub info: Info,
    /// None once an active endpoint took it over (`fi_endpoint` with
    /// `info->handle` = this passive endpoint).
    id: Mutex<Option<CmId>>,
    fid: AtomicUsize,
    eq: Mutex<Option<(Hold<Eq>, u64)>>,
    listening: AtomicU32,
    bound: AtomicU32,
    backlog: AtomicU32,
}

impl std::fmt::Debug for Pep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pep").field("addr", &self.local_addr()).finish()
    }
}

impl Pep {
    /// `fi_passive_ep`.
    pub fn open(fabric: &Arc<Fabric>, info: &Info) -> FiResult<Arc<Pep>> {
        if info.ep.type_ != FI_EP_MSG && info.ep.type_ != FI_EP_UNSPEC {
            return crate::fail!(FiError::INVAL, "fi_passive_ep: endpoint type {} is not FI_EP_MSG", info.ep.type_);
        }
        let id = CmId::new_sync().map_err(FiError::from_errno)?;
        let mut stored = info.clone();
        stored.pep = None;
        let pep = Pep {
            fabric: Hold::new(fabric),
            info: stored,
            id: Mutex::new(Some(id)),
            fid: AtomicUsize::new(0),
            eq: Mutex::new(None),
            listening: AtomicU32::new(0),
            bound: AtomicU32::new(0),
            backlog: AtomicU32::new(1024),
        };
        if let Some(src) = info.src_addr {
            pep.bind(&src)?;
        }
        Ok(Arc::new(pep))
    }

    fn bind(&self, addr: &SocketAddr) -> FiResult<()> {
        let g = self.id.lock();
        let Some(id) = g.as_ref() else {
            return crate::fail!(FiError::OPBADSTATE, "passive endpoint: its address was taken over by an active endpoint");
        };
        if let Err(e) = id.bind_addr(addr) {
            return crate::fail!(FiError::from_errno(e), "passive endpoint: cannot bind {addr}: {}", ioerr(e));
        }
        self.bound.store(1, Ordering::Release);
        Ok(())
    }

    pub fn set_fid(&self, fid: usize) {
        self.fid.store(fid, Ordering::Release);
    }

    /// The C `struct fid_pep *` (what `info->handle` names).
    pub fn fid(&self) -> usize {
        self.fid.load(Ordering::Acquire)
    }

    /// Hands the rdma-cm id (and with it the bound address) to an active
    /// endpoint (`fi_endpoint` with `info->handle` = this passive endpoint,
    /// as libfabric's verbs does). The passive endpoint keeps only its close.
    fn take_id(&self) -> FiResult<CmId> {
        if self.listening.load(Ordering::Acquire) != 0 {
            return crate::fail!(FiError::INVAL, "fi_endpoint: info->handle is a listening passive endpoint");
        }
        match self.id.lock().take() {
            Some(id) => Ok(id),
            None => crate::fail!(FiError::INVAL, "fi_endpoint: info->handle's passive endpoint was already taken over"),
        }
    }

    /// `fi_setname`: binds the listening address (before `fi_listen`).
    pub fn setname(&self, addr: &SocketAddr) -> FiResult<()> {
        if self.bound.load(Ordering::Acquire) != 0 {
            return crate::fail!(FiError::INVAL, "fi_setname: passive endpoint already has an address");
        }
        self.bind(addr)
    }

    pub fn set_backlog(&self, n: u32) {
        self.backlog.store(n.max(1), Ordering::Relaxed);
    }

    pub fn bind_eq(self: &Arc<Self>, eq: &Arc<Eq>, flags: u64) -> FiResult<()> {
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_pep_bind: unsupported flags {flags:#x}");
        }
        let mut slot = self.eq.lock();
        if slot.is_some() {
            return crate::fail!(FiError::INVAL, "fi_pep_bind: an EQ is already bound");
        }
        let g = self.id.lock();
        let Some(id) = g.as_ref() else {
            return crate::fail!(FiError::OPBADSTATE, "fi_pep_bind: the address was taken over by an active endpoint");
        };
        let weak: Weak<dyn CmHandler> = Arc::downgrade(self) as Weak<dyn CmHandler>;
        let token = eq.register(weak);
        id.set_token(token);
        if let Err(e) = id.migrate(&eq.channel) {
            eq.unregister(token);
            return crate::fail!(FiError::from_errno(e), "fi_pep_bind: rdma_migrate_id failed: {}", ioerr(e));
        }
        *slot = Some((Hold::new(eq), token));
        Ok(())
    }

    /// `fi_listen`.
    pub fn listen(&self) -> FiResult<()> {
        if self.eq.lock().is_none() {
            return crate::fail!(FiError::NOEQ, "fi_listen: bind an EQ first");
        }
        if self.listening.swap(1, Ordering::AcqRel) != 0 {
            return crate::fail!(FiError::ALREADY, "fi_listen: already listening");
        }
        if self.bound.load(Ordering::Acquire) == 0 {
            if let Err(e) = self.bind(&SocketAddr::from(([0, 0, 0, 0], 0))) {
                self.listening.store(0, Ordering::Release);
                return Err(e);
            }
        }
        let g = self.id.lock();
        let Some(id) = g.as_ref() else {
            self.listening.store(0, Ordering::Release);
            return crate::fail!(FiError::OPBADSTATE, "fi_listen: the address was taken over by an active endpoint");
        };
        if let Err(e) = id.listen(self.backlog.load(Ordering::Relaxed) as i32) {
            self.listening.store(0, Ordering::Release);
            return crate::fail!(FiError::from_errno(e), "fi_listen: rdma_listen failed: {}", ioerr(e));
        }
        Ok(())
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.id.lock().as_ref().and_then(|id| id.local_addr())
    }

    pub fn close(&self) -> FiResult<()> {
        if let Some((eq, token)) = self.eq.lock().take() {
            eq.unregister(token);
        }
        Ok(())
    }
}

impl CmHandler for Pep {
    fn on_cm_event(&self, mut ev: CmEvent) -> Option<Result<EqEntry, EqErr>> {
        let fid = self.fid.load(Ordering::Acquire);
        match ev.kind {
            CmEventKind::ConnectRequest => {
                let id = ev.new_id.take()?;
                let mut info = self.info.clone();
                info.pep = None;
                info.src_addr = id.local_addr().or(info.src_addr);
                info.dest_addr = id.peer_addr();
                info.ep.type_ = FI_EP_MSG;
                if let Some(dev) = id.device() {
                    info.domain.name = Some(dev.name().to_string());
                }
                let req = Arc::new(ConnReq {
                    id: Mutex::new(Some(id)),
                    initiator_depth: ev.initiator_depth,
                    responder_resources: ev.responder_resources,
                });
                info.handle = Some(req);
                Some(Ok(EqEntry::Cm {
                    event: FI_CONNREQ,
                    fid,
                    info: Some(Box::new(info)),
                    data: cm_data_decode(&ev.private_data),
                }))
            }
            CmEventKind::DeviceRemoval => Some(Err(EqErr { fid, err: FI_ENODEV, prov_errno: ev.status, ..Default::default() })),
            _ => {
                tracing::debug!("passive endpoint: ignoring CM event {:?}", ev.kind);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cm_data_roundtrip_and_limits() {
        let d = b"hello";
        let e = cm_data_encode(d, "test").unwrap();
        assert_eq!(e[0], 5);
        assert_eq!(cm_data_decode(&e), d.to_vec());
        // rdma-cm pads private data with zeros up to its fixed size.
        let mut padded = e.clone();
        padded.resize(56, 0);
        assert_eq!(cm_data_decode(&padded), d.to_vec());
        assert_eq!(cm_data_encode(&[9u8; CM_DATA_SIZE + 1], "test"), Err(FiError::INVAL), "over-long CM data is refused");
        assert_eq!(cm_data_encode(&[9u8; CM_DATA_SIZE], "test").unwrap().len(), CM_DATA_SIZE + 1);
        assert_eq!(cm_data_decode(&[]), Vec::<u8>::new());
    }

    #[test]
    fn hostile_cm_data_length_is_not_trusted() {
        // Header claims 200 bytes, only 3 arrived.
        assert_eq!(cm_data_decode(&[200, 1, 2, 3]), Vec::<u8>::new());
        // Header claims more than the protocol allows.
        let mut v = vec![255u8];
        v.resize(256, 7);
        assert_eq!(cm_data_decode(&v), Vec::<u8>::new());
    }

    #[test]
    fn foreign_descriptors_are_refused() {
        assert_eq!(desc_lkey(0), Ok(None));
        assert_eq!(desc_lkey(crate::mr::desc_of(77)), Ok(Some(77)));
        assert_eq!(desc_lkey(0xdead_beef), Err(FiError::INVAL));
    }
}
