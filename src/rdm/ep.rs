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
//!   `fi_trywait` of the CQs bound to the endpoint (`cq::Progress`), and in
//!   every data call. User completions are made in software.
//!
//! Everything runs under one lock per endpoint.

use rustc_hash::FxHashMap as HashMap;
use super::hintmap::HintMap;
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
use crate::cq::{Completion, Cq, CqErr, Progress};
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::Hold;
use crate::info::Info;
use crate::mr::keys_of;
use crate::sys;
use crate::verbs::cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel};
use crate::verbs::{self, access, send_flags, wc_opcode, wc_status, CompChannel, Iov, Pd, QpCaps, SendOp, Wc};

/// Token of the listening cm id (connection ids start at 1).
const LISTEN_TOKEN: u64 = 0;
/// Send-queue requests per connection besides send slots (RDMA READ/WRITE, atomics).
const WR_OPS: usize = 32;
/// Most consumed shared-pool buffers `handle_recv` sets aside before posting
/// them again (`Inner::flush_reposts`); at most an eighth of the pool.
const REPOST_BATCH: usize = 16;
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

/// A posted receive (the application's record, by matcher handle).
struct RecvRec {
    context: u64,
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
    rndv_sends: &'a mut HashMap<(SocketAddr, u64), RndvSend>,
}

/// Registers a rendezvous send's buffers for the peer's RDMA READ: one
/// segment per non-empty iov. `key(i, iov)`: the application's rkey for iov
/// `i` when its descriptor covers it for remote read; otherwise the piece is
/// registered here (the `Mr`s are kept until FIN/NACK).
fn rndv_segments(pd: &Arc<Pd>, iov: &[Iov], key: impl Fn(usize, &Iov) -> Option<u32>) -> FiResult<(Vec<Segment>, Vec<verbs::Mr>)> {
    let mut segs = Vec::with_capacity(iov.len());
    let mut tmp = Vec::new();
    for (i, v) in iov.iter().enumerate() {
        if v.is_empty() {
            continue;
        }
        let rkey = match key(i, v) {
            Some(k) => k,
            None => match pd.reg_mr(v.addr(), v.len() as usize, access::LOCAL_WRITE | access::REMOTE_READ) {
                Ok(mr) => {
                    let k = mr.rkey;
                    tmp.push(mr);
                    k
                }
                Err(e) => {
                    return crate::fail!(
                        FiError::from_errno(e),
                        "send: cannot register {} bytes at {:#x} for the rendezvous: {}",
                        v.len(),
                        v.addr(),
                        ioerr(e)
                    )
                }
            },
        };
        segs.push(Segment { addr: v.addr(), len: v.len() as u64, rkey });
    }
    Ok((segs, tmp))
}

/// Registers bytes of our own (a copy of the application's) for a
/// rendezvous: one segment. The vector's heap buffer does not move when the
/// vector does; the caller keeps it (`RndvSend::owned`) until FIN/NACK.
fn rndv_owned(pd: &Arc<Pd>, bytes: Vec<u8>) -> FiResult<(Vec<Segment>, Vec<verbs::Mr>, Vec<u8>)> {
    let addr = bytes.as_ptr() as u64;
    match pd.reg_mr(addr, bytes.len(), access::LOCAL_WRITE | access::REMOTE_READ) {
        Ok(mr) => {
            let seg = Segment { addr, len: bytes.len() as u64, rkey: mr.rkey };
            Ok((vec![seg], vec![mr], bytes))
        }
        Err(e) => crate::fail!(FiError::from_errno(e), "send: cannot register a {}-byte copy for the rendezvous: {}", bytes.len(), ioerr(e)),
    }
}

