//! Native `FI_EP_RDM` endpoints: reliable, connectionless messaging by
//! `fi_addr_t`, carried over one RC queue pair per peer (docs/rdm-protocol.md).
//!
//! Structure:
//! * `fi_enable` binds a listening rdma-cm id (on `info.src_addr`, or an
//!   address of the domain's device, port 0: `fi_getname` gives the result),
//!   opens an internal rdma-cm event channel and one internal verbs CQ (with a
//!   completion channel) for all peer QPs.
//! * Connections are made on demand: the first operation to an `fi_addr`
//!   resolves the peer's address, creates the QP on the internal CQ, posts the
//!   bounce receive buffers and connects with a HELLO (our listening address
//!   and buffers per peer) as private data. Operations queue meanwhile.
//!   Incoming requests are accepted by the endpoint itself; simultaneous
//!   connects are settled by `peer::decide_request`.
//! * Progress is manual: rdma-cm events, internal completions, credit returns
//!   and rendezvous reads advance inside `fi_cq_read`/`fi_cq_sread`/
//!   `fi_trywait` of the CQs bound to the endpoint (`progress::Progress`), and in
//!   every data call. User completions are made in software.
//!
//! Everything runs under one lock per endpoint.
//!
//! Files, by concern (as libfabric's `prov/rxm` splits `rxm_conn.c`,
//! `rxm_cq.c`, `rxm_msg.c`, `rxm_rma.c`, ...):
//! * `mod.rs` — the endpoint's state, `fi_endpoint`/bind/`fi_enable`/close;
//! * `conn.rs` — connections and the handshake;
//! * `progress.rs` — progress, the internal CQ, completions to the application;
//! * `send.rs` — eager and rendezvous sends, queued operations;
//! * `recv.rs` — posted receives, arrivals, matching glue, rendezvous reads;
//! * `rma.rs` — RMA and atomics.

mod conn;
mod progress;
mod recv;
mod rma;
mod send;

use conn::*;
use recv::*;

use rustc_hash::FxHashMap as HashMap;
use super::hintmap::HintMap;
use super::idtable::IdTable;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use once_cell::sync::OnceCell;
use parking_lot::Mutex;

use super::credits::{Outgoing, PeerFlow};
use super::pool::{RecvPool, SendPool};
use super::srq::{Arrival, Bank, Share};
use super::slab::Slab;
use super::matching::{Action, Body, Delivery, Incoming, Kind, Matcher, RecvRequest};
use super::peer::*;
use super::proto::{self, Envelope, Hello, Message, Segment};
use super::{RdmConfig, FAULT_LOSE_DISCONNECT_ENV};
use crate::av::Av;
use crate::fi::consts::*;
use crate::verbs::mem::{copy_to_iovs, iov_range, sub_iov, RegBuf};
use crate::cntr::{Cntr, CntrBinds, CntrSet};
use crate::cq::{Completion, Cq, CqErr};
use crate::progress::Progress;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::Hold;
use crate::info::Info;
use crate::mr::keys_of;
use crate::mrcache::{MrCache, Pin};
use crate::sys;
use crate::verbs::cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel};
use crate::verbs::{self, access, send_flags, wc_opcode, wc_status, CompChannel, Iov, Pd, QpCaps, SendOp, Wc};

/// A peer none of whose messages arrived for this long (up to twice it) is
/// idle: the shared pool's bank holds it to the floor of credits
/// (`Bank::sweep_idle`), and its next message gives it the others' quota.
const IDLE_MS: u64 = 250;

/// Token of the listening cm id (connection ids start at 1).
const LISTEN_TOKEN: u64 = 0;
/// Send-queue requests per connection besides send slots (RDMA READ/WRITE, atomics).
const WR_OPS: usize = 32;
/// Most consumed shared-pool buffers `handle_recv` sets aside before posting
/// them again (`Inner::flush_reposts`); at most an eighth of the pool.
const REPOST_BATCH: usize = 16;
/// Busy progress passes (each found a completion) a consumed shared-pool
/// buffer may wait for its repost before the next pass posts it anyway.
const REPOST_PASSES: u32 = 16;
/// Peers a tick of the coarse clock visits in turn besides the `pending`
/// ones (`Inner::drain_all`), whatever their number.
const SWEEP_PEERS: usize = 4;
/// Progress passes after one that found completions that take the time
/// of the last clock reading instead of reading the clock again.
const CLOCK_SKIPS: u32 = 15;
/// How long a failed connection's QP is kept (in the error state, consuming
/// nothing) before it is destroyed and the receive buffers promised to it are
/// free again: its completions are all polled by then.
const GRAVE_MS: u64 = 200;
/// Largest RDMA READ a rendezvous issues: longer messages are read in
/// several requests, posted together (smaller requests pipeline, and a lost
/// packet costs the retransmission of one chunk, not of the whole message).
const READ_CHUNK: usize = 1 << 20;
/// RDMA READs of rendezvous receives in flight per connection (the rest wait
/// in the peer's read queue): bounds the burst of read responses.
const READS_OUT: usize = 8;
/// rdma-cm resolution timeouts.
const RESOLVE_MS: i32 = 2000;

