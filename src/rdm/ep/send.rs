//! Sending: `fi_send`/`fi_tsend` and their variants, eager sends (inline, staged or through send slots), rendezvous offers, and draining the operations queued while a connection or credits were missing.

use super::*;

/// Registers a rendezvous send's buffers for the peer's RDMA READ: one
/// segment per non-empty iov. `key(i, iov)`: the application's rkey for iov
/// `i` when its descriptor covers it for remote read; otherwise the piece is
/// registered through the domain's registration cache (the `Pin`s are kept
/// until FIN/NACK).
pub(super) fn rndv_segments(mrc: &MrCache, iov: &[Iov], key: impl Fn(usize, &Iov) -> Option<u32>) -> FiResult<(Vec<Segment>, Vec<Pin>)> {
    let mut segs = Vec::with_capacity(iov.len());
    let mut tmp = Vec::new();
    for (i, v) in iov.iter().enumerate() {
        if v.is_empty() {
            continue;
        }
        let rkey = match key(i, v) {
            Some(k) => k,
            None => match mrc.acquire(v.addr(), v.len() as usize, access::LOCAL_WRITE | access::REMOTE_READ) {
                Ok(pin) => {
                    let k = pin.rkey;
                    tmp.push(pin);
                    k
                }
                Err(e) => {
                    return crate::fail!(
                        FiError::from_errno(e),
                        "send: cannot register {} bytes at {:#x} for the rendezvous: {}",
                        v.len(),
                        v.addr(),
                        ioerr(e)
                    )
                }
            },
        };
        segs.push(Segment { addr: v.addr(), len: v.len() as u64, rkey });
    }
    Ok((segs, tmp))
}

/// Registers bytes of our own (a copy of the application's) for a
/// rendezvous: one segment. The vector's heap buffer does not move when the
/// vector does; the caller keeps it (`RndvSend::owned`) until FIN/NACK.
pub(super) fn rndv_owned(pd: &Arc<Pd>, bytes: Vec<u8>) -> FiResult<(Vec<Segment>, Vec<Pin>, Vec<u8>)> {
    let addr = bytes.as_ptr() as u64;
    let acc = access::LOCAL_WRITE | access::REMOTE_READ;
    match pd.reg_mr(addr, bytes.len(), acc) {
        Ok(mr) => {
            let seg = Segment { addr, len: bytes.len() as u64, rkey: mr.rkey };
            let end = addr + bytes.len() as u64;
            Ok((vec![seg], vec![Pin::own(Box::new(mr), addr, end, acc)], bytes))
        }
        Err(e) => crate::fail!(FiError::from_errno(e), "send: cannot register a {}-byte copy for the rendezvous: {}", bytes.len(), ioerr(e)),
    }
}

/// Encoding a protocol message straight into a send slot.
pub(super) trait EncodeInto {
    fn encode_into(&self, buf: &RegBuf, off: usize) -> usize;
}

impl EncodeInto for Message<'_> {
    fn encode_into(&self, buf: &RegBuf, off: usize) -> usize {
        match self.to_vec() {
            Ok(v) => {
                buf.write(off, &v);
                v.len()
            }
            Err(e) => {
                // Only messages we built ourselves get here; they always encode.
                tracing::error!("rdm: cannot encode {:?}: {e}", self.op());
                0
            }
        }
    }
}

/// Posts an RDMA READ/WRITE or a fetching atomic (`RmaOp::wire`) in
/// send-queue entry `i` of connection `conn_id`, recorded in `wr_ops` first:
/// its completion reports `done`, and so does the connection's failure if the
/// post fails. Writes that fit go inline.
pub(super) fn post_op(qp: &verbs::Qp, res: &mut QpRes, conn_id: u32, i: u32, op: SendOp, local: &[Iov], done: TxDone) -> Result<(), i32> {
    res.wr_ops.insert(i, WrOp::Rma(done));
    let inline = matches!(op, SendOp::Write { .. }) && {
        let len = Iov::total(local);
        len <= res.max_inline && len > 0
    };
    let fl = send_flags::SIGNALED | if inline { send_flags::INLINE } else { 0 };
    qp.post_send(wr_id(WrKind::Op, conn_id, i), op, local, fl)
}

