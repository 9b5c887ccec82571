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

/// Parses a numeric service (port) string.
pub(crate) fn parse_port(service: Option<&str>) -> FiResult<Option<u16>> {
    match service {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => match s.parse::<u16>() {
            Ok(p) => Ok(Some(p)),
            Err(_) => crate::fail!(FiError::NODATA, "getinfo: service '{s}' is not a port number"),
        },
    }
}

/// Resolves `node` (host name or address) with `port`.
pub(crate) fn resolve_node(node: &str, port: u16, numeric_only: bool) -> FiResult<SocketAddr> {
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    if numeric_only {
        return crate::fail!(FiError::NODATA, "getinfo: FI_NUMERICHOST but node '{node}' is not numeric");
    }
    let mut addrs: Vec<SocketAddr> = match (node, port).to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => return crate::fail!(FiError::NODATA, "getinfo: cannot resolve node '{node}': {e}"),
    };
    // Prefer IPv4, as most RDMA deployments are configured with it.
    addrs.sort_by_key(|a| !a.is_ipv4());
    addrs.into_iter().next().ok_or(FiError::NODATA)
}

/// An IP address that rdma-cm maps to an RDMA device.
#[derive(Debug, Clone)]
pub struct DevAddr {
    pub ifname: String,
    pub ip: IpAddr,
    pub device: Arc<Context>,
}

/// Every interface address with an RDMA device behind it (as rdma-cm sees it),
/// filtered by `FI_VERBS_IFACE`. Found by binding a throw-away cm id to each.
pub fn rdma_addresses() -> Vec<DevAddr> {
    let cfg = config::get();
    let mut out = Vec::new();
    for ifa in crate::sys::interface_addrs() {
        if !ifa.up {
            continue;
        }
        if let Some(want) = &cfg.iface {
            if !ifa.name.starts_with(want.as_str()) {
                continue;
            }
        }
        if let IpAddr::V6(v6) = ifa.addr {
            // Link-local IPv6 needs a scope id rdma-cm cannot route without; skip it.
            if (v6.segments()[0] & 0xffc0) == 0xfe80 {
                continue;
            }
        }
        let Ok(id) = CmId::new_sync() else { continue };
        if id.bind_addr(&SocketAddr::new(ifa.addr, 0)).is_err() {
            continue;
        }
        if let Some(dev) = id.device() {
            out.push(DevAddr { ifname: ifa.name.clone(), ip: ifa.addr, device: dev });
        }
    }
    // IPv4 first, then in interface order.
    out.sort_by_key(|d| !d.ip.is_ipv4());
    out
}

/// The device behind a local IP address, if any.
pub(crate) fn device_of_local(ip: IpAddr) -> Option<Arc<Context>> {
    let id = CmId::new_sync().ok()?;
    id.bind_addr(&SocketAddr::new(ip, 0)).ok()?;
    id.device()
}

/// Resolves the route to `dst`: the local device and source address rdma-cm picks.
pub fn route_to(src: Option<&SocketAddr>, dst: &SocketAddr) -> FiResult<(Arc<Context>, SocketAddr)> {
    let id = CmId::new_sync().map_err(FiError::from_errno)?;
    if let Err(e) = id.resolve_addr(src, dst, 2000) {
        return crate::fail!(FiError::NODATA, "getinfo: no RDMA route to {dst}: {}", std::io::Error::from_raw_os_error(e));
    }
    let dev = id.device().ok_or(FiError::NODATA)?;
    let local = id.local_addr().ok_or(FiError::NODATA)?;
    let port = src.map_or(0, |s| s.port());
    Ok((dev, SocketAddr::new(local.ip(), port)))
}

/// What one device offers (queried once per getinfo call).
pub(crate) struct DevCaps {
    pub(crate) dev: Arc<Context>,
    pub(crate) attr: verbs::DeviceAttr,
    pub(crate) port: verbs::PortAttr,
    pub(crate) fabric_name: String,
    pub(crate) max_inline: usize,
}

pub(crate) fn dev_caps(dev: &Arc<Context>) -> FiResult<DevCaps> {
    let cfg = config::get();
    let attr = dev.query_device().map_err(FiError::from_errno)?;
    let port = dev.query_port(1).map_err(FiError::from_errno)?;
    let gid = dev.query_gid(1, cfg.gid_idx).unwrap_or([0; 16]);
    let prefix = u64::from_be_bytes(gid[0..8].try_into().expect("8 bytes"));
    let mut max_inline = dev.max_inline() as usize;
    if let Some(k) = cfg.inline_size {
        max_inline = max_inline.min(k);
    }
    Ok(DevCaps { dev: dev.clone(), attr, port, fabric_name: format!("IB-0x{prefix:x}"), max_inline })
}

