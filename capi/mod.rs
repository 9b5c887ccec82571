//! The C ABI of rsverbs. All `unsafe` FFI of the provider lives here (and in the
//! verbs/sys wrappers of the core). Style: every exported function is a thin
//! shim — check pointers, convert, call safe Rust, map the error — and no panic
//! crosses into C (`util::guard`).
#![allow(unsafe_code)]

pub mod av;
pub mod cntr;
pub mod core_api;
pub mod cq;
pub mod dgram;
pub mod domain;
pub mod embed;
pub mod ep;
pub mod ep_shared;
pub mod eq;
pub mod info;
pub mod nic;
pub mod nosys;
pub mod prov;
pub mod rdm;
pub mod rdm_atomic;
pub mod srx;
pub mod tostr;
pub mod util;
pub mod version;
pub mod wait;
