//! Per-peer credit flow control, send side: a sender never sends a message
//! (EAGER, RTS, FIN, NACK or CREDIT) unless the receiver has a receive buffer
//! posted for it, so receiver-not-ready never happens. The receive side (who
//! gets which buffers of the receive pool) is the credit bank in `srq.rs`;
//! its per-peer part, [`Share`], is what `next_send` takes grants from.
//!
//! Accounting, for one direction (we send to the peer):
//! * `credits`: buffers the peer has promised us that we have not used yet.
//!   Each message we send consumes one. We start with the grant of the peer's
//!   HELLO (possibly 0) and never hold more than its `max_credits`.
//! * The peer's bank gives us more as it reposts buffers (our own messages'
//!   or others'), and returns them in the `credits` field of every header it
//!   sends us (piggybacking), or in a standalone CREDIT message when enough
//!   are owed (the threshold of our share) or it has a recall for us.
//! * A recall (`F_RECALL`, target t): we keep at most t credits and hand the
//!   rest back in a CREDIT's release count (`aux`), at once.
//!
//! So, per direction, `credits + in flight + owed + granted but not yet
//! received` is our share's `out + owed` at the peer, and the peer's bank
//! never promises more buffers than it has posted.
//!
//! Deadlock freedom rests on three rules:
//! * The last credit is reserved for CREDIT messages: data messages (EAGER,
//!   RTS, FIN, NACK) need two credits, CREDIT needs one. So an endpoint can
//!   always return what it owes (or answer/send a recall), even when its own
//!   sends are stalled.
//! * Every peer's quota is at least `MIN_CREDITS` (3) and the threshold
//!   `2 <= threshold <= quota - 1`. When a sender is stuck (at most its
//!   reserve credit left, nothing in flight, everything reposted) the bank
//!   gives it back up to its quota, so it is owed at least `quota - 1 >=
//!   threshold` and gets a CREDIT. A CREDIT carries at least 2 credits (or a
//!   recall) while it costs its receiver one buffer, so standalone CREDITs die
//!   out when there is no traffic (no ping-pong).
//! * The connecting side of a connection gives the peer at least
//!   `MIN_CREDITS` in its HELLO (it waits for free buffers if it must), so the
//!   accepting side can always send it credits, even if the accepting side's
//!   own pool had nothing free for the newcomer (grant 0 in the accept).
//!
//! Messages leave in the order they were queued (one FIFO per peer); together
//! with RC's in-order delivery this keeps per-peer message order.

use std::collections::VecDeque;

use super::srq::Share;
use crate::error::{FiError, FiResult};

/// Smallest `bufs_per_peer` the rules above allow (threshold 2 <= bufs - 1),
/// a rule of the protocol (`proto.rs`: a HELLO must grant at least this).
pub use super::proto::MIN_CREDITS;
/// Default most credits one peer may hold (`FI_RSVERBS_PEER_CREDITS`)
/// without a shared receive pool, where it is also each connection's own
/// receive buffers (registered memory per connection).
pub const DEFAULT_CREDITS: u16 = 32;
/// Default most credits one peer may hold from a shared receive pool. The
/// pool is the endpoint's, whatever this is; it only caps one peer's quota
/// (`srq.rs`: the pool divided among the peers) while few peers share the
/// pool, so that a single busy peer can keep a longer stream in flight.
pub const DEFAULT_SHARED_CREDITS: u16 = 128;

/// One endpoint's credit settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditConfig {
    /// The most credits this endpoint lets one peer hold (its quota's
    /// ceiling; without an SRQ, the receive buffers of each connection).
    pub bufs_per_peer: u16,
    /// Owed credits that trigger a standalone CREDIT message at a full quota
    /// (the bank recomputes it for smaller quotas).
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
    /// Send a standalone CREDIT message granting `grant`, releasing `release`
    /// of the peer's credits (a recall's answer) and, if `recall`, asking the
    /// peer to keep at most that many of ours.
    Credit { grant: u16, release: u16, recall: Option<u16> },
}

