//! The `mmsg` build: one loop per core, batching with `recvmmsg` and `sendmmsg`.
//!
//! Each loop owns a socket bound to the relay's port with `SO_REUSEPORT` (the kernel picks
//! the socket of a datagram by a hash of its source address, so a speaker always lands on the
//! same loop) and repeats:
//!
//! 1. wait with `ppoll` (at most [`POLL`], to look at the end conditions) until the socket is
//!    readable;
//! 2. take what is queued with `recvmmsg(MSG_DONTWAIT)`; while the batch is not full and the
//!    batch timeout (counted from the first datagram) has not passed, `ppoll` for the time
//!    left and take more;
//! 3. apply the batch's joins (under the member table's write lock, rarely taken), then build
//!    every ack and forward of the batch under the read lock, forwards pointing at the
//!    received buffers (no copy);
//! 4. group the outgoing datagrams by destination (a stable sort, so each destination gets
//!    its datagrams together and in arrival order) and send them with one `sendmmsg`, or
//!    more only past `UIO_MAXIOV` (1024) datagrams or after a failed one.
//!
//! **Why `ppoll` + `MSG_DONTWAIT` rather than `recvmmsg`'s own timeout**: that timeout is
//! only checked after each datagram arrives (recvmmsg(2), BUGS), so a batch that never fills
//! blocks past it, indefinitely if traffic stops. `MSG_WAITFORONE` alone returns as soon as
//! one datagram is queued, which at voice rates (one packet per speaker per 20 ms) means
//! batches of one. Waiting with `ppoll` for exactly the time left bounds the wait to the batch
//! timeout (nanosecond resolution), and `MSG_DONTWAIT` never blocks, so the loop also gets
//! back to its end conditions in time.
//!
//! The member table is shared by the loops (a speaker's room mates may hash to other loops);
//! the forward dropper too, so `--drop-every` drops exactly every Nth forward overall.

use std::{
    io,
    mem::{self, MaybeUninit},
    net::{Ipv4Addr, SocketAddrV4, UdpSocket},
    os::fd::AsRawFd as _,
    ptr,
    sync::{PoisonError, RwLock},
    thread,
    time::{Duration, Instant},
};

use super::{Context, POLL, Served, ServerError, Stats};
use crate::{
    protocol::{self, HEADER_LEN, Header, Kind, MAX_DATAGRAM},
    rooms::{JoinOutcome, Rooms},
    udp,
};

/// At most this many messages per `sendmmsg` call (the kernel's `UIO_MAXIOV`).
const UIO_MAXIOV: usize = 1024;
/// Per-slot receive buffer: one byte more than the largest datagram, so a longer one shows.
const SLOT: usize = MAX_DATAGRAM + 1;

#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub batch: usize,
    pub batch_timeout: Duration,
}

/// Runs one loop per socket, each on its own thread, until the context says stop.
pub fn serve(
    sockets: &[UdpSocket],
    settings: Settings,
    ctx: &Context,
) -> Result<Served, ServerError> {
    let rooms = RwLock::new(Rooms::default());
    let stats = thread::scope(|s| {
        let mut handles = Vec::with_capacity(sockets.len());
        let mut spawn_error = None;
        for (i, socket) in sockets.iter().enumerate() {
            let name = format!("loop-{i}");
            let rooms = &rooms;
            let spawned = thread::Builder::new()
                .name(name.clone())
                .spawn_scoped(s, move || run_loop(socket, settings, rooms, ctx));
            match spawned {
                Ok(h) => handles.push((name, h)),
                Err(source) => {
                    ctx.stop();
                    spawn_error = Some(ServerError::Thread { name, source });
                    break;
                }
            }
        }
        let mut total = Stats::default();
        let mut first_error = spawn_error;
        for (name, h) in handles {
            match h.join() {
                Ok(Ok(stats)) => total.add(&stats),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    ctx.stop();
                    first_error.get_or_insert(ServerError::Panicked(name));
                }
            }
        }
        first_error.map_or(Ok(total), Err)
    })?;
    let rooms = rooms.into_inner().unwrap_or_else(PoisonError::into_inner);
    Ok(Served {
        stats,
        rooms: rooms.room_count(),
        members: rooms.member_count(),
    })
}

