//! Conversion between C `struct fi_info` chains and the core's `Info`.
//! Every C info we hand out is allocated with the C heap (calloc/malloc), so
//! libfabric's `fi_freeinfo` (which calls `free()`) releases it.

use std::ffi::c_void;

use crate::fi::abi::*;
use crate::fi::consts::FI_VERSION;
use super::util::*;
use crate::error::{FiError, FiResult};
use crate::info::*;
use crate::sys;

/// Reads an address buffer given by the application.
///
/// # Safety
/// `p` must be NULL or have `len` readable bytes.
pub unsafe fn read_addr(p: *const c_void, len: usize, what: &str) -> FiResult<Option<std::net::SocketAddr>> {
    if p.is_null() || len == 0 {
        return Ok(None);
    }
    // SAFETY: the caller says `len` bytes are readable.
    let b = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    match sys::sockaddr_parse(b) {
        Some(a) => Ok(Some(a)),
        None => crate::fail!(FiError::INVAL, "{what}: not a sockaddr_in/sockaddr_in6 ({len} bytes)"),
    }
}

/// Reads an `FI_ADDR_IB_UD` address (`struct ofi_ib_ud_ep_name`).
///
/// # Safety
/// `p` must be NULL or have `len` readable bytes.
unsafe fn read_ud(p: *const c_void, len: usize, what: &str) -> FiResult<Option<crate::dgram::UdName>> {
    if p.is_null() || len == 0 {
        return Ok(None);
    }
    // SAFETY: the caller says `len` bytes are readable.
    let b = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    match crate::dgram::UdName::from_bytes(b) {
        Some(n) => Ok(Some(n)),
        None => crate::fail!(FiError::INVAL, "{what}: an FI_ADDR_IB_UD address is {} bytes ({len} given)", crate::dgram::NAME_LEN),
    }
}

/// The core's copy of a C `fi_tx_attr`.
pub fn tx_from_c(t: &fi_tx_attr) -> TxAttr {
    TxAttr {
        caps: t.caps,
        mode: t.mode,
        op_flags: t.op_flags,
        msg_order: t.msg_order,
        comp_order: t.comp_order,
        inject_size: t.inject_size,
        size: t.size,
        iov_limit: t.iov_limit,
        rma_iov_limit: t.rma_iov_limit,
        tclass: t.tclass,
    }
}

/// The core's copy of a C `fi_rx_attr`.
pub fn rx_from_c(r: &fi_rx_attr) -> RxAttr {
    RxAttr {
        caps: r.caps,
        mode: r.mode,
        op_flags: r.op_flags,
        msg_order: r.msg_order,
        comp_order: r.comp_order,
        total_buffered_recv: r.total_buffered_recv,
        size: r.size,
        iov_limit: r.iov_limit,
    }
}

/// The core's copy of a C `fi_ep_attr` (without the auth key bytes).
pub fn ep_from_c(e: &fi_ep_attr) -> EpAttr {
    EpAttr {
        type_: e.type_,
        protocol: e.protocol,
        protocol_version: e.protocol_version,
        max_msg_size: e.max_msg_size,
        msg_prefix_size: e.msg_prefix_size,
        max_order_raw_size: e.max_order_raw_size,
        max_order_war_size: e.max_order_war_size,
        max_order_waw_size: e.max_order_waw_size,
        mem_tag_format: e.mem_tag_format,
        tx_ctx_cnt: e.tx_ctx_cnt,
        rx_ctx_cnt: e.rx_ctx_cnt,
        auth_key_size: e.auth_key_size,
    }
}

/// The core's copy of a C `fi_domain_attr` (without the domain fid and the auth key bytes).
///
/// # Safety
/// `d.name` NULL or a C string.
pub unsafe fn domain_from_c(d: &fi_domain_attr) -> DomainAttr {
    DomainAttr {
        max_ep_auth_key: 0,
        max_group_id: 0,
        max_cntr_value: 0,
        max_err_cntr_value: 0,
        // SAFETY: per the contract.
        name: unsafe { cstr_opt(d.name) },
        threading: d.threading,
        control_progress: d.control_progress,
        data_progress: d.data_progress,
        resource_mgmt: d.resource_mgmt,
        av_type: d.av_type,
        mr_mode: d.mr_mode,
        mr_key_size: d.mr_key_size,
        cq_data_size: d.cq_data_size,
        cq_cnt: d.cq_cnt,
        ep_cnt: d.ep_cnt,
        tx_ctx_cnt: d.tx_ctx_cnt,
        rx_ctx_cnt: d.rx_ctx_cnt,
        max_ep_tx_ctx: d.max_ep_tx_ctx,
        max_ep_rx_ctx: d.max_ep_rx_ctx,
        max_ep_stx_ctx: d.max_ep_stx_ctx,
        max_ep_srx_ctx: d.max_ep_srx_ctx,
        cntr_cnt: d.cntr_cnt,
        mr_iov_limit: d.mr_iov_limit,
        caps: d.caps,
        mode: d.mode,
        auth_key_size: d.auth_key_size,
        max_err_data: d.max_err_data,
        mr_cnt: d.mr_cnt,
        tclass: d.tclass,
    }
}

