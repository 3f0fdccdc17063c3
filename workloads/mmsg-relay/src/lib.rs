//! mmsg-relay: a UDP voice relay, to compare a thread-and-channel design with batched
//! `recvmmsg`/`sendmmsg` loops (the `threads`, `mmsg` and `lite` builds, chosen at run time
//! with `--mode`).
//!
//! Each speaker sends a voice-sized packet every 20 ms; the relay acks it to the speaker and
//! forwards it to every other member of the speaker's room. Both builds do the same work per
//! packet (decode, look up the room, one ack, N−1 forwards); they differ in how many syscalls,
//! thread hand-offs and datagrams that takes:
//!
//! - `threads`: one receiver thread does one `recvfrom` per datagram and hands it over a
//!   bounded channel to the worker that owns the room (`room % workers`); the worker does one
//!   `sendto` per destination. Per voice packet: 1 receive, S sends, one channel hand-off (a
//!   futex wake when the worker sleeps).
//! - `mmsg`: `--loops` loops, each on its own socket bound to the same port with
//!   `SO_REUSEPORT` (the kernel spreads speakers over the loops by their address); each loop
//!   fills a batch with `recvmmsg`, builds every ack and forward of the batch, grouped by
//!   destination, and sends them with one `sendmmsg` (split only past `UIO_MAXIOV`, 1024
//!   datagrams). See [`server::mmsg`] for how the batch timeout is implemented and why.
//! - `lite`: the `mmsg` loops with a batch of 4 datagrams or 1 ms, whichever comes first, and
//!   the acks and forwards bound for one speaker merged into one datagram (a version-2
//!   bundle): fewer, larger sends.
//!
//! # Protocol
//!
//! A 32-byte little-endian header (magic `VR`, version, kind, room, speaker, sequence number,
//! the sender's CLOCK_MONOTONIC timestamp in ns, payload length) and the payload. Speakers
//! `join` a room (the relay learns the room's member addresses from the join's source address
//! and acks it with sequence 0), then send `voice` packets with sequence numbers from 1; each
//! is answered with an `ack` (its header, kind ack, no payload) and forwarded unchanged to the
//! other members. `lite` sends what it has for one speaker as a bundle: a 4-byte header
//! (`VR`, version 2, frame count) and the frames, each a version-1 datagram. The byte layout
//! and every rule are in [`protocol`].
//!
//! # Modules
//!
//! - [`protocol`]: encode/decode of the datagrams;
//! - [`rooms`]: the member table;
//! - [`server`]: the builds, the idle/stop rules and the exit summary;
//! - [`loss`]: the driver's per (sender, receiver) sequence tracking;
//! - [`udp`]: socket setup, waiting for readability, the kernel's per-socket drop counter;
//! - [`clock`]: the CLOCK_MONOTONIC timestamps carried in packets.
//!
//! The `mmsg-relay` binary is the server (the profiled target); `mmsg-relay-driver` is the
//! load generator, which writes a `switchyard-harness` driver result.

pub mod clock;
pub mod loss;
pub mod protocol;
pub mod rooms;
pub mod server;
pub mod udp;

/// The workload's name in driver results.
pub const WORKLOAD: &str = "mmsg-relay";
