//! libfabric 1.17 constants, mirrored from Debian 12's `/usr/include/rdma/*.h`
//! (fabric.h, fi_errno.h, fi_domain.h, fi_endpoint.h, fi_eq.h, fi_atomic.h, fi_trigger.h,
//! providers/fi_log.h, fi_ext.h — in header order).
//!
//! Every value is checked against the C headers by `tests/abi_layout.rs`, which also fails if a
//! constant of those headers is missing here.
//!
//! This file depends on nothing but `core`, so it can be `#[path]`-included on its own.
//!
//! # Type conventions
//! Each constant has the Rust type of the C slot it is written into, so it can be used without
//! casts:
//! * 64-bit flag macros (`1ULL << n`: caps, modes, op flags, FI_ORDER_*, ...): `u64`.
//! * values of a *named* C enum (`enum fi_ep_type`, `enum fi_op`, ...): `u32` — GCC gives these
//!   enums the underlying type `unsigned int`; `fi/abi/mod.rs` has `pub type fi_ep_type = u32;` etc.
//!   for the fields. Exception: `enum fi_mr_mode` values are `i32`, because (like the FI_MR_*
//!   bit macros) they go into `fi_domain_attr.mr_mode`, a C `int`.
//! * values of *anonymous* C enums: the type of the field/argument that carries them:
//!   `usize` for FI_CLASS_* (`fid.fclass` is `size_t`) and FI_PATH_MAX & co.; `u32` for address
//!   formats, FI_PROTO_*, FI_TC_* and EQ events; `i32` for fi_control commands, FI_OPT_* and
//!   FI_HMEM_P2P_* (`int` arguments).
//! * error codes: positive `i32` (`FI_SUCCESS`, `FI_EAGAIN`, ...); ops return them negated.
//! * FI_ADDR_UNSPEC / FI_ADDR_NOTAVAIL / FI_KEY_NOTAVAIL: `u64`; FI_SHARED_CONTEXT: `usize`.
#![allow(non_snake_case)] // FI_VERSION() & co. keep their C names

// API version (fabric.h). `FI_VERSION` and friends are `const fn`s at the end of this file.
pub const FI_MAJOR_VERSION: u32 = 1;
pub const FI_MINOR_VERSION: u32 = 17;
pub const FI_REVISION_VERSION: u32 = 0;

// Provider-specific values set the high-order bit (fabric.h). `uint32_t` in C.
pub const FI_PROV_SPECIFIC: u32 = 1 << 31;

// Capability and operation flags (fabric.h): 64-bit, bits 1.. common, 59.. operation-specific.
// Note that several names share a bit: FI_DIRECTED_RECV = FI_CLAIM = FI_CONTEXT = FI_SELECTIVE_COMPLETION
// = FI_REG_MR = FI_SYMMETRIC = FI_COMPARE_ATOMIC (bit 59), etc.; which one applies depends on the call.
pub const FI_MSG: u64 = 1 << 1;
pub const FI_RMA: u64 = 1 << 2;
pub const FI_TAGGED: u64 = 1 << 3;
pub const FI_ATOMIC: u64 = 1 << 4;
pub const FI_ATOMICS: u64 = FI_ATOMIC;
pub const FI_MULTICAST: u64 = 1 << 5;
pub const FI_COLLECTIVE: u64 = 1 << 6;
pub const FI_READ: u64 = 1 << 8;
pub const FI_WRITE: u64 = 1 << 9;
pub const FI_RECV: u64 = 1 << 10;
pub const FI_SEND: u64 = 1 << 11;
pub const FI_TRANSMIT: u64 = FI_SEND;
pub const FI_REMOTE_READ: u64 = 1 << 12;
pub const FI_REMOTE_WRITE: u64 = 1 << 13;
pub const FI_MULTI_RECV: u64 = 1 << 16;
pub const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
pub const FI_MORE: u64 = 1 << 18;
pub const FI_PEEK: u64 = 1 << 19;
pub const FI_TRIGGER: u64 = 1 << 20;
pub const FI_FENCE: u64 = 1 << 21;
pub const FI_PRIORITY: u64 = 1 << 22;
pub const FI_COMPLETION: u64 = 1 << 24;
pub const FI_EVENT: u64 = FI_COMPLETION;
pub const FI_INJECT: u64 = 1 << 25;
pub const FI_INJECT_COMPLETE: u64 = 1 << 26;
pub const FI_TRANSMIT_COMPLETE: u64 = 1 << 27;
pub const FI_DELIVERY_COMPLETE: u64 = 1 << 28;
pub const FI_AFFINITY: u64 = 1 << 29;
pub const FI_COMMIT_COMPLETE: u64 = 1 << 30;
pub const FI_MATCH_COMPLETE: u64 = 1 << 31;
pub const FI_PEER_TRANSFER: u64 = 1 << 36;
pub const FI_AV_USER_ID: u64 = 1 << 41;
pub const FI_PEER: u64 = 1 << 43;
pub const FI_XPU_TRIGGER: u64 = 1 << 44;
pub const FI_HMEM_HOST_ALLOC: u64 = 1 << 45;
pub const FI_HMEM_DEVICE_ONLY: u64 = 1 << 46;
pub const FI_HMEM: u64 = 1 << 47;
pub const FI_VARIABLE_MSG: u64 = 1 << 48;
pub const FI_RMA_PMEM: u64 = 1 << 49;
pub const FI_SOURCE_ERR: u64 = 1 << 50;
pub const FI_LOCAL_COMM: u64 = 1 << 51;
pub const FI_REMOTE_COMM: u64 = 1 << 52;
pub const FI_SHARED_AV: u64 = 1 << 53;
pub const FI_PROV_ATTR_ONLY: u64 = 1 << 54;
pub const FI_NUMERICHOST: u64 = 1 << 55;
pub const FI_RMA_EVENT: u64 = 1 << 56;
pub const FI_SOURCE: u64 = 1 << 57;
pub const FI_NAMED_RX_CTX: u64 = 1 << 58;
pub const FI_DIRECTED_RECV: u64 = 1 << 59;

