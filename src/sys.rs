//! Small wrappers over the OS calls the provider needs (epoll, eventfd, poll,
//! getifaddrs, sockaddr conversion). Together with `verbs/` this is the only
//! place in the core where `unsafe` is allowed; every block says why it holds.
#![allow(unsafe_code)]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Size in bytes of `struct sockaddr_in`.
pub const SOCKADDR_IN_LEN: usize = 16;
/// Size in bytes of `struct sockaddr_in6`.
pub const SOCKADDR_IN6_LEN: usize = 28;

/// Encodes a socket address as the bytes of a C `sockaddr_in`/`sockaddr_in6`.
/// Pure byte work: no unsafe needed.
pub fn sockaddr_bytes(addr: &SocketAddr) -> Vec<u8> {
    match addr {
        SocketAddr::V4(a) => {
            let mut b = vec![0u8; SOCKADDR_IN_LEN];
            b[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            b[2..4].copy_from_slice(&a.port().to_be_bytes());
            b[4..8].copy_from_slice(&a.ip().octets());
            b
        }
        SocketAddr::V6(a) => {
            let mut b = vec![0u8; SOCKADDR_IN6_LEN];
            b[0..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            b[2..4].copy_from_slice(&a.port().to_be_bytes());
            b[4..8].copy_from_slice(&a.flowinfo().to_be_bytes());
            b[8..24].copy_from_slice(&a.ip().octets());
            b[24..28].copy_from_slice(&a.scope_id().to_ne_bytes());
            b
        }
    }
}

/// Decodes the bytes of a C `sockaddr_in`/`sockaddr_in6` (family first).
pub fn sockaddr_parse(b: &[u8]) -> Option<SocketAddr> {
    if b.len() < 2 {
        return None;
    }
    let family = u16::from_ne_bytes([b[0], b[1]]) as i32;
    if family == libc::AF_INET && b.len() >= SOCKADDR_IN_LEN {
        let port = u16::from_be_bytes([b[2], b[3]]);
        let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
        Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
    } else if family == libc::AF_INET6 && b.len() >= SOCKADDR_IN6_LEN {
        let port = u16::from_be_bytes([b[2], b[3]]);
        let flow = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let mut o = [0u8; 16];
        o.copy_from_slice(&b[8..24]);
        let scope = u32::from_ne_bytes([b[24], b[25], b[26], b[27]]);
        Some(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(o), port, flow, scope)))
    } else {
        None
    }
}

/// A `sockaddr_storage` holding `addr`, for passing to C.
pub(crate) fn sockaddr_storage(addr: &SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let bytes = sockaddr_bytes(addr);
    // SAFETY: sockaddr_storage is 128 bytes, larger than either encoding (16/28 bytes);
    // the destination is a properly aligned local we own.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), &mut ss as *mut _ as *mut u8, bytes.len());
    }
    ss
}

/// Reads a C `struct sockaddr *` (may be NULL).
///
/// # Safety
/// `sa` must be NULL or point to a readable sockaddr whose family tells its size.
pub(crate) unsafe fn sockaddr_from_ptr(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: caller guarantees `sa` points to a sockaddr; the family field is first.
    let family = unsafe { (*sa).sa_family } as i32;
    let len = match family {
        libc::AF_INET => SOCKADDR_IN_LEN,
        libc::AF_INET6 => SOCKADDR_IN6_LEN,
        _ => return None,
    };
    // SAFETY: the family says the object is at least `len` bytes long.
    let bytes = unsafe { std::slice::from_raw_parts(sa as *const u8, len) };
    sockaddr_parse(bytes)
}

/// One IP address of one network interface.
#[derive(Debug, Clone)]
pub struct IfAddr {
    pub name: String,
    pub addr: IpAddr,
    pub up: bool,
    pub loopback: bool,
}

/// The machine's interface addresses (IPv4 and IPv6), as `getifaddrs(3)` lists them.
pub fn interface_addrs() -> Vec<IfAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list returned by getifaddrs, valid until freeifaddrs.
        let ifa = unsafe { &*cur };
        // SAFETY: ifa_addr is NULL or a valid sockaddr owned by the list.
        if let Some(sa) = unsafe { sockaddr_from_ptr(ifa.ifa_addr) } {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
            out.push(IfAddr {
                name,
                addr: sa.ip(),
                up: ifa.ifa_flags & libc::IFF_UP as u32 != 0,
                loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0,
            });
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// Sets O_NONBLOCK on a descriptor we own.
pub fn set_nonblocking(fd: RawFd) -> Result<(), i32> {
    // SAFETY: fcntl on an fd we own, with valid flag arguments.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(last_errno());
        }
    }
    Ok(())
}

