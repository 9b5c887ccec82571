//! A domain's registration cache. Two users: the application's
//! `fi_mr_reg` (`crate::mr`, as libfabric's verbs provider caches it), and
//! RDM endpoints whose domain was opened without `FI_MR_LOCAL`, where the
//! application hands buffers without descriptors and rsverbs registers them
//! itself where the device needs a key (rendezvous sends and receives, RMA
//! local buffers, atomic results). Registering is expensive (pins pages, a
//! kernel call, on rxe a page-table walk), so registrations are kept and
//! reused, as libfabric's `ofi_mr_cache` does.
//!
//! * Entries are ranges `[start, end)` with the verbs access flags they
//!   were registered with: whole pages for the endpoints' own requests
//!   (`acquire`), a hit when one entry covers the range with at least its
//!   access; exactly the region's bytes for `fi_mr_reg` (`acquire_exact`),
//!   a hit only for the same bytes and the same access. The monitor watches
//!   whole pages either way.
//! * Bounded in entries and bytes (`FI_MR_CACHE_MAX_COUNT`,
//!   `FI_MR_CACHE_MAX_SIZE`); beyond them the least recently used entry not
//!   in use goes. An entry is in use while an operation holds a [`Pin`] of it.
//! * Lookups and invalidations go through an index by start address
//!   (`State::by_start`): they visit the entries that start within the
//!   longest cached entry's length below the range, not every entry, so a hit costs
//!   about the same with 16 entries or 4,000 (`examples/mrcache_lookup.rs`).
//!   Choosing what to evict scans the entries, but only on a miss that finds
//!   the cache full, which registers memory anyway.
//! * Correctness when the application unmaps memory: a userfaultfd memory
//!   monitor (a thread per cache, `crate::sys::uffd`) sees munmap, mremap,
//!   brk shrinking and madvise(DONTNEED/FREE/REMOVE) of the ranges
//!   registered with it, and invalidates every overlapping entry before the
//!   application's call returns (the kernel blocks that call until the event
//!   is read; the event is read and handled under `Shared::events`, which
//!   every lookup takes first). An entry in use is only marked stale (no
//!   longer found) and deregistered when its last operation ends. Memory
//!   that stays mapped keeps its physical pages (a registration pins them),
//!   so `free` + `malloc` of a small block in the heap that reuses the same
//!   addresses still finds the right pages; a large block is its own
//!   mapping, whose `free` is a munmap the monitor sees.
//! * Without userfaultfd (EPERM, ENOSYS, `FI_MR_CACHE_MONITOR=disabled`,
//!   `FI_MR_CACHE_MAX_COUNT=0`) nothing is cached: each operation registers
//!   and deregisters when it ends (correct, slower; logged once).
//!
//! Nothing is freed or deregistered while the state lock is held: a `free`
//! that unmaps a watched range blocks until the monitor reads the event,
//! and the monitor then wants the lock.

use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::sys::uffd::{self, Event, Uffd};
use crate::sys::{Epoll, EventFd};

/// A registration the cache holds: its keys (dropping it deregisters).
pub trait Reg: Send + Sync + std::fmt::Debug {
    fn lkey(&self) -> u32;
    fn rkey(&self) -> u32;
}

impl Reg for crate::verbs::Mr {
    fn lkey(&self) -> u32 {
        self.lkey
    }
    fn rkey(&self) -> u32 {
        self.rkey
    }
}

/// Registers `(addr, len, verbs access)`: the device's `ibv_reg_mr`, or a fake in tests.
pub type RegFn = Box<dyn Fn(u64, usize, i32) -> Result<Box<dyn Reg>, i32> + Send + Sync>;

/// The cache's bounds and whether it caches at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_count: usize,
    pub max_size: usize,
    /// `FI_MR_CACHE_MONITOR` is not `disabled`: try userfaultfd.
    pub monitor: bool,
}

impl Limits {
    /// From `FI_MR_CACHE_MAX_COUNT`, `FI_MR_CACHE_MAX_SIZE`, `FI_MR_CACHE_MONITOR`.
    pub fn from_config() -> Limits {
        let c = crate::config::get();
        Limits { max_count: c.mr_cache_max_count, max_size: c.mr_cache_max_size, monitor: c.mr_cache_monitor }
    }
}

/// What the cache did (logged at close; `fi_control` of the domain reads it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests served by a cached registration.
    pub hits: u64,
    /// Requests that registered (cached afterwards or not).
    pub misses: u64,
    /// Entries dropped to stay within the bounds.
    pub evictions: u64,
    /// Entries dropped because their memory was unmapped or remapped.
    pub invalidations: u64,
    /// Registrations made for one operation only (no monitor, too large,
    /// every entry in use, or the memory changed while registering).
    pub uncached: u64,
    /// Entries and bytes cached now.
    pub entries: u64,
    pub bytes: u64,
}

