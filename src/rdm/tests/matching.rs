//! Unit tests of `src/rdm/matching.rs` (kept apart so the module reads in one sitting).

use crate::rdm::proto::tests::Rng;
use super::*;

const ANY: u64 = FI_ADDR_UNSPEC;

fn eager(src: u64, payload: &[u8]) -> Incoming<'_> {
    Incoming { src, kind: Kind::Msg, tag: 0, data: None, body: Body::Eager(payload), origin: None }
}
fn teager(src: u64, tag: u64, payload: &[u8]) -> Incoming<'_> {
    Incoming { src, kind: Kind::Tagged, tag, data: None, body: Body::Eager(payload), origin: None }
}
fn rndv(msg_id: u64, len: usize) -> Rendezvous {
    Rendezvous { msg_id, len, segs: vec![Segment { addr: 0x10000, len: len as u64, rkey: 7 }] }
}
fn delivered(a: &Action) -> &Delivery {
    match a {
        Action::Deliver(d) | Action::DeliverQueued(d, _) | Action::Read(d, _) => d,
        other => panic!("expected a delivery, got {other:?}"),
    }
}

/// A random plain receive for the differential tests: tagged or not (tags
/// 0..4, sometimes ignoring bit 0), sometimes directed (sources 0..3).
fn random_recv(rng: &mut Rng, handle: u64, step: u64) -> RecvRequest {
    let len = 1 + rng.below(64) as usize;
    let req = if rng.below(2) == 0 {
        RecvRequest::msg(handle, step, len)
    } else {
        RecvRequest::tagged(handle, step, len, rng.below(4), if rng.below(3) == 0 { 1 } else { 0 })
    };
    if rng.below(4) == 0 {
        req.from(rng.below(3))
    } else {
        req
    }
}

/// `take_head` is `arrive`'s answer whenever it answers, and changes
/// nothing when it does not: two matchers given the same random posts and
/// arrivals, one trying `take_head` first, never differ.
#[test]
fn take_head_is_arrive_when_it_answers() {
    let mut rng = Rng::new(0x7a6b_4ead);
    let (mut a, mut b) = (Matcher::new(), Matcher::new());
    let mut handle = 1u64;
    let (mut fast, mut slow) = (0, 0);
    for step in 0..20_000u64 {
        let r = rng.below(10);
        if r < 5 {
            // A receive: tagged or not, sometimes directed, sometimes multi-receive.
            let mut req = random_recv(&mut rng, handle, step);
            if req.kind == Kind::Msg && rng.below(5) == 0 {
                req = req.with_flags(FI_MULTI_RECV);
            }
            handle += 1;
            assert_eq!(a.post(req.clone()).unwrap(), b.post(req).unwrap(), "step {step}");
        } else {
            // An eager message.
            let payload = vec![step as u8; rng.below(80) as usize];
            let kind = if rng.below(2) == 0 { Kind::Msg } else { Kind::Tagged };
            let src = rng.below(3);
            let tag = if kind == Kind::Tagged { rng.below(4) } else { 0 };
            let data = if rng.below(3) == 0 { Some(step) } else { None };
            let inc = Incoming { src, kind, tag, data, body: Body::Eager(&payload), origin: None };
            let want = b.arrive(inc.clone());
            match a.take_head(kind, src, tag, data, payload.len()) {
                Some(d) => {
                    fast += 1;
                    assert_eq!(Action::Deliver(d), want, "step {step}");
                }
                None => {
                    slow += 1;
                    assert_eq!(a.arrive(inc), want, "step {step}");
                }
            }
        }
        assert_eq!(format!("{:?}", a.queues), format!("{:?}", b.queues), "step {step}");
    }
    assert!(fast > 1000 && slow > 1000, "both paths exercised: {fast} fast, {slow} slow");
}

/// `post_plain` queues exactly what `post` would queue with no action, and
/// hands back everything else unchanged: two matchers given the same random
/// receives (plain, directed, multi-receive, peeks and claims) and arrivals,
/// one trying `post_plain` first, never differ.
#[test]
fn post_plain_is_post_when_it_takes() {
    let mut rng = Rng::new(0x9057_91a1);
    let (mut a, mut b) = (Matcher::new(), Matcher::new());
    let mut handle = 1u64;
    let (mut fast, mut slow) = (0, 0);
    for step in 0..20_000u64 {
        if rng.below(2) == 0 {
            let mut req = random_recv(&mut rng, handle, step);
            match (req.kind, rng.below(8)) {
                (Kind::Msg, 0) => req = req.with_flags(FI_MULTI_RECV),
                (Kind::Tagged, 0) => req = req.with_flags(FI_PEEK),
                (Kind::Tagged, 1) => req = req.with_flags(FI_PEEK | FI_DISCARD),
                _ => {}
            }
            handle += 1;
            let want = b.post(req.clone());
            match a.post_plain(req.clone()) {
                Ok(()) => {
                    fast += 1;
                    assert_eq!(want.unwrap(), Vec::new(), "step {step}");
                }
                Err(back) => {
                    slow += 1;
                    assert_eq!(back, req, "step {step}: handed back unchanged");
                    assert_eq!(a.post(back), want, "step {step}");
                }
            }
        } else {
            let payload = vec![step as u8; rng.below(80) as usize];
            let kind = if rng.below(2) == 0 { Kind::Msg } else { Kind::Tagged };
            let src = rng.below(3);
            let tag = if kind == Kind::Tagged { rng.below(4) } else { 0 };
            let inc = Incoming { src, kind, tag, data: None, body: Body::Eager(&payload), origin: None };
            assert_eq!(a.arrive(inc.clone()), b.arrive(inc), "step {step}");
        }
        assert_eq!(format!("{:?}", a.queues), format!("{:?}", b.queues), "step {step}");
    }
    assert!(fast > 1000 && slow > 1000, "both paths exercised: {fast} fast, {slow} slow");
}

