//! Per-peer flow control (src/rdm/credits.rs) driven by a hostile peer: any
//! credit grants, at any time, interleaved with local pushes and reposts.
//!
//! Invariants: no panic; credits never exceed the peer's buffers (grants are
//! capped), owed never exceeds ours; a data message leaves only with two
//! credits available (the last one stays reserved for CREDIT), a CREDIT only
//! with one; messages leave in push order, each exactly once.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rsverbs::rdm::credits::{CreditConfig, Outgoing, PeerFlow};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let local = CreditConfig::new(u16::from_le_bytes([data[0], data[1]]).max(3)).unwrap_or_default();
    let peer_bufs = u16::from_le_bytes([data[2], data[3]]).max(3);
    let mut f: PeerFlow<u32> = PeerFlow::new(local, peer_bufs);
    let (mut pushed, mut sent) = (0u32, 0u32);
    let mut it = data[4..].chunks(3);
    while let Some(c) = it.next() {
        let arg = u16::from_le_bytes([c.get(1).copied().unwrap_or(0), c.get(2).copied().unwrap_or(0)]);
        match c[0] % 4 {
            0 => {
                f.push(pushed);
                pushed += 1;
            }
            1 => f.granted(arg),
            2 => f.reposted(arg as u32 % 64),
            _ => {
                for _ in 0..(arg % 8) {
                    let before = f.credits();
                    match f.next_send() {
                        Some(Outgoing::Data { msg, .. }) => {
                            assert!(before >= 2, "data left with {before} credits");
                            assert_eq!(msg, sent, "in order, once");
                            sent += 1;
                        }
                        Some(Outgoing::Credit { .. }) => assert!(before >= 1),
                        None => break,
                    }
                    assert_eq!(f.credits() + 1, before);
                }
            }
        }
        assert!(f.credits() <= peer_bufs as u32);
        assert!(f.owed() <= local.bufs_per_peer as u32);
        assert_eq!(f.queued() as u32, pushed - sent);
    }
    let rest = f.take_queue();
    assert!(rest.iter().copied().eq(sent..pushed));
});
