//! `mmsg-relay-driver`: the load generator for `mmsg-relay`.
//!
//! ```text
//! mmsg-relay-driver --addr 127.0.0.1:PORT [--rooms 10] [--speakers 4] [--size 180]
//!                   [--interval 20ms] [--duration 5s | --packets N] --out result.json
//!                   [--build NAME] [--receivers 2] [--drain 500ms] [--window 100ms]
//!                   [--connect-timeout 5s]
//! ```
//!
//! R×S speakers, one UDP socket each, join their rooms (a join is resent until acked), then
//! every speaker sends a voice packet every interval, the speakers' phases spread evenly over
//! the interval. One sender thread paces them all; `--receivers` threads wait on all the
//! sockets with `ppoll` and record, for each forward, the latency from the sender's embedded
//! CLOCK_MONOTONIC timestamp to its arrival, and its sequence number per (sender, receiver)
//! pair; a bundle from the `lite` relay is taken frame by frame, each with its own timestamp,
//! so latency and loss are per frame whatever the datagrams. After the last send the driver drains: it waits until every expected forward and ack
//! has arrived, or `--drain` passes; what has not arrived by then is lost (the rules are in
//! `mmsg_relay::loss`).
//!
//! The result is a `switchyard-harness` driver result (workload `mmsg-relay`) where
//! `operations` is the number of voice packets the speakers sent and `throughput_per_s` their
//! rate; the latency histogram and windows hold one value per forward received (about
//! `operations × (speakers − 1)`, exactly `parameters.latency_samples`). Loss and acks are in
//! `parameters`, with the datagrams the speakers received and the frames in them.

use std::{
    collections::BTreeMap,
    io,
    net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket},
    path::{Path, PathBuf},
    process::ExitCode,
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::Parser;
use mmsg_relay::{
    WORKLOAD,
    clock::monotonic_ns,
    loss::{Loss, SeqTracker},
    protocol::{self, Header, Kind, MAX_DATAGRAM, MAX_PAYLOAD},
    udp,
};
use switchyard_harness::{
    Budget, DriverResult, LatencyRecorder, Measured as _, Recorder, RunBound, Shutdown,
    driver::TimingFlags, human_ns, parse_duration, print_line,
};

/// Speakers in rooms, sending voice packets through mmsg-relay.
#[derive(Debug, Parser)]
#[command(name = "mmsg-relay-driver", version)]
#[command(mut_arg("connect_timeout", |a| {
    a.help("How long to keep resending joins until the relay acks them all")
}))]
struct Args {
    /// The relay's address (loopback only), e.g. 127.0.0.1:40123.
    #[arg(long)]
    addr: SocketAddr,
    /// Rooms.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rooms: u32,
    /// Speakers per room, one UDP socket each.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=9))]
    speakers: u32,
    /// Voice payload in bytes (the datagram adds a 32-byte header).
    #[arg(long, default_value_t = 180, value_parser = clap::value_parser!(u32).range(0..=MAX_PAYLOAD as i64))]
    size: u32,
    /// Each speaker sends one packet per interval.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    interval: Duration,
    /// Send for this long [default: 5s].
    #[arg(long, value_parser = parse_duration, conflicts_with = "packets")]
    duration: Option<Duration>,
    /// Send this many voice packets in all (round-robin over the speakers).
    #[arg(long)]
    packets: Option<u64>,
    /// Where to write the driver result (JSON).
    #[arg(long)]
    out: PathBuf,
    /// The server's build, recorded in the result (threads, mmsg, lite).
    #[arg(long, default_value = "unspecified")]
    build: String,
    /// Receiver threads; the speakers' sockets are spread over them.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    receivers: u32,
    /// After the last send, how long to wait for what is still expected.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    drain: Duration,
    #[command(flatten)]
    timing: TimingFlags,
}

fn main() -> ExitCode {
    switchyard_harness::exit_code("mmsg-relay-driver", run(Args::parse()))
}