#[derive(Debug)]
struct Entry {
    start: u64,
    end: u64,
    access: i32,
    reg: Box<dyn Reg>,
    uses: u32,
    /// Its memory changed while in use: not found any more, deregistered
    /// when the last use ends.
    stale: bool,
    last: u64,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<u64, Entry>,
    /// The entries that lookups and invalidations can find (not stale), by
    /// `(start, id)`: a lookup or an unmap visits only the entries whose
    /// start lies within `max_len` below its range, not every entry.
    by_start: BTreeSet<(u64, u64)>,
    /// Entries in `by_start` by length (how many of each): the longest
    /// is how far below a range an overlapping entry can start. Changed on
    /// inserts and removals only, never on a hit.
    lens: BTreeMap<u64, u32>,
    next_id: u64,
    tick: u64,
    bytes: usize,
    /// Bumped by every invalidation: a registration made meanwhile is not cached.
    gen: u64,
    /// Registrations to drop outside the lock (see the module comment).
    graves: Vec<Box<dyn Reg>>,
}

impl State {
    /// The longest entry lookups can find (0: none).
    fn max_len(&self) -> u64 {
        self.lens.last_key_value().map_or(0, |(&l, _)| l)
    }

    /// Ids of the entries lookups can find whose start lies in
    /// `[lo, hi]`, nearest to `hi` first.
    fn starting_in(&self, lo: u64, hi: u64) -> impl Iterator<Item = u64> + '_ {
        // Nothing when lo > hi (BTreeSet::range panics on such a range).
        let r = if lo > hi { None } else { Some(self.by_start.range((lo, 0)..=(hi, u64::MAX))) };
        r.into_iter().flatten().rev().map(|&(_, id)| id)
    }

    /// Makes entry `id` (new, in use) findable.
    fn add(&mut self, id: u64, e: Entry) {
        let len = e.end - e.start;
        self.by_start.insert((e.start, id));
        *self.lens.entry(len).or_insert(0) += 1;
        self.bytes += len as usize;
        self.entries.insert(id, e);
    }

    /// No longer found (its memory changed while in use); deregistered when
    /// its last use ends.
    fn make_stale(&mut self, id: u64) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.stale = true;
            let (start, len) = (e.start, e.end - e.start);
            self.unindex(start, len, id);
        }
    }

    fn unindex(&mut self, start: u64, len: u64, id: u64) {
        if self.by_start.remove(&(start, id)) {
            if let Some(n) = self.lens.get_mut(&len) {
                *n -= 1;
                if *n == 0 {
                    self.lens.remove(&len);
                }
            }
        }
    }

    /// Takes entry `id` out of the cache (the caller deregisters it, outside the lock).
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        if !e.stale {
            self.unindex(e.start, e.end - e.start, id);
        }
        self.bytes -= (e.end - e.start) as usize;
        Some(e)
    }
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    invalidations: AtomicU64,
    uncached: AtomicU64,
}

struct Shared {
    state: Mutex<State>,
    /// Held by the monitor while it reads and handles events; every lookup
    /// takes it (and lets go) first, so it sees the invalidations of every
    /// unmap that returned before it.
    events: Mutex<()>,
    reg: RegFn,
    limits: Limits,
    /// The monitor's fd, opened (and its thread started) at the first
    /// lookup; None: no caching.
    watch: once_cell::sync::OnceCell<Option<Arc<Uffd>>>,
    page: u64,
    n: Counters,
}

impl Shared {
    fn invalidate(&self, start: u64, end: u64) {
        let mut graves = Vec::new();
        {
            let mut st = self.state.lock();
            st.gen += 1;
            if end <= start {
                return;
            }
            // Overlapping entries start below `end`, and at most `max_len`
            // below `start`.
            let lo = start.saturating_sub(st.max_len());
            let hit: Vec<u64> = st.starting_in(lo, end - 1).filter(|id| st.entries.get(id).is_some_and(|e| start < e.end)).collect();
            for id in hit {
                self.n.invalidations.fetch_add(1, Ordering::Relaxed);
                let Some(e) = st.entries.get(&id) else { continue };
                if e.uses > 0 {
                    st.make_stale(id);
                    continue;
                }
                if let Some(e) = st.remove(id) {
                    graves.push(e.reg);
                }
            }
            if graves.is_empty() {
                return;
            }
            // The monitor thread does not deregister (see the module
            // comment): the next lookup or release does.
            st.graves.append(&mut graves);
        }
    }

    fn release(&self, id: u64) {
        let mut drop_later = Vec::new();
        {
            let mut st = self.state.lock();
            std::mem::swap(&mut drop_later, &mut st.graves);
            let Some(e) = st.entries.get_mut(&id) else { return };
            e.uses = e.uses.saturating_sub(1);
            if e.uses == 0 && e.stale {
                if let Some(e) = st.remove(id) {
                    drop_later.push(e.reg);
                }
            }
        }
        drop(drop_later);
    }
}

