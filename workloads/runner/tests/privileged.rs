//! Real runs: switchyard records a workload server under load, spawned (the broker) and
//! attached after its prefill (the Rust cache), and finds the broker's traced messages by the
//! span ids it publishes. They need root (eBPF) and the binaries beside
//! this one (`cargo build --bins`, as `just test` runs first). Without either they skip with
//! the reason; under CI=true a skip is a failure. Run them one at a time
//! (`--test-threads=1`): they share the kernel's probes.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use switchyard_model::{Run, TargetMode};

fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard-workload"))
        .parent()
        .expect("a directory")
        .to_path_buf()
}

/// Whether the test can run; prints why not, and panics instead under CI.
fn can_run(test: &str, needs: &[&str]) -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let why = if unsafe { libc::geteuid() } != 0 {
        Some("needs root (eBPF)".to_string())
    } else {
        needs
            .iter()
            .map(|n| bin_dir().join(n))
            .find(|p| !p.exists())
            .map(|p| format!("{} is not built (cargo build --bins)", p.display()))
    };
    match why {
        None => true,
        Some(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: {why}; under CI=true this is a failure, not a skip")
        }
        Some(why) => {
            eprintln!("skipped {test}: {why}");
            false
        }
    }
}

#[track_caller]
fn run(args: &[&str], out: &Path) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_switchyard-workload"))
        .args(["--bin-dir", bin_dir().to_str().unwrap()])
        .arg("run")
        .args(&args[..2])
        .arg(out)
        .args(&args[2..])
        .env_remove("AS_BUILD")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "switchyard-workload run {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for f in [
        "run.json",
        "result.json",
        "index.html",
        "record.err",
        "driver.out",
    ] {
        assert!(out.join(f).exists(), "{f} was not written");
    }
    Run::load(&out.join("run.json")).expect("a run file of this version")
}

#[test]
fn broker_spawned_with_its_acquire_span() {
    let needs = ["switchyard", "spinlock-broker", "spinlock-broker-driver"];
    if !can_run("broker_spawned_with_its_acquire_span", &needs) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = run(
        &["spinlock-broker", "mutex", "producers=2", "--seconds", "1"],
        dir.path(),
    );
    assert_eq!(run.meta.mode, TargetMode::Spawn);
    let ops = run.operations.expect("the driver's operation count");
    assert!(ops > 0);
    let w = run.workload.as_ref().expect("the driver's result");
    assert_eq!(w.build, "mutex");
    let span = run
        .locks
        .spans
        .iter()
        .find(|s| s.label == "acquire")
        .expect("the acquire span");
    assert_eq!(span.symbol, "broker_mutex_acquire");
    // Every message takes the lock once: acquisitions at least the messages acked.
    assert!(
        span.stats.count >= ops,
        "{} acquisitions for {ops} messages",
        span.stats.count
    );
}

#[test]
fn cache_attached_after_its_prefill() {
    let needs = ["switchyard", "read-state-cache", "read-state-cache-driver"];
    if !can_run("cache_attached_after_its_prefill", &needs) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = run(
        &[
            "read-state-cache",
            "rust",
            "capacity=20000",
            "rate=2000",
            "--seconds",
            "1",
        ],
        dir.path(),
    );
    assert_eq!(run.meta.mode, TargetMode::Pid);
    assert!(run.operations.is_some_and(|o| o > 0));
    assert!(dir.path().join("server.err").exists());
    assert!(dir.path().join("prefill.out").exists());
}

/// A server spawned under `switchyard record` and driven with traced requests: the run, and
/// each request as it measured itself (span id, trace id, off CPU as wall minus CPU time,
/// waiting for a CPU), from the server's `--spans-out`.
struct Traced {
    run: Run,
    own: Vec<(String, String, u64, u64)>,
}

fn record_traced(server: &str, server_args: &[&str], driver: &str, driver_args: &[&str]) -> Traced {
    let dir = tempfile::tempdir().unwrap();
    let (run_path, own_path) = (dir.path().join("run.json"), dir.path().join("own.txt"));
    let mut record = Command::new(bin_dir().join("switchyard"));
    record
        .args(["record", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(bin_dir().join(server))
        .args(server_args)
        .args(["--exit-after-idle", "300", "--spans-out"])
        .arg(&own_path)
        .stderr(std::process::Stdio::piped());
    let recorder = switchyard_harness::ServerProcess::spawn(record, Duration::from_secs(60))
        .expect("the server ready under switchyard");
    let driven = Command::new(bin_dir().join(driver))
        .args(["--addr", &recorder.addr().to_string()])
        .args(driver_args)
        .args(["--traced", "--out"])
        .arg(dir.path().join("result.json"))
        .output()
        .unwrap();
    assert!(driven.status.success(), "{driven:?}");
    let exit = recorder
        .wait(Duration::from_secs(120))
        .expect("switchyard exits");
    assert!(exit.status.success(), "{:?}", exit.status);
    let run = Run::load(&run_path).expect("a run file of this version");
    let own = std::fs::read_to_string(&own_path)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            (
                f[0].to_string(),
                f[1].to_string(),
                n(2).saturating_sub(n(3)),
                n(4),
            )
        })
        .collect();
    Traced { run, own }
}

