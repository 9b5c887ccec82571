//! Work-request ids: what a posted request carries for its completion (the
//! operation's kind, the application's context, whether it reports), and the
//! per-QP credit counters that keep a verbs CQ from overrunning.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::cntr::CntrSet;
use crate::fi::consts::*;

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
    pub(super) fn from_bits(b: u64) -> Option<OpKind> {
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
pub(super) const CTX_MASK: u64 = (1 << CTX_BITS) - 1;
pub(super) const KIND_SHIFT: u32 = 57;
pub(super) const KIND_MASK: u64 = 0xf << KIND_SHIFT;
pub(super) const INDIRECT: u64 = 1 << 61;
pub(super) const SILENT: u64 = 1 << 62;
pub(super) const BATCH: u64 = 1 << 63;

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
    pub(super) cntrs: CntrSet,
    /// `cntrs` has a counter: one load on every completion, not four.
    pub(super) counted: bool,
    /// The receive slots of the shared receive context the QP receives from
    /// (`fi_ep_bind(ep, srx)`): receive completions give their credit there.
    pub srq: Option<Arc<QpCounters>>,
    /// Unsignalled requests posted since the last signalled inject absorbed them.
    unsig: AtomicUsize,
    pub(super) unsig_batch: usize,
    /// The verbs status of a failed piece of a split RMA (`Cq::piece_wr_id`),
    /// 0 if none: the operation's last request, flushed behind it, reports it.
    pub(super) piece_err: std::sync::atomic::AtomicU32,
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
    pub(super) fn give_tx_n(&self, n: usize) {
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
