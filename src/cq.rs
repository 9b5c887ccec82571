//! Completion queues over verbs CQs.
//!
//! Work-request ids carry everything a completion needs, so posting takes no
//! lock and allocates nothing: the application's context (when it fits in 57
//! bits, which every user-space pointer on Linux does; otherwise it is stashed
//! in a side table and its index carried instead), the kind of operation (for
//! the completion flags, which verbs does not report on errors), and whether
//! the application wants a completion at all (inject and selective completion
//! still post signalled requests, whose successful completions are dropped
//! here; their errors are reported, as fi_cq(3) requires).

use std::collections::VecDeque;
use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::{Mutex, RwLock};

use crate::fi::consts::*;
use crate::cntr::CntrSet;
use crate::progress::Progress;
use crate::config;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::{HasRefs, Hold, Refs};
use crate::sys;
use crate::verbs::{self, wc_opcode, wc_status, CompChannel, Wc};
use crate::wait::{Pollable, WaitFd, WaitSet, Waitable};

/// Kinds of operation, carried in work-request ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OpKind {
    Send = 1,
    Write = 2,
    Read = 3,
    Recv = 4,
    Atomic = 5,
    AtomicFetch = 6,
}

impl OpKind {
    #[inline]
    fn from_bits(b: u64) -> Option<OpKind> {
        Some(match b {
            1 => OpKind::Send,
            2 => OpKind::Write,
            3 => OpKind::Read,
            4 => OpKind::Recv,
            5 => OpKind::Atomic,
            6 => OpKind::AtomicFetch,
            _ => return None,
        })
    }

    /// The completion flags libfabric defines for this kind.
    #[inline]
    pub fn flags(self) -> u64 {
        match self {
            OpKind::Send => FI_SEND | FI_MSG,
            OpKind::Write => FI_RMA | FI_WRITE,
            OpKind::Read => FI_RMA | FI_READ,
            OpKind::Recv => FI_RECV | FI_MSG,
            OpKind::Atomic => FI_ATOMIC | FI_WRITE,
            OpKind::AtomicFetch => FI_ATOMIC | FI_READ,
        }
    }
}

const CTX_BITS: u32 = 57;
const CTX_MASK: u64 = (1 << CTX_BITS) - 1;
const KIND_SHIFT: u32 = 57;
const KIND_MASK: u64 = 0xf << KIND_SHIFT;
const INDIRECT: u64 = 1 << 61;
const SILENT: u64 = 1 << 62;
const BATCH: u64 = 1 << 63;

/// Injects per QP between two signalled ones (see `QpCounters::unsignalled`).
pub const UNSIG_BATCH: usize = 16;

/// Outstanding work requests of one QP, by direction. Posting takes a credit
/// (`-FI_EAGAIN` when none is left); polling the completion gives it back. With
/// every request signalled, this bounds what can sit in the CQ, so it can never
/// overrun — even when the application does not read a CQ for a while (inject).
#[derive(Debug)]
pub struct QpCounters {
    pub tx: AtomicUsize,
    pub rx: AtomicUsize,
    pub tx_max: usize,
    pub rx_max: usize,
    /// The counters of the QP's endpoint (`fi_ep_bind` of a counter), bumped
    /// as its completions are polled. Set once (`with_cntrs`).
    cntrs: CntrSet,
    /// `cntrs` has a counter: one load on every completion, not four.
    counted: bool,
    /// The receive slots of the shared receive context the QP receives from
    /// (`fi_ep_bind(ep, srx)`): receive completions give their credit there.
    pub srq: Option<Arc<QpCounters>>,
    /// Unsignalled requests posted since the last signalled inject absorbed them.
    unsig: AtomicUsize,
    unsig_batch: usize,
    /// The verbs status of a failed piece of a split RMA (`Cq::piece_wr_id`),
    /// 0 if none: the operation's last request, flushed behind it, reports it.
    piece_err: std::sync::atomic::AtomicU32,
}

