//! `asset-server-driver`: load for the asset server's builds, open or closed loop, and the
//! check that every response is the model it asked for.
//!
//! ```text
//! asset-server-driver --addr 127.0.0.1:PORT --models DIR (--rate R [--connections 4] |
//!                     --concurrency N) [--duration 10s | --ops N] [--requests N]
//!                     [--licences 4] --out result.json --build B
//! ```
//!
//! Request k asks for model k mod M (the models in turn) with licence k mod L.
//!
//! **Open loop** (`--rate R`): request k is due at start + k/R, on connection k mod C
//! (HTTP/1.1 keep-alive). A sender thread per connection writes each request when it is due,
//! whether or not earlier ones were answered; a receiver reads the answers in order. A latency
//! runs from when the request was due to its last byte, so a busy server delays every request
//! queued behind, each by what it waited (no coordinated omission).
//!
//! **Closed loop** (`--concurrency N`, N above 0): N connections, each with one download in
//! flight, sending the next request as soon as the last response's final byte is in: N
//! clients downloading at once, however fast the server answers. A latency runs from the
//! request's first byte sent to the response's last byte in.
//!
//! Every response is decrypted, decompressed and hashed on a verifier thread, and compared
//! with the SHA-256 of the model with that licence (computed here before the load). A
//! response that is cut, changed, or not 200 is an error: counted in the result file, and the
//! driver exits 1 with the first one described. The result's parameters carry the bytes on
//! the wire and the model bytes served per response, and the mean latency.

use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use asset_server::{Codec, WORKLOAD, glb, licence_bytes, models, protect};
use clap::Parser;
use sha2::{Digest as _, Sha256};
use switchyard_harness::{
    DEFAULT_WINDOW, DriverResult, Measured as _, Recorder, connect_tcp, driver::BoundFlags,
    otel_ctx::TraceParent,
};

#[derive(Debug, Parser)]
#[command(name = "asset-server-driver", version)]
struct Args {
    /// The server (loopback only).
    #[arg(long)]
    addr: SocketAddr,
    /// The models the server serves (the same directory).
    #[arg(long, default_value_os_t = asset_server::models::default_dir())]
    models: PathBuf,
    /// Requests per second, across the connections (open loop; not used with --concurrency).
    #[arg(long)]
    rate: Option<f64>,
    /// Keep-alive connections of the open loop.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Downloads always in flight, each on its own connection (closed loop); 0: the open loop
    /// at --rate.
    #[arg(long, default_value_t = 0)]
    concurrency: usize,
    #[command(flatten)]
    bound: BoundFlags<10>,
    /// Requests in all, whatever --duration says; 0: as --duration or --ops bound the run.
    #[arg(long, default_value_t = 0)]
    requests: u64,
    /// Distinct licences (clients) the requests carry.
    #[arg(long, default_value_t = 4)]
    licences: usize,
    /// The driver result file.
    #[arg(long)]
    out: PathBuf,
    /// The build serving (recorded in the result).
    #[arg(long, default_value = "unknown")]
    build: String,
    /// Send each request as a trace of its own, in a W3C `traceparent` header.
    #[arg(long)]
    traced: bool,
}

/// How the requests are issued.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Load {
    /// Request k due at start + k/rate, on connection k mod `connections`, pipelined.
    Open { rate: f64, connections: usize },
    /// `concurrency` connections, each sending its next request when its last is answered.
    Closed { concurrency: usize },
}

impl Load {
    fn new(rate: Option<f64>, connections: usize, concurrency: usize) -> anyhow::Result<Load> {
        if concurrency > 0 {
            return Ok(Load::Closed { concurrency });
        }
        match rate {
            None => bail!(
                "give --rate R (open loop) or --concurrency N (closed loop, N downloads in flight)"
            ),
            Some(r) if r.is_nan() || r <= 0.0 => bail!("--rate must be above 0"),
            Some(rate) => Ok(Load::Open {
                rate,
                connections: connections.max(1),
            }),
        }
    }

