//! The `mmsg` and `lite` builds: one loop per core, batching with `recvmmsg` and `sendmmsg`.
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
//! `lite` is the same loop with a small batch (4 datagrams, or the timeout, whichever comes
//! first: [`next_fill`] decides) and [`Settings::merge`] on: in step 4 the frames bound for
//! one destination go out as one bundle (see [`crate::protocol`]), gathered by `sendmmsg`
//! from the bundle header and the frames where they lie, so no frame is copied; a
//! destination's frames are split over several bundles only past [`MAX_DATAGRAM`] bytes or
//! [`MAX_FRAMES`] frames ([`pack`] decides).
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
    ops::Range,
    os::fd::AsRawFd as _,
    ptr,
    sync::{PoisonError, RwLock},
    thread,
    time::{Duration, Instant},
};

use super::{Context, POLL, Served, ServerError, Stats};
use crate::{
    protocol::{self, BUNDLE_HEADER_LEN, HEADER_LEN, Header, Kind, MAX_DATAGRAM, MAX_FRAMES},
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
    /// Send the frames bound for one destination as one bundle (`lite`).
    pub merge: bool,
}

/// What a loop filling a batch does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Answer the datagrams it has: the batch is full, or its time is up.
    Answer,
    /// Wait this long at most for more.
    Wait(Duration),
}

/// The batching decision, with `got` of `batch` datagrams in hand and `left` until the batch
/// timeout (counted from the first datagram) passes.
pub fn next_fill(got: usize, batch: usize, left: Duration) -> Fill {
    if got >= batch || left.is_zero() {
        Fill::Answer
    } else {
        Fill::Wait(left)
    }
}