/// One speaker: its socket, its room and its place in it. Speaker ids (in headers) are the
/// global index `room × speakers + place`.
struct Speaker {
    socket: UdpSocket,
    room: u32,
}

/// How often waiting threads look at their stop flag.
const POLL: Duration = Duration::from_millis(10);
/// How often unanswered joins are sent again.
const JOIN_RESEND: Duration = Duration::from_millis(200);

fn open_speakers(rooms: u32, per_room: u32) -> anyhow::Result<Vec<Speaker>> {
    let mut speakers = Vec::with_capacity((rooms * per_room) as usize);
    for room in 0..rooms {
        for _ in 0..per_room {
            let socket = udp::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), false)
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .with_context(|| {
                    format!(
                        "failed to open speaker socket {} of {}\nhint: each speaker has its own socket; raise `ulimit -n` or use fewer --rooms",
                        speakers.len() + 1,
                        rooms * per_room
                    )
                })?;
            speakers.push(Speaker { socket, room });
        }
    }
    Ok(speakers)
}

/// Sends every speaker's join and resends those unanswered until all are acked.
fn join(speakers: &[Speaker], relay: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut joined = vec![false; speakers.len()];
    let mut left = speakers.len();
    let mut fds: Vec<libc::pollfd> = speakers.iter().map(|s| udp::pollfd(&s.socket)).collect();
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    let mut wire = Vec::new();
    let mut next_send = Instant::now();
    let mut send_error = None;
    while left > 0 {
        let now = Instant::now();
        if now >= deadline {
            let why =
                send_error.map_or_else(String::new, |e: io::Error| format!(" (last send: {e})"));
            bail!(
                "{relay} acked no join from {left} of {} speakers within {timeout:?}{why}\nhint: start `mmsg-relay --mode threads|mmsg|lite` first; it prints `ready <port>`",
                speakers.len()
            );
        }
        if now >= next_send {
            for (i, s) in speakers.iter().enumerate().filter(|(i, _)| !joined[*i]) {
                let h = Header {
                    kind: Kind::Join,
                    room: s.room,
                    speaker: i as u32,
                    seq: 0,
                    sent_ns: monotonic_ns(),
                };
                protocol::encode(&h, &[], &mut wire).context("failed to encode a join")?;
                if let Err(e) = s.socket.send_to(&wire, relay) {
                    send_error = Some(e);
                }
            }
            next_send = now + JOIN_RESEND;
        }
        udp::wait_readable(&mut fds, POLL).context("failed to wait for join acks")?;
        for (i, fd) in fds.iter().enumerate() {
            if fd.revents & libc::POLLIN == 0 {
                continue;
            }
            while let Ok((n, _)) = speakers[i].socket.recv_from(&mut buf) {
                let Ok(frames) = protocol::frames(&buf[..n]) else {
                    continue;
                };
                for p in frames {
                    let h = p.header;
                    if h.kind == Kind::Ack
                        && h.seq == 0
                        && h.room == speakers[i].room
                        && h.speaker == i as u32
                        && !joined[i]
                    {
                        joined[i] = true;
                        left -= 1;
                    }
                }
            }
        }
    }
    Ok(())
}

/// What the sender thread brings back.
struct Sent {
    /// Packets each speaker sent (its last sequence number).
    per_speaker: Vec<u64>,
    errors: u64,
    first_error: Option<io::Error>,
    finished: Instant,
}