/// An operation's hold on a registration: its keys, valid until dropped.
/// Dropping it releases a cached entry (or deregisters an uncached one).
pub struct Pin {
    pub lkey: u32,
    pub rkey: u32,
    /// What the registration covers, `[start, end)`, and its verbs access
    /// (a cached one may cover more than was asked, with more access).
    pub start: u64,
    pub end: u64,
    pub access: i32,
    hold: Hold,
}

enum Hold {
    Cached(Arc<Shared>, u64),
    Own(#[allow(dead_code)] Box<dyn Reg>),
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pin").field("lkey", &self.lkey).field("rkey", &self.rkey).finish()
    }
}

impl Pin {
    /// A registration for one operation only (e.g. of provider-owned
    /// bytes) of `[start, end)` with verbs `access`.
    pub fn own(reg: Box<dyn Reg>, start: u64, end: u64, access: i32) -> Pin {
        Pin { lkey: reg.lkey(), rkey: reg.rkey(), start, end, access, hold: Hold::Own(reg) }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        if let Hold::Cached(sh, id) = &self.hold {
            sh.release(*id);
        }
    }
}

/// The cache of one domain.
pub struct MrCache {
    sh: Arc<Shared>,
    /// The monitor thread and how to stop it (once started).
    mon: Mutex<Option<(Arc<(AtomicBool, EventFd)>, JoinHandle<()>)>>,
}

impl std::fmt::Debug for MrCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MrCache").field("stats", &self.stats()).finish()
    }
}

static NO_MONITOR_LOGGED: AtomicBool = AtomicBool::new(false);

fn no_cache_once(why: &str) {
    if !NO_MONITOR_LOGGED.swap(true, Ordering::Relaxed) {
        tracing::info!("mr cache: {why}: registering per operation (no registration cache)");
    }
}

impl MrCache {
    /// A cache registering through `reg`, watched by a userfaultfd monitor
    /// thread (started at the first lookup) when the kernel grants one.
    pub fn new(reg: RegFn, limits: Limits) -> MrCache {
        let sh = Arc::new(Shared {
            state: Mutex::new(State::default()),
            events: Mutex::new(()),
            reg,
            limits,
            watch: once_cell::sync::OnceCell::new(),
            page: uffd::page_size(),
            n: Counters::default(),
        });
        MrCache { sh, mon: Mutex::new(None) }
    }

    /// The monitor's fd, opening it and starting its thread the first time.
    fn watch(&self) -> Option<&Arc<Uffd>> {
        self.sh.watch.get_or_init(|| self.start_monitor()).as_ref()
    }

    fn start_monitor(&self) -> Option<Arc<Uffd>> {
        let limits = self.sh.limits;
        if !limits.monitor {
            no_cache_once("FI_MR_CACHE_MONITOR=disabled");
            return None;
        }
        if limits.max_count == 0 || limits.max_size == 0 {
            no_cache_once("FI_MR_CACHE_MAX_COUNT or FI_MR_CACHE_MAX_SIZE is 0");
            return None;
        }
        let w = match Uffd::open() {
            Ok(u) => Arc::new(u),
            Err(e) => {
                no_cache_once(&format!("userfaultfd unavailable ({})", std::io::Error::from_raw_os_error(e)));
                return None;
            }
        };
        let started = (|| -> Result<_, i32> {
            let epoll = Epoll::new()?;
            let ev = EventFd::new()?;
            epoll.add(ev.raw(), 0)?;
            epoll.add(w.raw(), 1)?;
            let stop = Arc::new((AtomicBool::new(false), ev));
            let (st, sh, w2) = (stop.clone(), self.sh.clone(), w.clone());
            let t = std::thread::Builder::new()
                .name("rsverbs-mr-monitor".into())
                .spawn(move || monitor(sh, w2, epoll, st))
                .map_err(|_| libc::EAGAIN)?;
            Ok((stop, t))
        })();
        match started {
            Ok(m) => {
                *self.mon.lock() = Some(m);
                tracing::info!("mr cache: userfaultfd memory monitor started");
                Some(w)
            }
            Err(e) => {
                no_cache_once(&format!("cannot start the memory monitor ({})", std::io::Error::from_raw_os_error(e)));
                None
            }
        }
    }

    /// Whether registrations are kept (a monitor watches them; starts it).
    pub fn caching(&self) -> bool {
        self.watch().is_some()
    }

    /// The registration of `[addr, addr+len)` with at least verbs `access`:
    /// cached, or made now (whole pages).
    pub fn acquire(&self, addr: u64, len: usize, access: i32) -> Result<Pin, i32> {
        self.acquire_with(addr, len, access, false)
    }

    /// The registration of exactly `[addr, addr+len)` with exactly verbs
    /// `access`: cached, or made now. For `fi_mr_reg`, whose keys the
    /// application hands to peers: a cached registration that covers more
    /// bytes, or grants more access, would let a peer reach beyond the
    /// region (tests `rdm_bigrma`/`msg_bigrma`: a write past a region's end
    /// must fail).
    pub fn acquire_exact(&self, addr: u64, len: usize, access: i32) -> Result<Pin, i32> {
        self.acquire_with(addr, len, access, true)
    }

