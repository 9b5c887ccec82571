//! DGRAM endpoints over one UD queue pair.
//!
//! The endpoint owns its verbs CQ (with a completion channel) and makes its
//! completions in software: the CQs and counters bound to it call its
//! `progress` at every read (as RDM endpoints), which polls the verbs CQ and
//! pushes the translated entries. That is where receive completions get
//! their length, the sender's `fi_addr` (`FI_SOURCE`, looked up from the GRH
//! and the source QP) and immediate data.
//!
//! Receives: the first scatter entry is always 40 bytes of the endpoint's
//! own registered memory (a slot per receive), where the device lands the
//! GRH; the application's buffers follow, after their prefix in
//! `FI_MSG_PREFIX` mode (whose bytes rsverbs leaves alone). Sends go from
//! the application's buffers (after their prefix in that mode), or — for
//! injects and buffers without a descriptor — from a slot of registered
//! memory they are copied to.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::av::DgramAv;
use super::{ns, UdName, MSG_PREFIX_SIZE, QKEY};
use crate::cntr::{Cntr, CntrBinds, CntrSet};
use crate::cq::{status_to_err, Completion, Cq, CqErr};
use crate::progress::Progress;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::fabric::Hold;
use crate::fi::consts::*;
use crate::info::Info;
use crate::verbs::mem::{sub_iov, RegBuf};
use crate::verbs::ud::{UdQp, GRH_LEN};
use crate::verbs::{self, access, send_flags, wc_opcode, wc_status, CompChannel, Iov, QpCaps};

/// Bytes of a receive's GRH slot (40, rounded up).
const GRH_SLOT: usize = 64;
const RX_BIT: u64 = 1 << 32;

/// One send the application posted (`fi_send*`, `fi_inject*`).
pub struct SendReq<'a> {
    pub iov: &'a [Iov],
    pub descs_ok: bool,
    pub dest: u64,
    pub data: Option<u64>,
    pub context: u64,
    pub flags: u64,
    pub inject: bool,
}

/// One receive the application posted.
pub struct RecvReq<'a> {
    pub iov: &'a [Iov],
    pub descs_ok: bool,
    pub context: u64,
    pub flags: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Op {
    ctx: u64,
    /// Report a successful completion.
    report: bool,
    /// Receives: the first byte of the application's buffer.
    buf: u64,
}

/// Work requests in flight, by slot (the slot is the work-request id, and
/// for sends also the staging slot).
#[derive(Debug)]
struct Slots {
    ops: Vec<Option<Op>>,
    free: Vec<u32>,
}

impl Slots {
    fn new(n: usize) -> Slots {
        Slots { ops: vec![None; n], free: (0..n as u32).rev().collect() }
    }
    fn take(&mut self) -> Option<u32> {
        self.free.pop()
    }
    fn put(&mut self, i: u32) {
        self.ops[i as usize] = None;
        self.free.push(i);
    }
}

#[derive(Default)]
struct Binds {
    tx_cq: Option<(Hold<Cq>, bool)>,
    rx_cq: Option<(Hold<Cq>, bool)>,
    av: Option<Hold<DgramAv>>,
    cntr_binds: CntrBinds,
    enabled: bool,
    closed: bool,
}

/// What the endpoint uses once enabled.
struct Live {
    tx_cq: Option<(Arc<Cq>, bool)>,
    rx_cq: Option<(Arc<Cq>, bool)>,
    av: Arc<DgramAv>,
    cntrs: CntrSet,
    _ns: Option<ns::Responder>,
}

pub struct DgramEp {
    pub domain: Hold<Domain>,
    pub caps: u64,
    /// Receive buffers start with a prefix of this many bytes (0 or 40).
    pub prefix: usize,
    pub max_msg: usize,
    pub inject_size: usize,
    tx_iov_limit: usize,
    rx_iov_limit: usize,
    comp: Arc<CompChannel>,
    vcq: Arc<verbs::Cq>,
    qp: UdQp,
    name: Mutex<UdName>,
    tx: Mutex<Slots>,
    rx: Mutex<Slots>,
    /// Staging slots of sends (`max_msg` bytes each), by tx slot.
    stage: RegBuf,
    /// GRH slots of receives, by rx slot.
    grh: RegBuf,
    binds: Mutex<Binds>,
    live: OnceLock<Live>,
    poll: Mutex<()>,
    tx_flags: AtomicU64,
    rx_flags: AtomicU64,
    self_ref: OnceLock<Weak<dyn Progress>>,
}

