//! `fi_tostr` formatting in safe Rust, matching libfabric 1.17's output byte
//! for byte (YAML-ish text; the host test `tests/embed.rs` compares it with the
//! real library's). The C side (`capi/tostr.rs`) reads the application's
//! structs and drives these pieces; everything here works on plain values.
//!
//! libfabric appends every piece with `ofi_strncatf(buf, len, ...)`, i.e.
//! `vsnprintf(&buf[strlen], len - 1 - strlen, ...)`, and addresses with
//! `snprintf(&buf[strlen], len - strlen, ...)`; [`Buf`] reproduces exactly
//! that truncation so `fi_tostr_r` with a short buffer gives the same bytes.

use crate::fi::consts::*;
use crate::info::{DomainAttr, EpAttr, FabricAttr, RxAttr, TxAttr};

const TAB: &str = "    ";

/// A C string buffer of `cap` bytes filled the way libfabric fills it.
#[derive(Debug, Clone)]
pub struct Buf {
    s: Vec<u8>,
    cap: usize,
}

impl Buf {
    pub fn new(cap: usize) -> Buf {
        Buf { s: Vec::new(), cap }
    }

    /// Starts from existing contents (after a foreign `tostr` callback wrote into the buffer).
    pub fn from_bytes(b: &[u8], cap: usize) -> Buf {
        let n = b.len().min(cap.saturating_sub(1));
        Buf { s: b[..n].to_vec(), cap }
    }

    fn put(&mut self, piece: &str, room: usize) {
        // snprintf into `room` bytes writes at most room-1 characters and a NUL.
        if room == 0 {
            return;
        }
        let n = piece.len().min(room - 1);
        self.s.extend_from_slice(&piece.as_bytes()[..n]);
    }

    /// `ofi_strncatf(buf, cap, "%s", piece)`.
    pub fn cat(&mut self, piece: &str) {
        let room = self.cap.saturating_sub(1).saturating_sub(self.s.len());
        self.put(piece, room);
    }

    /// An address appended as `ofi_tostr_addr` does (`snprintf(p, cap - strlen, ...)`).
    pub fn cat_addr(&mut self, piece: &str) {
        let room = self.cap.saturating_sub(self.s.len());
        self.put(piece, room);
    }

    /// `ofi_remove_comma`: drops a trailing ", ".
    pub fn remove_comma(&mut self) {
        if self.s.ends_with(b", ") {
            self.s.truncate(self.s.len() - 2);
        }
    }

    pub fn len(&self) -> usize {
        self.s.len()
    }

    pub fn is_empty(&self) -> bool {
        self.s.is_empty()
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn bytes(&self) -> &[u8] {
        &self.s
    }
}

/// `%p` as glibc prints it.
pub fn ptr(p: usize) -> String {
    if p == 0 {
        "(nil)".into()
    } else {
        format!("{p:#x}")
    }
}

/// `%s` as glibc prints it (NULL gives "(null)").
pub fn s_or_null(s: Option<&str>) -> &str {
    s.unwrap_or("(null)")
}

macro_rules! table {
    ($name:ident: $t:ty = [$($c:ident),* $(,)?]) => {
        pub const $name: &[($t, &str)] = &[$(($c as $t, stringify!($c))),*];
    };
}

table!(CAPS: u64 = [
    FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC, FI_MULTICAST, FI_COLLECTIVE,
    FI_READ, FI_WRITE, FI_RECV, FI_SEND, FI_REMOTE_READ, FI_REMOTE_WRITE,
    FI_MULTI_RECV, FI_REMOTE_CQ_DATA, FI_TRIGGER, FI_FENCE,
    FI_VARIABLE_MSG, FI_RMA_PMEM, FI_SOURCE_ERR, FI_LOCAL_COMM, FI_REMOTE_COMM, FI_SHARED_AV,
    FI_RMA_EVENT, FI_SOURCE, FI_NAMED_RX_CTX, FI_DIRECTED_RECV, FI_HMEM,
]);
table!(OP_FLAGS: u64 = [
    FI_MULTICAST, FI_MULTI_RECV, FI_REMOTE_CQ_DATA, FI_MORE, FI_PEEK, FI_TRIGGER, FI_FENCE,
    FI_COMPLETION, FI_INJECT, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE,
    FI_MATCH_COMPLETE, FI_AFFINITY, FI_CLAIM, FI_DISCARD,
]);
table!(MSG_ORDER: u64 = [
    FI_ORDER_RAR, FI_ORDER_RAW, FI_ORDER_RAS, FI_ORDER_WAR, FI_ORDER_WAW, FI_ORDER_WAS,
    FI_ORDER_SAR, FI_ORDER_SAW, FI_ORDER_SAS, FI_ORDER_RMA_RAR, FI_ORDER_RMA_RAW,
    FI_ORDER_RMA_WAR, FI_ORDER_RMA_WAW, FI_ORDER_ATOMIC_RAR, FI_ORDER_ATOMIC_RAW,
    FI_ORDER_ATOMIC_WAR, FI_ORDER_ATOMIC_WAW,
]);
table!(MODE: u64 = [
    FI_CONTEXT, FI_MSG_PREFIX, FI_ASYNC_IOV, FI_RX_CQ_DATA, FI_LOCAL_MR, FI_NOTIFY_FLAGS_ONLY,
    FI_RESTRICTED_COMP, FI_CONTEXT2, FI_BUFFERED_RECV,
]);
table!(CQ_EVENT_FLAGS: u64 = [
    FI_SEND, FI_RECV, FI_RMA, FI_ATOMIC, FI_MSG, FI_TAGGED, FI_READ, FI_WRITE,
    FI_REMOTE_READ, FI_REMOTE_WRITE, FI_REMOTE_CQ_DATA, FI_MULTI_RECV, FI_MORE, FI_CLAIM,
]);
table!(MR_MODE: i64 = [
    FI_MR_BASIC, FI_MR_SCALABLE, FI_MR_LOCAL, FI_MR_RAW, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED,
    FI_MR_PROV_KEY, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT, FI_MR_ENDPOINT, FI_MR_HMEM, FI_MR_COLLECTIVE,
]);

/// Names of consecutive enum values starting at 0 (`None` = no name, "Unknown").
type Names = &'static [Option<&'static str>];

