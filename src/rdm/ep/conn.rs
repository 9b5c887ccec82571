//! Connections: rdma-cm events, the HELLO handshake, accepting and refusing requests, connection set-up and teardown, the receive buffers promised to each peer, and the graves of failed connections' QPs.

use super::*;

/// Once per connection, when the peer takes shorter EAGER messages than we send.
pub(super) fn log_eager_limit(addr: &SocketAddr, theirs: u32, ours: usize) {
    tracing::info!(
        "rdm: {addr} receives EAGER messages of at most {theirs} bytes (ours: {ours}); longer messages to it go by rendezvous"
    );
}

/// Lists the peer at `addr` for the next drain (`Net::pending`), once.
pub(super) fn mark_in(peers: &mut HintMap<SocketAddr, Peer>, pending: &mut Vec<SocketAddr>, addr: &SocketAddr) {
    if let Some(p) = peers.get_mut(addr) {
        if !p.pending {
            p.pending = true;
            pending.push(*addr);
        }
    }
}

impl Net {
    /// A connection is being set up (it needs rdma-cm events read on every call).
    pub(super) fn any_settling(&self) -> bool {
        self.conns.values().any(|c| c.stage != Stage::Up)
    }

    /// Lists the peer at `addr` for the next drain (`pending`).
    pub(super) fn mark(&mut self, addr: &SocketAddr) {
        mark_in(&mut self.peers, &mut self.pending, addr);
    }

    /// The peer at `addr`, connecting to it if there is none yet.
    pub(super) fn peer_or_connect(&mut self, addr: SocketAddr) -> FiResult<&mut Peer> {
        // One lookup for a known peer (every send).
        if self.peers.contains_key(&addr) {
            return Ok(self.peers.get_mut(&addr).expect("just found"));
        }
        let conn_id = self.dial(addr)?;
        let mut p = Peer::new(addr);
        p.send_conn = Some(conn_id);
        p.conns.push(conn_id);
        p.dial_since = crate::sys::coarse_ms().max(1);
        p.dials = 1;
        Ok(self.peers.get_or_insert_with(addr, || p))
    }

    /// Starts a connection to `addr` (address resolution; the events do the
    /// rest): its id.
    pub(super) fn dial(&mut self, addr: SocketAddr) -> FiResult<u32> {
        // The id the table gives the connection once it is in (below).
        let conn_id = self.conns.next_id();
        let id = CmId::new_sync().map_err(FiError::from_errno)?;
        id.set_token(conn_id as u64);
        if let Err(e) = id.migrate(&self.channel) {
            return crate::fail!(FiError::from_errno(e), "rdm: rdma_migrate_id failed: {}", ioerr(e));
        }
        let src = SocketAddr::new(self.local.ip(), 0);
        if let Err(e) = id.resolve_addr(Some(&src), &addr, RESOLVE_MS) {
            return crate::fail!(FiError::from_errno(e), "rdm: cannot resolve {addr}: {}", ioerr(e));
        }
        tracing::debug!("rdm: connecting to {addr} (conn {conn_id})");
        let got = self.conns.insert_new(Conn { id, peer: addr, active: true, stage: Stage::Resolving, res: None });
        debug_assert_eq!(got, conn_id);
        self.settling = true;
        Ok(conn_id)
    }

    /// A first connection of ours to the peer was refused with no reason of
    /// an rsverbs endpoint (nobody listens at its address: its process is
    /// still starting): if it is within `retry_ms` of the first attempt, the
    /// refused connection is dropped, the peer and its queue stay, and
    /// another attempt is due after a backoff (20 ms doubling to 500 ms).
    /// False: give up (the caller fails the peer).
    pub(super) fn try_redial(&mut self, conn_id: u32, retry_ms: u64) -> bool {
        let Some(addr) = self.conns.get(&conn_id).filter(|c| c.active).map(|c| c.peer) else { return false };
        let now = crate::sys::coarse_ms();
        let Some(p) = self.peers.get(&addr) else { return false };
        if p.send_conn != Some(conn_id) || p.dial_since == 0 || now.saturating_sub(p.dial_since) >= retry_ms {
            return false;
        }
        let backoff = (20u64 << p.dials.min(5)).min(500);
        tracing::info!(
            "rdm: {addr} refused the connection (nobody listening yet?); trying again in {backoff} ms (attempt {}, for up to {retry_ms} ms)",
            p.dials + 1
        );
        self.drop_conn(conn_id);
        self.redial.push((addr, now + backoff));
        true
    }