fn ioerr(e: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(e)
}

/// A posted receive: the application's buffers and flags, kept in the
/// matcher's queue entry or filed under its handle (`Inner::spill_recvs`).
/// Its context is the matcher's (`Delivery::context`).
struct RecvRec {
    iov: IovVec,
    flags: u64,
    /// Every non-empty buffer has a local key (rendezvous reads land in it).
    keyed: bool,
}

/// Who gets the buffers a growth of the shared pool adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grow {
    /// The quotas (the bank rebalances; waiting peers first).
    Quotas,
    /// The peers stuck below their floor, directly.
    Stuck,
    /// Nobody yet: kept free for the connections waiting to start.
    Free,
}

/// What `Inner::send_direct` did with a message.
enum Direct {
    /// On the wire.
    Posted,
    /// It must go through the peer's queue (`Peer::push`), or by rendezvous
    /// (longer than the peer's eager limit).
    Queue,
    /// Posting failed: the connection must fail (which reports the message).
    Failed(u32, i32),
    /// On the wire unsignaled, and done as far as the application sees (a
    /// silent send: nothing to report unless its connection fails).
    Retired,
}

/// What draining peers (`Inner::drain_peer`) hands back, and what it needs
/// besides the peer's own state.
struct Drained<'a> {
    /// Operations done at once (failed, or retired unsignaled), reported
    /// after the drain.
    done: Vec<(TxDone, Option<i32>)>,
    /// An EAGER message queued before the peer's limit was known, and longer
    /// than it, leaves as an RTS: its buffer is registered here and the send
    /// waits in `rndv_sends` for FIN/NACK.
    pd: &'a Arc<Pd>,
    mrc: &'a Arc<MrCache>,
    rndv_sends: &'a mut HashMap<(SocketAddr, u64), RndvSend>,
}




/// Sizes of the endpoint's and its connections' resources.
#[derive(Debug, Clone, Copy)]
struct Geo {
    /// The most credits a peer may hold; without an SRQ, also each
    /// connection's own receive buffers.
    peer_bufs: usize,
    /// Bytes between slots (receive buffers and send slots).
    stride: usize,
    /// Send slots of the endpoint (any one connection may use all of them).
    nslots: usize,
    /// Largest RDMA READ of a rendezvous (at most the port's max message size).
    max_chunk: usize,
    /// Largest RMA operation (the port's max message size).
    max_rma: usize,
    /// RDMA READs of rendezvous receives in flight per connection.
    reads_out: usize,
    inline_req: u32,
    send_sge: u32,
    /// Our eager size: the largest EAGER payload our bounce buffers take
    /// (our HELLOs tell the peers), and the most we send EAGER.
    eager_size: usize,
}

impl Geo {
    /// Completion-queue entries one connection adds (its own receive buffers
    /// without an SRQ, its other send-queue requests, and its unsignaled
    /// sends, which complete when flushed; the shared pool and the send
    /// slots are counted once for the endpoint).
    fn cqes(&self, shared: bool) -> usize {
        WR_OPS + UNSIG_MAX + if shared { 0 } else { self.peer_bufs }
    }
}

/// Connections that failed, kept with their QPs in the error state until
/// they surely consume nothing more (`GRAVE_MS`): then the QPs are
/// destroyed, their send slots freed, and `limbo` receive buffers (promised
/// to the peer, not consumed by its last messages) are free again.
struct Grave {
    conns: Vec<(u32, Conn)>,
    limbo: u32,
    until: u64,
}