/// Converts a libfabric timeout in milliseconds (negative = forever) to a deadline.
pub fn deadline(timeout_ms: i32) -> Option<Instant> {
    if timeout_ms < 0 {
        None
    } else {
        Some(Instant::now() + Duration::from_millis(timeout_ms as u64))
    }
}

/// Milliseconds left until `deadline` (-1 = forever), for poll/epoll_wait.
pub fn remaining_ms(deadline: Option<Instant>) -> i32 {
    match deadline {
        None => -1,
        Some(d) => {
            let now = Instant::now();
            if now >= d {
                0
            } else {
                let ms = (d - now).as_millis();
                ms.clamp(1, i32::MAX as u128) as i32
            }
        }
    }
}

/// Waits until `fd` is readable or the time runs out. Returns Ok(true) when readable.
pub fn poll_readable(fd: RawFd, timeout_ms: i32) -> Result<bool, i32> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd on our stack.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if r < 0 {
        let e = last_errno();
        if e == libc::EINTR {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0)
}

/// An eventfd used to signal software-generated events to a waiter.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub fn new() -> Result<Self, i32> {
        // SAFETY: plain syscall; the returned fd is owned by OwnedFd.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(last_errno());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(EventFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Makes the fd readable.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a local u64 to our eventfd. EAGAIN (counter full)
        // still leaves it readable, which is all we need.
        unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    /// Makes the fd unreadable again.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a local u64 from our non-blocking eventfd.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An epoll set: one fd that is readable when any member is.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub fn new() -> Result<Self, i32> {
        // SAFETY: plain syscall; the returned fd is owned by OwnedFd.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(last_errno());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    pub fn add(&self, fd: RawFd, token: u64) -> Result<(), i32> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: valid epoll fd, valid event struct on our stack.
        let r = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            let e = last_errno();
            if e != libc::EEXIST {
                return Err(e);
            }
        }
        Ok(())
    }

    pub fn del(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid epoll fd; removing an fd that is not a member just fails.
        unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    /// Waits for any member to become readable. Returns the number of ready members.
    pub fn wait(&self, timeout_ms: i32) -> Result<usize, i32> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: the buffer holds 8 events and we say so.
        let r = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), evs.as_mut_ptr(), 8, timeout_ms) };
        if r < 0 {
            let e = last_errno();
            if e == libc::EINTR {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(r as usize)
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A monotonic one-shot timer whose fd becomes readable when it expires
/// (`timerfd_create(2)`): lets a waiter that sleeps on an epoll set wake for
/// a deadline of the provider's own (an RDM connection's next attempt).
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    pub fn new() -> Result<Self, i32> {
        // SAFETY: plain syscall; the returned fd is owned by OwnedFd.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(last_errno());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(TimerFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Expires once after `ms` milliseconds (0: disarms). Setting it also
    /// clears an earlier expiry, so the fd is not readable until then.
    pub fn set_ms(&self, ms: u64) -> Result<(), i32> {
        let ts = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (ms / 1000) as libc::time_t, tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long },
        };
        // SAFETY: valid timerfd, a settings struct on our stack, no old value asked.
        let r = unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &ts, std::ptr::null_mut()) };
        if r < 0 {
            return Err(last_errno());
        }
        Ok(())
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timerfd_becomes_readable_when_it_expires_and_not_before() {
        let t = TimerFd::new().unwrap();
        let ep = Epoll::new().unwrap();
        ep.add(t.raw(), 1).unwrap();
        assert_eq!(ep.wait(0).unwrap(), 0, "unarmed: not readable");
        t.set_ms(30).unwrap();
        assert_eq!(ep.wait(0).unwrap(), 0, "armed, not yet expired");
        assert_eq!(ep.wait(2000).unwrap(), 1, "expired within the wait");
        t.set_ms(0).unwrap();
        assert_eq!(ep.wait(0).unwrap(), 0, "disarming clears the expiry");
    }

    #[test]
    fn incarnations_are_nonzero_and_differ() {
        let v: Vec<u64> = (0..64).map(|_| random_nonzero_u64()).collect();
        assert!(v.iter().all(|&x| x != 0));
        let mut u = v.clone();
        u.sort_unstable();
        u.dedup();
        assert_eq!(u.len(), v.len(), "64 draws, {} distinct", u.len());
    }

    #[test]
    fn sockaddr_roundtrip_v4_v6() {
        let a: SocketAddr = "10.99.0.1:47592".parse().unwrap();
        let b = sockaddr_bytes(&a);
        assert_eq!(b.len(), 16);
        assert_eq!(&b[2..4], &47592u16.to_be_bytes());
        assert_eq!(sockaddr_parse(&b), Some(a));
        let a6: SocketAddr = "[fe80::1%3]:1234".parse().unwrap();
        let b6 = sockaddr_bytes(&a6);
        assert_eq!(b6.len(), 28);
        assert_eq!(sockaddr_parse(&b6), Some(a6));
        assert_eq!(sockaddr_parse(&b6[..20]), None, "short buffer must not parse");
        assert_eq!(sockaddr_parse(&[0u8; 16]), None, "AF_UNSPEC must not parse");
    }

    #[test]
    fn eventfd_in_epoll_wakes_and_drains() {
        let ep = Epoll::new().unwrap();
        let ev = EventFd::new().unwrap();
        ep.add(ev.raw(), 1).unwrap();
        assert_eq!(ep.wait(0).unwrap(), 0);
        ev.signal();
        assert_eq!(ep.wait(0).unwrap(), 1);
        assert!(poll_readable(ep.raw(), 0).unwrap(), "epoll fd itself must poll readable");
        ev.drain();
        assert_eq!(ep.wait(0).unwrap(), 0);
    }

    #[test]
    fn remaining_ms_behaviour() {
        assert_eq!(remaining_ms(None), -1);
        assert_eq!(remaining_ms(deadline(0)), 0);
        let r = remaining_ms(deadline(5000));
        assert!(r > 4000 && r <= 5000, "{r}");
    }
}

