//! The broker: a TCP listener on 127.0.0.1, a thread per producer connection, and one lock
//! around the commit log that every send goes through.
//!
//! Per message, a connection thread reads the frame (outside the lock), then under the lock
//! appends the record to the active segment (one `write(2)`, a roll or a flush when due) and
//! records its position in the index, then, outside the lock again, writes the ack. Threads
//! per connection make the contention real: N producers are N threads racing for one lock.
//!
//! A message that carries its trace (`protocol::TRACED`) is served as a span of that trace,
//! published in the thread's OpenTelemetry thread context from the frame read to the ack
//! written: a profiler reading the context finds each message's anatomy by its span id. With
//! `spans_out`, each such span's own timings (wall, on CPU, waiting for a CPU) are written
//! there at exit, to hold the profiler's figures against.

use std::{
    collections::HashMap,
    io::{self, BufReader},
    net::{Ipv4Addr, Shutdown as SocketShutdown, SocketAddr, TcpListener, TcpStream},
    os::fd::AsRawFd as _,
    path::PathBuf,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use serde::Serialize;
use switchyard_harness::{Shutdown, otel_ctx};

use crate::{
    commit_log::{CommitLog, LogConfig, LogError, LogStats, RECORD_HEADER},
    locks::{AbsConfig, BrokerLock, LockKind, LockStats, abs::AbsConfigError},
    protocol::{ACK_ERROR, FrameError, read_record, write_ack},
};

/// The validated settings of one server run.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub lock: LockKind,
    /// 0 lets the kernel choose (the ready line says which).
    pub port: u16,
    pub log: LogConfig,
    pub abs: AbsConfig,
    /// End once no producer has been connected for this long, after at least one was.
    pub exit_after_idle: Option<Duration>,
    /// Largest payload accepted, in bytes.
    pub max_message: u32,
    /// Where each traced message's own timings go at exit: a line a span, `span_id trace_id
    /// wall_ns cpu_ns cpu_wait_ns` (hex ids, ns).
    pub spans_out: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("failed to listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("failed to wait for connections")]
    Listen(#[source] io::Error),
    #[error("failed to announce readiness")]
    Ready(#[source] io::Error),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Abs(#[from] AbsConfigError),
    #[error(transparent)]
    Spans(#[from] otel_ctx::WriteError),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EndReason {
    /// SIGINT or SIGTERM.
    Signal,
    /// `--exit-after-idle` elapsed with no producer connected.
    Idle,
}

/// CPU and context switches of the whole server process (`getrusage(RUSAGE_SELF)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ProcessUsage {
    pub user_ns: u64,
    pub system_ns: u64,
    pub cpu_ns_per_message: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

/// The line a server prints when it ends.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub format: &'static str,
    pub schema_version: u32,
    pub lock: LockKind,
    pub ended_by: EndReason,
    /// Messages appended and acked with an offset.
    pub messages: u64,
    /// Payload bytes appended.
    pub bytes: u64,
    /// Messages acked with an error (append failed).
    pub errors: u64,
    /// Producer connections accepted.
    pub connections: u64,
    /// Connections that ended with an error (bad frame, reset) rather than a clean close.
    pub connection_errors: u64,
    pub uptime_ns: u64,
    pub log: LogStats,
    pub lock_stats: LockStats,
    pub process: ProcessUsage,
}

pub const SUMMARY_FORMAT: &str = "spinlock-broker-summary";

/// How often the accept loop looks at the shutdown flag and the idle timer.
const POLL: Duration = Duration::from_millis(50);

struct Shared {
    broker: BrokerLock<CommitLog>,
    max_message: u32,
    errors: AtomicU64,
    connection_errors: AtomicU64,
    append_error_reported: AtomicBool,
    active: AtomicUsize,
    last_close: Mutex<Option<Instant>>,
    /// Clones of open connections, shut down to end their threads on exit.
    streams: Mutex<HashMap<u64, TcpStream>>,
    /// Traced messages' spans (their own timings kept when `spans_out` asks for them).
    spans: otel_ctx::Spans,
}

impl Shared {
    /// How long no producer has been connected, once one has been.
    fn idle_for(&self) -> Option<Duration> {
        if self.active.load(Ordering::SeqCst) > 0 {
            return None;
        }
        lock_ignoring_poison(&self.last_close).map(|t| t.elapsed())
    }

    fn serve(&self, stream: TcpStream) -> Result<(), FrameError> {
        let mut reader = BufReader::with_capacity(64 * 1024, stream.try_clone()?);
        let mut writer = stream;
        let mut record = Vec::with_capacity(RECORD_HEADER + 4096);
        while let Some(message) = read_record(&mut reader, &mut record, self.max_message)? {
            let serving = message.trace.map(|t| self.spans.begin(t));
            let appended = self.broker.lock().append(&mut record);
            let ack = match appended {
                Ok(offset) => offset,
                Err(e) => {
                    self.errors.fetch_add(1, Ordering::Relaxed);
                    if !self.append_error_reported.swap(true, Ordering::Relaxed) {
                        eprintln!("spinlock-broker: error: {}", chain(&e));
                    }
                    ACK_ERROR
                }
            };
            let acked = write_ack(&mut writer, ack);
            if let Some(serving) = serving {
                self.spans.end(serving);
            }
            acked?;
        }
        Ok(())
    }

    fn connection_ended(&self, id: u64, result: Result<(), FrameError>) {
        if let Err(e) = result {
            self.connection_errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("spinlock-broker: connection {id}: {}", chain(&e));
        }
        lock_ignoring_poison(&self.streams).remove(&id);
        *lock_ignoring_poison(&self.last_close) = Some(Instant::now());
        self.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The bookkeeping behind these mutexes stays consistent even if a thread panicked.
fn lock_ignoring_poison<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An error with its sources, `a: b: c`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// Waits up to `timeout` for a connection to accept. An interrupted wait (a signal, or the
/// CPU profiler's SIGPROF) counts as a timeout.
fn wait_readable(listener: &TcpListener, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

fn process_usage(messages: u64) -> ProcessUsage {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return ProcessUsage::default();
    }
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    let (user_ns, system_ns) = (ns(ru.ru_utime), ns(ru.ru_stime));
    ProcessUsage {
        user_ns,
        system_ns,
        cpu_ns_per_message: if messages == 0 {
            0.0
        } else {
            (user_ns + system_ns) as f64 / messages as f64
        },
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
    }
}

/// Runs the broker until `shutdown` is raised or the idle timer fires. `on_ready` is called
/// once the listener is bound (the binary prints `ready <port>` there).
pub fn run(
    config: ServerConfig,
    shutdown: &Shutdown,
    on_ready: impl FnOnce(SocketAddr) -> io::Result<()>,
) -> Result<Summary, ServerError> {
    config.abs.validate()?;
    let started = Instant::now();
    let log = CommitLog::open(config.log.clone())?;
    let shared = Shared {
        broker: BrokerLock::new(config.lock, config.abs, log),
        max_message: config.max_message,
        errors: AtomicU64::new(0),
        connection_errors: AtomicU64::new(0),
        append_error_reported: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        last_close: Mutex::new(None),
        streams: Mutex::new(HashMap::new()),
        spans: otel_ctx::Spans::new(config.spans_out.is_some()),
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, config.port));
    let listener = TcpListener::bind(addr).map_err(|source| ServerError::Bind { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(ServerError::Listen)?;
    let local = listener.local_addr().map_err(ServerError::Listen)?;
    on_ready(local).map_err(ServerError::Ready)?;

    let mut connections = 0u64;
    let ended_by = thread::scope(|s| -> Result<EndReason, ServerError> {
        let ended_by = loop {
            if shutdown.requested() {
                break EndReason::Signal;
            }
            if let (Some(limit), Some(idle)) = (config.exit_after_idle, shared.idle_for())
                && idle >= limit
            {
                break EndReason::Idle;
            }
            if !wait_readable(&listener, POLL).map_err(ServerError::Listen)? {
                continue;
            }
            loop {
                let stream = match listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        // Out of descriptors and the like: say so, let producers retry.
                        eprintln!("spinlock-broker: accept failed: {e}");
                        thread::sleep(POLL);
                        break;
                    }
                };
                let id = connections;
                connections += 1;
                let setup = stream
                    .set_nonblocking(false)
                    .and_then(|()| stream.set_nodelay(true))
                    .and_then(|()| stream.try_clone());
                let clone = match setup {
                    Ok(clone) => clone,
                    Err(e) => {
                        eprintln!("spinlock-broker: connection {id}: setup failed: {e}");
                        shared.connection_errors.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                };
                lock_ignoring_poison(&shared.streams).insert(id, clone);
                shared.active.fetch_add(1, Ordering::SeqCst);
                let shared = &shared;
                let spawned = thread::Builder::new()
                    .name(format!("producer-{id}"))
                    .spawn_scoped(s, move || shared.connection_ended(id, shared.serve(stream)));
                if let Err(e) = spawned {
                    eprintln!("spinlock-broker: connection {id}: no thread for it: {e}");
                    shared.connection_ended(id, Ok(()));
                    shared.connection_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        // End the connection threads: their reads see end-of-file; the scope joins them.
        for stream in lock_ignoring_poison(&shared.streams).values() {
            let _ = stream.shutdown(SocketShutdown::Both);
        }
        Ok(ended_by)
    })?;

    shared.spans.write_to(config.spans_out.as_deref())?;
    let lock_stats = shared.broker.stats();
    let log = shared.broker.lock().stats();
    Ok(Summary {
        format: SUMMARY_FORMAT,
        schema_version: 1,
        lock: config.lock,
        ended_by,
        messages: log.messages,
        bytes: log.payload_bytes,
        errors: shared.errors.load(Ordering::Relaxed),
        connections,
        connection_errors: shared.connection_errors.load(Ordering::Relaxed),
        uptime_ns: u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        log,
        lock_stats,
        process: process_usage(log.messages),
    })
}