impl std::fmt::Debug for DgramEp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DgramEp").field("qpn", &self.qp.qp_num()).finish()
    }
}

impl DgramEp {
    /// `fi_endpoint` for an `FI_EP_DGRAM` info: the UD QP exists (and has its
    /// address) from here on.
    pub fn open(domain: &Arc<Domain>, info: &Info) -> FiResult<Arc<DgramEp>> {
        if info.handle.is_some() || info.pep.is_some() {
            return crate::fail!(FiError::INVAL, "fi_endpoint: a DGRAM endpoint takes no connection request or passive endpoint (info->handle)");
        }
        if info.addr_format != FI_ADDR_IB_UD && info.addr_format != FI_FORMAT_UNSPEC {
            return crate::fail!(
                FiError::INVAL,
                "fi_endpoint: ep_type FI_EP_DGRAM with address format {}: not a DGRAM info (those have FI_ADDR_IB_UD)",
                info.addr_format
            );
        }
        let dev = &domain.dev;
        let port = dev.query_port(1).map_err(FiError::from_errno)?;
        let mtu = verbs::mtu_bytes(port.active_mtu).max(1);
        let max_msg = if info.ep.max_msg_size > 0 { info.ep.max_msg_size.min(mtu) } else { mtu };
        let prefix = if (info.mode | info.rx.mode) & FI_MSG_PREFIX != 0 || info.ep.msg_prefix_size > 0 { MSG_PREFIX_SIZE } else { 0 };
        let cfg = crate::config::get();
        let max_wr = domain.attr.max_qp_wr.max(1) as usize;
        let max_sge = domain.attr.max_sge.max(2) as usize;
        let tx_size = (if info.tx.size > 0 { info.tx.size } else { cfg.tx_size }).clamp(1, max_wr);
        let rx_size = (if info.rx.size > 0 { info.rx.size } else { cfg.rx_size }).clamp(1, max_wr);
        let tx_iov = (if info.tx.iov_limit > 0 { info.tx.iov_limit } else { cfg.tx_iov_limit }).clamp(1, max_sge);
        let rx_iov = (if info.rx.iov_limit > 0 { info.rx.iov_limit } else { cfg.rx_iov_limit }).clamp(1, max_sge - 1);
        let inject_size = if info.tx.inject_size > 0 { info.tx.inject_size.min(max_msg) } else { max_msg };

        let comp = match dev.create_comp_channel() {
            Ok(c) => Arc::new(c),
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_endpoint(dgram): ibv_create_comp_channel failed: errno {e}"),
        };
        let vcq = match dev.create_cq((tx_size + rx_size) as i32, Some(comp.clone())) {
            Ok(c) => Arc::new(c),
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_endpoint(dgram): ibv_create_cq({}) failed: errno {e}", tx_size + rx_size),
        };
        let caps = QpCaps {
            max_send_wr: tx_size as u32,
            max_recv_wr: rx_size as u32,
            max_send_sge: tx_iov as u32,
            max_recv_sge: (rx_iov + 1) as u32,
            max_inline: 0,
        };
        let qp = match domain.pd.create_ud_qp(&vcq, &vcq, caps, 1, QKEY) {
            Ok(q) => q,
            Err(e) => return crate::fail!(FiError::from_errno(e), "fi_endpoint(dgram): creating the UD QP failed: errno {e}"),
        };
        let stage = RegBuf::new(&domain.pd, tx_size * max_msg, access::LOCAL_WRITE)
.map_err(FiError::from_errno)?;
        let grh = RegBuf::new(&domain.pd, rx_size * GRH_SLOT, access::LOCAL_WRITE).map_err(FiError::from_errno)?;
        let mut name = info.src_ud.unwrap_or_else(|| super::info::local_name(dev, super::info::first_ip(dev), 0));
        if name.gid == [0; 16] {
            name.gid = super::av::domain_gid(domain);
        }
        name.qpn = qp.qp_num();
        name.lid = port.lid;
        tracing::info!("dgram endpoint: {} (prefix {prefix}, max_msg {max_msg}, tx {tx_size}, rx {rx_size})", super::straddr(&name));
        let ep = Arc::new(DgramEp {
            domain: Hold::new(domain),
            caps: if info.caps != 0 { info.caps } else { super::info::DGRAM_CAPS },
            prefix,
            max_msg,
            inject_size,
            tx_iov_limit: tx_iov,
            rx_iov_limit: rx_iov,
            comp,
            vcq,
            qp,
            name: Mutex::new(name),
            tx: Mutex::new(Slots::new(tx_size)),
            rx: Mutex::new(Slots::new(rx_size)),
            stage,
            grh,
            binds: Mutex::new(Binds::default()),
            live: OnceLock::new(),
            poll: Mutex::new(()),
            tx_flags: AtomicU64::new(info.tx.op_flags),
            rx_flags: AtomicU64::new(info.rx.op_flags),
            self_ref: OnceLock::new(),
        });
        let w: Weak<dyn Progress> = Arc::downgrade(&ep) as Weak<dyn Progress>;
        let _ = ep.self_ref.set(w);
        Ok(ep)
    }

