//! Per-peer state of an RDM endpoint: the RC connections (one per peer, plus
//! a receive-only one when an endpoint talks to itself), the queues of what
//! waits for the connection or for flow-control credits, and the pure rules
//! the endpoint applies (work-request ids, the simultaneous-connect
//! tie-break, bounce-buffer geometry).

use std::collections::VecDeque;
use rustc_hash::FxHashMap as HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use super::credits::PeerFlow;
use super::srq::Bank;
use super::proto::{Envelope, Segment};
use crate::verbs::mem::RegBuf;
use crate::verbs::cm::CmId;
use crate::verbs::{Iov, SendOp};

/// A transmit completion owed to the application when an operation finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxDone {
    pub context: u64,
    /// Completion flags (FI_SEND|FI_MSG, FI_SEND|FI_TAGGED, FI_RMA|FI_WRITE, ...).
    pub flags: u64,
    /// Success is not reported (inject, selective completion); errors are.
    pub silent: bool,
    /// Registrations held until it completes (`Net::pins`; 0: none).
    pub pin: u32,
}

/// The application's buffers of one operation (most have one).
pub type IovVec = smallvec::SmallVec<[Iov; 2]>;

/// `iov` as an `IovVec`; one buffer (most operations) without
/// `SmallVec::from_slice`'s out-of-line copy loop (or `push`'s call).
#[inline(always)]
pub fn iov_vec(iov: &[Iov]) -> IovVec {
    match iov {
        // Inline storage, length 1 (the second entry is only filler).
        [one] => IovVec::from_buf_and_len([*one, *one], 1),
        _ => IovVec::from_slice(iov),
    }
}

/// Bytes copied at call time; small ones (most injects) inline.
pub use crate::verbs::mem::Bytes;

/// Where an outgoing payload comes from.
pub enum Payload {
    /// Copied at call time (inject, or a message that had to wait).
    Owned(Bytes),
    /// The application's buffers, valid until the operation completes; copied
    /// into the send slot when the message leaves.
    User(IovVec),
}

