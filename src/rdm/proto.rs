//! The RDM wire protocol, version 4 (docs/rdm-protocol.md has the byte layout).
//!
//! Every message starts with a fixed 40-byte little-endian header. The
//! encoding is *canonical*: every field has exactly one accepted value for a
//! given message (unused fields must be zero, flags must be those the op
//! allows), so `decode(x) == Ok(m)` implies `encode(m) == x`. That makes the
//! validation easy to test and leaves no room for a peer to smuggle state in
//! "ignored" bits.
//!
//! Input is hostile: `decode` checks version, op, flags, every length against
//! what actually arrived, segment counts and sizes, and uses checked
//! arithmetic throughout. It never panics; it returns a [`ProtoError`].

use std::fmt;

use crate::error::FiError;

/// The fewest credits (receive buffers) a peer may be granted: the credit
/// rules (`credits.rs`: return threshold 2 <= credits - 1) and the receive
/// pool's floor per peer (`srq.rs`) both rest on it, and a HELLO offering
/// less is refused. It lives here, with the wire rules, so that neither
/// side's module depends on the other's for it.
pub const MIN_CREDITS: u16 = 3;

/// Protocol version carried in byte 0 of every header.
pub const VERSION: u8 = 4;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 40;
/// Size of one rendezvous segment descriptor (after an RTS header).
pub const SEG_LEN: usize = 24;
/// Most segments one RTS may describe (so the sender's tx iov_limit must not exceed it).
pub const MAX_SEGS: usize = 16;
/// Largest RTS: header plus `MAX_SEGS` segments.
pub const MAX_RTS_LEN: usize = HEADER_LEN + MAX_SEGS * SEG_LEN;
/// Largest message (total length) a peer may announce; bounds all length arithmetic.
pub const MAX_MSG_LEN: u64 = 1 << 40;
/// Largest EAGER payload the protocol allows (the eager-size knob is clamped to it).
pub const MAX_EAGER: usize = 1 << 20;

/// Header flag: the message is tagged (the tag field is meaningful).
pub const F_TAGGED: u16 = 1 << 0;
/// Header flag: the message carries remote CQ data (the data field is meaningful).
pub const F_REMOTE_CQ_DATA: u16 = 1 << 1;
const DATA_FLAGS: u16 = F_TAGGED | F_REMOTE_CQ_DATA;
/// Header flag (CREDIT only, version 2): the sender of the message asks the
/// receiver to keep at most `len` of the sender's credits and to release the
/// rest (see `credits.rs`, recall).
pub const F_RECALL: u16 = 1 << 2;

/// Message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// Header + payload in one send.
    Eager = 1,
    /// Rendezvous request: header + segment list; the receiver RDMA-reads the payload.
    RndvRts = 2,
    /// Rendezvous done: the receiver has read what it wanted; the sender completes its send.
    RndvFin = 3,
    /// Rendezvous failed at the receiver (e.g. the RDMA read failed); the sender completes with an error.
    RndvNack = 4,
    /// Standalone credit return.
    Credit = 5,
}

impl Op {
    pub fn from_u8(v: u8) -> Option<Op> {
        Some(match v {
            1 => Op::Eager,
            2 => Op::RndvRts,
            3 => Op::RndvFin,
            4 => Op::RndvNack,
            5 => Op::Credit,
            _ => return None,
        })
    }
}

/// What matching needs to know about an application message: its tag (None:
/// untagged, FI_MSG) and its remote CQ data (4 bytes in version 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Envelope {
    pub tag: Option<u64>,
    pub data: Option<u32>,
}

impl Envelope {
    fn flags(&self) -> u16 {
        (if self.tag.is_some() { F_TAGGED } else { 0 }) | (if self.data.is_some() { F_REMOTE_CQ_DATA } else { 0 })
    }
}

/// One piece of the sender's buffer, readable by the receiver with RDMA READ.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Segment {
    pub addr: u64,
    pub len: u64,
    pub rkey: u32,
}

