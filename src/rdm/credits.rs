//! Per-peer credit flow control: a sender never sends a message (EAGER, RTS,
//! FIN, NACK or CREDIT) unless the receiver has a receive buffer posted for it,
//! so receiver-not-ready never happens.
//!
//! Allocation policy: every endpoint dedicates `bufs_per_peer` receive buffers
//! to each peer (the receive queue of that peer's RC QP; with a shared receive
//! queue, reserve `peers × bufs_per_peer` buffers — a static share per peer,
//! since a credit is a promise). The peer learns this number when the
//! connection is set up, and starts with that many credits.
//!
//! Accounting, for one direction (we send to the peer):
//! * `credits`: buffers the peer has posted for us that we have not yet used.
//!   Each message we send consumes one.
//! * The peer reposts a buffer once it has taken the message out of it, and
//!   counts it as *owed* to us; it returns owed credits in the `credits` field
//!   of every header it sends us (piggybacking), or in a standalone CREDIT
//!   message when `owed >= return_threshold`.
//!
//! So, per direction, `credits + in flight + not yet reposted + owed + granted
//! but not yet received == bufs_per_peer` at all times.
//!
//! Deadlock freedom rests on two rules:
//! * The last credit is reserved for CREDIT messages: data messages (EAGER,
//!   RTS, FIN, NACK) need two credits, CREDIT needs one. So an endpoint can
//!   always return what it owes, even when its own sends are stalled.
//! * `2 <= return_threshold <= bufs_per_peer - 1`. When a sender is stuck (at
//!   most its reserve credit left, nothing in flight, everything reposted) the
//!   peer owes it at least `bufs_per_peer - 1 >= threshold`, so the peer sends
//!   a CREDIT. And a CREDIT carries at least `threshold >= 2` credits while it
//!   costs the receiver of it only one owed buffer to answer, so standalone
//!   CREDITs cannot bounce back and forth forever: with no traffic they die out.
//!
//! Messages leave in the order they were queued (one FIFO per peer); together
//! with RC's in-order delivery this keeps per-peer message order.

use std::collections::VecDeque;

use crate::error::{FiError, FiResult};

/// Smallest `bufs_per_peer` the rules above allow (threshold 2 <= bufs - 1).
pub const MIN_CREDITS: u16 = 3;
/// Default receive buffers per peer (`FI_RSVERBS_PEER_CREDITS`).
pub const DEFAULT_CREDITS: u16 = 32;

/// One endpoint's credit settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditConfig {
    /// Receive buffers this endpoint posts for each peer (= the peer's initial credits).
    pub bufs_per_peer: u16,
    /// Owed credits that trigger a standalone CREDIT message.
    pub return_threshold: u16,
}

impl CreditConfig {
    /// `bufs_per_peer` buffers, returned in a standalone CREDIT once half of them are owed.
    pub fn new(bufs_per_peer: u16) -> FiResult<CreditConfig> {
        CreditConfig::with_threshold(bufs_per_peer, (bufs_per_peer / 2).max(2))
    }

    pub fn with_threshold(bufs_per_peer: u16, return_threshold: u16) -> FiResult<CreditConfig> {
        if bufs_per_peer < MIN_CREDITS {
            return crate::fail!(FiError::INVAL, "rdm: {bufs_per_peer} receive buffers per peer, need at least {MIN_CREDITS}");
        }
        if return_threshold < 2 || return_threshold > bufs_per_peer - 1 {
            return crate::fail!(
                FiError::INVAL,
                "rdm: credit return threshold {return_threshold} outside 2..={} (bufs_per_peer - 1)",
                bufs_per_peer - 1
            );
        }
        Ok(CreditConfig { bufs_per_peer, return_threshold })
    }
}

impl Default for CreditConfig {
    fn default() -> Self {
        CreditConfig { bufs_per_peer: DEFAULT_CREDITS, return_threshold: DEFAULT_CREDITS / 2 }
    }
}

/// What to transmit next to the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing<M> {
    /// Send `msg` with `grant` in its header's credit field.
    Data { msg: M, grant: u16 },
    /// Send a standalone CREDIT message granting `grant`.
    Credit { grant: u16 },
}

