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
//! * [`credits`]: per-peer flow control, send side, so a send never finds the
//!   receiver without a posted buffer.
//! * [`srq`]: the credit bank that shares an endpoint's receive pool among
//!   its peers; [`pool`]: the registered receive pool (on an SRQ) and send slots.
//!
//! Connection setup: each side puts a [`proto::Hello`] (its grant to the
//! peer, the most it will ever grant, the largest EAGER payload it takes,
//! and, from the connecting side, its endpoint name) in the rdma-cm private
//! data, attaches the new QP to its shared receive queue (or, without one,
//! posts the QP's own buffers of [`RdmConfig::bounce_size`] bytes), and
//! creates its `credits::PeerFlow::new(hello.grant, hello.max_credits)`; the
//! peer's eager limit is the smaller of both sides' eager sizes.
//!
//! How the pieces fit, per received bounce buffer (receive completion of
//! `n` bytes on the QP of peer `src`):
//! 1. `proto::decode(&buf[..n])`. On error: log, ignore its credit grant, go to 4.
//! 2. `flow[src].granted(msg.credits())` (and `recalled` for a recall).
//! 3. EAGER/RTS: `Matcher::arrive(Incoming::from_message(src, msg))`, carry
//!    out the action (copy / start reads / nothing if queued). FIN/NACK: finish
//!    the matching rendezvous send (FIN: success; NACK: error `err`). CREDIT:
//!    nothing more.
//! 4. `bank.arrived(src, release)`; once the bytes are out of the bounce
//!    buffer (copied, or the RTS's segment list taken): repost it and call
//!    `bank.reposted(src)`, which gives the credit to `src` or to a peer in need.
//! 5. Drain `flow[p].next_send(bank.share(p))` onto the QPs (also after every push).

pub mod auto;
pub mod credits;
pub mod ep;
pub mod hintmap;
pub mod idtable;
pub mod matching;
pub mod peer;
pub mod pool;
pub mod proto;
pub mod slab;
pub mod srq;

use credits::CreditConfig;

/// Environment variable: largest message sent eagerly (bytes).
pub const EAGER_SIZE_ENV: &str = "FI_RSVERBS_EAGER_SIZE";
/// Default eager threshold.
pub const DEFAULT_EAGER_SIZE: usize = 16384;
/// Environment variable: the most credits (receive buffers) one peer may hold.
pub const PEER_CREDITS_ENV: &str = "FI_RSVERBS_PEER_CREDITS";
/// Environment variable: bounce buffers in an RDM endpoint's shared receive
/// pool (default: the endpoint's rx_size); 0: no shared receive queue.
pub const SRQ_SIZE_ENV: &str = "FI_RSVERBS_SRQ_SIZE";
/// Environment variable: send slots (staging buffers) of an RDM endpoint.
pub const SEND_SLOTS_ENV: &str = "FI_RSVERBS_SEND_SLOTS";
/// Fault injection, for tests: `1` makes RDM endpoints ignore rdma-cm
/// DISCONNECTED events, as if every peer's DREQ were lost on the wire (a
/// crashed host, a partition). Soft-RoCE delivers packets between its own
/// addresses inside the kernel, past any packet filter, so the lab cannot
/// lose a DREQ otherwise. Logged at warning level when set.
pub const FAULT_LOSE_DISCONNECT_ENV: &str = "FI_RSVERBS_FAULT_LOSE_DISCONNECT";
/// Environment variable: for how long (ms) an RDM endpoint keeps trying to
/// reach a peer that nobody listens for yet (a refused first connection:
/// the peer's process is still starting). 0: fail at the first refusal.
pub const CONNECT_RETRY_ENV: &str = "FI_RSVERBS_CONNECT_RETRY_MS";
/// Default of `CONNECT_RETRY_ENV`.
pub const DEFAULT_CONNECT_RETRY_MS: u64 = 5000;
/// Smallest shared pool (room for the floors of a few peers).
pub const MIN_SRQ_SIZE: u32 = 16;
/// Default send slots per endpoint.
pub const DEFAULT_SEND_SLOTS: usize = 64;
/// Fewest send slots (one message and a CREDIT can always leave).
pub const MIN_SEND_SLOTS: usize = 4;