/// Once per connection, when the peer takes shorter EAGER messages than we send.
fn log_eager_limit(addr: &SocketAddr, theirs: u32, ours: usize) {
    tracing::info!(
        "rdm: {addr} receives EAGER messages of at most {theirs} bytes (ours: {ours}); longer messages to it go by rendezvous"
    );
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
    conns: HintMap<u32, Conn>,
    graves: Vec<Grave>,
    /// QP number -> connection: completions from the shared receive queue
    /// name their QP only.
    qpn: HintMap<u32, u32>,
    peers: HintMap<SocketAddr, Peer>,
    rndv_sends: HashMap<(SocketAddr, u64), RndvSend>,
    /// Rendezvous requests the matcher holds, by our local id: (peer, its msg_id).
    rndv_in: HashMap<u64, (SocketAddr, u64)>,
    reads: HashMap<u64, ReadOp>,
    /// RMA operations longer than the device's largest message, moving in
    /// pieces (same id space as `reads`: `next_read`).
    splits: HashMap<u64, SplitRma>,
    next_conn: u32,
    next_lid: u64,
    next_read: u64,
    /// When the rdma-cm channel was last read (`coarse_ms`).
    cm_checked: u64,
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
    /// progress (`dirty`), on connection events and on every tick of the
    /// coarse clock; otherwise a pass costs the peers listed here, not every
    /// peer of the endpoint.
    pending: Vec<SocketAddr>,
    /// `pending`'s twin: the list a partial drain walks while it lists
    /// peers again (the two swap, so neither allocates once grown).
    pending_walk: Vec<SocketAddr>,
    /// Shared-pool buffers whose message is consumed, to post again and
    /// count in the bank (with the peer whose message each held, and the
    /// credits the message released) at the start of the next progress pass,
    /// before a connection fails, or once `REPOST_BATCH` wait: see
    /// `Inner::flush_reposts`.
    repost: Vec<(u32, SocketAddr, u16)>,
    /// Since when a peer has been stuck below its credit floor (`coarse_ms`).
    starved_since: Option<u64>,
    /// Since when a connection we make has waited for free receive buffers.
    pool_wait_since: Option<u64>,
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
    geo: Geo,
    /// The shared receive pool (None: the device has no SRQ, or
    /// `FI_RSVERBS_SRQ_SIZE=0`; each connection has its own buffers).
    rx: Option<RecvPool>,
    send: SendPool,
    /// The fd `wait_fd` reports (the CQ channel and the rdma-cm channel).
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
    matcher: Matcher,
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
    /// Where the old value lands (8 bytes, registered); None: not wanted (`fi_atomic`).
    pub result: Option<Iov>,
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
                matcher: Matcher::new(),
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
        if !Arc::ptr_eq(cq.domain.get(), self.domain.get()) {
            return crate::fail!(FiError::DOMAIN, "fi_ep_bind: CQ belongs to another domain");
        }
        if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: unsupported CQ bind flags {flags:#x}");
        }
        if flags & (FI_TRANSMIT | FI_RECV) == 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: CQ bind needs FI_TRANSMIT and/or FI_RECV");
        }
        if (flags & FI_TRANSMIT != 0 && g.tx_cq.is_some()) || (flags & FI_RECV != 0 && g.rx_cq.is_some()) {
            return crate::fail!(FiError::INVAL, "fi_ep_bind: a CQ is already bound for that direction");
        }
        let sel = flags & FI_SELECTIVE_COMPLETION != 0;
        if flags & FI_TRANSMIT != 0 {
            g.tx_cq = Some((Hold::new(cq), sel));
        }
        if flags & FI_RECV != 0 {
            g.rx_cq = Some((Hold::new(cq), sel));
        }
        Ok(())
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
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: AV bind flags must be 0");
        }
        if g.enabled || g.closed {
            return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
        }
        if !Arc::ptr_eq(av.domain.get(), self.domain.get()) {
            return crate::fail!(FiError::DOMAIN, "fi_ep_bind: AV belongs to another domain");
        }
        if g.av.is_some() {
            return crate::fail!(FiError::INVAL, "fi_ep_bind: an AV is already bound");
        }
        g.av = Some(Hold::new(av));
        Ok(())
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
        let _ = self.wait_fd.set(wait.raw());
        g.net = Some(Net {
            conns: HintMap::default(),
            graves: Vec::new(),
            qpn: HintMap::default(),
            peers: HintMap::default(),
            rndv_sends: HashMap::default(),
            rndv_in: HashMap::default(),
            reads: HashMap::default(),
            splits: HashMap::default(),
            next_conn: 1,
            next_lid: 1,
            next_read: 1,
            cm_checked: 0,
            dirty: true,
            settling: false,
            pending: Vec::new(),
            pending_walk: Vec::new(),
            repost: Vec::with_capacity(REPOST_BATCH),
            starved_since: None,
            pool_wait_since: None,
            _listener: listener,
            local,
            name,
            incarnation: sys::random_nonzero_u64(),
            cq,
            comp,
            cq_need: base_cqes,
            pd: d.pd.clone(),
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
        if let Some(net) = net {
            for c in net.conns.values() {
                if c.stage == Stage::Up {
                    let _ = c.id.disconnect();
                }
            }
            drop(net);
        }
        Ok(())
    }

    // ---- data operations ----

    /// `fi_send*`, `fi_tsend*`, `fi_inject*`.
    pub fn send(&self, r: SendReq<'_>) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.ready()?;
        let Some((_, tx_sel)) = &g.tx_cq else {
            return crate::fail!(FiError::NOCQ, "send: no transmit CQ bound");
        };
        let tx_sel = *tx_sel;
        let kind = if r.tag.is_some() { Kind::Tagged } else { Kind::Msg };
        if kind == Kind::Tagged && self.ctx.caps & FI_TAGGED == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "tagged send: the endpoint was opened without FI_TAGGED");
        }
        if r.iov.len() > self.ctx.tx_iov_limit {
            return crate::fail!(FiError::INVAL, "send: {} iovs exceed iov_limit {}", r.iov.len(), self.ctx.tx_iov_limit);
        }
        let len: usize = r.iov.iter().map(|v| v.len() as usize).sum();
        if len > self.ctx.max_msg {
            return crate::fail!(FiError::MSGSIZE, "send: {len} bytes exceed max_msg_size {}", self.ctx.max_msg);
        }
        let inject = r.flags & FI_INJECT != 0 || r.no_completion;
        if inject && len > self.ctx.inject_size {
            return crate::fail!(FiError::MSGSIZE, "inject of {len} bytes exceeds inject_size {}", self.ctx.inject_size);
        }
        // Version 1 of the protocol carries 4 bytes of CQ data (cq_data_size 4).
        let data = r.data.map(|d| d as u32);
        if g.tx_count >= self.ctx.tx_size {
            g.progress(&self.ctx);
            if g.tx_count >= self.ctx.tx_size {
                return Err(FiError::AGAIN);
            }
        }
        let addr = g.lookup(r.dest)?;
        let silent = r.no_completion || (tx_sel && r.flags & FI_COMPLETION == 0);
        let done = TxDone { context: r.context, flags: FI_SEND | kind.cq_flag(), silent };
        let env = Envelope { tag: r.tag, data };
        let own_eager = self.ctx.cfg.is_eager(len);
        if own_eager {
            // The common case: connected, nothing queued ahead, a credit and
            // a send slot free, within the peer's eager limit: straight into
            // the slot and onto the wire.
            match g.send_direct(&addr, env, r.iov, len, done) {
                Direct::Posted => {
                    g.tx_count += 1;
                    return Ok(());
                }
                Direct::Retired => return Ok(()),
                Direct::Failed(conn, err) => {
                    g.tx_count += 1;
                    // The slot owes the completion: failing the connection reports it.
                    g.conn_failed(conn, err);
                    return Ok(());
                }
                Direct::Queue => {}
            }
        }
        // The peer's eager limit, once its HELLO told it, may be below ours:
        // longer messages go by rendezvous. Before that the message is queued
        // EAGER and checked again when it leaves (`drain_peer`).
        let net = g.net.as_ref().expect("ready");
        let eager = own_eager && !net.peers.get(&addr).is_some_and(|p| len > p.eager_limit);
        // Rendezvous: every piece of the buffer must be readable by the peer
        // (built after the eager fast path, which then has nothing to drop).
        let mut rndv = None;
        if !eager {
            rndv = Some(if inject {
                // An inject's buffer is the application's again when the
                // call returns (possible here when the peer's eager limit is
                // below our inject size): the peer reads a copy.
                rndv_owned(&net.pd, crate::verbs::mem::gather(r.iov, len).into_vec())?
            } else {
                let dom = self.domain.get();
                let (segs, tmp) = rndv_segments(&net.pd, r.iov, |i, v| {
                    let desc = r.descs.get(i).copied().unwrap_or(0);
                    keys_of(dom, desc).filter(|k| k.remote_read && k.covers(v.addr(), v.len() as usize)).map(|k| k.rkey)
                })?;
                (segs, tmp, Vec::new())
            });
        }
        let payload = if eager {
            if inject {
                Some(Payload::Owned(crate::verbs::mem::gather(r.iov, len)))
            } else {
                Some(Payload::User(IovVec::from_slice(r.iov)))
            }
        } else {
            None
        };
        let net = g.net.as_mut().expect("ready");
        let peer = net.peer_or_connect(addr)?;
        let ready = peer.ready;
        let msg_id = peer.msg_id();
        match (payload, rndv) {
            (Some(payload), _) => peer.push(Out::Eager { msg_id, env, payload, done }),
            (None, Some((segs, tmp, owned))) => {
                peer.push(Out::Rts { msg_id, env, len: len as u64, segs });
                net.rndv_sends.insert((addr, msg_id), RndvSend { done, tmp, owned });
            }
            (None, None) => unreachable!("a message is eager or rendezvous"),
        }
        g.tx_count += 1;
        g.post_or_progress(&self.ctx, &addr, ready);
        Ok(())
    }

    /// `fi_recv*`, `fi_trecv*`.
    pub fn recv(&self, r: RecvReq<'_>) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.ready()?;
        if g.rx_cq.is_none() {
            return crate::fail!(FiError::NOCQ, "recv: no receive CQ bound");
        }
        let kind = if r.tag.is_some() { Kind::Tagged } else { Kind::Msg };
        if kind == Kind::Tagged && self.ctx.caps & FI_TAGGED == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "tagged receive: the endpoint was opened without FI_TAGGED");
        }
        if r.iov.len() > self.ctx.rx_iov_limit {
            return crate::fail!(FiError::INVAL, "recv: {} iovs exceed iov_limit {}", r.iov.len(), self.ctx.rx_iov_limit);
        }
        let peek = r.flags & FI_PEEK != 0;
        let discard_claim = r.flags & FI_CLAIM != 0 && r.flags & FI_DISCARD != 0;
        let multi = r.flags & FI_MULTI_RECV != 0;
        if multi && self.ctx.caps & FI_MULTI_RECV == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "recv: FI_MULTI_RECV needs the FI_MULTI_RECV capability");
        }
        if multi && r.iov.len() != 1 {
            return crate::fail!(FiError::INVAL, "recv: FI_MULTI_RECV takes exactly one buffer");
        }
        let len: usize = r.iov.iter().map(|v| v.len() as usize).sum();
        let src = if crate::info::directed_recv(self.ctx.caps, kind == Kind::Tagged) {
            if r.src == FI_ADDR_UNSPEC && self.ctx.caps & crate::info::FI_EXACT_DIRECTED_RECV != 0 {
                return crate::fail!(FiError::INVAL, "recv: FI_EXACT_DIRECTED_RECV endpoints take no FI_ADDR_UNSPEC source");
            }
            r.src
        } else {
            FI_ADDR_UNSPEC
        };
        if src != FI_ADDR_UNSPEC {
            let av = g.av.as_ref().expect("ready");
            if av.lookup(src).is_none() {
                return crate::fail!(FiError::INVAL, "recv: source fi_addr {src:#x} is not in the address vector");
            }
        }
        let consumes = !peek && !discard_claim;
        if consumes && g.rx_count >= self.ctx.rx_size {
            g.progress(&self.ctx);
            if g.rx_count >= self.ctx.rx_size {
                return Err(FiError::AGAIN);
            }
        }
        // A receive that consumes a message is recorded; FI_PEEK and
        // FI_CLAIM | FI_DISCARD never reach a buffer (handle 0: no record).
        let handle = if consumes {
            g.rx_count += 1;
            g.recvs.insert(RecvRec { context: r.context, iov: IovVec::from_slice(r.iov), flags: r.flags, keyed: r.descs_ok })
        } else {
            0
        };
        let req = match r.tag {
            None => RecvRequest::msg(handle, r.context, len),
            Some((tag, ignore)) => RecvRequest::tagged(handle, r.context, len, tag, ignore),
        }
        .from(src)
        .with_flags(r.flags);
        let actions = match g.matcher.post(req) {
            Ok(a) => a,
            Err(e) => {
                if g.recvs.remove(handle).is_some() {
                    g.rx_count -= 1;
                }
                return Err(e);
            }
        };
        // A receive that waits in the posted queue needs no progress; one
        // that took unexpected messages may have started rendezvous reads.
        if !actions.is_empty() {
            for a in actions {
                g.execute(a, None);
            }
            g.progress(&self.ctx);
        }
        Ok(())
    }

    /// `fi_cancel`: a posted receive, by context.
    pub fn cancel(&self, context: u64) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        if !g.enabled {
            return crate::fail!(FiError::OPBADSTATE, "fi_cancel: endpoint not enabled");
        }
        let Some(c) = g.matcher.cancel(context) else {
            tracing::debug!("fi_cancel: no posted receive with context {context:#x}");
            return Ok(());
        };
        let buf = g.recvs.get(c.handle).and_then(|r| r.iov.first()).map_or(0, |v| v.addr());
        g.rx_error(CqErr {
            op_context: c.context,
            flags: c.flags,
            tag: c.tag,
            err: FI_ECANCELED,
            prov_errno: crate::cq::soft_prov_errno(FI_ECANCELED),
            buf,
            src: FI_ADDR_NOTAVAIL,
            ..Default::default()
        });
        if c.last && g.recvs.discard(c.handle) {
            g.rx_count -= 1;
        }
        Ok(())
    }

    /// `fi_read*`, `fi_write*`, `fi_writedata`, `fi_inject_write*`.
    pub fn rma(&self, r: RmaReq<'_>) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.ready()?;
        let Some((_, tx_sel)) = &g.tx_cq else {
            return crate::fail!(FiError::NOCQ, "RMA: no transmit CQ bound");
        };
        let tx_sel = *tx_sel;
        if self.ctx.caps & FI_RMA == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "RMA: the endpoint was opened without FI_RMA");
        }
        let Ok(rkey) = u32::try_from(r.rkey) else {
            return crate::fail!(FiError::INVAL, "RMA: key {:#x} is not a verbs key", r.rkey);
        };
        if r.iov.len() > self.ctx.tx_iov_limit {
            return crate::fail!(FiError::INVAL, "RMA: {} iovs exceed iov_limit {}", r.iov.len(), self.ctx.tx_iov_limit);
        }
        let len: usize = r.iov.iter().map(|v| v.len() as usize).sum();
        let geo = g.net.as_ref().expect("ready").geo;
        if len > self.ctx.max_msg {
            return crate::fail!(FiError::MSGSIZE, "RMA: {len} bytes exceed max_msg_size {}", self.ctx.max_msg);
        }
        let inject = r.flags & FI_INJECT != 0 || r.no_completion;
        if inject && (r.read || len > self.ctx.inject_size.min(geo.stride)) {
            return crate::fail!(FiError::MSGSIZE, "inject write of {len} bytes exceeds inject_size {}", self.ctx.inject_size);
        }
        if !inject && !r.descs_ok && len > 0 {
            return crate::fail!(FiError::INVAL, "RMA: missing memory descriptor for the local buffer (FI_MR_LOCAL)");
        }
        if g.tx_count >= self.ctx.tx_size {
            g.progress(&self.ctx);
            if g.tx_count >= self.ctx.tx_size {
                return Err(FiError::AGAIN);
            }
        }
        let addr = g.lookup(r.dest)?;
        let silent = r.no_completion || (tx_sel && r.flags & FI_COMPLETION == 0);
        let done = TxDone { context: r.context, flags: FI_RMA | if r.read { FI_READ } else { FI_WRITE }, silent };
        if !inject && len > geo.max_rma {
            // Longer than the device's largest message: in pieces.
            g.rma_split(&addr, &r, rkey, len, done)?;
            let ready = g.net.as_ref().and_then(|n| n.peers.get(&addr)).is_some_and(|p| p.ready);
            g.tx_count += 1;
            g.post_or_progress(&self.ctx, &addr, ready);
            return Ok(());
        }
        if !inject && r.data.is_none() {
            // The common case: connected, nothing queued ahead, a send-queue
            // entry free: onto the wire from the application's buffers.
            let op = if r.read { SendOp::Read { raddr: r.raddr, rkey } } else { SendOp::Write { raddr: r.raddr, rkey } };
            if g.op_direct(&addr, op, r.iov, done) {
                return Ok(());
            }
        }
        let owned = if inject {
            Some(crate::verbs::mem::gather(r.iov, len))
        } else {
            None
        };
        let net = g.net.as_mut().expect("ready");
        let peer = net.peer_or_connect(addr)?;
        match (r.read, r.data, owned) {
            (true, _, _) => peer.rma.push_back(RmaOp::Read { local: r.iov.to_vec(), raddr: r.raddr, rkey, done }),
            (false, Some(d), owned) => {
                let payload = match owned {
                    Some(v) => Payload::Owned(v),
                    None => Payload::User(IovVec::from_slice(r.iov)),
                };
                peer.push(Out::WriteData { payload, raddr: r.raddr, rkey, imm: d as u32, done });
            }
            (false, None, Some(v)) => peer.rma.push_back(RmaOp::WriteInline { data: v, raddr: r.raddr, rkey, done }),
            (false, None, None) => peer.rma.push_back(RmaOp::Write { local: r.iov.to_vec(), raddr: r.raddr, rkey, done }),
        }
        let ready = peer.ready;
        g.tx_count += 1;
        g.post_or_progress(&self.ctx, &addr, ready);
        Ok(())
    }

    /// 64-bit fetch-and-add / compare-and-swap by fi_addr.
    pub fn atomic(&self, r: AtomicReq) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.ready()?;
        let Some((_, tx_sel)) = &g.tx_cq else {
            return crate::fail!(FiError::NOCQ, "atomic: no transmit CQ bound");
        };
        let tx_sel = *tx_sel;
        if self.ctx.caps & FI_ATOMIC == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "atomic: the endpoint was opened without FI_ATOMIC");
        }
        let Ok(rkey) = u32::try_from(r.rkey) else {
            return crate::fail!(FiError::INVAL, "atomic: key {:#x} is not a verbs key", r.rkey);
        };
        if r.raddr % 8 != 0 {
            return crate::fail!(FiError::INVAL, "atomic: remote address {:#x} is not 8-byte aligned", r.raddr);
        }
        if g.tx_count >= self.ctx.tx_size {
            g.progress(&self.ctx);
            if g.tx_count >= self.ctx.tx_size {
                return Err(FiError::AGAIN);
            }
        }
        let addr = g.lookup(r.dest)?;
        let silent = r.no_completion || (tx_sel && r.flags & FI_COMPLETION == 0);
        let fetch = if r.result.is_some() { FI_READ } else { FI_WRITE };
        let done = TxDone { context: r.context, flags: FI_ATOMIC | fetch, silent };
        let op = match (r.op, r.result) {
            (AtomicOp::FetchAdd(add), Some(local)) => RmaOp::FetchAdd { local, raddr: r.raddr, rkey, add, done },
            (AtomicOp::FetchAdd(add), None) => RmaOp::AtomicAdd { raddr: r.raddr, rkey, add, done },
            (AtomicOp::CompSwap { compare, swap }, Some(local)) => RmaOp::CompSwap { local, raddr: r.raddr, rkey, compare, swap, done },
            (AtomicOp::CompSwap { .. }, None) => {
                return crate::fail!(FiError::INVAL, "compare atomic: a result buffer is required")
            }
        };
        // A fetching atomic lands in the application's result buffer: it can
        // go straight onto the wire (a non-fetching add needs a send slot
        // for the old value, and takes the queue).
        if let Some((sop, local)) = op.wire() {
            if g.op_direct(&addr, sop, local, done) {
                return Ok(());
            }
        }
        let net = g.net.as_mut().expect("ready");
        let peer = net.peer_or_connect(addr)?;
        peer.rma.push_back(op);
        let ready = peer.ready;
        g.tx_count += 1;
        g.post_or_progress(&self.ctx, &addr, ready);
        Ok(())
    }
}

impl Progress for RdmEp {
    fn progress(&self) {
        // A poll: drains only if something happened (see `Net::dirty`).
        self.inner.lock().progress_with(&self.ctx, false);
    }

    fn arm(&self) -> bool {
        let mut g = self.inner.lock();
        let Some(net) = &g.net else { return true };
        while net.comp.consume_event(&net.cq) {}
        if let Err(e) = net.cq.req_notify() {
            tracing::warn!("rdm: ibv_req_notify_cq failed: errno {e}");
            return false;
        }
        // Work that arrived before the arm raises no event: look once more.
        !g.progress_with(&self.ctx, true)
    }

    fn wait_fd(&self) -> Option<RawFd> {
        self.wait_fd.get().copied()
    }
}

impl Net {
    /// A connection is being set up (it needs rdma-cm events read on every call).
    fn any_settling(&self) -> bool {
        self.conns.values().any(|c| c.stage != Stage::Up)
    }

    /// Lists the peer at `addr` for the next drain (`pending`).
    fn mark(&mut self, addr: &SocketAddr) {
        mark_in(&mut self.peers, &mut self.pending, addr);
    }

    /// The peer at `addr`, connecting to it if there is none yet.
    fn peer_or_connect(&mut self, addr: SocketAddr) -> FiResult<&mut Peer> {
        // One lookup for a known peer (every send).
        if self.peers.contains_key(&addr) {
            return Ok(self.peers.get_mut(&addr).expect("just found"));
        }
        let conn_id = self.next_conn;
        self.next_conn += 1;
        let id = CmId::new_sync().map_err(FiError::from_errno)?;
        id.set_token(conn_id as u64);
        if let Err(e) = id.migrate(&self.channel) {
            return crate::fail!(FiError::from_errno(e), "rdm: rdma_migrate_id failed: {}", ioerr(e));
        }
        let src = SocketAddr::new(self.local.ip(), 0);
        if let Err(e) = id.resolve_addr(Some(&src), &addr, RESOLVE_MS) {
            return crate::fail!(FiError::from_errno(e), "rdm: cannot resolve {addr}: {}", ioerr(e));
        }
        tracing::debug!("rdm: connecting to {addr} (conn {conn_id})");
        self.conns.insert(conn_id, Conn { id, peer: addr, active: true, stage: Stage::Resolving, res: None });
        self.settling = true;
        let mut p = Peer::new(addr);
        p.send_conn = Some(conn_id);
        p.conns.push(conn_id);
        Ok(self.peers.get_or_insert_with(addr, || p))
    }

