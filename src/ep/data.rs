//! The data path of MSG endpoints: posting sends, RMA and atomics (split
//! when longer than the device's largest message) and receives.

use super::*;

impl MsgEp {
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