/// Settings of RDM endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmConfig {
    /// Messages up to this length go EAGER, longer ones by rendezvous (to a
    /// peer whose HELLO says it takes less, up to its limit). Zero-length
    /// messages are always eager. At most `proto::MAX_EAGER`. Also the
    /// largest EAGER payload our bounce buffers take (`bounce_size`).
    pub eager_size: usize,
    /// `FI_RSVERBS_PEER_CREDITS`, if set (and valid); else the default of
    /// the receive mode (`credits`).
    pub peer_credits: Option<CreditConfig>,
    /// Shared receive pool size: None = the endpoint's rx_size; Some(0) = no
    /// SRQ (per-connection receive buffers); else at least `MIN_SRQ_SIZE`.
    pub srq_size: Option<u32>,
    /// Send slots of an endpoint, shared by its connections.
    pub send_slots: usize,
    /// `FAULT_LOSE_DISCONNECT_ENV`: ignore DISCONNECTED (tests only).
    pub lose_disconnect: bool,
    /// `CONNECT_RETRY_ENV`: how long a refused first connection is retried.
    pub connect_retry_ms: u64,
}

impl Default for RdmConfig {
    fn default() -> Self {
        RdmConfig {
            eager_size: DEFAULT_EAGER_SIZE,
            peer_credits: None,
            srq_size: None,
            send_slots: DEFAULT_SEND_SLOTS,
            lose_disconnect: false,
            connect_retry_ms: DEFAULT_CONNECT_RETRY_MS,
        }
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
        let peer_credits = num(PEER_CREDITS_ENV).and_then(|n| {
            let n = u16::try_from(n).unwrap_or(u16::MAX);
            // CreditConfig::new logs why it refuses (the default applies).
            CreditConfig::new(n).ok()
        });
        let srq_size = num(SRQ_SIZE_ENV).map(|n| match n {
            0 => 0,
            n if n < MIN_SRQ_SIZE as u64 => {
                tracing::warn!("{SRQ_SIZE_ENV}={n} is below {MIN_SRQ_SIZE}; using {MIN_SRQ_SIZE}");
                MIN_SRQ_SIZE
            }
            n => u32::try_from(n).unwrap_or(u32::MAX).min(1 << 20),
        });
        let send_slots = match num(SEND_SLOTS_ENV) {
            None => DEFAULT_SEND_SLOTS,
            Some(n) => (n.min(1 << 16) as usize).max(MIN_SEND_SLOTS),
        };
        let lose_disconnect = num(FAULT_LOSE_DISCONNECT_ENV).is_some_and(|n| n != 0);
        if lose_disconnect {
            tracing::warn!("{FAULT_LOSE_DISCONNECT_ENV} is set: RDM endpoints ignore disconnects (fault injection)");
        }
        let connect_retry_ms = num(CONNECT_RETRY_ENV).map_or(DEFAULT_CONNECT_RETRY_MS, |n| n.min(3_600_000));
        RdmConfig { eager_size, peer_credits, srq_size, send_slots, lose_disconnect, connect_retry_ms }
    }

    /// The shared pool's size for an endpoint with `rx_size` (None: no SRQ).
    pub fn pool_size(&self, rx_size: usize) -> Option<u32> {
        match self.srq_size {
            Some(0) => None,
            Some(n) => Some(n),
            None => Some((rx_size.min(1 << 20) as u32).max(MIN_SRQ_SIZE)),
        }
    }

    pub fn from_env() -> RdmConfig {
        RdmConfig::from_lookup(|n| std::env::var(n).ok().filter(|s| !s.is_empty()))
    }

