//! `read-state-cache-driver`: the load generator for both read-state-cache servers.
//!
//! ```text
//! read-state-cache-driver --addr 127.0.0.1:PORT [--connections 4] [--rate R]
//!                         [--duration 10s | --ops N] [--users 100000] [--channels-per-user 10]
//!                         [--zipf 1.1] [--mix ack:40,mention:30,get:30]
//!                         [--prefill --capacity N] --out result.json [--build go|rust]
//!                         [--window 100ms] [--seed 1] [--connect-timeout 5s] [--traced]
//! read-state-cache-driver --addr 127.0.0.1:PORT --prefill-only --capacity N
//! ```
//!
//! `--traced`: each measured request is sent as a trace of its own (its trace context in the
//! request, `protocol::TRACED`), as an instrumented client would; the Rust server applies it
//! as a span of that trace.
//!
//! One connection per `--connections`. Users are drawn from a Zipf
//! distribution over 1..=users (user 1 the hottest), the channel uniformly from
//! 1..=channels-per-user, the op from the mix. A latency runs from writing a request to reading
//! its answer. With `--rate 0` (the default) each connection has one request in flight and
//! sends the next as soon as the last one is answered (closed loop). With `--rate R` the
//! connections share R requests/s on a fixed schedule (open loop): a sender thread per
//! connection writes each request when it is due whether or not earlier ones were answered,
//! and a receiver thread reads the answers in order, so a server stall (a GC pause) delays
//! every request sent during it, each by what it waited (no coordinated omission), while a
//! sender that wakes up late only sends late, which is not charged to the server.
//!
//! `--prefill` first `get`s the first `--capacity` keys (users 1, 2, … with all their
//! channels), pipelined and unmeasured: each is a miss that inserts a clean entry, so the
//! cache is full before the measured run; `--prefill-only` does just that and exits, so the
//! fill can happen before a profiler attaches. The result is a `switchyard-harness` driver result
//! (workload `read-state-cache`).

use std::{
    collections::BTreeMap,
    io::{self, Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::ExitCode,
    str::FromStr,
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::Parser;
use rand::{RngExt as _, SeedableRng as _, rngs::SmallRng};
use rand_distr::{Distribution as _, Zipf};
use read_state_cache::{
    WORKLOAD,
    protocol::{Key, RESPONSE_LEN, ReadState, Request, Response, STATUS_OK, TraceParent},
};
use switchyard_harness::{
    Budget, DriverResult, Measured as _, Recorder, RunBound, Shutdown,
    driver::{BoundFlags, Started, TimingFlags, merge_threads, run_together},
    human_ns, print_line,
};

/// Load for read-state-cache: Zipf-distributed keys, a mix of ack/mention/get.
#[derive(Debug, Parser)]
#[command(name = "read-state-cache-driver", version)]
struct Args {
    /// The server's address (loopback only), e.g. 127.0.0.1:40123.
    #[arg(long)]
    addr: SocketAddr,
    /// Connections: a thread each (closed loop), or a sender and a receiver thread (--rate).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4096))]
    connections: u32,
    /// Requests per second across all connections; 0 = closed loop (as fast as answered).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    #[command(flatten)]
    bound: BoundFlags<10>,
    /// Users: ids 1..=USERS, drawn from a Zipf distribution (1 the hottest).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    users: u64,
    /// Channels per user: ids 1..=K, drawn uniformly.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    channels_per_user: u64,
    /// Exponent of the Zipf distribution of users (0 = uniform).
    #[arg(long, default_value_t = 1.1)]
    zipf: f64,
    /// Shares of each request kind, e.g. ack:40,mention:30,get:30 (missing kinds are 0).
    #[arg(long, default_value = "ack:40,mention:30,get:30")]
    mix: Mix,
    /// Fill the cache first: get the first --capacity keys (unmeasured).
    #[arg(long, requires = "capacity")]
    prefill: bool,
    /// Only fill the cache, then exit (no measured run, no result): a profiler can then attach
    /// to the server for the steady state alone.
    #[arg(long, requires = "capacity", conflicts_with_all = ["prefill", "duration", "ops", "out"])]
    prefill_only: bool,
    /// The server's --capacity (distinct keys --prefill touches).
    #[arg(long)]
    capacity: Option<u64>,
    /// Where to write the driver result (JSON).
    #[arg(long, required_unless_present = "prefill_only")]
    out: Option<PathBuf>,
    /// The server's build, recorded in the result (go, rust).
    #[arg(long, default_value = "unspecified")]
    build: String,
    /// Seed of the key and op choices (connection i uses seed + i).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    timing: TimingFlags,
    /// Send each measured request as a trace of its own, with its trace context.
    #[arg(long)]
    traced: bool,
}

/// The request mix: weights of ack, mention and get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mix {
    ack: u32,
    mention: u32,
    get: u32,
}

impl FromStr for Mix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut mix = Mix {
            ack: 0,
            mention: 0,
            get: 0,
        };
        let mut seen = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once(':')
                .ok_or_else(|| format!("`{part}` is not KIND:WEIGHT (e.g. ack:40)"))?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|_| format!("weight `{weight}` of `{name}` is not a whole number"))?;
            let name = name.trim();
            if seen.contains(&name) {
                return Err(format!("`{name}` is given twice"));
            }
            seen.push(name);
            match name {
                "ack" => mix.ack = weight,
                "mention" => mix.mention = weight,
                "get" => mix.get = weight,
                other => return Err(format!("unknown kind `{other}` (use ack, mention, get)")),
            }
        }
        if u64::from(mix.ack) + u64::from(mix.mention) + u64::from(mix.get) == 0 {
            return Err("the mix has no weight at all".to_owned());
        }
        if u64::from(mix.ack) + u64::from(mix.mention) + u64::from(mix.get) > u64::from(u32::MAX) {
            return Err("the weights add up to more than 2^32 - 1".to_owned());
        }
        Ok(mix)
    }
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ack:{},mention:{},get:{}",
            self.ack, self.mention, self.get
        )
    }
}

