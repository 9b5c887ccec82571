//! Connection management of MSG endpoints: CM private data, connection
//! requests, `fi_connect`/`fi_accept`/`fi_shutdown`, the rdma-cm events of
//! an active endpoint, and passive endpoints (`fi_passive_ep`, `fi_listen`).

use super::*;

/// Encodes application CM data behind its length byte.
/// Data longer than `CM_DATA_SIZE` (`FI_OPT_CM_DATA_SIZE`) is refused with
/// `-FI_EINVAL`, as libfabric's verbs provider does and fabtests' `fi_cm_data`
/// expects (fi_cm(3) speaks of silent truncation; nothing is cut here, so no
/// application data is lost unnoticed).
pub fn cm_data_encode(data: &[u8], what: &str) -> FiResult<Vec<u8>> {
    if data.len() > CM_DATA_SIZE {
        return crate::fail!(
            FiError::INVAL,
            "{what}: {} bytes of CM data, more than FI_OPT_CM_DATA_SIZE ({CM_DATA_SIZE})",
            data.len()
        );
    }
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(data.len() as u8);
    v.extend_from_slice(data);
    Ok(v)
}

/// Decodes CM data received from a peer. Malformed data (a length beyond what
/// arrived) is treated as none: a peer cannot make us read past the buffer.
pub fn cm_data_decode(raw: &[u8]) -> Vec<u8> {
    match raw.split_first() {
        Some((&len, rest)) if (len as usize) <= rest.len() && (len as usize) <= CM_DATA_SIZE => rest[..len as usize].to_vec(),
        Some((&len, rest)) => {
            tracing::warn!("ignoring malformed CM data: header says {len} bytes, {} arrived", rest.len());
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// A connection request, waiting for `fi_endpoint` + `fi_accept` or `fi_reject`.
#[derive(Debug)]
pub struct ConnReq {
    id: Mutex<Option<CmId>>,
    pub(super) initiator_depth: u8,
    pub(super) responder_resources: u8,
}

impl ConnReq {
    pub(super) fn take_id(&self) -> Option<CmId> {
        self.id.lock().take()
    }

    /// `fi_reject`.
    pub fn reject(&self, data: &[u8]) -> FiResult<()> {
        let enc = cm_data_encode(data, "fi_reject")?;
        let Some(id) = self.take_id() else {
            return crate::fail!(FiError::INVAL, "fi_reject: connection request already answered");
        };
        id.reject(&enc).map_err(|e| {
            tracing::warn!("fi_reject: rdma_reject failed: errno {e}");
            FiError::from_errno(e)
        })
    }
}


impl MsgEp {
    fn conn_param<'a>(&self, data: &'a [u8]) -> ConnParam<'a> {
        let a = &self.domain.attr;
        let (init, resp) = if self.from_connreq {
            // Answer with no more than the peer asked for and the device allows.
            (
                (self.connreq_depth.1 as i32).min(a.max_qp_init_rd_atom) as u8,
                (self.connreq_depth.0 as i32).min(a.max_qp_rd_atom) as u8,
            )
        } else {
            (a.max_qp_init_rd_atom.clamp(0, 255) as u8, a.max_qp_rd_atom.clamp(0, 255) as u8)
        };
        ConnParam { private_data: data, responder_resources: resp, initiator_depth: init, retry_count: crate::verbs::cm::RC_RETRY_COUNT, rnr_retry_count: crate::verbs::cm::RNR_RETRY_FOREVER }
    }

    /// `fi_connect`.
    pub fn connect(&self, addr: Option<SocketAddr>, data: &[u8]) -> FiResult<()> {
        let enc = cm_data_encode(data, "fi_connect")?;
        let _g = self.ctl.lock();
        if self.from_connreq {
            return crate::fail!(FiError::INVAL, "fi_connect: endpoint was created from a connection request; use fi_accept");
        }
        match self.state() {
            EpState::Enabled => {}
            EpState::Idle => return crate::fail!(FiError::OPBADSTATE, "fi_connect: endpoint not enabled"),
            EpState::Shutdown => {
                return crate::fail!(FiError::OPBADSTATE, "fi_connect: endpoint was shut down or refused; open a new one")
            }
            _ => return crate::fail!(FiError::ISCONN, "fi_connect: endpoint already connecting or connected"),
        }
        let peer = self.id.peer_addr().filter(|p| !p.ip().is_unspecified());
        match (addr, peer) {
            (Some(a), Some(p)) if a != p => {
                return crate::fail!(FiError::INVAL, "fi_connect: endpoint was opened for {p}, not {a}");
            }
            (None, None) => return crate::fail!(FiError::INVAL, "fi_connect: no destination address"),
            (Some(_), None) => {
                return crate::fail!(FiError::INVAL, "fi_connect: open the endpoint with info->dest_addr set (the QP needs the route)");
            }
            _ => {}
        }
        self.set_state(EpState::Connecting);
        if let Err(e) = self.id.connect(&self.conn_param(&enc)) {
            self.set_state(EpState::Enabled);
            return crate::fail!(FiError::from_errno(e), "fi_connect: rdma_connect failed: {}", ioerr(e));
        }
        Ok(())
    }

    /// `fi_accept`.
    pub fn accept(&self, data: &[u8]) -> FiResult<()> {
        let enc = cm_data_encode(data, "fi_accept")?;
        let _g = self.ctl.lock();
        if !self.from_connreq {
            return crate::fail!(FiError::INVAL, "fi_accept: endpoint was not created from a connection request");
        }
        match self.state() {
            EpState::Enabled => {}
            EpState::Idle => return crate::fail!(FiError::OPBADSTATE, "fi_accept: endpoint not enabled"),
            _ => return crate::fail!(FiError::ISCONN, "fi_accept: already accepted"),
        }
        self.set_state(EpState::Connecting);
        if let Err(e) = self.id.accept(&self.conn_param(&enc)) {
            self.set_state(EpState::Enabled);
            return crate::fail!(FiError::from_errno(e), "fi_accept: rdma_accept failed: {}", ioerr(e));
        }
        Ok(())
    }

    /// `fi_shutdown`.
    pub fn shutdown(&self, flags: u64) -> FiResult<()> {
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_shutdown: flags must be 0");
        }
        let _g = self.ctl.lock();
        match self.state() {
            EpState::Connected | EpState::Connecting => {
                if let Err(e) = self.id.disconnect() {
                    tracing::info!("fi_shutdown: rdma_disconnect: {}", ioerr(e));
                }
                self.set_state(EpState::Shutdown);
                Ok(())
            }
            EpState::Shutdown => Ok(()),
            _ => crate::fail!(FiError::NOTCONN, "fi_shutdown: endpoint not connected"),
        }
    }
}