fn run_loop(
    socket: &UdpSocket,
    settings: Settings,
    rooms: &RwLock<Rooms>,
    ctx: &Context,
) -> Result<Stats, ServerError> {
    let mut lp = Loop::new(socket, settings);
    let result = lp.run(rooms, ctx);
    if result.is_err() {
        ctx.stop();
    }
    result.map(|()| lp.stats)
}

/// What a received slot turned out to be.
#[derive(Clone, Copy)]
enum Slot {
    Dropped,
    Join(Header, SocketAddrV4),
    Voice(Header, SocketAddrV4, usize),
}

/// Where an outgoing datagram's bytes are.
#[derive(Clone, Copy)]
enum Source {
    /// Receive slot `i`, `len` bytes: a forward, unchanged.
    Received(usize, usize),
    /// Ack buffer `i`.
    Ack(usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum OutKind {
    Ack,
    JoinAck,
    Forward,
}

#[derive(Clone, Copy)]
struct Outgoing {
    to: SocketAddrV4,
    source: Source,
    kind: OutKind,
}

fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all zeroes is a valid value (and zeroes sin_zero).
    let mut s: libc::sockaddr_in = unsafe { mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr = libc::in_addr {
        s_addr: u32::from(*a.ip()).to_be(),
    };
    s
}

fn from_sockaddr_in(s: &libc::sockaddr_in) -> Option<SocketAddrV4> {
    (s.sin_family == libc::AF_INET as libc::sa_family_t).then(|| {
        SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
            u16::from_be(s.sin_port),
        )
    })
}

/// An all-zero `mmsghdr`: null pointers and lengths, a valid value.
fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain data (pointers, lengths, flags); all zeroes is valid.
    unsafe { MaybeUninit::<libc::mmsghdr>::zeroed().assume_init() }
}

fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: ptr::null_mut(),
        iov_len: 0,
    }
}

/// One loop's socket and buffers. The message headers point into the buffers; they are
/// rebuilt before every call, from base pointers taken once per call, so no pointer outlives
/// a reallocation or a later borrow.
struct Loop<'s> {
    socket: &'s UdpSocket,
    settings: Settings,
    stats: Stats,
    /// `batch` receive slots of [`SLOT`] bytes, back to back.
    bufs: Vec<u8>,
    names: Vec<libc::sockaddr_in>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    slots: Vec<Slot>,
    /// One ack header per receive slot.
    acks: Vec<[u8; HEADER_LEN]>,
    out: Vec<Outgoing>,
    send_names: Vec<libc::sockaddr_in>,
    send_iovs: Vec<libc::iovec>,
    send_hdrs: Vec<libc::mmsghdr>,
    send_error_reported: bool,
}