impl RdmEp {
    /// `fi_send*`, `fi_tsend*`, `fi_inject*`.
    pub fn send(&self, r: SendReq<'_>) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.ready()?;
        let Some((_, tx_sel)) = &g.tx_cq else {
            return crate::fail!(FiError::NOCQ, "send: no transmit CQ bound");
        };
        let tx_sel = *tx_sel;
        let kind = if r.tag.is_some() { Kind::Tagged } else { Kind::Msg };
        if kind == Kind::Tagged && self.ctx.caps & FI_TAGGED == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "tagged send: the endpoint was opened without FI_TAGGED");
        }
        if r.iov.len() > self.ctx.tx_iov_limit {
            return crate::fail!(FiError::INVAL, "send: {} iovs exceed iov_limit {}", r.iov.len(), self.ctx.tx_iov_limit);
        }
        let len = Iov::total(r.iov);
        if len > self.ctx.max_msg {
            return crate::fail!(FiError::MSGSIZE, "send: {len} bytes exceed max_msg_size {}", self.ctx.max_msg);
        }
        let inject = r.flags & FI_INJECT != 0 || r.no_completion;
        if inject && len > self.ctx.inject_size {
            return crate::fail!(FiError::MSGSIZE, "inject of {len} bytes exceeds inject_size {}", self.ctx.inject_size);
        }
        // Version 1 of the protocol carries 4 bytes of CQ data (cq_data_size 4).
        let data = r.data.map(|d| d as u32);
        if g.tx_count >= self.ctx.tx_size {
            g.progress(&self.ctx);
            if g.tx_count >= self.ctx.tx_size {
                return Err(FiError::AGAIN);
            }
        }
        let addr = g.lookup(r.dest)?;
        let silent = r.no_completion || (tx_sel && r.flags & FI_COMPLETION == 0);
        let done = TxDone { context: r.context, flags: FI_SEND | kind.cq_flag(), silent, pin: 0 };
        let env = Envelope { tag: r.tag, data };
        let own_eager = self.ctx.cfg.is_eager(len);
        if own_eager {
            // The common case: connected, nothing queued ahead, a credit and
            // a send slot free, within the peer's eager limit: straight into
            // the slot and onto the wire.
            match g.send_direct(&addr, env, r.iov, len, done) {
                Direct::Posted => {
                    g.tx_count += 1;
                    return Ok(());
                }
                Direct::Retired => return Ok(()),
                Direct::Failed(conn, err) => {
                    g.tx_count += 1;
                    // The slot owes the completion: failing the connection reports it.
                    g.conn_failed(conn, err);
                    return Ok(());
                }
                Direct::Queue => {}
            }
        }
        // The peer's eager limit, once its HELLO told it, may be below ours:
        // longer messages go by rendezvous. Before that the message is queued
        // EAGER and checked again when it leaves (`drain_peer`).
        let net = g.net.as_ref().expect("ready");
        let eager = own_eager && !net.peers.get(&addr).is_some_and(|p| len > p.eager_limit);
        // Rendezvous: every piece of the buffer must be readable by the peer
        // (built after the eager fast path, which then has nothing to drop).
        let mut rndv = None;
        if !eager {
            rndv = Some(if inject {
                // An inject's buffer is the application's again when the
                // call returns (possible here when the peer's eager limit is
                // below our inject size): the peer reads a copy.
                rndv_owned(&net.pd, crate::verbs::mem::gather(r.iov, len).into_vec())?
            } else {
                let dom = self.domain.get();
                let (segs, tmp) = rndv_segments(&net.mrc, r.iov, |i, v| {
                    let desc = r.descs.get(i).copied().unwrap_or(0);
                    keys_of(dom, desc).filter(|k| k.remote_read && k.covers(v.addr(), v.len() as usize)).map(|k| k.rkey)
                })?;
                (segs, tmp, Vec::new())
            });
        }
        let payload = if eager {
            if inject {
                Some(Payload::Owned(crate::verbs::mem::gather(r.iov, len)))
            } else {
                Some(Payload::User(iov_vec(r.iov)))
            }
        } else {
            None
        };
        let net = g.net.as_mut().expect("ready");
        let peer = net.peer_or_connect(addr)?;
        let ready = peer.ready;
        let msg_id = peer.msg_id();
        match (payload, rndv) {
            (Some(payload), _) => peer.push(Out::Eager { msg_id, env, payload, done }),
            (None, Some((segs, tmp, owned))) => {
                peer.push(Out::Rts { msg_id, env, len: len as u64, segs });
                net.rndv_sends.insert((addr, msg_id), RndvSend { done, tmp, owned });
            }
            (None, None) => unreachable!("a message is eager or rendezvous"),
        }
        g.tx_count += 1;
        g.post_or_progress(&self.ctx, &addr, ready);
        Ok(())
    }
}

