//! Arrivals: posted receives and `fi_cancel`, messages arriving from peers (eager data, rendezvous requests, credit returns), the matching engine's actions, and the RDMA READs of rendezvous receives.

use super::*;

/// Logs a message that came without a credit (`Arrival::Overrun`).
pub(super) fn check_arrival(from: &SocketAddr, a: Arrival) {
    if a == Arrival::Overrun {
        tracing::warn!("rdm: {from} sent a message without a credit (protocol violation)");
    }
}

impl RdmEp {
    /// `fi_recv*`, `fi_trecv*`.
    pub fn recv(&self, r: RecvReq<'_>) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.ready()?;
        if g.rx_cq.is_none() {
            return crate::fail!(FiError::NOCQ, "recv: no receive CQ bound");
        }
        let kind = if r.tag.is_some() { Kind::Tagged } else { Kind::Msg };
        if kind == Kind::Tagged && self.ctx.caps & FI_TAGGED == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "tagged receive: the endpoint was opened without FI_TAGGED");
        }
        if r.iov.len() > self.ctx.rx_iov_limit {
            return crate::fail!(FiError::INVAL, "recv: {} iovs exceed iov_limit {}", r.iov.len(), self.ctx.rx_iov_limit);
        }
        let peek = r.flags & FI_PEEK != 0;
        let discard_claim = r.flags & FI_CLAIM != 0 && r.flags & FI_DISCARD != 0;
        let multi = r.flags & FI_MULTI_RECV != 0;
        if multi && self.ctx.caps & FI_MULTI_RECV == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "recv: FI_MULTI_RECV needs the FI_MULTI_RECV capability");
        }
        if multi && r.iov.len() != 1 {
            return crate::fail!(FiError::INVAL, "recv: FI_MULTI_RECV takes exactly one buffer");
        }
        let len = Iov::total(r.iov);
        let src = if crate::info::directed_recv(self.ctx.caps, kind == Kind::Tagged) {
            if r.src == FI_ADDR_UNSPEC && self.ctx.caps & crate::info::FI_EXACT_DIRECTED_RECV != 0 {
                return crate::fail!(FiError::INVAL, "recv: FI_EXACT_DIRECTED_RECV endpoints take no FI_ADDR_UNSPEC source");
            }
            r.src
        } else {
            FI_ADDR_UNSPEC
        };
        let av = g.av.as_ref().expect("ready");
        if src != FI_ADDR_UNSPEC && av.lookup(src).is_none() {
            return crate::fail!(FiError::INVAL, "recv: source fi_addr {src:#x} is not in the address vector");
        }
        // Messages queued from senders the AV did not hold yet: the AV
        // changed since, so they may have an fi_addr now (a directed receive
        // must find them, a completion must name them).
        let gen = av.generation();
        if gen != g.src_gen {
            g.src_gen = gen;
            let n = g.matcher.resolve_unknown(|a| av.reverse(a));
            if n > 0 {
                tracing::debug!("rdm: {n} queued message(s) from senders just inserted in the AV now have their fi_addr");
            }
        }
        let consumes = !peek && !discard_claim;
        if consumes && g.rx_count >= self.ctx.rx_size {
            g.progress(&self.ctx);
            if g.rx_count >= self.ctx.rx_size {
                return Err(FiError::AGAIN);
            }
        }
        let mut req = match r.tag {
            None => RecvRequest::msg(0, r.context, len),
            Some((tag, ignore)) => RecvRequest::tagged(0, r.context, len, tag, ignore),
        }
        .from(src)
        .with_flags(r.flags);
        // A receive that consumes a message is recorded; FI_PEEK and
        // FI_CLAIM | FI_DISCARD never reach a buffer (handle 0: no record).
        // A plain one while nothing unexpected waits (the common case)
        // joins the queue with its record; any other is named by a handle.
        let mut handle = 0;
        if consumes {
            g.rx_count += 1;
            let rec = RecvRec { iov: iov_vec(r.iov), flags: r.flags, keyed: r.descs_ok };
            match g.matcher.post_plain_with(req, rec) {
                Ok(()) => return Ok(()),
                Err((q, rec)) => {
                    req = q;
                    handle = g.recvs.insert(rec);
                    req.handle = handle;
                }
            }
        }
        g.spill_recvs();
        let actions = match g.matcher.post(req) {
            Ok(a) => a,
            Err(e) => {
                if g.recvs.remove(handle).is_some() {
                    g.rx_count -= 1;
                }
                return Err(e);
            }
        };
        // A receive that waits in the posted queue needs no progress; one
        // that took unexpected messages may have started rendezvous reads.
        if !actions.is_empty() {
            for a in actions {
                g.execute(a, None);
            }
            g.progress(&self.ctx);
        }
        Ok(())
    }

    /// `fi_cancel`: a posted receive, by context.
    pub fn cancel(&self, context: u64) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        if !g.enabled {
            return crate::fail!(FiError::OPBADSTATE, "fi_cancel: endpoint not enabled");
        }
        g.spill_recvs();
        let Some(c) = g.matcher.cancel(context) else {
            tracing::debug!("fi_cancel: no posted receive with context {context:#x}");
            return Ok(());
        };
        let buf = g.recvs.get(c.handle).and_then(|r| r.iov.first()).map_or(0, |v| v.addr());
        g.rx_error(CqErr {
            op_context: c.context,
            flags: c.flags,
            tag: c.tag,
            err: FI_ECANCELED,
            prov_errno: crate::cq::soft_prov_errno(FI_ECANCELED),
            buf,
            src: FI_ADDR_NOTAVAIL,
            ..Default::default()
        });
        if c.last && g.recvs.discard(c.handle) {
            g.rx_count -= 1;
        }
        Ok(())
    }
}