impl QpCounters {
    pub fn new(tx_max: usize, rx_max: usize) -> Self {
        let unsig_batch = UNSIG_BATCH.min(tx_max / 4).max(1);
        QpCounters {
            tx: AtomicUsize::new(0),
            rx: AtomicUsize::new(0),
            tx_max,
            rx_max,
            cntrs: CntrSet::default(),
            counted: false,
            srq: None,
            unsig: AtomicUsize::new(0),
            unsig_batch,
            piece_err: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// With the endpoint's counters.
    pub fn with_cntrs(mut self, cntrs: CntrSet) -> Self {
        self.counted = !cntrs.is_empty();
        self.cntrs = cntrs;
        self
    }

    /// Whether a counter counts this QP's completions.
    #[inline(always)]
    pub fn counted(&self) -> bool {
        self.counted
    }

    /// Receiving from a shared receive context with these slots.
    pub fn with_srq(mut self, srq: Option<Arc<QpCounters>>) -> Self {
        self.srq = srq;
        self
    }

    /// Decides how an inject (no completion wanted, nothing to report but
    /// errors) is posted, after its credit was taken. `None`: unsignalled —
    /// the device writes no completion; its credit is held until a later
    /// signalled inject of this QP completes (a send queue completes in
    /// order). `Some(n)`: signalled, and its completion gives back `n`
    /// credits, its own and those of the `n - 1` unsignalled ones before it.
    /// At most `unsig_batch - 1` credits are ever held this way.
    pub fn unsignalled(&self) -> Option<usize> {
        let mut cur = self.unsig.load(Ordering::Acquire);
        loop {
            let (next, res) = if cur + 1 < self.unsig_batch { (cur + 1, None) } else { (0, Some(cur + 1)) };
            match self.unsig.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return res,
                Err(c) => cur = c,
            }
        }
    }

    /// A signalled inject that absorbed `n - 1` unsignalled credits failed to
    /// post: its own credit comes back now, the others are held again.
    /// (An unsignalled post that fails keeps its credit held: given back
    /// once, by the next signalled inject, as counted.)
    pub fn unabsorb(&self, n: usize) {
        self.give_tx();
        if n > 1 {
            self.unsig.fetch_add(n - 1, Ordering::AcqRel);
        }
    }

    fn take(slot: &AtomicUsize, max: usize) -> bool {
        let prev = slot.fetch_add(1, Ordering::AcqRel);
        if prev >= max {
            slot.fetch_sub(1, Ordering::AcqRel);
            false
        } else {
            true
        }
    }

    /// Takes a send-queue credit; false when the queue is full.
    pub fn take_tx(&self) -> bool {
        Self::take(&self.tx, self.tx_max)
    }
    /// Takes a receive-queue credit; false when the queue is full.
    pub fn take_rx(&self) -> bool {
        Self::take(&self.rx, self.rx_max)
    }
    pub fn give_tx(&self) {
        self.tx.fetch_sub(1, Ordering::AcqRel);
    }
    fn give_tx_n(&self, n: usize) {
        if n > 0 {
            self.tx.fetch_sub(n, Ordering::AcqRel);
        }
    }
    pub fn give_rx(&self) {
        self.rx.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Decoded work-request id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrId {
    pub kind: OpKind,
    /// The application's context, or a side-table index when `indirect`.
    pub ctx: u64,
    pub indirect: bool,
    /// No completion on success.
    pub silent: bool,
    /// An inject of the unsignalled scheme: `ctx` is not a context but the
    /// number of send credits its completion gives back (0: unsignalled).
    pub batch: bool,
}

impl WrId {
    pub fn encode(self) -> u64 {
        debug_assert!(self.ctx <= CTX_MASK);
        self.ctx
            | ((self.kind as u64) << KIND_SHIFT)
            | if self.indirect { INDIRECT } else { 0 }
            | if self.silent { SILENT } else { 0 }
            | if self.batch { BATCH } else { 0 }
    }
    pub fn decode(v: u64) -> Option<WrId> {
        Some(WrId {
            kind: OpKind::from_bits((v & KIND_MASK) >> KIND_SHIFT)?,
            ctx: v & CTX_MASK,
            indirect: v & INDIRECT != 0,
            silent: v & SILENT != 0,
            batch: v & BATCH != 0,
        })
    }
}

/// One successful completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Completion {
    pub op_context: u64,
    pub flags: u64,
    pub len: usize,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    pub src: u64,
}

/// One error completion (`struct fi_cq_err_entry`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CqErr {
    pub op_context: u64,
    pub flags: u64,
    pub len: usize,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
    pub src: u64,
}

/// `prov_errno` of an error entry that rsverbs made itself, with no verbs
/// completion status behind it (an RDM operation failed with its
/// connection, timed out, or was truncated): the negative libfabric error.
/// Non-negative values are verbs completion statuses; `fi_cq_strerror`
/// tells the two apart.
pub fn soft_prov_errno(err: i32) -> i32 {
    -(err.saturating_abs())
}

/// The libfabric error for a verbs completion status.
pub fn status_to_err(status: u32) -> i32 {
    match status {
        wc_status::WR_FLUSH_ERR => FI_ECANCELED,
        wc_status::LOC_LEN_ERR => FI_ETRUNC,
        wc_status::REM_ACCESS_ERR | wc_status::LOC_PROT_ERR => FI_EACCES,
        wc_status::RETRY_EXC_ERR | wc_status::RNR_RETRY_EXC_ERR => FI_ETIMEDOUT,
        wc_status::REM_INV_REQ_ERR => FI_EINVAL,
        _ => FI_EIO,
    }
}

#[derive(Default)]
struct State {
    /// Completions and error entries already taken from the verbs CQ or made
    /// in software, in the order they happened: a success queued before an
    /// error is read before it (an error must not overtake, e.g., the earlier
    /// messages of a multi-receive buffer it releases). Error entries are
    /// boxed: they are rare, and at their size every success would be moved
    /// in and out of the queue as a ~100-byte entry instead of 64 bytes.
    queue: VecDeque<Result<Completion, Box<CqErr>>>,
    /// Error entries in `queue`.
    nerr: usize,
    last_err_data: Vec<u8>,
    /// Contexts that did not fit in a work-request id.
    stash: Vec<Option<u64>>,
    stash_free: Vec<usize>,
    /// The QP whose completion was translated last, with its credits: the
    /// next completion is most often the same QP's, and then needs no look-up
    /// in `Cq::qps` (a lock and a hash per completion). `attach` and `detach`
    /// clear it for their QP number.
    last_qp: Option<(u32, Arc<QpCounters>)>,
}

impl State {
    fn push_ok(&mut self, c: Completion) {
        self.queue.push_back(Ok(c));
    }

    fn push_err(&mut self, e: CqErr) {
        self.queue.push_back(Err(Box::new(e)));
        self.nerr += 1;
    }

    /// Hands out queued successes up to `max` or the first error entry.
    #[inline(always)]
    fn pop_ready<F: FnMut(&Completion)>(&mut self, max: usize, out: &mut F) -> usize {
        let mut n = 0;
        while n < max {
            match self.queue.front() {
                Some(Ok(c)) => {
                    out(c);
                    self.queue.pop_front();
                    n += 1;
                }
                _ => break,
            }
        }
        n
    }

    fn head_is_ok(&self) -> bool {
        matches!(self.queue.front(), Some(Ok(_)))
    }

    fn head_is_err(&self) -> bool {
        matches!(self.queue.front(), Some(Err(_)))
    }

    /// The first error entry (normally at the head: fi_cq_read said FI_EAVAIL).
    fn pop_err(&mut self) -> Option<CqErr> {
        let pos = self.queue.iter().position(|e| e.is_err())?;
        let Some(Err(e)) = self.queue.remove(pos) else { unreachable!("position of an error") };
        self.nerr -= 1;
        Some(*e)
    }
}

/// The credit counters of the QPs completing on a CQ, by QP number.
type QpTable = RwLock<HashMap<u32, Arc<QpCounters>>>;

/// What `Cq::translate` made of one work completion.
#[derive(Debug, PartialEq)]
enum Translated {
    /// Nothing to report (an unsignalled or silent success, a piece of a
    /// split RMA, a foreign id).
    Silent,
    /// A success to hand out.
    Ok(Completion),
    /// An error entry, already queued.
    Failed,
}

/// The locked state of a CQ; unlocking publishes the queue's length in
/// `Cq::queued`, so every change of the queue is seen there.
struct StateGuard<'a> {
    st: parking_lot::MutexGuard<'a, State>,
    queued: &'a AtomicUsize,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.st
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        self.queued.store(self.st.queue.len(), Ordering::Release);
    }
}

/// An endpoint's CQ for one direction: the CQ and whether the binding asked
/// for `FI_SELECTIVE_COMPLETION`.
pub type CqBind = Option<(Hold<Cq>, bool)>;

/// `fi_ep_bind(ep, cq, flags)` for every endpoint kind, once the endpoint has
/// checked it is not enabled yet: the CQ must belong to the endpoint's
/// `domain`, `flags` name `FI_TRANSMIT` and/or `FI_RECV` (plus
/// `FI_SELECTIVE_COMPLETION`), and no CQ is bound yet for those directions.
/// Records the binding in `tx`/`rx`.
pub fn bind_cq(domain: &Arc<Domain>, tx: &mut CqBind, rx: &mut CqBind, cq: &Arc<Cq>, flags: u64) -> FiResult<()> {
    if !Arc::ptr_eq(cq.domain.get(), domain) {
        return crate::fail!(FiError::DOMAIN, "fi_ep_bind: CQ belongs to another domain");
    }
    if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
        return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: unsupported CQ bind flags {flags:#x}");
    }
    if flags & (FI_TRANSMIT | FI_RECV) == 0 {
        return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: CQ bind needs FI_TRANSMIT and/or FI_RECV");
    }
    if (flags & FI_TRANSMIT != 0 && tx.is_some()) || (flags & FI_RECV != 0 && rx.is_some()) {
        return crate::fail!(FiError::INVAL, "fi_ep_bind: a CQ is already bound for that direction");
    }
    let sel = flags & FI_SELECTIVE_COMPLETION != 0;
    if flags & FI_TRANSMIT != 0 {
        *tx = Some((Hold::new(cq), sel));
    }
    if flags & FI_RECV != 0 {
        *rx = Some((Hold::new(cq), sel));
    }
    Ok(())
}

