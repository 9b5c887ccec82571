//! Unreliable datagram (UD) queue pairs and address handles, for
//! `FI_EP_DGRAM` endpoints (`crate::dgram`).
//!
//! A UD QP is created and moved to RTS here, without rdma-cm (a UD QP needs
//! no connection: INIT with a P_Key index, port and Q_Key, then RTR, then RTS
//! with a send PSN). Every send names its destination with an address handle
//! (`Ah`, `ibv_create_ah`), the remote QP number and the Q_Key. A receive
//! lands a 40-byte GRH in front of the payload (valid when the completion
//! says `IBV_WC_GRH`, always so on RoCE).
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::Arc;

use rdma_sys as ffi;

use super::{check, errno, Cq, Errno, Iov, Pd, QpCaps, Wc};

/// Bytes of the global route header a UD receive places before the payload.
pub const GRH_LEN: usize = 40;

/// A UD queue pair in RTS, bound to its send and receive CQs.
#[derive(Debug)]
pub struct UdQp {
    ptr: NonNull<ffi::ibv_qp>,
    /// What the device granted.
    pub caps: QpCaps,
    pub qkey: u32,
    _pd: Arc<Pd>,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
}
// SAFETY: ibv_post_send/ibv_post_recv are thread-safe per QP in libibverbs
// providers; the handle is freed only in Drop.
unsafe impl Send for UdQp {}
// SAFETY: as above.
unsafe impl Sync for UdQp {}

impl Pd {
    /// Creates a UD QP on `port` and brings it to RTS with `qkey`.
    pub fn create_ud_qp(self: &Arc<Self>, send_cq: &Arc<Cq>, recv_cq: &Arc<Cq>, caps: QpCaps, port: u8, qkey: u32) -> Result<UdQp, Errno> {
        // SAFETY: ibv_qp_init_attr is POD (integers and pointers); zero is valid.
        let mut a: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        a.send_cq = send_cq.raw();
        a.recv_cq = recv_cq.raw();
        a.qp_type = ffi::ibv_qp_type::IBV_QPT_UD;
        a.cap.max_send_wr = caps.max_send_wr;
        a.cap.max_recv_wr = caps.max_recv_wr;
        a.cap.max_send_sge = caps.max_send_sge;
        a.cap.max_recv_sge = caps.max_recv_sge;
        a.cap.max_inline_data = caps.max_inline;
        // SAFETY: valid PD and CQs (kept alive by the UdQp), valid attributes;
        // the driver writes the granted capacities back into `a.cap`.
        let p = unsafe { ffi::ibv_create_qp(self.ptr.as_ptr(), &mut a) };
        let ptr = NonNull::new(p).ok_or_else(errno)?;
        let granted = QpCaps {
            max_send_wr: a.cap.max_send_wr,
            max_recv_wr: a.cap.max_recv_wr,
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline: a.cap.max_inline_data,
        };
        let qp = UdQp { ptr, caps: granted, qkey, _pd: self.clone(), _send_cq: send_cq.clone(), _recv_cq: recv_cq.clone() };
        qp.to_rts(port, qkey)?;
        Ok(qp)
    }

    /// Creates an address handle for a remote UD endpoint.
    pub fn create_ah(self: &Arc<Self>, attr: &AhAttr) -> Result<Ah, Errno> {
        // SAFETY: ibv_ah_attr is POD; zero is valid.
        let mut a: ffi::ibv_ah_attr = unsafe { std::mem::zeroed() };
        a.dlid = attr.dlid;
        a.sl = attr.sl;
        a.port_num = attr.port;
        if let Some(dgid) = attr.dgid {
            a.is_global = 1;
            a.grh.dgid.raw = dgid;
            a.grh.sgid_index = attr.sgid_index;
            a.grh.hop_limit = 64;
        }
        // SAFETY: valid PD and attribute struct (read during the call only).
        let p = unsafe { ffi::ibv_create_ah(self.ptr.as_ptr(), &mut a) };
        let ptr = NonNull::new(p).ok_or_else(errno)?;
        Ok(Ah { ptr, _pd: self.clone() })
    }
}

impl UdQp {
    fn modify(&self, a: &mut ffi::ibv_qp_attr, mask: u32) -> Result<(), Errno> {
        // SAFETY: valid QP and attribute struct; only the masked fields are read.
        check(unsafe { ffi::ibv_modify_qp(self.ptr.as_ptr(), a, mask as i32) })
    }