/// Checks the MR mode the application supports and returns the one to report
/// (plus extra `info->mode` bits, for the pre-1.5 API's FI_LOCAL_MR).
///
/// RDM endpoints (`rdm`) do without `FI_MR_LOCAL`: they register buffers
/// given without descriptors themselves, through the domain's registration
/// cache (`crate::mrcache`). Hints with the bit keep it in the answer
/// (the application then passes descriptors, as before); hints without it get
/// an answer without it.
pub(crate) fn match_mr_mode(version: u32, hints: Option<&Info>, caps: u64, rdm: bool) -> FiResult<(i32, u64)> {
    // Remote-access bits only matter to applications that do RMA/atomics.
    let remote = if caps & (FI_RMA | FI_ATOMIC) != 0 { MR_MODE & !FI_MR_LOCAL } else { 0 };
    let mut needed = remote | FI_MR_LOCAL;
    if rdm {
        if let Some(h) = hints {
            let user = h.domain.mr_mode;
            if !FI_VERSION_LT(version, FI_VERSION(1, 5)) && user != FI_MR_BASIC && user != FI_MR_SCALABLE && user & FI_MR_LOCAL == 0 {
                needed = remote;
            }
        }
    }
    let Some(h) = hints else {
        return Ok(if FI_VERSION_LT(version, FI_VERSION(1, 5)) { (FI_MR_BASIC, FI_LOCAL_MR) } else { (needed, 0) });
    };
    let user = h.domain.mr_mode;
    if FI_VERSION_LT(version, FI_VERSION(1, 5)) || user == FI_MR_BASIC {
        // Old-style API: FI_MR_BASIC (or unspecified) plus the FI_LOCAL_MR mode bit.
        if user == FI_MR_SCALABLE {
            return crate::fail!(FiError::NODATA, "getinfo: FI_MR_SCALABLE is not supported by verbs");
        }
        if h.mode & FI_LOCAL_MR == 0 && h.domain.mode & FI_LOCAL_MR == 0 {
            return crate::fail!(FiError::NODATA, "getinfo: verbs needs local MRs (mode FI_LOCAL_MR) with the pre-1.5 API");
        }
        return Ok((FI_MR_BASIC, FI_LOCAL_MR));
    }
    if user == FI_MR_SCALABLE {
        return crate::fail!(FiError::NODATA, "getinfo: FI_MR_SCALABLE is not supported by verbs");
    }
    if user & needed != needed {
        tracing::info!("getinfo: hints mr_mode {user:#x} lacks required bits {needed:#x}");
        return Err(FiError::NODATA);
    }
    Ok((needed, 0))
}

pub(crate) fn over(hint: usize, max: usize, what: &str) -> FiResult<()> {
    if hint > max {
        tracing::info!("getinfo: hints ask {what} = {hint}, the device offers {max}");
        return Err(FiError::NODATA);
    }
    Ok(())
}

/// The `fi_domain_attr` hints added after 1.17 (each read only for
/// applications whose API version defines it): rsverbs has no authorization
/// keys and no peer groups; its counters hold any `u64`.
pub(crate) fn check_newer_domain_hints(hd: &DomainAttr) -> FiResult<()> {
    if hd.max_ep_auth_key > 0 {
        tracing::info!("getinfo: hints ask max_ep_auth_key = {}; rsverbs has no authorization keys", hd.max_ep_auth_key);
        return Err(FiError::NODATA);
    }
    if hd.max_group_id > 0 {
        tracing::info!("getinfo: hints ask max_group_id = {}; rsverbs has no peer groups", hd.max_group_id);
        return Err(FiError::NODATA);
    }
    Ok(())
}

/// Counters are software objects: as many as memory holds; this is what
/// `cntr_cnt` reports.
pub const CNTR_CNT: usize = 1 << 16;

/// The hints' queue sizes, iov limits and inject size against what the
/// endpoint offers (`-FI_ENODATA` above them): `max_wr` entries per queue,
/// `tx_iov`/`rx_iov` buffers per operation, one RMA iov, `inject` bytes.
pub(crate) fn queue_limits(hi: &Info, max_wr: usize, tx_iov: usize, rx_iov: usize, inject: usize) -> FiResult<()> {
    over(hi.tx.size, max_wr, "tx size")?;
    over(hi.rx.size, max_wr, "rx size")?;
    over(hi.tx.iov_limit, tx_iov, "tx iov_limit")?;
    over(hi.rx.iov_limit, rx_iov, "rx iov_limit")?;
    over(hi.tx.rma_iov_limit, 1, "rma_iov_limit")?;
    over(hi.tx.inject_size, inject, "inject_size")
}

