//! rsverbs' own C API, for programs that embed rsverbs directly (link
//! `librsverbs-fi.so`, include `<rsverbs.h>`). `include/rsverbs.h` is
//! generated from this file by cbindgen (build.rs): keep every item here
//! C-compatible and documented, the doc comments become the header's.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::fi::abi::fi_provider;

/// rsverbs has not been used yet in this process.
pub const RSVERBS_MODE_NONE: c_int = 0;
/// A libfabric core loaded rsverbs as a provider (it called `fi_prov_ini`).
pub const RSVERBS_MODE_PROVIDER: c_int = 1;
/// The program called rsverbs' own libfabric API (`fi_getinfo` & co.): drop-in or embedded use.
pub const RSVERBS_MODE_DIRECT: c_int = 2;
/// Both happened (e.g. a program that links rsverbs and also loads it through libfabric).
pub const RSVERBS_MODE_BOTH: c_int = 3;

/// Counters of rsverbs' entry points, for diagnostics (see `rsverbs_stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct rsverbs_stats {
    /// Size of this struct as the caller knows it (set by the caller; rsverbs fills no more).
    pub size: u64,
    /// Calls of `fi_prov_ini` (a libfabric core loading rsverbs as a provider; 1 at most per core).
    pub prov_ini_calls: u64,
    /// Calls of rsverbs' own `fi_getinfo` (any ABI version).
    pub getinfo_calls: u64,
    /// Calls of rsverbs' own `fi_fabric` (any ABI version).
    pub fabric_calls: u64,
    /// `fi_info` structs handed out by rsverbs' own `fi_getinfo`/`fi_dupinfo`/`fi_allocinfo`.
    pub infos_allocated: u64,
    /// `fi_info` structs released by rsverbs' own `fi_freeinfo`.
    pub infos_freed: u64,
}

static PROV_INI: AtomicU64 = AtomicU64::new(0);
static GETINFO: AtomicU64 = AtomicU64::new(0);
static FABRIC: AtomicU64 = AtomicU64::new(0);
static INFOS_ALLOC: AtomicU64 = AtomicU64::new(0);
static INFOS_FREED: AtomicU64 = AtomicU64::new(0);

pub(crate) fn note_prov_ini() {
    PROV_INI.fetch_add(1, Ordering::Relaxed);
}
pub(crate) fn note_getinfo() {
    GETINFO.fetch_add(1, Ordering::Relaxed);
}
pub(crate) fn note_fabric() {
    FABRIC.fetch_add(1, Ordering::Relaxed);
}
pub(crate) fn note_infos(allocated: u64, freed: u64) {
    INFOS_ALLOC.fetch_add(allocated, Ordering::Relaxed);
    INFOS_FREED.fetch_add(freed, Ordering::Relaxed);
}

static VERSION: &[u8] = concat!(env!("CARGO_PKG_VERSION"), "+", env!("RSVERBS_COMMIT"), "\0").as_bytes();
static COMMIT: &[u8] = concat!(env!("RSVERBS_COMMIT"), "\0").as_bytes();

/// rsverbs' version and the git commit it was built from, as semver with build
/// metadata: "0.1.0+9af9a2d1c3e4" ("-dirty" after the commit when built with
/// local changes, "+unknown" when built outside a git tree). Static storage.
#[no_mangle]
pub extern "C" fn rsverbs_version() -> *const c_char {
    VERSION.as_ptr() as *const c_char
}

/// The git commit rsverbs was built from (the part of `rsverbs_version()`
/// after the '+'), static storage.
#[no_mangle]
pub extern "C" fn rsverbs_commit() -> *const c_char {
    COMMIT.as_ptr() as *const c_char
}

/// The provider version rsverbs registers (`FI_VERSION(1000, 1)`), as in `fabric_attr->prov_version`.
#[no_mangle]
pub extern "C" fn rsverbs_prov_version() -> u32 {
    crate::info::PROV_VERSION
}

/// The newest libfabric API version rsverbs speaks (`FI_VERSION(2, 6)`); also what its
/// `fi_version()` returns. Applications may ask for any version from
/// `rsverbs_api_version_min()` to this one.
#[no_mangle]
pub extern "C" fn rsverbs_api_version() -> u32 {
    super::version::API_VERSION_MAX
}

/// The oldest libfabric API version rsverbs speaks (`FI_VERSION(1, 0)`: the FABRIC_1.0 ABI).
#[no_mangle]
pub extern "C" fn rsverbs_api_version_min() -> u32 {
    super::version::API_VERSION_MIN
}

/// The provider name rsverbs answers to (`verbs`, or `FI_RSVERBS_NAME`), static storage.
#[no_mangle]
pub extern "C" fn rsverbs_prov_name() -> *const c_char {
    super::prov::provider_name_ptr()
}

/// rsverbs' `struct fi_provider` (the one `fi_prov_ini` returns), for programs
/// that want to drive the provider entry points (`getinfo`, `fabric`) themselves.
/// Never freed.
#[no_mangle]
pub extern "C" fn rsverbs_provider() -> *mut fi_provider {
    super::prov::provider()
}

/// How rsverbs has been used so far in this process: one of `RSVERBS_MODE_*`.
#[no_mangle]
pub extern "C" fn rsverbs_mode() -> c_int {
    let prov = PROV_INI.load(Ordering::Relaxed) > 0;
    let direct = GETINFO.load(Ordering::Relaxed) > 0 || FABRIC.load(Ordering::Relaxed) > 0;
    match (prov, direct) {
        (false, false) => RSVERBS_MODE_NONE,
        (true, false) => RSVERBS_MODE_PROVIDER,
        (false, true) => RSVERBS_MODE_DIRECT,
        (true, true) => RSVERBS_MODE_BOTH,
    }
}

/// Copies rsverbs' counters into `*stats`. Set `stats->size = sizeof(*stats)`
/// first; rsverbs fills at most that many bytes (older/newer layouts stay
/// compatible). Returns 0, or `-FI_EINVAL` for NULL or a size too small for `size`.
///
/// # Safety
/// `stats` must be NULL or point to `stats->size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rsverbs_stats(stats: *mut rsverbs_stats) -> c_int {
    if stats.is_null() {
        return -crate::fi::consts::FI_EINVAL;
    }
    // SAFETY: non-NULL; the caller's struct starts with `size`.
    let size = unsafe { std::ptr::read_unaligned(stats as *const u64) } as usize;
    if size < std::mem::size_of::<u64>() {
        return -crate::fi::consts::FI_EINVAL;
    }
    let s = rsverbs_stats {
        size: size.min(std::mem::size_of::<rsverbs_stats>()) as u64,
        prov_ini_calls: PROV_INI.load(Ordering::Relaxed),
        getinfo_calls: GETINFO.load(Ordering::Relaxed),
        fabric_calls: FABRIC.load(Ordering::Relaxed),
        infos_allocated: INFOS_ALLOC.load(Ordering::Relaxed),
        infos_freed: INFOS_FREED.load(Ordering::Relaxed),
    };
    let n = size.min(std::mem::size_of::<rsverbs_stats>());
    // SAFETY: the caller has `size` >= n writable bytes at `stats`.
    unsafe { std::ptr::copy_nonoverlapping(&s as *const rsverbs_stats as *const u8, stats as *mut u8, n) };
    0
}