/// A random non-zero number (an RDM endpoint's incarnation): std's
/// per-process random hash keys, mixed with the time and the process id so
/// that two endpoints, or a restarted process, never draw the same one in
/// practice.
pub fn random_nonzero_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    h.write_u128(t);
    h.write_u32(std::process::id());
    h.finish().max(1)
}

/// Milliseconds of `CLOCK_MONOTONIC_COARSE`: advances once per kernel tick
/// (1-10 ms) and is read from the vDSO without touching the clock hardware,
/// unlike `Instant::now()`, which is a system call (and an emulated HPET read)
/// on machines without a usable TSC, such as the lab's emulated guest.
pub fn coarse_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid clock id and out pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1000).wrapping_add(ts.tv_nsec as u64 / 1_000_000)
}

/// userfaultfd(2): the memory monitor of the RDM registration cache
/// (`crate::mrcache`), as libfabric's `uffd_mem_monitor.c`. The
/// constants and structures are those of `<linux/userfaultfd.h>` (stable
/// kernel ABI; the libc crate does not carry them).
pub mod uffd {
    use super::last_errno;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const UFFD_USER_MODE_ONLY: libc::c_int = 1;
    const UFFD_API: u64 = 0xAA;
    const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
    const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
    const UFFDIO_UNREGISTER: libc::c_ulong = 0x8010_aa01;
    const UFFDIO_WAKE: libc::c_ulong = 0x8010_aa02;
    const UFFDIO_ZEROPAGE: libc::c_ulong = 0xc020_aa04;
    const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
    const FEATURE_EVENT_REMAP: u64 = 1 << 2;
    const FEATURE_EVENT_REMOVE: u64 = 1 << 3;
    const FEATURE_EVENT_UNMAP: u64 = 1 << 6;
    const EVENT_PAGEFAULT: u8 = 0x12;
    const EVENT_REMAP: u8 = 0x14;
    const EVENT_REMOVE: u8 = 0x15;
    const EVENT_UNMAP: u8 = 0x16;