impl Inner {
    /// Files the records of the receives that keep theirs in the matcher's
    /// queues (`Matcher::post_plain_with`) under handles in `recvs`, before
    /// the matcher takes a receive by handle (`Matcher::spill`).
    pub(super) fn spill_recvs(&mut self) {
        if self.matcher.keeps_records() {
            let recvs = &mut self.recvs;
            self.matcher.spill(|rec| recvs.insert(rec));
        }
    }

    /// Completes a receive that kept its record in the matcher's queue
    /// (`Matcher::take_head_with`): copies `data` and reports it.
    #[inline]
    fn complete_kept(&mut self, d: &Delivery, rec: RecvRec, data: &[u8]) {
        copy_to_iovs(&rec.iov, d.offset, data);
        self.report_recv(d, &rec, None);
        self.rx_count = self.rx_count.saturating_sub(1);
    }

    /// Completes (part of) a receive: copies `data` (an eager payload; empty
    /// after a rendezvous read, which landed in place) to its buffers and
    /// reports it. `err`: a transfer error (a failed read). The record is
    /// read in place (slab index, no hash); a receive done with this message
    /// (`d.last`) is then removed.
    pub(super) fn complete_recv(&mut self, d: &Delivery, data: &[u8], err: Option<i32>) {
        let Some(rec) = self.recvs.get(d.handle) else {
            tracing::warn!("rdm: completion for unknown receive {:#x}", d.handle);
            return;
        };
        copy_to_iovs(&rec.iov, d.offset, data);
        self.report_recv(d, rec, err);
        if d.last {
            // Dropped in place: moving the record out copies all of it.
            self.recvs.discard(d.handle);
            self.rx_count = self.rx_count.saturating_sub(1);
        }
    }

    /// The completion (or error entry) of (part of) receive `rec`.
    pub(super) fn report_recv(&self, d: &Delivery, rec: &RecvRec, err: Option<i32>) {
        let buf = if d.multi_recv { rec.iov.first().map_or(0, |v| v.addr() + d.offset as u64) } else { 0 };
        let rx_sel = self.rx_cq.as_ref().is_some_and(|(_, s)| *s);
        let wanted = !rx_sel || rec.flags & FI_COMPLETION != 0 || d.flags & FI_MULTI_RECV != 0;
        let ctx = d.context;
        let failed = err.or(if d.olen > 0 { Some(FI_ETRUNC) } else { None });
        self.cntrs.count(FI_RECV, failed.is_none());
        if let Some(e) = failed {
            self.rx_error(CqErr {
                op_context: ctx,
                flags: d.flags,
                len: d.len,
                buf,
                data: d.data,
                tag: d.tag,
                olen: d.olen,
                err: e,
                prov_errno: crate::cq::soft_prov_errno(e),
                src: d.src,
                ..Default::default()
            });
        } else if wanted {
            self.rx_completion(Completion { op_context: ctx, flags: d.flags, len: d.len, buf, data: d.data, tag: d.tag, src: d.src });
        }
    }

