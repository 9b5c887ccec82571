//! ABI proof for `fi/abi/` and `fi/consts.rs` against the libfabric 1.17 headers in
//! `/usr/include/rdma` (Debian 12).
//!
//! ONE list below (`abi_types!`, `abi_aliases!`, `abi_consts!`, `exprs()`) drives both sides:
//! * the Rust side computes, from the `#[path]`-included mirror files, `size`/`align` of every
//!   type, `off` of every field, the field's Rust `type`, and every constant's value;
//! * the same list generates `tests/abi/layout.c`, which the test compiles against the system
//!   headers with `cc -Wall -Werror` and runs: it prints the same lines computed by the C compiler,
//!   and for `type` lines asks the compiler whether the C field type is compatible
//!   (`__builtin_types_compatible_p`) with the C spelling of the Rust type — that checks every
//!   function-pointer signature, pointer constness and enum width, not just sizes.
//!
//! The two outputs must be identical; every mismatch and every line present on one side only is
//! listed. Two coverage checks keep the list honest:
//! * against the HEADERS: every field of every struct/anonymous union and every FI_* constant
//!   (object-like `#define` or enum member) found in the headers must be in the list (except the
//!   fi_ext.h peer-provider structs in `NOT_MIRRORED`), and nothing else;
//! * against the SOURCES: every `pub struct/union` field, `pub type` and `pub const` declared in
//!   `fi/abi/*.rs` / consts.rs must be in the list, and nothing else.
//!
//! `tests/abi/layout.c` is generated: if it is stale the test fails; rewrite it with
//! `ABI_LAYOUT_BLESS=1 cargo test --test abi_layout`.
//!
//! Limits: `uint64_t` and `size_t` are the same C type on LP64, so the compiler cannot tell
//! `u64` from `usize` (the header scan does not look at types); x86_64/LP64 only.

#[path = "../fi/abi/mod.rs"]
#[allow(dead_code)]
mod abi;
#[path = "../fi/consts.rs"]
#[allow(dead_code)]
mod consts;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::mem::{align_of, offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the spec lives.
const INCLUDE_DIR: &str = "/usr/include/rdma";

/// Headers included by layout.c and scanned for structs and constants.
const HEADERS: &[&str] = &[
    "fabric.h",
    "fi_errno.h",
    "fi_domain.h",
    "fi_endpoint.h",
    "fi_cm.h",
    "fi_eq.h",
    "fi_rma.h",
    "fi_tagged.h",
    "fi_atomic.h",
    "fi_trigger.h",
    "fi_collective.h",
    "providers/fi_prov.h",
    "providers/fi_log.h",
    "fi_ext.h",
];

/// Header structs deliberately not mirrored: the peer-provider / memory-monitor import API of
/// fi_ext.h, which a core verbs provider does not implement.
const NOT_MIRRORED: &[&str] = &[
    "fi_ops_mem_monitor",
    "fi_ops_mem_notify",
    "fid_mem_monitor",
    "fi_ops_av_owner",
    "fid_peer_av",
    "fi_peer_av_context",
    "fi_ops_av_set_owner",
    "fid_peer_av_set",
    "fi_peer_av_set_context",
    "fi_ops_cq_owner",
    "fid_peer_cq",
    "fi_peer_cq_context",
    "fi_peer_domain_context",
    "fi_peer_eq_context",
    "fi_peer_rx_entry",
    "fi_ops_srx_owner",
    "fi_ops_srx_peer",
    "fid_peer_srx",
    "fi_peer_srx_context",
    "fi_ops_transfer_peer",
    "fi_peer_transfer_context",
];

// ---------------------------------------------------------------------------------------------
// The list.
// ---------------------------------------------------------------------------------------------

struct TypeSpec {
    /// Rust name (= the C struct name; `<struct>_<field>` for an anonymous C union).
    rust: &'static str,
    /// C spelling of the type.
    c: &'static str,
    size: usize,
    align: usize,
    fields: Vec<FieldSpec>,
}

struct FieldSpec {
    /// Rust field name (`type_` for C `type`).
    rust: &'static str,
    offset: usize,
    /// `std::any::type_name` of the field type.
    ty: &'static str,
}

struct AliasSpec {
    rust: &'static str,
    c: &'static str,
    size: usize,
    align: usize,
    ty: &'static str,
}

fn field_type<S, F, G: Fn(&S) -> &F>(_: G) -> &'static str {
    std::any::type_name::<F>()
}

macro_rules! c_spelling {
    ($t:ident) => {
        concat!("struct ", stringify!($t))
    };
    ($t:ident $c:literal) => {
        $c
    };
}

/// `name { field, ... }` mirrors `struct name`; `name = "C type" { ... }` gives the C spelling
/// explicitly (used for anonymous unions).
macro_rules! abi_types {
    ($( $t:ident $(= $c:literal)? { $($f:ident),* $(,)? } )*) => {
        #[allow(unused_unsafe)]
        fn types() -> Vec<TypeSpec> {
            vec![$({
                TypeSpec {
                    rust: stringify!($t),
                    c: c_spelling!($t $($c)?),
                    size: size_of::<abi::$t>(),
                    align: align_of::<abi::$t>(),
                    fields: vec![$(FieldSpec {
                        rust: stringify!($f),
                        offset: offset_of!(abi::$t, $f),
                        // never called: only the closure's type is used. (`unsafe` for unions.)
                        ty: field_type(|s: &abi::$t| unsafe { &s.$f }),
                    }),*],
                }
            }),*]
        }
    };
}

/// `pub type` aliases of fi/abi/ and the C type each stands for.
macro_rules! abi_aliases {
    ($( $t:ident = $c:literal ),* $(,)?) => {
        fn aliases() -> Vec<AliasSpec> {
            vec![$(AliasSpec {
                rust: stringify!($t),
                c: $c,
                size: size_of::<abi::$t>(),
                align: align_of::<abi::$t>(),
                ty: std::any::type_name::<abi::$t>(),
            }),*]
        }
    };
}

/// Constants of consts.rs; compared as `(unsigned long long)NAME` vs `NAME as u64`
/// (negative values sign-extend on both sides).
macro_rules! abi_consts {
    ($($n:ident),* $(,)?) => {
        fn consts() -> Vec<(&'static str, u64)> {
            vec![$((stringify!($n), consts::$n as u64)),*]
        }
    };
}

