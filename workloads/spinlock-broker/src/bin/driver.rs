//! `spinlock-broker-driver`: the load generator for `spinlock-broker`.
//!
//! ```text
//! spinlock-broker-driver --addr 127.0.0.1:PORT [--producers N] [--size BYTES]
//!                        [--duration 5s | --ops N] --out result.json [--build NAME]
//!                        [--window 100ms] [--connect-timeout 5s]
//! ```
//!
//! N producer threads, each with its own connection, send a message and wait for its ack
//! (closed loop), recording the send→ack latency. The run's result is a `switchyard-harness`
//! driver result (workload `spinlock-broker`).

use std::{
    collections::BTreeMap,
    io::{self, Write as _},
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    process::ExitCode,
    sync::OnceLock,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::Parser;
use spinlock_broker::{
    WORKLOAD,
    protocol::{ACK_ERROR, encode_frame, read_ack},
};
use switchyard_harness::{
    Budget, DEFAULT_WINDOW, DriverResult, Measured as _, Recorder, RunBound, Shutdown, StartGate,
    connect_tcp, human_ns, parse_duration,
};

/// Closed-loop producers for spinlock-broker.
#[derive(Debug, Parser)]
#[command(name = "spinlock-broker-driver", version)]
struct Args {
    /// The broker's address (loopback only), e.g. 127.0.0.1:40123.
    #[arg(long)]
    addr: SocketAddr,
    /// Producer threads, one connection each (the comparison runs 1 to 4× the cores).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4096))]
    producers: u32,
    /// Message payload size in bytes (the comparison uses 2 and 1024).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=16 << 20))]
    size: u32,
    /// Run for this long [default: 5s].
    #[arg(long, value_parser = parse_duration, conflicts_with = "ops")]
    duration: Option<Duration>,
    /// Send this many messages in all.
    #[arg(long)]
    ops: Option<u64>,
    /// Where to write the driver result (JSON).
    #[arg(long)]
    out: PathBuf,
    /// The server's build, recorded in the result (spin, mutex, abs).
    #[arg(long, default_value = "unspecified")]
    build: String,
    /// Width of the latency windows.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    window: Duration,
    /// How long to keep trying to connect.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    connect_timeout: Duration,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spinlock-broker-driver: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn connect(addr: SocketAddr, timeout: Duration) -> anyhow::Result<TcpStream> {
    connect_tcp(addr, timeout).map_err(|e| {
        anyhow::anyhow!("failed to connect to {addr}: {e}\nhint: start `spinlock-broker --lock …` first; it prints `ready <port>`")
    })
}

/// What one producer thread brings back.
struct Producer {
    recorder: Recorder,
    errors: u64,
    finished: Instant,
    failure: Option<io::Error>,
}

fn produce(
    mut stream: TcpStream,
    frame: &[u8],
    budget: &Budget,
    mut recorder: Recorder,
) -> Producer {
    let mut errors = 0;
    let mut failure = None;
    while budget.next() {
        let sent = Instant::now();
        let ack = stream.write_all(frame).and_then(|()| read_ack(&mut stream));
        let acked = Instant::now();
        match ack {
            Ok(ACK_ERROR) => errors += 1,
            Ok(_) => recorder.record(acked - sent, acked),
            Err(e) => {
                // The connection is gone: this message failed, and so would the rest.
                errors += 1;
                failure = Some(e);
                break;
            }
        }
    }
    Producer {
        recorder,
        errors,
        finished: Instant::now(),
        failure,
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    if !args.addr.ip().is_loopback() {
        bail!(
            "{} is not a loopback address; the broker listens on 127.0.0.1 only",
            args.addr
        );
    }
    let bound = RunBound::from_flags(args.duration, args.ops, Duration::from_secs(5))?;
    let shutdown = Shutdown::install().context("failed to install the SIGINT/SIGTERM handler")?;
    let window = if args.window.is_zero() {
        DEFAULT_WINDOW
    } else {
        args.window
    };
    let payload: Vec<u8> = (0..args.size).map(|i| b'a' + (i % 26) as u8).collect();
    let frame = encode_frame(&payload);

    let streams = (0..args.producers)
        .map(|_| connect(args.addr, args.connect_timeout))
        .collect::<anyhow::Result<Vec<_>>>()?;

    let gate = StartGate::new();
    let budget = OnceLock::<Budget>::new();
    let (start, producers) = thread::scope(|s| -> anyhow::Result<_> {
        let mut handles = Vec::new();
        let mut spawn_error = None;
        for (i, stream) in streams.into_iter().enumerate() {
            let (gate, budget, frame) = (&gate, &budget, &frame);
            let spawned = thread::Builder::new()
                .name(format!("producer-{i}"))
                .spawn_scoped(s, move || {
                    let start = gate.wait();
                    let Some(budget) = budget.get() else {
                        unreachable!("the budget is set before the gate opens")
                    };
                    produce(stream, frame, budget, Recorder::new(start, window))
                });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    spawn_error = Some(e);
                    break;
                }
            }
        }
        if spawn_error.is_some() {
            // Release the threads already started, with nothing to do.
            shutdown.request();
        }
        let start = Instant::now();
        let _ = budget.set(Budget::new(bound, start, shutdown.clone()));
        gate.open(start);
        let producers = handles
            .into_iter()
            .map(|h| h.join())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| anyhow::anyhow!("a producer thread panicked"))?;
        if let Some(e) = spawn_error {
            return Err(e).context("failed to start a producer thread");
        }
        Ok((start, producers))
    })?;

    let mut recorder = Recorder::new(start, window);
    let mut errors = 0;
    let mut end = start;
    for (i, p) in producers.iter().enumerate() {
        recorder
            .merge(&p.recorder)
            .context("failed to merge latencies")?;
        errors += p.errors;
        end = end.max(p.finished);
        if let Some(e) = &p.failure {
            eprintln!("spinlock-broker-driver: producer {i}: connection lost: {e}");
        }
    }
    let mut parameters = BTreeMap::from([
        ("producers".to_owned(), serde_json::json!(args.producers)),
        ("size".to_owned(), serde_json::json!(args.size)),
        (
            "cores".to_owned(),
            serde_json::json!(thread::available_parallelism().map_or(1, |n| n.get())),
        ),
    ]);
    let (key, value) = bound.parameter();
    parameters.insert(key.to_owned(), value);
    let result = DriverResult::new(
        WORKLOAD,
        &args.build,
        parameters,
        &recorder,
        errors,
        end - start,
    )?;
    result.write(&args.out)?;

    let p = result.latency_ns;
    let line = format!(
        "{WORKLOAD} {}: {} ops in {:.2} s ({:.0}/s), {} errors; latency p50 {} p99 {} p99.99 {} max {}; wrote {}",
        result.build,
        result.operations,
        result.duration_ns as f64 / 1e9,
        result.throughput_per_s,
        result.errors,
        human_ns(p.p50),
        human_ns(p.p99),
        human_ns(p.p99_99),
        human_ns(p.max),
        args.out.display()
    );
    let mut out = io::stdout().lock();
    match writeln!(out, "{line}") {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        other => other.context("failed to print the summary")?,
    }
    if producers.iter().any(|p| p.failure.is_some()) && !shutdown.requested() {
        bail!("the broker closed connections during the run (result written with the errors)");
    }
    Ok(())
}
