//! One sink: a thread, a bounded queue, and the retry policy.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use prost::Message as _;
use switchyard_model::Run;

use crate::{Body, Otlp, Pyroscope, Shared, SinkStats, otlp, pyroscope};

/// The first retry's wait; each failure doubles it, up to [`BACKOFF_MAX`].
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// One attempt's limit: a sink that accepts the connection and then hangs is a failure.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

pub enum Target {
    Otlp(Otlp),
    Pyroscope(Pyroscope),
}

impl Target {
    fn name(&self) -> String {
        match self {
            Target::Otlp(o) => format!("otlp {}", o.describe()),
            Target::Pyroscope(p) => format!("pyroscope {}", p.base),
        }
    }
}

pub struct Sink {
    tx: Option<SyncSender<Arc<Run>>>,
    stats: Shared,
    /// Set when the recording has ended and the flush deadline passed: stop trying.
    abandon: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What an attempt's failure means.
enum Failure {
    /// Worth another try: the sink is down, busy or failing for now.
    Retry(String),
    /// The sink refused the request; another try would be refused too.
    Refused(String),
}

/// A connection a sink loses is its own error (EPIPE, retried), never a signal to the process,
/// which ends a recording on SIGPIPE (a reader of its output gone). Blocked in the sender
/// thread, and so in the threads its client starts; one raised here stays pending on this
/// thread, unseen.
fn block_sigpipe() {
    // SAFETY: a signal set built on the stack and handed to pthread_sigmask for this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

impl Sink {
    pub fn start(target: Target, queue: usize) -> Sink {
        let (tx, rx) = mpsc::sync_channel(queue);
        let stats: Shared = Arc::new(Mutex::new(SinkStats {
            name: target.name(),
            ..Default::default()
        }));
        let abandon = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stats, abandon) = (Arc::clone(&stats), Arc::clone(&abandon));
            std::thread::Builder::new()
                .name("switchyard-export".into())
                .spawn(move || {
                    block_sigpipe();
                    work(target, rx, stats, abandon)
                })
                .ok()
        };
        if thread.is_none() {
            let mut s = lock(&stats);
            s.last_error = Some("could not start the sender thread".into());
        }
        Sink {
            tx: thread.as_ref().map(|_| tx),
            stats,
            abandon,
            thread,
        }
    }

    pub fn offer(&self, run: Arc<Run>) {
        let mut s = lock(&self.stats);
        s.offered += 1;
        match self.tx.as_ref().map(|tx| tx.try_send(run)) {
            Some(Ok(())) => {}
            Some(Err(TrySendError::Full(_))) => {
                s.dropped_full += 1;
                s.last_error =
                    Some("the queue was full (the sink is slower than the windows)".into());
            }
            Some(Err(TrySendError::Disconnected(_))) | None => {
                s.unsent += 1;
            }
        }
    }

    pub fn stats(&self) -> SinkStats {
        lock(&self.stats).clone()
    }

    /// Closes the queue and waits until `deadline` for the thread to deliver what it holds;
    /// then tells it to stop and counts what it did not send.
    pub fn finish(mut self, deadline: Instant) -> SinkStats {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            self.abandon.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
        let mut s = lock(&self.stats).clone();
        // Whatever is neither delivered nor counted lost never left.
        s.unsent += s.pending();
        s
    }
}

fn lock(stats: &Shared) -> std::sync::MutexGuard<'_, SinkStats> {
    stats.lock().unwrap_or_else(|p| p.into_inner())
}

