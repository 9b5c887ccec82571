//! The memory of the `fi_info`s the core API hands out: one C-heap
//! allocation per struct and string, deep copies, and the shells that carry
//! the shorter structs of old ABI versions (FABRIC_1.0-1.8).

use super::*;

/// `fi_allocinfo()`: a zeroed fi_info with all five attribute structs.
pub(super) fn allocinfo() -> *mut fi_info {
    let p = c_calloc::<fi_info>();
    if p.is_null() {
        return p;
    }
    // SAFETY: fresh zeroed info, ours.
    unsafe {
        (*p).tx_attr = c_calloc();
        (*p).rx_attr = c_calloc();
        (*p).ep_attr = c_calloc();
        (*p).domain_attr = c_calloc::<fi_domain_attr_ext>() as *mut fi_domain_attr;
        (*p).fabric_attr = c_calloc();
        let i = &*p;
        if i.tx_attr.is_null() || i.rx_attr.is_null() || i.ep_attr.is_null() || i.domain_attr.is_null() || i.fabric_attr.is_null() {
            crate::capi::info::free_chain(p);
            return std::ptr::null_mut();
        }
    }
    crate::capi::embed::note_infos(1, 0);
    p
}

/// Copies `n` bytes of an attribute struct into a fresh zeroed C-heap `T`.
///
/// # Safety
/// `src` NULL or `n` readable bytes; `n <= size_of::<T>()`.
pub(super) unsafe fn dup_prefix<T>(src: *const T, n: usize) -> Result<*mut T, ()> {
    if src.is_null() {
        return Ok(std::ptr::null_mut());
    }
    let d = c_calloc::<T>();
    if d.is_null() {
        return Err(());
    }
    // SAFETY: per the contract; d has size_of::<T>() >= n bytes.
    unsafe { std::ptr::copy_nonoverlapping(src as *const u8, d as *mut u8, n.min(size_of::<T>())) };
    Ok(d)
}

/// Sets `*slot` to a C-heap copy of the whole attribute struct at `src` (NULL
/// stays NULL), then lets `deep` replace the pointers the copy shares with
/// `src` by copies of their own. `deep` clears every such pointer before it
/// allocates, so that when it fails the caller's cleanup (which frees what the
/// copy points to) frees nothing of `src`.
///
/// # Safety
/// `src` NULL or a valid `T`.
pub(super) unsafe fn dup_attr<T>(slot: &mut *mut T, src: *const T, deep: impl FnOnce(&mut T, &T) -> Result<(), ()>) -> Result<(), ()> {
    // SAFETY: per the contract.
    *slot = unsafe { dup_prefix(src, size_of::<T>()) }?;
    if slot.is_null() {
        return Ok(());
    }
    // SAFETY: *slot is our fresh copy of `src`, which is therefore non-NULL and valid.
    unsafe { deep(&mut **slot, &*src) }
}