    pub fn tx_op_flags(&self) -> u64 {
        self.tx_flags.load(Ordering::Relaxed)
    }
    pub fn rx_op_flags(&self) -> u64 {
        self.rx_flags.load(Ordering::Relaxed)
    }
    pub fn set_tx_op_flags(&self, f: u64) {
        self.tx_flags.store(f, Ordering::Relaxed)
    }
    pub fn set_rx_op_flags(&self, f: u64) {
        self.rx_flags.store(f, Ordering::Relaxed)
    }

    pub fn bind_cq(&self, cq: &Arc<Cq>, flags: u64) -> FiResult<()> {
        let mut g = self.binds.lock();
        if g.enabled || g.closed {
            return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
        }
        let g = &mut *g;
        crate::cq::bind_cq(self.domain.get(), &mut g.tx_cq, &mut g.rx_cq, cq, flags)
    }

    pub fn bind_cntr(&self, cntr: &Arc<Cntr>, flags: u64) -> FiResult<()> {
        let mut g = self.binds.lock();
        if g.enabled || g.closed {
            return crate::fail!(FiError::OPBADSTATE, "fi_ep_bind: endpoint already enabled");
        }
        if !Arc::ptr_eq(cntr.domain.get(), self.domain.get()) {
            return crate::fail!(FiError::DOMAIN, "fi_ep_bind: counter belongs to another domain");
        }
        if flags & (FI_READ | FI_WRITE) != 0 {
            return crate::fail!(FiError::OPNOTSUPP, "fi_ep_bind: DGRAM endpoints have no RMA to count (FI_READ/FI_WRITE)");
        }
        g.cntr_binds.bind(cntr, flags)
    }

    pub fn bind_av(&self, av: &Arc<DgramAv>, flags: u64) -> FiResult<()> {
        let mut g = self.binds.lock();
        let enabled = g.enabled || g.closed;
        crate::av::bind_av(&mut g.av, enabled, self.domain.get(), av, av.domain.get(), flags)
    }

    /// `fi_enable`: needs an AV and a CQ for each direction (fi_endpoint(3)).
    pub fn enable(&self) -> FiResult<()> {
        let mut g = self.binds.lock();
        if g.closed {
            return crate::fail!(FiError::OPBADSTATE, "fi_enable: endpoint closed");
        }
        if g.enabled {
            return Ok(());
        }
        let Some(av) = g.av.as_ref().map(|a| a.get().clone()) else {
            return crate::fail!(FiError(FI_ENOAV), "fi_enable: a DGRAM endpoint needs an address vector bound");
        };
        if g.tx_cq.is_none() && g.rx_cq.is_none() {
            return crate::fail!(FiError::NOCQ, "fi_enable: no CQ bound");
        }
        let name = *self.name.lock();
        let responder = if name.service != 0 {
            let ip = std::net::Ipv6Addr::from(name.gid).to_ipv4_mapped().map(std::net::IpAddr::V4);
            let bind = std::net::SocketAddr::new(ip.unwrap_or(std::net::IpAddr::from([0u8, 0, 0, 0])), name.service);
            match ns::serve(bind, name) {
                Ok(r) => Some(r),
                Err(_) => {
                    tracing::warn!("fi_enable(dgram): peers cannot resolve this endpoint by service {} (fi_getinfo node/service)", name.service);
                    None
                }
            }
        } else {
            None
        };
        let cq = |c: &Option<(Hold<Cq>, bool)>| c.as_ref().map(|(c, s)| (c.get().clone(), *s));
        let live = Live { tx_cq: cq(&g.tx_cq), rx_cq: cq(&g.rx_cq), av, cntrs: g.cntr_binds.set(), _ns: responder };
        let me: Weak<dyn Progress> = self.self_ref.get().expect("set at open").clone();
        let mut cqs: Vec<Arc<Cq>> = Vec::new();
        for (c, _) in [&live.tx_cq, &live.rx_cq].into_iter().flatten() {
            if !cqs.iter().any(|a| Arc::ptr_eq(a, c)) {
                cqs.push(c.clone());
            }
        }
        let cntrs = live.cntrs.clone();
        let _ = self.live.set(live);
        g.enabled = true;
        drop(g);
        for c in &cqs {
            c.add_progress(me.clone())?;
        }
        for c in cntrs.all() {
            c.add_source(me.clone())?;
        }
        Ok(())
    }

