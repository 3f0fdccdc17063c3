//! The Rust server: a tokio runtime (one worker per core), a task per connection, the
//! [`Cache`] shared by all of them, and a flusher thread that runs a flush pass every
//! `flush_interval`.
//!
//! A connection task reads frames through a 64 KiB buffer, applies each request under its
//! shard's mutex (held for a few hundred nanoseconds; on a miss also for the store's `pread`,
//! and on a dirty eviction for its `pwrite`: short blocking calls on page-cached data, made
//! in place rather than through `spawn_blocking`) and writes the response into a buffer that
//! is flushed once no further request is waiting, so pipelined requests share one `write`.
//!
//! A request that carries its trace (`protocol::TRACED`) is applied as a span of that trace,
//! published in the worker thread's OpenTelemetry thread context (`otel_thread_ctx_v1`) while
//! it is applied: applying never awaits, so the span cannot move to another thread or give
//! its thread to another task. With `spans_out`, each span's own timings are written there
//! at exit.

use std::{
    io,
    net::{Ipv4Addr, SocketAddr},
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use serde::Serialize;
use switchyard_harness::{Shutdown, otel_ctx};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, BufWriter},
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
};

use crate::{
    cache::{Cache, CacheStats, ConfigError},
    protocol::{MAX_BODY, RESPONSE_LEN, Request, Response, STATUS_BAD_LENGTH, STATUS_STORE_ERROR},
    store::{Store, StoreError, StoreStats},
};

