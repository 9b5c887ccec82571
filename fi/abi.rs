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
//! This file depends only on `core` and `libc`, so it can be `#[path]`-included on its own.
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

// ---------------------------------------------------------------------------------------------
// fabric.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ioc {
    pub addr: *mut c_void,
    pub count: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_tx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
    pub tclass: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_rx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: usize,
    pub size: usize,
    pub iov_limit: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ep_attr {
    pub type_: fi_ep_type,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub data_progress: fi_progress,
    pub resource_mgmt: fi_resource_mgmt,
    pub av_type: fi_av_type,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fabric_attr {
    pub fabric: *mut fid_fabric,
    pub name: *mut c_char,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
    pub api_version: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr,
    pub rx_attr: *mut fi_rx_attr,
    pub ep_attr: *mut fi_ep_attr,
    pub domain_attr: *mut fi_domain_attr,
    pub fabric_attr: *mut fi_fabric_attr,
    pub nic: *mut fid_nic,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_device_attr {
    pub name: *mut c_char,
    pub device_id: *mut c_char,
    pub device_version: *mut c_char,
    pub vendor_id: *mut c_char,
    pub driver: *mut c_char,
    pub firmware: *mut c_char,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_pci_attr {
    pub domain_id: u16,
    pub bus_id: u8,
    pub device_id: u8,
    pub function_id: u8,
}

/// The anonymous `union { struct fi_pci_attr pci; } attr` of `struct fi_bus_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_bus_attr_attr {
    pub pci: fi_pci_attr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_bus_attr {
    pub bus_type: fi_bus_type,
    pub attr: fi_bus_attr_attr,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_link_attr {
    pub address: *mut c_char,
    pub mtu: usize,
    pub speed: usize,
    pub state: fi_link_state,
    pub network_type: *mut c_char,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops {
    pub size: usize,
    pub close: Option<unsafe extern "C" fn(fid: *mut fid) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(fid: *mut fid, bfid: *mut fid, flags: u64) -> c_int>,
    pub control:
        Option<unsafe extern "C" fn(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int>,
    pub ops_open: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            name: *const c_char,
            flags: u64,
            ops: *mut *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub tostr: Option<unsafe extern "C" fn(fid: *const fid, buf: *mut c_char, len: usize) -> c_int>,
    pub ops_set: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            name: *const c_char,
            flags: u64,
            ops: *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
}

/// All fabric interface descriptors start with this structure.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid {
    pub fclass: usize,
    pub context: *mut c_void,
    pub ops: *mut fi_ops,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_fabric {
    pub size: usize,
    pub domain: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            dom: *mut *mut fid_domain,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub passive_ep: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            pep: *mut *mut fid_pep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub eq_open: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            attr: *mut fi_eq_attr,
            eq: *mut *mut fid_eq,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub wait_open: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            attr: *mut fi_wait_attr,
            waitset: *mut *mut fid_wait,
        ) -> c_int,
    >,
    pub trywait: Option<
        unsafe extern "C" fn(fabric: *mut fid_fabric, fids: *mut *mut fid, count: c_int) -> c_int,
    >,
    pub domain2: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            dom: *mut *mut fid_domain,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_fabric {
    pub fid: fid,
    pub ops: *mut fi_ops_fabric,
    pub api_version: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_nic {
    pub fid: fid,
    pub device_attr: *mut fi_device_attr,
    pub bus_attr: *mut fi_bus_attr,
    pub link_attr: *mut fi_link_attr,
    pub prov_attr: *mut c_void,
}

/// Argument of `fi_control(FI_ALIAS)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_alias {
    pub fid: *mut *mut fid,
    pub flags: u64,
}

/// Argument of `fi_control(FI_GET_VAL / FI_SET_VAL)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fid_var {
    pub name: c_int,
    pub val: *mut c_void,
}

/// Argument of `fi_control(FI_GET_RAW_MR)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_raw_attr {
    pub flags: u64,
    pub base_addr: *mut u64,
    pub raw_key: *mut u8,
    pub key_size: *mut usize,
}

/// Argument of `fi_control(FI_MAP_RAW_MR)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_map_raw {
    pub flags: u64,
    pub base_addr: u64,
    pub raw_key: *mut u8,
    pub key_size: usize,
    pub key: *mut u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_param {
    pub name: *const c_char,
    pub type_: fi_param_type,
    pub help_string: *const c_char,
    pub value: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_context {
    pub internal: [*mut c_void; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_context2 {
    pub internal: [*mut c_void; 8],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_recv_context {
    pub ep: *mut fid_ep,
    pub context: *mut c_void,
}

// ---------------------------------------------------------------------------------------------
// fi_domain.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_av_attr {
    pub type_: fi_av_type,
    pub rx_ctx_bits: c_int,
    pub count: usize,
    pub ep_per_node: usize,
    pub name: *const c_char,
    pub map_addr: *mut c_void,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_av_set_attr {
    pub count: usize,
    pub start_addr: fi_addr_t,
    pub end_addr: fi_addr_t,
    pub stride: u64,
    pub comm_key_size: usize,
    pub comm_key: *mut u8,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_av {
    pub size: usize,
    pub insert: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            addr: *const c_void,
            count: usize,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub insertsvc: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            node: *const c_char,
            service: *const c_char,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub insertsym: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            node: *const c_char,
            nodecnt: usize,
            service: *const c_char,
            svccnt: usize,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub remove: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            fi_addr: *mut fi_addr_t,
            count: usize,
            flags: u64,
        ) -> c_int,
    >,
    pub lookup: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            fi_addr: fi_addr_t,
            addr: *mut c_void,
            addrlen: *mut usize,
        ) -> c_int,
    >,
    pub straddr: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            addr: *const c_void,
            buf: *mut c_char,
            len: *mut usize,
        ) -> *const c_char,
    >,
    pub av_set: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            attr: *mut fi_av_set_attr,
            av_set: *mut *mut fid_av_set,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_av {
    pub fid: fid,
    pub ops: *mut fi_ops_av,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_mr {
    pub fid: fid,
    pub mem_desc: *mut c_void,
    pub key: u64,
}

/// The anonymous `union { ... } device` of `struct fi_mr_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_mr_attr_device {
    pub reserved: u64,
    pub cuda: c_int,
    pub ze: c_int,
    pub neuron: c_int,
    pub synapseai: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_mr_attr {
    pub mr_iov: *const iovec,
    pub iov_count: usize,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub context: *mut c_void,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
    pub iface: fi_hmem_iface,
    pub device: fi_mr_attr_device,
}

/// Argument of `fi_control(FI_REFRESH)` on an MR.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_mr_modify {
    pub flags: u64,
    pub attr: fi_mr_attr,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_hmem_override_ops {
    pub size: usize,
    pub copy_from_hmem_iov: Option<
        unsafe extern "C" fn(
            dest: *mut c_void,
            size: usize,
            iface: fi_hmem_iface,
            device: u64,
            hmem_iov: *const iovec,
            hmem_iov_count: usize,
            hmem_iov_offset: u64,
        ) -> isize,
    >,
    pub copy_to_hmem_iov: Option<
        unsafe extern "C" fn(
            iface: fi_hmem_iface,
            device: u64,
            hmem_iov: *const iovec,
            hmem_iov_count: usize,
            hmem_iov_offset: u64,
            src: *const c_void,
            size: usize,
        ) -> isize,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_domain {
    pub size: usize,
    pub av_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_av_attr,
            av: *mut *mut fid_av,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cq_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_cq_attr,
            cq: *mut *mut fid_cq,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub endpoint: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub scalable_ep: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            sep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cntr_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_cntr_attr,
            cntr: *mut *mut fid_cntr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub poll_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_poll_attr,
            pollset: *mut *mut fid_poll,
        ) -> c_int,
    >,
    pub stx_ctx: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_tx_attr,
            stx: *mut *mut fid_stx,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub srx_ctx: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_rx_attr,
            rx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub query_atomic: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            datatype: fi_datatype,
            op: fi_op,
            attr: *mut fi_atomic_attr,
            flags: u64,
        ) -> c_int,
    >,
    pub query_collective: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            coll: fi_collective_op,
            attr: *mut fi_collective_attr,
            flags: u64,
        ) -> c_int,
    >,
    pub endpoint2: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            ep: *mut *mut fid_ep,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_mr {
    pub size: usize,
    pub reg: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            buf: *const c_void,
            len: usize,
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut fid_mr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub regv: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            iov: *const iovec,
            count: usize,
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut fid_mr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub regattr: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            attr: *const fi_mr_attr,
            flags: u64,
            mr: *mut *mut fid_mr,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_domain {
    pub fid: fid,
    pub ops: *mut fi_ops_domain,
    pub mr: *mut fi_ops_mr,
}

// ---------------------------------------------------------------------------------------------
// fi_endpoint.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_ep {
    pub size: usize,
    pub cancel: Option<unsafe extern "C" fn(fid: fid_t, context: *mut c_void) -> isize>,
    pub getopt: Option<
        unsafe extern "C" fn(
            fid: fid_t,
            level: c_int,
            optname: c_int,
            optval: *mut c_void,
            optlen: *mut usize,
        ) -> c_int,
    >,
    pub setopt: Option<
        unsafe extern "C" fn(
            fid: fid_t,
            level: c_int,
            optname: c_int,
            optval: *const c_void,
            optlen: usize,
        ) -> c_int,
    >,
    pub tx_ctx: Option<
        unsafe extern "C" fn(
            sep: *mut fid_ep,
            index: c_int,
            attr: *mut fi_tx_attr,
            tx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub rx_ctx: Option<
        unsafe extern "C" fn(
            sep: *mut fid_ep,
            index: c_int,
            attr: *mut fi_rx_attr,
            rx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub rx_size_left: Option<unsafe extern "C" fn(ep: *mut fid_ep) -> isize>,
    pub tx_size_left: Option<unsafe extern "C" fn(ep: *mut fid_ep) -> isize>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_msg {
    pub size: usize,
    pub recv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            len: usize,
            desc: *mut c_void,
            src_addr: fi_addr_t,
            context: *mut c_void,
        ) -> isize,
    >,
    pub recvv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            src_addr: fi_addr_t,
            context: *mut c_void,
        ) -> isize,
    >,
    pub recvmsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize>,
    pub send: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            context: *mut c_void,
        ) -> isize,
    >,
    pub sendv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            dest_addr: fi_addr_t,
            context: *mut c_void,
        ) -> isize,
    >,
    pub sendmsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize>,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            dest_addr: fi_addr_t,
        ) -> isize,
    >,
    pub senddata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            data: u64,
            dest_addr: fi_addr_t,
            context: *mut c_void,
        ) -> isize,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            data: u64,
            dest_addr: fi_addr_t,
        ) -> isize,
    >,
}

/// A provider may allocate only the ops tables it supports; unused ones may be null.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_ep {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
    pub cm: *mut fi_ops_cm,
    pub msg: *mut fi_ops_msg,
    pub rma: *mut fi_ops_rma,
    pub tagged: *mut fi_ops_tagged,
    pub atomic: *mut fi_ops_atomic,
    pub collective: *mut fi_ops_collective,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_pep {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
    pub cm: *mut fi_ops_cm,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_stx {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
}

// ---------------------------------------------------------------------------------------------
// fi_cm.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_mc {
    pub fid: fid,
    pub fi_addr: fi_addr_t,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cm {
    pub size: usize,
    pub setname:
        Option<unsafe extern "C" fn(fid: fid_t, addr: *mut c_void, addrlen: usize) -> c_int>,
    pub getname:
        Option<unsafe extern "C" fn(fid: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int>,
    pub getpeer: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, addr: *mut c_void, addrlen: *mut usize) -> c_int,
    >,
    pub connect: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            addr: *const c_void,
            param: *const c_void,
            paramlen: usize,
        ) -> c_int,
    >,
    pub listen: Option<unsafe extern "C" fn(pep: *mut fid_pep) -> c_int>,
    pub accept: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, param: *const c_void, paramlen: usize) -> c_int,
    >,
    pub reject: Option<
        unsafe extern "C" fn(
            pep: *mut fid_pep,
            handle: fid_t,
            param: *const c_void,
            paramlen: usize,
        ) -> c_int,
    >,
    pub shutdown: Option<unsafe extern "C" fn(ep: *mut fid_ep, flags: u64) -> c_int>,
    pub join: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            addr: *const c_void,
            flags: u64,
            mc: *mut *mut fid_mc,
            context: *mut c_void,
        ) -> c_int,
    >,
}

// ---------------------------------------------------------------------------------------------
// fi_eq.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_wait_attr {
    pub wait_obj: fi_wait_obj,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_wait {
    pub size: usize,
    pub wait: Option<unsafe extern "C" fn(waitset: *mut fid_wait, timeout: c_int) -> c_int>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_wait {
    pub fid: fid,
    pub ops: *mut fi_ops_wait,
}

/// What `fi_control(FI_GETWAIT)` returns for `FI_WAIT_MUTEX_COND`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mutex_cond {
    pub mutex: *mut pthread_mutex_t,
    pub cond: *mut pthread_cond_t,
}

/// What `fi_control(FI_GETWAIT)` returns for `FI_WAIT_POLLFD`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_wait_pollfd {
    pub change_index: u64,
    pub nfds: usize,
    pub fd: *mut pollfd,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_poll_attr {
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_poll {
    pub size: usize,
    pub poll: Option<
        unsafe extern "C" fn(
            pollset: *mut fid_poll,
            context: *mut *mut c_void,
            count: c_int,
        ) -> c_int,
    >,
    pub poll_add: Option<
        unsafe extern "C" fn(pollset: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int,
    >,
    pub poll_del: Option<
        unsafe extern "C" fn(pollset: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_poll {
    pub fid: fid,
    pub ops: *mut fi_ops_poll,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_attr {
    pub size: usize,
    pub flags: u64,
    pub wait_obj: fi_wait_obj,
    pub signaling_vector: c_int,
    pub wait_set: *mut fid_wait,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_err_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
    pub err: c_int,
    pub prov_errno: c_int,
    /// Valid until the next read of the EQ.
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

/// `data` is a C flexible array member (`uint8_t data[]`): connection data follows the struct,
/// up to the buffer length the user passed to fi_eq_read().
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_cm_entry {
    pub fid: fid_t,
    /// The user must call fi_freeinfo() on it.
    pub info: *mut fi_info,
    pub data: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_eq {
    pub size: usize,
    pub read: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: *mut u32,
            buf: *mut c_void,
            len: usize,
            flags: u64,
        ) -> isize,
    >,
    pub readerr: Option<
        unsafe extern "C" fn(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> isize,
    >,
    pub write: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: u32,
            buf: *const c_void,
            len: usize,
            flags: u64,
        ) -> isize,
    >,
    pub sread: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: *mut u32,
            buf: *mut c_void,
            len: usize,
            timeout: c_int,
            flags: u64,
        ) -> isize,
    >,
    pub strerror: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: usize,
        ) -> *const c_char,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_eq {
    pub fid: fid,
    pub ops: *mut fi_ops_eq,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_entry {
    pub op_context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_msg_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_data_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_tagged_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
}

/// Note: libfabric 1.20 appended `fi_addr_t src_addr` (copied only for API versions >= 1.20);
/// the 1.17 struct ends with `err_data_size` (80 bytes), so a provider built for 1.17 must not
/// write past it. Applications asking for API < 1.5 use an even older, shorter layout (without
/// `err_data_size`): fi_cq_readerr() should honour `fid_fabric.api_version`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_err_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: c_int,
    pub prov_errno: c_int,
    /// Valid until the next read of the CQ.
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_attr {
    pub size: usize,
    pub flags: u64,
    pub format: fi_cq_format,
    pub wait_obj: fi_wait_obj,
    pub signaling_vector: c_int,
    pub wait_cond: fi_cq_wait_cond,
    pub wait_set: *mut fid_wait,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cq {
    pub size: usize,
    pub read:
        Option<unsafe extern "C" fn(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize>,
    pub readfrom: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            src_addr: *mut fi_addr_t,
        ) -> isize,
    >,
    pub readerr: Option<
        unsafe extern "C" fn(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, flags: u64) -> isize,
    >,
    pub sread: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            cond: *const c_void,
            timeout: c_int,
        ) -> isize,
    >,
    pub sreadfrom: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            src_addr: *mut fi_addr_t,
            cond: *const c_void,
            timeout: c_int,
        ) -> isize,
    >,
    pub signal: Option<unsafe extern "C" fn(cq: *mut fid_cq) -> c_int>,
    pub strerror: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: usize,
        ) -> *const c_char,
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_cq {
    pub fid: fid,
    pub ops: *mut fi_ops_cq,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cntr_attr {
    pub events: fi_cntr_events,
    pub wait_obj: fi_wait_obj,
    pub wait_set: *mut fid_wait,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cntr {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(cntr: *mut fid_cntr) -> u64>,
    pub readerr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr) -> u64>,
    pub add: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub set: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub wait:
        Option<unsafe extern "C" fn(cntr: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int>,
    pub adderr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub seterr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_cntr {
    pub fid: fid,
    pub ops: *mut fi_ops_cntr,
}

// ---------------------------------------------------------------------------------------------
// fi_rma.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_rma_iov {
    pub addr: u64,
    pub len: usize,
    pub key: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_rma_ioc {
    pub addr: u64,
    pub count: usize,
    pub key: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_rma {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_iov,
    pub rma_iov_count: usize,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_rma {
    pub size: usize,
    pub read: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            len: usize,
            desc: *mut c_void,
            src_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub readv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            src_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub readmsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize>,
    pub write: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub writev: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub writemsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize>,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
        ) -> isize,
    >,
    pub writedata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            data: u64,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            data: u64,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
        ) -> isize,
    >,
}

// ---------------------------------------------------------------------------------------------
// fi_tagged.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_tagged {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub tag: u64,
    pub ignore: u64,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_tagged {
    pub size: usize,
    pub recv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            len: usize,
            desc: *mut c_void,
            src_addr: fi_addr_t,
            tag: u64,
            ignore: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub recvv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            src_addr: fi_addr_t,
            tag: u64,
            ignore: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub recvmsg: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize,
    >,
    pub send: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub sendv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub sendmsg: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize,
    >,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            dest_addr: fi_addr_t,
            tag: u64,
        ) -> isize,
    >,
    pub senddata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            data: u64,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            data: u64,
            dest_addr: fi_addr_t,
            tag: u64,
        ) -> isize,
    >,
}

// ---------------------------------------------------------------------------------------------
// fi_atomic.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_atomic_attr {
    pub count: usize,
    pub size: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_atomic {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_ioc,
    pub rma_iov_count: usize,
    pub datatype: fi_datatype,
    pub op: fi_op,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_fetch {
    pub msg_iov: *mut fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_compare {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_atomic {
    pub size: usize,
    pub write: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub writev: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const fi_ioc,
            desc: *mut *mut c_void,
            count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub writemsg: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_atomic, flags: u64) -> isize,
    >,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
        ) -> isize,
    >,
    pub readwrite: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub readwritev: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const fi_ioc,
            desc: *mut *mut c_void,
            count: usize,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub readwritemsg: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            msg: *const fi_msg_atomic,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            flags: u64,
        ) -> isize,
    >,
    pub compwrite: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            compare: *const c_void,
            compare_desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub compwritev: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const fi_ioc,
            desc: *mut *mut c_void,
            count: usize,
            comparev: *const fi_ioc,
            compare_desc: *mut *mut c_void,
            compare_count: usize,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            datatype: fi_datatype,
            op: fi_op,
            context: *mut c_void,
        ) -> isize,
    >,
    pub compwritemsg: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            msg: *const fi_msg_atomic,
            comparev: *const fi_ioc,
            compare_desc: *mut *mut c_void,
            compare_count: usize,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            flags: u64,
        ) -> isize,
    >,
    pub writevalid: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            datatype: fi_datatype,
            op: fi_op,
            count: *mut usize,
        ) -> c_int,
    >,
    pub readwritevalid: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            datatype: fi_datatype,
            op: fi_op,
            count: *mut usize,
        ) -> c_int,
    >,
    pub compwritevalid: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            datatype: fi_datatype,
            op: fi_op,
            count: *mut usize,
        ) -> c_int,
    >,
}

// ---------------------------------------------------------------------------------------------
// fi_trigger.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_trigger_threshold {
    pub cntr: *mut fid_cntr,
    pub threshold: usize,
}

/// The anonymous `union { ... } value` of `struct fi_trigger_var`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_trigger_var_value {
    pub val8: u8,
    pub val16: u16,
    pub val32: u32,
    pub val64: u64,
    pub data: *mut u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_trigger_var {
    pub datatype: fi_datatype,
    pub count: c_int,
    pub addr: *mut c_void,
    pub value: fi_trigger_var_value,
}

/// The anonymous `union { ... } device` of `struct fi_trigger_xpu`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_trigger_xpu_device {
    pub reserved: u64,
    pub cuda: c_int,
    pub ze: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_trigger_xpu {
    pub count: c_int,
    pub iface: fi_hmem_iface,
    pub device: fi_trigger_xpu_device,
    pub var: *mut fi_trigger_var,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_msg {
    pub ep: *mut fid_ep,
    pub msg: fi_msg,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_tagged {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_tagged,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_rma {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_rma,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_fetch_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub fetch: fi_msg_fetch,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_compare_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub fetch: fi_msg_fetch,
    pub compare: fi_msg_compare,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_cntr {
    pub cntr: *mut fid_cntr,
    pub value: u64,
}

/// The anonymous `union { ... } trigger` of `struct fi_triggered_context`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_triggered_context_trigger {
    pub threshold: fi_trigger_threshold,
    pub xpu: fi_trigger_xpu,
    pub internal: [*mut c_void; 3],
}

/// Overlays `struct fi_context` (same size) for triggered operations.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_triggered_context {
    pub event_type: fi_trigger_event,
    pub trigger: fi_triggered_context_trigger,
}

/// The anonymous `union { ... } trigger` of `struct fi_triggered_context2`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_triggered_context2_trigger {
    pub threshold: fi_trigger_threshold,
    pub xpu: fi_trigger_xpu,
    pub internal: [*mut c_void; 7],
}

/// Overlays `struct fi_context2` (same size) for triggered operations.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_triggered_context2 {
    pub event_type: fi_trigger_event,
    pub trigger: fi_triggered_context2_trigger,
}

/// The anonymous `union { ... } op` of `struct fi_deferred_work`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_deferred_work_op {
    pub msg: *mut fi_op_msg,
    pub tagged: *mut fi_op_tagged,
    pub rma: *mut fi_op_rma,
    pub atomic: *mut fi_op_atomic,
    pub fetch_atomic: *mut fi_op_fetch_atomic,
    pub compare_atomic: *mut fi_op_compare_atomic,
    pub cntr: *mut fi_op_cntr,
}

