//! `asset-server`: serves the models of a directory over HTTP/1.1 (keep-alive), each request
//! parsed, relicensed, compressed, encrypted and streamed (see the crate's documentation).
//!
//! ```text
//! GET /models/<name>?licence=<text>
//! 200: the sealed body; x-asset-codec: gzip|zstd; x-asset-size: the model's size
//! ```
//!
//! Builds: `--codec gzip` (rust-gzip) and `--codec zstd` (rust-zstd). The work of a request
//! runs on tokio's blocking pool, so the I/O threads keep streaming other responses.
//!
//! A request with a W3C `traceparent` header is prepared as a span of that trace, published
//! in the blocking thread's OpenTelemetry thread context (`otel_thread_ctx_v1`) while it
//! works on it; `--spans-out FILE` writes each span's own timings at exit.

use std::{
    collections::HashMap,
    convert::Infallible,
    net::SocketAddr,
    path::PathBuf,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use asset_server::{Codec, glb, licence_bytes, models, protect::Sealer};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt as _, Full, StreamBody, combinators::BoxBody};
use hyper::{Request, Response, StatusCode, body::Frame, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use switchyard_harness::{Shutdown, announce_ready, otel_ctx, parse_millis};

// Built with `--features dhat`: dhat's allocator, for a heap profile of the whole run.
switchyard_harness::heap_allocator!();

/// A 3D-model asset server: parse, relicense, compress, encrypt, stream.
#[derive(Debug, Parser)]
#[command(name = "asset-server", version)]
struct Args {
    /// The codec (the build to profile).
    #[arg(long, value_enum)]
    codec: Codec,
    /// The codec's level [default: gzip 6, zstd 3].
    #[arg(long)]
    level: Option<i32>,
    /// The models (a directory written by asset-models).
    #[arg(long, default_value_os_t = asset_server::models::default_dir())]
    models: PathBuf,
    /// Port on 127.0.0.1; 0 lets the kernel choose (printed as `ready <port>`).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Exit once no client has been connected for MS milliseconds (after at least one was).
    #[arg(long, value_name = "MS", value_parser = parse_millis)]
    exit_after_idle: Option<Duration>,
    /// Fault injection, for the driver's integrity check: flip one byte of every Nth body.
    #[arg(long, value_name = "N")]
    corrupt_every: Option<u64>,
    /// Write each traced request's span id, trace id and own timings (wall, on CPU, waiting
    /// for a CPU, ns) to FILE at exit, a line each.
    #[arg(long, value_name = "FILE")]
    spans_out: Option<PathBuf>,
}

/// Streamed in pieces of this size.
const PIECE: usize = 256 * 1024;

struct State {
    codec: Codec,
    level: Option<i32>,
    models: HashMap<String, Bytes>,
    sealer: Sealer,
    served: AtomicU64,
    corrupt_every: Option<u64>,
    connections: AtomicUsize,
    /// Traced requests' spans.
    spans: otel_ctx::Spans,
}

type Body = BoxBody<Bytes, Infallible>;

fn main() -> ExitCode {
    // Built with `--features dhat`: the heap profile, written as `main` returns to
    // $DHAT_HEAP_FILE (default: dhat-heap.json in the working directory).
    switchyard_harness::heap_profile!();
    switchyard_harness::exit_code("asset-server", run(Args::parse()))
}

fn run(args: Args) -> anyhow::Result<()> {
    let shutdown = Shutdown::install().context("failed to install the SIGINT/SIGTERM handler")?;
    let mut loaded = HashMap::new();
    for (m, path) in models::list(&args.models)? {
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        loaded.insert(m.name, Bytes::from(bytes));
    }
    anyhow::ensure!(!loaded.is_empty(), "no models in {}", args.models.display());
    let state = Arc::new(State {
        codec: args.codec,
        level: args.level,
        models: loaded,
        sealer: Sealer::new(),
        served: AtomicU64::new(0),
        corrupt_every: args.corrupt_every.filter(|&n| n > 0),
        connections: AtomicUsize::new(0),
        spans: otel_ctx::Spans::new(args.spans_out.is_some()),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("asset-io")
        .build()?;
    runtime.block_on(serve(
        args.port,
        args.exit_after_idle,
        state.clone(),
        shutdown,
    ))?;
    Ok(state.spans.write_to(args.spans_out.as_deref())?)
}

async fn serve(
    port: u16,
    idle: Option<Duration>,
    state: Arc<State>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    announce_ready(listener.local_addr()?.port())?;
    let mut seen = false;
    let mut idle_since = Instant::now();
    loop {
        let accepted = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
        if shutdown.requested() {
            return Ok(());
        }
        match accepted {
            Ok(Ok((stream, _))) => {
                seen = true;
                stream.set_nodelay(true)?;
                let state = state.clone();
                state.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let s = state.clone();
                    let service = service_fn(move |req| handle(s.clone(), req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                    state.connections.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Ok(Err(e)) => eprintln!("asset-server: accept: {e}"),
            Err(_) => {}
        }
        if state.connections.load(Ordering::SeqCst) > 0 {
            idle_since = Instant::now();
        } else if let Some(idle) = idle
            && seen
            && idle_since.elapsed() >= idle
        {
            return Ok(());
        }
    }
}

fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = status;
    r
}

async fn handle(
    state: Arc<State>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    let licence = req
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("licence=")))
        .unwrap_or("anonymous")
        .to_string();
    let Some(name) = path.strip_prefix("/models/") else {
        return Ok(plain(StatusCode::NOT_FOUND, format!("no route {path}\n")));
    };
    let Some(model) = state.models.get(name).cloned() else {
        return Ok(plain(StatusCode::NOT_FOUND, format!("no model {name}\n")));
    };
    let trace = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(otel_ctx::TraceParent::from_w3c);
    let s = state.clone();
    let work = tokio::task::spawn_blocking(move || {
        // The span is this thread's while it works on the request, and only then: the
        // blocking thread neither awaits nor serves another request meanwhile.
        let serving = trace.map(|t| s.spans.begin(t));
        let prepared = prepare(&s, &model, &licence);
        if let Some(serving) = serving {
            s.spans.end(serving);
        }
        prepared
    })
    .await;
    let (body, size) = match work {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => return Ok(plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"))),
        Err(e) => return Ok(plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"))),
    };
    let len = body.len();
    let pieces = (0..len)
        .step_by(PIECE)
        .map(move |at| Ok::<_, Infallible>(Frame::data(body.slice(at..(at + PIECE).min(len)))));
    let stream = futures_util::stream::iter(pieces);
    let mut r = Response::new(StreamBody::new(stream).boxed());
    let h = r.headers_mut();
    h.insert("content-length", len.into());
    h.insert(
        "content-type",
        "application/octet-stream".parse().expect("valid"),
    );
    h.insert("x-asset-codec", state.codec.name().parse().expect("valid"));
    h.insert("x-asset-size", size.into());
    Ok(r)
}

/// The per-request work: parse, relicense, compress, seal.
fn prepare(state: &State, model: &[u8], licence: &str) -> anyhow::Result<(Bytes, usize)> {
    let parsed = glb::parse(model)?;
    let served = glb::with_licence(model, &parsed, &licence_bytes(licence));
    let packed = state.codec.compress(&served, state.level)?;
    let mut sealed = state.sealer.seal(&packed);
    let n = state.served.fetch_add(1, Ordering::Relaxed) + 1;
    if let Some(every) = state.corrupt_every
        && n.is_multiple_of(every)
    {
        let at = sealed.len() / 2;
        sealed[at] ^= 0x01;
    }
    Ok((Bytes::from(sealed), served.len()))
}
