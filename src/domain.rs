//! Domains: one RDMA device and a protection domain on it.

use std::sync::Arc;

use crate::error::{FiError, FiResult};
use crate::fabric::{Fabric, HasRefs, Hold, Refs};
use crate::info::Info;
use crate::fi::consts::*;
use crate::mrcache::{Limits, MrCache, Reg, RegFn};
use crate::verbs::{self, Context, Pd};

#[derive(Debug)]
pub struct Domain {
    pub fabric: Hold<Fabric>,
    pub dev: Arc<Context>,
    pub pd: Arc<Pd>,
    pub attr: verbs::DeviceAttr,
    /// The info the domain was opened with (defaults for its endpoints).
    pub info: Info,
    /// Operations must name their local buffers with descriptors
    /// (`FI_MR_LOCAL`, or the pre-1.5 `FI_LOCAL_MR`); without it RDM
    /// endpoints register them through `mr_cache`.
    pub mr_local: bool,
    /// The registration cache of the domain's RDM endpoints (made at first
    /// use: its monitor is a thread).
    mr_cache: once_cell::sync::OnceCell<Arc<MrCache>>,
    pub refs: Refs,
}

impl HasRefs for Domain {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

impl Domain {
    pub fn open(fabric: &Arc<Fabric>, info: &Info) -> FiResult<Arc<Domain>> {
        let Some(name) = info.domain.name.as_deref() else {
            return crate::fail!(FiError::INVAL, "fi_domain: info has no domain name");
        };
        if let Some(fname) = info.fabric.name.as_deref() {
            if fname != fabric.name {
                return crate::fail!(FiError::INVAL, "fi_domain: info is for fabric {fname}, not {}", fabric.name);
            }
        }
        let Some(dev) = verbs::devices().iter().find(|d| d.name() == name).cloned() else {
            return crate::fail!(FiError::NODEV, "fi_domain: no RDMA device named {name}");
        };
        let attr = dev.query_device().map_err(FiError::from_errno)?;
        let pd = match dev.alloc_pd() {
            Ok(pd) => pd,
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_domain: ibv_alloc_pd on {name} failed: errno {e}"),
        };
        let m = info.domain.mr_mode;
        let mr_local = m & FI_MR_LOCAL != 0 || m == FI_MR_BASIC || (info.mode | info.domain.mode) & FI_LOCAL_MR != 0;
        Ok(Arc::new(Domain {
            fabric: Hold::new(fabric),
            dev,
            pd,
            attr,
            info: info.clone(),
            mr_local,
            mr_cache: once_cell::sync::OnceCell::new(),
            refs: Refs::default(),
        }))
    }

    /// The registration cache (see `crate::mrcache`).
    pub fn mr_cache(&self) -> &Arc<MrCache> {
        self.mr_cache.get_or_init(|| {
            let pd = self.pd.clone();
            let reg: RegFn = Box::new(move |addr, len, access| pd.reg_mr(addr, len, access).map(|m| Box::new(m) as Box<dyn Reg>));
            Arc::new(MrCache::new(reg, Limits::from_config()))
        })
    }

    /// The cache's counters, if it was made.
    pub fn mr_cache_stats(&self) -> Option<crate::mrcache::Stats> {
        self.mr_cache.get().map(|c| c.stats())
    }
}