const EP_TYPE: Names =
    &[Some("FI_EP_UNSPEC"), Some("FI_EP_MSG"), Some("FI_EP_DGRAM"), Some("FI_EP_RDM"), Some("FI_EP_SOCK_STREAM"), Some("FI_EP_SOCK_DGRAM")];
const ADDR_FORMAT: Names = &[
    Some("FI_FORMAT_UNSPEC"),
    Some("FI_SOCKADDR"),
    Some("FI_SOCKADDR_IN"),
    Some("FI_SOCKADDR_IN6"),
    Some("FI_SOCKADDR_IB"),
    Some("FI_ADDR_PSMX"),
    Some("FI_ADDR_GNI"),
    Some("FI_ADDR_BGQ"),
    Some("FI_ADDR_MLX"),
    Some("FI_ADDR_STR"),
    Some("FI_ADDR_PSMX2"),
    Some("FI_ADDR_IB_UD"),
    Some("FI_ADDR_EFA"),
    Some("FI_ADDR_PSMX3"),
    Some("FI_ADDR_OPX"),
    Some("FI_ADDR_CXI"),
];
const THREADING: Names = &[
    Some("FI_THREAD_UNSPEC"),
    Some("FI_THREAD_SAFE"),
    Some("FI_THREAD_FID"),
    Some("FI_THREAD_DOMAIN"),
    Some("FI_THREAD_COMPLETION"),
    Some("FI_THREAD_ENDPOINT"),
];
const PROGRESS: Names = &[Some("FI_PROGRESS_UNSPEC"), Some("FI_PROGRESS_AUTO"), Some("FI_PROGRESS_MANUAL")];
const PROTOCOL: Names = &[
    Some("FI_PROTO_UNSPEC"),
    Some("FI_PROTO_RDMA_CM_IB_RC"),
    Some("FI_PROTO_IWARP"),
    Some("FI_PROTO_IB_UD"),
    Some("FI_PROTO_PSMX"),
    Some("FI_PROTO_UDP"),
    Some("FI_PROTO_SOCK_TCP"),
    None, // FI_PROTO_MXM (not printed by libfabric 1.17)
    Some("FI_PROTO_IWARP_RDM"),
    Some("FI_PROTO_IB_RDM"),
    Some("FI_PROTO_GNI"),
    Some("FI_PROTO_RXM"),
    Some("FI_PROTO_RXD"),
    Some("FI_PROTO_MLX"),
    Some("FI_PROTO_NETWORKDIRECT"),
    Some("FI_PROTO_PSMX2"),
    Some("FI_PROTO_SHM"),
    None, // FI_PROTO_MRAIL
    Some("FI_PROTO_RSTREAM"),
    Some("FI_PROTO_RDMA_CM_IB_XRC"),
    Some("FI_PROTO_EFA"),
    Some("FI_PROTO_PSMX3"),
    Some("FI_PROTO_RXM_TCP"),
    Some("FI_PROTO_OPX"),
    Some("FI_PROTO_CXI"),
    Some("FI_PROTO_XNET"),
];
const RESOURCE_MGMT: Names = &[Some("FI_RM_UNSPEC"), Some("FI_RM_DISABLED"), Some("FI_RM_ENABLED")];
const AV_TYPE: Names = &[Some("FI_AV_UNSPEC"), Some("FI_AV_MAP"), Some("FI_AV_TABLE")];
const ATOMIC_TYPE: Names = &[
    Some("FI_INT8"),
    Some("FI_UINT8"),
    Some("FI_INT16"),
    Some("FI_UINT16"),
    Some("FI_INT32"),
    Some("FI_UINT32"),
    Some("FI_INT64"),
    Some("FI_UINT64"),
    Some("FI_FLOAT"),
    Some("FI_DOUBLE"),
    Some("FI_FLOAT_COMPLEX"),
    Some("FI_DOUBLE_COMPLEX"),
    Some("FI_LONG_DOUBLE"),
    Some("FI_LONG_DOUBLE_COMPLEX"),
    Some("FI_INT128"),
    Some("FI_UINT128"),
];
const ATOMIC_OP: Names = &[
    Some("FI_MIN"),
    Some("FI_MAX"),
    Some("FI_SUM"),
    Some("FI_PROD"),
    Some("FI_LOR"),
    Some("FI_LAND"),
    Some("FI_BOR"),
    Some("FI_BAND"),
    Some("FI_LXOR"),
    Some("FI_BXOR"),
    Some("FI_ATOMIC_READ"),
    Some("FI_ATOMIC_WRITE"),
    Some("FI_CSWAP"),
    Some("FI_CSWAP_NE"),
    Some("FI_CSWAP_LE"),
    Some("FI_CSWAP_LT"),
    Some("FI_CSWAP_GE"),
    Some("FI_CSWAP_GT"),
    Some("FI_MSWAP"),
];
const EQ_EVENT: Names = &[
    Some("FI_NOTIFY"),
    Some("FI_CONNREQ"),
    Some("FI_CONNECTED"),
    Some("FI_SHUTDOWN"),
    Some("FI_MR_COMPLETE"),
    Some("FI_AV_COMPLETE"),
    Some("FI_JOIN_COMPLETE"),
];
const OP_TYPE: Names = &[
    Some("FI_OP_RECV"),
    Some("FI_OP_SEND"),
    Some("FI_OP_TRECV"),
    Some("FI_OP_TSEND"),
    Some("FI_OP_READ"),
    Some("FI_OP_WRITE"),
    Some("FI_OP_ATOMIC"),
    Some("FI_OP_FETCH_ATOMIC"),
    Some("FI_OP_COMPARE_ATOMIC"),
    Some("FI_OP_CNTR_SET"),
    Some("FI_OP_CNTR_ADD"),
];
const COLLECTIVE_OP: Names = &[
    Some("FI_BARRIER"),
    Some("FI_BROADCAST"),
    Some("FI_ALLTOALL"),
    Some("FI_ALLREDUCE"),
    Some("FI_ALLGATHER"),
    Some("FI_REDUCE_SCATTER"),
    Some("FI_REDUCE"),
    Some("FI_SCATTER"),
    Some("FI_GATHER"),
];
const HMEM_IFACE: Names = &[
    Some("FI_HMEM_SYSTEM"),
    Some("FI_HMEM_CUDA"),
    Some("FI_HMEM_ROCR"),
    Some("FI_HMEM_ZE"),
    Some("FI_HMEM_NEURON"),
    Some("FI_HMEM_SYNAPSEAI"),
];
const CQ_FORMAT: Names = &[
    Some("FI_CQ_FORMAT_UNSPEC"),
    Some("FI_CQ_FORMAT_CONTEXT"),
    Some("FI_CQ_FORMAT_MSG"),
    Some("FI_CQ_FORMAT_DATA"),
    Some("FI_CQ_FORMAT_TAGGED"),
];
const LOG_LEVEL: Names = &[Some("warn"), Some("trace"), Some("info"), Some("debug")];
const LOG_SUBSYS: Names = &[
    Some("core"),
    Some("fabric"),
    Some("domain"),
    Some("ep_ctrl"),
    Some("ep_data"),
    Some("av"),
    Some("cq"),
    Some("eq"),
    Some("mr"),
    Some("cntr"),
];

