//! `fi_getinfo` for `FI_EP_DGRAM` (called from `crate::info::getinfo`).
//!
//! As libfabric's verbs (verbs_info.c, `verbs_dgram_*_attr`): caps FI_MSG,
//! FI_SEND, FI_RECV (+FI_LOCAL_COMM/FI_REMOTE_COMM), address format
//! `FI_ADDR_IB_UD`, protocol `FI_PROTO_IB_UD`, max_msg_size the port's
//! active MTU, and — for applications that accept it — mode `FI_MSG_PREFIX`
//! with a 40-byte prefix on send and receive buffers (fi_getinfo(3): in
//! front of all message buffers; receives land the GRH there, sends skip
//! it; libfabric's verbs sets it in rx_attr->mode only, and so is skipped by
//! fabtests' tests that force the prefix). Applications whose hints lack
//! `FI_MSG_PREFIX` get the same endpoint without a prefix: rsverbs lands
//! the GRH in a buffer of its own (a first scatter entry), which costs one
//! receive iov.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::{gid_of_ip, ns, UdName, MSG_PREFIX_SIZE};
use crate::config;
use crate::error::{FiError, FiResult};
use crate::fi::consts::*;
use crate::info::*;
use crate::verbs::{self, Context};

/// Capabilities of DGRAM endpoints.
pub const DGRAM_CAPS: u64 = FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM;
const TX_CAPS: u64 = FI_MSG | FI_SEND;
const RX_CAPS: u64 = FI_MSG | FI_RECV;
/// Op flags DGRAM endpoints take.
pub const DGRAM_OP_FLAGS: u64 = FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_REMOTE_CQ_DATA | FI_MORE;

/// The GID an endpoint on `dev` uses for `ip` (RoCE: the IP's own GID, if
/// the device lists it), else the GID at `FI_VERBS_GID_IDX`.
pub fn local_gid(dev: &Arc<Context>, ip: Option<IpAddr>) -> [u8; 16] {
    if let Some(ip) = ip {
        let g = gid_of_ip(ip);
        if sgid_index(dev, &g).is_some() {
            return g;
        }
    }
    dev.query_gid(1, config::get().gid_idx).unwrap_or([0; 16])
}

/// The index of `gid` in port 1's GID table (the last of several: on RoCE
/// devices that list a RoCE v1 and a v2 entry for an address, v2 comes last).
pub fn sgid_index(dev: &Arc<Context>, gid: &[u8; 16]) -> Option<u8> {
    let n = dev.query_port(1).map(|p| p.gid_tbl_len).unwrap_or(0).clamp(0, 256);
    let mut found = None;
    for i in 0..n {
        if dev.query_gid(1, i).ok().as_ref() == Some(gid) {
            found = Some(i as u8);
        }
    }
    found
}

/// The name of a local endpoint (QP number 0 until it exists).
pub fn local_name(dev: &Arc<Context>, ip: Option<IpAddr>, service: u16) -> UdName {
    let lid = dev.query_port(1).map(|p| p.lid).unwrap_or(0);
    UdName { gid: local_gid(dev, ip), qpn: 0, lid, pkey: 0xffff, service, sl: 0 }
}

/// The first RDMA-capable local IP of `dev` (IPv4 first).
pub fn first_ip(dev: &Arc<Context>) -> Option<IpAddr> {
    rdma_addresses().into_iter().find(|a| Arc::ptr_eq(&a.device, dev)).map(|a| a.ip)
}

