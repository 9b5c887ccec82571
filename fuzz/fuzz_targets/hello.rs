//! The RDM connection handshake (HELLO, rdma-cm private data of a connect
//! request or accept, src/rdm/proto.rs) and the endpoint name it carries,
//! parsed as a socket address (src/sys.rs), on arbitrary bytes.
//!
//! Invariants: no panic; an accepted HELLO has a name of at most
//! HELLO_MAX_NAME bytes, a maximum of at least MIN_CREDITS credits and a
//! grant within it, a non-zero incarnation, a `max_eager` (version 4) of at
//! most MAX_EAGER, its encoding is a prefix of the input and everything
//! after it is zero.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rsverbs::rdm::credits::MIN_CREDITS;
use rsverbs::rdm::proto::{Hello, HELLO_MAX_NAME, MAX_EAGER};

fuzz_target!(|data: &[u8]| {
    // Private data longer than 255 bytes cannot arrive (its length is a u8 in rdma-cm).
    let data = &data[..data.len().min(255)];
    let Ok(h) = Hello::decode(data) else { return };
    assert!(h.name.len() <= HELLO_MAX_NAME);
    assert!(h.max_credits >= MIN_CREDITS);
    assert!(h.grant <= h.max_credits);
    assert_ne!(h.incarnation, 0);
    assert!(h.max_eager as usize <= MAX_EAGER);
    let e = h.encode().expect("a decoded HELLO re-encodes");
    assert!(e.len() <= data.len());
    assert_eq!(&data[..e.len()], &e[..]);
    assert!(data[e.len()..].iter().all(|&b| b == 0));
    if let Some(a) = rsverbs::sys::sockaddr_parse(&h.name) {
        // What parsed must re-encode into the bytes it came from (family, port, address).
        let b = rsverbs::sys::sockaddr_bytes(&a);
        assert!(b.len() <= h.name.len());
        assert_eq!(&h.name[..4], &b[..4]);
    }
});