/// What one connection sends.
struct Generator {
    rng: SmallRng,
    users: Zipf<f64>,
    channels: u64,
    mix: Mix,
    /// Message ids of this connection's acks: `sequence * connections + index + 1`, unique
    /// across connections and increasing.
    next_id: u64,
    id_step: u64,
    /// `--traced`: this connection's trace seed, and the requests sent so far.
    traced: Option<(u64, u64)>,
}

impl Generator {
    /// The next request, and its frame in `wire` (replaced).
    fn frame(&mut self, wire: &mut Vec<u8>) -> Request {
        let req = self.next();
        let trace = self.traced.as_mut().map(|(seed, n)| {
            *n += 1;
            TraceParent::nth(*seed, *n)
        });
        wire.clear();
        req.encode_traced(trace, wire);
        req
    }

    fn next(&mut self) -> Request {
        // A Zipf sample is a whole number in 1..=users, as a float.
        let user = self.users.sample(&mut self.rng) as u64;
        let channel = self.rng.random_range(1..=self.channels);
        let key = Key::new(user, channel);
        let total = self.mix.ack + self.mix.mention + self.mix.get;
        let pick = self.rng.random_range(0..total);
        if pick < self.mix.ack {
            let message_id = self.next_id;
            self.next_id += self.id_step;
            Request::Ack { key, message_id }
        } else if pick < self.mix.ack + self.mix.mention {
            Request::Mention { key }
        } else {
            Request::Get { key }
        }
    }
}

/// Whether a response is the right one for `req` (status OK and the state an ack implies).
fn plausible(req: &Request, resp: &Response) -> bool {
    resp.status == STATUS_OK
        && match *req {
            Request::Ack { message_id, .. } => {
                resp.state
                    == ReadState {
                        last_read: message_id,
                        mentions: 0,
                    }
            }
            Request::Mention { .. } => resp.state.mentions >= 1,
            Request::Get { .. } => true,
        }
}

fn main() -> ExitCode {
    switchyard_harness::exit_code("read-state-cache-driver", run(Args::parse()))
}

