//! Waiting on a CQ: `fi_trywait`, `fi_cq_sread`, `fi_cq_signal`, and the
//! CQ as a progress source and a member of wait sets.

use super::*;

impl Cq {
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
