//! Logging through `tracing`, set by libfabric's `FI_LOG_LEVEL` (warn, info,
//! debug, trace). As in libfabric, the default is `warn`; `FI_LOG_LEVEL=off`
//! (or `none`) silences rsverbs.

use once_cell::sync::OnceCell;
use tracing::Level;

static INIT: OnceCell<()> = OnceCell::new();

/// The level `FI_LOG_LEVEL` asks for, if any.
pub fn level_from_env(v: Option<&str>) -> Option<Level> {
    match v?.trim().to_ascii_lowercase().as_str() {
        "warn" | "warning" => Some(Level::WARN),
        "info" => Some(Level::INFO),
        "debug" => Some(Level::DEBUG),
        "trace" => Some(Level::TRACE),
        "error" => Some(Level::ERROR),
        _ => None,
    }
}

/// The level in force: `FI_LOG_LEVEL`, else libfabric's default (warn);
/// `None` when logging is switched off.
pub fn effective_level(v: Option<&str>) -> Option<Level> {
    match v.map(|s| s.trim().to_ascii_lowercase()) {
        Some(s) if s == "off" || s == "none" => None,
        Some(s) => level_from_env(Some(&s)).or(Some(Level::WARN)),
        None => Some(Level::WARN),
    }
}

/// Installs the stderr logger once per process (no-op if another global
/// subscriber is already installed, e.g. by a Rust program embedding us).
pub fn init() {
    INIT.get_or_init(|| {
        let lvl = effective_level(std::env::var("FI_LOG_LEVEL").ok().as_deref());
        if let Some(lvl) = lvl {
            let sub = tracing_subscriber::fmt()
                .with_max_level(lvl)
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(false)
                .without_time()
                .finish();
            let _ = tracing::subscriber::set_global_default(sub);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn fi_log_level_values() {
        assert_eq!(level_from_env(Some("warn")), Some(Level::WARN));
        assert_eq!(level_from_env(Some("Debug")), Some(Level::DEBUG));
        assert_eq!(level_from_env(Some("trace")), Some(Level::TRACE));
        assert_eq!(level_from_env(Some("bogus")), None);
        assert_eq!(level_from_env(None), None);
    }

    #[test]
    fn default_is_warn_like_libfabric() {
        assert_eq!(effective_level(None), Some(Level::WARN));
        assert_eq!(effective_level(Some("bogus")), Some(Level::WARN));
        assert_eq!(effective_level(Some("debug")), Some(Level::DEBUG));
        assert_eq!(effective_level(Some("off")), None);
    }
}