impl Inner {
    pub(super) fn rndv_send_done(&mut self, addr: SocketAddr, msg_id: u64, err: Option<i32>) {
        let Some(net) = &mut self.net else { return };
        match net.rndv_sends.remove(&(addr, msg_id)) {
            Some(s) => {
                drop(s.tmp);
                self.tx_done(s.done, err);
            }
            None => tracing::warn!("rdm: FIN/NACK from {addr} for unknown message {msg_id}"),
        }
    }

    /// Posts an eager message now if `PeerFlow::next_send` would hand it out
    /// now: the peer is connected with nothing queued (messages, reads, RMA),
    /// a credit and a send slot are free, and the message is within the
    /// peer's eager limit (else `Queue`: the caller sends it by rendezvous).
    /// The payload goes from the application's buffers straight into the
    /// slot (no copy in between, no queue entry); the header carries the
    /// grant owed to the peer, as a queued message's would. Inlined into
    /// its one caller (`RdmEp::send`): no frame or argument copies per message.
    #[inline(always)]
    pub(super) fn send_direct(&mut self, addr: &SocketAddr, env: Envelope, iov: &[Iov], len: usize, done: TxDone) -> Direct {
        // A silent send with no counter to tell may go unsignaled (retired now).
        let quiet = done.silent && self.cntrs.send.is_none();
        let Some(net) = &mut self.net else { return Direct::Queue };
        let Net { peers, conns, geo, send, rx, .. } = net;
        if !send.has_free() || proto::HEADER_LEN + len > geo.stride {
            return Direct::Queue;
        }
        let Some(peer) = peers.get_mut(addr) else { return Direct::Queue };
        // Longer than the peer takes EAGER: the caller sends it by rendezvous.
        if !peer.ready || len > peer.eager_limit || !peer.reads.is_empty() || !peer.rma.is_empty() {
            return Direct::Queue;
        }
        let Some(conn_id) = peer.send_conn else { return Direct::Queue };
        let Some(conn) = conns.get_mut(&conn_id) else { return Direct::Queue };
        let Some(qp) = conn.id.qp() else { return Direct::Queue };
        let Some(res) = conn.res.as_mut() else { return Direct::Queue };
        let Some(flow) = peer.flow.as_mut() else { return Direct::Queue };
        let share = match (rx.as_mut(), peer.rx_bank.as_mut()) {
            (Some(p), _) => p.bank.share_mut(addr),
            (None, Some(b)) => b.share_mut(addr),
            (None, None) => None,
        };
        let Some(share) = share else { return Direct::Queue };
        if !flow.take_for_direct() {
            return Direct::Queue;
        }
        let grant = share.take_grant();
        let msg_id = peer.next_msg_id;
        let Ok(hdr) = proto::eager_header(grant, msg_id, env, len) else {
            // Not encodable (cannot happen below the stride): the queued path reports it.
            share.untake(grant);
            flow.untake_direct();
            return Direct::Queue;
        };
        peer.next_msg_id += 1;
        let n = proto::HEADER_LEN + len;
        if n <= res.max_inline {
            // Inline: staged on the stack, copied by the device while posted
            // (no send slot's memory is written). A quiet one may go
            // unsignaled and needs no slot: only a failure completes it (and
            // reports it); a signaled one keeps a slot for its completion.
            let skip = quiet && res.unsig.may_skip();
            let (wid, fl, slot) = if skip {
                let idx = res.unsig.push(Some(done));
                (wr_id(WrKind::Send, conn_id, idx), send_flags::INLINE, None)
            } else {
                let s = send.take(conn_id).expect("checked has_free");
                send.set_done(s, Some(done));
                send.set_covers(s, res.unsig.cover());
                (wr_id(WrKind::Send, conn_id, s), send_flags::SIGNALED | send_flags::INLINE, Some(s))
            };
            let posted = crate::verbs::mem::post_staged(&hdr, iov, len, |sge| qp.post_send(wid, SendOp::Send, &[sge], fl));
            if let Some(r) = posted {
                return match r {
                    Ok(()) if skip => Direct::Retired,
                    Ok(()) => Direct::Posted,
                    Err(e) => {
                        if skip {
                            // Not posted: a slot owes the failure (as a signaled send's would).
                            res.unsig.unpush();
                            let s = send.take(conn_id).expect("checked has_free");
                            send.set_done(s, Some(done));
                        }
                        tracing::warn!("rdm: posting to {addr} failed: {}", ioerr(e));
                        Direct::Failed(conn_id, FI_EIO)
                    }
                };
            }
            // Longer than the stack stage (a device inlining more than it):
            // not posted; undo and go through a slot.
            match slot {
                Some(s) => send.put_back(s),
                None => res.unsig.unpush(),
            }
        }
        let s = send.take(conn_id).expect("checked has_free");
        send.set_done(s, Some(done));
        send.set_covers(s, res.unsig.cover());
        let off = send.off(s);
        let sbuf = &send.buf;
        sbuf.write(off, &hdr);
        sbuf.fill_from_iovs(off + proto::HEADER_LEN, iov, len);
        let wid = wr_id(WrKind::Send, conn_id, s);
        let fl = send_flags::SIGNALED | if n <= res.max_inline { send_flags::INLINE } else { 0 };
        match qp.post_send(wid, SendOp::Send, &[sbuf.iov(off, n)], fl) {
            Ok(()) => Direct::Posted,
            Err(e) => {
                tracing::warn!("rdm: posting to {addr} failed: {}", ioerr(e));
                Direct::Failed(conn_id, FI_EIO)
            }
        }
    }