/// The endpoint's network side (after `fi_enable`). Field order is drop
/// order: connections (and their QPs) before the listener, the channel last.
struct Net {
    /// Connections by id: the id is the table's (a slot and its
    /// generation), carried in work-request ids and rdma-cm tokens.
    conns: IdTable<Conn>,
    graves: Vec<Grave>,
    /// QP number -> connection: completions from the shared receive queue
    /// name their QP only.
    qpn: HintMap<u32, u32>,
    peers: HintMap<SocketAddr, Peer>,
    /// Registrations made for operations on buffers without descriptors
    /// (RMA, atomics), by `TxDone::pin`: released when they complete.
    pins: HashMap<u32, Vec<Pin>>,
    next_pin: u32,
    rndv_sends: HashMap<(SocketAddr, u64), RndvSend>,
    /// Rendezvous requests the matcher holds, by our local id: (peer, its msg_id).
    rndv_in: HashMap<u64, (SocketAddr, u64)>,
    reads: HashMap<u64, ReadOp>,
    /// RMA operations longer than the device's largest message, moving in
    /// pieces (same id space as `reads`: `next_read`).
    splits: HashMap<u64, SplitRma>,
    next_lid: u64,
    next_read: u64,
    /// When the rdma-cm channel was last read (`coarse_ms`).
    cm_checked: u64,
    /// Passes that may still reuse `cm_checked` as the time instead of
    /// reading the clock (set after a pass that found completions).
    clock_skips: u32,
    /// An operation asked for a progress pass, or a connection failed: the
    /// next pass walks every peer (`drain_all(true)`), not only `pending`.
    dirty: bool,
    /// A connection is being set up: set when one is created, recomputed
    /// after every pass that drains while it is set (never walked otherwise).
    settling: bool,
    /// Peers the next partial drain visits (each once: `Peer::pending`):
    /// peers with work a drain could not post (invariant: every peer with
    /// queued work is here, or will be visited by a full walk first), peers
    /// whose credits may have become due (buffers of theirs reposted, credits
    /// the bank served them), peers work was queued for outside a drain. A
    /// full walk over every peer runs instead when an operation asked for
    /// progress (`dirty`), on connection events, while connections are set
    /// up and before a waiter sleeps; a tick of the coarse clock adds
    /// `SWEEP_PEERS` peers in turn (`sweep_at`). Otherwise a pass costs the
    /// peers listed here, not every peer of the endpoint.
    pending: Vec<SocketAddr>,
    /// `pending`'s twin: the list a partial drain walks while it lists
    /// peers again (the two swap, so neither allocates once grown).
    pending_walk: Vec<SocketAddr>,
    /// Where the next tick's sweep (`SWEEP_PEERS`) starts in `peers`.
    sweep_at: usize,
    /// Shared-pool buffers whose message is consumed, to post again and
    /// count in the bank (with the peer whose message each held, and the
    /// credits the message released), by the batch: when
    /// `Inner::flush_reposts` says.
    /// The last field: the message was data (not a CREDIT), which tells the
    /// bank the peer is not idle (`Bank::heard`).
    repost: Vec<(u32, SocketAddr, u16, bool)>,
    /// Busy passes since `repost` was last flushed (`REPOST_PASSES`).
    repost_age: u32,
    /// Since when a peer has been stuck below its credit floor (`coarse_ms`).
    starved_since: Option<u64>,
    /// When the shared pool's bank last looked for idle peers (`Bank::sweep_idle`).
    idle_swept: u64,
    /// Since when a connection we make has waited for free receive buffers.
    pool_wait_since: Option<u64>,
    /// Peers whose first connection was refused (nobody listens yet), with
    /// when (`coarse_ms`) to try again; their queues wait meanwhile.
    redial: Vec<(SocketAddr, u64)>,
    /// Wakes a waiter on the endpoint's fd when the next `redial` is due;
    /// `timer_armed`: whether it is set (so that arming costs no system call
    /// when nothing waits to be retried).
    timer: sys::TimerFd,
    timer_armed: bool,
    /// Kept alive: the endpoint listens as long as it is enabled.
    _listener: CmId,
    local: SocketAddr,
    name: Vec<u8>,
    /// Drawn at fi_enable; carried in our HELLOs (see `proto::Hello`).
    incarnation: u64,
    cq: Arc<verbs::Cq>,
    comp: Arc<CompChannel>,
    cq_need: usize,
    pd: Arc<Pd>,
    /// The domain's registration cache (`mrcache`), and whether the domain
    /// demands descriptors (`FI_MR_LOCAL`: buffers without one are refused).
    mrc: Arc<MrCache>,
    mr_local: bool,
    geo: Geo,
    /// The shared receive pool (None: the device has no SRQ, or
    /// `FI_RSVERBS_SRQ_SIZE=0`; each connection has its own buffers).
    rx: Option<RecvPool>,
    send: SendPool,
    /// The fd `wait_fd` reports (the CQ channel, the rdma-cm channel and `timer`).
    _wait: sys::Epoll,
    channel: EventChannel,
}