/// Every request off CPU for `min_off` ns or more has, by its span id, switchyard's time off
/// CPU within 10% + `slack` of its own, and over all of them within 5%. A switch the kernel
/// did not report leaves its interval to the nearest reported one, so the requests on either
/// side of each unreported switch may be off, and two plus one in twenty besides. A request whose
/// span no switch-out saw, and that waited for no CPU, never left its CPU as the guest
/// kernel sees it: what it measured off CPU is the hypervisor's (steal time, which wall
/// minus CPU time counts), and up to one in twenty such are set apart, printed. Returns (off CPU by span id, as measured,
/// waiting for a CPU by span id, schedstat's), ns, over the matching ones.
fn assert_spans_found(
    t: &Traced,
    server: &str,
    min_off: u64,
    slack: u64,
    at_least: usize,
) -> [u64; 4] {
    let otel = t
        .run
        .otel_spans
        .as_ref()
        .expect("the server's thread context was read");
    assert!(otel.source.contains(server), "{}", otel.source);
    assert_eq!(otel.refused, 0);
    assert_eq!(otel.table_full, 0);
    let spans: HashMap<&str, &switchyard_model::OtelSpan> =
        otel.spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let slow: Vec<_> = t.own.iter().filter(|r| r.2 >= min_off).collect();
    assert!(
        slow.len() >= at_least,
        "{} requests off CPU {min_off} ns or more",
        slow.len()
    );
    let mut sums = [0u64; 4];
    let (mut off, mut stolen) = (Vec::new(), Vec::new());
    for (span_id, trace_id, off_cpu, cpu_wait) in &slow {
        let s = spans.get(span_id.as_str());
        let got = s.map_or(0, |s| s.blocked_ns + s.runqueue_ns);
        match s {
            Some(s) if got.abs_diff(*off_cpu) <= off_cpu / 10 + slack => {
                assert_eq!(&s.trace_id, trace_id, "span {span_id}");
                for (sum, v) in sums.iter_mut().zip([got, *off_cpu, s.runqueue_ns, *cpu_wait]) {
                    *sum += v;
                }
            }
            None if *cpu_wait == 0 => stolen.push(format!(
                "span {span_id}: not seen at a switch, the request measured {off_cpu} off CPU"
            )),
            _ => off.push(format!(
                "span {span_id}: off CPU {got} ns, the request measured {off_cpu} (waiting for a CPU {cpu_wait}); {}",
                s.map_or("not seen".to_string(), |s| format!(
                    "blocked {} ns, waiting {} ns, {} switches, on CPU {} ns, changed {} ns",
                    s.blocked_ns, s.runqueue_ns, s.switches, s.oncpu_ns, s.changed_ns
                ))
            )),
        }
    }
    let unreported = t.run.meta.unreported_switches;
    eprintln!(
        "{server}: thread contexts read {}, not valid {}, unreadable {}, refused {}, table full {}",
        otel.read, otel.not_valid, otel.unreadable, otel.refused, otel.table_full
    );
    for s in &stolen {
        eprintln!("{server}: set apart, off CPU with no switch: {s}");
    }
    assert!(
        stolen.len() <= 1 + slow.len() / 20,
        "{} requests off CPU with no switch:\n{}",
        stolen.len(),
        stolen.join("\n")
    );
    eprintln!(
        "{server}: {} requests, {} off CPU {:.1} ms or more: {} match (off CPU {:.1} ms by their span ids, {:.1} ms as they measured it; waiting for a CPU {:.1} ms against their run delay {:.1} ms); {} off, {} set apart (off CPU with no switch), {unreported} switches unreported",
        t.own.len(),
        slow.len(),
        min_off as f64 / 1e6,
        slow.len() - off.len() - stolen.len(),
        sums[0] as f64 / 1e6,
        sums[1] as f64 / 1e6,
        sums[2] as f64 / 1e6,
        sums[3] as f64 / 1e6,
        off.len(),
        stolen.len()
    );
    for s in &off {
        eprintln!("{server}: off: {s}");
    }
    // A few requests in a hundred come out off with every switch reported, on a host under
    // load: for example 55.7 µs found by span id against 323 µs measured, of which 88.7 µs
    // waiting for a CPU (the rest, unseen by the guest, is the hypervisor's); or 167.6 µs
    // against a run delay of 252.5 µs. Their cause is not found; the sum below holds.
    assert!(
        off.len() as u64 <= 2 * unreported + 2 + slow.len() as u64 / 20,
        "{} off with {unreported} switches unreported:\n{}",
        off.len(),
        off.join("\n")
    );
    assert!(
        (0.95..=1.05).contains(&(sums[0] as f64 / sums[1] as f64)),
        "off CPU {} against {}",
        sums[0],
        sums[1]
    );
    sums
}

