//! Run-time knobs. rsverbs honours libfabric verbs' own environment variables
//! where they make sense, so existing deployments' settings carry over.
//! All are read once per process.

use once_cell::sync::Lazy;

/// The provider's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// `FI_RSVERBS_NAME`: the provider name to register (default `verbs`).
    pub prov_name: String,
    /// `FI_VERBS_IFACE`: only use IP addresses of interfaces whose name starts with this.
    pub iface: Option<String>,
    /// `FI_VERBS_DEVICE_NAME`: only use RDMA devices whose name starts with this.
    pub device_name: Option<String>,
    /// `FI_VERBS_TX_SIZE`: default transmit queue depth (384).
    pub tx_size: usize,
    /// `FI_VERBS_RX_SIZE`: default receive queue depth (384).
    pub rx_size: usize,
    /// `FI_VERBS_INLINE_SIZE`: largest inline/inject size to offer (default: the device's).
    pub inline_size: Option<usize>,
    /// `FI_VERBS_TX_IOV_LIMIT`: default transmit iov limit (4).
    pub tx_iov_limit: usize,
    /// `FI_VERBS_RX_IOV_LIMIT`: default receive iov limit (4).
    pub rx_iov_limit: usize,
    /// `FI_VERBS_GID_IDX`: GID index used to name the fabric (0).
    pub gid_idx: i32,
    /// `FI_VERBS_CQREAD_BUNCH_SIZE`: completions a read polls from verbs at
    /// least (1: what the caller asks for, as libfabric's verbs, which parses
    /// this variable with a default of 8 but polls one entry at a time).
    pub cqread_bunch_size: usize,
    /// `FI_VERBS_MIN_RNR_TIMER`: the RNR NAK timer every connected QP advertises
    /// (IB encoding 0..=31, default 12 = 0.64 ms, as libfabric's verbs), set once the
    /// connection is up: rdma-cm leaves 0, which is 655 ms.
    pub min_rnr_timer: u8,
    /// `FI_MR_CACHE_MAX_COUNT`: registrations the RDM registration cache keeps
    /// per domain (1024; 0: no caching). See `crate::mrcache`.
    pub mr_cache_max_count: usize,
    /// `FI_MR_CACHE_MAX_SIZE`: bytes it keeps registered per domain (1 GiB; 0: no caching).
    pub mr_cache_max_size: usize,
    /// `FI_MR_CACHE_MONITOR`: `uffd` (default) watches unmaps with
    /// userfaultfd; `disabled` turns caching off (libfabric's names).
    pub mr_cache_monitor: bool,
}

/// Default `FI_MR_CACHE_MAX_COUNT` (registrations kept per domain).
pub const MR_CACHE_MAX_COUNT: usize = 1024;
/// Default `FI_MR_CACHE_MAX_SIZE` (1 GiB registered per domain).
pub const MR_CACHE_MAX_SIZE: usize = 1 << 30;

fn env_str(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.is_empty())
}

fn env_usize(name: &str) -> Option<usize> {
    let v = env_str(name)?;
    match v.trim().parse::<usize>() {
        Ok(n) => Some(n),
        Err(_) => {
            tracing::warn!("ignoring {name}={v}: not a non-negative integer");
            None
        }
    }
}

impl Config {
    pub fn from_env() -> Config {
        Config {
            prov_name: env_str("FI_RSVERBS_NAME").unwrap_or_else(|| "verbs".to_string()),
            iface: env_str("FI_VERBS_IFACE"),
            device_name: env_str("FI_VERBS_DEVICE_NAME"),
            tx_size: env_usize("FI_VERBS_TX_SIZE").filter(|&n| n > 0).unwrap_or(384),
            rx_size: env_usize("FI_VERBS_RX_SIZE").filter(|&n| n > 0).unwrap_or(384),
            inline_size: env_usize("FI_VERBS_INLINE_SIZE"),
            tx_iov_limit: env_usize("FI_VERBS_TX_IOV_LIMIT").filter(|&n| n > 0).unwrap_or(4),
            rx_iov_limit: env_usize("FI_VERBS_RX_IOV_LIMIT").filter(|&n| n > 0).unwrap_or(4),
            gid_idx: env_usize("FI_VERBS_GID_IDX").unwrap_or(0) as i32,
            cqread_bunch_size: env_usize("FI_VERBS_CQREAD_BUNCH_SIZE").filter(|&n| n > 0).unwrap_or(1).min(256),
            min_rnr_timer: env_usize("FI_VERBS_MIN_RNR_TIMER").unwrap_or(12).min(31) as u8,
            mr_cache_max_count: env_usize("FI_MR_CACHE_MAX_COUNT").unwrap_or(MR_CACHE_MAX_COUNT),
            mr_cache_max_size: env_usize("FI_MR_CACHE_MAX_SIZE").unwrap_or(MR_CACHE_MAX_SIZE),
            mr_cache_monitor: match env_str("FI_MR_CACHE_MONITOR").as_deref() {
                None | Some("uffd") | Some("userfaultfd") => true,
                Some("disabled") => false,
                Some(v) => {
                    tracing::warn!("FI_MR_CACHE_MONITOR={v}: rsverbs has the uffd monitor only; using it");
                    true
                }
            },
        }
    }
}

static CONFIG: Lazy<Config> = Lazy::new(Config::from_env);

/// The process's settings.
pub fn get() -> &'static Config {
    &CONFIG
}
