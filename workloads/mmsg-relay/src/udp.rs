//! UDP sockets on loopback: binding (with `SO_REUSEPORT` for the `mmsg` loops), waiting for
//! readability with a sub-millisecond timeout, and the kernel's per-socket drop counter.

use std::{
    collections::HashMap,
    fs, io,
    net::{SocketAddrV4, UdpSocket},
    os::{fd::AsRawFd as _, unix::fs::MetadataExt as _},
    time::Duration,
};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Receive buffer asked for on every socket (the kernel caps it at `net.core.rmem_max`).
/// Both builds get the same, so neither loses packets the other would have queued.
pub const RECV_BUFFER: usize = 4 << 20;

/// A UDP socket bound to `addr`, blocking, with [`RECV_BUFFER`] asked for. With `reuse_port`
/// several sockets can bind the same port; the kernel then spreads incoming datagrams over
/// them by a hash of the source address.
pub fn bind(addr: SocketAddrV4, reuse_port: bool) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    // Best effort: a smaller buffer than asked for is still a working socket.
    let _ = socket.set_recv_buffer_size(RECV_BUFFER);
    socket.bind(&SockAddr::from(addr))?;
    Ok(socket.into())
}

/// A `pollfd` waiting for input on `socket`.
pub fn pollfd(socket: &UdpSocket) -> libc::pollfd {
    libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Waits up to `timeout` (nanosecond resolution, through `ppoll`) until one of `fds` is
/// readable; returns how many are (their `revents` say which). An interrupted wait (a signal)
/// returns 0, like a timeout.
pub fn wait_readable(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a valid array of `fds.len()` pollfds for the duration of the call;
    // `ts` outlives it; a null signal mask leaves the mask unchanged.
    let r = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(r as usize)
}

/// Datagrams the kernel dropped on arrival at `sockets` because their receive queue was full
/// (the `drops` column of `/proc/self/net/udp`, matched by socket inode); `None` when that
/// file cannot be read or a socket is missing from it.
pub fn kernel_drops(sockets: &[&UdpSocket]) -> Option<u64> {
    let table = fs::read_to_string("/proc/self/net/udp").ok()?;
    let by_inode: HashMap<u64, u64> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let inode = fields.get(9)?.parse().ok()?;
            let drops = fields.last()?.parse().ok()?;
            Some((inode, drops))
        })
        .collect();
    sockets.iter().try_fold(0u64, |sum, socket| {
        let inode = fs::metadata(format!("/proc/self/fd/{}", socket.as_raw_fd()))
            .ok()?
            .ino();
        Some(sum + by_inode.get(&inode)?)
    })
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn loopback() -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
    }

    #[test]
    fn reuse_port_shares_a_port() {
        let a = bind(loopback(), true).expect("first");
        let port = a.local_addr().expect("addr").port();
        let b = bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port), true).expect("second");
        assert_eq!(b.local_addr().expect("addr").port(), port);
        let err = bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port), false)
            .expect_err("without SO_REUSEPORT the port is taken");
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn wait_readable_times_out_then_sees_a_datagram() {
        let rx = bind(loopback(), false).expect("rx");
        let tx = bind(loopback(), false).expect("tx");
        let mut fds = [pollfd(&rx)];
        assert_eq!(
            wait_readable(&mut fds, Duration::from_micros(200)).expect("poll"),
            0
        );
        tx.send_to(b"x", rx.local_addr().expect("addr"))
            .expect("send");
        assert_eq!(
            wait_readable(&mut fds, Duration::from_secs(5)).expect("poll"),
            1
        );
        assert_ne!(fds[0].revents & libc::POLLIN, 0);
    }

    #[test]
    fn kernel_drops_of_a_fresh_socket_are_zero() {
        let s = bind(loopback(), false).expect("socket");
        assert_eq!(kernel_drops(&[&s]), Some(0));
    }
}