/// The core's copy of a C `fi_fabric_attr` (without the fabric fid).
///
/// # Safety
/// `f.name` and `f.prov_name` NULL or C strings.
pub unsafe fn fabric_from_c(f: &fi_fabric_attr) -> FabricAttr {
    FabricAttr {
        // SAFETY: per the contract.
        name: unsafe { cstr_opt(f.name) },
        // SAFETY: as above.
        prov_name: unsafe { cstr_opt(f.prov_name) },
        prov_version: f.prov_version,
        api_version: f.api_version,
    }
}

/// Reads the `fi_domain_attr` fields added after 1.17 from `d`, each only
/// when both the loading core's layout has it and the application's API
/// version `api` defines it (an application built against older headers may
/// hand in the shorter struct it declared itself).
///
/// # Safety
/// `d` points to a `fi_domain_attr` of the loading core's layout.
unsafe fn domain_ext_from_c(d: *const fi_domain_attr, api: u32, out: &mut DomainAttr) {
    let core = super::version::core_version();
    let e = d as *const super::version::fi_domain_attr_ext;
    let has = |v: u32| core >= v && api >= v;
    // SAFETY: each field is read only when the core's struct reaches it (its layout is a prefix of fi_domain_attr_ext).
    unsafe {
        if has(FI_VERSION(1, 20)) {
            out.max_ep_auth_key = std::ptr::addr_of!((*e).max_ep_auth_key).read();
        }
        if has(FI_VERSION(2, 0)) {
            out.max_group_id = std::ptr::addr_of!((*e).max_group_id).read();
        }
        if has(FI_VERSION(2, 5)) {
            out.max_cntr_value = std::ptr::addr_of!((*e).max_cntr_value).read();
            out.max_err_cntr_value = std::ptr::addr_of!((*e).max_err_cntr_value).read();
        }
    }
}

/// Converts a C `fi_info` (hints, or the info given to fi_endpoint & co.).
/// A connection-request `handle` is resolved to the core object; other handles are ignored.
/// `api` is the application's API version: `fi_domain_attr` fields newer
/// than it are not read (0 reads none of them).
///
/// # Safety
/// `p` must point to a valid `struct fi_info` (of the loading core's layout)
/// whose attribute pointers are NULL or valid.
pub unsafe fn from_c(p: *const fi_info, api: u32) -> FiResult<Info> {
    // SAFETY: per the contract.
    let c = unsafe { &*p };
    let mut i = Info { caps: c.caps, mode: c.mode, addr_format: c.addr_format, ..Default::default() };
    if c.addr_format == crate::fi::consts::FI_ADDR_IB_UD {
        // DGRAM addresses (struct ofi_ib_ud_ep_name, crate::dgram).
        // SAFETY: src/dest buffers are as long as their lengths say (fi_getinfo(3)).
        unsafe {
            i.src_ud = read_ud(c.src_addr, c.src_addrlen, "src_addr")?;
            i.dest_ud = read_ud(c.dest_addr, c.dest_addrlen, "dest_addr")?;
        }
    } else {
        // SAFETY: src/dest buffers are as long as their lengths say (fi_getinfo(3)).
        i.src_addr = unsafe { read_addr(c.src_addr, c.src_addrlen, "src_addr") }?;
        // SAFETY: as above.
        i.dest_addr = unsafe { read_addr(c.dest_addr, c.dest_addrlen, "dest_addr") }?;
    }
    if !c.handle.is_null() {
        // SAFETY: handle is a fid (the libfabric contract); only registered ones are dereferenced.
        i.handle = unsafe { super::ep::connreq_lookup(c.handle) };
        if i.handle.is_none() {
            // SAFETY: as above (a passive endpoint is dereferenced only if ours).
            i.pep = unsafe { super::ep::pep_lookup(c.handle) };
        }
    }
    // SAFETY: the attribute pointers are NULL or valid per the contract.
    unsafe {
        if let Some(t) = c.tx_attr.as_ref() {
            i.tx = tx_from_c(t);
        }
        if let Some(r) = c.rx_attr.as_ref() {
            i.rx = rx_from_c(r);
        }
        if let Some(e) = c.ep_attr.as_ref() {
            i.ep = ep_from_c(e);
        }
    }
    if !c.domain_attr.is_null() {
        // SAFETY: valid pointer per the contract, its name NULL or a C string.
        i.domain = unsafe { domain_from_c(&*c.domain_attr) };
        // SAFETY: as above, of the core's layout.
        unsafe { domain_ext_from_c(c.domain_attr, api, &mut i.domain) };
    } else {
        // No domain attributes: the caller constrains none of them, mr_mode
        // included (utility providers such as ofi_rxm ask their core provider
        // that way from fi_fabric). Mode bits rsverbs needs are then accepted.
        i.domain.mr_mode = MR_MODE;
    }
    if !c.fabric_attr.is_null() {
        // SAFETY: valid pointer per the contract, its names NULL or C strings.
        i.fabric = unsafe { fabric_from_c(&*c.fabric_attr) };
    }
    Ok(i)
}

