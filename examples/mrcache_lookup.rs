//! What a registration-cache hit costs with many entries (docs/benchmarks.md,
//! "Registration cache lookups"): the cache's own work only, with fake
//! registrations (no device needed; userfaultfd is).
//!
//!   cargo run --release --example mrcache_lookup -- [ENTRIES] [LOOKUPS]
//!
//! Fills the cache with ENTRIES one-page entries, then looks LOOKUPS of them
//! up again, spread over all of them: exactly (`fi_mr_reg` of the same
//! bytes) and covering (a rendezvous buffer inside a cached page). Prints
//! nanoseconds per hit; under `valgrind --tool=callgrind` the difference of
//! two runs with different LOOKUPS gives instructions per hit.
use rsverbs::mrcache::{Limits, MrCache, Reg, RegFn};
use std::time::Instant;

#[derive(Debug)]
struct Fake(u32);

impl Reg for Fake {
    fn lkey(&self) -> u32 {
        self.0
    }
    fn rkey(&self) -> u32 {
        self.0
    }
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("arguments: ENTRIES LOOKUPS")).collect();
    let n = args.first().copied().unwrap_or(1000).max(1);
    let lookups = args.get(1).copied().unwrap_or(100_000);
    let page = 4096u64;
    let base = rsverbs::sys::uffd::map_anon(0, n * page as usize, false).expect("mmap");
    let reg: RegFn = Box::new(|_, _, _| Ok(Box::new(Fake(1)) as Box<dyn Reg>));
    let c = MrCache::new(reg, Limits { max_count: n, max_size: 1 << 40, monitor: true });
    if !c.caching() {
        eprintln!("mrcache_lookup: userfaultfd is unavailable here, nothing is cached");
        std::process::exit(1);
    }
    for i in 0..n as u64 {
        drop(c.acquire_exact(base + i * page, 100, 1).expect("register"));
    }
    // A stride prime to n visits every entry in turn.
    let at = |k: usize| base + ((k * 7919) % n) as u64 * page;
    let t = Instant::now();
    for k in 0..lookups {
        drop(c.acquire_exact(at(k), 100, 1).expect("hit"));
    }
    let exact = t.elapsed();
    // The whole pages the covering lookups take (they replace the exact entries).
    for i in 0..n as u64 {
        drop(c.acquire(base + i * page + 8, 64, 1).expect("register"));
    }
    let t = Instant::now();
    for k in 0..lookups {
        drop(c.acquire(at(k) + 8, 64, 1).expect("hit"));
    }
    let covering = t.elapsed();
    let s = c.stats();
    assert_eq!(s.entries as usize, n);
    println!(
        "MRCACHE entries={n} lookups={lookups} hits={} misses={} exact_ns_per_hit={:.0} covering_ns_per_hit={:.0}",
        s.hits,
        s.misses,
        exact.as_nanos() as f64 / lookups.max(1) as f64,
        covering.as_nanos() as f64 / lookups.max(1) as f64
    );
}
