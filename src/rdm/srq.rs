//! The receive side of RDM flow control: one pool of bounce buffers per
//! endpoint, posted on a shared receive queue (SRQ) and shared by every peer,
//! and the *credit bank* that decides how many of them each peer may fill.
//!
//! A credit is a promise: "a buffer is posted for your next message". The
//! bank never promises a buffer twice, so however the peers use their credits,
//! a message always finds a posted buffer and receiver-not-ready never
//! happens. It accounts for every buffer of the pool in exactly one place:
//!
//! ```text
//! size = free + busy + limbo + Σ_peers (out + owed)
//! ```
//!
//! * `free`: posted and promised to nobody.
//! * `busy`: a message arrived in it and it is not reposted yet.
//! * `out` (per peer): credits the peer holds or that are on their way to it
//!   (sent in a HELLO or a header), plus its messages on their way to us.
//! * `owed` (per peer): promised to the peer, not yet sent (piggybacked on
//!   the next message to it, or sent in a standalone CREDIT).
//! * `limbo`: promises of peers whose connection is gone, until their QP can
//!   no longer consume buffers (see [`Bank::retire`]).
//!
//! Allocation (docs/rdm-protocol.md, "Credits"):
//! * Each of the `n` peers has the same **quota** `clamp((size - reserve) / n,
//!   MIN_CREDITS, max_per_peer)`. The shared pool keeps `reserve =
//!   MIN_CREDITS` out of the quotas, so a newcomer finds a floor's worth free.
//!   In the shared pool, peers marked **idle** ([`Bank::sweep_idle`]: no
//!   data message for a whole sweep period) are held to the floor instead, and
//!   the others share `size - reserve - MIN_CREDITS * idle`; a data message
//!   from an idle peer wakes it.
//! * A buffer reposted after a message of peer `p` is given back to `p` if `p`
//!   is below its quota; else to the first peer waiting below its quota
//!   (`needy`, first come first served); else it stays free. So a peer above
//!   its quota (the quota shrank when another peer joined) has its returns
//!   **withheld** until it is back at its quota.
//! * A peer above its quota that may sit on its credits is **recalled**: a
//!   CREDIT with `F_RECALL` asks it to keep at most its quota and release the
//!   rest, which it does with a CREDIT whose `aux` counts the released ones.
//!   While a recall is open, the peer is recalled again only when the quota
//!   drops below its target (a peer at or below a target sends no answer).
//! * The floor `MIN_CREDITS` (3) per peer is what the deadlock argument of
//!   `credits.rs` needs (a stuck sender is owed at least 2 = the smallest
//!   return threshold). When `n + 1` peers would not all get their floor, the
//!   pool must grow ([`Bank::shortfall`], [`Bank::grow`]): with the default
//!   pool that happens only beyond 127 peers.
//!
//! Without an SRQ every connection has its own receive queue; the endpoint
//! then gives each peer a bank of its own (`reserve` 0, one peer, size =
//! its buffers), and the same code does the accounting.

use std::collections::VecDeque;
use super::hintmap::{HintKey, HintMap};

use super::proto::MIN_CREDITS;

const MIN: u32 = MIN_CREDITS as u32;

/// The receive-side credit state of one peer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Share {
    out: u32,
    owed: u32,
    /// A recall (target) to send with the next CREDIT.
    recall: Option<u16>,
    /// The target of the last recall, while it is not satisfied: no second
    /// recall meanwhile unless the quota drops below that target. (A peer
    /// that holds no more than a recall's target does not answer it: with
    /// one of its messages still on its way here, `out` was one above what
    /// it held. It must be recalled again when the quota shrinks further.)
    recalled: Option<u32>,
    /// Owed credits that justify a standalone CREDIT.
    threshold: u32,
    /// Queued in `Bank::needy`.
    needy: bool,
    /// No data message from this peer during a whole idle sweep period
    /// (`Bank::sweep_idle`): its quota is the floor, and the rest of the pool
    /// goes to the peers that send. Its next data message wakes it.
    idle: bool,
    /// A data message arrived since the last idle sweep (`Bank::heard`).
    seen: bool,
}

