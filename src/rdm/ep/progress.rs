//! Progress and completions: polling the internal verbs CQ, dispatching each work completion, batched reposts of receive buffers, and the completions and errors reported to the application's CQs and counters.

use super::*;

impl Progress for RdmEp {
    fn progress(&self) {
        // A poll: drains only if something happened (see `Net::dirty`).
        self.inner.lock().progress_with(&self.ctx, false);
    }

    fn arm(&self) -> bool {
        let mut g = self.inner.lock();
        let Some(net) = &g.net else { return true };
        while net.comp.consume_event(&net.cq) {}
        if let Err(e) = net.cq.req_notify() {
            tracing::warn!("rdm: ibv_req_notify_cq failed: errno {e}");
            return false;
        }
        // Work that arrived before the arm raises no event: look once more.
        let idle = !g.progress_with(&self.ctx, true);
        // A connection attempt waiting to be made again wakes the waiter.
        if let Some(net) = g.net.as_mut().filter(|n| n.timer_armed || !n.redial.is_empty()) {
            net.arm_timer();
        }
        idle
    }

    fn wait_fd(&self) -> Option<RawFd> {
        self.wait_fd.get().copied()
    }
}

/// Completions one poll of the endpoint's verbs CQ takes at most.
const POLL_BATCH: usize = 32;

/// One poll of the endpoint's verbs CQ into `wcs`: what it returned
/// (nothing if the poll failed, which is logged).
#[inline(always)]
fn poll_batch<'a>(net: &Net, wcs: &'a mut verbs::WcBuf<POLL_BATCH>) -> &'a [Wc] {
    match net.cq.poll_buf(wcs, POLL_BATCH) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("rdm: ibv_poll_cq failed: errno {e}");
            &[]
        }
    }
}

/// Posts shared-pool buffer `idx` again. False if that failed (logged): the
/// SRQ holds every pool buffer, so it cannot be "full"; the buffer is lost
/// to the pool (and stays busy in the bank).
#[inline]
pub(super) fn post_pool(pool: &mut RecvPool, idx: u32) -> bool {
    match pool.post(idx, wr_id(WrKind::Recv, 0, idx)) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("rdm: reposting a shared receive buffer failed: {}", ioerr(e));
            false
        }
    }
}

impl Inner {
    pub(super) fn tx_done(&mut self, done: TxDone, err: Option<i32>) {
        self.tx_count = self.tx_count.saturating_sub(1);
        self.unpin(done.pin);
        self.tx_report(done, err);
    }

    /// Reports a transmit outcome (counters, CQ); `tx_done` also frees its
    /// place in the transmit queue, which a retired unsignaled send left at once.
    pub(super) fn tx_report(&self, done: TxDone, err: Option<i32>) {
        self.cntrs.count(done.flags, err.is_none());
        let Some((cq, _)) = &self.tx_cq else { return };
        match err {
            None if done.silent => {}
            None => cq.push_completion(Completion { op_context: done.context, flags: done.flags, ..Default::default() }),
            Some(e) => cq.push_error(CqErr {
                op_context: done.context,
                flags: done.flags,
                err: e,
                prov_errno: crate::cq::soft_prov_errno(e),
                src: FI_ADDR_NOTAVAIL,
                ..Default::default()
            }),
        }
    }

    pub(super) fn rx_error(&self, e: CqErr) {
        if let Some((cq, _)) = &self.rx_cq {
            cq.push_error(e);
        }
    }

    pub(super) fn rx_completion(&self, c: Completion) {
        if let Some((cq, _)) = &self.rx_cq {
            cq.push_completion(c);
        }
    }

    /// Advances everything after an operation was posted (or anything else
    /// that can make queued work postable); true when anything happened.
    pub(super) fn progress(&mut self, ctx: &Ctx) -> bool {
        if let Some(net) = &mut self.net {
            net.dirty = true;
        }
        self.progress_with(ctx, false)
    }

