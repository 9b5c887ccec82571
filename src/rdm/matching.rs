//! The matching engine of RDM endpoints: posted receives and unexpected
//! messages, for untagged (FI_MSG) and tagged (FI_TAGGED) traffic, kept in
//! separate queues. It does no I/O and knows nothing of verbs: every call
//! returns plain-data [`Action`]s that the caller carries out (copy bytes,
//! issue RDMA reads, write completions, send FIN).
//!
//! Semantics (fi_msg(3), fi_tagged(3)):
//! * An arriving message matches the first posted receive, in posting order,
//!   of its kind whose source filter accepts it (FI_ADDR_UNSPEC: any source;
//!   otherwise that source only — FI_DIRECTED_RECV; the caller passes
//!   FI_ADDR_UNSPEC when the endpoint lacks that capability) and, for tagged
//!   receives, `(msg_tag & !ignore) == (recv_tag & !ignore)`.
//! * A message that matches nothing is queued as unexpected (eager payloads are
//!   copied into owned bytes, rendezvous requests keep their descriptor). A
//!   receive being posted first searches the unexpected queue in arrival order.
//! * A message from a sender not (yet) in the address vector carries the
//!   source FI_ADDR_NOTAVAIL and its sender's address (`Incoming::origin`).
//!   After the application inserts that address, [`Matcher::resolve_unknown`]
//!   gives such queued messages their fi_addr, so a directed receive posted
//!   then takes them, and completions report the source (as rxm does on
//!   `fi_av_insert`; fabtests' `fi_unexpected_msg` checks it).
//! * Messages longer than the receive buffer are delivered truncated:
//!   `Delivery::olen` is what did not fit (an FI_ETRUNC error entry).
//!
//! Multi-receive buffers (FI_MULTI_RECV, untagged only): messages are placed
//! at increasing offsets. Each message starts at the first offset at or after
//! the end of the previous one that is a multiple of [`MULTI_RECV_ALIGN`]
//! (8 bytes), counted from the start of the posted buffer (the first message
//! lands at offset 0). A message longer than the room left at its offset is
//! truncated. After each placement, the free space is
//! `buffer_len - align_up(end_of_message)`; when it is below the buffer's
//! minimum (FI_OPT_MIN_MULTI_RECV as it was when the buffer was posted), or
//! zero, the buffer is released (so a buffer posted with less room than the
//! minimum takes exactly one message): it leaves the posted queue and its last
//! completion carries FI_MULTI_RECV. "Last" is in completion order: if
//! rendezvous reads into the buffer are still running when it is released,
//! the flag goes on the completion of the last of them to finish (see
//! [`Matcher::read_finished`]).

use std::collections::VecDeque;
use std::net::SocketAddr;
use rustc_hash::FxHashMap as HashMap;

use super::proto::{Message, Segment};
use crate::fi::consts::{FI_ADDR_NOTAVAIL, FI_ADDR_UNSPEC, FI_CLAIM, FI_DISCARD, FI_MSG, FI_MULTI_RECV, FI_PEEK, FI_RECV, FI_REMOTE_CQ_DATA, FI_TAGGED};
use crate::error::{FiError, FiResult};

/// Alignment of message starts inside a multi-receive buffer, relative to the buffer's start.
pub const MULTI_RECV_ALIGN: usize = 8;
/// Default FI_OPT_MIN_MULTI_RECV (the default eager size, so an eager message always fits).
pub const DEFAULT_MIN_MULTI_RECV: usize = 16384;

/// Untagged (FI_MSG) or tagged (FI_TAGGED) traffic; each has its own queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Msg,
    Tagged,
}

impl Kind {
    fn idx(self) -> usize {
        match self {
            Kind::Msg => 0,
            Kind::Tagged => 1,
        }
    }
    /// The completion flag for this kind.
    pub fn cq_flag(self) -> u64 {
        match self {
            Kind::Msg => FI_MSG,
            Kind::Tagged => FI_TAGGED,
        }
    }
}