// Tagged messages, buffered receives, CQ flags (fabric.h).
pub const FI_CLAIM: u64 = 1 << 59;
pub const FI_DISCARD: u64 = 1 << 58;

// Special addresses / keys (fabric.h). `fi_addr_t` / `uint64_t` / `size_t` in C.
pub const FI_ADDR_UNSPEC: u64 = u64::MAX;
pub const FI_ADDR_NOTAVAIL: u64 = u64::MAX;
pub const FI_KEY_NOTAVAIL: u64 = u64::MAX;
pub const FI_SHARED_CONTEXT: usize = usize::MAX;

// Memory-registration mode bits (fabric.h), OFI style. They are written into
// `fi_domain_attr.mr_mode`, which is a C `int`, hence `i32` (see also the `fi_mr_mode` values below).
pub const FI_MR_LOCAL: i32 = 1 << 2;
pub const FI_MR_RAW: i32 = 1 << 3;
pub const FI_MR_VIRT_ADDR: i32 = 1 << 4;
pub const FI_MR_ALLOCATED: i32 = 1 << 5;
pub const FI_MR_PROV_KEY: i32 = 1 << 6;
pub const FI_MR_MMU_NOTIFY: i32 = 1 << 7;
pub const FI_MR_RMA_EVENT: i32 = 1 << 8;
pub const FI_MR_ENDPOINT: i32 = 1 << 9;
pub const FI_MR_HMEM: i32 = 1 << 10;
pub const FI_MR_COLLECTIVE: i32 = 1 << 11;

// Message ordering bits for `msg_order` / `comp_order` (fabric.h), `uint64_t`.
pub const FI_ORDER_NONE: u64 = 0;
pub const FI_ORDER_RAR: u64 = 1 << 0;
pub const FI_ORDER_RAW: u64 = 1 << 1;
pub const FI_ORDER_RAS: u64 = 1 << 2;
pub const FI_ORDER_WAR: u64 = 1 << 3;
pub const FI_ORDER_WAW: u64 = 1 << 4;
pub const FI_ORDER_WAS: u64 = 1 << 5;
pub const FI_ORDER_SAR: u64 = 1 << 6;
pub const FI_ORDER_SAW: u64 = 1 << 7;
pub const FI_ORDER_SAS: u64 = 1 << 8;
pub const FI_ORDER_STRICT: u64 = 0x1FF;
pub const FI_ORDER_RMA_RAR: u64 = 1 << 32;
pub const FI_ORDER_RMA_RAW: u64 = 1 << 33;
pub const FI_ORDER_RMA_WAR: u64 = 1 << 34;
pub const FI_ORDER_RMA_WAW: u64 = 1 << 35;
pub const FI_ORDER_ATOMIC_RAR: u64 = 1 << 36;
pub const FI_ORDER_ATOMIC_RAW: u64 = 1 << 37;
pub const FI_ORDER_ATOMIC_WAR: u64 = 1 << 38;
pub const FI_ORDER_ATOMIC_WAW: u64 = 1 << 39;
pub const FI_ORDER_DATA: u64 = 1 << 16;

