//! `fi_trigger.h`: triggered contexts and deferred work.

use super::*;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_trigger_threshold {
    pub cntr: *mut fid_cntr,
    pub threshold: usize,
}

/// The anonymous `union { ... } value` of `struct fi_trigger_var`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_trigger_var_value {
    pub val8: u8,
    pub val16: u16,
    pub val32: u32,
    pub val64: u64,
    pub data: *mut u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_trigger_var {
    pub datatype: fi_datatype,
    pub count: c_int,
    pub addr: *mut c_void,
    pub value: fi_trigger_var_value,
}

/// The anonymous `union { ... } device` of `struct fi_trigger_xpu`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_trigger_xpu_device {
    pub reserved: u64,
    pub cuda: c_int,
    pub ze: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_trigger_xpu {
    pub count: c_int,
    pub iface: fi_hmem_iface,
    pub device: fi_trigger_xpu_device,
    pub var: *mut fi_trigger_var,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_msg {
    pub ep: *mut fid_ep,
    pub msg: fi_msg,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_tagged {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_tagged,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_rma {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_rma,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_fetch_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub fetch: fi_msg_fetch,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_compare_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub fetch: fi_msg_fetch,
    pub compare: fi_msg_compare,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_cntr {
    pub cntr: *mut fid_cntr,
    pub value: u64,
}

/// The anonymous `union { ... } trigger` of `struct fi_triggered_context`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_triggered_context_trigger {
    pub threshold: fi_trigger_threshold,
    pub xpu: fi_trigger_xpu,
    pub internal: [*mut c_void; 3],
}

/// Overlays `struct fi_context` (same size) for triggered operations.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_triggered_context {
    pub event_type: fi_trigger_event,
    pub trigger: fi_triggered_context_trigger,
}

/// The anonymous `union { ... } trigger` of `struct fi_triggered_context2`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_triggered_context2_trigger {
    pub threshold: fi_trigger_threshold,
    pub xpu: fi_trigger_xpu,
    pub internal: [*mut c_void; 7],
}

/// Overlays `struct fi_context2` (same size) for triggered operations.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_triggered_context2 {
    pub event_type: fi_trigger_event,
    pub trigger: fi_triggered_context2_trigger,
}

/// The anonymous `union { ... } op` of `struct fi_deferred_work`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_deferred_work_op {
    pub msg: *mut fi_op_msg,
    pub tagged: *mut fi_op_tagged,
    pub rma: *mut fi_op_rma,
    pub atomic: *mut fi_op_atomic,
    pub fetch_atomic: *mut fi_op_fetch_atomic,
    pub compare_atomic: *mut fi_op_compare_atomic,
    pub cntr: *mut fi_op_cntr,
}

/// Argument of `fi_control(FI_QUEUE_WORK / FI_CANCEL_WORK)` on a domain.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_deferred_work {
    pub context: fi_context2,
    pub threshold: u64,
    pub triggering_cntr: *mut fid_cntr,
    pub completion_cntr: *mut fid_cntr,
    pub op_type: fi_op_type,
    pub op: fi_deferred_work_op,
}