/// Whether a tagged message matches a tagged receive.
pub fn tag_matches(recv_tag: u64, ignore: u64, msg_tag: u64) -> bool {
    (msg_tag & !ignore) == (recv_tag & !ignore)
}

/// A receive operation as the application posted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvRequest {
    /// The caller's key for its record of this receive (buffers, descriptors);
    /// echoed in every action about it. Must be unique among live receives.
    pub handle: u64,
    /// The application's context (for completions, fi_cancel and FI_CLAIM).
    pub context: u64,
    pub kind: Kind,
    /// Source filter: FI_ADDR_UNSPEC for any.
    pub src: u64,
    /// Tagged only.
    pub tag: u64,
    pub ignore: u64,
    /// Total buffer length (sum of the iov).
    pub len: usize,
    /// Operation flags. The engine looks at FI_MULTI_RECV, FI_PEEK, FI_CLAIM and
    /// FI_DISCARD only; everything else (FI_COMPLETION, ...) is the caller's.
    pub flags: u64,
}

impl RecvRequest {
    pub fn msg(handle: u64, context: u64, len: usize) -> RecvRequest {
        RecvRequest { handle, context, kind: Kind::Msg, src: FI_ADDR_UNSPEC, tag: 0, ignore: 0, len, flags: 0 }
    }
    pub fn tagged(handle: u64, context: u64, len: usize, tag: u64, ignore: u64) -> RecvRequest {
        RecvRequest { handle, context, kind: Kind::Tagged, src: FI_ADDR_UNSPEC, tag, ignore, len, flags: 0 }
    }
    /// Directed receive: only messages from `src`.
    pub fn from(mut self, src: u64) -> RecvRequest {
        self.src = src;
        self
    }
    pub fn with_flags(mut self, flags: u64) -> RecvRequest {
        self.flags = flags;
        self
    }
}

/// A rendezvous request: where the sender's data is, and the id to answer with FIN/NACK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    pub msg_id: u64,
    /// Total message length (the sum of the segments).
    pub len: usize,
    pub segs: Vec<Segment>,
}

/// The payload of an arriving message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body<'a> {
    /// The payload, still in the receive bounce buffer.
    Eager(&'a [u8]),
    Rndv(Rendezvous),
}

/// An arriving application message (EAGER or RNDV_RTS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming<'a> {
    /// The sender's fi_addr (the caller maps the QP it arrived on to it).
    pub src: u64,
    pub kind: Kind,
    /// 0 for untagged messages.
    pub tag: u64,
    pub data: Option<u64>,
    pub body: Body<'a>,
    /// The sender's address: kept with the message when it is queued with
    /// source FI_ADDR_NOTAVAIL, for `Matcher::resolve_unknown`.
    pub origin: Option<SocketAddr>,
}

impl<'a> Incoming<'a> {
    /// The message's total length.
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Eager(p) => p.len(),
            Body::Rndv(r) => r.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The application message a decoded wire message carries; None for
    /// control messages (FIN, NACK, CREDIT).
    pub fn from_message(src: u64, origin: Option<SocketAddr>, m: Message<'a>) -> Option<Incoming<'a>> {
        let (env, body) = match m {
            Message::Eager { env, payload, .. } => (env, Body::Eager(payload)),
            Message::Rts { env, msg_id, len, segs, .. } => {
                // len <= MAX_MSG_LEN (2^40) after decoding, which fits a 64-bit usize.
                (env, Body::Rndv(Rendezvous { msg_id, len: usize::try_from(len).unwrap_or(usize::MAX), segs }))
            }
            _ => return None,
        };
        Some(Incoming {
            src,
            kind: if env.tag.is_some() { Kind::Tagged } else { Kind::Msg },
            tag: env.tag.unwrap_or(0),
            data: env.data.map(u64::from),
            body,
            origin,
        })
    }
}

/// What is known of a message without receiving it (peek, discard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgInfo {
    pub src: u64,
    pub kind: Kind,
    pub tag: u64,
    pub data: Option<u64>,
    pub len: usize,
}