pub struct Cq {
    pub domain: Hold<Domain>,
    pub format: u32,
    pub wait_obj: u32,
    /// The verbs CQ, created by the first `commit` (the first MSG endpoint
    /// enabled on this CQ): a CQ no QP completes on (RDM endpoints complete
    /// on their own; many applications open CQs they never use) holds no
    /// device memory.
    vcq: OnceLock<verbs::Cq>,
    /// Entries the application asked for (clamped to the device's max_cqe);
    /// 0: sized by what the bound endpoints need.
    asked: usize,
    /// The completion channel: opened with the CQ when it has a wait object
    /// (its fd is a member of `wait`), else only if a counter that can be
    /// waited on is fed by this CQ before its verbs CQ exists. A CQ opened
    /// with FI_WAIT_NONE takes no file descriptor.
    channel: OnceLock<Arc<CompChannel>>,
    state: Mutex<State>,
    pub wait: Option<WaitFd>,
    /// Work requests the bound endpoints may have outstanding at once.
    committed: Mutex<usize>,
    /// Credit counters of the QPs completing here, by QP number.
    qps: QpTable,
    /// Whether a QP ever completed here. The verbs CQ of a CQ that only RDM
    /// endpoints use stays empty (they complete on their own CQ and queue
    /// here in software): reads skip polling it.
    used: std::sync::atomic::AtomicBool,
    bunch: usize,
    /// Software progress of the objects completing here (RDM and DGRAM
    /// endpoints). Their event fds are members of `wait`, so the CQ's fd
    /// wakes for them. Held strongly (no `Weak::upgrade` and release on
    /// every read): an endpoint's `close` removes itself, which breaks the
    /// cycle of an endpoint holding its CQs.
    hooks: RwLock<Vec<Arc<dyn Progress>>>,
    /// Whether `hooks` ever had a member: a CQ of MSG endpoints only skips
    /// the lock on every read.
    hooked: std::sync::atomic::AtomicBool,
    /// Entries software progress has pushed (`push_completion`,
    /// `push_error`), counted so that a read whose progress pass pushed
    /// nothing answers without taking the queue's lock again.
    soft_pushes: std::sync::atomic::AtomicU64,
    /// Entries in the state's queue, as of the last unlock (`StateGuard`
    /// stores it): a read that finds 0 here skips the lock for its first
    /// look (most reads of a busy loop, and every read whose completion its
    /// own progress pass makes).
    queued: AtomicUsize,
    /// The wait set the CQ belongs to (`FI_WAIT_SET`).
    waitset: Mutex<Option<Hold<WaitSet>>>,
    /// `fi_cq_signal` was called: the next blocked (or blocking) `sread`
    /// returns `-FI_EAGAIN` at once (fi_cq(3): it unblocks the reader).
    woken: std::sync::atomic::AtomicBool,
    pub refs: Refs,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq").field("format", &self.format).field("capacity", &self.vcq.get().map(|c| c.capacity())).finish()
    }
}

impl HasRefs for Cq {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}


impl Cq {
    pub fn open(domain: &Arc<Domain>, size: usize, format: u32, wait_obj: u32, flags: u64) -> FiResult<Arc<Cq>> {
        match format {
            FI_CQ_FORMAT_UNSPEC | FI_CQ_FORMAT_CONTEXT | FI_CQ_FORMAT_MSG | FI_CQ_FORMAT_DATA | FI_CQ_FORMAT_TAGGED => {}
            _ => return crate::fail!(FiError::INVAL, "fi_cq_open: invalid format {format}"),
        }
        if flags & !FI_AFFINITY != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_cq_open: unsupported flags {flags:#x}");
        }
        let wait_obj = match wait_obj {
            FI_WAIT_NONE | FI_WAIT_UNSPEC | FI_WAIT_FD | FI_WAIT_SET => wait_obj,
            FI_WAIT_MUTEX_COND | FI_WAIT_YIELD | FI_WAIT_POLLFD => {
                return crate::fail!(FiError::NOSYS, "fi_cq_open: wait object {wait_obj} is not supported")
            }
            _ => return crate::fail!(FiError::INVAL, "fi_cq_open: invalid wait object {wait_obj}"),
        };
        let max = domain.attr.max_cqe.max(1) as usize;
        if size > max {
            // Honour the request's spirit: the device cannot hold more; endpoints
            // bound later are checked against the real capacity.
            tracing::info!("fi_cq_open: size {size} clamped to the device's max_cqe {max}");
        }
        // A wait object needs the completion channel now (its fd is in the
        // CQ's wait fd); FI_WAIT_NONE takes no fd (as libfabric's verbs).
        let channel = OnceLock::new();
        let wait = if wait_obj != FI_WAIT_NONE {
            let ch = match domain.dev.create_comp_channel() {
                Ok(c) => Arc::new(c),
                Err(e) => return crate::fail!(FiError::from_errno(e), "fi_cq_open: ibv_create_comp_channel failed: errno {e}"),
            };
            let w = WaitFd::new(&[ch.fd()])?;
            let _ = channel.set(ch);
            Some(w)
        } else {
            None
        };
        Ok(Arc::new(Cq {
            domain: Hold::new(domain),
            format: if format == FI_CQ_FORMAT_UNSPEC { FI_CQ_FORMAT_CONTEXT } else { format },
            wait_obj,
            vcq: OnceLock::new(),
            asked: size.min(max),
            channel,
            state: Mutex::new(State::default()),
            wait,
            committed: Mutex::new(0),
            qps: RwLock::new(HashMap::default()),
            used: std::sync::atomic::AtomicBool::new(false),
            hooked: std::sync::atomic::AtomicBool::new(false),
            soft_pushes: std::sync::atomic::AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            bunch: config::get().cqread_bunch_size.max(1),
            hooks: RwLock::new(Vec::new()),
            waitset: Mutex::new(None),
            woken: std::sync::atomic::AtomicBool::new(false),
            refs: Refs::default(),
        }))
    }

    /// Joins a wait set (`FI_WAIT_SET`).
    pub fn join(self: &Arc<Self>, ws: &Arc<WaitSet>) -> FiResult<()> {
        let fd = self.wait.as_ref().map(|w| w.fd()).expect("FI_WAIT_SET CQs have a wait fd");
        let me: Weak<dyn Waitable> = Arc::downgrade(self) as Weak<dyn Waitable>;
        ws.attach(me, fd)?;
        *self.waitset.lock() = Some(Hold::new(ws));
        Ok(())
    }