/// `FI_PROV_SPECIFIC`: the bit that marks provider-specific address formats and protocols.
const PROV_SPECIFIC: u32 = 1 << 31;

fn enum_name(names: Names, v: i64) -> Option<&'static str> {
    if v < 0 {
        return None;
    }
    names.get(v as usize).copied().flatten()
}

fn put_enum(b: &mut Buf, names: Names, v: i64) {
    b.cat(enum_name(names, v).unwrap_or("Unknown"));
}

/// An enum whose unknown values with bit 31 set read "Provider specific".
fn put_enum_prov(b: &mut Buf, names: Names, v: u32) {
    match enum_name(names, v as i64) {
        Some(n) => b.cat(n),
        None if v & PROV_SPECIFIC != 0 => b.cat("Provider specific"),
        None => b.cat("Unknown"),
    }
}

fn put_flags<T: Copy + Into<i128>>(b: &mut Buf, table: &[(T, &str)], v: T) {
    let v: i128 = v.into();
    for &(bit, name) in table {
        if v & bit.into() != 0 {
            b.cat(name);
            b.cat(", ");
        }
    }
    b.remove_comma();
}

/// The `enum fi_type` values libfabric 1.17 knows (others print "Unknown type").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Info,
    EpType,
    Caps,
    OpFlags,
    AddrFormat,
    TxAttr,
    RxAttr,
    EpAttr,
    DomainAttr,
    FabricAttr,
    Threading,
    Progress,
    Protocol,
    MsgOrder,
    Mode,
    AvType,
    AtomicType,
    AtomicOp,
    Version,
    EqEvent,
    CqEventFlags,
    MrMode,
    OpType,
    Fid,
    CollectiveOp,
    HmemIface,
    CqFormat,
    LogLevel,
    LogSubsys,
}

