//! Rejection private data (RDM: `[version, reason]`, src/rdm/peer.rs) and MSG
//! CM data (a length byte and up to 55 bytes, src/ep.rs), as a peer sends
//! them in a connect request, accept or reject.
//!
//! Invariants: no panic; decoded CM data is never longer than what arrived
//! after the length byte, nor than the length byte says, nor than
//! CM_DATA_SIZE, and is exactly those bytes; encode refuses more than
//! CM_DATA_SIZE bytes and is otherwise undone by decode.
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
    match cm_data_encode(data, "fuzz") {
        Ok(e) => {
            assert!(data.len() <= CM_DATA_SIZE, "longer CM data is refused, not truncated");
            assert_eq!(e.len(), 1 + data.len());
            assert_eq!(cm_data_decode(&e), data, "encode then decode is identity");
        }
        Err(_) => assert!(data.len() > CM_DATA_SIZE, "CM data of {} bytes refused", data.len()),
    }
});
