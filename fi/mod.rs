//! The libfabric vocabulary: the constants and flag bits of `<rdma/fabric.h>`
//! and friends (`consts`), and `#[repr(C)]` mirrors of its structs and ops
//! tables (`abi`). It sits below both the safe provider core (`src/`) and the
//! C ABI (`capi/`), and imports neither: the core takes its flag bits from
//! here, the C layer its flag bits and struct layouts.
//!
//! `abi`'s one `unsafe` block is the all-zero `Default` of the C mirrors.

pub mod abi;
pub mod consts;
