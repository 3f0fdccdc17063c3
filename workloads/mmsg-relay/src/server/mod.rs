//! The relay server: the three builds, what ends a run, and the summary printed at exit.
//!
//! A run ends on SIGINT/SIGTERM, or with `exit_after_idle` once no datagram has arrived for
//! that long after at least one did. Every thread looks at both every [`POLL`] at most, so a
//! run ends within about that much after either.

pub mod mmsg;
pub mod threads;

use std::{
    io,
    net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket},
    num::NonZeroU64,
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    time::{Duration, Instant},
};

use serde::Serialize;
use switchyard_harness::Shutdown;

use crate::udp;

/// How often a waiting thread looks at the shutdown flag and the idle timer.
pub const POLL: Duration = Duration::from_millis(50);
/// The largest `--batch`: `recvmmsg` takes at most `UIO_MAXIOV` (1024) messages a call.
pub const MAX_BATCH: usize = 1024;
/// What a summary line's `format` says.
pub const SUMMARY_FORMAT: &str = "mmsg-relay-summary";

/// The build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A receiver thread, channels, per-room worker threads; one syscall per datagram.
    Threads,
    /// Loops batching with recvmmsg/sendmmsg.
    Mmsg,
    /// The mmsg loops with a small batch (4 datagrams or a short timeout), merging the frames
    /// bound for one destination into one datagram.
    Lite,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Threads => "threads",
            Mode::Mmsg => "mmsg",
            Mode::Lite => "lite",
        }
    }

    /// Whether the build runs the batching loops (`mmsg`, `lite`).
    pub fn batches(self) -> bool {
        self != Mode::Threads
    }

    /// The batch and its timeout when the flags give none: `mmsg` waits for 64 datagrams or
    /// 500 µs; `lite` for 4 or [`LITE_BATCH_TIMEOUT`].
    pub fn default_batch(self) -> (usize, Duration) {
        match self {
            Mode::Lite => (LITE_BATCH, LITE_BATCH_TIMEOUT),
            _ => (64, Duration::from_micros(500)),
        }
    }
}

/// `lite`'s batch: answer as soon as 4 datagrams are in.
pub const LITE_BATCH: usize = 4;
/// `lite`'s batch timeout. Voice frames come every 20 ms a speaker, and whatever a relay
/// holds a frame back is added to every listener's delay and eaten out of the jitter buffer;
/// 1 ms is 5% of a frame interval. It is twice `mmsg`'s 500 µs because `lite` stops at 4
/// datagrams: with at least 4 datagrams a millisecond reaching a loop (2 loops, 20 rooms of 9
/// speakers: 4.5 a ms each) the batch fills before the timeout, and the timeout only bounds
/// the wait of quiet loops.
pub const LITE_BATCH_TIMEOUT: Duration = Duration::from_millis(1);

/// The validated settings of one server run.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub mode: Mode,
    /// 0 lets the kernel choose (the ready line says which).
    pub port: u16,
    /// `threads`: worker threads; rooms are spread over them by id.
    pub workers: usize,
    /// `mmsg`, `lite`: loops, each with its own `SO_REUSEPORT` socket and thread.
    pub loops: usize,
    /// `mmsg`, `lite`: datagrams a loop receives before it answers them.
    pub batch: usize,
    /// `mmsg`, `lite`: how long a loop waits for a batch to fill after its first datagram.
    pub batch_timeout: Duration,
    /// End once no datagram has arrived for this long, after at least one did.
    pub exit_after_idle: Option<Duration>,
    /// Drop every Nth forward on purpose (to check the driver's loss detection).
    pub drop_every: Option<NonZeroU64>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--workers must be at least 1")]
    ZeroWorkers,
    #[error("--loops must be at least 1")]
    ZeroLoops,
    #[error("--batch {0} is out of range (1 to {MAX_BATCH})")]
    Batch(usize),
}

