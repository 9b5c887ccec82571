//! Address-vector objects (`fi_av_open` and `fi_ops_av`).

use std::ffi::{c_char, c_int, c_void};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::fi::abi::*;
use crate::fi::consts::*;
use super::domain::DomainObj;
use super::prov::{control_nosys, ops_open_nosys};
use super::util::*;
use crate::av::{straddr, Av, AvAttr};
use crate::error::{FiError, FiResult};
use crate::sys;

#[repr(C)]
pub struct AvObj {
    pub fid: fid_av,
    pub inner: Arc<Av>,
}

impl FiObject for AvObj {
    const CLASS: usize = FI_CLASS_AV;
    const NAME: &'static str = "address vector";
    fn fi_ops() -> *const fi_ops {
        &AV_FI_OPS
    }
}

static AV_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(av_close),
    bind: Some(av_bind),
    control: Some(control_nosys),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

static AV_OPS: fi_ops_av = fi_ops_av {
    size: std::mem::size_of::<fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(av_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(av_set),
};

/// `fi_av_open` (from the domain's ops table).
///
/// # Safety
/// Arguments as for `fi_av_open(3)`.
pub unsafe extern "C" fn av_open(domain: *mut fid_domain, attr: *mut fi_av_attr, out: *mut *mut fid_av, context: *mut c_void) -> c_int {
    guard("fi_av_open", || {
        // SAFETY: domain is a fid per the API.
        let d = unsafe { obj::<DomainObj>(domain as *const fid) }?;
        let out = nonnull(out, "fi_av_open: av")?;
        let attr = nonnull(attr, "fi_av_open: attr")?;
        // SAFETY: checked non-NULL; valid per fi_av(3).
        let a = unsafe { &*attr };
        let a = AvAttr { av_type: a.type_, rx_ctx_bits: a.rx_ctx_bits, count: a.count, named: !a.name.is_null(), flags: a.flags };
        if d.inner.info.ep.type_ == FI_EP_DGRAM {
            // DGRAM domains: FI_ADDR_IB_UD addresses and address handles (capi/dgram.rs).
            // SAFETY: `out` checked non-NULL above.
            return unsafe { super::dgram::av_open(d, &a, out, context) };
        }
        let av = Av::open(&d.inner, &a)?;
        let o = into_c(AvObj {
            fid: fid_av {
                fid: fid { fclass: FI_CLASS_AV, context, ops: &AV_FI_OPS as *const _ as *mut _ },
                ops: &AV_OPS as *const _ as *mut _,
            },
            inner: av,
        });
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_av };
        Ok(0)
    })
}

unsafe fn av<'a>(p: *mut fid_av) -> FiResult<&'a AvObj> {
    // SAFETY: p is a fid per the API.
    unsafe { obj::<AvObj>(p as *const fid) }
}

unsafe extern "C" fn av_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(av)", || unsafe { close_obj::<AvObj>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn av_bind(f: *mut fid, bfid: *mut fid, _flags: u64) -> c_int {
    guard("fi_av_bind", || {
        // SAFETY: f is a fid per the API.
        unsafe { obj::<AvObj>(f) }?;
        // SAFETY: bfid is a fid per the API.
        match unsafe { class_of(bfid) }? {
            FI_CLASS_EQ => crate::fail!(FiError::NOSYS, "fi_av_bind: asynchronous inserts (an EQ) are not supported"),
            c => crate::fail!(FiError::INVAL, "fi_av_bind: cannot bind an object of class {c}"),
        }
    })
}

const INSERT_FLAGS: u64 = FI_MORE | FI_SYNC_ERR;

/// Reports the outcome of an insert: fi_addr per entry (FI_ADDR_NOTAVAIL on
/// failure), per-entry errors with FI_SYNC_ERR; returns the successes.
///
/// # Safety
/// `fi_addr` is NULL or holds `res.len()` entries; with FI_SYNC_ERR `context`
/// holds `res.len()` ints (fi_av(3)).
unsafe fn report(res: &[FiResult<u64>], fi_addr: *mut fi_addr_t, flags: u64, context: *mut c_void) -> c_int {
    let mut ok = 0;
    for (i, r) in res.iter().enumerate() {
        if !fi_addr.is_null() {
            // SAFETY: per the contract.
            unsafe { *fi_addr.add(i) = *r.as_ref().unwrap_or(&FI_ADDR_NOTAVAIL) };
        }
        if flags & FI_SYNC_ERR != 0 && !context.is_null() {
            // SAFETY: per the contract.
            unsafe { *(context as *mut c_int).add(i) = r.as_ref().map_or_else(|e| e.neg(), |_| 0) };
        }
        if r.is_ok() {
            ok += 1;
        }
    }
    ok
}

