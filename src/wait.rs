//! Wait objects: one fd an application can poll/epoll, readable whenever
//! there is something to read — a hardware event (completion channel, rdma-cm
//! channel) or a software one (signalled through an eventfd).

use std::os::fd::RawFd;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::fi::consts::*;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::{Fabric, HasRefs, Hold, Refs};
use crate::sys::{self, Epoll, EventFd};

#[derive(Debug)]
pub struct WaitFd {
    epoll: Epoll,
    soft: EventFd,
    /// The eventfd has been written since the last `clear`: a completion
    /// pushed in software signals once per sleep, not once per entry (each
    /// write is a system call; RDM completions are all pushed in software).
    pending: std::sync::atomic::AtomicBool,
}

impl WaitFd {
    /// A wait fd over the given hardware fds plus a software signal.
    pub fn new(hw_fds: &[RawFd]) -> FiResult<WaitFd> {
        let epoll = Epoll::new().map_err(FiError::from_errno)?;
        let soft = EventFd::new().map_err(FiError::from_errno)?;
        epoll.add(soft.raw(), 0).map_err(FiError::from_errno)?;
        for (i, fd) in hw_fds.iter().enumerate() {
            epoll.add(*fd, i as u64 + 1).map_err(FiError::from_errno)?;
        }
        Ok(WaitFd { epoll, soft, pending: std::sync::atomic::AtomicBool::new(false) })
    }

    /// The fd handed to applications (`FI_GETWAIT`).
    pub fn fd(&self) -> RawFd {
        self.epoll.raw()
    }

    /// Marks a software event.
    pub fn signal(&self) {
        use std::sync::atomic::Ordering;
        // Already written and not cleared since: the fd is readable.
        if !self.pending.swap(true, Ordering::AcqRel) {
            self.soft.signal();
        }
    }

    /// Clears the software signal (call before re-checking the queues).
    /// `pending` goes first: a signal racing with this either sees it
    /// cleared and writes again, or came before it and its entry is found
    /// by the re-check that follows.
    pub fn clear(&self) {
        self.pending.store(false, std::sync::atomic::Ordering::Release);
        self.soft.drain();
    }

    /// Blocks until something is readable or `timeout_ms` passes (-1: forever).
    pub fn wait(&self, timeout_ms: i32) -> FiResult<bool> {
        self.epoll.wait(timeout_ms).map(|n| n > 0).map_err(FiError::from_errno)
    }
}

impl WaitFd {
    /// Adds another event source's fd (an RDM endpoint's, a CQ's channel).
    pub fn add_fd(&self, fd: RawFd) -> FiResult<()> {
        self.epoll.add(fd, fd as u64 + 1).map_err(|e| {
            tracing::warn!("wait: epoll_ctl(ADD {fd}) failed: errno {e}");
            FiError::from_errno(e)
        })
    }

    /// Removes an fd added with `add_fd`.
    pub fn del_fd(&self, fd: RawFd) {
        self.epoll.del(fd);
    }
}

/// An object that can sit in a wait set: CQs, EQs, counters.
pub trait Waitable: Send + Sync {
    /// Drives the object's progress; true when it has something to report.
    fn has_events(&self) -> bool;
    /// `fi_trywait` of the object.
    fn trywait(&self) -> FiResult<()>;
}

/// A wait set (`fi_wait_open`): one epoll fd over the wait fds of its members.
pub struct WaitSet {
    pub fabric: Hold<Fabric>,
    pub wait_obj: u32,
    epoll: Epoll,
    members: Mutex<Vec<(Weak<dyn Waitable>, RawFd)>>,
    pub refs: Refs,
}

impl std::fmt::Debug for WaitSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitSet").field("wait_obj", &self.wait_obj).finish()
    }
}

impl HasRefs for WaitSet {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

impl WaitSet {
    pub fn open(fabric: &Arc<Fabric>, wait_obj: u32, flags: u64) -> FiResult<Arc<WaitSet>> {
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_wait_open: flags {flags:#x} (must be 0)");
        }
        let wait_obj = match wait_obj {
            FI_WAIT_UNSPEC | FI_WAIT_FD => FI_WAIT_FD,
            FI_WAIT_MUTEX_COND | FI_WAIT_YIELD | FI_WAIT_POLLFD => {
                return crate::fail!(FiError::NOSYS, "fi_wait_open: wait object {wait_obj} is not supported (FI_WAIT_FD/UNSPEC)")
            }
            _ => return crate::fail!(FiError::INVAL, "fi_wait_open: invalid wait object {wait_obj}"),
        };
        let epoll = Epoll::new().map_err(FiError::from_errno)?;
        Ok(Arc::new(WaitSet { fabric: Hold::new(fabric), wait_obj, epoll, members: Mutex::new(Vec::new()), refs: Refs::default() }))
    }

