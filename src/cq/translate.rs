//! Translation of verbs work completions into libfabric entries: the
//! common success decided inline in the polling loop, everything else
//! (errors, counters, stashed contexts, split RMA pieces) out of line; and
//! the encoding of the work-request ids they decode.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::*;

/// What `Cq::translate` made of one work completion.
#[derive(Debug, PartialEq)]
pub(super) enum Translated {
    /// Nothing to report (an unsignalled or silent success, a piece of a
    /// split RMA, a foreign id).
    Silent,
    /// A success to hand out.
    Ok(Completion),
    /// An error entry, already queued.
    Failed,
}


impl Cq {
    /// Returns the credit of a polled completion to its QP.
    fn give_back(qps: &QpTable, cache: &mut Option<(u32, Arc<QpCounters>)>, wc: &Wc, id: &WrId) {
        let q = wc.qp_num();
        if cache.as_ref().map_or(true, |(n, _)| *n != q) {
            *cache = qps.read().get(&q).map(|c| (q, c.clone()));
        }
        if let Some((_, c)) = cache {
            if id.kind == OpKind::Recv {
                match &c.srq {
                    Some(s) => s.give_rx(),
                    None => c.give_rx(),
                }
            } else if id.batch {
                c.give_tx_n(id.ctx as usize)
            } else {
                c.give_tx()
            }
        }
    }

    /// Puts a context that does not fit in a work-request id aside; returns its index.
    pub fn stash(&self, ctx: u64) -> u64 {
        let mut st = self.lock_state();
        if let Some(i) = st.stash_free.pop() {
            st.stash[i] = Some(ctx);
            i as u64
        } else {
            st.stash.push(Some(ctx));
            (st.stash.len() - 1) as u64
        }
    }

    /// Work-request id of a piece of an RMA operation split into several
    /// requests (MSG endpoints, `MsgEp::post_tx`): signaled, its completion
    /// gives back its own credit and reports nothing, and counts nothing —
    /// the operation's last request does. A piece that fails leaves its
    /// status for that last request (`QpCounters::piece_err`), which the
    /// failure flushes. (batch and indirect together: no other id has both.)
    pub fn piece_wr_id(kind: OpKind) -> u64 {
        WrId { kind, ctx: 1, indirect: true, silent: true, batch: true }.encode()
    }

    /// Encodes a work-request id for an operation completing on this CQ.
    #[inline]
    pub fn wr_id(&self, kind: OpKind, ctx: u64, silent: bool) -> u64 {
        if ctx <= CTX_MASK {
            WrId { kind, ctx, indirect: false, silent, batch: false }.encode()
        } else {
            self.stashed_wr_id(kind, ctx, silent)
        }
    }

    #[inline(never)]
    fn stashed_wr_id(&self, kind: OpKind, ctx: u64, silent: bool) -> u64 {
        WrId { kind, ctx: self.stash(ctx), indirect: true, silent, batch: false }.encode()
    }

    /// A work-request id that carries `ctx` itself (no side table of a CQ):
    /// for receives of a shared receive context, which may complete on any
    /// of several CQs. None when `ctx` does not fit.
    pub fn direct_wr_id(kind: OpKind, ctx: u64) -> Option<u64> {
        (ctx <= CTX_MASK).then(|| WrId { kind, ctx, indirect: false, silent: false, batch: false }.encode())
    }

    /// Work-request id of an inject posted under `QpCounters::unsignalled`:
    /// `credits` is what its completion gives back (0 when unsignalled).
    pub fn batch_wr_id(kind: OpKind, credits: usize) -> u64 {
        WrId { kind, ctx: credits as u64, indirect: false, silent: true, batch: true }.encode()
    }

    fn resolve_ctx(st: &mut State, id: &WrId) -> u64 {
        if id.batch {
            return 0; // injects have no context
        }
        if !id.indirect {
            return id.ctx;
        }
        let i = id.ctx as usize;
        match st.stash.get_mut(i).and_then(|s| s.take()) {
            Some(c) => {
                st.stash_free.push(i);
                c
            }
            None => 0,
        }
    }

    /// Translates one work completion. An error entry goes to `st`'s queue
    /// here (`Translated::Failed`): the common case, a success, then returns
    /// only the entry, not room for an error's as well.
    ///
    /// The common case is decided here, inline in the polling loop: a success
    /// of the QP translated last (`State::last_qp`), with no counter to feed, whose id
    /// carries its context (not stashed) and, for a receive, no immediate
    /// data. Everything else goes to `translate_slow`.
    #[inline(always)]
    pub(super) fn translate(&self, st: &mut State, wc: &Wc) -> Translated {
        Self::translate_with(&self.qps, st, wc)
    }

