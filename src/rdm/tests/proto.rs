//! Unit tests of `src/rdm/proto.rs` (kept apart so the module reads in one sitting).

use super::*;

/// Tiny xorshift64* generator for the property tests (no extra crates).
pub(crate) struct Rng(u64);
impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform-ish in 0..n (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn env(tag: Option<u64>, data: Option<u32>) -> Envelope {
    Envelope { tag, data }
}

#[test]
fn header_layout_is_as_documented() {
    let payload = b"hello";
    let m = Message::Eager { credits: 0x0102, msg_id: 0x1122_3344_5566_7788, env: env(Some(0xAABB), Some(0xDEAD_BEEF)), payload };
    let b = m.to_vec().unwrap();
    assert_eq!(b.len(), HEADER_LEN + 5);
    assert_eq!(b[0], VERSION);
    assert_eq!(b[1], Op::Eager as u8);
    assert_eq!(&b[2..4], &(F_TAGGED | F_REMOTE_CQ_DATA).to_le_bytes());
    assert_eq!(&b[4..6], &[0x02, 0x01], "credits, little-endian");
    assert_eq!(&b[6..8], &[0, 0], "aux");
    assert_eq!(&b[8..16], &0xAABBu64.to_le_bytes());
    assert_eq!(&b[16..24], &0xDEAD_BEEFu64.to_le_bytes());
    assert_eq!(&b[24..32], &0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(&b[32..40], &5u64.to_le_bytes());
    assert_eq!(&b[40..], payload);
    // The split-header helper produces the same bytes.
    assert_eq!(&eager_header(0x0102, 0x1122_3344_5566_7788, env(Some(0xAABB), Some(0xDEAD_BEEF)), 5).unwrap()[..], &b[..40]);

    let segs = vec![Segment { addr: 0x1000, len: 7, rkey: 0x55 }, Segment { addr: 0x9000, len: 3, rkey: 0x66 }];
    let r = Message::Rts { credits: 1, msg_id: 9, env: env(None, None), len: 10, segs };
    let b = r.to_vec().unwrap();
    assert_eq!(b.len(), HEADER_LEN + 2 * SEG_LEN);
    assert_eq!(b[1], Op::RndvRts as u8);
    assert_eq!(&b[6..8], &2u16.to_le_bytes(), "aux = segment count");
    assert_eq!(&b[32..40], &10u64.to_le_bytes());
    assert_eq!(&b[40..48], &0x1000u64.to_le_bytes());
    assert_eq!(&b[48..56], &7u64.to_le_bytes());
    assert_eq!(&b[56..60], &0x55u32.to_le_bytes());
    assert_eq!(&b[60..64], &[0, 0, 0, 0]);
    assert_eq!(&b[64..72], &0x9000u64.to_le_bytes());

    let n = Message::Nack { credits: 0, msg_id: 4, err: 5 }.to_vec().unwrap();
    assert_eq!(&n[6..8], &5u16.to_le_bytes(), "aux = error code");
}

#[test]
fn decode_rejects_malformed_headers() {
    let good = Message::Eager { credits: 3, msg_id: 1, env: env(None, None), payload: b"abcd" }.to_vec().unwrap();
    assert!(decode(&good).is_ok());
    // Too short.
    assert_eq!(decode(&good[..39]), Err(ProtoError::Short { need: 40, got: 39 }));
    assert_eq!(decode(&[]), Err(ProtoError::Short { need: 40, got: 0 }));
    // Version.
    let mut b = good.clone();
    b[0] = 1;
    assert_eq!(decode(&b), Err(ProtoError::Version(1)), "version 1 peers are refused");
    // Op.
    let mut b = good.clone();
    b[1] = 0;
    assert_eq!(decode(&b), Err(ProtoError::Op(0)));
    b[1] = 6;
    assert_eq!(decode(&b), Err(ProtoError::Op(6)));
    // Unknown flag.
    let mut b = good.clone();
    b[2] = 0x08;
    assert!(matches!(decode(&b), Err(ProtoError::Flags { .. })));
    let mut b = good.clone();
    b[2] = F_RECALL as u8;
    assert!(matches!(decode(&b), Err(ProtoError::Flags { .. })), "F_RECALL is for CREDIT only");
    // Tag without F_TAGGED.
    let mut b = good.clone();
    b[8] = 1;
    assert_eq!(decode(&b), Err(ProtoError::Field("tag")));
    // CQ data beyond 4 bytes.
    let mut b = good.clone();
    b[2] = F_REMOTE_CQ_DATA as u8;
    b[20] = 1;
    assert_eq!(decode(&b), Err(ProtoError::Field("cq data")));
    // Payload length must match what arrived, both ways.
    assert_eq!(decode(&good[..42]), Err(ProtoError::Length { expected: 4, got: 2 }));
    let mut b = good.clone();
    b.push(0);
    assert_eq!(decode(&b), Err(ProtoError::Length { expected: 4, got: 5 }));
    let mut b = good.clone();
    b[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(decode(&b), Err(ProtoError::Length { .. })));
}

#[test]
fn decode_rejects_bad_rendezvous() {
    let seg = Segment { addr: 0x1000, len: 100, rkey: 1 };
    let good = Message::Rts { credits: 0, msg_id: 1, env: env(Some(5), None), len: 100, segs: vec![seg] }.to_vec().unwrap();
    assert!(decode(&good).is_ok());
    // Segment count 0 and beyond MAX_SEGS.
    let mut b = good.clone();
    b[6..8].copy_from_slice(&0u16.to_le_bytes());
    assert!(matches!(decode(&b), Err(ProtoError::Segments(_))));
    b[6..8].copy_from_slice(&(MAX_SEGS as u16 + 1).to_le_bytes());
    assert!(matches!(decode(&b), Err(ProtoError::Segments(_))));
    b[6..8].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(matches!(decode(&b), Err(ProtoError::Segments(_))));
    // Count says 2, one arrived.
    let mut b = good.clone();
    b[6..8].copy_from_slice(&2u16.to_le_bytes());
    assert_eq!(decode(&b), Err(ProtoError::Short { need: 88, got: 64 }));
    // Sum mismatch.
    let mut b = good.clone();
    b[32..40].copy_from_slice(&101u64.to_le_bytes());
    assert!(matches!(decode(&b), Err(ProtoError::Segments(_))));
    // Overflowing sum of two huge segments.
    let huge = Segment { addr: 0, len: u64::MAX / 2 + 1, rkey: 0 };
    let mut b = good[..HEADER_LEN].to_vec();
    b[6..8].copy_from_slice(&2u16.to_le_bytes());
    b[32..40].copy_from_slice(&0u64.to_le_bytes());
    for _ in 0..2 {
        let mut raw = [0u8; SEG_LEN];
        raw[8..16].copy_from_slice(&huge.len.to_le_bytes());
        b.extend_from_slice(&raw);
    }
    assert!(decode(&b).is_err());
    // Total beyond MAX_MSG_LEN.
    let big = Message::Rts {
        credits: 0,
        msg_id: 1,
        env: env(None, None),
        len: MAX_MSG_LEN + 1,
        segs: vec![Segment { addr: 0, len: MAX_MSG_LEN + 1, rkey: 0 }],
    };
    assert_eq!(big.to_vec(), Err(ProtoError::TooLarge(MAX_MSG_LEN + 1)));
    // Zero-length segment; segment wrapping the address space; reserved bytes.
    let z = Message::Rts { credits: 0, msg_id: 1, env: env(None, None), len: 0, segs: vec![Segment { addr: 0, len: 0, rkey: 0 }] };
    assert!(matches!(z.to_vec(), Err(ProtoError::Segments(_))));
    let mut b = good.clone();
    b[40..48].copy_from_slice(&(u64::MAX - 10).to_le_bytes());
    assert!(matches!(decode(&b), Err(ProtoError::Segments(_))));
    let mut b = good.clone();
    b[63] = 1;
    assert_eq!(decode(&b), Err(ProtoError::Field("segment reserved")));
}

#[test]
fn decode_rejects_bad_control_messages() {
    let fin = Message::Fin { credits: 2, msg_id: 7, len: 9 }.to_vec().unwrap();
    let mut b = fin.clone();
    b[2] = F_TAGGED as u8;
    assert!(matches!(decode(&b), Err(ProtoError::Flags { .. })));
    let mut b = fin.clone();
    b.push(0);
    assert!(matches!(decode(&b), Err(ProtoError::Length { .. })));
    let nack = Message::Nack { credits: 0, msg_id: 7, err: 5 }.to_vec().unwrap();
    let mut b = nack.clone();
    b[6] = 0;
    assert_eq!(decode(&b), Err(ProtoError::Field("nack error code")));
    let credit = Message::Credit { credits: 4, release: 0, recall: None }.to_vec().unwrap();
    let mut b = credit.clone();
    b[24] = 1;
    assert!(matches!(decode(&b), Err(ProtoError::Field(_))));
    // Version 2 CREDIT: release in aux, recall target in len under F_RECALL.
    let c = Message::Credit { credits: 4, release: 7, recall: Some(9) };
    let b = c.to_vec().unwrap();
    assert_eq!(&b[2..4], &F_RECALL.to_le_bytes());
    assert_eq!(&b[6..8], &7u16.to_le_bytes(), "aux = released credits");
    assert_eq!(&b[32..40], &9u64.to_le_bytes(), "len = recall target");
    assert_eq!(decode(&b), Ok(c));
    let mut v = b.clone();
    v[2..4].fill(0);
    assert_eq!(decode(&v), Err(ProtoError::Field("credit message field")), "len without F_RECALL");
    let mut v = b.clone();
    v[32..40].copy_from_slice(&70000u64.to_le_bytes());
    assert_eq!(decode(&v), Err(ProtoError::Field("recall target")));
    let mut v = b.clone();
    v[2] |= F_TAGGED as u8;
    assert!(matches!(decode(&v), Err(ProtoError::Flags { .. })));
    // F_RECALL only on CREDIT.
    let mut v = Message::Fin { credits: 0, msg_id: 1, len: 0 }.to_vec().unwrap();
    v[2] = F_RECALL as u8;
    assert!(matches!(decode(&v), Err(ProtoError::Flags { .. })));
    assert_eq!(Message::Nack { credits: 0, msg_id: 1, err: 0 }.to_vec(), Err(ProtoError::Field("nack error code")));
    // Encoding into a small buffer fails cleanly.
    let mut small = [0u8; 39];
    assert_eq!(Message::Credit { credits: 1, release: 0, recall: None }.encode(&mut small), Err(ProtoError::BufferTooSmall { need: 40, got: 39 }));
    assert_eq!(ProtoError::BufferTooSmall { need: 1, got: 0 }.fi_error(), FiError::TOOSMALL);
    assert_eq!(ProtoError::Version(9).fi_error(), FiError::IO);
}

fn random_env(r: &mut Rng) -> Envelope {
    env(if r.chance(1, 2) { Some(r.next()) } else { None }, if r.chance(1, 2) { Some(r.next() as u32) } else { None })
}

/// A random valid message; its payload lives in `store`.
fn random_message<'a>(r: &mut Rng, store: &'a [u8]) -> Message<'a> {
    let credits = r.next() as u16;
    let msg_id = r.next();
    match r.below(5) {
        0 => Message::Eager { credits, msg_id, env: random_env(r), payload: store },
        1 => {
            let n = 1 + r.below(MAX_SEGS as u64) as usize;
            let segs: Vec<Segment> = (0..n)
                .map(|_| {
                    let len = 1 + r.below(MAX_MSG_LEN / MAX_SEGS as u64);
                    Segment { addr: r.below(u64::MAX - len), len, rkey: r.next() as u32 }
                })
                .collect();
            let len = segs.iter().map(|s| s.len).sum();
            Message::Rts { credits, msg_id, env: random_env(r), len, segs }
        }
        2 => Message::Fin { credits, msg_id, len: r.below(MAX_MSG_LEN + 1) },
        3 => Message::Nack { credits, msg_id, err: 1 + r.below(u16::MAX as u64) as u16 },
        _ => Message::Credit { credits, release: r.next() as u16, recall: if r.chance(1, 2) { Some(r.next() as u16) } else { None } },
    }
}

