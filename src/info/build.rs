//! Building the answers of `fi_getinfo`: the `FI_EP_MSG` info of one
//! device and address pair ([`build_info`]) and the `FI_EP_RDM` one
//! ([`build_rdm_info`]).

use super::*;

/// Builds the info for one device and one address pair, or says why it doesn't fit.
pub(super) fn build_info(
    req: &Request,
    dc: &DevCaps,
    src: Option<SocketAddr>,
    dest: Option<SocketAddr>,
) -> FiResult<Info> {
    let cfg = config::get();
    let h = req.hints.as_ref();
    let hd = Info::default();
    let hi = h.unwrap_or(&hd);

    // Capabilities.
    if hi.caps & !(MSG_CAPS | SECONDARY_CAPS) != 0 {
        tracing::info!("getinfo: unsupported caps requested: {:#x}", hi.caps & !(MSG_CAPS | SECONDARY_CAPS));
        return Err(FiError::NODATA);
    }
    let mut caps = if hi.caps != 0 { hi.caps | (MSG_CAPS & SECONDARY_CAPS) } else { MSG_CAPS };
    if caps & FI_SOURCE != 0 {
        // FI_SOURCE reports senders on connectionless endpoints; on MSG the peer is implied.
        caps &= !FI_SOURCE;
    }
    let (mr_mode, mr_info_mode) = match_mr_mode(req.version, h, caps, false)?;

    // Modes: rsverbs needs none, except FI_RX_CQ_DATA to offer remote CQ data on
    // RMA writes (such a write consumes a posted receive).
    let rx_cq_data = h.is_none() || (hi.mode | hi.rx.mode) & FI_RX_CQ_DATA != 0;

    // Endpoint attributes.
    if hi.ep.type_ != FI_EP_UNSPEC && hi.ep.type_ != FI_EP_MSG {
        return Err(FiError::NODATA);
    }
    if hi.ep.protocol != FI_PROTO_UNSPEC && hi.ep.protocol != FI_PROTO_RDMA_CM_IB_RC {
        return Err(FiError::NODATA);
    }
    let max_msg = (dc.port.max_msg_sz as usize).max(1);
    over(hi.ep.max_msg_size, max_msg, "max_msg_size")?;
    // Shared receive contexts (an SRQ, crate::srx) where the device has SRQs;
    // no shared transmit contexts: verbs has no shared send queue.
    let srx_max = usize::from(dc.attr.max_srq > 0);
    if hi.ep.tx_ctx_cnt == FI_SHARED_CONTEXT {
        tracing::info!("getinfo: shared transmit contexts are not supported");
        return Err(FiError::NODATA);
    }
    if hi.ep.rx_ctx_cnt == FI_SHARED_CONTEXT && srx_max == 0 {
        tracing::info!("getinfo: device {} has no shared receive queues", dc.dev.name());
        return Err(FiError::NODATA);
    }
    over(hi.ep.tx_ctx_cnt, 1, "ep tx_ctx_cnt")?;
    if hi.ep.rx_ctx_cnt != FI_SHARED_CONTEXT {
        over(hi.ep.rx_ctx_cnt, 1, "ep rx_ctx_cnt")?;
    }
    if hi.ep.auth_key_size != 0 || hi.domain.auth_key_size != 0 {
        tracing::info!("getinfo: authorization keys are not supported");
        return Err(FiError::NODATA);
    }
    check_newer_domain_hints(&hi.domain)?;

    // Queue limits.
    let max_wr = dc.attr.max_qp_wr.max(1) as usize;
    let max_sge = dc.attr.max_sge.max(1) as usize;
    queue_limits(hi, max_wr, max_sge, max_sge, dc.max_inline)?;
    if hi.tx.msg_order & !MSG_ORDER != 0 || hi.rx.msg_order & !MSG_ORDER != 0 {
        tracing::info!("getinfo: unsupported message ordering requested");
        return Err(FiError::NODATA);
    }
    if (hi.tx.op_flags | hi.rx.op_flags) & !OP_FLAGS != 0 {
        tracing::info!("getinfo: unsupported op_flags requested");
        return Err(FiError::NODATA);
    }
    if hi.tx.caps & !TX_CAPS != 0 || hi.rx.caps & !(RX_CAPS | SECONDARY_CAPS) != 0 {
        return Err(FiError::NODATA);
    }

    // Domain attributes.
    if hi.domain.cq_data_size > 4 {
        tracing::info!("getinfo: cq_data_size {} > 4 (verbs immediate data)", hi.domain.cq_data_size);
        return Err(FiError::NODATA);
    }
    if hi.domain.mr_key_size > 0 && hi.domain.mr_key_size < 4 {
        return Err(FiError::NODATA);
    }
    over(hi.domain.mr_iov_limit, 1, "mr_iov_limit")?;
    if hi.domain.max_ep_stx_ctx > 0 {
        tracing::info!("getinfo: shared transmit contexts are not supported (verbs has no shared send queue)");
        return Err(FiError::NODATA);
    }
    over(hi.domain.max_ep_srx_ctx, srx_max, "max_ep_srx_ctx")?;
    domain_caps(hi)?;
    over(hi.domain.cntr_cnt, CNTR_CNT, "cntr_cnt")?;

    // tx/rx caps hold only the capabilities of that direction (fi_getinfo(3)):
    // FI_LOCAL_COMM/FI_REMOTE_COMM are domain and endpoint caps, not rx caps.
    let tx_caps = caps & TX_CAPS;
    let rx_caps = caps & RX_CAPS;
    let inject = pick(hi.tx.inject_size, dc.max_inline);
    let addr_format = match (src.or(dest), hi.addr_format) {
        (Some(SocketAddr::V6(_)), _) => FI_SOCKADDR_IN6,
        (Some(SocketAddr::V4(_)), _) => FI_SOCKADDR_IN,
        (None, f) if f != FI_FORMAT_UNSPEC => f,
        (None, _) => FI_SOCKADDR_IN,
    };
    Ok(Info {
        caps,
        mode: mr_info_mode,
        addr_format,
        src_addr: src,
        dest_addr: dest,
        src_ud: None,
        dest_ud: None,
        handle: None,
        pep: None,
        tx: TxAttr {
            caps: tx_caps,
            mode: 0,
            op_flags: hi.tx.op_flags,
            msg_order: MSG_ORDER,
            comp_order: FI_ORDER_STRICT,
            inject_size: inject,
            size: pick(hi.tx.size, cfg.tx_size.min(max_wr)),
            iov_limit: pick(hi.tx.iov_limit, cfg.tx_iov_limit.min(max_sge)),
            rma_iov_limit: 1,
            tclass: hi.tx.tclass,
        },
        rx: RxAttr {
            caps: rx_caps,
            mode: if rx_cq_data { FI_RX_CQ_DATA } else { 0 },
            op_flags: hi.rx.op_flags,
            msg_order: MSG_ORDER,
            comp_order: FI_ORDER_STRICT | FI_ORDER_DATA,
            total_buffered_recv: 0,
            size: pick(hi.rx.size, cfg.rx_size.min(max_wr)),
            iov_limit: pick(hi.rx.iov_limit, cfg.rx_iov_limit.min(max_sge)),
        },
        ep: EpAttr {
            type_: FI_EP_MSG,
            protocol: FI_PROTO_RDMA_CM_IB_RC,
            protocol_version: 1,
            max_msg_size: max_msg,
            msg_prefix_size: 0,
            max_order_raw_size: max_msg,
            max_order_war_size: max_msg,
            max_order_waw_size: max_msg,
            mem_tag_format: 0,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: if hi.ep.rx_ctx_cnt == FI_SHARED_CONTEXT { FI_SHARED_CONTEXT } else { 1 },
            auth_key_size: 0,
        },
        // Connection setup completes inside fi_eq_read (rdma-cm events are
        // handled there): manual. Transfers are the device's: automatic.
        domain: DomainAttr {
            av_type: FI_AV_UNSPEC,
            max_ep_srx_ctx: srx_max,
            max_err_data: CM_DATA_SIZE,
            ..domain_attr(req, dc, hi, FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO, mr_mode)?
        },
        fabric: fabric_attr(req, dc),
    })
}

