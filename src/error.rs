//! Errors of the core: a positive libfabric error code (`FI_E*`). The C shims
//! return it negated. Every error path logs why, at the place it is detected.

use crate::fi::consts as fi;

/// A libfabric error code (positive, e.g. `FI_EINVAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FiError(pub i32);

pub type FiResult<T> = Result<T, FiError>;

impl FiError {
    pub const AGAIN: FiError = FiError(fi::FI_EAGAIN);
    pub const INVAL: FiError = FiError(fi::FI_EINVAL);
    pub const NODATA: FiError = FiError(fi::FI_ENODATA);
    pub const NOSYS: FiError = FiError(fi::FI_ENOSYS);
    pub const OPNOTSUPP: FiError = FiError(fi::FI_EOPNOTSUPP);
    pub const BUSY: FiError = FiError(fi::FI_EBUSY);
    pub const NOMEM: FiError = FiError(fi::FI_ENOMEM);
    pub const AVAIL: FiError = FiError(fi::FI_EAVAIL);
    pub const BADFLAGS: FiError = FiError(fi::FI_EBADFLAGS);
    pub const OPBADSTATE: FiError = FiError(fi::FI_EOPBADSTATE);
    pub const NOCQ: FiError = FiError(fi::FI_ENOCQ);
    pub const NOEQ: FiError = FiError(fi::FI_ENOEQ);
    pub const MSGSIZE: FiError = FiError(fi::FI_EMSGSIZE);
    pub const TOOSMALL: FiError = FiError(fi::FI_ETOOSMALL);
    pub const NOTCONN: FiError = FiError(fi::FI_ENOTCONN);
    pub const ISCONN: FiError = FiError(fi::FI_EISCONN);
    pub const ALREADY: FiError = FiError(fi::FI_EALREADY);
    pub const NOSPC: FiError = FiError(fi::FI_ENOSPC);
    pub const NODEV: FiError = FiError(fi::FI_ENODEV);
    pub const IO: FiError = FiError(fi::FI_EIO);
    pub const CANCELED: FiError = FiError(fi::FI_ECANCELED);
    pub const TRUNC: FiError = FiError(fi::FI_ETRUNC);
    pub const OTHER: FiError = FiError(fi::FI_EOTHER);
    pub const DOMAIN: FiError = FiError(fi::FI_EDOMAIN);
    pub const NOENT: FiError = FiError(fi::FI_ENOENT);
    pub const ACCES: FiError = FiError(fi::FI_EACCES);

    /// The libfabric code for a (positive) errno from verbs/rdma-cm/the OS.
    /// libfabric's `FI_E*` codes for standard errors have the errno values.
    /// (Callers that post work requests map ENOMEM, "queue full", to FI_EAGAIN.)
    pub fn from_errno(e: i32) -> FiError {
        match e {
            0 => FiError::OTHER,
            e if e > 0 && e < 256 => FiError(e),
            _ => FiError::OTHER,
        }
    }

    /// The negative return value for C.
    pub fn neg(self) -> i32 {
        -self.0
    }
}

/// Logs `msg` at warn level and returns `Err(code)`.
#[macro_export]
macro_rules! fail {
    ($code:expr, $($arg:tt)+) => {{
        ::tracing::warn!($($arg)+);
        Err($crate::error::FiError::from($code))
    }};
}

impl From<i32> for FiError {
    fn from(v: i32) -> Self {
        FiError(v.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping_keeps_standard_codes() {
        assert_eq!(FiError::from_errno(libc::EINVAL), FiError::INVAL);
        assert_eq!(FiError::from_errno(libc::EAGAIN), FiError::AGAIN);
        assert_eq!(FiError::from_errno(libc::ENOMEM), FiError::NOMEM);
        assert_eq!(FiError::from_errno(0), FiError::OTHER);
        assert_eq!(FiError::from_errno(100000), FiError::OTHER);
        assert_eq!(FiError::INVAL.neg(), -22);
    }
}