/// The hints of the connectionless endpoints (RDM, DGRAM, `kind` in the
/// log): one transmit and one receive context, no shared contexts, no
/// authorization keys, and [`check_newer_domain_hints`].
pub(crate) fn one_context_no_keys(hi: &Info, kind: &str) -> FiResult<()> {
    if hi.ep.tx_ctx_cnt == FI_SHARED_CONTEXT || hi.ep.rx_ctx_cnt == FI_SHARED_CONTEXT {
        tracing::info!("getinfo: {kind} endpoints have no shared contexts");
        return Err(FiError::NODATA);
    }
    over(hi.ep.tx_ctx_cnt, 1, "ep tx_ctx_cnt")?;
    over(hi.ep.rx_ctx_cnt, 1, "ep rx_ctx_cnt")?;
    if hi.ep.auth_key_size != 0 || hi.domain.auth_key_size != 0 {
        tracing::info!("getinfo: authorization keys are not supported");
        return Err(FiError::NODATA);
    }
    check_newer_domain_hints(&hi.domain)
}

/// Threading levels (all accepted; see README "Threading").
pub(crate) fn threading(hint: u32) -> FiResult<u32> {
    match hint {
        FI_THREAD_UNSPEC => Ok(FI_THREAD_SAFE),
        FI_THREAD_SAFE | FI_THREAD_FID | FI_THREAD_DOMAIN | FI_THREAD_COMPLETION | FI_THREAD_ENDPOINT => Ok(hint),
        t => {
            tracing::info!("getinfo: unknown threading level {t}");
            Err(FiError::NODATA)
        }
    }
}

/// A progress model: `have` is what the provider does; a hint of MANUAL is
/// always satisfied (the application drives progress; an automatic provider
/// needs none of it), a hint of AUTO only when `have` is AUTO. For control
/// progress, API 2.0's FI_PROGRESS_CONTROL_UNIFIED (the application
/// serializes control and data calls, which implies manual progress) is
/// satisfied too: rsverbs' objects lock for themselves whatever the model.
pub(crate) fn progress(version: u32, hint: u32, have: u32, what: &str) -> FiResult<u32> {
    match hint {
        FI_PROGRESS_UNSPEC => Ok(have),
        FI_PROGRESS_MANUAL => Ok(FI_PROGRESS_MANUAL),
        FI_PROGRESS_CONTROL_UNIFIED if what == "control" && FI_MAJOR(version) >= 2 => Ok(FI_PROGRESS_CONTROL_UNIFIED),
        FI_PROGRESS_AUTO if have == FI_PROGRESS_AUTO => Ok(FI_PROGRESS_AUTO),
        FI_PROGRESS_AUTO => {
            tracing::info!("getinfo: {what} progress FI_PROGRESS_AUTO asked; rsverbs makes it manually (inside the application's calls)");
            Err(FiError::NODATA)
        }
        p => {
            tracing::info!("getinfo: unknown {what} progress model {p}");
            Err(FiError::NODATA)
        }
    }
}

pub(crate) fn pick(hint: usize, default: usize) -> usize {
    if hint != 0 {
        hint
    } else {
        default
    }
}

/// The domain attributes of an info for device `dc`, as RDM and DGRAM give
/// them (MSG overrides the AV type, the shared receive contexts and the error
/// data): `control` and `data` are the progress models the endpoint type
/// offers; threading, progress, resource management, AV type and traffic
/// class follow the hints `hi`.
pub(crate) fn domain_attr(req: &Request, dc: &DevCaps, hi: &Info, control: u32, data: u32, mr_mode: i32) -> FiResult<DomainAttr> {
    Ok(DomainAttr {
        name: Some(dc.dev.name().to_string()),
        threading: threading(hi.domain.threading)?,
        control_progress: progress(req.version, hi.domain.control_progress, control, "control")?,
        data_progress: progress(req.version, hi.domain.data_progress, data, "data")?,
        resource_mgmt: if hi.domain.resource_mgmt != FI_RM_UNSPEC { hi.domain.resource_mgmt } else { FI_RM_ENABLED },
        av_type: hi.domain.av_type,
        mr_mode,
        mr_key_size: 4,
        cq_data_size: 4,
        cq_cnt: dc.attr.max_cq.max(0) as usize,
        ep_cnt: dc.attr.max_qp.max(0) as usize,
        tx_ctx_cnt: dc.attr.max_qp.max(0) as usize,
        rx_ctx_cnt: dc.attr.max_qp.max(0) as usize,
        max_ep_tx_ctx: 1,
        max_ep_rx_ctx: 1,
        max_ep_stx_ctx: 0,
        max_ep_srx_ctx: 0,
        cntr_cnt: CNTR_CNT,
        mr_iov_limit: 1,
        caps: DOMAIN_CAPS,
        mode: 0,
        auth_key_size: 0,
        max_err_data: 0,
        mr_cnt: dc.attr.max_mr.max(0) as usize,
        tclass: hi.domain.tclass,
        max_ep_auth_key: 0,
        max_group_id: 0,
        max_cntr_value: u64::MAX,
        max_err_cntr_value: u64::MAX,
    })
}