    fn to_rts(&self, port: u8, qkey: u32) -> Result<(), Errno> {
        use ffi::ibv_qp_attr_mask as m;
        use ffi::ibv_qp_state as s;
        // SAFETY: ibv_qp_attr is POD; zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = s::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = port;
        a.qkey = qkey;
        self.modify(&mut a, m::IBV_QP_STATE.0 | m::IBV_QP_PKEY_INDEX.0 | m::IBV_QP_PORT.0 | m::IBV_QP_QKEY.0)?;
        // SAFETY: as above.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = s::IBV_QPS_RTR;
        self.modify(&mut a, m::IBV_QP_STATE.0)?;
        // SAFETY: as above.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = s::IBV_QPS_RTS;
        a.sq_psn = 0;
        self.modify(&mut a, m::IBV_QP_STATE.0 | m::IBV_QP_SQ_PSN.0)
    }

    pub fn qp_num(&self) -> u32 {
        // SAFETY: valid QP; qp_num is a plain field.
        unsafe { (*self.ptr.as_ptr()).qp_num }
    }

    /// Posts one send (with immediate data if `imm`) to the UD endpoint
    /// `remote_qpn` behind `ah`. `Err(ENOMEM)` means the queue is full.
    pub fn post_send(&self, wr_id: u64, ah: &Ah, remote_qpn: u32, imm: Option<u32>, sges: &[Iov], flags: u32) -> Result<(), Errno> {
        use ffi::ibv_wr_opcode as o;
        // SAFETY: ibv_send_wr is POD (integers, pointers, unions of those); zero is valid.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = sges.as_ptr() as *mut ffi::ibv_sge;
        wr.num_sge = sges.len() as i32;
        wr.send_flags = flags;
        match imm {
            Some(v) => {
                wr.opcode = o::IBV_WR_SEND_WITH_IMM;
                wr.imm_data_invalidated_rkey_union.imm_data = v.to_be();
            }
            None => wr.opcode = o::IBV_WR_SEND,
        }
        wr.wr.ud = ffi::ud_t { ah: ah.ptr.as_ptr(), remote_qpn, remote_qkey: self.qkey };
        let mut bad: *mut ffi::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: valid QP; `wr`, the SGE array and the AH outlive the call (the
        // driver copies the request; the AH is referenced by the caller until the
        // send completes — `Ah` is kept alive by the address vector entry the
        // caller holds); the SGEs were built under Iov::new's contract.
        check(unsafe { ffi::ibv_post_send(self.ptr.as_ptr(), &mut wr, &mut bad) })
    }

    /// Posts one receive. `Err(ENOMEM)` means the queue is full.
    pub fn post_recv(&self, wr_id: u64, sges: &[Iov]) -> Result<(), Errno> {
        let mut wr = super::recv_wr(wr_id, sges);
        let mut bad: *mut ffi::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: valid QP; `wr` and the SGE array outlive the call (copied by the driver).
        check(unsafe { ffi::ibv_post_recv(self.ptr.as_ptr(), &mut wr, &mut bad) })
    }

    /// Moves the QP to the error state, which flushes every outstanding request.
    pub fn to_error(&self) -> Result<(), Errno> {
        // SAFETY: ibv_qp_attr is POD; zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ffi::ibv_qp_state::IBV_QPS_ERR;
        self.modify(&mut a, ffi::ibv_qp_attr_mask::IBV_QP_STATE.0)
    }
}

impl Drop for UdQp {
    fn drop(&mut self) {
        // SAFETY: we own the QP; its CQs are kept alive by the Arcs we hold.
        unsafe { ffi::ibv_destroy_qp(self.ptr.as_ptr()) };
    }
}

/// Where an address handle points.
#[derive(Debug, Clone, Copy, Default)]
pub struct AhAttr {
    /// The destination GID: `Some` makes the handle global (a GRH is sent;
    /// required on RoCE).
    pub dgid: Option<[u8; 16]>,
    pub sgid_index: u8,
    pub dlid: u16,
    pub sl: u8,
    pub port: u8,
}

/// An address handle (`ibv_ah`).
#[derive(Debug)]
pub struct Ah {
    ptr: NonNull<ffi::ibv_ah>,
    _pd: Arc<Pd>,
}
// SAFETY: an AH is immutable after creation and freed only in Drop.
unsafe impl Send for Ah {}
// SAFETY: as above.
unsafe impl Sync for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: we own the AH; sends naming it hold an Arc to it until they complete.
        unsafe { ffi::ibv_destroy_ah(self.ptr.as_ptr()) };
    }
}

impl Wc {
    /// The sender's QP number (UD receives).
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }
    /// The sender's LID (UD receives over InfiniBand).
    pub fn slid(&self) -> u16 {
        self.0.slid
    }
    /// Whether a GRH sits in the first 40 bytes of the receive buffer.
    pub fn has_grh(&self) -> bool {
        self.0.wc_flags & ffi::ibv_wc_flags::IBV_WC_GRH.0 != 0
    }
}