/// The `const fn`s of consts.rs, as (C expression, Rust value).
fn exprs() -> Vec<(&'static str, u64)> {
    use consts::*;
    vec![
        ("FI_VERSION(1, 17)", FI_VERSION(1, 17) as u64),
        ("FI_VERSION(2, 0)", FI_VERSION(2, 0) as u64),
        (
            "FI_MAJOR(FI_VERSION(1, 17))",
            FI_MAJOR(FI_VERSION(1, 17)) as u64,
        ),
        (
            "FI_MINOR(FI_VERSION(1, 17))",
            FI_MINOR(FI_VERSION(1, 17)) as u64,
        ),
        ("FI_MAJOR(0x12345678)", FI_MAJOR(0x12345678) as u64),
        ("FI_MINOR(0x12345678)", FI_MINOR(0x12345678) as u64),
        (
            "FI_VERSION_GE(FI_VERSION(1, 17), FI_VERSION(1, 5))",
            FI_VERSION_GE(FI_VERSION(1, 17), FI_VERSION(1, 5)) as u64,
        ),
        (
            "FI_VERSION_GE(FI_VERSION(1, 5), FI_VERSION(1, 17))",
            FI_VERSION_GE(FI_VERSION(1, 5), FI_VERSION(1, 17)) as u64,
        ),
        (
            "FI_VERSION_GE(FI_VERSION(1, 17), FI_VERSION(1, 17))",
            FI_VERSION_GE(FI_VERSION(1, 17), FI_VERSION(1, 17)) as u64,
        ),
        (
            "FI_VERSION_LT(FI_VERSION(1, 5), FI_VERSION(1, 17))",
            FI_VERSION_LT(FI_VERSION(1, 5), FI_VERSION(1, 17)) as u64,
        ),
        (
            "FI_VERSION_LT(FI_VERSION(1, 17), FI_VERSION(1, 17))",
            FI_VERSION_LT(FI_VERSION(1, 17), FI_VERSION(1, 17)) as u64,
        ),
    ]
}

abi_aliases! {
    fi_addr_t = "fi_addr_t",
    fid_t = "fid_t",
    fi_av_type = "enum fi_av_type",
    fi_mr_mode = "enum fi_mr_mode",
    fi_progress = "enum fi_progress",
    fi_threading = "enum fi_threading",
    fi_resource_mgmt = "enum fi_resource_mgmt",
    fi_ep_type = "enum fi_ep_type",
    fi_bus_type = "enum fi_bus_type",
    fi_link_state = "enum fi_link_state",
    fi_type = "enum fi_type",
    fi_param_type = "enum fi_param_type",
    fi_hmem_iface = "enum fi_hmem_iface",
    fi_datatype = "enum fi_datatype",
    fi_op = "enum fi_op",
    fi_collective_op = "enum fi_collective_op",
    fi_wait_obj = "enum fi_wait_obj",
    fi_cq_format = "enum fi_cq_format",
    fi_cq_wait_cond = "enum fi_cq_wait_cond",
    fi_cntr_events = "enum fi_cntr_events",
    fi_trigger_event = "enum fi_trigger_event",
    fi_op_type = "enum fi_op_type",
    fi_log_subsys = "enum fi_log_subsys",
    fi_log_level = "enum fi_log_level",
}