impl Payload {
    pub fn len(&self) -> usize {
        match self {
            Payload::Owned(v) => v.len(),
            Payload::User(iovs) => Iov::total(iovs),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A message waiting for its peer's connection or for a credit (the `M` of
/// `PeerFlow<M>`). Every one consumes a credit and a send slot.
pub enum Out {
    Eager { msg_id: u64, env: Envelope, payload: Payload, done: TxDone },
    Rts { msg_id: u64, env: Envelope, len: u64, segs: Vec<Segment> },
    Fin { msg_id: u64, len: u64 },
    Nack { msg_id: u64, err: u16 },
    /// `fi_writedata`: an RDMA WRITE with immediate data, which consumes one
    /// of the peer's receive buffers (so it is flow controlled like a message).
    WriteData { payload: Payload, raddr: u64, rkey: u32, imm: u32, done: TxDone },
}

/// What a queued piece (`Peer::reads`) belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceKind {
    /// An RDMA READ of a rendezvous receive (`Net::reads`).
    RndvRead,
    /// An RDMA READ of an RMA read longer than the device's largest message (`Net::splits`).
    RmaRead,
    /// An RDMA WRITE of such an RMA write (`Net::splits`).
    RmaWrite,
}

/// One RDMA READ of a rendezvous receive (or part of one), or one piece of
/// an RMA operation longer than the device's largest message: both wait in
/// `Peer::reads` and are posted under the same bound (`Geo::reads_out`).
#[derive(Clone, Copy)]
pub struct ReadPiece {
    /// The rendezvous receive's `Net::reads` key, or the split RMA's
    /// `Net::splits` key (one id space).
    pub read_id: u64,
    pub kind: PieceKind,
    pub local: Iov,
    pub raddr: u64,
    pub rkey: u32,
}

/// An RMA operation by fi_addr that needs only a send-queue slot.
pub enum RmaOp {
    Read { local: Vec<Iov>, raddr: u64, rkey: u32, done: TxDone },
    Write { local: Vec<Iov>, raddr: u64, rkey: u32, done: TxDone },
    /// Inject: the bytes are copied into a send slot when it leaves.
    WriteInline { data: Bytes, raddr: u64, rkey: u32, done: TxDone },
    FetchAdd { local: Iov, raddr: u64, rkey: u32, add: u64, done: TxDone },
    CompSwap { local: Iov, raddr: u64, rkey: u32, compare: u64, swap: u64, done: TxDone },
    /// A non-fetching atomic add: a fetch-add whose old value lands in a send slot.
    AtomicAdd { raddr: u64, rkey: u32, add: u64, done: TxDone },
}

impl RmaOp {
    /// What an operation that takes a send-queue entry of its own (`WR_OPS`)
    /// posts: the request and its local buffers. None for those that use a
    /// send slot (`WriteInline`, `AtomicAdd`).
    pub fn wire(&self) -> Option<(SendOp, &[Iov])> {
        Some(match self {
            RmaOp::Read { local, raddr, rkey, .. } => (SendOp::Read { raddr: *raddr, rkey: *rkey }, local.as_slice()),
            RmaOp::Write { local, raddr, rkey, .. } => (SendOp::Write { raddr: *raddr, rkey: *rkey }, local.as_slice()),
            RmaOp::FetchAdd { local, raddr, rkey, add, .. } => {
                (SendOp::FetchAdd { raddr: *raddr, rkey: *rkey, add: *add }, std::slice::from_ref(local))
            }
            RmaOp::CompSwap { local, raddr, rkey, compare, swap, .. } => {
                (SendOp::CompSwap { raddr: *raddr, rkey: *rkey, compare: *compare, swap: *swap }, std::slice::from_ref(local))
            }
            RmaOp::WriteInline { .. } | RmaOp::AtomicAdd { .. } => return None,
        })
    }

    pub fn done(&self) -> TxDone {
        match self {
            RmaOp::Read { done, .. }
            | RmaOp::Write { done, .. }
            | RmaOp::WriteInline { done, .. }
            | RmaOp::FetchAdd { done, .. }
            | RmaOp::CompSwap { done, .. }
            | RmaOp::AtomicAdd { done, .. } => *done,
        }
    }
}

/// What a posted work request on the send queue stands for (besides send slots).
#[derive(Debug)]
pub enum WrOp {
    /// A piece (`ReadPiece`): of a rendezvous read or of a split RMA, by id.
    Read(u64),
    Rma(TxDone),
}

/// Connection stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Active: address and route resolution (rdma-cm events pending).
    Resolving,
    /// Active: route resolved, waiting for the receive pool to have a new
    /// peer's floor of credits free (our HELLO must grant some).
    WaitPool,
    /// Active: connect request sent; passive: accepted, waiting for ESTABLISHED.
    Connecting,
    Up,
}

/// The queue pair's own buffers and send-queue bookkeeping (send slots are
/// the endpoint's, `pool::SendPool`).
pub struct QpRes {
    /// The QP's own receive buffers (no shared receive queue); None with an SRQ.
    pub recv: Option<Arc<RegBuf>>,
    /// Other send-queue work requests (RDMA READ/WRITE, atomics) by index.
    pub wr_ops: HashMap<u32, WrOp>,
    pub free_wrs: Vec<u32>,
    /// RDMA READs of rendezvous receives in flight.
    pub reads_out: usize,
    pub max_inline: usize,
    pub qp_num: u32,
    /// Inline sends posted without a completion request.
    pub unsig: Unsignaled,
}

/// Most unsignaled sends outstanding on one QP (its send queue has room
/// for them besides the send slots and `WR_OPS`).
pub const UNSIG_MAX: usize = 16;
/// Every this many sends in a row on a QP, one is signaled, so unsignaled
/// ones keep being retired while the QP is busy.
pub const UNSIG_EVERY: u32 = 8;
/// Work-request indexes with this bit name an unsignaled send (its sequence
/// number in the other bits), not a send slot (`SendPool` has far fewer).
/// Only a failure completes them.
pub const UNSIG_FLAG: u32 = 1 << 23;
const UNSIG_SEQ: u32 = UNSIG_FLAG - 1;

/// Whether a send's work-request index names an unsignaled send.
pub fn is_unsignaled(index: u32) -> bool {
    index & UNSIG_FLAG != 0
}

/// Sends posted unsignaled on one QP: inline (the device copied the bytes
/// when they were posted, so their send slot is free at once) and owing the
/// application nothing on success (protocol messages; silent sends, retired
/// when posted). A QP completes its sends in order: the completion of a
/// later signaled send retires them. One that fails completes (in error or
/// flushed, with its sequence number in the work-request id): those before
/// it succeeded, and it reports what it keeps (`errored`). The ones a failed
/// connection's QP neither flushed nor failed by the time it is destroyed
/// had succeeded.
#[derive(Debug, Default)]
pub struct Unsignaled {
    /// Oldest first: sequence number, and what it reports on failure (None:
    /// a protocol message).
    owed: VecDeque<(u32, Option<TxDone>)>,
    /// Of `owed`, how many were posted after the last signaled send.
    since: u32,
    next_seq: u32,
    /// How many reported a failure (for the log).
    pub failed: u32,
}

impl Unsignaled {
    /// Whether the next send may go unsignaled: not too many outstanding,
    /// and not the `UNSIG_EVERY`-th in a row.
    #[inline]
    pub fn may_skip(&self) -> bool {
        self.owed.len() < UNSIG_MAX && self.since + 1 < UNSIG_EVERY
    }

