//! `fi_tostr` / `fi_tostr_r` of the drop-in core API: reads the application's
//! value or struct and prints it through the safe formatter in `src/tostr.rs`.
//! Exported with libfabric's symbol versions by `core_api/mod.rs`.

use std::cell::RefCell;
use std::ffi::{c_char, c_void};

use crate::fi::abi::*;
use super::info::{domain_from_c, ep_from_c, fabric_from_c, rx_from_c, tx_from_c};
use super::util::cstr_opt;
use crate::tostr::{self as t, Buf, Kind};

/// Size of `fi_tostr`'s own buffer (libfabric's is 8192 bytes, too).
const TOSTR_BUFSIZ: usize = 8192;

thread_local! {
    static TOSTR_BUF: RefCell<Vec<u8>> = RefCell::new(vec![0u8; TOSTR_BUFSIZ]);
}

/// Reads `n` bytes at `p`.
///
/// # Safety
/// `p` must have `n` readable bytes.
unsafe fn bytes_at(p: *const c_void, n: usize) -> Vec<u8> {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(p as *const u8, n) }.to_vec()
}

/// The text `ofi_straddr` gives for an address, `None` if libfabric prints nothing.
///
/// # Safety
/// `addr` must point to an address of `format` (as libfabric assumes), `len`
/// bytes long; we read no more than `len` bytes (except a C string for FI_ADDR_STR).
unsafe fn addr_text(format: u32, addr: *const c_void, len: usize) -> Option<String> {
    let fam = if len >= 2 {
        // SAFETY: at least 2 readable bytes.
        Some(u16::from_ne_bytes(unsafe { bytes_at(addr, 2) }.try_into().ok()?))
    } else {
        None
    };
    let need = t::addr_len(format, fam)?;
    if need > len {
        return None;
    }
    // SAFETY: need <= len readable bytes.
    let bytes = unsafe { bytes_at(addr, need) };
    let text = if format == crate::fi::consts::FI_ADDR_STR {
        // SAFETY: FI_ADDR_STR addresses are C strings.
        unsafe { cstr_opt(addr as *const c_char) }
    } else {
        None
    };
    t::straddr(format, &bytes, text.as_deref(), addr as usize)
}

/// `ofi_tostr_fid`: the fid's own `tostr` op if it has one, else `label%p`.
///
/// # Safety
/// `f` NULL or a readable fid whose ops table is NULL or valid.
unsafe fn fid_piece(b: &mut Buf, label: &str, f: *const fid) {
    let op = if f.is_null() {
        None
    } else {
        // SAFETY: readable fid per the contract.
        let ops = unsafe { (*f).ops };
        // SAFETY: ops valid when non-NULL; FI_CHECK_OP: the table must be large enough.
        if ops.is_null() || unsafe { (*ops).size } <= std::mem::offset_of!(fi_ops, tostr) {
            None
        } else {
            // SAFETY: as above.
            unsafe { (*ops).tostr }
        }
    };
    let Some(op) = op else {
        return t::fid_line(b, label, f as usize);
    };
    // libfabric hands the provider its buffer (with the text so far) and the room left.
    let cap = b.cap();
    let mut tmp = vec![0u8; cap.max(1)];
    tmp[..b.len()].copy_from_slice(b.bytes());
    // SAFETY: tmp has `cap` bytes, NUL-terminated after the current text; the
    // provider writes at most `cap - len` more bytes as fi_tostr(3) says.
    unsafe { op(f, tmp.as_mut_ptr() as *mut c_char, cap - b.len()) };
    let end = tmp.iter().position(|&c| c == 0).unwrap_or(cap.saturating_sub(1));
    *b = Buf::from_bytes(&tmp[..end], cap);
}

