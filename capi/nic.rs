//! `info->nic` (fi_nic(3)): every info rsverbs hands out carries a `fid_nic`
//! whose device attributes name the RDMA device (`name`, the domain name) and
//! the build (`driver`: `rsverbs <version>+<commit>`), so `fi_info -v` — which
//! prints an info's nic through the nic's `tostr` op — shows which rsverbs
//! build answered. Nothing else is known without another device query, so
//! the other strings stay NULL and the link and bus are `FI_*_UNKNOWN`.
//!
//! Layout contract: libfabric's own `ofi_nic_dup` (rxm calls it on the infos
//! of its core provider) copies the fid — ops included — and duplicates the
//! three attribute structs and their strings with calloc/strdup. So a nic
//! carrying these ops may have been allocated by libfabric: it is always
//! exactly `fid_nic` + `fi_device_attr` + `fi_bus_attr` + `fi_link_attr`,
//! every piece C heap, nothing hidden behind it (`prov_attr` NULL), and the
//! close op frees exactly that, as libfabric's `ofi_nic_close` does.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::fi::abi::{fi_bus_attr, fi_device_attr, fi_link_attr, fi_ops, fid, fid_nic};
use crate::fi::consts::{FI_BUS_UNKNOWN, FI_CLASS_NIC, FI_DUP, FI_LINK_UNKNOWN};
use super::util::{c_calloc, c_strdup};

static NIC_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(nic_close),
    bind: Some(super::prov::bind_nosys),
    control: Some(nic_control),
    ops_open: Some(super::prov::ops_open_nosys),
    tostr: Some(nic_tostr),
    ops_set: None,
};

/// What the nic's `driver` reads: rsverbs and its build.
pub fn driver() -> String {
    format!("rsverbs {}", crate::tostr::BUILD_VERSION)
}

/// A nic for an info of device `device` (the domain name), or NULL when out of memory.
pub fn new_nic(device: Option<&str>) -> *mut fid_nic {
    let n = alloc_empty();
    if n.is_null() {
        return n;
    }
    // SAFETY: n and its attributes are fresh, zeroed, ours.
    unsafe {
        let d = &mut *(*n).device_attr;
        d.name = device.map_or(std::ptr::null_mut(), c_strdup);
        d.driver = c_strdup(&driver());
        if (device.is_some() && d.name.is_null()) || d.driver.is_null() {
            free_nic(n);
            return std::ptr::null_mut();
        }
    }
    n
}

/// A zeroed nic with its three attribute structs, carrying our ops.
fn alloc_empty() -> *mut fid_nic {
    let n = c_calloc::<fid_nic>();
    let d = c_calloc::<fi_device_attr>();
    let b = c_calloc::<fi_bus_attr>();
    let l = c_calloc::<fi_link_attr>();
    // SAFETY: each pointer is NULL or fresh calloc memory that we own.
    unsafe {
        if n.is_null() || d.is_null() || b.is_null() || l.is_null() {
            for q in [n as *mut c_void, d as _, b as _, l as _] {
                libc::free(q);
            }
            return std::ptr::null_mut();
        }
        (*n).fid.fclass = FI_CLASS_NIC;
        (*n).fid.ops = &NIC_OPS as *const fi_ops as *mut fi_ops;
        (*n).device_attr = d;
        (*n).bus_attr = b;
        (*n).link_attr = l;
        (*b).bus_type = FI_BUS_UNKNOWN;
        (*l).state = FI_LINK_UNKNOWN;
    }
    n
}

/// Frees a nic of the layout above (ours or one libfabric duplicated).
///
/// # Safety
/// `n` is NULL or a nic of that layout, not used afterwards.
pub unsafe fn free_nic(n: *mut fid_nic) {
    if n.is_null() {
        return;
    }
    // SAFETY: per the contract every piece is NULL or C heap.
    unsafe {
        let d = (*n).device_attr;
        if !d.is_null() {
            for s in [(*d).name, (*d).device_id, (*d).device_version, (*d).vendor_id, (*d).driver, (*d).firmware] {
                libc::free(s as *mut c_void);
            }
            libc::free(d as *mut c_void);
        }
        libc::free((*n).bus_attr as *mut c_void);
        let l = (*n).link_attr;
        if !l.is_null() {
            libc::free((*l).address as *mut c_void);
            libc::free((*l).network_type as *mut c_void);
            libc::free(l as *mut c_void);
        }
        libc::free(n as *mut c_void);
    }
}