    fn connections(&self) -> usize {
        match *self {
            Load::Open { connections, .. } => connections,
            Load::Closed { concurrency } => concurrency,
        }
    }
}

/// When the run stops issuing requests: after `total` of them, or (closed loop bounded by
/// time) at `deadline` since the start.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bound {
    total: Option<u64>,
    deadline: Option<Duration>,
}

impl Bound {
    /// `--requests` first, then `--ops`, then `--duration` (10 s if none): for the open loop a
    /// count (duration × rate, rounded up), for the closed loop a deadline.
    fn new(load: Load, requests: u64, ops: Option<u64>, duration: Option<Duration>) -> Bound {
        let total = (requests > 0).then_some(requests).or(ops);
        if total.is_some() {
            return Bound {
                total,
                deadline: None,
            };
        }
        let duration = duration.unwrap_or(Duration::from_secs(10));
        match load {
            Load::Open { rate, .. } => Bound {
                total: Some((duration.as_secs_f64() * rate).ceil() as u64),
                deadline: None,
            },
            Load::Closed { .. } => Bound {
                total: None,
                deadline: Some(duration),
            },
        }
    }
}

/// The closed loop's requests, handed out in order to whichever connection is free: each k
/// once, none past the bound.
struct Tickets {
    next: AtomicU64,
    bound: Bound,
}

impl Tickets {
    fn new(bound: Bound) -> Tickets {
        Tickets {
            next: AtomicU64::new(0),
            bound,
        }
    }

    /// The next request's number, or `None` when the run is over (`elapsed` since its start).
    fn take(&self, elapsed: Duration) -> Option<u64> {
        if self.bound.deadline.is_some_and(|d| elapsed >= d) {
            return None;
        }
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        match self.bound.total {
            Some(total) if k >= total => None,
            _ => Some(k),
        }
    }
}

/// What request k asks for: (model, licence), each in turn.
fn request(k: u64, models: usize, licences: usize) -> (usize, usize) {
    (
        (k % models.max(1) as u64) as usize,
        (k % licences.max(1) as u64) as usize,
    )
}

/// A request on its way: when its latency starts, and what it asked for.
struct Sent {
    due: Instant,
    k: u64,
    model: usize,
    licence: usize,
}

/// A response to check.
struct Received {
    k: u64,
    model: usize,
    licence: usize,
    status: u16,
    codec: Option<Codec>,
    size: usize,
    body: Vec<u8>,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => switchyard_harness::exit_code("asset-server-driver", Err(e)),
    }
}

/// Where every connection's responses go: the latency, the byte counts, and the verifiers.
#[derive(Clone)]
struct Sink {
    recorder: Arc<Mutex<Recorder>>,
    wire: Arc<AtomicU64>,
    served: Arc<AtomicU64>,
    check: mpsc::Sender<Received>,
}

impl Sink {
    /// Reads the response to `sent` from `reader`, records it and hands it to a verifier.
    fn receive(&self, reader: &mut BufReader<TcpStream>, sent: Sent) -> anyhow::Result<()> {
        let (status, headers, body) = read_response(reader)
            .with_context(|| format!("reading the response to request {}", sent.k))?;
        let done = Instant::now();
        self.recorder
            .lock()
            .expect("recorder")
            .record(done.saturating_duration_since(sent.due), done);
        self.wire.fetch_add(body.len() as u64, Ordering::Relaxed);
        let header = |name: &str| headers.get(name).map(String::as_str);
        let size = header("x-asset-size")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        self.served.fetch_add(size as u64, Ordering::Relaxed);
        let _ = self.check.send(Received {
            k: sent.k,
            model: sent.model,
            licence: sent.licence,
            status,
            codec: header("x-asset-codec").and_then(Codec::from_name),
            size,
            body,
        });
        Ok(())
    }
}