impl MsgInfo {
    /// Completion flags for a completion describing this message.
    pub fn cq_flags(&self) -> u64 {
        FI_RECV | self.kind.cq_flag() | if self.data.is_some() { FI_REMOTE_CQ_DATA } else { 0 }
    }
}

/// A message placed into a posted receive. For eager messages this is the
/// completion to write; for rendezvous ones it becomes it once the reads are
/// done (see [`Matcher::read_finished`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub handle: u64,
    pub context: u64,
    /// Where in the posted buffer the message starts (0 unless multi-receive).
    pub offset: usize,
    /// Bytes placed at `offset`.
    pub len: usize,
    /// Bytes that did not fit. Non-zero: write an FI_ETRUNC error entry
    /// (len = `len`, olen = `olen`) instead of a successful completion.
    pub olen: usize,
    pub src: u64,
    pub tag: u64,
    /// Remote CQ data (meaningful when `flags` has FI_REMOTE_CQ_DATA).
    pub data: u64,
    /// Completion flags: FI_RECV | FI_MSG/FI_TAGGED | FI_REMOTE_CQ_DATA | FI_MULTI_RECV (buffer released).
    pub flags: u64,
    /// After this completion the receive is finished: the caller may drop its record.
    pub last: bool,
    /// The receive is a multi-receive buffer (the completion's `buf` is base + offset).
    pub multi_recv: bool,
}

/// What the caller must do. Executing an action may not call back into the
/// engine except as documented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Copy `payload[..d.len]` of the eager message just passed to
    /// [`Matcher::arrive`] into the receive `d.handle` at `d.offset`, then
    /// complete it (FI_ETRUNC error entry when `d.olen > 0`).
    Deliver(Delivery),
    /// The same for an unexpected eager message matched by a receive being
    /// posted: copy `bytes[..d.len]`.
    DeliverQueued(Delivery, Vec<u8>),
    /// Rendezvous: RDMA-read the first `d.len` bytes of the sender's segments
    /// (`proto::read_plan`) into receive `d.handle` at `d.offset`. When the
    /// reads are done (or failed), call `read_finished(&d)` for the final
    /// flags, write the completion (error entry FI_EIO on a failed read), and
    /// send RNDV_FIN {msg_id, len: d.len} (RNDV_NACK {msg_id, FI_EIO} on failure)
    /// to `d.src`. `d.len` may be 0 (nothing to read: finish at once).
    Read(Delivery, Rendezvous),
    /// No receive matched; the message is queued as unexpected. (An eager
    /// payload has been copied: the bounce buffer may be reposted.)
    Queued,
    /// FI_PEEK found a message (still queued; claimed for `context` when `claimed`).
    /// Write a successful completion from `info` (buf = NULL: no data is returned).
    Peeked { context: u64, info: MsgInfo, claimed: bool },
    /// FI_PEEK found nothing: write an error entry with FI_ENOMSG.
    NoMessage { context: u64 },
    /// FI_PEEK|FI_DISCARD or FI_CLAIM|FI_DISCARD removed a message: write a
    /// successful completion from `info` (buf = NULL). For a rendezvous message,
    /// also send RNDV_FIN {msg_id, len: 0} to `info.src` so the sender completes.
    Discarded { context: u64, info: MsgInfo, rndv: Option<Rendezvous> },
}

/// A receive removed by [`Matcher::cancel`]: write an FI_ECANCELED error entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Canceled {
    pub handle: u64,
    pub context: u64,
    pub kind: Kind,
    pub tag: u64,
    /// Flags for the error entry (FI_MULTI_RECV when it releases a multi-receive buffer).
    pub flags: u64,
    /// No completion for this receive follows (false: rendezvous reads into the
    /// multi-receive buffer are still running; the last one carries FI_MULTI_RECV).
    pub last: bool,
}

#[derive(Debug, Clone)]
struct Multi {
    /// End of the last message placed.
    used: usize,
    /// FI_OPT_MIN_MULTI_RECV when posted.
    min: usize,
    /// Rendezvous reads into this buffer not yet finished.
    pending_reads: usize,
}