/// Gives a freshly connected QP the configured RNR NAK timer
/// (`FI_VERBS_MIN_RNR_TIMER`, default 12 = 0.64 ms): rdma-cm leaves the
/// longest, 655 ms, so a send that arrives a moment before the peer's
/// receive would stall that long. A device that refuses keeps rdma-cm's
/// value; the connection works either way.
pub fn set_rnr_timer(qp: &crate::verbs::Qp, what: &str) {
    let want = crate::config::get().min_rnr_timer;
    match qp.set_min_rnr_timer(want) {
        Ok(t) => {
            tracing::debug!("{what}: QP {} min_rnr_timer {} (asked {want})", qp.qp_num(), t.min_rnr_timer);
            tracing::debug!("{what}: QP {} ack timeout {} retry_cnt {} rnr_retry {}", qp.qp_num(), t.timeout, t.retry_cnt, t.rnr_retry);
        }
        Err(e) => tracing::warn!("{what}: QP {}: cannot set min_rnr_timer {want}: errno {e}", qp.qp_num()),
    }
}


impl CmHandler for MsgEp {
    fn on_cm_event(&self, ev: CmEvent) -> Option<Result<EqEntry, EqErr>> {
        let fid = self.fid.load(Ordering::Acquire);
        match ev.kind {
            CmEventKind::Established => {
                if let Some(qp) = self.id.qp() {
                    set_rnr_timer(qp, "msg");
                }
                self.set_state(EpState::Connected);
                Some(Ok(EqEntry::Cm { event: FI_CONNECTED, fid, info: None, data: cm_data_decode(&ev.private_data) }))
            }
            CmEventKind::Disconnected => {
                self.set_state(EpState::Shutdown);
                if let Some(qp) = self.id.qp() {
                    // Flush what is still posted, so every operation completes (in error).
                    let _ = qp.to_error();
                }
                Some(Ok(EqEntry::Cm { event: FI_SHUTDOWN, fid, info: None, data: Vec::new() }))
            }
            CmEventKind::Rejected => {
                // rdma-cm does not let a refused id connect again.
                self.set_state(EpState::Shutdown);
                Some(Err(EqErr {
                    fid,
                    err: FI_ECONNREFUSED,
                    prov_errno: ev.status,
                    err_data: cm_data_decode(&ev.private_data),
                    ..Default::default()
                }))
            }
            CmEventKind::Unreachable | CmEventKind::ConnectError | CmEventKind::AddrError | CmEventKind::RouteError => {
                self.set_state(EpState::Shutdown);
                let err = if ev.kind == CmEventKind::Unreachable { FI_EHOSTUNREACH } else { FI_ECONNABORTED };
                tracing::info!("endpoint: connection failed: {:?} (status {})", ev.kind, ev.status);
                Some(Err(EqErr { fid, err, prov_errno: ev.status, ..Default::default() }))
            }
            CmEventKind::DeviceRemoval => {
                self.set_state(EpState::Shutdown);
                if let Some(qp) = self.id.qp() {
                    // As on DISCONNECTED: every posted operation completes (flushed).
                    let _ = qp.to_error();
                }
                Some(Err(EqErr { fid, err: FI_ENODEV, prov_errno: ev.status, ..Default::default() }))
            }
            _ => {
                tracing::debug!("endpoint: ignoring CM event {:?}", ev.kind);
                None
            }
        }
    }
}

