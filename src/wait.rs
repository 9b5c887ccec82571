//! Wait objects: one fd an application can poll/epoll, readable whenever
//! there is something to read — a hardware event (completion channel, rdma-cm
//! channel) or a software one (signalled through an eventfd).

use std::os::fd::RawFd;

use crate::error::{FiError, FiResult};
use crate::sys::{Epoll, EventFd};

#[derive(Debug)]
pub struct WaitFd {
    epoll: Epoll,
    soft: EventFd,
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
        Ok(WaitFd { epoll, soft })
    }

    /// The fd handed to applications (`FI_GETWAIT`).
    pub fn fd(&self) -> RawFd {
        self.epoll.raw()
    }

    /// Marks a software event.
    pub fn signal(&self) {
        self.soft.signal();
    }

    /// Clears the software signal (call before re-checking the queues).
    pub fn clear(&self) {
        self.soft.drain();
    }

    /// Blocks until something is readable or `timeout_ms` passes (-1: forever).
    pub fn wait(&self, timeout_ms: i32) -> FiResult<bool> {
        self.epoll.wait(timeout_ms).map(|n| n > 0).map_err(FiError::from_errno)
    }
}