/// `strdup` of a C string that may be NULL; Err when out of memory.
///
/// # Safety
/// `s` NULL or a C string.
unsafe fn dup_opt(s: *const c_char) -> Result<*mut c_char, ()> {
    if s.is_null() {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: per the contract.
    let d = unsafe { libc::strdup(s) };
    if d.is_null() {
        Err(())
    } else {
        Ok(d)
    }
}

/// A deep copy of `n` with our ops (fi_dupinfo's `fi_control(FI_DUP)`).
///
/// # Safety
/// `n` a nic of the layout above.
unsafe fn dup_nic(n: *const fid_nic) -> *mut fid_nic {
    let out = alloc_empty();
    if out.is_null() {
        return out;
    }
    // SAFETY: n valid per the contract; out fresh.
    let ok = unsafe {
        (|| -> Result<(), ()> {
            let (s, d) = ((*n).device_attr, &mut *(*out).device_attr);
            if !s.is_null() {
                d.name = dup_opt((*s).name)?;
                d.device_id = dup_opt((*s).device_id)?;
                d.device_version = dup_opt((*s).device_version)?;
                d.vendor_id = dup_opt((*s).vendor_id)?;
                d.driver = dup_opt((*s).driver)?;
                d.firmware = dup_opt((*s).firmware)?;
            }
            if !(*n).bus_attr.is_null() {
                *(*out).bus_attr = *(*n).bus_attr;
            }
            let (s, l) = ((*n).link_attr, &mut *(*out).link_attr);
            if !s.is_null() {
                l.address = dup_opt((*s).address)?;
                l.network_type = dup_opt((*s).network_type)?;
                l.mtu = (*s).mtu;
                l.speed = (*s).speed;
                l.state = (*s).state;
            }
            Ok(())
        })()
    };
    if ok.is_err() {
        // SAFETY: out is ours and of the layout.
        unsafe { free_nic(out) };
        return std::ptr::null_mut();
    }
    out
}

unsafe extern "C" fn nic_close(f: *mut fid) -> c_int {
    if f.is_null() {
        return -crate::fi::consts::FI_EINVAL;
    }
    // SAFETY: the core calls close once, on a nic carrying these ops.
    unsafe { free_nic(f as *mut fid_nic) };
    0
}

unsafe extern "C" fn nic_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    if f.is_null() || arg.is_null() {
        return -crate::fi::consts::FI_EINVAL;
    }
    if command != FI_DUP {
        return -crate::fi::consts::FI_ENOSYS;
    }
    // SAFETY: f is a nic carrying these ops; FI_DUP's arg is a `struct fid_nic **`.
    unsafe {
        let d = dup_nic(f as *const fid_nic);
        *(arg as *mut *mut fid_nic) = d;
        if d.is_null() {
            -crate::fi::consts::FI_ENOMEM
        } else {
            0
        }
    }
}

/// Appends to `buf` as libfabric's `ofi_strncatf(buf, len, ...)`: after the
/// text already there (at most `len` bytes looked at), never past `len` bytes.
///
/// # Safety
/// `buf` has `len` writable bytes.
unsafe fn cat(buf: *mut c_char, len: usize, s: &str) {
    if len == 0 {
        return;
    }
    // SAFETY: per the contract.
    let used = unsafe { libc::strnlen(buf, len) };
    if used + 1 >= len {
        return;
    }
    let n = s.len().min(len - used - 1);
    // SAFETY: used + n + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), (buf as *mut u8).add(used), n);
        *buf.add(used + n) = 0;
    }
}