impl Kind {
    pub fn from_c(t: u32) -> Option<Kind> {
        use Kind::*;
        const ALL: [Kind; 29] = [
            Info, EpType, Caps, OpFlags, AddrFormat, TxAttr, RxAttr, EpAttr, DomainAttr, FabricAttr, Threading, Progress,
            Protocol, MsgOrder, Mode, AvType, AtomicType, AtomicOp, Version, EqEvent, CqEventFlags, MrMode, OpType, Fid,
            CollectiveOp, HmemIface, CqFormat, LogLevel, LogSubsys,
        ];
        ALL.get(t as usize).copied()
    }
}

/// Prints a scalar type (`v` is the 64-bit word at `data`; enums use its low 32 bits).
/// Returns false for the struct kinds, which the caller prints.
pub fn scalar(b: &mut Buf, kind: Kind, v: u64) -> bool {
    let e = v as u32 as i32 as i64;
    match kind {
        Kind::EpType => put_enum(b, EP_TYPE, e),
        Kind::Caps => put_flags(b, CAPS, v),
        Kind::OpFlags => put_flags(b, OP_FLAGS, v),
        Kind::AddrFormat => put_enum_prov(b, ADDR_FORMAT, v as u32),
        Kind::Threading => put_enum(b, THREADING, e),
        Kind::Progress => put_enum(b, PROGRESS, e),
        Kind::Protocol => put_enum_prov(b, PROTOCOL, v as u32),
        Kind::MsgOrder => put_flags(b, MSG_ORDER, v),
        Kind::Mode => put_flags(b, MODE, v),
        Kind::AvType => put_enum(b, AV_TYPE, e),
        Kind::AtomicType => put_enum(b, ATOMIC_TYPE, e),
        Kind::AtomicOp => put_enum(b, ATOMIC_OP, e),
        Kind::Version => b.cat(&version_string()),
        Kind::EqEvent => put_enum(b, EQ_EVENT, e),
        Kind::CqEventFlags => put_flags(b, CQ_EVENT_FLAGS, v),
        Kind::MrMode => put_flags(b, MR_MODE, e),
        Kind::OpType => put_enum(b, OP_TYPE, e),
        Kind::CollectiveOp => put_enum(b, COLLECTIVE_OP, e),
        Kind::HmemIface => put_enum(b, HMEM_IFACE, e),
        Kind::CqFormat => put_enum(b, CQ_FORMAT, e),
        Kind::LogLevel => put_enum(b, LOG_LEVEL, e),
        Kind::LogSubsys => put_enum(b, LOG_SUBSYS, e),
        _ => return false,
    }
    true
}