impl Share {
    /// Takes the owed credits for the header of a message about to leave.
    #[inline]
    pub fn take_grant(&mut self) -> u16 {
        let g = self.owed.min(u16::MAX as u32);
        self.owed -= g;
        self.out += g;
        g as u16
    }

    /// A grant taken by `take_grant` could not be sent after all: owe it again.
    pub fn untake(&mut self, g: u16) {
        let g = (g as u32).min(self.out);
        self.out -= g;
        self.owed += g;
    }

    /// Something must be sent even without traffic: enough owed credits
    /// (the peer may be stuck without them), or a recall.
    #[inline]
    pub fn credit_due(&self) -> bool {
        self.owed >= self.threshold.max(2) || self.recall.is_some()
    }

    pub fn take_recall(&mut self) -> Option<u16> {
        self.recall.take()
    }

    /// Credits the peer holds or has in flight (see the module doc).
    pub fn out(&self) -> u32 {
        self.out
    }
    pub fn owed(&self) -> u32 {
        self.owed
    }
    pub fn promised(&self) -> u32 {
        self.out + self.owed
    }
}

/// Whether a message broke its sender's credit limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    Ok,
    /// The peer sent without a credit (a broken or malicious peer; the buffer
    /// it used was promised to someone else).
    Overrun,
}

/// The credit bank of one receive pool.
#[derive(Debug)]
pub struct Bank<K: HintKey> {
    size: u32,
    free: u32,
    busy: u32,
    limbo: u32,
    max: u32,
    reserve: u32,
    shares: HintMap<K, Share>,
    needy: VecDeque<K>,
    /// Peers `serve_needy` gave credits to, and peers `rebalance` recalled,
    /// since `take_served`: a CREDIT may be due to them without a message of
    /// theirs having arrived.
    served: Vec<K>,
    /// Recalls sent (statistics, tests).
    pub recalls: u64,
    /// Peers marked idle (each held to the floor).
    n_idle: u32,
    /// Idle peers are held to the floor (the shared pool; a connection's own
    /// queue serves one peer and keeps its whole quota).
    adaptive: bool,
    /// Peers marked idle and woken again (statistics, tests).
    pub idled: u64,
    pub woken: u64,
}

impl<K: HintKey> Bank<K> {
    /// A pool of `size` posted buffers; each peer holds at most `max_per_peer`
    /// credits; `reserve` buffers stay out of the quotas for a newcomer.
    pub fn new(size: u32, max_per_peer: u16, reserve: u32) -> Bank<K> {
        Bank {
            size,
            free: size,
            busy: 0,
            limbo: 0,
            max: (max_per_peer as u32).max(MIN),
            reserve,
            shares: HintMap::default(),
            needy: VecDeque::new(),
            served: Vec::new(),
            recalls: 0,
            n_idle: 0,
            adaptive: false,
            idled: 0,
            woken: 0,
        }
    }

    /// The bank of a shared pool (a floor's worth kept for newcomers).
    pub fn shared(size: u32, max_per_peer: u16) -> Bank<K> {
        Bank { adaptive: true, ..Bank::new(size, max_per_peer, MIN) }
    }

    /// The bank of one connection's own receive queue.
    pub fn single(max_per_peer: u16) -> Bank<K> {
        Bank::new(max_per_peer as u32, max_per_peer, 0)
    }

    /// The quota of every peer that sends now (an idle one's is the floor):
    /// what is left after the reserve and the idle peers' floors, shared
    /// equally, within `MIN..=max`.
    pub fn quota(&self) -> u32 {
        let n = self.shares.len() as u32;
        let idle = self.n_idle.min(n);
        let active = (n - idle).max(1);
        (self.size.saturating_sub(self.reserve + idle * MIN) / active).clamp(MIN, self.max)
    }

