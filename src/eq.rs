//! Event queues: connection-management events from an rdma-cm channel, plus
//! application-written events (`fi_eq_write`), in arrival order. Progress is
//! made inside `fi_eq_read`/`fi_eq_sread`: the channel is drained into the
//! queue there.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::fi::consts::*;
use crate::error::{FiError, FiResult};
use crate::fabric::{Fabric, HasRefs, Hold, Refs};
use crate::info::Info;
use crate::sys;
use crate::verbs::cm::{CmEvent, EventChannel};
use crate::wait::{WaitFd, WaitSet, Waitable};

/// One successful event.
#[derive(Debug, Clone)]
pub enum EqEntry {
    /// A connection-management event (`struct fi_eq_cm_entry` + data).
    Cm { event: u32, fid: usize, info: Option<Box<Info>>, data: Vec<u8> },
    /// Bytes written by `fi_eq_write`, returned verbatim.
    User { event: u32, bytes: Vec<u8> },
}

impl EqEntry {
    pub fn event(&self) -> u32 {
        match self {
            EqEntry::Cm { event, .. } | EqEntry::User { event, .. } => *event,
        }
    }
}

/// One error event (`struct fi_eq_err_entry`).
#[derive(Debug, Clone, Default)]
pub struct EqErr {
    pub fid: usize,
    pub context: u64,
    pub data: u64,
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
}

/// What an object bound to the EQ makes of its rdma-cm events.
pub trait CmHandler: Send + Sync {
    /// Returns the entry to queue, if the event is of interest to the application.
    fn on_cm_event(&self, ev: CmEvent) -> Option<Result<EqEntry, EqErr>>;
}

#[derive(Default)]
struct State {
    queue: VecDeque<Result<EqEntry, EqErr>>,
    /// The err_data of the last error read, kept for the application (fi_eq(3)).
    last_err_data: Vec<u8>,
}

pub struct Eq {
    pub fabric: Hold<Fabric>,
    pub channel: EventChannel,
    state: Mutex<State>,
    handlers: Mutex<HashMap<u64, Weak<dyn CmHandler>>>,
    next_token: AtomicU64,
    pub wait: Option<WaitFd>,
    pub wait_obj: u32,
    pub size: usize,
    /// The wait set the EQ belongs to (`FI_WAIT_SET`).
    waitset: Mutex<Option<Hold<WaitSet>>>,
    pub refs: Refs,
}

impl std::fmt::Debug for Eq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eq").field("size", &self.size).field("wait_obj", &self.wait_obj).finish()
    }
}

impl HasRefs for Eq {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

/// How many queued entries an EQ holds when the application asks for size 0.
const DEFAULT_EQ_SIZE: usize = 1024;

impl Eq {
    pub fn open(fabric: &Arc<Fabric>, size: usize, wait_obj: u32, flags: u64) -> FiResult<Arc<Eq>> {
        if flags & !FI_WRITE != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_eq_open: unsupported flags {flags:#x}");
        }
        let wait_obj = match wait_obj {
            FI_WAIT_NONE | FI_WAIT_UNSPEC | FI_WAIT_FD | FI_WAIT_SET => wait_obj,
            FI_WAIT_MUTEX_COND | FI_WAIT_YIELD | FI_WAIT_POLLFD => {
                return crate::fail!(FiError::NOSYS, "fi_eq_open: wait object {wait_obj} is not supported")
            }
            _ => return crate::fail!(FiError::INVAL, "fi_eq_open: invalid wait object {wait_obj}"),
        };
        let channel = match EventChannel::new() {
            Ok(c) => c,
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_eq_open: rdma_create_event_channel failed: errno {e}"),
        };
        let wait = if wait_obj == FI_WAIT_NONE { None } else { Some(WaitFd::new(&[channel.fd()])?) };
        Ok(Arc::new(Eq {
            fabric: Hold::new(fabric),
            channel,
            state: Mutex::new(State::default()),
            handlers: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(1),
            wait,
            wait_obj,
            size: if size == 0 { DEFAULT_EQ_SIZE } else { size },
            waitset: Mutex::new(None),
            refs: Refs::default(),
        }))
    }

    /// Registers a CM event handler; returns the token its cm ids must carry.
    pub fn register(&self, h: Weak<dyn CmHandler>) -> u64 {
        let t = self.next_token.fetch_add(1, Ordering::Relaxed);
        self.handlers.lock().insert(t, h);
        t
    }

    pub fn unregister(&self, token: u64) {
        self.handlers.lock().remove(&token);
    }

    /// An object bound with `token` is closing: no more of its rdma-cm
    /// events, and the entries it left queued but unread are dropped, as
    /// libfabric's verbs does (`vrb_eq_remove_events`). Such an entry would
    /// name a freed `fid`; an application that follows it (ofi_rxm reads
    /// `fid->context`) would reach freed memory, or another endpoint
    /// allocated at the same address. Entries written by `fi_eq_write` stay.
    pub fn forget(&self, token: u64, fid: usize) {
        self.unregister(token);
        if fid == 0 {
            return;
        }
        let mut st = self.state.lock();
        let before = st.queue.len();
        st.queue.retain(|e| match e {
            Ok(EqEntry::Cm { fid: f, .. }) => *f != fid,
            Err(e) => e.fid != fid,
            Ok(EqEntry::User { .. }) => true,
        });
        let dropped = before - st.queue.len();
        if dropped > 0 {
            tracing::debug!("eq: dropped {dropped} unread event(s) of closed fid {fid:#x}");
        }
    }

