//! What every driver's `main` does the same way: the shared flags (flattened into its own
//! clap `Args`), connecting with retries and a hint, and starting its load threads together.
//! Its summary line goes out through [`crate::print_line`], as a server's does.

use std::{
    io,
    net::{SocketAddr, TcpStream},
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::{
    BoundError, Budget, DEFAULT_WINDOW, MergeError, Recorder, RunBound, Shutdown, StartGate,
    connect_tcp, parse_duration, result::monotonic_ns,
};

// `--duration | --ops`: what ends a run; `DEFAULT_SECS` is the duration when neither is given.
// A driver whose help names its operations differently overrides it with
// `#[command(mut_arg("ops", …))]`. (Plain comments here: a doc comment would become the
// help's description of a driver that has none of its own.)
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct BoundFlags<const DEFAULT_SECS: u64> {
    // Its help names the default: "Run for this long [default: 5s]".
    #[arg(
        long,
        value_parser = parse_duration,
        conflicts_with = "ops",
        help = format!("Run for this long [default: {DEFAULT_SECS}s]")
    )]
    pub duration: Option<Duration>,
    /// Send this many requests in all.
    #[arg(long)]
    pub ops: Option<u64>,
}

impl<const DEFAULT_SECS: u64> BoundFlags<DEFAULT_SECS> {
    /// The run's bound, checked (`--ops 0` and `--duration 0s` are refused).
    pub fn bound(&self) -> Result<RunBound, BoundError> {
        RunBound::from_flags(self.duration, self.ops, Duration::from_secs(DEFAULT_SECS))
    }
}

// `--window` and `--connect-timeout` (plain comment, as above).
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct TimingFlags {
    /// Width of the latency windows.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub window: Duration,
    /// How long to keep trying to connect.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
}

impl TimingFlags {
    /// The width of the recorders' windows: `--window 0` means the default.
    pub fn window(&self) -> Duration {
        if self.window.is_zero() {
            DEFAULT_WINDOW
        } else {
            self.window
        }
    }

    /// One TCP connection to `addr` within `--connect-timeout` (see [`connect`]).
    pub fn connect(&self, addr: SocketAddr, start_first: &str) -> Result<TcpStream, ConnectError> {
        connect(addr, self.connect_timeout, start_first)
    }
}

/// A driver could not reach its server.
#[derive(Debug, thiserror::Error)]
#[error(
    "failed to connect to {addr}: {cause}\nhint: start {start_first} first; it prints `ready <port>`"
)]
pub struct ConnectError {
    pub addr: SocketAddr,
    pub cause: io::Error,
    /// What the hint says to start, e.g. ``"`spinlock-broker --lock …`"``.
    pub start_first: String,
}

/// Connects to `addr` with TCP_NODELAY, retrying until `timeout` while the server comes up;
/// the error hints at starting `start_first` (a server command line in backticks, e.g.
/// ``"`spinlock-broker --lock …`"``).
pub fn connect(
    addr: SocketAddr,
    timeout: Duration,
    start_first: &str,
) -> Result<TcpStream, ConnectError> {
    connect_tcp(addr, timeout).map_err(|cause| ConnectError {
        addr,
        cause,
        start_first: start_first.to_owned(),
    })
}

/// Why a run's load threads did not all come back.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("failed to start a {what} thread")]
    Spawn {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("a {what} thread panicked")]
    Panicked { what: &'static str },
}