/// A decoded (or to-be-encoded) message. `credits` is the credit grant: how
/// many receive buffers the sender of this message has reposted for the peer
/// since its last grant (see `credits.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    Eager {
        credits: u16,
        msg_id: u64,
        env: Envelope,
        payload: &'a [u8],
    },
    /// `len` is the total message length, the sum of the segments' lengths.
    Rts {
        credits: u16,
        msg_id: u64,
        env: Envelope,
        len: u64,
        segs: Vec<Segment>,
    },
    /// `msg_id` is the RTS's; `len` the number of bytes the receiver consumed (less than the
    /// message when it truncated it, 0 when it discarded it).
    Fin {
        credits: u16,
        msg_id: u64,
        len: u64,
    },
    /// `err` is a positive libfabric error code (e.g. FI_EIO).
    Nack {
        credits: u16,
        msg_id: u64,
        err: u16,
    },
    /// `release`: credits for the *receiver's* buffers the sender hands back
    /// unused (on top of the one this message itself consumes). `recall`:
    /// the sender asks the receiver to keep at most this many credits for the
    /// sender's buffers and release the rest.
    Credit {
        credits: u16,
        release: u16,
        recall: Option<u16>,
    },
}

/// Why a buffer is not a valid message (or a message cannot be encoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoError {
    /// Fewer bytes than the header (or the header's segment list) needs.
    Short { need: usize, got: usize },
    /// Unknown protocol version.
    Version(u8),
    /// Unknown op.
    Op(u8),
    /// Flags the op does not allow.
    Flags { op: u8, flags: u16 },
    /// A field that must be zero (or in a range) is not.
    Field(&'static str),
    /// The length field disagrees with the bytes that arrived (or trailing bytes follow).
    Length { expected: u64, got: u64 },
    /// Bad segment list (count, a zero-length segment, or lengths not summing to the total).
    Segments(&'static str),
    /// A length beyond the protocol's bounds.
    TooLarge(u64),
    /// encode: the output buffer is too small.
    BufferTooSmall { need: usize, got: usize },
}

impl ProtoError {
    /// The libfabric error to report when this error reaches a user operation.
    pub fn fi_error(&self) -> FiError {
        match self {
            ProtoError::BufferTooSmall { .. } => FiError::TOOSMALL,
            ProtoError::TooLarge(_) => FiError::MSGSIZE,
            _ => FiError::IO,
        }
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtoError::Short { need, got } => write!(f, "message too short: {got} bytes, need {need}"),
            ProtoError::Version(v) => write!(f, "unsupported protocol version {v} (this side speaks {VERSION})"),
            ProtoError::Op(o) => write!(f, "unknown op {o}"),
            ProtoError::Flags { op, flags } => write!(f, "flags {flags:#x} not allowed for op {op}"),
            ProtoError::Field(name) => write!(f, "invalid {name} field"),
            ProtoError::Length { expected, got } => write!(f, "length mismatch: header says {expected}, got {got}"),
            ProtoError::Segments(why) => write!(f, "bad rendezvous segment list: {why}"),
            ProtoError::TooLarge(n) => write!(f, "length {n} exceeds the protocol limit"),
            ProtoError::BufferTooSmall { need, got } => write!(f, "encode: buffer of {got} bytes, need {need}"),
        }
    }
}

impl std::error::Error for ProtoError {}

// Header field offsets (docs/rdm-protocol.md, "Header").
const O_VERSION: usize = 0;
const O_OP: usize = 1;
const O_FLAGS: usize = 2;
const O_CREDITS: usize = 4;
const O_AUX: usize = 6;
const O_TAG: usize = 8;
const O_DATA: usize = 16;
const O_MSG_ID: usize = 24;
const O_LEN: usize = 32;

/// The raw header fields, before per-op validation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Header {
    version: u8,
    op: u8,
    flags: u16,
    credits: u16,
    /// RTS: number of segments; NACK: error code; otherwise 0.
    aux: u16,
    tag: u64,
    data: u64,
    msg_id: u64,
    len: u64,
}

