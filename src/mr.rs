//! Memory regions.
//!
//! Descriptors (`fi_mr_desc`) are not pointers: they carry the local key with
//! a tag, so a bogus descriptor is refused (`-FI_EINVAL`) rather than
//! dereferenced, and a stale one fails in the device's key check (an error
//! completion), never in a crash.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use crate::fi::consts::*;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::Hold;
use crate::mrcache::Pin;
use crate::verbs::access;

const DESC_TAG: u64 = 0x7273_7662 << 32; // "rsvb"

/// The descriptor value for a local key.
pub fn desc_of(lkey: u32) -> u64 {
    DESC_TAG | lkey as u64
}

/// The local key in a descriptor, if it is one of ours.
pub fn lkey_of(desc: u64) -> Option<u32> {
    if desc & 0xffff_ffff_0000_0000 == DESC_TAG {
        Some(desc as u32)
    } else {
        None
    }
}

/// What RDM endpoints need to know about a registration named by a
/// descriptor: the rendezvous protocol hands the peer the remote key and
/// checks the buffer lies inside the registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrKeys {
    pub lkey: u32,
    pub rkey: u32,
    pub addr: u64,
    pub len: usize,
    /// Registered for remote read (a rendezvous send can hand out `rkey`).
    pub remote_read: bool,
}

impl MrKeys {
    /// Whether `[addr, addr+len)` lies inside the registration.
    pub fn covers(&self, addr: u64, len: usize) -> bool {
        addr >= self.addr && addr.checked_add(len as u64).is_some_and(|end| end <= self.addr + self.len as u64)
    }
}

/// Live registrations by (domain, lkey), so that a descriptor (which carries
/// the lkey) also gives the rkey. Keyed by domain: a descriptor from another
/// domain finds nothing. Regions served by one cached registration share its
/// lkey: the entry counts them and leaves when the last one is closed.
static KEYS: once_cell::sync::Lazy<parking_lot::RwLock<HashMap<(usize, u32), (MrKeys, u32)>>> =
    once_cell::sync::Lazy::new(|| parking_lot::RwLock::new(HashMap::default()));

fn domain_key(domain: &Arc<Domain>) -> usize {
    Arc::as_ptr(domain) as usize
}

/// The registration a descriptor of `domain` names, if it is a live one of ours.
pub fn keys_of(domain: &Arc<Domain>, desc: u64) -> Option<MrKeys> {
    let lkey = lkey_of(desc)?;
    KEYS.read().get(&(domain_key(domain), lkey)).map(|e| e.0)
}

/// A registered region. Its registration is the domain's registration
/// cache's (`crate::mrcache`, as libfabric's verbs provider caches
/// `fi_mr_reg`) or its own (`OFI_MR_NOCACHE`, or no cache). Either covers
/// exactly the region's bytes with exactly its access (a cached one is
/// reused only for the same bytes and access); a cached one stays
/// registered after `fi_close` until the cache drops it (evicted, or its
/// memory unmapped); `FI_MR_CACHE_MAX_COUNT=0` makes every region its own.
#[derive(Debug)]
pub struct MemRegion {
    pub domain: Hold<Domain>,
    pin: Pin,
    addr: u64,
    len: usize,
    pub access: u64,
}

impl Drop for MemRegion {
    fn drop(&mut self) {
        let k = (domain_key(&self.domain), self.pin.lkey);
        let mut keys = KEYS.write();
        if let Some(e) = keys.get_mut(&k) {
            e.1 -= 1;
            if e.1 == 0 {
                keys.remove(&k);
            }
        }
    }
}

/// The verbs access flags for libfabric MR access bits.
pub fn verbs_access(acc: u64) -> i32 {
    // Local write is always needed: receives and RDMA read targets write locally,
    // and verbs demands it whenever remote write or atomics are enabled.
    let mut a = access::LOCAL_WRITE;
    if acc & FI_REMOTE_READ != 0 {
        a |= access::REMOTE_READ;
    }
    if acc & FI_REMOTE_WRITE != 0 {
        a |= access::REMOTE_WRITE | access::REMOTE_ATOMIC;
    }
    a
}

/// fi_mr_reg flag of libfabric's utility providers (libfabric's internal
/// ofi_mr.h; ofi_rxm registers its buffer pools with it): "do not cache this
/// registration": the region gets a registration of its own.
const OFI_MR_NOCACHE: u64 = 1 << 60;

