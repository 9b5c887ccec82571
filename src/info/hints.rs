//! Matching hints against what a device offers: MR mode, queue limits,
//! threading, progress, and the domain and fabric attributes of an answer.

use super::*;

/// Checks the MR mode the application supports and returns the one to report
/// (plus extra `info->mode` bits, for the pre-1.5 API's FI_LOCAL_MR).
///
/// RDM endpoints (`rdm`) do without `FI_MR_LOCAL`: they register buffers
/// given without descriptors themselves, through the domain's registration
/// cache (`crate::mrcache`). Hints with the bit keep it in the answer
/// (the application then passes descriptors, as before); hints without it get
/// an answer without it.
pub(crate) fn match_mr_mode(version: u32, hints: Option<&Info>, caps: u64, rdm: bool) -> FiResult<(i32, u64)> {
    // Remote-access bits only matter to applications that do RMA/atomics.
    let remote = if caps & (FI_RMA | FI_ATOMIC) != 0 { MR_MODE & !FI_MR_LOCAL } else { 0 };
    let mut needed = remote | FI_MR_LOCAL;
    if rdm {
        if let Some(h) = hints {
            let user = h.domain.mr_mode;
            if !FI_VERSION_LT(version, FI_VERSION(1, 5)) && user != FI_MR_BASIC && user != FI_MR_SCALABLE && user & FI_MR_LOCAL == 0 {
                needed = remote;
            }
        }
    }
    let Some(h) = hints else {
        return Ok(if FI_VERSION_LT(version, FI_VERSION(1, 5)) { (FI_MR_BASIC, FI_LOCAL_MR) } else { (needed, 0) });
    };
    let user = h.domain.mr_mode;
    if FI_VERSION_LT(version, FI_VERSION(1, 5)) || user == FI_MR_BASIC {
        // Old-style API: FI_MR_BASIC (or unspecified) plus the FI_LOCAL_MR mode bit.
        if user == FI_MR_SCALABLE {
            return crate::fail!(FiError::NODATA, "getinfo: FI_MR_SCALABLE is not supported by verbs");
        }
        if h.mode & FI_LOCAL_MR == 0 && h.domain.mode & FI_LOCAL_MR == 0 {
            return crate::fail!(FiError::NODATA, "getinfo: verbs needs local MRs (mode FI_LOCAL_MR) with the pre-1.5 API");
        }
        return Ok((FI_MR_BASIC, FI_LOCAL_MR));
    }
    if user == FI_MR_SCALABLE {
        return crate::fail!(FiError::NODATA, "getinfo: FI_MR_SCALABLE is not supported by verbs");
    }
    if user & needed != needed {
        tracing::info!("getinfo: hints mr_mode {user:#x} lacks required bits {needed:#x}");
        return Err(FiError::NODATA);
    }
    Ok((needed, 0))
}

pub(crate) fn over(hint: usize, max: usize, what: &str) -> FiResult<()> {
    if hint > max {
        tracing::info!("getinfo: hints ask {what} = {hint}, the device offers {max}");
        return Err(FiError::NODATA);
    }
    Ok(())
}

/// The `fi_domain_attr` hints added after 1.17 (each read only for
/// applications whose API version defines it): rsverbs has no authorization
/// keys and no peer groups; its counters hold any `u64`.
pub(crate) fn check_newer_domain_hints(hd: &DomainAttr) -> FiResult<()> {
    if hd.max_ep_auth_key > 0 {
        tracing::info!("getinfo: hints ask max_ep_auth_key = {}; rsverbs has no authorization keys", hd.max_ep_auth_key);
        return Err(FiError::NODATA);
    }
    if hd.max_group_id > 0 {
        tracing::info!("getinfo: hints ask max_group_id = {}; rsverbs has no peer groups", hd.max_group_id);
        return Err(FiError::NODATA);
    }
    Ok(())
}

/// Counters are software objects: as many as memory holds; this is what
/// `cntr_cnt` reports.
pub const CNTR_CNT: usize = 1 << 16;

/// The hints' queue sizes, iov limits and inject size against what the
/// endpoint offers (`-FI_ENODATA` above them): `max_wr` entries per queue,
/// `tx_iov`/`rx_iov` buffers per operation, one RMA iov, `inject` bytes.
pub(crate) fn queue_limits(hi: &Info, max_wr: usize, tx_iov: usize, rx_iov: usize, inject: usize) -> FiResult<()> {
    over(hi.tx.size, max_wr, "tx size")?;
    over(hi.rx.size, max_wr, "rx size")?;
    over(hi.tx.iov_limit, tx_iov, "tx iov_limit")?;
    over(hi.rx.iov_limit, rx_iov, "rx iov_limit")?;
    over(hi.tx.rma_iov_limit, 1, "rma_iov_limit")?;
    over(hi.tx.inject_size, inject, "inject_size")
}