#[inline(always)]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
#[inline(always)]
fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
#[inline(always)]
fn rd64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}
fn wr(b: &mut [u8], o: usize, v: &[u8]) {
    b[o..o + v.len()].copy_from_slice(v);
}

impl Header {
    /// A fixed-size array: the offsets are constants, so the reads need no
    /// bounds checks (this runs for every arrival).
    #[inline(always)]
    fn read(b: &[u8; HEADER_LEN]) -> Header {
        Header {
            version: b[O_VERSION],
            op: b[O_OP],
            flags: rd16(b, O_FLAGS),
            credits: rd16(b, O_CREDITS),
            aux: rd16(b, O_AUX),
            tag: rd64(b, O_TAG),
            data: rd64(b, O_DATA),
            msg_id: rd64(b, O_MSG_ID),
            len: rd64(b, O_LEN),
        }
    }

    /// `b` must hold at least HEADER_LEN bytes (checked by the caller).
    fn write(&self, b: &mut [u8]) {
        b[O_VERSION] = self.version;
        b[O_OP] = self.op;
        wr(b, O_FLAGS, &self.flags.to_le_bytes());
        wr(b, O_CREDITS, &self.credits.to_le_bytes());
        wr(b, O_AUX, &self.aux.to_le_bytes());
        wr(b, O_TAG, &self.tag.to_le_bytes());
        wr(b, O_DATA, &self.data.to_le_bytes());
        wr(b, O_MSG_ID, &self.msg_id.to_le_bytes());
        wr(b, O_LEN, &self.len.to_le_bytes());
    }

    fn data_msg(op: Op, credits: u16, msg_id: u64, env: &Envelope, aux: u16, len: u64) -> Header {
        Header {
            version: VERSION,
            op: op as u8,
            flags: env.flags(),
            credits,
            aux,
            tag: env.tag.unwrap_or(0),
            data: env.data.map_or(0, u64::from),
            msg_id,
            len,
        }
    }

    /// The envelope of an EAGER or RTS header; tag and data must be zero unless flagged.
    fn envelope(&self) -> Result<Envelope, ProtoError> {
        if self.flags & !DATA_FLAGS != 0 {
            return Err(ProtoError::Flags { op: self.op, flags: self.flags });
        }
        let tag = if self.flags & F_TAGGED != 0 {
            Some(self.tag)
        } else if self.tag != 0 {
            return Err(ProtoError::Field("tag"));
        } else {
            None
        };
        // Version 1 carries 4 bytes of CQ data (the provider's cq_data_size).
        let data = if self.flags & F_REMOTE_CQ_DATA != 0 {
            Some(u32::try_from(self.data).map_err(|_| ProtoError::Field("cq data"))?)
        } else if self.data != 0 {
            return Err(ProtoError::Field("cq data"));
        } else {
            None
        };
        Ok(Envelope { tag, data })
    }

    /// For control ops (FIN, NACK, CREDIT): no flags, no tag, no data.
    fn control(&self) -> Result<(), ProtoError> {
        if self.flags != 0 {
            return Err(ProtoError::Flags { op: self.op, flags: self.flags });
        }
        if self.tag != 0 {
            return Err(ProtoError::Field("tag"));
        }
        if self.data != 0 {
            return Err(ProtoError::Field("cq data"));
        }
        Ok(())
    }
}

/// Checks an RTS's segment list against its total length.
fn check_segs(segs: &[Segment], len: u64) -> Result<(), ProtoError> {
    if segs.is_empty() {
        return Err(ProtoError::Segments("no segments"));
    }
    if segs.len() > MAX_SEGS {
        return Err(ProtoError::Segments("too many segments"));
    }
    if len > MAX_MSG_LEN {
        return Err(ProtoError::TooLarge(len));
    }
    let mut sum: u64 = 0;
    for s in segs {
        if s.len == 0 {
            return Err(ProtoError::Segments("zero-length segment"));
        }
        if s.addr.checked_add(s.len).is_none() {
            return Err(ProtoError::Segments("segment wraps the address space"));
        }
        sum = sum.checked_add(s.len).ok_or(ProtoError::Segments("lengths overflow"))?;
    }
    if sum != len {
        return Err(ProtoError::Segments("lengths do not sum to the message length"));
    }
    Ok(())
}