/// A passive (listening) endpoint.
pub struct Pep {
    pub fabric: Hold<Fabric>,
    pub info: Info,
    /// None once an active endpoint took it over (`fi_endpoint` with
    /// `info->handle` = this passive endpoint).
    id: Mutex<Option<CmId>>,
    fid: AtomicUsize,
    eq: Mutex<Option<(Hold<Eq>, u64)>>,
    listening: AtomicU32,
    bound: AtomicU32,
    backlog: AtomicU32,
}

impl std::fmt::Debug for Pep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pep").field("addr", &self.local_addr()).finish()
    }
}

impl Pep {
    /// `fi_passive_ep`.
    pub fn open(fabric: &Arc<Fabric>, info: &Info) -> FiResult<Arc<Pep>> {
        if info.ep.type_ != FI_EP_MSG && info.ep.type_ != FI_EP_UNSPEC {
            return crate::fail!(FiError::INVAL, "fi_passive_ep: endpoint type {} is not FI_EP_MSG", info.ep.type_);
        }
        let id = CmId::new_sync().map_err(FiError::from_errno)?;
        let mut stored = info.clone();
        stored.pep = None;
        let pep = Pep {
            fabric: Hold::new(fabric),
            info: stored,
            id: Mutex::new(Some(id)),
            fid: AtomicUsize::new(0),
            eq: Mutex::new(None),
            listening: AtomicU32::new(0),
            bound: AtomicU32::new(0),
            backlog: AtomicU32::new(1024),
        };
        if let Some(src) = info.src_addr {
            pep.bind(&src)?;
        }
        Ok(Arc::new(pep))
    }

    fn bind(&self, addr: &SocketAddr) -> FiResult<()> {
        let g = self.id.lock();
        let Some(id) = g.as_ref() else {
            return crate::fail!(FiError::OPBADSTATE, "passive endpoint: its address was taken over by an active endpoint");
        };
        if let Err(e) = id.bind_addr(addr) {
            return crate::fail!(FiError::from_errno(e), "passive endpoint: cannot bind {addr}: {}", ioerr(e));
        }
        self.bound.store(1, Ordering::Release);
        Ok(())
    }

    pub fn set_fid(&self, fid: usize) {
        self.fid.store(fid, Ordering::Release);
    }

    /// The C `struct fid_pep *` (what `info->handle` names).
    pub fn fid(&self) -> usize {
        self.fid.load(Ordering::Acquire)
    }

    /// Hands the rdma-cm id (and with it the bound address) to an active
    /// endpoint (`fi_endpoint` with `info->handle` = this passive endpoint,
    /// as libfabric's verbs does). The passive endpoint keeps only its close.
    pub(super) fn take_id(&self) -> FiResult<CmId> {
        if self.listening.load(Ordering::Acquire) != 0 {
            return crate::fail!(FiError::INVAL, "fi_endpoint: info->handle is a listening passive endpoint");
        }
        match self.id.lock().take() {
            Some(id) => Ok(id),
            None => crate::fail!(FiError::INVAL, "fi_endpoint: info->handle's passive endpoint was already taken over"),
        }
    }