/// Paces every speaker: speaker `i`'s k-th packet is due at `start + k × interval + i ×
/// interval / n`. A failed `sendto` does not use up a sequence number.
fn send_all(
    speakers: &[Speaker],
    relay: SocketAddr,
    payload: &[u8],
    interval: Duration,
    start: Instant,
    budget: &Budget,
    issued: &[AtomicU64],
) -> Sent {
    let n = speakers.len() as u64;
    let interval_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
    let step_ns = interval_ns / n;
    let mut seq = vec![0u64; speakers.len()];
    let mut errors = 0;
    let mut first_error = None;
    let mut wire = Vec::with_capacity(protocol::HEADER_LEN + payload.len());
    'run: for tick in 0u64.. {
        for (i, s) in speakers.iter().enumerate() {
            if !budget.next() {
                break 'run;
            }
            let offset = tick
                .saturating_mul(interval_ns)
                .saturating_add(i as u64 * step_ns);
            let due = start + Duration::from_nanos(offset);
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            let next = seq[i] + 1;
            // Published before the send: a receiver may see the forward before send_to
            // returns here.
            issued[i].store(next, Ordering::Release);
            let h = Header {
                kind: Kind::Voice,
                room: s.room,
                speaker: i as u32,
                seq: next,
                sent_ns: monotonic_ns(),
            };
            if protocol::encode(&h, payload, &mut wire).is_err() {
                unreachable!("--size is limited to MAX_PAYLOAD");
            }
            match s.socket.send_to(&wire, relay) {
                Ok(_) => seq[i] = next,
                Err(e) => {
                    issued[i].store(next - 1, Ordering::Release);
                    errors += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    Sent {
        per_speaker: seq,
        errors,
        first_error,
        finished: Instant::now(),
    }
}

/// What arrived at one speaker.
struct Heard {
    /// Index of the speaker.
    speaker: usize,
    /// By the sender's place in the room.
    forwards: Vec<SeqTracker>,
    acks: SeqTracker,
}

/// What a receiver thread brings back.
struct Received {
    recorder: Recorder,
    ack_latency: LatencyRecorder,
    heard: Vec<Heard>,
    malformed: u64,
    misrouted: u64,
    unexpected: u64,
    recv_errors: u64,
    /// Datagrams from the relay, and the frames in them (more than one a datagram only when
    /// the relay bundles).
    datagrams: u64,
    frames: u64,
    last_arrival: Option<Instant>,
}

/// Shared by the receivers and the thread that decides when the drain is over.
struct Progress {
    forwards: AtomicU64,
    acks: AtomicU64,
    stop: AtomicBool,
}

struct ReceiveSetup<'a> {
    speakers: &'a [Speaker],
    per_room: usize,
    relay: SocketAddr,
    issued: &'a [AtomicU64],
    progress: &'a Progress,
}

fn receive(setup: &ReceiveSetup<'_>, mine: Vec<usize>, recorder: Recorder) -> Received {
    let ReceiveSetup {
        speakers,
        per_room,
        relay,
        issued,
        progress,
    } = *setup;
    let mut fds: Vec<libc::pollfd> = mine
        .iter()
        .map(|&i| udp::pollfd(&speakers[i].socket))
        .collect();
    let mut r = Received {
        recorder,
        ack_latency: LatencyRecorder::new(),
        heard: mine
            .iter()
            .map(|&speaker| Heard {
                speaker,
                forwards: vec![SeqTracker::default(); per_room],
                acks: SeqTracker::default(),
            })
            .collect(),
        malformed: 0,
        misrouted: 0,
        unexpected: 0,
        recv_errors: 0,
        datagrams: 0,
        frames: 0,
        last_arrival: None,
    };
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    while !progress.stop.load(Ordering::Relaxed) {
        if udp::wait_readable(&mut fds, POLL).is_err() {
            r.recv_errors += 1;
            continue;
        }
        for (k, fd) in fds.iter().enumerate() {
            if fd.revents & libc::POLLIN == 0 {
                continue;
            }
            let me = mine[k];
            let socket = &speakers[me].socket;
            loop {
                let (n, from) = match socket.recv_from(&mut buf) {
                    Ok(x) => x,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        r.recv_errors += 1;
                        break;
                    }
                };
                let now_ns = monotonic_ns();
                let now = Instant::now();
                // A datagram is one frame, or (lite) a bundle of the frames for this speaker;
                // each frame counts on its own, with its own send timestamp.
                let Ok(frames) = protocol::frames(&buf[..n]) else {
                    r.malformed += 1;
                    continue;
                };
                if from != relay {
                    r.misrouted += 1;
                    continue;
                }
                r.datagrams += 1;
                for p in frames {
                    r.frames += 1;
                    let h = p.header;
                    let latency = now_ns.saturating_sub(h.sent_ns);
                    match h.kind {
                        // A repeated join ack (the join was resent): nothing to count.
                        Kind::Ack if h.seq == 0 => {}
                        Kind::Ack => {
                            if h.speaker as usize != me || h.room != speakers[me].room {
                                r.misrouted += 1;
                            } else if h.seq > issued[me].load(Ordering::Acquire) {
                                r.unexpected += 1;
                            } else if r.heard[k].acks.record(h.seq).is_new() {
                                progress.acks.fetch_add(1, Ordering::Relaxed);
                                r.ack_latency.record(latency);
                            }
                        }
                        Kind::Voice => {
                            let sender = h.speaker as usize;
                            if sender >= speakers.len()
                                || sender == me
                                || speakers[sender].room != speakers[me].room
                                || h.room != speakers[me].room
                            {
                                r.misrouted += 1;
                            } else if h.seq > issued[sender].load(Ordering::Acquire) {
                                r.unexpected += 1;
                            } else if r.heard[k].forwards[sender % per_room]
                                .record(h.seq)
                                .is_new()
                            {
                                progress.forwards.fetch_add(1, Ordering::Relaxed);
                                r.recorder.record_ns(latency, now);
                                r.last_arrival = Some(now);
                            }
                        }
                        Kind::Join => r.misrouted += 1,
                    }
                }
            }
        }
    }
    r
}

/// Starts `receivers` receiver threads in `scope`, the speakers dealt out among them in turn.
/// When one cannot start, the others are told to stop.
fn spawn_receivers<'scope, 'env>(
    scope: &'scope thread::Scope<'scope, 'env>,
    setup: &'env ReceiveSetup<'env>,
    receivers: usize,
    start: Instant,
    window: Duration,
) -> anyhow::Result<Vec<thread::ScopedJoinHandle<'scope, Received>>> {
    let mut handles = Vec::with_capacity(receivers);
    for r in 0..receivers {
        let mine: Vec<usize> = (r..setup.speakers.len()).step_by(receivers).collect();
        let spawned = thread::Builder::new()
            .name(format!("receiver-{r}"))
            .spawn_scoped(scope, move || {
                receive(setup, mine, Recorder::new(start, window))
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                setup.progress.stop.store(true, Ordering::Relaxed);
                return Err(e).context("failed to start a receiver thread");
            }
        }
    }
    Ok(handles)
}

