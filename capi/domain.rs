//! Domain and memory-region objects.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::prov::{bind_nosys, control_nosys, ops_open_nosys, FabricObj};
use super::util::*;
use crate::domain::Domain;
use crate::error::{FiError, FiResult};
use crate::mr::MemRegion;

#[repr(C)]
pub struct DomainObj {
    pub fid: fid_domain,
    pub inner: Arc<Domain>,
}

impl FiObject for DomainObj {
    const CLASS: usize = FI_CLASS_DOMAIN;
    const NAME: &'static str = "domain";
    fn fi_ops() -> *const fi_ops {
        &DOMAIN_FI_OPS
    }
}

static DOMAIN_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(domain_close),
    bind: Some(bind_nosys),
    control: Some(domain_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

/// `fi_control(&domain->fid, RSVERBS_MR_CACHE_STATS, uint64_t[7])`: the
/// registration cache's counters (hits, misses, evictions, invalidations,
/// uncached, entries, bytes; zeros before the cache's first use). An
/// rsverbs-specific command, for tests and diagnostics (README "Memory
/// registration").
pub const RSVERBS_MR_CACHE_STATS: c_int = 0x7273_6d63;

unsafe extern "C" fn domain_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    if command != RSVERBS_MR_CACHE_STATS {
        // SAFETY: forwards the caller's arguments unchanged.
        return unsafe { control_nosys(f, command, arg) };
    }
    guard("fi_control(domain)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<DomainObj>(f) }?;
        if arg.is_null() {
            return crate::fail!(FiError::INVAL, "fi_control(RSVERBS_MR_CACHE_STATS): NULL argument");
        }
        let s = o.inner.mr_cache_stats().unwrap_or_default();
        let v = [s.hits, s.misses, s.evictions, s.invalidations, s.uncached, s.entries, s.bytes];
        // SAFETY: the caller passes room for 7 u64 (the command's contract).
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), arg as *mut u64, v.len()) };
        Ok(0)
    })
}

static DOMAIN_OPS: fi_ops_domain = fi_ops_domain {
    size: std::mem::size_of::<fi_ops_domain>(),
    av_open: Some(super::av::av_open),
    cq_open: Some(super::cq::cq_open),
    endpoint: Some(super::ep::ep_open),
    scalable_ep: Some(scalable_ep),
    cntr_open: Some(super::cntr::cntr_open),
    poll_open: Some(super::wait::poll_open),
    stx_ctx: Some(stx_ctx),
    srx_ctx: Some(super::srx::srx_ctx),
    query_atomic: Some(query_atomic),
    query_collective: Some(query_collective),
    endpoint2: Some(super::ep::ep_open2),
};

static MR_OPS: fi_ops_mr = fi_ops_mr {
    size: std::mem::size_of::<fi_ops_mr>(),
    reg: Some(mr_reg),
    regv: Some(mr_regv),
    regattr: Some(mr_regattr),
};

unsafe fn domain_common(fabric: *mut fid_fabric, info: *mut fi_info, out: *mut *mut fid_domain, flags: u64, context: *mut c_void) -> FiResult<c_int> {
    // SAFETY: fabric is a fid per the API.
    let f = unsafe { obj::<FabricObj>(fabric as *const fid) }?;
    let out = nonnull(out, "fi_domain: domain")?;
    let info = nonnull(info, "fi_domain: info")?;
    if flags != 0 {
        return crate::fail!(FiError::BADFLAGS, "fi_domain2: flags {flags:#x} not supported");
    }
    // SAFETY: a valid fi_info per the API.
    let i = unsafe { super::info::from_c(info, 0) }?;
    let d = Domain::open(&f.inner, &i)?;
    let o = into_c(DomainObj {
        fid: fid_domain {
            fid: fid { fclass: FI_CLASS_DOMAIN, context, ops: &DOMAIN_FI_OPS as *const _ as *mut _ },
            ops: &DOMAIN_OPS as *const _ as *mut _,
            mr: &MR_OPS as *const _ as *mut _,
        },
        inner: d,
    });
    // SAFETY: checked non-NULL.
    unsafe { *out = o as *mut fid_domain };
    Ok(0)
}

pub unsafe extern "C" fn domain_open(fabric: *mut fid_fabric, info: *mut fi_info, out: *mut *mut fid_domain, context: *mut c_void) -> c_int {
    // SAFETY: arguments per fi_domain(3).
    guard("fi_domain", || unsafe { domain_common(fabric, info, out, 0, context) })
}

pub unsafe extern "C" fn domain_open2(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    out: *mut *mut fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments per fi_domain(3).
    guard("fi_domain2", || unsafe { domain_common(fabric, info, out, flags, context) })
}

unsafe extern "C" fn domain_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(domain)", || unsafe { close_obj::<DomainObj>(f, |o| o.inner.refs.check_idle("domain")) })
}

macro_rules! domain_nosys {
    ($name:ident, $what:literal, ($($arg:ident : $ty:ty),*)) => {
        unsafe extern "C" fn $name(domain: *mut fid_domain, $($arg: $ty),*) -> c_int {
            $(let _ = $arg;)*
            guard($what, || {
                // SAFETY: domain is a fid per the API.
                unsafe { obj::<DomainObj>(domain as *const fid) }?;
                crate::fail!(FiError::NOSYS, "{}: not supported by rsverbs MSG endpoints yet", $what)
            })
        }
    };
}

domain_nosys!(scalable_ep, "fi_scalable_ep", (_a: *mut fi_info, _b: *mut *mut fid_ep, _c: *mut c_void));
domain_nosys!(stx_ctx, "fi_stx_context", (_a: *mut fi_tx_attr, _b: *mut *mut fid_stx, _c: *mut c_void));
domain_nosys!(query_collective, "fi_query_collective", (_a: fi_collective_op, _b: *mut fi_collective_attr, _c: u64));

