//! `fi_param_define`/`fi_param_get`/`fi_getparams`/`fi_freeparams`: the
//! parameters providers define, read from `FI_<PROV>_<NAME>` variables.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Param {
    env: String,
    type_: fi_param_type,
    help: String,
}

/// Defined parameters by environment variable name. rsverbs' own knobs are
/// defined up front (as its provider would have defined them in a core).
pub(super) static PARAMS: Mutex<Option<BTreeMap<String, Param>>> = Mutex::new(None);

pub(super) fn env_name(prov: Option<&str>, name: &str) -> String {
    match prov {
        Some(p) => format!("FI_{}_{}", p.to_ascii_uppercase().replace(';', "_"), name.to_ascii_uppercase()),
        None => format!("FI_{}", name.to_ascii_uppercase()),
    }
}

pub(super) fn with_params<R>(f: impl FnOnce(&mut BTreeMap<String, Param>) -> R) -> R {
    let mut g = PARAMS.lock();
    let m = g.get_or_insert_with(|| {
        let mut m = BTreeMap::new();
        let own: &[(Option<&str>, &str, fi_param_type, &str)] = &[
            (None, "provider", FI_PARAM_STRING, "Only use specified provider (default: all available)"),
            (None, "log_level", FI_PARAM_STRING, "Specify logging level: warn, info, debug, trace (default: warn)"),
            (Some("verbs"), "iface", FI_PARAM_STRING, "Only use IP addresses of interfaces whose name starts with this"),
            (Some("verbs"), "device_name", FI_PARAM_STRING, "Only use RDMA devices whose name starts with this"),
            (Some("verbs"), "tx_size", FI_PARAM_SIZE_T, "Default transmit queue depth (384)"),
            (Some("verbs"), "rx_size", FI_PARAM_SIZE_T, "Default receive queue depth (384)"),
            (Some("verbs"), "inline_size", FI_PARAM_SIZE_T, "Largest inject/inline size offered (default: the device's)"),
            (Some("verbs"), "tx_iov_limit", FI_PARAM_SIZE_T, "Default transmit iov limit (4)"),
            (Some("verbs"), "rx_iov_limit", FI_PARAM_SIZE_T, "Default receive iov limit (4)"),
            (Some("verbs"), "gid_idx", FI_PARAM_INT, "GID index naming the fabric (0)"),
            (Some("verbs"), "cqread_bunch_size", FI_PARAM_SIZE_T, "Completions a CQ read polls from verbs at least (1)"),
            (Some("rsverbs"), "name", FI_PARAM_STRING, "Provider name rsverbs registers (verbs)"),
            (Some("rsverbs"), "eager_size", FI_PARAM_SIZE_T, "RDM: largest message sent eagerly (16384)"),
            (Some("rsverbs"), "peer_credits", FI_PARAM_SIZE_T, "RDM: receive buffers an endpoint posts per peer (32)"),
        ];
        for &(p, n, t, h) in own {
            let env = env_name(p, n);
            m.insert(env.clone(), Param { env, type_: t, help: h.to_string() });
        }
        m
    });
    f(m)
}

/// The provider name fi_param_* use: NULL means the core ("FI_<NAME>").
///
/// # Safety
/// `prov` NULL or a valid provider.
pub(super) unsafe fn param_prov(prov: *const fi_provider) -> Option<String> {
    if prov.is_null() {
        None
    } else {
        // SAFETY: per the contract.
        unsafe { cstr_opt((*prov).name) }
    }
}

/// `fi_param_define` after capi/c/varargs.c formatted the help text.
///
/// # Safety
/// Pointers NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rsverbs_core_param_define(prov: *const fi_provider, name: *const c_char, type_: c_int, help: *const c_char) -> c_int {
    guard("fi_param_define", || {
        // SAFETY: per the contract.
        let (p, n, h) = unsafe { (param_prov(prov), cstr_opt(name), cstr_opt(help)) };
        let Some(n) = n else { return crate::fail!(FiError::INVAL, "fi_param_define: name is NULL") };
        if !(FI_PARAM_STRING as c_int..=FI_PARAM_SIZE_T as c_int).contains(&type_) {
            return crate::fail!(FiError::INVAL, "fi_param_define: type {type_} unknown");
        }
        let env = env_name(p.as_deref(), &n);
        with_params(|m| {
            if m.contains_key(&env) {
                tracing::info!("fi_param_define: {env} already defined");
                return Err(FiError::ALREADY);
            }
            m.insert(env.clone(), Param { env, type_: type_ as fi_param_type, help: h.unwrap_or_default() });
            Ok(0)
        })
    })
}

