//! Address vectors for RDM endpoints.
//!
//! An address is the peer RDM endpoint's listening address: the
//! `sockaddr_in`/`sockaddr_in6` its `fi_getname` returns. For both
//! `FI_AV_TABLE` and `FI_AV_MAP` the `fi_addr_t` is the index of the entry in
//! insertion order (0, 1, 2, ...); indices are never reused after
//! `fi_av_remove`, so a stale `fi_addr_t` names nothing rather than another
//! peer. Inserting an address twice gives two entries (an application may
//! rely on `FI_AV_TABLE` indices matching its own numbering); the reverse
//! lookup (`FI_SOURCE`) reports the lowest live index of an address.

use rustc_hash::FxHashMap as HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::fi::consts::*;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::{HasRefs, Hold, Refs};

#[derive(Debug, Default)]
struct Table {
    entries: Vec<Option<SocketAddr>>,
    /// Address → its lowest live index.
    rev: HashMap<SocketAddr, u64>,
}

impl Table {
    fn insert(&mut self, a: SocketAddr) -> u64 {
        let i = self.entries.len() as u64;
        self.entries.push(Some(a));
        self.rev.entry(a).or_insert(i);
        i
    }

    fn remove(&mut self, i: u64) -> bool {
        let Some(slot) = usize::try_from(i).ok().and_then(|i| self.entries.get_mut(i)) else {
            return false;
        };
        let Some(a) = slot.take() else { return false };
        if self.rev.get(&a) == Some(&i) {
            self.rev.remove(&a);
            if let Some(j) = self.entries.iter().position(|e| *e == Some(a)) {
                self.rev.insert(a, j as u64);
            }
        }
        true
    }
}

/// Checks that an address can name a peer endpoint (a concrete IP and port).
pub fn check_peer_addr(a: &SocketAddr) -> FiResult<()> {
    if a.ip().is_unspecified() || a.port() == 0 {
        return crate::fail!(FiError::INVAL, "av: {a} is not an endpoint address (needs a concrete IP and port)");
    }
    Ok(())
}

/// The libfabric string form of an address (`fi_av_straddr`).
pub fn straddr(a: &SocketAddr) -> String {
    match a {
        SocketAddr::V4(v) => format!("fi_sockaddr_in://{}:{}", v.ip(), v.port()),
        SocketAddr::V6(v) => format!("fi_sockaddr_in6://[{}]:{}", v.ip(), v.port()),
    }
}

pub struct Av {
    pub domain: Hold<Domain>,
    pub av_type: u32,
    table: RwLock<Table>,
    /// Bumped (under the table's write lock) by every insert and remove:
    /// `reverse_cached` answers from a cache while it stands still.
    generation: AtomicU64,
    pub refs: Refs,
}

impl std::fmt::Debug for Av {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Av").field("type", &self.av_type).field("entries", &self.table.read().entries.len()).finish()
    }
}

impl HasRefs for Av {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

/// The `fi_av_attr` fields the core looks at.
#[derive(Debug, Clone, Default)]
pub struct AvAttr {
    pub av_type: u32,
    pub rx_ctx_bits: i32,
    pub count: usize,
    pub named: bool,
    pub flags: u64,
}

/// `fi_ep_bind(ep, av, flags)` for the connectionless endpoints (RDM, DGRAM):
/// flags 0, the endpoint not enabled yet (`enabled`: enabled or closed), the
/// AV in the endpoint's domain, one AV per endpoint. Records it in `slot`.
pub fn bind_av<A: HasRefs>(slot: &mut Option<Hold<A>>, enabled: bool, ep_domain: &Arc<Domain>, av: &Arc<A>, av_domain: &Arc<Domain>, flags: u64) -> FiResult<()> {
    if flags != 0 {
        return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: AV bind flags must be 0");
    }
    if enabled {
        return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
    }
    if !Arc::ptr_eq(av_domain, ep_domain) {
        return crate::fail!(FiError::DOMAIN, "fi_ep_bind: AV belongs to another domain");
    }
    if slot.is_some() {
        return crate::fail!(FiError::INVAL, "fi_ep_bind: an AV is already bound");
    }
    *slot = Some(Hold::new(av));
    Ok(())
}

impl AvAttr {
    /// The checks of `fi_av_open` every address vector kind makes: a known
    /// type (`unspec`: the kind's default for `FI_AV_UNSPEC`), no scalable
    /// endpoints, no named (shared) AV, no asynchronous inserts, no unknown
    /// flags. Returns the AV type.
    pub fn check(&self, unspec: u32) -> FiResult<u32> {
        let av_type = match self.av_type {
            FI_AV_UNSPEC => unspec,
            FI_AV_TABLE | FI_AV_MAP => self.av_type,
            t => return crate::fail!(FiError::INVAL, "fi_av_open: unknown AV type {t}"),
        };
        if self.rx_ctx_bits != 0 {
            return crate::fail!(FiError::NOSYS, "fi_av_open: scalable endpoints (rx_ctx_bits {}) are not supported", self.rx_ctx_bits);
        }
        if self.named || self.flags & FI_READ != 0 {
            return crate::fail!(FiError::NOSYS, "fi_av_open: named (shared) address vectors are not supported");
        }
        if self.flags & FI_EVENT != 0 {
            return crate::fail!(FiError::NOSYS, "fi_av_open: asynchronous inserts (FI_EVENT) are not supported");
        }
        if self.flags & !(FI_SYMMETRIC | FI_EVENT | FI_READ) != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_av_open: unsupported flags {:#x}", self.flags);
        }
        Ok(av_type)
    }
}

impl Av {
    /// `fi_av_open`.
    pub fn open(domain: &Arc<Domain>, attr: &AvAttr) -> FiResult<Arc<Av>> {
        let av_type = attr.check(FI_AV_TABLE)?;
        let mut t = Table::default();
        t.entries.reserve(attr.count.min(1 << 16));
        Ok(Arc::new(Av { domain: Hold::new(domain), av_type, table: RwLock::new(t), generation: AtomicU64::new(1), refs: Refs::default() }))
    }