    /// `fi_setname`: binds the listening address (before `fi_listen`).
    pub fn setname(&self, addr: &SocketAddr) -> FiResult<()> {
        if self.bound.load(Ordering::Acquire) != 0 {
            return crate::fail!(FiError::INVAL, "fi_setname: passive endpoint already has an address");
        }
        self.bind(addr)
    }

    pub fn set_backlog(&self, n: u32) {
        self.backlog.store(n.max(1), Ordering::Relaxed);
    }

    pub fn bind_eq(self: &Arc<Self>, eq: &Arc<Eq>, flags: u64) -> FiResult<()> {
        if flags != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_pep_bind: unsupported flags {flags:#x}");
        }
        let mut slot = self.eq.lock();
        if slot.is_some() {
            return crate::fail!(FiError::INVAL, "fi_pep_bind: an EQ is already bound");
        }
        let g = self.id.lock();
        let Some(id) = g.as_ref() else {
            return crate::fail!(FiError::OPBADSTATE, "fi_pep_bind: the address was taken over by an active endpoint");
        };
        let weak: Weak<dyn CmHandler> = Arc::downgrade(self) as Weak<dyn CmHandler>;
        let token = eq.register(weak);
        id.set_token(token);
        if let Err(e) = id.migrate(&eq.channel) {
            eq.unregister(token);
            return crate::fail!(FiError::from_errno(e), "fi_pep_bind: rdma_migrate_id failed: {}", ioerr(e));
        }
        *slot = Some((Hold::new(eq), token));
        Ok(())
    }

    /// `fi_listen`.
    pub fn listen(&self) -> FiResult<()> {
        if self.eq.lock().is_none() {
            return crate::fail!(FiError::NOEQ, "fi_listen: bind an EQ first");
        }
        if self.listening.swap(1, Ordering::AcqRel) != 0 {
            return crate::fail!(FiError::ALREADY, "fi_listen: already listening");
        }
        if self.bound.load(Ordering::Acquire) == 0 {
            if let Err(e) = self.bind(&SocketAddr::from(([0, 0, 0, 0], 0))) {
                self.listening.store(0, Ordering::Release);
                return Err(e);
            }
        }
        let g = self.id.lock();
        let Some(id) = g.as_ref() else {
            self.listening.store(0, Ordering::Release);
            return crate::fail!(FiError::OPBADSTATE, "fi_listen: the address was taken over by an active endpoint");
        };
        if let Err(e) = id.listen(self.backlog.load(Ordering::Relaxed) as i32) {
            self.listening.store(0, Ordering::Release);
            return crate::fail!(FiError::from_errno(e), "fi_listen: rdma_listen failed: {}", ioerr(e));
        }
        Ok(())
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.id.lock().as_ref().and_then(|id| id.local_addr())
    }

    pub fn close(&self) -> FiResult<()> {
        if let Some((eq, token)) = self.eq.lock().take() {
            eq.forget(token, self.fid());
        }
        Ok(())
    }
}

impl CmHandler for Pep {
    fn on_cm_event(&self, mut ev: CmEvent) -> Option<Result<EqEntry, EqErr>> {
        let fid = self.fid.load(Ordering::Acquire);
        match ev.kind {
            CmEventKind::ConnectRequest => {
                let id = ev.new_id.take()?;
                let mut info = self.info.clone();
                info.pep = None;
                info.src_addr = id.local_addr().or(info.src_addr);
                info.dest_addr = id.peer_addr();
                info.ep.type_ = FI_EP_MSG;
                if let Some(dev) = id.device() {
                    info.domain.name = Some(dev.name().to_string());
                }
                let req = Arc::new(ConnReq {
                    id: Mutex::new(Some(id)),
                    initiator_depth: ev.initiator_depth,
                    responder_resources: ev.responder_resources,
                });
                info.handle = Some(req);
                Some(Ok(EqEntry::Cm {
                    event: FI_CONNREQ,
                    fid,
                    info: Some(Box::new(info)),
                    data: cm_data_decode(&ev.private_data),
                }))
            }
            CmEventKind::DeviceRemoval => Some(Err(EqErr { fid, err: FI_ENODEV, prov_errno: ev.status, ..Default::default() })),
            _ => {
                tracing::debug!("passive endpoint: ignoring CM event {:?}", ev.kind);
                None
            }
        }
    }
}