impl ServerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self.mode {
            Mode::Threads if self.workers == 0 => Err(ConfigError::ZeroWorkers),
            Mode::Mmsg | Mode::Lite if self.loops == 0 => Err(ConfigError::ZeroLoops),
            Mode::Mmsg | Mode::Lite if !(1..=MAX_BATCH).contains(&self.batch) => {
                Err(ConfigError::Batch(self.batch))
            }
            _ => Ok(()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("failed to bind a UDP socket to {addr}")]
    Bind {
        addr: SocketAddrV4,
        #[source]
        source: io::Error,
    },
    #[error("failed to announce readiness")]
    Ready(#[source] io::Error),
    #[error("failed to start thread `{name}`")]
    Thread {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("failed to receive datagrams")]
    Receive(#[source] io::Error),
    #[error("thread `{0}` panicked")]
    Panicked(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EndReason {
    /// SIGINT or SIGTERM.
    Signal,
    /// `--exit-after-idle` elapsed with no datagram.
    Idle,
}

/// What a thread of either build counted; summed over threads at the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub datagrams: u64,
    pub voice: u64,
    pub joins: u64,
    pub acks_sent: u64,
    pub join_acks_sent: u64,
    pub forwards_sent: u64,
    /// Datagrams on the wire: one per ack and forward, or (`lite`) per bundle of them.
    pub datagrams_sent: u64,
    pub malformed: u64,
    pub not_member: u64,
    pub room_full: u64,
    pub injected: u64,
    pub send_failed: u64,
    pub recv_calls: u64,
    pub send_calls: u64,
    pub poll_calls: u64,
    /// `mmsg`: receive batches that brought at least one datagram.
    pub batches: u64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.datagrams += o.datagrams;
        self.voice += o.voice;
        self.joins += o.joins;
        self.acks_sent += o.acks_sent;
        self.join_acks_sent += o.join_acks_sent;
        self.forwards_sent += o.forwards_sent;
        self.datagrams_sent += o.datagrams_sent;
        self.malformed += o.malformed;
        self.not_member += o.not_member;
        self.room_full += o.room_full;
        self.injected += o.injected;
        self.send_failed += o.send_failed;
        self.recv_calls += o.recv_calls;
        self.send_calls += o.send_calls;
        self.poll_calls += o.poll_calls;
        self.batches += o.batches;
    }
}

/// Drops every Nth forward, counted across all threads (so the total is exactly
/// `floor(forwards attempted / N)` whatever the interleaving).
#[derive(Debug)]
pub struct ForwardDropper {
    every: Option<NonZeroU64>,
    seen: AtomicU64,
}

impl ForwardDropper {
    pub fn new(every: Option<NonZeroU64>) -> Self {
        Self {
            every,
            seen: AtomicU64::new(0),
        }
    }

    /// Whether this forward is to be dropped.
    pub fn drop_this(&self) -> bool {
        match self.every {
            None => false,
            Some(n) => (self.seen.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(n.get()),
        }
    }
}

/// What the threads of a run share: the end conditions and the dropper.
#[derive(Debug)]
pub struct Context<'a> {
    shutdown: &'a Shutdown,
    /// Raised by the idle timer or a failing thread, to end the others.
    stop: AtomicBool,
    idle_limit: Option<Duration>,
    started: Instant,
    /// Milliseconds from `started` to the last datagram, plus one; 0 before the first.
    last_datagram: AtomicU64,
    pub dropper: ForwardDropper,
}

impl<'a> Context<'a> {
    pub fn new(
        shutdown: &'a Shutdown,
        idle_limit: Option<Duration>,
        drop_every: Option<NonZeroU64>,
    ) -> Self {
        Self {
            shutdown,
            stop: AtomicBool::new(false),
            idle_limit,
            started: Instant::now(),
            last_datagram: AtomicU64::new(0),
            dropper: ForwardDropper::new(drop_every),
        }
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    /// Notes that datagrams arrived now. Stores at most once a millisecond, so loops on
    /// several cores do not fight over the cache line.
    pub fn saw_datagrams(&self) {
        if self.idle_limit.is_none() {
            return;
        }
        let now = self.elapsed_ms() + 1;
        if self.last_datagram.load(Ordering::Relaxed) != now {
            self.last_datagram.store(now, Ordering::Relaxed);
        }
    }

    /// Ends the run for every thread.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether the run is over: a signal, a stop, or the idle timer (which then stops it).
    pub fn should_stop(&self) -> bool {
        if self.shutdown.requested() || self.stop.load(Ordering::Relaxed) {
            return true;
        }
        let Some(limit) = self.idle_limit else {
            return false;
        };
        let last = self.last_datagram.load(Ordering::Relaxed);
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        if last > 0 && (self.elapsed_ms() + 1).saturating_sub(last) >= limit_ms {
            self.stop();
            return true;
        }
        false
    }
}

/// CPU and context switches of the whole server process (`getrusage(RUSAGE_SELF)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ProcessUsage {
    pub user_ns: u64,
    pub system_ns: u64,
    pub cpu_ns_per_packet: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub switches_per_packet: f64,
}

fn process_usage(packets: u64) -> ProcessUsage {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return ProcessUsage::default();
    }
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    let (user_ns, system_ns) = (ns(ru.ru_utime), ns(ru.ru_stime));
    let (voluntary, involuntary) = (ru.ru_nvcsw as u64, ru.ru_nivcsw as u64);
    ProcessUsage {
        user_ns,
        system_ns,
        cpu_ns_per_packet: per(user_ns + system_ns, packets),
        voluntary_switches: voluntary,
        involuntary_switches: involuntary,
        switches_per_packet: per(voluntary + involuntary, packets),
    }
}

fn per(total: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        total as f64 / count as f64
    }
}