/// Lets this thread's sleeps end within a few microseconds of their deadline (the default
/// timer slack is 50 µs), so a fixed-rate schedule is kept closely.
fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// Requests per batch when prefilling.
const PREFILL_BATCH: u64 = 512;

/// Gets keys `first, first + step, …` below `count` on `stream`, a batch at a time.
fn prefill(
    stream: &mut TcpStream,
    first: u64,
    step: u64,
    count: u64,
    channels: u64,
) -> anyhow::Result<u64> {
    let mut wire = Vec::with_capacity(PREFILL_BATCH as usize * 21);
    let mut responses = vec![0u8; PREFILL_BATCH as usize * RESPONSE_LEN];
    let mut i = first;
    let mut sent = 0;
    while i < count {
        wire.clear();
        let mut n = 0;
        while n < PREFILL_BATCH && i < count {
            let key = Key::new(i / channels + 1, i % channels + 1);
            Request::Get { key }.encode(&mut wire);
            i += step;
            n += 1;
        }
        stream.write_all(&wire).context("prefill: failed to send")?;
        let responses = &mut responses[..n as usize * RESPONSE_LEN];
        stream
            .read_exact(responses)
            .context("prefill: failed to read the responses")?;
        for chunk in responses.chunks_exact(RESPONSE_LEN) {
            let mut b = [0u8; RESPONSE_LEN];
            b.copy_from_slice(chunk);
            let resp = Response::decode(&b).context("prefill: bad response")?;
            if resp.status != STATUS_OK {
                bail!("prefill: the server answered status {}", resp.status);
            }
        }
        sent += n;
    }
    Ok(sent)
}

/// What one connection thread brings back.
struct Connection {
    recorder: Recorder,
    errors: u64,
    finished: Instant,
    failure: Option<io::Error>,
    first_wrong: Option<(Request, Response)>,
}

/// The fixed-rate schedule of one connection: request `k` is due at
/// `start + offset + k * interval`.
#[derive(Clone, Copy)]
struct Schedule {
    interval_ns: f64,
    offset_ns: f64,
}

fn drive(
    stream: TcpStream,
    generator: Generator,
    schedule: Option<Schedule>,
    start: Instant,
    budget: &Budget,
    recorder: Recorder,
) -> Connection {
    match schedule {
        None => closed_loop(stream, generator, budget, recorder),
        Some(schedule) => match stream.try_clone() {
            Ok(writer) => open_loop(stream, writer, generator, schedule, start, budget, recorder),
            Err(e) => Connection {
                recorder,
                errors: 0,
                finished: Instant::now(),
                failure: Some(e),
                first_wrong: None,
            },
        },
    }
}

/// What a connection's answers came to.
struct Tally {
    errors: u64,
    failure: Option<io::Error>,
    first_wrong: Option<(Request, Response)>,
}

impl Tally {
    fn new() -> Self {
        Self {
            errors: 0,
            failure: None,
            first_wrong: None,
        }
    }

    /// Checks and records one answer; `false` when the connection is gone.
    fn answer(
        &mut self,
        req: Request,
        reply: io::Result<Response>,
        latency: Duration,
        done: Instant,
        recorder: &mut Recorder,
    ) -> bool {
        match reply {
            Ok(resp) if plausible(&req, &resp) => {
                recorder.record(latency, done);
                true
            }
            Ok(resp) => {
                self.errors += 1;
                self.first_wrong.get_or_insert((req, resp));
                true
            }
            Err(e) => {
                // The connection is gone: this request failed, and so would the rest.
                self.errors += 1;
                self.failure = Some(e);
                false
            }
        }
    }

    fn into_connection(self, recorder: Recorder) -> Connection {
        Connection {
            recorder,
            errors: self.errors,
            finished: Instant::now(),
            failure: self.failure,
            first_wrong: self.first_wrong,
        }
    }
}