#[derive(Debug)]
struct Posted<R> {
    handle: u64,
    context: u64,
    src: u64,
    tag: u64,
    ignore: u64,
    len: usize,
    /// Boxed: most receives are not multi-receive buffers, and every
    /// posted receive moves into its queue and out again.
    multi: Option<Box<Multi>>,
    /// The caller's record of this receive, kept here (`post_plain_with`)
    /// instead of under `handle`, until `spill` files it under a handle.
    rec: Option<R>,
}

impl<R> Posted<R> {
    /// Request `req` waiting in the posted queue (`multi`: its multi-receive state).
    fn new(req: &RecvRequest, multi: Option<Box<Multi>>) -> Posted<R> {
        Posted { handle: req.handle, context: req.context, src: req.src, tag: req.tag, ignore: req.ignore, len: req.len, multi, rec: None }
    }

    fn accepts(&self, kind: Kind, src: u64, tag: u64) -> bool {
        (self.src == FI_ADDR_UNSPEC || self.src == src) && (kind == Kind::Msg || tag_matches(self.tag, self.ignore, tag))
    }
}

#[derive(Debug, Clone)]
enum Stored {
    Eager(Vec<u8>),
    Rndv(Rendezvous),
}

#[derive(Debug, Clone)]
struct Unexpected {
    info: MsgInfo,
    body: Stored,
    /// Claimed by FI_PEEK|FI_CLAIM with this context: invisible to everything
    /// but an FI_CLAIM receive with the same context.
    claimed: Option<u64>,
    /// The sender's address while `info.src` is FI_ADDR_NOTAVAIL.
    origin: Option<SocketAddr>,
}

impl Unexpected {
    fn into_action(self, d: Delivery) -> Action {
        match self.body {
            Stored::Eager(bytes) => Action::DeliverQueued(d, bytes),
            Stored::Rndv(r) => Action::Read(d, r),
        }
    }
    fn is_rndv(&self) -> bool {
        matches!(self.body, Stored::Rndv(_))
    }
    fn into_rndv(self) -> Option<Rendezvous> {
        match self.body {
            Stored::Rndv(r) => Some(r),
            Stored::Eager(_) => None,
        }
    }
}

#[derive(Debug)]
struct Queues<R> {
    posted: VecDeque<Posted<R>>,
    unexpected: VecDeque<Unexpected>,
}

impl<R> Default for Queues<R> {
    fn default() -> Self {
        Queues { posted: VecDeque::new(), unexpected: VecDeque::new() }
    }
}

/// The matching state of one RDM endpoint's receive side. `R`: the
/// caller's record of a posted receive, which a receive posted by
/// `post_plain_with` keeps in its queue entry (the common case then needs no
/// table of records: `take_head_with` hands the record back with the
/// delivery). Every other path names receives by handle: the caller
/// `spill`s the records kept here under handles before taking one.
#[derive(Debug)]
pub struct Matcher<R = ()> {
    queues: [Queues<R>; 2],
    min_multi_recv: usize,
    /// Multi-receive buffers released (or canceled) while rendezvous reads into
    /// them were running: handle → reads still running.
    draining: HashMap<u64, usize>,
}

impl<R> Default for Matcher<R> {
    fn default() -> Self {
        Matcher { queues: Default::default(), min_multi_recv: DEFAULT_MIN_MULTI_RECV, draining: HashMap::default() }
    }
}

fn align_up(v: usize) -> usize {
    v.checked_next_multiple_of(MULTI_RECV_ALIGN).unwrap_or(usize::MAX)
}