    /// Carries out one matching action. `payload`: the eager payload of the
    /// message just passed to `arrive` (for `Deliver`).
    pub(super) fn execute(&mut self, a: Action, payload: Option<&[u8]>) {
        match a {
            Action::Deliver(d) => {
                let data = payload.unwrap_or(&[]);
                self.complete_recv(&d, &data[..d.len.min(data.len())], None);
            }
            Action::DeliverQueued(d, bytes) => self.complete_recv(&d, &bytes[..d.len.min(bytes.len())], None),
            Action::Read(d, r) => self.start_read(d, r),
            Action::Queued => {}
            Action::Peeked { context, info, claimed: _ } => self.rx_completion(Completion {
                op_context: context,
                flags: info.cq_flags(),
                len: info.len,
                buf: 0,
                data: info.data.unwrap_or(0),
                tag: info.tag,
                src: info.src,
            }),
            Action::NoMessage { context } => self.rx_error(CqErr {
                op_context: context,
                flags: FI_RECV | FI_TAGGED,
                err: FI_ENOMSG,
                prov_errno: crate::cq::soft_prov_errno(FI_ENOMSG),
                src: FI_ADDR_NOTAVAIL,
                ..Default::default()
            }),
            Action::Discarded { context, info, rndv } => {
                self.rx_completion(Completion {
                    op_context: context,
                    flags: info.cq_flags(),
                    len: info.len,
                    buf: 0,
                    data: info.data.unwrap_or(0),
                    tag: info.tag,
                    src: info.src,
                });
                if let Some(r) = rndv {
                    self.answer_rndv(r.msg_id, Out::Fin { msg_id: 0, len: 0 });
                }
            }
        }
    }

    /// Sends FIN/NACK for a rendezvous request the matcher held under local id `lid`.
    pub(super) fn answer_rndv(&mut self, lid: u64, out: Out) {
        let Some(net) = &mut self.net else { return };
        let Some((addr, msg_id)) = net.rndv_in.remove(&lid) else {
            tracing::warn!("rdm: answer for unknown rendezvous {lid}");
            return;
        };
        let out = match out {
            Out::Fin { len, .. } => Out::Fin { msg_id, len },
            Out::Nack { err, .. } => Out::Nack { msg_id, err },
            o => o,
        };
        if let Some(p) = net.peers.get_mut(&addr) {
            p.push(out);
        }
    }

    /// Starts the RDMA READs of a rendezvous receive.
    pub(super) fn start_read(&mut self, d: Delivery, r: super::super::matching::Rendezvous) {
        let Some(net) = &mut self.net else { return };
        let Some((addr, msg_id)) = net.rndv_in.remove(&r.msg_id) else {
            tracing::warn!("rdm: read for unknown rendezvous {}", r.msg_id);
            self.complete_recv(&d, &[], Some(FI_EIO));
            return;
        };
        let read_id = net.next_read;
        net.next_read += 1;
        let keyed = self.recvs.get(d.handle).is_some_and(|rec| rec.keyed);
        let peer_alive = net.peers.contains_key(&addr);
        let mut iov = self.recvs.get(d.handle).map(|rec| rec.iov.clone()).unwrap_or_default();
        // Buffers without descriptors (a domain without FI_MR_LOCAL): the
        // bytes the reads fill are registered through the cache.
        let mut pins = Vec::new();
        let mut reg_failed = false;
        if peer_alive && !keyed && !net.mr_local {
            let (want_lo, want_hi) = (d.offset, d.offset + d.len);
            let mut base = 0usize;
            for v in iov.iter_mut() {
                let vl = v.len() as usize;
                let (lo, hi) = (want_lo.max(base), want_hi.min(base + vl));
                if lo < hi {
                    match net.mrc.acquire(v.addr() + (lo - base) as u64, hi - lo, access::LOCAL_WRITE) {
                        Ok(p) => {
                            *v = v.with_lkey(p.lkey);
                            pins.push(p);
                        }
                        Err(e) => {
                            tracing::warn!("rdm: cannot register {} bytes at {:#x} for a rendezvous receive: {}", hi - lo, v.addr(), ioerr(e));
                            reg_failed = true;
                            break;
                        }
                    }
                }
                base += vl;
            }
        }
        if !peer_alive || (!keyed && net.mr_local) || reg_failed {
            if reg_failed {
                pins.clear();
            } else if !keyed && net.mr_local {
                tracing::warn!("rdm: rendezvous receive without a memory descriptor (FI_MR_LOCAL): cannot read into it");
            } else {
                tracing::info!("rdm: rendezvous from {addr}, which is gone");
            }
            let d2 = self.matcher.read_finished(&d);
            self.complete_recv(&d2, &[], Some(FI_EIO));
            if peer_alive {
                if let Some(net) = self.net.as_mut() {
                    if let Some(p) = net.peers.get_mut(&addr) {
                        p.push(Out::Nack { msg_id, err: FI_EIO as u16 });
                    }
                    net.mark(&addr);
                }
            }
            return;
        }
        // Split the reads by remote chunk and by local buffer.
        let mut pieces = Vec::new();
        for ch in proto::read_plan(&r.segs, d.len, net.geo.max_chunk) {
            let mut lo = d.offset + ch.local_offset;
            let mut left = ch.len;
            let mut raddr = ch.remote_addr;
            let mut base = 0usize;
            for v in &iov {
                let vl = v.len() as usize;
                if left == 0 {
                    break;
                }
                if lo >= base + vl {
                    base += vl;
                    continue;
                }
                let off = lo - base;
                let n = (vl - off).min(left);
                pieces.push(ReadPiece { read_id, kind: PieceKind::RndvRead, local: sub_iov(v, off, n), raddr, rkey: ch.rkey });
                lo += n;
                left -= n;
                raddr += n as u64;
                base += vl;
            }
        }
        if pieces.is_empty() {
            // Nothing to read (zero bytes wanted): done at once.
            net.reads.insert(read_id, ReadOp { d, peer: addr, msg_id, left: 0, err: None, pins });
            self.finish_read(read_id);
            return;
        }
        net.reads.insert(read_id, ReadOp { d, peer: addr, msg_id, left: pieces.len(), err: None, pins });
        if let Some(p) = net.peers.get_mut(&addr) {
            p.push_pieces(pieces);
        }
        net.mark(&addr);
    }