/// A valid EAGER message read in place: what [`decode`] would return for it,
/// without building a [`Message`] (the arrival path's common case).
pub struct EagerView<'a> {
    pub credits: u16,
    pub env: Envelope,
    pub payload: &'a [u8],
}

/// [`decode`] for a valid EAGER message, inlined into the arrival path.
/// `None` for anything else, another op or a malformed EAGER alike: the
/// caller then calls `decode`, which reads it (and says what is wrong). The
/// checks are `decode`'s for an EAGER message.
#[inline(always)]
pub fn eager_view(buf: &[u8]) -> Option<EagerView<'_>> {
    let h = Header::read(buf.first_chunk::<HEADER_LEN>()?);
    if h.version != VERSION || h.op != Op::Eager as u8 || h.aux != 0 {
        return None;
    }
    let env = h.envelope().ok()?;
    let payload = &buf[HEADER_LEN..];
    if h.len != payload.len() as u64 || payload.len() > MAX_EAGER {
        return None;
    }
    Some(EagerView { credits: h.credits, env, payload })
}

/// Decodes one message (all the bytes one receive completion reported).
pub fn decode(buf: &[u8]) -> Result<Message<'_>, ProtoError> {
    let Some(hb) = buf.first_chunk::<HEADER_LEN>() else {
        return Err(ProtoError::Short { need: HEADER_LEN, got: buf.len() });
    };
    let h = Header::read(hb);
    if h.version != VERSION {
        return Err(ProtoError::Version(h.version));
    }
    let op = Op::from_u8(h.op).ok_or(ProtoError::Op(h.op))?;
    let body = &buf[HEADER_LEN..];
    // Control messages and EAGER-less ops have nothing after the header (RTS: the segments).
    let no_body = || {
        if body.is_empty() {
            Ok(())
        } else {
            Err(ProtoError::Length { expected: HEADER_LEN as u64, got: buf.len() as u64 })
        }
    };
    match op {
        Op::Eager => {
            let env = h.envelope()?;
            if h.aux != 0 {
                return Err(ProtoError::Field("aux"));
            }
            if h.len != body.len() as u64 {
                return Err(ProtoError::Length { expected: h.len, got: body.len() as u64 });
            }
            if body.len() > MAX_EAGER {
                return Err(ProtoError::TooLarge(h.len));
            }
            Ok(Message::Eager { credits: h.credits, msg_id: h.msg_id, env, payload: body })
        }
        Op::RndvRts => {
            let env = h.envelope()?;
            let n = h.aux as usize;
            if n == 0 || n > MAX_SEGS {
                return Err(ProtoError::Segments("segment count out of range"));
            }
            // n <= MAX_SEGS, so this cannot overflow.
            let need = n * SEG_LEN;
            if body.len() < need {
                return Err(ProtoError::Short { need: HEADER_LEN + need, got: buf.len() });
            }
            if body.len() > need {
                return Err(ProtoError::Length { expected: (HEADER_LEN + need) as u64, got: buf.len() as u64 });
            }
            let mut segs = Vec::with_capacity(n);
            for raw in body.chunks_exact(SEG_LEN) {
                if rd32(raw, 20) != 0 {
                    return Err(ProtoError::Field("segment reserved"));
                }
                segs.push(Segment { addr: rd64(raw, 0), len: rd64(raw, 8), rkey: rd32(raw, 16) });
            }
            check_segs(&segs, h.len)?;
            Ok(Message::Rts { credits: h.credits, msg_id: h.msg_id, env, len: h.len, segs })
        }
        Op::RndvFin => {
            h.control()?;
            no_body()?;
            if h.aux != 0 {
                return Err(ProtoError::Field("aux"));
            }
            if h.len > MAX_MSG_LEN {
                return Err(ProtoError::TooLarge(h.len));
            }
            Ok(Message::Fin { credits: h.credits, msg_id: h.msg_id, len: h.len })
        }
        Op::RndvNack => {
            h.control()?;
            no_body()?;
            if h.aux == 0 {
                return Err(ProtoError::Field("nack error code"));
            }
            if h.len != 0 {
                return Err(ProtoError::Field("len"));
            }
            Ok(Message::Nack { credits: h.credits, msg_id: h.msg_id, err: h.aux })
        }
        Op::Credit => {
            if h.flags & !F_RECALL != 0 {
                return Err(ProtoError::Flags { op: h.op, flags: h.flags });
            }
            if h.tag != 0 || h.data != 0 || h.msg_id != 0 {
                return Err(ProtoError::Field("credit message field"));
            }
            no_body()?;
            let recall = if h.flags & F_RECALL != 0 {
                Some(u16::try_from(h.len).map_err(|_| ProtoError::Field("recall target"))?)
            } else if h.len != 0 {
                return Err(ProtoError::Field("credit message field"));
            } else {
                None
            };
            Ok(Message::Credit { credits: h.credits, release: h.aux, recall })
        }
    }
}