/// Send-side flow-control state for one peer: our credits for its buffers and
/// the queue of messages waiting for one. `M` is the caller's description of
/// a queued message.
#[derive(Debug)]
pub struct PeerFlow<M> {
    /// The most credits the peer lets us hold (its HELLO's max_credits).
    peer_max: u16,
    credits: u32,
    /// The peer recalled its credits down to this many.
    recall: Option<u32>,
    queue: VecDeque<M>,
}

impl<M> PeerFlow<M> {
    /// `grant`: the peer's initial grant; `peer_max`: the most it lets us hold.
    pub fn new(grant: u16, peer_max: u16) -> PeerFlow<M> {
        PeerFlow { peer_max, credits: grant.min(peer_max) as u32, recall: None, queue: VecDeque::new() }
    }

    /// Queues a message for the peer. It leaves, in order, through `next_send`.
    pub fn push(&mut self, msg: M) {
        self.queue.push_back(msg);
    }

    /// The next thing to transmit, if flow control allows one now; `rx` is our
    /// receive-side share for this peer (the grants and recalls we owe it).
    /// Call it until None after `push`, `granted`, `recalled` and whenever the
    /// bank gave the share something (and only when the send queue has a
    /// free slot: what it returns is committed).
    pub fn next_send(&mut self, rx: &mut Share) -> Option<Outgoing<M>> {
        // A recall is answered first: the peer needs the buffers for others.
        if let Some(t) = self.recall {
            if self.credits > t {
                let release = (self.credits - 1 - t).min(u16::MAX as u32) as u16;
                self.credits = t;
                self.recall = None;
                return Some(Outgoing::Credit { grant: rx.take_grant(), release, recall: rx.take_recall() });
            }
            self.recall = None;
        }
        if self.credits >= 2 {
            if let Some(msg) = self.queue.pop_front() {
                self.credits -= 1;
                return Some(Outgoing::Data { msg, grant: rx.take_grant() });
            }
        }
        if rx.credit_due() && self.credits >= 1 {
            self.credits -= 1;
            return Some(Outgoing::Credit { grant: rx.take_grant(), release: 0, recall: rx.take_recall() });
        }
        None
    }

    /// Takes a credit for a message that leaves at once, outside the queue:
    /// only when `next_send` would hand out that message now (nothing queued
    /// ahead of it, no recall to answer, the reserve credit kept).
    #[inline]
    pub fn take_for_direct(&mut self) -> bool {
        if self.queue.is_empty() && self.recall.is_none() && self.credits >= 2 {
            self.credits -= 1;
            true
        } else {
            false
        }
    }

    /// Nothing to send but what the receive side owes (no queued message, no recall).
    pub fn idle(&self) -> bool {
        self.queue.is_empty() && self.recall.is_none()
    }

    /// Gives back a credit `take_for_direct` (or `next_send`, with a message)
    /// took for a message that did not leave.
    pub fn untake_direct(&mut self) {
        self.credits += 1;
    }

    /// The peer granted `n` credits (the credit field of a header it sent,
    /// valid or not for the rest of the message — but not of a message that
    /// failed to decode).
    #[inline]
    pub fn granted(&mut self, n: u16) {
        let c = self.credits + n as u32;
        if c > self.peer_max as u32 {
            // A peer granting more than it said it would is broken; never trust it past that.
            tracing::warn!("rdm: peer granted {n} credits, more than its maximum of {} allows; capped", self.peer_max);
        }
        self.credits = c.min(self.peer_max as u32);
    }

    /// The peer asks us to keep at most `target` credits (at least
    /// `MIN_CREDITS`: we never give up our reserve).
    pub fn recalled(&mut self, target: u16) {
        self.recall = Some(target.max(MIN_CREDITS) as u32);
    }