    /// Share `s`'s quota, `qa` being [`Bank::quota`].
    #[inline]
    fn quota_of(qa: u32, s: &Share) -> u32 {
        if s.idle {
            MIN
        } else {
            qa
        }
    }

    /// Peers marked idle now.
    pub fn idle_peers(&self) -> u32 {
        self.n_idle
    }

    /// Called every idle period (the endpoint: every `IDLE_MS`): a peer none
    /// of whose data messages arrived since the last call ([`Bank::heard`])
    /// is marked idle. Its
    /// quota drops to the floor (it is recalled down to it), and the others'
    /// quota grows by what it held. Returns how many were marked.
    pub fn sweep_idle(&mut self) -> u32 {
        if !self.adaptive {
            return 0;
        }
        let mut n = 0;
        for s in self.shares.values_mut() {
            if s.seen {
                s.seen = false;
            } else if !s.idle {
                s.idle = true;
                n += 1;
            }
        }
        if n > 0 {
            self.n_idle += n;
            self.idled += n as u64;
            self.rebalance();
        }
        n
    }

    /// A data message of peer `k` arrived (call before counting its buffer):
    /// it is not idle. An idle one sends again and gets the quota of the
    /// others (who may be above the smaller quota now: returns are withheld
    /// from them, and those that hold more are recalled). CREDITs do not
    /// count: an idle peer answering a recall, or recalling what we hold of
    /// its own pool, is still idle.
    #[inline]
    pub fn heard(&mut self, k: &K) {
        let Some(s) = self.shares.get_mut(k) else { return };
        s.seen = true;
        if s.idle {
            s.idle = false;
            self.n_idle -= 1;
            self.woken += 1;
            self.rebalance();
        }
    }

    /// The standalone-CREDIT threshold for a quota: half of it, at least 2,
    /// at most quota - 1 (`credits.rs`: a stuck sender is owed >= quota - 1).
    pub fn threshold_for(q: u32) -> u32 {
        (q / 2).max(2).min(q.saturating_sub(1).max(2))
    }