    pub fn close(&self) -> FiResult<()> {
        let mut g = self.binds.lock();
        g.closed = true;
        let me: Weak<dyn Progress> = self.self_ref.get().expect("set at open").clone();
        let fd = Some(self.comp.fd());
        if let Some(l) = self.live.get() {
            for (c, _) in [&l.tx_cq, &l.rx_cq].into_iter().flatten() {
                c.remove_progress(&me, fd);
            }
            for c in l.cntrs.all() {
                c.remove_source(&me, fd);
            }
        }
        let _ = self.qp.to_error();
        g.tx_cq = None;
        g.rx_cq = None;
        g.av = None;
        g.cntr_binds.clear();
        Ok(())
    }

    pub fn getname(&self) -> UdName {
        *self.name.lock()
    }

    /// `fi_setname`: before `fi_enable`, takes the service of `n` (its GID
    /// and QP number must be this endpoint's, or zero).
    pub fn setname(&self, n: &UdName) -> FiResult<()> {
        let g = self.binds.lock();
        if g.enabled {
            return crate::fail!(FiError::OPBADSTATE, "fi_setname: the endpoint is enabled");
        }
        let mut me = self.name.lock();
        if (n.qpn != 0 && n.qpn != me.qpn) || (n.gid != [0; 16] && n.gid != me.gid) {
            return crate::fail!(FiError::INVAL, "fi_setname: {} is not this endpoint's address ({})", super::straddr(n), super::straddr(&me));
        }
        me.service = n.service;
        Ok(())
    }

    fn live(&self) -> FiResult<&Live> {
        match self.live.get() {
            Some(l) if !self.binds.lock().closed => Ok(l),
            _ => crate::fail!(FiError::OPBADSTATE, "dgram endpoint is not enabled"),
        }
    }

    /// `fi_send*`/`fi_inject*`.
    pub fn send(&self, r: SendReq<'_>) -> FiResult<()> {
        let live = self.live()?;
        // FI_MSG_PREFIX: the buffers start with the prefix, which is not sent.
        let mut body: SmallVec<[Iov; 4]> = SmallVec::new();
        let iov: &[Iov] = if self.prefix > 0 {
            let skipped = skip_prefix(r.iov, self.prefix, &mut body);
            if skipped < self.prefix {
                return crate::fail!(FiError::INVAL, "dgram send: buffers shorter than the {}-byte FI_MSG_PREFIX", self.prefix);
            }
            &body
        } else {
            r.iov
        };
        let len = Iov::total(iov);
        if len > self.max_msg {
            return crate::fail!(FiError::MSGSIZE, "dgram send: {len} bytes exceed max_msg_size {} (the port MTU)", self.max_msg);
        }
        if r.inject && len > self.inject_size {
            return crate::fail!(FiError::MSGSIZE, "dgram inject: {len} bytes exceed inject_size {}", self.inject_size);
        }
        if iov.len() > self.tx_iov_limit {
            return crate::fail!(FiError::INVAL, "dgram send: {} iovs exceed the endpoint's iov_limit {}", iov.len(), self.tx_iov_limit);
        }
        let Some(peer) = live.av.peer(r.dest) else {
            return crate::fail!(FiError::NOENT, "dgram send: fi_addr {:#x} is not in the address vector", r.dest);
        };
        let imm = r.data.map(|d| d as u32);
        let report = !r.inject && live.tx_cq.as_ref().map_or(false, |(_, sel)| !sel || r.flags & FI_COMPLETION != 0);
        let mut tx = self.tx.lock();
        let slot = match tx.take() {
            Some(s) => s,
            None => {
                drop(tx);
                self.progress_inner();
                return Err(FiError::AGAIN);
            }
        };
        tx.ops[slot as usize] = Some(Op { ctx: r.context, report, buf: 0 });
        let staged;
        let sges: &[Iov] = if r.inject || !r.descs_ok {
            let off = slot as usize * self.max_msg;
            self.stage.fill_from_iovs(off, iov, len);
            staged = [self.stage.iov(off, len)];
            &staged
        } else {
            iov
        };
        match self.qp.post_send(slot as u64, &peer.ah, peer.name.qpn, imm, sges, send_flags::SIGNALED) {
            Ok(()) => Ok(()),
            Err(e) => {
                tx.put(slot);
                if e == libc::ENOMEM {
                    return Err(FiError::AGAIN);
                }
                crate::fail!(FiError::from_errno(e), "dgram send: ibv_post_send failed: errno {e}")
            }
        }
    }