// Mode bits (fabric.h), `uint64_t`.
pub const FI_CONTEXT: u64 = 1 << 59;
pub const FI_MSG_PREFIX: u64 = 1 << 58;
pub const FI_ASYNC_IOV: u64 = 1 << 57;
pub const FI_RX_CQ_DATA: u64 = 1 << 56;
pub const FI_LOCAL_MR: u64 = 1 << 55;
pub const FI_NOTIFY_FLAGS_ONLY: u64 = 1 << 54;
pub const FI_RESTRICTED_COMP: u64 = 1 << 53;
pub const FI_CONTEXT2: u64 = 1 << 52;
pub const FI_BUFFERED_RECV: u64 = 1 << 51;

// fi_bind() flags (fabric.h).
pub const FI_SELECTIVE_COMPLETION: u64 = 1 << 59;

// String-size limits (fabric.h, anonymous enum). Buffer lengths, so `usize`.
pub const FI_PATH_MAX: usize = 256;
pub const FI_NAME_MAX: usize = 64;
pub const FI_VERSION_MAX: usize = 64;

// Address formats (fabric.h, anonymous enum). Stored in `fi_info.addr_format` (`uint32_t`).
pub const FI_FORMAT_UNSPEC: u32 = 0;
pub const FI_SOCKADDR: u32 = 1;
pub const FI_SOCKADDR_IN: u32 = 2;
pub const FI_SOCKADDR_IN6: u32 = 3;
pub const FI_SOCKADDR_IB: u32 = 4;
pub const FI_ADDR_PSMX: u32 = 5;
pub const FI_ADDR_GNI: u32 = 6;
pub const FI_ADDR_BGQ: u32 = 7;
pub const FI_ADDR_MLX: u32 = 8;
pub const FI_ADDR_STR: u32 = 9;
pub const FI_ADDR_PSMX2: u32 = 10;
pub const FI_ADDR_IB_UD: u32 = 11;
pub const FI_ADDR_EFA: u32 = 12;
pub const FI_ADDR_PSMX3: u32 = 13;
pub const FI_ADDR_OPX: u32 = 14;
pub const FI_ADDR_CXI: u32 = 15;

// enum fi_av_type (fabric.h).
pub const FI_AV_UNSPEC: u32 = 0;
pub const FI_AV_MAP: u32 = 1;
pub const FI_AV_TABLE: u32 = 2;

// enum fi_mr_mode (fabric.h): the legacy memory-registration modes. No field has this enum type;
// the values go into `fi_domain_attr.mr_mode` (`int`) together with the FI_MR_* bits above, hence `i32`.
pub const FI_MR_UNSPEC: i32 = 0;
pub const FI_MR_BASIC: i32 = 1;
pub const FI_MR_SCALABLE: i32 = 2;

// enum fi_progress (fabric.h).
pub const FI_PROGRESS_UNSPEC: u32 = 0;
pub const FI_PROGRESS_AUTO: u32 = 1;
pub const FI_PROGRESS_MANUAL: u32 = 2;

// enum fi_threading (fabric.h).
pub const FI_THREAD_UNSPEC: u32 = 0;
pub const FI_THREAD_SAFE: u32 = 1;
pub const FI_THREAD_FID: u32 = 2;
pub const FI_THREAD_DOMAIN: u32 = 3;
pub const FI_THREAD_COMPLETION: u32 = 4;
pub const FI_THREAD_ENDPOINT: u32 = 5;

// enum fi_resource_mgmt (fabric.h).
pub const FI_RM_UNSPEC: u32 = 0;
pub const FI_RM_DISABLED: u32 = 1;
pub const FI_RM_ENABLED: u32 = 2;

// enum fi_ep_type (fabric.h).
pub const FI_EP_UNSPEC: u32 = 0;
pub const FI_EP_MSG: u32 = 1;
pub const FI_EP_DGRAM: u32 = 2;
pub const FI_EP_RDM: u32 = 3;
pub const FI_EP_SOCK_STREAM: u32 = 4;
pub const FI_EP_SOCK_DGRAM: u32 = 5;

