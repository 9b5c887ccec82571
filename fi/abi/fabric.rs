//! `fabric.h`: `fi_info` and its attributes, the base `fid` and its ops, fabrics, NICs, parameters and contexts.

use super::*;

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
