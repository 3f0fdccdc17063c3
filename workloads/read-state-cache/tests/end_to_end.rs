//! The servers and the driver as processes: short runs against both builds, checking the
//! driver result and that the server's summary counts the same requests.

mod support;

use std::{process::Command, time::Duration};

use support::{Server, servers, summary};
use switchyard_harness::{DriverResult, Measured as _};

const DRIVER: &str = env!("CARGO_BIN_EXE_read-state-cache-driver");

struct Run<'a> {
    capacity: u64,
    driver_args: &'a [&'a str],
    prefill: bool,
}

#[track_caller]
fn run(server: &Server, r: &Run<'_>) -> (DriverResult, serde_json::Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let capacity = r.capacity.to_string();
    let p = server.start_in(
        &dir.path().join("data"),
        &[
            "--capacity",
            &capacity,
            "--flush-interval",
            "200ms",
            "--exit-after-idle",
            "300",
        ],
    );
    let out = dir.path().join("result.json");
    let mut driver = Command::new(DRIVER);
    driver
        .args(["--addr", &p.addr().to_string(), "--build", server.build])
        .args(["--users", "2000", "--channels-per-user", "4"])
        .args(r.driver_args);
    if r.prefill {
        driver.args(["--prefill", "--capacity", &capacity]);
    }
    let driven = driver.arg("--out").arg(&out).output().expect("driver runs");
    assert!(
        driven.status.success(),
        "{}: driver failed: {}\n{}{}",
        server.build,
        driven.status,
        String::from_utf8_lossy(&driven.stdout),
        String::from_utf8_lossy(&driven.stderr)
    );
    let s = summary(p.wait(Duration::from_secs(30)).expect("server exits"));
    let result = DriverResult::read(&out).expect("driver result");
    (result, s)
}

#[track_caller]
fn check_result(r: &DriverResult, build: &str) {
    assert_eq!(r.format, "switchyard-driver-result");
    assert_eq!(r.workload, "read-state-cache");
    assert_eq!(r.build, build);
    assert_eq!(r.parameters["users"], 2000);
    assert_eq!(r.parameters["channels_per_user"], 4);
    assert_eq!(r.parameters["mix"], "ack:40,mention:30,get:30");
    assert!(
        r.parameters["start_monotonic_ns"]
            .as_u64()
            .is_some_and(|t| t > 0)
    );
    assert!(r.operations > 0, "{build}: no operations");
    assert_eq!(r.errors, 0, "{build}");
    let p = r.latency_ns;
    let ordered = [p.p50, p.p90, p.p99, p.p99_9, p.p99_99, p.max];
    assert!(
        p.p50 > 0 && ordered.windows(2).all(|w| w[0] <= w[1]),
        "{build}: {p:?}"
    );
    assert_eq!(r.latency().expect("histogram").count(), r.operations);
    assert_eq!(r.window_ms, 100);
    assert_eq!(
        r.windows.iter().map(|w| w.operations).sum::<u64>(),
        r.operations
    );
}

#[track_caller]
fn check_summary(s: &serde_json::Value, requests: u64, build: &str) {
    assert_eq!(s["server"], build, "{s}");
    assert_eq!(s["ended_by"], "idle", "{s}");
    assert_eq!(
        s["requests"], requests,
        "{build}: every request counted once: {s}"
    );
    let n = |k: &str| {
        s[k].as_u64()
            .unwrap_or_else(|| panic!("{build}: no `{k}` in {s}"))
    };
    assert_eq!(n("acks") + n("mentions") + n("gets"), requests);
    assert_eq!(n("hits") + n("misses"), requests);
    assert_eq!(n("store_errors"), 0, "{s}");
    assert_eq!(n("bad_requests"), 0, "{s}");
    assert_eq!(n("connection_errors"), 0, "{s}");
    assert!(n("flushes") >= 1, "{s}");
    assert_eq!(
        s["store"]["records_written"].as_u64(),
        Some(n("flushed_entries") + n("evicted_written")),
        "{s}"
    );
    if build == "go" {
        assert!(s["gc"]["num_gc"].as_u64().is_some(), "{s}");
        assert!(s["gc"]["pause_total_ns"].as_u64().is_some(), "{s}");
    } else {
        assert!(s.get("gc").is_none(), "{s}");
    }
}