/// Allocates one C `fi_info` (with all attribute structs) for `i`.
/// `prov_name` is filled only when given (the libfabric core fills it itself
/// for providers it loaded, and insists on finding it NULL).
pub fn to_c(i: &Info, prov_name: Option<&str>) -> FiResult<*mut fi_info> {
    let p = c_calloc::<fi_info>();
    let tx = c_calloc::<fi_tx_attr>();
    let rx = c_calloc::<fi_rx_attr>();
    let ep = c_calloc::<fi_ep_attr>();
    // The largest layout rsverbs knows: the loading core copies its own prefix of it.
    let dom = c_calloc::<super::version::fi_domain_attr_ext>() as *mut fi_domain_attr;
    let fab = c_calloc::<fi_fabric_attr>();
    if p.is_null() || tx.is_null() || rx.is_null() || ep.is_null() || dom.is_null() || fab.is_null() {
        // SAFETY: each is NULL or from calloc.
        unsafe {
            for q in [p as *mut c_void, tx as _, rx as _, ep as _, dom as _, fab as _] {
                libc::free(q);
            }
        }
        return crate::fail!(FiError::NOMEM, "fi_info allocation failed");
    }
    // SAFETY: all six pointers are fresh, zeroed, exclusively ours.
    unsafe {
        let c = &mut *p;
        c.caps = i.caps;
        c.mode = i.mode;
        c.addr_format = i.addr_format;
        if let Some(a) = &i.src_addr {
            let b = sys::sockaddr_bytes(a);
            c.src_addr = c_memdup(&b);
            c.src_addrlen = b.len();
        }
        if let Some(a) = &i.dest_addr {
            let b = sys::sockaddr_bytes(a);
            c.dest_addr = c_memdup(&b);
            c.dest_addrlen = b.len();
        }
        for (ud, a, l) in [(&i.src_ud, &mut c.src_addr, &mut c.src_addrlen), (&i.dest_ud, &mut c.dest_addr, &mut c.dest_addrlen)] {
            if let Some(n) = ud {
                let b = n.to_bytes();
                *a = c_memdup(&b);
                *l = b.len();
            }
        }
        if let Some(h) = &i.handle {
            c.handle = super::ep::connreq_new(h.clone());
        } else if let Some(pep) = &i.pep {
            // The application's own passive endpoint, as its hints named it.
            c.handle = pep.fid() as *mut fid;
        }
        *tx = fi_tx_attr {
            caps: i.tx.caps,
            mode: i.tx.mode,
            op_flags: i.tx.op_flags,
            msg_order: i.tx.msg_order,
            comp_order: i.tx.comp_order,
            inject_size: i.tx.inject_size,
            size: i.tx.size,
            iov_limit: i.tx.iov_limit,
            rma_iov_limit: i.tx.rma_iov_limit,
            tclass: i.tx.tclass,
        };
        *rx = fi_rx_attr {
            caps: i.rx.caps,
            mode: i.rx.mode,
            op_flags: i.rx.op_flags,
            msg_order: i.rx.msg_order,
            comp_order: i.rx.comp_order,
            total_buffered_recv: i.rx.total_buffered_recv,
            size: i.rx.size,
            iov_limit: i.rx.iov_limit,
        };
        let e = &mut *ep;
        e.type_ = i.ep.type_;
        e.protocol = i.ep.protocol;
        e.protocol_version = i.ep.protocol_version;
        e.max_msg_size = i.ep.max_msg_size;
        e.msg_prefix_size = i.ep.msg_prefix_size;
        e.max_order_raw_size = i.ep.max_order_raw_size;
        e.max_order_war_size = i.ep.max_order_war_size;
        e.max_order_waw_size = i.ep.max_order_waw_size;
        e.mem_tag_format = i.ep.mem_tag_format;
        e.tx_ctx_cnt = i.ep.tx_ctx_cnt;
        e.rx_ctx_cnt = i.ep.rx_ctx_cnt;
        let d = &mut *dom;
        d.name = i.domain.name.as_deref().map_or(std::ptr::null_mut(), c_strdup);
        d.threading = i.domain.threading;
        d.control_progress = i.domain.control_progress;
        d.data_progress = i.domain.data_progress;
        d.resource_mgmt = i.domain.resource_mgmt;
        d.av_type = i.domain.av_type;
        d.mr_mode = i.domain.mr_mode;
        d.mr_key_size = i.domain.mr_key_size;
        d.cq_data_size = i.domain.cq_data_size;
        d.cq_cnt = i.domain.cq_cnt;
        d.ep_cnt = i.domain.ep_cnt;
        d.tx_ctx_cnt = i.domain.tx_ctx_cnt;
        d.rx_ctx_cnt = i.domain.rx_ctx_cnt;
        d.max_ep_tx_ctx = i.domain.max_ep_tx_ctx;
        d.max_ep_rx_ctx = i.domain.max_ep_rx_ctx;
        d.max_ep_stx_ctx = i.domain.max_ep_stx_ctx;
        d.max_ep_srx_ctx = i.domain.max_ep_srx_ctx;
        d.cntr_cnt = i.domain.cntr_cnt;
        d.mr_iov_limit = i.domain.mr_iov_limit;
        d.caps = i.domain.caps;
        d.mode = i.domain.mode;
        d.max_err_data = i.domain.max_err_data;
        d.mr_cnt = i.domain.mr_cnt;
        d.tclass = i.domain.tclass;
        let x = &mut *(dom as *mut super::version::fi_domain_attr_ext);
        x.max_ep_auth_key = i.domain.max_ep_auth_key;
        x.max_group_id = i.domain.max_group_id;
        x.max_cntr_value = i.domain.max_cntr_value;
        x.max_err_cntr_value = i.domain.max_err_cntr_value;
        let f = &mut *fab;
        f.name = i.fabric.name.as_deref().map_or(std::ptr::null_mut(), c_strdup);
        f.prov_name = prov_name.map_or(std::ptr::null_mut(), c_strdup);
        f.prov_version = i.fabric.prov_version;
        f.api_version = i.fabric.api_version;
        c.tx_attr = tx;
        c.rx_attr = rx;
        c.ep_attr = ep;
        c.domain_attr = dom;
        c.fabric_attr = fab;
        // The nic names the device and the rsverbs build (capi/nic.rs; fi_info -v).
        c.nic = super::nic::new_nic(i.domain.name.as_deref());
    }
    Ok(p)
}