    /// Sets the endpoint's timer for the next `redial` that is due (or
    /// disarms it), so that a waiter sleeping on the endpoint's fd wakes for it.
    pub(super) fn arm_timer(&mut self) {
        let next = self.redial.iter().map(|(_, due)| *due).min();
        let r = match next {
            Some(due) => {
                self.timer_armed = true;
                self.timer.set_ms(due.saturating_sub(crate::sys::coarse_ms()).max(1))
            }
            None if self.timer_armed => {
                self.timer_armed = false;
                self.timer.set_ms(0)
            }
            None => Ok(()),
        };
        if let Err(e) = r {
            tracing::warn!("rdm: timerfd_settime failed: {}", ioerr(e));
        }
    }

    /// Creates a connection's QP (attached to the shared receive queue, or
    /// with its own receive buffers, posted here).
    pub(super) fn setup_qp(&mut self, conn_id: u32) -> FiResult<()> {
        let geo = self.geo;
        let shared = self.rx.is_some();
        let need = self.cq_need + geo.cqes(shared);
        if need > self.cq.capacity().max(0) as usize {
            if let Err(e) = self.cq.resize(need as i32) {
                return crate::fail!(FiError::NOSPC, "rdm: cannot grow the internal CQ to {need} entries: {}", ioerr(e));
            }
        }
        let recv = if shared {
            None
        } else {
            match RegBuf::new(&self.pd, geo.peer_bufs * geo.stride, access::LOCAL_WRITE) {
                Ok(b) => Some(Arc::new(b)),
                Err(e) => return crate::fail!(FiError::from_errno(e), "rdm: cannot register receive buffers: {}", ioerr(e)),
            }
        };
        let Some(conn) = self.conns.get_mut(&conn_id) else {
            return crate::fail!(FiError::IO, "rdm: connection {conn_id} vanished");
        };
        let caps = QpCaps {
            max_send_wr: (geo.nslots + WR_OPS + UNSIG_MAX) as u32,
            max_recv_wr: geo.peer_bufs as u32,
            max_send_sge: geo.send_sge,
            max_recv_sge: 1,
            max_inline: geo.inline_req,
        };
        let mut keep: Vec<Arc<dyn Send + Sync>> = vec![self.cq.clone(), self.send.buf.clone()];
        if let Some(r) = &recv {
            keep.push(r.clone());
        }
        if let Some(p) = &self.rx {
            keep.extend(p.keep());
        }
        let srq = self.rx.as_ref().map(|p| &*p.srq);
        let qp = match conn.id.create_qp(&self.pd, &self.cq, &self.cq, srq, caps, keep) {
            Ok(q) => q,
            Err(e) => return crate::fail!(FiError::from_errno(e), "rdm: rdma_create_qp failed: {}", ioerr(e)),
        };
        if let Some(r) = &recv {
            for i in 0..geo.peer_bufs {
                if let Err(e) = qp.post_recv(wr_id(WrKind::Recv, conn_id, i as u32), &[r.iov(i * geo.stride, geo.stride)]) {
                    return crate::fail!(FiError::from_errno(e), "rdm: posting receive buffers failed: {}", ioerr(e));
                }
            }
        }
        let qp_num = qp.qp_num();
        conn.res = Some(QpRes {
            recv,
            wr_ops: HashMap::default(),
            free_wrs: (0..WR_OPS as u32).rev().collect(),
            reads_out: 0,
            max_inline: qp.caps.max_inline as usize,
            qp_num,
            unsig: Unsignaled::default(),
        });
        self.qpn.insert(qp_num, conn_id);
        self.cq_need = need;
        Ok(())
    }

    /// The credit bank that holds `addr`'s share: the shared pool's, or the peer's own.
    pub(super) fn bank_mut(&mut self, addr: &SocketAddr) -> Option<&mut Bank<SocketAddr>> {
        match &mut self.rx {
            Some(p) => Some(&mut p.bank),
            None => self.peers.get_mut(addr).and_then(|p| p.rx_bank.as_mut()),
        }
    }

    /// Makes room for one more peer in the shared pool (growing it when the
    /// floors of all peers would not fit). Returns false if it cannot.
    pub(super) fn pool_room(&mut self) -> bool {
        let Some(p) = &mut self.rx else { return true };
        let n = p.bank.shortfall();
        if n == 0 {
            return true;
        }
        // Grow by a few floors at a time.
        self.grow_pool(n.max(8 * super::super::proto::MIN_CREDITS as u32), "for a new peer's floor", Grow::Quotas)
    }