    /// Creates a connection's QP (attached to the shared receive queue, or
    /// with its own receive buffers, posted here).
    fn setup_qp(&mut self, conn_id: u32) -> FiResult<()> {
        let geo = self.geo;
        let shared = self.rx.is_some();
        let need = self.cq_need + geo.cqes(shared);
        if need > self.cq.capacity().max(0) as usize {
            if let Err(e) = self.cq.resize(need as i32) {
                return crate::fail!(FiError::NOSPC, "rdm: cannot grow the internal CQ to {need} entries: {}", ioerr(e));
            }
        }
        let recv = if shared {
            None
        } else {
            match RegBuf::new(&self.pd, geo.peer_bufs * geo.stride, access::LOCAL_WRITE) {
                Ok(b) => Some(Arc::new(b)),
                Err(e) => return crate::fail!(FiError::from_errno(e), "rdm: cannot register receive buffers: {}", ioerr(e)),
            }
        };
        let Some(conn) = self.conns.get_mut(&conn_id) else {
            return crate::fail!(FiError::IO, "rdm: connection {conn_id} vanished");
        };
        let caps = QpCaps {
            max_send_wr: (geo.nslots + WR_OPS + UNSIG_MAX) as u32,
            max_recv_wr: geo.peer_bufs as u32,
            max_send_sge: geo.send_sge,
            max_recv_sge: 1,
            max_inline: geo.inline_req,
        };
        let mut keep: Vec<Arc<dyn Send + Sync>> = vec![self.cq.clone(), self.send.buf.clone()];
        if let Some(r) = &recv {
            keep.push(r.clone());
        }
        if let Some(p) = &self.rx {
            keep.extend(p.keep());
        }
        let srq = self.rx.as_ref().map(|p| &*p.srq);
        let qp = match conn.id.create_qp(&self.pd, &self.cq, &self.cq, srq, caps, keep) {
            Ok(q) => q,
            Err(e) => return crate::fail!(FiError::from_errno(e), "rdm: rdma_create_qp failed: {}", ioerr(e)),
        };
        if let Some(r) = &recv {
            for i in 0..geo.peer_bufs {
                if let Err(e) = qp.post_recv(wr_id(WrKind::Recv, conn_id, i as u32), &[r.iov(i * geo.stride, geo.stride)]) {
                    return crate::fail!(FiError::from_errno(e), "rdm: posting receive buffers failed: {}", ioerr(e));
                }
            }
        }
        let qp_num = qp.qp_num();
        conn.res = Some(QpRes {
            recv,
            wr_ops: HashMap::default(),
            free_wrs: (0..WR_OPS as u32).rev().collect(),
            reads_out: 0,
            max_inline: qp.caps.max_inline as usize,
            qp_num,
            unsig: Unsignaled::default(),
        });
        self.qpn.insert(qp_num, conn_id);
        self.cq_need = need;
        Ok(())
    }

    /// The credit bank that holds `addr`'s share: the shared pool's, or the peer's own.
    fn bank_mut(&mut self, addr: &SocketAddr) -> Option<&mut Bank<SocketAddr>> {
        match &mut self.rx {
            Some(p) => Some(&mut p.bank),
            None => self.peers.get_mut(addr).and_then(|p| p.rx_bank.as_mut()),
        }
    }

    /// Makes room for one more peer in the shared pool (growing it when the
    /// floors of all peers would not fit). Returns false if it cannot.
    fn pool_room(&mut self) -> bool {
        let Some(p) = &mut self.rx else { return true };
        let n = p.bank.shortfall();
        if n == 0 {
            return true;
        }
        // Grow by a few floors at a time.
        self.grow_pool(n.max(8 * super::credits::MIN_CREDITS as u32), "for a new peer's floor", Grow::Quotas)
    }

    /// A peer stuck without credits for STARVE_MS while the others hold the
    /// pool (and are not progressed to answer recalls): add buffers for it
    /// alone rather than wait on them. Checked once per coarse-clock tick.
    fn check_starved(&mut self, now: u64) {
        const STARVE_MS: u64 = 1000;
        let need = self.rx.as_ref().map_or(0, |p| p.bank.stuck_need());
        if need == 0 {
            self.starved_since = None;
        } else {
            match self.starved_since {
                None => self.starved_since = Some(now),
                Some(t) if now.saturating_sub(t) >= STARVE_MS => {
                    self.starved_since = None;
                    tracing::info!("rdm: a peer has had no credits for {STARVE_MS} ms while the others hold the pool");
                    self.grow_pool(need, "for peers stuck without credits", Grow::Stuck);
                }
                Some(_) => {}
            }
        }
        // A connection we make waits until a floor of credits is free to
        // grant (Bank::can_admit). When the other peers hold the pool and are
        // not progressed, the recalls that would free it are never answered:
        // after STARVE_MS, add the floors it needs, kept free for it.
        let waiting = self.conns.values().filter(|c| c.stage == Stage::WaitPool).count() as u32;
        if waiting == 0 || self.can_connect() {
            self.pool_wait_since = None;
            return;
        }
        match self.pool_wait_since {
            None => self.pool_wait_since = Some(now),
            Some(t) if now.saturating_sub(t) >= STARVE_MS => {
                self.pool_wait_since = None;
                tracing::info!("rdm: {waiting} connection(s) waited {STARVE_MS} ms for free receive buffers");
                self.grow_pool(waiting * super::credits::MIN_CREDITS as u32, "for connections waiting to start", Grow::Free);
            }
            Some(_) => {}
        }
    }

    /// Posts `n` more receive buffers to the shared pool (growing the
    /// internal CQ first: it must hold every posted buffer); `to`: who gets them.
    fn grow_pool(&mut self, n: u32, why: &str, to: Grow) -> bool {
        let Some(p) = &mut self.rx else { return false };
        let need = self.cq_need + n as usize;
        if need > self.cq.capacity().max(0) as usize && self.cq.resize(need as i32).is_err() {
            tracing::warn!("rdm: cannot grow the internal CQ for {n} more receive buffers");
            return false;
        }
        let id = |i| wr_id(WrKind::Recv, 0, i);
        let r = match to {
            Grow::Quotas => p.grow(&self.pd, n, id),
            Grow::Stuck => p.grow_for_stuck(&self.pd, n, id),
            Grow::Free => p.grow_free(&self.pd, n, id),
        };
        match r {
            Ok(()) => {
                self.cq_need = need;
                tracing::info!("rdm: receive pool grown by {n} buffers to {} ({why}; {} peers)", p.buffers(), p.bank.peers());
                true
            }
            Err(e) => {
                tracing::warn!("rdm: cannot grow the receive pool by {n} buffers: {}", ioerr(e));
                false
            }
        }
    }

    /// Admits `addr` to its bank: the grant its HELLO gets.
    fn admit(&mut self, addr: SocketAddr) -> u16 {
        if self.rx.is_none() {
            if let Some(p) = self.peers.get_mut(&addr) {
                if p.rx_bank.is_none() {
                    p.rx_bank = Some(Bank::single(self.geo.peer_bufs as u16));
                }
            }
        }
        self.bank_mut(&addr).map_or(0, |b| b.admit(addr))
    }

    /// Whether a connection we make may start now (a floor of credits is free to grant).
    fn can_connect(&self) -> bool {
        self.rx.as_ref().is_none_or(|p| p.bank.can_admit())
    }

    /// Our HELLO (the connect request's and the accept's private data):
    /// `grant` credits; the connect request also names our listening
    /// address (`with_name`), the accept does not (the requester knows it).
    fn hello(&self, grant: u16, with_name: bool) -> Vec<u8> {
        Hello {
            grant,
            max_credits: self.geo.peer_bufs as u16,
            incarnation: self.incarnation,
            max_eager: self.geo.eager_size.min(proto::MAX_EAGER) as u32,
            name: if with_name { self.name.clone() } else { Vec::new() },
        }
        .encode()
        .unwrap_or_default()
    }

    /// Registered memory, for the log (`FI_LOG_LEVEL=info`): what the
    /// endpoint holds and what each connection adds.
    fn log_memory(&self, why: &str) {
        let per_conn = if self.rx.is_some() { 0 } else { self.geo.peer_bufs * self.geo.stride };
        let conns = self.conns.values().filter(|c| c.res.is_some()).count();
        let pool = self.rx.as_ref().map_or(0, |p| p.bytes());
        let own: usize = self.conns.values().filter_map(|c| c.res.as_ref()?.recv.as_ref()).map(|r| r.len()).sum();
        let total = pool + own + self.send.bytes();
        tracing::info!(
            "rdm: registered bytes ({why}): total={total} pool={pool} pool_bufs={} send={} per_conn={per_conn} conns={conns} peers={} mode={}",
            self.rx.as_ref().map_or(0, |p| p.buffers()),
            self.send.bytes(),
            self.peers.len(),
            if self.rx.is_some() { "srq" } else { "per-qp" }
        );
    }
}

impl Inner {
    fn ready(&self) -> FiResult<()> {
        if self.closed {
            return crate::fail!(FiError::OPBADSTATE, "endpoint closed");
        }
        if !self.enabled || self.net.is_none() {
            return crate::fail!(FiError::OPBADSTATE, "endpoint not enabled");
        }
        Ok(())
    }

    /// The peer address of an fi_addr. The last answer is kept while the AV
    /// does not change (a stream of sends to one peer takes no AV lock).
    fn lookup(&mut self, fi_addr: u64) -> FiResult<SocketAddr> {
        let av = self.av.as_ref().expect("enabled endpoints have an AV");
        // Read before the lookup: a change racing with it makes the cache stale, never wrong.
        let g = av.generation();
        if let Some((cg, ca, sa)) = self.last_dest {
            if cg == g && ca == fi_addr {
                return Ok(sa);
            }
        }
        match av.lookup(fi_addr) {
            Some(a) => {
                self.last_dest = Some((g, fi_addr, a));
                Ok(a)
            }
            None => crate::fail!(FiError::INVAL, "fi_addr {fi_addr:#x} is not in the address vector"),
        }
    }

    // ---- user completions ----

    fn tx_done(&mut self, done: TxDone, err: Option<i32>) {
        self.tx_count = self.tx_count.saturating_sub(1);
        self.tx_report(done, err);
    }

    /// Reports a transmit outcome (counters, CQ); `tx_done` also frees its
    /// place in the transmit queue, which a retired unsignaled send left at once.
    fn tx_report(&self, done: TxDone, err: Option<i32>) {
        self.cntrs.count(done.flags, err.is_none());
        let Some((cq, _)) = &self.tx_cq else { return };
        match err {
            None if done.silent => {}
            None => cq.push_completion(Completion { op_context: done.context, flags: done.flags, ..Default::default() }),
            Some(e) => cq.push_error(CqErr {
                op_context: done.context,
                flags: done.flags,
                err: e,
                prov_errno: crate::cq::soft_prov_errno(e),
                src: FI_ADDR_NOTAVAIL,
                ..Default::default()
            }),
        }
    }

    fn rx_error(&self, e: CqErr) {
        if let Some((cq, _)) = &self.rx_cq {
            cq.push_error(e);
        }
    }

    fn rx_completion(&self, c: Completion) {
        if let Some((cq, _)) = &self.rx_cq {
            cq.push_completion(c);
        }
    }

    /// Completes (part of) a receive: copies `data` (an eager payload; empty
    /// after a rendezvous read, which landed in place) to its buffers and
    /// reports it. `err`: a transfer error (a failed read). The record is
    /// read in place (slab index, no hash); a receive done with this message
    /// (`d.last`) is then removed.
    fn complete_recv(&mut self, d: &Delivery, data: &[u8], err: Option<i32>) {
        let Some(rec) = self.recvs.get(d.handle) else {
            tracing::warn!("rdm: completion for unknown receive {:#x}", d.handle);
            return;
        };
        copy_to_iovs(&rec.iov, d.offset, data);
        self.report_recv(d, rec, err);
        if d.last {
            // Dropped in place: moving the record out copies all of it.
            self.recvs.discard(d.handle);
            self.rx_count = self.rx_count.saturating_sub(1);
        }
    }

    /// The completion (or error entry) of (part of) receive `rec`.
    fn report_recv(&self, d: &Delivery, rec: &RecvRec, err: Option<i32>) {
        let buf = if d.multi_recv { rec.iov.first().map_or(0, |v| v.addr() + d.offset as u64) } else { 0 };
        let rx_sel = self.rx_cq.as_ref().is_some_and(|(_, s)| *s);
        let wanted = !rx_sel || rec.flags & FI_COMPLETION != 0 || d.flags & FI_MULTI_RECV != 0;
        let ctx = rec.context;
        let failed = err.or(if d.olen > 0 { Some(FI_ETRUNC) } else { None });
        self.cntrs.count(FI_RECV, failed.is_none());
        if let Some(e) = failed {
            self.rx_error(CqErr {
                op_context: ctx,
                flags: d.flags,
                len: d.len,
                buf,
                data: d.data,
                tag: d.tag,
                olen: d.olen,
                err: e,
                prov_errno: crate::cq::soft_prov_errno(e),
                src: d.src,
                ..Default::default()
            });
        } else if wanted {
            self.rx_completion(Completion { op_context: ctx, flags: d.flags, len: d.len, buf, data: d.data, tag: d.tag, src: d.src });
        }
    }