/// The request line of model `model` with licence `licence`.
/// Request `k`'s head; with `trace`, it carries its trace context.
fn request_line(name: &str, licence: &str, trace: Option<TraceParent>) -> String {
    let traceparent = trace.map_or(String::new(), |t| {
        format!("traceparent: {}\r\n", t.to_w3c())
    });
    format!("GET /models/{name}?licence={licence} HTTP/1.1\r\nHost: asset\r\n{traceparent}\r\n")
}

/// The models the server serves, the licences the requests carry, and the SHA-256 of every
/// (model, licence): what both builds must serve.
struct Expected {
    names: Arc<Vec<String>>,
    licences: Vec<String>,
    hashes: Arc<Vec<Vec<[u8; 32]>>>,
}

impl Expected {
    /// Reads every model in `dir` and hashes it as relicensed to each of `licences` clients.
    fn load(dir: &Path, licences: usize) -> anyhow::Result<Expected> {
        let list = models::list(dir)?;
        let licences: Vec<String> = (0..licences.max(1))
            .map(|i| format!("client-{i}"))
            .collect();
        let mut hashes: Vec<Vec<[u8; 32]>> = Vec::new();
        let mut names = Vec::new();
        for (m, path) in &list {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let g = glb::parse(&bytes).with_context(|| format!("parsing {}", path.display()))?;
            hashes.push(
                licences
                    .iter()
                    .map(|l| {
                        Sha256::digest(glb::with_licence(&bytes, &g, &licence_bytes(l))).into()
                    })
                    .collect(),
            );
            names.push(m.name.clone());
        }
        Ok(Expected {
            names: Arc::new(names),
            licences,
            hashes: Arc::new(hashes),
        })
    }
}

/// What the verifiers found: how many responses failed the check, and the first described.
#[derive(Clone, Default)]
struct Verdicts {
    errors: Arc<AtomicU64>,
    first: Arc<Mutex<Option<String>>>,
}

/// Starts the verifiers: two threads that decrypt, decompress and hash every response `checks`
/// brings, until every sender is gone.
fn spawn_verifiers(
    checks: mpsc::Receiver<Received>,
    expected: &Expected,
    verdicts: &Verdicts,
) -> Vec<thread::JoinHandle<()>> {
    let checks = Arc::new(Mutex::new(checks));
    (0..2)
        .map(|_| {
            let rx = checks.clone();
            let (hashes, names, verdicts) = (
                expected.hashes.clone(),
                expected.names.clone(),
                verdicts.clone(),
            );
            thread::spawn(move || {
                loop {
                    let got = match rx.lock().expect("verifier queue").recv() {
                        Ok(r) => r,
                        Err(_) => return,
                    };
                    if let Err(why) = verify(&got, &hashes) {
                        verdicts.errors.fetch_add(1, Ordering::Relaxed);
                        let mut f = verdicts.first.lock().expect("first error");
                        if f.is_none() {
                            *f = Some(format!(
                                "response {} ({}, client-{}): {why}",
                                got.k, names[got.model], got.licence
                            ));
                        }
                    }
                }
            })
        })
        .collect()
}

/// What every connection's threads share: when the run started and what each request asks
/// for.
#[derive(Clone)]
struct Requests {
    start: Instant,
    models: usize,
    licences: Vec<String>,
    names: Arc<Vec<String>>,
    /// `--traced`: request k is a trace of its own.
    traced: bool,
}

impl Requests {
    /// What request `k` asks for: (model, licence).
    fn pick(&self, k: u64) -> (usize, usize) {
        request(k, self.models, self.licences.len())
    }

    /// Request `k`'s head, for `model` with `licence`.
    fn head(&self, k: u64, model: usize, licence: usize) -> String {
        let trace = self
            .traced
            .then(|| TraceParent::nth(u64::from(std::process::id()), k + 1));
        request_line(&self.names[model], &self.licences[licence], trace)
    }
}

/// One connection's two ends, and what its threads share with the other connections'.
struct Connection {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    requests: Requests,
    sink: Sink,
}