/// Flow-control state for one peer, both directions: our sends to it (credits
/// and the queue of messages waiting for one) and our receive buffers for it
/// (what we owe it). `M` is the caller's description of a queued message.
#[derive(Debug)]
pub struct PeerFlow<M> {
    local: CreditConfig,
    /// The peer's buffers for us (our maximum credits).
    peer_bufs: u16,
    credits: u32,
    owed: u32,
    queue: VecDeque<M>,
}

impl<M> PeerFlow<M> {
    /// `local`: our settings; `peer_bufs`: the receive buffers the peer
    /// dedicates to us (its `bufs_per_peer`, learned at connection setup).
    pub fn new(local: CreditConfig, peer_bufs: u16) -> PeerFlow<M> {
        PeerFlow { local, peer_bufs, credits: peer_bufs as u32, owed: 0, queue: VecDeque::new() }
    }

    /// Queues a message for the peer. It leaves, in order, through `next_send`.
    pub fn push(&mut self, msg: M) {
        self.queue.push_back(msg);
    }

    /// The next thing to transmit, if flow control allows one now. Call it
    /// until None after `push`, `granted` and `reposted` (and only when the
    /// send queue has a free slot: what it returns is committed).
    pub fn next_send(&mut self) -> Option<Outgoing<M>> {
        if self.credits >= 2 {
            if let Some(msg) = self.queue.pop_front() {
                self.credits -= 1;
                return Some(Outgoing::Data { msg, grant: self.take_grant() });
            }
        }
        if self.owed >= self.local.return_threshold as u32 && self.credits >= 1 {
            self.credits -= 1;
            return Some(Outgoing::Credit { grant: self.take_grant() });
        }
        None
    }

    fn take_grant(&mut self) -> u16 {
        let g = self.owed.min(u16::MAX as u32);
        self.owed -= g;
        g as u16
    }

    /// The peer granted `n` credits (the credit field of a header it sent,
    /// valid or not for the rest of the message — but not of a message that
    /// failed to decode).
    pub fn granted(&mut self, n: u16) {
        let c = self.credits + n as u32;
        if c > self.peer_bufs as u32 {
            // A peer granting more than it has posted is broken; never trust it past its buffers.
            tracing::warn!("rdm: peer granted {n} credits, more than its {} buffers allow; capped", self.peer_bufs);
        }
        self.credits = c.min(self.peer_bufs as u32);
    }

    /// We reposted `n` receive buffers the peer's messages had used.
    pub fn reposted(&mut self, n: u32) {
        let o = self.owed + n;
        if o > self.local.bufs_per_peer as u32 {
            tracing::warn!("rdm: {o} credits owed to a peer with {} buffers: accounting error; capped", self.local.bufs_per_peer);
        }
        self.owed = o.min(self.local.bufs_per_peer as u32);
    }

    /// Credits available for sending to the peer.
    pub fn credits(&self) -> u32 {
        self.credits
    }

    /// Credits owed to the peer, not yet returned.
    pub fn owed(&self) -> u32 {
        self.owed
    }