    /// Carries out one matching action. `payload`: the eager payload of the
    /// message just passed to `arrive` (for `Deliver`).
    fn execute(&mut self, a: Action, payload: Option<&[u8]>) {
        match a {
            Action::Deliver(d) => {
                let data = payload.unwrap_or(&[]);
                self.complete_recv(&d, &data[..d.len.min(data.len())], None);
            }
            Action::DeliverQueued(d, bytes) => self.complete_recv(&d, &bytes[..d.len.min(bytes.len())], None),
            Action::Read(d, r) => self.start_read(d, r),
            Action::Queued => {}
            Action::Peeked { context, info, claimed: _ } => self.rx_completion(Completion {
                op_context: context,
                flags: info.cq_flags(),
                len: info.len,
                buf: 0,
                data: info.data.unwrap_or(0),
                tag: info.tag,
                src: info.src,
            }),
            Action::NoMessage { context } => self.rx_error(CqErr {
                op_context: context,
                flags: FI_RECV | FI_TAGGED,
                err: FI_ENOMSG,
                prov_errno: crate::cq::soft_prov_errno(FI_ENOMSG),
                src: FI_ADDR_NOTAVAIL,
                ..Default::default()
            }),
            Action::Discarded { context, info, rndv } => {
                self.rx_completion(Completion {
                    op_context: context,
                    flags: info.cq_flags(),
                    len: info.len,
                    buf: 0,
                    data: info.data.unwrap_or(0),
                    tag: info.tag,
                    src: info.src,
                });
                if let Some(r) = rndv {
                    self.answer_rndv(r.msg_id, Out::Fin { msg_id: 0, len: 0 });
                }
            }
        }
    }

    /// Sends FIN/NACK for a rendezvous request the matcher held under local id `lid`.
    fn answer_rndv(&mut self, lid: u64, out: Out) {
        let Some(net) = &mut self.net else { return };
        let Some((addr, msg_id)) = net.rndv_in.remove(&lid) else {
            tracing::warn!("rdm: answer for unknown rendezvous {lid}");
            return;
        };
        let out = match out {
            Out::Fin { len, .. } => Out::Fin { msg_id, len },
            Out::Nack { err, .. } => Out::Nack { msg_id, err },
            o => o,
        };
        if let Some(p) = net.peers.get_mut(&addr) {
            p.push(out);
        }
    }

    /// Starts the RDMA READs of a rendezvous receive.
    fn start_read(&mut self, d: Delivery, r: super::matching::Rendezvous) {
        let Some(net) = &mut self.net else { return };
        let Some((addr, msg_id)) = net.rndv_in.remove(&r.msg_id) else {
            tracing::warn!("rdm: read for unknown rendezvous {}", r.msg_id);
            self.complete_recv(&d, &[], Some(FI_EIO));
            return;
        };
        let read_id = net.next_read;
        net.next_read += 1;
        let keyed = self.recvs.get(d.handle).is_some_and(|rec| rec.keyed);
        let peer_alive = net.peers.contains_key(&addr);
        if !peer_alive || !keyed {
            if !keyed {
                tracing::warn!("rdm: rendezvous receive without a memory descriptor (FI_MR_LOCAL): cannot read into it");
            } else {
                tracing::info!("rdm: rendezvous from {addr}, which is gone");
            }
            let d2 = self.matcher.read_finished(&d);
            self.complete_recv(&d2, &[], Some(FI_EIO));
            if peer_alive {
                if let Some(net) = self.net.as_mut() {
                    if let Some(p) = net.peers.get_mut(&addr) {
                        p.push(Out::Nack { msg_id, err: FI_EIO as u16 });
                    }
                    net.mark(&addr);
                }
            }
            return;
        }
        // Split the reads by remote chunk and by local buffer.
        let iov = self.recvs.get(d.handle).map(|rec| rec.iov.clone()).unwrap_or_default();
        let mut pieces = Vec::new();
        for ch in proto::read_plan(&r.segs, d.len, net.geo.max_chunk) {
            let mut lo = d.offset + ch.local_offset;
            let mut left = ch.len;
            let mut raddr = ch.remote_addr;
            let mut base = 0usize;
            for v in &iov {
                let vl = v.len() as usize;
                if left == 0 {
                    break;
                }
                if lo >= base + vl {
                    base += vl;
                    continue;
                }
                let off = lo - base;
                let n = (vl - off).min(left);
                pieces.push(ReadPiece { read_id, kind: PieceKind::RndvRead, local: sub_iov(v, off, n), raddr, rkey: ch.rkey });
                lo += n;
                left -= n;
                raddr += n as u64;
                base += vl;
            }
        }
        if pieces.is_empty() {
            // Nothing to read (zero bytes wanted): done at once.
            net.reads.insert(read_id, ReadOp { d, peer: addr, msg_id, left: 0, err: None });
            self.finish_read(read_id);
            return;
        }
        net.reads.insert(read_id, ReadOp { d, peer: addr, msg_id, left: pieces.len(), err: None });
        if let Some(p) = net.peers.get_mut(&addr) {
            p.push_pieces(pieces);
        }
        net.mark(&addr);
    }

    /// A rendezvous receive's reads are all done.
    fn finish_read(&mut self, read_id: u64) {
        let Some(net) = &mut self.net else { return };
        let Some(op) = net.reads.remove(&read_id) else { return };
        let d2 = self.matcher.read_finished(&op.d);
        self.complete_recv(&d2, &[], op.err);
        let Some(net) = &mut self.net else { return };
        if let Some(p) = net.peers.get_mut(&op.peer) {
            match op.err {
                None => p.push(Out::Fin { msg_id: op.msg_id, len: op.d.len as u64 }),
                Some(e) => p.push(Out::Nack { msg_id: op.msg_id, err: e.clamp(1, u16::MAX as i32) as u16 }),
            }
        }
        net.mark(&op.peer);
    }

    /// Queues an RMA operation longer than the device's largest message
    /// (`Geo::max_rma`) as pieces of `Geo::max_chunk` bytes (split again at
    /// the local iovs' bounds), posted as rendezvous reads are: at most
    /// `Geo::reads_out` in flight per connection. One completion when all
    /// are done. `fi_writedata`: the last piece carries the data, as an
    /// RDMA WRITE with immediate data queued behind the others in the
    /// peer's message queue (which waits until they are posted: the QP
    /// then delivers the data first).
    fn rma_split(&mut self, addr: &SocketAddr, r: &RmaReq<'_>, rkey: u32, len: usize, done: TxDone) -> FiResult<()> {
        let net = self.net.as_mut().expect("ready");
        let chunk = net.geo.max_chunk;
        let id = net.next_read;
        net.next_read += 1;
        let kind = if r.read { PieceKind::RmaRead } else { PieceKind::RmaWrite };
        let mut pieces = Vec::with_capacity(len.div_ceil(chunk) + r.iov.len());
        let mut tail = None;
        let mut off = 0usize;
        while off < len {
            let n = chunk.min(len - off);
            let raddr = r.raddr.wrapping_add(off as u64);
            let mut locals = IovVec::new();
            iov_range(r.iov, off, n, |v| locals.push(v));
            match r.data {
                Some(d) if !r.read && off + n == len => {
                    tail = Some(Out::WriteData { payload: Payload::User(locals), raddr, rkey, imm: d as u32, done });
                }
                _ => {
                    let mut ra = raddr;
                    for local in locals {
                        pieces.push(ReadPiece { read_id: id, kind, local, raddr: ra, rkey });
                        ra = ra.wrapping_add(local.len() as u64);
                    }
                }
            }
            off += n;
        }
        tracing::debug!("rdm: RMA of {len} bytes to {addr} in {} pieces", pieces.len() + usize::from(tail.is_some()));
        let reports = tail.is_none();
        let left = pieces.len();
        let peer = net.peer_or_connect(*addr)?;
        peer.push_pieces(pieces);
        if let Some(t) = tail {
            peer.push(t);
        }
        net.splits.insert(id, SplitRma { done, left, err: None, reports });
        net.mark(addr);
        Ok(())
    }

    /// A piece (`ReadPiece`) completed, or failed with its connection: of a
    /// rendezvous read (whose receive reports `FI_EIO` on any failure), or
    /// of a split RMA (which reports the first error, once, after all).
    fn piece_done(&mut self, id: u64, err: Option<i32>) {
        let Some(net) = &mut self.net else { return };
        if net.reads.contains_key(&id) {
            self.read_piece_done(id, err.map(|_| FI_EIO));
            return;
        }
        let Some(s) = net.splits.get_mut(&id) else { return };
        s.left = s.left.saturating_sub(1);
        if err.is_some() && s.err.is_none() {
            s.err = err;
        }
        if s.left > 0 {
            return;
        }
        let Some(s) = net.splits.remove(&id) else { return };
        if s.reports {
            self.tx_done(s.done, s.err);
        }
    }

    fn read_piece_done(&mut self, read_id: u64, err: Option<i32>) {
        let Some(net) = &mut self.net else { return };
        let Some(op) = net.reads.get_mut(&read_id) else { return };
        op.left = op.left.saturating_sub(1);
        if err.is_some() && op.err.is_none() {
            op.err = err;
        }
        if op.left == 0 {
            self.finish_read(read_id);
        }
    }

    fn rndv_send_done(&mut self, addr: SocketAddr, msg_id: u64, err: Option<i32>) {
        let Some(net) = &mut self.net else { return };
        match net.rndv_sends.remove(&(addr, msg_id)) {
            Some(s) => {
                drop(s.tmp);
                self.tx_done(s.done, err);
            }
            None => tracing::warn!("rdm: FIN/NACK from {addr} for unknown message {msg_id}"),
        }
    }

    // ---- progress ----

    /// Advances everything after an operation was posted (or anything else
    /// that can make queued work postable); true when anything happened.
    fn progress(&mut self, ctx: &Ctx) -> bool {
        if let Some(net) = &mut self.net {
            net.dirty = true;
        }
        self.progress_with(ctx, false)
    }

    /// `force_cm`: read the rdma-cm channel even if it was read very recently.
    /// Reading it costs a system call even when it is empty, so with every
    /// connection up it is read once per tick of the coarse clock (a few
    /// milliseconds; a busy `fi_cq_read` loop stays a user-space poll of the
    /// CQ, as on MSG endpoints); while connections are being set up, on
    /// every call.
    fn progress_with(&mut self, ctx: &Ctx, force_cm: bool) -> bool {
        // Reposts list the peers whose credits they may make due.
        let flushed = self.flush_reposts();
        let Some(net) = &mut self.net else { return false };
        // The coarse clock: never a system call, unlike Instant::now() on
        // machines whose clocksource the vDSO cannot read (an emulated HPET).
        let now = crate::sys::coarse_ms();
        let settling = net.settling;
        let cm_due = force_cm || settling || now != net.cm_checked;
        if cm_due {
            if now != net.cm_checked {
                net.check_starved(now);
            }
            net.cm_checked = now;
        }
        let mut any = self.poll_cq();
        if cm_due {
            any |= self.cm_events(ctx);
        }
        let Some(net) = &mut self.net else { return any };
        if !net.graves.is_empty() {
            net.expire_graves(now);
        }
        if settling {
            let waiting: Vec<u32> = net.conns.iter().filter(|(_, c)| c.stage == Stage::WaitPool).map(|(k, _)| *k).collect();
            for c in waiting {
                self.start_connect(ctx, c);
            }
        }
        let Some(net) = &mut self.net else { return any };
        // After completions and reposts, the peers they concern and those
        // left with work (`pending`) are drained; an operation's request for
        // progress, connection events and the clock's tick walk every peer.
        let full = cm_due || net.dirty;
        if any || flushed || full {
            net.dirty = false;
            self.drain_all(full);
            if let Some(net) = self.net.as_mut().filter(|n| n.settling) {
                net.settling = net.any_settling();
            }
        }
        any
    }

