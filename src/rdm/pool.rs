//! The registered memory of an RDM endpoint: the receive pool (bounce
//! buffers posted on the endpoint's shared receive queue, shared by every
//! connection, accounted by the credit bank of `srq.rs`) and the send-slot
//! pool (staging buffers for outgoing protocol messages, shared by every
//! connection too). Neither grows with the number of peers (the receive pool
//! grows only when more peers than its floors allow connect: see
//! `srq::Bank::shortfall`).

use std::net::SocketAddr;
use std::sync::Arc;

use super::peer::TxDone;
use super::srq::Bank;
use crate::verbs::mem::RegBuf;
use crate::verbs::{access, Errno, Iov, Pd, Srq};

/// Bounce buffers on a shared receive queue.
pub struct RecvPool {
    pub srq: Arc<Srq>,
    chunks: Vec<Arc<RegBuf>>,
    /// Buffer index -> (chunk, byte offset in it).
    index: Vec<(u32, usize)>,
    stride: usize,
    pub bank: Bank<SocketAddr>,
}

impl RecvPool {
    /// Creates the SRQ (room for `cap` requests) and posts `size` buffers of
    /// `stride` bytes; `wr_id(i)` is the work-request id of buffer `i`.
    pub fn new(
        pd: &Arc<Pd>,
        size: u32,
        cap: u32,
        stride: usize,
        max_per_peer: u16,
        wr_id: impl Fn(u32) -> u64,
    ) -> Result<RecvPool, Errno> {
        let srq = Arc::new(pd.create_srq(cap.max(size), 1)?);
        let mut p = RecvPool { srq, chunks: Vec::new(), index: Vec::new(), stride, bank: Bank::shared(0, max_per_peer) };
        p.add(pd, size, &wr_id)?;
        Ok(p)
    }

    /// Adds `n` buffers for the peers the bank finds stuck ([`Bank::feed_stuck`]).
    pub fn grow_for_stuck(&mut self, pd: &Arc<Pd>, n: u32, wr_id: impl Fn(u32) -> u64) -> Result<(), Errno> {
        self.post_more(pd, n, &wr_id)?;
        self.bank.feed_stuck(n);
        Ok(())
    }

    /// `n` more buffers kept free (not given to the quotas or the waiting
    /// peers): room for the floors of connections waiting to start.
    pub fn grow_free(&mut self, pd: &Arc<Pd>, n: u32, wr_id: impl Fn(u32) -> u64) -> Result<(), Errno> {
        self.post_more(pd, n, &wr_id)?;
        self.bank.grow_free(n);
        Ok(())
    }

    fn add(&mut self, pd: &Arc<Pd>, n: u32, wr_id: &impl Fn(u32) -> u64) -> Result<(), Errno> {
        self.post_more(pd, n, wr_id)?;
        self.bank.grow(n);
        Ok(())
    }

    /// Registers and posts `n` more buffers (the bank is told by the caller).
    fn post_more(&mut self, pd: &Arc<Pd>, n: u32, wr_id: &impl Fn(u32) -> u64) -> Result<(), Errno> {
        if self.index.len() + n as usize > self.srq.max_wr as usize {
            return Err(libc::ENOSPC);
        }
        let buf = Arc::new(RegBuf::new(pd, n as usize * self.stride, access::LOCAL_WRITE)?);
        let chunk = self.chunks.len() as u32;
        let first = self.index.len() as u32;
        for j in 0..n as usize {
            self.index.push((chunk, j * self.stride));
        }
        self.chunks.push(buf);
        for i in first..first + n {
            self.post(i, wr_id(i))?;
        }
        Ok(())
    }

    /// Adds `n` buffers (the bank's shortfall).
    pub fn grow(&mut self, pd: &Arc<Pd>, n: u32, wr_id: impl Fn(u32) -> u64) -> Result<(), Errno> {
        self.add(pd, n, &wr_id)
    }

    fn iov(&self, i: u32) -> Option<Iov> {
        let (c, off) = *self.index.get(i as usize)?;
        Some(self.chunks[c as usize].iov(off, self.stride))
    }

    /// The registered chunk holding buffer `i`, and the buffer's offset in it.
    pub fn chunk_of(&self, i: u32) -> Option<(Arc<RegBuf>, usize)> {
        let (c, off) = *self.index.get(i as usize)?;
        Some((self.chunks[c as usize].clone(), off))
    }

    /// Posts buffer `i` (again).
    pub fn post(&self, i: u32, wr_id: u64) -> Result<(), Errno> {
        let Some(iov) = self.iov(i) else { return Err(libc::EINVAL) };
        self.srq.post_recv(wr_id, &[iov])
    }

