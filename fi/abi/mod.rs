//! `#[repr(C)]` mirrors of the libfabric 1.17 ABI (Debian 12's `/usr/include/rdma/*.h`):
//! every struct, union and ops table of fabric.h, fi_domain.h, fi_endpoint.h, fi_cm.h, fi_eq.h,
//! fi_rma.h, fi_tagged.h, fi_atomic.h, fi_trigger.h, fi_collective.h and providers/fi_prov.h,
//! plus the logging / export bits of fi_ext.h (the peer-provider API of fi_ext.h is not mirrored).
//!
//! Names are the C names; fields that are Rust keywords get a trailing underscore (`type_`).
//! Anonymous C unions get a named Rust union `<struct>_<field>` (e.g. [`fi_mr_attr_device`]).
//! `tests/abi_layout.rs` checks the size, alignment, every field offset and every field *type*
//! (including each function-pointer signature, via the C compiler) against the real headers.
//!
//! The mirrors sit in one file per header (`fabric.rs`, `domain.rs`, `endpoint.rs` with fi_cm.h,
//! `eq.rs`, `rma.rs`, `tagged.rs`, `atomic.rs`, `trigger.rs`, `collective.rs`, `prov.rs` with
//! fi_ext.h), re-exported here. The module depends only on `core` and `libc`, so it can be
//! `#[path]`-included on its own (`#[path = "../fi/abi/mod.rs"]`).
//!
//! # Type conventions
//! * `size_t` → `usize`, `ssize_t` → `isize`, `int` → `c_int` (i32), `char` → `c_char`,
//!   `void *` → `*mut c_void`, `const T *` → `*const T`, `struct iovec` → `libc::iovec`,
//!   `struct pollfd` → `libc::pollfd`, `fi_addr_t` → [`fi_addr_t`] (`u64`), `fid_t` → [`fid_t`].
//! * C enums used as field/parameter types → a `u32` alias with the C enum's name
//!   (`pub type fi_ep_type = u32;`), matching GCC's `unsigned int` underlying type. The values
//!   live in `capi/consts.rs` (typed by the C slot they go into — see there).
//! * Every function pointer is `Option<unsafe extern "C" fn(..) -> ..>`; `None` is C's `NULL`.
//! * Flexible array members (`uint8_t data[]`) → zero-length arrays.
//! * All types are `Clone + Copy` and `Default` (all-zero: null pointers, `None`, zeros).
#![allow(unsafe_code)]
#![allow(non_camel_case_types, non_snake_case, clippy::type_complexity)]

use core::ffi::{c_char, c_int, c_void};
use libc::{iovec, pollfd, pthread_cond_t, pthread_mutex_t};

// ---------------------------------------------------------------------------------------------
// Scalar typedefs and enum types.
// ---------------------------------------------------------------------------------------------

/// `typedef uint64_t fi_addr_t;`
pub type fi_addr_t = u64;
/// `typedef struct fid *fid_t;`
pub type fid_t = *mut fid;

/// `enum fi_av_type`
pub type fi_av_type = u32;
/// `enum fi_mr_mode`. No 1.17 field or parameter has this type: its values (and the FI_MR_*
/// bits) go into `fi_domain_attr.mr_mode`, a C `int`, which is why consts.rs types them `i32`.
pub type fi_mr_mode = u32;
/// `enum fi_progress`
pub type fi_progress = u32;
/// `enum fi_threading`
pub type fi_threading = u32;
/// `enum fi_resource_mgmt`
pub type fi_resource_mgmt = u32;
/// `enum fi_ep_type`
pub type fi_ep_type = u32;
/// `enum fi_bus_type`
pub type fi_bus_type = u32;
/// `enum fi_link_state`
pub type fi_link_state = u32;
/// `enum fi_type` (fi_tostr data types)
pub type fi_type = u32;
/// `enum fi_param_type`
pub type fi_param_type = u32;
/// `enum fi_hmem_iface`
pub type fi_hmem_iface = u32;
/// `enum fi_datatype`
pub type fi_datatype = u32;
/// `enum fi_op`
pub type fi_op = u32;
/// `enum fi_collective_op`
pub type fi_collective_op = u32;
/// `enum fi_wait_obj`
pub type fi_wait_obj = u32;
/// `enum fi_cq_format`
pub type fi_cq_format = u32;
/// `enum fi_cq_wait_cond`
pub type fi_cq_wait_cond = u32;
/// `enum fi_cntr_events`
pub type fi_cntr_events = u32;
/// `enum fi_trigger_event`
pub type fi_trigger_event = u32;
/// `enum fi_op_type`
pub type fi_op_type = u32;
/// `enum fi_log_subsys`
pub type fi_log_subsys = u32;
/// `enum fi_log_level`
pub type fi_log_level = u32;