/// The header of an EAGER message whose `payload_len` payload bytes the caller
/// places right after it (e.g. gathered from the user's iov by a second SGE).
pub fn eager_header(credits: u16, msg_id: u64, env: Envelope, payload_len: usize) -> Result<[u8; HEADER_LEN], ProtoError> {
    if payload_len > MAX_EAGER {
        return Err(ProtoError::TooLarge(payload_len as u64));
    }
    let mut b = [0u8; HEADER_LEN];
    Header::data_msg(Op::Eager, credits, msg_id, &env, 0, payload_len as u64).write(&mut b);
    Ok(b)
}

impl<'a> Message<'a> {
    pub fn op(&self) -> Op {
        match self {
            Message::Eager { .. } => Op::Eager,
            Message::Rts { .. } => Op::RndvRts,
            Message::Fin { .. } => Op::RndvFin,
            Message::Nack { .. } => Op::RndvNack,
            Message::Credit { .. } => Op::Credit,
        }
    }

    /// The credit grant this message carries.
    pub fn credits(&self) -> u16 {
        match self {
            Message::Eager { credits, .. }
            | Message::Rts { credits, .. }
            | Message::Fin { credits, .. }
            | Message::Nack { credits, .. }
            | Message::Credit { credits, .. } => *credits,
        }
    }

    /// Bytes `encode` writes.
    pub fn encoded_len(&self) -> usize {
        match self {
            Message::Eager { payload, .. } => HEADER_LEN + payload.len(),
            Message::Rts { segs, .. } => HEADER_LEN + segs.len() * SEG_LEN,
            _ => HEADER_LEN,
        }
    }

