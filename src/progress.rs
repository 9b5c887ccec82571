//! Software progress: the objects that advance inside the calls of the
//! objects they report to (manual progress). A CQ or a counter holds the
//! `Progress` of each RDM endpoint bound to it and calls it from its reads
//! and waits. Its own module, so that the CQ and the counter both depend on
//! it and not on each other.

/// An object whose completions a CQ (or counter) reports but which makes
/// progress in software (RDM endpoints): the CQ calls it at the start of every read that
/// finds no completion queued, so everything advances inside
/// `fi_cq_read`/`fi_cq_sread`/`fi_trywait` (manual progress). MSG endpoints
/// register none, and their CQs behave as before.
pub trait Progress: Send + Sync {
    /// Advances the owner's work (connection events, internal completions,
    /// queued sends), pushing user completions with `push_completion`/`push_error`.
    fn progress(&self);
    /// Arms the owner's event sources before the caller blocks. False when
    /// work is already pending (the caller must not block).
    fn arm(&self) -> bool;
    /// An fd that becomes readable when the owner has work to progress.
    fn wait_fd(&self) -> Option<std::os::fd::RawFd>;
}