/// The drain: waits until every forward and ack expected after `sent` is in, or `drain`
/// passes. Whether everything came.
fn drain(progress: &Progress, sent: &Sent, per_room: usize, drain: Duration) -> bool {
    let expected_acks: u64 = sent.per_speaker.iter().sum();
    let expected_forwards = expected_acks * (per_room as u64 - 1);
    let deadline = Instant::now() + drain;
    let complete = || {
        progress.forwards.load(Ordering::Relaxed) >= expected_forwards
            && progress.acks.load(Ordering::Relaxed) >= expected_acks
    };
    while !complete() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(2));
    }
    complete()
}

/// What the load's threads share: the receivers' setup, how the sender paces the speakers,
/// and how long the drain may last.
struct LoadSetup<'a> {
    receive: ReceiveSetup<'a>,
    payload: &'a [u8],
    interval: Duration,
    budget: &'a Budget,
    start: Instant,
    window: Duration,
    receivers: usize,
    drain: Duration,
}

/// Runs the load: the receivers, the sender pacing every speaker until the budget is spent,
/// then the drain. What was sent, what each receiver got, and whether the drain ended with
/// everything in.
fn run_load(load: &LoadSetup<'_>) -> anyhow::Result<(Sent, Vec<Received>, bool)> {
    let setup = &load.receive;
    let progress = setup.progress;
    thread::scope(|s| {
        let handles = spawn_receivers(s, setup, load.receivers, load.start, load.window)?;
        let sender = thread::Builder::new()
            .name("sender".to_owned())
            .spawn_scoped(s, || {
                send_all(
                    setup.speakers,
                    setup.relay,
                    load.payload,
                    load.interval,
                    load.start,
                    load.budget,
                    setup.issued,
                )
            });
        let sent = match sender {
            Ok(h) => h.join(),
            Err(e) => {
                progress.stop.store(true, Ordering::Relaxed);
                return Err(e).context("failed to start the sender thread");
            }
        };
        let Ok(sent) = sent else {
            progress.stop.store(true, Ordering::Relaxed);
            bail!("the sender thread panicked");
        };
        let drained_early = drain(progress, &sent, setup.per_room, load.drain);
        progress.stop.store(true, Ordering::Relaxed);
        let received = handles
            .into_iter()
            .map(|h| h.join())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| anyhow::anyhow!("a receiver thread panicked"))?;
        Ok((sent, received, drained_early))
    })
}

