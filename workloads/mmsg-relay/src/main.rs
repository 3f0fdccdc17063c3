//! `mmsg-relay`: the voice relay server, the target switchyard profiles.
//!
//! ```text
//! mmsg-relay --mode threads|mmsg|lite [--port 0] [--exit-after-idle MS] [--drop-every N]
//!            threads: [--workers N]
//!            mmsg:    [--loops N] [--batch 64] [--batch-timeout-us 500]
//!            lite:    [--loops N] [--batch 4] [--batch-timeout-us 1000]
//! ```
//!
//! Prints `ready <port>` once listening on 127.0.0.1 (UDP), and one JSON summary line when it
//! ends (SIGINT/SIGTERM, or `--exit-after-idle`).

use std::{num::NonZeroU64, process::ExitCode, thread, time::Duration};

use anyhow::{Context as _, bail};
use clap::Parser;
use mmsg_relay::server::{self, MAX_BATCH, Mode, ServerConfig};
use switchyard_harness::{Shutdown, announce_ready, parse_millis, print_line};

/// A UDP voice relay: acks each speaker's packet and forwards it to the rest of the room.
#[derive(Debug, Parser)]
#[command(name = "mmsg-relay", version)]
struct Args {
    /// The build to profile: a receiver thread and workers over channels, batching loops, or
    /// batching loops that send one bundle of frames per destination.
    #[arg(long, value_enum)]
    mode: Mode,
    /// Port on 127.0.0.1; 0 lets the kernel choose (printed as `ready <port>`).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// threads: worker threads, rooms spread over them by id [default: number of CPUs].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    workers: Option<u32>,
    /// mmsg, lite: loops, one thread and one SO_REUSEPORT socket each [default: number of
    /// CPUs].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    loops: Option<u32>,
    /// mmsg, lite: datagrams a loop receives before it answers them [default: mmsg 64, lite
    /// 4].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_BATCH as i64))]
    batch: Option<u32>,
    /// mmsg, lite: how long a loop waits for its batch to fill after the first datagram, in
    /// microseconds [default: mmsg 500, lite 1000].
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    batch_timeout_us: Option<u64>,
    /// Exit once no datagram has arrived for MS milliseconds (after at least one did).
    #[arg(long, value_name = "MS", value_parser = parse_millis)]
    exit_after_idle: Option<Duration>,
    /// Drop every Nth forward on purpose (to check a driver's loss detection).
    #[arg(long, value_name = "N")]
    drop_every: Option<NonZeroU64>,
}

// Built with `--features dhat`: dhat's allocator, for a heap profile of the whole run.
switchyard_harness::heap_allocator!();

fn main() -> ExitCode {
    // Built with `--features dhat`: the heap profile, written as `main` returns to
    // $DHAT_HEAP_FILE (default: dhat-heap.json in the working directory).
    switchyard_harness::heap_profile!();
    switchyard_harness::exit_code("mmsg-relay", run(Args::parse()))
}

/// Turns the flags into one validated configuration: the options of the other mode are
/// refused rather than ignored.
fn config(args: &Args) -> anyhow::Result<ServerConfig> {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let (other, flags): (&str, Vec<(&str, bool)>) = match args.mode {
        Mode::Threads => (
            "mmsg and lite",
            vec![
                ("--loops", args.loops.is_some()),
                ("--batch", args.batch.is_some()),
                ("--batch-timeout-us", args.batch_timeout_us.is_some()),
            ],
        ),
        Mode::Mmsg | Mode::Lite => ("threads", vec![("--workers", args.workers.is_some())]),
    };
    if let Some((flag, _)) = flags.iter().find(|(_, given)| *given) {
        bail!("{flag} applies to --mode {other} only");
    }
    let (batch, timeout) = args.mode.default_batch();
    Ok(ServerConfig {
        mode: args.mode,
        port: args.port,
        workers: args.workers.map_or(cpus, |n| n as usize),
        loops: args.loops.map_or(cpus, |n| n as usize),
        batch: args.batch.map_or(batch, |n| n as usize),
        batch_timeout: args.batch_timeout_us.map_or(timeout, Duration::from_micros),
        exit_after_idle: args.exit_after_idle,
        drop_every: args.drop_every,
    })
}

fn run(args: Args) -> anyhow::Result<()> {
    let config = config(&args)?;
    let shutdown = Shutdown::install().context("failed to install the SIGINT/SIGTERM handler")?;
    let summary = server::run(&config, &shutdown, |addr| announce_ready(addr.port()))?;
    let line = serde_json::to_string(&summary).context("failed to encode the summary")?;
    print_line(&line).context("failed to print the summary")
}