    /// An unsignaled send is posted: returns its work-request index.
    #[inline]
    pub fn push(&mut self, fail: Option<TxDone>) -> u32 {
        let seq = self.next_seq;
        self.next_seq = (seq + 1) & UNSIG_SEQ;
        self.owed.push_back((seq, fail));
        self.since += 1;
        UNSIG_FLAG | seq
    }

    /// Takes back the last `push` (its send was not posted after all).
    pub fn unpush(&mut self) {
        if self.owed.pop_back().is_some() {
            self.since = self.since.saturating_sub(1);
            self.next_seq = self.next_seq.wrapping_sub(1) & UNSIG_SEQ;
        }
    }

    /// A signaled send is posted: how many unsignaled ones its completion retires.
    #[inline]
    pub fn cover(&mut self) -> u32 {
        std::mem::take(&mut self.since)
    }

    /// The signaled send that covered `n` completed: the `n` oldest are done.
    pub fn retire(&mut self, n: u32) {
        let n = (n as usize).min(self.owed.len());
        self.owed.drain(..n);
    }

    /// The unsignaled send with work-request index `index` completed in
    /// error (or flushed): the ones before it succeeded; returns what it
    /// reports. None for a protocol message, or an index not outstanding.
    pub fn errored(&mut self, index: u32) -> Option<TxDone> {
        let seq = index & UNSIG_SEQ;
        let i = self.owed.iter().position(|(s, _)| *s == seq)?;
        self.owed.drain(..i);
        let (_, fail) = self.owed.pop_front()?;
        self.since = self.since.min(self.owed.len() as u32);
        if fail.is_some() {
            self.failed += 1;
        }
        fail
    }