mod fabric;
mod domain;
mod endpoint;
mod eq;
mod rma;
mod tagged;
mod atomic;
mod trigger;
mod collective;
mod prov;

pub use fabric::*;
pub use domain::*;
pub use endpoint::*;
pub use eq::*;
pub use rma::*;
pub use tagged::*;
pub use atomic::*;
pub use trigger::*;
pub use collective::*;
pub use prov::*;

// ---------------------------------------------------------------------------------------------
// Default = all zero.
// ---------------------------------------------------------------------------------------------

macro_rules! zeroed_default {
    ($($t:ident),* $(,)?) => {$(
        impl Default for $t {
            fn default() -> Self {
                // SAFETY: all-zero is a valid value of this type: every field (recursively) is
                // an integer, a raw pointer (null), an `Option<fn>` (None), or an array/union
                // of those.
                unsafe { core::mem::zeroed() }
            }
        }
    )*};
}

zeroed_default! {
    // fabric.h
    fi_ioc, fi_tx_attr, fi_rx_attr, fi_ep_attr, fi_domain_attr, fi_fabric_attr, fi_info,
    fi_device_attr, fi_pci_attr, fi_bus_attr_attr, fi_bus_attr, fi_link_attr, fi_ops, fid,
    fi_ops_fabric, fid_fabric, fid_nic, fi_alias, fi_fid_var, fi_mr_raw_attr, fi_mr_map_raw,
    fi_param, fi_context, fi_context2, fi_recv_context,
    // fi_domain.h
    fi_av_attr, fi_av_set_attr, fi_ops_av, fid_av, fid_mr, fi_mr_attr_device, fi_mr_attr,
    fi_mr_modify, fi_hmem_override_ops, fi_ops_domain, fi_ops_mr, fid_domain,
    // fi_endpoint.h, fi_cm.h
    fi_msg, fi_ops_ep, fi_ops_msg, fid_ep, fid_pep, fid_stx, fid_mc, fi_ops_cm,
    // fi_eq.h
    fi_wait_attr, fi_ops_wait, fid_wait, fi_mutex_cond, fi_wait_pollfd, fi_poll_attr, fi_ops_poll,
    fid_poll, fi_eq_attr, fi_eq_entry, fi_eq_err_entry, fi_eq_cm_entry, fi_ops_eq, fid_eq,
    fi_cq_entry, fi_cq_msg_entry, fi_cq_data_entry, fi_cq_tagged_entry, fi_cq_err_entry,
    fi_cq_attr, fi_ops_cq, fid_cq, fi_cntr_attr, fi_ops_cntr, fid_cntr,
    // fi_rma.h, fi_tagged.h, fi_atomic.h
    fi_rma_iov, fi_rma_ioc, fi_msg_rma, fi_ops_rma, fi_msg_tagged, fi_ops_tagged, fi_atomic_attr,
    fi_msg_atomic, fi_msg_fetch, fi_msg_compare, fi_ops_atomic,
    // fi_trigger.h
    fi_trigger_threshold, fi_trigger_var_value, fi_trigger_var, fi_trigger_xpu_device,
    fi_trigger_xpu, fi_op_msg, fi_op_tagged, fi_op_rma, fi_op_atomic, fi_op_fetch_atomic,
    fi_op_compare_atomic, fi_op_cntr, fi_triggered_context_trigger, fi_triggered_context,
    fi_triggered_context2_trigger, fi_triggered_context2, fi_deferred_work_op, fi_deferred_work,
    // fi_collective.h
    fi_ops_av_set, fid_av_set, fi_collective_attr, fi_collective_addr, fi_msg_collective,
    fi_ops_collective,
    // fi_prov.h, fi_ext.h
    fi_provider, fi_fid_export, fi_ops_log, fid_logging,
}