    /// A pass that reads the clock (`now`): what is checked once per tick.
    #[inline(never)]
    pub(super) fn tick(&mut self, now: u64) {
        if now != self.cm_checked {
            self.check_starved(now);
        }
        self.cm_checked = now;
    }

    /// A peer stuck without credits for STARVE_MS while the others hold the
    /// pool (and are not progressed to answer recalls): add buffers for it
    /// alone rather than wait on them. Checked once per coarse-clock tick.
    pub(super) fn check_starved(&mut self, now: u64) {
        const STARVE_MS: u64 = 1000;
        // Peers that sent nothing for an idle period (IDLE_MS to twice that)
        // are held to the floor, the others share the rest of the pool: with
        // many peers connected and few sending, those few keep enough
        // credits to stream (64 peers over the default pool: 5 each
        // otherwise).
        if now.saturating_sub(self.idle_swept) >= IDLE_MS {
            self.idle_swept = now;
            if let Some(p) = &mut self.rx {
                let n = p.bank.sweep_idle();
                if n > 0 {
                    tracing::debug!("rdm: {n} peer(s) idle for {IDLE_MS} ms, held to the floor: {}", p.bank.describe());
                }
            }
        }
        let need = self.rx.as_ref().map_or(0, |p| p.bank.stuck_need());
        if need == 0 {
            self.starved_since = None;
        } else {
            match self.starved_since {
                None => {
                    self.starved_since = Some(now);
                    if let Some(p) = &self.rx {
                        tracing::debug!("rdm: a peer is stuck without credits: {}", p.bank.describe());
                    }
                }
                Some(t) if now.saturating_sub(t) >= STARVE_MS => {
                    self.starved_since = None;
                    tracing::info!("rdm: a peer has had no credits for {STARVE_MS} ms while the others hold the pool");
                    self.grow_pool(need, "for peers stuck without credits", Grow::Stuck);
                }
                Some(_) => {}
            }
        }
        // A connection we make waits until a floor of credits is free to
        // grant (Bank::can_admit). When the other peers hold the pool and are
        // not progressed, the recalls that would free it are never answered:
        // after STARVE_MS, add the floors it needs, kept free for it.
        // A connection waiting for the pool is not up, so the endpoint is
        // settling: otherwise no walk over the connections (every tick).
        let waiting = if self.settling { self.conns.values().filter(|c| c.stage == Stage::WaitPool).count() as u32 } else { 0 };
        if waiting == 0 || self.can_connect() {
            self.pool_wait_since = None;
            return;
        }
        match self.pool_wait_since {
            None => self.pool_wait_since = Some(now),
            Some(t) if now.saturating_sub(t) >= STARVE_MS => {
                self.pool_wait_since = None;
                tracing::info!("rdm: {waiting} connection(s) waited {STARVE_MS} ms for free receive buffers");
                if let Some(p) = &self.rx {
                    tracing::debug!("rdm: the pool's books: {}", p.bank.describe());
                }
                self.grow_pool(waiting * super::super::proto::MIN_CREDITS as u32, "for connections waiting to start", Grow::Free);
            }
            Some(_) => {}
        }
    }

    /// Posts `n` more receive buffers to the shared pool (growing the
    /// internal CQ first: it must hold every posted buffer); `to`: who gets them.
    pub(super) fn grow_pool(&mut self, n: u32, why: &str, to: Grow) -> bool {
        let Some(p) = &mut self.rx else { return false };
        let need = self.cq_need + n as usize;
        if need > self.cq.capacity().max(0) as usize && self.cq.resize(need as i32).is_err() {
            tracing::warn!("rdm: cannot grow the internal CQ for {n} more receive buffers");
            return false;
        }
        let id = |i| wr_id(WrKind::Recv, 0, i);
        let r = match to {
            Grow::Quotas => p.grow(&self.pd, n, id),
            Grow::Stuck => p.grow_for_stuck(&self.pd, n, id),
            Grow::Free => p.grow_free(&self.pd, n, id),
        };
        match r {
            Ok(()) => {
                self.cq_need = need;
                tracing::info!("rdm: receive pool grown by {n} buffers to {} ({why}; {} peers)", p.buffers(), p.bank.peers());
                true
            }
            Err(e) => {
                tracing::warn!("rdm: cannot grow the receive pool by {n} buffers: {}", ioerr(e));
                false
            }
        }
    }

    /// Admits `addr` to its bank: the grant its HELLO gets.
    pub(super) fn admit(&mut self, addr: SocketAddr) -> u16 {
        if self.rx.is_none() {
            if let Some(p) = self.peers.get_mut(&addr) {
                if p.rx_bank.is_none() {
                    p.rx_bank = Some(Bank::single(self.geo.peer_bufs as u16));
                }
            }
        }
        self.bank_mut(&addr).map_or(0, |b| b.admit(addr))
    }