/// The git commit this library was built from (build.rs: `-dirty` with local
/// changes, `unknown` when built outside a git tree without `RSVERBS_COMMIT`).
pub const COMMIT: &str = env!("RSVERBS_COMMIT");
/// rsverbs' version and the commit it was built from, e.g. `0.1.0+9af9a2d1c3e4`
/// (semver build metadata): what `rsverbs_version()` returns and the nic's
/// `driver` shows, so a bug report names the build.
pub const BUILD_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "+", env!("RSVERBS_COMMIT"));

/// What `FI_TYPE_VERSION` prints: the newest libfabric API version rsverbs
/// speaks, then rsverbs' own version and commit (libfabric appends its build id there).
pub fn version_string() -> String {
    let v = crate::info::API_VERSION_MAX;
    format!("{}.{}.0-rsverbs-{BUILD_VERSION}", v >> 16, v & 0xffff)
}

fn comp_order(b: &mut Buf, v: u64) {
    if v & FI_ORDER_STRICT == FI_ORDER_NONE {
        b.cat("FI_ORDER_NONE, ");
    } else if v & FI_ORDER_STRICT == FI_ORDER_STRICT {
        b.cat("FI_ORDER_STRICT, ");
    }
    if v & FI_ORDER_DATA != 0 {
        b.cat("FI_ORDER_DATA, ");
    }
    b.remove_comma();
}

fn line(b: &mut Buf, prefix: &str, key: &str, val: &str) {
    b.cat(&format!("{prefix}{TAB}{key}: {val}\n"));
}

fn flags_line<T: Copy + Into<i128>>(b: &mut Buf, prefix: &str, key: &str, table: &[(T, &str)], v: T) {
    b.cat(&format!("{prefix}{TAB}{key}: [ "));
    put_flags(b, table, v);
    b.cat(" ]\n");
}

fn enum_line(b: &mut Buf, prefix: &str, key: &str, f: impl FnOnce(&mut Buf)) {
    b.cat(&format!("{prefix}{TAB}{key}: "));
    f(b);
    b.cat("\n");
}

fn null_struct(b: &mut Buf, prefix: &str, name: &str) {
    b.cat(&format!("{prefix}{name}: (null)\n"));
}

/// The head `struct fi_tx_attr` and `struct fi_rx_attr` share: the struct's
/// name line, then caps, mode, op_flags, msg_order and comp_order.
#[allow(clippy::too_many_arguments)]
fn tx_rx_head(b: &mut Buf, prefix: &str, name: &str, caps: u64, mode: u64, op_flags: u64, msg_order: u64, comp: u64) {
    b.cat(&format!("{prefix}{name}:\n"));
    flags_line(b, prefix, "caps", CAPS, caps);
    flags_line(b, prefix, "mode", MODE, mode);
    flags_line(b, prefix, "op_flags", OP_FLAGS, op_flags);
    flags_line(b, prefix, "msg_order", MSG_ORDER, msg_order);
    b.cat(&format!("{prefix}{TAB}comp_order: [ "));
    comp_order(b, comp);
    b.cat(" ]\n");
}

/// `struct fi_tx_attr` (its fields as [`TxAttr`] holds them).
pub fn tx_attr(b: &mut Buf, a: Option<&TxAttr>, prefix: &str) {
    let Some(a) = a else { return null_struct(b, prefix, "fi_tx_attr") };
    tx_rx_head(b, prefix, "fi_tx_attr", a.caps, a.mode, a.op_flags, a.msg_order, a.comp_order);
    line(b, prefix, "inject_size", &a.inject_size.to_string());
    line(b, prefix, "size", &a.size.to_string());
    line(b, prefix, "iov_limit", &a.iov_limit.to_string());
    line(b, prefix, "rma_iov_limit", &a.rma_iov_limit.to_string());
    line(b, prefix, "tclass", &hex(a.tclass));
}

/// `struct fi_rx_attr` (its fields as [`RxAttr`] holds them).
pub fn rx_attr(b: &mut Buf, a: Option<&RxAttr>, prefix: &str) {
    let Some(a) = a else { return null_struct(b, prefix, "fi_rx_attr") };
    tx_rx_head(b, prefix, "fi_rx_attr", a.caps, a.mode, a.op_flags, a.msg_order, a.comp_order);
    line(b, prefix, "total_buffered_recv", &a.total_buffered_recv.to_string());
    line(b, prefix, "size", &a.size.to_string());
    line(b, prefix, "iov_limit", &a.iov_limit.to_string());
}

