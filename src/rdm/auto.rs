//! `FI_PROGRESS_AUTO` for RDM endpoints: a thread per enabled endpoint that
//! makes the progress the application would otherwise make inside its calls
//! (connections, rendezvous reads and answers, credit returns, completions).
//! It sleeps on the endpoint's event fd (internal completion channel and
//! rdma-cm channel) after arming it, exactly as `fi_trywait` does, so an idle
//! endpoint costs no CPU; it takes the endpoint's lock only while it works.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use crate::progress::Progress;
use crate::error::{FiError, FiResult};
use crate::sys::{Epoll, EventFd};

/// The running thread; `stop` (or drop) ends and joins it.
pub struct AutoProgress {
    stop: Arc<(AtomicBool, EventFd)>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AutoProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoProgress").finish()
    }
}

impl AutoProgress {
    /// Starts progressing `ep`, sleeping on its event fd `fd`.
    pub fn spawn(ep: Weak<dyn Progress>, fd: RawFd) -> FiResult<AutoProgress> {
        let epoll = Epoll::new().map_err(FiError::from_errno)?;
        let ev = EventFd::new().map_err(FiError::from_errno)?;
        epoll.add(ev.raw(), 0).map_err(FiError::from_errno)?;
        epoll.add(fd, 1).map_err(FiError::from_errno)?;
        let stop = Arc::new((AtomicBool::new(false), ev));
        let st = stop.clone();
        let handle = std::thread::Builder::new()
            .name("rsverbs-rdm-progress".into())
            .spawn(move || run(ep, epoll, st))
            .map_err(|e| {
                tracing::warn!("rdm: cannot start the progress thread: {e}");
                FiError::NOMEM
            })?;
        Ok(AutoProgress { stop, handle: Some(handle) })
    }

    pub fn stop(&mut self) {
        self.stop.0.store(true, Ordering::SeqCst);
        self.stop.1.signal();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for AutoProgress {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(ep: Weak<dyn Progress>, epoll: Epoll, stop: Arc<(AtomicBool, EventFd)>) {
    while !stop.0.load(Ordering::SeqCst) {
        let Some(p) = ep.upgrade() else { return };
        p.progress();
        let armed = p.arm();
        drop(p);
        if armed {
            // The endpoint's fd wakes us for its traffic; the time-out only
            // bounds how long a closed endpoint's thread lingers.
            if epoll.wait(1000).is_err() {
                return;
            }
        }
    }
}