    fn poll_cq(&mut self) -> bool {
        let mut any = false;
        const N: usize = 32;
        // Uninitialised: an empty poll (most of a busy loop) touches nothing.
        let mut wcs = verbs::WcBuf::<N>::new();
        loop {
            let Some(net) = &self.net else { return any };
            let polled = match net.cq.poll_buf(&mut wcs, N) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!("rdm: ibv_poll_cq failed: errno {e}");
                    return any;
                }
            };
            let got = polled.len();
            for wc in polled {
                self.handle_wc(wc);
            }
            any |= got > 0;
            if got < N {
                return any;
            }
        }
    }

    fn handle_wc(&mut self, wc: &Wc) {
        let Some((kind, wr_conn, idx)) = wr_decode(wc.wr_id()) else {
            tracing::warn!("rdm: completion with a foreign work-request id {:#x}", wc.wr_id());
            return;
        };
        let ok = wc.status() == wc_status::SUCCESS;
        let flushed = wc.status() == wc_status::WR_FLUSH_ERR;
        let Some(net) = &mut self.net else { return };
        if kind == WrKind::Send && ok {
            // The common send completion: the slot names its connection (and
            // is not that connection's any more if it was torn down meanwhile).
            if let Some((done, covers)) = net.send.complete(idx, wr_conn) {
                if covers > 0 {
                    // The unsignaled sends posted before it are done too.
                    if let Some(r) = net.conns.get_mut(&wr_conn).and_then(|c| c.res.as_mut()) {
                        r.unsig.retire(covers);
                    }
                }
                if let Some(done) = done {
                    self.tx_done(done, None);
                }
            }
            return;
        }
        // Receives from the shared queue name their connection by QP number;
        // everything else carries it in the work-request id.
        let srq_recv = kind == WrKind::Recv && net.rx.is_some();
        let conn_id = if srq_recv { net.qpn.get(&wc.qp_num()).copied() } else { Some(wr_conn) };
        let Some((conn_id, conn)) = conn_id.and_then(|c| net.conns.get_mut(&c).map(|conn| (c, conn))) else {
            if srq_recv {
                // A connection that failed meanwhile: its buffer is ours again.
                net.grave_arrival(wc.qp_num());
                self.repost_pool(idx, None);
            } else if kind == WrKind::Send && is_unsignaled(idx) {
                // An unsignaled send of a connection that failed meanwhile (its
                // QP in the grave), flushed: it reports what it keeps.
                let owed = net.graves.iter_mut().flat_map(|g| g.conns.iter_mut()).find(|(id, _)| *id == wr_conn);
                let owed = owed.and_then(|(_, c)| c.res.as_mut()).and_then(|r| r.unsig.errored(idx));
                if let Some(d) = owed {
                    self.tx_report(d, Some(if flushed { FI_ECONNABORTED } else { crate::cq::status_to_err(wc.status()) }));
                }
            } else if kind == WrKind::Send {
                // A connection torn down meanwhile (its QP in the grave): a send slot it used is free now.
                net.send.complete(idx, wr_conn);
            }
            return;
        };
        if !ok && !flushed {
            // Warn: this closes the connection (a broken or hostile peer, or a lost link).
            tracing::warn!(
                "rdm: {:?} on connection to {} failed: {} (vendor error {:#x}); closing the connection",
                kind,
                conn.peer,
                wc.status_str(),
                wc.vendor_err()
            );
        }
        match kind {
            WrKind::Recv => {
                if !ok {
                    if net.rx.is_some() {
                        // The pool buffer came back unused by a message.
                        let addr = conn.peer;
                        if let Some(b) = net.bank_mut(&addr) {
                            b.arrived(&addr, 0);
                        }
                        self.repost_pool(idx, Some(addr));
                    }
                    // A flush on a connection still in the table means its QP
                    // went to error behind our back (e.g. a peer's access
                    // violation): tear it down, or it would linger, dead.
                    self.conn_failed(conn_id, if flushed { FI_ECONNABORTED } else { FI_EIO });
                    return;
                }
                let addr = conn.peer;
                self.handle_recv(conn_id, addr, idx, wc);
            }
            WrKind::Send if is_unsignaled(idx) => {
                // Completes only in error (the connection fails below): the
                // unsignaled sends before it succeeded; it reports what it
                // keeps (its transmit-queue place was freed when posted).
                let owed = conn.res.as_mut().and_then(|r| r.unsig.errored(idx));
                if let Some(d) = owed {
                    self.tx_report(d, Some(if flushed { FI_ECONNABORTED } else { crate::cq::status_to_err(wc.status()) }));
                }
                if !ok {
                    self.conn_failed(conn_id, if flushed { FI_ECONNABORTED } else { FI_EIO });
                }
            }
            WrKind::Send => {
                let done = net.send.complete(idx, conn_id).and_then(|(d, _)| d);
                if let Some(done) = done {
                    self.tx_done(done, if ok { None } else { Some(crate::cq::status_to_err(wc.status())) });
                }
                if !ok {
                    self.conn_failed(conn_id, if flushed { FI_ECONNABORTED } else { FI_EIO });
                }
            }
            WrKind::Op => {
                let Some(res) = conn.res.as_mut() else { return };
                let op = res.wr_ops.remove(&idx);
                res.free_wrs.push(idx);
                let err = if ok { None } else { Some(crate::cq::status_to_err(wc.status())) };
                match op {
                    Some(WrOp::Read(read_id)) => {
                        res.reads_out = res.reads_out.saturating_sub(1);
                        self.piece_done(read_id, err)
                    }
                    Some(WrOp::Rma(done)) => self.tx_done(done, err),
                    None => {}
                }
                if !ok {
                    self.conn_failed(conn_id, if flushed { FI_ECONNABORTED } else { FI_EIO });
                }
            }
        }
    }

    /// Posts the shared-pool buffers `handle_recv` set aside and counts
    /// their messages in the bank (`Bank::recycled`: arrived, and free again,
    /// so their credits go out). It runs first in every progress pass (so
    /// before `arm` lets a waiter sleep, and before the pass's drain, which
    /// sends the credits that became due), before a connection fails (its
    /// peer's share must see its messages before it is retired), and from
    /// `handle_recv` once `REPOST_BATCH` buffers wait, so a burst of messages
    /// never holds more than that many back from the pool.
    /// Each buffer's peer is listed for the pass's drain (its credit may be
    /// due). True if it posted any (the pass must drain).
    fn flush_reposts(&mut self) -> bool {
        let Some(net) = &mut self.net else { return false };
        if net.repost.is_empty() {
            return false;
        }
        let Net { rx, repost, peers, pending, .. } = net;
        let Some(pool) = rx else { return false };
        for (idx, from, release) in repost.drain(..) {
            let arrival = if post_pool(pool, idx) { pool.bank.recycled(&from, release) } else { pool.bank.arrived(&from, release) };
            check_arrival(&from, arrival);
            // A credit due now is sent by the pass's drain (a peer with
            // work queued is listed already).
            if pool.bank.share(&from).is_some_and(|s| s.credit_due()) {
                mark_in(peers, pending, &from);
            }
        }
        true
    }

    /// Posts pool buffer `idx` again; `from`: the peer whose message it held.
    fn repost_pool(&mut self, idx: u32, from: Option<SocketAddr>) {
        let Some(net) = &mut self.net else { return };
        let Some(pool) = &mut net.rx else { return };
        if !post_pool(pool, idx) {
            return;
        }
        pool.bank.reposted(from.as_ref());
        if let Some(a) = from {
            net.mark(&a);
        }
    }

    /// A bounce buffer received a message (or an RDMA write with data consumed it).
    fn handle_recv(&mut self, conn_id: u32, addr: SocketAddr, idx: u32, wc: &Wc) {
        let net = self.net.as_mut().expect("checked");
        let stride = net.geo.stride;
        // The buffer: in the shared pool, or the connection's own.
        let place = match &net.rx {
            Some(p) => p.chunk_of(idx),
            None => net.conns.get(&conn_id).and_then(|c| c.res.as_ref()).and_then(|r| r.recv.clone()).map(|b| (b, idx as usize * stride)),
        };
        let Some((buf, off)) = place else { return };
        let imm = wc.opcode() == wc_opcode::RECV_RDMA_WITH_IMM;
        let n = (wc.byte_len() as usize).min(stride);
        // One lookup of the peer: its cached fi_addr, and the credits the header carries.
        let mut peer = net.peers.get_mut(&addr);
        let src = match (self.av.as_ref(), peer.as_mut()) {
            (Some(av), Some(p)) => av.reverse_cached(&addr, &mut p.src_cache),
            (Some(av), None) => av.reverse(&addr),
            (None, _) => FI_ADDR_NOTAVAIL,
        };
        let decoded = if imm { None } else { Some(proto::decode(buf.slice(off, n))) };
        if let (Some(Ok(msg)), Some(f)) = (&decoded, peer.and_then(|p| p.flow.as_mut())) {
            f.granted(msg.credits());
            if let Message::Credit { recall: Some(t), .. } = msg {
                f.recalled(*t);
            }
        }
        // What the message hands back (a recall's answer), counted with its arrival.
        let mut release = 0u16;
        if imm {
            // fi_writedata from the peer: the data is in place; report its CQ data
            // and (fi_cq(3) of 2.x) how many bytes the write placed. A write split
            // into pieces (longer than the device's largest message) reports its
            // last piece's length: the one that carries the data.
            self.rx_completion(Completion {
                op_context: 0,
                flags: FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA,
                len: wc.byte_len() as usize,
                buf: 0,
                data: wc.imm_data().unwrap_or(0) as u64,
                tag: 0,
                src,
            });
        } else if let Some(decoded) = decoded {
            match decoded {
                Err(e) => tracing::warn!("rdm: dropping a malformed message from {addr}: {e}"),
                Ok(msg) => {
                    let net = self.net.as_mut().expect("checked");
                    match msg {
                        Message::Eager { env, payload, .. } => {
                            let kind = if env.tag.is_some() { Kind::Tagged } else { Kind::Msg };
                            let (tag, data) = (env.tag.unwrap_or(0), env.data.map(u64::from));
                            // Mostly a receive posted ahead and waiting first in line.
                            match self.matcher.take_head(kind, src, tag, data, payload.len()) {
                                Some(d) => self.complete_recv(&d, &payload[..d.len], None),
                                None => {
                                    let a = self.matcher.arrive(Incoming { src, kind, tag, data, body: Body::Eager(payload) });
                                    self.execute(a, Some(payload));
                                }
                            }
                        }
                        Message::Rts { .. } => {
                            let mut inc = Incoming::from_message(src, msg).expect("a data message");
                            if let Body::Rndv(r) = &mut inc.body {
                                let lid = net.next_lid;
                                net.next_lid += 1;
                                net.rndv_in.insert(lid, (addr, r.msg_id));
                                r.msg_id = lid;
                            }
                            let a = self.matcher.arrive(inc);
                            self.execute(a, None);
                        }
                        Message::Fin { msg_id, .. } => self.rndv_send_done(addr, msg_id, None),
                        Message::Nack { msg_id, err, .. } => self.rndv_send_done(addr, msg_id, Some(err as i32)),
                        Message::Credit { release: r, .. } => release = r,
                    }
                }
            }
        }
        let Some(net) = self.net.as_mut() else { return };
        // The bytes are out of the buffer: repost it; the bank decides who gets the credit.
        let mut post_failed = false;
        let reposted = match &mut net.rx {
            Some(pool) => {
                // Posted again and counted in the bank (`recycled`) by the
                // next progress pass, after the application has its
                // completion: off the path of a reply it sends at once.
                // Until then the bank sees the message as still on its way.
                let batch = REPOST_BATCH.min(pool.buffers() / 8).max(1);
                net.repost.push((idx, addr, release));
                if net.repost.len() >= batch {
                    // The pass that called us drains after its poll.
                    self.flush_reposts();
                }
                return;
            }
            None => match net.conns.get(&conn_id).and_then(|c| c.id.qp()) {
                Some(qp) => match qp.post_recv(wr_id(WrKind::Recv, conn_id, idx), &[buf.iov(off, stride)]) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!("rdm: reposting a receive buffer failed: {}", ioerr(e));
                        post_failed = true;
                        false
                    }
                },
                None => false,
            },
        };
        let arrival = match net.bank_mut(&addr) {
            Some(b) if reposted => b.recycled(&addr, release),
            Some(b) => b.arrived(&addr, release),
            None => Arrival::Ok,
        };
        net.mark(&addr);
        check_arrival(&addr, arrival);
        if post_failed {
            self.conn_failed(conn_id, FI_EIO);
        }
    }

    /// Posts an eager message now if `PeerFlow::next_send` would hand it out
    /// now: the peer is connected with nothing queued (messages, reads, RMA),
    /// a credit and a send slot are free, and the message is within the
    /// peer's eager limit (else `Queue`: the caller sends it by rendezvous).
    /// The payload goes from the application's buffers straight into the
    /// slot (no copy in between, no queue entry); the header carries the
    /// grant owed to the peer, as a queued message's would.
    fn send_direct(&mut self, addr: &SocketAddr, env: Envelope, iov: &[Iov], len: usize, done: TxDone) -> Direct {
        // A silent send with no counter to tell may go unsignaled (retired now).
        let quiet = done.silent && self.cntrs.send.is_none();
        let Some(net) = &mut self.net else { return Direct::Queue };
        let Net { peers, conns, geo, send, rx, .. } = net;
        if !send.has_free() || proto::HEADER_LEN + len > geo.stride {
            return Direct::Queue;
        }
        let Some(peer) = peers.get_mut(addr) else { return Direct::Queue };
        // Longer than the peer takes EAGER: the caller sends it by rendezvous.
        if !peer.ready || len > peer.eager_limit || !peer.reads.is_empty() || !peer.rma.is_empty() {
            return Direct::Queue;
        }
        let Some(conn_id) = peer.send_conn else { return Direct::Queue };
        let Some(conn) = conns.get_mut(&conn_id) else { return Direct::Queue };
        let Some(qp) = conn.id.qp() else { return Direct::Queue };
        let Some(res) = conn.res.as_mut() else { return Direct::Queue };
        let Some(flow) = peer.flow.as_mut() else { return Direct::Queue };
        let share = match (rx.as_mut(), peer.rx_bank.as_mut()) {
            (Some(p), _) => p.bank.share_mut(addr),
            (None, Some(b)) => b.share_mut(addr),
            (None, None) => None,
        };
        let Some(share) = share else { return Direct::Queue };
        if !flow.take_for_direct() {
            return Direct::Queue;
        }
        let grant = share.take_grant();
        let msg_id = peer.next_msg_id;
        let Ok(hdr) = proto::eager_header(grant, msg_id, env, len) else {
            // Not encodable (cannot happen below the stride): the queued path reports it.
            share.untake(grant);
            flow.untake_direct();
            return Direct::Queue;
        };
        peer.next_msg_id += 1;
        let n = proto::HEADER_LEN + len;
        if n <= res.max_inline {
            // Inline: staged on the stack, copied by the device while posted
            // (no send slot's memory is written). A quiet one may go
            // unsignaled and needs no slot: only a failure completes it (and
            // reports it); a signaled one keeps a slot for its completion.
            let skip = quiet && res.unsig.may_skip();
            let (wid, fl, slot) = if skip {
                let idx = res.unsig.push(Some(done));
                (wr_id(WrKind::Send, conn_id, idx), send_flags::INLINE, None)
            } else {
                let s = send.take(conn_id).expect("checked has_free");
                send.set_done(s, Some(done));
                send.set_covers(s, res.unsig.cover());
                (wr_id(WrKind::Send, conn_id, s), send_flags::SIGNALED | send_flags::INLINE, Some(s))
            };
            let posted = crate::verbs::mem::post_staged(&hdr, iov, len, |sge| qp.post_send(wid, SendOp::Send, &[sge], fl));
            if let Some(r) = posted {
                return match r {
                    Ok(()) if skip => Direct::Retired,
                    Ok(()) => Direct::Posted,
                    Err(e) => {
                        if skip {
                            // Not posted: a slot owes the failure (as a signaled send's would).
                            res.unsig.unpush();
                            let s = send.take(conn_id).expect("checked has_free");
                            send.set_done(s, Some(done));
                        }
                        tracing::warn!("rdm: posting to {addr} failed: {}", ioerr(e));
                        Direct::Failed(conn_id, FI_EIO)
                    }
                };
            }
            // Longer than the stack stage (a device inlining more than it):
            // not posted; undo and go through a slot.
            match slot {
                Some(s) => send.put_back(s),
                None => res.unsig.unpush(),
            }
        }
        let s = send.take(conn_id).expect("checked has_free");
        send.set_done(s, Some(done));
        send.set_covers(s, res.unsig.cover());
        let off = send.off(s);
        let sbuf = &send.buf;
        sbuf.write(off, &hdr);
        sbuf.fill_from_iovs(off + proto::HEADER_LEN, iov, len);
        let wid = wr_id(WrKind::Send, conn_id, s);
        let fl = send_flags::SIGNALED | if n <= res.max_inline { send_flags::INLINE } else { 0 };
        match qp.post_send(wid, SendOp::Send, &[sbuf.iov(off, n)], fl) {
            Ok(()) => Direct::Posted,
            Err(e) => {
                tracing::warn!("rdm: posting to {addr} failed: {}", ioerr(e));
                Direct::Failed(conn_id, FI_EIO)
            }
        }
    }

    /// After an operation was queued for the peer at `addr`: if it is
    /// connected (`ready`), posts what that peer may send now, without a
    /// full progress pass (the application's CQ reads drive the rest, and a
    /// full transmit queue makes the next operation progress before it
    /// answers `FI_EAGAIN`); while its connection is being set up, a
    /// progress pass drives it.
    fn post_or_progress(&mut self, ctx: &Ctx, addr: &SocketAddr, ready: bool) {
        if ready {
            self.drain_one(addr);
        } else {
            self.progress(ctx);
        }
    }

    /// Posts an RDMA READ/WRITE or a fetching atomic now if `drain_peer`
    /// would post it now: the peer is connected, nothing of its RMA or
    /// rendezvous reads is queued ahead, and a send-queue entry (`WR_OPS`)
    /// is free. The request names the application's buffers as they are (no
    /// copy of the iov list, no queue entry). True if it was taken: posted
    /// (its place in the transmit queue counted), or the post failed and the
    /// connection failed with it (which reports it, as `drain_peer`'s
    /// failures do). False: the caller queues it.
    fn op_direct(&mut self, addr: &SocketAddr, op: SendOp, local: &[Iov], done: TxDone) -> bool {
        let Some(net) = &mut self.net else { return false };
        let Some(peer) = net.peers.get_mut(addr) else { return false };
        if !peer.ready || !peer.rma.is_empty() || !peer.reads.is_empty() {
            return false;
        }
        let Some(conn_id) = peer.send_conn else { return false };
        let Some(conn) = net.conns.get_mut(&conn_id) else { return false };
        let Some(qp) = conn.id.qp() else { return false };
        let Some(res) = conn.res.as_mut() else { return false };
        let Some(i) = res.free_wrs.pop() else { return false };
        let r = post_op(qp, res, conn_id, i, op, local, done);
        self.tx_count += 1;
        if let Err(e) = r {
            tracing::warn!("rdm: posting to {addr} failed: {}", ioerr(e));
            // The request waits in `wr_ops`: failing the connection reports it.
            self.conn_failed(conn_id, FI_EIO);
        }
        true
    }

    /// Sends what flow control and the send queues allow, for one peer.
    fn drain_one(&mut self, addr: &SocketAddr) {
        let quiet = self.cntrs.send.is_none();
        let Some(net) = &mut self.net else { return };
        let Net { peers, conns, geo, send, rx, pd, rndv_sends, .. } = net;
        let mut out = Drained { done: Vec::new(), pd, rndv_sends };
        let Some(peer) = peers.get_mut(addr).filter(|p| p.ready) else { return };
        let r = if peer.pending {
            // Listed already: the next drain visits it again.
            Self::drain_with_share(peer, rx, conns, geo, send, quiet, &mut out).map(|_| ())
        } else {
            Self::drain_listing(peer, rx, conns, geo, send, quiet, &mut out, &mut net.pending)
        };
        for (d, e) in out.done {
            self.tx_done(d, e);
        }
        if let Err((c, e)) = r {
            self.conn_failed(c, e);
        }
    }

    /// Sends what flow control and the send queues allow: for every peer
    /// (`full`), or for the peers listed in `Net::pending`. Either way the
    /// peers left with work (or a credit due) are listed again.
    fn drain_all(&mut self, full: bool) {
        let quiet = self.cntrs.send.is_none();
        let Some(net) = &mut self.net else { return };
        let mut failed = Vec::new();
        let Net { peers, conns, geo, send, rx, pd, rndv_sends, pending, pending_walk, .. } = net;
        // Peers the shared pool's bank gave credits to meanwhile.
        let mut served = Vec::new();
        if let Some(p) = rx.as_mut() {
            p.bank.take_served(&mut served);
        }
        for a in &served {
            mark_in(peers, pending, a);
        }
        let mut out = Drained { done: Vec::new(), pd, rndv_sends };
        if full {
            pending.clear();
            // With the shared pool, one walk over the bank tells whether any
            // peer is owed a credit; if none is, a peer with nothing queued
            // is skipped without looking its share up.
            let none_due = rx.as_ref().is_some_and(|p| p.bank.due_keys().next().is_none());
            for peer in peers.values_mut() {
                peer.pending = false;
                if !peer.ready || (none_due && peer.nothing_queued()) {
                    continue;
                }
                if let Err(f) = Self::drain_listing(peer, rx, conns, geo, send, quiet, &mut out, pending) {
                    failed.push(f);
                }
            }
        } else {
            std::mem::swap(pending, pending_walk);
            for addr in pending_walk.iter() {
                let Some(peer) = peers.get_mut(addr) else { continue };
                if !peer.pending {
                    continue; // listed twice (removed and listed again meanwhile)
                }
                peer.pending = false;
                // Not connected yet: its connection's events walk every peer.
                if !peer.ready {
                    continue;
                }
                if let Err(f) = Self::drain_listing(peer, rx, conns, geo, send, quiet, &mut out, pending) {
                    failed.push(f);
                }
            }
            pending_walk.clear();
        }
        for (d, e) in out.done {
            self.tx_done(d, e);
        }
        for (c, e) in failed {
            self.conn_failed(c, e);
        }
    }

    /// `drain_with_share` for a peer not listed in `pending`; lists it if it
    /// is left with work (or a credit due).
    #[allow(clippy::too_many_arguments)]
    fn drain_listing(
        peer: &mut Peer,
        rx: &mut Option<RecvPool>,
        conns: &mut HintMap<u32, Conn>,
        geo: &Geo,
        send: &mut SendPool,
        quiet: bool,
        out: &mut Drained<'_>,
        pending: &mut Vec<SocketAddr>,
    ) -> Result<(), (u32, i32)> {
        let busy = Self::drain_with_share(peer, rx, conns, geo, send, quiet, out)?;
        if busy {
            peer.pending = true;
            pending.push(peer.addr);
        }
        Ok(())
    }

    /// The peer has work queued, or a credit due that a drain could not send.
    fn busy(peer: &Peer, rx: &Option<RecvPool>) -> bool {
        !peer.nothing_queued() || Self::share_of(peer, rx).is_some_and(|s| s.credit_due())
    }

    /// The peer's receive-side share: in the shared pool's bank, or in its own.
    fn share_of<'a>(peer: &'a Peer, rx: &'a Option<RecvPool>) -> Option<&'a Share> {
        match (rx.as_ref(), peer.rx_bank.as_ref()) {
            (Some(p), _) => p.bank.share(&peer.addr),
            (None, Some(b)) => b.share(&peer.addr),
            (None, None) => None,
        }
    }

    /// `drain_peer` with the peer's receive-side share: in the shared pool's
    /// bank, or in its own. Ok(true): the peer is left with work (or a
    /// credit due) it could not post.
    fn drain_with_share(
        peer: &mut Peer,
        rx: &mut Option<RecvPool>,
        conns: &mut HintMap<u32, Conn>,
        geo: &Geo,
        send: &mut SendPool,
        quiet: bool,
        out: &mut Drained<'_>,
    ) -> Result<bool, (u32, i32)> {
        // Nothing queued and no credit to return (most calls after a
        // completion): nothing to post.
        if !Self::busy(peer, rx) {
            return Ok(false);
        }
        let mut own = peer.rx_bank.take();
        let mut none = Share::default();
        let share = match (rx.as_mut(), own.as_mut()) {
            (Some(p), _) => p.bank.share_mut(&peer.addr),
            (None, Some(b)) => b.share_mut(&peer.addr),
            (None, None) => None,
        }
        .unwrap_or(&mut none);
        let r = Self::drain_peer(peer, share, conns, geo, send, quiet, out);
        if let Some(b) = own.as_mut() {
            // Its own bank serves only this peer, which is being drained.
            b.take_served(&mut Vec::new());
        }
        peer.rx_bank = own;
        r?;
        Ok(Self::busy(peer, rx))
    }

    /// Posts one peer's queued work. `Err((conn, err))`: the connection broke.
    fn drain_peer(
        peer: &mut Peer,
        share: &mut Share,
        conns: &mut HintMap<u32, Conn>,
        geo: &Geo,
        send: &mut SendPool,
        quiet: bool,
        out: &mut Drained<'_>,
    ) -> Result<(), (u32, i32)> {
        let addr = peer.addr;
        let eager_limit = peer.eager_limit;
        let Some(conn_id) = peer.send_conn else { return Ok(()) };
        let Some(conn) = conns.get_mut(&conn_id) else { return Ok(()) };
        let Some(qp) = conn.id.qp() else { return Ok(()) };
        let Some(res) = conn.res.as_mut() else { return Ok(()) };
        let stride = geo.stride;
        let sbuf = send.buf.clone();
        let fail = |e: i32| {
            tracing::warn!("rdm: posting to {addr} failed: {}", ioerr(e));
            (conn_id, FI_EIO)
        };
        // RDMA READs of rendezvous receives, then RMA: send-queue slots only.
        // Pieces of split RMA operations go the same way, under the same bound.
        while !res.free_wrs.is_empty() && res.reads_out < geo.reads_out {
            let Some(p) = peer.pop_piece() else { break };
            let i = res.free_wrs.pop().expect("checked");
            res.wr_ops.insert(i, WrOp::Read(p.read_id));
            res.reads_out += 1;
            let op = match p.kind {
                PieceKind::RmaWrite => SendOp::Write { raddr: p.raddr, rkey: p.rkey },
                PieceKind::RndvRead | PieceKind::RmaRead => SendOp::Read { raddr: p.raddr, rkey: p.rkey },
            };
            qp.post_send(wr_id(WrKind::Op, conn_id, i), op, &[p.local], send_flags::SIGNALED).map_err(fail)?;
        }
        // RMA after a split one waits until all its pieces are posted (the
        // QP then keeps the order); messages after a split write likewise
        // (send after write), credits included, which only delays them:
        // the pieces need nothing from the peer's software to complete.
        while let Some(op) = if peer.rma_pieces > 0 { None } else { peer.rma.pop_front() } {
            let r = match op {
                RmaOp::AtomicAdd { raddr, rkey, add, done } => {
                    let Some(s) = send.take(conn_id) else {
                        peer.rma.push_front(RmaOp::AtomicAdd { raddr, rkey, add, done });
                        break;
                    };
                    let off = send.off(s);
                    send.set_done(s, Some(done));
                    let wid = wr_id(WrKind::Send, conn_id, s);
                    qp.post_send(wid, SendOp::FetchAdd { raddr, rkey, add }, &[sbuf.iov(off, 8)], send_flags::SIGNALED)
                }
                RmaOp::WriteInline { data, raddr, rkey, done } => {
                    let Some(s) = send.take(conn_id) else {
                        peer.rma.push_front(RmaOp::WriteInline { data, raddr, rkey, done });
                        break;
                    };
                    let off = send.off(s);
                    sbuf.write(off, &data);
                    send.set_done(s, Some(done));
                    let fl = send_flags::SIGNALED | if data.len() <= res.max_inline && !data.is_empty() { send_flags::INLINE } else { 0 };
                    let wid = wr_id(WrKind::Send, conn_id, s);
                    qp.post_send(wid, SendOp::Write { raddr, rkey }, &[sbuf.iov(off, data.len())], fl)
                }
                op => {
                    let Some(i) = res.free_wrs.pop() else {
                        peer.rma.push_front(op);
                        break;
                    };
                    let (sop, local) = op.wire().expect("send-slot ops are handled above");
                    post_op(qp, res, conn_id, i, sop, local, op.done())
                }
            };
            r.map_err(fail)?;
        }
        // Messages: a send slot and flow-control credit each.
        let done_now = &mut out.done;
        if peer.write_pieces > 0 {
            return Ok(());
        }
        let Some(flow) = peer.flow.as_mut() else { return Ok(()) };
        while send.has_free() {
            let Some(o) = flow.next_send(share) else { break };
            let s = send.take(conn_id).expect("a free slot");
            let off = send.off(s);
            let (n, done, op) = match o {
                Outgoing::Credit { grant, release, recall } => {
                    let n = Message::Credit { credits: grant, release, recall }.encode_into(&sbuf, off);
                    (n, None, SendOp::Send)
                }
                Outgoing::Data { msg, grant } => match msg {
                    Out::Eager { msg_id, env, payload, done } if payload.len() > eager_limit => {
                        // Queued before the peer's HELLO told its eager limit,
                        // and longer than it: an RTS instead, in the same slot
                        // with the same credit.
                        let len = payload.len();
                        let r = match payload {
                            Payload::User(iovs) => rndv_segments(out.pd, &iovs, |_, _| None).map(|(s, t)| (s, t, Vec::new())),
                            Payload::Owned(v) => rndv_owned(out.pd, v.into_vec()),
                        };
                        match r {
                            Ok((segs, tmp, owned)) => {
                                tracing::debug!("rdm: a queued {len}-byte message to {addr} exceeds its eager limit {eager_limit}: rendezvous");
                                out.rndv_sends.insert((addr, msg_id), RndvSend { done, tmp, owned });
                                let m = Message::Rts { credits: grant, msg_id, env, len: len as u64, segs };
                                (m.encode_into(&sbuf, off), None, SendOp::Send)
                            }
                            Err(e) => {
                                // Nothing left: the slot, the credit and the grant go back.
                                send.put_back(s);
                                share.untake(grant);
                                flow.untake_direct();
                                done_now.push((done, Some(e.0)));
                                continue;
                            }
                        }
                    }
                    Out::Eager { msg_id, env, payload, done } => {
                        let len = payload.len();
                        let hdr = match proto::eager_header(grant, msg_id, env, len) {
                            Ok(h) => h,
                            Err(e) => {
                                tracing::warn!("rdm: cannot encode an eager message: {e}");
                                send.put_back(s);
                                done_now.push((done, Some(e.fi_error().0)));
                                continue;
                            }
                        };
                        sbuf.write(off, &hdr);
                        match &payload {
                            Payload::Owned(v) => sbuf.write(off + proto::HEADER_LEN, v),
                            Payload::User(iovs) => {
                                sbuf.fill_from_iovs(off + proto::HEADER_LEN, iovs, len);
                            }
                        }
                        (proto::HEADER_LEN + len, Some(done), SendOp::Send)
                    }
                    Out::Rts { msg_id, env, len, segs } => {
                        let m = Message::Rts { credits: grant, msg_id, env, len, segs };
                        (m.encode_into(&sbuf, off), None, SendOp::Send)
                    }
                    Out::Fin { msg_id, len } => (Message::Fin { credits: grant, msg_id, len }.encode_into(&sbuf, off), None, SendOp::Send),
                    Out::Nack { msg_id, err } => {
                        (Message::Nack { credits: grant, msg_id, err: err.max(1) }.encode_into(&sbuf, off), None, SendOp::Send)
                    }
                    Out::WriteData { payload, raddr, rkey, imm, done } => {
                        // No header to carry the grant: owe it again.
                        share.untake(grant);
                        let len = payload.len();
                        let iovs: Vec<Iov> = match &payload {
                            Payload::Owned(v) if len <= stride => {
                                sbuf.write(off, v);
                                vec![sbuf.iov(off, len)]
                            }
                            Payload::User(iovs) if len <= stride => {
                                sbuf.fill_from_iovs(off, iovs, len);
                                vec![sbuf.iov(off, len)]
                            }
                            Payload::User(iovs) => iovs.to_vec(),
                            Payload::Owned(_) => {
                                send.put_back(s);
                                done_now.push((done, Some(FI_EMSGSIZE)));
                                continue;
                            }
                        };
                        send.set_done(s, Some(done));
                        let fl = send_flags::SIGNALED | if len <= res.max_inline && len > 0 { send_flags::INLINE } else { 0 };
                        qp.post_send(wr_id(WrKind::Send, conn_id, s), SendOp::WriteImm { raddr, rkey, imm }, &iovs, fl)
                            .map_err(fail)?;
                        continue;
                    }
                },
            };
            // Unsignaled when inline and owing nothing on success (a protocol
            // message; a silent send, retired now): see `Unsignaled`.
            let skip = n <= res.max_inline && done.is_none_or(|d| d.silent && quiet) && res.unsig.may_skip();
            if skip {
                let idx = res.unsig.push(done);
                let r = qp.post_send(wr_id(WrKind::Send, conn_id, idx), op, &[sbuf.iov(off, n)], send_flags::INLINE);
                if r.is_err() {
                    // Not posted: the slot owes it, as below.
                    res.unsig.unpush();
                    send.set_done(s, done);
                    r.map_err(fail)?;
                }
                send.put_back(s);
                if let Some(d) = done {
                    done_now.push((d, None));
                }
                continue;
            }
            send.set_done(s, done);
            send.set_covers(s, res.unsig.cover());
            let fl = send_flags::SIGNALED | if n <= res.max_inline { send_flags::INLINE } else { 0 };
            qp.post_send(wr_id(WrKind::Send, conn_id, s), op, &[sbuf.iov(off, n)], fl).map_err(fail)?;
        }
        Ok(())
    }

    // ---- connection management ----

    fn cm_events(&mut self, ctx: &Ctx) -> bool {
        let mut any = false;
        loop {
            let Some(net) = &self.net else { return any };
            let ev = match net.channel.get_event() {
                Ok(Some(ev)) => ev,
                Ok(None) => return any,
                Err(e) => {
                    tracing::warn!("rdm: rdma_get_cm_event failed: {}", ioerr(e));
                    return any;
                }
            };
            any = true;
            self.cm_event(ctx, ev);
        }
    }

    fn cm_event(&mut self, ctx: &Ctx, mut ev: CmEvent) {
        if ev.token == LISTEN_TOKEN {
            match ev.kind {
                CmEventKind::ConnectRequest => self.on_connect_request(ctx, &mut ev),
                k => tracing::debug!("rdm: listener event {k:?} ignored"),
            }
            return;
        }
        let conn_id = ev.token as u32;
        let Some(net) = &mut self.net else { return };
        let Some(conn) = net.conns.get_mut(&conn_id) else {
            tracing::debug!("rdm: {:?} for a closed connection ignored", ev.kind);
            return;
        };
        let addr = conn.peer;
        match ev.kind {
            CmEventKind::AddrResolved => {
                if let Err(e) = conn.id.resolve_route(RESOLVE_MS) {
                    tracing::warn!("rdm: cannot resolve a route to {addr}: {}", ioerr(e));
                    self.conn_failed(conn_id, FI_EHOSTUNREACH);
                }
            }
            CmEventKind::RouteResolved => {
                let dev_ok = conn.id.device().is_some_and(|d| Arc::ptr_eq(&d, &net.pd.context().clone()));
                if !dev_ok {
                    tracing::warn!("rdm: the route to {addr} is not on the endpoint's device");
                    self.conn_failed(conn_id, FI_EHOSTUNREACH);
                    return;
                }
                self.start_connect(ctx, conn_id);
            }
            CmEventKind::Established => {
                conn.stage = Stage::Up;
                // Credits keep the RDM protocol clear of RNR; should a peer that
                // ignores them cause one anyway, the retry is 0.64 ms, not 655.
                if let Some(qp) = conn.id.qp() {
                    crate::ep::set_rnr_timer(qp, "rdm");
                }
                let active = conn.active;
                let Some(peer) = net.peers.get_mut(&addr) else { return };
                if peer.send_conn != Some(conn_id) {
                    // The receiving half of a connection to ourselves.
                    return;
                }
                if active {
                    match Hello::decode(&ev.private_data) {
                        Ok(h) => {
                            peer.flow = Some(PeerFlow::new(h.grant, h.max_credits));
                            peer.incarnation = h.incarnation;
                            if peer.learn_eager_limit(net.geo.eager_size, h.max_eager) {
                                log_eager_limit(&addr, h.max_eager, net.geo.eager_size);
                            }
                        }
                        Err(e) => {
                            tracing::warn!("rdm: {addr} accepted with a bad HELLO: {e}");
                            self.conn_failed(conn_id, FI_ECONNREFUSED);
                            return;
                        }
                    }
                }
                peer.ready = true;
                peer.release_pre();
                tracing::debug!("rdm: connected to {addr} (conn {conn_id})");
                net.log_memory("connected");
            }
            CmEventKind::Rejected => {
                let reason = reject_reason(&ev.private_data);
                if reason == Some(REJECT_TIE_BREAK) {
                    // The peer connects to us instead; our queue waits for its request.
                    tracing::debug!("rdm: {addr} keeps its own connection (tie-break)");
                    net.drop_conn(conn_id);
                } else {
                    tracing::info!("rdm: {addr} refused the connection (status {}, reason {reason:?})", ev.status);
                    self.conn_failed(conn_id, FI_ECONNREFUSED);
                }
            }
            CmEventKind::Unreachable | CmEventKind::AddrError | CmEventKind::RouteError => {
                tracing::info!("rdm: {addr} unreachable ({:?}, status {})", ev.kind, ev.status);
                self.conn_failed(conn_id, FI_EHOSTUNREACH);
            }
            CmEventKind::ConnectError => {
                tracing::info!("rdm: connection to {addr} failed (status {})", ev.status);
                self.conn_failed(conn_id, FI_ECONNABORTED);
            }
            CmEventKind::Disconnected if ctx.cfg.lose_disconnect => {
                tracing::warn!("rdm: ignoring DISCONNECTED from {addr} (conn {conn_id}): {FAULT_LOSE_DISCONNECT_ENV}");
            }
            CmEventKind::Disconnected | CmEventKind::DeviceRemoval => {
                // Take what already arrived before tearing the connection down.
                self.poll_cq();
                tracing::debug!("rdm: {addr} disconnected (conn {conn_id})");
                self.conn_failed(conn_id, FI_ECONNABORTED);
            }
            k => tracing::debug!("rdm: connection event {k:?} ignored"),
        }
    }

    fn on_connect_request(&mut self, ctx: &Ctx, ev: &mut CmEvent) {
        let Some(id) = ev.new_id.take() else { return };
        let Some(net) = &mut self.net else { return };
        let hello = match Hello::decode(&ev.private_data) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("rdm: refusing a connection with a bad HELLO: {e}");
                let _ = id.reject(&reject_data(REJECT_BAD_HELLO));
                return;
            }
        };
        let Some(peer_addr) = sys::sockaddr_parse(&hello.name) else {
            tracing::warn!("rdm: refusing a connection whose HELLO names no address");
            let _ = id.reject(&reject_data(REJECT_BAD_HELLO));
            return;
        };
        if !id.device().is_some_and(|d| Arc::ptr_eq(&d, net.pd.context())) {
            tracing::warn!("rdm: refusing a connection from {peer_addr} on another device");
            let _ = id.reject(&reject_data(REJECT_BAD_HELLO));
            return;
        }
        if let Some(old) = net.peers.get(&peer_addr).filter(|p| restarted(p.incarnation, hello.incarnation, &net.local, &peer_addr)) {
            // The peer's process is new, its old one gone without a
            // disconnect reaching us (a lost DREQ: crash, partition). What
            // was owed to the old one fails; the new one is a new peer.
            tracing::warn!(
                "rdm: {peer_addr} restarted (incarnation {:#x}, was {:#x}): failing its old connection",
                hello.incarnation,
                old.incarnation
            );
            if let Some(c) = old.conns.first().copied() {
                self.conn_failed(c, FI_ECONNRESET);
            }
        }
        let Some(net) = &mut self.net else { return };
        let own = match net.peers.get(&peer_addr).and_then(|p| p.send_conn).and_then(|c| net.conns.get(&c)) {
            None => OwnConn::None,
            Some(c) if c.active && c.stage == Stage::Up => OwnConn::ActiveUp,
            Some(c) if c.active => OwnConn::ActivePending,
            Some(_) => OwnConn::Passive,
        };
        let decision = decide_request(&net.local, &peer_addr, own);
        tracing::debug!("rdm: connect request from {peer_addr}: {decision:?}");
        match decision {
            ReqDecision::RejectTieBreak => {
                let _ = id.reject(&reject_data(REJECT_TIE_BREAK));
                return;
            }
            ReqDecision::RejectDuplicate => {
                let _ = id.reject(&reject_data(REJECT_DUPLICATE));
                return;
            }
            ReqDecision::AcceptReplacing => {
                if let Some(old) = net.peers.get(&peer_addr).and_then(|p| p.send_conn) {
                    net.drop_conn(old);
                }
            }
            ReqDecision::Accept | ReqDecision::AcceptSelf => {}
        }
        let known = net.bank_mut(&peer_addr).is_some_and(|b| b.contains(&peer_addr));
        if !known && !net.pool_room() {
            tracing::warn!("rdm: refusing a connection from {peer_addr}: no receive buffers for one more peer");
            let _ = id.reject(&reject_data(REJECT_NO_BUFFERS));
            return;
        }
        let conn_id = net.next_conn;
        net.next_conn += 1;
        id.set_token(conn_id as u64);
        net.conns.insert(conn_id, Conn { id, peer: peer_addr, active: false, stage: Stage::Connecting, res: None });
        net.settling = true;
        if net.setup_qp(conn_id).is_err() {
            if let Some(c) = net.conns.remove(&conn_id) {
                net.bury(vec![(conn_id, c)], 0);
            }
            return;
        }
        let peer = net.peers.get_or_insert_with(peer_addr, || Peer::new(peer_addr));
        peer.conns.push(conn_id);
        if decision != ReqDecision::AcceptSelf {
            peer.send_conn = Some(conn_id);
            peer.ready = false;
            peer.flow = Some(PeerFlow::new(hello.grant, hello.max_credits));
            peer.incarnation = hello.incarnation;
            if peer.learn_eager_limit(net.geo.eager_size, hello.max_eager) {
                log_eager_limit(&peer_addr, hello.max_eager, net.geo.eager_size);
            }
        }
        // Our grant: its quota, or what the pool has free (possibly 0: the
        // rest follows in CREDITs; the peer's HELLO gave us credits to send them with).
        let grant = net.admit(peer_addr);
        let (init, resp) = ctx.max_rd_atom;
        let accept_hello = net.hello(grant, false);
        let p = ConnParam {
            private_data: &accept_hello,
            responder_resources: (ev.initiator_depth as i32).min(resp).clamp(0, 255) as u8,
            initiator_depth: (ev.responder_resources as i32).min(init).clamp(0, 255) as u8,
            retry_count: crate::verbs::cm::RC_RETRY_COUNT,
            rnr_retry_count: crate::verbs::cm::RNR_RETRY_FOREVER,
        };
        let conn = net.conns.get(&conn_id).expect("inserted");
        if let Err(e) = conn.id.accept(&p) {
            tracing::warn!("rdm: rdma_accept for {peer_addr} failed: {}", ioerr(e));
            self.conn_failed(conn_id, FI_ECONNABORTED);
            return;
        }
        net.log_memory("accepted");
    }

    /// Connects an active connection whose route is resolved, once the
    /// receive pool can give the peer its floor of credits (else it waits,
    /// stage WaitPool, and progress retries).
    fn start_connect(&mut self, ctx: &Ctx, conn_id: u32) {
        let Some(net) = &mut self.net else { return };
        let Some(addr) = net.conns.get(&conn_id).map(|c| c.peer) else { return };
        let known = net.bank_mut(&addr).is_some_and(|b| b.contains(&addr));
        if !known {
            if !net.pool_room() {
                self.conn_failed(conn_id, FI_ENOSPC);
                return;
            }
            if !net.can_connect() {
                if let Some(c) = net.conns.get_mut(&conn_id) {
                    if c.stage != Stage::WaitPool {
                        tracing::debug!("rdm: connection to {addr} waits for free receive buffers");
                    }
                    c.stage = Stage::WaitPool;
                }
                return;
            }
        }
        if let Err(e) = net.setup_qp(conn_id) {
            // The real cause (e.g. FI_ENOMEM: the bounce buffers cannot be pinned).
            self.conn_failed(conn_id, e.0);
            return;
        }
        let grant = net.admit(addr);
        // Talking to ourselves: the passive half never sends, so it gets
        // nothing; our share's grant goes to the active half in our accept.
        let hello = net.hello(if addr == net.local { 0 } else { grant }, true);
        let (init, resp) = ctx.max_rd_atom;
        let p = ConnParam {
            private_data: &hello,
            responder_resources: resp.clamp(0, 255) as u8,
            initiator_depth: init.clamp(0, 255) as u8,
            retry_count: crate::verbs::cm::RC_RETRY_COUNT,
            rnr_retry_count: crate::verbs::cm::RNR_RETRY_FOREVER,
        };
        let conn = net.conns.get_mut(&conn_id).expect("present");
        conn.stage = Stage::Connecting;
        if let Err(e) = conn.id.connect(&p) {
            tracing::warn!("rdm: rdma_connect to {addr} failed: {}", ioerr(e));
            self.conn_failed(conn_id, FI_ECONNREFUSED);
        }
    }

    /// A connection broke (or could not be made): its peer's outstanding and
    /// queued operations complete with `err`, and the peer is forgotten (the
    /// next operation to it connects again).
    fn conn_failed(&mut self, conn_id: u32, err: i32) {
        self.flush_reposts();
        let Some(net) = &mut self.net else { return };
        // The bank rebalances for the peers left: walk them all next pass.
        net.dirty = true;
        let Some(conn) = net.conns.get(&conn_id) else { return };
        let addr = conn.peer;
        let is_peer_conn = net.peers.get(&addr).is_some_and(|p| p.conns.contains(&conn_id));
        let mut done: Vec<(TxDone, Option<i32>)> = Vec::new();
        let mut reads: Vec<u64> = Vec::new();
        let conn_ids: Vec<u32> = if is_peer_conn { net.peers[&addr].conns.clone() } else { vec![conn_id] };
        let mut dead = Vec::new();
        for c in &conn_ids {
            if let Some(mut conn) = net.conns.remove(c) {
                if conn.stage == Stage::Up {
                    let _ = conn.id.disconnect();
                }
                for d in net.send.fail_conn(*c) {
                    done.push((d, Some(err)));
                }
                if let Some(res) = conn.res.as_mut() {
                    for (_, op) in res.wr_ops.drain() {
                        match op {
                            WrOp::Read(r) => reads.push(r),
                            WrOp::Rma(d) => done.push((d, Some(err))),
                        }
                    }
                }
                dead.push((*c, conn));
            }
        }
        // The receive buffers promised to the peer wait until its QPs surely consume nothing more.
        let limbo = match (&mut net.rx, is_peer_conn) {
            (Some(p), true) => p.bank.retire(&addr),
            _ => 0,
        };
        net.bury(dead, limbo);
        if is_peer_conn {
            if let Some(mut peer) = net.peers.remove(&addr) {
                tracing::info!("rdm: lost the connection to {addr}; failing its operations ({err})");
                let mut outs: Vec<Out> = peer.pre.drain(..).collect();
                if let Some(f) = peer.flow.as_mut() {
                    outs.extend(f.take_queue());
                }
                for o in outs {
                    match o {
                        Out::Eager { done: d, .. } | Out::WriteData { done: d, .. } => done.push((d, Some(err))),
                        Out::Rts { .. } | Out::Fin { .. } | Out::Nack { .. } => {}
                    }
                }
                for op in peer.rma.drain(..) {
                    done.push((op.done(), Some(err)));
                }
                for p in peer.reads.drain(..) {
                    reads.push(p.read_id);
                }
                let keys: Vec<(SocketAddr, u64)> = net.rndv_sends.keys().filter(|(a, _)| *a == addr).copied().collect();
                for k in keys {
                    if let Some(s) = net.rndv_sends.remove(&k) {
                        done.push((s.done, Some(err)));
                    }
                }
            }
        }
        for (d, e) in done {
            self.tx_done(d, e);
        }
        for r in reads {
            self.piece_done(r, Some(err));
        }
    }
}

