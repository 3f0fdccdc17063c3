//! `spinlock-broker-driver`: the load generator for `spinlock-broker`.
//!
//! ```text
//! spinlock-broker-driver --addr 127.0.0.1:PORT [--producers N] [--size BYTES]
//!                        [--duration 5s | --ops N] --out result.json [--build NAME]
//!                        [--window 100ms] [--connect-timeout 5s]
//!                        [--drop-at 4s --drop-to N [--drop-think 50ms]] [--traced]
//! ```
//!
//! `--traced`: each message is sent as a trace of its own (W3C ids in the frame, see
//! `protocol::TRACED`), as an instrumented client would; the broker serves it as a span of
//! that trace.
//!
//! `--drop-at T --drop-to N`: T into the run, every producer but the first N stops (and closes
//! its connection), so the load changes part-way (0s: never); with `--drop-think D` the N left
//! wait D after each ack from then on, a light load of about N/D messages a second.
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
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::Parser;
use spinlock_broker::{
    WORKLOAD,
    protocol::{ACK_ERROR, TraceParent, encode_frame, encode_traced_frame, read_ack, set_trace},
};
use switchyard_harness::{
    Budget, DriverResult, Measured as _, Recorder, Shutdown,
    driver::{BoundFlags, TimingFlags, merge_threads, run_together},
    human_ns, parse_duration, print_line,
};

/// Closed-loop producers for spinlock-broker.
#[derive(Debug, Parser)]
#[command(name = "spinlock-broker-driver", version)]
#[command(mut_arg("ops", |a| a.help("Send this many messages in all")))]
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
    #[command(flatten)]
    bound: BoundFlags<5>,
    /// Where to write the driver result (JSON).
    #[arg(long)]
    out: PathBuf,
    /// The server's build, recorded in the result (spin, mutex, abs).
    #[arg(long, default_value = "unspecified")]
    build: String,
    #[command(flatten)]
    timing: TimingFlags,
    /// How far into the run the producers beyond --drop-to stop (0s: never).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    drop_at: Duration,
    /// Producers that keep sending after --drop-at.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    drop_to: u32,
    /// How long the producers left after --drop-at wait after each ack (0s: not at all).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    drop_think: Duration,
    /// Send each message as a trace of its own, with its trace context in the frame.
    #[arg(long)]
    traced: bool,
}

fn main() -> ExitCode {
    switchyard_harness::exit_code("spinlock-broker-driver", run(Args::parse()))
}

/// What one producer thread brings back.
struct Producer {
    recorder: Recorder,
    errors: u64,
    finished: Instant,
    failure: Option<io::Error>,
}

/// How a producer's load changes part-way (`--drop-at`).
#[derive(Clone, Copy)]
enum Drop {
    /// Stops sending at this instant.
    StopAt(Instant),
    /// From this instant, waits this long after each ack.
    ThinkFrom(Instant, Duration),
}

/// Sends until the budget is spent or `drop` stops it; a traced frame (`trace_seed`) is
/// given the next trace before each send.
fn produce(
    mut stream: TcpStream,
    frame: &[u8],
    trace_seed: Option<u64>,
    budget: &Budget,
    drop: Option<Drop>,
    mut recorder: Recorder,
) -> Producer {
    let mut errors = 0;
    let mut failure = None;
    let mut frame = frame.to_vec();
    let mut sent_n = 0u64;
    loop {
        match drop {
            Some(Drop::StopAt(t)) if Instant::now() >= t => break,
            Some(Drop::ThinkFrom(t, think)) if Instant::now() >= t => thread::sleep(think),
            _ => {}
        }
        if !budget.next() {
            break;
        }
        if let Some(seed) = trace_seed {
            sent_n += 1;
            set_trace(&mut frame, TraceParent::nth(seed, sent_n));
        }
        let sent = Instant::now();
        let ack = stream
            .write_all(&frame)
            .and_then(|()| read_ack(&mut stream));
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
    let bound = args.bound.bound()?;
    let shutdown = Shutdown::install().context("failed to install the SIGINT/SIGTERM handler")?;
    let window = args.timing.window();
    let payload: Vec<u8> = (0..args.size).map(|i| b'a' + (i % 26) as u8).collect();
    let frame = if args.traced {
        encode_traced_frame(&payload, TraceParent::nth(0, 0))
    } else {
        encode_frame(&payload)
    };

    let streams = (0..args.producers)
        .map(|_| args.timing.connect(args.addr, "`spinlock-broker --lock …`"))
        .collect::<Result<Vec<_>, _>>()?;

    let (started, producers) = run_together(
        "producer",
        streams,
        bound,
        &shutdown,
        |i, stream, start, budget| {
            let at = start + args.drop_at;
            let drop = match i < args.drop_to as usize {
                _ if args.drop_at.is_zero() => None,
                false => Some(Drop::StopAt(at)),
                true if args.drop_think.is_zero() => None,
                true => Some(Drop::ThinkFrom(at, args.drop_think)),
            };
            // Each producer's traces its own: the pid and its index seed them.
            let seed = args
                .traced
                .then(|| u64::from(std::process::id()) << 16 | i as u64);
            produce(
                stream,
                &frame,
                seed,
                budget,
                drop,
                Recorder::new(start, window),
            )
        },
    )?;
    let start = started.at;

    let (recorder, errors, end) = merge_threads(
        start,
        window,
        producers
            .iter()
            .map(|p| (&p.recorder, p.errors, p.finished)),
    )
    .context("failed to merge latencies")?;
    for (i, p) in producers.iter().enumerate() {
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
    if !args.drop_at.is_zero() {
        parameters.insert(
            "drop_at_ms".to_owned(),
            serde_json::json!(args.drop_at.as_millis() as u64),
        );
        parameters.insert("drop_to".to_owned(), serde_json::json!(args.drop_to));
        parameters.insert(
            "drop_think_ms".to_owned(),
            serde_json::json!(args.drop_think.as_millis() as u64),
        );
    }
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
    print_line(&line).context("failed to print the summary")?;
    if producers.iter().any(|p| p.failure.is_some()) && !shutdown.requested() {
        bail!("the broker closed connections during the run (result written with the errors)");
    }
    Ok(())
}