/// The fabric attributes of an info for device `dc`.
pub(crate) fn fabric_attr(req: &Request, dc: &DevCaps) -> FabricAttr {
    FabricAttr { name: Some(dc.fabric_name.clone()), prov_name: None, prov_version: PROV_VERSION, api_version: req.version }
}

/// Whether getinfo looks at device `dev`: its name starts with the
/// configured device name (`FI_VERBS_DEVICE_NAME`) and equals the
/// hints' domain name, where either is given.
pub(crate) fn device_wanted(dev: &Context, hints: Option<&Info>) -> bool {
    if let Some(want) = &config::get().device_name {
        if !dev.name().starts_with(want.as_str()) {
            return false;
        }
    }
    if let Some(want) = hints.and_then(|h| h.domain.name.as_ref()) {
        if want != dev.name() {
            return false;
        }
    }
    true
}

/// The capabilities of device `dev` if getinfo can offer it: it answers the
/// query, its port 1 is active, and its fabric is the hints' fabric name
/// where one is given.
pub(crate) fn usable_device(dev: &Arc<Context>, hints: Option<&Info>) -> Option<DevCaps> {
    let dc = match dev_caps(dev) {
        Ok(dc) => dc,
        Err(e) => {
            tracing::warn!("getinfo: cannot query device {}: {:?}", dev.name(), e);
            return None;
        }
    };
    if dc.port.state != verbs::PORT_ACTIVE {
        tracing::info!("getinfo: device {} port 1 is not active", dev.name());
        return None;
    }
    if let Some(want) = hints.and_then(|h| h.fabric.name.as_ref()) {
        if *want != dc.fabric_name {
            return None;
        }
    }
    Some(dc)
}