/// One request in flight at a time: send, wait for the answer, send the next.
fn closed_loop(
    mut stream: TcpStream,
    mut generator: Generator,
    budget: &Budget,
    mut recorder: Recorder,
) -> Connection {
    let mut tally = Tally::new();
    let mut wire = Vec::with_capacity(32);
    while budget.next() {
        let req = generator.frame(&mut wire);
        let sent = Instant::now();
        let reply = stream
            .write_all(&wire)
            .and_then(|()| Response::read(&mut stream));
        let done = Instant::now();
        if !tally.answer(req, reply, done - sent, done, &mut recorder) {
            break;
        }
    }
    tally.into_connection(recorder)
}

/// A sender thread writes requests on schedule whatever the answers do; this thread reads
/// the answers in order and times each from when its request was written. A server stall
/// delays every request sent during it, each by what it waited; a sender that wakes up late
/// sends late, which is the driver's delay and is not counted.
fn open_loop(
    mut reader: TcpStream,
    mut writer: TcpStream,
    mut generator: Generator,
    schedule: Schedule,
    start: Instant,
    budget: &Budget,
    mut recorder: Recorder,
) -> Connection {
    let (in_flight, answers) = mpsc::channel::<(Instant, Request)>();
    let mut tally = Tally::new();
    let receiver_gone = AtomicBool::new(false);
    let send_failure = thread::scope(|s| {
        let sender = s.spawn(|| {
            tight_timer_slack();
            let mut wire = Vec::with_capacity(32);
            let mut k = 0u64;
            while !receiver_gone.load(Ordering::Relaxed) && budget.next() {
                let req = generator.frame(&mut wire);
                let due = start
                    + Duration::from_nanos(
                        (schedule.offset_ns + k as f64 * schedule.interval_ns) as u64,
                    );
                k += 1;
                let now = Instant::now();
                if due > now {
                    thread::sleep(due - now);
                }
                if in_flight.send((Instant::now(), req)).is_err() {
                    break;
                }
                if let Err(e) = writer.write_all(&wire) {
                    return Some(e);
                }
            }
            // Dropping `in_flight` tells the receiver that nothing more is coming.
            drop(in_flight);
            None
        });
        for (sent, req) in answers.iter() {
            let reply = Response::read(&mut reader);
            let done = Instant::now();
            if !tally.answer(req, reply, done - sent, done, &mut recorder) {
                receiver_gone.store(true, Ordering::Relaxed);
                // Unblock a sender stuck in a full socket buffer.
                let _ = reader.shutdown(std::net::Shutdown::Both);
                break;
            }
        }
        drop(answers);
        sender.join().ok().flatten()
    });
    if tally.failure.is_none()
        && let Some(e) = send_failure
    {
        tally.errors += 1;
        tally.failure = Some(e);
    }
    tally.into_connection(recorder)
}

/// Fills the cache before the measured run: gets the first `capacity` keys over all the
/// connections at once, each its share in turn, unmeasured. The keys sent.
fn prefill_all(streams: &mut [TcpStream], capacity: u64, channels: u64) -> anyhow::Result<u64> {
    let began = Instant::now();
    let step = streams.len() as u64;
    let sent = thread::scope(|s| {
        let handles: Vec<_> = streams
            .iter_mut()
            .enumerate()
            .map(|(i, stream)| s.spawn(move || prefill(stream, i as u64, step, capacity, channels)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a prefill thread panicked"))?
            })
            .sum::<anyhow::Result<u64>>()
    })?;
    eprintln!(
        "read-state-cache-driver: prefilled {sent} keys in {:.2} s",
        began.elapsed().as_secs_f64()
    );
    Ok(sent)
}

impl Schedule {
    /// Connection `i`'s share of `rate` requests/s over `connections` (the connections'
    /// requests interleaved evenly); `None` for the closed loop (rate 0).
    fn nth(rate: u64, connections: u32, i: u32) -> Option<Schedule> {
        (rate > 0).then(|| {
            let interval_ns = 1e9 * f64::from(connections) / rate as f64;
            Schedule {
                interval_ns,
                offset_ns: interval_ns * f64::from(i) / f64::from(connections),
            }
        })
    }
}