/// Receives that keep their record in the queue (`post_plain_with`,
/// `take_head_with`, `spill`, as the RDM endpoint uses them) match, deliver
/// and cancel exactly as receives named by handle: a matcher whose records
/// are the handles the other matcher is given, driven the endpoint's way
/// (records filed under their own value before `post`, `arrive` and
/// `cancel`), never differs from it once a kept record stands for its
/// handle; each record comes back once, with its own receive.
#[test]
fn kept_records_match_as_handles() {
    // Files the kept records under their own value (the handle they stand
    // for), counting them.
    fn spill(m: &mut Matcher<u64>, n: &mut usize) {
        m.spill(|r| {
            *n += 1;
            r
        });
    }
    let mut rng = Rng::new(0x4ec0_4d5e);
    let mut a: Matcher<u64> = Matcher::default();
    let mut b = Matcher::new();
    let mut handle = 1u64;
    let (mut kept, mut filed, mut spilled) = (0, 0, 0);
    let mut live = std::collections::HashSet::new();
    for step in 0..20_000u64 {
        // Messages mostly come while receives wait (few go unexpected).
        let waiting = b.queues.iter().any(|q| !q.posted.is_empty());
        match rng.below(20) {
            r if r <= 8 || (r <= 18 && !waiting && rng.below(10) > 0) => {
                let mut req = random_recv(&mut rng, 0, step);
                if req.kind == Kind::Msg && rng.below(60) == 0 {
                    req = req.with_flags(FI_MULTI_RECV);
                }
                let h = handle;
                handle += 1;
                live.insert(h);
                let mut rb = req.clone();
                rb.handle = h;
                let want = b.post(rb);
                match a.post_plain_with(req, h) {
                    Ok(()) => assert_eq!(want.unwrap(), Vec::new(), "step {step}"),
                    Err((mut back, rec)) => {
                        assert_eq!(rec, h, "step {step}: the record comes back");
                        spill(&mut a, &mut spilled);
                        back.handle = h;
                        assert_eq!(a.post(back), want, "step {step}");
                    }
                }
            }
            9..=18 => {
                let payload = vec![step as u8; rng.below(80) as usize];
                let mut kind = if rng.below(2) == 0 { Kind::Msg } else { Kind::Tagged };
                if b.queues[kind.idx()].posted.is_empty() {
                    kind = if kind == Kind::Msg { Kind::Tagged } else { Kind::Msg };
                }
                let (mut src, mut tag) = (rng.below(3), if kind == Kind::Tagged { rng.below(4) } else { 0 });
                // Mostly for the receive first in line, as in a stream.
                if let Some(p) = b.queues[kind.idx()].posted.front().filter(|_| rng.below(10) < 9) {
                    if p.src != ANY {
                        src = p.src;
                    }
                    if kind == Kind::Tagged {
                        tag = p.tag;
                    }
                }
                let inc = Incoming { src, kind, tag, data: None, body: Body::Eager(&payload), origin: None };
                let want = b.arrive(inc.clone());
                match a.take_head_with(kind, src, tag, None, payload.len()) {
                    Some((mut d, rec)) => {
                        match rec {
                            Some(r) => {
                                assert_eq!(d.handle, 0, "step {step}: a kept receive has no handle");
                                d.handle = r;
                                kept += 1;
                            }
                            None => filed += 1,
                        }
                        assert!(live.remove(&d.handle), "step {step}: receive {} delivered once", d.handle);
                        assert_eq!(Action::Deliver(d), want, "step {step}");
                    }
                    None => {
                        spill(&mut a, &mut spilled);
                        assert_eq!(a.arrive(inc), want, "step {step}");
                    }
                }
            }
            _ => {
                let ctx = rng.below(step + 1);
                spill(&mut a, &mut spilled);
                assert_eq!(a.cancel(ctx), b.cancel(ctx), "step {step}");
            }
        }
        if !a.keeps_records() {
            assert_eq!(format!("{:?}", a.queues), format!("{:?}", b.queues), "step {step}");
        }
    }
    assert!(kept > 1000 && filed > 100 && spilled > 100, "every path exercised: {kept} kept, {filed} filed, {spilled} spilled");
}