#[test]
fn closed_loop_with_prefill() {
    for server in servers() {
        let b = server.build;
        let (r, s) = run(
            &server,
            &Run {
                capacity: 5000,
                driver_args: &["--connections", "2", "--duration", "1s"],
                prefill: true,
            },
        );
        check_result(&r, b);
        assert_eq!(r.parameters["prefill"], 5000);
        assert_eq!(r.parameters["rate"], 0);
        assert_eq!(r.parameters["duration_ms"], 1000);
        check_summary(&s, r.operations + 5000, b);
        // Prefilled: the cache is full, and stays full.
        assert_eq!(s["entries"], 5000, "{s}");
        assert_eq!(s["connections"], 2, "{s}");
        // 8,000 keys for 5,000 places: the driver's cold tail evicts.
        assert!(s["evictions"].as_u64() > Some(0), "{s}");
    }
}

/// `--prefill-only` fills the cache and leaves: no measured run, no result file; a second
/// driver (the one a profiler watches) then finds every prefilled key already cached.
#[test]
fn prefill_only_then_a_measured_run() {
    for server in servers() {
        let b = server.build;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = server.start_in(
            &dir.path().join("data"),
            &["--capacity", "3000", "--flush-interval", "200ms"],
        );
        let addr = p.addr().to_string();
        let filled = Command::new(DRIVER)
            .args([
                "--addr",
                &addr,
                "--connections",
                "2",
                "--channels-per-user",
                "4",
            ])
            .args(["--prefill-only", "--capacity", "3000"])
            .output()
            .expect("driver runs");
        let err = String::from_utf8_lossy(&filled.stderr);
        assert!(filled.status.success(), "{b}: {err}");
        assert!(err.contains("prefilled 3000 keys"), "{b}: {err}");
        assert!(filled.stdout.is_empty(), "{b}: no result line");

        // Gets of users 1..=750 (the prefilled keys, 4 channels each): all hits.
        let out = dir.path().join("result.json");
        let measured = Command::new(DRIVER)
            .args(["--addr", &addr, "--build", b, "--connections", "2"])
            .args(["--users", "750", "--channels-per-user", "4", "--zipf", "0"])
            .args(["--mix", "get:1", "--ops", "500", "--out"])
            .arg(&out)
            .output()
            .expect("driver runs");
        assert!(
            measured.status.success(),
            "{b}: {}",
            String::from_utf8_lossy(&measured.stderr)
        );
        let r = DriverResult::read(&out).expect("driver result");
        assert_eq!(r.operations, 500, "{b}");
        assert_eq!(r.parameters["prefill"], 0, "{b}");
        let s = support::stop(p);
        assert_eq!(s["requests"], 3500, "{b}: {s}");
        assert_eq!(s["misses"], 3000, "{b}: only the prefill missed: {s}");
        assert_eq!(s["hits"], 500, "{b}: {s}");
    }
}

#[test]
fn fixed_rate_with_an_operation_count() {
    for server in servers() {
        let b = server.build;
        let (r, s) = run(
            &server,
            &Run {
                capacity: 100_000,
                driver_args: &[
                    "--connections",
                    "3",
                    "--rate",
                    "4000",
                    "--ops",
                    "1200",
                    "--mix",
                    "mention:1,get:1",
                ],
                prefill: false,
            },
        );
        assert_eq!(r.operations, 1200, "{b}");
        assert_eq!(r.parameters["rate"], 4000);
        assert_eq!(r.parameters["mix"], "ack:0,mention:1,get:1");
        check_summary(&s, 1200, b);
        assert_eq!(s["acks"], 0, "{s}");
        assert_eq!(s["evictions"], 0, "{s}");
    }
}

#[test]
fn driver_refuses_bad_flags_and_a_missing_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.json");
    let driver = |args: &[&str]| {
        let o = Command::new(DRIVER)
            .args(args)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("driver runs");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, err) = driver(&["--addr", "10.1.2.3:9", "--ops", "1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("not a loopback address"), "{err}");

    let (code, err) = driver(&["--addr", "127.0.0.1:9", "--mix", "ack:1,read:2"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown kind `read`"), "{err}");

    let (code, err) = driver(&["--addr", "127.0.0.1:9", "--prefill"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--capacity"), "{err}");

    // --prefill-only makes no result: --out is refused with it.
    let (code, err) = driver(&["--addr", "127.0.0.1:9", "--prefill-only", "--capacity", "9"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--out"), "{err}");

    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let (code, err) = driver(&["--addr", &addr, "--ops", "1", "--connect-timeout", "200ms"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("hint: start `read-state-cache`"), "{err}");
    assert!(!out.exists());
}
