//! Fabric objects, and the reference counting every parent object uses to
//! refuse `fi_close` (with `-FI_EBUSY`) while children still use it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{FiError, FiResult};

/// Counts the children (or bindings) that keep an object from being closed.
#[derive(Debug, Default)]
pub struct Refs(AtomicUsize);

impl Refs {
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    pub fn dec(&self) {
        let prev = self.0.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(prev > 0, "reference count underflow");
    }
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
    /// `Err(FI_EBUSY)` (logged) while anything still depends on the object.
    pub fn check_idle(&self, what: &str) -> FiResult<()> {
        let n = self.count();
        if n > 0 {
            return crate::fail!(FiError::BUSY, "fi_close({what}): still in use by {n} object(s)");
        }
        Ok(())
    }
}

/// A child's hold on its parent: released exactly once, when dropped.
#[derive(Debug)]
pub struct Hold<T: HasRefs>(Arc<T>);

pub trait HasRefs {
    fn refs(&self) -> &Refs;
}

impl<T: HasRefs> Hold<T> {
    pub fn new(parent: &Arc<T>) -> Self {
        parent.refs().inc();
        Hold(parent.clone())
    }
    pub fn get(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T: HasRefs> Drop for Hold<T> {
    fn drop(&mut self) {
        self.0.refs().dec();
    }
}

impl<T: HasRefs> std::ops::Deref for Hold<T> {
    type Target = Arc<T>;
    fn deref(&self) -> &Arc<T> {
        &self.0
    }
}

/// A fabric: the set of devices whose GID subnet carries this name.
#[derive(Debug)]
pub struct Fabric {
    pub name: String,
    pub api_version: u32,
    pub refs: Refs,
}

impl HasRefs for Fabric {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

impl Fabric {
    /// Opens a fabric by name (as getinfo reported it).
    pub fn open(name: &str, api_version: u32) -> FiResult<Arc<Fabric>> {
        if !name.starts_with("IB-0x") {
            return crate::fail!(FiError::NODATA, "fi_fabric: '{name}' is not a verbs fabric name");
        }
        Ok(Arc::new(Fabric { name: name.to_string(), api_version, refs: Refs::default() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_keeps_parent_busy_until_dropped() {
        let f = Fabric::open("IB-0xfe80000000000000", 0).unwrap();
        assert!(f.refs.check_idle("fabric").is_ok());
        let h = Hold::new(&f);
        assert_eq!(f.refs.check_idle("fabric"), Err(FiError::BUSY));
        drop(h);
        assert!(f.refs.check_idle("fabric").is_ok());
    }

    #[test]
    fn fabric_name_is_checked() {
        assert_eq!(Fabric::open("tcp", 0).unwrap_err(), FiError::NODATA);
    }
}
