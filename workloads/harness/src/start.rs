//! Starting a driver's connections: connecting with retries while the server comes up, and
//! releasing every connection thread at one instant so their recorders' windows line up.

use std::{
    io,
    net::{SocketAddr, TcpStream},
    sync::{Condvar, Mutex},
    thread,
    time::{Duration, Instant},
};

/// Connects to `addr` with TCP_NODELAY, retrying every 20 ms until `timeout` has passed (the
/// server may still be starting). The last error is returned; callers add the hint.
pub fn connect_tcp(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    loop {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e),
        }
    }
}

/// Holds connection threads until every one is ready, then starts them together with one
/// start instant.
#[derive(Default)]
pub struct StartGate {
    start: Mutex<Option<Instant>>,
    opened: Condvar,
}

impl StartGate {
    pub fn new() -> StartGate {
        StartGate::default()
    }

    /// Blocks until [`open`](Self::open), then returns the common start instant.
    pub fn wait(&self) -> Instant {
        let mut start = self.start.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(at) = *start {
                return at;
            }
            start = self.opened.wait(start).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn open(&self, start: Instant) {
        *self.start.lock().unwrap_or_else(|p| p.into_inner()) = Some(start);
        self.opened.notify_all();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A loopback address nothing listens on (yet): a port bound, learnt and closed.
    pub(crate) fn unused_loopback_addr() -> SocketAddr {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn every_waiter_gets_the_same_start() {
        let gate = StartGate::new();
        let at = Instant::now();
        let starts: Vec<Instant> = thread::scope(|s| {
            let waiters: Vec<_> = (0..4).map(|_| s.spawn(|| gate.wait())).collect();
            thread::sleep(Duration::from_millis(20));
            gate.open(at);
            waiters.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert!(starts.iter().all(|s| *s == at));
        // Late waiters pass straight through.
        assert_eq!(gate.wait(), at);
    }

    #[test]
    fn connect_retries_until_the_server_listens_then_gives_up() {
        let addr = unused_loopback_addr();
        // The server comes up after the first attempts have been refused.
        let late = thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            let listener = std::net::TcpListener::bind(addr).unwrap();
            listener.accept().map(|_| ())
        });
        let stream = connect_tcp(addr, Duration::from_secs(10)).expect("connects once it listens");
        assert!(stream.nodelay().unwrap());
        late.join().unwrap().unwrap();
        // Nothing listening any more: the last error comes back.
        let err = connect_tcp(addr, Duration::from_millis(50)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    }
}