/// # Safety
/// `p` NULL or `n` readable bytes.
pub(super) unsafe fn dup_bytes(p: *const c_void, n: usize) -> Result<*mut c_void, ()> {
    if p.is_null() || n == 0 {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: per the contract.
    let d = c_memdup(unsafe { std::slice::from_raw_parts(p as *const u8, n) });
    if d.is_null() {
        Err(())
    } else {
        Ok(d)
    }
}

/// # Safety
/// `p` NULL or a C string.
pub(super) unsafe fn dup_str(p: *const c_char) -> Result<*mut c_char, ()> {
    if p.is_null() {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: per the contract.
    let d = unsafe { libc::strdup(p) };
    if d.is_null() {
        Err(())
    } else {
        Ok(d)
    }
}

/// `fi_dupinfo(info)` for a current-layout info: a deep copy of the head only.
///
/// # Safety
/// `src` a valid fi_info.
pub(super) unsafe fn dupinfo_deep(src: *const fi_info) -> *mut fi_info {
    // SAFETY: per the contract, every pointer is NULL or valid.
    unsafe {
        let s = &*src;
        let d = c_calloc::<fi_info>();
        if d.is_null() {
            return d;
        }
        *d = *s;
        let dd = &mut *d;
        dd.next = std::ptr::null_mut();
        dd.src_addr = std::ptr::null_mut();
        dd.dest_addr = std::ptr::null_mut();
        dd.tx_attr = std::ptr::null_mut();
        dd.rx_attr = std::ptr::null_mut();
        dd.ep_attr = std::ptr::null_mut();
        dd.domain_attr = std::ptr::null_mut();
        dd.fabric_attr = std::ptr::null_mut();
        dd.nic = std::ptr::null_mut();
        let ok = (|| -> Result<(), ()> {
            dd.src_addr = dup_bytes(s.src_addr, s.src_addrlen)?;
            dd.dest_addr = dup_bytes(s.dest_addr, s.dest_addrlen)?;
            dd.tx_attr = dup_prefix(s.tx_attr, size_of::<fi_tx_attr>())?;
            dd.rx_attr = dup_prefix(s.rx_attr, size_of::<fi_rx_attr>())?;
            dup_attr(&mut dd.ep_attr, s.ep_attr, |e, o| {
                e.auth_key = std::ptr::null_mut();
                e.auth_key = dup_bytes(o.auth_key as *const c_void, o.auth_key_size)? as *mut u8;
                Ok(())
            })?;
            // Today's layout is libfabric 2.5's (fi_domain_attr_ext).
            let mut dom: *mut fi_domain_attr_ext = std::ptr::null_mut();
            let r = dup_attr(&mut dom, s.domain_attr as *const fi_domain_attr_ext, |x, o| {
                (x.base.name, x.base.auth_key) = (std::ptr::null_mut(), std::ptr::null_mut());
                x.base.name = dup_str(o.base.name)?;
                x.base.auth_key = dup_bytes(o.base.auth_key as *const c_void, o.base.auth_key_size)? as *mut u8;
                Ok(())
            });
            dd.domain_attr = dom as *mut fi_domain_attr;
            r?;
            dup_attr(&mut dd.fabric_attr, s.fabric_attr, |x, o| {
                (x.name, x.prov_name) = (std::ptr::null_mut(), std::ptr::null_mut());
                x.name = dup_str(o.name)?;
                x.prov_name = dup_str(o.prov_name)?;
                Ok(())
            })?;
            if !s.nic.is_null() {
                // As libfabric: the nic duplicates itself (fi_control(FI_DUP)).
                let nic = s.nic as *mut fid;
                let ops = (*nic).ops;
                let ctl = if ops.is_null() { None } else { (*ops).control };
                let Some(ctl) = ctl else { return Err(()) };
                let mut out: *mut fid_nic = std::ptr::null_mut();
                if ctl(nic, FI_DUP, &mut out as *mut *mut fid_nic as *mut c_void) != 0 {
                    return Err(());
                }
                dd.nic = out;
            }
            Ok(())
        })();
        if ok.is_err() {
            free_one(d);
            tracing::warn!("fi_dupinfo: out of memory");
            return std::ptr::null_mut();
        }
        crate::capi::embed::note_infos(1, 0);
        d
    }
}

/// Frees one info (not its `next`), closing its nic as libfabric does.
///
/// # Safety
/// `p` an info of C-heap pieces, not used afterwards.
pub(super) unsafe fn free_one(p: *mut fi_info) {
    // SAFETY: per the contract.
    unsafe {
        let nic = (*p).nic;
        if !nic.is_null() {
            let f = nic as *mut fid;
            if !(*f).ops.is_null() {
                if let Some(close) = (*(*f).ops).close {
                    close(f);
                }
            }
            (*p).nic = std::ptr::null_mut();
        }
        (*p).next = std::ptr::null_mut();
        crate::capi::info::free_chain(p);
    }
}

/// The struct sizes of an old fi_info ABI (each struct is a prefix of today's).
#[derive(Clone, Copy)]
pub(super) struct OldAbi {
    pub(super) info: usize,
    pub(super) tx: usize,
    pub(super) ep: usize,
    pub(super) domain: usize,
    pub(super) fabric: usize,
}

pub(super) const ABI_1_0: OldAbi = OldAbi {
    info: offset_of!(fi_info, nic),
    tx: offset_of!(fi_tx_attr, tclass),
    ep: offset_of!(fi_ep_attr, auth_key_size),
    domain: offset_of!(fi_domain_attr, cntr_cnt),
    fabric: offset_of!(fi_fabric_attr, api_version),
};
pub(super) const ABI_1_1: OldAbi = OldAbi {
    info: offset_of!(fi_info, nic),
    tx: offset_of!(fi_tx_attr, tclass),
    ep: size_of::<fi_ep_attr>(),
    domain: offset_of!(fi_domain_attr, tclass),
    fabric: size_of::<fi_fabric_attr>(),
};
pub(super) const ABI_1_2: OldAbi = OldAbi { info: size_of::<fi_info>(), ..ABI_1_1 };
/// FABRIC_1.3: libfabric 1.5 to 1.19 (Debian 12's 1.17): `fi_domain_attr` ends at `tclass`.
pub(super) const ABI_1_3: OldAbi = OldAbi {
    info: size_of::<fi_info>(),
    tx: size_of::<fi_tx_attr>(),
    ep: size_of::<fi_ep_attr>(),
    domain: domain_attr_size(FI_VERSION(1, 17)),
    fabric: size_of::<fi_fabric_attr>(),
};
/// FABRIC_1.7: libfabric 1.20 to 1.22 (`max_ep_auth_key`).
pub(super) const ABI_1_7: OldAbi = OldAbi { domain: domain_attr_size(FI_VERSION(1, 20)), ..ABI_1_3 };
/// FABRIC_1.8: libfabric 2.0 to 2.4 (`max_group_id`). Today's, FABRIC_1.9, is 2.5's.
pub(super) const ABI_1_8: OldAbi = OldAbi { domain: domain_attr_size(FI_VERSION(2, 0)), ..ABI_1_3 };

/// A current-layout shell around an old-layout info: the structs are copied
/// (new fields zeroed), strings and addresses are borrowed. Free with `free_shell`.
///
/// # Safety
/// `old` a valid info of the `abi` layout.
pub(super) unsafe fn upgrade_shell(old: *const c_void, abi: OldAbi) -> Option<*mut fi_info> {
    // SAFETY: per the contract: every struct is at least as long as `abi` says.
    unsafe {
        let n = dup_prefix(old as *const fi_info, abi.info).ok()?;
        let i = &mut *n;
        i.next = std::ptr::null_mut();
        if abi.info <= offset_of!(fi_info, nic) {
            i.nic = std::ptr::null_mut();
        }
        let r = (|| -> Result<(), ()> {
            i.tx_attr = dup_prefix(i.tx_attr, abi.tx)?;
            i.rx_attr = dup_prefix(i.rx_attr, size_of::<fi_rx_attr>())?;
            i.ep_attr = dup_prefix(i.ep_attr, abi.ep)?;
            i.domain_attr = dup_prefix(i.domain_attr as *const fi_domain_attr_ext, abi.domain)? as *mut fi_domain_attr;
            i.fabric_attr = dup_prefix(i.fabric_attr, abi.fabric)?;
            Ok(())
        })();
        if r.is_err() {
            free_shell(n);
            return None;
        }
        Some(n)
    }
}

/// # Safety
/// `p` from `upgrade_shell`.
pub(super) unsafe fn free_shell(p: *mut fi_info) {
    // SAFETY: per the contract: the shells are ours, their contents borrowed.
    unsafe {
        let i = &*p;
        for q in [i.tx_attr as *mut c_void, i.rx_attr as _, i.ep_attr as _, i.domain_attr as _, i.fabric_attr as _] {
            libc::free(q);
        }
        libc::free(p as *mut c_void);
    }
}