    /// Writes the message to the start of `out`; returns the bytes written.
    /// Refuses messages `decode` would reject, so the peer never sees them.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, ProtoError> {
        let h = match self {
            Message::Eager { credits, msg_id, env, payload } => {
                if payload.len() > MAX_EAGER {
                    return Err(ProtoError::TooLarge(payload.len() as u64));
                }
                Header::data_msg(Op::Eager, *credits, *msg_id, env, 0, payload.len() as u64)
            }
            Message::Rts { credits, msg_id, env, len, segs } => {
                check_segs(segs, *len)?;
                Header::data_msg(Op::RndvRts, *credits, *msg_id, env, segs.len() as u16, *len)
            }
            Message::Fin { credits, msg_id, len } => {
                if *len > MAX_MSG_LEN {
                    return Err(ProtoError::TooLarge(*len));
                }
                Header { version: VERSION, op: Op::RndvFin as u8, credits: *credits, msg_id: *msg_id, len: *len, ..Default::default() }
            }
            Message::Nack { credits, msg_id, err } => {
                if *err == 0 {
                    return Err(ProtoError::Field("nack error code"));
                }
                Header { version: VERSION, op: Op::RndvNack as u8, credits: *credits, msg_id: *msg_id, aux: *err, ..Default::default() }
            }
            Message::Credit { credits, release, recall } => Header {
                version: VERSION,
                op: Op::Credit as u8,
                flags: if recall.is_some() { F_RECALL } else { 0 },
                credits: *credits,
                aux: *release,
                len: recall.map_or(0, u64::from),
                ..Default::default()
            },
        };
        let need = self.encoded_len();
        if out.len() < need {
            return Err(ProtoError::BufferTooSmall { need, got: out.len() });
        }
        h.write(out);
        match self {
            Message::Eager { payload, .. } => out[HEADER_LEN..need].copy_from_slice(payload),
            Message::Rts { segs, .. } => {
                for (raw, s) in out[HEADER_LEN..need].chunks_exact_mut(SEG_LEN).zip(segs) {
                    wr(raw, 0, &s.addr.to_le_bytes());
                    wr(raw, 8, &s.len.to_le_bytes());
                    wr(raw, 16, &s.rkey.to_le_bytes());
                    wr(raw, 20, &0u32.to_le_bytes());
                }
            }
            _ => {}
        }
        Ok(need)
    }

    /// `encode` into a new vector.
    pub fn to_vec(&self) -> Result<Vec<u8>, ProtoError> {
        let mut v = vec![0u8; self.encoded_len()];
        self.encode(&mut v)?;
        Ok(v)
    }
}

/// Most bytes of an endpoint name a HELLO carries (HELLO_MAX_LEN - 18; a
/// sockaddr_in6 is 28).
pub const HELLO_MAX_NAME: usize = 38;
/// Fixed part of a HELLO (version 3: with the 8-byte incarnation; version 4:
/// with the 4-byte `max_eager`).
pub const HELLO_FIXED: usize = 18;
/// Largest HELLO: fits the 56 bytes of private data an IB/RoCE connect request carries.
pub const HELLO_MAX_LEN: usize = HELLO_FIXED + HELLO_MAX_NAME;
// Checked at compile time: the largest HELLO fits the private data, and an
// IPv6 endpoint name (a sockaddr_in6, 28 bytes) fits the HELLO.
const _: () = assert!(HELLO_MAX_LEN <= 56 && HELLO_MAX_NAME >= 28);

/// The connection handshake, carried in the rdma-cm private data of the
/// connect request (from the connecting endpoint) and of the accept (back):
/// the protocol version, the peer's initial credits (`grant`: receive buffers
/// the sender of the HELLO has set aside for the peer, possibly 0), the most
/// credits the sender will ever let the peer hold (`max_credits`), and the
/// sender's endpoint name (what the peer's address vector holds for it, so the
/// passive side can map the new QP to an fi_addr; empty in the accept), and
/// (version 3) the sender's `incarnation`: a random non-zero number drawn
/// when the endpoint is enabled. A request from an address whose standing
/// connection carries another incarnation comes from a restarted peer (its
/// disconnect was lost): the old connection is failed and the new one
/// accepted, instead of refused as a duplicate.
///
/// Version 4 adds `max_eager`: the largest EAGER payload the sender of the
/// HELLO can receive (its own eager size; its bounce buffers hold no more).
/// The peer sends EAGER only up to the smaller of that and its own eager
/// size, and longer messages by rendezvous, so endpoints with different
/// `FI_RSVERBS_EAGER_SIZE` interoperate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub grant: u16,
    pub max_credits: u16,
    pub incarnation: u64,
    /// At most `MAX_EAGER`.
    pub max_eager: u32,
    pub name: Vec<u8>,
}