/// `fi_getinfo` restricted to DGRAM endpoints.
pub fn getinfo(req: &Request) -> FiResult<Vec<Info>> {
    let hints = req.hints.as_ref();
    let explicit = hints.map_or(false, |h| h.ep.type_ == FI_EP_DGRAM);
    if let Some(h) = hints {
        if h.ep.type_ != FI_EP_UNSPEC && h.ep.type_ != FI_EP_DGRAM {
            return Err(FiError::NODATA);
        }
        if h.addr_format != FI_FORMAT_UNSPEC && h.addr_format != FI_ADDR_IB_UD {
            tracing::info!("getinfo: DGRAM endpoints use FI_ADDR_IB_UD addresses, not format {}", h.addr_format);
            return Err(FiError::NODATA);
        }
    }
    let port = parse_port(req.service.as_deref())?;
    let numeric = req.flags & FI_NUMERICHOST != 0;
    let mut src: Option<UdName> = hints.and_then(|h| h.src_ud);
    let mut src_ip: Option<IpAddr> = hints.and_then(|h| h.src_addr).map(|a| a.ip()).filter(|ip| !ip.is_unspecified());
    let mut dest: Option<UdName> = hints.and_then(|h| h.dest_ud);
    let mut dest_ip: Option<IpAddr> = None;
    match (&req.node, req.flags & FI_SOURCE != 0) {
        (Some(n), true) => {
            src_ip = Some(resolve_node(n, 0, numeric)?.ip());
            src = None;
        }
        (Some(n), false) => {
            let a = resolve_node(n, port.unwrap_or(0), numeric)?;
            let Some(p) = port.filter(|&p| p != 0) else {
                tracing::info!("getinfo: DGRAM: node {n} without a service names no endpoint (its service is the name-service port)");
                return Err(FiError::NODATA);
            };
            dest_ip = Some(a.ip());
            dest = Some(ns::resolve(&SocketAddr::new(a.ip(), p), explicit)?);
        }
        (None, _) => {}
    }
    let service = if req.node.is_none() || req.flags & FI_SOURCE != 0 { port.unwrap_or(0) } else { src.map_or(0, |s| s.service) };

    let mut out = Vec::new();
    for dev in verbs::devices() {
        if !device_wanted(dev, hints) {
            continue;
        }
        // The device: the one holding the source IP or GID, else the one
        // routing to the destination, else every device.
        if let Some(ip) = src_ip {
            match device_of_local(ip) {
                Some(d) if Arc::ptr_eq(&d, dev) => {}
                _ => continue,
            }
        } else if let Some(s) = &src {
            if sgid_index(dev, &s.gid).is_none() && s.gid != [0; 16] {
                continue;
            }
        } else if let Some(ip) = dest_ip {
            match route_to(None, &SocketAddr::new(ip, 1)) {
                Ok((d, local)) if Arc::ptr_eq(&d, dev) => src_ip = Some(local.ip()),
                _ => continue,
            }
        }
        let Some(dc) = usable_device(dev, hints) else {
            continue;
        };
        let s = match src {
            Some(s) => s,
            None => local_name(dev, src_ip.or_else(|| first_ip(dev)), service),
        };
        match build(req, &dc, s, dest) {
            Ok(i) => out.push(i),
            Err(e) if e == FiError::NODATA => continue,
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        Err(FiError::NODATA)
    } else {
        Ok(out)
    }
}

/// Whether the application takes `FI_MSG_PREFIX` (no hints: every mode).
pub fn wants_prefix(hints: Option<&Info>) -> bool {
    hints.map_or(true, |h| (h.mode | h.rx.mode) & FI_MSG_PREFIX != 0)
}

fn build(req: &Request, dc: &DevCaps, src: UdName, dest: Option<UdName>) -> FiResult<Info> {
    let cfg = config::get();
    let h = req.hints.as_ref();
    let hd = Info::default();
    let hi = h.unwrap_or(&hd);

    if hi.ep.protocol != FI_PROTO_UNSPEC && hi.ep.protocol != FI_PROTO_IB_UD {
        return Err(FiError::NODATA);
    }
    // FI_SOURCE on request: receive completions name the sender's fi_addr.
    let allowed = DGRAM_CAPS | FI_SOURCE;
    if hi.caps & !allowed != 0 {
        tracing::info!("getinfo: DGRAM endpoints do not offer caps {:#x}", hi.caps & !allowed);
        return Err(FiError::NODATA);
    }
    let caps = if hi.caps != 0 { hi.caps | FI_LOCAL_COMM | FI_REMOTE_COMM } else { DGRAM_CAPS };
    let prefix = wants_prefix(h);
    let (mr_mode, mr_info_mode) = match_mr_mode(req.version, h, caps, false)?;

    let mtu = verbs::mtu_bytes(dc.port.active_mtu);
    let max_msg = mtu.min(dc.port.max_msg_sz as usize).max(1);
    if mtu == 0 {
        tracing::info!("getinfo: device {} reports an unknown MTU {}", dc.dev.name(), dc.port.active_mtu);
        return Err(FiError::NODATA);
    }
    over(hi.ep.max_msg_size, max_msg, "max_msg_size")?;
    one_context_no_keys(hi, "DGRAM")?;

    let max_wr = dc.attr.max_qp_wr.max(1) as usize;
    let max_sge = dc.attr.max_sge.max(1) as usize;
    // One receive scatter entry is the GRH's own.
    let rx_sge = max_sge.saturating_sub(1).max(1);
    // Injected bytes are copied into registered memory of the endpoint:
    // anything up to a message.
    let inject_max = max_msg;
    queue_limits(hi, max_wr, max_sge, rx_sge, inject_max)?;
    if (hi.tx.op_flags | hi.rx.op_flags) & !DGRAM_OP_FLAGS != 0 {
        tracing::info!("getinfo: DGRAM endpoints do not take op_flags {:#x}", (hi.tx.op_flags | hi.rx.op_flags) & !DGRAM_OP_FLAGS);
        return Err(FiError::NODATA);
    }
    // Datagrams are neither ordered nor reliable: no ordering is kept.
    if hi.tx.msg_order != 0 && hi.tx.msg_order != FI_ORDER_NONE || hi.rx.msg_order != 0 && hi.rx.msg_order != FI_ORDER_NONE {
        tracing::info!("getinfo: DGRAM endpoints keep no message ordering");
        return Err(FiError::NODATA);
    }
    if hi.tx.caps & !(TX_CAPS | FI_LOCAL_COMM | FI_REMOTE_COMM) != 0 || hi.rx.caps & !(RX_CAPS | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM) != 0 {
        return Err(FiError::NODATA);
    }
    if hi.domain.cq_data_size > 4 {
        return Err(FiError::NODATA);
    }
    if hi.domain.mr_key_size > 0 && hi.domain.mr_key_size < 4 {
        return Err(FiError::NODATA);
    }
    over(hi.domain.mr_iov_limit, 1, "mr_iov_limit")?;
    if hi.domain.max_ep_stx_ctx > 0 || hi.domain.max_ep_srx_ctx > 0 {
        return Err(FiError::NODATA);
    }
    domain_caps(hi)?;
    over(hi.domain.cntr_cnt, CNTR_CNT, "cntr_cnt")?;
    match hi.domain.av_type {
        FI_AV_UNSPEC | FI_AV_MAP | FI_AV_TABLE => {}
        _ => return Err(FiError::NODATA),
    }
    let prefix_mode = if prefix { FI_MSG_PREFIX } else { 0 };
    Ok(Info {
        caps,
        mode: mr_info_mode | prefix_mode,
        addr_format: FI_ADDR_IB_UD,
        src_addr: None,
        dest_addr: None,
        src_ud: Some(src),
        dest_ud: dest,
        handle: None,
        pep: None,
        tx: TxAttr {
            // FI_LOCAL_COMM/FI_REMOTE_COMM are not tx/rx caps (fi_getinfo(3)).
            caps: caps & TX_CAPS,
            mode: prefix_mode,
            op_flags: hi.tx.op_flags,
            msg_order: FI_ORDER_NONE,
            comp_order: FI_ORDER_NONE,
            inject_size: pick(hi.tx.inject_size, inject_max),
            size: pick(hi.tx.size, cfg.tx_size.min(max_wr)),
            iov_limit: pick(hi.tx.iov_limit, cfg.tx_iov_limit.min(max_sge)),
            rma_iov_limit: 0,
            tclass: hi.tx.tclass,
        },
        rx: RxAttr {
            caps: caps & (RX_CAPS | FI_SOURCE),
            mode: prefix_mode,
            op_flags: hi.rx.op_flags,
            msg_order: FI_ORDER_NONE,
            comp_order: FI_ORDER_NONE,
            total_buffered_recv: 0,
            size: pick(hi.rx.size, cfg.rx_size.min(max_wr)),
            iov_limit: pick(hi.rx.iov_limit, cfg.rx_iov_limit.min(rx_sge)),
        },
        ep: EpAttr {
            type_: FI_EP_DGRAM,
            protocol: FI_PROTO_IB_UD,
            protocol_version: 1,
            max_msg_size: max_msg,
            msg_prefix_size: if prefix { MSG_PREFIX_SIZE } else { 0 },
            max_order_raw_size: 0,
            max_order_war_size: 0,
            max_order_waw_size: 0,
            mem_tag_format: 0,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            auth_key_size: 0,
        },
        // The device moves the datagrams; there is no control traffic.
        domain: domain_attr(req, dc, hi, FI_PROGRESS_AUTO, FI_PROGRESS_AUTO, mr_mode)?,
        fabric: fabric_attr(req, dc),
    })
}
