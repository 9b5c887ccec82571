//! Shared receive contexts of MSG endpoints (`fi_srx_context`): one verbs
//! shared receive queue (SRQ) whose buffers every endpoint bound to it
//! (`fi_ep_bind(ep, srx)`) receives into, as libfabric's verbs provider does.
//! A message completes on the receive CQ of the endpoint it arrived on, with
//! the context the buffer was posted with; the buffers posted stay the same
//! however many endpoints (connections) share them, so receive memory does
//! not grow with the peers (what `verbs;ofi_rxm` does with
//! `FI_OFI_RXM_USE_SRX=1`).
//!
//! Credits: posting takes one of the SRQ's slots (`-FI_EAGAIN` when all are
//! posted); the completion gives it back, on whichever CQ it is polled.
//! Every CQ an SRQ's messages can complete on reserves room for all of the
//! SRQ's slots once (`Cq::commit`), so a CQ never overruns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::fi::consts::*;
use crate::cq::{Cq, OpKind, QpCounters};
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::{HasRefs, Hold, Refs};
use crate::info::RxAttr;
use crate::verbs::{Iov, Srq};

pub struct Srx {
    pub domain: Hold<Domain>,
    pub srq: Arc<Srq>,
    /// Receive slots: `rx_max` is the SRQ's size; `rx` the buffers posted.
    pub credits: Arc<QpCounters>,
    pub iov_limit: usize,
    op_flags: AtomicU64,
    /// CQs this SRQ's receives complete on, each holding room for all slots.
    cqs: Mutex<Vec<Weak<Cq>>>,
    pub refs: Refs,
}

impl std::fmt::Debug for Srx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Srx").field("size", &self.credits.rx_max).field("posted", &self.credits.rx.load(Ordering::Relaxed)).finish()
    }
}

impl HasRefs for Srx {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

impl Srx {
    /// `fi_srx_context`. `attr` None: the domain's defaults.
    pub fn open(domain: &Arc<Domain>, attr: Option<&RxAttr>) -> FiResult<Arc<Srx>> {
        let cfg = crate::config::get();
        let a = &domain.attr;
        if a.max_srq <= 0 {
            return crate::fail!(FiError::NOSYS, "fi_srx_context: device {} has no shared receive queues", domain.dev.name());
        }
        let d = RxAttr::default();
        let r = attr.unwrap_or(&d);
        if r.caps & !(FI_MSG | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
            return crate::fail!(FiError::NOSYS, "fi_srx_context: unsupported rx caps {:#x}", r.caps);
        }
        if r.op_flags & !(FI_COMPLETION | FI_MORE) != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_srx_context: unsupported op_flags {:#x}", r.op_flags);
        }
        let max_wr = a.max_srq_wr.max(1) as usize;
        let max_sge = a.max_srq_sge.max(1) as usize;
        let size = if r.size != 0 { r.size } else { cfg.rx_size };
        if size > max_wr {
            return crate::fail!(FiError::INVAL, "fi_srx_context: size {size} > the device's max_srq_wr {max_wr}");
        }
        let iov_limit = if r.iov_limit != 0 { r.iov_limit } else { cfg.rx_iov_limit.min(max_sge) };
        if iov_limit > max_sge {
            return crate::fail!(FiError::INVAL, "fi_srx_context: iov_limit {iov_limit} > the device's max_srq_sge {max_sge}");
        }
        let srq = match domain.pd.create_srq(size as u32, iov_limit as u32) {
            Ok(s) => s,
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_srx_context: ibv_create_srq({size}) failed: errno {e}"),
        };
        tracing::info!("srx: shared receive queue of {} buffers ({size} asked)", srq.max_wr);
        Ok(Arc::new(Srx {
            domain: Hold::new(domain),
            credits: Arc::new(QpCounters::new(0, size)),
            srq: Arc::new(srq),
            iov_limit,
            op_flags: AtomicU64::new(r.op_flags),
            cqs: Mutex::new(Vec::new()),
            refs: Refs::default(),
        }))
    }

    pub fn rx_op_flags(&self) -> u64 {
        self.op_flags.load(Ordering::Relaxed)
    }

    pub fn set_rx_op_flags(&self, f: u64) {
        self.op_flags.store(f, Ordering::Relaxed)
    }

    /// Receives may complete on `cq` (an endpoint bound to this SRQ has it
    /// as its receive CQ, or `fi_ep_bind(srx, cq, FI_RECV)`): it reserves
    /// room for every slot, once.
    pub fn attach_cq(&self, cq: &Arc<Cq>) -> FiResult<()> {
        if !Arc::ptr_eq(cq.domain.get(), self.domain.get()) {
            return crate::fail!(FiError::DOMAIN, "srx: the CQ belongs to another domain");
        }
        let mut cqs = self.cqs.lock();
        cqs.retain(|w| w.strong_count() > 0);
        if cqs.iter().any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(cq))) {
            return Ok(());
        }
        cq.commit(self.credits.rx_max)?;
        cqs.push(Arc::downgrade(cq));
        Ok(())
    }

    /// Posts a receive buffer (`fi_recv` & co. on the shared context).
    pub fn post(&self, iov: &[Iov], descs_ok: bool, ctx: u64) -> FiResult<()> {
        if iov.len() > self.iov_limit.max(1) {
            return crate::fail!(FiError::INVAL, "fi_recv(srx): too many iovs: {} > iov_limit {}", iov.len(), self.iov_limit);
        }
        if !descs_ok {
            return crate::fail!(FiError::INVAL, "fi_recv(srx): missing memory descriptor (FI_MR_LOCAL)");
        }
        // The completion may come on any CQ of the bound endpoints: the
        // context must travel in the work-request id itself.
        let Some(wr_id) = Cq::direct_wr_id(OpKind::Recv, ctx) else {
            return crate::fail!(FiError::INVAL, "fi_recv(srx): context {ctx:#x} does not fit a work-request id (57 bits)");
        };
        if !self.credits.take_rx() {
            for c in self.cqs.lock().iter().filter_map(|w| w.upgrade()) {
                c.progress();
            }
            if !self.credits.take_rx() {
                return Err(FiError::AGAIN);
            }
        }
        self.srq.post_recv(wr_id, iov).map_err(|e| {
            self.credits.give_rx();
            if e == libc::ENOMEM {
                FiError::AGAIN
            } else {
                tracing::warn!("fi_recv(srx): ibv_post_srq_recv failed: errno {e}");
                FiError::from_errno(e)
            }
        })
    }

    /// `fi_close`: refused while endpoints use it; posted buffers are
    /// dropped without completions (the SRQ goes with the last QP on it).
    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("srx")?;
        for c in self.cqs.lock().drain(..).filter_map(|w| w.upgrade()) {
            c.uncommit(self.credits.rx_max);
        }
        Ok(())
    }
}