    /// `force_cm`: read the rdma-cm channel even if it was read very recently.
    /// Reading it costs a system call even when it is empty, so with every
    /// connection up it is read once per tick of the coarse clock (a few
    /// milliseconds; a busy `fi_cq_read` loop stays a user-space poll of the
    /// CQ, as on MSG endpoints); while connections are being set up, on
    /// every call. While completions keep coming, the clock itself is read
    /// every `CLOCK_SKIPS + 1` passes.
    pub(super) fn progress_with(&mut self, ctx: &Ctx, force_cm: bool) -> bool {
        // Reposts list the peers whose credits they may make due. Held ones
        // go now before a waiter sleeps (`arm`), or when they have waited
        // `REPOST_PASSES` busy passes; otherwise after this pass's poll if
        // it finds nothing (see `flush_reposts`).
        let due = self.net.as_ref().is_some_and(|n| !n.repost.is_empty() && (force_cm || n.repost_age >= REPOST_PASSES));
        let mut flushed = due && self.flush_reposts();
        let Some(net) = &mut self.net else { return false };
        // The coarse clock: never a system call, unlike Instant::now() on
        // machines whose clocksource the vDSO cannot read (an emulated HPET).
        // While completions keep coming, the passes after one that found
        // some reuse its reading (`CLOCK_SKIPS`): the rdma-cm channel and the
        // timers are then looked at a few passes late, and a busy stream
        // does not read the clock for every message.
        let settling = net.settling;
        let now = if net.clock_skips > 0 && !force_cm && !settling {
            net.clock_skips -= 1;
            net.cm_checked
        } else {
            net.clock_skips = 0;
            crate::sys::coarse_ms()
        };
        let cm_due = force_cm || settling || now != net.cm_checked;
        if cm_due {
            net.tick(now);
        }
        let mut any = self.poll_cq();
        let Some(net) = self.net.as_mut() else { return any };
        if any {
            net.clock_skips = CLOCK_SKIPS;
        }
        if !net.repost.is_empty() {
            if any {
                net.repost_age += 1;
            } else {
                flushed |= self.flush_reposts();
            }
        }
        let mut full = false;
        if cm_due {
            // Connection events, timers and set-up; true: walk every peer.
            let (got, walk) = self.on_tick(ctx, now, force_cm, settling);
            any |= got;
            full = walk;
        }
        let Some(net) = &mut self.net else { return any };
        // After completions and reposts, the peers they concern and those
        // left with work (`pending`) are drained. An operation's request for
        // progress, connection events, set-up and a pass before sleeping
        // (`arm`) walk every peer. A tick of the clock alone adds a few
        // peers in turn (`SWEEP_PEERS`): a safety net for the `pending`
        // listing that costs the same with 2 peers or 2,000.
        full |= net.dirty;
        let sweep = if cm_due && !full { SWEEP_PEERS } else { 0 };
        if any || flushed || full || sweep > 0 {
            net.dirty = false;
            self.drain_all(full, sweep);
            if let Some(net) = self.net.as_mut().filter(|n| n.settling) {
                net.settling = net.any_settling();
            }
        }
        any
    }

    /// The part of a progress pass that runs once per tick of the coarse
    /// clock (and on every pass while connections are set up, or before a
    /// waiter sleeps): the rdma-cm channel, failed connections' graves, the
    /// connections to dial again, those waiting for the pool. Returns
    /// whether connection events came, and whether the pass must walk every
    /// peer (connection events, set-up, `force_cm`). Out of line: a busy
    /// stream's passes skip it.
    #[inline(never)]
    fn on_tick(&mut self, ctx: &Ctx, now: u64, force_cm: bool, settling: bool) -> (bool, bool) {
        let got = self.cm_events(ctx);
        let Some(net) = &mut self.net else { return (got, false) };
        if !net.graves.is_empty() {
            net.expire_graves(now);
        }
        if !net.redial.is_empty() {
            self.redial_due(now);
        }
        let Some(net) = &mut self.net else { return (got, false) };
        if settling {
            let waiting: Vec<u32> = net.conns.iter().filter(|(_, c)| c.stage == Stage::WaitPool).map(|(k, _)| *k).collect();
            for c in waiting {
                self.start_connect(ctx, c);
            }
        }
        (got, force_cm || settling || got)
    }

    /// Polls the endpoint's verbs CQ and handles what it holds; true if it
    /// held anything. An empty poll (most polls of a busy loop) returns from
    /// here: `handle_batch`, into which every kind of completion's handling
    /// is inlined (and whose prologue costs accordingly), is entered only
    /// with completions in hand. Inlined into its callers (the progress
    /// pass): no frame of its own.
    #[inline(always)]
    pub(super) fn poll_cq(&mut self) -> bool {
        // Uninitialised: an empty poll touches nothing.
        let mut wcs = verbs::WcBuf::<POLL_BATCH>::new();
        let Some(net) = &self.net else { return false };
        let polled = poll_batch(net, &mut wcs);
        if polled.is_empty() {
            return false;
        }
        let full = polled.len() == POLL_BATCH;
        self.handle_batch(polled);
        if full {
            self.poll_more();
        }
        true
    }