    /// After an operation was queued for the peer at `addr`: if it is
    /// connected (`ready`), posts what that peer may send now, without a
    /// full progress pass (the application's CQ reads drive the rest, and a
    /// full transmit queue makes the next operation progress before it
    /// answers `FI_EAGAIN`); while its connection is being set up, a
    /// progress pass drives it.
    pub(super) fn post_or_progress(&mut self, ctx: &Ctx, addr: &SocketAddr, ready: bool) {
        if ready {
            self.drain_one(addr);
        } else {
            self.progress(ctx);
        }
    }

    /// Posts an RDMA READ/WRITE or a fetching atomic now if `drain_peer`
    /// would post it now: the peer is connected, nothing of its RMA or
    /// rendezvous reads is queued ahead, and a send-queue entry (`WR_OPS`)
    /// is free. The request names the application's buffers as they are (no
    /// copy of the iov list, no queue entry). True if it was taken: posted
    /// (its place in the transmit queue counted), or the post failed and the
    /// connection failed with it (which reports it, as `drain_peer`'s
    /// failures do). False: the caller queues it.
    pub(super) fn op_direct(&mut self, addr: &SocketAddr, op: SendOp, local: &[Iov], done: TxDone) -> bool {
        let Some(net) = &mut self.net else { return false };
        let Some(peer) = net.peers.get_mut(addr) else { return false };
        if !peer.ready || !peer.rma.is_empty() || !peer.reads.is_empty() {
            return false;
        }
        let Some(conn_id) = peer.send_conn else { return false };
        let Some(conn) = net.conns.get_mut(&conn_id) else { return false };
        let Some(qp) = conn.id.qp() else { return false };
        let Some(res) = conn.res.as_mut() else { return false };
        let Some(i) = res.free_wrs.pop() else { return false };
        let r = post_op(qp, res, conn_id, i, op, local, done);
        self.tx_count += 1;
        if let Err(e) = r {
            tracing::warn!("rdm: posting to {addr} failed: {}", ioerr(e));
            // The request waits in `wr_ops`: failing the connection reports it.
            self.conn_failed(conn_id, FI_EIO);
        }
        true
    }