struct Inner {
    enabled: bool,
    closed: bool,
    av: Option<Hold<Av>>,
    tx_cq: Option<(Hold<Cq>, bool)>,
    rx_cq: Option<(Hold<Cq>, bool)>,
    /// Bound counters, and (from `fi_enable`) the set completions bump.
    cntr_binds: CntrBinds,
    cntrs: CntrSet,
    matcher: Matcher<RecvRec>,
    /// The AV generation the matcher's unknown-source messages were last
    /// resolved against (`Matcher::resolve_unknown`).
    src_gen: u64,
    /// Posted receives that consume a message, by matcher handle.
    recvs: Slab<RecvRec>,
    /// `lookup`'s last answer: (AV generation, fi_addr, address).
    last_dest: Option<(u64, u64, SocketAddr)>,
    tx_count: usize,
    rx_count: usize,
    name: Option<SocketAddr>,
    net: Option<Net>,
}

/// Static facts the inner state needs.
struct Ctx {
    caps: u64,
    tx_size: usize,
    rx_size: usize,
    tx_iov_limit: usize,
    rx_iov_limit: usize,
    inject_size: usize,
    max_msg: usize,
    cfg: RdmConfig,
    max_rd_atom: (i32, i32),
}

pub struct RdmEp {
    pub domain: Hold<Domain>,
    pub info: Info,
    ctx: Ctx,
    fid: AtomicUsize,
    /// `FI_GETOPSFLAG`/`FI_SETOPSFLAG` (`fi_control`), the defaults of calls without flags.
    tx_op_flags: AtomicU64,
    rx_op_flags: AtomicU64,
    inner: Mutex<Inner>,
    wait_fd: OnceCell<RawFd>,
    self_ref: OnceCell<Weak<RdmEp>>,
    /// `FI_PROGRESS_AUTO` (asked in the info): the progress thread, from `fi_enable`.
    auto: Mutex<Option<super::auto::AutoProgress>>,
}

impl std::fmt::Debug for RdmEp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmEp").finish()
    }
}

/// A send (`fi_send*`, `fi_tsend*`, `fi_inject*`) as the C shims hand it over.
pub struct SendReq<'a> {
    pub iov: &'a [Iov],
    /// The application's descriptors, one per iov (0: none).
    pub descs: &'a [u64],
    pub dest: u64,
    pub tag: Option<u64>,
    pub data: Option<u64>,
    pub context: u64,
    pub flags: u64,
    /// `fi_inject*`: no completion at all.
    pub no_completion: bool,
}

/// A receive (`fi_recv*`, `fi_trecv*`).
pub struct RecvReq<'a> {
    pub iov: &'a [Iov],
    pub descs_ok: bool,
    pub src: u64,
    /// Tagged: (tag, ignore).
    pub tag: Option<(u64, u64)>,
    pub context: u64,
    pub flags: u64,
}

/// An RMA operation by fi_addr.
pub struct RmaReq<'a> {
    pub read: bool,
    pub iov: &'a [Iov],
    pub descs_ok: bool,
    pub dest: u64,
    pub raddr: u64,
    pub rkey: u64,
    pub data: Option<u64>,
    pub context: u64,
    pub flags: u64,
    pub no_completion: bool,
}

/// A 64-bit atomic by fi_addr (fetch-and-add or compare-and-swap).
pub struct AtomicReq {
    pub dest: u64,
    pub raddr: u64,
    pub rkey: u64,
    /// Where the old value lands (8 bytes); None: not wanted (`fi_atomic`).
    pub result: Option<Iov>,
    /// `result` came with a descriptor (else, without `FI_MR_LOCAL`, it is
    /// registered through the cache).
    pub result_keyed: bool,
    /// `fi_inject_atomic`: no completion.
    pub no_completion: bool,
    pub op: AtomicOp,
    pub context: u64,
    pub flags: u64,
}

#[derive(Debug, Clone, Copy)]
pub enum AtomicOp {
    FetchAdd(u64),
    CompSwap { compare: u64, swap: u64 },
}

