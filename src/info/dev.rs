//! Device discovery for `fi_getinfo`: services and node names, the addresses
//! rdma-cm maps to RDMA devices, and what each device offers.

use super::*;

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