/// The validated settings of one server run.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// 0 lets the kernel choose (the ready line says which).
    pub port: u16,
    pub capacity: usize,
    /// `None`: [`crate::cache::auto_shards`].
    pub shards: Option<usize>,
    pub flush_interval: Duration,
    pub data_dir: PathBuf,
    /// End once no client has been connected for this long, after at least one was.
    pub exit_after_idle: Option<Duration>,
    /// How long the answer to a miss waits, as if the state came from a database (zero: at
    /// once). The request is applied at once and no lock is held while it waits.
    pub miss_latency: Duration,
    /// Where each traced request's own timings go at exit, a line a span (see
    /// `otel_ctx::Spans::write`).
    pub spans_out: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--flush-interval must be longer than zero")]
    FlushInterval,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("failed to start the tokio runtime")]
    Runtime(#[source] io::Error),
    #[error("failed to start the flusher thread")]
    Flusher(#[source] io::Error),
    #[error("failed to listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("failed to announce readiness")]
    Ready(#[source] io::Error),
    #[error("final flush failed")]
    FinalFlush(#[source] StoreError),
    #[error(transparent)]
    Spans(#[from] otel_ctx::WriteError),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EndReason {
    /// SIGINT or SIGTERM.
    Signal,
    /// `--exit-after-idle` elapsed with no client connected.
    Idle,
}

/// CPU, context switches and peak memory of the whole server process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProcessUsage {
    pub user_ns: u64,
    pub system_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub max_rss_kib: u64,
}

/// The line the server prints when it ends. The Go server prints the same fields (with
/// `"server": "go"`) and a `gc` object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub format: &'static str,
    pub schema_version: u32,
    pub server: &'static str,
    pub ended_by: EndReason,
    pub capacity: u64,
    pub shards: u64,
    pub flush_interval_ms: u64,
    #[serde(flatten)]
    pub cache: CacheStats,
    /// Flush passes, the final one at exit included.
    pub flushes: u64,
    /// Entries written by flush passes.
    pub flushed_entries: u64,
    /// Frames answered with an error status other than a store error.
    pub bad_requests: u64,
    /// Requests answered with a store error, and failed flush passes.
    pub store_errors: u64,
    /// Entries cached at exit.
    pub entries: u64,
    pub store: StoreStats,
    pub connections: u64,
    /// Connections that ended with an error (oversized frame, cut mid-frame, reset).
    pub connection_errors: u64,
    pub uptime_ns: u64,
    pub process: ProcessUsage,
}

pub const SUMMARY_FORMAT: &str = "read-state-cache-summary";

/// How often the accept loop looks at the shutdown flag and the idle timer.
const POLL: Duration = Duration::from_millis(50);
const BUFFER: usize = 64 * 1024;
/// Answers a connection holds back for their miss latency; a client pipelining more waits.
const PENDING_ANSWERS: usize = 4096;

struct Shared {
    cache: Cache,
    miss_latency: Duration,
    bad_requests: AtomicU64,
    store_errors: AtomicU64,
    store_error_reported: AtomicBool,
    connection_errors: AtomicU64,
    active: AtomicUsize,
    last_close: Mutex<Option<Instant>>,
    /// Traced requests' spans.
    spans: otel_ctx::Spans,
}

impl Shared {
    fn store_error(&self, e: &StoreError) {
        self.store_errors.fetch_add(1, Ordering::Relaxed);
        if !self.store_error_reported.swap(true, Ordering::Relaxed) {
            eprintln!("read-state-cache: error: {}", chain(e));
        }
    }

    /// How long no client has been connected, once one has been.
    fn idle_for(&self) -> Option<Duration> {
        if self.active.load(Ordering::SeqCst) > 0 {
            return None;
        }
        self.last_close
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed())
    }

    /// The answer to one request body, and whether it missed the cache.
    fn respond(&self, body: &[u8]) -> (Response, bool) {
        match Request::decode_traced(body) {
            Ok((req, trace)) => match self.apply(&req, trace) {
                Ok((state, hit)) => (Response::ok(state), !hit),
                Err(e) => {
                    self.store_error(&e);
                    (Response::error(STATUS_STORE_ERROR), false)
                }
            },
            Err(status) => {
                self.bad_requests.fetch_add(1, Ordering::Relaxed);
                (Response::error(status), false)
            }
        }
    }

    /// Applies `req`, as a span of `trace` when it has one.
    fn apply(
        &self,
        req: &Request,
        trace: Option<otel_ctx::TraceParent>,
    ) -> Result<(crate::protocol::ReadState, bool), StoreError> {
        let serving = trace.map(|t| self.spans.begin(t));
        let applied = self.cache.apply_hit(req);
        if let Some(serving) = serving {
            self.spans.end(serving);
        }
        applied
    }

    async fn serve(self: Arc<Self>, stream: TcpStream) -> io::Result<()> {
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        let mut reader = BufReader::with_capacity(BUFFER, read);
        let mut writer = BufWriter::with_capacity(BUFFER, write);
        if self.miss_latency.is_zero() {
            let result = self
                .read_frames(&mut reader, &mut Answers::Now(&mut writer))
                .await;
            let flushed = writer.flush().await;
            return result.and(flushed);
        }
        // Answers wait in order for their time in a writer task (sleeping, not spinning),
        // while this one goes on reading and applying requests.
        let (queue, mut due) = tokio::sync::mpsc::channel::<Due>(PENDING_ANSWERS);
        let written = tokio::spawn(async move {
            while let Some((at, response)) = due.recv().await {
                if at > Instant::now() {
                    writer.flush().await?;
                    tokio::time::sleep_until(at.into()).await;
                }
                writer.write_all(&response).await?;
                if due.is_empty() {
                    writer.flush().await?;
                }
            }
            writer.flush().await
        });
        let mut answers = Answers::Later {
            queue,
            latency: self.miss_latency,
        };
        let result = self.read_frames(&mut reader, &mut answers).await;
        drop(answers);
        let written = written
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e.to_string())));
        result.and(written)
    }

    /// Reads requests until the connection ends, answering each in order. A clean end
    /// between frames is `Ok`; an oversized frame is answered, then ends the connection with
    /// an error.
    async fn read_frames(
        &self,
        reader: &mut BufReader<OwnedReadHalf>,
        answers: &mut Answers<'_>,
    ) -> io::Result<()> {
        let mut body = [0u8; MAX_BODY as usize];
        loop {
            if reader.fill_buf().await?.is_empty() {
                // Closed between frames: the clean end.
                return Ok(());
            }
            let len = reader.read_u32_le().await?;
            if len > MAX_BODY {
                self.bad_requests.fetch_add(1, Ordering::Relaxed);
                let response = Response::error(STATUS_BAD_LENGTH).encode();
                answers.send(response, false, false).await?;
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("request body of {len} bytes, the limit is {MAX_BODY}"),
                ));
            }
            let body = &mut body[..len as usize];
            reader.read_exact(body).await?;
            let (response, miss) = self.respond(body);
            let more = !reader.buffer().is_empty();
            answers.send(response.encode(), miss, more).await?;
        }
    }

    fn connection_ended(&self, id: u64, result: io::Result<()>) {
        if let Err(e) = result {
            self.connection_errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("read-state-cache: connection {id}: {e}");
        }
        *self.last_close.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An encoded answer and when it may be written.
type Due = (Instant, [u8; RESPONSE_LEN]);

/// Where a connection's answers go.
enum Answers<'a> {
    /// Written at once: flushed when no further request is waiting, so pipelined requests
    /// share one `write`.
    Now(&'a mut BufWriter<OwnedWriteHalf>),
    /// To the writer task, a miss's answer due `latency` from now.
    Later {
        queue: tokio::sync::mpsc::Sender<Due>,
        latency: Duration,
    },
}

impl Answers<'_> {
    /// Answers one request; `more` says further requests are already waiting.
    async fn send(
        &mut self,
        response: [u8; RESPONSE_LEN],
        miss: bool,
        more: bool,
    ) -> io::Result<()> {
        match self {
            Answers::Now(writer) => {
                writer.write_all(&response).await?;
                if !more {
                    writer.flush().await?;
                }
                Ok(())
            }
            Answers::Later { queue, latency } => {
                let at = Instant::now() + if miss { *latency } else { Duration::ZERO };
                queue
                    .send((at, response))
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the writer ended"))
            }
        }
    }
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

fn process_usage() -> ProcessUsage {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return ProcessUsage::default();
    }
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    ProcessUsage {
        user_ns: ns(ru.ru_utime),
        system_ns: ns(ru.ru_stime),
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
        max_rss_kib: ru.ru_maxrss as u64,
    }
}