// Endpoint protocols (fabric.h, anonymous enum). Stored in `fi_ep_attr.protocol` (`uint32_t`).
pub const FI_PROTO_UNSPEC: u32 = 0;
pub const FI_PROTO_RDMA_CM_IB_RC: u32 = 1;
pub const FI_PROTO_IWARP: u32 = 2;
pub const FI_PROTO_IB_UD: u32 = 3;
pub const FI_PROTO_PSMX: u32 = 4;
pub const FI_PROTO_UDP: u32 = 5;
pub const FI_PROTO_SOCK_TCP: u32 = 6;
pub const FI_PROTO_MXM: u32 = 7;
pub const FI_PROTO_IWARP_RDM: u32 = 8;
pub const FI_PROTO_IB_RDM: u32 = 9;
pub const FI_PROTO_GNI: u32 = 10;
pub const FI_PROTO_RXM: u32 = 11;
pub const FI_PROTO_RXD: u32 = 12;
pub const FI_PROTO_MLX: u32 = 13;
pub const FI_PROTO_NETWORKDIRECT: u32 = 14;
pub const FI_PROTO_PSMX2: u32 = 15;
pub const FI_PROTO_SHM: u32 = 16;
pub const FI_PROTO_MRAIL: u32 = 17;
pub const FI_PROTO_RSTREAM: u32 = 18;
pub const FI_PROTO_RDMA_CM_IB_XRC: u32 = 19;
pub const FI_PROTO_EFA: u32 = 20;
pub const FI_PROTO_PSMX3: u32 = 21;
pub const FI_PROTO_RXM_TCP: u32 = 22;
pub const FI_PROTO_OPX: u32 = 23;
pub const FI_PROTO_CXI: u32 = 24;
pub const FI_PROTO_XNET: u32 = 25;

// Traffic classes (fabric.h, anonymous enum). Stored in `tclass` fields (`uint32_t`).
pub const FI_TC_UNSPEC: u32 = 0;
pub const FI_TC_DSCP: u32 = 0x100;
pub const FI_TC_LABEL: u32 = 0x200;
pub const FI_TC_BEST_EFFORT: u32 = FI_TC_LABEL;
pub const FI_TC_LOW_LATENCY: u32 = 513;
pub const FI_TC_DEDICATED_ACCESS: u32 = 514;
pub const FI_TC_BULK_DATA: u32 = 515;
pub const FI_TC_SCAVENGER: u32 = 516;
pub const FI_TC_NETWORK_CTRL: u32 = 517;

// enum fi_bus_type (fabric.h).
pub const FI_BUS_UNSPEC: u32 = 0;
pub const FI_BUS_UNKNOWN: u32 = FI_BUS_UNSPEC;
pub const FI_BUS_PCI: u32 = 1;

// enum fi_link_state (fabric.h).
pub const FI_LINK_UNKNOWN: u32 = 0;
pub const FI_LINK_DOWN: u32 = 1;
pub const FI_LINK_UP: u32 = 2;

// fid classes (fabric.h, anonymous enum). Stored in `fid.fclass` (`size_t`), hence `usize`.
pub const FI_CLASS_UNSPEC: usize = 0;
pub const FI_CLASS_FABRIC: usize = 1;
pub const FI_CLASS_DOMAIN: usize = 2;
pub const FI_CLASS_EP: usize = 3;
pub const FI_CLASS_SEP: usize = 4;
pub const FI_CLASS_RX_CTX: usize = 5;
pub const FI_CLASS_SRX_CTX: usize = 6;
pub const FI_CLASS_TX_CTX: usize = 7;
pub const FI_CLASS_STX_CTX: usize = 8;
pub const FI_CLASS_PEP: usize = 9;
pub const FI_CLASS_INTERFACE: usize = 10;
pub const FI_CLASS_AV: usize = 11;
pub const FI_CLASS_MR: usize = 12;
pub const FI_CLASS_EQ: usize = 13;
pub const FI_CLASS_CQ: usize = 14;
pub const FI_CLASS_CNTR: usize = 15;
pub const FI_CLASS_WAIT: usize = 16;
pub const FI_CLASS_POLL: usize = 17;
pub const FI_CLASS_CONNREQ: usize = 18;
pub const FI_CLASS_MC: usize = 19;
pub const FI_CLASS_NIC: usize = 20;
pub const FI_CLASS_AV_SET: usize = 21;
pub const FI_CLASS_MR_CACHE: usize = 22;
pub const FI_CLASS_MEM_MONITOR: usize = 23;
pub const FI_CLASS_PEER_CQ: usize = 24;
pub const FI_CLASS_PEER_SRX: usize = 25;
pub const FI_CLASS_LOG: usize = 26;
pub const FI_CLASS_PEER_AV: usize = 27;
pub const FI_CLASS_PEER_AV_SET: usize = 28;

// fi_control() commands (fabric.h, anonymous enum). Passed as `int command`, hence `i32`.
pub const FI_GETFIDFLAG: i32 = 0;
pub const FI_SETFIDFLAG: i32 = 1;
pub const FI_GETOPSFLAG: i32 = 2;
pub const FI_SETOPSFLAG: i32 = 3;
pub const FI_ALIAS: i32 = 4;
pub const FI_GETWAIT: i32 = 5;
pub const FI_ENABLE: i32 = 6;
pub const FI_BACKLOG: i32 = 7;
pub const FI_GET_RAW_MR: i32 = 8;
pub const FI_MAP_RAW_MR: i32 = 9;
pub const FI_UNMAP_KEY: i32 = 10;
pub const FI_QUEUE_WORK: i32 = 11;
pub const FI_CANCEL_WORK: i32 = 12;
pub const FI_FLUSH_WORK: i32 = 13;
pub const FI_REFRESH: i32 = 14;
pub const FI_DUP: i32 = 15;
pub const FI_GETWAITOBJ: i32 = 16;
pub const FI_GET_VAL: i32 = 17;
pub const FI_SET_VAL: i32 = 18;
pub const FI_EXPORT_FID: i32 = 19;