impl<'s> Loop<'s> {
    fn new(socket: &'s UdpSocket, settings: Settings) -> Self {
        let b = settings.batch;
        Self {
            socket,
            settings,
            stats: Stats::default(),
            bufs: vec![0; b * SLOT],
            names: vec![sockaddr_in(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)); b],
            iovs: vec![empty_iovec(); b],
            hdrs: vec![empty_mmsghdr(); b],
            slots: Vec::with_capacity(b),
            acks: vec![[0; HEADER_LEN]; b],
            out: Vec::new(),
            send_names: Vec::new(),
            send_iovs: Vec::new(),
            send_hdrs: Vec::new(),
            send_error_reported: false,
        }
    }

    fn run(&mut self, rooms: &RwLock<Rooms>, ctx: &Context) -> Result<(), ServerError> {
        let mut pfd = [udp::pollfd(self.socket)];
        while !ctx.should_stop() {
            self.stats.poll_calls += 1;
            if udp::wait_readable(&mut pfd, POLL).map_err(ServerError::Receive)? == 0 {
                continue;
            }
            let got = self.fill_batch(&mut pfd)?;
            if got == 0 {
                continue;
            }
            self.stats.batches += 1;
            self.stats.datagrams += got as u64;
            ctx.saw_datagrams();
            self.decode(got);
            self.answer(got, rooms, ctx);
            self.send();
        }
        Ok(())
    }

    /// Receives until the batch is full or the batch timeout passes after the first datagram.
    fn fill_batch(&mut self, pfd: &mut [libc::pollfd; 1]) -> Result<usize, ServerError> {
        let batch = self.settings.batch;
        let mut got = self.recv(0)?;
        if got == 0 {
            return Ok(0);
        }
        let deadline = Instant::now() + self.settings.batch_timeout;
        // A `recvmmsg(MSG_DONTWAIT)` that brings fewer than it was asked for has emptied the
        // queue, so the next step is always a wait, never a receive that would find nothing.
        while got < batch {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.stats.poll_calls += 1;
            if udp::wait_readable(pfd, left).map_err(ServerError::Receive)? == 0 {
                break;
            }
            got += self.recv(got)?;
        }
        Ok(got)
    }

    /// One `recvmmsg(MSG_DONTWAIT)` into slots `from..batch`; the number received, 0 when
    /// nothing was queued.
    fn recv(&mut self, from: usize) -> Result<usize, ServerError> {
        let batch = self.settings.batch;
        let bufs = self.bufs.as_mut_ptr();
        let names = self.names.as_mut_ptr();
        let iovs = self.iovs.as_mut_ptr();
        let hdrs = self.hdrs.as_mut_ptr();
        for i in from..batch {
            // SAFETY: i < batch, and every array has `batch` elements (`bufs` batch × SLOT
            // bytes); the pointers stay valid until the call below returns, as nothing else
            // touches these vectors meanwhile.
            unsafe {
                iovs.add(i).write(libc::iovec {
                    iov_base: bufs.add(i * SLOT).cast(),
                    iov_len: SLOT,
                });
                let mut h = empty_mmsghdr();
                h.msg_hdr.msg_name = names.add(i).cast();
                h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_hdr.msg_iov = iovs.add(i);
                h.msg_hdr.msg_iovlen = 1;
                hdrs.add(i).write(h);
            }
        }
        loop {
            self.stats.recv_calls += 1;
            // SAFETY: `hdrs + from` points at `batch - from` initialised mmsghdrs whose
            // name and iovec pointers address live buffers of the sizes given.
            let r = unsafe {
                libc::recvmmsg(
                    self.socket.as_raw_fd(),
                    hdrs.add(from),
                    (batch - from) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                )
            };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                // Nothing queued, or an ICMP error queued on the socket (Linux reports none on
                // an unconnected UDP socket, but one would not be a reason to stop).
                io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused => return Ok(0),
                io::ErrorKind::Interrupted => continue,
                _ => return Err(ServerError::Receive(e)),
            }
        }
    }

    /// Decodes slots `0..got` into [`Self::slots`], counting what is dropped.
    fn decode(&mut self, got: usize) {
        self.slots.clear();
        for i in 0..got {
            let h = &self.hdrs[i];
            let len = h.msg_len as usize;
            let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let from = from_sockaddr_in(&self.names[i]);
            let data = &self.bufs[i * SLOT..i * SLOT + len.min(SLOT)];
            let slot = match (truncated, from, protocol::decode(data)) {
                (false, Some(from), Ok(p)) => match p.header.kind {
                    Kind::Join => {
                        self.stats.joins += 1;
                        Slot::Join(p.header, from)
                    }
                    Kind::Voice => {
                        self.stats.voice += 1;
                        Slot::Voice(p.header, from, len)
                    }
                    Kind::Ack => {
                        self.stats.malformed += 1;
                        Slot::Dropped
                    }
                },
                _ => {
                    self.stats.malformed += 1;
                    Slot::Dropped
                }
            };
            self.slots.push(slot);
        }
    }

    /// Applies the joins, then lists every ack and forward of the batch in [`Self::out`].
    fn answer(&mut self, got: usize, rooms: &RwLock<Rooms>, ctx: &Context) {
        self.out.clear();
        if self.slots.iter().any(|s| matches!(s, Slot::Join(..))) {
            let mut rooms = rooms.write().unwrap_or_else(PoisonError::into_inner);
            for i in 0..got {
                let Slot::Join(h, from) = self.slots[i] else {
                    continue;
                };
                match rooms.join(h.room, from) {
                    JoinOutcome::RoomFull => self.stats.room_full += 1,
                    JoinOutcome::Joined | JoinOutcome::AlreadyMember => {
                        self.acks[i] = h.ack().to_bytes(0);
                        self.out.push(Outgoing {
                            to: from,
                            source: Source::Ack(i),
                            kind: OutKind::JoinAck,
                        });
                    }
                }
            }
        }
        let rooms = rooms.read().unwrap_or_else(PoisonError::into_inner);
        for i in 0..got {
            let Slot::Voice(h, from, len) = self.slots[i] else {
                continue;
            };
            let members = rooms.members(h.room);
            if !members.contains(&from) {
                self.stats.not_member += 1;
                continue;
            }
            self.acks[i] = h.ack().to_bytes(0);
            self.out.push(Outgoing {
                to: from,
                source: Source::Ack(i),
                kind: OutKind::Ack,
            });
            for &to in members.iter().filter(|&&m| m != from) {
                if ctx.dropper.drop_this() {
                    self.stats.injected += 1;
                    continue;
                }
                self.out.push(Outgoing {
                    to,
                    source: Source::Received(i, len),
                    kind: OutKind::Forward,
                });
            }
        }
    }

    /// Sends [`Self::out`], grouped by destination, with as few `sendmmsg` calls as the
    /// kernel allows.
    fn send(&mut self) {
        let n = self.out.len();
        if n == 0 {
            return;
        }
        self.out
            .sort_by_key(|o| (u32::from(*o.to.ip()), o.to.port()));
        self.send_names
            .resize(n, sockaddr_in(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)));
        self.send_iovs.resize(n, empty_iovec());
        self.send_hdrs.resize(n, empty_mmsghdr());
        let bufs = self.bufs.as_ptr();
        let acks = self.acks.as_ptr();
        let names = self.send_names.as_mut_ptr();
        let iovs = self.send_iovs.as_mut_ptr();
        let hdrs = self.send_hdrs.as_mut_ptr();
        for (i, o) in self.out.iter().enumerate() {
            let (base, len): (*const u8, usize) = match o.source {
                // SAFETY (both arms): slot < batch and ack < batch, so the offsets stay
                // inside `bufs` (batch × SLOT bytes, len ≤ SLOT) and `acks`.
                Source::Received(slot, len) => (unsafe { bufs.add(slot * SLOT) }, len),
                Source::Ack(slot) => (unsafe { acks.add(slot) }.cast(), HEADER_LEN),
            };
            // SAFETY: i < n and the three send arrays were resized to n above; the kernel
            // only reads through iov_base (sendmmsg), so the cast to *mut is never written
            // through.
            unsafe {
                names.add(i).write(sockaddr_in(o.to));
                iovs.add(i).write(libc::iovec {
                    iov_base: base.cast_mut().cast(),
                    iov_len: len,
                });
                let mut h = empty_mmsghdr();
                h.msg_hdr.msg_name = names.add(i).cast();
                h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_hdr.msg_iov = iovs.add(i);
                h.msg_hdr.msg_iovlen = 1;
                hdrs.add(i).write(h);
            }
        }
        let mut off = 0;
        while off < n {
            let chunk = (n - off).min(UIO_MAXIOV);
            self.stats.send_calls += 1;
            // SAFETY: `hdrs + off` points at `chunk` initialised mmsghdrs whose name and
            // iovec pointers address live data (see above).
            let r = unsafe {
                libc::sendmmsg(
                    self.socket.as_raw_fd(),
                    hdrs.add(off),
                    chunk as libc::c_uint,
                    0,
                )
            };
            if r > 0 {
                let r = r as usize;
                for o in &self.out[off..off + r] {
                    match o.kind {
                        OutKind::Ack => self.stats.acks_sent += 1,
                        OutKind::JoinAck => self.stats.join_acks_sent += 1,
                        OutKind::Forward => self.stats.forwards_sent += 1,
                    }
                }
                off += r;
                continue;
            }
            let e = io::Error::last_os_error();
            if r < 0 && e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // The first message of the chunk failed: count it, go on with the next.
            if !self.send_error_reported {
                self.send_error_reported = true;
                eprintln!("mmsg-relay: sendmmsg to {} failed: {e}", self.out[off].to);
            }
            self.stats.send_failed += 1;
            off += 1;
        }
    }
}
