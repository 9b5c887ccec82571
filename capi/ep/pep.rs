//! Passive endpoints (`fi_passive_ep`): their object, fi_ops_ep and
//! fi_ops_cm tables, listen, reject and setname.

use super::*;

#[repr(C)]
pub struct PepObj {
    pub fid: fid_pep,
    pub inner: Arc<Pep>,
}

impl FiObject for PepObj {
    const CLASS: usize = FI_CLASS_PEP;
    const NAME: &'static str = "passive endpoint";
    fn fi_ops() -> *const fi_ops {
        &PEP_FI_OPS
    }
}

pub(super) static PEP_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(pep_close),
    bind: Some(pep_bind),
    control: Some(pep_control),
    ops_open: Some(ops_open_nosys),
    tostr: None,
    ops_set: None,
};

pub(crate) static PEP_OPS: fi_ops_ep = fi_ops_ep {
    size: std::mem::size_of::<fi_ops_ep>(),
    cancel: Some(pep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_size_left),
    tx_size_left: Some(ep_size_left),
};

pub(crate) static PEP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: std::mem::size_of::<fi_ops_cm>(),
    setname: Some(pep_setname),
    getname: Some(ep_getname),
    getpeer: Some(pep_getpeer),
    connect: Some(pep_connect),
    listen: Some(pep_listen),
    accept: Some(pep_accept),
    reject: Some(pep_reject),
    shutdown: Some(pep_shutdown),
    join: Some(ep_join),
};

pub unsafe extern "C" fn pep_open(fabric: *mut fid_fabric, info: *mut fi_info, out: *mut *mut fid_pep, context: *mut c_void) -> c_int {
    guard("fi_passive_ep", || {
        // SAFETY: fabric is a fid per the API.
        let f = unsafe { obj::<FabricObj>(fabric as *const fid) }?;
        let out = nonnull(out, "fi_passive_ep: pep")?;
        let info = nonnull(info, "fi_passive_ep: info")?;
        // SAFETY: a valid fi_info per the API.
        let i = unsafe { crate::capi::info::from_c(info, 0) }?;
        let pep = Pep::open(&f.inner, &i)?;
        let o = into_c(PepObj {
            fid: fid_pep {
                fid: fid { fclass: FI_CLASS_PEP, context, ops: &PEP_FI_OPS as *const _ as *mut _ },
                ops: &PEP_OPS as *const _ as *mut _,
                cm: &PEP_CM_OPS as *const _ as *mut _,
            },
            inner: pep,
        });
        // SAFETY: o is our fresh box.
        unsafe { (*o).inner.set_fid(o as usize) };
        PEPS.lock().insert(o as usize);
        // SAFETY: checked non-NULL.
        unsafe { *out = o as *mut fid_pep };
        Ok(0)
    })
}

/// The passive endpoint behind an `fi_info->handle`, if it is one of ours.
///
/// # Safety
/// `h` must point to a readable `struct fid` (the libfabric contract).
pub unsafe fn pep_lookup(h: *mut fid) -> Option<Arc<Pep>> {
    let peps = PEPS.lock();
    if !peps.contains(&(h as usize)) {
        return None;
    }
    // SAFETY: registered pointers are live PepObj boxes (removed before they are freed, under this lock).
    Some(unsafe { &*(h as *const PepObj) }.inner.clone())
}

/// Live passive endpoints: an `info->handle` is dereferenced only if it is
/// one of them (a bogus handle gives `-FI_EINVAL`, never a wild read).
pub(super) static PEPS: Lazy<Mutex<HashSet<usize>>> = Lazy::new(|| Mutex::new(HashSet::new()));

pub(super) unsafe fn pep<'a>(p: *mut fid_pep) -> FiResult<&'a PepObj> {
    // SAFETY: p is a fid per the API.
    unsafe { obj::<PepObj>(p as *const fid) }
}