// enum fi_type: data types for fi_tostr() (fabric.h).
pub const FI_TYPE_INFO: u32 = 0;
pub const FI_TYPE_EP_TYPE: u32 = 1;
pub const FI_TYPE_CAPS: u32 = 2;
pub const FI_TYPE_OP_FLAGS: u32 = 3;
pub const FI_TYPE_ADDR_FORMAT: u32 = 4;
pub const FI_TYPE_TX_ATTR: u32 = 5;
pub const FI_TYPE_RX_ATTR: u32 = 6;
pub const FI_TYPE_EP_ATTR: u32 = 7;
pub const FI_TYPE_DOMAIN_ATTR: u32 = 8;
pub const FI_TYPE_FABRIC_ATTR: u32 = 9;
pub const FI_TYPE_THREADING: u32 = 10;
pub const FI_TYPE_PROGRESS: u32 = 11;
pub const FI_TYPE_PROTOCOL: u32 = 12;
pub const FI_TYPE_MSG_ORDER: u32 = 13;
pub const FI_TYPE_MODE: u32 = 14;
pub const FI_TYPE_AV_TYPE: u32 = 15;
pub const FI_TYPE_ATOMIC_TYPE: u32 = 16;
pub const FI_TYPE_ATOMIC_OP: u32 = 17;
pub const FI_TYPE_VERSION: u32 = 18;
pub const FI_TYPE_EQ_EVENT: u32 = 19;
pub const FI_TYPE_CQ_EVENT_FLAGS: u32 = 20;
pub const FI_TYPE_MR_MODE: u32 = 21;
pub const FI_TYPE_OP_TYPE: u32 = 22;
pub const FI_TYPE_FID: u32 = 23;
pub const FI_TYPE_COLLECTIVE_OP: u32 = 24;
pub const FI_TYPE_HMEM_IFACE: u32 = 25;
pub const FI_TYPE_CQ_FORMAT: u32 = 26;
pub const FI_TYPE_LOG_LEVEL: u32 = 27;
pub const FI_TYPE_LOG_SUBSYS: u32 = 28;

// enum fi_param_type (fabric.h).
pub const FI_PARAM_STRING: u32 = 0;
pub const FI_PARAM_INT: u32 = 1;
pub const FI_PARAM_BOOL: u32 = 2;
pub const FI_PARAM_SIZE_T: u32 = 3;

// Error codes (fi_errno.h), as POSITIVE values (ops return `-FI_EAGAIN` etc.). `i32`.
// The errno-mapped ones are the Linux values (x86_64/aarch64 generic errno table).
pub const FI_SUCCESS: i32 = 0;
pub const FI_EPERM: i32 = 1; // EPERM
pub const FI_ENOENT: i32 = 2; // ENOENT
pub const FI_EINTR: i32 = 4; // EINTR
pub const FI_EIO: i32 = 5; // EIO
pub const FI_E2BIG: i32 = 7; // E2BIG
pub const FI_EBADF: i32 = 9; // EBADF
pub const FI_EAGAIN: i32 = 11; // EAGAIN
pub const FI_ENOMEM: i32 = 12; // ENOMEM
pub const FI_EACCES: i32 = 13; // EACCES
pub const FI_EFAULT: i32 = 14; // EFAULT
pub const FI_EBUSY: i32 = 16; // EBUSY
pub const FI_ENODEV: i32 = 19; // ENODEV
pub const FI_EINVAL: i32 = 22; // EINVAL
pub const FI_EMFILE: i32 = 24; // EMFILE
pub const FI_ENOSPC: i32 = 28; // ENOSPC
pub const FI_ENOSYS: i32 = 38; // ENOSYS
pub const FI_EWOULDBLOCK: i32 = 11; // EWOULDBLOCK
pub const FI_ENOMSG: i32 = 42; // ENOMSG
pub const FI_ENODATA: i32 = 61; // ENODATA
pub const FI_EOVERFLOW: i32 = 75; // EOVERFLOW
pub const FI_EMSGSIZE: i32 = 90; // EMSGSIZE
pub const FI_ENOPROTOOPT: i32 = 92; // ENOPROTOOPT
pub const FI_EOPNOTSUPP: i32 = 95; // EOPNOTSUPP
pub const FI_EADDRINUSE: i32 = 98; // EADDRINUSE
pub const FI_EADDRNOTAVAIL: i32 = 99; // EADDRNOTAVAIL
pub const FI_ENETDOWN: i32 = 100; // ENETDOWN
pub const FI_ENETUNREACH: i32 = 101; // ENETUNREACH
pub const FI_ECONNABORTED: i32 = 103; // ECONNABORTED
pub const FI_ECONNRESET: i32 = 104; // ECONNRESET
pub const FI_ENOBUFS: i32 = 105; // ENOBUFS
pub const FI_EISCONN: i32 = 106; // EISCONN
pub const FI_ENOTCONN: i32 = 107; // ENOTCONN
pub const FI_ESHUTDOWN: i32 = 108; // ESHUTDOWN
pub const FI_ETIMEDOUT: i32 = 110; // ETIMEDOUT
pub const FI_ECONNREFUSED: i32 = 111; // ECONNREFUSED
pub const FI_EHOSTDOWN: i32 = 112; // EHOSTDOWN
pub const FI_EHOSTUNREACH: i32 = 113; // EHOSTUNREACH
pub const FI_EALREADY: i32 = 114; // EALREADY
pub const FI_EINPROGRESS: i32 = 115; // EINPROGRESS
pub const FI_EREMOTEIO: i32 = 121; // EREMOTEIO
pub const FI_ECANCELED: i32 = 125; // ECANCELED
pub const FI_EKEYREJECTED: i32 = 129; // EKEYREJECTED

