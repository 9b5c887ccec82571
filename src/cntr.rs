//! Counters (`fi_cntr_open`): a success value and an error value, bumped by
//! the endpoints bound to them (`fi_ep_bind` with `FI_SEND`, `FI_RECV`,
//! `FI_READ`, `FI_WRITE`) for every completed operation, whether or not it
//! also writes a CQ entry (fi_cntr(3)).
//!
//! Progress is manual: a counter knows the objects whose progress feeds it
//! (the CQs of MSG endpoints, whose verbs completions are translated — and
//! counted — when polled; RDM endpoints themselves) and drives them inside
//! `fi_cntr_read`, `fi_cntr_readerr` and `fi_cntr_wait`.
//!
//! Wait object: an epoll fd (`WaitFd`) over an eventfd, signalled when the
//! value changes while someone may be waiting, and the event fds of the
//! sources (a verbs completion channel, an RDM endpoint's channels), which
//! become readable once `fi_trywait` (or `fi_cntr_wait`) has armed them.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};

use crate::fi::consts::*;
use crate::progress::Progress;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::{HasRefs, Hold, Refs};
use crate::sys;
use crate::wait::{Pollable, WaitFd, WaitSet, Waitable};

pub struct Cntr {
    pub domain: Hold<Domain>,
    /// As opened (`FI_WAIT_NONE`, `FI_WAIT_UNSPEC`, `FI_WAIT_FD`, `FI_WAIT_SET`).
    pub wait_obj: u32,
    value: AtomicU64,
    err: AtomicU64,
    pub wait: Option<WaitFd>,
    /// Set by a waiter before its last check; a change then signals the fd.
    armed: AtomicBool,
    sources: RwLock<Vec<Weak<dyn Progress>>>,
    /// A source without an event fd: waits poll instead of sleeping.
    blind: AtomicBool,
    /// (value, error value) the application last read (for `fi_trywait`).
    seen: Mutex<(u64, u64)>,
    /// (value, error value) at the last `fi_poll`/`fi_cntr_set`/`fi_cntr_add`.
    poll_seen: Mutex<(u64, u64)>,
    waitset: Mutex<Option<Hold<WaitSet>>>,
    pub refs: Refs,
}

impl std::fmt::Debug for Cntr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cntr").field("value", &self.value).field("err", &self.err).finish()
    }
}

impl HasRefs for Cntr {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

/// The counters bound to one endpoint, by the kind of operation they count.
#[derive(Debug, Default, Clone)]
pub struct CntrSet {
    pub send: Option<Arc<Cntr>>,
    pub recv: Option<Arc<Cntr>>,
    pub read: Option<Arc<Cntr>>,
    pub write: Option<Arc<Cntr>>,
}

impl CntrSet {
    pub fn is_empty(&self) -> bool {
        self.send.is_none() && self.recv.is_none() && self.read.is_none() && self.write.is_none()
    }

    /// Counts one completed operation with completion `flags` (`FI_SEND`,
    /// `FI_RECV`, `FI_READ`, `FI_WRITE`; RMA and atomics by direction).
    pub fn count(&self, flags: u64, ok: bool) {
        let c = if flags & FI_REMOTE_WRITE != 0 || flags & FI_REMOTE_READ != 0 {
            None // target-side events are not counted (no FI_RMA_EVENT)
        } else if flags & FI_SEND != 0 {
            self.send.as_ref()
        } else if flags & FI_RECV != 0 {
            self.recv.as_ref()
        } else if flags & FI_READ != 0 {
            self.read.as_ref()
        } else if flags & FI_WRITE != 0 {
            self.write.as_ref()
        } else {
            None
        };
        if let Some(c) = c {
            if ok {
                c.add(1)
            } else {
                c.add_err(1)
            }
        }
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<Cntr>> {
        [&self.send, &self.recv, &self.read, &self.write].into_iter().flatten()
    }
}

/// Counters held by an endpoint's bindings (`fi_close` of a bound counter is `-FI_EBUSY`).
#[derive(Debug, Default)]
pub struct CntrBinds {
    pub send: Option<Hold<Cntr>>,
    pub recv: Option<Hold<Cntr>>,
    pub read: Option<Hold<Cntr>>,
    pub write: Option<Hold<Cntr>>,
}

impl CntrBinds {
    /// `fi_ep_bind(ep, cntr, flags)`: checks the flags and records the binding.
    pub fn bind(&mut self, cntr: &Arc<Cntr>, flags: u64) -> FiResult<()> {
        const OK: u64 = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
        if flags & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
            return crate::fail!(
                FiError::OPNOTSUPP,
                "fi_ep_bind: counting remote RMA (FI_REMOTE_READ/FI_REMOTE_WRITE) needs FI_RMA_EVENT, which rsverbs does not offer"
            );
        }
        if flags & !OK != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: unsupported counter bind flags {flags:#x}");
        }
        if flags == 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_ep_bind: a counter bind needs FI_SEND, FI_RECV, FI_READ and/or FI_WRITE");
        }
        let slots = [(FI_SEND, &self.send), (FI_RECV, &self.recv), (FI_READ, &self.read), (FI_WRITE, &self.write)];
        if slots.iter().any(|(f, s)| flags & f != 0 && s.is_some()) {
            return crate::fail!(FiError::INVAL, "fi_ep_bind: a counter is already bound for one of flags {flags:#x}");
        }
        if flags & FI_SEND != 0 {
            self.send = Some(Hold::new(cntr));
        }
        if flags & FI_RECV != 0 {
            self.recv = Some(Hold::new(cntr));
        }
        if flags & FI_READ != 0 {
            self.read = Some(Hold::new(cntr));
        }
        if flags & FI_WRITE != 0 {
            self.write = Some(Hold::new(cntr));
        }
        Ok(())
    }

