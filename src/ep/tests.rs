//! Tests of CM data and memory descriptors.

use super::*;

#[test]
fn cm_data_roundtrip_and_limits() {
    let d = b"hello";
    let e = cm_data_encode(d, "test").unwrap();
    assert_eq!(e[0], 5);
    assert_eq!(cm_data_decode(&e), d.to_vec());
    // rdma-cm pads private data with zeros up to its fixed size.
    let mut padded = e.clone();
    padded.resize(56, 0);
    assert_eq!(cm_data_decode(&padded), d.to_vec());
    assert_eq!(cm_data_encode(&[9u8; CM_DATA_SIZE + 1], "test"), Err(FiError::INVAL), "over-long CM data is refused");
    assert_eq!(cm_data_encode(&[9u8; CM_DATA_SIZE], "test").unwrap().len(), CM_DATA_SIZE + 1);
    assert_eq!(cm_data_decode(&[]), Vec::<u8>::new());
}

#[test]
fn hostile_cm_data_length_is_not_trusted() {
    // Header claims 200 bytes, only 3 arrived.
    assert_eq!(cm_data_decode(&[200, 1, 2, 3]), Vec::<u8>::new());
    // Header claims more than the protocol allows.
    let mut v = vec![255u8];
    v.resize(256, 7);
    assert_eq!(cm_data_decode(&v), Vec::<u8>::new());
}

#[test]
fn foreign_descriptors_are_refused() {
    assert_eq!(desc_lkey(0), Ok(None));
    assert_eq!(desc_lkey(crate::mr::desc_of(77)), Ok(Some(77)));
    assert_eq!(desc_lkey(0xdead_beef), Err(FiError::INVAL));
}
