//! `asset-server-driver`: open-loop load for the asset server's builds, and the check that
//! every response is the model it asked for.
//!
//! ```text
//! asset-server-driver --addr 127.0.0.1:PORT --models DIR --rate R [--connections 4]
//!                     [--duration 10s | --ops N] [--licences 4] --out result.json --build B
//! ```
//!
//! Request k is due at start + k/R (open loop, on a fixed schedule): model k mod M (the
//! models in turn), licence k mod L, on connection k mod C (HTTP/1.1 keep-alive). A sender
//! thread per connection writes each request when it is due, whether or not earlier ones were
//! answered; a receiver reads the answers in order. A latency runs from when the request was
//! due to its last byte, so a busy server delays every request queued behind, each by what it
//! waited (no coordinated omission).
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
    path::PathBuf,
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
    /// Requests per second, across the connections.
    #[arg(long)]
    rate: f64,
    /// Keep-alive connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    #[command(flatten)]
    bound: BoundFlags<10>,
    /// Distinct licences (clients) the requests carry.
    #[arg(long, default_value_t = 4)]
    licences: usize,
    /// The driver result file.
    #[arg(long)]
    out: PathBuf,
    /// The build serving (recorded in the result).
    #[arg(long, default_value = "unknown")]
    build: String,
}

/// A request on its way: when it was due, and what it asked for.
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

fn run(args: Args) -> anyhow::Result<u64> {
    if !args.addr.ip().is_loopback() {
        bail!("{} is not a loopback address", args.addr);
    }
    if args.rate.is_nan() || args.rate <= 0.0 {
        bail!("--rate must be above 0");
    }
    // The expected bytes of every (model, licence): what both builds must serve.
    let list = models::list(&args.models)?;
    let licences: Vec<String> = (0..args.licences.max(1))
        .map(|i| format!("client-{i}"))
        .collect();
    let mut expected: Vec<Vec<[u8; 32]>> = Vec::new();
    let mut names = Vec::new();
    for (m, path) in &list {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let g = glb::parse(&bytes).with_context(|| format!("parsing {}", path.display()))?;
        expected.push(
            licences
                .iter()
                .map(|l| Sha256::digest(glb::with_licence(&bytes, &g, &licence_bytes(l))).into())
                .collect(),
        );
        names.push(m.name.clone());
    }
    let expected = Arc::new(expected);
    let names = Arc::new(names);

    let total = match (args.bound.ops, args.bound.duration) {
        (Some(n), _) => n,
        (None, d) => (d.unwrap_or(Duration::from_secs(10)).as_secs_f64() * args.rate).ceil() as u64,
    };
    let start = Instant::now();
    let recorder = Arc::new(Mutex::new(Recorder::new(start, DEFAULT_WINDOW)));
    let wire_bytes = Arc::new(AtomicU64::new(0));
    let model_bytes = Arc::new(AtomicU64::new(0));
    let (check_tx, check_rx) = mpsc::channel::<Received>();
    let check_rx = Arc::new(Mutex::new(check_rx));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));

    // Verifiers: decrypt, decompress, hash.
    let verifiers: Vec<_> = (0..2)
        .map(|_| {
            let rx = check_rx.clone();
            let (expected, names, errors, first) = (
                expected.clone(),
                names.clone(),
                errors.clone(),
                first_error.clone(),
            );
            thread::spawn(move || {
                loop {
                    let got = match rx.lock().expect("verifier queue").recv() {
                        Ok(r) => r,
                        Err(_) => return,
                    };
                    if let Err(why) = verify(&got, &expected) {
                        errors.fetch_add(1, Ordering::Relaxed);
                        let mut f = first.lock().expect("first error");
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
        .collect();

    let conns = args.connections.max(1);
    let mut workers = Vec::new();
    for c in 0..conns {
        let stream = connect_tcp(args.addr, Duration::from_secs(5))
            .with_context(|| format!("connecting to {}", args.addr))?;
        let mut writer = stream.try_clone()?;
        let mut reader = BufReader::with_capacity(1 << 20, stream);
        let (tx, rx) = mpsc::channel::<Sent>();
        let (rate, models, lic, names) = (args.rate, list.len(), licences.clone(), names.clone());
        let sender = thread::spawn(move || -> anyhow::Result<()> {
            let mut k = c as u64;
            while k < total {
                let due = start + Duration::from_secs_f64(k as f64 / rate);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    thread::sleep(wait);
                }
                let (model, licence) = (
                    (k % models as u64) as usize,
                    (k % lic.len() as u64) as usize,
                );
                let req = format!(
                    "GET /models/{}?licence={} HTTP/1.1\r\nHost: asset\r\n\r\n",
                    names[model], lic[licence]
                );
                writer.write_all(req.as_bytes())?;
                if tx
                    .send(Sent {
                        due,
                        k,
                        model,
                        licence,
                    })
                    .is_err()
                {
                    break;
                }
                k += conns as u64;
            }
            Ok(())
        });
        let (recorder, wire, check) = (recorder.clone(), wire_bytes.clone(), check_tx.clone());
        let served = model_bytes.clone();
        let receiver = thread::spawn(move || -> anyhow::Result<()> {
            for sent in rx {
                let (status, headers, body) = read_response(&mut reader)
                    .with_context(|| format!("reading the response to request {}", sent.k))?;
                let done = Instant::now();
                recorder
                    .lock()
                    .expect("recorder")
                    .record(done.saturating_duration_since(sent.due), done);
                wire.fetch_add(body.len() as u64, Ordering::Relaxed);
                let header = |name: &str| headers.get(name).map(String::as_str);
                let size = header("x-asset-size")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                served.fetch_add(size as u64, Ordering::Relaxed);
                let _ = check.send(Received {
                    k: sent.k,
                    model: sent.model,
                    licence: sent.licence,
                    status,
                    codec: header("x-asset-codec").and_then(Codec::from_name),
                    size: header("x-asset-size")
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0),
                    body,
                });
            }
            Ok(())
        });
        workers.push((sender, receiver));
    }
    drop(check_tx);
    for (sender, receiver) in workers {
        sender.join().expect("sender thread")?;
        receiver.join().expect("receiver thread")?;
    }
    let elapsed = start.elapsed();
    for v in verifiers {
        v.join().expect("verifier thread");
    }

    let recorder = recorder.lock().expect("recorder");
    let latency = recorder.latency();
    let done = latency.count();
    let errors = errors.load(Ordering::Relaxed);
    let mut params: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    params.insert("rate".into(), args.rate.into());
    params.insert("connections".into(), conns.into());
    params.insert("models".into(), list.len().into());
    params.insert("licences".into(), licences.len().into());
    params.insert(
        "wire_bytes_per_response".into(),
        (wire_bytes.load(Ordering::Relaxed) / done.max(1)).into(),
    );
    params.insert(
        "model_bytes_per_response".into(),
        (model_bytes.load(Ordering::Relaxed) / done.max(1)).into(),
    );
    params.insert("mean_latency_ns".into(), (latency.mean() as u64).into());
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
        let first = first_error
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