impl RdmEp {
    /// `fi_endpoint` for `FI_EP_RDM`.
    pub fn open(domain: &Arc<Domain>, info: &Info) -> FiResult<Arc<RdmEp>> {
        if info.ep.type_ != FI_EP_RDM {
            return crate::fail!(FiError::INVAL, "fi_endpoint: endpoint type {} is not FI_EP_RDM", info.ep.type_);
        }
        if info.handle.is_some() {
            return crate::fail!(FiError::INVAL, "fi_endpoint: RDM endpoints are not created from connection requests");
        }
        let cfg = *RdmConfig::get();
        let cfgv = crate::config::get();
        let tx_iov_limit = if info.tx.iov_limit == 0 { cfgv.tx_iov_limit } else { info.tx.iov_limit };
        if tx_iov_limit > proto::MAX_SEGS {
            return crate::fail!(FiError::INVAL, "fi_endpoint: tx iov_limit {tx_iov_limit} exceeds {}", proto::MAX_SEGS);
        }
        let inject_size = if info.tx.inject_size == 0 { cfg.eager_size } else { info.tx.inject_size };
        if inject_size > cfg.eager_size {
            return crate::fail!(FiError::INVAL, "fi_endpoint: inject_size {inject_size} exceeds the eager size {}", cfg.eager_size);
        }
        let caps = if info.caps == 0 { crate::info::RDM_CAPS } else { info.caps };
        let ep = Arc::new(RdmEp {
            domain: Hold::new(domain),
            info: info.clone(),
            ctx: Ctx {
                caps,
                tx_size: if info.tx.size == 0 { cfgv.tx_size } else { info.tx.size },
                rx_size: if info.rx.size == 0 { cfgv.rx_size } else { info.rx.size },
                tx_iov_limit: tx_iov_limit.max(1),
                rx_iov_limit: if info.rx.iov_limit == 0 { cfgv.rx_iov_limit } else { info.rx.iov_limit }.max(1),
                inject_size,
                max_msg: if info.ep.max_msg_size == 0 { proto::MAX_MSG_LEN as usize } else { info.ep.max_msg_size },
                cfg,
                max_rd_atom: (domain.attr.max_qp_init_rd_atom, domain.attr.max_qp_rd_atom),
            },
            fid: AtomicUsize::new(0),
            tx_op_flags: AtomicU64::new(info.tx.op_flags),
            rx_op_flags: AtomicU64::new(info.rx.op_flags),
            inner: Mutex::new(Inner {
                enabled: false,
                closed: false,
                av: None,
                tx_cq: None,
                rx_cq: None,
                cntr_binds: CntrBinds::default(),
                cntrs: CntrSet::default(),
                matcher: Matcher::default(),
                src_gen: 0,
                recvs: Slab::default(),
                last_dest: None,
                tx_count: 0,
                rx_count: 0,
                name: info.src_addr,
                net: None,
            }),
            wait_fd: OnceCell::new(),
            self_ref: OnceCell::new(),
            auto: Mutex::new(None),
        });
        let _ = ep.self_ref.set(Arc::downgrade(&ep));
        Ok(ep)
    }

    pub fn set_fid(&self, fid: usize) {
        self.fid.store(fid, Ordering::Release);
    }

    pub fn caps(&self) -> u64 {
        self.ctx.caps
    }

    pub fn inject_size(&self) -> usize {
        self.ctx.inject_size
    }

    /// `fi_ep_bind` to a CQ.
    pub fn bind_cq(&self, cq: &Arc<Cq>, flags: u64) -> FiResult<()> {
        let mut g = self.inner.lock();
        if g.enabled || g.closed {
            return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
        }
        let g = &mut *g;
        crate::cq::bind_cq(self.domain.get(), &mut g.tx_cq, &mut g.rx_cq, cq, flags)
    }

    /// `fi_ep_bind` to a counter (`FI_SEND`/`FI_RECV`/`FI_READ`/`FI_WRITE`).
    pub fn bind_cntr(&self, cntr: &Arc<Cntr>, flags: u64) -> FiResult<()> {
        let mut g = self.inner.lock();
        if g.enabled || g.closed {
            return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
        }
        if !Arc::ptr_eq(cntr.domain.get(), self.domain.get()) {
            return crate::fail!(FiError::DOMAIN, "fi_ep_bind: counter belongs to another domain");
        }
        g.cntr_binds.bind(cntr, flags)
    }

    /// `fi_ep_bind` to an address vector.
    pub fn bind_av(&self, av: &Arc<Av>, flags: u64) -> FiResult<()> {
        let mut g = self.inner.lock();
        let enabled = g.enabled || g.closed;
        crate::av::bind_av(&mut g.av, enabled, self.domain.get(), av, av.domain.get(), flags)
    }