/// The receivers' figures put together, with the loss of every (sender, receiver) pair.
struct Merged {
    recorder: Recorder,
    ack_latency: LatencyRecorder,
    forwards: Loss,
    acks: Loss,
    malformed: u64,
    misrouted: u64,
    unexpected: u64,
    recv_errors: u64,
    datagrams: u64,
    frames: u64,
    /// The last send or arrival.
    end: Instant,
}

/// Merges what the receivers brought back, and counts the loss of every (sender, receiver)
/// pair against what `sent` says each speaker sent.
fn merge(
    received: &[Received],
    sent: &Sent,
    start: Instant,
    window: Duration,
    per_room: usize,
) -> anyhow::Result<Merged> {
    let mut m = Merged {
        recorder: Recorder::new(start, window),
        ack_latency: LatencyRecorder::new(),
        forwards: Loss::default(),
        acks: Loss::default(),
        malformed: 0,
        misrouted: 0,
        unexpected: 0,
        recv_errors: 0,
        datagrams: 0,
        frames: 0,
        end: sent.finished,
    };
    for r in received {
        m.recorder
            .merge(&r.recorder)
            .context("failed to merge latencies")?;
        m.ack_latency
            .merge(&r.ack_latency)
            .context("failed to merge ack latencies")?;
        m.malformed += r.malformed;
        m.misrouted += r.misrouted;
        m.unexpected += r.unexpected;
        m.recv_errors += r.recv_errors;
        m.datagrams += r.datagrams;
        m.frames += r.frames;
        if let Some(t) = r.last_arrival {
            m.end = m.end.max(t);
        }
        for h in &r.heard {
            let room_start = h.speaker - h.speaker % per_room;
            for (place, tracker) in h.forwards.iter().enumerate() {
                let sender = room_start + place;
                if sender != h.speaker {
                    m.forwards.add(&tracker.loss(sent.per_speaker[sender]));
                }
            }
            m.acks.add(&h.acks.loss(sent.per_speaker[h.speaker]));
        }
    }
    Ok(m)
}

/// What a run came to: the sends, the receivers' figures merged, whether the drain ended
/// with everything in, and the datagrams the kernel dropped at the speakers' sockets.
struct Outcome {
    sent: Sent,
    merged: Merged,
    drained_early: bool,
    socket_drops: Option<u64>,
}

