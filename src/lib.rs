//! rsverbs: a libfabric provider for RDMA verbs.
//!
//! Layout:
//! * `src/`   — the provider core in safe Rust, plus the thin `verbs` and `sys` wrappers
//!              (the only places besides `capi/` where `unsafe` is allowed).
//! * `capi/`  — the C ABI: the exported entry points (`fi_prov_ini`, the ops tables' shims, …).
//! * `fi/`    — the libfabric vocabulary both use: constants, flag bits and `#[repr(C)]`
//!              mirrors of libfabric's structs and ops tables. It imports neither.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

#[path = "../capi/mod.rs"]
pub mod capi;
#[path = "../fi/mod.rs"]
pub mod fi;

pub mod av;
pub mod config;
pub mod cntr;
pub mod cq;
pub mod dgram;
pub mod domain;
pub mod ep;
pub mod eq;
pub mod error;
pub mod fabric;
pub mod info;
pub mod log;
pub mod mr;
pub mod mrcache;
pub mod progress;
pub mod rdm;
pub mod srx;
pub mod sys;
pub mod tostr;
pub mod verbs;
pub mod wait;