abi_types! {
    fi_ioc { addr, count }
    fi_tx_attr {
        caps, mode, op_flags, msg_order, comp_order, inject_size, size, iov_limit, rma_iov_limit,
        tclass,
    }
    fi_rx_attr { caps, mode, op_flags, msg_order, comp_order, total_buffered_recv, size, iov_limit }
    fi_ep_attr {
        type_, protocol, protocol_version, max_msg_size, msg_prefix_size, max_order_raw_size,
        max_order_war_size, max_order_waw_size, mem_tag_format, tx_ctx_cnt, rx_ctx_cnt,
        auth_key_size, auth_key,
    }
    fi_domain_attr {
        domain, name, threading, control_progress, data_progress, resource_mgmt, av_type, mr_mode,
        mr_key_size, cq_data_size, cq_cnt, ep_cnt, tx_ctx_cnt, rx_ctx_cnt, max_ep_tx_ctx,
        max_ep_rx_ctx, max_ep_stx_ctx, max_ep_srx_ctx, cntr_cnt, mr_iov_limit, caps, mode,
        auth_key, auth_key_size, max_err_data, mr_cnt, tclass,
    }
    fi_fabric_attr { fabric, name, prov_name, prov_version, api_version }
    fi_info {
        next, caps, mode, addr_format, src_addrlen, dest_addrlen, src_addr, dest_addr, handle,
        tx_attr, rx_attr, ep_attr, domain_attr, fabric_attr, nic,
    }
    fi_device_attr { name, device_id, device_version, vendor_id, driver, firmware }
    fi_pci_attr { domain_id, bus_id, device_id, function_id }
    fi_bus_attr_attr = "__typeof__(((struct fi_bus_attr *)0)->attr)" { pci }
    fi_bus_attr { bus_type, attr }
    fi_link_attr { address, mtu, speed, state, network_type }
    fi_ops { size, close, bind, control, ops_open, tostr, ops_set }
    fid { fclass, context, ops }
    fi_ops_fabric { size, domain, passive_ep, eq_open, wait_open, trywait, domain2 }
    fid_fabric { fid, ops, api_version }
    fid_nic { fid, device_attr, bus_attr, link_attr, prov_attr }
    fi_alias { fid, flags }
    fi_fid_var { name, val }
    fi_mr_raw_attr { flags, base_addr, raw_key, key_size }
    fi_mr_map_raw { flags, base_addr, raw_key, key_size, key }
    fi_param { name, type_, help_string, value }
    fi_context { internal }
    fi_context2 { internal }
    fi_recv_context { ep, context }
    fi_av_attr { type_, rx_ctx_bits, count, ep_per_node, name, map_addr, flags }
    fi_av_set_attr { count, start_addr, end_addr, stride, comm_key_size, comm_key, flags }
    fi_ops_av { size, insert, insertsvc, insertsym, remove, lookup, straddr, av_set }
    fid_av { fid, ops }
    fid_mr { fid, mem_desc, key }
    fi_mr_attr_device = "__typeof__(((struct fi_mr_attr *)0)->device)" {
        reserved, cuda, ze, neuron, synapseai,
    }
    fi_mr_attr {
        mr_iov, iov_count, access, offset, requested_key, context, auth_key_size, auth_key, iface,
        device,
    }
    fi_mr_modify { flags, attr }
    fi_hmem_override_ops { size, copy_from_hmem_iov, copy_to_hmem_iov }
    fi_ops_domain {
        size, av_open, cq_open, endpoint, scalable_ep, cntr_open, poll_open, stx_ctx, srx_ctx,
        query_atomic, query_collective, endpoint2,
    }
    fi_ops_mr { size, reg, regv, regattr }
    fid_domain { fid, ops, mr }
    fi_msg { msg_iov, desc, iov_count, addr, context, data }
    fi_ops_ep { size, cancel, getopt, setopt, tx_ctx, rx_ctx, rx_size_left, tx_size_left }
    fi_ops_msg { size, recv, recvv, recvmsg, send, sendv, sendmsg, inject, senddata, injectdata }
    fid_ep { fid, ops, cm, msg, rma, tagged, atomic, collective }
    fid_pep { fid, ops, cm }
    fid_stx { fid, ops }
    fid_mc { fid, fi_addr }
    fi_ops_cm { size, setname, getname, getpeer, connect, listen, accept, reject, shutdown, join }
    fi_wait_attr { wait_obj, flags }
    fi_ops_wait { size, wait }
    fid_wait { fid, ops }
    fi_mutex_cond { mutex, cond }
    fi_wait_pollfd { change_index, nfds, fd }
    fi_poll_attr { flags }
    fi_ops_poll { size, poll, poll_add, poll_del }
    fid_poll { fid, ops }
    fi_eq_attr { size, flags, wait_obj, signaling_vector, wait_set }
    fi_eq_entry { fid, context, data }
    fi_eq_err_entry { fid, context, data, err, prov_errno, err_data, err_data_size }
    fi_eq_cm_entry { fid, info, data }
    fi_ops_eq { size, read, readerr, write, sread, strerror }
    fid_eq { fid, ops }
    fi_cq_entry { op_context }
    fi_cq_msg_entry { op_context, flags, len }
    fi_cq_data_entry { op_context, flags, len, buf, data }
    fi_cq_tagged_entry { op_context, flags, len, buf, data, tag }
    fi_cq_err_entry {
        op_context, flags, len, buf, data, tag, olen, err, prov_errno, err_data, err_data_size,
    }
    fi_cq_attr { size, flags, format, wait_obj, signaling_vector, wait_cond, wait_set }
    fi_ops_cq { size, read, readfrom, readerr, sread, sreadfrom, signal, strerror }
    fid_cq { fid, ops }
    fi_cntr_attr { events, wait_obj, wait_set, flags }
    fi_ops_cntr { size, read, readerr, add, set, wait, adderr, seterr }
    fid_cntr { fid, ops }
    fi_rma_iov { addr, len, key }
    fi_rma_ioc { addr, count, key }
    fi_msg_rma { msg_iov, desc, iov_count, addr, rma_iov, rma_iov_count, context, data }
    fi_ops_rma {
        size, read, readv, readmsg, write, writev, writemsg, inject, writedata, injectdata,
    }
    fi_msg_tagged { msg_iov, desc, iov_count, addr, tag, ignore, context, data }
    fi_ops_tagged { size, recv, recvv, recvmsg, send, sendv, sendmsg, inject, senddata, injectdata }
    fi_atomic_attr { count, size }
    fi_msg_atomic {
        msg_iov, desc, iov_count, addr, rma_iov, rma_iov_count, datatype, op, context, data,
    }
    fi_msg_fetch { msg_iov, desc, iov_count }
    fi_msg_compare { msg_iov, desc, iov_count }
    fi_ops_atomic {
        size, write, writev, writemsg, inject, readwrite, readwritev, readwritemsg, compwrite,
        compwritev, compwritemsg, writevalid, readwritevalid, compwritevalid,
    }
    fi_trigger_threshold { cntr, threshold }
    fi_trigger_var_value = "__typeof__(((struct fi_trigger_var *)0)->value)" {
        val8, val16, val32, val64, data,
    }
    fi_trigger_var { datatype, count, addr, value }
    fi_trigger_xpu_device = "__typeof__(((struct fi_trigger_xpu *)0)->device)" {
        reserved, cuda, ze,
    }
    fi_trigger_xpu { count, iface, device, var }
    fi_op_msg { ep, msg, flags }
    fi_op_tagged { ep, msg, flags }
    fi_op_rma { ep, msg, flags }
    fi_op_atomic { ep, msg, flags }
    fi_op_fetch_atomic { ep, msg, fetch, flags }
    fi_op_compare_atomic { ep, msg, fetch, compare, flags }
    fi_op_cntr { cntr, value }
    fi_triggered_context_trigger = "__typeof__(((struct fi_triggered_context *)0)->trigger)" {
        threshold, xpu, internal,
    }
    fi_triggered_context { event_type, trigger }
    fi_triggered_context2_trigger = "__typeof__(((struct fi_triggered_context2 *)0)->trigger)" {
        threshold, xpu, internal,
    }
    fi_triggered_context2 { event_type, trigger }
    fi_deferred_work_op = "__typeof__(((struct fi_deferred_work *)0)->op)" {
        msg, tagged, rma, atomic, fetch_atomic, compare_atomic, cntr,
    }
    fi_deferred_work { context, threshold, triggering_cntr, completion_cntr, op_type, op }
    fi_ops_av_set { size, set_union, intersect, diff, insert, remove, addr }
    fid_av_set { fid, ops }
    fi_collective_attr { op, datatype, datatype_attr, max_members, mode }
    fi_collective_addr { set, coll_addr }
    fi_msg_collective {
        msg_iov, desc, iov_count, coll_addr, root_addr, coll, datatype, op, context,
    }
    fi_ops_collective {
        size, barrier, broadcast, alltoall, allreduce, allgather, reduce_scatter, reduce, scatter,
        gather, msg, barrier2,
    }
    fi_provider { version, fi_version, context, name, getinfo, fabric, cleanup }
    fi_fid_export { fid, flags, context }
    fi_ops_log { size, enabled, ready, log }
    fid_logging { fid, ops }
}