    /// Posts the buffers of `items` (`idx` of each) again, chained
    /// (`Srq::post_recvs`, up to `RECV_CHAIN` a call). Returns how many of
    /// them, from the front, were posted, and the error that stopped the rest.
    pub fn post_many<T>(&self, items: &[T], idx: impl Fn(&T) -> u32, wr_id: impl Fn(u32) -> u64) -> (usize, Option<Errno>) {
        let mut done = 0;
        for chunk in items.chunks(crate::verbs::RECV_CHAIN) {
            // A buffer not of the pool (cannot happen) stops the chain there.
            let mut valid = 0;
            let reqs = chunk.iter().map_while(|t| {
                let i = idx(t);
                let iov = self.iov(i)?;
                valid += 1;
                Some((wr_id(i), iov))
            });
            let (n, e) = self.srq.post_recvs(reqs);
            done += n;
            if e.is_some() || valid < chunk.len() {
                return (done, e.or(Some(libc::EINVAL)));
            }
        }
        (done, None)
    }

    /// The first `n` bytes of buffer `i` (after its completion, before its repost).
    pub fn slice(&self, i: u32, n: usize) -> Option<&[u8]> {
        let (c, off) = *self.index.get(i as usize)?;
        Some(self.chunks[c as usize].slice(off, n.min(self.stride)))
    }

    pub fn buffers(&self) -> usize {
        self.index.len()
    }

    /// Registered bytes.
    pub fn bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    /// Keep-alive handles for QPs attached to the SRQ.
    pub fn keep(&self) -> Vec<Arc<dyn Send + Sync>> {
        vec![self.srq.clone()]
    }
}

/// What a send slot is used for.
#[derive(Debug, Clone, Copy)]
struct Slot {
    conn: u32,
    /// The completion owed when the request using the slot completes.
    done: Option<TxDone>,
    /// Unsignaled sends of the connection that the request's completion
    /// retires (`peer::Unsignaled::cover`).
    covers: u32,
}

/// Send slots: one registered region, shared by all connections of the endpoint.
pub struct SendPool {
    pub buf: Arc<RegBuf>,
    stride: usize,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
}

impl SendPool {
    pub fn new(pd: &Arc<Pd>, n: usize, stride: usize) -> Result<SendPool, Errno> {
        let buf = Arc::new(RegBuf::new(pd, n * stride, access::LOCAL_WRITE)?);
        Ok(SendPool { buf, stride, slots: vec![None; n], free: (0..n as u32).rev().collect() })
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    #[inline]
    pub fn has_free(&self) -> bool {
        !self.free.is_empty()
    }

    /// Byte offset of slot `s` in `buf`.
    #[inline]
    pub fn off(&self, s: u32) -> usize {
        s as usize * self.stride
    }

    /// Takes a free slot for connection `conn`.
    #[inline]
    pub fn take(&mut self, conn: u32) -> Option<u32> {
        let s = self.free.pop()?;
        self.slots[s as usize] = Some(Slot { conn, done: None, covers: 0 });
        Some(s)
    }

    /// Gives back a slot taken but not posted.
    #[inline]
    pub fn put_back(&mut self, s: u32) {
        if self.slots.get_mut(s as usize).and_then(|x| x.take()).is_some() {
            self.free.push(s);
        }
    }

    /// The completion the slot's request owes.
    #[inline]
    pub fn set_done(&mut self, s: u32, done: Option<TxDone>) {
        if let Some(Some(x)) = self.slots.get_mut(s as usize) {
            x.done = done;
        }
    }

    /// The signaled request on slot `s` retires `n` unsignaled sends when it completes.
    #[inline]
    pub fn set_covers(&mut self, s: u32, n: u32) {
        if let Some(Some(x)) = self.slots.get_mut(s as usize) {
            x.covers = n;
        }
    }

    /// The request on slot `s` of connection `conn` completed: frees the slot,
    /// returns what it owed and how many unsignaled sends it retires. None
    /// when the slot is not (any more) that connection's.
    pub fn complete(&mut self, s: u32, conn: u32) -> Option<(Option<TxDone>, u32)> {
        let x = self.slots.get_mut(s as usize)?;
        match x {
            Some(sl) if sl.conn == conn => {
                let d = (sl.done, sl.covers);
                *x = None;
                self.free.push(s);
                Some(d)
            }
            _ => None,
        }
    }

    /// A connection failed: the completions its slots owe (to fail now). The
    /// slots stay taken until `release_conn` (the device may still use them).
    pub fn fail_conn(&mut self, conn: u32) -> Vec<TxDone> {
        self.slots.iter_mut().flatten().filter(|x| x.conn == conn).filter_map(|x| x.done.take()).collect()
    }

    /// The connection's QP is gone: its slots are free again.
    pub fn release_conn(&mut self, conn: u32) {
        for (i, x) in self.slots.iter_mut().enumerate() {
            if x.is_some_and(|sl| sl.conn == conn) {
                *x = None;
                self.free.push(i as u32);
            }
        }
    }

    pub fn bytes(&self) -> usize {
        self.buf.len()
    }
}
