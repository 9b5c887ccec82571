//! Rejection private data (RDM: `[version, reason]`, src/rdm/peer.rs) and MSG
//! CM data (a length byte and up to 55 bytes, src/ep.rs), as a peer sends
//! them in a connect request, accept or reject.
//!
//! Invariants: no panic; decoded CM data is never longer than what arrived
//! after the length byte, nor than the length byte says, nor than
//! CM_DATA_SIZE, and is exactly those bytes; encode then decode is identity.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rsverbs::ep::{cm_data_decode, cm_data_encode};
use rsverbs::info::CM_DATA_SIZE;
use rsverbs::rdm::peer::reject_reason;

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(255)];
    if let Some(r) = reject_reason(data) {
        assert!(data.len() >= 2 && data[1] == r);
        assert!(data[2..].iter().all(|&b| b == 0));
    }
    let d = cm_data_decode(data);
    if !d.is_empty() {
        let n = data[0] as usize;
        assert_eq!(d.len(), n);
        assert!(n <= CM_DATA_SIZE && n < data.len());
        assert_eq!(&d[..], &data[1..1 + n]);
    }
    let e = cm_data_encode(data).expect("encoding never fails");
    assert!(e.len() <= 1 + CM_DATA_SIZE);
    let n = data.len().min(CM_DATA_SIZE);
    assert_eq!(cm_data_decode(&e), &data[..n], "truncated to CM_DATA_SIZE, then identity");
});