/// `fi_query_atomic`: atomics exist on RDM endpoints only (a domain opened
/// for MSG endpoints has none); see `rdm_atomic.rs` for the supported set.
unsafe extern "C" fn query_atomic(domain: *mut fid_domain, datatype: fi_datatype, op: fi_op, attr: *mut fi_atomic_attr, flags: u64) -> c_int {
    guard("fi_query_atomic", || {
        // SAFETY: domain is a fid per the API.
        let d = unsafe { obj::<DomainObj>(domain as *const fid) }?;
        if d.inner.info.ep.type_ != FI_EP_RDM {
            return crate::fail!(FiError::NOSYS, "fi_query_atomic: atomics are offered on RDM endpoints only");
        }
        let attr = nonnull(attr, "fi_query_atomic: attr")?;
        use super::rdm_atomic::{supported, Family};
        let family = match flags {
            0 => Family::Write,
            FI_FETCH_ATOMIC => Family::Fetch,
            FI_COMPARE_ATOMIC => Family::Compare,
            f => return crate::fail!(FiError::BADFLAGS, "fi_query_atomic: flags {f:#x}"),
        };
        if !supported(family, datatype, op) {
            tracing::info!("fi_query_atomic: {family:?} datatype {datatype} op {op} not supported");
            return Err(FiError::OPNOTSUPP);
        }
        // SAFETY: checked non-NULL, caller-owned.
        unsafe { *attr = fi_atomic_attr { count: 1, size: 8 } };
        Ok(0)
    })
}

// ---- memory regions ----

#[repr(C)]
pub struct MrObj {
    pub fid: fid_mr,
    pub inner: Arc<MemRegion>,
}

impl FiObject for MrObj {
    const CLASS: usize = FI_CLASS_MR;
    const NAME: &'static str = "memory region";
    fn fi_ops() -> *const fi_ops {
        &MR_FI_OPS
    }
}

static MR_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(mr_close),
    bind: Some(bind_nosys),
    control: Some(control_nosys),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

unsafe fn mr_common(
    dom: *mut fid,
    addr: u64,
    len: usize,
    access: u64,
    flags: u64,
    out: *mut *mut fid_mr,
    context: *mut c_void,
) -> FiResult<c_int> {
    // SAFETY: dom is a fid per the API.
    let d = unsafe { obj::<DomainObj>(dom) }?;
    let out = nonnull(out, "fi_mr_reg: mr")?;
    let mr = MemRegion::register(&d.inner, addr, len, access, flags)?;
    let o = into_c(MrObj {
        fid: fid_mr {
            fid: fid { fclass: FI_CLASS_MR, context, ops: &MR_FI_OPS as *const _ as *mut _ },
            mem_desc: mr.desc() as usize as *mut c_void,
            key: mr.key(),
        },
        inner: mr,
    });
    // SAFETY: checked non-NULL.
    unsafe { *out = o as *mut fid_mr };
    Ok(0)
}

unsafe extern "C" fn mr_reg(
    dom: *mut fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    _offset: u64,
    _requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments per fi_mr(3); the buffer is only handed to the kernel.
    guard("fi_mr_reg", || unsafe { mr_common(dom, buf as u64, len, access, flags, mr, context) })
}

unsafe fn one_iov(iov: *const libc::iovec, count: usize) -> FiResult<(u64, usize)> {
    if count != 1 || iov.is_null() {
        return crate::fail!(FiError::INVAL, "fi_mr_regv: exactly one iov is supported (mr_iov_limit 1), got {count}");
    }
    // SAFETY: the caller passes `count` (= 1) iovecs.
    let v = unsafe { &*iov };
    Ok((v.iov_base as u64, v.iov_len))
}

unsafe extern "C" fn mr_regv(
    dom: *mut fid,
    iov: *const libc::iovec,
    count: usize,
    access: u64,
    _offset: u64,
    _requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    guard("fi_mr_regv", || {
        // SAFETY: arguments per fi_mr(3).
        let (a, l) = unsafe { one_iov(iov, count) }?;
        // SAFETY: as above.
        unsafe { mr_common(dom, a, l, access, flags, mr, context) }
    })
}

unsafe extern "C" fn mr_regattr(dom: *mut fid, attr: *const fi_mr_attr, flags: u64, mr: *mut *mut fid_mr) -> c_int {
    guard("fi_mr_regattr", || {
        if attr.is_null() {
            return crate::fail!(FiError::INVAL, "fi_mr_regattr: attr is NULL");
        }
        // SAFETY: checked non-NULL; valid per fi_mr(3).
        let a = unsafe { &*attr };
        if a.iface != FI_HMEM_SYSTEM {
            return crate::fail!(FiError::NOSYS, "fi_mr_regattr: device memory (iface {}) is not supported", a.iface);
        }
        if a.auth_key_size != 0 {
            return crate::fail!(FiError::INVAL, "fi_mr_regattr: authorization keys are not supported");
        }
        // SAFETY: per fi_mr(3).
        let (addr, len) = unsafe { one_iov(a.mr_iov, a.iov_count) }?;
        // SAFETY: as above.
        unsafe { mr_common(dom, addr, len, a.access, flags, mr, a.context) }
    })
}

unsafe extern "C" fn mr_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API. An MR never refuses; freeing it deregisters the memory.
    guard("fi_close(mr)", || unsafe { close_obj::<MrObj>(f, |_| Ok(())) })
}