// libfabric-specific error codes (fi_errno.h): >= 256.
pub const FI_ERRNO_OFFSET: i32 = 256;
pub const FI_EOTHER: i32 = FI_ERRNO_OFFSET;
pub const FI_ETOOSMALL: i32 = 257;
pub const FI_EOPBADSTATE: i32 = 258;
pub const FI_EAVAIL: i32 = 259;
pub const FI_EBADFLAGS: i32 = 260;
pub const FI_ENOEQ: i32 = 261;
pub const FI_EDOMAIN: i32 = 262;
pub const FI_ENOCQ: i32 = 263;
pub const FI_ECRC: i32 = 264;
pub const FI_ETRUNC: i32 = 265;
pub const FI_ENOKEY: i32 = 266;
pub const FI_ENOAV: i32 = 267;
pub const FI_EOVERRUN: i32 = 268;
pub const FI_ENORX: i32 = 269;
pub const FI_ERRNO_MAX: i32 = 270;

// AV / AV-set flags (fi_domain.h), `uint64_t`.
pub const FI_SYMMETRIC: u64 = 1 << 59;
pub const FI_SYNC_ERR: u64 = 1 << 58;
pub const FI_UNIVERSE: u64 = 1 << 57;
pub const FI_BARRIER_SET: u64 = 1 << 40;
pub const FI_BROADCAST_SET: u64 = 1 << 41;
pub const FI_ALLTOALL_SET: u64 = 1 << 42;
pub const FI_ALLREDUCE_SET: u64 = 1 << 43;
pub const FI_ALLGATHER_SET: u64 = 1 << 44;
pub const FI_REDUCE_SCATTER_SET: u64 = 1 << 45;
pub const FI_REDUCE_SET: u64 = 1 << 46;
pub const FI_SCATTER_SET: u64 = 1 << 47;
pub const FI_GATHER_SET: u64 = 1 << 48;

// First collective-only value in enum fi_datatype / enum fi_op (fi_domain.h).
pub const FI_COLLECTIVE_OFFSET: u32 = 256;

// Domain bind flags (fi_domain.h).
pub const FI_REG_MR: u64 = 1 << 59;

// enum fi_hmem_iface (fi_domain.h).
pub const FI_HMEM_SYSTEM: u32 = 0;
pub const FI_HMEM_CUDA: u32 = 1;
pub const FI_HMEM_ROCR: u32 = 2;
pub const FI_HMEM_ZE: u32 = 3;
pub const FI_HMEM_NEURON: u32 = 4;
pub const FI_HMEM_SYNAPSEAI: u32 = 5;

