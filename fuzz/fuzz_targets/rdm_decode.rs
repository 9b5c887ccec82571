//! The RDM header/message decoder (src/rdm/proto.rs) on arbitrary bytes, as
//! a hostile peer could put them in a bounce buffer.
//!
//! Invariants: no panic; whatever decodes re-encodes to exactly the input
//! (canonical: no ignored bits); an EAGER payload is the bytes after the
//! header and at most MAX_EAGER; an RTS has 1..=MAX_SEGS non-empty,
//! non-wrapping segments summing to its length (<= MAX_MSG_LEN); a read plan
//! for any receive length stays inside the segments and never exceeds the
//! receive (truncation, not overflow).
#![no_main]
use libfuzzer_sys::fuzz_target;
use rsverbs::rdm::matching::{Body, Incoming};
use rsverbs::rdm::proto::{self, Message};

fuzz_target!(|data: &[u8]| {
    // The first 8 bytes pick the receive length and chunk size for the read
    // plan; the rest is the message.
    if data.len() < 8 {
        let _ = proto::decode(data);
        return;
    }
    let chunk = 1 + (u32::from_le_bytes([data[4], data[5], data[6], data[7]]) as usize % (8 << 20));
    // At most 65536 reads per plan. The endpoint's plans are its receive
    // buffer over chunks of at least 4 KiB (the device's max_msg_size,
    // clamped), so they grow with memory the application registered, never
    // with what a peer sends; a 4 GiB receive in 1-byte chunks here only made
    // the harness itself run out of memory (ci/fuzz, session 10).
    let recv_len = (u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize).min(chunk << 16);
    let wire = &data[8..];
    let Ok(m) = proto::decode(wire) else { return };
    assert_eq!(m.to_vec().expect("a decoded message re-encodes"), wire, "decoding is canonical");
    assert_eq!(m.encoded_len(), wire.len());
    match &m {
        Message::Eager { payload, .. } => {
            assert_eq!(payload.len(), wire.len() - proto::HEADER_LEN);
            assert!(payload.len() <= proto::MAX_EAGER);
        }
        Message::Rts { len, segs, .. } => {
            assert!(!segs.is_empty() && segs.len() <= proto::MAX_SEGS);
            assert!(*len <= proto::MAX_MSG_LEN);
            let mut sum = 0u64;
            for s in segs {
                assert!(s.len > 0);
                assert!(s.addr.checked_add(s.len).is_some());
                sum += s.len;
            }
            assert_eq!(sum, *len);
            let plan = proto::read_plan(segs, recv_len, chunk);
            let mut total = 0usize;
            for c in &plan {
                assert!(c.len > 0 && c.len <= chunk);
                assert!(c.local_offset == total, "chunks are contiguous in the receive buffer");
                total += c.len;
                let inside = segs.iter().any(|s| {
                    s.rkey == c.rkey && c.remote_addr >= s.addr && c.remote_addr + c.len as u64 <= s.addr + s.len
                });
                assert!(inside, "a read stays inside one of the peer's segments");
            }
            assert_eq!(total as u64, (*len).min(recv_len as u64), "reads cover min(message, receive)");
        }
        Message::Fin { len, .. } => assert!(*len <= proto::MAX_MSG_LEN),
        Message::Nack { err, .. } => assert!(*err != 0),
        Message::Credit { .. } => {}
    }
    let is_data = matches!(m, Message::Eager { .. } | Message::Rts { .. });
    let msg_len = match &m {
        Message::Eager { payload, .. } => payload.len(),
        Message::Rts { len, .. } => *len as usize,
        _ => 0,
    };
    match Incoming::from_message(7, m) {
        Some(inc) => {
            assert!(is_data);
            assert_eq!(inc.len(), msg_len);
            if let Body::Eager(p) = inc.body {
                assert_eq!(p.len(), msg_len);
            }
        }
        None => assert!(!is_data),
    }
});