    pub fn len(&self) -> usize {
        self.owed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owed.is_empty()
    }
}

/// One RC connection to a peer.
pub struct Conn {
    pub id: CmId,
    pub peer: SocketAddr,
    /// We sent the connect request.
    pub active: bool,
    pub stage: Stage,
    pub res: Option<QpRes>,
}

/// One peer endpoint (by its listening address).
pub struct Peer {
    pub addr: SocketAddr,
    /// The connection messages to the peer leave on (None: waiting for the
    /// peer's own connect request after losing the tie-break).
    pub send_conn: Option<u32>,
    /// Every connection of this peer (the send one, and for ourselves the receive-only one).
    pub conns: Vec<u32>,
    /// The send connection is established.
    pub ready: bool,
    /// Flow control, once the peer's HELLO is known.
    pub flow: Option<PeerFlow<Out>>,
    /// Without a shared receive queue: the credit bank of this peer's own
    /// receive buffers (with one, the endpoint's pool has the bank).
    pub rx_bank: Option<Bank<SocketAddr>>,
    /// Messages waiting for the connection (moved into `flow` when it is up).
    pub pre: VecDeque<Out>,
    pub reads: VecDeque<ReadPiece>,
    /// Of `reads`, the pieces of split RMA operations, and of those the
    /// writes. While any RMA piece waits, later RMA waits behind it (RMA
    /// ordering); while a write piece waits, messages do too (send after
    /// write: a message leaves after every piece of an earlier write).
    pub rma_pieces: usize,
    pub write_pieces: usize,
    pub rma: VecDeque<RmaOp>,
    pub next_msg_id: u64,
    /// The peer's incarnation from its HELLO (0 until a connection told us).
    pub incarnation: u64,
    /// Longest message sent to the peer EAGER: the smaller of our eager size
    /// and the largest EAGER payload the peer's HELLO says it can receive
    /// (`usize::MAX` until a HELLO told us: what is queued meanwhile is
    /// checked again when it leaves).
    pub eager_limit: usize,
    /// Its fi_addr in the endpoint's AV (`Av::reverse_cached`).
    pub src_cache: (u64, u64),
    /// In the endpoint's list of peers the next partial drain visits
    /// (`Net::pending`): set with the entry, cleared when it is taken.
    pub pending: bool,
    /// When we first tried to connect to the peer (`coarse_ms`; 0: it
    /// connected to us, or a connection of ours came up): a refusal within
    /// `RdmConfig::connect_retry_ms` of it is tried again (`Net::redial`).
    pub dial_since: u64,
    /// Connection attempts made since `dial_since` (for the backoff).
    pub dials: u32,
}

impl Peer {
    /// Nothing waits to be posted to this peer (messages, reads, RMA); a
    /// credit owed to it may still be due (the receive side's share).
    pub fn nothing_queued(&self) -> bool {
        self.reads.is_empty() && self.rma.is_empty() && self.flow.as_ref().is_none_or(|f| f.idle())
    }

    pub fn new(addr: SocketAddr) -> Peer {
        Peer {
            addr,
            send_conn: None,
            conns: Vec::new(),
            ready: false,
            flow: None,
            rx_bank: None,
            pre: VecDeque::new(),
            reads: VecDeque::new(),
            rma_pieces: 0,
            write_pieces: 0,
            rma: VecDeque::new(),
            next_msg_id: 1,
            incarnation: 0,
            eager_limit: usize::MAX,
            src_cache: (0, 0),
            pending: false,
            dial_since: 0,
            dials: 0,
        }
    }

    /// Queues the pieces of a rendezvous read or of a split RMA.
    pub fn push_pieces(&mut self, pieces: impl IntoIterator<Item = ReadPiece>) {
        for p in pieces {
            self.count_piece(p.kind, true);
            self.reads.push_back(p);
        }
    }

    /// The next queued piece (to be posted now).
    pub fn pop_piece(&mut self) -> Option<ReadPiece> {
        let p = self.reads.pop_front()?;
        self.count_piece(p.kind, false);
        Some(p)
    }

    fn count_piece(&mut self, kind: PieceKind, add: bool) {
        let step = |n: &mut usize| *n = if add { *n + 1 } else { n.saturating_sub(1) };
        if kind != PieceKind::RndvRead {
            step(&mut self.rma_pieces);
        }
        if kind == PieceKind::RmaWrite {
            step(&mut self.write_pieces);
        }
    }