/// The data-path syscalls the server made itself (futex waits behind channels are not
/// counted here: that is what switchyard shows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SyscallCounts {
    /// `recvfrom` (threads) or `recvmmsg` (mmsg, lite) calls, including those that found
    /// nothing.
    pub recv: u64,
    /// `sendto` (threads) or `sendmmsg` (mmsg, lite) calls.
    pub send: u64,
    /// `ppoll` waits (mmsg, lite; the threads receiver blocks in `recvfrom` instead).
    pub poll: u64,
    /// (recv + send + poll) / voice packets received.
    pub per_voice_packet: f64,
}

/// Datagrams that were not relayed, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Drops {
    /// Received datagrams that did not decode, or were acks (the relay only takes joins and
    /// voice).
    pub malformed: u64,
    /// Voice from an address that had not joined the room.
    pub not_member: u64,
    /// Joins refused because the room was full.
    pub room_full: u64,
    /// Acks and forwards whose send failed.
    pub send_failed: u64,
    /// Forwards dropped on purpose by `--drop-every`.
    pub injected: u64,
    /// Datagrams the kernel dropped because a server socket's receive queue was full
    /// (`/proc/self/net/udp`); `null` when it could not be read.
    pub kernel_rx_queue_full: Option<u64>,
    /// The sum of the above.
    pub total: u64,
}

/// The line a server prints when it ends.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub format: &'static str,
    pub schema_version: u32,
    pub mode: Mode,
    pub ended_by: EndReason,
    /// `threads` only.
    pub workers: Option<usize>,
    /// `mmsg` and `lite` only, as are the batch, its timeout and the batch means.
    pub loops: Option<usize>,
    pub batch: Option<usize>,
    pub batch_timeout_us: Option<u64>,
    pub drop_every: Option<u64>,
    /// Rooms with members, and members in all, at the end.
    pub rooms: usize,
    pub members: usize,
    /// Datagrams received, of any kind.
    pub packets_received: u64,
    /// Voice packets received.
    pub voice_received: u64,
    pub joins: u64,
    /// Acks of voice packets sent.
    pub acks_sent: u64,
    pub join_acks_sent: u64,
    pub forwards_sent: u64,
    /// Datagrams sent: acks, join acks and forwards, one each, but for `lite`, which bundles
    /// those bound for one destination.
    pub datagrams_sent: u64,
    /// Acks, join acks and forwards per datagram sent (1 but for `lite`).
    pub frames_per_datagram: f64,
    /// Receive batches (rounds of `recvmmsg` that brought at least one datagram).
    pub batches: Option<u64>,
    /// Datagrams received per batch.
    pub mean_batch_size: Option<f64>,
    /// Datagrams sent per `sendmmsg` call.
    pub mean_send_batch: Option<f64>,
    pub syscalls: SyscallCounts,
    pub drops: Drops,
    pub uptime_ns: u64,
    pub process: ProcessUsage,
}

/// What a build's `serve` brings back.
#[derive(Debug, Default)]
pub struct Served {
    pub stats: Stats,
    pub rooms: usize,
    pub members: usize,
}

fn bind(addr: SocketAddrV4, reuse_port: bool) -> Result<UdpSocket, ServerError> {
    udp::bind(addr, reuse_port).map_err(|source| ServerError::Bind { addr, source })
}

fn local_addr(socket: &UdpSocket, addr: SocketAddrV4) -> Result<SocketAddr, ServerError> {
    socket
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })
}