impl Hello {
    fn check(&self) -> Result<(), ProtoError> {
        if self.max_credits < MIN_CREDITS {
            return Err(ProtoError::Field("hello max credits"));
        }
        if self.grant > self.max_credits {
            return Err(ProtoError::Field("hello grant"));
        }
        if self.incarnation == 0 {
            return Err(ProtoError::Field("hello incarnation"));
        }
        if self.max_eager as usize > MAX_EAGER {
            return Err(ProtoError::Field("hello max eager"));
        }
        Ok(())
    }

    pub fn encode(&self) -> Result<Vec<u8>, ProtoError> {
        if self.name.len() > HELLO_MAX_NAME {
            return Err(ProtoError::TooLarge(self.name.len() as u64));
        }
        self.check()?;
        let mut v = Vec::with_capacity(HELLO_FIXED + self.name.len());
        v.push(VERSION);
        v.push(self.name.len() as u8);
        v.extend_from_slice(&self.grant.to_le_bytes());
        v.extend_from_slice(&self.max_credits.to_le_bytes());
        v.extend_from_slice(&self.incarnation.to_le_bytes());
        v.extend_from_slice(&self.max_eager.to_le_bytes());
        v.extend_from_slice(&self.name);
        Ok(v)
    }

    /// Decodes private data. Bytes after the name must be zero: rdma-cm may
    /// deliver the private data padded with zeros to the transport's size.
    pub fn decode(b: &[u8]) -> Result<Hello, ProtoError> {
        if b.is_empty() {
            return Err(ProtoError::Short { need: HELLO_FIXED, got: 0 });
        }
        if b[0] != VERSION {
            return Err(ProtoError::Version(b[0]));
        }
        if b.len() < HELLO_FIXED {
            return Err(ProtoError::Short { need: HELLO_FIXED, got: b.len() });
        }
        let n = b[1] as usize;
        if n > HELLO_MAX_NAME {
            return Err(ProtoError::TooLarge(n as u64));
        }
        if b.len() < HELLO_FIXED + n {
            return Err(ProtoError::Short { need: HELLO_FIXED + n, got: b.len() });
        }
        if b[HELLO_FIXED + n..].iter().any(|&x| x != 0) {
            return Err(ProtoError::Length { expected: (HELLO_FIXED + n) as u64, got: b.len() as u64 });
        }
        let h = Hello {
            grant: rd16(b, 2),
            max_credits: rd16(b, 4),
            incarnation: rd64(b, 6),
            max_eager: rd32(b, 14),
            name: b[HELLO_FIXED..HELLO_FIXED + n].to_vec(),
        };
        h.check()?;
        Ok(h)
    }
}

/// One RDMA READ the receiver of an RTS issues: `len` bytes from
/// (`remote_addr`, `rkey`) into the message's byte `local_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadChunk {
    pub local_offset: usize,
    pub remote_addr: u64,
    pub rkey: u32,
    pub len: usize,
}

/// Splits the first `len` bytes described by `segs` into reads of at most
/// `max_chunk` bytes (the device's max_msg_size), in message order. Chunks never
/// cross a segment boundary. `len` beyond the segments' total is cut to it.
pub fn read_plan(segs: &[Segment], len: usize, max_chunk: usize) -> Vec<ReadChunk> {
    let max_chunk = max_chunk.max(1);
    let mut out = Vec::new();
    let mut done = 0usize;
    for s in segs {
        if done >= len {
            break;
        }
        let seg_len = usize::try_from(s.len).unwrap_or(usize::MAX);
        let take = seg_len.min(len - done);
        let mut off = 0usize;
        while off < take {
            let n = (take - off).min(max_chunk);
            out.push(ReadChunk { local_offset: done + off, remote_addr: s.addr.wrapping_add(off as u64), rkey: s.rkey, len: n });
            off += n;
        }
        done += take;
    }
    out
}

#[cfg(test)]
#[path = "tests/proto.rs"]
pub(crate) mod tests;