/// `0x%x` as printf prints it.
fn hex(v: u32) -> String {
    format!("0x{v:x}")
}

fn ctx_cnt(v: usize) -> String {
    if v == FI_SHARED_CONTEXT {
        "FI_SHARED_CONTEXT".into()
    } else {
        v.to_string()
    }
}

/// `struct fi_ep_attr` (its fields as [`EpAttr`] holds them; `auth_key` is not printed).
pub fn ep_attr(b: &mut Buf, a: Option<&EpAttr>, prefix: &str) {
    let Some(a) = a else { return null_struct(b, prefix, "fi_ep_attr") };
    b.cat(&format!("{prefix}fi_ep_attr:\n"));
    enum_line(b, prefix, "type", |b| put_enum(b, EP_TYPE, a.type_ as i32 as i64));
    enum_line(b, prefix, "protocol", |b| put_enum_prov(b, PROTOCOL, a.protocol));
    line(b, prefix, "protocol_version", &(a.protocol_version as i32).to_string());
    line(b, prefix, "max_msg_size", &a.max_msg_size.to_string());
    line(b, prefix, "msg_prefix_size", &a.msg_prefix_size.to_string());
    line(b, prefix, "max_order_raw_size", &a.max_order_raw_size.to_string());
    line(b, prefix, "max_order_war_size", &a.max_order_war_size.to_string());
    line(b, prefix, "max_order_waw_size", &a.max_order_waw_size.to_string());
    line(b, prefix, "mem_tag_format", &format!("0x{:016x}", a.mem_tag_format));
    line(b, prefix, "tx_ctx_cnt", &ctx_cnt(a.tx_ctx_cnt));
    line(b, prefix, "rx_ctx_cnt", &ctx_cnt(a.rx_ctx_cnt));
    line(b, prefix, "auth_key_size", &a.auth_key_size.to_string());
}

/// `struct fi_domain_attr` (its fields as [`DomainAttr`] holds them) whose
/// `domain` fid pointer has the value `domain`; `auth_key` is not printed.
pub fn domain_attr(b: &mut Buf, a: Option<(usize, &DomainAttr)>, prefix: &str) {
    let Some((domain, a)) = a else { return null_struct(b, prefix, "fi_domain_attr") };
    b.cat(&format!("{prefix}fi_domain_attr:\n"));
    // libfabric prints the pointer with "0x%x": its low 32 bits.
    line(b, prefix, "domain", &hex(domain as u32));
    line(b, prefix, "name", s_or_null(a.name.as_deref()));
    enum_line(b, prefix, "threading", |b| put_enum(b, THREADING, a.threading as i32 as i64));
    enum_line(b, prefix, "control_progress", |b| put_enum(b, PROGRESS, a.control_progress as i32 as i64));
    enum_line(b, prefix, "data_progress", |b| put_enum(b, PROGRESS, a.data_progress as i32 as i64));
    enum_line(b, prefix, "resource_mgmt", |b| put_enum(b, RESOURCE_MGMT, a.resource_mgmt as i32 as i64));
    enum_line(b, prefix, "av_type", |b| put_enum(b, AV_TYPE, a.av_type as i32 as i64));
    flags_line(b, prefix, "mr_mode", MR_MODE, a.mr_mode as i64);
    for (k, v) in [
        ("mr_key_size", a.mr_key_size),
        ("cq_data_size", a.cq_data_size),
        ("cq_cnt", a.cq_cnt),
        ("ep_cnt", a.ep_cnt),
        ("tx_ctx_cnt", a.tx_ctx_cnt),
        ("rx_ctx_cnt", a.rx_ctx_cnt),
        ("max_ep_tx_ctx", a.max_ep_tx_ctx),
        ("max_ep_rx_ctx", a.max_ep_rx_ctx),
        ("max_ep_stx_ctx", a.max_ep_stx_ctx),
        ("max_ep_srx_ctx", a.max_ep_srx_ctx),
        ("cntr_cnt", a.cntr_cnt),
        ("mr_iov_limit", a.mr_iov_limit),
    ] {
        line(b, prefix, k, &v.to_string());
    }
    flags_line(b, prefix, "caps", CAPS, a.caps);
    flags_line(b, prefix, "mode", MODE, a.mode);
    line(b, prefix, "auth_key_size", &a.auth_key_size.to_string());
    line(b, prefix, "max_err_data", &a.max_err_data.to_string());
    line(b, prefix, "mr_cnt", &a.mr_cnt.to_string());
    line(b, prefix, "tclass", &hex(a.tclass));
}