    /// `fi_setname` (before `fi_enable`): the address to listen on.
    pub fn setname(&self, a: SocketAddr) -> FiResult<()> {
        let mut g = self.inner.lock();
        if g.enabled || g.closed {
            return crate::fail!(FiError::OPBADSTATE, "fi_setname: endpoint already enabled");
        }
        g.name = Some(a);
        Ok(())
    }

    /// `fi_getname`: the listening address once enabled (before: the address
    /// it will listen on, if that is fully known).
    pub fn getname(&self) -> Option<SocketAddr> {
        let g = self.inner.lock();
        match &g.net {
            Some(n) => Some(n.local),
            None => g.name.filter(|a| !a.ip().is_unspecified() && a.port() != 0),
        }
    }

    // The default op flags are read by every data call without flags: an
    // atomic load, not a lock of the endpoint.
    pub fn tx_op_flags(&self) -> u64 {
        self.tx_op_flags.load(Ordering::Relaxed)
    }
    pub fn rx_op_flags(&self) -> u64 {
        self.rx_op_flags.load(Ordering::Relaxed)
    }
    pub fn set_tx_op_flags(&self, f: u64) {
        self.tx_op_flags.store(f, Ordering::Relaxed);
    }
    pub fn set_rx_op_flags(&self, f: u64) {
        self.rx_op_flags.store(f, Ordering::Relaxed);
    }

    /// `FI_OPT_MIN_MULTI_RECV`.
    pub fn min_multi_recv(&self) -> usize {
        self.inner.lock().matcher.min_multi_recv()
    }
    pub fn set_min_multi_recv(&self, n: usize) {
        self.inner.lock().matcher.set_min_multi_recv(n);
    }