    fn acquire_with(&self, addr: u64, len: usize, access: i32, exact: bool) -> Result<Pin, i32> {
        let sh = &self.sh;
        let len = len.max(1);
        let last = addr.checked_add(len as u64).ok_or(libc::EINVAL)?;
        // The pages the monitor watches.
        let wstart = addr & !(sh.page - 1);
        let wend = last.div_ceil(sh.page) * sh.page;
        let (start, end) = if exact { (addr, last) } else { (wstart, wend) };
        let size = (end - start) as usize;
        let Some(w) = self.watch() else {
            sh.n.misses.fetch_add(1, Ordering::Relaxed);
            sh.n.uncached.fetch_add(1, Ordering::Relaxed);
            return Ok(Pin::own((sh.reg)(start, size, access)?, start, end, access));
        };
        // Every unmap that returned before this call is handled.
        drop(sh.events.lock());
        let gen = {
            let mut graves = Vec::new();
            let mut st = sh.state.lock();
            std::mem::swap(&mut graves, &mut st.graves);
            st.tick += 1;
            let tick = st.tick;
            // Exact: the entries starting at `start`; covering: those
            // starting at most `max_len` below it (an entry is never longer).
            let lo = if exact { start } else { end.saturating_sub(st.max_len()) };
            let found = st.starting_in(lo, start).find(|id| {
                st.entries.get(id).is_some_and(|e| {
                    if exact {
                        e.end == end && e.access == access
                    } else {
                        end <= e.end && e.access & access == access
                    }
                })
            });
            if let Some(e) = found.and_then(|id| st.entries.get_mut(&id).map(|e| (id, e))) {
                let (id, e) = e;
                e.uses += 1;
                e.last = tick;
                let pin = Pin { lkey: e.reg.lkey(), rkey: e.reg.rkey(), start: e.start, end: e.end, access: e.access, hold: Hold::Cached(sh.clone(), id) };
                drop(st);
                drop(graves);
                sh.n.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(pin);
            }
            let g = st.gen;
            drop(st);
            drop(graves);
            g
        };
        sh.n.misses.fetch_add(1, Ordering::Relaxed);
        let reg = (sh.reg)(start, size, access)?;
        if size > sh.limits.max_size {
            sh.n.uncached.fetch_add(1, Ordering::Relaxed);
            return Ok(Pin::own(reg, start, end, access));
        }
        // Watched from now on (pages pinned by the registration above: no
        // missing page in the range). Refused (not anonymous or shared
        // memory, another monitor's range): for this operation only.
        if let Err(e) = w.register(wstart, wend - wstart) {
            tracing::debug!("mr cache: cannot watch {size} bytes at {start:#x} ({}): not cached", std::io::Error::from_raw_os_error(e));
            sh.n.uncached.fetch_add(1, Ordering::Relaxed);
            return Ok(Pin::own(reg, start, end, access));
        }
        let mut evicted = Vec::new();
        let mut st = sh.state.lock();
        if st.gen != gen {
            // The memory map changed while registering: this registration
            // may predate it.
            drop(st);
            sh.n.uncached.fetch_add(1, Ordering::Relaxed);
            return Ok(Pin::own(reg, start, end, access));
        }
        while st.entries.len() + 1 > sh.limits.max_count || st.bytes + size > sh.limits.max_size {
            // A scan, but only when a miss (which registers, far dearer) finds the cache full.
            let victim = st.entries.iter().filter(|(_, e)| e.uses == 0).min_by_key(|(_, e)| e.last).map(|(&id, _)| id);
            let Some(id) = victim else { break };
            if let Some(e) = st.remove(id) {
                evicted.push(e.reg);
                sh.n.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        if st.entries.len() + 1 > sh.limits.max_count || st.bytes + size > sh.limits.max_size {
            // Everything left is in use.
            drop(st);
            drop(evicted);
            sh.n.uncached.fetch_add(1, Ordering::Relaxed);
            return Ok(Pin::own(reg, start, end, access));
        }
        st.next_id += 1;
        let id = st.next_id;
        st.tick += 1;
        let last = st.tick;
        let pin = Pin { lkey: reg.lkey(), rkey: reg.rkey(), start, end, access, hold: Hold::Cached(sh.clone(), id) };
        st.add(id, Entry { start, end, access, reg, uses: 1, stale: false, last });
        drop(st);
        drop(evicted);
        Ok(pin)
    }

    /// Drops every entry overlapping `[start, end)` (what the monitor does on
    /// an unmap; tests call it directly).
    pub fn invalidate(&self, start: u64, end: u64) {
        self.sh.invalidate(start, end);
        let graves = std::mem::take(&mut self.sh.state.lock().graves);
        drop(graves);
    }

    /// The counters, every unmap that returned before this call counted
    /// (the monitor may have read its event and not yet handled it).
    pub fn stats(&self) -> Stats {
        drop(self.sh.events.lock());
        let n = &self.sh.n;
        let st = self.sh.state.lock();
        Stats {
            hits: n.hits.load(Ordering::Relaxed),
            misses: n.misses.load(Ordering::Relaxed),
            evictions: n.evictions.load(Ordering::Relaxed),
            invalidations: n.invalidations.load(Ordering::Relaxed),
            uncached: n.uncached.load(Ordering::Relaxed),
            entries: st.entries.len() as u64,
            bytes: st.bytes as u64,
        }
    }
}

impl Drop for MrCache {
    fn drop(&mut self) {
        if let Some((stop, t)) = self.mon.lock().take() {
            stop.0.store(true, Ordering::SeqCst);
            stop.1.signal();
            let _ = t.join();
        }
        let s = self.stats();
        if s.misses > 0 {
            tracing::info!(
                "mr cache: {} hits, {} misses, {} evictions, {} invalidations, {} uncached, {} entries ({} bytes) at close",
                s.hits,
                s.misses,
                s.evictions,
                s.invalidations,
                s.uncached,
                s.entries,
                s.bytes
            );
        }
        // Entries still pinned by operations (a domain closed under them) are
        // released by their pins; the rest go with the state.
    }
}

/// The monitor thread: handles the kernel's events until told to stop.
fn monitor(sh: Arc<Shared>, w: Arc<Uffd>, epoll: Epoll, stop: Arc<(AtomicBool, EventFd)>) {
    while !stop.0.load(Ordering::SeqCst) {
        if epoll.wait(1000).is_err() {
            tracing::warn!("mr cache: the memory monitor cannot wait for events; it stops");
            return;
        }
        let _g = sh.events.lock();
        loop {
            match w.read() {
                Ok(Some(ev)) => handle(&sh, &w, ev),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("mr cache: reading userfaultfd events failed ({}); the monitor stops", std::io::Error::from_raw_os_error(e));
                    return;
                }
            }
        }
    }
}

fn handle(sh: &Shared, w: &Uffd, ev: Event) {
    tracing::debug!("mr cache: {ev:?}");
    match ev {
        Event::Unmap { start, end } => sh.invalidate(start, end),
        Event::Remove { start, end } => {
            // The pages are gone: stop watching, so that touching them again
            // faults as usual rather than here (as libfabric does).
            let _ = w.unregister(start, end.saturating_sub(start));
            sh.invalidate(start, end);
        }
        Event::Remap { from, len, .. } => sh.invalidate(from, from.saturating_add(len)),
        Event::PageFault { addr, .. } => {
            if let Err(e) = w.zero_page(addr, sh.page) {
                tracing::warn!("mr cache: cannot resolve a fault at {addr:#x} ({})", std::io::Error::from_raw_os_error(e));
            }
        }
        Event::Other(e) => tracing::warn!("mr cache: unexpected userfaultfd event {e:#x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[derive(Debug)]
    struct Fake(u32, Arc<AtomicU32>);
    impl Reg for Fake {
        fn lkey(&self) -> u32 {
            self.0
        }
        fn rkey(&self) -> u32 {
            self.0 + 1000
        }
    }
    impl Drop for Fake {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A cache with fake registrations numbered 1, 2, ...; `dereg` counts drops.
    fn cache(limits: Limits) -> (MrCache, Arc<AtomicU32>) {
        let n = Arc::new(AtomicU32::new(0));
        let dereg = Arc::new(AtomicU32::new(0));
        let d = dereg.clone();
        let reg: RegFn = Box::new(move |_, _, _| Ok(Box::new(Fake(n.fetch_add(1, Ordering::SeqCst) + 1, d.clone())) as Box<dyn Reg>));
        (MrCache::new(reg, limits), dereg)
    }

    const L: Limits = Limits { max_count: 4, max_size: 1 << 20, monitor: true };
    const PAGE: usize = 4096;

    /// Anonymous test memory (the monitor watches only mapped memory).
    struct Map(u64, usize);
    impl Map {
        fn new(len: usize) -> Map {
            Map(uffd::map_anon(0, len, false).expect("mmap"), len)
        }
    }
    impl Drop for Map {
        fn drop(&mut self) {
            let _ = uffd::unmap(self.0, self.1);
        }
    }

    fn need_uffd(c: &MrCache) -> bool {
        if !c.caching() {
            eprintln!("userfaultfd unavailable here: cache tests skipped");
        }
        c.caching()
    }

    #[test]
    fn exact_requests_hit_only_the_same_bytes_and_access() {
        let (c, _) = cache(L);
        if !need_uffd(&c) {
            return;
        }
        let m = Map::new(4 * PAGE);
        let whole = c.acquire_exact(m.0, 4 * PAGE, 1).unwrap();
        assert_eq!((whole.start, whole.end), (m.0, m.0 + 4 * PAGE as u64));
        // Covered, but fewer bytes: a registration of its own, exactly them.
        let part = c.acquire_exact(m.0 + 10, 100, 1).unwrap();
        assert_ne!(part.lkey, whole.lkey);
        assert_eq!((part.start, part.end), (m.0 + 10, m.0 + 110));
        // Same bytes, less access than cached: not the cached one either.
        let less = c.acquire_exact(m.0, 4 * PAGE, 0).unwrap();
        assert_ne!(less.lkey, whole.lkey);
        // Same bytes and access: the cached one.
        let again = c.acquire_exact(m.0 + 10, 100, 1).unwrap();
        assert_eq!(again.lkey, part.lkey);
        // A page-wide request may use an exact entry that covers it.
        let paged = c.acquire(m.0, PAGE, 1).unwrap();
        assert_eq!(paged.lkey, whole.lkey);
    }

    #[test]
    fn hit_on_covered_range_and_access() {
        let (c, _) = cache(L);
        if !need_uffd(&c) {
            return;
        }
        let m = Map::new(4 * PAGE);
        let a = c.acquire(m.0 + 10, 2 * PAGE, 1).unwrap();
        // Inside the same pages, same access: the same registration.
        let b = c.acquire(m.0 + 100, PAGE, 1).unwrap();
        assert_eq!(a.lkey, b.lkey);
        // More access than cached: a new one.
        let x = c.acquire(m.0 + 100, PAGE, 1 | 4).unwrap();
        assert_ne!(x.lkey, a.lkey);
        // Beyond the cached pages: a new one.
        let y = c.acquire(m.0, 4 * PAGE, 1).unwrap();
        assert_ne!(y.lkey, a.lkey);
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.entries), (1, 3, 3));
        assert_eq!(s.bytes as usize, (3 + 2 + 4) * PAGE);
    }

    #[test]
    fn lru_eviction_skips_entries_in_use() {
        let (c, dereg) = cache(L);
        if !need_uffd(&c) {
            return;
        }
        let m = Map::new(8 * PAGE);
        let held = c.acquire(m.0, PAGE, 1).unwrap();
        for i in 1..4u64 {
            drop(c.acquire(m.0 + i * PAGE as u64, PAGE, 1).unwrap());
        }
        assert_eq!(c.stats().entries, 4);
        // Touch page 1 so that page 2 is the oldest unused.
        drop(c.acquire(m.0 + PAGE as u64, 1, 1).unwrap());
        drop(c.acquire(m.0 + 4 * PAGE as u64, PAGE, 1).unwrap());
        let s = c.stats();
        assert_eq!((s.entries, s.evictions), (4, 1));
        assert_eq!(dereg.load(Ordering::SeqCst), 1);
        // Page 0 (in use) and page 1 (recent) survived; page 2 went.
        let before = c.stats().hits;
        drop(c.acquire(m.0, 1, 1).unwrap());
        drop(c.acquire(m.0 + PAGE as u64, 1, 1).unwrap());
        assert_eq!(c.stats().hits, before + 2);
        drop(c.acquire(m.0 + 2 * PAGE as u64, 1, 1).unwrap());
        assert_eq!(c.stats().hits, before + 2, "the evicted page registers again");
        drop(held);
    }

    #[test]
    fn all_in_use_goes_uncached() {
        let (c, dereg) = cache(Limits { max_count: 2, ..L });
        if !need_uffd(&c) {
            return;
        }
        let m = Map::new(4 * PAGE);
        let a = c.acquire(m.0, PAGE, 1).unwrap();
        let b = c.acquire(m.0 + PAGE as u64, PAGE, 1).unwrap();
        let u = c.acquire(m.0 + 2 * PAGE as u64, PAGE, 1).unwrap();
        assert_eq!(c.stats().uncached, 1);
        drop(u);
        assert_eq!(dereg.load(Ordering::SeqCst), 1, "an uncached registration goes with its operation");
        drop((a, b));
        assert_eq!(dereg.load(Ordering::SeqCst), 1, "cached ones stay");
    }

    #[test]
    fn byte_bound_and_oversized() {
        let (c, _) = cache(Limits { max_size: 2 * PAGE, ..L });
        if !need_uffd(&c) {
            return;
        }
        let m = Map::new(4 * PAGE);
        drop(c.acquire(m.0, 3 * PAGE, 1).unwrap());
        assert_eq!((c.stats().entries, c.stats().uncached), (0, 1));
        drop(c.acquire(m.0, PAGE, 1).unwrap());
        drop(c.acquire(m.0 + PAGE as u64, PAGE, 1).unwrap());
        drop(c.acquire(m.0 + 2 * PAGE as u64, PAGE, 1).unwrap());
        let s = c.stats();
        assert_eq!((s.entries, s.bytes as usize, s.evictions), (2, 2 * PAGE, 1));
    }

    #[test]
    fn explicit_invalidation_waits_for_users() {
        let (c, dereg) = cache(L);
        if !need_uffd(&c) {
            return;
        }
        let m = Map::new(2 * PAGE);
        let a = c.acquire(m.0, PAGE, 1).unwrap();
        c.invalidate(m.0, m.0 + 1);
        assert_eq!(dereg.load(Ordering::SeqCst), 0, "in use: only marked stale");
        let b = c.acquire(m.0, PAGE, 1).unwrap();
        assert_ne!(a.lkey, b.lkey, "a stale entry is not found");
        drop(a);
        assert_eq!(dereg.load(Ordering::SeqCst), 1, "deregistered when its operation ends");
        assert_eq!(c.stats().invalidations, 1);
        drop(b);
    }

    #[test]
    fn munmap_and_remap_at_the_same_address_invalidate() {
        let (c, dereg) = cache(L);
        if !need_uffd(&c) {
            return;
        }
        let len = 16 * PAGE;
        let addr = uffd::map_anon(0, len, false).unwrap();
        let first = c.acquire(addr, len, 1).unwrap();
        let k1 = first.lkey;
        drop(first);
        assert_eq!(c.acquire(addr, len, 1).unwrap().lkey, k1, "hit while mapped");
        // munmap returns once the monitor has read the event; the next
        // lookup waits for its handling.
        uffd::unmap(addr, len).unwrap();
        let again = uffd::map_anon(addr, len, true).unwrap();
        assert_eq!(again, addr);
        let p = c.acquire(addr, len, 1).unwrap();
        assert_ne!(p.lkey, k1, "the old pages' registration must not be reused");
        let s = c.stats();
        assert_eq!(s.invalidations, 1);
        drop(p);
        // madvise(DONTNEED) (free of a heap arena's pages) invalidates too,
        // and touching the pages afterwards works (the range is unwatched).
        uffd::dontneed(addr, len).unwrap();
        let q = c.acquire(addr, len, 1).unwrap();
        assert_eq!(c.stats().invalidations, 2);
        drop(q);
        // MAP_FIXED over a watched range is an unmap too.
        let _ = uffd::map_anon(addr, len, true).unwrap();
        let r = c.acquire(addr, len, 1).unwrap();
        assert_eq!(c.stats().invalidations, 3);
        drop(r);
        uffd::unmap(addr, len).unwrap();
        drop(c);
        assert!(dereg.load(Ordering::SeqCst) >= 3);
    }

    #[test]
    fn faults_on_missing_pages_of_a_watched_range_are_answered() {
        let (c, _) = cache(L);
        if !need_uffd(&c) {
            return;
        }
        // The fake registration pins nothing: the pages stay missing, and
        // touching them faults to the monitor, which installs zero pages.
        let m = Map::new(4 * PAGE);
        let p = c.acquire(m.0, 4 * PAGE, 1).unwrap();
        assert_eq!(uffd::peek(m.0 + 5), 0);
        uffd::poke(m.0 + PAGE as u64 + 1, 7);
        assert_eq!(uffd::peek(m.0 + PAGE as u64 + 1), 7);
        assert_eq!(uffd::peek(m.0 + 3 * PAGE as u64), 0);
        drop(p);
        assert_eq!(c.stats().invalidations, 0, "faults invalidate nothing");
    }

    #[test]
    fn no_monitor_registers_per_operation() {
        let (c, dereg) = cache(Limits { monitor: false, ..L });
        assert!(!c.caching());
        let m = Map::new(PAGE);
        let a = c.acquire(m.0, 8, 1).unwrap();
        let b = c.acquire(m.0, 8, 1).unwrap();
        assert_ne!(a.lkey, b.lkey);
        drop((a, b));
        assert_eq!(dereg.load(Ordering::SeqCst), 2);
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.uncached, s.entries), (0, 2, 2, 0));
    }