    /// Messages waiting for a credit.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Empties the queue (peer removed, endpoint closing), oldest first.
    pub fn take_queue(&mut self) -> VecDeque<M> {
        std::mem::take(&mut self.queue)
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::tests::Rng;
    use super::*;

    fn cfg(n: u16, t: u16) -> CreditConfig {
        CreditConfig::with_threshold(n, t).unwrap()
    }

    #[test]
    fn config_validation() {
        assert_eq!(CreditConfig::new(32).unwrap(), CreditConfig { bufs_per_peer: 32, return_threshold: 16 });
        assert_eq!(CreditConfig::new(3).unwrap().return_threshold, 2);
        assert_eq!(CreditConfig::new(2), Err(FiError::INVAL));
        assert_eq!(CreditConfig::with_threshold(8, 1), Err(FiError::INVAL));
        assert_eq!(CreditConfig::with_threshold(8, 8), Err(FiError::INVAL));
        assert!(CreditConfig::with_threshold(8, 7).is_ok());
        assert_eq!(CreditConfig::default(), CreditConfig::new(DEFAULT_CREDITS).unwrap());
    }

    #[test]
    fn exhaustion_keeps_the_reserve_and_recovers_in_order() {
        let mut f: PeerFlow<u32> = PeerFlow::new(cfg(4, 2), 4);
        for i in 0..6 {
            f.push(i);
        }
        let mut sent = vec![];
        while let Some(o) = f.next_send() {
            match o {
                Outgoing::Data { msg, grant } => {
                    assert_eq!(grant, 0);
                    sent.push(msg)
                }
                other => panic!("{other:?}"),
            }
        }
        // 4 credits: 3 data messages, the last credit stays in reserve.
        assert_eq!(sent, vec![0, 1, 2]);
        assert_eq!((f.credits(), f.queued()), (1, 3));
        // The peer returns 2: two more leave, in order.
        f.granted(2);
        assert_eq!(f.next_send(), Some(Outgoing::Data { msg: 3, grant: 0 }));
        assert_eq!(f.next_send(), Some(Outgoing::Data { msg: 4, grant: 0 }));
        assert_eq!(f.next_send(), None);
        f.granted(3);
        assert_eq!(f.next_send(), Some(Outgoing::Data { msg: 5, grant: 0 }));
        assert_eq!((f.credits(), f.queued()), (3, 0));
        assert_eq!(f.next_send(), None);
    }

    #[test]
    fn owed_credits_piggyback_or_go_standalone() {
        let mut f: PeerFlow<&str> = PeerFlow::new(cfg(8, 3), 8);
        f.reposted(2);
        assert_eq!(f.next_send(), None, "2 owed, below the threshold of 3: wait for traffic");
        f.push("a");
        assert_eq!(f.next_send(), Some(Outgoing::Data { msg: "a", grant: 2 }), "piggybacked");
        assert_eq!(f.owed(), 0);
        f.reposted(3);
        assert_eq!(f.next_send(), Some(Outgoing::Credit { grant: 3 }), "threshold reached, no traffic");
        assert_eq!(f.next_send(), None);
        assert_eq!(f.credits(), 6);
    }

    #[test]
    fn the_reserved_credit_carries_a_credit_message() {
        let mut f: PeerFlow<u8> = PeerFlow::new(cfg(4, 2), 4);
        for i in 0..4 {
            f.push(i);
        }
        while f.next_send().is_some() {}
        assert_eq!(f.credits(), 1);
        // Stalled, but owing: the reserve returns the credits.
        f.reposted(2);
        assert_eq!(f.next_send(), Some(Outgoing::Credit { grant: 2 }));
        assert_eq!(f.credits(), 0);
        f.reposted(2);
        assert_eq!(f.next_send(), None, "nothing left to send even a CREDIT with");
        f.granted(2);
        // Data first (in order), carrying what is owed.
        assert_eq!(f.next_send(), Some(Outgoing::Data { msg: 3, grant: 2 }));
        assert_eq!(f.next_send(), None);
    }

    #[test]
    fn grants_are_capped_at_the_peers_buffers() {
        let mut f: PeerFlow<u8> = PeerFlow::new(cfg(4, 2), 5);
        f.granted(u16::MAX);
        assert_eq!(f.credits(), 5);
        f.reposted(100);
        assert_eq!(f.owed(), 4);
        f.push(1);
        f.push(2);
        assert_eq!(f.take_queue().into_iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(f.queued(), 0);
    }

    // ---- Two-peer simulation -------------------------------------------------

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum App {
        Eager(u64),
        Rts(u64),
        /// Answer to the peer's RTS with this sequence number.
        Fin(u64),
    }

    #[derive(Debug, Clone, Copy)]
    struct Wire {
        msg: Option<App>, // None: CREDIT
        grant: u16,
    }

    struct Side {
        flow: PeerFlow<App>,
        /// Our buffers for the peer: posted, and consumed but not yet reposted (ready time).
        bufs: u16,
        posted: u32,
        to_repost: Vec<u64>,
        next_seq: u64,
        /// Sequence number of the next application message expected from the peer.
        expect: u64,
        /// Our RTSs waiting for the peer's FIN.
        open_rts: Vec<u64>,
    }

    impl Side {
        fn new(local: CreditConfig, peer_bufs: u16) -> Side {
            Side {
                flow: PeerFlow::new(local, peer_bufs),
                bufs: local.bufs_per_peer,
                posted: local.bufs_per_peer as u32,
                to_repost: vec![],
                next_seq: 0,
                expect: 0,
                open_rts: vec![],
            }
        }
    }

    /// One run: two peers exchange `budget` application messages each way (a
    /// random mix of eager and rendezvous, the latter answered by a FIN through
    /// the same flow control), with random scheduling and random repost delays.
    /// Fails on a send without a posted buffer, a broken credit balance, an
    /// out-of-order or lost message, or a run that never quiesces.
    fn simulate(seed: u64, a: CreditConfig, b: CreditConfig, budget: u64) {
        let mut r = Rng::new(seed);
        let mut sides = [Side::new(a, b.bufs_per_peer), Side::new(b, a.bufs_per_peer)];
        let mut links: [VecDeque<Wire>; 2] = [VecDeque::new(), VecDeque::new()]; // links[i]: i -> 1-i
        let max_delay = 1 + r.below(60);
        let max_steps = 200_000 + budget * 400;
        let mut now = 0u64;
        let mut credit_msgs = 0u64;

        let transmit = |s: &mut Side, link: &mut VecDeque<Wire>, credit_msgs: &mut u64| -> bool {
            match s.flow.next_send() {
                Some(Outgoing::Data { msg, grant }) => {
                    link.push_back(Wire { msg: Some(msg), grant });
                    true
                }
                Some(Outgoing::Credit { grant }) => {
                    assert!(grant >= 2, "a CREDIT message returns at least the threshold (>= 2)");
                    *credit_msgs += 1;
                    link.push_back(Wire { msg: None, grant });
                    true
                }
                None => false,
            }
        };

        loop {
            now += 1;
            assert!(now < max_steps, "seed {seed}: no quiescence after {now} steps (deadlock or livelock)");
            let i = r.below(2) as usize;
            let j = 1 - i;
            match r.below(8) {
                // The application at i sends.
                0 | 1 if sides[i].next_seq < budget => {
                    let s = &mut sides[i];
                    let seq = s.next_seq;
                    s.next_seq += 1;
                    if r.chance(1, 3) {
                        s.open_rts.push(seq);
                        s.flow.push(App::Rts(seq));
                    } else {
                        s.flow.push(App::Eager(seq));
                    }
                }
                // i transmits what flow control allows (one message or all).
                2 | 3 => {
                    let all = r.chance(1, 2);
                    while transmit(&mut sides[i], &mut links[i], &mut credit_msgs) && all {}
                }
                // The message at the head of link i arrives at j (RC: in order).
                4 | 5 => {
                    if let Some(w) = links[i].pop_front() {
                        let sj = &mut sides[j];
                        assert!(sj.posted > 0, "seed {seed}: receiver not ready (message {w:?})");
                        sj.posted -= 1;
                        sj.to_repost.push(now + r.below(max_delay));
                        sj.flow.granted(w.grant);
                        match w.msg {
                            Some(App::Eager(seq)) | Some(App::Rts(seq)) => {
                                assert_eq!(seq, sj.expect, "seed {seed}: message order broken");
                                sj.expect += 1;
                                if let Some(App::Rts(_)) = w.msg {
                                    // The read happens; then the receiver answers with FIN.
                                    sj.flow.push(App::Fin(seq));
                                }
                            }
                            Some(App::Fin(seq)) => {
                                let k = sj.open_rts.iter().position(|&x| x == seq);
                                assert!(k.is_some(), "seed {seed}: FIN for unknown RTS {seq}");
                                sj.open_rts.remove(k.unwrap());
                            }
                            None => {}
                        }
                    }
                }
                // j reposts the buffers whose (random) processing delay has passed.
                _ => {
                    let s = &mut sides[j];
                    let before = s.to_repost.len();
                    s.to_repost.retain(|&t| t > now);
                    let n = (before - s.to_repost.len()) as u32;
                    s.posted += n;
                    s.flow.reposted(n);
                }
            }

            // Credit balance per direction i -> j.
            for i in 0..2 {
                let j = 1 - i;
                let grants_in_flight: u32 = links[j].iter().map(|w| w.grant as u32).sum();
                let total = sides[i].flow.credits()
                    + links[i].len() as u32
                    + sides[j].to_repost.len() as u32
                    + sides[j].flow.owed()
                    + grants_in_flight;
                assert_eq!(total, sides[j].bufs as u32, "seed {seed}: credits not conserved ({i}->{j})");
                assert_eq!(sides[j].posted + sides[j].to_repost.len() as u32, sides[j].bufs as u32);
            }

            // Done when everything is sent and the system is quiet: nothing on
            // the wire, nothing to repost, and flow control has nothing to send.
            if sides.iter().all(|s| s.next_seq == budget && s.to_repost.is_empty()) && links.iter().all(|l| l.is_empty()) {
                let mut progressed = false;
                for i in 0..2 {
                    progressed |= transmit(&mut sides[i], &mut links[i], &mut credit_msgs);
                }
                if !progressed {
                    break;
                }
            }
        }
        for (k, s) in sides.iter().enumerate() {
            assert_eq!(s.flow.queued(), 0, "seed {seed}: side {k} still has queued messages (deadlock)");
            assert!(s.open_rts.is_empty(), "seed {seed}: side {k} has RTSs never finished");
            assert_eq!(s.expect, budget, "seed {seed}: side {k} lost messages");
        }
        // Standalone CREDITs are bounded by the traffic (no ping-pong).
        assert!(credit_msgs <= 2 * budget * 2 + 4, "seed {seed}: {credit_msgs} CREDIT messages for {budget} messages each way");
    }

    #[test]
    fn sim_two_peers_never_overrun_deadlock_or_reorder() {
        let configs = [
            (cfg(3, 2), cfg(3, 2)),
            (cfg(4, 2), cfg(4, 3)),
            (cfg(4, 3), cfg(7, 2)),
            (cfg(5, 2), cfg(3, 2)),
            (cfg(8, 4), cfg(8, 4)),
            (cfg(8, 7), cfg(16, 15)),
            (CreditConfig::default(), cfg(3, 2)),
        ];
        let mut seed = 0;
        for (a, b) in configs {
            for _ in 0..40 {
                seed += 1;
                simulate(seed, a, b, 300);
            }
        }
    }

    #[test]
    fn sim_one_way_traffic_returns_credits_standalone() {
        // Only one side sends: its credits come back by CREDIT messages alone.
        for seed in 1000..1020 {
            let mut r = Rng::new(seed);
            let mut tx: PeerFlow<u64> = PeerFlow::new(cfg(4, 2), 4);
            let mut rx: PeerFlow<u64> = PeerFlow::new(cfg(4, 2), 4);
            let (mut posted, mut delivered, mut pending) = (4u32, 0u64, 0u32);
            let mut to_tx = VecDeque::new(); // rx -> tx link (CREDITs)
            let mut to_rx = VecDeque::new(); // tx -> rx link
            for i in 0..500 {
                tx.push(i);
            }
            let mut steps = 0;
            while delivered < 500 {
                steps += 1;
                assert!(steps < 100_000, "seed {seed}: stuck");
                match r.below(4) {
                    0 => {
                        if let Some(o) = tx.next_send() {
                            to_rx.push_back(o);
                        }
                    }
                    1 => {
                        if let Some(o) = to_rx.pop_front() {
                            assert!(posted > 0);
                            posted -= 1;
                            pending += 1;
                            match o {
                                Outgoing::Data { msg, grant } => {
                                    assert_eq!(msg, delivered);
                                    delivered += 1;
                                    rx.granted(grant);
                                }
                                Outgoing::Credit { grant } => rx.granted(grant),
                            }
                        }
                    }
                    2 => {
                        posted += pending;
                        rx.reposted(pending);
                        pending = 0;
                        if let Some(o) = rx.next_send() {
                            to_tx.push_back(o);
                        }
                    }
                    _ => {
                        if let Some(o) = to_tx.pop_front() {
                            match o {
                                Outgoing::Credit { grant } => tx.granted(grant),
                                Outgoing::Data { .. } => panic!("the receiver sends no data"),
                            }
                            // The sender reposts at once; it returns these on its data messages.
                            tx.reposted(1);
                        }
                    }
                }
            }
        }
    }
}