    /// `fi_enable`.
    pub fn enable(&self) -> FiResult<()> {
        let mut g = self.inner.lock();
        if g.enabled || g.closed {
            return crate::fail!(FiError::OPBADSTATE, "fi_enable: endpoint already enabled");
        }
        if g.av.is_none() {
            return crate::fail!(FiError(FI_ENOAV), "fi_enable: RDM endpoints need an address vector bound first");
        }
        if g.tx_cq.is_none() && g.rx_cq.is_none() {
            return crate::fail!(FiError::NOCQ, "fi_enable: no CQ bound");
        }
        let d = self.domain.get();
        // The address to listen on: the given one, else an RDMA address of the domain's device.
        let want = g.name;
        let ip = match want {
            Some(a) if !a.ip().is_unspecified() => a.ip(),
            _ => {
                let want6 = want.is_some_and(|a| a.is_ipv6());
                let addrs = crate::info::rdma_addresses();
                let pick = addrs
                    .iter()
                    .filter(|x| Arc::ptr_eq(&x.device, &d.dev))
                    .find(|x| x.ip.is_ipv6() == want6)
                    .or_else(|| addrs.iter().find(|x| Arc::ptr_eq(&x.device, &d.dev)));
                match pick {
                    Some(x) => x.ip,
                    None => return crate::fail!(FiError::NODEV, "fi_enable: device {} has no usable IP address", d.dev.name()),
                }
            }
        };
        let bind = SocketAddr::new(ip, want.map_or(0, |a| a.port()));
        let channel = match EventChannel::new() {
            Ok(c) => c,
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_enable: rdma_create_event_channel failed: {}", ioerr(e)),
        };
        let listener = CmId::new_sync().map_err(FiError::from_errno)?;
        if let Err(e) = listener.bind_addr(&bind) {
            return crate::fail!(FiError::from_errno(e), "fi_enable: cannot bind {bind}: {}", ioerr(e));
        }
        match listener.device() {
            Some(dev) if Arc::ptr_eq(&dev, &d.dev) => {}
            Some(dev) => {
                return crate::fail!(FiError::INVAL, "fi_enable: {bind} is on device {}, the domain on {}", dev.name(), d.dev.name())
            }
            None => return crate::fail!(FiError::NODEV, "fi_enable: {bind} has no RDMA device"),
        }
        listener.set_token(LISTEN_TOKEN);
        if let Err(e) = listener.migrate(&channel) {
            return crate::fail!(FiError::from_errno(e), "fi_enable: rdma_migrate_id failed: {}", ioerr(e));
        }
        if let Err(e) = listener.listen(1024) {
            return crate::fail!(FiError::from_errno(e), "fi_enable: rdma_listen on {bind} failed: {}", ioerr(e));
        }
        let Some(local) = listener.local_addr() else {
            return crate::fail!(FiError::IO, "fi_enable: the listening id has no address");
        };
        let name = sys::sockaddr_bytes(&local);
        if name.len() > proto::HELLO_MAX_NAME {
            return crate::fail!(FiError::INVAL, "fi_enable: address {local} too long for the HELLO");
        }
        let port = d.dev.query_port(listener.port_num().max(1)).map_err(FiError::from_errno)?;
        let cfg = &self.ctx.cfg;
        // The receive pool: shared, on an SRQ, when the device has one.
        let has_srq = d.attr.max_srq > 0 && d.attr.max_srq_wr > 0;
        let wanted = cfg.pool_size(self.ctx.rx_size);
        let pool_size = wanted.filter(|_| has_srq);
        if !has_srq && wanted.is_some() {
            tracing::info!("rdm: device {} has no shared receive queues; receive buffers per connection", d.dev.name());
        }
        let credits = cfg.credits(pool_size.is_some());
        let geo = Geo {
            peer_bufs: credits.bufs_per_peer as usize,
            stride: slot_stride(cfg.bounce_size()),
            nslots: cfg.send_slots,
            max_chunk: (port.max_msg_sz as usize).clamp(4096, READ_CHUNK),
            max_rma: (port.max_msg_sz as usize).max(4096),
            reads_out: READS_OUT,
            inline_req: d.dev.max_inline().min(256),
            send_sge: self.ctx.tx_iov_limit.max(1) as u32,
            eager_size: cfg.eager_size,
        };
        let comp = match d.dev.create_comp_channel() {
            Ok(c) => Arc::new(c),
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_enable: ibv_create_comp_channel failed: {}", ioerr(e)),
        };
        let pool = match pool_size {
            Some(n) => {
                let n = n.min(d.attr.max_srq_wr as u32);
                // Room to grow (more peers than floors): up to 4x, within the device's limit.
                let cap = (n.saturating_mul(4)).max(1024).min(d.attr.max_srq_wr as u32);
                match RecvPool::new(&d.pd, n, cap, geo.stride, credits.bufs_per_peer, |i| wr_id(WrKind::Recv, 0, i)) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        return crate::fail!(FiError::from_errno(e), "fi_enable: cannot set up a shared receive pool of {n} buffers: {}", ioerr(e))
                    }
                }
            }
            None => None,
        };
        let send = match SendPool::new(&d.pd, geo.nslots, geo.stride) {
            Ok(s) => s,
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_enable: cannot register {} send slots: {}", geo.nslots, ioerr(e)),
        };
        let base_cqes = pool.as_ref().map_or(0, |p| p.srq.max_wr as usize) + geo.nslots;
        let max_cqe = d.attr.max_cqe.max(1) as usize;
        let cqe = (base_cqes + geo.cqes(pool.is_some()) * 4).min(max_cqe);
        let cq = match d.dev.create_cq(cqe as i32, Some(comp.clone())) {
            Ok(c) => Arc::new(c),
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_enable: ibv_create_cq({cqe}) failed: {}", ioerr(e)),
        };
        let wait = sys::Epoll::new().map_err(FiError::from_errno)?;
        wait.add(comp.fd(), 1).map_err(FiError::from_errno)?;
        wait.add(channel.fd(), 2).map_err(FiError::from_errno)?;
        let timer = sys::TimerFd::new().map_err(FiError::from_errno)?;
        wait.add(timer.raw(), 3).map_err(FiError::from_errno)?;
        let _ = self.wait_fd.set(wait.raw());
        g.net = Some(Net {
            conns: IdTable::default(),
            graves: Vec::new(),
            qpn: HintMap::default(),
            peers: HintMap::default(),
            pins: HashMap::default(),
            next_pin: 0,
            rndv_sends: HashMap::default(),
            rndv_in: HashMap::default(),
            reads: HashMap::default(),
            splits: HashMap::default(),
            next_lid: 1,
            next_read: 1,
            cm_checked: 0,
            clock_skips: 0,
            dirty: true,
            settling: false,
            pending: Vec::new(),
            pending_walk: Vec::new(),
            sweep_at: 0,
            repost: Vec::with_capacity(REPOST_BATCH),
            repost_age: 0,
            starved_since: None,
            idle_swept: 0,
            pool_wait_since: None,
            redial: Vec::new(),
            timer,
            timer_armed: false,
            _listener: listener,
            local,
            name,
            incarnation: sys::random_nonzero_u64(),
            cq,
            comp,
            cq_need: base_cqes,
            pd: d.pd.clone(),
            mrc: d.mr_cache().clone(),
            mr_local: d.mr_local,
            geo,
            rx: pool,
            send,
            _wait: wait,
            channel,
        });
        g.enabled = true;
        g.cntrs = g.cntr_binds.set();
        // Progress runs inside reads of the bound CQs and counters.
        let me: Weak<dyn Progress> = self.self_ref.get().expect("set at open").clone();
        let cqs: Vec<Arc<Cq>> = [&g.tx_cq, &g.rx_cq].into_iter().flatten().map(|(c, _)| c.get().clone()).collect();
        let cntrs = g.cntrs.clone();
        drop(g);
        for c in cntrs.all() {
            c.add_source(me.clone())?;
        }
        let mut added: Vec<&Arc<Cq>> = Vec::new();
        for c in &cqs {
            if added.iter().any(|a| Arc::ptr_eq(a, c)) {
                continue;
            }
            c.add_progress(me.clone())?;
            added.push(c);
        }
        let info_d = &self.info.domain;
        if info_d.data_progress == FI_PROGRESS_AUTO || info_d.control_progress == FI_PROGRESS_AUTO {
            let fd = *self.wait_fd.get().expect("set above");
            *self.auto.lock() = Some(super::auto::AutoProgress::spawn(me.clone(), fd)?);
            tracing::info!("rdm endpoint on {local}: FI_PROGRESS_AUTO, progress thread started");
        }
        tracing::info!("rdm endpoint listening on {local}");
        if let Some(net) = &self.inner.lock().net {
            net.log_memory("enabled");
        }
        Ok(())
    }

    /// `fi_close`.
    pub fn close(&self) -> FiResult<()> {
        // The progress thread first: it takes the lock below.
        if let Some(mut a) = self.auto.lock().take() {
            a.stop();
        }
        let mut g = self.inner.lock();
        g.closed = true;
        let net = g.net.take();
        let cqs: Vec<Arc<Cq>> = [&g.tx_cq, &g.rx_cq].into_iter().flatten().map(|(c, _)| c.get().clone()).collect();
        g.tx_cq = None;
        g.rx_cq = None;
        g.av = None;
        g.recvs.clear();
        let cntrs = std::mem::take(&mut g.cntrs);
        g.cntr_binds.clear();
        drop(g);
        // Unhook from the CQs and counters while the wait fd is still open.
        let me: Weak<dyn Progress> = self.self_ref.get().expect("set at open").clone();
        for c in &cqs {
            c.remove_progress(&me, self.wait_fd.get().copied());
        }
        for c in cntrs.all() {
            c.remove_source(&me, self.wait_fd.get().copied());
        }
        // Each connection's QP is destroyed, then its rdma-cm id, which
        // disconnects (as MSG endpoints close): without an error transition
        // first, the device finishes the work under way, such as the ACK rxe
        // owes for a message whose receive completion was already reported.
        drop(net);
        Ok(())
    }

    // ---- data operations ----

}


