//! `read-state-cache`: the Rust server, the `rust` build of the workload.
//!
//! ```text
//! read-state-cache [--port 0] [--capacity N] [--shards N] [--flush-interval 30s]
//!                  [--data-dir DIR] [--exit-after-idle MS] [--miss-latency DURATION]
//!                  [--spans-out FILE]
//! ```
//!
//! A request its client traced (`read-state-cache-driver --traced`) is applied as a span of
//! its trace, published in the OpenTelemetry thread context (`otel_thread_ctx_v1`).
//!
//! Prints `ready <port>` once listening on 127.0.0.1, and one JSON summary line when it ends
//! (SIGINT/SIGTERM, or `--exit-after-idle`), after a final flush pass.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use read_state_cache::server::{self, ServerConfig};
use switchyard_harness::{Shutdown, announce_ready, parse_duration, parse_millis, print_line};

/// A read-state cache: an LRU of per-user/per-channel counters, written behind to a store.
#[derive(Debug, Parser)]
#[command(name = "read-state-cache", version)]
struct Args {
    /// Port on 127.0.0.1; 0 lets the kernel choose (printed as `ready <port>`).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Most read states kept in memory.
    #[arg(long, default_value_t = 1_000_000)]
    capacity: usize,
    /// Shards of the cache, each with its own lock and LRU [default: capacity/16384,
    /// between 1 and 64].
    #[arg(long)]
    shards: Option<usize>,
    /// How often dirty entries are written to the store.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    flush_interval: Duration,
    /// Directory of the store [default: a temporary one, removed at exit].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Exit once no client has been connected for MS milliseconds (after at least one was).
    #[arg(long, value_name = "MS", value_parser = parse_millis)]
    exit_after_idle: Option<Duration>,
    /// How long the answer to a cache miss waits, as a database read would (e.g. 1ms); 0:
    /// at once.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    miss_latency: Duration,
    /// Write each traced request's span id, trace id and own timings (wall, on CPU, waiting
    /// for a CPU, ns) to FILE at exit, a line each.
    #[arg(long, value_name = "FILE")]
    spans_out: Option<PathBuf>,
}

// Built with `--features dhat`: dhat's allocator, for a heap profile of the whole run.
switchyard_harness::heap_allocator!();

fn main() -> ExitCode {
    // Built with `--features dhat`: the heap profile, written as `main` returns to
    // $DHAT_HEAP_FILE (default: dhat-heap.json in the working directory).
    switchyard_harness::heap_profile!();
    switchyard_harness::exit_code("read-state-cache", run(Args::parse()))
}

fn run(args: Args) -> anyhow::Result<()> {
    let shutdown = Shutdown::install().context("failed to install the SIGINT/SIGTERM handler")?;
    // The default directory lives as long as this function: removed after the summary.
    let temp;
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("read-state-cache-")
                .tempdir()
                .context("failed to create a temporary data directory (use --data-dir)")?;
            temp.path().to_owned()
        }
    };
    let config = ServerConfig {
        port: args.port,
        capacity: args.capacity,
        shards: args.shards,
        flush_interval: args.flush_interval,
        data_dir,
        exit_after_idle: args.exit_after_idle,
        miss_latency: args.miss_latency,
        spans_out: args.spans_out.clone(),
    };
    let summary = server::run(config, &shutdown, |addr| announce_ready(addr.port()))?;

    let line = serde_json::to_string(&summary).context("failed to encode the summary")?;
    print_line(&line).context("failed to print the summary")
}