    /// Whether a connection we make may start now (a floor of credits is free to grant).
    pub(super) fn can_connect(&self) -> bool {
        self.rx.as_ref().is_none_or(|p| p.bank.can_admit())
    }

    /// Our HELLO (the connect request's and the accept's private data):
    /// `grant` credits; the connect request also names our listening
    /// address (`with_name`), the accept does not (the requester knows it).
    pub(super) fn hello(&self, grant: u16, with_name: bool) -> Vec<u8> {
        Hello {
            grant,
            max_credits: self.geo.peer_bufs as u16,
            incarnation: self.incarnation,
            max_eager: self.geo.eager_size.min(proto::MAX_EAGER) as u32,
            name: if with_name { self.name.clone() } else { Vec::new() },
        }
        .encode()
        .unwrap_or_default()
    }

    /// Registered memory, for the log (`FI_LOG_LEVEL=info`): what the
    /// endpoint holds and what each connection adds.
    pub(super) fn log_memory(&self, why: &str) {
        let per_conn = if self.rx.is_some() { 0 } else { self.geo.peer_bufs * self.geo.stride };
        let conns = self.conns.values().filter(|c| c.res.is_some()).count();
        let pool = self.rx.as_ref().map_or(0, |p| p.bytes());
        let own: usize = self.conns.values().filter_map(|c| c.res.as_ref()?.recv.as_ref()).map(|r| r.len()).sum();
        let total = pool + own + self.send.bytes();
        tracing::info!(
            "rdm: registered bytes ({why}): total={total} pool={pool} pool_bufs={} send={} per_conn={per_conn} conns={conns} peers={} mode={}",
            self.rx.as_ref().map_or(0, |p| p.buffers()),
            self.send.bytes(),
            self.peers.len(),
            if self.rx.is_some() { "srq" } else { "per-qp" }
        );
    }

    /// Forgets a connection without failing anything (tie-break loser). The
    /// peer keeps its share of the receive pool (the connection that wins
    /// carries the same grant).
    pub(super) fn drop_conn(&mut self, conn_id: u32) {
        if let Some(conn) = self.conns.remove(&conn_id) {
            if let Some(p) = self.peers.get_mut(&conn.peer) {
                p.conns.retain(|c| *c != conn_id);
                if p.send_conn == Some(conn_id) {
                    p.send_conn = None;
                    p.ready = false;
                }
            }
            self.bury(vec![(conn_id, conn)], 0);
        }
    }

    /// Keeps failed connections (QPs moved to the error state: they consume
    /// nothing more) until their last completions are surely polled.
    pub(super) fn bury(&mut self, conns: Vec<(u32, Conn)>, limbo: u32) {
        let shared = self.rx.is_some();
        for (_, c) in &conns {
            if let Some(qp) = c.id.qp() {
                let _ = qp.to_error();
            }
            if c.res.is_some() {
                self.cq_need = self.cq_need.saturating_sub(self.geo.cqes(shared));
            }
        }
        if conns.is_empty() && limbo == 0 {
            return;
        }
        let until = crate::sys::coarse_ms() + GRAVE_MS;
        self.graves.push(Grave { conns: conns.into_iter().collect(), limbo, until });
    }

    /// A shared receive buffer completed on the QP `qp_num` of a failed
    /// connection: it consumed one of the buffers promised to that peer.
    pub(super) fn grave_arrival(&mut self, qp_num: u32) {
        let conn = self.qpn.get(&qp_num).copied();
        let grave = conn.and_then(|c| self.graves.iter_mut().find(|g| g.conns.iter().any(|(id, _)| *id == c)));
        if let Some(p) = &mut self.rx {
            match grave {
                Some(g) if g.limbo > 0 => {
                    g.limbo -= 1;
                    p.bank.limbo_arrived();
                }
                // Nothing promised left (a misbehaving peer): counted against the free buffers.
                _ => p.bank.limbo_arrived(),
            }
        }
    }