// enum fi_datatype (fi_domain.h). FI_INT128 deliberately equals FI_DATATYPE_LAST.
pub const FI_INT8: u32 = 0;
pub const FI_UINT8: u32 = 1;
pub const FI_INT16: u32 = 2;
pub const FI_UINT16: u32 = 3;
pub const FI_INT32: u32 = 4;
pub const FI_UINT32: u32 = 5;
pub const FI_INT64: u32 = 6;
pub const FI_UINT64: u32 = 7;
pub const FI_FLOAT: u32 = 8;
pub const FI_DOUBLE: u32 = 9;
pub const FI_FLOAT_COMPLEX: u32 = 10;
pub const FI_DOUBLE_COMPLEX: u32 = 11;
pub const FI_LONG_DOUBLE: u32 = 12;
pub const FI_LONG_DOUBLE_COMPLEX: u32 = 13;
pub const FI_DATATYPE_LAST: u32 = 14;
pub const FI_INT128: u32 = FI_DATATYPE_LAST;
pub const FI_UINT128: u32 = 15;
pub const FI_VOID: u32 = FI_COLLECTIVE_OFFSET;

// enum fi_op: atomic operations (fi_domain.h).
pub const FI_MIN: u32 = 0;
pub const FI_MAX: u32 = 1;
pub const FI_SUM: u32 = 2;
pub const FI_PROD: u32 = 3;
pub const FI_LOR: u32 = 4;
pub const FI_LAND: u32 = 5;
pub const FI_BOR: u32 = 6;
pub const FI_BAND: u32 = 7;
pub const FI_LXOR: u32 = 8;
pub const FI_BXOR: u32 = 9;
pub const FI_ATOMIC_READ: u32 = 10;
pub const FI_ATOMIC_WRITE: u32 = 11;
pub const FI_CSWAP: u32 = 12;
pub const FI_CSWAP_NE: u32 = 13;
pub const FI_CSWAP_LE: u32 = 14;
pub const FI_CSWAP_LT: u32 = 15;
pub const FI_CSWAP_GE: u32 = 16;
pub const FI_CSWAP_GT: u32 = 17;
pub const FI_MSWAP: u32 = 18;
pub const FI_ATOMIC_OP_LAST: u32 = 19;
pub const FI_NOOP: u32 = FI_COLLECTIVE_OFFSET;

// enum fi_collective_op (fi_domain.h).
pub const FI_BARRIER: u32 = 0;
pub const FI_BROADCAST: u32 = 1;
pub const FI_ALLTOALL: u32 = 2;
pub const FI_ALLREDUCE: u32 = 3;
pub const FI_ALLGATHER: u32 = 4;
pub const FI_REDUCE_SCATTER: u32 = 5;
pub const FI_REDUCE: u32 = 6;
pub const FI_SCATTER: u32 = 7;
pub const FI_GATHER: u32 = 8;

// fi_getopt()/fi_setopt() level (fi_endpoint.h, anonymous enum). Passed as `int level`.
pub const FI_OPT_ENDPOINT: i32 = 0;

// FI_OPT_ENDPOINT option names (fi_endpoint.h, anonymous enum). Passed as `int optname`.
// (1.17 has no FI_OPT_SHARED_MEMORY_PERMITTED / FI_OPT_CUDA_API_PERMITTED: they came later.)
pub const FI_OPT_MIN_MULTI_RECV: i32 = 0;
pub const FI_OPT_CM_DATA_SIZE: i32 = 1;
pub const FI_OPT_BUFFERED_MIN: i32 = 2;
pub const FI_OPT_BUFFERED_LIMIT: i32 = 3;
pub const FI_OPT_SEND_BUF_SIZE: i32 = 4;
pub const FI_OPT_RECV_BUF_SIZE: i32 = 5;
pub const FI_OPT_TX_SIZE: i32 = 6;
pub const FI_OPT_RX_SIZE: i32 = 7;
pub const FI_OPT_FI_HMEM_P2P: i32 = 8;
pub const FI_OPT_XPU_TRIGGER: i32 = 9;

// Values for FI_OPT_FI_HMEM_P2P (fi_endpoint.h, anonymous enum). The option value is an `int`.
pub const FI_HMEM_P2P_ENABLED: i32 = 0;
pub const FI_HMEM_P2P_REQUIRED: i32 = 1;
pub const FI_HMEM_P2P_PREFERRED: i32 = 2;
pub const FI_HMEM_P2P_DISABLED: i32 = 3;

// enum fi_wait_obj (fi_eq.h).
pub const FI_WAIT_NONE: u32 = 0;
pub const FI_WAIT_UNSPEC: u32 = 1;
pub const FI_WAIT_SET: u32 = 2;
pub const FI_WAIT_FD: u32 = 3;
pub const FI_WAIT_MUTEX_COND: u32 = 4;
pub const FI_WAIT_YIELD: u32 = 5;
pub const FI_WAIT_POLLFD: u32 = 6;