impl Generator {
    /// Connection `i`'s requests, as the flags say: its own seed and message ids, and with
    /// `--traced` its own traces.
    fn nth(args: &Args, users: Zipf<f64>, i: u32) -> Generator {
        Generator {
            rng: SmallRng::seed_from_u64(args.seed.wrapping_add(u64::from(i))),
            users,
            channels: args.channels_per_user,
            mix: args.mix,
            next_id: u64::from(i) + 1,
            id_step: u64::from(args.connections),
            // Each connection's traces its own: the pid and its index seed them.
            traced: args
                .traced
                .then(|| (u64::from(std::process::id()) << 16 | u64::from(i), 0)),
        }
    }
}

/// Says which connections were lost, and the first wrong answer each got.
fn report_failures(connections: &[Connection]) {
    for (i, c) in connections.iter().enumerate() {
        if let Some(e) = &c.failure {
            eprintln!("read-state-cache-driver: connection {i}: connection lost: {e}");
        }
        if let Some((req, resp)) = &c.first_wrong {
            eprintln!("read-state-cache-driver: connection {i}: {req:?} was answered {resp:?}");
        }
    }
}

/// The result's parameters: the flags, the keys prefilled, the cores and when the load
/// started.
fn parameters(
    args: &Args,
    bound: RunBound,
    prefilled: u64,
    started: &Started,
) -> BTreeMap<String, serde_json::Value> {
    let mut parameters = BTreeMap::from([
        (
            "connections".to_owned(),
            serde_json::json!(args.connections),
        ),
        ("rate".to_owned(), serde_json::json!(args.rate)),
        ("users".to_owned(), serde_json::json!(args.users)),
        (
            "channels_per_user".to_owned(),
            serde_json::json!(args.channels_per_user),
        ),
        ("zipf".to_owned(), serde_json::json!(args.zipf)),
        ("mix".to_owned(), serde_json::json!(args.mix.to_string())),
        ("prefill".to_owned(), serde_json::json!(prefilled)),
        ("seed".to_owned(), serde_json::json!(args.seed)),
        (
            "cores".to_owned(),
            serde_json::json!(thread::available_parallelism().map_or(1, |n| n.get())),
        ),
        (
            "start_unix_ns".to_owned(),
            serde_json::json!(started.unix_ns),
        ),
        (
            "start_monotonic_ns".to_owned(),
            serde_json::json!(started.monotonic_ns),
        ),
    ]);
    let (key, value) = bound.parameter();
    parameters.insert(key.to_owned(), value);
    parameters
}

/// Prints the run's summary line: operations, errors, the latency percentiles and the window
/// of the worst, the result file.
fn print_summary(result: &DriverResult, out: &Path) -> anyhow::Result<()> {
    let p = result.latency_ns;
    let worst = result.windows.iter().max_by_key(|w| w.max_ns);
    let line = format!(
        "{WORKLOAD} {}: {} ops in {:.2} s ({:.0}/s), {} errors; latency p50 {} p99 {} p99.9 {} p99.99 {} max {}{}; wrote {}",
        result.build,
        result.operations,
        result.duration_ns as f64 / 1e9,
        result.throughput_per_s,
        result.errors,
        human_ns(p.p50),
        human_ns(p.p99),
        human_ns(p.p99_9),
        human_ns(p.p99_99),
        human_ns(p.max),
        worst.map_or(String::new(), |w| format!(
            " (in the window at {:.1} s)",
            w.start_ms as f64 / 1e3
        )),
        out.display()
    );
    print_line(&line).context("failed to print the summary")
}

