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
use crate::progress::Progress;
use crate::config;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::{HasRefs, Hold, Refs};
use crate::sys;
use crate::verbs::{self, wc_opcode, wc_status, CompChannel, Wc};
use crate::wait::{Pollable, WaitFd, WaitSet, Waitable};

mod entry;
mod translate;
mod wait;
mod wrid;
#[cfg(test)]
mod tests;

pub use entry::{soft_prov_errno, status_to_err, Completion, CqErr};
use translate::Translated;
pub use wrid::{OpKind, QpCounters, WrId, UNSIG_BATCH};
use wrid::*;

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

/// Completions one poll of the verbs CQ takes at most in a read.
const READ_BATCH: usize = 64;

/// The credit counters of the QPs completing on a CQ, by QP number.
type QpTable = RwLock<HashMap<u32, Arc<QpCounters>>>;

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
    /// Completions a read polls for at least (`FI_VERBS_CQREAD_BUNCH_SIZE`),
    /// at most `READ_BATCH`: clamped when the CQ opens, not on every read.
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
            bunch: config::get().cqread_bunch_size.clamp(1, READ_BATCH),
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
        // One look at `hooked`: a CQ of MSG endpoints only (every CQ read
        // under ofi_rxm, Mercury's busy poll among them) goes straight to
        // its lock and the verbs CQ.
        if self.hooked.load(std::sync::atomic::Ordering::Acquire) {
            if max == 0 {
                // A read of nothing: a call for progress.
                self.run_hooks_now();
                return Ok(0);
            }
            let seen = self.soft_pushes.load(std::sync::atomic::Ordering::Acquire);
            let mut err = false;
            if self.queued.load(std::sync::atomic::Ordering::Acquire) != 0 {
                let mut st = self.lock_state();
                if st.head_is_ok() {
                    return Ok(st.pop_ready(max, out));
                }
                err = st.head_is_err();
            }
            self.run_hooks_now();
            if !self.used.load(std::sync::atomic::Ordering::Acquire)
                && self.soft_pushes.load(std::sync::atomic::Ordering::Acquire) == seen
            {
                return Err(if err { FiError::AVAIL } else { FiError::AGAIN });
            }
        } else if max == 0 {
            return Ok(0);
        }
        let mut st = self.lock_state();
        if st.queue.is_empty() {
            // Nothing queued in software (nearly every read of an MSG
            // endpoint's CQ): the verbs CQ alone, if a QP completes on it.
            let n = if self.used.load(std::sync::atomic::Ordering::Acquire) { self.read_verbs(&mut st, 0, max, out)? } else { 0 };
            return Self::answer(&st, n);
        }
        // What is queued first, up to the first error entry.
        let mut n = st.pop_ready(max, out);
        // Then the verbs CQ, if any QP completes on it (not for a CQ of RDM
        // endpoints only, whose entries all come from their progress).
        if self.used.load(std::sync::atomic::Ordering::Acquire) && n < max && st.queue.is_empty() {
            n = self.read_verbs(&mut st, n, max, out)?;
        }
        Self::answer(&st, n)
    }

    /// What a read that handed out `n` entries returns: `n`, else
    /// `FI_EAVAIL` when an error entry is next, else `FI_EAGAIN`.
    #[inline(always)]
    fn answer(st: &State, n: usize) -> FiResult<usize> {
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
        let mut wcs = verbs::WcBuf::<READ_BATCH>::new();
        // The caller saw room and an empty queue: checked again after each poll.
        loop {
            // At least `bunch` (at most READ_BATCH, clamped at open).
            let want = (max - n).max(self.bunch).min(READ_BATCH);
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

    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("cq")?;
        if let (Some(ws), Some(w)) = (self.waitset.lock().take(), &self.wait) {
            ws.detach(w.fd());
        }
        Ok(())
    }
}