/// Builds the info for one device and one address pair, or says why it doesn't fit.
fn build_info(
    req: &Request,
    dc: &DevCaps,
    src: Option<SocketAddr>,
    dest: Option<SocketAddr>,
) -> FiResult<Info> {
    let cfg = config::get();
    let h = req.hints.as_ref();
    let hd = Info::default();
    let hi = h.unwrap_or(&hd);

    // Capabilities.
    if hi.caps & !(MSG_CAPS | SECONDARY_CAPS) != 0 {
        tracing::info!("getinfo: unsupported caps requested: {:#x}", hi.caps & !(MSG_CAPS | SECONDARY_CAPS));
        return Err(FiError::NODATA);
    }
    let mut caps = if hi.caps != 0 { hi.caps | (MSG_CAPS & SECONDARY_CAPS) } else { MSG_CAPS };
    if caps & FI_SOURCE != 0 {
        // FI_SOURCE reports senders on connectionless endpoints; on MSG the peer is implied.
        caps &= !FI_SOURCE;
    }
    let (mr_mode, mr_info_mode) = match_mr_mode(req.version, h, caps, false)?;

    // Modes: rsverbs needs none, except FI_RX_CQ_DATA to offer remote CQ data on
    // RMA writes (such a write consumes a posted receive).
    let rx_cq_data = h.is_none() || (hi.mode | hi.rx.mode) & FI_RX_CQ_DATA != 0;

    // Endpoint attributes.
    if hi.ep.type_ != FI_EP_UNSPEC && hi.ep.type_ != FI_EP_MSG {
        return Err(FiError::NODATA);
    }
    if hi.ep.protocol != FI_PROTO_UNSPEC && hi.ep.protocol != FI_PROTO_RDMA_CM_IB_RC {
        return Err(FiError::NODATA);
    }
    let max_msg = (dc.port.max_msg_sz as usize).max(1);
    over(hi.ep.max_msg_size, max_msg, "max_msg_size")?;
    // Shared receive contexts (an SRQ, crate::srx) where the device has SRQs;
    // no shared transmit contexts: verbs has no shared send queue.
    let srx_max = usize::from(dc.attr.max_srq > 0);
    if hi.ep.tx_ctx_cnt == FI_SHARED_CONTEXT {
        tracing::info!("getinfo: shared transmit contexts are not supported");
        return Err(FiError::NODATA);
    }
    if hi.ep.rx_ctx_cnt == FI_SHARED_CONTEXT && srx_max == 0 {
        tracing::info!("getinfo: device {} has no shared receive queues", dc.dev.name());
        return Err(FiError::NODATA);
    }
    over(hi.ep.tx_ctx_cnt, 1, "ep tx_ctx_cnt")?;
    if hi.ep.rx_ctx_cnt != FI_SHARED_CONTEXT {
        over(hi.ep.rx_ctx_cnt, 1, "ep rx_ctx_cnt")?;
    }
    if hi.ep.auth_key_size != 0 || hi.domain.auth_key_size != 0 {
        tracing::info!("getinfo: authorization keys are not supported");
        return Err(FiError::NODATA);
    }
    check_newer_domain_hints(&hi.domain)?;

    // Queue limits.
    let max_wr = dc.attr.max_qp_wr.max(1) as usize;
    let max_sge = dc.attr.max_sge.max(1) as usize;
    queue_limits(hi, max_wr, max_sge, max_sge, dc.max_inline)?;
    if hi.tx.msg_order & !MSG_ORDER != 0 || hi.rx.msg_order & !MSG_ORDER != 0 {
        tracing::info!("getinfo: unsupported message ordering requested");
        return Err(FiError::NODATA);
    }
    if (hi.tx.op_flags | hi.rx.op_flags) & !OP_FLAGS != 0 {
        tracing::info!("getinfo: unsupported op_flags requested");
        return Err(FiError::NODATA);
    }
    if hi.tx.caps & !TX_CAPS != 0 || hi.rx.caps & !(RX_CAPS | SECONDARY_CAPS) != 0 {
        return Err(FiError::NODATA);
    }

    // Domain attributes.
    if hi.domain.cq_data_size > 4 {
        tracing::info!("getinfo: cq_data_size {} > 4 (verbs immediate data)", hi.domain.cq_data_size);
        return Err(FiError::NODATA);
    }
    if hi.domain.mr_key_size > 0 && hi.domain.mr_key_size < 4 {
        return Err(FiError::NODATA);
    }
    over(hi.domain.mr_iov_limit, 1, "mr_iov_limit")?;
    if hi.domain.max_ep_stx_ctx > 0 {
        tracing::info!("getinfo: shared transmit contexts are not supported (verbs has no shared send queue)");
        return Err(FiError::NODATA);
    }
    over(hi.domain.max_ep_srx_ctx, srx_max, "max_ep_srx_ctx")?;
    domain_caps(hi)?;
    over(hi.domain.cntr_cnt, CNTR_CNT, "cntr_cnt")?;

    // tx/rx caps hold only the capabilities of that direction (fi_getinfo(3)):
    // FI_LOCAL_COMM/FI_REMOTE_COMM are domain and endpoint caps, not rx caps.
    let tx_caps = caps & TX_CAPS;
    let rx_caps = caps & RX_CAPS;
    let inject = pick(hi.tx.inject_size, dc.max_inline);
    let addr_format = match (src.or(dest), hi.addr_format) {
        (Some(SocketAddr::V6(_)), _) => FI_SOCKADDR_IN6,
        (Some(SocketAddr::V4(_)), _) => FI_SOCKADDR_IN,
        (None, f) if f != FI_FORMAT_UNSPEC => f,
        (None, _) => FI_SOCKADDR_IN,
    };
    Ok(Info {
        caps,
        mode: mr_info_mode,
        addr_format,
        src_addr: src,
        dest_addr: dest,
        src_ud: None,
        dest_ud: None,
        handle: None,
        pep: None,
        tx: TxAttr {
            caps: tx_caps,
            mode: 0,
            op_flags: hi.tx.op_flags,
            msg_order: MSG_ORDER,
            comp_order: FI_ORDER_STRICT,
            inject_size: inject,
            size: pick(hi.tx.size, cfg.tx_size.min(max_wr)),
            iov_limit: pick(hi.tx.iov_limit, cfg.tx_iov_limit.min(max_sge)),
            rma_iov_limit: 1,
            tclass: hi.tx.tclass,
        },
        rx: RxAttr {
            caps: rx_caps,
            mode: if rx_cq_data { FI_RX_CQ_DATA } else { 0 },
            op_flags: hi.rx.op_flags,
            msg_order: MSG_ORDER,
            comp_order: FI_ORDER_STRICT | FI_ORDER_DATA,
            total_buffered_recv: 0,
            size: pick(hi.rx.size, cfg.rx_size.min(max_wr)),
            iov_limit: pick(hi.rx.iov_limit, cfg.rx_iov_limit.min(max_sge)),
        },
        ep: EpAttr {
            type_: FI_EP_MSG,
            protocol: FI_PROTO_RDMA_CM_IB_RC,
            protocol_version: 1,
            max_msg_size: max_msg,
            msg_prefix_size: 0,
            max_order_raw_size: max_msg,
            max_order_war_size: max_msg,
            max_order_waw_size: max_msg,
            mem_tag_format: 0,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: if hi.ep.rx_ctx_cnt == FI_SHARED_CONTEXT { FI_SHARED_CONTEXT } else { 1 },
            auth_key_size: 0,
        },
        // Connection setup completes inside fi_eq_read (rdma-cm events are
        // handled there): manual. Transfers are the device's: automatic.
        domain: DomainAttr {
            av_type: FI_AV_UNSPEC,
            max_ep_srx_ctx: srx_max,
            max_err_data: CM_DATA_SIZE,
            ..domain_attr(req, dc, hi, FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO, mr_mode)?
        },
        fabric: fabric_attr(req, dc),
    })
}

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
/// Largest RDM message: rendezvous reads are split into device-sized chunks,
/// so only the protocol bound and memory registration limit it.
fn rdm_max_msg(dc: &DevCaps) -> usize {
    let proto = crate::rdm::proto::MAX_MSG_LEN;
    usize::try_from(dc.attr.max_mr_size.min(proto)).unwrap_or(usize::MAX).max(1)
}