/// The sender thread: takes runs in order and delivers each before the next.
fn work(target: Target, rx: Receiver<Arc<Run>>, stats: Shared, abandon: Arc<AtomicBool>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        lock(&stats).last_error = Some("could not start the sender's runtime".into());
        return;
    };
    let http = match http_client(&target) {
        Ok(c) => c,
        Err(e) => {
            // Nothing can be sent: every run offered is counted unsent, with this reason.
            lock(&stats).last_error = Some(e);
            return;
        }
    };
    let mut grpc = None;
    loop {
        let run = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(run) => run,
            Err(RecvTimeoutError::Timeout) => {
                if abandon.load(Ordering::Relaxed) {
                    return;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let bodies = match encode(&target, &run) {
            Ok(b) => b,
            Err(e) => {
                let mut s = lock(&stats);
                s.unencodable += 1;
                s.last_error = Some(e);
                continue;
            }
        };
        let mut backoff = BACKOFF_START;
        let mut refused = false;
        'run: for body in &bodies {
            loop {
                if abandon.load(Ordering::Relaxed) {
                    return;
                }
                // A sink that accepted the connection and hangs must not keep the
                // recording from exiting.
                let Some(attempt) =
                    until_abandoned(&rt, &abandon, deliver(&target, &http, &mut grpc, body))
                else {
                    return;
                };
                match attempt {
                    Ok(()) => break,
                    Err(Failure::Refused(e)) => {
                        let mut s = lock(&stats);
                        s.refused += 1;
                        s.last_error = Some(e);
                        refused = true;
                        break 'run;
                    }
                    Err(Failure::Retry(e)) => {
                        {
                            let mut s = lock(&stats);
                            s.retries += 1;
                            s.last_error = Some(e);
                        }
                        // A broken connection is not reused.
                        grpc = None;
                        let slept = until_abandoned(&rt, &abandon, async {
                            // Made inside the runtime, whose timer it needs.
                            tokio::time::sleep(backoff).await;
                        });
                        if slept.is_none() {
                            return;
                        }
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                }
            }
        }
        if !refused {
            let mut s = lock(&stats);
            s.delivered += 1;
            s.bytes += bodies.iter().map(|b| b.bytes.len() as u64).sum::<u64>();
        }
    }
}

/// Runs `work` (an attempt, a backoff) until it completes, or `None` once the recording has
/// ended and the flush has run out of time, whichever comes first.
fn until_abandoned<T>(
    rt: &tokio::runtime::Runtime,
    abandon: &AtomicBool,
    work: impl Future<Output = T>,
) -> Option<T> {
    rt.block_on(async {
        tokio::select! {
            r = work => Some(r),
            () = async {
                while !abandon.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } => None,
        }
    })
}

/// The HTTP client of a sink: its attempt limit, and for an https endpoint its TLS.
fn http_client(target: &Target) -> Result<reqwest::Client, String> {
    crate::tls::install_provider();
    let mut b = reqwest::Client::builder().timeout(ATTEMPT_TIMEOUT);
    if let Target::Otlp(o) = target {
        b = b.timeout(o.timeout);
        if let Some(t) = &o.tls {
            b = b.tls_backend_preconfigured(crate::tls::client_config(t)?);
        }
    }
    b.build()
        .map_err(|e| format!("the HTTP client: {}", describe(&e)))
}

fn encode(target: &Target, run: &Run) -> Result<Vec<Body>, String> {
    match target {
        Target::Otlp(o) => Ok(vec![Body {
            path: o.path.clone(),
            bytes: otlp::encode_with(run, &o.resource).encode_to_vec(),
            content_type: "application/x-protobuf",
        }]),
        Target::Pyroscope(_) => pyroscope::bodies(run),
    }
}

async fn deliver(
    target: &Target,
    http: &reqwest::Client,
    grpc: &mut Option<otlp::GrpcClient>,
    body: &Body,
) -> Result<(), Failure> {
    let base = match target {
        Target::Otlp(o) if o.protocol == otlp::Protocol::Grpc => {
            return otlp::send_grpc(o, grpc, &body.bytes)
                .await
                .map_err(|(retry, e)| {
                    if retry {
                        Failure::Retry(e)
                    } else {
                        Failure::Refused(e)
                    }
                });
        }
        Target::Otlp(o) => &o.base,
        Target::Pyroscope(p) => &p.base,
    };
    let mut request = http
        .post(format!("{base}{}", body.path))
        .header("content-type", body.content_type);
    let mut bytes = body.bytes.clone();
    if let Target::Otlp(o) = target {
        for (k, v) in &o.headers {
            request = request.header(k.as_str(), v.as_str());
        }
        if o.gzip {
            bytes = gzip(&bytes).map_err(Failure::Refused)?;
            request = request.header("content-encoding", "gzip");
        }
    }
    let response = request.body(bytes).send().await.map_err(|e| {
        let why = describe(&e);
        if crate::tls::is_refusal(&why) {
            Failure::Refused(why)
        } else {
            Failure::Retry(why)
        }
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    let e = format!(
        "{status}: {}",
        text.trim().chars().take(200).collect::<String>()
    );
    // OTLP's rule: 429, 502, 503 and 504 are worth retrying; so is any other 5xx here.
    if status.as_u16() == 429 || status.is_server_error() {
        Err(Failure::Retry(e))
    } else {
        Err(Failure::Refused(e))
    }
}

fn gzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write as _;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes)
        .and_then(|()| e.finish())
        .map_err(|e| e.to_string())
}

/// A transport error in a few words: the innermost cause says what happened.
fn describe(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if e.is_timeout() {
        return "timed out".into();
    }
    cause.to_string()
}