    /// A rendezvous receive's reads are all done.
    pub(super) fn finish_read(&mut self, read_id: u64) {
        let Some(net) = &mut self.net else { return };
        let Some(op) = net.reads.remove(&read_id) else { return };
        let d2 = self.matcher.read_finished(&op.d);
        self.complete_recv(&d2, &[], op.err);
        let Some(net) = &mut self.net else { return };
        if let Some(p) = net.peers.get_mut(&op.peer) {
            match op.err {
                None => p.push(Out::Fin { msg_id: op.msg_id, len: op.d.len as u64 }),
                Some(e) => p.push(Out::Nack { msg_id: op.msg_id, err: e.clamp(1, u16::MAX as i32) as u16 }),
            }
        }
        net.mark(&op.peer);
    }

    /// An EAGER message's payload, from `addr` (`src` in the AV): mostly for
    /// a receive posted ahead and waiting first in line; else matched.
    #[inline(always)]
    fn arrive_eager(&mut self, src: u64, addr: SocketAddr, env: Envelope, payload: &[u8]) {
        let kind = if env.tag.is_some() { Kind::Tagged } else { Kind::Msg };
        let (tag, data) = (env.tag.unwrap_or(0), env.data.map(u64::from));
        match self.matcher.take_head_with(kind, src, tag, data, payload.len()) {
            Some((d, Some(rec))) => self.complete_kept(&d, rec, &payload[..d.len]),
            Some((d, None)) => self.complete_recv(&d, &payload[..d.len], None),
            None => {
                self.spill_recvs();
                let a = self.matcher.arrive(Incoming { src, kind, tag, data, body: Body::Eager(payload), origin: Some(addr) });
                self.execute(a, Some(payload));
            }
        }
    }

