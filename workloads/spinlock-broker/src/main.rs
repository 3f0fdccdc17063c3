//! `spinlock-broker`: the broker server, the target switchyard profiles.
//!
//! ```text
//! spinlock-broker --lock spin|mutex|abs|fixed [--spin-k N] [--port 0] [--dir DIR] [--flush never|every:N|interval:MS]
//!                 [--segment-bytes N] [--retain-segments N] [--exit-after-idle MS]
//!                 [--abs-window 100ms] [--max-message BYTES] [--pprof FILE] [--pprof-hz HZ]
//!                 [--spans-out FILE]
//! ```
//!
//! A message its producer traced (`spinlock-broker-driver --traced`) is served as a span of
//! its trace, published in the OpenTelemetry thread context (`otel_thread_ctx_v1`).
//!
//! Prints `ready <port>` once listening on 127.0.0.1, and one JSON summary line when it ends
//! (SIGINT/SIGTERM, or `--exit-after-idle`).

use std::{fs, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use spinlock_broker::{
    commit_log::{FlushPolicy, LogConfig},
    locks::{AbsConfig, LockKind},
    server::{self, ServerConfig},
};
use switchyard_harness::{Shutdown, announce_ready, parse_duration, parse_millis, print_line};

// Built with `--features dhat`: dhat's allocator, for a heap profile of the whole run.
switchyard_harness::heap_allocator!();

/// A message broker appending to a commit log under one lock.
#[derive(Debug, Parser)]
#[command(name = "spinlock-broker", version)]
struct Args {
    /// The lock around the send path (the build to profile).
    #[arg(long, value_enum)]
    lock: LockKind,
    /// Attempts per spin round of `--lock fixed` (a yield after each failed round) [default: 1000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    spin_k: Option<u32>,
    /// Port on 127.0.0.1; 0 lets the kernel choose (printed as `ready <port>`).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Directory for the segment files [default: a temporary one, removed at exit].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// When appended data is forced to disk: never, every:N (messages) or interval:MS.
    #[arg(long, default_value = "never")]
    flush: FlushPolicy,
    /// A segment rolls when the next record would take it past this size.
    #[arg(long, default_value_t = 16 << 20)]
    segment_bytes: u64,
    /// Sealed segments kept; older ones are deleted.
    #[arg(long, default_value_t = 4)]
    retain_segments: usize,
    /// Exit once no producer has been connected for MS milliseconds (after at least one was).
    #[arg(long, value_name = "MS", value_parser = parse_millis)]
    exit_after_idle: Option<Duration>,
    /// Adaptation window of the `abs` lock.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    abs_window: Duration,
    /// Largest message accepted, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    max_message: u32,
    /// Write a CPU profile of the server (pprof protobuf) to FILE at exit.
    #[arg(long, value_name = "FILE")]
    pprof: Option<PathBuf>,
    /// Sampling frequency of --pprof.
    #[arg(long, default_value_t = 999, requires = "pprof")]
    pprof_hz: i32,
    /// Write each traced message's span id, trace id and own timings (wall, on CPU, waiting
    /// for a CPU, ns) to FILE at exit, a line each.
    #[arg(long, value_name = "FILE")]
    spans_out: Option<PathBuf>,
}

fn main() -> ExitCode {
    // Built with `--features dhat`: the heap profile, written as `main` returns to
    // $DHAT_HEAP_FILE (default: dhat-heap.json in the working directory).
    switchyard_harness::heap_profile!();
    let args = Args::parse();
    switchyard_harness::exit_code("spinlock-broker", run(args))
}

/// K of `--lock fixed` when `--spin-k` is not given: the article's k = 10³.
const DEFAULT_SPIN_K: u32 = 1_000;

fn run(args: Args) -> anyhow::Result<()> {
    if args.spin_k.is_some() && args.lock != LockKind::Fixed {
        anyhow::bail!(
            "--spin-k sets the fixed lock's K, not {}'s; use it with --lock fixed",
            args.lock
        );
    }
    let shutdown = Shutdown::install().context("failed to install the SIGINT/SIGTERM handler")?;
    // The default directory lives as long as this function: removed after the summary.
    let temp;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("spinlock-broker-")
                .tempdir()
                .context("failed to create a temporary log directory (use --dir)")?;
            temp.path().to_owned()
        }
    };
    let config = ServerConfig {
        lock: args.lock,
        port: args.port,
        log: LogConfig {
            dir,
            segment_bytes: args.segment_bytes,
            retain_segments: args.retain_segments,
            flush: args.flush,
        },
        abs: match args.lock {
            LockKind::Fixed => AbsConfig {
                window: args.abs_window,
                ..AbsConfig::fixed(args.spin_k.unwrap_or(DEFAULT_SPIN_K))
            },
            _ => AbsConfig {
                window: args.abs_window,
                ..AbsConfig::default()
            },
        },
        exit_after_idle: args.exit_after_idle,
        max_message: args.max_message,
        spans_out: args.spans_out.clone(),
    };

    let profiler = match &args.pprof {
        Some(_) => Some(start_cpu_profiler(args.pprof_hz)?),
        None => None,
    };

    let summary = server::run(config, &shutdown, |addr| announce_ready(addr.port()))?;

    if let (Some(profiler), Some(path)) = (profiler, &args.pprof) {
        write_pprof(&profiler, path)?;
    }
    let line = serde_json::to_string(&summary).context("failed to encode the summary")?;
    print_line(&line).context("failed to print the summary")
}

/// Starts pprof's SIGPROF sampler. Its unwinder builds its table of loaded objects on first
/// use, which is the first signal; raising one here, in the main thread before any other
/// thread exists, does that work at a safe point instead of in a handler that may have
/// interrupted `malloc`.
fn start_cpu_profiler(hz: i32) -> anyhow::Result<pprof::ProfilerGuard<'static>> {
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(hz)
        .build()
        .context("failed to start the CPU profiler")?;
    // SAFETY: raise(3) delivers SIGPROF to this thread; pprof's handler is installed.
    unsafe { libc::raise(libc::SIGPROF) };
    Ok(guard)
}

fn write_pprof(profiler: &pprof::ProfilerGuard<'_>, path: &PathBuf) -> anyhow::Result<()> {
    use pprof::protos::Message as _;

    let profile = profiler
        .report()
        .build()
        .and_then(|report| report.pprof())
        .context("failed to build the CPU profile")?;
    let mut bytes = Vec::new();
    profile
        .encode(&mut bytes)
        .context("failed to encode the CPU profile")?;
    fs::write(path, bytes)
        .with_context(|| format!("failed to write CPU profile `{}`", path.display()))
}