    #[repr(C)]
    struct UffdioApi {
        api: u64,
        features: u64,
        ioctls: u64,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct UffdioRange {
        start: u64,
        len: u64,
    }
    #[repr(C)]
    struct UffdioRegister {
        range: UffdioRange,
        mode: u64,
        ioctls: u64,
    }
    #[repr(C)]
    struct UffdioZeropage {
        range: UffdioRange,
        mode: u64,
        zeropage: i64,
    }
    /// `struct uffd_msg`: 8 bytes of header, a 24-byte union.
    #[repr(C)]
    struct UffdMsg {
        event: u8,
        _r1: u8,
        _r2: u16,
        _r3: u32,
        arg: [u64; 3],
    }

    /// What the kernel reports.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Event {
        /// `[start, end)` is gone (munmap, mremap's source, brk shrinking).
        Unmap { start: u64, end: u64 },
        /// `[start, end)` lost its pages (madvise DONTNEED/REMOVE/FREE).
        Remove { start: u64, end: u64 },
        /// `len` bytes moved from `from` to `to` (mremap).
        Remap { from: u64, to: u64, len: u64 },
        /// A thread touched a missing page at `addr` of a registered range.
        PageFault { addr: u64, flags: u64 },
        Other(u8),
    }

    /// A userfaultfd with the unmap/remove/remap events on. It handles the
    /// faults of kernel mode too where the kernel allows (privileged, or
    /// `vm.unprivileged_userfaultfd=1`): a kernel access to a missing page
    /// of a watched range then waits for the monitor's zero page instead of
    /// failing with EFAULT. Otherwise user mode only (`UFFD_USER_MODE_ONLY`,
    /// kernels 5.11+), what libfabric always asks.
    #[derive(Debug)]
    pub struct Uffd {
        fd: OwnedFd,
    }