    pub fn msg_id(&mut self) -> u64 {
        let i = self.next_msg_id;
        self.next_msg_id += 1;
        i
    }

    /// Queues a message: in flow control once the connection is up, else until it is.
    pub fn push(&mut self, m: Out) {
        match (&mut self.flow, self.ready) {
            (Some(f), true) => f.push(m),
            _ => self.pre.push_back(m),
        }
    }

    /// The peer's HELLO arrived: `max_eager` is the largest EAGER payload it
    /// can receive, `own` our eager size. Returns true when the peer's limit
    /// is the lower one (longer messages to it go by rendezvous).
    pub fn learn_eager_limit(&mut self, own: usize, max_eager: u32) -> bool {
        let theirs = max_eager as usize;
        self.eager_limit = own.min(theirs);
        theirs < own
    }

    /// The connection is up: messages that waited for it enter flow control, in order.
    pub fn release_pre(&mut self) {
        if let Some(f) = &mut self.flow {
            for m in self.pre.drain(..) {
                f.push(m);
            }
        }
    }
}

/// A rendezvous send waiting for the receiver's FIN (or NACK).
pub struct RndvSend {
    pub done: TxDone,
    /// Registrations made for this send (buffers the application had not
    /// registered for remote read: cached, or of `owned`); released when it
    /// completes.
    pub tmp: Vec<crate::mrcache::Pin>,
    /// The bytes the peer reads when they are ours, not the application's
    /// (an inject, or a queued copy, longer than the peer's eager limit):
    /// kept until FIN/NACK. Dropped after `tmp` (field order), so never
    /// freed while registered.
    pub owned: Vec<u8>,
}

/// An RMA operation longer than the device's largest message, moving as
/// pieces (`PieceKind::RmaRead`/`RmaWrite`) of at most `Geo::max_chunk`
/// bytes: one completion when every piece is done, with the first error.
pub struct SplitRma {
    pub done: TxDone,
    /// Pieces not yet completed.
    pub left: usize,
    pub err: Option<i32>,
    /// `fi_writedata`: the last piece is an RDMA WRITE with immediate data,
    /// queued as a message (`Out::WriteData`, which owns `done`) behind the
    /// other pieces: then this record reports nothing itself.
    pub reports: bool,
}

/// A rendezvous receive whose RDMA READs are running.
pub struct ReadOp {
    pub d: super::matching::Delivery,
    pub peer: SocketAddr,
    /// The RTS's msg_id (the peer's), for FIN/NACK.
    pub msg_id: u64,
    pub left: usize,
    pub err: Option<i32>,
    /// Registrations of the receive buffers (given without descriptors),
    /// held until the reads are done.
    pub pins: Vec<crate::mrcache::Pin>,
}

// ---- work-request ids of the endpoint's internal CQ ----

/// Kinds of work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrKind {
    /// A bounce receive buffer (index = slot).
    Recv = 1,
    /// A send slot (index = slot).
    Send = 2,
    /// Another send-queue request (index = `QpRes::wr_ops` key).
    Op = 3,
}

/// `kind << 56 | conn << 24 | index`: connection ids are never reused, so a
/// completion of a connection torn down meanwhile is recognised and dropped.
pub fn wr_id(kind: WrKind, conn: u32, index: u32) -> u64 {
    debug_assert!(index < 1 << 24);
    ((kind as u64) << 56) | ((conn as u64) << 24) | (index as u64 & 0xff_ffff)
}

pub fn wr_decode(v: u64) -> Option<(WrKind, u32, u32)> {
    let kind = match v >> 56 {
        1 => WrKind::Recv,
        2 => WrKind::Send,
        3 => WrKind::Op,
        _ => return None,
    };
    Some((kind, ((v >> 24) & 0xffff_ffff) as u32, (v & 0xff_ffff) as u32))
}