    /// Destroys the QPs of graves whose time is up; frees their send slots
    /// and the receive buffers still in limbo.
    pub(super) fn expire_graves(&mut self, now: u64) {
        while let Some(i) = self.graves.iter().position(|g| g.until <= now) {
            let g = self.graves.swap_remove(i);
            for (id, c) in &g.conns {
                if let Some(u) = c.res.as_ref().map(|r| &r.unsig).filter(|u| u.failed > 0) {
                    tracing::warn!("rdm: {} unsignaled sends to {} failed with their connection", u.failed, c.peer);
                }
                if let Some(qp) = c.id.qp() {
                    if self.qpn.get(&qp.qp_num()) == Some(id) {
                        self.qpn.remove(&qp.qp_num());
                    }
                }
                self.send.release_conn(*id);
            }
            if let Some(p) = &mut self.rx {
                p.bank.release_limbo(g.limbo);
            }
            drop(g);
        }
    }
}

impl Inner {
    pub(super) fn cm_events(&mut self, ctx: &Ctx) -> bool {
        let mut any = false;
        loop {
            let Some(net) = &self.net else { return any };
            let ev = match net.channel.get_event() {
                Ok(Some(ev)) => ev,
                Ok(None) => return any,
                Err(e) => {
                    tracing::warn!("rdm: rdma_get_cm_event failed: {}", ioerr(e));
                    return any;
                }
            };
            any = true;
            self.cm_event(ctx, ev);
        }
    }

    pub(super) fn cm_event(&mut self, ctx: &Ctx, mut ev: CmEvent) {
        if ev.token == LISTEN_TOKEN {
            match ev.kind {
                CmEventKind::ConnectRequest => self.on_connect_request(ctx, &mut ev),
                k => tracing::debug!("rdm: listener event {k:?} ignored"),
            }
            return;
        }
        let conn_id = ev.token as u32;
        let Some(net) = &mut self.net else { return };
        let Some(conn) = net.conns.get_mut(&conn_id) else {
            tracing::debug!("rdm: {:?} for a closed connection ignored", ev.kind);
            return;
        };
        let addr = conn.peer;
        match ev.kind {
            CmEventKind::AddrResolved => {
                if let Err(e) = conn.id.resolve_route(RESOLVE_MS) {
                    tracing::warn!("rdm: cannot resolve a route to {addr}: {}", ioerr(e));
                    self.conn_failed(conn_id, FI_EHOSTUNREACH);
                }
            }
            CmEventKind::RouteResolved => {
                let dev_ok = conn.id.device().is_some_and(|d| Arc::ptr_eq(&d, &net.pd.context().clone()));
                if !dev_ok {
                    tracing::warn!("rdm: the route to {addr} is not on the endpoint's device");
                    self.conn_failed(conn_id, FI_EHOSTUNREACH);
                    return;
                }
                self.start_connect(ctx, conn_id);
            }
            CmEventKind::Established => {
                conn.stage = Stage::Up;
                // Credits keep the RDM protocol clear of RNR; should a peer that
                // ignores them cause one anyway, the retry is 0.64 ms, not 655.
                if let Some(qp) = conn.id.qp() {
                    crate::ep::set_rnr_timer(qp, "rdm");
                }
                let active = conn.active;
                let Some(peer) = net.peers.get_mut(&addr) else { return };
                if peer.send_conn != Some(conn_id) {
                    // The receiving half of a connection to ourselves.
                    return;
                }
                if active {
                    match Hello::decode(&ev.private_data) {
                        Ok(h) => {
                            peer.flow = Some(PeerFlow::new(h.grant, h.max_credits));
                            peer.incarnation = h.incarnation;
                            if peer.learn_eager_limit(net.geo.eager_size, h.max_eager) {
                                log_eager_limit(&addr, h.max_eager, net.geo.eager_size);
                            }
                        }
                        Err(e) => {
                            tracing::warn!("rdm: {addr} accepted with a bad HELLO: {e}");
                            self.conn_failed(conn_id, FI_ECONNREFUSED);
                            return;
                        }
                    }
                }
                peer.ready = true;
                peer.dial_since = 0;
                peer.release_pre();
                tracing::debug!("rdm: connected to {addr} (conn {conn_id})");
                net.log_memory("connected");
            }
            CmEventKind::Rejected => {
                let reason = reject_reason(&ev.private_data);
                if reason == Some(REJECT_TIE_BREAK) {
                    // The peer connects to us instead; our queue waits for its request.
                    tracing::debug!("rdm: {addr} keeps its own connection (tie-break)");
                    net.drop_conn(conn_id);
                } else if reason.is_none() && net.try_redial(conn_id, ctx.cfg.connect_retry_ms) {
                    // Nobody listens yet: tried again shortly (`redial_due`).
                } else {
                    tracing::info!("rdm: {addr} refused the connection (status {}, reason {reason:?})", ev.status);
                    self.conn_failed(conn_id, FI_ECONNREFUSED);
                }
            }
            CmEventKind::Unreachable if net.try_redial(conn_id, ctx.cfg.connect_retry_ms) => {}
            CmEventKind::Unreachable | CmEventKind::AddrError | CmEventKind::RouteError => {
                tracing::info!("rdm: {addr} unreachable ({:?}, status {})", ev.kind, ev.status);
                self.conn_failed(conn_id, FI_EHOSTUNREACH);
            }
            CmEventKind::ConnectError => {
                tracing::info!("rdm: connection to {addr} failed (status {})", ev.status);
                self.conn_failed(conn_id, FI_ECONNABORTED);
            }
            CmEventKind::Disconnected if ctx.cfg.lose_disconnect => {
                tracing::warn!("rdm: ignoring DISCONNECTED from {addr} (conn {conn_id}): {FAULT_LOSE_DISCONNECT_ENV}");
            }
            CmEventKind::Disconnected | CmEventKind::DeviceRemoval => {
                // Take what already arrived before tearing the connection down.
                self.poll_cq();
                tracing::debug!("rdm: {addr} disconnected (conn {conn_id})");
                self.conn_failed(conn_id, FI_ECONNABORTED);
            }
            k => tracing::debug!("rdm: connection event {k:?} ignored"),
        }
    }