/// The hints of the connectionless endpoints (RDM, DGRAM, `kind` in the
/// log): one transmit and one receive context, no shared contexts, no
/// authorization keys, and [`check_newer_domain_hints`].
pub(crate) fn one_context_no_keys(hi: &Info, kind: &str) -> FiResult<()> {
    if hi.ep.tx_ctx_cnt == FI_SHARED_CONTEXT || hi.ep.rx_ctx_cnt == FI_SHARED_CONTEXT {
        tracing::info!("getinfo: {kind} endpoints have no shared contexts");
        return Err(FiError::NODATA);
    }
    over(hi.ep.tx_ctx_cnt, 1, "ep tx_ctx_cnt")?;
    over(hi.ep.rx_ctx_cnt, 1, "ep rx_ctx_cnt")?;
    if hi.ep.auth_key_size != 0 || hi.domain.auth_key_size != 0 {
        tracing::info!("getinfo: authorization keys are not supported");
        return Err(FiError::NODATA);
    }
    check_newer_domain_hints(&hi.domain)
}

/// Threading levels (all accepted; see README "Threading").
pub(crate) fn threading(hint: u32) -> FiResult<u32> {
    match hint {
        FI_THREAD_UNSPEC => Ok(FI_THREAD_SAFE),
        FI_THREAD_SAFE | FI_THREAD_FID | FI_THREAD_DOMAIN | FI_THREAD_COMPLETION | FI_THREAD_ENDPOINT => Ok(hint),
        t => {
            tracing::info!("getinfo: unknown threading level {t}");
            Err(FiError::NODATA)
        }
    }
}

/// A progress model: `have` is what the provider does; a hint of MANUAL is
/// always satisfied (the application drives progress; an automatic provider
/// needs none of it), a hint of AUTO only when `have` is AUTO. For control
/// progress, API 2.0's FI_PROGRESS_CONTROL_UNIFIED (the application
/// serializes control and data calls, which implies manual progress) is
/// satisfied too: rsverbs' objects lock for themselves whatever the model.
pub(crate) fn progress(version: u32, hint: u32, have: u32, what: &str) -> FiResult<u32> {
    match hint {
        FI_PROGRESS_UNSPEC => Ok(have),
        FI_PROGRESS_MANUAL => Ok(FI_PROGRESS_MANUAL),
        FI_PROGRESS_CONTROL_UNIFIED if what == "control" && FI_MAJOR(version) >= 2 => Ok(FI_PROGRESS_CONTROL_UNIFIED),
        FI_PROGRESS_AUTO if have == FI_PROGRESS_AUTO => Ok(FI_PROGRESS_AUTO),
        FI_PROGRESS_AUTO => {
            tracing::info!("getinfo: {what} progress FI_PROGRESS_AUTO asked; rsverbs makes it manually (inside the application's calls)");
            Err(FiError::NODATA)
        }
        p => {
            tracing::info!("getinfo: unknown {what} progress model {p}");
            Err(FiError::NODATA)
        }
    }
}

pub(crate) fn pick(hint: usize, default: usize) -> usize {
    if hint != 0 {
        hint
    } else {
        default
    }
}

/// The domain attributes of an info for device `dc`, as RDM and DGRAM give
/// them (MSG overrides the AV type, the shared receive contexts and the error
/// data): `control` and `data` are the progress models the endpoint type
/// offers; threading, progress, resource management, AV type and traffic
/// class follow the hints `hi`.
pub(crate) fn domain_attr(req: &Request, dc: &DevCaps, hi: &Info, control: u32, data: u32, mr_mode: i32) -> FiResult<DomainAttr> {
    Ok(DomainAttr {
        name: Some(dc.dev.name().to_string()),
        threading: threading(hi.domain.threading)?,
        control_progress: progress(req.version, hi.domain.control_progress, control, "control")?,
        data_progress: progress(req.version, hi.domain.data_progress, data, "data")?,
        resource_mgmt: if hi.domain.resource_mgmt != FI_RM_UNSPEC { hi.domain.resource_mgmt } else { FI_RM_ENABLED },
        av_type: hi.domain.av_type,
        mr_mode,
        mr_key_size: 4,
        cq_data_size: 4,
        cq_cnt: dc.attr.max_cq.max(0) as usize,
        ep_cnt: dc.attr.max_qp.max(0) as usize,
        tx_ctx_cnt: dc.attr.max_qp.max(0) as usize,
        rx_ctx_cnt: dc.attr.max_qp.max(0) as usize,
        max_ep_tx_ctx: 1,
        max_ep_rx_ctx: 1,
        max_ep_stx_ctx: 0,
        max_ep_srx_ctx: 0,
        cntr_cnt: CNTR_CNT,
        mr_iov_limit: 1,
        caps: DOMAIN_CAPS,
        mode: 0,
        auth_key_size: 0,
        max_err_data: 0,
        mr_cnt: dc.attr.max_mr.max(0) as usize,
        tclass: hi.domain.tclass,
        max_ep_auth_key: 0,
        max_group_id: 0,
        max_cntr_value: u64::MAX,
        max_err_cntr_value: u64::MAX,
    })
}

/// The fabric attributes of an info for device `dc`.
pub(crate) fn fabric_attr(req: &Request, dc: &DevCaps) -> FabricAttr {
    FabricAttr { name: Some(dc.fabric_name.clone()), prov_name: None, prov_version: PROV_VERSION, api_version: req.version }
}