    /// Queues an entry produced outside the CM channel (and wakes waiters).
    pub fn push(&self, e: Result<EqEntry, EqErr>) -> FiResult<()> {
        let mut st = self.state.lock();
        if st.queue.len() >= self.size {
            return crate::fail!(FiError::AGAIN, "fi_eq_write: event queue full ({} entries)", self.size);
        }
        st.queue.push_back(e);
        drop(st);
        if let Some(w) = &self.wait {
            w.signal();
        }
        Ok(())
    }

    /// Moves every pending rdma-cm event into the queue.
    fn progress(&self) {
        loop {
            let ev = match self.channel.get_event() {
                Ok(Some(ev)) => ev,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("eq: rdma_get_cm_event failed: errno {e}");
                    break;
                }
            };
            let handler = self.handlers.lock().get(&ev.token).and_then(|w| w.upgrade());
            let Some(h) = handler else {
                tracing::debug!("eq: dropping {:?} for a closed object", ev.kind);
                continue;
            };
            if let Some(entry) = h.on_cm_event(ev) {
                // CM events are never dropped for lack of room: the bound is for writes.
                self.state.lock().queue.push_back(entry);
            }
        }
    }

    /// Reads the next entry (`peek` leaves it queued). `FI_EAGAIN` when empty,
    /// `FI_EAVAIL` when the next one is an error.
    pub fn read(&self, peek: bool) -> FiResult<EqEntry> {
        self.progress();
        self.read_queued(peek).unwrap_or(Err(FiError::AGAIN))
    }

    /// The next queued entry without progressing the CM channel, `None` when
    /// the queue is empty.
    fn read_queued(&self, peek: bool) -> Option<FiResult<EqEntry>> {
        let mut st = self.state.lock();
        match st.queue.front()? {
            Err(_) => Some(Err(FiError::AVAIL)),
            Ok(e) if peek => Some(Ok(e.clone())),
            Ok(_) => st.queue.pop_front().map(|e| Ok(e.expect("is ok"))),
        }
    }

    /// Reads the next error entry. The returned err_data also stays in the EQ
    /// until the next `readerr` (for callers that borrow it).
    pub fn read_err(&self, peek: bool) -> FiResult<(EqErr, *const u8)> {
        self.progress();
        let mut st = self.state.lock();
        match st.queue.front() {
            Some(Err(_)) => {}
            _ => return Err(FiError::AGAIN),
        }
        let e = if peek {
            st.queue.front().expect("front").clone().err().expect("is err")
        } else {
            st.queue.pop_front().expect("front").err().expect("is err")
        };
        st.last_err_data = e.err_data.clone();
        let p = if st.last_err_data.is_empty() { std::ptr::null() } else { st.last_err_data.as_ptr() };
        Ok((e, p))
    }

    /// Blocking read: waits up to `timeout_ms` (-1: forever) for an entry.
    pub fn sread(&self, peek: bool, timeout_ms: i32) -> FiResult<EqEntry> {
        let Some(w) = &self.wait else {
            return crate::fail!(FiError::INVAL, "fi_eq_sread: EQ opened with FI_WAIT_NONE");
        };
        // An entry already queued is returned before any system call (the
        // fd's drain, the CM channel's poll): fabtests' fi_eq_test allows
        // 5 ms for it, a budget a loaded emulated lab can otherwise miss.
        if let Some(r) = self.read_queued(peek) {
            return r;
        }
        let dl = sys::deadline(timeout_ms);
        loop {
            w.clear();
            match self.read(peek) {
                Err(FiError::AGAIN) => {}
                r => return r,
            }
            let left = sys::remaining_ms(dl);
            if left == 0 {
                return Err(FiError::AGAIN);
            }
            w.wait(left)?;
        }
    }

    /// `fi_trywait` for this EQ: `Ok` when it is safe to block on the fd.
    pub fn trywait(&self) -> FiResult<()> {
        let Some(w) = &self.wait else {
            return crate::fail!(FiError::INVAL, "fi_trywait: EQ has no wait object (FI_WAIT_NONE)");
        };
        // A stale software signal would make the fd readable with nothing queued.
        w.clear();
        self.progress();
        if self.state.lock().queue.is_empty() {
            Ok(())
        } else {
            Err(FiError::AGAIN)
        }
    }

    /// Joins a wait set (`FI_WAIT_SET`).
    pub fn join(self: &Arc<Self>, ws: &Arc<WaitSet>) -> FiResult<()> {
        let fd = self.wait.as_ref().map(|w| w.fd()).expect("FI_WAIT_SET EQs have a wait fd");
        let me: Weak<dyn Waitable> = Arc::downgrade(self) as Weak<dyn Waitable>;
        ws.attach(me, fd)?;
        *self.waitset.lock() = Some(Hold::new(ws));
        Ok(())
    }

    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("eq")?;
        if let (Some(ws), Some(w)) = (self.waitset.lock().take(), &self.wait) {
            ws.detach(w.fd());
        }
        Ok(())
    }
}

impl Waitable for Eq {
    fn has_events(&self) -> bool {
        self.progress();
        !self.state.lock().queue.is_empty()
    }
    fn trywait(&self) -> FiResult<()> {
        Eq::trywait(self)
    }
}