/// Builds the `FI_EP_RDM` info for one device, or says why it doesn't fit.
fn build_rdm_info(req: &Request, dc: &DevCaps, src: Option<SocketAddr>, dest: Option<SocketAddr>) -> FiResult<Info> {
    let cfg = config::get();
    let rcfg = crate::rdm::RdmConfig::get();
    let h = req.hints.as_ref();
    let hd = Info::default();
    let hi = h.unwrap_or(&hd);

    if hi.ep.type_ != FI_EP_UNSPEC && hi.ep.type_ != FI_EP_RDM {
        return Err(FiError::NODATA);
    }
    if hi.ep.protocol != FI_PROTO_UNSPEC && hi.ep.protocol != FI_PROTO_RXM {
        tracing::info!("getinfo: RDM endpoints speak FI_PROTO_RXM, not protocol {}", hi.ep.protocol);
        return Err(FiError::NODATA);
    }
    let rdm_caps = rdm_caps_for(req.version);
    if hi.caps & !rdm_caps != 0 {
        tracing::info!("getinfo: unsupported RDM caps requested: {:#x}", hi.caps & !rdm_caps);
        return Err(FiError::NODATA);
    }
    // With caps in the hints, only those (plus local/remote communication) are
    // reported: FI_DIRECTED_RECV, FI_SOURCE and FI_MULTI_RECV change how the
    // endpoint behaves, so they are on only when asked for.
    let caps = if hi.caps != 0 { hi.caps | FI_LOCAL_COMM | FI_REMOTE_COMM } else { RDM_CAPS };
    let (mr_mode, mr_info_mode) = match_mr_mode(req.version, h, caps, true)?;

    let max_msg = rdm_max_msg(dc);
    over(hi.ep.max_msg_size, max_msg, "max_msg_size")?;
    one_context_no_keys(hi, "RDM")?;
    if hi.ep.msg_prefix_size != 0 {
        return Err(FiError::NODATA);
    }

    // Queue limits: the endpoint queues operations in software, bounded by these.
    let max_wr = dc.attr.max_qp_wr.max(1) as usize;
    let max_sge = dc.attr.max_sge.max(1) as usize;
    let tx_iov_max = max_sge.min(crate::rdm::proto::MAX_SEGS);
    let inject_max = rcfg.eager_size;
    queue_limits(hi, max_wr, tx_iov_max, max_sge, inject_max)?;
    if hi.tx.msg_order & !RDM_MSG_ORDER != 0 || hi.rx.msg_order & !RDM_MSG_ORDER != 0 {
        tracing::info!("getinfo: RDM endpoints do not keep the message ordering requested");
        return Err(FiError::NODATA);
    }
    if hi.tx.op_flags & !OP_FLAGS != 0 || hi.rx.op_flags & !(OP_FLAGS | FI_MULTI_RECV) != 0 {
        tracing::info!("getinfo: unsupported op_flags requested");
        return Err(FiError::NODATA);
    }
    let rdm_rx_caps = RDM_RX_CAPS | (rdm_caps & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV));
    if hi.tx.caps & !RDM_TX_CAPS != 0 || hi.rx.caps & !(rdm_rx_caps | SECONDARY_CAPS) != 0 {
        return Err(FiError::NODATA);
    }

    if hi.domain.cq_data_size > 4 {
        tracing::info!("getinfo: cq_data_size {} > 4", hi.domain.cq_data_size);
        return Err(FiError::NODATA);
    }
    if hi.domain.mr_key_size > 0 && hi.domain.mr_key_size < 4 {
        return Err(FiError::NODATA);
    }
    over(hi.domain.mr_iov_limit, 1, "mr_iov_limit")?;
    if hi.domain.max_ep_stx_ctx > 0 || hi.domain.max_ep_srx_ctx > 0 {
        tracing::info!("getinfo: shared tx/rx contexts are not supported");
        return Err(FiError::NODATA);
    }
    domain_caps(hi)?;
    over(hi.domain.cntr_cnt, CNTR_CNT, "cntr_cnt")?;
    match hi.domain.av_type {
        FI_AV_UNSPEC | FI_AV_MAP | FI_AV_TABLE => {}
        t => {
            tracing::info!("getinfo: AV type {t} not supported");
            return Err(FiError::NODATA);
        }
    }

    let tx_caps = caps & RDM_TX_CAPS;
    let rx_caps = caps & rdm_rx_caps;
    let addr_format = match (src.or(dest), hi.addr_format) {
        (Some(SocketAddr::V6(_)), _) => FI_SOCKADDR_IN6,
        (Some(SocketAddr::V4(_)), _) => FI_SOCKADDR_IN,
        (None, f) if f != FI_FORMAT_UNSPEC => f,
        (None, _) => FI_SOCKADDR_IN,
    };
    let rdm_have = if hi.domain.data_progress == FI_PROGRESS_AUTO || hi.domain.control_progress == FI_PROGRESS_AUTO {
        FI_PROGRESS_AUTO
    } else {
        FI_PROGRESS_MANUAL
    };
    let order = |hint: u64| if hint != 0 { hint } else { RDM_MSG_ORDER };
    Ok(Info {
        caps,
        mode: mr_info_mode,
        addr_format,
        src_addr: src,
        dest_addr: dest,
        src_ud: None,
        dest_ud: None,
        handle: None,
        pep: None,
        tx: TxAttr {
            caps: tx_caps,
            mode: 0,
            op_flags: hi.tx.op_flags,
            msg_order: order(hi.tx.msg_order),
            comp_order: FI_ORDER_NONE,
            inject_size: pick(hi.tx.inject_size, inject_max),
            size: pick(hi.tx.size, cfg.tx_size.min(max_wr)),
            iov_limit: pick(hi.tx.iov_limit, cfg.tx_iov_limit.min(tx_iov_max)),
            rma_iov_limit: 1,
            tclass: hi.tx.tclass,
        },
        rx: RxAttr {
            caps: rx_caps,
            mode: 0,
            op_flags: hi.rx.op_flags,
            msg_order: order(hi.rx.msg_order),
            comp_order: FI_ORDER_NONE,
            total_buffered_recv: 0,
            size: pick(hi.rx.size, cfg.rx_size.min(max_wr)),
            iov_limit: pick(hi.rx.iov_limit, cfg.rx_iov_limit.min(max_sge)),
        },
        ep: EpAttr {
            type_: FI_EP_RDM,
            protocol: FI_PROTO_RXM,
            protocol_version: crate::rdm::proto::VERSION as u32,
            max_msg_size: max_msg,
            msg_prefix_size: 0,
            max_order_raw_size: max_msg,
            max_order_war_size: max_msg,
            max_order_waw_size: max_msg,
            mem_tag_format: if hi.ep.mem_tag_format != 0 { hi.ep.mem_tag_format } else { TAG_GENERIC },
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            auth_key_size: 0,
        },
        // Connections, rendezvous and credits advance inside the
        // application's calls (CQ/counter reads, fi_trywait, data calls).
        // FI_PROGRESS_AUTO asked for either: the endpoint runs a progress
        // thread (rdm::auto), which makes both automatic.
        domain: domain_attr(req, dc, hi, rdm_have, rdm_have, mr_mode)?,
        fabric: fabric_attr(req, dc),
    })
}

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
mod tests {
    use super::*;