// EQ events (fi_eq.h, anonymous enum). Passed as `uint32_t event`.
pub const FI_NOTIFY: u32 = 0;
pub const FI_CONNREQ: u32 = 1;
pub const FI_CONNECTED: u32 = 2;
pub const FI_SHUTDOWN: u32 = 3;
pub const FI_MR_COMPLETE: i32 = 4;
pub const FI_AV_COMPLETE: u32 = 5;
pub const FI_JOIN_COMPLETE: u32 = 6;

// enum fi_cq_format (fi_eq.h).
pub const FI_CQ_FORMAT_UNSPEC: u32 = 0;
pub const FI_CQ_FORMAT_CONTEXT: u32 = 1;
pub const FI_CQ_FORMAT_MSG: u32 = 2;
pub const FI_CQ_FORMAT_DATA: u32 = 3;
pub const FI_CQ_FORMAT_TAGGED: u32 = 4;

// enum fi_cq_wait_cond (fi_eq.h).
pub const FI_CQ_COND_NONE: u32 = 0;
pub const FI_CQ_COND_THRESHOLD: u32 = 1;

// enum fi_cntr_events (fi_eq.h).
pub const FI_CNTR_EVENTS_COMP: u32 = 0;

// Atomic flags (fi_atomic.h).
pub const FI_FETCH_ATOMIC: u64 = 1 << 58;
pub const FI_COMPARE_ATOMIC: u64 = 1 << 59;

// enum fi_trigger_event (fi_trigger.h).
pub const FI_TRIGGER_THRESHOLD: u32 = 0;
pub const FI_TRIGGER_XPU: u32 = 1;

// enum fi_op_type (fi_trigger.h).
pub const FI_OP_RECV: u32 = 0;
pub const FI_OP_SEND: u32 = 1;
pub const FI_OP_TRECV: u32 = 2;
pub const FI_OP_TSEND: u32 = 3;
pub const FI_OP_READ: u32 = 4;
pub const FI_OP_WRITE: u32 = 5;
pub const FI_OP_ATOMIC: u32 = 6;
pub const FI_OP_FETCH_ATOMIC: u32 = 7;
pub const FI_OP_COMPARE_ATOMIC: u32 = 8;
pub const FI_OP_CNTR_SET: u32 = 9;
pub const FI_OP_CNTR_ADD: u32 = 10;

// enum fi_log_subsys (providers/fi_log.h).
pub const FI_LOG_CORE: u32 = 0;
pub const FI_LOG_FABRIC: u32 = 1;
pub const FI_LOG_DOMAIN: u32 = 2;
pub const FI_LOG_EP_CTRL: u32 = 3;
pub const FI_LOG_EP_DATA: u32 = 4;
pub const FI_LOG_AV: u32 = 5;
pub const FI_LOG_CQ: u32 = 6;
pub const FI_LOG_EQ: u32 = 7;
pub const FI_LOG_MR: u32 = 8;
pub const FI_LOG_CNTR: u32 = 9;
pub const FI_LOG_SUBSYS_MAX: u32 = 10;

// enum fi_log_level (providers/fi_log.h).
pub const FI_LOG_WARN: u32 = 0;
pub const FI_LOG_TRACE: u32 = 1;
pub const FI_LOG_INFO: u32 = 2;
pub const FI_LOG_DEBUG: u32 = 3;
pub const FI_LOG_MAX: u32 = 4;

// Provider-specific codes (fi_ext.h). Used negated as `int` option names.
pub const FI_PROV_SPECIFIC_EFA: i32 = 0xefa << 16;
pub const FI_PROV_SPECIFIC_TCP: i32 = 0x7cb << 16;

// Logging import flags (fi_ext.h).
pub const FI_LOG_PROV_FILTERED: u64 = 1 << 0;

// Provider-specific (negative) endpoint option names (fi_ext.h).
pub const FI_OPT_EFA_RNR_RETRY: i32 = -FI_PROV_SPECIFIC_EFA;

// Version macros (fabric.h).

/// `FI_VERSION(major, minor)`: `((major) << 16) | (minor)`.
pub const fn FI_VERSION(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// `FI_MAJOR(version)`: `version >> 16`.
pub const fn FI_MAJOR(version: u32) -> u32 {
    version >> 16
}

/// `FI_MINOR(version)`: `version & 0xFFFF`.
pub const fn FI_MINOR(version: u32) -> u32 {
    version & 0xFFFF
}

/// `FI_VERSION_GE(v1, v2)`: `v1 >= v2`.
pub const fn FI_VERSION_GE(v1: u32, v2: u32) -> bool {
    v1 >= v2
}

/// `FI_VERSION_LT(v1, v2)`: `v1 < v2`.
pub const fn FI_VERSION_LT(v1: u32, v2: u32) -> bool {
    v1 < v2
}