    /// The fd handed to applications (`FI_GETWAIT`).
    pub fn fd(&self) -> RawFd {
        self.epoll.raw()
    }

    /// Adds a member whose wait fd is `fd`.
    pub fn attach(&self, w: Weak<dyn Waitable>, fd: RawFd) -> FiResult<()> {
        if let Err(e) = self.epoll.add(fd, fd as u64) {
            return crate::fail!(FiError::from_errno(e), "wait set: epoll_ctl failed: errno {e}");
        }
        self.members.lock().push((w, fd));
        Ok(())
    }

    /// Removes the member with wait fd `fd` (it is being closed).
    pub fn detach(&self, fd: RawFd) {
        self.epoll.del(fd);
        self.members.lock().retain(|(w, f)| *f != fd && w.strong_count() > 0);
    }

    fn live(&self) -> Vec<Arc<dyn Waitable>> {
        self.members.lock().iter().filter_map(|(w, _)| w.upgrade()).collect()
    }

    /// `fi_trywait` on the set: every member must be safe to block on.
    pub fn trywait(&self) -> FiResult<()> {
        for m in self.live() {
            m.trywait()?;
        }
        Ok(())
    }

    /// `fi_wait`: drives the members' progress and returns `Ok` as soon as
    /// one has something to report; sleeps on the set's fd meanwhile.
    /// `FI_ETIMEDOUT` when `timeout_ms` (-1: forever) passes first.
    pub fn wait(&self, timeout_ms: i32) -> FiResult<()> {
        let dl = sys::deadline(timeout_ms);
        loop {
            let members = self.live();
            if members.iter().any(|m| m.has_events()) {
                return Ok(());
            }
            let mut armed = true;
            for m in &members {
                match m.trywait() {
                    Ok(()) => {}
                    Err(FiError::AGAIN) => armed = false,
                    Err(e) => return Err(e),
                }
            }
            if !armed {
                if members.iter().any(|m| m.has_events()) {
                    return Ok(());
                }
                if sys::remaining_ms(dl) == 0 {
                    return Err(FiError(FI_ETIMEDOUT));
                }
                continue;
            }
            let left = sys::remaining_ms(dl);
            if left == 0 {
                return Err(FiError(FI_ETIMEDOUT));
            }
            self.epoll.wait(left).map_err(FiError::from_errno)?;
        }
    }

    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("wait set")
    }
}

/// A member of a poll set: drives its progress and says whether it has events.
pub trait Pollable: Send + Sync {
    fn poll_events(&self) -> bool;
}

/// A poll set (`fi_poll_open`): CQs and counters polled together; `fi_poll`
/// returns the contexts of those with events.
pub struct PollSet {
    pub domain: Hold<Domain>,
    /// (identity of the member's C object, its context, the member).
    members: Mutex<Vec<(usize, u64, Box<dyn Pollable>)>>,
    pub refs: Refs,
}

impl std::fmt::Debug for PollSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollSet").finish()
    }
}

impl HasRefs for PollSet {
    fn refs(&self) -> &Refs {
        &self.refs
    }
}

impl PollSet {
    pub fn open(domain: &Arc<Domain>, flags: u64) -> FiResult<Arc<PollSet>> {
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_poll_open: flags {flags:#x} (must be 0)");
        }
        Ok(Arc::new(PollSet { domain: Hold::new(domain), members: Mutex::new(Vec::new()), refs: Refs::default() }))
    }

    /// `fi_poll_add`. `key` identifies the member (its fid address).
    pub fn add(&self, key: usize, context: u64, m: Box<dyn Pollable>) -> FiResult<()> {
        let mut g = self.members.lock();
        if g.iter().any(|(k, _, _)| *k == key) {
            return crate::fail!(FiError::ALREADY, "fi_poll_add: object already in the poll set");
        }
        g.push((key, context, m));
        Ok(())
    }

    /// `fi_poll_del`.
    pub fn del(&self, key: usize) -> FiResult<()> {
        let mut g = self.members.lock();
        let n = g.len();
        g.retain(|(k, _, _)| *k != key);
        if g.len() == n {
            return crate::fail!(FiError::NOENT, "fi_poll_del: object is not in the poll set");
        }
        Ok(())
    }

    /// `fi_poll`: the contexts of up to `max` members with events.
    pub fn poll(&self, max: usize, out: &mut dyn FnMut(u64)) -> usize {
        let g = self.members.lock();
        let mut n = 0;
        for (_, ctx, m) in g.iter() {
            if n == max {
                break;
            }
            if m.poll_events() {
                out(*ctx);
                n += 1;
            }
        }
        n
    }

    pub fn close(&self) -> FiResult<()> {
        self.refs.check_idle("poll set")?;
        self.members.lock().clear();
        Ok(())
    }
}