    /// Inserts parsed addresses (None: an entry that did not parse). Returns,
    /// per entry, its fi_addr or the error; the caller reports them.
    pub fn insert(&self, addrs: &[Option<SocketAddr>]) -> Vec<FiResult<u64>> {
        let mut t = self.table.write();
        let r = addrs
            .iter()
            .map(|a| match a {
                None => Err(FiError::INVAL),
                Some(a) => check_peer_addr(a).map(|_| t.insert(*a)),
            })
            .collect::<Vec<_>>();
        self.generation.fetch_add(1, Ordering::AcqRel);
        r
    }

    /// `fi_av_remove`: all indices must be live; none is removed otherwise.
    pub fn remove(&self, fi_addrs: &[u64]) -> FiResult<()> {
        let mut t = self.table.write();
        for &i in fi_addrs {
            if t.entries.get(i as usize).map_or(true, |e| e.is_none()) {
                return crate::fail!(FiError::INVAL, "fi_av_remove: fi_addr {i:#x} is not in the address vector");
            }
        }
        for &i in fi_addrs {
            t.remove(i);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Bumped by every change of the table (insert, remove), inside the
    /// change: a value read before a lookup is stale once the table changed.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The address of `fi_addr`.
    pub fn lookup(&self, fi_addr: u64) -> Option<SocketAddr> {
        let t = self.table.read();
        usize::try_from(fi_addr).ok().and_then(|i| t.entries.get(i).copied().flatten())
    }

    /// The fi_addr of `addr` (`FI_ADDR_NOTAVAIL` when it is not in the AV).
    pub fn reverse(&self, addr: &SocketAddr) -> u64 {
        self.table.read().rev.get(addr).copied().unwrap_or(FI_ADDR_NOTAVAIL)
    }

    /// `reverse`, answered from `cache` (generation, fi_addr) while the AV
    /// has not changed since it was filled; a fresh cache is `(0, _)`.
    pub fn reverse_cached(&self, addr: &SocketAddr, cache: &mut (u64, u64)) -> u64 {
        let g = self.generation.load(Ordering::Acquire);
        if cache.0 == g {
            return cache.1;
        }
        // Read after `g`: a change racing with this read bumps the generation
        // past `g`, so the next call looks again.
        let v = self.reverse(addr);
        *cache = (g, v);
        v
    }

    /// Entries ever inserted (the next index).
    pub fn len(&self) -> usize {
        self.table.read().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("av")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn table_indices_reverse_lookup_and_removal() {
        let mut t = Table::default();
        assert_eq!(t.insert(a("10.0.0.1:1000")), 0);
        assert_eq!(t.insert(a("10.0.0.2:1000")), 1);
        assert_eq!(t.insert(a("10.0.0.1:1000")), 2, "duplicates get their own index");
        assert_eq!(t.rev.get(&a("10.0.0.1:1000")), Some(&0));
        assert!(t.remove(0));
        assert!(!t.remove(0), "already removed");
        assert!(!t.remove(99));
        assert_eq!(t.rev.get(&a("10.0.0.1:1000")), Some(&2), "reverse lookup falls back to the duplicate");
        assert!(t.remove(2));
        assert_eq!(t.rev.get(&a("10.0.0.1:1000")), None);
        assert_eq!(t.insert(a("10.0.0.3:7")), 3, "indices are never reused");
    }

    #[test]
    fn peer_addresses_must_be_concrete() {
        assert!(check_peer_addr(&a("10.0.0.1:1000")).is_ok());
        assert_eq!(check_peer_addr(&a("0.0.0.0:1000")), Err(FiError::INVAL));
        assert_eq!(check_peer_addr(&a("10.0.0.1:0")), Err(FiError::INVAL));
    }

    #[test]
    fn string_form() {
        assert_eq!(straddr(&a("10.99.0.1:47592")), "fi_sockaddr_in://10.99.0.1:47592");
        assert_eq!(straddr(&a("[fd00::1]:80")), "fi_sockaddr_in6://[fd00::1]:80");
    }
}
