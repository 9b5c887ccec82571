//! Flow control of RDM protocol version 2, on arbitrary input.
//!
//! Send side (src/rdm/credits.rs `PeerFlow`), driven by a hostile peer: any
//! grants and recalls, at any time, interleaved with local pushes.
//! Invariants: no panic; credits never exceed the peer's maximum (grants are
//! capped); a data message leaves only with two credits (the last stays
//! reserved for CREDIT); a recall is answered by one CREDIT that leaves at most
//! max(target, MIN_CREDITS); messages leave in push order, each exactly once.
//!
//! Receive side (src/rdm/srq.rs `Bank`), driven by peers that keep to their
//! credits but with arbitrary timing: admissions, arrivals (with any release
//! count), reposts, retirements with messages in flight, limbo releases.
//! Invariant: the accounting identity (`Bank::balanced`) after every step.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rsverbs::rdm::credits::{Outgoing, PeerFlow, MIN_CREDITS};
use rsverbs::rdm::srq::{Bank, Share};

fn send_side(data: &[u8]) {
    let grant = u16::from_le_bytes([data[0], data[1]]);
    let peer_max = u16::from_le_bytes([data[2], data[3]]).max(MIN_CREDITS);
    let mut f: PeerFlow<u32> = PeerFlow::new(grant, peer_max);
    let mut rx = Share::default();
    let (mut pushed, mut sent) = (0u32, 0u32);
    let mut recall: Option<u32> = None;
    for c in data[4..].chunks(3) {
        let arg = u16::from_le_bytes([c.get(1).copied().unwrap_or(0), c.get(2).copied().unwrap_or(0)]);
        match c[0] % 4 {
            0 => {
                f.push(pushed);
                pushed += 1;
            }
            1 => f.granted(arg),
            2 => {
                f.recalled(arg);
                recall = Some(arg.max(MIN_CREDITS) as u32);
            }
            _ => {
                for _ in 0..(arg % 8) {
                    let before = f.credits();
                    // next_send looks at a pending recall first, and clears it either way.
                    let r = recall.take();
                    match f.next_send(&mut rx) {
                        Some(Outgoing::Data { msg, .. }) => {
                            assert!(before >= 2, "data left with {before} credits");
                            assert_eq!(msg, sent, "in order, once");
                            sent += 1;
                            assert_eq!(f.credits() + 1, before);
                        }
                        Some(Outgoing::Credit { release, .. }) => match r {
                            Some(t) if before > t => {
                                assert_eq!(f.credits(), t, "a recall's answer leaves its target");
                                assert_eq!(release as u32, before - 1 - t, "the CREDIT itself costs one");
                            }
                            _ => assert!(before >= 1),
                        },
                        None => break,
                    }
                }
            }
        }
        assert!(f.credits() <= peer_max as u32);
        assert_eq!(f.queued() as u32, pushed - sent);
    }
    let rest = f.take_queue();
    assert!(rest.iter().copied().eq(sent..pushed));
}

fn recv_side(data: &[u8]) {
    let size = (data[0] as u32 % 200).max(1);
    let max = (data[1] as u16 % 64).max(MIN_CREDITS);
    let mut bank: Bank<u8> = if data[2] & 1 == 0 { Bank::shared(size, max) } else { Bank::single(max) };
    // Buffers holding a message, by whose message it is (None: a retired peer's).
    let mut busy: Vec<Option<u8>> = Vec::new();
    let mut peers: Vec<u8> = Vec::new();
    for c in data[3..].chunks(2) {
        let arg = c.get(1).copied().unwrap_or(0);
        match c[0] % 6 {
            0 if peers.len() < 40 && !peers.contains(&arg) => {
                bank.admit(arg);
                peers.push(arg);
            }
            1 | 2 if !peers.is_empty() => {
                let k = peers[arg as usize % peers.len()];
                // An honest peer sends only with a credit it holds.
                if bank.share(&k).is_some_and(|s| s.out() > 0) {
                    let release = if c[0] % 6 == 2 { arg as u16 } else { 0 };
                    bank.arrived(&k, release);
                    busy.push(Some(k));
                }
            }
            3 if !busy.is_empty() => {
                let from = busy.remove(arg as usize % busy.len());
                bank.reposted(from.as_ref().filter(|k| peers.contains(k)));
            }
            4 if !peers.is_empty() => {
                let k = peers.remove(arg as usize % peers.len());
                bank.retire(&k);
                for b in busy.iter_mut().filter(|b| **b == Some(k)) {
                    *b = None;
                }
            }
            5 => {
                if bank.limbo() > 0 && arg & 1 == 0 {
                    // A retired peer's message still in flight.
                    bank.limbo_arrived();
                    busy.push(None);
                } else {
                    bank.release_limbo(arg as u32 % 8);
                }
            }
            _ => {}
        }
        assert!(bank.balanced(), "accounting identity broken");
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    if data[0] & 0x80 == 0 {
        send_side(&data[1..]);
    } else {
        recv_side(&data[1..]);
    }
});
