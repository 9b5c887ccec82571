//! Address vectors of DGRAM domains: each entry is a peer's
//! `ofi_ib_ud_ep_name` and the address handle `fi_av_insert` made for it.
//!
//! `fi_addr_t` is the entry's index in insertion order for both
//! `FI_AV_TABLE` and `FI_AV_MAP` (as `crate::av`); indices are not reused.
//! A removed entry's address handle is kept until the AV closes: a send
//! still queued on the device may name it.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::UdName;
use crate::av::AvAttr;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::{HasRefs, Hold, Refs};
use crate::fi::consts::*;
use crate::verbs::ud::{Ah, AhAttr};

/// One peer: its address and the handle sends to it use.
#[derive(Debug, Clone)]
pub struct Peer {
    pub name: UdName,
    pub ah: Arc<Ah>,
}

#[derive(Debug, Default)]
struct Table {
    entries: Vec<Option<Peer>>,
    rev: HashMap<(u128, u16, u32), u64>,
}

pub struct DgramAv {
    pub domain: Hold<Domain>,
    pub av_type: u32,
    /// The GID table index of this domain's own GID (the source of every
    /// global address handle).
    sgid_index: u8,
    table: RwLock<Table>,
    retired: Mutex<Vec<Arc<Ah>>>,
    pub refs: Refs,
}

impl std::fmt::Debug for DgramAv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DgramAv").field("type", &self.av_type).finish()
    }
}

impl HasRefs for DgramAv {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

/// The GID the endpoints of `domain` use (their info's source address, else
/// the device's first RDMA address's).
pub fn domain_gid(domain: &Domain) -> [u8; 16] {
    match domain.info.src_ud {
        Some(n) if n.gid != [0; 16] => n.gid,
        _ => super::info::local_gid(&domain.dev, super::info::first_ip(&domain.dev)),
    }
}

impl DgramAv {
    pub fn open(domain: &Arc<Domain>, attr: &AvAttr) -> FiResult<Arc<DgramAv>> {
        let av_type = attr.check(FI_AV_MAP)?;
        let gid = domain_gid(domain);
        let sgid_index = super::info::sgid_index(&domain.dev, &gid).unwrap_or(crate::config::get().gid_idx.clamp(0, 255) as u8);
        Ok(Arc::new(DgramAv {
            domain: Hold::new(domain),
            av_type,
            sgid_index,
            table: RwLock::new(Table::default()),
            retired: Mutex::new(Vec::new()),
            refs: Refs::default(),
        }))
    }

    fn make_ah(&self, n: &UdName) -> FiResult<Arc<Ah>> {
        if !n.is_global() && n.lid == 0 {
            return crate::fail!(FiError(FI_EADDRNOTAVAIL), "fi_av_insert: {} has neither a GID nor a LID", super::straddr(n));
        }
        let attr = AhAttr {
            dgid: n.is_global().then_some(n.gid),
            sgid_index: self.sgid_index,
            dlid: n.lid,
            sl: n.sl,
            port: 1,
        };
        match self.domain.get().pd.create_ah(&attr) {
            Ok(ah) => Ok(Arc::new(ah)),
            Err(e) => crate::fail!(FiError::from_errno(e), "fi_av_insert: ibv_create_ah for {} failed: errno {e}", super::straddr(n)),
        }
    }

    /// Inserts parsed addresses (None: too short). Per entry its fi_addr or the error.
    pub fn insert(&self, names: &[Option<UdName>]) -> Vec<FiResult<u64>> {
        names
            .iter()
            .map(|n| {
                let n = n.ok_or(FiError::INVAL)?;
                let ah = self.make_ah(&n)?;
                let mut t = self.table.write();
                let i = t.entries.len() as u64;
                t.entries.push(Some(Peer { name: n, ah }));
                t.rev.entry(n.key()).or_insert(i);
                Ok(i)
            })
            .collect()
    }

    /// `fi_av_remove`: all must be live; none is removed otherwise.
    pub fn remove(&self, fi_addrs: &[u64]) -> FiResult<()> {
        let mut t = self.table.write();
        for &i in fi_addrs {
            if t.entries.get(i as usize).map_or(true, |e| e.is_none()) {
                return crate::fail!(FiError::INVAL, "fi_av_remove: fi_addr {i:#x} is not in the address vector");
            }
        }
        let mut retired = self.retired.lock();
        for &i in fi_addrs {
            if let Some(p) = t.entries[i as usize].take() {
                let k = p.name.key();
                if t.rev.get(&k) == Some(&i) {
                    t.rev.remove(&k);
                    if let Some(j) = t.entries.iter().position(|e| e.as_ref().map_or(false, |e| e.name.key() == k)) {
                        t.rev.insert(k, j as u64);
                    }
                }
                retired.push(p.ah);
            }
        }
        Ok(())
    }

    /// The peer at `fi_addr`.
    pub fn peer(&self, fi_addr: u64) -> Option<Peer> {
        let t = self.table.read();
        usize::try_from(fi_addr).ok().and_then(|i| t.entries.get(i).cloned().flatten())
    }

    pub fn lookup(&self, fi_addr: u64) -> Option<UdName> {
        self.peer(fi_addr).map(|p| p.name)
    }

    /// The fi_addr of the peer with this identity (`FI_ADDR_NOTAVAIL` if none).
    pub fn reverse(&self, key: (u128, u16, u32)) -> u64 {
        self.table.read().rev.get(&key).copied().unwrap_or(FI_ADDR_NOTAVAIL)
    }

    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("av")
    }
}