/// Places a message into a posted receive. Returns the delivery and whether the
/// receive leaves the posted queue.
fn place<R>(p: &mut Posted<R>, kind: Kind, m: &MsgInfo, is_read: bool) -> (Delivery, bool) {
    let mut flags = m.cq_flags();
    let (offset, room, done, last) = match &mut p.multi {
        None => (0, p.len, true, true),
        Some(mr) => {
            // Released buffers leave the queue, so there is always room >= 0 here.
            let off = align_up(mr.used).min(p.len);
            let room = p.len - off;
            mr.used = off + m.len.min(room);
            if is_read {
                mr.pending_reads += 1;
            }
            let free = p.len.saturating_sub(align_up(mr.used));
            let done = free == 0 || free < mr.min;
            let last = done && mr.pending_reads == 0;
            if last {
                flags |= FI_MULTI_RECV;
            }
            (off, room, done, last)
        }
    };
    let len = m.len.min(room);
    let d = Delivery {
        handle: p.handle,
        context: p.context,
        offset,
        len,
        olen: m.len - len,
        src: m.src,
        tag: if kind == Kind::Tagged { m.tag } else { 0 },
        data: m.data.unwrap_or(0),
        flags,
        last,
        multi_recv: p.multi.is_some(),
    };
    (d, done)
}

impl Matcher<()> {
    /// A matcher whose receives keep no record of the caller's.
    pub fn new() -> Matcher {
        Matcher::default()
    }
}

impl<R> Matcher<R> {
    /// FI_OPT_MIN_MULTI_RECV; applies to buffers posted afterwards.
    pub fn set_min_multi_recv(&mut self, n: usize) {
        self.min_multi_recv = n;
    }

    pub fn min_multi_recv(&self) -> usize {
        self.min_multi_recv
    }

    /// Receives of `kind` waiting for a message.
    pub fn posted_count(&self, kind: Kind) -> usize {
        self.queues[kind.idx()].posted.len()
    }

    /// Unexpected messages of `kind` (claimed ones included).
    pub fn unexpected_count(&self, kind: Kind) -> usize {
        self.queues[kind.idx()].unexpected.len()
    }

    /// A message arrived. Returns `Deliver`, `Read` or `Queued`.
    pub fn arrive(&mut self, msg: Incoming<'_>) -> Action {
        debug_assert!(!self.keeps_records(), "spill before taking a receive by handle");
        let info = MsgInfo { src: msg.src, kind: msg.kind, tag: msg.tag, data: msg.data, len: msg.len() };
        let q = &mut self.queues[msg.kind.idx()];
        let Some(i) = q.posted.iter().position(|p| p.accepts(msg.kind, msg.src, msg.tag)) else {
            let body = match msg.body {
                Body::Eager(p) => Stored::Eager(p.to_vec()),
                Body::Rndv(r) => Stored::Rndv(r),
            };
            let origin = if msg.src == FI_ADDR_NOTAVAIL { msg.origin } else { None };
            q.unexpected.push_back(Unexpected { info, body, claimed: None, origin });
            return Action::Queued;
        };
        let is_read = matches!(msg.body, Body::Rndv(_));
        let (d, done) = place(&mut q.posted[i], msg.kind, &info, is_read);
        if done {
            // Mostly the oldest receive: pop_front moves nothing else.
            let p = if i == 0 { q.posted.pop_front() } else { q.posted.remove(i) };
            self.retire(&p.expect("index from position"));
        }
        match msg.body {
            Body::Eager(_) => Action::Deliver(d),
            Body::Rndv(r) => Action::Read(d, r),
        }
    }

    /// `arrive` for an eager message whose receive is the oldest posted one of
    /// its kind, a plain (not multi-receive) buffer: that receive leaves the
    /// queue and its delivery is returned, exactly what `arrive` would return
    /// in `Action::Deliver`. `None` (nothing changed) otherwise: the caller
    /// then calls `arrive`. The message path's common case (a receive posted
    /// ahead of its message) without building an `Incoming` and an `Action`.
    #[inline]
    pub fn take_head(&mut self, kind: Kind, src: u64, tag: u64, data: Option<u64>, len: usize) -> Option<Delivery> {
        self.take_head_with(kind, src, tag, data, len).map(|(d, _)| d)
    }