/// The result's parameters: the flags, the sends, the loss, the acks and what arrived.
fn parameters(
    args: &Args,
    bound: RunBound,
    speakers: usize,
    receivers: usize,
    outcome: &Outcome,
) -> BTreeMap<String, serde_json::Value> {
    let Outcome {
        sent,
        merged: m,
        drained_early,
        socket_drops,
    } = outcome;
    let (forwards, acks) = (&m.forwards, &m.acks);
    let (key, value) = bound.parameter();
    let key = if key == "ops" { "packets" } else { key };
    let mut parameters = BTreeMap::from([
        ("rooms".to_owned(), serde_json::json!(args.rooms)),
        (
            "speakers_per_room".to_owned(),
            serde_json::json!(args.speakers),
        ),
        ("speakers".to_owned(), serde_json::json!(speakers)),
        // Packets offered per second: the driver paces every speaker (open loop).
        (
            "rate".to_owned(),
            serde_json::json!(speakers as f64 * 1e6 / args.interval.as_micros().max(1) as f64),
        ),
        ("size".to_owned(), serde_json::json!(args.size)),
        (
            "interval_us".to_owned(),
            serde_json::json!(args.interval.as_micros() as u64),
        ),
        ("receivers".to_owned(), serde_json::json!(receivers)),
        (
            "drain_ms".to_owned(),
            serde_json::json!(args.drain.as_millis() as u64),
        ),
        (
            "cores".to_owned(),
            serde_json::json!(thread::available_parallelism().map_or(1, |n| n.get())),
        ),
        ("packets_sent".to_owned(), serde_json::json!(acks.expected)),
        ("send_errors".to_owned(), serde_json::json!(sent.errors)),
        (
            "forwards_expected".to_owned(),
            serde_json::json!(forwards.expected),
        ),
        (
            "forwards_received".to_owned(),
            serde_json::json!(forwards.received),
        ),
        ("forwards_lost".to_owned(), serde_json::json!(forwards.lost)),
        ("loss_ratio".to_owned(), serde_json::json!(forwards.ratio())),
        ("loss_gaps".to_owned(), serde_json::json!(forwards.gaps)),
        ("loss_late".to_owned(), serde_json::json!(forwards.late)),
        (
            "duplicates".to_owned(),
            serde_json::json!(forwards.duplicates + acks.duplicates),
        ),
        (
            "stale".to_owned(),
            serde_json::json!(forwards.stale + acks.stale),
        ),
        ("acks_expected".to_owned(), serde_json::json!(acks.expected)),
        ("acks_received".to_owned(), serde_json::json!(acks.received)),
        ("acks_lost".to_owned(), serde_json::json!(acks.lost)),
        (
            "ack_latency_p50_ns".to_owned(),
            serde_json::json!(m.ack_latency.value_at_quantile(0.5)),
        ),
        (
            "ack_latency_p99_ns".to_owned(),
            serde_json::json!(m.ack_latency.value_at_quantile(0.99)),
        ),
        (
            "ack_latency_max_ns".to_owned(),
            serde_json::json!(m.ack_latency.max()),
        ),
        (
            "latency_samples".to_owned(),
            serde_json::json!(m.recorder.latency().count()),
        ),
        ("drained_early".to_owned(), serde_json::json!(drained_early)),
        ("malformed".to_owned(), serde_json::json!(m.malformed)),
        ("misrouted".to_owned(), serde_json::json!(m.misrouted)),
        ("unexpected_seq".to_owned(), serde_json::json!(m.unexpected)),
        ("recv_errors".to_owned(), serde_json::json!(m.recv_errors)),
        ("socket_drops".to_owned(), serde_json::json!(socket_drops)),
        // What the speakers got from the relay while sending: datagrams, and the acks and
        // forwards in them (equal unless the relay bundles them, as `lite` does).
        (
            "datagrams_received".to_owned(),
            serde_json::json!(m.datagrams),
        ),
        ("frames_received".to_owned(), serde_json::json!(m.frames)),
    ]);
    parameters.insert(key.to_owned(), value);
    parameters
}

