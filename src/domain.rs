//! Domains: one RDMA device and a protection domain on it.

use std::sync::Arc;

use crate::error::{FiError, FiResult};
use crate::fabric::{Fabric, HasRefs, Hold, Refs};
use crate::info::Info;
use crate::verbs::{self, Context, Pd};

#[derive(Debug)]
pub struct Domain {
    pub fabric: Hold<Fabric>,
    pub dev: Arc<Context>,
    pub pd: Arc<Pd>,
    pub attr: verbs::DeviceAttr,
    /// The info the domain was opened with (defaults for its endpoints).
    pub info: Info,
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
        Ok(Arc::new(Domain { fabric: Hold::new(fabric), dev, pd, attr, info: info.clone(), refs: Refs::default() }))
    }
}