    /// `fi_recv*`.
    pub fn recv(&self, r: RecvReq<'_>) -> FiResult<()> {
        self.live()?;
        if r.flags & FI_MULTI_RECV != 0 {
            return crate::fail!(FiError::NOSYS, "dgram recv: FI_MULTI_RECV is not supported on DGRAM endpoints");
        }
        if r.iov.len() > self.rx_iov_limit {
            return crate::fail!(FiError::INVAL, "dgram recv: {} iovs exceed the endpoint's iov_limit {}", r.iov.len(), self.rx_iov_limit);
        }
        if !r.descs_ok {
            return crate::fail!(FiError::INVAL, "dgram recv: receive buffers need their memory descriptors (FI_MR_LOCAL)");
        }
        // The application's buffers, past the prefix.
        let mut sges: SmallVec<[Iov; 8]> = SmallVec::new();
        sges.push(self.grh.iov(0, GRH_LEN)); // the slot's, once it is known
        if skip_prefix(r.iov, self.prefix, &mut sges) < self.prefix {
            return crate::fail!(FiError::INVAL, "dgram recv: buffers shorter than the {}-byte FI_MSG_PREFIX", self.prefix);
        }
        let buf = r.iov.first().map_or(0, |v| v.addr());
        let mut rx = self.rx.lock();
        let Some(slot) = rx.take() else {
            return Err(FiError::AGAIN);
        };
        sges[0] = self.grh.iov(slot as usize * GRH_SLOT, GRH_LEN);
        rx.ops[slot as usize] = Some(Op { ctx: r.context, report: true, buf });
        match self.qp.post_recv(RX_BIT | slot as u64, &sges) {
            Ok(()) => Ok(()),
            Err(e) => {
                rx.put(slot);
                if e == libc::ENOMEM {
                    return Err(FiError::AGAIN);
                }
                crate::fail!(FiError::from_errno(e), "dgram recv: ibv_post_recv failed: errno {e}")
            }
        }
    }

    /// The sender of a receive completed in rx slot `slot`: its GID from the
    /// GRH (RoCE v2 over IPv4 puts an IPv4 header in its last 20 bytes), or
    /// its LID without one, and its QP number.
    fn source_key(&self, slot: u32, wc: &verbs::Wc) -> (u128, u16, u32) {
        if wc.has_grh() {
            let g = self.grh.slice(slot as usize * GRH_SLOT, GRH_LEN);
            let gid: [u8; 16] = if g[0] >> 4 == 6 {
                g[8..24].try_into().expect("16 bytes")
            } else if g[20] >> 4 == 4 {
                std::net::Ipv4Addr::new(g[32], g[33], g[34], g[35]).to_ipv6_mapped().octets()
            } else {
                g[8..24].try_into().expect("16 bytes")
            };
            (u128::from_be_bytes(gid), 0, wc.src_qp())
        } else {
            (0, wc.slid(), wc.src_qp())
        }
    }

