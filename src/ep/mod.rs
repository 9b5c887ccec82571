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

mod cm;
mod data;
#[cfg(test)]
mod tests;

pub use cm::{cm_data_decode, cm_data_encode, set_rnr_timer, ConnReq, Pep};
pub use data::desc_lkey;

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

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.id.local_addr().or(self.info.src_addr)
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.id.peer_addr().filter(|p| !p.ip().is_unspecified()).or(self.info.dest_addr)
    }

    /// `fi_close`: releases everything. Operations still posted are
    /// discarded without completions (fi_endpoint(3)): the CQs drop this
    /// QP's entries from now on.
    ///
    /// The caller drops its reference right after (the C layer frees the
    /// fid), and that drop destroys the QP and then the rdma-cm id, which
    /// disconnects, as libfabric's verbs does (`rdma_destroy_ep`, no
    /// `rdma_disconnect` first). Destroyed without an error transition, the
    /// QP finishes the work under way: rxe completes a receive before it
    /// sends the ACK, and a QP moved to error drops that ACK, so the peer's
    /// send of a message this side has received would be flushed when the
    /// disconnect reaches it. If anything else holds the endpoint (an EQ
    /// reader delivering its event) the last drop may come later: the QP
    /// then moves to error now, so that nothing lands in the application's
    /// buffers after fi_close returns.
    pub fn close(&self) -> FiResult<()> {
        let _g = self.ctl.lock();
        let was = self.state();
        self.set_state(EpState::Shutdown);
        let mut b = self.binds.lock();
        if let Some((eq, token)) = b.eq.take() {
            eq.forget(token, self.fid.load(Ordering::Acquire));
        }
        // After `forget`: the EQ hands this endpoint to no one any more.
        let last = self.self_ref.get().is_some_and(|w| w.strong_count() <= 1);
        if !last {
            tracing::debug!("fi_close(ep): endpoint still referenced, QP moved to error now");
            if matches!(was, EpState::Connected | EpState::Connecting) {
                let _ = self.id.disconnect();
            }
            if let Some(qp) = self.id.qp() {
                let _ = qp.to_error();
            }
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
}