    pub fn set(&self) -> CntrSet {
        let g = |h: &Option<Hold<Cntr>>| h.as_ref().map(|c| c.get().clone());
        CntrSet { send: g(&self.send), recv: g(&self.recv), read: g(&self.read), write: g(&self.write) }
    }

    pub fn clear(&mut self) {
        *self = CntrBinds::default();
    }
}

impl Cntr {
    pub fn open(domain: &Arc<Domain>, events: u32, wait_obj: u32, flags: u64) -> FiResult<Arc<Cntr>> {
        // libfabric 2.0's FI_CNTR_EVENTS_BYTES (1): counting bytes is not supported.
        const FI_CNTR_EVENTS_BYTES: u32 = 1;
        if events == FI_CNTR_EVENTS_BYTES {
            return crate::fail!(FiError::NOSYS, "fi_cntr_open: FI_CNTR_EVENTS_BYTES is not supported (counters count completions)");
        }
        if events != FI_CNTR_EVENTS_COMP {
            return crate::fail!(FiError::INVAL, "fi_cntr_open: unknown events {events} (only FI_CNTR_EVENTS_COMP)");
        }
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_cntr_open: flags {flags:#x} (must be 0)");
        }
        match wait_obj {
            FI_WAIT_NONE | FI_WAIT_UNSPEC | FI_WAIT_FD | FI_WAIT_SET => {}
            FI_WAIT_MUTEX_COND | FI_WAIT_YIELD | FI_WAIT_POLLFD => {
                return crate::fail!(FiError::NOSYS, "fi_cntr_open: wait object {wait_obj} is not supported")
            }
            _ => return crate::fail!(FiError::INVAL, "fi_cntr_open: invalid wait object {wait_obj}"),
        }
        let wait = if wait_obj == FI_WAIT_NONE { None } else { Some(WaitFd::new(&[])?) };
        Ok(Arc::new(Cntr {
            domain: Hold::new(domain),
            wait_obj,
            value: AtomicU64::new(0),
            err: AtomicU64::new(0),
            wait,
            armed: AtomicBool::new(false),
            sources: RwLock::new(Vec::new()),
            blind: AtomicBool::new(false),
            seen: Mutex::new((0, 0)),
            poll_seen: Mutex::new((0, 0)),
            waitset: Mutex::new(None),
            refs: Refs::default(),
        }))
    }

    /// Joins a wait set (`FI_WAIT_SET`).
    pub fn join(self: &Arc<Self>, ws: &Arc<WaitSet>) -> FiResult<()> {
        let fd = self.wait.as_ref().map(|w| w.fd()).expect("FI_WAIT_SET counters have a wait fd");
        let me: Weak<dyn Waitable> = Arc::downgrade(self) as Weak<dyn Waitable>;
        ws.attach(me, fd)?;
        *self.waitset.lock() = Some(Hold::new(ws));
        Ok(())
    }

    /// Registers an object whose progress feeds this counter.
    pub fn add_source(&self, p: Weak<dyn Progress>) -> FiResult<()> {
        let fd = p.upgrade().and_then(|o| o.wait_fd());
        let mut s = self.sources.write();
        s.retain(|w| w.strong_count() > 0);
        if s.iter().any(|w| Weak::ptr_eq(w, &p)) {
            return Ok(());
        }
        if let Some(w) = &self.wait {
            match fd {
                Some(fd) => w.add_fd(fd)?,
                None => self.blind.store(true, Ordering::Release),
            }
        }
        s.push(p);
        Ok(())
    }

    /// Unregisters a source (and its fd).
    pub fn remove_source(&self, p: &Weak<dyn Progress>, fd: Option<RawFd>) {
        self.sources.write().retain(|w| w.strong_count() > 0 && !Weak::ptr_eq(w, p));
        if let (Some(w), Some(fd)) = (&self.wait, fd) {
            w.del_fd(fd);
        }
    }

    fn progress(&self) {
        let s = self.sources.read();
        for w in s.iter() {
            if let Some(p) = w.upgrade() {
                p.progress();
            }
        }
    }

    fn changed(&self) {
        if self.armed.swap(false, Ordering::SeqCst) {
            if let Some(w) = &self.wait {
                w.signal();
            }
        }
    }