#[test]
fn untagged_matches_in_posting_order() {
    let mut m = Matcher::new();
    assert!(m.post(RecvRequest::msg(1, 0xa, 100)).unwrap().is_empty());
    assert!(m.post(RecvRequest::msg(2, 0xb, 100)).unwrap().is_empty());
    let d = delivered(&m.arrive(eager(5, b"first"))).clone();
    assert_eq!((d.handle, d.context, d.offset, d.len, d.olen, d.src), (1, 0xa, 0, 5, 0, 5));
    assert_eq!(d.flags, FI_RECV | FI_MSG);
    assert!(d.last && !d.multi_recv);
    let d = delivered(&m.arrive(eager(6, b"second"))).clone();
    assert_eq!((d.handle, d.len, d.src), (2, 6, 6));
    assert_eq!(m.posted_count(Kind::Msg), 0);
    assert_eq!(m.arrive(eager(5, b"third")), Action::Queued);
}

#[test]
fn tagged_ignore_mask_and_order() {
    let mut m = Matcher::new();
    m.post(RecvRequest::tagged(1, 0xa, 64, 0x10, 0x0f)).unwrap(); // 0x10..=0x1f
    m.post(RecvRequest::tagged(2, 0xb, 64, 0x1f, 0)).unwrap(); // exactly 0x1f
                                                               // 0x20 matches neither.
    assert_eq!(m.arrive(teager(1, 0x20, b"x")), Action::Queued);
    // 0x1f matches both: the first posted wins, even though the second is an exact match.
    let d = delivered(&m.arrive(teager(1, 0x1f, b"y"))).clone();
    assert_eq!((d.handle, d.tag, d.flags), (1, 0x1f, FI_RECV | FI_TAGGED));
    // 0x13 no longer has a receive (the mask one is used up; exact 0x1f does not match).
    assert_eq!(m.arrive(teager(1, 0x13, b"z")), Action::Queued);
    assert_eq!(delivered(&m.arrive(teager(1, 0x1f, b"w"))).handle, 2);
    // High bits in the ignore mask.
    m.post(RecvRequest::tagged(3, 0xc, 64, 0xffff_0000_0000_0001, 0xffff_0000_0000_0000)).unwrap();
    assert_eq!(delivered(&m.arrive(teager(1, 0x1234_0000_0000_0001, b"v"))).handle, 3);
    assert!(tag_matches(5, 0, 5));
    assert!(!tag_matches(5, 0, 4));
    assert!(tag_matches(5, 1, 4));
    assert!(tag_matches(0, u64::MAX, 0xdead));
}

#[test]
fn tagged_and_untagged_queues_are_separate() {
    let mut m = Matcher::new();
    m.post(RecvRequest::msg(1, 0xa, 64)).unwrap();
    assert_eq!(m.arrive(teager(1, 0, b"t")), Action::Queued, "tagged message does not take an untagged receive");
    assert_eq!(m.unexpected_count(Kind::Tagged), 1);
    assert_eq!(m.posted_count(Kind::Msg), 1);
    m.post(RecvRequest::tagged(2, 0xb, 64, 0, u64::MAX)).unwrap().pop().map(|a| assert_eq!(delivered(&a).handle, 2)).unwrap();
    assert_eq!(m.unexpected_count(Kind::Tagged), 0);
    // An untagged receive does not see tagged unexpected messages.
    assert_eq!(m.arrive(teager(1, 0, b"t")), Action::Queued);
    assert!(m.post(RecvRequest::msg(3, 0xc, 64)).unwrap().is_empty());
    assert_eq!(m.posted_count(Kind::Msg), 2);
}

#[test]
fn directed_receive_filters_by_source() {
    let mut m = Matcher::new();
    m.post(RecvRequest::msg(1, 0xa, 64).from(2)).unwrap();
    assert_eq!(m.arrive(eager(1, b"from1")), Action::Queued);
    assert_eq!(delivered(&m.arrive(eager(2, b"from2"))).handle, 1);
    // A wildcard receive takes the queued message from 1.
    let a = m.post(RecvRequest::msg(2, 0xb, 64).from(ANY)).unwrap();
    match &a[..] {
        [Action::DeliverQueued(d, bytes)] => {
            assert_eq!((d.handle, d.src, d.len), (2, 1, 5));
            assert_eq!(bytes, b"from1");
        }
        other => panic!("{other:?}"),
    }
    // A directed receive skips unexpected messages from other sources.
    m.arrive(eager(1, b"a1"));
    m.arrive(eager(3, b"a3"));
    m.arrive(eager(1, b"b1"));
    let a = m.post(RecvRequest::msg(3, 0xc, 64).from(3)).unwrap();
    assert!(matches!(&a[..], [Action::DeliverQueued(d, b)] if d.src == 3 && b == b"a3"));
    let a = m.post(RecvRequest::tagged(9, 0xd, 64, 0, 0).from(1)).unwrap();
    assert!(a.is_empty(), "tagged directed receive does not see untagged messages");
    let a = m.post(RecvRequest::msg(4, 0xe, 64).from(1)).unwrap();
    assert!(matches!(&a[..], [Action::DeliverQueued(_, b)] if b == b"a1"), "arrival order within a source");
}