    /// A bounce buffer received a message (or an RDMA write with data consumed it).
    pub(super) fn handle_recv(&mut self, conn_id: u32, addr: SocketAddr, idx: u32, wc: &Wc) {
        let net = self.net.as_mut().expect("checked");
        let stride = net.geo.stride;
        // The buffer: in the shared pool, or the connection's own.
        let place = match &net.rx {
            Some(p) => p.chunk_of(idx),
            None => net.conns.get(&conn_id).and_then(|c| c.res.as_ref()).and_then(|r| r.recv.clone()).map(|b| (b, idx as usize * stride)),
        };
        let Some((buf, off)) = place else { return };
        let imm = wc.opcode() == wc_opcode::RECV_RDMA_WITH_IMM;
        let n = (wc.byte_len() as usize).min(stride);
        // One lookup of the peer: its cached fi_addr, and the credits the header carries.
        let mut peer = net.peers.get_mut(&addr);
        let src = match (self.av.as_ref(), peer.as_mut()) {
            (Some(av), Some(p)) => av.reverse_cached(&addr, &mut p.src_cache),
            (Some(av), None) => av.reverse(&addr),
            (None, _) => FI_ADDR_NOTAVAIL,
        };
        // A valid EAGER message (most arrivals) is read in place; anything
        // else (other ops, and what is malformed) goes through `decode`.
        let view = if imm { None } else { proto::eager_view(buf.slice(off, n)) };
        let decoded = if imm || view.is_some() { None } else { Some(proto::decode(buf.slice(off, n))) };
        let mut recalled = false;
        if let Some(f) = peer.and_then(|p| p.flow.as_mut()) {
            match (&view, &decoded) {
                (Some(v), _) => f.granted(v.credits),
                (None, Some(Ok(msg))) => {
                    f.granted(msg.credits());
                    if let Message::Credit { recall: Some(t), .. } = msg {
                        tracing::debug!("rdm: {addr} recalls its credits down to {t}");
                        f.recalled(*t);
                        recalled = true;
                    }
                }
                _ => {}
            }
        }
        if recalled {
            // Answered by this pass's drain. Nothing else lists a peer that
            // has nothing queued (an idle one, typically: the one holding
            // the credits the recall wants back), and the buffer's own
            // listing waits for its repost (`flush_reposts`), which lists
            // only a peer owed a CREDIT: without this the answer waited for
            // the peer's next message, and the recalling side fed its
            // starving peers after a second instead.
            net.mark(&addr);
        }
        // What the message hands back (a recall's answer), counted with its arrival.
        let mut release = 0u16;
        // Data (anything but a CREDIT, RDMA writes with data included): the
        // peer is not idle (`Bank::heard`).
        let data = !matches!(decoded, Some(Ok(Message::Credit { .. })));
        if imm {
            // fi_writedata from the peer: the data is in place; report its CQ data
            // and (fi_cq(3) of 2.x) how many bytes the write placed. A write split
            // into pieces (longer than the device's largest message) reports its
            // last piece's length: the one that carries the data.
            self.rx_completion(Completion {
                op_context: 0,
                flags: FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA,
                len: wc.byte_len() as usize,
                buf: 0,
                data: wc.imm_data().unwrap_or(0) as u64,
                tag: 0,
                src,
            });
        } else if let Some(v) = view {
            self.arrive_eager(src, addr, v.env, v.payload);
        } else if let Some(decoded) = decoded {
            match decoded {
                Err(e) => tracing::warn!("rdm: dropping a malformed message from {addr}: {e}"),
                Ok(msg) => {
                    let net = self.net.as_mut().expect("checked");
                    match msg {
                        Message::Eager { env, payload, .. } => self.arrive_eager(src, addr, env, payload),
                        Message::Rts { .. } => {
                            let mut inc = Incoming::from_message(src, Some(addr), msg).expect("a data message");
                            if let Body::Rndv(r) = &mut inc.body {
                                let lid = net.next_lid;
                                net.next_lid += 1;
                                net.rndv_in.insert(lid, (addr, r.msg_id));
                                r.msg_id = lid;
                            }
                            self.spill_recvs();
                            let a = self.matcher.arrive(inc);
                            self.execute(a, None);
                        }
                        Message::Fin { msg_id, .. } => self.rndv_send_done(addr, msg_id, None),
                        Message::Nack { msg_id, err, .. } => self.rndv_send_done(addr, msg_id, Some(err as i32)),
                        Message::Credit { release: r, .. } => {
                            if r > 0 {
                                tracing::debug!("rdm: {addr} released {r} credits");
                            }
                            release = r
                        }
                    }
                }
            }
        }
        let Some(net) = self.net.as_mut() else { return };
        // The bytes are out of the buffer: repost it; the bank decides who gets the credit.
        let mut post_failed = false;
        let reposted = match &mut net.rx {
            Some(pool) => {
                // Posted again and counted in the bank (`recycled`) with
                // others, by a later progress pass (`flush_reposts`), after
                // the application has its completion: off the path of a
                // reply it sends at once. Until then the bank sees the
                // message as still on its way.
                let batch = REPOST_BATCH.min(pool.buffers() / 8).max(1);
                net.repost.push((idx, addr, release, data));
                if net.repost.len() >= batch {
                    // The pass that called us drains after its poll.
                    self.flush_reposts();
                }
                return;
            }
            None => match net.conns.get(&conn_id).and_then(|c| c.id.qp()) {
                Some(qp) => match qp.post_recv(wr_id(WrKind::Recv, conn_id, idx), &[buf.iov(off, stride)]) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!("rdm: reposting a receive buffer failed: {}", ioerr(e));
                        post_failed = true;
                        false
                    }
                },
                None => false,
            },
        };
        let arrival = match net.bank_mut(&addr) {
            Some(b) if reposted => b.recycled(&addr, release),
            Some(b) => b.arrived(&addr, release),
            None => Arrival::Ok,
        };
        net.mark(&addr);
        check_arrival(&addr, arrival);
        if post_failed {
            self.conn_failed(conn_id, FI_EIO);
        }
    }
}