    /// Registers an object to progress at the start of every read. Its event
    /// fd joins the CQ's wait fd: `FI_GETWAIT` then wakes for its traffic.
    /// The object must call `remove_progress` when it closes (the CQ
    /// holds it until then).
    pub fn add_progress(&self, p: Weak<dyn Progress>) -> FiResult<()> {
        let Some(p) = p.upgrade() else {
            return crate::fail!(FiError::INVAL, "cq: a progress hook for an object already gone");
        };
        if let (Some(w), Some(fd)) = (&self.wait, p.wait_fd()) {
            w.add_fd(fd)?;
        }
        let mut h = self.hooks.write();
        self.hooked.store(true, std::sync::atomic::Ordering::Release);
        h.push(p);
        Ok(())
    }

    /// Unregisters an object (and its fd) added with `add_progress`.
    pub fn remove_progress(&self, p: &Weak<dyn Progress>, fd: Option<std::os::fd::RawFd>) {
        // By address: the object's, whatever vtable either pointer carries.
        let gone = {
            let mut h = self.hooks.write();
            let (keep, gone): (Vec<_>, Vec<_>) = h.drain(..).partition(|a| !std::ptr::addr_eq(Arc::as_ptr(a), p.as_ptr()));
            *h = keep;
            gone
        };
        if let (Some(fd), Some(w)) = (fd, &self.wait) {
            w.del_fd(fd);
        }
        // Released outside the lock (a last reference runs the object's drop).
        drop(gone);
    }