    pub(super) fn on_connect_request(&mut self, ctx: &Ctx, ev: &mut CmEvent) {
        let Some(id) = ev.new_id.take() else { return };
        let Some(net) = &mut self.net else { return };
        let hello = match Hello::decode(&ev.private_data) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("rdm: refusing a connection with a bad HELLO: {e}");
                let _ = id.reject(&reject_data(REJECT_BAD_HELLO));
                return;
            }
        };
        let Some(peer_addr) = sys::sockaddr_parse(&hello.name) else {
            tracing::warn!("rdm: refusing a connection whose HELLO names no address");
            let _ = id.reject(&reject_data(REJECT_BAD_HELLO));
            return;
        };
        if !id.device().is_some_and(|d| Arc::ptr_eq(&d, net.pd.context())) {
            tracing::warn!("rdm: refusing a connection from {peer_addr} on another device");
            let _ = id.reject(&reject_data(REJECT_BAD_HELLO));
            return;
        }
        if let Some(old) = net.peers.get(&peer_addr).filter(|p| restarted(p.incarnation, hello.incarnation, &net.local, &peer_addr)) {
            // The peer's process is new, its old one gone without a
            // disconnect reaching us (a lost DREQ: crash, partition). What
            // was owed to the old one fails; the new one is a new peer.
            tracing::warn!(
                "rdm: {peer_addr} restarted (incarnation {:#x}, was {:#x}): failing its old connection",
                hello.incarnation,
                old.incarnation
            );
            if let Some(c) = old.conns.first().copied() {
                self.conn_failed(c, FI_ECONNRESET);
            }
        }
        let Some(net) = &mut self.net else { return };
        let own = match net.peers.get(&peer_addr).and_then(|p| p.send_conn).and_then(|c| net.conns.get(&c)) {
            None => OwnConn::None,
            Some(c) if c.active && c.stage == Stage::Up => OwnConn::ActiveUp,
            Some(c) if c.active => OwnConn::ActivePending,
            Some(_) => OwnConn::Passive,
        };
        let decision = decide_request(&net.local, &peer_addr, own);
        tracing::debug!("rdm: connect request from {peer_addr}: {decision:?}");
        match decision {
            ReqDecision::RejectTieBreak => {
                let _ = id.reject(&reject_data(REJECT_TIE_BREAK));
                return;
            }
            ReqDecision::RejectDuplicate => {
                let _ = id.reject(&reject_data(REJECT_DUPLICATE));
                return;
            }
            ReqDecision::AcceptReplacing => {
                if let Some(old) = net.peers.get(&peer_addr).and_then(|p| p.send_conn) {
                    net.drop_conn(old);
                }
            }
            ReqDecision::Accept | ReqDecision::AcceptSelf => {}
        }
        let known = net.bank_mut(&peer_addr).is_some_and(|b| b.contains(&peer_addr));
        if !known && !net.pool_room() {
            tracing::warn!("rdm: refusing a connection from {peer_addr}: no receive buffers for one more peer");
            let _ = id.reject(&reject_data(REJECT_NO_BUFFERS));
            return;
        }
        id.set_token(net.conns.next_id() as u64);
        let conn_id = net.conns.insert_new(Conn { id, peer: peer_addr, active: false, stage: Stage::Connecting, res: None });
        net.settling = true;
        if net.setup_qp(conn_id).is_err() {
            if let Some(c) = net.conns.remove(&conn_id) {
                net.bury(vec![(conn_id, c)], 0);
            }
            return;
        }
        let peer = net.peers.get_or_insert_with(peer_addr, || Peer::new(peer_addr));
        peer.conns.push(conn_id);
        if decision != ReqDecision::AcceptSelf {
            peer.send_conn = Some(conn_id);
            peer.ready = false;
            peer.flow = Some(PeerFlow::new(hello.grant, hello.max_credits));
            peer.incarnation = hello.incarnation;
            if peer.learn_eager_limit(net.geo.eager_size, hello.max_eager) {
                log_eager_limit(&peer_addr, hello.max_eager, net.geo.eager_size);
            }
        }
        // Our grant: its quota, or what the pool has free (possibly 0: the
        // rest follows in CREDITs; the peer's HELLO gave us credits to send them with).
        let grant = net.admit(peer_addr);
        let (init, resp) = ctx.max_rd_atom;
        let accept_hello = net.hello(grant, false);
        let p = ConnParam {
            private_data: &accept_hello,
            responder_resources: (ev.initiator_depth as i32).min(resp).clamp(0, 255) as u8,
            initiator_depth: (ev.responder_resources as i32).min(init).clamp(0, 255) as u8,
            retry_count: crate::verbs::cm::RC_RETRY_COUNT,
            rnr_retry_count: crate::verbs::cm::RNR_RETRY_FOREVER,
        };
        let conn = net.conns.get(&conn_id).expect("inserted");
        if let Err(e) = conn.id.accept(&p) {
            tracing::warn!("rdm: rdma_accept for {peer_addr} failed: {}", ioerr(e));
            self.conn_failed(conn_id, FI_ECONNABORTED);
            return;
        }
        net.log_memory("accepted");
    }

    /// Makes the `redial` attempts that are due: a new connection for each
    /// peer still waiting (one that connected to us meanwhile, or was
    /// forgotten, needs none).
    pub(super) fn redial_due(&mut self, now: u64) {
        let Some(net) = &mut self.net else { return };
        if !net.redial.iter().any(|(_, due)| *due <= now) {
            return;
        }
        let (due, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut net.redial).into_iter().partition(|(_, d)| *d <= now);
        net.redial = wait;
        for (addr, _) in due {
            let Some(net) = &mut self.net else { return };
            if net.peers.get(&addr).is_none_or(|p| p.send_conn.is_some()) {
                continue;
            }
            match net.dial(addr) {
                Ok(conn_id) => {
                    let p = net.peers.get_mut(&addr).expect("checked");
                    p.send_conn = Some(conn_id);
                    p.conns.push(conn_id);
                    p.dials += 1;
                    net.dirty = true;
                }
                Err(e) => self.fail_peer(addr, e.0),
            }
        }
    }

    /// Fails a peer that has no connection (a retry could not start):
    /// everything queued for it completes with `err`, and it is forgotten.
    pub(super) fn fail_peer(&mut self, addr: SocketAddr, err: i32) {
        let Some(net) = &mut self.net else { return };
        net.dirty = true;
        let limbo = net.rx.as_mut().map_or(0, |p| p.bank.retire(&addr));
        net.bury(Vec::new(), limbo);
        let mut done = Vec::new();
        let mut reads = Vec::new();
        take_peer(net, addr, err, &mut done, &mut reads);
        for (d, e) in done {
            self.tx_done(d, e);
        }
        for r in reads {
            self.piece_done(r, Some(err));
        }
    }

    /// Connects an active connection whose route is resolved, once the
    /// receive pool can give the peer its floor of credits (else it waits,
    /// stage WaitPool, and progress retries).
    pub(super) fn start_connect(&mut self, ctx: &Ctx, conn_id: u32) {
        let Some(net) = &mut self.net else { return };
        let Some(addr) = net.conns.get(&conn_id).map(|c| c.peer) else { return };
        let known = net.bank_mut(&addr).is_some_and(|b| b.contains(&addr));
        if !known {
            if !net.pool_room() {
                self.conn_failed(conn_id, FI_ENOSPC);
                return;
            }
            if !net.can_connect() {
                if let Some(c) = net.conns.get_mut(&conn_id) {
                    if c.stage != Stage::WaitPool {
                        tracing::debug!("rdm: connection to {addr} waits for free receive buffers");
                    }
                    c.stage = Stage::WaitPool;
                }
                return;
            }
        }
        if let Err(e) = net.setup_qp(conn_id) {
            // The real cause (e.g. FI_ENOMEM: the bounce buffers cannot be pinned).
            self.conn_failed(conn_id, e.0);
            return;
        }
        let grant = net.admit(addr);
        // Talking to ourselves: the passive half never sends, so it gets
        // nothing; our share's grant goes to the active half in our accept.
        let hello = net.hello(if addr == net.local { 0 } else { grant }, true);
        let (init, resp) = ctx.max_rd_atom;
        let p = ConnParam {
            private_data: &hello,
            responder_resources: resp.clamp(0, 255) as u8,
            initiator_depth: init.clamp(0, 255) as u8,
            retry_count: crate::verbs::cm::RC_RETRY_COUNT,
            rnr_retry_count: crate::verbs::cm::RNR_RETRY_FOREVER,
        };
        let conn = net.conns.get_mut(&conn_id).expect("present");
        conn.stage = Stage::Connecting;
        if let Err(e) = conn.id.connect(&p) {
            tracing::warn!("rdm: rdma_connect to {addr} failed: {}", ioerr(e));
            self.conn_failed(conn_id, FI_ECONNREFUSED);
        }
    }

    /// A connection broke (or could not be made): its peer's outstanding and
    /// queued operations complete with `err`, and the peer is forgotten (the
    /// next operation to it connects again).
    pub(super) fn conn_failed(&mut self, conn_id: u32, err: i32) {
        self.flush_reposts();
        let Some(net) = &mut self.net else { return };
        // The bank rebalances for the peers left: walk them all next pass.
        net.dirty = true;
        let Some(conn) = net.conns.get(&conn_id) else { return };
        let addr = conn.peer;
        let is_peer_conn = net.peers.get(&addr).is_some_and(|p| p.conns.contains(&conn_id));
        let mut done: Vec<(TxDone, Option<i32>)> = Vec::new();
        let mut reads: Vec<u64> = Vec::new();
        let conn_ids: Vec<u32> = if is_peer_conn { net.peers[&addr].conns.clone() } else { vec![conn_id] };
        let mut dead = Vec::new();
        for c in &conn_ids {
            if let Some(mut conn) = net.conns.remove(c) {
                if conn.stage == Stage::Up {
                    let _ = conn.id.disconnect();
                }
                for d in net.send.fail_conn(*c) {
                    done.push((d, Some(err)));
                }
                if let Some(res) = conn.res.as_mut() {
                    for (_, op) in res.wr_ops.drain() {
                        match op {
                            WrOp::Read(r) => reads.push(r),
                            WrOp::Rma(d) => done.push((d, Some(err))),
                        }
                    }
                }
                dead.push((*c, conn));
            }
        }
        // The receive buffers promised to the peer wait until its QPs surely consume nothing more.
        let limbo = match (&mut net.rx, is_peer_conn) {
            (Some(p), true) => p.bank.retire(&addr),
            _ => 0,
        };
        net.bury(dead, limbo);
        if is_peer_conn {
            take_peer(net, addr, err, &mut done, &mut reads);
        }
        for (d, e) in done {
            self.tx_done(d, e);
        }
        for r in reads {
            self.piece_done(r, Some(err));
        }
    }
}