/// The broker publishes each traced message as a span of its trace in the OpenTelemetry thread
/// context (OTEP 4947), and writes what each measured of itself. switchyard, with no probe per
/// message, must find each slow message's time off CPU by its span id where the message found
/// it. The spin lock on 2 CPUs with 6 producers makes messages that wait for a CPU for
/// milliseconds, preempted mid-spin.
#[test]
fn broker_messages_found_by_their_span_ids() {
    let needs = ["switchyard", "spinlock-broker", "spinlock-broker-driver"];
    if !can_run("broker_messages_found_by_their_span_ids", &needs) {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let t = record_traced(
        "spinlock-broker",
        &["--lock", "spin", "--dir", scratch.path().to_str().unwrap()],
        "spinlock-broker-driver",
        // A number of messages, not a time: every message is a span, and the kernel keeps at
        // most otel::MAX_SPANS of them in a recording (65,536). Three seconds of a 6-producer
        // broker were 183,000 messages on a host where getppid takes 76 ns.
        &["--producers", "6", "--ops", "60000"],
    );
    let [.., waited, wait_own] = assert_spans_found(&t, "spinlock-broker", 1_000_000, 300_000, 10);
    // Blocked against waiting for a CPU is the wakeup's to tell: a preempted spinner waits for
    // a CPU, as schedstat says.
    assert!(
        (0.90..=1.10).contains(&(waited as f64 / wait_own as f64)),
        "waiting for a CPU {waited} against {wait_own}"
    );
}

/// The Rust cache applies each traced request as a span in its worker's thread context: a
/// tokio server whose spans never cross an await. One shard, flushed every 50 ms, and 16
/// connections on 2 CPUs: requests block on the shard's lock behind a flush pass, and wait for
/// a CPU. Their waits are hundreds of microseconds, so the bar is 200 µs within 10% + 50 µs
/// (wall minus CPU time also counts the VM's steal and interrupt time, tens of µs at most).
#[test]
fn cache_requests_found_by_their_span_ids() {
    let needs = ["switchyard", "read-state-cache", "read-state-cache-driver"];
    if !can_run("cache_requests_found_by_their_span_ids", &needs) {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let t = record_traced(
        "read-state-cache",
        &[
            "--shards",
            "1",
            "--capacity",
            "1000000",
            "--flush-interval",
            "50ms",
            "--data-dir",
            scratch.path().to_str().unwrap(),
        ],
        "read-state-cache-driver",
        &[
            "--connections",
            "16",
            "--users",
            "100000",
            "--mix",
            "ack:50,mention:50,get:0",
            "--duration",
            "3s",
        ],
    );
    let otel = t.run.otel_spans.as_ref().unwrap();
    assert!(
        otel.spans.iter().any(|s| s.blocked_ns > 0),
        "no span blocked on the shard's lock"
    );
    assert_spans_found(&t, "read-state-cache", 200_000, 50_000, 10);
}

/// The Rust asset server prepares a request with a W3C `traceparent` header as a span in its
/// blocking thread's context. Four downloads at a time on 2 CPUs: each compression waits
/// for a CPU for milliseconds. A request takes a few ms optimised and hundreds unoptimised,
/// so the run is bounded by its count, not its time.
#[test]
fn asset_requests_found_by_their_span_ids() {
    let needs = [
        "switchyard",
        "asset-server",
        "asset-server-driver",
        "asset-models",
    ];
    if !can_run("asset_requests_found_by_their_span_ids", &needs) {
        return;
    }
    let models = tempfile::tempdir().unwrap();
    let made = Command::new(bin_dir().join("asset-models"))
        .arg("--out")
        .arg(models.path())
        .args(["--sizes", "1,2"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let dir = models.path().to_str().unwrap();
    let t = record_traced(
        "asset-server",
        &["--codec", "zstd", "--models", dir],
        "asset-server-driver",
        &["--models", dir, "--concurrency", "4", "--requests", "24"],
    );
    assert_eq!(t.own.len(), 24);
    assert_spans_found(&t, "asset-server", 1_000_000, 300_000, 12);
}