    /// `translate` over the QP table `qps` (the CQ's own; a test's).
    #[inline(always)]
    pub(super) fn translate_with(qps: &QpTable, st: &mut State, wc: &Wc) -> Translated {
        let raw = wc.wr_id();
        if let (Some((qpn, q)), Some(kind)) = (st.last_qp.as_ref(), OpKind::from_bits((raw & KIND_MASK) >> KIND_SHIFT)) {
            if raw & INDIRECT == 0
                && wc.status() == wc_status::SUCCESS
                && *qpn == wc.qp_num()
                && !q.counted
                && (kind != OpKind::Recv || (wc.opcode() == wc_opcode::RECV && !wc.has_imm()))
            {
                if kind == OpKind::Recv {
                    match &q.srq {
                        Some(s) => s.give_rx(),
                        None => q.give_rx(),
                    }
                    if raw & SILENT != 0 {
                        return Translated::Silent;
                    }
                    return Translated::Ok(Completion {
                        op_context: raw & CTX_MASK,
                        flags: FI_RECV | FI_MSG,
                        len: wc.byte_len() as usize,
                        ..Default::default()
                    });
                }
                if raw & BATCH != 0 {
                    q.give_tx_n((raw & CTX_MASK) as usize);
                    return Translated::Silent;
                }
                q.give_tx();
                if raw & SILENT != 0 {
                    return Translated::Silent;
                }
                return Translated::Ok(Completion { op_context: raw & CTX_MASK, flags: kind.flags(), ..Default::default() });
            }
        }
        Self::translate_slow(qps, st, wc)
    }

    /// `translate` for everything but the common case (out of line).
    #[inline(never)]
    pub(super) fn translate_slow(qps: &QpTable, st: &mut State, wc: &Wc) -> Translated {
        let Some(id) = WrId::decode(wc.wr_id()) else {
            tracing::warn!("cq: completion with a foreign work-request id {:#x} dropped", wc.wr_id());
            return Translated::Silent;
        };
        Self::give_back(qps, &mut st.last_qp, wc, &id);
        let mut status = wc.status();
        if id.batch && id.indirect {
            // A piece of a split RMA (`piece_wr_id`): its operation's last
            // request reports and counts, once, for all of them.
            if status != wc_status::SUCCESS && status != wc_status::WR_FLUSH_ERR {
                tracing::info!("cq: a piece of a split {:?} failed: {} (vendor error {:#x})", id.kind, wc.status_str(), wc.vendor_err());
                if let Some((_, q)) = st.last_qp.as_ref() {
                    let _ = q.piece_err.compare_exchange(0, status, Ordering::AcqRel, Ordering::Acquire);
                }
            }
            return Translated::Silent;
        }
        if status == wc_status::WR_FLUSH_ERR && matches!(id.kind, OpKind::Read | OpKind::Write) {
            // The last request of a split RMA flushed behind its failed piece: that failure is its.
            if let Some((_, q)) = st.last_qp.as_ref() {
                let e = q.piece_err.swap(0, Ordering::AcqRel);
                if e != 0 {
                    status = e;
                }
            }
        }
        if let Some((_, q)) = st.last_qp.as_ref() {
            // Counters count every completion, silent or not (fi_cntr(3)); a
            // remote write with data that consumed a receive is not a receive.
            if q.counted && wc.opcode() != wc_opcode::RECV_RDMA_WITH_IMM {
                // A signalled inject of a batch also completes the unsignalled
                // injects posted before it (a send queue completes in order):
                // they succeeded, and each counts.
                let before = if id.batch { (id.ctx as usize).saturating_sub(1) } else { 0 };
                for _ in 0..before {
                    q.cntrs.count(id.kind.flags(), true);
                }
                q.cntrs.count(id.kind.flags(), wc.status() == wc_status::SUCCESS);
            }
        }
        let ctx = Self::resolve_ctx(st, &id);
        if status != wc_status::SUCCESS {
            let err = status_to_err(status);
            if wc.status() != wc_status::WR_FLUSH_ERR {
                tracing::info!("cq: {:?} failed: {} (vendor error {:#x})", id.kind, wc.status_str(), wc.vendor_err());
            }
            st.push_err(CqErr { op_context: ctx, flags: id.kind.flags(), err, prov_errno: status as i32, ..Default::default() });
            return Translated::Failed;
        }
        if id.silent {
            return Translated::Silent;
        }
        let mut c = Completion { op_context: ctx, flags: id.kind.flags(), ..Default::default() };
        if id.kind == OpKind::Recv {
            c.len = wc.byte_len() as usize;
            if let Some(imm) = wc.imm_data() {
                c.data = imm as u64;
                c.flags |= FI_REMOTE_CQ_DATA;
            }
            if wc.opcode() == wc_opcode::RECV_RDMA_WITH_IMM {
                // A remote write with data consumed this receive (FI_RX_CQ_DATA mode);
                // len is the bytes it placed (fi_cq(3) of 2.x; 1.x leaves it open).
                c.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
            }
        }
        Translated::Ok(c)
    }
}
