//! The Rust server: a tokio runtime (one worker per core), a task per connection, the
//! [`Cache`] shared by all of them, and a flusher thread that runs a flush pass every
//! `flush_interval`.
//!
//! A connection task reads frames through a 64 KiB buffer, applies each request under its
//! shard's mutex (held for a few hundred nanoseconds; on a miss also for the store's `pread`,
//! and on a dirty eviction for its `pwrite`: short blocking calls on page-cached data, made
//! in place rather than through `spawn_blocking`) and writes the response into a buffer that
//! is flushed once no further request is waiting, so pipelined requests share one `write`.

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
use switchyard_harness::Shutdown;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, BufWriter},
    net::{TcpListener, TcpStream},
};

use crate::{
    cache::{Cache, CacheStats, ConfigError},
    protocol::{MAX_BODY, Request, Response, STATUS_BAD_LENGTH, STATUS_STORE_ERROR},
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

struct Shared {
    cache: Cache,
    bad_requests: AtomicU64,
    store_errors: AtomicU64,
    store_error_reported: AtomicBool,
    connection_errors: AtomicU64,
    active: AtomicUsize,
    last_close: Mutex<Option<Instant>>,
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

    fn respond(&self, body: &[u8]) -> Response {
        match Request::decode(body) {
            Ok(req) => match self.cache.apply(&req) {
                Ok(state) => Response::ok(state),
                Err(e) => {
                    self.store_error(&e);
                    Response::error(STATUS_STORE_ERROR)
                }
            },
            Err(status) => {
                self.bad_requests.fetch_add(1, Ordering::Relaxed);
                Response::error(status)
            }
        }
    }

    async fn serve(&self, stream: TcpStream) -> io::Result<()> {
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        let mut reader = BufReader::with_capacity(BUFFER, read);
        let mut writer = BufWriter::with_capacity(BUFFER, write);
        let mut body = [0u8; MAX_BODY as usize];
        loop {
            if reader.fill_buf().await?.is_empty() {
                // Closed between frames: the clean end.
                return writer.flush().await;
            }
            let len = reader.read_u32_le().await?;
            if len > MAX_BODY {
                self.bad_requests.fetch_add(1, Ordering::Relaxed);
                writer
                    .write_all(&Response::error(STATUS_BAD_LENGTH).encode())
                    .await?;
                writer.flush().await?;
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("request body of {len} bytes, the limit is {MAX_BODY}"),
                ));
            }
            let body = &mut body[..len as usize];
            reader.read_exact(body).await?;
            let response = self.respond(body);
            writer.write_all(&response.encode()).await?;
            if reader.buffer().is_empty() {
                writer.flush().await?;
            }
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
        bad_requests: AtomicU64::new(0),
        store_errors: AtomicU64::new(0),
        store_error_reported: AtomicBool::new(false),
        connection_errors: AtomicU64::new(0),
        active: AtomicUsize::new(0),
        last_close: Mutex::new(None),
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
                        let result = shared.serve(stream).await;
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