/// `%s` of a C string as glibc's printf shows it (NULL: "(null)").
///
/// # Safety
/// `s` NULL or a C string.
unsafe fn text(s: *const c_char) -> String {
    if s.is_null() {
        "(null)".into()
    } else {
        // SAFETY: per the contract.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }
}

/// The text libfabric's own nic `tostr` (`ofi_nic_tostr`) writes, field for field.
///
/// # Safety
/// `n` a nic of the layout above.
pub unsafe fn nic_text(n: *const fid_nic) -> String {
    let mut o = String::from("    nic:\n");
    // SAFETY: per the contract.
    unsafe {
        let d = (*n).device_attr;
        if !d.is_null() {
            let d = &*d;
            o += "        fi_device_attr:\n";
            o += &format!("            name: {}\n", text(d.name));
            o += &format!("            device_id: {}\n", text(d.device_id));
            o += &format!("            device_version: {}\n", text(d.device_version));
            o += &format!("            vendor_id: {}\n", text(d.vendor_id));
            o += &format!("            driver: {}\n", text(d.driver));
            o += &format!("            firmware: {}\n", text(d.firmware));
        }
        let b = (*n).bus_attr;
        if !b.is_null() {
            let b = &*b;
            o += "        fi_bus_attr:\n";
            let bt = match b.bus_type {
                0 => "FI_BUS_UNKNOWN",
                1 => "FI_BUS_PCI",
                _ => "Unknown",
            };
            o += &format!("            bus_type: {bt}\n");
            if b.bus_type == 1 {
                let p = b.attr.pci;
                o += "            fi_pci_attr:\n";
                o += &format!("                domain_id: {}\n", p.domain_id);
                o += &format!("                bus_id: {}\n", p.bus_id);
                o += &format!("                device_id: {}\n", p.device_id);
                o += &format!("                function_id: {}\n", p.function_id);
            }
        }
        let l = (*n).link_attr;
        if !l.is_null() {
            let l = &*l;
            o += "        fi_link_attr:\n";
            o += &format!("            address: {}\n", text(l.address));
            o += &format!("            mtu: {}\n", l.mtu);
            o += &format!("            speed: {}\n", l.speed);
            let st = match l.state {
                0 => "FI_LINK_UNKNOWN",
                1 => "FI_LINK_DOWN",
                2 => "FI_LINK_UP",
                _ => "Unknown",
            };
            o += &format!("            state: {st}\n");
            o += &format!("            network_type: {}\n", text(l.network_type));
        }
    }
    o
}

unsafe extern "C" fn nic_tostr(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    if f.is_null() || buf.is_null() {
        return -crate::fi::consts::FI_EINVAL;
    }
    let r = std::panic::catch_unwind(|| {
        // SAFETY: f is a nic carrying these ops.
        let s = unsafe { nic_text(f as *const fid_nic) };
        // SAFETY: the caller gives `len` bytes at buf (fi_tostr(3)).
        unsafe { cat(buf, len, &s) };
    });
    if r.is_err() {
        return -crate::fi::consts::FI_EOTHER;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nic_names_device_and_build_and_dups_and_frees() {
        let n = new_nic(Some("rxe0"));
        assert!(!n.is_null());
        // SAFETY: n is ours.
        let t = unsafe { nic_text(n) };
        assert!(t.contains("            name: rxe0\n"), "{t}");
        assert!(t.contains(&format!("            driver: rsverbs {}\n", crate::tostr::BUILD_VERSION)), "{t}");
        assert!(t.contains("            bus_type: FI_BUS_UNKNOWN\n"), "{t}");
        assert!(t.contains("            state: FI_LINK_UNKNOWN\n"), "{t}");
        let mut d: *mut fid_nic = std::ptr::null_mut();
        // SAFETY: n is a nic with our ops.
        let rc = unsafe { nic_control(n as *mut fid, FI_DUP, &mut d as *mut *mut fid_nic as *mut c_void) };
        assert_eq!(rc, 0);
        assert!(!d.is_null() && d != n);
        // SAFETY: both are ours.
        unsafe {
            assert_eq!(nic_text(d), t);
            assert_ne!((*(*d).device_attr).driver, (*(*n).device_attr).driver, "a dup shares a string");
            assert_eq!(nic_control(n as *mut fid, 12345, std::ptr::null_mut()), -crate::fi::consts::FI_EINVAL);
            let mut x: *mut fid_nic = std::ptr::null_mut();
            assert_eq!(
                nic_control(n as *mut fid, 12345, &mut x as *mut *mut fid_nic as *mut c_void),
                -crate::fi::consts::FI_ENOSYS
            );
            assert_eq!(nic_close(d as *mut fid), 0);
            assert_eq!(nic_close(n as *mut fid), 0);
        }
    }

    #[test]
    fn tostr_appends_within_the_room_given() {
        let n = new_nic(Some("rxe0"));
        let mut buf = [0u8; 40];
        buf[..4].copy_from_slice(b"ab\n\0");
        // SAFETY: 40 bytes; n ours.
        unsafe {
            assert_eq!(nic_tostr(n as *const fid, buf.as_mut_ptr() as *mut c_char, buf.len()), 0);
            let s = CStr::from_ptr(buf.as_ptr() as *const c_char).to_str().unwrap();
            assert_eq!(s.len(), 39);
            assert!(s.starts_with("ab\n    nic:\n"), "{s}");
            free_nic(n);
        }
    }
}