    /// The index (`by_start`, `lens`) against a plain model of
    /// the cache's rules: a random run of covering and exact lookups over
    /// entries of many lengths, releases and invalidations must hit, miss,
    /// evict and invalidate exactly as a scan of every entry would.
    #[test]
    fn index_agrees_with_a_scan_of_every_entry() {
        let lim = Limits { max_count: 24, max_size: 1 << 30, monitor: true };
        let (c, _) = cache(lim);
        if !need_uffd(&c) {
            return;
        }
        const PAGES: u64 = 64;
        let m = Map::new(PAGES as usize * PAGE);
        let pg = PAGE as u64;
        // Model entries: (start, end, access, lkey, uses, last, stale).
        let mut model: Vec<(u64, u64, i32, u32, u32, u64, bool)> = Vec::new();
        let mut held: Vec<Pin> = Vec::new();
        let mut next_key = 1u32;
        let mut tick = 0u64;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let (mut hits, mut misses, mut evictions, mut invalidations) = (0u64, 0u64, 0u64, 0u64);
        for step in 0..6000 {
            match rnd(10) {
                0..=5 => {
                    let exact = rnd(3) == 0;
                    let addr = m.0 + rnd(PAGES - 1) * pg + if rnd(2) == 0 { 0 } else { rnd(pg) };
                    let room = m.0 + PAGES * pg - addr;
                    // Mostly short, sometimes long: entries of many lengths.
                    let len = 1 + if rnd(4) == 0 { rnd(room - 1) } else { rnd(room.min(2 * pg) - 1) };
                    let acc = if rnd(2) == 0 { 1 } else { 3 };
                    let (start, end) = if exact { (addr, addr + len) } else { (addr & !(pg - 1), (addr + len).div_ceil(pg) * pg) };
                    tick += 1;
                    let covering: Vec<u32> = model
                        .iter()
                        .filter(|e| {
                            !e.6 && if exact { e.0 == start && e.1 == end && e.2 == acc } else { e.0 <= start && end <= e.1 && e.2 & acc == acc }
                        })
                        .map(|e| e.3)
                        .collect();
                    let pin = if exact { c.acquire_exact(addr, len as usize, acc) } else { c.acquire(addr, len as usize, acc) }.unwrap();
                    if !covering.is_empty() {
                        hits += 1;
                        assert!(covering.contains(&pin.lkey), "step {step}: hit {} is not one of {covering:?}", pin.lkey);
                        let e = model.iter_mut().find(|e| e.3 == pin.lkey).unwrap();
                        e.4 += 1;
                        e.5 = tick;
                    } else {
                        misses += 1;
                        assert_eq!(pin.lkey, next_key, "step {step}: a miss registers anew");
                        next_key += 1;
                        while model.len() + 1 > lim.max_count {
                            let Some(v) = model.iter().enumerate().filter(|(_, e)| e.4 == 0).min_by_key(|(_, e)| e.5).map(|(i, _)| i) else { break };
                            model.remove(v);
                            evictions += 1;
                        }
                        if model.len() < lim.max_count {
                            model.push((start, end, acc, pin.lkey, 1, tick, false));
                        }
                    }
                    held.push(pin);
                    if held.len() > 12 {
                        let p = held.remove(rnd(held.len() as u64) as usize);
                        release(&mut model, p);
                    }
                }
                6..=8 if !held.is_empty() => {
                    let p = held.remove(rnd(held.len() as u64) as usize);
                    release(&mut model, p);
                }
                _ => {
                    let a = m.0 + rnd(PAGES * pg);
                    let b = a + 1 + rnd(m.0 + PAGES * pg - a);
                    c.invalidate(a, b);
                    for e in model.iter_mut().filter(|e| !e.6 && e.0 < b && a < e.1) {
                        invalidations += 1;
                        e.6 = true;
                    }
                    model.retain(|e| !(e.6 && e.4 == 0));
                }
            }
            let s = c.stats();
            assert_eq!((s.hits, s.misses, s.evictions, s.invalidations), (hits, misses, evictions, invalidations), "step {step}");
            assert_eq!(s.entries, model.len() as u64, "step {step}");
        }
        assert!(hits > 500 && misses > 500 && evictions > 100 && invalidations > 100, "{hits} {misses} {evictions} {invalidations}");

        fn release(model: &mut Vec<(u64, u64, i32, u32, u32, u64, bool)>, p: Pin) {
            if let Some(i) = model.iter().position(|e| e.3 == p.lkey) {
                model[i].4 -= 1;
                if model[i].4 == 0 && model[i].6 {
                    model.remove(i);
                }
            }
            drop(p);
        }
    }

