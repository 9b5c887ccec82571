//! The DGRAM name service: how `fi_getinfo(node, service)` finds the UD
//! address (GID, QP number) of a peer endpoint, which no IP-level lookup
//! gives (libfabric's verbs runs a name server for the same purpose).
//!
//! An enabled DGRAM endpoint whose address has a service number `S` answers
//! on TCP port `S` of its host: each connection gets an 8-byte magic and its
//! 32-byte `ofi_ib_ud_ep_name`, then is closed. `resolve` connects to
//! `node:S` and reads them, retrying for up to `RESOLVE_WAIT` while nothing
//! listens yet (the peer may still be starting).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{UdName, NAME_LEN};
use crate::error::{FiError, FiResult};

const MAGIC: &[u8; 8] = b"RSVDGNS1";
/// How long `resolve` keeps trying a peer that does not answer yet.
pub const RESOLVE_WAIT: Duration = Duration::from_secs(5);

/// A running responder; stops when dropped.
pub struct Responder {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub port: u16,
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder").field("port", &self.port).finish()
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts answering on TCP `bind` with `name`.
pub fn serve(bind: SocketAddr, name: UdName) -> FiResult<Responder> {
    let l = match TcpListener::bind(bind) {
        Ok(l) => l,
        Err(e) => return crate::fail!(FiError::from_errno(e.raw_os_error().unwrap_or(libc::EIO)), "dgram name service: cannot listen on TCP {bind}: {e}"),
    };
    if let Err(e) = l.set_nonblocking(true) {
        return crate::fail!(FiError::IO, "dgram name service: {e}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let mut msg = Vec::with_capacity(MAGIC.len() + NAME_LEN);
    msg.extend_from_slice(MAGIC);
    msg.extend_from_slice(&name.to_bytes());
    let thread = std::thread::Builder::new()
        .name("rsverbs-dgram-ns".into())
        .spawn(move || {
            while !st.load(Ordering::Acquire) {
                match l.accept() {
                    Ok((mut s, peer)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                        if let Err(e) = s.write_all(&msg) {
                            tracing::info!("dgram name service: answering {peer} failed: {e}");
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                    Err(e) => {
                        tracing::warn!("dgram name service: accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
        .map_err(|e| {
            tracing::warn!("dgram name service: cannot start its thread: {e}");
            FiError::NOMEM
        })?;
    tracing::info!("dgram name service: answering on TCP {bind} for qpn {:#x}", name.qpn);
    Ok(Responder { stop, thread: Some(thread), port: bind.port() })
}

/// Asks the endpoint at `at` (node, service) for its UD address. `patient`:
/// keep trying for `RESOLVE_WAIT` while the peer refuses connections.
pub fn resolve(at: &SocketAddr, patient: bool) -> FiResult<UdName> {
    let start = Instant::now();
    loop {
        match TcpStream::connect_timeout(at, Duration::from_secs(2)) {
            Ok(mut s) => {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut b = [0u8; 8 + NAME_LEN];
                if let Err(e) = s.read_exact(&mut b) {
                    return crate::fail!(FiError::NODATA, "getinfo: DGRAM name service at {at} gave no address: {e}");
                }
                if &b[..8] != MAGIC {
                    return crate::fail!(FiError::NODATA, "getinfo: TCP {at} is not an rsverbs DGRAM endpoint's name service");
                }
                let n = UdName::from_bytes(&b[8..]).ok_or(FiError::NODATA)?;
                tracing::info!("getinfo: {at} resolved to {}", super::straddr(&n));
                return Ok(n);
            }
            Err(e) if patient && start.elapsed() < RESOLVE_WAIT => {
                tracing::debug!("getinfo: DGRAM name service at {at}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return crate::fail!(FiError::NODATA, "getinfo: no DGRAM endpoint answers at {at}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_and_resolve_on_loopback() {
        let n = UdName { gid: [7; 16], qpn: 0x1234, lid: 0, pkey: 0xffff, service: 0, sl: 0 };
        // Port 0: any free port; the responder says which.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let r = serve(SocketAddr::from(([127, 0, 0, 1], port)), n).unwrap();
        assert_eq!(resolve(&SocketAddr::from(([127, 0, 0, 1], r.port)), true).unwrap(), n);
        drop(r);
        assert_eq!(resolve(&SocketAddr::from(([127, 0, 0, 1], port)), false), Err(FiError::NODATA));
    }
}
