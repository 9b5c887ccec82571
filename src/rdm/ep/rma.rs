//! RMA and atomics: `fi_read`/`fi_write` (split into pieces above the device's largest message) and the 64-bit atomics, posted straight on the peer's QP.

use super::*;

impl RdmEp {
    /// `fi_read*`, `fi_write*`, `fi_writedata`, `fi_inject_write*`.
    pub fn rma(&self, r: RmaReq<'_>) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.ready()?;
        let Some((_, tx_sel)) = &g.tx_cq else {
            return crate::fail!(FiError::NOCQ, "RMA: no transmit CQ bound");
        };
        let tx_sel = *tx_sel;
        if self.ctx.caps & FI_RMA == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "RMA: the endpoint was opened without FI_RMA");
        }
        let Ok(rkey) = u32::try_from(r.rkey) else {
            return crate::fail!(FiError::INVAL, "RMA: key {:#x} is not a verbs key", r.rkey);
        };
        if r.iov.len() > self.ctx.tx_iov_limit {
            return crate::fail!(FiError::INVAL, "RMA: {} iovs exceed iov_limit {}", r.iov.len(), self.ctx.tx_iov_limit);
        }
        let len = Iov::total(r.iov);
        let geo = g.net.as_ref().expect("ready").geo;
        if len > self.ctx.max_msg {
            return crate::fail!(FiError::MSGSIZE, "RMA: {len} bytes exceed max_msg_size {}", self.ctx.max_msg);
        }
        let inject = r.flags & FI_INJECT != 0 || r.no_completion;
        if inject && (r.read || len > self.ctx.inject_size.min(geo.stride)) {
            return crate::fail!(FiError::MSGSIZE, "inject write of {len} bytes exceeds inject_size {}", self.ctx.inject_size);
        }
        let mr_local = g.net.as_ref().expect("ready").mr_local;
        if !inject && !r.descs_ok && len > 0 && mr_local {
            return crate::fail!(FiError::INVAL, "RMA: missing memory descriptor for the local buffer (FI_MR_LOCAL)");
        }
        if g.tx_count >= self.ctx.tx_size {
            g.progress(&self.ctx);
            if g.tx_count >= self.ctx.tx_size {
                return Err(FiError::AGAIN);
            }
        }
        let addr = g.lookup(r.dest)?;
        // Local buffers without descriptors (no FI_MR_LOCAL): registered
        // through the cache until the operation completes (a read's land
        // there: local write; a write's are only read by the device).
        let keyed;
        let (r, pin) = if !inject && !r.descs_ok && len > 0 {
            let (iov, pin) = g.pin_iovs(r.iov, if r.read { access::LOCAL_WRITE } else { 0 })?;
            keyed = iov;
            (RmaReq { iov: &keyed, ..r }, pin)
        } else {
            (r, 0)
        };
        let silent = r.no_completion || (tx_sel && r.flags & FI_COMPLETION == 0);
        let done = TxDone { context: r.context, flags: FI_RMA | if r.read { FI_READ } else { FI_WRITE }, silent, pin };
        if !inject && len > geo.max_rma {
            // Longer than the device's largest message: in pieces.
            if let Err(e) = g.rma_split(&addr, &r, rkey, len, done) {
                g.unpin(pin);
                return Err(e);
            }
            let ready = g.net.as_ref().and_then(|n| n.peers.get(&addr)).is_some_and(|p| p.ready);
            g.tx_count += 1;
            g.post_or_progress(&self.ctx, &addr, ready);
            return Ok(());
        }
        if !inject && r.data.is_none() {
            // The common case: connected, nothing queued ahead, a send-queue
            // entry free: onto the wire from the application's buffers.
            let op = if r.read { SendOp::Read { raddr: r.raddr, rkey } } else { SendOp::Write { raddr: r.raddr, rkey } };
            if g.op_direct(&addr, op, r.iov, done) {
                return Ok(());
            }
        }
        let owned = if inject {
            Some(crate::verbs::mem::gather(r.iov, len))
        } else {
            None
        };
        let net = g.net.as_mut().expect("ready");
        let peer = match net.peer_or_connect(addr) {
            Ok(p) => p,
            Err(e) => {
                g.unpin(pin);
                return Err(e);
            }
        };
        match (r.read, r.data, owned) {
            (true, _, _) => peer.rma.push_back(RmaOp::Read { local: r.iov.to_vec(), raddr: r.raddr, rkey, done }),
            (false, Some(d), owned) => {
                let payload = match owned {
                    Some(v) => Payload::Owned(v),
                    None => Payload::User(iov_vec(r.iov)),
                };
                peer.push(Out::WriteData { payload, raddr: r.raddr, rkey, imm: d as u32, done });
            }
            (false, None, Some(v)) => peer.rma.push_back(RmaOp::WriteInline { data: v, raddr: r.raddr, rkey, done }),
            (false, None, None) => peer.rma.push_back(RmaOp::Write { local: r.iov.to_vec(), raddr: r.raddr, rkey, done }),
        }
        let ready = peer.ready;
        g.tx_count += 1;
        g.post_or_progress(&self.ctx, &addr, ready);
        Ok(())
    }

    /// 64-bit fetch-and-add / compare-and-swap by fi_addr.
    pub fn atomic(&self, r: AtomicReq) -> FiResult<()> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        g.ready()?;
        let Some((_, tx_sel)) = &g.tx_cq else {
            return crate::fail!(FiError::NOCQ, "atomic: no transmit CQ bound");
        };
        let tx_sel = *tx_sel;
        if self.ctx.caps & FI_ATOMIC == 0 {
            return crate::fail!(FiError::OPNOTSUPP, "atomic: the endpoint was opened without FI_ATOMIC");
        }
        let Ok(rkey) = u32::try_from(r.rkey) else {
            return crate::fail!(FiError::INVAL, "atomic: key {:#x} is not a verbs key", r.rkey);
        };
        if r.raddr % 8 != 0 {
            return crate::fail!(FiError::INVAL, "atomic: remote address {:#x} is not 8-byte aligned", r.raddr);
        }
        if g.tx_count >= self.ctx.tx_size {
            g.progress(&self.ctx);
            if g.tx_count >= self.ctx.tx_size {
                return Err(FiError::AGAIN);
            }
        }
        let addr = g.lookup(r.dest)?;
        // A result buffer without a descriptor (no FI_MR_LOCAL): registered
        // through the cache until the atomic completes.
        let mut pin = 0;
        let mut result = r.result;
        if let Some(local) = r.result.filter(|_| !r.result_keyed) {
            if g.net.as_ref().expect("ready").mr_local {
                return crate::fail!(FiError::INVAL, "atomic: the result buffer needs a memory descriptor (FI_MR_LOCAL)");
            }
            let (iov, id) = g.pin_iovs(&[local], access::LOCAL_WRITE)?;
            result = Some(iov[0]);
            pin = id;
        }
        let silent = r.no_completion || (tx_sel && r.flags & FI_COMPLETION == 0);
        let fetch = if result.is_some() { FI_READ } else { FI_WRITE };
        let done = TxDone { context: r.context, flags: FI_ATOMIC | fetch, silent, pin };
        let op = match (r.op, result) {
            (AtomicOp::FetchAdd(add), Some(local)) => RmaOp::FetchAdd { local, raddr: r.raddr, rkey, add, done },
            (AtomicOp::FetchAdd(add), None) => RmaOp::AtomicAdd { raddr: r.raddr, rkey, add, done },
            (AtomicOp::CompSwap { compare, swap }, Some(local)) => RmaOp::CompSwap { local, raddr: r.raddr, rkey, compare, swap, done },
            (AtomicOp::CompSwap { .. }, None) => {
                return crate::fail!(FiError::INVAL, "compare atomic: a result buffer is required")
            }
        };
        // A fetching atomic lands in the application's result buffer: it can
        // go straight onto the wire (a non-fetching add needs a send slot
        // for the old value, and takes the queue).
        if let Some((sop, local)) = op.wire() {
            if g.op_direct(&addr, sop, local, done) {
                return Ok(());
            }
        }
        let net = g.net.as_mut().expect("ready");
        let peer = match net.peer_or_connect(addr) {
            Ok(p) => p,
            Err(e) => {
                g.unpin(pin);
                return Err(e);
            }
        };
        peer.rma.push_back(op);
        let ready = peer.ready;
        g.tx_count += 1;
        g.post_or_progress(&self.ctx, &addr, ready);
        Ok(())
    }
}