    pub fn size(&self) -> u32 {
        self.size
    }
    pub fn free(&self) -> u32 {
        self.free
    }
    pub fn peers(&self) -> usize {
        self.shares.len()
    }
    pub fn max_per_peer(&self) -> u16 {
        self.max.min(u16::MAX as u32) as u16
    }
    pub fn share(&self, k: &K) -> Option<&Share> {
        self.shares.get(k)
    }
    /// The peers whose share has something to send even without traffic
    /// (`Share::credit_due`): a walk over the shares, no lookups.
    pub fn due_keys(&self) -> impl Iterator<Item = &K> + '_ {
        self.shares.iter().filter(|(_, s)| s.credit_due()).map(|(k, _)| k)
    }
    pub fn share_mut(&mut self, k: &K) -> Option<&mut Share> {
        self.shares.get_mut(k)
    }
    pub fn contains(&self, k: &K) -> bool {
        self.shares.contains_key(k)
    }

    /// Buffers the pool must grow by before one more peer can have its floor.
    pub fn shortfall(&self) -> u32 {
        ((self.shares.len() as u32 + 1) * MIN + self.reserve.min(MIN)).saturating_sub(self.size)
    }

    /// `n` more buffers were posted and stay free (no rebalance: the needy
    /// peers do not take them), so `can_admit` holds for a newcomer.
    pub fn grow_free(&mut self, n: u32) {
        self.size += n;
        self.free += n;
    }

    /// `n` more buffers were posted.
    pub fn grow(&mut self, n: u32) {
        self.size += n;
        self.free += n;
        self.rebalance();
    }

    /// A peer's share is stuck: it has too few credits to send, is not owed
    /// enough for a standalone CREDIT, and nothing is free to give it. The
    /// buffers it waits for are held by other peers; releasing them (withheld
    /// returns, recalls) needs those peers to make progress, which under
    /// manual progress may never come (an application waiting on one of its
    /// endpoints progresses only that one).
    fn is_stuck(&self, s: &Share) -> bool {
        self.free == 0 && s.needy && s.out < MIN && !s.credit_due()
    }

    /// The books in one line, for logs: the pool's totals, then each peer's
    /// `out+owed` (`R`: a recall is pending, `r`: one went out, `n`: needy, `i`: idle).
    pub fn describe(&self) -> String
    where
        K: std::fmt::Display,
    {
        let mut t = format!(
            "size={} free={} busy={} limbo={} quota={} idle={} needy={}:",
            self.size,
            self.free,
            self.busy,
            self.limbo,
            self.quota(),
            self.n_idle,
            self.needy.len()
        );
        for (k, s) in self.shares.iter() {
            let f = format!(
                "{}{}{}{}",
                if s.recall.is_some() { "R" } else { "" },
                if s.recalled.is_some() { "r" } else { "" },
                if s.needy { "n" } else { "" },
                if s.idle { "i" } else { "" }
            );
            t.push_str(&format!(" {k}={}+{}{f}", s.out, s.owed));
        }
        t
    }

    /// How many buffers [`Bank::feed_stuck`] would give the stuck peers: each
    /// gets enough owed credits for a CREDIT to go out (its threshold, at
    /// least the floor). 0 when no peer is stuck.
    pub fn stuck_need(&self) -> u32 {
        // Only needy peers can be stuck, and only while nothing is free: the
        // endpoint asks on every tick of its clock, which must not cost a
        // walk over every peer.
        if self.free != 0 {
            return 0;
        }
        self.needy
            .iter()
            .filter_map(|k| self.shares.get(k))
            .filter(|s| self.is_stuck(s))
            .map(|s| s.threshold.max(MIN).saturating_sub(s.owed))
            .sum()
    }

    /// `n` buffers were added to the pool for the stuck peers (`n` from
    /// [`Bank::stuck_need`]): they go to those peers directly, not to the
    /// quotas, so idle peers holding the pool get nothing more. Anything left
    /// over is free.
    pub fn feed_stuck(&mut self, n: u32) {
        self.size += n;
        let mut left = n;
        let stuck: Vec<K> = self.shares.iter().filter(|(_, s)| self.is_stuck(s)).map(|(k, _)| *k).collect();
        for k in stuck {
            let s = self.shares.get_mut(&k).expect("listed");
            let g = s.threshold.max(MIN).saturating_sub(s.owed).min(left);
            s.owed += g;
            left -= g;
        }
        self.free += left;
        self.serve_needy();
    }

    /// Whether a new peer would get at least its floor right now. The
    /// connecting side of a connection waits for this (its HELLO must give
    /// the peer credits, or the peer could never send it a credit back).
    pub fn can_admit(&self) -> bool {
        self.shortfall() == 0 && self.free >= MIN
    }

    /// A new peer: returns its initial grant (what its HELLO carries):
    /// its quota, or what is free if less (possibly 0; the rest follows as
    /// buffers come back). Makes room (withholding, recalls) if needed.
    pub fn admit(&mut self, k: K) -> u16 {
        if let Some(s) = self.shares.get(&k) {
            // Already known (the second connection of an endpoint talking to itself).
            return s.out.min(u16::MAX as u32) as u16;
        }
        // Seen: not idle at the next sweep before it had a chance to send.
        self.shares.insert(k, Share { seen: true, ..Share::default() });
        let q = self.quota();
        let g = q.min(self.free);
        self.free -= g;
        let s = self.shares.get_mut(&k).expect("inserted");
        s.out = g;
        self.rebalance();
        g as u16
    }

    /// A peer is gone: its promises move to limbo (returned by `release_limbo`
    /// once its connection can no longer consume buffers). Returns how many.
    pub fn retire(&mut self, k: &K) -> u32 {
        let Some(s) = self.shares.remove(k) else { return 0 };
        if s.idle {
            self.n_idle -= 1;
        }
        self.needy.retain(|x| x != k);
        let p = s.promised();
        self.limbo += p;
        self.rebalance();
        p
    }

    /// A message of a retired peer arrived (it consumed one of its limbo buffers).
    pub fn limbo_arrived(&mut self) {
        if self.limbo > 0 {
            self.limbo -= 1;
        } else {
            // More than it was promised: take it from the free ones.
            self.free = self.free.saturating_sub(1);
            tracing::warn!("rdm: a message from a closed connection beyond its credits");
        }
        self.busy += 1;
    }

    /// `n` limbo buffers are known to be posted and unused: free them.
    pub fn release_limbo(&mut self, n: u32) {
        let n = n.min(self.limbo);
        self.limbo -= n;
        self.free += n;
        self.serve_needy();
    }

    pub fn limbo(&self) -> u32 {
        self.limbo
    }

    /// A message from `k` arrived in a buffer (which is now busy). `release`:
    /// unused credits it hands back (a CREDIT's `aux`).
    pub fn arrived(&mut self, k: &K, release: u16) -> Arrival {
        self.busy += 1;
        let qa = self.quota();
        let Some(s) = self.shares.get_mut(k) else {
            // Unknown peer: treat like a retired one.
            self.busy -= 1;
            self.limbo_arrived();
            return Arrival::Overrun;
        };
        let q = Self::quota_of(qa, s);
        let mut res = Arrival::Ok;
        if s.out > 0 {
            s.out -= 1;
        } else {
            // The sender had no credit: the buffer it used was someone else's.
            res = Arrival::Overrun;
            self.free = self.free.saturating_sub(1);
        }
        let r = (release as u32).min(s.out);
        if r < release as u32 {
            tracing::warn!("rdm: peer released {release} credits, holds at most {}", s.out);
        }
        s.out -= r;
        self.free += r;
        if s.recalled.is_some() && (r > 0 || s.promised() <= q) {
            s.recalled = None;
        }
        if r > 0 {
            self.serve_needy();
        }
        res
    }

    /// A message from `k` arrived in a buffer that is already posted again:
    /// `arrived(k, release)` then `reposted(Some(k))`, with one lookup of
    /// `k`'s share in the common case (no release).
    pub fn recycled(&mut self, k: &K, release: u16) -> Arrival {
        if release == 0 {
            let qa = self.quota();
            if let Some(s) = self.shares.get_mut(k) {
                let q = Self::quota_of(qa, s);
                let mut res = Arrival::Ok;
                let mut free = self.free;
                if s.out > 0 {
                    s.out -= 1;
                } else {
                    res = Arrival::Overrun;
                    free = free.saturating_sub(1);
                }
                if s.recalled.is_some() && s.promised() <= q {
                    s.recalled = None;
                }
                // Busy for no time: the buffer is free, and goes back to `k`
                // if it is below its quota and not waiting in line.
                if s.promised() < q && !s.needy {
                    s.owed += 1;
                    self.free = free;
                } else {
                    self.free = free + 1;
                    self.serve_needy();
                }
                return res;
            }
        }
        let a = self.arrived(k, release);
        self.reposted(Some(k));
        a
    }

    /// `n` messages from `k`, none releasing credits, arrived in buffers
    /// that are already posted again: `recycled(k, 0)` `n` times, with one
    /// lookup of `k`'s share while each buffer goes straight back to `k`
    /// (the common case). `Overrun` if any of them was.
    pub fn recycled_many(&mut self, k: &K, n: u32) -> Arrival {
        let mut res = Arrival::Ok;
        let mut left = n;
        let qa = self.quota();
        if let Some(s) = self.shares.get_mut(k) {
            // `recycled`'s first branch, in closed form, for as long as it
            // keeps each buffer for `k` (below quota, not in line): no other
            // peer's share moves, so the lookup stays good.
            let q = Self::quota_of(qa, s);
            if !s.needy {
                // Messages within `k`'s credits: each takes one from `out` and
                // owes one back, so `promised` (what every step tests) stays.
                if s.out > 0 && s.promised() - 1 < q {
                    let a = left.min(s.out);
                    if a > 0 {
                        s.out -= a;
                        s.owed += a;
                        s.recalled = None;
                        left -= a;
                    }
                }
                // Then, with no credit left, overruns: each also takes a
                // free buffer, and `promised` (= `owed`) grows by one.
                if left > 0 && s.out == 0 && s.owed < q {
                    let b = left.min(q - s.owed);
                    s.owed += b;
                    s.recalled = None;
                    self.free = self.free.saturating_sub(b);
                    res = Arrival::Overrun;
                    left -= b;
                }
            }
        }
        for _ in 0..left {
            if self.recycled(k, 0) == Arrival::Overrun {
                res = Arrival::Overrun;
            }
        }
        res
    }

    /// A busy buffer is posted again; `from`: whose message it held (None: a
    /// retired peer's, or unknown).
    pub fn reposted(&mut self, from: Option<&K>) {
        self.busy = self.busy.saturating_sub(1);
        self.free += 1;
        let qa = self.quota();
        if let Some(s) = from.and_then(|k| self.shares.get_mut(k)) {
            if s.promised() < Self::quota_of(qa, s) && !s.needy {
                s.owed += 1;
                self.free -= 1;
                return;
            }
        }
        self.serve_needy();
    }

    /// Whether anyone was served or recalled since `take_served`.
    #[inline]
    pub fn has_served(&self) -> bool {
        !self.served.is_empty()
    }

    /// Moves the peers served or recalled since the last call to `out`.
    pub fn take_served(&mut self, out: &mut Vec<K>) {
        out.append(&mut self.served);
    }

    /// Gives free buffers to the peers waiting below their quota, in order.
    fn serve_needy(&mut self) {
        let qa = self.quota();
        while self.free > 0 {
            let Some(k) = self.needy.front().copied() else { break };
            let Some(s) = self.shares.get_mut(&k) else {
                self.needy.pop_front();
                continue;
            };
            let q = Self::quota_of(qa, s);
            let want = q.saturating_sub(s.promised());
            let g = want.min(self.free);
            s.owed += g;
            self.free -= g;
            if g > 0 {
                self.served.push(k);
            }
            if s.promised() >= q {
                s.needy = false;
                self.needy.pop_front();
            }
        }
    }

    /// After the quota changed (a peer came or went, the pool grew): new
    /// thresholds; peers above the quota lose what they were owed beyond it
    /// and are recalled; peers below it queue for free buffers.
    fn rebalance(&mut self) {
        let qa = self.quota();
        let mut below = Vec::new();
        for (k, s) in self.shares.iter_mut() {
            let q = Self::quota_of(qa, s);
            s.threshold = Self::threshold_for(q);
            let p = s.promised();
            if p > q {
                let ex = (p - q).min(s.owed);
                s.owed -= ex;
                self.free += ex;
                if s.out > q && !s.recalled.is_some_and(|t| q >= t) {
                    s.recall = Some(q.min(u16::MAX as u32) as u16);
                    s.recalled = Some(q);
                    self.recalls += 1;
                    // The recall goes out with a CREDIT: listed for the
                    // endpoint's next drain (no walk finds it otherwise).
                    self.served.push(*k);
                }
            } else if p < q && !s.needy {
                s.needy = true;
                below.push(*k);
            }
        }
        self.needy.extend(below);
        self.serve_needy();
    }

    /// Checks the accounting identity (tests, debug logging).
    pub fn balanced(&self) -> bool {
        let promised: u32 = self.shares.values().map(|s| s.promised()).sum();
        self.free + self.busy + self.limbo + promised == self.size
    }
}

#[cfg(test)]
#[path = "tests/srq.rs"]
mod tests;