#[test]
fn prop_encode_then_decode_is_identity() {
    let mut r = Rng::new(1);
    for _ in 0..20_000 {
        let n = r.below(300) as usize;
        let store = r.bytes(n);
        let m = random_message(&mut r, &store);
        let b = m.to_vec().expect("valid messages encode");
        assert_eq!(b.len(), m.encoded_len());
        assert_eq!(decode(&b).as_ref(), Ok(&m));
    }
}

#[test]
fn prop_decode_never_panics_on_random_bytes() {
    let mut r = Rng::new(2);
    let mut accepted = 0;
    for _ in 0..100_000 {
        let n = r.below(2 * MAX_RTS_LEN as u64) as usize;
        let mut b = r.bytes(n);
        // Make the header plausible half of the time, so the deeper checks run too.
        if b.len() >= HEADER_LEN && r.chance(1, 2) {
            b[0] = VERSION;
            b[1] = 1 + r.below(5) as u8;
            if r.chance(1, 2) {
                b[2..8].fill(0);
                b[2] = r.below(4) as u8;
                b[8..40].fill(0);
                if b[1] == Op::Eager as u8 {
                    let n = (b.len() - HEADER_LEN) as u64;
                    b[32..40].copy_from_slice(&n.to_le_bytes());
                }
            }
        }
        if let Ok(m) = decode(&b) {
            accepted += 1;
            assert_eq!(m.to_vec().unwrap(), b, "decoding is canonical");
        }
    }
    assert!(accepted > 0, "the generator should hit some valid messages");
}