    /// The process's settings (read from the environment once).
    pub fn get() -> &'static RdmConfig {
        static CFG: once_cell::sync::Lazy<RdmConfig> = once_cell::sync::Lazy::new(RdmConfig::from_env);
        &CFG
    }

    /// The credit settings of an endpoint: `FI_RSVERBS_PEER_CREDITS` if set,
    /// else `DEFAULT_SHARED_CREDITS` with a shared receive pool (`shared`)
    /// and `DEFAULT_CREDITS` (each connection's own buffers) without.
    pub fn credits(&self, shared: bool) -> CreditConfig {
        self.peer_credits.unwrap_or_else(|| {
            let n = if shared { credits::DEFAULT_SHARED_CREDITS } else { credits::DEFAULT_CREDITS };
            CreditConfig::new(n).expect("valid default")
        })
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
        assert_eq!(c.peer_credits, None);
        assert_eq!(c.credits(true).bufs_per_peer, 128);
        assert_eq!(c.credits(true).return_threshold, 64);
        assert_eq!(c.credits(false), CreditConfig::default());
        assert_eq!(c.credits(false).bufs_per_peer, 32);
        assert_eq!(c.bounce_size(), 40 + 16384);
        assert!(c.is_eager(0) && c.is_eager(16384) && !c.is_eager(16385));

        let c = RdmConfig::from_lookup(lookup(&[(EAGER_SIZE_ENV, "0"), (PEER_CREDITS_ENV, "8")]));
        assert_eq!(c.eager_size, 0);
        assert!(c.is_eager(0) && !c.is_eager(1), "zero-length messages stay eager");
        assert_eq!(c.bounce_size(), proto::MAX_RTS_LEN, "room for the largest RTS");
        assert_eq!(c.credits(true), CreditConfig { bufs_per_peer: 8, return_threshold: 4 });
        assert_eq!(c.credits(false), c.credits(true), "set: both modes");

        let c = RdmConfig::from_lookup(lookup(&[(EAGER_SIZE_ENV, "99999999"), (PEER_CREDITS_ENV, "1")]));
        assert_eq!(c.eager_size, proto::MAX_EAGER);
        assert_eq!(c.peer_credits, None, "too few buffers: the defaults");
        assert_eq!(c.credits(true).bufs_per_peer, 128);
        let c = RdmConfig::from_lookup(lookup(&[(EAGER_SIZE_ENV, "lots"), (PEER_CREDITS_ENV, "1000000")]));
        assert_eq!(c.eager_size, DEFAULT_EAGER_SIZE);
        assert_eq!(c.credits(true).bufs_per_peer, u16::MAX);

        let c = RdmConfig::from_lookup(lookup(&[]));
        assert_eq!((c.srq_size, c.send_slots), (None, DEFAULT_SEND_SLOTS));
        assert!(!c.lose_disconnect, "fault injection is off unless asked");
        assert!(RdmConfig::from_lookup(lookup(&[(FAULT_LOSE_DISCONNECT_ENV, "1")])).lose_disconnect);
        assert!(!RdmConfig::from_lookup(lookup(&[(FAULT_LOSE_DISCONNECT_ENV, "0")])).lose_disconnect);
        assert_eq!(c.connect_retry_ms, DEFAULT_CONNECT_RETRY_MS);
        assert_eq!(RdmConfig::from_lookup(lookup(&[(CONNECT_RETRY_ENV, "0")])).connect_retry_ms, 0, "0: no retries");
        assert_eq!(RdmConfig::from_lookup(lookup(&[(CONNECT_RETRY_ENV, "soon")])).connect_retry_ms, DEFAULT_CONNECT_RETRY_MS);
        assert_eq!(c.pool_size(384), Some(384), "the pool follows rx_size");
        assert_eq!(c.pool_size(4), Some(MIN_SRQ_SIZE));
        let c = RdmConfig::from_lookup(lookup(&[(SRQ_SIZE_ENV, "0"), (SEND_SLOTS_ENV, "1")]));
        assert_eq!(c.pool_size(384), None, "0: no shared receive queue");
        assert_eq!(c.send_slots, MIN_SEND_SLOTS);
        let c = RdmConfig::from_lookup(lookup(&[(SRQ_SIZE_ENV, "5")]));
        assert_eq!(c.pool_size(384), Some(MIN_SRQ_SIZE));
        let c = RdmConfig::from_lookup(lookup(&[(SRQ_SIZE_ENV, "1000")]));
        assert_eq!(c.pool_size(384), Some(1000));
    }
}