/// Argument of `fi_control(FI_QUEUE_WORK / FI_CANCEL_WORK)` on a domain.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_deferred_work {
    pub context: fi_context2,
    pub threshold: u64,
    pub triggering_cntr: *mut fid_cntr,
    pub completion_cntr: *mut fid_cntr,
    pub op_type: fi_op_type,
    pub op: fi_deferred_work_op,
}

// ---------------------------------------------------------------------------------------------
// fi_collective.h
// ---------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_av_set {
    pub size: usize,
    pub set_union:
        Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub intersect:
        Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub diff: Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub insert: Option<unsafe extern "C" fn(set: *mut fid_av_set, addr: fi_addr_t) -> c_int>,
    pub remove: Option<unsafe extern "C" fn(set: *mut fid_av_set, addr: fi_addr_t) -> c_int>,
    pub addr:
        Option<unsafe extern "C" fn(set: *mut fid_av_set, coll_addr: *mut fi_addr_t) -> c_int>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_av_set {
    pub fid: fid,
    pub ops: *mut fi_ops_av_set,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_collective_attr {
    pub op: fi_op,
    pub datatype: fi_datatype,
    pub datatype_attr: fi_atomic_attr,
    pub max_members: usize,
    pub mode: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_collective_addr {
    pub set: *const fid_av_set,
    pub coll_addr: fi_addr_t,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_collective {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub coll_addr: fi_addr_t,
    pub root_addr: fi_addr_t,
    pub coll: fi_collective_op,
    pub datatype: fi_datatype,
    pub op: fi_op,
    pub context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_collective {
    pub size: usize,
    pub barrier: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, coll_addr: fi_addr_t, context: *mut c_void) -> isize,
    >,
    pub broadcast: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            count: usize,
            desc: *mut c_void,
            coll_addr: fi_addr_t,
            root_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub alltoall: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub allreduce: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            datatype: fi_datatype,
            op: fi_op,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub allgather: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub reduce_scatter: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            datatype: fi_datatype,
            op: fi_op,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub reduce: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            root_addr: fi_addr_t,
            datatype: fi_datatype,
            op: fi_op,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub scatter: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            root_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub gather: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            count: usize,
            desc: *mut c_void,
            result: *mut c_void,
            result_desc: *mut c_void,
            coll_addr: fi_addr_t,
            root_addr: fi_addr_t,
            datatype: fi_datatype,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
    pub msg: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            msg: *const fi_msg_collective,
            resultv: *mut fi_ioc,
            result_desc: *mut *mut c_void,
            result_count: usize,
            flags: u64,
        ) -> isize,
    >,
    pub barrier2: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            coll_addr: fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> isize,
    >,
}

// ---------------------------------------------------------------------------------------------
// providers/fi_prov.h
// ---------------------------------------------------------------------------------------------

/// What `fi_prov_ini()` returns. `version` is the provider's version, `fi_version` the libfabric
/// API version it was written for (`FI_VERSION(1, 17)`); `context` belongs to libfabric.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_provider {
    pub version: u32,
    pub fi_version: u32,
    pub context: fi_context,
    pub name: *const c_char,
    pub getinfo: Option<
        unsafe extern "C" fn(
            version: u32,
            node: *const c_char,
            service: *const c_char,
            flags: u64,
            hints: *const fi_info,
            info: *mut *mut fi_info,
        ) -> c_int,
    >,
    pub fabric: Option<
        unsafe extern "C" fn(
            attr: *mut fi_fabric_attr,
            fabric: *mut *mut fid_fabric,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cleanup: Option<unsafe extern "C" fn()>,
}

// ---------------------------------------------------------------------------------------------
// fi_ext.h (only the parts a core provider may meet: fi_export_fid() and the logging import)
// ---------------------------------------------------------------------------------------------

/// Argument of `fi_control(FI_EXPORT_FID)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fid_export {
    pub fid: *mut *mut fid,
    pub flags: u64,
    pub context: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_log {
    pub size: usize,
    pub enabled: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: fi_log_level,
            subsys: fi_log_subsys,
            flags: u64,
        ) -> c_int,
    >,
    pub ready: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: fi_log_level,
            subsys: fi_log_subsys,
            flags: u64,
            showtime: *mut u64,
        ) -> c_int,
    >,
    pub log: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: fi_log_level,
            subsys: fi_log_subsys,
            func: *const c_char,
            line: c_int,
            msg: *const c_char,
        ),
    >,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_logging {
    pub fid: fid,
    pub ops: *mut fi_ops_log,
}

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