    /// `take_head`, with the record the receive kept (`post_plain_with`;
    /// `None` for one filed under its handle).
    #[inline]
    pub fn take_head_with(&mut self, kind: Kind, src: u64, tag: u64, data: Option<u64>, len: usize) -> Option<(Delivery, Option<R>)> {
        let q = &mut self.queues[kind.idx()];
        let p = q.posted.front()?;
        if p.multi.is_some() || !p.accepts(kind, src, tag) {
            return None;
        }
        let mut p = q.posted.pop_front().expect("front exists");
        let (d, _) = place(&mut p, kind, &MsgInfo { src, kind, tag, data, len }, false);
        Some((d, p.rec))
    }

    /// Files every record kept in a posted queue entry (`post_plain_with`)
    /// with `file`, which returns the handle the entry then carries: after
    /// this every posted receive is named by its handle, as the paths other
    /// than `take_head_with` need. Entries keeping a record are the last
    /// ones of their queue (every other way in files first), so this looks
    /// only at those.
    pub fn spill(&mut self, mut file: impl FnMut(R) -> u64) {
        for q in &mut self.queues {
            for p in q.posted.iter_mut().rev() {
                let Some(rec) = p.rec.take() else { break };
                p.handle = file(rec);
            }
        }
    }

    /// Whether a posted entry keeps a record (`spill` has work).
    pub fn keeps_records(&self) -> bool {
        self.queues.iter().any(|q| q.posted.back().is_some_and(|p| p.rec.is_some()))
    }

    /// Remembers a multi-receive buffer leaving the queue with reads still running.
    fn retire(&mut self, p: &Posted<R>) {
        if let Some(m) = &p.multi {
            if m.pending_reads > 0 {
                self.draining.insert(p.handle, m.pending_reads);
            }
        }
    }

    /// The common case of [`Matcher::post`], without its result vector: a
    /// plain receive (no FI_PEEK, FI_CLAIM, FI_DISCARD or FI_MULTI_RECV)
    /// while no unexpected message of its kind waits joins the posted queue,
    /// and `Ok(())` says so. Anything else comes back as `Err(req)`, for
    /// `post` (which would queue it the same way or take what waits).
    pub fn post_plain(&mut self, req: RecvRequest) -> Result<(), RecvRequest> {
        let Some(q) = self.plain_queue(&req) else { return Err(req) };
        q.posted.push_back(Posted::new(&req, None));
        Ok(())
    }

    /// `post_plain` for a receive that keeps the caller's record `rec` in its
    /// queue entry (its handle is not used until `spill` gives it one).
    /// Anything else comes back with its record. Entries keeping records
    /// are appended, and the other ways in (`post`) are taken only after a
    /// `spill`, so they stay the last ones of their queue.
    #[inline]
    pub fn post_plain_with(&mut self, req: RecvRequest, rec: R) -> Result<(), (RecvRequest, R)> {
        let Some(q) = self.plain_queue(&req) else { return Err((req, rec)) };
        let mut p = Posted::new(&req, None);
        p.rec = Some(rec);
        q.posted.push_back(p);
        Ok(())
    }

    /// The queues a receive joins at once (`post_plain`, `post_plain_with`):
    /// its kind's, when it is plain (no FI_PEEK, FI_CLAIM, FI_DISCARD or
    /// FI_MULTI_RECV) and no unexpected message of its kind waits. `None`:
    /// it goes through `post`.
    #[inline(always)]
    fn plain_queue(&mut self, req: &RecvRequest) -> Option<&mut Queues<R>> {
        let q = &mut self.queues[req.kind.idx()];
        let plain = req.flags & (FI_PEEK | FI_CLAIM | FI_DISCARD | FI_MULTI_RECV) == 0 && q.unexpected.is_empty();
        plain.then_some(q)
    }