impl Net {
    /// Forgets a connection without failing anything (tie-break loser). The
    /// peer keeps its share of the receive pool (the connection that wins
    /// carries the same grant).
    fn drop_conn(&mut self, conn_id: u32) {
        if let Some(conn) = self.conns.remove(&conn_id) {
            if let Some(p) = self.peers.get_mut(&conn.peer) {
                p.conns.retain(|c| *c != conn_id);
                if p.send_conn == Some(conn_id) {
                    p.send_conn = None;
                    p.ready = false;
                }
            }
            self.bury(vec![(conn_id, conn)], 0);
        }
    }

    /// Keeps failed connections (QPs moved to the error state: they consume
    /// nothing more) until their last completions are surely polled.
    fn bury(&mut self, conns: Vec<(u32, Conn)>, limbo: u32) {
        let shared = self.rx.is_some();
        for (_, c) in &conns {
            if let Some(qp) = c.id.qp() {
                let _ = qp.to_error();
            }
            if c.res.is_some() {
                self.cq_need = self.cq_need.saturating_sub(self.geo.cqes(shared));
            }
        }
        if conns.is_empty() && limbo == 0 {
            return;
        }
        let until = crate::sys::coarse_ms() + GRAVE_MS;
        self.graves.push(Grave { conns: conns.into_iter().collect(), limbo, until });
    }