pub(super) unsafe extern "C" fn pep_close(f: *mut fid) -> c_int {
    // SAFETY: f is a fid per the API.
    guard("fi_close(pep)", || unsafe {
        close_obj::<PepObj>(f, |o| {
            o.inner.close()?;
            PEPS.lock().remove(&(f as usize));
            Ok(())
        })
    })
}

pub(super) unsafe extern "C" fn pep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    guard("fi_pep_bind", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<PepObj>(f) }?;
        // SAFETY: bfid is a fid per the API.
        match unsafe { class_of(bfid) }? {
            // SAFETY: as above.
            FI_CLASS_EQ => o.inner.bind_eq(&unsafe { obj::<EqObj>(bfid) }?.inner, flags).map(|_| 0),
            c => crate::fail!(FiError::INVAL, "fi_pep_bind: cannot bind an object of class {c} (only an EQ)"),
        }
    })
}

pub(super) unsafe extern "C" fn pep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    guard("fi_control(pep)", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<PepObj>(f) }?;
        match command {
            FI_BACKLOG => {
                let p = nonnull(arg as *mut c_int, "FI_BACKLOG argument")?;
                // SAFETY: an int per fi_control(3).
                let v = unsafe { *p };
                if v <= 0 {
                    return crate::fail!(FiError::INVAL, "FI_BACKLOG: {v} is not positive");
                }
                o.inner.set_backlog(v as u32);
                Ok(0)
            }
            // SAFETY: delegated with the same arguments.
            c => Ok(unsafe { control_nosys(f, c, arg) }),
        }
    })
}

pub(super) unsafe extern "C" fn pep_cancel(_f: fid_t, _c: *mut c_void) -> isize {
    FiError::NOSYS.neg() as isize
}

pub(super) unsafe extern "C" fn pep_setname(f: fid_t, addr: *mut c_void, addrlen: usize) -> c_int {
    guard("fi_setname", || {
        // SAFETY: f is a fid per the API.
        let o = unsafe { obj::<PepObj>(f) }?;
        // SAFETY: addr has addrlen bytes.
        let Some(a) = (unsafe { crate::capi::info::read_addr(addr, addrlen, "fi_setname") })? else {
            return crate::fail!(FiError::INVAL, "fi_setname: no address");
        };
        o.inner.setname(&a).map(|_| 0)
    })
}

pub(super) unsafe extern "C" fn pep_getpeer(_e: *mut fid_ep, _a: *mut c_void, _l: *mut usize) -> c_int {
    FiError::NOSYS.neg()
}
pub(super) unsafe extern "C" fn pep_connect(_e: *mut fid_ep, _a: *const c_void, _p: *const c_void, _l: usize) -> c_int {
    FiError::NOSYS.neg()
}
pub(super) unsafe extern "C" fn pep_accept(_e: *mut fid_ep, _p: *const c_void, _l: usize) -> c_int {
    FiError::NOSYS.neg()
}
pub(super) unsafe extern "C" fn pep_shutdown(_e: *mut fid_ep, _f: u64) -> c_int {
    FiError::NOSYS.neg()
}

pub(super) unsafe extern "C" fn pep_listen(p: *mut fid_pep) -> c_int {
    guard("fi_listen", || {
        // SAFETY: p is a fid per the API.
        unsafe { pep(p) }?.inner.listen().map(|_| 0)
    })
}

pub(super) unsafe extern "C" fn pep_reject(p: *mut fid_pep, handle: fid_t, param: *const c_void, len: usize) -> c_int {
    guard("fi_reject", || {
        // SAFETY: p is a fid per the API.
        unsafe { pep(p) }?;
        // SAFETY: only registered handles are dereferenced.
        let Some(req) = (unsafe { connreq_lookup(handle) }) else {
            return crate::fail!(FiError::INVAL, "fi_reject: not a pending connection request");
        };
        // SAFETY: param has len bytes.
        let data = unsafe { cm_param(param, len, "fi_reject") }?;
        let r = req.reject(data);
        connreq_free(handle);
        r.map(|_| 0)
    })
}
