//! The entries a CQ hands out: successes and error entries, and the
//! libfabric error for a verbs completion status.

use crate::fi::consts::*;
use crate::verbs::wc_status;

/// One successful completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Completion {
    pub op_context: u64,
    pub flags: u64,
    pub len: usize,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    pub src: u64,
}

/// One error completion (`struct fi_cq_err_entry`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CqErr {
    pub op_context: u64,
    pub flags: u64,
    pub len: usize,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
    pub src: u64,
}

/// `prov_errno` of an error entry that rsverbs made itself, with no verbs
/// completion status behind it (an RDM operation failed with its
/// connection, timed out, or was truncated): the negative libfabric error.
/// Non-negative values are verbs completion statuses; `fi_cq_strerror`
/// tells the two apart.
pub fn soft_prov_errno(err: i32) -> i32 {
    -(err.saturating_abs())
}

/// The libfabric error for a verbs completion status.
pub fn status_to_err(status: u32) -> i32 {
    match status {
        wc_status::WR_FLUSH_ERR => FI_ECANCELED,
        wc_status::LOC_LEN_ERR => FI_ETRUNC,
        wc_status::REM_ACCESS_ERR | wc_status::LOC_PROT_ERR => FI_EACCES,
        wc_status::RETRY_EXC_ERR | wc_status::RNR_RETRY_EXC_ERR => FI_ETIMEDOUT,
        wc_status::REM_INV_REQ_ERR => FI_EINVAL,
        _ => FI_EIO,
    }
}