    impl Uffd {
        pub fn open() -> Result<Uffd, i32> {
            let fl = libc::O_CLOEXEC | libc::O_NONBLOCK;
            // SAFETY: plain syscall with integer flags; returns a new fd or -1.
            let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, fl) } as i32;
            if fd < 0 && last_errno() == libc::EPERM {
                // SAFETY: as above.
                fd = unsafe { libc::syscall(libc::SYS_userfaultfd, fl | UFFD_USER_MODE_ONLY) } as i32;
                if fd < 0 && last_errno() == libc::EINVAL {
                    // A kernel before 5.11 (no UFFD_USER_MODE_ONLY): it refused above.
                    return Err(libc::EPERM);
                }
            }
            if fd < 0 {
                return Err(last_errno());
            }
            // SAFETY: a fresh fd that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let mut api = UffdioApi { api: UFFD_API, features: FEATURE_EVENT_UNMAP | FEATURE_EVENT_REMOVE | FEATURE_EVENT_REMAP, ioctls: 0 };
            // SAFETY: UFFDIO_API reads and writes the struct we pass.
            if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api as *mut UffdioApi) } < 0 {
                return Err(last_errno());
            }
            if api.api != UFFD_API {
                return Err(libc::ENOSYS);
            }
            Ok(Uffd { fd })
        }

        pub fn raw(&self) -> i32 {
            self.fd.as_raw_fd()
        }

        /// Watches `[start, start+len)` (page-aligned, mapped): its unmap,
        /// remove and remap events come to this fd; so do faults on its
        /// missing pages (`zero_page` answers them).
        pub fn register(&self, start: u64, len: u64) -> Result<(), i32> {
            let mut r = UffdioRegister { range: UffdioRange { start, len }, mode: UFFDIO_REGISTER_MODE_MISSING, ioctls: 0 };
            // SAFETY: the ioctl reads and writes the struct we pass; it only
            // changes how the kernel reports events of that range.
            if unsafe { libc::ioctl(self.raw(), UFFDIO_REGISTER, &mut r as *mut UffdioRegister) } < 0 {
                return Err(last_errno());
            }
            Ok(())
        }

        pub fn unregister(&self, start: u64, len: u64) -> Result<(), i32> {
            let mut r = UffdioRange { start, len };
            // SAFETY: reads the struct we pass; changes event reporting only.
            if unsafe { libc::ioctl(self.raw(), UFFDIO_UNREGISTER, &mut r as *mut UffdioRange) } < 0 {
                return Err(last_errno());
            }
            Ok(())
        }

        /// Resolves a fault on a missing page the way the kernel would have
        /// without us: a zeroed page (anonymous memory reads as zeros).
        pub fn zero_page(&self, addr: u64, page: u64) -> Result<(), i32> {
            let start = addr & !(page - 1);
            loop {
                let mut z = UffdioZeropage { range: UffdioRange { start, len: page }, mode: 0, zeropage: 0 };
                // SAFETY: reads and writes the struct we pass; installs a zero
                // page at a missing address of a range registered with us.
                if unsafe { libc::ioctl(self.raw(), UFFDIO_ZEROPAGE, &mut z as *mut UffdioZeropage) } == 0 {
                    return Ok(());
                }
                let e = last_errno();
                if e == libc::EAGAIN {
                    continue; // the mapping is changing: the kernel asks to retry
                }
                if e == libc::EEXIST {
                    return Ok(()); // another thread's fault installed it
                }
                let mut r = UffdioRange { start, len: page };
                // SAFETY: reads the struct we pass; wakes the faulting thread,
                // which then faults again or gets SIGBUS: never stuck.
                unsafe { libc::ioctl(self.raw(), UFFDIO_WAKE, &mut r as *mut UffdioRange) };
                return Err(e);
            }
        }

        /// The next event, if one is queued (the fd is non-blocking).
        pub fn read(&self) -> Result<Option<Event>, i32> {
            let mut m = UffdMsg { event: 0, _r1: 0, _r2: 0, _r3: 0, arg: [0; 3] };
            let n = std::mem::size_of::<UffdMsg>();
            // SAFETY: reads at most size_of::<UffdMsg>() bytes into our struct.
            let r = unsafe { libc::read(self.raw(), &mut m as *mut UffdMsg as *mut libc::c_void, n) };
            if r < 0 {
                let e = last_errno();
                return if e == libc::EAGAIN || e == libc::EINTR { Ok(None) } else { Err(e) };
            }
            if r as usize != n {
                return Err(libc::EIO);
            }
            Ok(Some(match m.event {
                EVENT_UNMAP => Event::Unmap { start: m.arg[0], end: m.arg[1] },
                EVENT_REMOVE => Event::Remove { start: m.arg[0], end: m.arg[1] },
                EVENT_REMAP => Event::Remap { from: m.arg[0], to: m.arg[1], len: m.arg[2] },
                EVENT_PAGEFAULT => Event::PageFault { flags: m.arg[0], addr: m.arg[1] },
                e => Event::Other(e),
            }))
        }
    }

    /// The system page size.
    pub fn page_size() -> u64 {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            p as u64
        } else {
            4096
        }
    }

    /// Anonymous memory for tests: `mmap(hint, len)`; `fixed` replaces what is there.
    pub fn map_anon(hint: u64, len: usize, fixed: bool) -> Result<u64, i32> {
        let fl = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | if fixed { libc::MAP_FIXED } else { 0 };
        // SAFETY: anonymous mapping; with MAP_FIXED the caller replaces its own mapping.
        let p = unsafe { libc::mmap(hint as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE, fl, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(last_errno());
        }
        Ok(p as u64)
    }

    /// `munmap` of a mapping made by `map_anon`.
    pub fn unmap(addr: u64, len: usize) -> Result<(), i32> {
        // SAFETY: the caller owns the mapping (made by `map_anon`) and holds no references into it.
        if unsafe { libc::munmap(addr as *mut libc::c_void, len) } < 0 {
            return Err(last_errno());
        }
        Ok(())
    }

    /// Tests: writes `v` at `addr` of a mapping made by `map_anon` (a user-mode fault if missing).
    #[cfg(test)]
    pub fn poke(addr: u64, v: u8) {
        // SAFETY: the caller's own writable anonymous mapping; nothing else references it.
        unsafe { std::ptr::write_volatile(addr as *mut u8, v) }
    }

    /// Tests: reads the byte at `addr` of a mapping made by `map_anon`.
    #[cfg(test)]
    pub fn peek(addr: u64) -> u8 {
        // SAFETY: as `poke`.
        unsafe { std::ptr::read_volatile(addr as *const u8) }
    }

    /// `madvise(MADV_DONTNEED)` of a mapping made by `map_anon`.
    pub fn dontneed(addr: u64, len: usize) -> Result<(), i32> {
        // SAFETY: drops the pages of the caller's own mapping (they read as zeros after).
        if unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) } < 0 {
            return Err(last_errno());
        }
        Ok(())
    }
}