impl Inner {
    /// Registers the buffers `iov` through the domain's cache (each
    /// non-empty one with verbs `acc`): the same buffers under the keys
    /// made, and the id (`TxDone::pin`) under which the registrations wait
    /// in `Net::pins` for the operation to complete.
    pub(super) fn pin_iovs(&mut self, iov: &[Iov], acc: i32) -> FiResult<(IovVec, u32)> {
        let net = self.net.as_mut().expect("ready");
        let mut out = IovVec::with_capacity(iov.len());
        let mut pins = Vec::with_capacity(iov.len());
        for v in iov {
            if v.is_empty() {
                out.push(*v);
                continue;
            }
            match net.mrc.acquire(v.addr(), v.len() as usize, acc) {
                Ok(p) => {
                    out.push(v.with_lkey(p.lkey));
                    pins.push(p);
                }
                Err(e) => {
                    return crate::fail!(FiError::from_errno(e), "cannot register {} bytes at {:#x}: {}", v.len(), v.addr(), ioerr(e))
                }
            }
        }
        net.next_pin = net.next_pin.wrapping_add(1).max(1);
        while net.pins.contains_key(&net.next_pin) {
            net.next_pin = net.next_pin.wrapping_add(1).max(1);
        }
        let id = net.next_pin;
        net.pins.insert(id, pins);
        Ok((out, id))
    }