    /// Posts a receive (fi_recv*/fi_trecv*). Returns the actions for the
    /// unexpected messages it takes at once (several for a multi-receive
    /// buffer, which stays posted while it has room); empty when it waits in
    /// the posted queue. With FI_PEEK / FI_CLAIM the request is a peek or a
    /// claim (tagged only) and is never queued.
    pub fn post(&mut self, req: RecvRequest) -> FiResult<Vec<Action>> {
        debug_assert!(!self.keeps_records(), "spill before taking a receive by handle");
        let special = req.flags & (FI_PEEK | FI_CLAIM | FI_DISCARD);
        let multi = req.flags & FI_MULTI_RECV != 0;
        match req.kind {
            Kind::Msg if special != 0 => {
                return crate::fail!(FiError::BADFLAGS, "rdm recv: FI_PEEK/FI_CLAIM/FI_DISCARD apply to tagged receives only")
            }
            Kind::Tagged if multi => {
                return crate::fail!(FiError::OPNOTSUPP, "rdm trecv: FI_MULTI_RECV is supported on untagged receives only")
            }
            _ => {}
        }
        if req.flags & FI_PEEK != 0 {
            return Ok(vec![self.peek(&req)]);
        }
        if req.flags & FI_CLAIM != 0 {
            return self.claim(&req).map(|a| vec![a]);
        }
        if req.flags & FI_DISCARD != 0 {
            return crate::fail!(FiError::INVAL, "rdm trecv: FI_DISCARD needs FI_PEEK or FI_CLAIM");
        }

        let mut p = Posted::new(&req, multi.then(|| Box::new(Multi { used: 0, min: self.min_multi_recv, pending_reads: 0 })));
        let q = &mut self.queues[req.kind.idx()];
        let mut actions = Vec::new();
        let mut start = 0;
        loop {
            let found = q.unexpected.iter().skip(start).position(|u| u.claimed.is_none() && p.accepts(req.kind, u.info.src, u.info.tag));
            let Some(i) = found.map(|i| i + start) else {
                q.posted.push_back(p);
                return Ok(actions);
            };
            // Everything before i did not match, and will not match later either.
            start = i;
            let u = q.unexpected.remove(i).expect("index from position");
            let (d, done) = place(&mut p, req.kind, &u.info, u.is_rndv());
            actions.push(u.into_action(d));
            if done {
                self.retire(&p);
                return Ok(actions);
            }
        }
    }

    /// FI_PEEK [| FI_CLAIM | FI_DISCARD].
    fn peek(&mut self, req: &RecvRequest) -> Action {
        let q = &mut self.queues[Kind::Tagged.idx()];
        let probe = Posted::<R> { handle: 0, context: 0, src: req.src, tag: req.tag, ignore: req.ignore, len: 0, multi: None, rec: None };
        let Some(i) = q.unexpected.iter().position(|u| u.claimed.is_none() && probe.accepts(Kind::Tagged, u.info.src, u.info.tag)) else {
            return Action::NoMessage { context: req.context };
        };
        let info = q.unexpected[i].info;
        if req.flags & FI_DISCARD != 0 {
            let u = q.unexpected.remove(i).expect("index from position");
            return Action::Discarded { context: req.context, info, rndv: u.into_rndv() };
        }
        let claimed = req.flags & FI_CLAIM != 0;
        if claimed {
            q.unexpected[i].claimed = Some(req.context);
        }
        Action::Peeked { context: req.context, info, claimed }
    }

    /// FI_CLAIM [| FI_DISCARD] without FI_PEEK: takes the message an earlier
    /// FI_PEEK|FI_CLAIM with the same context claimed.
    fn claim(&mut self, req: &RecvRequest) -> FiResult<Action> {
        let q = &mut self.queues[Kind::Tagged.idx()];
        let Some(i) = q.unexpected.iter().position(|u| u.claimed == Some(req.context)) else {
            return crate::fail!(FiError::INVAL, "rdm trecv: FI_CLAIM with context {:#x}, which claimed no message", req.context);
        };
        let u = q.unexpected.remove(i).expect("index from position");
        if req.flags & FI_DISCARD != 0 {
            let info = u.info;
            return Ok(Action::Discarded { context: req.context, info, rndv: u.into_rndv() });
        }
        let mut p = Posted::<R>::new(req, None);
        let (d, _) = place(&mut p, Kind::Tagged, &u.info, u.is_rndv());
        Ok(u.into_action(d))
    }