/// Damages an encoding: `how` 0 flips a bit, 1 truncates, 2 extends.
fn mutate(r: &mut Rng, b: &mut Vec<u8>, how: u64) {
    match how {
        0 => {
            let i = r.below(b.len() as u64) as usize;
            b[i] ^= 1 << r.below(8);
        }
        1 => b.truncate(r.below(b.len() as u64) as usize),
        _ => {
            let n = 1 + r.below(30) as usize;
            b.extend(r.bytes(n))
        }
    }
}

#[test]
fn prop_mutated_valid_messages_decode_canonically_or_fail() {
    // Flip, truncate and extend valid encodings: whatever decode accepts must
    // re-encode to exactly the bytes it was given (no ignored bits).
    let mut r = Rng::new(3);
    for _ in 0..50_000 {
        let n = r.below(64) as usize;
        let store = r.bytes(n);
        let m = random_message(&mut r, &store);
        let mut b = m.to_vec().unwrap();
        let how = r.below(3);
        mutate(&mut r, &mut b, how);
        if let Ok(d) = decode(&b) {
            assert_eq!(d.to_vec().unwrap(), b);
        }
    }
}

#[test]
fn hello_roundtrip_and_validation() {
    let inc = 0x1122_3344_5566_7788u64;
    let h = Hello { grant: 5, max_credits: 32, incarnation: inc, max_eager: 16384, name: (0..28).collect() };
    let b = h.encode().unwrap();
    assert_eq!(
        &b[..18],
        &[VERSION, 28, 5, 0, 32, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0x40, 0x00, 0x00]
    );
    assert_eq!(b.len(), 46);
    assert_eq!(&b[18..], &h.name[..]);
    assert_eq!(Hello::decode(&b), Ok(h.clone()));
    // Zero padding (as rdma-cm delivers it) is accepted; anything else after the name is not.
    let mut p = b.clone();
    p.resize(56, 0);
    assert_eq!(Hello::decode(&p), Ok(h.clone()));
    p[55] = 1;
    assert!(Hello::decode(&p).is_err());
    assert_eq!(Hello::decode(&b[..17]), Err(ProtoError::Short { need: 18, got: 17 }));
    assert_eq!(Hello::decode(&b[..20]), Err(ProtoError::Short { need: 46, got: 20 }));
    let mut v = b.clone();
    v[0] = 9;
    assert_eq!(Hello::decode(&v), Err(ProtoError::Version(9)));
    let mut v = b.clone();
    v[1] = 39;
    assert_eq!(Hello::decode(&v), Err(ProtoError::TooLarge(39)));
    let mut v = b.clone();
    v[4..6].copy_from_slice(&2u16.to_le_bytes());
    assert!(Hello::decode(&v).is_err(), "a maximum below what the credit rules need");
    let mut v = b.clone();
    v[2..4].copy_from_slice(&33u16.to_le_bytes());
    assert_eq!(Hello::decode(&v), Err(ProtoError::Field("hello grant")), "a grant above the maximum");
    let mut v = b.clone();
    v[6..14].fill(0);
    assert_eq!(Hello::decode(&v), Err(ProtoError::Field("hello incarnation")), "incarnation 0 is never drawn");
    assert!(Hello { grant: 0, max_credits: 32, incarnation: 0, max_eager: 0, name: vec![] }.encode().is_err());
    // A zero grant is valid (the pool had nothing free).
    let z = Hello { grant: 0, max_credits: 3, incarnation: 1, max_eager: 0, name: vec![] };
    assert_eq!(Hello::decode(&z.encode().unwrap()), Ok(z));
    assert!(Hello { grant: 0, max_credits: 32, incarnation: 1, max_eager: 0, name: vec![0; 39] }.encode().is_err());
    // The largest HELLO (an IPv6 name is 28 bytes) fits the private data.
    assert_eq!(
        Hello { grant: 3, max_credits: 3, incarnation: u64::MAX, max_eager: MAX_EAGER as u32, name: vec![1; HELLO_MAX_NAME] }
            .encode()
            .unwrap()
            .len(),
        HELLO_MAX_LEN
    );
    let mut r = Rng::new(4);
    for _ in 0..20_000 {
        let n = r.below(70) as usize;
        let mut b = r.bytes(n);
        if n > 0 && r.chance(1, 2) {
            b[0] = VERSION;
        }
        if let Ok(h) = Hello::decode(&b) {
            let e = h.encode().unwrap();
            assert_eq!(&b[..e.len()], &e[..]);
        }
    }
}