const ACCESS_BITS: u64 = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

impl MemRegion {
    /// Registers `[addr, addr+len)`. `access` 0 means all access.
    pub fn register(domain: &Arc<Domain>, addr: u64, len: usize, access: u64, flags: u64) -> FiResult<Arc<MemRegion>> {
        if flags & !(FI_RMA_EVENT | OFI_MR_NOCACHE) != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_mr_reg: unsupported flags {flags:#x}");
        }
        if flags & FI_RMA_EVENT != 0 {
            return crate::fail!(FiError::NOSYS, "fi_mr_reg: FI_RMA_EVENT is not supported");
        }
        if access & !ACCESS_BITS != 0 {
            return crate::fail!(FiError::INVAL, "fi_mr_reg: unknown access bits {:#x}", access & !ACCESS_BITS);
        }
        if len == 0 {
            return crate::fail!(FiError::INVAL, "fi_mr_reg: zero-length registration");
        }
        if addr == 0 {
            return crate::fail!(FiError::INVAL, "fi_mr_reg: NULL buffer");
        }
        if len as u64 > domain.attr.max_mr_size {
            return crate::fail!(FiError::INVAL, "fi_mr_reg: {len} bytes exceed the device's max_mr_size {}", domain.attr.max_mr_size);
        }
        let acc = if access == 0 { ACCESS_BITS } else { access };
        let mut vacc = verbs_access(acc);
        if domain.info.ep.type_ == FI_EP_RDM && acc & FI_SEND != 0 {
            // RDM rendezvous: the receiver RDMA-reads large messages out of the
            // sender's buffer (as libfabric's rxm does with its MRs).
            vacc |= access::REMOTE_READ;
        }
        let cache = if flags & OFI_MR_NOCACHE == 0 { Some(domain.mr_cache()).filter(|c| c.caching()) } else { None };
        let got = match cache {
            Some(c) => c.acquire_exact(addr, len, vacc),
            None => domain.pd.reg_mr(addr, len, vacc).map(|mr| Pin::own(Box::new(mr), addr, addr.saturating_add(len as u64), vacc)),
        };
        let pin = match got {
            Ok(p) => p,
            Err(e) => {
                return crate::fail!(
                    FiError::from_errno(e),
                    "fi_mr_reg: ibv_reg_mr({addr:#x}, {len}) failed: {} (check `ulimit -l`)",
                    std::io::Error::from_raw_os_error(e)
                )
            }
        };
        let keys = MrKeys {
            lkey: pin.lkey,
            rkey: pin.rkey,
            addr: pin.start,
            len: (pin.end - pin.start) as usize,
            remote_read: pin.access & access::REMOTE_READ != 0,
        };
        KEYS.write().entry((domain_key(domain), pin.lkey)).and_modify(|e| e.1 += 1).or_insert((keys, 1));
        Ok(Arc::new(MemRegion { domain: Hold::new(domain), pin, addr, len, access: acc }))
    }

    pub fn key(&self) -> u64 {
        self.pin.rkey as u64
    }
    pub fn lkey(&self) -> u32 {
        self.pin.lkey
    }
    pub fn desc(&self) -> u64 {
        desc_of(self.pin.lkey)
    }
    pub fn addr(&self) -> u64 {
        self.addr
    }
    pub fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_roundtrip_and_reject_foreign_values() {
        assert_eq!(lkey_of(desc_of(0x1234)), Some(0x1234));
        assert_eq!(lkey_of(desc_of(u32::MAX)), Some(u32::MAX));
        assert_eq!(lkey_of(0), None);
        assert_eq!(lkey_of(0x7fff_dead_beef), None);
    }

    #[test]
    fn access_mapping() {
        assert_eq!(verbs_access(FI_SEND | FI_RECV), access::LOCAL_WRITE);
        assert_ne!(verbs_access(FI_REMOTE_READ) & access::REMOTE_READ, 0);
        assert_eq!(verbs_access(FI_REMOTE_READ) & access::REMOTE_WRITE, 0);
        assert_ne!(verbs_access(FI_REMOTE_WRITE) & access::REMOTE_WRITE, 0);
    }
}