    /// A rendezvous read (from an `Action::Read`) finished, successfully or not.
    /// Returns the delivery with its final `flags` and `last`: for a
    /// multi-receive buffer released while reads were running, the last read
    /// to finish carries FI_MULTI_RECV.
    pub fn read_finished(&mut self, d: &Delivery) -> Delivery {
        let mut out = d.clone();
        if !d.multi_recv {
            return out;
        }
        out.last = false;
        out.flags &= !FI_MULTI_RECV;
        let q = &mut self.queues[Kind::Msg.idx()];
        if let Some(m) = q.posted.iter_mut().find(|p| p.handle == d.handle).and_then(|p| p.multi.as_mut()) {
            m.pending_reads = m.pending_reads.saturating_sub(1);
            return out;
        }
        match self.draining.get_mut(&d.handle) {
            Some(n) => {
                *n -= 1;
                if *n == 0 {
                    self.draining.remove(&d.handle);
                    out.last = true;
                    out.flags |= FI_MULTI_RECV;
                }
            }
            None => tracing::warn!("rdm: read_finished for unknown multi-receive buffer {:#x}", d.handle),
        }
        out
    }

    /// fi_cancel: removes the first posted receive (untagged first, then
    /// tagged) whose context is `context`. None when there is none (it
    /// completed already, or never existed).
    pub fn cancel(&mut self, context: u64) -> Option<Canceled> {
        debug_assert!(!self.keeps_records(), "spill before taking a receive by handle");
        for kind in [Kind::Msg, Kind::Tagged] {
            let q = &mut self.queues[kind.idx()];
            if let Some(i) = q.posted.iter().position(|p| p.context == context) {
                let p = q.posted.remove(i).expect("index from position");
                return Some(self.canceled(kind, p));
            }
        }
        None
    }

    /// Cancels every posted receive (endpoint close), in posting order per kind.
    pub fn cancel_all(&mut self) -> Vec<Canceled> {
        let mut out = Vec::new();
        for kind in [Kind::Msg, Kind::Tagged] {
            let posted = std::mem::take(&mut self.queues[kind.idx()].posted);
            for p in posted {
                out.push(self.canceled(kind, p));
            }
        }
        out
    }

    fn canceled(&mut self, kind: Kind, p: Posted<R>) -> Canceled {
        let mut flags = FI_RECV | kind.cq_flag();
        let mut last = true;
        match &p.multi {
            Some(m) if m.pending_reads > 0 => {
                last = false;
                self.retire(&p);
            }
            Some(_) => flags |= FI_MULTI_RECV,
            None => {}
        }
        Canceled { handle: p.handle, context: p.context, kind, tag: p.tag, flags, last }
    }

    /// Gives the queued messages whose sender was not in the address vector
    /// when they arrived (source FI_ADDR_NOTAVAIL) the fi_addr `lookup` finds
    /// for their sender now (FI_ADDR_NOTAVAIL: still unknown). The caller
    /// calls it when the address vector changed, before a receive searches
    /// the queue. Returns how many were resolved.
    pub fn resolve_unknown(&mut self, mut lookup: impl FnMut(&SocketAddr) -> u64) -> usize {
        let mut n = 0;
        for q in &mut self.queues {
            for u in q.unexpected.iter_mut() {
                let Some(a) = u.origin else { continue };
                let src = lookup(&a);
                if src != FI_ADDR_NOTAVAIL {
                    u.info.src = src;
                    u.origin = None;
                    n += 1;
                }
            }
        }
        n
    }

    /// Removes the unexpected messages from `src` (the peer left the address
    /// vector). Returns their rendezvous requests, which need no answer (the
    /// peer is gone) but are returned for logging.
    pub fn drop_source(&mut self, src: u64) -> Vec<Rendezvous> {
        let mut out = Vec::new();
        for q in &mut self.queues {
            let mut keep = VecDeque::with_capacity(q.unexpected.len());
            for u in q.unexpected.drain(..) {
                if u.info.src == src {
                    out.extend(u.into_rndv());
                } else {
                    keep.push_back(u);
                }
            }
            q.unexpected = keep;
        }
        out
    }
}

#[cfg(test)]
#[path = "tests/matching.rs"]
mod tests;