/// Prints the run's summary line: packets, forwards and loss, acks, latency, the result file.
fn print_summary(result: &DriverResult, merged: &Merged, out: &Path) -> anyhow::Result<()> {
    let (forwards, acks) = (&merged.forwards, &merged.acks);
    let p = result.latency_ns;
    let line = format!(
        "{WORKLOAD} {}: {} packets in {:.2} s ({:.0}/s); forwards {}/{} received, {} lost ({:.3}%); acks {}/{}; latency p50 {} p99 {} p99.99 {} max {}; wrote {}",
        result.build,
        result.operations,
        result.duration_ns as f64 / 1e9,
        result.throughput_per_s,
        forwards.received,
        forwards.expected,
        forwards.lost,
        forwards.ratio() * 100.0,
        acks.received,
        acks.expected,
        human_ns(p.p50),
        human_ns(p.p99),
        human_ns(p.p99_99),
        human_ns(p.max),
        out.display()
    );
    print_line(&line).context("failed to print the summary")
}

/// Opens and joins the speakers, runs the load and the drain, writes the result and prints
/// its summary.
fn run(args: Args) -> anyhow::Result<()> {
    if !args.addr.ip().is_loopback() {
        bail!(
            "{} is not a loopback address; the relay listens on 127.0.0.1 only",
            args.addr
        );
    }
    if args.interval.is_zero() {
        bail!("--interval must be longer than zero");
    }
    let bound = RunBound::from_flags(args.duration, args.packets, Duration::from_secs(5))
        .map_err(|e| anyhow::anyhow!(e.to_string().replace("--ops", "--packets")))?;
    let shutdown = Shutdown::install().context("failed to install the SIGINT/SIGTERM handler")?;
    let window = args.timing.window();
    let per_room = args.speakers as usize;
    let payload: Vec<u8> = (0..args.size).map(|i| b'a' + (i % 26) as u8).collect();

    let speakers = open_speakers(args.rooms, args.speakers)?;
    join(&speakers, args.addr, args.timing.connect_timeout)?;

    let issued: Vec<AtomicU64> = speakers.iter().map(|_| AtomicU64::new(0)).collect();
    let progress = Progress {
        forwards: AtomicU64::new(0),
        acks: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    };
    let receivers = (args.receivers as usize).min(speakers.len());
    let setup = ReceiveSetup {
        speakers: &speakers,
        per_room,
        relay: args.addr,
        issued: &issued,
        progress: &progress,
    };
    let start = Instant::now();
    let budget = Budget::new(bound, start, shutdown.clone());
    let (sent, received, drained_early) = run_load(&LoadSetup {
        receive: setup,
        payload: &payload,
        interval: args.interval,
        budget: &budget,
        start,
        window,
        receivers,
        drain: args.drain,
    })?;

    let merged = merge(&received, &sent, start, window, per_room)?;
    let sockets: Vec<&UdpSocket> = speakers.iter().map(|s| &s.socket).collect();
    let outcome = Outcome {
        sent,
        merged,
        drained_early,
        socket_drops: udp::kernel_drops(&sockets),
    };
    let parameters = parameters(&args, bound, speakers.len(), receivers, &outcome);
    let Outcome { sent, merged, .. } = outcome;
    let packets_sent = merged.acks.expected;
    let duration = merged.end - start;
    let mut result = DriverResult::new(
        WORKLOAD,
        &args.build,
        parameters,
        &merged.recorder,
        sent.errors,
        duration,
    )?;
    // An operation is a voice packet sent; the histogram holds one latency per forward.
    result.operations = packets_sent;
    result.throughput_per_s = if duration.is_zero() {
        0.0
    } else {
        packets_sent as f64 / duration.as_secs_f64()
    };
    result.write(&args.out)?;

    if let Some(e) = &sent.first_error {
        eprintln!(
            "mmsg-relay-driver: {} sends failed; the first: {e}",
            sent.errors
        );
    }
    print_summary(&result, &merged, &args.out)
}
