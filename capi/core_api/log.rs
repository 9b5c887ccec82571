//! `fi_log_enabled`/`fi_log_ready` and the log entry the provider's C
//! logging macros reach, mapped to rsverbs' `FI_LOG_LEVEL` handling.

use super::*;

/// libfabric's log levels (`enum fi_log_level`) in rank order; rsverbs' FI_LOG_LEVEL maps onto them.
pub(super) fn level_enabled(level: u32) -> bool {
    use tracing::Level;
    let Some(l) = crate::log::effective_level(std::env::var("FI_LOG_LEVEL").ok().as_deref()) else { return false };
    let rank = match l {
        Level::ERROR | Level::WARN => FI_LOG_WARN,
        Level::INFO => FI_LOG_INFO,
        Level::DEBUG | Level::TRACE => FI_LOG_DEBUG,
    };
    level < FI_LOG_MAX && level <= rank
}

pub(super) unsafe extern "C" fn core_log_enabled(_prov: *const fi_provider, level: fi_log_level, _subsys: fi_log_subsys) -> c_int {
    std::panic::catch_unwind(|| level_enabled(level) as c_int).unwrap_or(0)
}

pub(super) unsafe extern "C" fn core_log_ready(_prov: *const fi_provider, level: fi_log_level, _subsys: fi_log_subsys, showtime: *mut u64) -> c_int {
    std::panic::catch_unwind(|| {
        if !showtime.is_null() {
            // SAFETY: a caller's u64.
            unsafe { *showtime = 0 };
        }
        level_enabled(level) as c_int
    })
    .unwrap_or(0)
}

pub(super) const LEVELS: [&str; 4] = ["warn", "trace", "info", "debug"];
pub(super) const SUBSYS: [&str; 10] = ["core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr"];

/// The formatted `fi_log` line from capi/c/varargs.c.
///
/// # Safety
/// Pointers NULL or valid C strings / provider.
#[no_mangle]
pub unsafe extern "C" fn rsverbs_core_log(prov: *const fi_provider, level: c_int, subsys: c_int, func: *const c_char, line: c_int, msg: *const c_char) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: per the contract.
        let (pname, func, msg) = unsafe {
            let pname = if prov.is_null() { None } else { cstr_opt((*prov).name) };
            (pname, cstr_opt(func), cstr_opt(msg))
        };
        let lvl = LEVELS.get(level as usize).copied().unwrap_or("?");
        let sub = SUBSYS.get(subsys as usize).copied().unwrap_or("?");
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        eprint!(
            "libfabric:{}:{secs}:{}:{sub}:{}():{line}<{lvl}> {}",
            std::process::id(),
            pname.unwrap_or_else(|| "core".into()),
            func.unwrap_or_default(),
            msg.unwrap_or_default()
        );
    });
}