/// The open loop's requests on one connection: k = `first`, `first + step`, … below `total`,
/// each due at start + k/`rate`.
#[derive(Clone, Copy)]
struct Schedule {
    first: u64,
    step: u64,
    rate: f64,
    total: u64,
}

/// A load thread: `Ok` when its part of the run is done.
type Worker = thread::JoinHandle<anyhow::Result<()>>;

/// Opens the connections and starts each one's load threads, as `load` says.
fn start_load(
    addr: SocketAddr,
    load: Load,
    bound: Bound,
    requests: &Requests,
    sink: &Sink,
) -> anyhow::Result<Vec<Worker>> {
    let conns = load.connections();
    let tickets = Arc::new(Tickets::new(bound));
    let mut workers: Vec<Worker> = Vec::new();
    for c in 0..conns {
        let stream = connect_tcp(addr, Duration::from_secs(5))
            .with_context(|| format!("connecting to {addr}"))?;
        let connection = Connection {
            writer: stream.try_clone()?,
            reader: BufReader::with_capacity(1 << 20, stream),
            requests: requests.clone(),
            sink: sink.clone(),
        };
        match load {
            Load::Open { rate, .. } => {
                let schedule = Schedule {
                    first: c as u64,
                    step: conns as u64,
                    rate,
                    total: bound.total.unwrap_or(0),
                };
                workers.extend(open_loop(connection, schedule));
            }
            Load::Closed { .. } => workers.push(closed_loop(connection, tickets.clone())),
        }
    }
    Ok(workers)
}