abi_consts! {
    FI_MAJOR_VERSION, FI_MINOR_VERSION, FI_REVISION_VERSION,
    FI_PROV_SPECIFIC,
    FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC, FI_ATOMICS, FI_MULTICAST, FI_COLLECTIVE, FI_READ,
    FI_WRITE, FI_RECV, FI_SEND, FI_TRANSMIT, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_MULTI_RECV,
    FI_REMOTE_CQ_DATA, FI_MORE, FI_PEEK, FI_TRIGGER, FI_FENCE, FI_PRIORITY, FI_COMPLETION,
    FI_EVENT, FI_INJECT, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE,
    FI_AFFINITY, FI_COMMIT_COMPLETE, FI_MATCH_COMPLETE, FI_PEER_TRANSFER, FI_AV_USER_ID, FI_PEER,
    FI_XPU_TRIGGER, FI_HMEM_HOST_ALLOC, FI_HMEM_DEVICE_ONLY, FI_HMEM, FI_VARIABLE_MSG,
    FI_RMA_PMEM, FI_SOURCE_ERR, FI_LOCAL_COMM, FI_REMOTE_COMM, FI_SHARED_AV, FI_PROV_ATTR_ONLY,
    FI_NUMERICHOST, FI_RMA_EVENT, FI_SOURCE, FI_NAMED_RX_CTX, FI_DIRECTED_RECV,
    FI_CLAIM, FI_DISCARD,
    FI_ADDR_UNSPEC, FI_ADDR_NOTAVAIL, FI_KEY_NOTAVAIL, FI_SHARED_CONTEXT,
    FI_MR_LOCAL, FI_MR_RAW, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY, FI_MR_MMU_NOTIFY,
    FI_MR_RMA_EVENT, FI_MR_ENDPOINT, FI_MR_HMEM, FI_MR_COLLECTIVE,
    FI_ORDER_NONE, FI_ORDER_RAR, FI_ORDER_RAW, FI_ORDER_RAS, FI_ORDER_WAR, FI_ORDER_WAW,
    FI_ORDER_WAS, FI_ORDER_SAR, FI_ORDER_SAW, FI_ORDER_SAS, FI_ORDER_STRICT, FI_ORDER_RMA_RAR,
    FI_ORDER_RMA_RAW, FI_ORDER_RMA_WAR, FI_ORDER_RMA_WAW, FI_ORDER_ATOMIC_RAR,
    FI_ORDER_ATOMIC_RAW, FI_ORDER_ATOMIC_WAR, FI_ORDER_ATOMIC_WAW, FI_ORDER_DATA,
    FI_CONTEXT, FI_MSG_PREFIX, FI_ASYNC_IOV, FI_RX_CQ_DATA, FI_LOCAL_MR, FI_NOTIFY_FLAGS_ONLY,
    FI_RESTRICTED_COMP, FI_CONTEXT2, FI_BUFFERED_RECV,
    FI_SELECTIVE_COMPLETION,
    FI_PATH_MAX, FI_NAME_MAX, FI_VERSION_MAX,
    FI_FORMAT_UNSPEC, FI_SOCKADDR, FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_SOCKADDR_IB, FI_ADDR_PSMX,
    FI_ADDR_GNI, FI_ADDR_BGQ, FI_ADDR_MLX, FI_ADDR_STR, FI_ADDR_PSMX2, FI_ADDR_IB_UD, FI_ADDR_EFA,
    FI_ADDR_PSMX3, FI_ADDR_OPX, FI_ADDR_CXI,
    FI_AV_UNSPEC, FI_AV_MAP, FI_AV_TABLE,
    FI_MR_UNSPEC, FI_MR_BASIC, FI_MR_SCALABLE,
    FI_PROGRESS_UNSPEC, FI_PROGRESS_AUTO, FI_PROGRESS_MANUAL,
    FI_THREAD_UNSPEC, FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_DOMAIN, FI_THREAD_COMPLETION,
    FI_THREAD_ENDPOINT,
    FI_RM_UNSPEC, FI_RM_DISABLED, FI_RM_ENABLED,
    FI_EP_UNSPEC, FI_EP_MSG, FI_EP_DGRAM, FI_EP_RDM, FI_EP_SOCK_STREAM, FI_EP_SOCK_DGRAM,
    FI_PROTO_UNSPEC, FI_PROTO_RDMA_CM_IB_RC, FI_PROTO_IWARP, FI_PROTO_IB_UD, FI_PROTO_PSMX,
    FI_PROTO_UDP, FI_PROTO_SOCK_TCP, FI_PROTO_MXM, FI_PROTO_IWARP_RDM, FI_PROTO_IB_RDM,
    FI_PROTO_GNI, FI_PROTO_RXM, FI_PROTO_RXD, FI_PROTO_MLX, FI_PROTO_NETWORKDIRECT,
    FI_PROTO_PSMX2, FI_PROTO_SHM, FI_PROTO_MRAIL, FI_PROTO_RSTREAM, FI_PROTO_RDMA_CM_IB_XRC,
    FI_PROTO_EFA, FI_PROTO_PSMX3, FI_PROTO_RXM_TCP, FI_PROTO_OPX, FI_PROTO_CXI, FI_PROTO_XNET,
    FI_TC_UNSPEC, FI_TC_DSCP, FI_TC_LABEL, FI_TC_BEST_EFFORT, FI_TC_LOW_LATENCY,
    FI_TC_DEDICATED_ACCESS, FI_TC_BULK_DATA, FI_TC_SCAVENGER, FI_TC_NETWORK_CTRL,
    FI_BUS_UNSPEC, FI_BUS_UNKNOWN, FI_BUS_PCI,
    FI_LINK_UNKNOWN, FI_LINK_DOWN, FI_LINK_UP,
    FI_CLASS_UNSPEC, FI_CLASS_FABRIC, FI_CLASS_DOMAIN, FI_CLASS_EP, FI_CLASS_SEP, FI_CLASS_RX_CTX,
    FI_CLASS_SRX_CTX, FI_CLASS_TX_CTX, FI_CLASS_STX_CTX, FI_CLASS_PEP, FI_CLASS_INTERFACE,
    FI_CLASS_AV, FI_CLASS_MR, FI_CLASS_EQ, FI_CLASS_CQ, FI_CLASS_CNTR, FI_CLASS_WAIT,
    FI_CLASS_POLL, FI_CLASS_CONNREQ, FI_CLASS_MC, FI_CLASS_NIC, FI_CLASS_AV_SET,
    FI_CLASS_MR_CACHE, FI_CLASS_MEM_MONITOR, FI_CLASS_PEER_CQ, FI_CLASS_PEER_SRX, FI_CLASS_LOG,
    FI_CLASS_PEER_AV, FI_CLASS_PEER_AV_SET,
    FI_GETFIDFLAG, FI_SETFIDFLAG, FI_GETOPSFLAG, FI_SETOPSFLAG, FI_ALIAS, FI_GETWAIT, FI_ENABLE,
    FI_BACKLOG, FI_GET_RAW_MR, FI_MAP_RAW_MR, FI_UNMAP_KEY, FI_QUEUE_WORK, FI_CANCEL_WORK,
    FI_FLUSH_WORK, FI_REFRESH, FI_DUP, FI_GETWAITOBJ, FI_GET_VAL, FI_SET_VAL, FI_EXPORT_FID,
    FI_TYPE_INFO, FI_TYPE_EP_TYPE, FI_TYPE_CAPS, FI_TYPE_OP_FLAGS, FI_TYPE_ADDR_FORMAT,
    FI_TYPE_TX_ATTR, FI_TYPE_RX_ATTR, FI_TYPE_EP_ATTR, FI_TYPE_DOMAIN_ATTR, FI_TYPE_FABRIC_ATTR,
    FI_TYPE_THREADING, FI_TYPE_PROGRESS, FI_TYPE_PROTOCOL, FI_TYPE_MSG_ORDER, FI_TYPE_MODE,
    FI_TYPE_AV_TYPE, FI_TYPE_ATOMIC_TYPE, FI_TYPE_ATOMIC_OP, FI_TYPE_VERSION, FI_TYPE_EQ_EVENT,
    FI_TYPE_CQ_EVENT_FLAGS, FI_TYPE_MR_MODE, FI_TYPE_OP_TYPE, FI_TYPE_FID, FI_TYPE_COLLECTIVE_OP,
    FI_TYPE_HMEM_IFACE, FI_TYPE_CQ_FORMAT, FI_TYPE_LOG_LEVEL, FI_TYPE_LOG_SUBSYS,
    FI_PARAM_STRING, FI_PARAM_INT, FI_PARAM_BOOL, FI_PARAM_SIZE_T,
    FI_SUCCESS, FI_EPERM, FI_ENOENT, FI_EINTR, FI_EIO, FI_E2BIG, FI_EBADF, FI_EAGAIN, FI_ENOMEM,
    FI_EACCES, FI_EFAULT, FI_EBUSY, FI_ENODEV, FI_EINVAL, FI_EMFILE, FI_ENOSPC, FI_ENOSYS,
    FI_EWOULDBLOCK, FI_ENOMSG, FI_ENODATA, FI_EOVERFLOW, FI_EMSGSIZE, FI_ENOPROTOOPT,
    FI_EOPNOTSUPP, FI_EADDRINUSE, FI_EADDRNOTAVAIL, FI_ENETDOWN, FI_ENETUNREACH, FI_ECONNABORTED,
    FI_ECONNRESET, FI_ENOBUFS, FI_EISCONN, FI_ENOTCONN, FI_ESHUTDOWN, FI_ETIMEDOUT,
    FI_ECONNREFUSED, FI_EHOSTDOWN, FI_EHOSTUNREACH, FI_EALREADY, FI_EINPROGRESS, FI_EREMOTEIO,
    FI_ECANCELED, FI_EKEYREJECTED,
    FI_ERRNO_OFFSET, FI_EOTHER, FI_ETOOSMALL, FI_EOPBADSTATE, FI_EAVAIL, FI_EBADFLAGS, FI_ENOEQ,
    FI_EDOMAIN, FI_ENOCQ, FI_ECRC, FI_ETRUNC, FI_ENOKEY, FI_ENOAV, FI_EOVERRUN, FI_ENORX,
    FI_ERRNO_MAX,
    FI_SYMMETRIC, FI_SYNC_ERR, FI_UNIVERSE, FI_BARRIER_SET, FI_BROADCAST_SET, FI_ALLTOALL_SET,
    FI_ALLREDUCE_SET, FI_ALLGATHER_SET, FI_REDUCE_SCATTER_SET, FI_REDUCE_SET, FI_SCATTER_SET,
    FI_GATHER_SET,
    FI_COLLECTIVE_OFFSET,
    FI_REG_MR,
    FI_HMEM_SYSTEM, FI_HMEM_CUDA, FI_HMEM_ROCR, FI_HMEM_ZE, FI_HMEM_NEURON, FI_HMEM_SYNAPSEAI,
    FI_INT8, FI_UINT8, FI_INT16, FI_UINT16, FI_INT32, FI_UINT32, FI_INT64, FI_UINT64, FI_FLOAT,
    FI_DOUBLE, FI_FLOAT_COMPLEX, FI_DOUBLE_COMPLEX, FI_LONG_DOUBLE, FI_LONG_DOUBLE_COMPLEX,
    FI_DATATYPE_LAST, FI_INT128, FI_UINT128, FI_VOID,
    FI_MIN, FI_MAX, FI_SUM, FI_PROD, FI_LOR, FI_LAND, FI_BOR, FI_BAND, FI_LXOR, FI_BXOR,
    FI_ATOMIC_READ, FI_ATOMIC_WRITE, FI_CSWAP, FI_CSWAP_NE, FI_CSWAP_LE, FI_CSWAP_LT, FI_CSWAP_GE,
    FI_CSWAP_GT, FI_MSWAP, FI_ATOMIC_OP_LAST, FI_NOOP,
    FI_BARRIER, FI_BROADCAST, FI_ALLTOALL, FI_ALLREDUCE, FI_ALLGATHER, FI_REDUCE_SCATTER,
    FI_REDUCE, FI_SCATTER, FI_GATHER,
    FI_OPT_ENDPOINT,
    FI_OPT_MIN_MULTI_RECV, FI_OPT_CM_DATA_SIZE, FI_OPT_BUFFERED_MIN, FI_OPT_BUFFERED_LIMIT,
    FI_OPT_SEND_BUF_SIZE, FI_OPT_RECV_BUF_SIZE, FI_OPT_TX_SIZE, FI_OPT_RX_SIZE,
    FI_OPT_FI_HMEM_P2P, FI_OPT_XPU_TRIGGER,
    FI_HMEM_P2P_ENABLED, FI_HMEM_P2P_REQUIRED, FI_HMEM_P2P_PREFERRED, FI_HMEM_P2P_DISABLED,
    FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_SET, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD,
    FI_WAIT_POLLFD,
    FI_NOTIFY, FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN, FI_MR_COMPLETE, FI_AV_COMPLETE,
    FI_JOIN_COMPLETE,
    FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA,
    FI_CQ_FORMAT_TAGGED,
    FI_CQ_COND_NONE, FI_CQ_COND_THRESHOLD,
    FI_CNTR_EVENTS_COMP,
    FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC,
    FI_TRIGGER_THRESHOLD, FI_TRIGGER_XPU,
    FI_OP_RECV, FI_OP_SEND, FI_OP_TRECV, FI_OP_TSEND, FI_OP_READ, FI_OP_WRITE, FI_OP_ATOMIC,
    FI_OP_FETCH_ATOMIC, FI_OP_COMPARE_ATOMIC, FI_OP_CNTR_SET, FI_OP_CNTR_ADD,
    FI_LOG_CORE, FI_LOG_FABRIC, FI_LOG_DOMAIN, FI_LOG_EP_CTRL, FI_LOG_EP_DATA, FI_LOG_AV,
    FI_LOG_CQ, FI_LOG_EQ, FI_LOG_MR, FI_LOG_CNTR, FI_LOG_SUBSYS_MAX,
    FI_LOG_WARN, FI_LOG_TRACE, FI_LOG_INFO, FI_LOG_DEBUG, FI_LOG_MAX,
    FI_PROV_SPECIFIC_EFA, FI_PROV_SPECIFIC_TCP,
    FI_LOG_PROV_FILTERED,
    FI_OPT_EFA_RNR_RETRY,
}