    /// Credits available for sending to the peer.
    pub fn credits(&self) -> u32 {
        self.credits
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
pub(super) mod tests {
    use super::super::proto::tests::Rng;
    use super::super::srq::{Arrival, Bank};
    use super::*;

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

    /// Our receive side for one peer: a single-peer bank of `n` buffers.
    fn rx(n: u16) -> Bank<u8> {
        let mut b = Bank::single(n);
        b.admit(0);
        b
    }

    /// `n` of the peer's messages arrived and their buffers were reposted.
    fn used(b: &mut Bank<u8>, n: u32) {
        for _ in 0..n {
            assert_eq!(b.arrived(&0, 0), Arrival::Ok);
            b.reposted(Some(&0));
        }
    }

    fn send<M>(f: &mut PeerFlow<M>, b: &mut Bank<u8>) -> Option<Outgoing<M>> {
        f.next_send(b.share_mut(&0).unwrap())
    }

    /// A message sent outside the queue (`take_for_direct`) follows the same
    /// rules as `next_send`: never ahead of queued messages or a recall, never
    /// into the reserve credit.
    #[test]
    fn direct_sends_obey_the_queue_rules() {
        let mut b = rx(4);
        let mut f: PeerFlow<u32> = PeerFlow::new(3, 4);
        assert!(f.idle());
        assert!(f.take_for_direct());
        assert!(f.take_for_direct());
        assert_eq!(f.credits(), 1);
        assert!(!f.take_for_direct(), "the last credit is the reserve");
        assert_eq!(f.credits(), 1);
        // A queued message is ahead: no direct send even with credits.
        f.granted(2);
        f.push(7);
        assert!(!f.idle());
        assert!(!f.take_for_direct());
        assert_eq!(f.credits(), 3);
        assert!(matches!(send(&mut f, &mut b), Some(Outgoing::Data { msg: 7, .. })));
        assert!(f.idle());
        // A recall is answered first.
        f.granted(2);
        assert_eq!(f.credits(), 4);
        f.recalled(2);
        assert!(!f.idle());
        assert!(!f.take_for_direct());
        assert!(matches!(send(&mut f, &mut b), Some(Outgoing::Credit { .. })));
        // A credit taken for a message that did not leave comes back.
        f.granted(1);
        let c = f.credits();
        assert!(f.take_for_direct());
        f.untake_direct();
        assert_eq!(f.credits(), c);
    }

    #[test]
    fn exhaustion_keeps_the_reserve_and_recovers_in_order() {
        let mut b = rx(4);
        let mut f: PeerFlow<u32> = PeerFlow::new(4, 4);
        for i in 0..6 {
            f.push(i);
        }
        let mut sent = vec![];
        while let Some(o) = send(&mut f, &mut b) {
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
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Data { msg: 3, grant: 0 }));
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Data { msg: 4, grant: 0 }));
        assert_eq!(send(&mut f, &mut b), None);
        f.granted(3);
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Data { msg: 5, grant: 0 }));
        assert_eq!((f.credits(), f.queued()), (3, 0));
        assert_eq!(send(&mut f, &mut b), None);
    }

    #[test]
    fn owed_credits_piggyback_or_go_standalone() {
        let mut b = rx(8); // threshold 4
        let mut f: PeerFlow<&str> = PeerFlow::new(8, 8);
        used(&mut b, 3);
        assert_eq!(send(&mut f, &mut b), None, "3 owed, below the threshold of 4: wait for traffic");
        f.push("a");
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Data { msg: "a", grant: 3 }), "piggybacked");
        assert_eq!(b.share(&0).unwrap().owed(), 0);
        used(&mut b, 4);
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Credit { grant: 4, release: 0, recall: None }), "threshold reached");
        assert_eq!(send(&mut f, &mut b), None);
        assert_eq!(f.credits(), 6);
        assert!(b.balanced());
    }

    #[test]
    fn the_reserved_credit_carries_a_credit_message() {
        let mut b = rx(4); // threshold 2
        let mut f: PeerFlow<u8> = PeerFlow::new(4, 4);
        for i in 0..4 {
            f.push(i);
        }
        while send(&mut f, &mut b).is_some() {}
        assert_eq!(f.credits(), 1);
        // Stalled, but owing: the reserve returns the credits.
        used(&mut b, 2);
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Credit { grant: 2, release: 0, recall: None }));
        assert_eq!(f.credits(), 0);
        used(&mut b, 2);
        assert_eq!(send(&mut f, &mut b), None, "nothing left to send even a CREDIT with");
        f.granted(2);
        // Data first (in order), carrying what is owed.
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Data { msg: 3, grant: 2 }));
        assert_eq!(send(&mut f, &mut b), None);
    }

    #[test]
    fn grants_are_capped_at_the_peers_maximum_and_recalls_answered() {
        let mut b = rx(4);
        let mut f: PeerFlow<u8> = PeerFlow::new(9, 5);
        assert_eq!(f.credits(), 5, "an initial grant above the maximum is capped");
        f.granted(u16::MAX);
        assert_eq!(f.credits(), 5);
        f.push(1);
        f.push(2);
        assert_eq!(f.take_queue().into_iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(f.queued(), 0);
        // A recall to 1 is treated as the floor (3): keep 3, the CREDIT uses 1, release 1.
        f.recalled(1);
        f.push(7);
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Credit { grant: 0, release: 1, recall: None }), "recall answered first");
        assert_eq!(f.credits(), 3);
        assert_eq!(send(&mut f, &mut b), Some(Outgoing::Data { msg: 7, grant: 0 }));
        // A recall above what we hold is void.
        f.recalled(10);
        assert_eq!(send(&mut f, &mut b), None);
    }

    // ---- Two-peer simulation -------------------------------------------------

    /// A simulated application message (the hub-and-spokes simulation in
    /// `srq.rs` sends the same ones).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(in crate::rdm) enum App {
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
        /// Our receive buffers for the peer (one connection's own queue).
        bank: Bank<u8>,
        posted: u32,
        to_repost: Vec<u64>,
        next_seq: u64,
        /// Sequence number of the next application message expected from the peer.
        expect: u64,
        /// Our RTSs waiting for the peer's FIN.
        open_rts: Vec<u64>,
    }

    impl Side {
        fn new(local: u16, peer_bufs: u16) -> Side {
            let mut bank = Bank::single(local);
            bank.admit(0);
            Side {
                flow: PeerFlow::new(peer_bufs, peer_bufs),
                bank,
                posted: local as u32,
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
    fn simulate(seed: u64, a: u16, b: u16, budget: u64) {
        let mut r = Rng::new(seed);
        let mut sides = [Side::new(a, b), Side::new(b, a)];
        let mut links: [VecDeque<Wire>; 2] = [VecDeque::new(), VecDeque::new()]; // links[i]: i -> 1-i
        let max_delay = 1 + r.below(60);
        let max_steps = 200_000 + budget * 400;
        let mut now = 0u64;
        let mut credit_msgs = 0u64;

        let transmit = |s: &mut Side, link: &mut VecDeque<Wire>, credit_msgs: &mut u64| -> bool {
            match s.flow.next_send(s.bank.share_mut(&0).unwrap()) {
                Some(Outgoing::Data { msg, grant }) => {
                    link.push_back(Wire { msg: Some(msg), grant });
                    true
                }
                Some(Outgoing::Credit { grant, release, recall }) => {
                    assert!(grant >= 2, "a CREDIT message returns at least the threshold (>= 2)");
                    assert_eq!((release, recall), (0, None), "a lone peer is never recalled");
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
                        assert_eq!(sj.bank.arrived(&0, 0), Arrival::Ok, "seed {seed}: sent without a credit");
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
                    for _ in 0..before - s.to_repost.len() {
                        s.posted += 1;
                        s.bank.reposted(Some(&0));
                    }
                }
            }

            // Credit balance per direction i -> j.
            for i in 0..2 {
                let j = 1 - i;
                let grants_in_flight: u32 = links[j].iter().map(|w| w.grant as u32).sum();
                let sh = sides[j].bank.share(&0).unwrap();
                let total = sides[i].flow.credits() + links[i].len() as u32 + sides[j].to_repost.len() as u32 + sh.owed() + grants_in_flight;
                assert_eq!(total, sides[j].bank.size(), "seed {seed}: credits not conserved ({i}->{j})");
                assert_eq!(sh.out(), sides[i].flow.credits() + links[i].len() as u32 + grants_in_flight);
                assert_eq!(sides[j].posted + sides[j].to_repost.len() as u32, sides[j].bank.size());
                assert!(sides[j].bank.balanced());
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
        let configs = [(3, 3), (4, 4), (4, 7), (5, 3), (8, 8), (8, 16), (DEFAULT_CREDITS, 3)];
        let mut seed = 0;
        for (a, b) in configs {
            for _ in 0..40 {
                seed += 1;
                simulate(seed, a, b, 300);
            }
        }
    }
}