/// Largest RDM message: rendezvous reads are split into device-sized chunks,
/// so only the protocol bound and memory registration limit it.
fn rdm_max_msg(dc: &DevCaps) -> usize {
    let proto = crate::rdm::proto::MAX_MSG_LEN;
    usize::try_from(dc.attr.max_mr_size.min(proto)).unwrap_or(usize::MAX).max(1)
}

/// Builds the `FI_EP_RDM` info for one device, or says why it doesn't fit.
pub(super) fn build_rdm_info(req: &Request, dc: &DevCaps, src: Option<SocketAddr>, dest: Option<SocketAddr>) -> FiResult<Info> {
    let cfg = config::get();
    let rcfg = crate::rdm::RdmConfig::get();
    let h = req.hints.as_ref();
    let hd = Info::default();
    let hi = h.unwrap_or(&hd);

    if hi.ep.type_ != FI_EP_UNSPEC && hi.ep.type_ != FI_EP_RDM {
        return Err(FiError::NODATA);
    }
    if hi.ep.protocol != FI_PROTO_UNSPEC && hi.ep.protocol != FI_PROTO_RXM {
        tracing::info!("getinfo: RDM endpoints speak FI_PROTO_RXM, not protocol {}", hi.ep.protocol);
        return Err(FiError::NODATA);
    }
    let rdm_caps = rdm_caps_for(req.version);
    if hi.caps & !rdm_caps != 0 {
        tracing::info!("getinfo: unsupported RDM caps requested: {:#x}", hi.caps & !rdm_caps);
        return Err(FiError::NODATA);
    }
    // With caps in the hints, only those (plus local/remote communication) are
    // reported: FI_DIRECTED_RECV, FI_SOURCE and FI_MULTI_RECV change how the
    // endpoint behaves, so they are on only when asked for.
    let caps = if hi.caps != 0 { hi.caps | FI_LOCAL_COMM | FI_REMOTE_COMM } else { RDM_CAPS };
    let (mr_mode, mr_info_mode) = match_mr_mode(req.version, h, caps, true)?;

    let max_msg = rdm_max_msg(dc);
    over(hi.ep.max_msg_size, max_msg, "max_msg_size")?;
    one_context_no_keys(hi, "RDM")?;
    if hi.ep.msg_prefix_size != 0 {
        return Err(FiError::NODATA);
    }

    // Queue limits: the endpoint queues operations in software, bounded by these.
    let max_wr = dc.attr.max_qp_wr.max(1) as usize;
    let max_sge = dc.attr.max_sge.max(1) as usize;
    let tx_iov_max = max_sge.min(crate::rdm::proto::MAX_SEGS);
    let inject_max = rcfg.eager_size;
    queue_limits(hi, max_wr, tx_iov_max, max_sge, inject_max)?;
    if hi.tx.msg_order & !RDM_MSG_ORDER != 0 || hi.rx.msg_order & !RDM_MSG_ORDER != 0 {
        tracing::info!("getinfo: RDM endpoints do not keep the message ordering requested");
        return Err(FiError::NODATA);
    }
    if hi.tx.op_flags & !OP_FLAGS != 0 || hi.rx.op_flags & !(OP_FLAGS | FI_MULTI_RECV) != 0 {
        tracing::info!("getinfo: unsupported op_flags requested");
        return Err(FiError::NODATA);
    }
    let rdm_rx_caps = RDM_RX_CAPS | (rdm_caps & (FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV));
    if hi.tx.caps & !RDM_TX_CAPS != 0 || hi.rx.caps & !(rdm_rx_caps | SECONDARY_CAPS) != 0 {
        return Err(FiError::NODATA);
    }

    if hi.domain.cq_data_size > 4 {
        tracing::info!("getinfo: cq_data_size {} > 4", hi.domain.cq_data_size);
        return Err(FiError::NODATA);
    }
    if hi.domain.mr_key_size > 0 && hi.domain.mr_key_size < 4 {
        return Err(FiError::NODATA);
    }
    over(hi.domain.mr_iov_limit, 1, "mr_iov_limit")?;
    if hi.domain.max_ep_stx_ctx > 0 || hi.domain.max_ep_srx_ctx > 0 {
        tracing::info!("getinfo: shared tx/rx contexts are not supported");
        return Err(FiError::NODATA);
    }
    domain_caps(hi)?;
    over(hi.domain.cntr_cnt, CNTR_CNT, "cntr_cnt")?;
    match hi.domain.av_type {
        FI_AV_UNSPEC | FI_AV_MAP | FI_AV_TABLE => {}
        t => {
            tracing::info!("getinfo: AV type {t} not supported");
            return Err(FiError::NODATA);
        }
    }

    let tx_caps = caps & RDM_TX_CAPS;
    let rx_caps = caps & rdm_rx_caps;
    let addr_format = match (src.or(dest), hi.addr_format) {
        (Some(SocketAddr::V6(_)), _) => FI_SOCKADDR_IN6,
        (Some(SocketAddr::V4(_)), _) => FI_SOCKADDR_IN,
        (None, f) if f != FI_FORMAT_UNSPEC => f,
        (None, _) => FI_SOCKADDR_IN,
    };
    let rdm_have = if hi.domain.data_progress == FI_PROGRESS_AUTO || hi.domain.control_progress == FI_PROGRESS_AUTO {
        FI_PROGRESS_AUTO
    } else {
        FI_PROGRESS_MANUAL
    };
    let order = |hint: u64| if hint != 0 { hint } else { RDM_MSG_ORDER };
    Ok(Info {
        caps,
        mode: mr_info_mode,
        addr_format,
        src_addr: src,
        dest_addr: dest,
        src_ud: None,
        dest_ud: None,
        handle: None,
        pep: None,
        tx: TxAttr {
            caps: tx_caps,
            mode: 0,
            op_flags: hi.tx.op_flags,
            msg_order: order(hi.tx.msg_order),
            comp_order: FI_ORDER_NONE,
            inject_size: pick(hi.tx.inject_size, inject_max),
            size: pick(hi.tx.size, cfg.tx_size.min(max_wr)),
            iov_limit: pick(hi.tx.iov_limit, cfg.tx_iov_limit.min(tx_iov_max)),
            rma_iov_limit: 1,
            tclass: hi.tx.tclass,
        },
        rx: RxAttr {
            caps: rx_caps,
            mode: 0,
            op_flags: hi.rx.op_flags,
            msg_order: order(hi.rx.msg_order),
            comp_order: FI_ORDER_NONE,
            total_buffered_recv: 0,
            size: pick(hi.rx.size, cfg.rx_size.min(max_wr)),
            iov_limit: pick(hi.rx.iov_limit, cfg.rx_iov_limit.min(max_sge)),
        },
        ep: EpAttr {
            type_: FI_EP_RDM,
            protocol: FI_PROTO_RXM,
            protocol_version: crate::rdm::proto::VERSION as u32,
            max_msg_size: max_msg,
            msg_prefix_size: 0,
            max_order_raw_size: max_msg,
            max_order_war_size: max_msg,
            max_order_waw_size: max_msg,
            mem_tag_format: if hi.ep.mem_tag_format != 0 { hi.ep.mem_tag_format } else { TAG_GENERIC },
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            auth_key_size: 0,
        },
        // Connections, rendezvous and credits advance inside the
        // application's calls (CQ/counter reads, fi_trywait, data calls).
        // FI_PROGRESS_AUTO asked for either: the endpoint runs a progress
        // thread (rdm::auto), which makes both automatic.
        domain: domain_attr(req, dc, hi, rdm_have, rdm_have, mr_mode)?,
        fabric: fabric_attr(req, dc),
    })
}
