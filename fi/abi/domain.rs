//! `fi_domain.h`: address vectors, memory regions and domains.

use super::*;

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