    /// Adds to the success value (completions; `fi_cntr_add`).
    pub fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::SeqCst);
        self.changed();
    }

    /// Adds to the error value.
    pub fn add_err(&self, n: u64) {
        self.err.fetch_add(n, Ordering::SeqCst);
        self.changed();
    }

    pub fn value(&self) -> u64 {
        self.value.load(Ordering::SeqCst)
    }

    pub fn err_value(&self) -> u64 {
        self.err.load(Ordering::SeqCst)
    }

    /// `fi_cntr_read`: drives progress, then reads.
    pub fn read(&self) -> u64 {
        self.progress();
        let v = self.value();
        self.seen.lock().0 = v;
        v
    }

    /// `fi_cntr_readerr`.
    pub fn read_err(&self) -> u64 {
        self.progress();
        let v = self.err_value();
        self.seen.lock().1 = v;
        v
    }

    fn mark_poll(&self) {
        *self.poll_seen.lock() = (self.value(), self.err_value());
    }

    /// `fi_cntr_add` (from the application).
    pub fn app_add(&self, n: u64) {
        self.add(n);
        self.mark_poll();
    }

    /// `fi_cntr_set`.
    pub fn set(&self, v: u64) {
        self.value.store(v, Ordering::SeqCst);
        self.changed();
        self.mark_poll();
    }

    /// `fi_cntr_adderr`.
    pub fn app_add_err(&self, n: u64) {
        self.add_err(n);
        self.mark_poll();
    }

    /// `fi_cntr_seterr`.
    pub fn set_err(&self, v: u64) {
        self.err.store(v, Ordering::SeqCst);
        self.changed();
        self.mark_poll();
    }

    /// Arms every event source; false when one had work already.
    fn arm(&self) -> bool {
        let s = self.sources.read();
        let mut ok = true;
        for w in s.iter() {
            if let Some(p) = w.upgrade() {
                ok &= p.arm();
            }
        }
        ok
    }

    /// `fi_trywait`: `Ok` only when the fd is armed and nothing the
    /// application has not read yet happened.
    pub fn trywait(&self) -> FiResult<()> {
        let Some(w) = &self.wait else {
            return crate::fail!(FiError::INVAL, "fi_trywait: counter opened with FI_WAIT_NONE");
        };
        if self.blind.load(Ordering::Acquire) {
            // A source (a CQ opened with FI_WAIT_NONE) cannot wake the fd.
            return Err(FiError::AGAIN);
        }
        self.armed.store(true, Ordering::SeqCst);
        w.clear();
        if !self.arm() {
            return Err(FiError::AGAIN);
        }
        let now = (self.value(), self.err_value());
        if now != *self.seen.lock() {
            return Err(FiError::AGAIN);
        }
        Ok(())
    }

    /// `fi_cntr_wait`: until the value reaches `threshold` (`Ok`), the error
    /// value changes (`FI_EAVAIL`) or `timeout_ms` passes (`FI_ETIMEDOUT`).
    pub fn wait(&self, threshold: u64, timeout_ms: i32) -> FiResult<()> {
        let Some(w) = &self.wait else {
            return crate::fail!(FiError::INVAL, "fi_cntr_wait: counter opened with FI_WAIT_NONE");
        };
        if self.wait_obj == FI_WAIT_SET {
            return crate::fail!(FiError::INVAL, "fi_cntr_wait: counter uses a wait set (wait with fi_wait)");
        }
        let err0 = self.err_value();
        let dl = sys::deadline(timeout_ms);
        loop {
            self.progress();
            // Arm first, then check: a change after the check signals the fd.
            self.armed.store(true, Ordering::SeqCst);
            w.clear();
            let armed = self.arm();
            if self.value() >= threshold {
                return Ok(());
            }
            if self.err_value() != err0 {
                return Err(FiError::AVAIL);
            }
            if !armed {
                continue;
            }
            let left = sys::remaining_ms(dl);
            if left == 0 {
                return Err(FiError(FI_ETIMEDOUT));
            }
            // A blind source cannot wake us: look again every millisecond.
            let slice = if !self.blind.load(Ordering::Acquire) { left } else if left < 0 { 1 } else { left.min(1) };
            w.wait(slice)?;
        }
    }

    /// For `fi_poll`: drives progress; true when a value changed since the
    /// last `fi_poll`, `fi_cntr_set` or `fi_cntr_add`.
    pub fn poll_changed(&self) -> bool {
        self.progress();
        let now = (self.value(), self.err_value());
        let mut p = self.poll_seen.lock();
        if *p != now {
            *p = now;
            true
        } else {
            false
        }
    }

    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("cntr")?;
        if let (Some(ws), Some(w)) = (self.waitset.lock().take(), &self.wait) {
            ws.detach(w.fd());
        }
        Ok(())
    }
}

impl Waitable for Cntr {
    fn has_events(&self) -> bool {
        self.progress();
        (self.value(), self.err_value()) != *self.seen.lock()
    }
    fn trywait(&self) -> FiResult<()> {
        Cntr::trywait(self)
    }
}

impl Pollable for Hold<Cntr> {
    fn poll_events(&self) -> bool {
        self.get().poll_changed()
    }
}
