//! Datagram endpoints (`FI_EP_DGRAM`) over verbs UD queue pairs, as
//! libfabric's C verbs provider offers them (prov/verbs/src/verbs_dgram_*.c):
//!
//! * addresses are `FI_ADDR_IB_UD`, `struct ofi_ib_ud_ep_name` (GID, QP
//!   number, LID, P_Key, service, SL; 32 bytes): what `fi_getname` returns goes
//!   straight into `fi_av_insert`, which makes an address handle for it;
//! * mode `FI_MSG_PREFIX` with a 40-byte prefix: every send and receive
//!   buffer starts with room for the GRH a UD receive lands there; sends skip
//!   it, receive completions report its length included (as verbs does);
//! * messages are at most one port MTU; delivery is unreliable and
//!   unordered (loss is the application's to handle);
//! * `fi_getinfo` resolves a node and service to a peer's address through a
//!   small name service (`ns`): an endpoint whose address has a service
//!   answers on TCP port = service with its name.

pub mod av;
pub mod ep;
pub mod info;
pub mod ns;

use std::net::Ipv6Addr;

/// `VERBS_DGRAM_MSG_PREFIX_SIZE`: the GRH a UD receive places first.
pub const MSG_PREFIX_SIZE: usize = crate::verbs::ud::GRH_LEN;
/// The Q_Key libfabric's verbs uses for every UD QP.
pub const QKEY: u32 = 0x1111_1111;
/// Size of `struct ofi_ib_ud_ep_name`.
pub const NAME_LEN: usize = 32;

/// `struct ofi_ib_ud_ep_name`, in its C layout (host byte order, the GID as
/// the device gives it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct UdName {
    pub gid: [u8; 16],
    pub qpn: u32,
    pub lid: u16,
    pub pkey: u16,
    pub service: u16,
    pub sl: u8,
}

impl UdName {
    pub fn to_bytes(&self) -> [u8; NAME_LEN] {
        let mut b = [0u8; NAME_LEN];
        b[0..16].copy_from_slice(&self.gid);
        b[16..20].copy_from_slice(&self.qpn.to_ne_bytes());
        b[20..22].copy_from_slice(&self.lid.to_ne_bytes());
        b[22..24].copy_from_slice(&self.pkey.to_ne_bytes());
        b[24..26].copy_from_slice(&self.service.to_ne_bytes());
        b[26] = self.sl;
        b
    }

    /// Parses the C struct; `None` when fewer than 32 bytes are given.
    pub fn from_bytes(b: &[u8]) -> Option<UdName> {
        if b.len() < NAME_LEN {
            return None;
        }
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(UdName {
            gid: b[0..16].try_into().ok()?,
            qpn: u32::from_ne_bytes(b[16..20].try_into().ok()?),
            lid: u16_at(20),
            pkey: u16_at(22),
            service: u16_at(24),
            sl: b[26],
        })
    }

    /// The peer identity a receive completion gives (its GID, or LID without
    /// one, and its QP number): what `FI_SOURCE` looks up.
    pub fn key(&self) -> (u128, u16, u32) {
        (u128::from_be_bytes(self.gid), if self.gid == [0; 16] { self.lid } else { 0 }, self.qpn)
    }

    /// Whether the address needs a global route (a GRH): it has an interface id.
    pub fn is_global(&self) -> bool {
        self.gid[8..16] != [0; 8]
    }
}

/// The libfabric string form (`ofi_straddr` for `FI_ADDR_IB_UD`).
pub fn straddr(n: &UdName) -> String {
    format!("fi_addr_ib_ud://{}:{:x}/{:x}/{:x}/{:x}", Ipv6Addr::from(n.gid), n.qpn, n.lid, n.pkey, n.sl)
}

/// The GID of an IP address on RoCE (IPv4: the IPv4-mapped IPv6 address).
pub fn gid_of_ip(ip: std::net::IpAddr) -> [u8; 16] {
    match ip {
        std::net::IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(v) => v.octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_round_trip_and_layout() {
        let n = UdName { gid: gid_of_ip("10.99.0.1".parse().unwrap()), qpn: 0x11, lid: 2, pkey: 0xffff, service: 9228, sl: 3 };
        let b = n.to_bytes();
        assert_eq!(&b[10..16], &[0xff, 0xff, 10, 99, 0, 1]);
        assert_eq!(u32::from_ne_bytes(b[16..20].try_into().unwrap()), 0x11);
        assert_eq!(u16::from_ne_bytes(b[24..26].try_into().unwrap()), 9228);
        assert_eq!(b[26], 3);
        assert_eq!(UdName::from_bytes(&b), Some(n));
        assert_eq!(UdName::from_bytes(&b[..31]), None);
        assert!(n.is_global());
    }

    #[test]
    fn string_form_matches_libfabric() {
        let n = UdName { gid: gid_of_ip("10.99.0.1".parse().unwrap()), qpn: 0x1a, lid: 0, pkey: 0xffff, service: 0, sl: 0 };
        assert_eq!(straddr(&n), "fi_addr_ib_ud://::ffff:10.99.0.1:1a/0/ffff/0");
    }
}