/// `fi_parse_bool`: libfabric's accepted spellings.
pub(super) fn parse_bool(s: &str) -> Option<c_int> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "y" => Some(1),
        "0" | "false" | "no" | "off" | "n" => Some(0),
        _ => None,
    }
}

pub(super) unsafe extern "C" fn core_param_get(prov: *mut fi_provider, name: *const c_char, value: *mut c_void) -> c_int {
    guard("fi_param_get", || {
        // SAFETY: per fi_param_get's contract.
        let (p, n) = unsafe { (param_prov(prov), cstr_opt(name)) };
        let Some(n) = n else { return crate::fail!(FiError::INVAL, "fi_param_get: name is NULL") };
        let value = nonnull(value, "fi_param_get: value")?;
        let env = env_name(p.as_deref(), &n);
        let Some(param) = with_params(|m| m.get(&env).cloned()) else {
            tracing::info!("fi_param_get: {env} is not defined");
            return Err(FiError::NOENT);
        };
        let Ok(cenv) = CString::new(param.env.clone()) else { return Err(FiError::INVAL) };
        // SAFETY: getenv with a C string; the result points into the environment.
        let raw = unsafe { libc::getenv(cenv.as_ptr()) };
        if raw.is_null() {
            return Err(FiError::NODATA);
        }
        // SAFETY: getenv returned a C string.
        let s = unsafe { CStr::from_ptr(raw) }.to_string_lossy().into_owned();
        let num = |s: &str| -> i64 {
            let t = s.trim();
            let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) { (h, 16) } else { (t, 10) };
            i64::from_str_radix(digits, radix).unwrap_or(0)
        };
        // SAFETY: `value` points to the type the parameter was defined with (fi_param(3)).
        unsafe {
            match param.type_ {
                FI_PARAM_STRING => *(value as *mut *const c_char) = raw,
                FI_PARAM_INT => *(value as *mut c_int) = num(&s) as c_int,
                FI_PARAM_BOOL => match parse_bool(&s) {
                    Some(b) => *(value as *mut c_int) = b,
                    None => return crate::fail!(FiError::INVAL, "fi_param_get: {env}={s} is not a boolean"),
                },
                _ => *(value as *mut usize) = num(&s) as usize,
            }
        }
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn core_getparams(params: *mut *mut fi_param, count: *mut c_int) -> c_int {
    guard("fi_getparams", || {
        let params = nonnull(params, "fi_getparams: params")?;
        let count = nonnull(count, "fi_getparams: count")?;
        let list: Vec<Param> = with_params(|m| m.values().cloned().collect());
        // One extra zeroed entry ends the array, as in libfabric.
        // SAFETY: calloc of list.len()+1 entries (all-zero fi_param is valid).
        let arr = unsafe { libc::calloc(list.len() + 1, size_of::<fi_param>()) } as *mut fi_param;
        if arr.is_null() {
            return crate::fail!(FiError::NOMEM, "fi_getparams: out of memory");
        }
        for (i, p) in list.iter().enumerate() {
            let value = std::env::var(&p.env).ok();
            // SAFETY: i < list.len(), inside the array.
            unsafe {
                *arr.add(i) = fi_param {
                    name: c_strdup(&p.env),
                    type_: p.type_,
                    help_string: c_strdup(&p.help),
                    value: value.as_deref().map_or(std::ptr::null(), |v| c_strdup(v) as *const c_char),
                };
            }
        }
        // SAFETY: checked non-NULL.
        unsafe {
            *params = arr;
            *count = list.len() as c_int;
        }
        Ok(0)
    })
}

pub(super) unsafe extern "C" fn core_freeparams(params: *mut fi_param) {
    if params.is_null() {
        return;
    }
    let mut i = 0;
    // SAFETY: an array from core_getparams, ended by an entry with a NULL name.
    unsafe {
        loop {
            let p = &*params.add(i);
            if p.name.is_null() {
                break;
            }
            libc::free(p.name as *mut c_void);
            libc::free(p.help_string as *mut c_void);
            libc::free(p.value as *mut c_void);
            i += 1;
        }
        libc::free(params as *mut c_void);
    }
}
