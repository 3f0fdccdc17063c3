//! The server and the driver as processes: a ~1 s run with 2 producers per lock, checking the
//! driver result and that the server's summary counts the same messages.

use std::{path::Path, process::Command, time::Duration};

use switchyard_harness::{DriverResult, Measured as _, ServerProcess};

const SERVER: &str = env!("CARGO_BIN_EXE_spinlock-broker");
const DRIVER: &str = env!("CARGO_BIN_EXE_spinlock-broker-driver");

/// How the server is asked to end after the driver is done.
#[derive(Clone, Copy)]
enum End {
    Idle,
    Sigterm,
}

#[track_caller]
fn run(lock: &str, end: End) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log_dir = dir.path().join("log");
    let mut server = Command::new(SERVER);
    server.args(["--lock", lock, "--segment-bytes", "1048576", "--dir"]);
    server.arg(&log_dir);
    if let End::Idle = end {
        server.args(["--exit-after-idle", "200"]);
    }
    let server = ServerProcess::spawn(server, Duration::from_secs(30)).expect("server ready");

    let out = dir.path().join("result.json");
    let driver = Command::new(DRIVER)
        .args(["--addr", &server.addr().to_string()])
        .args(["--producers", "2", "--size", "64", "--duration", "1s"])
        .args(["--build", lock, "--out"])
        .arg(&out)
        .output()
        .expect("driver runs");
    assert!(
        driver.status.success(),
        "driver failed: {}\n{}{}",
        driver.status,
        String::from_utf8_lossy(&driver.stdout),
        String::from_utf8_lossy(&driver.stderr)
    );

    if let End::Sigterm = end {
        server.terminate().expect("SIGTERM");
    }
    let exit = server.wait(Duration::from_secs(30)).expect("server exits");
    assert!(exit.status.success(), "server failed: {}", exit.status);
    let summary_line = exit.stdout_lines.last().expect("a summary line");
    let summary: serde_json::Value = serde_json::from_str(summary_line).expect("summary JSON");

    let result = DriverResult::read(&out).expect("driver result");
    check_result(&result, lock);
    check_summary(&summary, &result, lock, end);
    // A --dir given by the user is kept, with the newest segments in it.
    let segments = std::fs::read_dir(&log_dir)
        .expect("log dir kept")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .count();
    assert!(segments >= 1, "no segment files in {}", log_dir.display());
    assert!(!Path::new(&format!("{}.tmp", out.display())).exists());
}

#[track_caller]
fn check_result(r: &DriverResult, lock: &str) {
    assert_eq!(r.format, "switchyard-driver-result");
    assert_eq!(r.schema_version, 1);
    assert_eq!(r.workload, "spinlock-broker");
    assert_eq!(r.build, lock);
    assert_eq!(r.parameters["producers"], 2);
    assert_eq!(r.parameters["size"], 64);
    assert_eq!(r.parameters["duration_ms"], 1000);
    assert!(r.operations > 0, "no operations");
    assert_eq!(r.errors, 0);
    assert!(r.duration_ns > 0 && r.throughput_per_s > 0.0);
    let p = r.latency_ns;
    let ordered = [p.p50, p.p90, p.p99, p.p99_9, p.p99_99, p.max];
    assert!(p.p50 > 0, "{p:?}");
    assert!(
        ordered.windows(2).all(|w| w[0] <= w[1]),
        "percentiles out of order: {p:?}"
    );
    assert_eq!(r.latency().expect("histogram").count(), r.operations);
    assert_eq!(r.window_ms, 100);
    assert!(!r.windows.is_empty());
    assert_eq!(
        r.windows.iter().map(|w| w.operations).sum::<u64>(),
        r.operations
    );
    assert!(
        r.windows
            .iter()
            .all(|w| w.max_ns <= p.max && w.p99_ns <= w.max_ns)
    );
}

#[track_caller]
fn check_summary(s: &serde_json::Value, r: &DriverResult, lock: &str, end: End) {
    assert_eq!(s["format"], "spinlock-broker-summary", "{s}");
    assert_eq!(s["lock"], lock);
    assert_eq!(
        s["ended_by"],
        match end {
            End::Idle => "idle",
            End::Sigterm => "signal",
        }
    );
    // Closed loop: every message sent was acked before the driver stopped.
    assert_eq!(s["messages"], r.operations, "{s}");
    assert_eq!(s["bytes"], r.operations * 64);
    assert_eq!(s["errors"], 0);
    assert_eq!(s["connections"], 2);
    assert_eq!(s["connection_errors"], 0);
    assert_eq!(s["lock_stats"]["kind"], lock);
    assert_eq!(
        s["lock_stats"]["acquisitions"], r.operations,
        "one take per message"
    );
    assert_eq!(s["log"]["messages"], r.operations);
    match lock {
        "spin" => assert_eq!(s["lock_stats"]["futex_waits"], 0),
        "mutex" => assert_eq!(s["lock_stats"]["spin_iterations"], 0),
        _ => assert!(s["lock_stats"]["abs"]["k"].as_u64().is_some(), "{s}"),
    }
}

#[test]
fn spin_build_end_to_end() {
    run("spin", End::Sigterm);
}

#[test]
fn mutex_build_end_to_end() {
    run("mutex", End::Idle);
}

#[test]
fn abs_build_end_to_end() {
    run("abs", End::Idle);
}

#[test]
fn driver_refuses_non_loopback_and_missing_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.json");
    let refused = Command::new(DRIVER)
        .args(["--addr", "10.1.2.3:9", "--ops", "1", "--out"])
        .arg(&out)
        .output()
        .expect("driver runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a loopback address"));

    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let missing = Command::new(DRIVER)
        .args(["--addr", &format!("127.0.0.1:{port}"), "--ops", "1"])
        .args(["--connect-timeout", "200ms", "--out"])
        .arg(&out)
        .output()
        .expect("driver runs");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("hint: start `spinlock-broker"));
    assert!(!out.exists());
}