/// Version 4's `max_eager`: 0..=MAX_EAGER is valid (0: only empty
/// messages go EAGER); a larger value is refused, never clamped, and
/// encode refuses it too.
#[test]
fn hello_max_eager_is_checked() {
    let h = |max_eager| Hello { grant: 3, max_credits: 32, incarnation: 7, max_eager, name: vec![2, 0, 0x30, 0x39, 10, 0, 0, 1] };
    for ok in [0u32, 1, 4096, 16384, MAX_EAGER as u32 - 1, MAX_EAGER as u32] {
        let b = h(ok).encode().unwrap();
        assert_eq!(&b[14..18], &ok.to_le_bytes());
        assert_eq!(Hello::decode(&b), Ok(h(ok)), "max_eager {ok}");
    }
    let good = h(4096).encode().unwrap();
    for bad in [MAX_EAGER as u32 + 1, 1 << 24, u32::MAX] {
        assert_eq!(h(bad).encode(), Err(ProtoError::Field("hello max eager")), "encode of max_eager {bad}");
        let mut v = good.clone();
        v[14..18].copy_from_slice(&bad.to_le_bytes());
        assert_eq!(Hello::decode(&v), Err(ProtoError::Field("hello max eager")), "max_eager {bad}");
    }
    // Random values: accepted exactly when within the protocol's bound.
    let mut r = Rng::new(5);
    for _ in 0..20_000 {
        let x = if r.chance(1, 2) { r.next() as u32 } else { r.below(2 * MAX_EAGER as u64) as u32 };
        let mut v = good.clone();
        v[14..18].copy_from_slice(&x.to_le_bytes());
        match Hello::decode(&v) {
            Ok(d) => {
                assert!(x as usize <= MAX_EAGER);
                assert_eq!(d.max_eager, x);
                assert_eq!(d.encode().unwrap(), v);
            }
            Err(e) => {
                assert!(x as usize > MAX_EAGER);
                assert_eq!(e, ProtoError::Field("hello max eager"));
            }
        }
    }
}