    /// A shared receive buffer completed on the QP `qp_num` of a failed
    /// connection: it consumed one of the buffers promised to that peer.
    fn grave_arrival(&mut self, qp_num: u32) {
        let conn = self.qpn.get(&qp_num).copied();
        let grave = conn.and_then(|c| self.graves.iter_mut().find(|g| g.conns.iter().any(|(id, _)| *id == c)));
        if let Some(p) = &mut self.rx {
            match grave {
                Some(g) if g.limbo > 0 => {
                    g.limbo -= 1;
                    p.bank.limbo_arrived();
                }
                // Nothing promised left (a misbehaving peer): counted against the free buffers.
                _ => p.bank.limbo_arrived(),
            }
        }
    }

    /// Destroys the QPs of graves whose time is up; frees their send slots
    /// and the receive buffers still in limbo.
    fn expire_graves(&mut self, now: u64) {
        while let Some(i) = self.graves.iter().position(|g| g.until <= now) {
            let g = self.graves.swap_remove(i);
            for (id, c) in &g.conns {
                if let Some(u) = c.res.as_ref().map(|r| &r.unsig).filter(|u| u.failed > 0) {
                    tracing::warn!("rdm: {} unsignaled sends to {} failed with their connection", u.failed, c.peer);
                }
                if let Some(qp) = c.id.qp() {
                    if self.qpn.get(&qp.qp_num()) == Some(id) {
                        self.qpn.remove(&qp.qp_num());
                    }
                }
                self.send.release_conn(*id);
            }
            if let Some(p) = &mut self.rx {
                p.bank.release_limbo(g.limbo);
            }
            drop(g);
        }
    }
}

