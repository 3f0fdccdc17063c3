//! The `threads` build: events pass between threads over channels.
//!
//! A `receiver` thread does one `recvfrom` per datagram, decodes it and hands it to the worker
//! that owns its room (`room % workers`) over a bounded channel (1024 events: when a worker
//! falls behind, the receiver waits, the socket queue fills and the kernel drops, as a real
//! server would). Each `worker-N` thread owns the member table of its rooms and does one
//! `sendto` per destination: the ack to the sender, then one per other member.
//!
//! The receiver blocks in `recvfrom` with a [`POLL`] receive timeout, so it looks at the end
//! conditions that often; workers end when the receiver drops their channel.

use std::{
    io,
    net::{SocketAddr, SocketAddrV4, UdpSocket},
    sync::mpsc::{self, Receiver, SyncSender},
    thread,
};

use super::{Context, POLL, Served, ServerError, Stats};
use crate::{
    protocol::{self, HEADER_LEN, Header, Kind, MAX_DATAGRAM},
    rooms::{JoinOutcome, Rooms},
};

/// Events a worker's channel holds before the receiver waits.
pub const QUEUE: usize = 1024;

/// One datagram on its way to a worker.
struct Event {
    from: SocketAddrV4,
    header: Header,
    /// The datagram as received (a voice packet is forwarded unchanged).
    datagram: Vec<u8>,
}

/// Serves on `socket` with one receiver and `workers` workers until the context says stop.
pub fn serve(socket: &UdpSocket, workers: usize, ctx: &Context) -> Result<Served, ServerError> {
    socket
        .set_read_timeout(Some(POLL))
        .map_err(ServerError::Receive)?;
    thread::scope(|s| {
        let mut senders = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for w in 0..workers {
            let (tx, rx) = mpsc::sync_channel(QUEUE);
            let name = format!("worker-{w}");
            let spawned = thread::Builder::new()
                .name(name.clone())
                .spawn_scoped(s, move || work(socket, rx, ctx));
            match spawned {
                Ok(h) => handles.push((name, h)),
                Err(source) => {
                    // Dropping the senders ends the workers already started.
                    return Err(ServerError::Thread { name, source });
                }
            }
            senders.push(tx);
        }
        let name = "receiver".to_owned();
        let receiver = thread::Builder::new()
            .name(name.clone())
            .spawn_scoped(s, move || receive(socket, senders, ctx))
            .map_err(|source| ServerError::Thread {
                name: name.clone(),
                source,
            })?;
        let received = receiver.join().map_err(|_| ServerError::Panicked(name))?;
        let mut served = Served::default();
        for (name, h) in handles {
            let (stats, rooms) = h.join().map_err(|_| ServerError::Panicked(name))?;
            served.stats.add(&stats);
            served.rooms += rooms.room_count();
            served.members += rooms.member_count();
        }
        served.stats.add(&received?);
        Ok(served)
    })
}

/// The receiver: one `recvfrom` per datagram, decoded, handed to its room's worker. Its
/// senders are dropped when it returns, which ends the workers.
fn receive(
    socket: &UdpSocket,
    workers: Vec<SyncSender<Event>>,
    ctx: &Context,
) -> Result<Stats, ServerError> {
    let mut stats = Stats::default();
    // One byte more than the largest datagram, so a longer one shows (recvfrom truncates).
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    let result = loop {
        if ctx.should_stop() {
            break Ok(());
        }
        stats.recv_calls += 1;
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok((n, SocketAddr::V4(from))) => (n, from),
            Ok((_, SocketAddr::V6(_))) => {
                stats.datagrams += 1;
                stats.malformed += 1;
                continue;
            }
            // A timeout, a signal, or an ICMP error queued on the socket (Linux reports none
            // on an unconnected UDP socket, but one would not be a reason to stop).
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::ConnectionRefused
                ) =>
            {
                continue;
            }
            Err(e) => break Err(ServerError::Receive(e)),
        };
        stats.datagrams += 1;
        ctx.saw_datagrams();
        let datagram = &buf[..n];
        let header = match protocol::decode(datagram) {
            Ok(p) if p.header.kind != Kind::Ack => p.header,
            _ => {
                stats.malformed += 1;
                continue;
            }
        };
        match header.kind {
            Kind::Join => stats.joins += 1,
            _ => stats.voice += 1,
        }
        let worker = &workers[header.room as usize % workers.len()];
        let event = Event {
            from,
            header,
            datagram: datagram.to_vec(),
        };
        if worker.send(event).is_err() {
            // A worker is gone (it panicked); end the run, the join reports it.
            break Ok(());
        }
    };
    if result.is_err() {
        ctx.stop();
    }
    result.map(|()| stats)
}

/// One `sendto`; a failure is counted, not fatal.
fn send(socket: &UdpSocket, datagram: &[u8], to: SocketAddrV4, stats: &mut Stats) -> bool {
    loop {
        stats.send_calls += 1;
        match socket.send_to(datagram, to) {
            Ok(_) => {
                stats.datagrams_sent += 1;
                return true;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                stats.send_failed += 1;
                return false;
            }
        }
    }
}

/// A worker: the rooms of its share, one `sendto` per destination.
fn work(socket: &UdpSocket, events: Receiver<Event>, ctx: &Context) -> (Stats, Rooms) {
    let mut stats = Stats::default();
    let mut rooms = Rooms::default();
    while let Ok(e) = events.recv() {
        let h = e.header;
        match h.kind {
            Kind::Join => match rooms.join(h.room, e.from) {
                JoinOutcome::RoomFull => stats.room_full += 1,
                JoinOutcome::Joined | JoinOutcome::AlreadyMember => {
                    let ack: [u8; HEADER_LEN] = h.ack().to_bytes(0);
                    if send(socket, &ack, e.from, &mut stats) {
                        stats.join_acks_sent += 1;
                    }
                }
            },
            Kind::Voice => {
                let members = rooms.members(h.room);
                if !members.contains(&e.from) {
                    stats.not_member += 1;
                    continue;
                }
                if send(socket, &h.ack().to_bytes(0), e.from, &mut stats) {
                    stats.acks_sent += 1;
                }
                for &to in members.iter().filter(|&&m| m != e.from) {
                    if ctx.dropper.drop_this() {
                        stats.injected += 1;
                    } else if send(socket, &e.datagram, to, &mut stats) {
                        stats.forwards_sent += 1;
                    }
                }
            }
            // The receiver keeps acks away from workers.
            Kind::Ack => stats.malformed += 1,
        }
    }
    (stats, rooms)
}