/// Older HELLOs are refused by their version byte, whatever follows: a
/// version-1 HELLO had a 4-byte fixed part, version 2 no incarnation,
/// version 3 no `max_eager` (a version-3 peer would send EAGER messages
/// up to its own eager size, whatever our buffers hold).
#[test]
fn hello_old_versions_are_refused() {
    assert_eq!(Hello::decode(&[1, 0, 32, 0]), Err(ProtoError::Version(1)));
    assert_eq!(Hello::decode(&[2, 0, 5, 0, 32, 0]), Err(ProtoError::Version(2)));
    // A well-formed version-3 HELLO: 14-byte fixed part, then a 16-byte sockaddr_in name.
    let mut v3 = vec![3u8, 16, 5, 0, 32, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11];
    v3.extend_from_slice(&[2, 0, 0x30, 0x39, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(Hello::decode(&v3), Err(ProtoError::Version(3)));
    let mut padded = v3.clone();
    padded.resize(56, 0);
    assert_eq!(Hello::decode(&padded), Err(ProtoError::Version(3)));
    assert_eq!(Hello::decode(&[]), Err(ProtoError::Short { need: HELLO_FIXED, got: 0 }));
    // And ours is refused by a version-3 reader's rule (version byte first).
    let ours = Hello { grant: 3, max_credits: 32, incarnation: 1, max_eager: 16384, name: vec![] }.encode().unwrap();
    assert_eq!(ours[0], 4);
}

#[test]
fn read_plan_splits_and_truncates() {
    let segs = [Segment { addr: 0x1000, len: 10, rkey: 1 }, Segment { addr: 0x5000, len: 6, rkey: 2 }];
    let p = read_plan(&segs, 16, 4);
    let got: Vec<_> = p.iter().map(|c| (c.local_offset, c.remote_addr, c.rkey, c.len)).collect();
    assert_eq!(got, vec![(0, 0x1000, 1, 4), (4, 0x1004, 1, 4), (8, 0x1008, 1, 2), (10, 0x5000, 2, 4), (14, 0x5004, 2, 2)]);
    // Truncated to 12 bytes: the second segment is read only in part.
    let p = read_plan(&segs, 12, 100);
    let got: Vec<_> = p.iter().map(|c| (c.local_offset, c.remote_addr, c.len)).collect();
    assert_eq!(got, vec![(0, 0x1000, 10), (10, 0x5000, 2)]);
    assert!(read_plan(&segs, 0, 100).is_empty());
    // A length beyond the segments is cut to them.
    assert_eq!(read_plan(&segs, 1000, 100).iter().map(|c| c.len).sum::<usize>(), 16);
}

/// `eager_view` (the arrival path's in-place read) accepts exactly the
/// EAGER messages `decode` accepts, with the same fields: valid messages of
/// every op, mutated ones (flipped bits, truncated, extended) and random
/// bytes with a plausible header.
#[test]
fn prop_eager_view_agrees_with_decode() {
    let mut r = Rng::new(4);
    let (mut eager, mut other) = (0, 0);
    for i in 0..60_000 {
        let n = r.below(64) as usize;
        let store = r.bytes(n);
        let mut b = random_message(&mut r, &store).to_vec().unwrap();
        if i % 4 > 0 {
            mutate(&mut r, &mut b, i % 4 - 1);
        }
        match (eager_view(&b), decode(&b)) {
            (Some(v), Ok(Message::Eager { credits, env, payload, .. })) => {
                assert_eq!((v.credits, v.env, v.payload), (credits, env, payload), "the same fields as decode's");
                eager += 1;
            }
            (None, Ok(Message::Eager { .. })) => panic!("a valid EAGER message was not read in place: {b:02x?}"),
            (Some(_), d) => panic!("eager_view accepted what decode reads as {d:?}: {b:02x?}"),
            (None, _) => other += 1,
        }
    }
    assert!(eager > 1000 && other > 1000, "both kinds seen ({eager} EAGER, {other} other)");
}