unsafe extern "C" fn av_insert(a: *mut fid_av, addr: *const c_void, count: usize, fi_addr: *mut fi_addr_t, flags: u64, context: *mut c_void) -> c_int {
    guard("fi_av_insert", || {
        // SAFETY: a is a fid per the API.
        let o = unsafe { av(a) }?;
        if flags & !INSERT_FLAGS != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_av_insert: unsupported flags {:#x}", flags & !INSERT_FLAGS);
        }
        if count == 0 {
            return Ok(0);
        }
        if addr.is_null() {
            return crate::fail!(FiError::INVAL, "fi_av_insert: addr is NULL with count {count}");
        }
        // The buffer packs `count` sockaddrs, each as long as its family says.
        let mut parsed: Vec<Option<SocketAddr>> = Vec::with_capacity(count);
        let mut p = addr as *const u8;
        for i in 0..count {
            // SAFETY: entry i starts at p (the buffer holds `count` addresses); the
            // family field is its first two bytes.
            let family = unsafe { (p as *const u16).read_unaligned() } as i32;
            let len = match family {
                libc::AF_INET => sys::SOCKADDR_IN_LEN,
                libc::AF_INET6 => sys::SOCKADDR_IN6_LEN,
                f => {
                    // The size of an unknown family is unknown: the rest cannot be located.
                    tracing::warn!("fi_av_insert: address {i} has family {f}, not AF_INET/AF_INET6; it and the rest are refused");
                    parsed.resize(count, None);
                    break;
                }
            };
            // SAFETY: an address of this family is `len` bytes long (fi_av(3)).
            let bytes = unsafe { std::slice::from_raw_parts(p, len) };
            parsed.push(sys::sockaddr_parse(bytes));
            // SAFETY: stays within (or one past) the caller's buffer.
            p = unsafe { p.add(len) };
        }
        let res = o.inner.insert(&parsed);
        for (i, r) in res.iter().enumerate() {
            if let Err(e) = r {
                tracing::warn!("fi_av_insert: address {i} refused ({})", e.0);
            }
        }
        // SAFETY: fi_addr/context per fi_av(3).
        Ok(unsafe { report(&res, fi_addr, flags, context) })
    })
}

unsafe extern "C" fn av_insertsvc(
    a: *mut fid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    guard("fi_av_insertsvc", || {
        // SAFETY: a is a fid per the API.
        let o = unsafe { av(a) }?;
        if flags & !INSERT_FLAGS != 0 {
            return crate::fail!(FiError::BADFLAGS, "fi_av_insertsvc: unsupported flags {:#x}", flags & !INSERT_FLAGS);
        }
        // SAFETY: NULL or C strings.
        let (node, service) = unsafe { (cstr_opt(node), cstr_opt(service)) };
        let (Some(node), Some(service)) = (node, service) else {
            return crate::fail!(FiError::INVAL, "fi_av_insertsvc: node and service are required");
        };
        let parsed = resolve(&node, &service);
        let res = o.inner.insert(&[parsed]);
        if let Some(Err(e)) = res.first() {
            tracing::warn!("fi_av_insertsvc: {node}:{service} refused ({})", e.0);
        }
        // SAFETY: fi_addr/context per fi_av(3) (one entry).
        Ok(unsafe { report(&res, fi_addr, flags, context) })
    })
}

/// Resolves a node and a numeric service to one address (IPv4 preferred).
fn resolve(node: &str, service: &str) -> Option<SocketAddr> {
    use std::net::ToSocketAddrs;
    let port: u16 = match service.parse() {
        Ok(p) => p,
        Err(_) => {
            tracing::warn!("fi_av_insertsvc: service '{service}' is not a port number");
            return None;
        }
    };
    let mut v: Vec<SocketAddr> = match (node, port).to_socket_addrs() {
        Ok(it) => it.collect(),
        Err(e) => {
            tracing::warn!("fi_av_insertsvc: cannot resolve '{node}': {e}");
            return None;
        }
    };
    v.sort_by_key(|a| !a.is_ipv4());
    v.into_iter().next()
}

