//! The RDM matching engine (src/rdm/matching.rs) fed with messages decoded
//! from fuzzer bytes by the real decoder (src/rdm/proto.rs), interleaved with
//! receives posted (untagged, tagged, multi-receive, directed, peek, claim,
//! discard), cancels and rendezvous reads finishing in any order. Eager
//! messages go through `Matcher::take_head` first, as on the endpoint, or
//! straight to `arrive`.
//!
//! Invariants: no panic; every delivery names a live receive; it lies inside
//! that receive's buffer (offset + len <= buffer length: truncation, never
//! overflow); len + olen is the message's length; an eager delivery never
//! reads beyond the payload; a receive finishes (its `last` completion or a
//! final cancel) exactly once; a message is consumed at most once; at the
//! end, after cancel_all and all reads finished, every receive has finished.
#![no_main]
use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use rsverbs::capi::consts::{FI_ADDR_UNSPEC, FI_CLAIM, FI_DISCARD, FI_MULTI_RECV, FI_PEEK};
use rsverbs::rdm::matching::{Action, Delivery, Incoming, Matcher, RecvRequest};
use rsverbs::rdm::proto;

struct Cur<'a>(&'a [u8]);
impl<'a> Cur<'a> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.u8()?, self.u8()?]))
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

#[derive(Default)]
struct Model {
    /// handle -> buffer length, multi-receive; removed when the receive finishes.
    live: HashMap<u64, (usize, bool)>,
    finished: HashMap<u64, u32>,
    /// Rendezvous deliveries whose reads are running.
    reads: Vec<Delivery>,
    /// Messages (by wire msg_id of RTS) consumed.
    rndv_taken: HashMap<u64, u32>,
}