    fn req(version: u32, hints: Option<Info>) -> Request {
        Request { version, hints, ..Default::default() }
    }

    #[test]
    fn mr_mode_new_api() {
        let mut h = Info::default();
        h.domain.mr_mode = MR_MODE;
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, false), Ok((MR_MODE, 0)));
        // An app that can't do local MRs gets nothing.
        h.domain.mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG, false), Err(FiError::NODATA));
        // MSG-only apps need just FI_MR_LOCAL.
        h.domain.mr_mode = FI_MR_LOCAL;
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG, false), Ok((FI_MR_LOCAL, 0)));
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, false), Err(FiError::NODATA));
        h.domain.mr_mode = FI_MR_SCALABLE;
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG, false), Err(FiError::NODATA));
    }

    #[test]
    fn mr_mode_rdm_without_local() {
        let mut h = Info::default();
        let remote = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
        // RDM serves hints without FI_MR_LOCAL, and answers without it.
        h.domain.mr_mode = remote;
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, true), Ok((remote, 0)));
        assert_eq!(match_mr_mode(FI_VERSION(2, 0), Some(&h), FI_TAGGED, true), Ok((0, 0)));
        // RMA keys still need the remote bits.
        h.domain.mr_mode = FI_MR_VIRT_ADDR;
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, true), Err(FiError::NODATA));
        // With FI_MR_LOCAL in the hints the answer keeps it (descriptors as before).
        h.domain.mr_mode = MR_MODE;
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), Some(&h), FI_MSG | FI_RMA, true), Ok((MR_MODE, 0)));
        // No hints: unchanged.
        assert_eq!(match_mr_mode(FI_VERSION(1, 17), None, FI_MSG | FI_RMA, true), Ok((MR_MODE, 0)));
    }

    #[test]
    fn mr_mode_old_api_needs_local_mr_mode_bit() {
        let mut h = Info::default();
        h.mode = FI_CONTEXT | FI_LOCAL_MR;
        assert_eq!(match_mr_mode(FI_VERSION(1, 4), Some(&h), FI_MSG, false), Ok((FI_MR_BASIC, FI_LOCAL_MR)));
        h.mode = FI_CONTEXT;
        assert_eq!(match_mr_mode(FI_VERSION(1, 4), Some(&h), FI_MSG, false), Err(FiError::NODATA));
        assert_eq!(match_mr_mode(FI_VERSION(1, 4), None, FI_MSG, false), Ok((FI_MR_BASIC, FI_LOCAL_MR)));
    }

    #[test]
    fn ports_parse() {
        assert_eq!(parse_port(Some("47592")), Ok(Some(47592)));
        assert_eq!(parse_port(None), Ok(None));
        assert_eq!(parse_port(Some("http")), Err(FiError::NODATA));
        assert_eq!(parse_port(Some("70000")), Err(FiError::NODATA));
    }

    #[test]
    fn numeric_host_flag_refuses_names() {
        assert!(resolve_node("10.1.2.3", 7, true).is_ok());
        assert_eq!(resolve_node("localhost", 7, true), Err(FiError::NODATA));
        assert_eq!(resolve_node("::1", 7, true).unwrap(), "[::1]:7".parse().unwrap());
    }

    #[test]
    fn unknown_api_version_is_enosys() {
        assert_eq!(getinfo(&req(FI_VERSION(3, 0), None)).unwrap_err(), FiError::NOSYS);
        assert_eq!(getinfo(&req(API_VERSION_MAX + 1, None)).unwrap_err(), FiError::NOSYS);
        assert_eq!(getinfo(&req(FI_VERSION(0, 9), None)).unwrap_err(), FiError::NOSYS);
    }

    #[test]
    fn directed_receives_by_2x_caps() {
        assert!(directed_recv(FI_DIRECTED_RECV, false) && directed_recv(FI_DIRECTED_RECV, true));
        assert!(directed_recv(FI_TAGGED_DIRECTED_RECV, true) && !directed_recv(FI_TAGGED_DIRECTED_RECV, false));
        assert!(directed_recv(FI_EXACT_DIRECTED_RECV, true) && directed_recv(FI_EXACT_DIRECTED_RECV, false));
        let tagged_exact = FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV;
        assert!(directed_recv(tagged_exact, true) && !directed_recv(tagged_exact, false));
        assert!(!directed_recv(FI_TAGGED | FI_MSG, true));
    }

    #[test]
    fn caps_of_2x_only_for_2x_applications() {
        // Bits 45/48 mean FI_HMEM_HOST_ALLOC / FI_VARIABLE_MSG in 1.x: no caps there.
        assert_eq!(rdm_caps_for(FI_VERSION(1, 22)) & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV), 0);
        let v2 = rdm_caps_for(FI_VERSION(2, 0));
        assert_eq!(v2 & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV), FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV);
        assert_eq!(v2 & FI_TAGGED_MULTI_RECV, 0);
    }

    #[test]
    fn newer_domain_hints() {
        let mut d = DomainAttr::default();
        assert!(check_newer_domain_hints(&d).is_ok());
        d.max_cntr_value = u64::MAX;
        d.max_err_cntr_value = 1 << 40;
        assert!(check_newer_domain_hints(&d).is_ok());
        d.max_group_id = 1;
        assert_eq!(check_newer_domain_hints(&d).unwrap_err(), FiError::NODATA);
        d.max_group_id = 0;
        d.max_ep_auth_key = 1;
        assert_eq!(check_newer_domain_hints(&d).unwrap_err(), FiError::NODATA);
    }

    #[test]
    fn control_unified_progress_is_2x_control_only() {
        assert_eq!(progress(FI_VERSION(2, 0), FI_PROGRESS_CONTROL_UNIFIED, FI_PROGRESS_MANUAL, "control").unwrap(), FI_PROGRESS_CONTROL_UNIFIED);
        assert_eq!(progress(FI_VERSION(2, 0), FI_PROGRESS_CONTROL_UNIFIED, FI_PROGRESS_AUTO, "data").unwrap_err(), FiError::NODATA);
        assert_eq!(progress(FI_VERSION(1, 17), FI_PROGRESS_CONTROL_UNIFIED, FI_PROGRESS_MANUAL, "control").unwrap_err(), FiError::NODATA);
    }

    #[test]
    fn other_provider_name_is_enodata() {
        let mut h = Info::default();
        h.fabric.prov_name = Some("tcp".into());
        assert_eq!(getinfo(&req(API_VERSION, Some(h))).unwrap_err(), FiError::NODATA);
    }
}