/// The order of listening addresses used to settle simultaneous connects:
/// IPv4 before IPv6, then the IP address bytes (network order), then the port.
pub fn addr_order(a: &SocketAddr) -> (u8, [u8; 16], u16) {
    let (fam, ip) = match a {
        SocketAddr::V4(v) => (0, v.ip().to_ipv6_mapped().octets()),
        SocketAddr::V6(v) => (1, v.ip().octets()),
    };
    (fam, ip, a.port())
}

/// What the passive side does with a connect request from `peer` (whose
/// listening address the HELLO carries) given its own state for that peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqDecision {
    /// Accept it: the connection to use from now on.
    Accept,
    /// Accept it and abandon our own pending connect (the peer's wins the tie-break).
    AcceptReplacing,
    /// Accept it as the receiving half of a connection to ourselves.
    AcceptSelf,
    /// Refuse it: our own connect wins the tie-break (the peer will accept ours).
    RejectTieBreak,
    /// Refuse it: we already have a connection from that peer.
    RejectDuplicate,
}

/// Our state for a peer when its connect request arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnConn {
    None,
    /// Our connect request, not yet established.
    ActivePending,
    ActiveUp,
    /// A connection the peer made earlier.
    Passive,
}

/// The tie-break rule (docs/rdm-protocol.md, "Connection handshake"): between
/// two endpoints, the connection initiated by the one with the smaller
/// listening address (`addr_order`) is kept.
/// Whether a connect request whose HELLO carries `incarnation` comes from a
/// restarted process at `peer`, given the incarnation of the peer we know
/// there (`known`, 0: not learnt yet, e.g. our own request still pending).
/// Never for an endpoint's connection to itself.
pub fn restarted(known: u64, incarnation: u64, local: &SocketAddr, peer: &SocketAddr) -> bool {
    local != peer && known != 0 && known != incarnation
}

pub fn decide_request(local: &SocketAddr, peer: &SocketAddr, own: OwnConn) -> ReqDecision {
    if local == peer {
        return ReqDecision::AcceptSelf;
    }
    match own {
        OwnConn::None => ReqDecision::Accept,
        OwnConn::ActivePending if addr_order(peer) < addr_order(local) => ReqDecision::AcceptReplacing,
        OwnConn::ActivePending | OwnConn::ActiveUp => ReqDecision::RejectTieBreak,
        OwnConn::Passive => ReqDecision::RejectDuplicate,
    }
}

/// Reject private data: `[protocol version, reason]`.
pub const REJECT_TIE_BREAK: u8 = 1;
pub const REJECT_DUPLICATE: u8 = 2;
pub const REJECT_BAD_HELLO: u8 = 3;
/// Version 2: the receive pool cannot take one more peer (it could not grow).
pub const REJECT_NO_BUFFERS: u8 = 4;

pub fn reject_data(reason: u8) -> [u8; 2] {
    [super::proto::VERSION, reason]
}

/// The reason in reject private data, if it is ours.
pub fn reject_reason(data: &[u8]) -> Option<u8> {
    match data {
        [v, r, rest @ ..] if *v == super::proto::VERSION && rest.iter().all(|&b| b == 0) => Some(*r),
        _ => None,
    }
}