impl Model {
    fn finish(&mut self, h: u64) {
        assert!(self.live.remove(&h).is_some(), "receive {h:#x} finished twice (or never posted)");
        *self.finished.entry(h).or_default() += 1;
    }
    fn check_delivery(&mut self, d: &Delivery, msg_len: Option<usize>) {
        let &(blen, multi) = self.live.get(&d.handle).expect("delivery into a live receive");
        assert_eq!(multi, d.multi_recv);
        assert!(d.offset.checked_add(d.len).is_some_and(|e| e <= blen), "delivery outside the buffer");
        if let Some(l) = msg_len {
            assert_eq!(d.len + d.olen, l, "len + olen is the message length");
        }
    }
    fn action(&mut self, m: &mut Matcher, a: Action, eager_len: Option<usize>) {
        match a {
            Action::Deliver(d) => {
                let pl = eager_len.expect("Deliver only for the arriving eager message");
                self.check_delivery(&d, Some(pl));
                assert!(d.len <= pl);
                if d.last {
                    self.finish(d.handle);
                }
            }
            Action::DeliverQueued(d, bytes) => {
                self.check_delivery(&d, Some(bytes.len()));
                if d.last {
                    self.finish(d.handle);
                }
            }
            Action::Read(d, r) => {
                self.check_delivery(&d, Some(r.len));
                *self.rndv_taken.entry(r.msg_id).or_default() += 1;
                assert_eq!(self.rndv_taken[&r.msg_id], 1, "a rendezvous message consumed twice");
                let plan = proto::read_plan(&r.segs, d.len, 1 << 20);
                assert_eq!(plan.iter().map(|c| c.len).sum::<usize>(), d.len.min(r.len));
                self.reads.push(d);
                let _ = m;
            }
            Action::Queued | Action::NoMessage { .. } | Action::Peeked { .. } => {}
            Action::Discarded { rndv, .. } => {
                if let Some(r) = rndv {
                    *self.rndv_taken.entry(r.msg_id).or_default() += 1;
                    assert_eq!(self.rndv_taken[&r.msg_id], 1);
                }
            }
        }
    }
    fn read_done(&mut self, m: &mut Matcher, i: usize) {
        let d = self.reads.remove(i);
        let out = m.read_finished(&d);
        assert_eq!((out.handle, out.offset, out.len, out.olen), (d.handle, d.offset, d.len, d.olen));
        if out.last {
            // Non-multi receives finished when the delivery was made (last) —
            // except their completion is written here; count it once either way.
            if d.multi_recv {
                self.finish(out.handle);
            } else if self.live.contains_key(&out.handle) {
                self.finish(out.handle);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cur(data);
    let mut m = Matcher::new();
    let mut model = Model::default();
    let mut next_handle = 1u64;
    let mut rts_id = 1u64;
    let srcs = [0u64, 1, 2, FI_ADDR_UNSPEC];
    if let Some(b) = c.u16() {
        m.set_min_multi_recv(b as usize);
    }
    while let Some(op) = c.u8() {
        match op % 6 {
            // A message arrives: length-prefixed wire bytes through the real decoder.
            0 | 1 => {
                let Some(n) = c.u16() else { break };
                let src = srcs[(op as usize >> 3) % 3];
                let wire = c.take(n as usize % 600);
                let Ok(msg) = proto::decode(wire) else { continue };
                let Some(mut inc) = Incoming::from_message(src, msg) else { continue };
                let eager_len = match &inc.body {
                    rsverbs::rdm::matching::Body::Eager(p) => Some(p.len()),
                    rsverbs::rdm::matching::Body::Rndv(r) => {
                        let _ = r;
                        None
                    }
                };
                if let rsverbs::rdm::matching::Body::Rndv(r) = &mut inc.body {
                    // Local ids are unique (the endpoint assigns them).
                    r.msg_id = rts_id;
                    rts_id += 1;
                }
                // An eager message tries take_head first, as the endpoint does
                // (bit 5 of the op byte: also the general path alone).
                if let (Some(len), true) = (eager_len, op & 0x20 != 0) {
                    if let Some(d) = m.take_head(inc.kind, inc.src, inc.tag, inc.data, len) {
                        model.action(&mut m, Action::Deliver(d), eager_len);
                        continue;
                    }
                }
                let a = m.arrive(inc);
                model.action(&mut m, a, eager_len);
            }
            // Post a receive.
            2 | 3 => {
                let (Some(f), Some(len), Some(tag)) = (c.u8(), c.u16(), c.u8()) else { break };
                let h = next_handle;
                next_handle += 1;
                let ctx = (f as u64 >> 5) + 1; // few distinct contexts, for claim/cancel
                let tagged = f & 1 != 0;
                let mut req = if tagged {
                    RecvRequest::tagged(h, ctx, len as usize, tag as u64 & 3, (tag as u64 >> 2) & 3)
                } else {
                    RecvRequest::msg(h, ctx, len as usize)
                };
                req = req.from(srcs[(f as usize >> 1) & 3]);
                let flags = match (f >> 3) & 3 {
                    0 => 0,
                    1 => FI_MULTI_RECV,
                    2 => FI_PEEK | if f & 0x80 != 0 { FI_CLAIM } else { 0 },
                    _ => (if f & 0x80 != 0 { FI_PEEK } else { FI_CLAIM }) | if f & 0x40 != 0 { FI_DISCARD } else { 0 },
                };
                req = req.with_flags(flags);
                let queued_like = flags & (FI_PEEK | FI_DISCARD) == 0;
                if queued_like {
                    model.live.insert(h, (len as usize, flags & FI_MULTI_RECV != 0));
                }
                match m.post(req) {
                    Ok(actions) => {
                        for a in actions {
                            model.action(&mut m, a, None);
                        }
                    }
                    Err(_) => {
                        model.live.remove(&h);
                    }
                }
            }
            // Cancel by context.
            4 => {
                let Some(ctx) = c.u8() else { break };
                if let Some(cn) = m.cancel((ctx as u64 >> 5) + 1) {
                    assert!(model.live.contains_key(&cn.handle), "cancel of a finished receive");
                    if cn.last {
                        model.finish(cn.handle);
                    }
                }
            }
            // A rendezvous read finishes.
            _ => {
                let Some(i) = c.u8() else { break };
                if !model.reads.is_empty() {
                    let i = i as usize % model.reads.len();
                    model.read_done(&mut m, i);
                }
            }
        }
    }
    for cn in m.cancel_all() {
        assert!(model.live.contains_key(&cn.handle));
        if cn.last {
            model.finish(cn.handle);
        }
    }
    while !model.reads.is_empty() {
        model.read_done(&mut m, 0);
    }
    assert!(model.live.is_empty(), "receives never finished: {:?}", model.live.keys().collect::<Vec<_>>());
    assert!(model.finished.values().all(|&n| n == 1));
});
