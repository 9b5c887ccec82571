//! `fi_getinfo` in safe Rust: the `Info` model (a Rust mirror of `struct
//! fi_info` where 0/None means "unspecified", as in C), device discovery
//! through rdma-cm, and the matching of hints against what the devices offer.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use crate::fi::consts::*;
use crate::config;
use crate::error::{FiError, FiResult};
use crate::verbs::{self, cm::CmId, Context};

/// Provider version, reported as `prov_version`: FI_VERSION(1000 + minor, patch) of
/// the crate, so that libfabric (which keeps the highest version of each provider
/// name) prefers rsverbs over its built-in verbs (117.0 for libfabric 1.17).
pub const PROV_VERSION: u32 = FI_VERSION(1000, 1);
/// The libfabric API version rsverbs implements.
pub const API_VERSION: u32 = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

/// The newest libfabric API version rsverbs speaks: applications may ask for
/// any version from 1.0 to this one (README, "libfabric versions").
pub const API_VERSION_MAX: u32 = FI_VERSION(2, 6);

// Capability bits libfabric 2.0 gave meanings (fi/consts.rs mirrors the
// 1.17 headers, where bits 45 and 46 were FI_HMEM_* MR flags and bit 48
// FI_VARIABLE_MSG). They are caps only for applications asking API >= 2.0.
/// `FI_TAGGED_DIRECTED_RECV` (2.0): FI_DIRECTED_RECV for tagged receives only.
pub const FI_TAGGED_DIRECTED_RECV: u64 = 1 << 45;
/// `FI_TAGGED_MULTI_RECV` (2.0): FI_MULTI_RECV on tagged receives (not supported).
pub const FI_TAGGED_MULTI_RECV: u64 = 1 << 46;
/// `FI_EXACT_DIRECTED_RECV` (2.0): directed receives whose source must be given (no FI_ADDR_UNSPEC).
pub const FI_EXACT_DIRECTED_RECV: u64 = 1 << 48;
/// `FI_PROGRESS_CONTROL_UNIFIED` (2.0): the application serializes control and data progress.
pub const FI_PROGRESS_CONTROL_UNIFIED: u32 = 3;

/// Whether a receive on an endpoint with `caps` matches by its source address
/// (fi_getinfo(3) of 2.x: FI_DIRECTED_RECV for both kinds,
/// FI_TAGGED_DIRECTED_RECV for tagged receives only, FI_EXACT_DIRECTED_RECV
/// alone for both, or as a modifier of the other two).
pub fn directed_recv(caps: u64, tagged: bool) -> bool {
    if caps & FI_DIRECTED_RECV != 0 {
        return true;
    }
    if tagged {
        caps & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV) != 0
    } else {
        caps & FI_EXACT_DIRECTED_RECV != 0 && caps & FI_TAGGED_DIRECTED_RECV == 0
    }
}