/// `struct fi_fabric_attr` (its fields as [`FabricAttr`] holds them).
pub fn fabric_attr(b: &mut Buf, a: Option<&FabricAttr>, prefix: &str) {
    let Some(a) = a else { return null_struct(b, prefix, "fi_fabric_attr") };
    b.cat(&format!("{prefix}fi_fabric_attr:\n"));
    line(b, prefix, "name", s_or_null(a.name.as_deref()));
    line(b, prefix, "prov_name", s_or_null(a.prov_name.as_deref()));
    let v = |x: u32| format!("{}.{}", (x >> 16) as i32, (x & 0xffff) as i32);
    line(b, prefix, "prov_version", &v(a.prov_version));
    line(b, prefix, "api_version", &v(a.api_version));
}

/// The scalar head of `struct fi_info` up to (not including) the addresses.
pub fn info_head(b: &mut Buf, caps: u64, mode: u64, addr_format: u32, src_addrlen: usize, dest_addrlen: usize) {
    b.cat("fi_info:\n");
    b.cat(&format!("{TAB}caps: [ "));
    put_flags(b, CAPS, caps);
    b.cat(" ]\n");
    b.cat(&format!("{TAB}mode: [ "));
    put_flags(b, MODE, mode);
    b.cat(" ]\n");
    b.cat(&format!("{TAB}addr_format: "));
    put_enum_prov(b, ADDR_FORMAT, addr_format);
    b.cat("\n");
    b.cat(&format!("{TAB}src_addrlen: {src_addrlen}\n"));
    b.cat(&format!("{TAB}dest_addrlen: {dest_addrlen}\n"));
}

/// One address line of `fi_info` (`label` is "src_addr" or "dest_addr").
/// `addr`: `None` for a NULL pointer, `Some(None)` when libfabric cannot print
/// the format, `Some(Some(text))` otherwise.
pub fn info_addr(b: &mut Buf, label: &str, addr: Option<Option<&str>>) {
    b.cat(&format!("{TAB}{label}: "));
    match addr {
        None => b.cat("(null)"),
        Some(None) => {}
        Some(Some(s)) => b.cat_addr(s),
    }
    b.cat("\n");
}

/// A fid line without a provider `tostr` op: `label%p\n`.
pub fn fid_line(b: &mut Buf, label: &str, p: usize) {
    b.cat(&format!("{label}{}\n", ptr(p)));
}

pub const INFO_PREFIX: &str = TAB;

/// How many bytes of an address of `format` libfabric reads (`family` is the
/// first 16-bit word, for `FI_SOCKADDR`); `None` if it prints nothing for it,
/// `Some(0)` if it prints a C string (`FI_ADDR_STR`) or only the pointer.
pub fn addr_len(format: u32, family: Option<u16>) -> Option<usize> {
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    match format {
        FI_SOCKADDR => match family? {
            AF_INET => Some(16),
            AF_INET6 => Some(28),
            _ => None,
        },
        FI_SOCKADDR_IN => Some(16),
        FI_SOCKADDR_IN6 => Some(28),
        FI_SOCKADDR_IB => Some(48),
        FI_ADDR_EFA => Some(24),
        FI_ADDR_PSMX | FI_ADDR_GNI | FI_ADDR_OPX => Some(8),
        FI_ADDR_PSMX2 => Some(16),
        FI_ADDR_PSMX3 => Some(32),
        FI_ADDR_IB_UD => Some(27),
        FI_ADDR_CXI => Some(4),
        FI_ADDR_STR | FI_ADDR_BGQ | FI_ADDR_MLX => Some(0),
        _ => None,
    }
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_ne_bytes([b[i], b[i + 1]])
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i..i + 8]);
    u64::from_ne_bytes(a)
}
fn ip6(b: &[u8]) -> String {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    std::net::Ipv6Addr::from(a).to_string()
}

