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
    let dir = tempfile::tempdir().unwrap();
    let (run_path, own_path) = (dir.path().join("run.json"), dir.path().join("own.txt"));
    let mut record = Command::new(bin_dir().join("switchyard"));
    record
        .args(["record", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(bin_dir().join("spinlock-broker"))
        .args(["--lock", "spin", "--exit-after-idle", "300", "--dir"])
        .arg(dir.path())
        .arg("--spans-out")
        .arg(&own_path)
        .stderr(std::process::Stdio::piped());
    let recorder = switchyard_harness::ServerProcess::spawn(record, Duration::from_secs(60))
        .expect("the broker ready under switchyard");
    let driven = Command::new(bin_dir().join("spinlock-broker-driver"))
        .args(["--addr", &recorder.addr().to_string()])
        .args(["--producers", "6", "--duration", "3s", "--traced", "--out"])
        .arg(dir.path().join("result.json"))
        .output()
        .unwrap();
    assert!(driven.status.success(), "{driven:?}");
    let exit = recorder
        .wait(Duration::from_secs(120))
        .expect("switchyard exits");
    assert!(exit.status.success(), "{:?}", exit.status);
    let run = Run::load(&run_path).expect("a run file of this version");
    let otel = run
        .otel_spans
        .as_ref()
        .expect("the broker's thread context was read");
    assert!(otel.source.contains("spinlock-broker"), "{}", otel.source);
    assert_eq!(otel.refused, 0);
    assert_eq!(otel.table_full, 0);
    let spans: HashMap<&str, &switchyard_model::OtelSpan> =
        otel.spans.iter().map(|s| (s.span_id.as_str(), s)).collect();

    // span id, trace id, wall, on CPU, waiting for a CPU.
    let own = std::fs::read_to_string(&own_path).unwrap();
    let own: Vec<(&str, &str, u64, u64)> = own
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            (f[0], f[1], n(2).saturating_sub(n(3)), n(4))
        })
        .collect();
    assert!(own.len() > 1000, "{} messages", own.len());
    // Every message off CPU for a millisecond or more: within 10% + 300 µs of its own figure.
    // A switch the kernel did not report leaves its interval to the nearest reported one, so
    // as many messages as the run counts unreported switches may be off.
    let slow: Vec<&(&str, &str, u64, u64)> = own
        .iter()
        .filter(|(_, _, off, _)| *off >= 1_000_000)
        .collect();
    assert!(
        slow.len() >= 10,
        "{} messages off CPU 1 ms or more",
        slow.len()
    );
    let within = |got: u64, want: u64| got.abs_diff(want) <= want / 10 + 300_000;
    let (mut theirs, mut ours, mut waited, mut wait_own) = (0u64, 0u64, 0u64, 0u64);
    let mut off = Vec::new();
    for (span_id, trace_id, off_cpu, cpu_wait) in &slow {
        let s = spans.get(span_id);
        let got = s.map_or(0, |s| s.blocked_ns + s.runqueue_ns);
        match s {
            Some(s) if within(got, *off_cpu) => {
                assert_eq!(s.trace_id, *trace_id, "span {span_id}");
                theirs += off_cpu;
                ours += got;
                waited += s.runqueue_ns;
                wait_own += cpu_wait;
            }
            _ => off.push(format!(
                "span {span_id}: off CPU {got} ns, the message measured {off_cpu} (waiting for a CPU {cpu_wait})"
            )),
        }
    }
    let unreported = run.meta.unreported_switches;
    eprintln!(
        "{} messages, {} off CPU 1 ms or more: {} match (off CPU {:.1} ms by their span ids, {:.1} ms as they measured it; waiting for a CPU {:.1} ms against their run delay {:.1} ms); {} off, {unreported} switches unreported",
        own.len(),
        slow.len(),
        slow.len() - off.len(),
        ours as f64 / 1e6,
        theirs as f64 / 1e6,
        waited as f64 / 1e6,
        wait_own as f64 / 1e6,
        off.len()
    );
    assert!(off.len() as u64 <= unreported, "{}", off.join("\n"));
    assert!(
        (0.95..=1.05).contains(&(ours as f64 / theirs as f64)),
        "off CPU {ours} against {theirs}"
    );
    // Blocked against waiting for a CPU is the wakeup's to tell: a preempted spinner waits for
    // a CPU, as schedstat says.
    assert!(
        (0.90..=1.10).contains(&(waited as f64 / wait_own as f64)),
        "waiting for a CPU {waited} against {wait_own}"
    );
}