    /// Sends what flow control and the send queues allow, for one peer.
    pub(super) fn drain_one(&mut self, addr: &SocketAddr) {
        let quiet = self.cntrs.send.is_none();
        let Some(net) = &mut self.net else { return };
        let Net { peers, conns, geo, send, rx, pd, mrc, rndv_sends, .. } = net;
        let mut out = Drained { done: Vec::new(), pd, mrc, rndv_sends };
        let Some(peer) = peers.get_mut(addr).filter(|p| p.ready) else { return };
        let r = if peer.pending {
            // Listed already: the next drain visits it again.
            Self::drain_with_share(peer, rx, conns, geo, send, quiet, &mut out).map(|_| ())
        } else {
            Self::drain_listing(peer, rx, conns, geo, send, quiet, &mut out, &mut net.pending)
        };
        for (d, e) in out.done {
            self.tx_done(d, e);
        }
        if let Err((c, e)) = r {
            self.conn_failed(c, e);
        }
    }

    /// Sends what flow control and the send queues allow: for every peer
    /// (`full`), or for the peers listed in `Net::pending`. Either way the
    /// peers left with work (or a credit due) are listed again.
    pub(super) fn drain_all(&mut self, full: bool, sweep: usize) {
        let quiet = self.cntrs.send.is_none();
        let Some(net) = &mut self.net else { return };
        // A pass with completions and nothing listed (most passes of a busy
        // stream): nothing to visit.
        if !full && sweep == 0 && net.pending.is_empty() && net.rx.as_ref().map_or(true, |p| !p.bank.has_served()) {
            return;
        }
        let mut failed = Vec::new();
        let Net { peers, conns, geo, send, rx, pd, mrc, rndv_sends, pending, pending_walk, sweep_at, .. } = net;
        // Peers the shared pool's bank gave credits to meanwhile.
        let mut served = Vec::new();
        if let Some(p) = rx.as_mut() {
            p.bank.take_served(&mut served);
        }
        for a in &served {
            mark_in(peers, pending, a);
        }
        let mut out = Drained { done: Vec::new(), pd, mrc, rndv_sends };
        if full {
            pending.clear();
            // With the shared pool, one walk over the bank tells whether any
            // peer is owed a credit; if none is, a peer with nothing queued
            // is skipped without looking its share up.
            let none_due = rx.as_ref().is_some_and(|p| p.bank.due_keys().next().is_none());
            for peer in peers.values_mut() {
                peer.pending = false;
                if !peer.ready || (none_due && peer.nothing_queued()) {
                    continue;
                }
                if let Err(f) = Self::drain_listing(peer, rx, conns, geo, send, quiet, &mut out, pending) {
                    failed.push(f);
                }
            }
        } else {
            std::mem::swap(pending, pending_walk);
            for addr in pending_walk.iter() {
                let Some(peer) = peers.get_mut(addr) else { continue };
                if !peer.pending {
                    continue; // listed twice (removed and listed again meanwhile)
                }
                peer.pending = false;
                // Not connected yet: its connection's events walk every peer.
                if !peer.ready {
                    continue;
                }
                if let Err(f) = Self::drain_listing(peer, rx, conns, geo, send, quiet, &mut out, pending) {
                    failed.push(f);
                }
            }
            pending_walk.clear();
            // The tick's sweep: the next `sweep` peers in turn, each drained
            // if it is left with work or a credit due (`drain_with_share`
            // looks; a peer listed in `pending` meanwhile waits for the next
            // pass).
            let n = peers.len();
            for _ in 0..sweep.min(n) {
                if *sweep_at >= n {
                    *sweep_at = 0;
                }
                let Some(peer) = peers.at_mut(*sweep_at) else { break };
                *sweep_at += 1;
                if peer.pending || !peer.ready {
                    continue;
                }
                if let Err(f) = Self::drain_listing(peer, rx, conns, geo, send, quiet, &mut out, pending) {
                    failed.push(f);
                }
            }
        }
        for (d, e) in out.done {
            self.tx_done(d, e);
        }
        for (c, e) in failed {
            self.conn_failed(c, e);
        }
    }