/// Splits outgoing datagrams, given as (destination, bytes) and sorted so that each
/// destination's are together, into the datagrams that go on the wire, as ranges of the
/// input: one each without `merge`; with it, a destination's run of frames packed in order
/// into bundles of at most [`MAX_FRAMES`] frames and [`MAX_DATAGRAM`] bytes with the bundle
/// header. Written into `out` (cleared first).
pub fn pack(frames: &[(SocketAddrV4, usize)], merge: bool, out: &mut Vec<Range<usize>>) {
    out.clear();
    let mut start = 0;
    let mut bytes = BUNDLE_HEADER_LEN;
    for (i, &(to, len)) in frames.iter().enumerate() {
        let fits = merge
            && i > start
            && frames[start].0 == to
            && i - start < MAX_FRAMES
            && bytes + len <= MAX_DATAGRAM;
        if !fits && i > start {
            out.push(start..i);
            start = i;
            bytes = BUNDLE_HEADER_LEN;
        }
        bytes += len;
    }
    if start < frames.len() {
        out.push(start..frames.len());
    }
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

impl Outgoing {
    /// The datagram's (or, in a bundle, the frame's) bytes.
    fn len(&self) -> usize {
        match self.source {
            Source::Received(_, len) => len,
            Source::Ack(_) => HEADER_LEN,
        }
    }
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
    /// Each outgoing datagram's destination and bytes, for [`pack`].
    sizes: Vec<(SocketAddrV4, usize)>,
    /// The datagrams on the wire, as ranges of [`Self::out`].
    packed: Vec<Range<usize>>,
    /// One bundle header per datagram on the wire (used by those of two frames or more).
    bundles: Vec<[u8; BUNDLE_HEADER_LEN]>,
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
            sizes: Vec::new(),
            packed: Vec::new(),
            bundles: Vec::new(),
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
        while let Fill::Wait(left) = next_fill(
            got,
            batch,
            deadline.saturating_duration_since(Instant::now()),
        ) {
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

    /// Sends [`Self::out`], grouped by destination (merging: a bundle per destination), with
    /// as few `sendmmsg` calls as the kernel allows.
    fn send(&mut self) {
        if self.out.is_empty() {
            return;
        }
        self.out
            .sort_by_key(|o| (u32::from(*o.to.ip()), o.to.port()));
        self.sizes.clear();
        self.sizes.extend(self.out.iter().map(|o| (o.to, o.len())));
        pack(&self.sizes, self.settings.merge, &mut self.packed);
        let m = self.packed.len();
        self.bundles.clear();
        self.bundles.extend(self.packed.iter().map(|r| {
            // pack keeps a bundle to MAX_FRAMES (255) frames.
            protocol::bundle_header(r.len() as u8)
        }));
        self.send_names
            .resize(m, sockaddr_in(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)));
        // A datagram's iovecs: its bundle header (two frames or more), then one per frame.
        self.send_iovs.resize(self.out.len() + m, empty_iovec());
        self.send_hdrs.resize(m, empty_mmsghdr());
        let bufs = self.bufs.as_ptr();
        let acks = self.acks.as_ptr();
        let bundles = self.bundles.as_ptr();
        let names = self.send_names.as_mut_ptr();
        let iovs = self.send_iovs.as_mut_ptr();
        let hdrs = self.send_hdrs.as_mut_ptr();
        let mut iov = 0;
        for (d, range) in self.packed.iter().enumerate() {
            let first = iov;
            if range.len() > 1 {
                // SAFETY: d < m = bundles.len(); iov < out.len() + m = send_iovs.len(), as
                // each datagram takes at most one iovec more than its frames.
                unsafe {
                    iovs.add(iov).write(libc::iovec {
                        iov_base: bundles.add(d).cast_mut().cast(),
                        iov_len: BUNDLE_HEADER_LEN,
                    });
                }
                iov += 1;
            }
            for o in &self.out[range.clone()] {
                let base: *const u8 = match o.source {
                    // SAFETY (both arms): slot < batch and ack < batch, so the offsets stay
                    // inside `bufs` (batch × SLOT bytes, len ≤ SLOT) and `acks`.
                    Source::Received(slot, _) => unsafe { bufs.add(slot * SLOT) },
                    Source::Ack(slot) => unsafe { acks.add(slot) }.cast(),
                };
                // SAFETY: iov < send_iovs.len() (see above); the kernel only reads through
                // iov_base (sendmmsg), so the cast to *mut is never written through.
                unsafe {
                    iovs.add(iov).write(libc::iovec {
                        iov_base: base.cast_mut().cast(),
                        iov_len: o.len(),
                    });
                }
                iov += 1;
            }
            // SAFETY: d < m and the name and header arrays were resized to m above; the
            // header points at this datagram's name and its iovecs, written above.
            unsafe {
                names.add(d).write(sockaddr_in(self.out[range.start].to));
                let mut h = empty_mmsghdr();
                h.msg_hdr.msg_name = names.add(d).cast();
                h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_hdr.msg_iov = iovs.add(first);
                h.msg_hdr.msg_iovlen = iov - first;
                hdrs.add(d).write(h);
            }
        }
        let mut off = 0;
        while off < m {
            let chunk = (m - off).min(UIO_MAXIOV);
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
                self.stats.datagrams_sent += r as u64;
                for range in &self.packed[off..off + r] {
                    for o in &self.out[range.clone()] {
                        match o.kind {
                            OutKind::Ack => self.stats.acks_sent += 1,
                            OutKind::JoinAck => self.stats.join_acks_sent += 1,
                            OutKind::Forward => self.stats.forwards_sent += 1,
                        }
                    }
                }
                off += r;
                continue;
            }
            let e = io::Error::last_os_error();
            if r < 0 && e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // The first datagram of the chunk failed: count its frames, go on with the next.
            let failed = &self.packed[off];
            if !self.send_error_reported {
                self.send_error_reported = true;
                eprintln!(
                    "mmsg-relay: sendmmsg to {} failed: {e}",
                    self.out[failed.start].to
                );
            }
            self.stats.send_failed += failed.len() as u64;
            off += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_answered_when_full_or_out_of_time() {
        let us = Duration::from_micros;
        // lite: 4 datagrams, whatever time is left.
        assert_eq!(next_fill(4, 4, us(900)), Fill::Answer);
        assert_eq!(next_fill(3, 4, us(900)), Fill::Wait(us(900)));
        assert_eq!(next_fill(1, 4, us(1)), Fill::Wait(us(1)));
        // The timeout, however few arrived.
        assert_eq!(next_fill(1, 4, Duration::ZERO), Fill::Answer);
        assert_eq!(next_fill(3, 4, Duration::ZERO), Fill::Answer);
        // mmsg: 64 or 500 µs; a zero timeout answers what the first receive brought.
        assert_eq!(next_fill(63, 64, us(500)), Fill::Wait(us(500)));
        assert_eq!(next_fill(64, 64, us(500)), Fill::Answer);
    }

    fn to(port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
    }

    fn packed(frames: &[(SocketAddrV4, usize)], merge: bool) -> Vec<Range<usize>> {
        // Left over from an earlier batch: `pack` clears it.
        let mut out = vec![0..99, 99..100];
        pack(frames, merge, &mut out);
        out
    }

    #[test]
    fn without_merging_every_frame_is_a_datagram() {
        let frames = [(to(1), 32), (to(1), 212), (to(2), 212)];
        assert_eq!(packed(&frames, false), [0..1, 1..2, 2..3]);
        assert_eq!(packed(&[], false), []);
        assert_eq!(packed(&[], true), []);
    }

    #[test]
    fn merging_bundles_each_destination() {
        // An ack and two forwards for port 1, one forward for 2, an ack and a forward for 3.
        let frames = [
            (to(1), 32),
            (to(1), 212),
            (to(1), 212),
            (to(2), 212),
            (to(3), 32),
            (to(3), 212),
        ];
        assert_eq!(packed(&frames, true), [0..3, 3..4, 4..6]);
    }

    #[test]
    fn a_bundle_stops_at_the_datagram_limit() {
        // 4 + 6 × 212 = 1276 bytes fit in 1472; a seventh frame (1488) does not.
        let frames = vec![(to(1), 212); 8];
        assert_eq!(packed(&frames, true), [0..6, 6..8]);
        // Exactly full: 4 + 1468 = 1472.
        let full = [(to(1), 1000), (to(1), 468), (to(1), 32)];
        assert_eq!(packed(&full, true), [0..2, 2..3]);
    }

    #[test]
    fn a_bundle_stops_at_the_frame_limit() {
        // Empty frames never fill the bytes: the count stops at 255.
        let frames = vec![(to(1), 0); 2 * MAX_FRAMES + 1];
        let m = MAX_FRAMES;
        assert_eq!(packed(&frames, true), [0..m, m..2 * m, 2 * m..2 * m + 1]);
    }
}