#[test]
fn unknown_senders_resolved_after_av_insert() {
    // fabtests' fi_unexpected_msg: two messages from a sender the AV does not
    // hold yet; the first is taken by an any-source receive, then the
    // address is inserted and a directed receive must take the second.
    let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:4000".parse().unwrap();
    let unknown = |tag, p| Incoming { src: FI_ADDR_NOTAVAIL, kind: Kind::Tagged, tag, data: None, body: Body::Eager(p), origin: Some(a) };
    let mut m = Matcher::new();
    assert_eq!(m.arrive(unknown(5, b"first")), Action::Queued);
    assert_eq!(m.arrive(unknown(5, b"second")), Action::Queued);
    // A message from another unknown sender, and one from a known sender (no origin kept).
    let other = Incoming { src: FI_ADDR_NOTAVAIL, kind: Kind::Msg, tag: 0, data: None, body: Body::Eager(b"b"), origin: Some(b) };
    assert_eq!(m.arrive(other), Action::Queued);
    assert_eq!(m.arrive(Incoming { origin: Some(b), ..teager(9, 5, b"known") }), Action::Queued);
    let got = m.post(RecvRequest::tagged(1, 0x1, 64, 5, 0).from(ANY)).unwrap();
    assert!(matches!(&got[..], [Action::DeliverQueued(d, p)] if d.src == FI_ADDR_NOTAVAIL && p == b"first"));
    // Before the insert, a directed receive for 7 finds nothing of a's.
    assert!(m.post(RecvRequest::tagged(2, 0x2, 64, 5, 0).from(7)).unwrap().is_empty());
    assert_eq!(m.cancel(0x2).map(|c| c.handle), Some(2));
    // The AV now maps a to 7 (b is still unknown).
    let n = m.resolve_unknown(|x| if *x == a { 7 } else { FI_ADDR_NOTAVAIL });
    assert_eq!(n, 1, "only a's queued message is resolved");
    let got = m.post(RecvRequest::tagged(3, 0x3, 64, 5, 0).from(7)).unwrap();
    assert!(matches!(&got[..], [Action::DeliverQueued(d, p)] if d.src == 7 && p == b"second"), "{got:?}");
    // b's message keeps FI_ADDR_NOTAVAIL until b is inserted, then says so.
    assert_eq!(m.resolve_unknown(|_| FI_ADDR_NOTAVAIL), 0);
    assert_eq!(m.resolve_unknown(|x| if *x == b { 8 } else { FI_ADDR_NOTAVAIL }), 1);
    let got = m.post(RecvRequest::msg(4, 0x4, 64).from(ANY)).unwrap();
    assert!(matches!(&got[..], [Action::DeliverQueued(d, _)] if d.src == 8));
    // The known sender's message was never relabelled (its src stood).
    assert_eq!(m.resolve_unknown(|_| 99), 0);
    let got = m.post(RecvRequest::tagged(5, 0x5, 64, 5, 0).from(9)).unwrap();
    assert!(matches!(&got[..], [Action::DeliverQueued(d, p)] if d.src == 9 && p == b"known"));
}

#[test]
fn unexpected_messages_are_taken_in_arrival_order() {
    let mut m = Matcher::new();
    assert_eq!(m.arrive(teager(1, 7, b"one")), Action::Queued);
    assert_eq!(m.arrive(teager(1, 8, b"two")), Action::Queued);
    assert_eq!(m.arrive(teager(1, 7, b"three")), Action::Queued);
    let take = |m: &mut Matcher, tag, ignore| match m.post(RecvRequest::tagged(0, 0, 64, tag, ignore)).unwrap().pop() {
        Some(Action::DeliverQueued(_, b)) => b,
        other => panic!("{other:?}"),
    };
    assert_eq!(take(&mut m, 7, 0), b"one");
    assert_eq!(take(&mut m, 0, u64::MAX), b"two");
    assert_eq!(take(&mut m, 0, u64::MAX), b"three");
    assert_eq!(m.unexpected_count(Kind::Tagged), 0);
}