/// The open loop on one connection: a sender that writes each request when it is due, whether
/// or not earlier ones were answered, and a receiver that reads the answers in order.
fn open_loop(connection: Connection, schedule: Schedule) -> [Worker; 2] {
    let Connection {
        mut writer,
        mut reader,
        requests,
        sink,
    } = connection;
    let (tx, rx) = mpsc::channel::<Sent>();
    let sender = thread::spawn(move || -> anyhow::Result<()> {
        let mut k = schedule.first;
        while k < schedule.total {
            let due = requests.start + Duration::from_secs_f64(k as f64 / schedule.rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            let (model, licence) = requests.pick(k);
            writer.write_all(requests.head(k, model, licence).as_bytes())?;
            let sent = Sent {
                due,
                k,
                model,
                licence,
            };
            if tx.send(sent).is_err() {
                break;
            }
            k += schedule.step;
        }
        Ok(())
    });
    let receiver = thread::spawn(move || -> anyhow::Result<()> {
        for sent in rx {
            sink.receive(&mut reader, sent)?;
        }
        Ok(())
    });
    [sender, receiver]
}

/// The closed loop on one connection: the next ticket's request as soon as the last response
/// is in, until the tickets run out.
fn closed_loop(connection: Connection, tickets: Arc<Tickets>) -> Worker {
    let Connection {
        mut writer,
        mut reader,
        requests,
        sink,
    } = connection;
    thread::spawn(move || -> anyhow::Result<()> {
        while let Some(k) = tickets.take(requests.start.elapsed()) {
            let (model, licence) = requests.pick(k);
            let due = Instant::now();
            writer.write_all(requests.head(k, model, licence).as_bytes())?;
            let sent = Sent {
                due,
                k,
                model,
                licence,
            };
            sink.receive(&mut reader, sent)?;
        }
        Ok(())
    })
}

/// The result's parameters: the load, the models and licences, and per response the bytes on
/// the wire and the model bytes served, and the mean latency.
fn parameters(
    load: Load,
    expected: &Expected,
    wire_per_response: u64,
    model_per_response: u64,
    mean_latency_ns: u64,
) -> BTreeMap<String, serde_json::Value> {
    let mut params: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    match load {
        // A rate makes `switchyard compare` read throughput as offered, not achieved.
        Load::Open { rate, .. } => params.insert("rate".into(), rate.into()),
        Load::Closed { concurrency } => params.insert("concurrency".into(), concurrency.into()),
    };
    params.insert("connections".into(), load.connections().into());
    params.insert("models".into(), expected.names.len().into());
    params.insert("licences".into(), expected.licences.len().into());
    params.insert("wire_bytes_per_response".into(), wire_per_response.into());
    params.insert("model_bytes_per_response".into(), model_per_response.into());
    params.insert("mean_latency_ns".into(), mean_latency_ns.into());
    params
}

/// Runs the load, writes the result and returns how many responses failed the check.
fn run(args: Args) -> anyhow::Result<u64> {
    if !args.addr.ip().is_loopback() {
        bail!("{} is not a loopback address", args.addr);
    }
    let load = Load::new(args.rate, args.connections, args.concurrency)?;
    let expected = Expected::load(&args.models, args.licences)?;

    let bound = Bound::new(load, args.requests, args.bound.ops, args.bound.duration);
    let start = Instant::now();
    let (check_tx, check_rx) = mpsc::channel::<Received>();
    let sink = Sink {
        recorder: Arc::new(Mutex::new(Recorder::new(start, DEFAULT_WINDOW))),
        wire: Arc::new(AtomicU64::new(0)),
        served: Arc::new(AtomicU64::new(0)),
        check: check_tx,
    };
    let verdicts = Verdicts::default();
    let verifiers = spawn_verifiers(check_rx, &expected, &verdicts);

    let requests = Requests {
        start,
        models: expected.names.len(),
        licences: expected.licences.clone(),
        names: expected.names.clone(),
        traced: args.traced,
    };
    let workers = start_load(args.addr, load, bound, &requests, &sink)?;
    let Sink {
        recorder,
        wire,
        served,
        check,
    } = sink;
    drop(check);
    for w in workers {
        w.join().expect("load thread")?;
    }
    let elapsed = start.elapsed();
    for v in verifiers {
        v.join().expect("verifier thread");
    }

    let recorder = recorder.lock().expect("recorder");
    let latency = recorder.latency();
    let done = latency.count();
    let errors = verdicts.errors.load(Ordering::Relaxed);
    let params = parameters(
        load,
        &expected,
        wire.load(Ordering::Relaxed) / done.max(1),
        served.load(Ordering::Relaxed) / done.max(1),
        latency.mean() as u64,
    );
    let result = DriverResult::new(WORKLOAD, &args.build, params, &recorder, errors, elapsed)?;
    result
        .write(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!(
        "asset-server-driver: {done} responses in {:.2} s, {errors} failed the integrity check, mean {:.1} ms, max {:.1} ms",
        elapsed.as_secs_f64(),
        latency.mean() / 1e6,
        latency.max() as f64 / 1e6
    );
    if errors > 0 {
        let first = verdicts
            .first
            .lock()
            .expect("first error")
            .clone()
            .unwrap_or_default();
        eprintln!(
            "asset-server-driver: error: {errors} of {done} responses failed the integrity check; the first: {first}"
        );
    }
    Ok(errors)
}

/// Why a response is not the model it should be.
fn verify(r: &Received, expected: &[Vec<[u8; 32]>]) -> Result<(), String> {
    if r.status != 200 {
        return Err(format!(
            "status {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body).trim()
        ));
    }
    let codec = r.codec.ok_or("no x-asset-codec header")?;
    let packed = protect::open(&r.body).map_err(|e| e.to_string())?;
    let model = codec
        .decompress(&packed, r.size)
        .map_err(|e| format!("{} does not decompress: {e}", codec.name()))?;
    if model.len() != r.size {
        return Err(format!("{} bytes, the header says {}", model.len(), r.size));
    }
    let got: [u8; 32] = Sha256::digest(&model).into();
    if got != expected[r.model][r.licence] {
        return Err("the model's SHA-256 differs from the expected one".into());
    }
    Ok(())
}

/// One HTTP/1.1 response with a Content-Length body: status, headers (lower-cased), body.
fn read_response(
    reader: &mut BufReader<TcpStream>,
) -> anyhow::Result<(u16, BTreeMap<String, String>, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        bail!("the server closed the connection");
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("a bad status line: {line:?}"))?;
    let mut headers = BTreeMap::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            bail!("the server closed the connection in the headers");
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .context("a response without Content-Length")?;
    let mut body = vec![0; len];
    reader.read_exact(&mut body).context("a cut body")?;
    Ok((status, headers, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: Load = Load::Open {
        rate: 2.0,
        connections: 4,
    };
    const CLOSED: Load = Load::Closed { concurrency: 3 };

    #[test]
    fn concurrency_above_zero_is_the_closed_loop_whatever_the_rate() {
        assert_eq!(Load::new(Some(2.0), 4, 0).unwrap(), OPEN);
        assert_eq!(Load::new(Some(2.0), 4, 3).unwrap(), CLOSED);
        assert_eq!(Load::new(None, 4, 3).unwrap(), CLOSED);
        assert_eq!(CLOSED.connections(), 3);
        assert_eq!(
            Load::new(Some(2.0), 0, 0).unwrap().connections(),
            1,
            "at least one connection"
        );
    }

    #[test]
    fn an_open_loop_needs_a_rate_above_zero() {
        let err = Load::new(None, 4, 0).unwrap_err().to_string();
        assert_eq!(
            err,
            "give --rate R (open loop) or --concurrency N (closed loop, N downloads in flight)"
        );
        for bad in [0.0, -1.0, f64::NAN] {
            let err = Load::new(Some(bad), 4, 0).unwrap_err().to_string();
            assert_eq!(err, "--rate must be above 0");
        }
    }

    #[test]
    fn requests_bound_the_run_before_ops_and_duration() {
        let secs = |s| Some(Duration::from_secs(s));
        let count = |n| Bound {
            total: Some(n),
            deadline: None,
        };
        assert_eq!(Bound::new(CLOSED, 150, Some(7), secs(5)), count(150));
        assert_eq!(Bound::new(OPEN, 0, Some(7), None), count(7));
        // The open loop counts its requests from the duration: 2.5 s at 2/s is 5.
        assert_eq!(
            Bound::new(OPEN, 0, None, Some(Duration::from_millis(2500))),
            count(5)
        );
        assert_eq!(Bound::new(OPEN, 0, None, None), count(20));
        assert_eq!(
            Bound::new(CLOSED, 0, None, secs(5)),
            Bound {
                total: None,
                deadline: secs(5),
            }
        );
    }

    #[test]
    fn tickets_are_each_request_once_up_to_the_count() {
        let t = Tickets::new(Bound::new(CLOSED, 4, None, None));
        let late = Duration::from_secs(3600);
        let got: Vec<_> = (0..6).map(|_| t.take(late)).collect();
        assert_eq!(got, [Some(0), Some(1), Some(2), Some(3), None, None]);
    }

    #[test]
    fn tickets_stop_at_the_deadline() {
        let t = Tickets::new(Bound::new(CLOSED, 0, None, Some(Duration::from_secs(2))));
        assert_eq!(t.take(Duration::from_millis(1999)), Some(0));
        assert_eq!(t.take(Duration::from_millis(1999)), Some(1));
        assert_eq!(t.take(Duration::from_secs(2)), None);
    }

    #[test]
    fn tickets_shared_by_connections_hand_out_every_request_once() {
        let t = Arc::new(Tickets::new(Bound::new(CLOSED, 1000, None, None)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let t = t.clone();
                thread::spawn(move || {
                    std::iter::from_fn(|| t.take(Duration::ZERO)).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<u64> = threads
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn requests_take_the_models_and_licences_in_turn() {
        let got: Vec<_> = (0..7).map(|k| request(k, 6, 4)).collect();
        assert_eq!(
            got,
            [(0, 0), (1, 1), (2, 2), (3, 3), (4, 0), (5, 1), (0, 2)]
        );
    }
}