impl Inner {
    /// `Ok` when the endpoint takes operations (inlined: three loads on
    /// every call; the refusal, which logs, is out of line).
    #[inline(always)]
    fn ready(&self) -> FiResult<()> {
        if self.closed || !self.enabled || self.net.is_none() {
            return self.not_ready();
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn not_ready(&self) -> FiResult<()> {
        if self.closed {
            return crate::fail!(FiError::OPBADSTATE, "endpoint closed");
        }
        crate::fail!(FiError::OPBADSTATE, "endpoint not enabled")
    }

    /// The peer address of an fi_addr. The last answer is kept while the AV
    /// does not change (a stream of sends to one peer takes no AV lock).
    #[inline]
    fn lookup(&mut self, fi_addr: u64) -> FiResult<SocketAddr> {
        let av = self.av.as_ref().expect("enabled endpoints have an AV");
        // Read before the lookup: a change racing with it makes the cache stale, never wrong.
        let g = av.generation();
        if let Some((cg, ca, sa)) = self.last_dest {
            if cg == g && ca == fi_addr {
                return Ok(sa);
            }
        }
        self.lookup_av(fi_addr, g)
    }

    /// `lookup` past its cache: the AV itself (`g`: its generation, read first).
    #[inline(never)]
    fn lookup_av(&mut self, fi_addr: u64, g: u64) -> FiResult<SocketAddr> {
        let av = self.av.as_ref().expect("enabled endpoints have an AV");
        match av.lookup(fi_addr) {
            Some(a) => {
                self.last_dest = Some((g, fi_addr, a));
                Ok(a)
            }
            None => crate::fail!(FiError::INVAL, "fi_addr {fi_addr:#x} is not in the address vector"),
        }
    }

    // ---- user completions ----

    // ---- progress ----

    // ---- connection management ----

}