    /// `drain_with_share` for a peer not listed in `pending`; lists it if it
    /// is left with work (or a credit due).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn drain_listing(
        peer: &mut Peer,
        rx: &mut Option<RecvPool>,
        conns: &mut IdTable<Conn>,
        geo: &Geo,
        send: &mut SendPool,
        quiet: bool,
        out: &mut Drained<'_>,
        pending: &mut Vec<SocketAddr>,
    ) -> Result<(), (u32, i32)> {
        let busy = Self::drain_with_share(peer, rx, conns, geo, send, quiet, out)?;
        if busy {
            peer.pending = true;
            pending.push(peer.addr);
        }
        Ok(())
    }

    /// The peer has work queued, or a credit due that a drain could not send.
    pub(super) fn busy(peer: &Peer, rx: &Option<RecvPool>) -> bool {
        !peer.nothing_queued() || Self::share_of(peer, rx).is_some_and(|s| s.credit_due())
    }

    /// The peer's receive-side share: in the shared pool's bank, or in its own.
    pub(super) fn share_of<'a>(peer: &'a Peer, rx: &'a Option<RecvPool>) -> Option<&'a Share> {
        match (rx.as_ref(), peer.rx_bank.as_ref()) {
            (Some(p), _) => p.bank.share(&peer.addr),
            (None, Some(b)) => b.share(&peer.addr),
            (None, None) => None,
        }
    }

    /// `drain_peer` with the peer's receive-side share: in the shared pool's
    /// bank, or in its own. Ok(true): the peer is left with work (or a
    /// credit due) it could not post.
    pub(super) fn drain_with_share(
        peer: &mut Peer,
        rx: &mut Option<RecvPool>,
        conns: &mut IdTable<Conn>,
        geo: &Geo,
        send: &mut SendPool,
        quiet: bool,
        out: &mut Drained<'_>,
    ) -> Result<bool, (u32, i32)> {
        // Nothing queued and no credit to return (most calls after a
        // completion): nothing to post.
        if !Self::busy(peer, rx) {
            return Ok(false);
        }
        let mut own = peer.rx_bank.take();
        let mut none = Share::default();
        let share = match (rx.as_mut(), own.as_mut()) {
            (Some(p), _) => p.bank.share_mut(&peer.addr),
            (None, Some(b)) => b.share_mut(&peer.addr),
            (None, None) => None,
        }
        .unwrap_or(&mut none);
        let r = Self::drain_peer(peer, share, conns, geo, send, quiet, out);
        if let Some(b) = own.as_mut() {
            // Its own bank serves only this peer, which is being drained.
            b.take_served(&mut Vec::new());
        }
        peer.rx_bank = own;
        r?;
        Ok(Self::busy(peer, rx))
    }

    /// Posts one peer's queued work. `Err((conn, err))`: the connection broke.
    pub(super) fn drain_peer(
        peer: &mut Peer,
        share: &mut Share,
        conns: &mut IdTable<Conn>,
        geo: &Geo,
        send: &mut SendPool,
        quiet: bool,
        out: &mut Drained<'_>,
    ) -> Result<(), (u32, i32)> {
        let addr = peer.addr;
        let eager_limit = peer.eager_limit;
        let Some(conn_id) = peer.send_conn else { return Ok(()) };
        let Some(conn) = conns.get_mut(&conn_id) else { return Ok(()) };
        let Some(qp) = conn.id.qp() else { return Ok(()) };
        let Some(res) = conn.res.as_mut() else { return Ok(()) };
        let stride = geo.stride;
        let sbuf = send.buf.clone();
        let fail = |e: i32| {
            tracing::warn!("rdm: posting to {addr} failed: {}", ioerr(e));
            (conn_id, FI_EIO)
        };
        // RDMA READs of rendezvous receives, then RMA: send-queue slots only.
        // Pieces of split RMA operations go the same way, under the same bound.
        while !res.free_wrs.is_empty() && res.reads_out < geo.reads_out {
            let Some(p) = peer.pop_piece() else { break };
            let i = res.free_wrs.pop().expect("checked");
            res.wr_ops.insert(i, WrOp::Read(p.read_id));
            res.reads_out += 1;
            let op = match p.kind {
                PieceKind::RmaWrite => SendOp::Write { raddr: p.raddr, rkey: p.rkey },
                PieceKind::RndvRead | PieceKind::RmaRead => SendOp::Read { raddr: p.raddr, rkey: p.rkey },
            };
            qp.post_send(wr_id(WrKind::Op, conn_id, i), op, &[p.local], send_flags::SIGNALED).map_err(fail)?;
        }
        // RMA after a split one waits until all its pieces are posted (the
        // QP then keeps the order); messages after a split write likewise
        // (send after write), credits included, which only delays them:
        // the pieces need nothing from the peer's software to complete.
        while let Some(op) = if peer.rma_pieces > 0 { None } else { peer.rma.pop_front() } {
            let r = match op {
                RmaOp::AtomicAdd { raddr, rkey, add, done } => {
                    let Some(s) = send.take(conn_id) else {
                        peer.rma.push_front(RmaOp::AtomicAdd { raddr, rkey, add, done });
                        break;
                    };
                    let off = send.off(s);
                    send.set_done(s, Some(done));
                    let wid = wr_id(WrKind::Send, conn_id, s);
                    qp.post_send(wid, SendOp::FetchAdd { raddr, rkey, add }, &[sbuf.iov(off, 8)], send_flags::SIGNALED)
                }
                RmaOp::WriteInline { data, raddr, rkey, done } => {
                    let Some(s) = send.take(conn_id) else {
                        peer.rma.push_front(RmaOp::WriteInline { data, raddr, rkey, done });
                        break;
                    };
                    let off = send.off(s);
                    sbuf.write(off, &data);
                    send.set_done(s, Some(done));
                    let fl = send_flags::SIGNALED | if data.len() <= res.max_inline && !data.is_empty() { send_flags::INLINE } else { 0 };
                    let wid = wr_id(WrKind::Send, conn_id, s);
                    qp.post_send(wid, SendOp::Write { raddr, rkey }, &[sbuf.iov(off, data.len())], fl)
                }
                op => {
                    let Some(i) = res.free_wrs.pop() else {
                        peer.rma.push_front(op);
                        break;
                    };
                    let (sop, local) = op.wire().expect("send-slot ops are handled above");
                    post_op(qp, res, conn_id, i, sop, local, op.done())
                }
            };
            r.map_err(fail)?;
        }
        // Messages: a send slot and flow-control credit each.
        let done_now = &mut out.done;
        if peer.write_pieces > 0 {
            return Ok(());
        }
        let Some(flow) = peer.flow.as_mut() else { return Ok(()) };
        while send.has_free() {
            let Some(o) = flow.next_send(share) else { break };
            let s = send.take(conn_id).expect("a free slot");
            let off = send.off(s);
            let (n, done, op) = match o {
                Outgoing::Credit { grant, release, recall } => {
                    if release > 0 || recall.is_some() {
                        tracing::debug!("rdm: CREDIT to {addr}: grant {grant}, release {release}, recall {recall:?}");
                    }
                    let n = Message::Credit { credits: grant, release, recall }.encode_into(&sbuf, off);
                    (n, None, SendOp::Send)
                }
                Outgoing::Data { msg, grant } => match msg {
                    Out::Eager { msg_id, env, payload, done } if payload.len() > eager_limit => {
                        // Queued before the peer's HELLO told its eager limit,
                        // and longer than it: an RTS instead, in the same slot
                        // with the same credit.
                        let len = payload.len();
                        let r = match payload {
                            Payload::User(iovs) => rndv_segments(out.mrc, &iovs, |_, _| None).map(|(s, t)| (s, t, Vec::new())),
                            Payload::Owned(v) => rndv_owned(out.pd, v.into_vec()),
                        };
                        match r {
                            Ok((segs, tmp, owned)) => {
                                tracing::debug!("rdm: a queued {len}-byte message to {addr} exceeds its eager limit {eager_limit}: rendezvous");
                                out.rndv_sends.insert((addr, msg_id), RndvSend { done, tmp, owned });
                                let m = Message::Rts { credits: grant, msg_id, env, len: len as u64, segs };
                                (m.encode_into(&sbuf, off), None, SendOp::Send)
                            }
                            Err(e) => {
                                // Nothing left: the slot, the credit and the grant go back.
                                send.put_back(s);
                                share.untake(grant);
                                flow.untake_direct();
                                done_now.push((done, Some(e.0)));
                                continue;
                            }
                        }
                    }
                    Out::Eager { msg_id, env, payload, done } => {
                        let len = payload.len();
                        let hdr = match proto::eager_header(grant, msg_id, env, len) {
                            Ok(h) => h,
                            Err(e) => {
                                tracing::warn!("rdm: cannot encode an eager message: {e}");
                                send.put_back(s);
                                done_now.push((done, Some(e.fi_error().0)));
                                continue;
                            }
                        };
                        sbuf.write(off, &hdr);
                        match &payload {
                            Payload::Owned(v) => sbuf.write(off + proto::HEADER_LEN, v),
                            Payload::User(iovs) => {
                                sbuf.fill_from_iovs(off + proto::HEADER_LEN, iovs, len);
                            }
                        }
                        (proto::HEADER_LEN + len, Some(done), SendOp::Send)
                    }
                    Out::Rts { msg_id, env, len, segs } => {
                        let m = Message::Rts { credits: grant, msg_id, env, len, segs };
                        (m.encode_into(&sbuf, off), None, SendOp::Send)
                    }
                    Out::Fin { msg_id, len } => (Message::Fin { credits: grant, msg_id, len }.encode_into(&sbuf, off), None, SendOp::Send),
                    Out::Nack { msg_id, err } => {
                        (Message::Nack { credits: grant, msg_id, err: err.max(1) }.encode_into(&sbuf, off), None, SendOp::Send)
                    }
                    Out::WriteData { payload, raddr, rkey, imm, done } => {
                        // No header to carry the grant: owe it again.
                        share.untake(grant);
                        let len = payload.len();
                        let iovs: Vec<Iov> = match &payload {
                            Payload::Owned(v) if len <= stride => {
                                sbuf.write(off, v);
                                vec![sbuf.iov(off, len)]
                            }
                            Payload::User(iovs) if len <= stride => {
                                sbuf.fill_from_iovs(off, iovs, len);
                                vec![sbuf.iov(off, len)]
                            }
                            Payload::User(iovs) => iovs.to_vec(),
                            Payload::Owned(_) => {
                                send.put_back(s);
                                done_now.push((done, Some(FI_EMSGSIZE)));
                                continue;
                            }
                        };
                        send.set_done(s, Some(done));
                        let fl = send_flags::SIGNALED | if len <= res.max_inline && len > 0 { send_flags::INLINE } else { 0 };
                        qp.post_send(wr_id(WrKind::Send, conn_id, s), SendOp::WriteImm { raddr, rkey, imm }, &iovs, fl)
                            .map_err(fail)?;
                        continue;
                    }
                },
            };
            // Unsignaled when inline and owing nothing on success (a protocol
            // message; a silent send, retired now): see `Unsignaled`.
            let skip = n <= res.max_inline && done.is_none_or(|d| d.silent && quiet) && res.unsig.may_skip();
            if skip {
                let idx = res.unsig.push(done);
                let r = qp.post_send(wr_id(WrKind::Send, conn_id, idx), op, &[sbuf.iov(off, n)], send_flags::INLINE);
                if r.is_err() {
                    // Not posted: the slot owes it, as below.
                    res.unsig.unpush();
                    send.set_done(s, done);
                    r.map_err(fail)?;
                }
                send.put_back(s);
                if let Some(d) = done {
                    done_now.push((d, None));
                }
                continue;
            }
            send.set_done(s, done);
            send.set_covers(s, res.unsig.cover());
            let fl = send_flags::SIGNALED | if n <= res.max_inline { send_flags::INLINE } else { 0 };
            qp.post_send(wr_id(WrKind::Send, conn_id, s), op, &[sbuf.iov(off, n)], fl).map_err(fail)?;
        }
        Ok(())
    }
}