/// Encoding a protocol message straight into a send slot.
trait EncodeInto {
    fn encode_into(&self, buf: &RegBuf, off: usize) -> usize;
}

impl EncodeInto for Message<'_> {
    fn encode_into(&self, buf: &RegBuf, off: usize) -> usize {
        match self.to_vec() {
            Ok(v) => {
                buf.write(off, &v);
                v.len()
            }
            Err(e) => {
                // Only messages we built ourselves get here; they always encode.
                tracing::error!("rdm: cannot encode {:?}: {e}", self.op());
                0
            }
        }
    }
}

/// Posts an RDMA READ/WRITE or a fetching atomic (`RmaOp::wire`) in
/// send-queue entry `i` of connection `conn_id`, recorded in `wr_ops` first:
/// its completion reports `done`, and so does the connection's failure if the
/// post fails. Writes that fit go inline.
fn post_op(qp: &verbs::Qp, res: &mut QpRes, conn_id: u32, i: u32, op: SendOp, local: &[Iov], done: TxDone) -> Result<(), i32> {
    res.wr_ops.insert(i, WrOp::Rma(done));
    let inline = matches!(op, SendOp::Write { .. }) && {
        let len: usize = local.iter().map(|v| v.len() as usize).sum();
        len <= res.max_inline && len > 0
    };
    let fl = send_flags::SIGNALED | if inline { send_flags::INLINE } else { 0 };
    qp.post_send(wr_id(WrKind::Op, conn_id, i), op, local, fl)
}

/// Lists the peer at `addr` for the next drain (`Net::pending`), once.
fn mark_in(peers: &mut HintMap<SocketAddr, Peer>, pending: &mut Vec<SocketAddr>, addr: &SocketAddr) {
    if let Some(p) = peers.get_mut(addr) {
        if !p.pending {
            p.pending = true;
            pending.push(*addr);
        }
    }
}

/// Posts shared-pool buffer `idx` again. False if that failed (logged): the
/// SRQ holds every pool buffer, so it cannot be "full"; the buffer is lost
/// to the pool (and stays busy in the bank).
#[inline]
fn post_pool(pool: &mut RecvPool, idx: u32) -> bool {
    match pool.post(idx, wr_id(WrKind::Recv, 0, idx)) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("rdm: reposting a shared receive buffer failed: {}", ioerr(e));
            false
        }
    }
}

/// Logs a message that came without a credit (`Arrival::Overrun`).
fn check_arrival(from: &SocketAddr, a: Arrival) {
    if a == Arrival::Overrun {
        tracing::warn!("rdm: {from} sent a message without a credit (protocol violation)");
    }
}