    /// Releases the registrations of a finished operation (`TxDone::pin`).
    pub(super) fn unpin(&mut self, id: u32) {
        if id == 0 {
            return;
        }
        if let Some(net) = self.net.as_mut() {
            drop(net.pins.remove(&id));
        }
    }

    /// Queues an RMA operation longer than the device's largest message
    /// (`Geo::max_rma`) as pieces of `Geo::max_chunk` bytes (split again at
    /// the local iovs' bounds), posted as rendezvous reads are: at most
    /// `Geo::reads_out` in flight per connection. One completion when all
    /// are done. `fi_writedata`: the last piece carries the data, as an
    /// RDMA WRITE with immediate data queued behind the others in the
    /// peer's message queue (which waits until they are posted: the QP
    /// then delivers the data first).
    pub(super) fn rma_split(&mut self, addr: &SocketAddr, r: &RmaReq<'_>, rkey: u32, len: usize, done: TxDone) -> FiResult<()> {
        let net = self.net.as_mut().expect("ready");
        let chunk = net.geo.max_chunk;
        let id = net.next_read;
        net.next_read += 1;
        let kind = if r.read { PieceKind::RmaRead } else { PieceKind::RmaWrite };
        let mut pieces = Vec::with_capacity(len.div_ceil(chunk) + r.iov.len());
        let mut tail = None;
        let mut off = 0usize;
        while off < len {
            let n = chunk.min(len - off);
            let raddr = r.raddr.wrapping_add(off as u64);
            let mut locals = IovVec::new();
            iov_range(r.iov, off, n, |v| locals.push(v));
            match r.data {
                Some(d) if !r.read && off + n == len => {
                    tail = Some(Out::WriteData { payload: Payload::User(locals), raddr, rkey, imm: d as u32, done });
                }
                _ => {
                    let mut ra = raddr;
                    for local in locals {
                        pieces.push(ReadPiece { read_id: id, kind, local, raddr: ra, rkey });
                        ra = ra.wrapping_add(local.len() as u64);
                    }
                }
            }
            off += n;
        }
        tracing::debug!("rdm: RMA of {len} bytes to {addr} in {} pieces", pieces.len() + usize::from(tail.is_some()));
        let reports = tail.is_none();
        let left = pieces.len();
        let peer = net.peer_or_connect(*addr)?;
        peer.push_pieces(pieces);
        if let Some(t) = tail {
            peer.push(t);
        }
        net.splits.insert(id, SplitRma { done, left, err: None, reports });
        net.mark(addr);
        Ok(())
    }

    /// A piece (`ReadPiece`) completed, or failed with its connection: of a
    /// rendezvous read (whose receive reports `FI_EIO` on any failure), or
    /// of a split RMA (which reports the first error, once, after all).
    pub(super) fn piece_done(&mut self, id: u64, err: Option<i32>) {
        let Some(net) = &mut self.net else { return };
        if net.reads.contains_key(&id) {
            self.read_piece_done(id, err.map(|_| FI_EIO));
            return;
        }
        let Some(s) = net.splits.get_mut(&id) else { return };
        s.left = s.left.saturating_sub(1);
        if err.is_some() && s.err.is_none() {
            s.err = err;
        }
        if s.left > 0 {
            return;
        }
        let Some(s) = net.splits.remove(&id) else { return };
        if s.reports {
            self.tx_done(s.done, s.err);
        }
    }

    pub(super) fn read_piece_done(&mut self, read_id: u64, err: Option<i32>) {
        let Some(net) = &mut self.net else { return };
        let Some(op) = net.reads.get_mut(&read_id) else { return };
        op.left = op.left.saturating_sub(1);
        if err.is_some() && op.err.is_none() {
            op.err = err;
        }
        if op.left == 0 {
            self.finish_read(read_id);
        }
    }
}