/// Connects, prefills if asked, runs the load on every connection, writes the result and
/// prints its summary.
fn run(args: Args) -> anyhow::Result<()> {
    if !args.addr.ip().is_loopback() {
        bail!(
            "{} is not a loopback address; the servers listen on 127.0.0.1 only",
            args.addr
        );
    }
    if !(args.zipf >= 0.0 && args.zipf.is_finite()) {
        bail!("--zipf {} must be a number ≥ 0", args.zipf);
    }
    if args.capacity == Some(0) {
        bail!("--capacity must be at least 1");
    }
    let bound = args.bound.bound()?;
    let shutdown = Shutdown::install().context("failed to install the SIGINT/SIGTERM handler")?;
    let window = args.timing.window();
    let users = Zipf::new(args.users as f64, args.zipf)
        .map_err(|e| anyhow::anyhow!("--users {} --zipf {}: {e}", args.users, args.zipf))?;

    let mut streams = (0..args.connections)
        .map(|_| {
            args.timing
                .connect(args.addr, "`read-state-cache` (or the Go build)")
        })
        .collect::<Result<Vec<_>, _>>()?;

    let prefilled = match (args.prefill || args.prefill_only, args.capacity) {
        (true, Some(capacity)) => prefill_all(&mut streams, capacity, args.channels_per_user)?,
        _ => 0,
    };
    if args.prefill_only {
        return Ok(());
    }
    let Some(out_path) = args.out.as_deref() else {
        bail!("--out is required for a measured run");
    };

    let generators = (0..args.connections).map(|i| Generator::nth(&args, users, i));
    let (started, connections) = run_together(
        "connection",
        streams.into_iter().zip(generators).collect(),
        bound,
        &shutdown,
        |i, (stream, generator), start, budget| {
            let recorder = Recorder::new(start, window);
            drive(
                stream,
                generator,
                Schedule::nth(args.rate, args.connections, i as u32),
                start,
                budget,
                recorder,
            )
        },
    )?;
    let start = started.at;

    let (recorder, errors, end) = merge_threads(
        start,
        window,
        connections
            .iter()
            .map(|c| (&c.recorder, c.errors, c.finished)),
    )
    .context("failed to merge latencies")?;
    report_failures(&connections);
    let parameters = parameters(&args, bound, prefilled, &started);
    let result = DriverResult::new(
        WORKLOAD,
        &args.build,
        parameters,
        &recorder,
        errors,
        end - start,
    )?;
    result.write(out_path)?;

    print_summary(&result, out_path)?;
    if connections.iter().any(|c| c.failure.is_some()) && !shutdown.requested() {
        bail!("the server closed connections during the run (result written with the errors)");
    }
    if connections.iter().any(|c| c.first_wrong.is_some()) {
        bail!("the server gave wrong answers (result written with the errors)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes() {
        assert_eq!(
            "ack:40,mention:30,get:30".parse(),
            Ok(Mix {
                ack: 40,
                mention: 30,
                get: 30
            })
        );
        assert_eq!(
            "get:1".parse(),
            Ok(Mix {
                ack: 0,
                mention: 0,
                get: 1
            })
        );
        assert!("ack:1,ack:2".parse::<Mix>().is_err());
        assert!("read:1".parse::<Mix>().is_err());
        assert!("ack:0".parse::<Mix>().is_err());
        assert!("ack".parse::<Mix>().is_err());
        assert!("ack:-1".parse::<Mix>().is_err());
    }

    #[test]
    fn generated_requests_follow_the_flags() {
        let mut g = Generator {
            rng: SmallRng::seed_from_u64(7),
            users: Zipf::new(1000.0, 1.1).expect("zipf"),
            channels: 3,
            mix: Mix {
                ack: 1,
                mention: 0,
                get: 1,
            },
            next_id: 2,
            id_step: 4,
            traced: None,
        };
        let mut ids = Vec::new();
        let mut user_one = 0;
        for _ in 0..10_000 {
            let req = g.next();
            let key = req.key();
            assert!((1..=1000).contains(&key.user) && (1..=3).contains(&key.channel));
            user_one += u32::from(key.user == 1);
            match req {
                Request::Ack { message_id, .. } => ids.push(message_id),
                Request::Mention { .. } => panic!("mention has weight 0"),
                Request::Get { .. } => {}
            }
        }
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 4));
        // Zipf 1.1 over 1000 users: user 1 gets about a fifth of all requests.
        assert!(user_one > 1_000, "user 1 drawn {user_one} times");
    }
}