// ---------------------------------------------------------------------------------------------
// Rust type names → canonical strings → C spellings.
// ---------------------------------------------------------------------------------------------

/// Drops module paths from a `type_name` (`core::ffi::c_void` → `c_void`).
fn strip_paths(s: &str) -> String {
    let mut out = String::new();
    let mut ident = String::new();
    let mut chars = s.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch.is_alphanumeric() || ch == '_' {
            ident.push(ch);
        } else if ch == ':' && chars.peek() == Some(&':') {
            chars.next();
            ident.clear();
        } else {
            out.push_str(&ident);
            ident.clear();
            out.push(ch);
        }
    }
    out.push_str(&ident);
    out
}

#[derive(Debug)]
enum Ty {
    Name(String),
    Ptr {
        konst: bool,
        to: Box<Ty>,
    },
    Array(Box<Ty>, String),
    /// `Option<unsafe extern "C" fn(..) -> ..>`, i.e. a nullable C function pointer.
    FnPtr {
        args: Vec<Ty>,
        ret: Option<Box<Ty>>,
    },
}

struct TyParser<'a> {
    s: &'a str,
}

impl<'a> TyParser<'a> {
    fn eat(&mut self, tok: &str) -> bool {
        let t = self.s.trim_start();
        if let Some(rest) = t.strip_prefix(tok) {
            self.s = rest;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &str) {
        assert!(
            self.eat(tok),
            "type parser: expected {tok:?} at {:?}",
            self.s
        );
    }

    fn ident(&mut self) -> String {
        let t = self.s.trim_start();
        let n = t
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(t.len());
        assert!(n > 0, "type parser: expected a name at {t:?}");
        self.s = &t[n..];
        t[..n].to_string()
    }

    fn ty(&mut self) -> Ty {
        if self.eat("*mut ") {
            Ty::Ptr {
                konst: false,
                to: Box::new(self.ty()),
            }
        } else if self.eat("*const ") {
            Ty::Ptr {
                konst: true,
                to: Box::new(self.ty()),
            }
        } else if self.eat("[") {
            let elem = self.ty();
            self.expect(";");
            let n = self.ident();
            self.expect("]");
            Ty::Array(Box::new(elem), n)
        } else if self.eat("Option<") {
            self.expect("unsafe extern \"C\" fn(");
            let mut args = Vec::new();
            if !self.eat(")") {
                loop {
                    args.push(self.ty());
                    if self.eat(")") {
                        break;
                    }
                    self.expect(",");
                }
            }
            let ret = if self.eat("->") {
                Some(Box::new(self.ty()))
            } else {
                None
            };
            self.expect(">");
            Ty::FnPtr { args, ret }
        } else {
            Ty::Name(self.ident())
        }
    }
}

fn parse_ty(canonical: &str) -> Ty {
    let mut p = TyParser { s: canonical };
    let t = p.ty();
    assert!(
        p.s.trim().is_empty(),
        "type parser: trailing {:?} in {canonical:?}",
        p.s
    );
    t
}

/// C spelling of a Rust scalar / mirrored type name.
fn c_base(name: &str, c_names: &BTreeMap<&str, &str>) -> String {
    let c_char = strip_paths(std::any::type_name::<core::ffi::c_char>());
    let s = match name {
        n if n == c_char => "char",
        "u8" => "uint8_t",
        "u16" => "uint16_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "i8" => "int8_t",
        "i16" => "int16_t",
        "i32" => "int",
        "i64" => "int64_t",
        "usize" => "size_t",
        "isize" => "ssize_t",
        "bool" => "_Bool",
        "c_void" => "void",
        "iovec" => "struct iovec",
        "pollfd" => "struct pollfd",
        "pthread_mutex_t" => "pthread_mutex_t",
        "pthread_cond_t" => "pthread_cond_t",
        n => match c_names.get(n) {
            Some(c) => c,
            None => panic!("no C spelling known for Rust type {n:?}"),
        },
    };
    s.to_string()
}

/// C declaration of `decl` with type `t` (`decl` empty gives an abstract type name).
fn c_decl(t: &Ty, decl: &str, konst: bool, c_names: &BTreeMap<&str, &str>) -> String {
    let wrap = |d: &str| {
        if d.starts_with('*') {
            format!("({d})")
        } else {
            d.to_string()
        }
    };
    match t {
        Ty::Name(n) => {
            let base = c_base(n, c_names);
            let q = if konst { "const " } else { "" };
            if decl.is_empty() {
                format!("{q}{base}")
            } else {
                format!("{q}{base} {decl}")
            }
        }
        Ty::Ptr {
            konst: pointee_const,
            to,
        } => {
            let d = if konst {
                format!("* const {decl}")
            } else {
                format!("*{decl}")
            };
            c_decl(to, d.trim_end(), *pointee_const, c_names)
        }
        Ty::Array(elem, n) => {
            assert!(!konst, "const arrays are not expected");
            c_decl(elem, &format!("{}[{n}]", wrap(decl)), false, c_names)
        }
        Ty::FnPtr { args, ret } => {
            assert!(!konst, "const function pointers are not expected");
            let params = if args.is_empty() {
                "void".to_string()
            } else {
                args.iter()
                    .map(|a| c_decl(a, "", false, c_names))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let d = format!("(*{decl})({params})");
            match ret {
                Some(r) => c_decl(r, &d, false, c_names),
                None => format!("void {d}"),
            }
        }
    }
}

/// C name of a Rust field: keywords carry a trailing underscore in Rust.
fn c_field(rust: &str) -> &str {
    rust.strip_suffix('_').unwrap_or(rust)
}

fn c_str_literal(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

// ---------------------------------------------------------------------------------------------
// Both sides of the value comparison.
// ---------------------------------------------------------------------------------------------

struct Model {
    types: Vec<TypeSpec>,
    aliases: Vec<AliasSpec>,
    consts: Vec<(&'static str, u64)>,
    exprs: Vec<(&'static str, u64)>,
    /// Rust name → C spelling, for every mirrored type.
    c_names: BTreeMap<&'static str, &'static str>,
}

impl Model {
    fn new() -> Model {
        let types = types();
        let c_names = types.iter().map(|t| (t.rust, t.c)).collect();
        Model {
            types,
            aliases: aliases(),
            consts: consts(),
            exprs: exprs(),
            c_names,
        }
    }

    /// The lines the C program must print, computed from the Rust mirror.
    fn rust_lines(&self) -> Vec<String> {
        let mut v = Vec::new();
        for a in &self.aliases {
            v.push(format!("size {} {}", a.rust, a.size));
            v.push(format!("align {} {}", a.rust, a.align));
            v.push(format!("type {} {}", a.rust, strip_paths(a.ty)));
        }
        for t in &self.types {
            v.push(format!("size {} {}", t.rust, t.size));
            v.push(format!("align {} {}", t.rust, t.align));
            for f in &t.fields {
                v.push(format!("off {}.{} {}", t.rust, c_field(f.rust), f.offset));
                v.push(format!(
                    "type {}.{} {}",
                    t.rust,
                    c_field(f.rust),
                    strip_paths(f.ty)
                ));
            }
        }
        for (n, val) in &self.consts {
            v.push(format!("const {n} {val}"));
        }
        for (e, val) in &self.exprs {
            v.push(format!("expr {} {val}", e.replace(' ', "")));
        }
        v
    }

    /// layout.c: prints the same lines, computed by the C compiler from the real headers.
    fn c_source(&self) -> String {
        let mut s = String::new();
        s.push_str(
            "/* GENERATED by tests/abi_layout.rs from its type and constant lists: do not edit.\n\
             \x20* Regenerate with: ABI_LAYOUT_BLESS=1 cargo test --test abi_layout\n\
             \x20*\n\
             \x20* Prints size/align/offset of every mirrored type and field, the Rust type of each\n\
             \x20* field if the C compiler finds the C field type compatible with the C spelling of\n\
             \x20* that Rust type, and the value of every constant, for comparison with the Rust side.\n\
             \x20*/\n\
             #include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <sys/types.h>\n",
        );
        for h in HEADERS {
            let _ = writeln!(s, "#include <rdma/{h}>");
        }
        s.push_str(
            "\n\
             #define SIZE(N, T) printf(\"size %s %zu\\nalign %s %zu\\n\", N, sizeof(T), N, _Alignof(T));\n\
             #define OFF(N, T, F) printf(\"off %s.%s %zu\\n\", N, #F, offsetof(T, F));\n\
             /* prints RS (the Rust type) if the C field type is compatible with CT (its C spelling) */\n\
             #define FTYPE(N, T, F, CT, RS) printf(\"type %s.%s %s\\n\", N, #F, \\\n\
             \x20       __builtin_types_compatible_p(__typeof__(((T *)0)->F), CT) ? RS : \"C type is not \" #CT);\n\
             #define ATYPE(N, T, CT, RS) printf(\"type %s %s\\n\", N, \\\n\
             \x20       __builtin_types_compatible_p(T, CT) ? RS : \"C type is not \" #CT);\n\
             #define CONST(X) printf(\"const %s %llu\\n\", #X, (unsigned long long)(X));\n\
             #define EXPR(S, X) printf(\"expr %s %llu\\n\", S, (unsigned long long)(X));\n\
             \n\
             int main(void)\n{\n",
        );
        for a in &self.aliases {
            let rs = strip_paths(a.ty);
            let ct = c_decl(&parse_ty(&rs), "", false, &self.c_names);
            let n = c_str_literal(a.rust);
            let _ = writeln!(s, "\tSIZE({n}, {})", a.c);
            let _ = writeln!(s, "\tATYPE({n}, {}, {ct}, {})", a.c, c_str_literal(&rs));
        }
        for t in &self.types {
            let n = c_str_literal(t.rust);
            let _ = writeln!(s, "\n\tSIZE({n}, {})", t.c);
            for f in &t.fields {
                let cf = c_field(f.rust);
                let rs = strip_paths(f.ty);
                let ct = c_decl(&parse_ty(&rs), "", false, &self.c_names);
                let _ = writeln!(s, "\tOFF({n}, {}, {cf})", t.c);
                let _ = writeln!(
                    s,
                    "\tFTYPE({n}, {}, {cf}, {ct}, {})",
                    t.c,
                    c_str_literal(&rs)
                );
            }
        }
        s.push('\n');
        for (n, _) in &self.consts {
            let _ = writeln!(s, "\tCONST({n})");
        }
        s.push('\n');
        for (e, _) in &self.exprs {
            let _ = writeln!(s, "\tEXPR({}, {e})", c_str_literal(&e.replace(' ', "")));
        }
        s.push_str("\treturn 0;\n}\n");
        s
    }

    /// Names the list covers, in the vocabulary of the coverage checks.
    fn names(&self, with_aliases: bool) -> Vec<String> {
        let mut v = Vec::new();
        for t in &self.types {
            for f in &t.fields {
                v.push(format!("field {}.{}", t.rust, c_field(f.rust)));
            }
        }
        for (n, _) in &self.consts {
            v.push(format!("const {n}"));
        }
        if with_aliases {
            for a in &self.aliases {
                v.push(format!("alias {}", a.rust));
            }
        }
        v
    }
}

// ---------------------------------------------------------------------------------------------
// Comparison.
// ---------------------------------------------------------------------------------------------

/// Compares two sets of `kind key value...` lines; returns readable problems.
fn compare(
    title: &str,
    left_name: &str,
    left: &[String],
    right_name: &str,
    right: &[String],
) -> Vec<String> {
    fn split(
        title: &str,
        lines: &[String],
        problems: &mut Vec<String>,
        side: &str,
    ) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        for l in lines {
            let mut it = l.splitn(3, ' ');
            let key = format!("{} {}", it.next().unwrap_or(""), it.next().unwrap_or(""));
            let val = it.next().unwrap_or("").to_string();
            if m.insert(key.clone(), val).is_some() {
                problems.push(format!("{title}: `{key}` appears twice on the {side} side"));
            }
        }
        m
    }
    let mut problems = Vec::new();
    let l = split(title, left, &mut problems, left_name);
    let r = split(title, right, &mut problems, right_name);
    for (k, lv) in &l {
        match r.get(k) {
            Some(rv) if rv == lv => {}
            Some(rv) => problems.push(format!(
                "{title}: MISMATCH `{k}`: {left_name} = {lv}, {right_name} = {rv}"
            )),
            None => problems.push(format!(
                "{title}: only in {left_name}: `{}`",
                format!("{k} {lv}").trim_end()
            )),
        }
    }
    for (k, rv) in &r {
        if !l.contains_key(k) {
            problems.push(format!(
                "{title}: only in {right_name}: `{}`",
                format!("{k} {rv}").trim_end()
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// Header scan (coverage: every struct field and FI_* constant of the spec is in the list).
// ---------------------------------------------------------------------------------------------

/// Removes comments, joins continued lines.
fn clean_c(src: &str) -> String {
    let mut out = String::new();
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
            out.push(' ');
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"\\\n") {
            i += 2;
            out.push(' ');
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Index just past the `}` matching the `{` at `open`.
fn matching_brace(s: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i + 1;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces in header");
}

/// Parses a struct/union body into field names; anonymous unions/structs become pseudo-types
/// `<owner>_<field>` in `out`.
fn parse_body(owner: &str, body: &str, out: &mut BTreeMap<String, Vec<String>>) {
    let mut fields = Vec::new();
    let mut decl = String::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i..].chars().next().unwrap();
        if c == '{' {
            let end = matching_brace(body, i);
            decl.push_str(&body[i..end]);
            i = end;
            continue;
        }
        if c == ';' {
            let d = decl.trim().to_string();
            decl.clear();
            i += 1;
            if d.is_empty() {
                continue;
            }
            let name;
            if let (Some(open), true) = (
                d.find('{'),
                d.starts_with("union") || d.starts_with("struct"),
            ) {
                let close = matching_brace(&d, open);
                name = d[close..]
                    .trim()
                    .trim_end_matches(|c: char| !is_ident_char(c))
                    .to_string();
                parse_body(&format!("{owner}_{name}"), &d[open + 1..close - 1], out);
            } else if let Some(p) = d.find("(*") {
                name = d[p + 2..]
                    .chars()
                    .take_while(|&c| is_ident_char(c))
                    .collect();
            } else {
                let no_array = match d.find('[') {
                    Some(p) => &d[..p],
                    None => &d[..],
                };
                let rev: String = no_array
                    .trim_end()
                    .chars()
                    .rev()
                    .take_while(|&c| is_ident_char(c))
                    .collect();
                name = rev.chars().rev().collect();
            }
            assert!(
                !name.is_empty(),
                "header scan: no field name in {d:?} of {owner}"
            );
            fields.push(name);
            continue;
        }
        decl.push(c);
        i += c.len_utf8();
    }
    out.insert(owner.to_string(), fields);
}

/// `field S.f` and `const NAME` lines for everything the headers define.
fn header_names() -> Vec<String> {
    let mut structs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut consts: BTreeSet<String> = BTreeSet::new();
    for h in HEADERS {
        let path = Path::new(INCLUDE_DIR).join(h);
        let src = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("cannot read {}: {e} (the ABI target is libfabric 1.17's headers: install libfabric-dev)", path.display())
        });
        let src = clean_c(&src);
        // Object-like #defines with a value that is not a string or an attribute.
        let mut code = String::new();
        for line in src.lines() {
            let t = line.trim_start();
            if let Some(rest) = t.strip_prefix('#') {
                let rest = rest.trim_start();
                if let Some(def) = rest.strip_prefix("define") {
                    let def = def.trim_start();
                    let name: String = def.chars().take_while(|&c| is_ident_char(c)).collect();
                    let after = &def[name.len()..];
                    let value = after.trim();
                    if name.starts_with("FI_")
                        && !after.starts_with('(')
                        && !value.is_empty()
                        && !value.contains('"')
                        && !value.starts_with("__")
                    {
                        consts.insert(name);
                    }
                }
                continue; // no preprocessor lines in the code scanned below
            }
            code.push_str(line);
            code.push('\n');
        }
        // enum { A, B = x, ... } members and struct definitions.
        let mut pos = 0;
        while pos < code.len() {
            let rest = &code[pos..];
            let kw = ["enum", "struct"]
                .iter()
                .filter_map(|k| rest.find(k).map(|i| (i, *k)))
                .min();
            let Some((at, kw)) = kw else { break };
            let start = pos + at;
            pos = start + kw.len();
            let before_ok =
                start == 0 || !is_ident_char(code[..start].chars().next_back().unwrap());
            let after = &code[pos..];
            if !before_ok || !after.starts_with(|c: char| c.is_whitespace() || c == '{') {
                continue;
            }
            let after_trim = after.trim_start();
            let name: String = after_trim
                .chars()
                .take_while(|&c| is_ident_char(c))
                .collect();
            let after_name = after_trim[name.len()..].trim_start();
            if !after_name.starts_with('{') {
                continue; // a use, not a definition
            }
            let open = code.len() - after_name.len();
            let close = matching_brace(&code, open);
            let body = &code[open + 1..close - 1];
            if kw == "enum" {
                for item in body.split(',') {
                    let n = item.split('=').next().unwrap().trim();
                    if n.starts_with("FI_") {
                        consts.insert(n.to_string());
                    }
                }
            } else if !name.is_empty() {
                parse_body(&name, body, &mut structs);
            }
            pos = close;
        }
    }
    let mut v = Vec::new();
    for (s, fields) in &structs {
        if NOT_MIRRORED
            .iter()
            .any(|n| s == n || s.starts_with(&format!("{n}_")))
        {
            continue;
        }
        for f in fields {
            v.push(format!("field {s}.{f}"));
        }
    }
    for c in consts {
        v.push(format!("const {c}"));
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Source scan (coverage: everything fi/abi/ and consts.rs declare is in the list).
// ---------------------------------------------------------------------------------------------

fn source_names() -> Vec<String> {
    // Every file of fi/abi/ (one per header), read from the tree so a new file cannot escape.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fi/abi");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|x| x == "rs"));
    files.sort();
    assert!(files.len() >= 11, "fi/abi/ holds mod.rs and one file per header: {files:?}");
    let abi: String = files.iter().map(|p| std::fs::read_to_string(p).unwrap() + "\n").collect();
    let consts = include_str!("../fi/consts.rs");
    let mut v = Vec::new();
    let mut current: Option<String> = None;
    for line in abi.lines() {
        if let Some(rest) = line
            .strip_prefix("pub struct ")
            .or_else(|| line.strip_prefix("pub union "))
        {
            current = Some(rest.chars().take_while(|&c| is_ident_char(c)).collect());
        } else if let Some(rest) = line.strip_prefix("pub type ") {
            v.push(format!(
                "alias {}",
                rest.chars()
                    .take_while(|&c| is_ident_char(c))
                    .collect::<String>()
            ));
        } else if line.starts_with('}') {
            current = None;
        } else if let (Some(s), Some(rest)) = (&current, line.strip_prefix("    pub ")) {
            let f: String = rest.chars().take_while(|&c| is_ident_char(c)).collect();
            v.push(format!("field {s}.{}", c_field(&f)));
        }
    }
    for line in consts.lines() {
        if let Some(rest) = line.strip_prefix("pub const ") {
            if !rest.starts_with("fn ") {
                v.push(format!(
                    "const {}",
                    rest.chars()
                        .take_while(|&c| is_ident_char(c))
                        .collect::<String>()
                ));
            }
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// The test.
// ---------------------------------------------------------------------------------------------

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles and runs the generated C program; returns its output lines.
fn run_c(source: &str) -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("abi_layout");
    std::fs::create_dir_all(&dir).unwrap();
    let c_file = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&c_file, source).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&c_file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "compiling {} failed:\n{}{}",
        c_file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe)
        .output()
        .expect("cannot run the layout program");
    assert!(
        run.status.success(),
        "{} failed: {:?}",
        exe.display(),
        run.status
    );
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn abi_matches_libfabric_1_17_headers() {
    let model = Model::new();
    let c_source = model.c_source();

    // The checked-in C file must be the generated one.
    let checked_in = manifest_dir().join("tests/abi/layout.c");
    let mut problems = Vec::new();
    if std::env::var_os("ABI_LAYOUT_BLESS").is_some() {
        std::fs::write(&checked_in, &c_source).unwrap();
    } else if std::fs::read_to_string(&checked_in).ok().as_deref() != Some(c_source.as_str()) {
        problems.push(format!(
            "{} is missing or stale: regenerate it with `ABI_LAYOUT_BLESS=1 cargo test --test abi_layout`",
            checked_in.display()
        ));
    }

    // 1. Values: Rust mirror vs C compiler.
    let rust = model.rust_lines();
    let c = run_c(&c_source);
    problems.extend(compare("layout", "Rust", &rust, "C", &c));

    // 2. Coverage against the headers.
    let spec = header_names();
    problems.extend(compare(
        "coverage",
        "test list",
        &model.names(false),
        "headers",
        &spec,
    ));

    // 3. Coverage against the mirror sources.
    let src = source_names();
    problems.extend(compare(
        "coverage",
        "test list",
        &model.names(true),
        "fi/abi/*.rs, consts.rs",
        &src,
    ));

    let n_fields: usize = model.types.iter().map(|t| t.fields.len()).sum();
    println!(
        "abi_layout: {} types ({} fields), {} aliases, {} constants, {} const-fn checks: \
         {} Rust lines vs {} C lines; {} header names, {} source names; {} problem(s)",
        model.types.len(),
        n_fields,
        model.aliases.len(),
        model.consts.len(),
        model.exprs.len(),
        rust.len(),
        c.len(),
        spec.len(),
        src.len(),
        problems.len()
    );
    assert!(
        problems.is_empty(),
        "ABI problems ({}):\n  {}\n",
        problems.len(),
        problems.join("\n  ")
    );
}