    /// Handles the completions of one poll (the one place `handle_wc` is
    /// called from, so that it is inlined here).
    #[inline(never)]
    fn handle_batch(&mut self, wcs: &[Wc]) {
        for wc in wcs {
            self.handle_wc(wc);
        }
    }

    /// `poll_cq` after a full poll: polls on while polls come back full.
    #[cold]
    #[inline(never)]
    fn poll_more(&mut self) {
        let mut wcs = verbs::WcBuf::<POLL_BATCH>::new();
        loop {
            let Some(net) = &self.net else { return };
            let polled = poll_batch(net, &mut wcs);
            let full = polled.len() == POLL_BATCH;
            self.handle_batch(polled);
            if !full {
                return;
            }
        }
    }

    pub(super) fn handle_wc(&mut self, wc: &Wc) {
        let Some((kind, wr_conn, idx)) = wr_decode(wc.wr_id()) else {
            tracing::warn!("rdm: completion with a foreign work-request id {:#x}", wc.wr_id());
            return;
        };
        let ok = wc.status() == wc_status::SUCCESS;
        let flushed = wc.status() == wc_status::WR_FLUSH_ERR;
        let Some(net) = &mut self.net else { return };
        if kind == WrKind::Send && ok {
            // The common send completion: the slot names its connection (and
            // is not that connection's any more if it was torn down meanwhile).
            if let Some((done, covers)) = net.send.complete(idx, wr_conn) {
                if covers > 0 {
                    // The unsignaled sends posted before it are done too.
                    if let Some(r) = net.conns.get_mut(&wr_conn).and_then(|c| c.res.as_mut()) {
                        r.unsig.retire(covers);
                    }
                }
                if let Some(done) = done {
                    self.tx_done(done, None);
                }
            }
            return;
        }
        // Receives from the shared queue name their connection by QP number;
        // everything else carries it in the work-request id.
        let srq_recv = kind == WrKind::Recv && net.rx.is_some();
        let conn_id = if srq_recv { net.qpn.get(&wc.qp_num()).copied() } else { Some(wr_conn) };
        let Some((conn_id, conn)) = conn_id.and_then(|c| net.conns.get_mut(&c).map(|conn| (c, conn))) else {
            if srq_recv {
                // A connection that failed meanwhile: its buffer is ours again.
                net.grave_arrival(wc.qp_num());
                self.repost_pool(idx, None);
            } else if kind == WrKind::Send && is_unsignaled(idx) {
                // An unsignaled send of a connection that failed meanwhile (its
                // QP in the grave), flushed: it reports what it keeps.
                let owed = net.graves.iter_mut().flat_map(|g| g.conns.iter_mut()).find(|(id, _)| *id == wr_conn);
                let owed = owed.and_then(|(_, c)| c.res.as_mut()).and_then(|r| r.unsig.errored(idx));
                if let Some(d) = owed {
                    self.tx_report(d, Some(if flushed { FI_ECONNABORTED } else { crate::cq::status_to_err(wc.status()) }));
                }
            } else if kind == WrKind::Send {
                // A connection torn down meanwhile (its QP in the grave): a send slot it used is free now.
                net.send.complete(idx, wr_conn);
            }
            return;
        };
        if !ok && !flushed {
            // Warn: this closes the connection (a broken or hostile peer, or a lost link).
            tracing::warn!(
                "rdm: {:?} on connection to {} failed: {} (vendor error {:#x}); closing the connection",
                kind,
                conn.peer,
                wc.status_str(),
                wc.vendor_err()
            );
        }
        match kind {
            WrKind::Recv => {
                if !ok {
                    if net.rx.is_some() {
                        // The pool buffer came back unused by a message.
                        let addr = conn.peer;
                        if let Some(b) = net.bank_mut(&addr) {
                            b.arrived(&addr, 0);
                        }
                        self.repost_pool(idx, Some(addr));
                    }
                    // A flush on a connection still in the table means its QP
                    // went to error behind our back (e.g. a peer's access
                    // violation): tear it down, or it would linger, dead.
                    self.conn_failed(conn_id, if flushed { FI_ECONNABORTED } else { FI_EIO });
                    return;
                }
                let addr = conn.peer;
                self.handle_recv(conn_id, addr, idx, wc);
            }
            WrKind::Send if is_unsignaled(idx) => {
                // Completes only in error (the connection fails below): the
                // unsignaled sends before it succeeded; it reports what it
                // keeps (its transmit-queue place was freed when posted).
                let owed = conn.res.as_mut().and_then(|r| r.unsig.errored(idx));
                if let Some(d) = owed {
                    self.tx_report(d, Some(if flushed { FI_ECONNABORTED } else { crate::cq::status_to_err(wc.status()) }));
                }
                if !ok {
                    self.conn_failed(conn_id, if flushed { FI_ECONNABORTED } else { FI_EIO });
                }
            }
            WrKind::Send => {
                let done = net.send.complete(idx, conn_id).and_then(|(d, _)| d);
                if let Some(done) = done {
                    self.tx_done(done, if ok { None } else { Some(crate::cq::status_to_err(wc.status())) });
                }
                if !ok {
                    self.conn_failed(conn_id, if flushed { FI_ECONNABORTED } else { FI_EIO });
                }
            }
            WrKind::Op => {
                let Some(res) = conn.res.as_mut() else { return };
                let op = res.wr_ops.remove(&idx);
                res.free_wrs.push(idx);
                let err = if ok { None } else { Some(crate::cq::status_to_err(wc.status())) };
                match op {
                    Some(WrOp::Read(read_id)) => {
                        res.reads_out = res.reads_out.saturating_sub(1);
                        self.piece_done(read_id, err)
                    }
                    Some(WrOp::Rma(done)) => self.tx_done(done, err),
                    None => {}
                }
                if !ok {
                    self.conn_failed(conn_id, if flushed { FI_ECONNABORTED } else { FI_EIO });
                }
            }
        }
    }