/// Runs flush passes every `interval` until `stop` says so (or is dropped).
fn spawn_flusher(
    shared: Arc<Shared>,
    interval: Duration,
    stop: mpsc::Receiver<()>,
) -> io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name("flusher".to_owned())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(interval) {
                if let Err(e) = shared.cache.flush() {
                    shared.store_error(&e);
                }
            }
        })
}

/// Runs the server until `shutdown` is raised or the idle timer fires, then makes a final
/// flush pass. `on_ready` is called once the listener is bound (the binary prints
/// `ready <port>` there).
pub fn run(
    config: ServerConfig,
    shutdown: &Shutdown,
    on_ready: impl FnOnce(SocketAddr) -> io::Result<()>,
) -> Result<Summary, ServerError> {
    let started = Instant::now();
    if config.flush_interval.is_zero() {
        return Err(ServerError::FlushInterval);
    }
    let (store, opened) = Store::open(&config.data_dir)?;
    if opened.dropped_bytes > 0 {
        eprintln!(
            "read-state-cache: warning: cut a torn tail of {} bytes off `{}` ({} records kept)",
            opened.dropped_bytes,
            store.path().display(),
            opened.records
        );
    }
    let cache = Cache::new(config.capacity, config.shards, store)?;
    let shared = Arc::new(Shared {
        cache,
        miss_latency: config.miss_latency,
        bad_requests: AtomicU64::new(0),
        store_errors: AtomicU64::new(0),
        store_error_reported: AtomicBool::new(false),
        connection_errors: AtomicU64::new(0),
        active: AtomicUsize::new(0),
        last_close: Mutex::new(None),
        spans: otel_ctx::Spans::new(config.spans_out.is_some()),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("worker")
        .build()
        .map_err(ServerError::Runtime)?;
    let (stop_flusher, stop) = mpsc::channel();
    let flusher = spawn_flusher(Arc::clone(&shared), config.flush_interval, stop)
        .map_err(ServerError::Flusher)?;

    let served = runtime.block_on(accept_loop(&config, &shared, shutdown, on_ready));
    // Cancels the connection tasks at their next await: every request already applied has
    // been counted, and its state is in the cache for the final flush.
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(stop_flusher);
    let _ = flusher.join();
    let (ended_by, connections) = served?;

    shared.cache.flush().map_err(ServerError::FinalFlush)?;
    shared.spans.write_to(config.spans_out.as_deref())?;
    let flush = shared.cache.flush_stats();
    Ok(Summary {
        format: SUMMARY_FORMAT,
        schema_version: 1,
        server: "rust",
        ended_by,
        capacity: config.capacity as u64,
        shards: shared.cache.shards() as u64,
        flush_interval_ms: u64::try_from(config.flush_interval.as_millis()).unwrap_or(u64::MAX),
        cache: shared.cache.stats(),
        flushes: flush.flushes,
        flushed_entries: flush.flushed_entries,
        bad_requests: shared.bad_requests.load(Ordering::Relaxed),
        store_errors: shared.store_errors.load(Ordering::Relaxed),
        entries: shared.cache.len() as u64,
        store: shared.cache.store().stats(),
        connections,
        connection_errors: shared.connection_errors.load(Ordering::Relaxed),
        uptime_ns: u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
        process: process_usage(),
    })
}

async fn accept_loop(
    config: &ServerConfig,
    shared: &Arc<Shared>,
    shutdown: &Shutdown,
    on_ready: impl FnOnce(SocketAddr) -> io::Result<()>,
) -> Result<(EndReason, u64), ServerError> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, config.port));
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })?;
    on_ready(local).map_err(ServerError::Ready)?;

    let mut connections = 0u64;
    let ended_by = loop {
        if shutdown.requested() {
            break EndReason::Signal;
        }
        if let (Some(limit), Some(idle)) = (config.exit_after_idle, shared.idle_for())
            && idle >= limit
        {
            break EndReason::Idle;
        }
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let id = connections;
                    connections += 1;
                    shared.active.fetch_add(1, Ordering::SeqCst);
                    let shared = Arc::clone(shared);
                    tokio::spawn(async move {
                        let result = Arc::clone(&shared).serve(stream).await;
                        shared.connection_ended(id, result);
                    });
                }
                Err(e) => {
                    // Out of descriptors and the like: say so, let clients retry.
                    eprintln!("read-state-cache: accept failed: {e}");
                    tokio::time::sleep(POLL).await;
                }
            },
            () = tokio::time::sleep(POLL) => {}
        }
    };
    Ok((ended_by, connections))
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read as _, Write as _},
        net::TcpStream,
    };

    use super::*;
    use crate::protocol::{Key, STATUS_OK};

    fn mention(user: u64) -> Vec<u8> {
        let mut wire = Vec::new();
        Request::Mention {
            key: Key::new(user, 1),
        }
        .encode(&mut wire);
        wire
    }

    #[track_caller]
    fn mentions_in(conn: &mut TcpStream) -> u32 {
        let mut b = [0u8; RESPONSE_LEN];
        conn.read_exact(&mut b).expect("a response");
        let r = Response::decode(&b).expect("a well-formed response");
        assert_eq!(r.status, STATUS_OK);
        r.state.mentions
    }

    /// Serves with `latency` on a one-shard cache, runs `client` against it, and returns
    /// the server's summary.
    fn serve(latency: Duration, client: impl FnOnce(SocketAddr)) -> Summary {
        let dir = tempfile::tempdir().expect("a data directory");
        let config = ServerConfig {
            port: 0,
            capacity: 16,
            shards: Some(1),
            flush_interval: Duration::from_secs(30),
            data_dir: dir.path().to_owned(),
            exit_after_idle: Some(Duration::from_millis(1)),
            miss_latency: latency,
            spans_out: None,
        };
        let shutdown = Shutdown::new();
        let (ready, addr) = std::sync::mpsc::channel();
        thread::scope(|s| {
            let server = s.spawn(|| {
                run(config, &shutdown, |a| {
                    ready.send(a).expect("the test waits");
                    Ok(())
                })
            });
            let addr = addr.recv().expect("the server's address");
            client(addr);
            server.join().expect("the server").expect("a clean end")
        })
    }

    /// A miss's answer waits the miss latency, in order, with the request already applied
    /// and the shard unlocked: another connection's request on the same key is answered
    /// while the miss still waits, and sees its effect.
    #[test]
    fn a_miss_waits_without_holding_the_cache() {
        let latency = Duration::from_millis(400);
        let summary = serve(latency, |addr| {
            let mut slow = TcpStream::connect(addr).expect("connect");
            let mut fast = TcpStream::connect(addr).expect("connect");
            let started = Instant::now();
            slow.write_all(&[mention(7), mention(7)].concat())
                .expect("send");
            // Both of the first connection's requests are applied well within the latency.
            thread::sleep(latency / 4);
            fast.write_all(&mention(7)).expect("send");
            assert_eq!(
                mentions_in(&mut fast),
                3,
                "the hit saw both earlier mentions"
            );
            assert!(
                started.elapsed() < latency,
                "the hit was answered after {:?}, not before the miss's {latency:?}",
                started.elapsed()
            );
            assert_eq!((mentions_in(&mut slow), mentions_in(&mut slow)), (1, 2));
            assert!(
                started.elapsed() >= latency,
                "the miss was answered after {:?}, before its latency",
                started.elapsed()
            );
        });
        assert_eq!((summary.cache.hits, summary.cache.misses), (2, 1));
    }

    /// With no miss latency a miss is answered at once, in order.
    #[test]
    fn no_miss_latency_answers_at_once() {
        let summary = serve(Duration::ZERO, |addr| {
            let mut conn = TcpStream::connect(addr).expect("connect");
            conn.write_all(&[mention(7), mention(8), mention(7)].concat())
                .expect("send");
            let answers = [(); 3].map(|()| mentions_in(&mut conn));
            assert_eq!(answers, [1, 1, 2]);
        });
        assert_eq!((summary.cache.hits, summary.cache.misses), (1, 2));
    }
}