/// # Safety
/// `i` a valid fi_info (attribute pointers NULL or valid).
unsafe fn info(b: &mut Buf, i: &fi_info) {
    t::info_head(b, i.caps, i.mode, i.addr_format, i.src_addrlen, i.dest_addrlen);
    for (label, p, len) in [("src_addr", i.src_addr, i.src_addrlen), ("dest_addr", i.dest_addr, i.dest_addrlen)] {
        if p.is_null() {
            t::info_addr(b, label, None);
        } else {
            // SAFETY: the info's address buffers are `len` bytes long.
            let s = unsafe { addr_text(i.addr_format, p, len) };
            t::info_addr(b, label, Some(s.as_deref()));
        }
    }
    let pre = t::INFO_PREFIX;
    // SAFETY: handle is NULL or a fid.
    unsafe { fid_piece(b, &format!("{pre}handle: "), i.handle) };
    // SAFETY: attribute pointers are NULL or valid (the contract).
    unsafe {
        t::tx_attr(b, i.tx_attr.as_ref().map(tx_from_c).as_ref(), pre);
        t::rx_attr(b, i.rx_attr.as_ref().map(rx_from_c).as_ref(), pre);
        t::ep_attr(b, i.ep_attr.as_ref().map(ep_from_c).as_ref(), pre);
        let dom = i.domain_attr.as_ref().map(|d| (d.domain as usize, domain_from_c(d)));
        t::domain_attr(b, dom.as_ref().map(|(p, d)| (*p, d)), pre);
        t::fabric_attr(b, i.fabric_attr.as_ref().map(|f| fabric_from_c(f)).as_ref(), pre);
        fid_piece(b, &format!("{pre}nic: "), i.nic as *const fid);
    }
}

/// Formats `data` of type `datatype` into a buffer of `cap` bytes.
///
/// # Safety
/// `data` points to a value of the C type `datatype` names (fi_tostr(3)).
pub unsafe fn format(cap: usize, data: *const c_void, datatype: fi_type) -> Buf {
    let mut b = Buf::new(cap);
    let Some(kind) = Kind::from_c(datatype) else {
        b.cat("Unknown type");
        return b;
    };
    // SAFETY: per the contract, data points to the named type.
    unsafe {
        match kind {
            Kind::Info => info(&mut b, &*(data as *const fi_info)),
            Kind::TxAttr => t::tx_attr(&mut b, Some(&tx_from_c(&*(data as *const fi_tx_attr))), ""),
            Kind::RxAttr => t::rx_attr(&mut b, Some(&rx_from_c(&*(data as *const fi_rx_attr))), ""),
            Kind::EpAttr => t::ep_attr(&mut b, Some(&ep_from_c(&*(data as *const fi_ep_attr))), ""),
            Kind::DomainAttr => {
                let d = &*(data as *const fi_domain_attr);
                t::domain_attr(&mut b, Some((d.domain as usize, &domain_from_c(d))), "")
            }
            Kind::FabricAttr => t::fabric_attr(&mut b, Some(&fabric_from_c(&*(data as *const fi_fabric_attr))), ""),
            Kind::Fid => fid_piece(&mut b, "fid: ", data as *const fid),
            k => {
                // 64-bit flag words are read whole, enums as int (libfabric does the same).
                let v = match k {
                    Kind::Caps | Kind::OpFlags | Kind::MsgOrder | Kind::Mode | Kind::CqEventFlags => {
                        std::ptr::read_unaligned(data as *const u64)
                    }
                    Kind::Version => 0,
                    _ => std::ptr::read_unaligned(data as *const u32) as u64,
                };
                t::scalar(&mut b, k, v);
            }
        }
    }
    b
}

/// `fi_tostr_r(buf, len, data, datatype)`.
///
/// # Safety
/// As fi_tostr(3): `buf` has `len` writable bytes, `data` points to the named type.
pub unsafe fn tostr_r(buf: *mut c_char, len: usize, data: *const c_void, datatype: fi_type) -> *mut c_char {
    if data.is_null() || buf.is_null() || len == 0 {
        return std::ptr::null_mut();
    }
    let out = std::panic::catch_unwind(|| {
        // SAFETY: per the contract.
        unsafe { format(len, data, datatype) }
    });
    let Ok(b) = out else {
        // SAFETY: len >= 1 writable bytes.
        unsafe { *buf = 0 };
        return buf;
    };
    let n = b.len().min(len - 1);
    // SAFETY: n + 1 <= len writable bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(b.bytes().as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
    buf
}

/// `fi_tostr(data, datatype)`: a per-thread buffer, valid until the next call.
///
/// # Safety
/// As fi_tostr(3).
pub unsafe fn tostr(data: *const c_void, datatype: fi_type) -> *mut c_char {
    TOSTR_BUF.with(|b| {
        // A provider tostr op calling fi_tostr again finds the buffer busy.
        let Ok(mut b) = b.try_borrow_mut() else { return std::ptr::null_mut() };
        let len = b.len();
        // SAFETY: the thread's buffer has `len` bytes and lives as long as the thread.
        unsafe { tostr_r(b.as_mut_ptr() as *mut c_char, len, data, datatype) }
    })
}