#[test]
fn rendezvous_expected_and_unexpected() {
    let mut m = Matcher::new();
    m.post(RecvRequest::tagged(1, 0xa, 1 << 20, 3, 0)).unwrap();
    let inc = Incoming { src: 4, kind: Kind::Tagged, tag: 3, data: Some(0xbeef), body: Body::Rndv(rndv(77, 100_000)), origin: None };
    match m.arrive(inc) {
        Action::Read(d, r) => {
            assert_eq!((d.handle, d.offset, d.len, d.olen, d.data), (1, 0, 100_000, 0, 0xbeef));
            assert_eq!(d.flags, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
            assert_eq!(r, rndv(77, 100_000));
            assert_eq!(m.read_finished(&d), d, "a plain receive's delivery is final");
        }
        other => panic!("{other:?}"),
    }
    // Unexpected rendezvous, then a receive smaller than the message: truncated read.
    let inc = Incoming { src: 4, kind: Kind::Msg, tag: 0, data: None, body: Body::Rndv(rndv(78, 50_000)), origin: None };
    assert_eq!(m.arrive(inc), Action::Queued);
    match &m.post(RecvRequest::msg(2, 0xb, 30_000)).unwrap()[..] {
        [Action::Read(d, r)] => {
            assert_eq!((d.handle, d.len, d.olen, r.msg_id), (2, 30_000, 20_000, 78));
            assert!(d.last);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn truncation_reports_overflow_length() {
    let mut m = Matcher::new();
    m.post(RecvRequest::msg(1, 0xa, 4)).unwrap();
    let d = delivered(&m.arrive(eager(1, b"0123456789"))).clone();
    assert_eq!((d.len, d.olen), (4, 6));
    // Zero-length buffer, zero-length message.
    m.post(RecvRequest::msg(2, 0xb, 0)).unwrap();
    let d = delivered(&m.arrive(eager(1, b"abc"))).clone();
    assert_eq!((d.len, d.olen), (0, 3));
    m.post(RecvRequest::msg(3, 0xc, 0)).unwrap();
    let d = delivered(&m.arrive(eager(1, b""))).clone();
    assert_eq!((d.len, d.olen), (0, 0));
}

#[test]
fn multi_recv_offsets_alignment_and_release() {
    let mut m = Matcher::new();
    m.set_min_multi_recv(16);
    m.post(RecvRequest::msg(1, 0xa, 64).with_flags(FI_MULTI_RECV)).unwrap();
    let mut got = vec![];
    for (i, n) in [10usize, 10, 10].into_iter().enumerate() {
        let payload = vec![i as u8; n];
        let d = delivered(&m.arrive(eager(1, &payload))).clone();
        assert!(d.multi_recv && !d.last);
        assert_eq!(d.flags & FI_MULTI_RECV, 0);
        got.push((d.offset, d.len));
    }
    // 10 bytes each, starts rounded up to 8: 0, 16, 32. End 42 -> next start 48, free 16 (not < 16).
    assert_eq!(got, vec![(0, 10), (16, 10), (32, 10)]);
    assert_eq!(m.posted_count(Kind::Msg), 1);
    let d = delivered(&m.arrive(eager(1, &[9; 5]))).clone();
    // At 48, end 53 -> next start 56, free 8 < 16: released with this completion.
    assert_eq!((d.offset, d.len, d.olen), (48, 5, 0));
    assert!(d.last);
    assert_eq!(d.flags, FI_RECV | FI_MSG | FI_MULTI_RECV);
    assert_eq!(m.posted_count(Kind::Msg), 0);
    assert_eq!(m.arrive(eager(1, b"late")), Action::Queued);
}

#[test]
fn multi_recv_truncates_at_end_and_min_zero_releases_when_full() {
    let mut m = Matcher::new();
    m.set_min_multi_recv(8);
    m.post(RecvRequest::msg(1, 0xa, 64).with_flags(FI_MULTI_RECV)).unwrap();
    assert_eq!(delivered(&m.arrive(eager(1, &[0; 20]))).offset, 0);
    // Next start 24, room 40: a 100-byte message is truncated by 60 and releases the buffer.
    let d = delivered(&m.arrive(eager(1, &[0; 100]))).clone();
    assert_eq!((d.offset, d.len, d.olen, d.last), (24, 40, 60, true));
    assert!(d.flags & FI_MULTI_RECV != 0);

    m.set_min_multi_recv(0);
    m.post(RecvRequest::msg(2, 0xb, 16).with_flags(FI_MULTI_RECV)).unwrap();
    // Zero-length messages take no room.
    let d = delivered(&m.arrive(eager(1, b""))).clone();
    assert_eq!((d.offset, d.len, d.last), (0, 0, false));
    let d = delivered(&m.arrive(eager(1, &[1; 3]))).clone();
    assert_eq!((d.offset, d.last), (0, false));
    // Start 8, exactly fills the buffer: free 0 releases even with min 0.
    let d = delivered(&m.arrive(eager(1, &[1; 8]))).clone();
    assert_eq!((d.offset, d.len, d.last), (8, 8, true));
}

#[test]
fn multi_recv_min_is_taken_when_posted() {
    let mut m = Matcher::new();
    m.set_min_multi_recv(32);
    m.post(RecvRequest::msg(1, 0xa, 64).with_flags(FI_MULTI_RECV)).unwrap();
    m.set_min_multi_recv(0);
    assert_eq!(m.min_multi_recv(), 0);
    // 40 bytes -> free 24 < 32 (the value when posted): released.
    assert!(delivered(&m.arrive(eager(1, &[0; 40]))).last);
}

#[test]
fn multi_recv_drains_unexpected_on_post() {
    let mut m = Matcher::new();
    m.set_min_multi_recv(16);
    for i in 0..5u8 {
        m.arrive(eager(1 + (i as u64 % 2), &[i; 12]));
    }
    // Directed to source 1: takes messages 0, 2, 4 (offsets 0, 16, 32) and stays posted (free 16).
    let a = m.post(RecvRequest::msg(1, 0xa, 64).with_flags(FI_MULTI_RECV).from(1)).unwrap();
    let got: Vec<_> = a
        .iter()
        .map(|a| match a {
            Action::DeliverQueued(d, b) => (d.offset, b[0], d.last),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, vec![(0, 0, false), (16, 2, false), (32, 4, false)]);
    assert_eq!(m.posted_count(Kind::Msg), 1);
    assert_eq!(m.unexpected_count(Kind::Msg), 2);
    // Another buffer takes the two from source 2 and is released by the second
    // (after it: end 28, next start 32, free 8 < 16).
    let a = m.post(RecvRequest::msg(2, 0xb, 40).with_flags(FI_MULTI_RECV)).unwrap();
    let got: Vec<_> = a.iter().map(|a| (delivered(a).offset, delivered(a).last)).collect();
    assert_eq!(got, vec![(0, false), (16, true)]);
    assert_eq!(m.unexpected_count(Kind::Msg), 0);
}

#[test]
fn multi_recv_release_flag_waits_for_running_reads() {
    let mut m = Matcher::new();
    m.set_min_multi_recv(16);
    m.post(RecvRequest::msg(1, 0xa, 128).with_flags(FI_MULTI_RECV)).unwrap();
    let r1 = match m.arrive(Incoming { src: 1, kind: Kind::Msg, tag: 0, data: None, body: Body::Rndv(rndv(1, 40)), origin: None }) {
        Action::Read(d, _) => d,
        other => panic!("{other:?}"),
    };
    assert_eq!((r1.offset, r1.len, r1.last), (0, 40, false));
    let r2 = match m.arrive(Incoming { src: 1, kind: Kind::Msg, tag: 0, data: None, body: Body::Rndv(rndv(2, 40)), origin: None }) {
        Action::Read(d, _) => d,
        other => panic!("{other:?}"),
    };
    assert_eq!(r2.offset, 40);
    // Eager at 80, end 110 -> start 112, free 16: stays. Next eager releases it,
    // but reads are running: no flag yet.
    assert!(!delivered(&m.arrive(eager(1, &[0; 30]))).last);
    let e = delivered(&m.arrive(eager(1, &[0; 4]))).clone();
    assert_eq!(e.offset, 112);
    assert!(!e.last && e.flags & FI_MULTI_RECV == 0);
    assert_eq!(m.posted_count(Kind::Msg), 0);
    // Reads finish out of order; the last one to finish carries the flag.
    let f2 = m.read_finished(&r2);
    assert!(!f2.last && f2.flags & FI_MULTI_RECV == 0);
    let f1 = m.read_finished(&r1);
    assert!(f1.last && f1.flags & FI_MULTI_RECV != 0);

    // A read finishing while the buffer is still posted does not release it.
    m.post(RecvRequest::msg(2, 0xb, 128).with_flags(FI_MULTI_RECV)).unwrap();
    let r = match m.arrive(Incoming { src: 1, kind: Kind::Msg, tag: 0, data: None, body: Body::Rndv(rndv(3, 8)), origin: None }) {
        Action::Read(d, _) => d,
        other => panic!("{other:?}"),
    };
    let f = m.read_finished(&r);
    assert!(!f.last && f.flags & FI_MULTI_RECV == 0);
    // Now the eager that releases it is the last completion: it carries the flag.
    let e = delivered(&m.arrive(eager(1, &[0; 110]))).clone();
    assert!(e.last && e.flags & FI_MULTI_RECV != 0);
}

#[test]
fn peek_claim_discard() {
    let mut m = Matcher::new();
    let peek = |tag, ctx, flags| RecvRequest::tagged(0, ctx, 0, tag, 0).with_flags(FI_PEEK | flags);
    assert_eq!(m.post(peek(5, 0x100, 0)).unwrap(), vec![Action::NoMessage { context: 0x100 }]);
    m.arrive(Incoming { src: 3, kind: Kind::Tagged, tag: 5, data: Some(9), body: Body::Eager(b"hello"), origin: None });
    // Plain peek reports and leaves the message.
    let info = MsgInfo { src: 3, kind: Kind::Tagged, tag: 5, data: Some(9), len: 5 };
    assert_eq!(m.post(peek(5, 0x101, 0)).unwrap(), vec![Action::Peeked { context: 0x101, info, claimed: false }]);
    assert_eq!(info.cq_flags(), FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
    assert_eq!(m.unexpected_count(Kind::Tagged), 1);
    // Directed peek from another source finds nothing.
    assert_eq!(m.post(peek(5, 0x102, 0).from(4)).unwrap(), vec![Action::NoMessage { context: 0x102 }]);
    // Peek + claim: the message is reserved.
    assert_eq!(m.post(peek(5, 0x103, FI_CLAIM)).unwrap(), vec![Action::Peeked { context: 0x103, info, claimed: true }]);
    assert_eq!(
        m.post(peek(5, 0x104, 0)).unwrap(),
        vec![Action::NoMessage { context: 0x104 }],
        "claimed messages are invisible to peek"
    );
    assert!(m.post(RecvRequest::tagged(1, 0x105, 64, 5, 0)).unwrap().is_empty(), "and to ordinary receives");
    assert_eq!(m.posted_count(Kind::Tagged), 1);
    // Claim with another context fails; with the same context delivers.
    assert_eq!(m.post(RecvRequest::tagged(2, 0x999, 64, 5, 0).with_flags(FI_CLAIM)), Err(FiError::INVAL));
    match &m.post(RecvRequest::tagged(2, 0x103, 3, 0, 0).with_flags(FI_CLAIM)).unwrap()[..] {
        [Action::DeliverQueued(d, b)] => {
            assert_eq!((d.handle, d.context, d.len, d.olen, d.tag, d.data), (2, 0x103, 3, 2, 5, 9));
            assert_eq!(b, b"hello");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m.unexpected_count(Kind::Tagged), 0);

    // Peek + discard drops the first matching message; a rendezvous one needs a FIN.
    m.arrive(Incoming { src: 3, kind: Kind::Tagged, tag: 6, data: None, body: Body::Rndv(rndv(44, 1000)), origin: None });
    m.arrive(teager(3, 6, b"keep"));
    match &m.post(peek(6, 0x200, FI_DISCARD)).unwrap()[..] {
        [Action::Discarded { context: 0x200, info, rndv: Some(r) }] => assert_eq!((info.len, r.msg_id), (1000, 44)),
        other => panic!("{other:?}"),
    }
    // Claim + discard.
    assert!(matches!(&m.post(peek(6, 0x201, FI_CLAIM)).unwrap()[..], [Action::Peeked { claimed: true, .. }]));
    match &m.post(RecvRequest::tagged(0, 0x201, 0, 0, 0).with_flags(FI_CLAIM | FI_DISCARD)).unwrap()[..] {
        [Action::Discarded { context: 0x201, info, rndv: None }] => assert_eq!(info.len, 4),
        other => panic!("{other:?}"),
    }
    assert_eq!(m.unexpected_count(Kind::Tagged), 0);
    assert_eq!(m.posted_count(Kind::Tagged), 1, "the earlier ordinary receive is still waiting");
}

#[test]
fn flag_validation() {
    let mut m = Matcher::new();
    assert_eq!(m.post(RecvRequest::tagged(1, 1, 8, 0, 0).with_flags(FI_MULTI_RECV)), Err(FiError::OPNOTSUPP));
    assert_eq!(m.post(RecvRequest::msg(1, 1, 8).with_flags(FI_PEEK)), Err(FiError::BADFLAGS));
    assert_eq!(m.post(RecvRequest::tagged(1, 1, 8, 0, 0).with_flags(FI_DISCARD)), Err(FiError::INVAL));
    assert_eq!(m.posted_count(Kind::Msg) + m.posted_count(Kind::Tagged), 0);
}

#[test]
fn cancel_removes_posted_receives() {
    let mut m = Matcher::new();
    assert_eq!(m.cancel(0x1), None);
    m.post(RecvRequest::msg(1, 0xa, 8)).unwrap();
    m.post(RecvRequest::tagged(2, 0xb, 8, 42, 0)).unwrap();
    m.post(RecvRequest::msg(3, 0xc, 8)).unwrap();
    let c = m.cancel(0xb).unwrap();
    assert_eq!(c, Canceled { handle: 2, context: 0xb, kind: Kind::Tagged, tag: 42, flags: FI_RECV | FI_TAGGED, last: true });
    assert_eq!(m.cancel(0xb), None, "only once");
    assert_eq!(m.arrive(teager(1, 42, b"x")), Action::Queued, "canceled receive no longer matches");
    assert_eq!(m.cancel(0xa).unwrap().handle, 1);
    // The next untagged message goes to the remaining receive.
    assert_eq!(delivered(&m.arrive(eager(1, b"y"))).handle, 3);

    // Multi-receive: the cancel entry releases it, unless reads are running.
    m.set_min_multi_recv(1);
    m.post(RecvRequest::msg(4, 0xd, 64).with_flags(FI_MULTI_RECV)).unwrap();
    assert_eq!(m.cancel(0xd).unwrap().flags, FI_RECV | FI_MSG | FI_MULTI_RECV);
    m.post(RecvRequest::msg(5, 0xe, 64).with_flags(FI_MULTI_RECV)).unwrap();
    let r = match m.arrive(Incoming { src: 1, kind: Kind::Msg, tag: 0, data: None, body: Body::Rndv(rndv(1, 8)), origin: None }) {
        Action::Read(d, _) => d,
        other => panic!("{other:?}"),
    };
    let c = m.cancel(0xe).unwrap();
    assert_eq!((c.flags, c.last), (FI_RECV | FI_MSG, false));
    let f = m.read_finished(&r);
    assert!(f.last && f.flags & FI_MULTI_RECV != 0);

    m.post(RecvRequest::msg(6, 0xf, 8)).unwrap();
    m.post(RecvRequest::tagged(7, 0x10, 8, 0, 0)).unwrap();
    let all: Vec<_> = m.cancel_all().iter().map(|c| c.handle).collect();
    assert_eq!(all, vec![6, 7]);
}

#[test]
fn drop_source_forgets_its_unexpected_messages() {
    let mut m = Matcher::new();
    m.arrive(eager(1, b"a"));
    m.arrive(Incoming { src: 2, kind: Kind::Tagged, tag: 0, data: None, body: Body::Rndv(rndv(5, 10)), origin: None });
    m.arrive(eager(2, b"b"));
    let r = m.drop_source(2);
    assert_eq!(r.iter().map(|r| r.msg_id).collect::<Vec<_>>(), vec![5]);
    assert_eq!(m.unexpected_count(Kind::Msg), 1);
    assert_eq!(m.unexpected_count(Kind::Tagged), 0);
}

#[test]
fn from_message_maps_envelopes() {
    use crate::rdm::proto::Envelope;
    let m = Message::Eager { credits: 1, msg_id: 2, env: Envelope { tag: Some(7), data: Some(3) }, payload: b"p" };
    let inc = Incoming::from_message(9, None, m).unwrap();
    assert_eq!((inc.src, inc.kind, inc.tag, inc.data, inc.len()), (9, Kind::Tagged, 7, Some(3), 1));
    let segs = vec![Segment { addr: 1, len: 5, rkey: 2 }];
    let m = Message::Rts { credits: 0, msg_id: 4, env: Envelope::default(), len: 5, segs: segs.clone() };
    let inc = Incoming::from_message(9, None, m).unwrap();
    assert_eq!((inc.kind, inc.body), (Kind::Msg, Body::Rndv(Rendezvous { msg_id: 4, len: 5, segs })));
    assert!(Incoming::from_message(9, None, Message::Credit { credits: 1, release: 0, recall: None }).is_none());
    assert!(Incoming::from_message(9, None, Message::Fin { credits: 1, msg_id: 1, len: 0 }).is_none());
}

/// Randomized check against a reference: every arriving message goes to the
/// first posted receive (in posting order) that accepts it, otherwise waits;
/// every receive takes the first accepting unexpected message (in arrival
/// order); nothing is lost or duplicated; and messages with the same source
/// and tag are received in arrival order, whatever mix of masks and
/// directed receives is used.
#[test]
fn prop_matching_agrees_with_reference_model() {
    struct RefRecv {
        handle: u64,
        src: u64,
        tag: u64,
        ignore: u64,
    }
    for seed in 1..=40u64 {
        let mut r = Rng::new(seed);
        let mut m = Matcher::new();
        let mut posted: Vec<RefRecv> = vec![];
        let mut unexpected: Vec<(u64, u64, u64)> = vec![]; // (seq, src, tag)
        let mut received: Vec<(u64, u64, u64)> = vec![]; // in match order
        let mut sent = 0u64;
        let mut next_handle = 1u64;
        let accepts = |p: &RefRecv, src: u64, tag: u64| (p.src == ANY || p.src == src) && tag_matches(p.tag, p.ignore, tag);
        for _ in 0..2000 {
            if r.chance(1, 2) {
                let (src, tag) = (r.below(3), r.below(4));
                let seq = sent;
                sent += 1;
                let payload = seq.to_le_bytes();
                let a = m.arrive(teager(src, tag, &payload));
                match posted.iter().position(|p| accepts(p, src, tag)) {
                    Some(i) => {
                        let want = posted.remove(i).handle;
                        let d = delivered(&a);
                        assert_eq!((d.handle, d.src, d.tag), (want, src, tag), "seed {seed}");
                        received.push((seq, src, tag));
                    }
                    None => {
                        assert_eq!(a, Action::Queued);
                        unexpected.push((seq, src, tag));
                    }
                }
            } else {
                let src = if r.chance(1, 2) { ANY } else { r.below(3) };
                let (tag, ignore) = (r.below(4), [0, 1, 2, 3, u64::MAX][r.below(5) as usize]);
                let handle = next_handle;
                next_handle += 1;
                let a = m.post(RecvRequest::tagged(handle, handle, 8, tag, ignore).from(src)).unwrap();
                let rr = RefRecv { handle, src, tag, ignore };
                match unexpected.iter().position(|&(_, s, t)| accepts(&rr, s, t)) {
                    Some(i) => {
                        let (seq, s, t) = unexpected.remove(i);
                        match &a[..] {
                            [Action::DeliverQueued(d, b)] => {
                                assert_eq!((d.handle, d.src, d.tag), (handle, s, t));
                                assert_eq!(b[..], seq.to_le_bytes());
                            }
                            other => panic!("seed {seed}: {other:?}"),
                        }
                        received.push((seq, s, t));
                    }
                    None => {
                        assert!(a.is_empty());
                        posted.push(rr);
                    }
                }
            }
            assert_eq!(m.posted_count(Kind::Tagged), posted.len());
            assert_eq!(m.unexpected_count(Kind::Tagged), unexpected.len());
        }
        // Per (source, tag), matched in arrival order.
        for src in 0..3 {
            for tag in 0..4 {
                let seqs: Vec<u64> = received.iter().filter(|x| x.1 == src && x.2 == tag).map(|x| x.0).collect();
                assert!(seqs.windows(2).all(|w| w[0] < w[1]), "seed {seed}: order broken for ({src},{tag})");
            }
        }
        assert_eq!(received.len() + unexpected.len(), sent as usize, "nothing lost or duplicated");
    }
}