    /// Posts the shared-pool buffers `handle_recv` set aside, chained in one
    /// call, and counts their messages in the bank (`Bank::recycled`:
    /// arrived, and free again, so their credits go out). Held buffers are
    /// flushed by a progress pass whose poll finds no completion (before
    /// its drain, which sends the credits that became due), by `arm`'s pass
    /// before a waiter sleeps, by a pass once they have waited
    /// `REPOST_PASSES` busy passes, before a connection fails (its peer's
    /// share must see its messages before it is retired), and from
    /// `handle_recv` once `REPOST_BATCH` wait. So a busy endpoint posts them
    /// by the batch, and none waits longer than a few of the application's
    /// polls: a peer short of credits gets them back while anyone polls.
    /// Each buffer's peer is listed for the pass's drain (its credit may be
    /// due). True if it posted any (the pass must drain).
    pub(super) fn flush_reposts(&mut self) -> bool {
        let Some(net) = &mut self.net else { return false };
        net.repost_age = 0;
        if net.repost.is_empty() {
            return false;
        }
        let Net { rx, repost, peers, pending, .. } = net;
        let Some(pool) = rx else { return false };
        // One chained post for them all (one trip into the driver).
        let (posted, err) = pool.post_many(repost, |r| r.0, |i| wr_id(WrKind::Recv, 0, i));
        if let Some(e) = err {
            tracing::warn!("rdm: reposting {} shared receive buffers failed: {}", repost.len() - posted, ioerr(e));
        }
        // Runs of buffers from one peer, releasing nothing, count in one
        // call (`recycled_many`); a buffer not posted is lost to the pool
        // (and stays busy in the bank).
        let mut k = 0;
        while k < repost.len() {
            let (_, from, release, data) = repost[k];
            let arrival = if k < posted && release == 0 {
                let run = repost[k..posted].iter().take_while(|r| r.1 == from && r.2 == 0).count();
                if repost[k..k + run].iter().any(|r| r.3) {
                    pool.bank.heard(&from);
                }
                k += run;
                pool.bank.recycled_many(&from, run as u32)
            } else {
                if data {
                    pool.bank.heard(&from);
                }
                k += 1;
                if k <= posted {
                    pool.bank.recycled(&from, release)
                } else {
                    pool.bank.arrived(&from, release)
                }
            };
            check_arrival(&from, arrival);
            // A credit due now is sent by the pass's drain (a peer with
            // work queued is listed already).
            if pool.bank.share(&from).is_some_and(|s| s.credit_due()) {
                mark_in(peers, pending, &from);
            }
        }
        repost.clear();
        true
    }

    /// Posts pool buffer `idx` again; `from`: the peer whose message it held.
    pub(super) fn repost_pool(&mut self, idx: u32, from: Option<SocketAddr>) {
        let Some(net) = &mut self.net else { return };
        let Some(pool) = &mut net.rx else { return };
        if !post_pool(pool, idx) {
            return;
        }
        pool.bank.reposted(from.as_ref());
        if let Some(a) = from {
            net.mark(&a);
        }
    }
}