    fn lock_state(&self) -> StateGuard<'_> {
        StateGuard { st: self.state.lock(), queued: &self.queued }
    }

    fn hooks(&self) -> Vec<Arc<dyn Progress>> {
        self.hooks.read().clone()
    }

    /// Runs the software progress of the objects completing here (on the hot
    /// path of every read: no allocation; progress never calls back into the
    /// CQ's hook list).
    #[inline(always)]
    fn run_hooks(&self) {
        if self.hooked.load(std::sync::atomic::Ordering::Acquire) {
            self.run_hooks_now();
        }
    }

    /// `run_hooks` past its check (out of line: CQs without hooks, MSG
    /// endpoints' among them, pay one load per read, not a call).
    #[inline(never)]
    fn run_hooks_now(&self) {
        for p in self.hooks.read().iter() {
            p.progress();
        }
    }

    /// Reserves room for `n` more outstanding requests, growing the verbs CQ if
    /// needed, so that the CQ can never overrun.
    /// The first commit creates the verbs CQ (the size the application asked
    /// for, or what is needed if more).
    pub fn commit(&self, n: usize) -> FiResult<()> {
        let mut c = self.committed.lock();
        let need = *c + n;
        let max = self.domain.attr.max_cqe.max(1) as usize;
        if need > max {
            return crate::fail!(
                FiError::NOSPC,
                "CQ cannot hold {need} outstanding completions (device max_cqe {max}); use a smaller tx/rx size or more CQs"
            );
        }
        match self.vcq.get() {
            None => {
                let size = need.max(self.asked).max(1);
                let cq = match self.domain.dev.create_cq(size as i32, self.channel.get().cloned()) {
                    Ok(cq) => cq,
                    Err(e) => return crate::fail!(FiError::from_errno(e), "CQ: ibv_create_cq({size}) failed: errno {e}"),
                };
                tracing::debug!("cq: verbs CQ created with {} entries ({need} needed)", cq.capacity());
                let _ = self.vcq.set(cq);
            }
            Some(cq) if need > cq.capacity().max(0) as usize => {
                if let Err(e) = cq.resize(need as i32) {
                    return crate::fail!(FiError::NOSPC, "CQ resize to {need} failed: errno {e}");
                }
            }
            Some(_) => {}
        }
        *c = need;
        Ok(())
    }

    /// The verbs CQ, once an endpoint's `commit` created it.
    pub fn verbs_cq(&self) -> Option<&verbs::Cq> {
        self.vcq.get()
    }

    /// A counter that can be waited on will be fed by this CQ: give the CQ a
    /// completion channel, so the counter's wait fd wakes for it. Possible
    /// only before the verbs CQ exists (a channel is fixed at creation);
    /// after that the counter polls (`Cntr::add_source` sees no fd).
    pub fn want_channel(&self) {
        let _c = self.committed.lock();
        if self.channel.get().is_some() {
            return;
        }
        if self.vcq.get().is_some() {
            tracing::info!("cq: opened with FI_WAIT_NONE and already in use: a counter fed by it polls instead of sleeping");
            return;
        }
        match self.domain.dev.create_comp_channel() {
            Ok(ch) => {
                let _ = self.channel.set(Arc::new(ch));
            }
            Err(e) => tracing::info!("cq: no completion channel (errno {e}): counters fed by this CQ will poll"),
        }
    }

    pub fn uncommit(&self, n: usize) {
        let mut c = self.committed.lock();
        *c = c.saturating_sub(n);
    }

    /// Registers the credit counters of a QP whose completions arrive here.
    pub fn attach(&self, qp_num: u32, c: Arc<QpCounters>) {
        self.qps.write().insert(qp_num, c);
        self.forget_qp(qp_num);
        self.used.store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn detach(&self, qp_num: u32) {
        self.qps.write().remove(&qp_num);
        self.forget_qp(qp_num);
    }

    /// Drops the remembered QP (`State::last_qp`) if it is `qp_num` (taken
    /// after `qps` is released: the two locks are never held together here).
    fn forget_qp(&self, qp_num: u32) {
        let mut st = self.lock_state();
        if st.last_qp.as_ref().is_some_and(|(n, _)| *n == qp_num) {
            st.last_qp = None;
        }
    }

    /// Returns the credit of a polled completion to its QP.
    fn give_back(qps: &QpTable, cache: &mut Option<(u32, Arc<QpCounters>)>, wc: &Wc, id: &WrId) {
        let q = wc.qp_num();
        if cache.as_ref().map_or(true, |(n, _)| *n != q) {
            *cache = qps.read().get(&q).map(|c| (q, c.clone()));
        }
        if let Some((_, c)) = cache {
            if id.kind == OpKind::Recv {
                match &c.srq {
                    Some(s) => s.give_rx(),
                    None => c.give_rx(),
                }
            } else if id.batch {
                c.give_tx_n(id.ctx as usize)
            } else {
                c.give_tx()
            }
        }
    }

    /// Puts a context that does not fit in a work-request id aside; returns its index.
    pub fn stash(&self, ctx: u64) -> u64 {
        let mut st = self.lock_state();
        if let Some(i) = st.stash_free.pop() {
            st.stash[i] = Some(ctx);
            i as u64
        } else {
            st.stash.push(Some(ctx));
            (st.stash.len() - 1) as u64
        }
    }

    /// Work-request id of a piece of an RMA operation split into several
    /// requests (MSG endpoints, `MsgEp::post_tx`): signaled, its completion
    /// gives back its own credit and reports nothing, and counts nothing —
    /// the operation's last request does. A piece that fails leaves its
    /// status for that last request (`QpCounters::piece_err`), which the
    /// failure flushes. (batch and indirect together: no other id has both.)
    pub fn piece_wr_id(kind: OpKind) -> u64 {
        WrId { kind, ctx: 1, indirect: true, silent: true, batch: true }.encode()
    }

    /// Encodes a work-request id for an operation completing on this CQ.
    #[inline]
    pub fn wr_id(&self, kind: OpKind, ctx: u64, silent: bool) -> u64 {
        if ctx <= CTX_MASK {
            WrId { kind, ctx, indirect: false, silent, batch: false }.encode()
        } else {
            self.stashed_wr_id(kind, ctx, silent)
        }
    }

    #[inline(never)]
    fn stashed_wr_id(&self, kind: OpKind, ctx: u64, silent: bool) -> u64 {
        WrId { kind, ctx: self.stash(ctx), indirect: true, silent, batch: false }.encode()
    }

    /// A work-request id that carries `ctx` itself (no side table of a CQ):
    /// for receives of a shared receive context, which may complete on any
    /// of several CQs. None when `ctx` does not fit.
    pub fn direct_wr_id(kind: OpKind, ctx: u64) -> Option<u64> {
        (ctx <= CTX_MASK).then(|| WrId { kind, ctx, indirect: false, silent: false, batch: false }.encode())
    }

    /// Work-request id of an inject posted under `QpCounters::unsignalled`:
    /// `credits` is what its completion gives back (0 when unsignalled).
    pub fn batch_wr_id(kind: OpKind, credits: usize) -> u64 {
        WrId { kind, ctx: credits as u64, indirect: false, silent: true, batch: true }.encode()
    }

    fn resolve_ctx(st: &mut State, id: &WrId) -> u64 {
        if id.batch {
            return 0; // injects have no context
        }
        if !id.indirect {
            return id.ctx;
        }
        let i = id.ctx as usize;
        match st.stash.get_mut(i).and_then(|s| s.take()) {
            Some(c) => {
                st.stash_free.push(i);
                c
            }
            None => 0,
        }
    }

    /// Counts a software push; called with the state locked, so the
    /// increment needs no atomic read-modify-write, and a reader that saw
    /// the old count (under the lock) saw the queue without the entry.
    #[inline]
    fn count_push(&self) {
        use std::sync::atomic::Ordering;
        self.soft_pushes.store(self.soft_pushes.load(Ordering::Relaxed) + 1, Ordering::Release);
    }

    /// Queues a completion made in software and wakes waiters.
    pub fn push_completion(&self, c: Completion) {
        let mut st = self.lock_state();
        st.push_ok(c);
        self.count_push();
        drop(st);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    /// Queues an error completion made in software and wakes waiters.
    pub fn push_error(&self, e: CqErr) {
        let mut st = self.lock_state();
        st.push_err(e);
        self.count_push();
        drop(st);
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    /// Translates one work completion. An error entry goes to `st`'s queue
    /// here (`Translated::Failed`): the common case, a success, then returns
    /// only the entry, not room for an error's as well.
    ///
    /// The common case is decided here, inline in the polling loop: a success
    /// of the QP translated last (`State::last_qp`), with no counter to feed, whose id
    /// carries its context (not stashed) and, for a receive, no immediate
    /// data. Everything else goes to `translate_slow`.
    #[inline(always)]
    fn translate(&self, st: &mut State, wc: &Wc) -> Translated {
        Self::translate_with(&self.qps, st, wc)
    }

    /// `translate` over the QP table `qps` (the CQ's own; a test's).
    #[inline(always)]
    fn translate_with(qps: &QpTable, st: &mut State, wc: &Wc) -> Translated {
        let raw = wc.wr_id();
        if let (Some((qpn, q)), Some(kind)) = (st.last_qp.as_ref(), OpKind::from_bits((raw & KIND_MASK) >> KIND_SHIFT)) {
            if raw & INDIRECT == 0
                && wc.status() == wc_status::SUCCESS
                && *qpn == wc.qp_num()
                && !q.counted
                && (kind != OpKind::Recv || (wc.opcode() == wc_opcode::RECV && !wc.has_imm()))
            {
                if kind == OpKind::Recv {
                    match &q.srq {
                        Some(s) => s.give_rx(),
                        None => q.give_rx(),
                    }
                    if raw & SILENT != 0 {
                        return Translated::Silent;
                    }
                    return Translated::Ok(Completion {
                        op_context: raw & CTX_MASK,
                        flags: FI_RECV | FI_MSG,
                        len: wc.byte_len() as usize,
                        ..Default::default()
                    });
                }
                if raw & BATCH != 0 {
                    q.give_tx_n((raw & CTX_MASK) as usize);
                    return Translated::Silent;
                }
                q.give_tx();
                if raw & SILENT != 0 {
                    return Translated::Silent;
                }
                return Translated::Ok(Completion { op_context: raw & CTX_MASK, flags: kind.flags(), ..Default::default() });
            }
        }
        Self::translate_slow(qps, st, wc)
    }

    /// `translate` for everything but the common case (out of line).
    #[inline(never)]
    fn translate_slow(qps: &QpTable, st: &mut State, wc: &Wc) -> Translated {
        let Some(id) = WrId::decode(wc.wr_id()) else {
            tracing::warn!("cq: completion with a foreign work-request id {:#x} dropped", wc.wr_id());
            return Translated::Silent;
        };
        Self::give_back(qps, &mut st.last_qp, wc, &id);
        let mut status = wc.status();
        if id.batch && id.indirect {
            // A piece of a split RMA (`piece_wr_id`): its operation's last
            // request reports and counts, once, for all of them.
            if status != wc_status::SUCCESS && status != wc_status::WR_FLUSH_ERR {
                tracing::info!("cq: a piece of a split {:?} failed: {} (vendor error {:#x})", id.kind, wc.status_str(), wc.vendor_err());
                if let Some((_, q)) = st.last_qp.as_ref() {
                    let _ = q.piece_err.compare_exchange(0, status, Ordering::AcqRel, Ordering::Acquire);
                }
            }
            return Translated::Silent;
        }
        if status == wc_status::WR_FLUSH_ERR && matches!(id.kind, OpKind::Read | OpKind::Write) {
            // The last request of a split RMA flushed behind its failed piece: that failure is its.
            if let Some((_, q)) = st.last_qp.as_ref() {
                let e = q.piece_err.swap(0, Ordering::AcqRel);
                if e != 0 {
                    status = e;
                }
            }
        }
        if let Some((_, q)) = st.last_qp.as_ref() {
            // Counters count every completion, silent or not (fi_cntr(3)); a
            // remote write with data that consumed a receive is not a receive.
            if q.counted && wc.opcode() != wc_opcode::RECV_RDMA_WITH_IMM {
                // A signalled inject of a batch also completes the unsignalled
                // injects posted before it (a send queue completes in order):
                // they succeeded, and each counts.
                let before = if id.batch { (id.ctx as usize).saturating_sub(1) } else { 0 };
                for _ in 0..before {
                    q.cntrs.count(id.kind.flags(), true);
                }
                q.cntrs.count(id.kind.flags(), wc.status() == wc_status::SUCCESS);
            }
        }
        let ctx = Self::resolve_ctx(st, &id);
        if status != wc_status::SUCCESS {
            let err = status_to_err(status);
            if wc.status() != wc_status::WR_FLUSH_ERR {
                tracing::info!("cq: {:?} failed: {} (vendor error {:#x})", id.kind, wc.status_str(), wc.vendor_err());
            }
            st.push_err(CqErr { op_context: ctx, flags: id.kind.flags(), err, prov_errno: status as i32, ..Default::default() });
            return Translated::Failed;
        }
        if id.silent {
            return Translated::Silent;
        }
        let mut c = Completion { op_context: ctx, flags: id.kind.flags(), ..Default::default() };
        if id.kind == OpKind::Recv {
            c.len = wc.byte_len() as usize;
            if let Some(imm) = wc.imm_data() {
                c.data = imm as u64;
                c.flags |= FI_REMOTE_CQ_DATA;
            }
            if wc.opcode() == wc_opcode::RECV_RDMA_WITH_IMM {
                // A remote write with data consumed this receive (FI_RX_CQ_DATA mode);
                // len is the bytes it placed (fi_cq(3) of 2.x; 1.x leaves it open).
                c.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
            }
        }
        Translated::Ok(c)
    }

    /// Reads up to `max` completions, handing each to `out`. `FI_EAGAIN` when
    /// none, `FI_EAVAIL` when an error entry is next.
    ///
    /// Generic over `out`, so that the caller's writer (the application's
    /// entry format, `capi::cq`) is inlined into the loop that translates.
    #[inline(always)]
    pub fn read<F: FnMut(&Completion)>(&self, max: usize, out: &mut F) -> FiResult<usize> {
        // Completions already queued by software progress are handed out
        // without another progress pass, as libfabric's util CQs do (they
        // progress only when empty): an application that reads its transmit
        // CQ, whose progress found a message, then its receive CQ gets the
        // message without paying for a second, idle pass first. Progress runs
        // again as soon as the queue is empty, so nothing waits longer than
        // the entries ahead of it take to read. CQs without software progress
        // (MSG) read as before.
        //
        // A pass that pushed nothing (the count of software pushes did not
        // move) leaves the queue as it was seen: the read answers from that
        // look, without taking the lock again (most of a busy poll). An
        // empty queue (`queued`) is seen without the lock at all. The count
        // is read first: a push it missed shows in the count after the pass.
        if max > 0 && self.hooked.load(std::sync::atomic::Ordering::Acquire) {
            let seen = self.soft_pushes.load(std::sync::atomic::Ordering::Acquire);
            let mut err = false;
            if self.queued.load(std::sync::atomic::Ordering::Acquire) != 0 {
                let mut st = self.lock_state();
                if st.head_is_ok() {
                    return Ok(st.pop_ready(max, out));
                }
                err = st.head_is_err();
            }
            self.run_hooks();
            if !self.used.load(std::sync::atomic::Ordering::Acquire)
                && self.soft_pushes.load(std::sync::atomic::Ordering::Acquire) == seen
            {
                return Err(if err { FiError::AVAIL } else { FiError::AGAIN });
            }
        } else {
            self.run_hooks();
            if max == 0 {
                return Ok(0);
            }
        }
        let mut st = self.lock_state();
        // What is queued first, up to the first error entry.
        let mut n = if st.queue.is_empty() { 0 } else { st.pop_ready(max, out) };
        // Then the verbs CQ, if any QP completes on it (not for a CQ of RDM
        // endpoints only, whose entries all come from their progress).
        if self.used.load(std::sync::atomic::Ordering::Acquire) && n < max && st.queue.is_empty() {
            n = self.read_verbs(&mut st, n, max, out)?;
        }
        if n > 0 {
            Ok(n)
        } else if st.head_is_err() {
            Err(FiError::AVAIL)
        } else {
            Err(FiError::AGAIN)
        }
    }

    /// `read` past the software queue (empty): polls the verbs CQ and
    /// translates what it holds, writing up to `max` entries in all (`n`
    /// written already); the rest is queued. Returns the entries written.
    #[inline(always)]
    fn read_verbs<F: FnMut(&Completion)>(&self, st: &mut StateGuard<'_>, mut n: usize, max: usize, out: &mut F) -> FiResult<usize> {
        const MAXB: usize = 64;
        let mut wcs = verbs::WcBuf::<MAXB>::new();
        // The caller saw room and an empty queue: checked again after each poll.
        loop {
            let want = (max - n).clamp(self.bunch.min(MAXB), MAXB);
            let Some(vcq) = self.vcq.get() else { break };
            let polled = match vcq.poll_buf(&mut wcs, want) {
                Ok(g) => g,
                Err(e) => return crate::fail!(FiError::from_errno(e), "cq: ibv_poll_cq failed: errno {e}"),
            };
            let got = polled.len();
            if got == 0 {
                break;
            }
            for wc in polled {
                match self.translate(st, wc) {
                    Translated::Silent | Translated::Failed => {}
                    Translated::Ok(c) => {
                        if st.queue.is_empty() && n < max {
                            out(&c);
                            n += 1;
                        } else {
                            st.push_ok(c);
                        }
                    }
                }
            }
            if got < want || n >= max || !st.queue.is_empty() {
                break;
            }
        }
        Ok(n)
    }

    /// Reads the next error entry; its err_data stays valid until the next call.
    pub fn read_err(&self) -> FiResult<(CqErr, *const u8)> {
        self.run_hooks();
        let mut st = self.lock_state();
        if st.nerr == 0 {
            drop(st);
            // An error may still sit in the verbs CQ: pull completions forward.
            self.poll_into_pending();
            st = self.lock_state();
        }
        let Some(e) = st.pop_err() else { return Err(FiError::AGAIN) };
        st.last_err_data = e.err_data.clone();
        let p = if st.last_err_data.is_empty() { std::ptr::null() } else { st.last_err_data.as_ptr() };
        Ok((e, p))
    }

    /// Moves everything in the verbs CQ into the software queues (returning the
    /// credits of what it finds). Posting calls this when credits run out, so
    /// progress never depends on the application reading this CQ.
    pub fn progress(&self) -> bool {
        let any = self.poll_into_pending();
        if any {
            // Completions now wait in software: make sure a sleeping reader wakes.
            self.signal();
        }
        any
    }

    /// Moves everything in the verbs CQ into the software queues.
    fn poll_into_pending(&self) -> bool {
        if !self.used.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        let mut st = self.lock_state();
        let mut wcs = verbs::WcBuf::<16>::new();
        let mut any = false;
        let Some(vcq) = self.vcq.get() else { return false };
        loop {
            let polled = vcq.poll_buf(&mut wcs, 16).unwrap_or(&[]);
            let got = polled.len();
            for wc in polled {
                match self.translate(&mut st, wc) {
                    Translated::Silent => {}
                    Translated::Failed => any = true,
                    Translated::Ok(c) => {
                        st.push_ok(c);
                        any = true;
                    }
                }
            }
            if got < 16 {
                break;
            }
        }
        any
    }

    /// `fi_trywait`: `Ok` only when nothing is ready and the fd is armed.
    pub fn trywait(&self) -> FiResult<()> {
        let Some(w) = &self.wait else {
            return crate::fail!(FiError::INVAL, "fi_trywait: CQ has no wait object");
        };
        let hooks = self.hooks();
        for h in &hooks {
            h.progress();
        }
        {
            let st = self.lock_state();
            if !st.queue.is_empty() {
                return Err(FiError::AGAIN);
            }
        }
        if let Some(vcq) = self.vcq.get() {
            if let Some(ch) = vcq.channel() {
                while ch.consume_event(vcq) {}
            }
        }
        w.clear();
        if let Some(vcq) = self.vcq.get() {
            if let Err(e) = vcq.req_notify() {
                return crate::fail!(FiError::from_errno(e), "fi_trywait: ibv_req_notify_cq failed: errno {e}");
            }
        }
        // Close the race: a completion that arrived before the arm raises no event.
        if self.poll_into_pending() {
            if let Some(w) = &self.wait {
                w.signal();
            }
            return Err(FiError::AGAIN);
        }
        for h in &hooks {
            if !h.arm() {
                return Err(FiError::AGAIN);
            }
        }
        // A hook may have queued completions while arming.
        let st = self.lock_state();
        if !st.queue.is_empty() {
            return Err(FiError::AGAIN);
        }
        Ok(())
    }

    /// Blocking read with a timeout in milliseconds (-1: forever).
    pub fn sread<F: FnMut(&Completion)>(&self, max: usize, timeout_ms: i32, out: &mut F) -> FiResult<usize> {
        if self.wait.is_none() {
            return crate::fail!(FiError::INVAL, "fi_cq_sread: CQ opened with FI_WAIT_NONE");
        }
        let dl = sys::deadline(timeout_ms);
        let woken = || self.woken.swap(false, std::sync::atomic::Ordering::AcqRel);
        loop {
            match self.read(max, out) {
                Err(FiError::AGAIN) => {}
                r => return r,
            }
            if woken() {
                return Err(FiError::AGAIN);
            }
            match self.trywait() {
                Err(FiError::AGAIN) => continue,
                Err(e) => return Err(e),
                Ok(()) => {}
            }
            // fi_cq_signal before trywait cleared the fd: the flag says so.
            if woken() {
                return Err(FiError::AGAIN);
            }
            let left = sys::remaining_ms(dl);
            if left == 0 {
                return Err(FiError::AGAIN);
            }
            // The wait fd also holds the software-progressed objects' fds.
            self.wait.as_ref().expect("checked").wait(left)?;
            if sys::remaining_ms(dl) == 0 {
                // One last look before reporting the time-out.
                return self.read(max, out);
            }
        }
    }

    /// `fi_cq_signal`: a thread blocked in `sread` returns `-FI_EAGAIN`
    /// (as libfabric's verbs), one that blocks next does so at once.
    pub fn wake(&self) {
        self.woken.store(true, std::sync::atomic::Ordering::Release);
        self.signal();
    }

    /// Wakes a thread blocked in `sread` (software completions queued).
    pub fn signal(&self) {
        if let Some(w) = &self.wait {
            w.signal();
        }
    }

    /// Drives progress; true when completions or errors are ready to read.
    pub fn has_events(&self) -> bool {
        self.run_hooks();
        self.progress();
        let st = self.lock_state();
        !st.queue.is_empty()
    }

    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("cq")?;
        if let (Some(ws), Some(w)) = (self.waitset.lock().take(), &self.wait) {
            ws.detach(w.fd());
        }
        Ok(())
    }
}

/// A CQ as the progress source of a counter (MSG endpoints: completions are
/// counted when the verbs CQ is polled).
impl Progress for Cq {
    fn progress(&self) {
        self.run_hooks();
        Cq::progress(self);
    }

    fn arm(&self) -> bool {
        if let Some(vcq) = self.vcq.get() {
            if let Some(ch) = vcq.channel() {
                while ch.consume_event(vcq) {}
            }
            if let Err(e) = vcq.req_notify() {
                tracing::warn!("cq: ibv_req_notify_cq failed: errno {e}");
                return false;
            }
        }
        if Cq::progress(self) {
            return false;
        }
        self.hooks().iter().all(|h| h.arm())
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.channel.get().map(|c| c.fd())
    }
}

impl Waitable for Cq {
    fn has_events(&self) -> bool {
        Cq::has_events(self)
    }
    fn trywait(&self) -> FiResult<()> {
        Cq::trywait(self)
    }
}

impl Pollable for Hold<Cq> {
    fn poll_events(&self) -> bool {
        self.get().has_events()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wr_id_roundtrip() {
        for kind in [OpKind::Send, OpKind::Write, OpKind::Read, OpKind::Recv, OpKind::Atomic, OpKind::AtomicFetch] {
            for ctx in [0u64, 1, 0x7fff_ffff_f000, CTX_MASK] {
                for (indirect, silent) in [(false, false), (true, false), (false, true), (true, true)] {
                    for batch in [false, true] {
                        let id = WrId { kind, ctx, indirect, silent, batch };
                        assert_eq!(WrId::decode(id.encode()), Some(id));
                    }
                }
            }
        }
        assert_eq!(WrId::decode(0), None, "kind 0 is not ours");
    }

    #[test]
    fn errors_do_not_overtake_earlier_completions() {
        let ok = |ctx| Completion { op_context: ctx, ..Default::default() };
        let mut st = State::default();
        assert!(!st.head_is_ok(), "empty: a read progresses first");
        st.push_ok(ok(1));
        assert!(st.head_is_ok(), "a success first: a read hands it out without progress");
        st.push_ok(ok(2));
        st.push_err(CqErr { op_context: 3, err: FI_ETRUNC, ..Default::default() });
        st.push_ok(ok(4));
        let mut got = Vec::new();
        assert_eq!(st.pop_ready(8, &mut |c| got.push(c.op_context)), 2, "the two successes before the error");
        assert_eq!(got, [1, 2]);
        assert!(st.head_is_err(), "then FI_EAVAIL");
        assert!(!st.head_is_ok(), "an error first: a read progresses, then reports FI_EAVAIL");
        assert_eq!(st.pop_ready(8, &mut |c| got.push(c.op_context)), 0, "nothing passes the error");
        assert_eq!(st.pop_err().map(|e| e.op_context), Some(3));
        assert!(!st.head_is_err());
        assert_eq!(st.pop_ready(8, &mut |c| got.push(c.op_context)), 1);
        assert_eq!(got, [1, 2, 4]);
        assert_eq!((st.nerr, st.queue.len()), (0, 0));
        // fi_cq_readerr without a preceding FI_EAVAIL still finds a queued error.
        st.push_ok(ok(5));
        st.push_err(CqErr { op_context: 6, ..Default::default() });
        assert_eq!(st.pop_err().map(|e| e.op_context), Some(6));
        assert_eq!(st.pop_ready(1, &mut |c| got.push(c.op_context)), 1);
        assert_eq!(st.pop_err(), None);
    }

    /// The inlined fast path of `translate` gives what the general path
    /// gives, result, queue and credits alike, for every completion it
    /// takes; and it leaves the rest (another QP, an error, a stashed
    /// context, immediate data, a split RMA's piece) to the general path.
    /// (A counter to feed needs a domain: the device suites cover it.)
    #[test]
    fn translate_fast_path_agrees_with_the_general_path() {
        let (qpn, other) = (7u32, 9u32);
        let mk = || {
            let q = QpCounters::new(64, 64);
            // Every credit taken, so each give-back shows.
            q.tx.store(64, Ordering::Relaxed);
            q.rx.store(64, Ordering::Relaxed);
            Arc::new(q)
        };
        let kinds = [OpKind::Send, OpKind::Write, OpKind::Read, OpKind::Recv, OpKind::Atomic, OpKind::AtomicFetch];
        for kind in kinds {
            for (indirect, silent, batch) in [(false, false, false), (false, true, false), (false, true, true), (true, false, false), (true, true, true)] {
                for status in [wc_status::SUCCESS, wc_status::WR_FLUSH_ERR, 4 /* LOC_PROT_ERR */] {
                    for opcode in [wc_opcode::SEND, wc_opcode::RECV, wc_opcode::RECV_RDMA_WITH_IMM] {
                        for imm in [None, Some(0xabcd)] {
                            for wc_qp in [qpn, other] {
                                let ctx = if batch { 3 } else { 0x1234 };
                                let raw = WrId { kind, ctx, indirect, silent, batch }.encode();
                                let wc = Wc::for_test(raw, status, opcode, wc_qp, 8, imm);
                                let run = |fast: bool| {
                                    let q = mk();
                                    let qps: QpTable = RwLock::new(HashMap::default());
                                    qps.write().insert(qpn, q.clone());
                                    qps.write().insert(other, mk());
                                    let mut st = State::default();
                                    st.stash.push(Some(0x5678)); // index 0x1234 is not there: resolves to 0
                                    st.last_qp = Some((qpn, q.clone()));
                                    let t = if fast { Cq::translate_with(&qps, &mut st, &wc) } else { Cq::translate_slow(&qps, &mut st, &wc) };
                                    let credits = [qpn, other].map(|n| {
                                        let t = qps.read();
                                        (t[&n].tx.load(Ordering::Relaxed), t[&n].rx.load(Ordering::Relaxed))
                                    });
                                    let queued: Vec<_> = st.queue.iter().map(|e| e.as_ref().map(|c| *c).map_err(|e| (e.op_context, e.err))).collect();
                                    (t, credits, queued, st.last_qp.map(|(n, _)| n))
                                };
                                let fast = run(true);
                                let slow = run(false);
                                assert_eq!(fast, slow, "{kind:?} indirect={indirect} silent={silent} batch={batch} status={status} opcode={opcode} imm={imm:?} qp={wc_qp}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn completion_flags_by_kind() {
        assert_eq!(OpKind::Send.flags(), FI_SEND | FI_MSG);
        assert_eq!(OpKind::Recv.flags(), FI_RECV | FI_MSG);
        assert_eq!(OpKind::Write.flags(), FI_RMA | FI_WRITE);
        assert_eq!(OpKind::Read.flags(), FI_RMA | FI_READ);
    }

    #[test]
    fn credits_bound_outstanding_requests() {
        let c = QpCounters::new(2, 1);
        assert!(c.take_tx());
        assert!(c.take_tx());
        assert!(!c.take_tx(), "third send must find the queue full");
        c.give_tx();
        assert!(c.take_tx());
        assert!(c.take_rx());
        assert!(!c.take_rx());
        assert_eq!(c.tx.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn unsignalled_injects_give_back_every_credit_once() {
        let c = QpCounters::new(64, 1);
        assert_eq!(c.unsig_batch, UNSIG_BATCH);
        let mut held = 0; // credits taken by unsignalled posts, not yet given back
        let mut signalled = 0;
        for _ in 0..(UNSIG_BATCH * 10) {
            assert!(c.take_tx());
            match c.unsignalled() {
                None => held += 1,
                Some(n) => {
                    assert_eq!(n, held + 1, "a signalled inject absorbs exactly the unsignalled ones before it");
                    signalled += 1;
                    c.give_tx_n(n); // its completion
                    held = 0;
                }
            }
            assert!(held < UNSIG_BATCH, "at most UNSIG_BATCH - 1 credits held");
        }
        assert_eq!(signalled, 10, "one inject in UNSIG_BATCH is signalled");
        assert_eq!(c.tx.load(Ordering::Relaxed), held);
        // A failed signalled post holds the absorbed credits again.
        for _ in 0..(UNSIG_BATCH - 1) {
            assert!(c.take_tx());
            assert_eq!(c.unsignalled(), None);
        }
        assert!(c.take_tx());
        let n = c.unsignalled().expect("the batch is full");
        c.unabsorb(n);
        assert_eq!(c.tx.load(Ordering::Relaxed), UNSIG_BATCH - 1);
        assert!(c.take_tx());
        assert_eq!(c.unsignalled(), Some(UNSIG_BATCH), "the next signalled one absorbs them and itself");
        // Small queues still work: a batch of 1 signals every inject.
        let s = QpCounters::new(2, 1);
        assert!(s.take_tx());
        assert_eq!(s.unsignalled(), Some(1));
    }

    #[test]
    fn status_mapping() {
        assert_eq!(status_to_err(wc_status::WR_FLUSH_ERR), FI_ECANCELED);
        assert_eq!(status_to_err(wc_status::LOC_LEN_ERR), FI_ETRUNC);
        assert_eq!(status_to_err(wc_status::REM_ACCESS_ERR), FI_EACCES);
        assert_eq!(status_to_err(9999), FI_EIO);
    }
}
