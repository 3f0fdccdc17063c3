//! What every switchyard workload shares.
//!
//! A workload is two processes talking over loopback (127.0.0.1): a *server*, the target that
//! switchyard profiles, and a *driver*, the load generator. A run is bounded by a duration or an
//! operation count. The pieces both sides use live here:
//!
//! - [`Recorder`]: send→reply latencies in an hdrhistogram (nanoseconds, 3 significant digits)
//!   plus a per-window series (operations, p99 and max per window); one per driver thread,
//!   merged at the end.
//! - [`DriverResult`]: the versioned file a driver writes (`format: "switchyard-driver-result"`,
//!   `schema_version: 1`), with the serialised histogram so results can be re-read and merged.
//! - [`parse_duration`] (`10s`, `500ms`), [`RunBound`]/[`Budget`] for `--duration | --ops`,
//!   [`Shutdown`] for SIGINT/SIGTERM, [`connect_tcp`] and [`StartGate`] to start a driver's
//!   connections together.
//! - The ready handshake: a server binds port 0 by default and prints `ready <port>` on stdout
//!   once it is listening ([`announce_ready`]); a launcher reads it ([`read_ready`]) or lets
//!   [`ServerProcess`] spawn the server and wait for it. A process that says it is ready on an
//!   inherited descriptor instead (`switchyard record --ready-fd 3`) is started with
//!   [`ServerProcess::spawn_with_ready_fd`], and stopped the same way ([`ServerProcess::interrupt`]
//!   is Ctrl-C).
//! - [`driver`]: what every driver's `main` shares (its common flags, connecting, starting its
//!   load threads together); [`heap`]: the servers' dhat heap profile; [`print_line`] and
//!   [`exit_code`] for the end of every `main`.

mod bound;
pub mod driver;
mod duration;
pub mod heap;
mod hist;
mod launch;
pub mod otel_ctx;
mod ready;
mod recorder;
mod result;
mod shutdown;
mod start;
mod window;

pub use bound::{BoundError, Budget, RunBound};
pub use duration::{DurationError, human_ns, parse_duration, parse_millis};
pub use launch::{LaunchError, ServerExit, ServerProcess, wait_or_kill};
pub use ready::{READY_PREFIX, ReadyError, announce_ready, parse_ready_line, read_ready};
pub use recorder::{LatencyRecorder, MergeError, Percentiles, Recorder, SIGNIFICANT_DIGITS};
pub use result::{DriverResult, FORMAT, Measured, ResultError, SCHEMA_VERSION, monotonic_ns};
pub use shutdown::Shutdown;
pub use start::{StartGate, connect_tcp};
pub use window::{DEFAULT_WINDOW, Window, WindowSeries};

/// A server's exit: 0, or its error on one line (`NAME: error: …`, the whole cause chain)
/// and exit code 2.
pub fn exit_code<E: std::fmt::Display>(
    name: &str,
    result: Result<(), E>,
) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Prints `line` on stdout (a driver's or a server's summary). Nobody reading any more (a
/// closed pipe) is not an error: whoever started us stopped listening, nothing left to tell.
pub fn print_line(line: &str) -> std::io::Result<()> {
    use std::io::Write as _;

    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