/// When a run's load started, on the three clocks a result may name.
#[derive(Clone, Copy, Debug)]
pub struct Started {
    pub at: Instant,
    /// CLOCK_MONOTONIC, as the recorder's clock.
    pub monotonic_ns: u64,
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

/// Runs `load` on one thread per item (named `{what}-{i}`), all released at one start
/// instant, sharing one [`Budget`] for `bound`; returns the start and what each thread
/// brought back, in order. If a thread cannot be started, the ones already running are
/// released with nothing to do (by requesting `shutdown`) before the error is returned.
pub fn run_together<I, T, F>(
    what: &'static str,
    items: Vec<I>,
    bound: RunBound,
    shutdown: &Shutdown,
    load: F,
) -> Result<(Started, Vec<T>), LoadError>
where
    I: Send,
    T: Send,
    F: Fn(usize, I, Instant, &Budget) -> T + Sync,
{
    let gate = StartGate::new();
    let budget = std::sync::OnceLock::<Budget>::new();
    thread::scope(|s| {
        let mut handles = Vec::new();
        let mut spawn_error = None;
        for (i, item) in items.into_iter().enumerate() {
            let (gate, budget, load) = (&gate, &budget, &load);
            let spawned = thread::Builder::new()
                .name(format!("{what}-{i}"))
                .spawn_scoped(s, move || {
                    let start = gate.wait();
                    let Some(budget) = budget.get() else {
                        unreachable!("the budget is set before the gate opens")
                    };
                    load(i, item, start, budget)
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
        let at = Instant::now();
        let started = Started {
            at,
            monotonic_ns: monotonic_ns(),
            unix_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        };
        let _ = budget.set(Budget::new(bound, at, shutdown.clone()));
        gate.open(at);
        let results = handles
            .into_iter()
            .map(|h| h.join())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| LoadError::Panicked { what })?;
        if let Some(source) = spawn_error {
            return Err(LoadError::Spawn { what, source });
        }
        Ok((started, results))
    })
}

/// Merges what a run's load threads recorded, each given as (its recorder, its errors, when
/// it finished): the run's recorder from `start`, its errors, and when its last thread
/// finished (`start` if none ran).
pub fn merge_threads<'a>(
    start: Instant,
    window: Duration,
    threads: impl IntoIterator<Item = (&'a Recorder, u64, Instant)>,
) -> Result<(Recorder, u64, Instant), MergeError> {
    let mut recorder = Recorder::new(start, window);
    let mut errors = 0;
    let mut end = start;
    for (thread, thread_errors, finished) in threads {
        recorder.merge(thread)?;
        errors += thread_errors;
        end = end.max(finished);
    }
    Ok((recorder, errors, end))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[command(flatten)]
        bound: BoundFlags<7>,
        #[command(flatten)]
        timing: TimingFlags,
    }

    #[test]
    fn flags_default_and_parse() {
        let f = Flags::try_parse_from(["d"]).expect("defaults");
        assert_eq!(
            f.bound.bound(),
            Ok(RunBound::Duration(Duration::from_secs(7)))
        );
        assert_eq!(f.timing.window(), Duration::from_millis(100));
        assert_eq!(f.timing.connect_timeout, Duration::from_secs(5));
        let f = Flags::try_parse_from(["d", "--ops", "9", "--window", "0s"]).expect("ops");
        assert_eq!(f.bound.bound(), Ok(RunBound::Ops(9)));
        assert_eq!(f.timing.window(), DEFAULT_WINDOW);
        assert!(Flags::try_parse_from(["d", "--ops", "9", "--duration", "1s"]).is_err());
    }

    #[test]
    fn every_thread_runs_once_from_one_start() {
        let shutdown = Shutdown::new();
        let (started, seen) = run_together(
            "worker",
            vec![10, 20, 30],
            RunBound::Ops(5),
            &shutdown,
            |i, item, start, budget| {
                let mut ops = 0;
                while budget.next() {
                    ops += 1;
                }
                (
                    i,
                    item,
                    start,
                    thread::current().name().map(str::to_owned),
                    ops,
                )
            },
        )
        .expect("run");
        assert_eq!(seen.len(), 3);
        let idle: Vec<Recorder> = seen
            .iter()
            .map(|_| Recorder::new(started.at, DEFAULT_WINDOW))
            .collect();
        let (merged, errors, end) = merge_threads(
            started.at,
            DEFAULT_WINDOW,
            idle.iter().map(|r| (r, 1, started.at)),
        )
        .expect("merge");
        assert_eq!((merged.latency().count(), errors, end), (0, 3, started.at));
        assert_eq!(seen.iter().map(|s| s.4).sum::<u64>(), 5);
        for (k, (i, item, start, name, _)) in seen.into_iter().enumerate() {
            assert_eq!((i, item, start), (k, 10 * (k + 1), started.at));
            assert_eq!(name.as_deref(), Some(format!("worker-{k}").as_str()));
        }
    }

    #[test]
    fn a_connect_error_names_the_server_to_start() {
        let addr = crate::start::tests::unused_loopback_addr();
        let err = connect(addr, Duration::from_millis(50), "`server --flag …`").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("failed to connect to {addr}: ")),
            "{text}"
        );
        assert!(
            text.ends_with("\nhint: start `server --flag …` first; it prints `ready <port>`"),
            "{text}"
        );
    }
}