    /// Moves the device's completions to the bound CQs and counters.
    fn progress_inner(&self) -> bool {
        let Some(_p) = self.poll.try_lock() else { return false };
        let Some(live) = self.live.get() else { return false };
        let mut wcs = verbs::WcBuf::<16>::new();
        let mut any = false;
        loop {
            let polled = match self.vcq.poll_buf(&mut wcs, 16) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!("dgram: ibv_poll_cq failed: errno {e}");
                    return any;
                }
            };
            let n = polled.len();
            for wc in polled {
                any = true;
                self.complete(live, wc);
            }
            if n < 16 {
                return any;
            }
        }
    }

    fn complete(&self, live: &Live, wc: &verbs::Wc) {
        let id = wc.wr_id();
        let ok = wc.status() == wc_status::SUCCESS;
        if id & RX_BIT != 0 {
            let slot = (id & 0xffff_ffff) as u32;
            // The slot (and its GRH, read below) stays taken until `put`.
            let op = self.rx.lock().ops.get(slot as usize).copied().flatten();
            let Some(op) = op else { return };
            let src = if ok && self.caps & FI_SOURCE != 0 { live.av.reverse(self.source_key(slot, wc)) } else { FI_ADDR_NOTAVAIL };
            self.rx.lock().put(slot);
            live.cntrs.count(FI_RECV, ok);
            let Some((cq, _)) = &live.rx_cq else { return };
            let flags = FI_RECV | FI_MSG;
            if ok {
                let byte_len = wc.byte_len() as usize;
                // With a prefix, the length counts it (as libfabric's verbs
                // reports the GRH's bytes); without, the payload.
                let len = if self.prefix > 0 { byte_len } else { byte_len.saturating_sub(GRH_LEN) };
                let mut c = Completion { op_context: op.ctx, flags, len, buf: op.buf, src, ..Default::default() };
                if let Some(imm) = wc.imm_data() {
                    c.data = imm as u64;
                    c.flags |= FI_REMOTE_CQ_DATA;
                }
                debug_assert_ne!(wc.opcode(), wc_opcode::RECV_RDMA_WITH_IMM);
                cq.push_completion(c);
            } else {
                if wc.status() != wc_status::WR_FLUSH_ERR {
                    tracing::info!("dgram: receive failed: {} (vendor error {:#x})", wc.status_str(), wc.vendor_err());
                }
                cq.push_error(CqErr {
                    op_context: op.ctx,
                    flags,
                    buf: op.buf,
                    err: status_to_err(wc.status()),
                    prov_errno: wc.status() as i32,
                    src: FI_ADDR_NOTAVAIL,
                    ..Default::default()
                });
            }
        } else {
            let slot = id as u32;
            let op = {
                let mut tx = self.tx.lock();
                let op = tx.ops.get(slot as usize).copied().flatten();
                if op.is_some() {
                    tx.put(slot);
                }
                op
            };
            let Some(op) = op else { return };
            live.cntrs.count(FI_SEND, ok);
            let Some((cq, _)) = &live.tx_cq else { return };
            let flags = FI_SEND | FI_MSG;
            if ok {
                if op.report {
                    cq.push_completion(Completion { op_context: op.ctx, flags, ..Default::default() });
                }
            } else {
                if wc.status() != wc_status::WR_FLUSH_ERR {
                    tracing::info!("dgram: send failed: {} (vendor error {:#x})", wc.status_str(), wc.vendor_err());
                }
                cq.push_error(CqErr {
                    op_context: op.ctx,
                    flags,
                    err: status_to_err(wc.status()),
                    prov_errno: wc.status() as i32,
                    src: FI_ADDR_NOTAVAIL,
                    ..Default::default()
                });
            }
        }
    }

    /// Free send slots (`fi_tx_size_left`).
    pub fn tx_left(&self) -> usize {
        self.tx.lock().free.len()
    }
    /// Free receive slots (`fi_rx_size_left`).
    pub fn rx_left(&self) -> usize {
        self.rx.lock().free.len()
    }
}

/// Appends to `out` the buffers `iov` without their first `prefix` bytes;
/// returns how many bytes were skipped (less than `prefix`: too short).
fn skip_prefix<A: smallvec::Array<Item = Iov>>(iov: &[Iov], prefix: usize, out: &mut SmallVec<A>) -> usize {
    let mut skip = prefix;
    for v in iov {
        let l = v.len() as usize;
        if skip >= l {
            skip -= l;
            continue;
        }
        out.push(sub_iov(v, skip, l - skip));
        skip = 0;
    }
    prefix - skip
}

impl Progress for DgramEp {
    fn progress(&self) {
        self.progress_inner();
    }

    fn arm(&self) -> bool {
        while self.comp.consume_event(&self.vcq) {}
        if let Err(e) = self.vcq.req_notify() {
            tracing::warn!("dgram: ibv_req_notify_cq failed: errno {e}");
            return false;
        }
        // Completions that arrived before the arm raise no event.
        !self.progress_inner()
    }

    fn wait_fd(&self) -> Option<RawFd> {
        Some(self.comp.fd())
    }
}