/// Bytes between bounce slots: the bounce size rounded up to a cache line.
pub fn slot_stride(bounce_size: usize) -> usize {
    bounce_size.next_multiple_of(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn td(context: u64) -> TxDone {
        TxDone { context, flags: 0, silent: true, pin: 0 }
    }

    #[test]
    fn unsignaled_sends_are_retired_in_order_and_bounded() {
        let mut u = Unsignaled::default();
        // A run: UNSIG_EVERY - 1 unsignaled, then one must be signaled.
        let mut ids = Vec::new();
        for i in 0..UNSIG_EVERY as u64 - 1 {
            assert!(u.may_skip(), "send {i} of the run");
            ids.push(u.push(Some(td(i))));
        }
        assert!(ids.iter().all(|&x| is_unsignaled(x) && x < 1 << 24), "{ids:?}");
        assert!(!u.may_skip());
        let c1 = u.cover();
        assert_eq!(c1, UNSIG_EVERY - 1);
        // A second run before the first signaled send completes.
        let p = u.push(None);
        let i100 = u.push(Some(td(100)));
        let i101 = u.push(Some(td(101)));
        let c2 = u.cover();
        assert_eq!((c2, u.len()), (3, UNSIG_EVERY as usize + 2));
        // The first signaled send's completion retires exactly its run.
        u.retire(c1);
        assert_eq!(u.len(), 3);
        // The QP fails at the second of the rest: the first succeeded (a
        // protocol message: nothing to report), the others report, once.
        assert_eq!(u.errored(i100), Some(td(100)));
        assert_eq!(u.errored(p), None, "succeeded before the failure");
        assert_eq!(u.errored(i101), Some(td(101)));
        assert_eq!(u.errored(i101), None, "reported once");
        assert_eq!(u.failed, 2);
        assert!(u.is_empty() && u.may_skip());
        u.retire(5);
        assert!(u.is_empty());
    }

    #[test]
    fn unsignaled_sequence_numbers_wrap_and_unpush() {
        let mut u = Unsignaled { next_seq: UNSIG_SEQ, ..Default::default() };
        let a = u.push(Some(td(1)));
        let b = u.push(Some(td(2)));
        assert_eq!((a, b), (UNSIG_FLAG | UNSIG_SEQ, UNSIG_FLAG));
        u.unpush();
        let c = u.push(Some(td(3)));
        assert_eq!(c, b, "an unposted send's number is reused");
        assert_eq!(u.errored(c), Some(td(3)));
        assert!(u.is_empty(), "the older one succeeded");
    }

    #[test]
    fn unsignaled_sends_never_exceed_their_bound() {
        // Signaled sends that never complete: the unsignaled ones stop at UNSIG_MAX.
        let mut u = Unsignaled::default();
        let mut covered = 0;
        for _ in 0..10 * UNSIG_MAX {
            if u.may_skip() {
                u.push(None);
            } else {
                covered += u.cover();
            }
        }
        assert_eq!(u.len(), UNSIG_MAX);
        assert_eq!(covered as usize + u.cover() as usize, UNSIG_MAX);
    }

    /// The eager limit is unknown (unbounded: queued messages are checked
    /// again when they leave) until the peer's HELLO; then the smaller of
    /// ours and its own, whichever side is smaller.
    #[test]
    fn eager_limit_is_the_smaller_of_both_sides() {
        let mut p = Peer::new(a("10.0.0.1:7"));
        assert_eq!(p.eager_limit, usize::MAX, "unknown before the HELLO");
        assert!(p.learn_eager_limit(16384, 4096), "the peer's is lower: logged");
        assert_eq!(p.eager_limit, 4096);
        assert!(!p.learn_eager_limit(4096, 16384), "ours is lower: nothing to log");
        assert_eq!(p.eager_limit, 4096);
        assert!(!p.learn_eager_limit(16384, 16384));
        assert_eq!(p.eager_limit, 16384);
        assert!(p.learn_eager_limit(16384, 0), "a peer taking only empty EAGER messages");
        assert_eq!(p.eager_limit, 0);
    }

    /// The counts that hold later RMA (any RMA piece queued) and messages
    /// (a write piece queued) follow the queue, whatever is mixed in it.
    #[test]
    fn queued_rma_pieces_are_counted_until_posted() {
        let local = crate::verbs::mem::test_iov(4096, 8, 1);
        let piece = |read_id, kind| ReadPiece { read_id, kind, local, raddr: 0, rkey: 0 };
        let mut p = Peer::new(a("10.0.0.1:7"));
        p.push_pieces([piece(1, PieceKind::RndvRead), piece(2, PieceKind::RmaWrite), piece(2, PieceKind::RmaWrite)]);
        p.push_pieces([piece(3, PieceKind::RmaRead)]);
        assert_eq!((p.rma_pieces, p.write_pieces), (3, 2));
        let order: Vec<_> = std::iter::from_fn(|| {
            let x = p.pop_piece()?;
            Some((x.read_id, p.rma_pieces, p.write_pieces))
        })
        .collect();
        assert_eq!(order, vec![(1, 3, 2), (2, 2, 1), (2, 1, 0), (3, 0, 0)], "FIFO, counts after each post");
        assert!(p.pop_piece().is_none() && p.nothing_queued());
    }

    #[test]
    fn wr_ids_roundtrip() {
        for kind in [WrKind::Recv, WrKind::Send, WrKind::Op] {
            for conn in [0u32, 1, 0xdead_beef, u32::MAX] {
                for idx in [0u32, 5, 0xff_ffff] {
                    assert_eq!(wr_decode(wr_id(kind, conn, idx)), Some((kind, conn, idx)));
                }
            }
        }
        assert_eq!(wr_decode(0), None);
        assert_eq!(wr_decode(9 << 56), None);
    }

    #[test]
    fn a_new_incarnation_is_a_restart_an_unknown_one_is_not() {
        let (me, p) = (a("10.0.0.1:5000"), a("10.0.0.2:6000"));
        assert!(restarted(7, 8, &me, &p), "another process on the peer's address");
        assert!(!restarted(7, 7, &me, &p), "the same process connecting again (a duplicate)");
        assert!(!restarted(0, 8, &me, &p), "nothing learnt yet (our own request pending)");
        assert!(!restarted(7, 8, &me, &me), "an endpoint's connection to itself");
    }

    #[test]
    fn tie_break_is_symmetric_and_keeps_one_connection() {
        let lo = a("10.0.0.1:5000");
        let hi = a("10.0.0.1:6000");
        // Both connect at once: each sees the other's request while its own is pending.
        assert_eq!(decide_request(&lo, &hi, OwnConn::ActivePending), ReqDecision::RejectTieBreak, "lo keeps its own");
        assert_eq!(decide_request(&hi, &lo, OwnConn::ActivePending), ReqDecision::AcceptReplacing, "hi takes lo's");
        // The order: family, then IP, then port.
        assert!(addr_order(&a("10.0.0.2:1")) > addr_order(&a("10.0.0.1:9")));
        assert!(addr_order(&a("[::1]:1")) > addr_order(&a("255.255.255.255:9")));
        assert_eq!(decide_request(&lo, &hi, OwnConn::None), ReqDecision::Accept);
        assert_eq!(decide_request(&lo, &hi, OwnConn::Passive), ReqDecision::RejectDuplicate);
        assert_eq!(decide_request(&hi, &lo, OwnConn::ActiveUp), ReqDecision::RejectTieBreak);
        assert_eq!(decide_request(&lo, &lo, OwnConn::ActivePending), ReqDecision::AcceptSelf);
    }

    #[test]
    fn reject_reasons() {
        assert_eq!(reject_reason(&reject_data(REJECT_TIE_BREAK)), Some(REJECT_TIE_BREAK));
        let mut padded = reject_data(REJECT_DUPLICATE).to_vec();
        padded.resize(148, 0);
        assert_eq!(reject_reason(&padded), Some(REJECT_DUPLICATE));
        assert_eq!(reject_reason(&[]), None);
        assert_eq!(reject_reason(&[9, 1]), None);
    }

    #[test]
    fn stride() {
        assert_eq!(slot_stride(40 + 16384), 16448);
        assert_eq!(slot_stride(64), 64);
    }
}