/// Runs the relay until `shutdown` is raised or the idle timer fires. `on_ready` is called
/// once every socket is bound (the binary prints `ready <port>` there).
pub fn run(
    config: &ServerConfig,
    shutdown: &Shutdown,
    on_ready: impl FnOnce(SocketAddr) -> io::Result<()>,
) -> Result<Summary, ServerError> {
    config.validate()?;
    let ctx = Context::new(shutdown, config.exit_after_idle, config.drop_every);
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, config.port);
    let (served, kernel_drops) = match config.mode {
        Mode::Threads => {
            let socket = bind(addr, false)?;
            on_ready(local_addr(&socket, addr)?).map_err(ServerError::Ready)?;
            let served = threads::serve(&socket, config.workers, &ctx)?;
            (served, udp::kernel_drops(&[&socket]))
        }
        Mode::Mmsg | Mode::Lite => {
            let first = bind(addr, true)?;
            let local = local_addr(&first, addr)?;
            let mut sockets = vec![first];
            for _ in 1..config.loops {
                let same = SocketAddrV4::new(Ipv4Addr::LOCALHOST, local.port());
                sockets.push(bind(same, true)?);
            }
            on_ready(local).map_err(ServerError::Ready)?;
            let settings = mmsg::Settings {
                batch: config.batch,
                batch_timeout: config.batch_timeout,
                merge: config.mode == Mode::Lite,
            };
            let served = mmsg::serve(&sockets, settings, &ctx)?;
            let refs: Vec<&UdpSocket> = sockets.iter().collect();
            (served, udp::kernel_drops(&refs))
        }
    };
    let s = served.stats;
    let mmsg = config.mode.batches();
    let syscalls = s.recv_calls + s.send_calls + s.poll_calls;
    let sent = s.acks_sent + s.join_acks_sent + s.forwards_sent;
    Ok(Summary {
        format: SUMMARY_FORMAT,
        schema_version: 1,
        mode: config.mode,
        ended_by: if shutdown.requested() {
            EndReason::Signal
        } else {
            EndReason::Idle
        },
        workers: (!mmsg).then_some(config.workers),
        loops: mmsg.then_some(config.loops),
        batch: mmsg.then_some(config.batch),
        batch_timeout_us: mmsg
            .then(|| u64::try_from(config.batch_timeout.as_micros()).unwrap_or(u64::MAX)),
        drop_every: config.drop_every.map(NonZeroU64::get),
        rooms: served.rooms,
        members: served.members,
        packets_received: s.datagrams,
        voice_received: s.voice,
        joins: s.joins,
        acks_sent: s.acks_sent,
        join_acks_sent: s.join_acks_sent,
        forwards_sent: s.forwards_sent,
        datagrams_sent: s.datagrams_sent,
        frames_per_datagram: per(sent, s.datagrams_sent),
        batches: mmsg.then_some(s.batches),
        mean_batch_size: mmsg.then(|| per(s.datagrams, s.batches)),
        mean_send_batch: mmsg.then(|| per(s.datagrams_sent, s.send_calls)),
        syscalls: SyscallCounts {
            recv: s.recv_calls,
            send: s.send_calls,
            poll: s.poll_calls,
            per_voice_packet: per(syscalls, s.voice),
        },
        drops: Drops {
            malformed: s.malformed,
            not_member: s.not_member,
            room_full: s.room_full,
            send_failed: s.send_failed,
            injected: s.injected,
            kernel_rx_queue_full: kernel_drops,
            total: s.malformed
                + s.not_member
                + s.room_full
                + s.send_failed
                + s.injected
                + kernel_drops.unwrap_or(0),
        },
        uptime_ns: u64::try_from(ctx.started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        process: process_usage(s.voice),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropper_takes_every_nth_across_threads() {
        let d = ForwardDropper::new(NonZeroU64::new(7));
        let dropped = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..250 {
                        if d.drop_this() {
                            dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(dropped.into_inner(), 1_000 / 7);
        let never = ForwardDropper::new(None);
        assert!((0..100).all(|_| !never.drop_this()));
    }

    #[test]
    fn each_batching_build_has_its_batch() {
        assert_eq!(Mode::Mmsg.default_batch(), (64, Duration::from_micros(500)));
        assert_eq!(Mode::Lite.default_batch(), (4, Duration::from_millis(1)));
        assert!(Mode::Lite.batches() && Mode::Mmsg.batches() && !Mode::Threads.batches());
    }

    #[test]
    fn idle_needs_a_first_datagram() {
        let shutdown = Shutdown::new();
        let ctx = Context::new(&shutdown, Some(Duration::from_millis(5)), None);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!ctx.should_stop(), "idle before any datagram");
        ctx.saw_datagrams();
        assert!(!ctx.should_stop());
        std::thread::sleep(Duration::from_millis(20));
        assert!(ctx.should_stop());
        assert!(!shutdown.requested(), "idle is not a signal");
    }

    #[test]
    fn config_is_checked_per_mode() {
        let mut c = ServerConfig {
            mode: Mode::Mmsg,
            port: 0,
            workers: 0,
            loops: 1,
            batch: 64,
            batch_timeout: Duration::from_micros(500),
            exit_after_idle: None,
            drop_every: None,
        };
        assert_eq!(c.validate(), Ok(()));
        c.batch = MAX_BATCH + 1;
        assert_eq!(c.validate(), Err(ConfigError::Batch(MAX_BATCH + 1)));
        c.mode = Mode::Lite;
        assert_eq!(c.validate(), Err(ConfigError::Batch(MAX_BATCH + 1)));
        c.batch = LITE_BATCH;
        assert_eq!(c.validate(), Ok(()));
        c.loops = 0;
        assert_eq!(c.validate(), Err(ConfigError::ZeroLoops));
        c.mode = Mode::Threads;
        assert_eq!(c.validate(), Err(ConfigError::ZeroWorkers));
    }
}