    /// The index's window follows the longest entry lookups can find: it
    /// shrinks when that entry goes stale or is removed, so one long
    /// registration does not widen every later lookup.
    #[test]
    fn index_window_shrinks_with_the_longest_entry() {
        let (c, _) = cache(Limits { max_count: 8, max_size: 1 << 30, monitor: true });
        if !need_uffd(&c) {
            return;
        }
        let m = Map::new(64 * PAGE);
        let pg = PAGE as u64;
        let window = |c: &MrCache| c.sh.state.lock().max_len();
        drop(c.acquire(m.0, PAGE, 1).unwrap());
        let long = c.acquire(m.0 + 16 * pg, 32 * PAGE, 1).unwrap();
        assert_eq!(window(&c), 32 * pg);
        // In use, then stale: no longer found, so no longer in the window.
        c.invalidate(m.0 + 20 * pg, m.0 + 21 * pg);
        assert_eq!(window(&c), pg);
        drop(long);
        let long = c.acquire(m.0 + 16 * pg, 32 * PAGE, 3).unwrap();
        drop(long);
        assert_eq!(window(&c), 32 * pg);
        // Two entries of one length: the window stays until both are gone.
        drop(c.acquire(m.0 + 8 * pg, 8 * PAGE, 1).unwrap());
        drop(c.acquire(m.0 + 50 * pg, 8 * PAGE, 1).unwrap());
        c.invalidate(m.0 + 16 * pg, m.0 + 48 * pg);
        assert_eq!(window(&c), 8 * pg);
        c.invalidate(m.0 + 8 * pg, m.0 + 9 * pg);
        assert_eq!(window(&c), 8 * pg);
        c.invalidate(m.0 + 50 * pg, m.0 + 51 * pg);
        assert_eq!(window(&c), pg);
        c.invalidate(m.0, m.0 + pg);
        assert_eq!(window(&c), 0);
    }
}