/// Bytes of CM private data an application may pass to connect/accept/reject.
/// rdma-cm carries 56 bytes in a REQ on RoCE/IB; one goes to the length header
/// (the layout libfabric's verbs provider uses, so the two interoperate).
pub const CM_DATA_SIZE: usize = 55;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TxAttr {
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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RxAttr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: usize,
    pub size: usize,
    pub iov_limit: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpAttr {
    pub type_: u32,
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
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DomainAttr {
    pub name: Option<String>,
    pub threading: u32,
    pub control_progress: u32,
    pub data_progress: u32,
    pub resource_mgmt: u32,
    pub av_type: u32,
    pub mr_mode: i32,
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
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
    /// 1.20: authorization keys per connectionless endpoint (rsverbs: none).
    pub max_ep_auth_key: usize,
    /// 2.0: largest peer group id (rsverbs: no peer groups).
    pub max_group_id: u32,
    /// 2.5: largest counter value (0 in hints: unspecified).
    pub max_cntr_value: u64,
    /// 2.5: largest counter error value (0 in hints: unspecified).
    pub max_err_cntr_value: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FabricAttr {
    pub name: Option<String>,
    pub prov_name: Option<String>,
    pub prov_version: u32,
    pub api_version: u32,
}

/// A connection request handed to the application in an `FI_CONNREQ` event.
pub use crate::ep::ConnReq;

/// The Rust form of `struct fi_info`.
#[derive(Debug, Clone, Default)]
pub struct Info {
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addr: Option<SocketAddr>,
    pub dest_addr: Option<SocketAddr>,
    /// `FI_ADDR_IB_UD` addresses (DGRAM endpoints, `crate::dgram`), in place
    /// of `src_addr`/`dest_addr`.
    pub src_ud: Option<crate::dgram::UdName>,
    pub dest_ud: Option<crate::dgram::UdName>,
    pub handle: Option<Arc<ConnReq>>,
    /// `handle` naming a passive endpoint (fi_getinfo(3) hints, fi_endpoint(3)):
    /// the active endpoint takes over its rdma-cm id and so its address.
    pub pep: Option<Arc<crate::ep::Pep>>,
    pub tx: TxAttr,
    pub rx: RxAttr,
    pub ep: EpAttr,
    pub domain: DomainAttr,
    pub fabric: FabricAttr,
}

/// What `fi_getinfo` was asked.
#[derive(Debug, Default)]
pub struct Request {
    pub version: u32,
    pub node: Option<String>,
    pub service: Option<String>,
    pub flags: u64,
    pub hints: Option<Info>,
}

/// Capabilities of MSG endpoints.
pub const MSG_CAPS: u64 = FI_MSG
    | FI_RMA
    | FI_READ
    | FI_WRITE
    | FI_SEND
    | FI_RECV
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;
pub(crate) const SECONDARY_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SOURCE;
const TX_CAPS: u64 = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND;
const RX_CAPS: u64 = FI_MSG | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// Message orderings an RC QP gives.
pub const MSG_ORDER: u64 = FI_ORDER_RAR
    | FI_ORDER_RAW
    | FI_ORDER_RAS
    | FI_ORDER_WAW
    | FI_ORDER_WAS
    | FI_ORDER_SAW
    | FI_ORDER_SAS;
/// The MR mode bits rsverbs needs: local descriptors, virtual addresses,
/// allocated memory, provider keys.
pub const MR_MODE: i32 = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
/// Op flags accepted in `tx_attr/rx_attr.op_flags`.
pub(crate) const OP_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_REMOTE_CQ_DATA
    | FI_MORE
    | FI_FENCE;

mod build;
mod dev;
mod hints;

use build::{build_info, build_rdm_info};
pub use dev::*;
pub use hints::*;

/// The domain capabilities rsverbs' domains have.
pub(crate) const DOMAIN_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM;

/// `hints->domain_attr->caps` asking for more than [`DOMAIN_CAPS`] (e.g.
/// `FI_SHARED_AV`) matches nothing: `-FI_ENODATA`, not an info without it.
pub(crate) fn domain_caps(hi: &Info) -> FiResult<()> {
    if hi.domain.caps & !DOMAIN_CAPS != 0 {
        tracing::info!("getinfo: unsupported domain caps requested: {:#x}", hi.domain.caps & !DOMAIN_CAPS);
        return Err(FiError::NODATA);
    }
    Ok(())
}

/// Capabilities of RDM endpoints.
pub const RDM_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RMA
    | FI_ATOMIC
    | FI_READ
    | FI_WRITE
    | FI_SEND
    | FI_RECV
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_DIRECTED_RECV
    | FI_SOURCE
    | FI_MULTI_RECV
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;
/// RDM capabilities an application asking API `version` may request: 2.0
/// added FI_TAGGED_DIRECTED_RECV and FI_EXACT_DIRECTED_RECV (reported only
/// when asked, as they change how receives match). FI_TAGGED_MULTI_RECV is
/// not offered: multi-receive buffers are untagged only.
pub fn rdm_caps_for(version: u32) -> u64 {
    if FI_MAJOR(version) >= 2 {
        RDM_CAPS | FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV
    } else {
        RDM_CAPS
    }
}
const RDM_TX_CAPS: u64 = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND;
const RDM_RX_CAPS: u64 =
    FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV;
/// Orderings RDM endpoints keep: sends are matched in order per peer, and RMA
/// to one peer goes through one RC queue pair in order.
pub const RDM_MSG_ORDER: u64 = FI_ORDER_SAS | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW | FI_ORDER_SAW;
/// `FI_TAG_GENERIC`: every tag bit is usable.
pub const TAG_GENERIC: u64 = 0xAAAA_AAAA_AAAA_AAAA;

/// `fi_getinfo` for this provider.
pub fn getinfo(req: &Request) -> FiResult<Vec<Info>> {
    let cfg = config::get();
    if !(FI_MAJOR(req.version) == 1 || (FI_MAJOR(req.version) == 2 && req.version <= API_VERSION_MAX)) {
        return crate::fail!(FiError::NOSYS, "getinfo: API version {}.{} not supported", FI_MAJOR(req.version), FI_MINOR(req.version));
    }
    let hints = req.hints.as_ref();
    if let Some(h) = hints {
        if let Some(p) = &h.fabric.prov_name {
            let first = p.split(';').next().unwrap_or("");
            if !first.eq_ignore_ascii_case(&cfg.prov_name) {
                return Err(FiError::NODATA);
            }
        }
        // Datagram endpoints (and their FI_ADDR_IB_UD addresses): crate::dgram.
        if h.ep.type_ == FI_EP_DGRAM || h.addr_format == FI_ADDR_IB_UD {
            return crate::dgram::info::getinfo(req);
        }
        match h.addr_format {
            FI_FORMAT_UNSPEC | FI_SOCKADDR | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 => {}
            f => {
                tracing::info!("getinfo: address format {f} not supported");
                return Err(FiError::NODATA);
            }
        }
    }
    let port = parse_port(req.service.as_deref())?;
    let numeric = req.flags & FI_NUMERICHOST != 0;
    let (mut src, mut dest) = (hints.and_then(|h| h.src_addr), hints.and_then(|h| h.dest_addr));
    // hints->handle a bound passive endpoint: its address is the source
    // (fi_endpoint takes over its rdma-cm id).
    // Its IP selects the device and route (port 0: the pep holds the port).
    let pep = hints.and_then(|h| h.pep.clone());
    let pep_addr = pep.as_ref().and_then(|p| p.local_addr()).filter(|a| !a.ip().is_unspecified());
    if let Some(a) = pep_addr {
        src = Some(SocketAddr::new(a.ip(), 0));
    }
    match (&req.node, req.flags & FI_SOURCE != 0) {
        (Some(n), true) => src = Some(resolve_node(n, port.unwrap_or(0), numeric)?),
        (Some(n), false) => dest = Some(resolve_node(n, port.unwrap_or(0), numeric)?),
        (None, _) => {
            if let Some(p) = port {
                // A service without a node names the local (source) port.
                let ip = src.map(|s| s.ip());
                src = Some(SocketAddr::new(ip.unwrap_or(IpAddr::from([0u8, 0, 0, 0])), p));
            }
        }
    }
    if let Some(h) = hints {
        let want6 = h.addr_format == FI_SOCKADDR_IN6;
        let want4 = h.addr_format == FI_SOCKADDR_IN;
        for a in [src, dest].into_iter().flatten() {
            if (want6 && a.is_ipv4()) || (want4 && a.is_ipv6()) {
                tracing::info!("getinfo: address {a} does not match the requested format");
                return Err(FiError::NODATA);
            }
        }
    }

    let devices = verbs::devices();
    if devices.is_empty() {
        tracing::info!("getinfo: no RDMA devices");
        return Err(FiError::NODATA);
    }
    let addrs = if dest.is_none() && src.map_or(true, |s| s.ip().is_unspecified()) { rdma_addresses() } else { Vec::new() };
    let route = match dest {
        Some(d) => Some(route_to(src.as_ref().filter(|s| !s.ip().is_unspecified()), &d)?),
        None => None,
    };

    let mut out = Vec::new();
    for dev in devices {
        if !device_wanted(dev, hints) {
            continue;
        }
        let (s, d) = if let Some((rdev, local)) = &route {
            if !Arc::ptr_eq(rdev, dev) {
                continue;
            }
            (Some(src.unwrap_or(*local)).map(|s| if s.ip().is_unspecified() { SocketAddr::new(local.ip(), s.port()) } else { s }), dest)
        } else if let Some(s) = src.filter(|s| !s.ip().is_unspecified()) {
            match device_of_local(s.ip()) {
                Some(d) if Arc::ptr_eq(&d, dev) => (Some(s), None),
                _ => continue,
            }
        } else {
            // No usable address given: pick this device's first RDMA interface address.
            let want_port = src.map_or(0, |s| s.port());
            let want6 = hints.map_or(false, |h| h.addr_format == FI_SOCKADDR_IN6);
            let pick = addrs
                .iter()
                .filter(|a| Arc::ptr_eq(&a.device, dev))
                .find(|a| a.ip.is_ipv6() == want6 || hints.map_or(true, |h| h.addr_format == FI_FORMAT_UNSPEC || h.addr_format == FI_SOCKADDR));
            match pick {
                Some(a) => (Some(SocketAddr::new(a.ip, want_port)), None),
                None => {
                    tracing::info!("getinfo: device {} has no usable IP address", dev.name());
                    continue;
                }
            }
        };
        let Some(dc) = usable_device(dev, hints) else {
            continue;
        };
        // MSG first (what applications that ask for any endpoint type get first), then RDM.
        for build in [build_info, build_rdm_info] {
            match build(req, &dc, s, d) {
                Ok(mut i) => {
                    if i.ep.type_ == FI_EP_MSG && pep.is_some() {
                        i.pep = pep.clone();
                        i.src_addr = pep_addr.or(i.src_addr);
                    }
                    out.push(i)
                }
                Err(e) if e == FiError::NODATA => continue,
                Err(e) => return Err(e),
            }
        }
    }
    // Any endpoint type asked for: DGRAM infos last, unless a peer was named
    // (its UD address would need a name-service query, which MSG/RDM
    // applications should not wait for).
    if hints.map_or(true, |h| h.ep.type_ == FI_EP_UNSPEC) && dest.is_none() {
        match crate::dgram::info::getinfo(req) {
            Ok(v) => out.extend(v),
            Err(e) if e == FiError::NODATA => {}
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        Err(FiError::NODATA)
    } else {
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
