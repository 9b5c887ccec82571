//! Which libfabric rsverbs serves: the API versions it speaks, the version of
//! the core that loaded it, and the struct layouts that follow from both.
//!
//! One `.so` serves libfabric cores 1.17 to 2.6 (docs/cores.md):
//!
//! * **Which applications reach it.** A core hands a provider only the
//!   `fi_getinfo` calls whose API version is not above the provider's
//!   `fi_version` (`fi_getinfo_` in the core's `src/fabric.c`). At
//!   `fi_prov_ini` rsverbs asks the loading core its version (`fi_version()`
//!   of the `libfabric.so.1` that dlopened it, looked up in that object)
//!   and declares `min(core, API_VERSION_MAX)`.
//! * **Struct layouts.** libfabric appended fields to `fi_domain_attr` after
//!   1.17 (1.20: `max_ep_auth_key`; 2.0: `max_group_id`; 2.5:
//!   `max_cntr_value`, `max_err_cntr_value`); the core converts an old
//!   application's structs to its own layout (`src/abi_1_0.c`), so every
//!   `fi_info` rsverbs reads in provider mode has the loading core's layout,
//!   and every one it hands out may be copied by that core's `fi_dupinfo`
//!   (which copies the core's size). So rsverbs reads only the fields the
//!   core's layout has ([`core_version`]), and allocates the largest layout it
//!   knows ([`fi_domain_attr_ext`]), with the newer fields filled.
//! * **Semantics** follow the API version the application asked for
//!   (`fi_getinfo`'s `version`, the fabric's `api_version`): see README,
//!   "libfabric versions".
//!
//! In the drop-in and embedded uses rsverbs is the core: the symbol version an
//! application linked against names the layout (`core_api/`), and the
//! provider code sees the newest layout.

use std::ffi::{c_char, c_void};

use once_cell::sync::OnceCell;

use crate::fi::abi::fi_domain_attr;
use crate::fi::consts::FI_VERSION;

/// The newest libfabric API version rsverbs speaks (the man pages of 2.6 are its spec).
pub const API_VERSION_MAX: u32 = crate::info::API_VERSION_MAX;
/// The oldest API version an application may ask for (the FABRIC_1.0 ABI).
pub const API_VERSION_MIN: u32 = FI_VERSION(1, 0);
/// The layout rsverbs assumes when it cannot learn the loading core's version:
/// the oldest core it supports (Debian 12's), whose structs are prefixes of
/// every later one's.
pub const CORE_VERSION_FALLBACK: u32 = FI_VERSION(1, 17);

/// `struct fi_domain_attr` as libfabric 2.5 and later lay it out: the 1.17
/// struct, then the fields added since (each core's struct is a prefix).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr_ext {
    pub base: fi_domain_attr,
    /// 1.20 and later.
    pub max_ep_auth_key: usize,
    /// 2.0 and later.
    pub max_group_id: u32,
    /// 2.5 and later.
    pub max_cntr_value: u64,
    /// 2.5 and later.
    pub max_err_cntr_value: u64,
}

/// Bytes of `fi_domain_attr` in a core of version `core`.
pub const fn domain_attr_size(core: u32) -> usize {
    if core >= FI_VERSION(2, 5) {
        std::mem::size_of::<fi_domain_attr_ext>()
    } else if core >= FI_VERSION(2, 0) {
        std::mem::offset_of!(fi_domain_attr_ext, max_cntr_value)
    } else if core >= FI_VERSION(1, 20) {
        std::mem::offset_of!(fi_domain_attr_ext, max_group_id)
    } else {
        std::mem::size_of::<fi_domain_attr>()
    }
}

static CORE: OnceCell<u32> = OnceCell::new();

/// The version of the libfabric core whose structs rsverbs reads: the one that
/// loaded it as a provider, or (drop-in, embedded: rsverbs is the core) the
/// newest rsverbs speaks.
pub fn core_version() -> u32 {
    CORE.get().copied().unwrap_or(API_VERSION_MAX)
}

/// The `fi_version` to declare in `struct fi_provider` for the core that loads us.
pub fn provider_fi_version() -> u32 {
    core_version().min(API_VERSION_MAX)
}

extern "C" {
    // glibc: a symbol of a given version (libc does not bind it for every target).
    fn dlvsym(handle: *mut c_void, symbol: *const c_char, version: *const c_char) -> *mut c_void;
}

/// Learns the loading core's version (once, at `fi_prov_ini`): `fi_version`
/// of the `libfabric.so.1` already in the process (the core that dlopened
/// rsverbs). The lookup goes through that object's own handle: rsverbs is
/// linked `-Bsymbolic`, so a lookup from it with `RTLD_DEFAULT` would find
/// rsverbs' own drop-in `fi_version` first.
pub fn detect_core() -> u32 {
    *CORE.get_or_init(|| {
        // SAFETY: RTLD_NOLOAD only returns a handle of an object already loaded
        // (or NULL); the handle is closed below, which just drops the reference.
        let h = unsafe { libc::dlopen(c"libfabric.so.1".as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        if h.is_null() {
            tracing::warn!(
                "fi_prov_ini: no libfabric.so.1 in the process; assuming the layouts of libfabric {}.{}",
                CORE_VERSION_FALLBACK >> 16,
                CORE_VERSION_FALLBACK & 0xffff
            );
            return CORE_VERSION_FALLBACK;
        }
        // SAFETY: h is a live handle; the names are NUL-terminated.
        let f = unsafe { dlvsym(h, c"fi_version".as_ptr(), c"FABRIC_1.0".as_ptr()) };
        let ours = super::core_api::fi_version_fn() as *mut c_void;
        let v = if f.is_null() {
            tracing::warn!("fi_prov_ini: libfabric.so.1 has no fi_version@FABRIC_1.0; assuming 1.17's layouts");
            CORE_VERSION_FALLBACK
        } else if f == ours {
            // libfabric.so.1 is rsverbs itself (drop-in): we are the core.
            API_VERSION_MAX
        } else {
            // SAFETY: fi_version@FABRIC_1.0 is `uint32_t fi_version(void)` in every libfabric.
            unsafe { std::mem::transmute::<*mut c_void, extern "C" fn() -> u32>(f)() }
        };
        // SAFETY: h came from dlopen above and is not used afterwards.
        unsafe { libc::dlclose(h) };
        tracing::info!("fi_prov_ini: loaded by libfabric core {}.{}", v >> 16, v & 0xffff);
        v
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_attr_sizes_per_core() {
        // The sizes libfabric's headers give (1.17, 1.20/1.22, 2.0/2.1, 2.5/2.6).
        assert_eq!(domain_attr_size(FI_VERSION(1, 17)), 192);
        assert_eq!(domain_attr_size(FI_VERSION(1, 22)), 200);
        assert_eq!(domain_attr_size(FI_VERSION(2, 1)), 208);
        assert_eq!(domain_attr_size(FI_VERSION(2, 6)), 224);
        assert_eq!(std::mem::offset_of!(fi_domain_attr_ext, max_ep_auth_key), 192);
        assert_eq!(std::mem::offset_of!(fi_domain_attr_ext, max_err_cntr_value), 216);
    }

    #[test]
    fn provider_version_is_clamped() {
        assert!(provider_fi_version() <= API_VERSION_MAX);
    }
}