unsafe extern "C" fn av_insertsym(
    a: *mut fid_av,
    _node: *const c_char,
    _nodecnt: usize,
    _service: *const c_char,
    _svccnt: usize,
    _fi_addr: *mut fi_addr_t,
    _flags: u64,
    _context: *mut c_void,
) -> c_int {
    guard("fi_av_insertsym", || {
        // SAFETY: a is a fid per the API.
        unsafe { av(a) }?;
        crate::fail!(FiError::NOSYS, "fi_av_insertsym: not supported (use fi_av_insert or fi_av_insertsvc)")
    })
}

unsafe extern "C" fn av_remove(a: *mut fid_av, fi_addr: *mut fi_addr_t, count: usize, flags: u64) -> c_int {
    guard("fi_av_remove", || {
        // SAFETY: a is a fid per the API.
        let o = unsafe { av(a) }?;
        // SAFETY: fi_addr holds `count` values per the API.
        unsafe { remove_checked(fi_addr, count, flags, |v| o.inner.remove(v)) }
    })
}

/// `fi_av_remove` of any address vector: checks the arguments (flags 0,
/// `fi_addr` non-NULL unless `count` is 0) and hands the addresses to `remove`.
///
/// # Safety
/// `fi_addr` NULL or holding `count` values.
pub(crate) unsafe fn remove_checked(
    fi_addr: *mut fi_addr_t,
    count: usize,
    flags: u64,
    remove: impl FnOnce(&[fi_addr_t]) -> FiResult<()>,
) -> FiResult<c_int> {
    if flags != 0 {
        return crate::fail!(FiError::BADFLAGS, "fi_av_remove: flags must be 0");
    }
    if count == 0 {
        return Ok(0);
    }
    if fi_addr.is_null() {
        return crate::fail!(FiError::INVAL, "fi_av_remove: fi_addr is NULL with count {count}");
    }
    // SAFETY: the caller passes `count` fi_addr_t values.
    remove(unsafe { std::slice::from_raw_parts(fi_addr, count) })?;
    Ok(0)
}

unsafe extern "C" fn av_lookup(a: *mut fid_av, fi_addr: fi_addr_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard("fi_av_lookup", || {
        // SAFETY: a is a fid per the API.
        let o = unsafe { av(a) }?;
        let addrlen = nonnull(addrlen, "fi_av_lookup: addrlen")?;
        let Some(sa) = o.inner.lookup(fi_addr) else {
            return crate::fail!(FiError::INVAL, "fi_av_lookup: fi_addr {fi_addr:#x} is not in the address vector");
        };
        // SAFETY: (addr, addrlen) per fi_av(3); addrlen checked non-NULL.
        unsafe { write_addr_truncated(&sys::sockaddr_bytes(&sa), addr, addrlen) };
        Ok(0)
    })
}

unsafe extern "C" fn av_straddr(a: *mut fid_av, addr: *const c_void, buf: *mut c_char, len: *mut usize) -> *const c_char {
    let r = std::panic::catch_unwind(|| -> FiResult<()> {
        // SAFETY: a is a fid per the API.
        unsafe { av(a) }?;
        let len = nonnull(len, "fi_av_straddr: len")?;
        // SAFETY: addr is NULL or a sockaddr whose family gives its size (fi_av(3)).
        let sa = unsafe { sys::sockaddr_from_ptr(addr as *const libc::sockaddr) };
        let s = match sa {
            Some(sa) => straddr(&sa),
            None => "fi_addr_format_unspec://".to_string(),
        };
        // SAFETY: caller-owned size_t; buf has *len bytes.
        unsafe {
            copy_cstr(&s, buf, *len);
            *len = s.len() + 1;
        }
        Ok(())
    });
    match r {
        Ok(Ok(())) => buf,
        _ => std::ptr::null(),
    }
}

unsafe extern "C" fn av_set(a: *mut fid_av, _attr: *mut fi_av_set_attr, _set: *mut *mut fid_av_set, _ctx: *mut c_void) -> c_int {
    guard("fi_av_set", || {
        // SAFETY: a is a fid per the API.
        unsafe { av(a) }?;
        crate::fail!(FiError::NOSYS, "fi_av_set: AV sets (collectives) are not supported")
    })
}