/// `ofi_straddr` for the formats [`addr_len`] reads: `bytes` are the address
/// (`addr_len` of them), `text` the C string for `FI_ADDR_STR`, `p` the pointer.
pub fn straddr(format: u32, bytes: &[u8], text: Option<&str>, p: usize) -> Option<String> {
    let fam = if bytes.len() >= 2 { Some(u16_at(bytes, 0)) } else { None };
    let need = addr_len(format, fam)?;
    if bytes.len() < need {
        return None;
    }
    let sin = |b: &[u8]| {
        let ip = std::net::Ipv4Addr::new(b[4], b[5], b[6], b[7]);
        format!("fi_sockaddr_in://{ip}:{}", u16::from_be_bytes([b[2], b[3]]))
    };
    let sin6 = |b: &[u8]| format!("fi_sockaddr_in6://[{}]:{}", ip6(&b[8..24]), u16::from_be_bytes([b[2], b[3]]));
    Some(match format {
        FI_SOCKADDR if need == 16 => sin(bytes),
        FI_SOCKADDR => sin6(bytes),
        FI_SOCKADDR_IN => sin(bytes),
        FI_SOCKADDR_IN6 => sin6(bytes),
        FI_ADDR_EFA => format!("fi_addr_efa://[{}]:{}:{}", ip6(bytes), u16_at(bytes, 16), u32_at(bytes, 20)),
        FI_SOCKADDR_IB => {
            let pkey = u16::from_be_bytes([bytes[2], bytes[3]]);
            let sid = u64::from_be_bytes(bytes[24..32].try_into().ok()?);
            let scope = u64::from_be_bytes(bytes[40..48].try_into().ok()?);
            format!("fi_sockaddr_ib://[{}]:0x{:x}:0x{:x}:0x{:x}", ip6(&bytes[8..24]), pkey, ((sid >> 16) as u16) & 0xfff, scope as u8)
        }
        FI_ADDR_PSMX => format!("fi_addr_psmx://{:x}", u64_at(bytes, 0)),
        FI_ADDR_PSMX2 => format!("fi_addr_psmx2://{:x}:{:x}", u64_at(bytes, 0), u64_at(bytes, 8)),
        FI_ADDR_PSMX3 => format!(
            "fi_addr_psmx3://{:x}:{:x}:{:x}:{:x}",
            u64_at(bytes, 0),
            u64_at(bytes, 8),
            u64_at(bytes, 16),
            u64_at(bytes, 24)
        ),
        FI_ADDR_GNI => format!("fi_addr_gni://{:x}", u64_at(bytes, 0)),
        FI_ADDR_BGQ => format!("fi_addr_bgq://{}", ptr(p)),
        FI_ADDR_OPX => format!("fi_addr_opx://{:016x}", u64_at(bytes, 0)),
        FI_ADDR_MLX => format!("fi_addr_mlx://{}", ptr(p)),
        FI_ADDR_IB_UD => format!(
            "fi_addr_ib_ud://{}:{:x}/{:x}/{:x}/{:x}",
            ip6(bytes),
            u32_at(bytes, 16),
            u16_at(bytes, 20),
            u16_at(bytes, 22),
            bytes[26]
        ),
        FI_ADDR_STR => text?.to_string(),
        FI_ADDR_CXI => format!("fi_addr_cxi://0x{:08x}", u32_at(bytes, 0)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_matches_ofi_strncatf() {
        let mut b = Buf::new(10);
        b.cat("abcdefghijkl");
        assert_eq!(b.bytes(), b"abcdefgh"); // cap - 2 characters
        b.cat_addr("XYZ");
        assert_eq!(b.bytes(), b"abcdefghX"); // addresses may use the last byte
        b.cat("more");
        assert_eq!(b.bytes(), b"abcdefghX");
    }

    #[test]
    fn flags_and_enums() {
        let mut b = Buf::new(8192);
        scalar(&mut b, Kind::Caps, FI_MSG | FI_RMA);
        assert_eq!(b.bytes(), b"FI_MSG, FI_RMA");
        let mut b = Buf::new(8192);
        scalar(&mut b, Kind::Protocol, (1u64 << 31) | 77);
        assert_eq!(b.bytes(), b"Provider specific");
        let mut b = Buf::new(8192);
        scalar(&mut b, Kind::EpType, 42);
        assert_eq!(b.bytes(), b"Unknown");
        assert_eq!(Kind::from_c(28), Some(Kind::LogSubsys));
        assert_eq!(Kind::from_c(29), None);
    }

    #[test]
    fn sockaddr_in() {
        let mut a = [0u8; 16];
        a[0..2].copy_from_slice(&2u16.to_ne_bytes());
        a[2..4].copy_from_slice(&7471u16.to_be_bytes());
        a[4..8].copy_from_slice(&[10, 99, 0, 1]);
        assert_eq!(straddr(FI_SOCKADDR_IN, &a, None, 1).as_deref(), Some("fi_sockaddr_in://10.99.0.1:7471"));
        assert_eq!(straddr(FI_SOCKADDR, &a, None, 1).as_deref(), Some("fi_sockaddr_in://10.99.0.1:7471"));
    }
}