/// Forgets the peer at `addr`: what was queued or outstanding for it goes to
/// `done` (to complete with `err`) and `reads` (pieces to fail).
fn take_peer(net: &mut Net, addr: SocketAddr, err: i32, done: &mut Vec<(TxDone, Option<i32>)>, reads: &mut Vec<u64>) {
    let Some(mut peer) = net.peers.remove(&addr) else { return };
    tracing::info!("rdm: lost the connection to {addr}; failing its operations ({err})");
    let mut outs: Vec<Out> = peer.pre.drain(..).collect();
    if let Some(f) = peer.flow.as_mut() {
        outs.extend(f.take_queue());
    }
    for o in outs {
        match o {
            Out::Eager { done: d, .. } | Out::WriteData { done: d, .. } => done.push((d, Some(err))),
            Out::Rts { .. } | Out::Fin { .. } | Out::Nack { .. } => {}
        }
    }
    for op in peer.rma.drain(..) {
        done.push((op.done(), Some(err)));
    }
    for p in peer.reads.drain(..) {
        reads.push(p.read_id);
    }
    let keys: Vec<(SocketAddr, u64)> = net.rndv_sends.keys().filter(|(a, _)| *a == addr).copied().collect();
    for k in keys {
        if let Some(s) = net.rndv_sends.remove(&k) {
            done.push((s.done, Some(err)));
        }
    }
}