/// Builds a C chain from several infos.
pub fn chain_to_c(infos: &[Info], prov_name: Option<&str>) -> FiResult<*mut fi_info> {
    let mut head: *mut fi_info = std::ptr::null_mut();
    let mut tail: *mut fi_info = std::ptr::null_mut();
    for i in infos {
        let c = match to_c(i, prov_name) {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: head is a chain we built.
                unsafe { free_chain(head) };
                return Err(e);
            }
        };
        if tail.is_null() {
            head = c;
        } else {
            // SAFETY: tail is our last node.
            unsafe { (*tail).next = c };
        }
        tail = c;
    }
    Ok(head)
}

/// Frees a chain allocated by `to_c` (what libfabric's `fi_freeinfo` does).
///
/// # Safety
/// `p` must be NULL or a chain whose every piece is C-heap memory.
pub unsafe fn free_chain(mut p: *mut fi_info) {
    while !p.is_null() {
        // SAFETY: per the contract.
        unsafe {
            let c = &mut *p;
            let next = c.next;
            libc::free(c.src_addr);
            libc::free(c.dest_addr);
            if !c.domain_attr.is_null() {
                libc::free((*c.domain_attr).name as *mut c_void);
                libc::free((*c.domain_attr).auth_key as *mut c_void);
            }
            if !c.fabric_attr.is_null() {
                libc::free((*c.fabric_attr).name as *mut c_void);
                libc::free((*c.fabric_attr).prov_name as *mut c_void);
            }
            if !c.ep_attr.is_null() {
                libc::free((*c.ep_attr).auth_key as *mut c_void);
            }
            for q in [c.tx_attr as *mut c_void, c.rx_attr as _, c.ep_attr as _, c.domain_attr as _, c.fabric_attr as _] {
                libc::free(q);
            }
            super::nic::free_nic(c.nic); // capi/nic.rs: the layout libfabric's ofi_nic_close frees
            libc::free(p as *mut c_void);
            p = next;
        }
    }
}

