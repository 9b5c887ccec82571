//! The device-independent core of native `FI_EP_RDM` endpoints: reliable,
//! connectionless messaging addressed by `fi_addr_t`, carried over one RC
//! queue pair per peer. Nothing here touches verbs; the endpoint code wires it
//! to QPs. The protocol is specified in docs/rdm-protocol.md.
//!
//! * [`proto`]: the versioned wire format (header, EAGER, RNDV_RTS/FIN/NACK,
//!   CREDIT), with hostile-input-safe decoding.
//! * [`matching`]: posted and unexpected queues for FI_MSG and FI_TAGGED,
//!   multi-receive buffers, peek/claim/discard, cancel, truncation. It returns
//!   [`matching::Action`]s for the caller to carry out.
//! * [`credits`]: per-peer flow control, so a send never finds the receiver
//!   without a posted buffer.
//!
//! Connection setup: each side puts a [`proto::Hello`] (its buffers per peer
//! and, from the connecting side, its endpoint name) in the rdma-cm private
//! data, posts `bufs_per_peer` bounce buffers of [`RdmConfig::bounce_size`]
//! bytes on the new QP before it can receive, and creates its
//! `credits::PeerFlow::new(local, hello.bufs_per_peer)`.
//!
//! How the pieces fit, per received bounce buffer (receive completion of
//! `n` bytes on the QP of peer `src`):
//! 1. `proto::decode(&buf[..n])`. On error: log, repost the buffer, count it
//!    with `PeerFlow::reposted(1)`, ignore its credit grant, stop.
//! 2. `flow[src].granted(msg.credits())`.
//! 3. EAGER/RTS: `Matcher::arrive(Incoming::from_message(src, msg))`, carry
//!    out the action (copy / start reads / nothing if queued). FIN/NACK: finish
//!    the matching rendezvous send (FIN: success; NACK: error `err`). CREDIT:
//!    nothing more.
//! 4. Once the bytes are out of the bounce buffer (copied, or the RTS's segment
//!    list taken): repost it and call `flow[src].reposted(1)`.
//! 5. Drain `flow[src].next_send()` onto the QP (also after every push).

pub mod auto;
pub mod credits;
pub mod ep;
pub mod matching;
pub mod peer;
pub mod proto;

use credits::CreditConfig;

/// Environment variable: largest message sent eagerly (bytes).
pub const EAGER_SIZE_ENV: &str = "FI_RSVERBS_EAGER_SIZE";
/// Default eager threshold.
pub const DEFAULT_EAGER_SIZE: usize = 16384;
/// Environment variable: receive buffers an RDM endpoint posts for each peer.
pub const PEER_CREDITS_ENV: &str = "FI_RSVERBS_PEER_CREDITS";

/// Settings of RDM endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmConfig {
    /// Messages up to this length go EAGER, longer ones by rendezvous.
    /// Zero-length messages are always eager. At most `proto::MAX_EAGER`.
    pub eager_size: usize,
    pub credits: CreditConfig,
}

impl Default for RdmConfig {
    fn default() -> Self {
        RdmConfig { eager_size: DEFAULT_EAGER_SIZE, credits: CreditConfig::default() }
    }
}

impl RdmConfig {
    /// Reads the knobs through `get` (the environment in production); bad
    /// values are logged and replaced by defaults or clamped.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> RdmConfig {
        let num = |name: &str| -> Option<u64> {
            let v = get(name)?;
            match v.trim().parse::<u64>() {
                Ok(n) => Some(n),
                Err(_) => {
                    tracing::warn!("ignoring {name}={v}: not a non-negative integer");
                    None
                }
            }
        };
        let eager_size = match num(EAGER_SIZE_ENV) {
            Some(n) if n > proto::MAX_EAGER as u64 => {
                tracing::warn!("{EAGER_SIZE_ENV}={n} exceeds the protocol's {}; clamped", proto::MAX_EAGER);
                proto::MAX_EAGER
            }
            Some(n) => n as usize,
            None => DEFAULT_EAGER_SIZE,
        };
        let credits = match num(PEER_CREDITS_ENV) {
            None => CreditConfig::default(),
            Some(n) => {
                let n = u16::try_from(n).unwrap_or(u16::MAX);
                // CreditConfig::new logs why it refuses.
                CreditConfig::new(n).unwrap_or_default()
            }
        };
        RdmConfig { eager_size, credits }
    }

    pub fn from_env() -> RdmConfig {
        RdmConfig::from_lookup(|n| std::env::var(n).ok().filter(|s| !s.is_empty()))
    }

    /// The process's settings (read from the environment once).
    pub fn get() -> &'static RdmConfig {
        static CFG: once_cell::sync::Lazy<RdmConfig> = once_cell::sync::Lazy::new(RdmConfig::from_env);
        &CFG
    }

    /// Whether a message of `len` bytes goes EAGER (else RNDV_RTS).
    pub fn is_eager(&self, len: usize) -> bool {
        len <= self.eager_size
    }

    /// Size of each receive bounce buffer: a header plus the larger of an
    /// eager payload and a full RTS segment list.
    pub fn bounce_size(&self) -> usize {
        proto::HEADER_LEN + self.eager_size.max(proto::MAX_SEGS * proto::SEG_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string())
    }

    #[test]
    fn config_knobs() {
        let c = RdmConfig::from_lookup(lookup(&[]));
        assert_eq!(c, RdmConfig::default());
        assert_eq!(c.eager_size, 16384);
        assert_eq!(c.credits.bufs_per_peer, 32);
        assert_eq!(c.bounce_size(), 40 + 16384);
        assert!(c.is_eager(0) && c.is_eager(16384) && !c.is_eager(16385));

        let c = RdmConfig::from_lookup(lookup(&[(EAGER_SIZE_ENV, "0"), (PEER_CREDITS_ENV, "8")]));
        assert_eq!(c.eager_size, 0);
        assert!(c.is_eager(0) && !c.is_eager(1), "zero-length messages stay eager");
        assert_eq!(c.bounce_size(), proto::MAX_RTS_LEN, "room for the largest RTS");
        assert_eq!(c.credits, CreditConfig { bufs_per_peer: 8, return_threshold: 4 });

        let c = RdmConfig::from_lookup(lookup(&[(EAGER_SIZE_ENV, "99999999"), (PEER_CREDITS_ENV, "1")]));
        assert_eq!(c.eager_size, proto::MAX_EAGER);
        assert_eq!(c.credits, CreditConfig::default(), "too few buffers: default");
        let c = RdmConfig::from_lookup(lookup(&[(EAGER_SIZE_ENV, "lots"), (PEER_CREDITS_ENV, "1000000")]));
        assert_eq!(c.eager_size, DEFAULT_EAGER_SIZE);
        assert_eq!(c.credits.bufs_per_peer, u16::MAX);
    }
}
