//! The server and the driver as processes: ~1 s runs with 2 rooms × 4 speakers per build,
//! checking the driver result against the server's summary, and a lossy relay
//! (`--drop-every`) whose drops the driver must count exactly, bundled (`lite`) or not.

use std::{path::Path, process::Command, time::Duration};

use switchyard_harness::{DriverResult, Measured as _, ServerExit, ServerProcess};

const SERVER: &str = env!("CARGO_BIN_EXE_mmsg-relay");
const DRIVER: &str = env!("CARGO_BIN_EXE_mmsg-relay-driver");

const ROOMS: u64 = 2;
const SPEAKERS: u64 = 4;

/// How the server is asked to end after the driver is done.
#[derive(Clone, Copy)]
enum End {
    Idle,
    Sigterm,
}

/// Starts the server in `mode` (two threads of each kind, so rooms span loops/workers).
#[track_caller]
fn server(mode: &str, end: End, extra: &[&str]) -> ServerProcess {
    let mut server = Command::new(SERVER);
    server.args(["--mode", mode]);
    match mode {
        "mmsg" | "lite" => server.args(["--loops", "2"]),
        _ => server.args(["--workers", "2"]),
    };
    if let End::Idle = end {
        server.args(["--exit-after-idle", "300"]);
    }
    server.args(extra);
    ServerProcess::spawn(server, Duration::from_secs(30)).expect("server ready")
}

/// Runs the driver against `server` with 2 rooms × 4 speakers and `args` (the run bound, …).
#[track_caller]
fn drive(server: &ServerProcess, mode: &str, out: &Path, args: &[&str]) {
    let driver = Command::new(DRIVER)
        .args(["--addr", &server.addr().to_string()])
        .args(["--rooms", "2", "--speakers", "4", "--size", "180"])
        .args(["--build", mode, "--out"])
        .arg(out)
        .args(args)
        .output()
        .expect("driver runs");
    assert!(
        driver.status.success(),
        "driver failed: {}\n{}{}",
        driver.status,
        String::from_utf8_lossy(&driver.stdout),
        String::from_utf8_lossy(&driver.stderr)
    );
}

#[track_caller]
fn finish(server: ServerProcess, end: End) -> serde_json::Value {
    if let End::Sigterm = end {
        server.terminate().expect("SIGTERM");
    }
    let exit: ServerExit = server.wait(Duration::from_secs(30)).expect("server exits");
    assert!(exit.status.success(), "server failed: {}", exit.status);
    let line = exit.stdout_lines.last().expect("a summary line");
    serde_json::from_str(line).expect("summary JSON")
}

#[track_caller]
fn param(r: &DriverResult, key: &str) -> u64 {
    r.parameters
        .get(key)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| {
            panic!(
                "parameter `{key}` missing or not a count: {:?}",
                r.parameters
            )
        })
}

#[track_caller]
fn check_lossless_result(r: &DriverResult, mode: &str) {
    assert_eq!(r.format, "switchyard-driver-result");
    assert_eq!(r.schema_version, 1);
    assert_eq!(r.workload, "mmsg-relay");
    assert_eq!(r.build, mode);
    assert_eq!(param(r, "rooms"), ROOMS);
    assert_eq!(param(r, "speakers_per_room"), SPEAKERS);
    assert_eq!(param(r, "size"), 180);
    assert_eq!(param(r, "duration_ms"), 1000);

    let packets = r.operations;
    assert!(packets > 0, "no packets");
    assert_eq!(param(r, "packets_sent"), packets);
    assert_eq!(r.errors, 0);
    assert!(r.duration_ns > 0 && r.throughput_per_s > 0.0);
    // No loss without drops: every forward and every ack arrived.
    let forwards = packets * (SPEAKERS - 1);
    assert_eq!(param(r, "forwards_expected"), forwards);
    assert_eq!(param(r, "forwards_received"), forwards);
    assert_eq!(param(r, "forwards_lost"), 0);
    assert_eq!(r.parameters["loss_ratio"], 0.0);
    assert_eq!(param(r, "acks_expected"), packets);
    assert_eq!(param(r, "acks_received"), packets);
    assert_eq!(param(r, "acks_lost"), 0);
    for key in ["malformed", "misrouted", "unexpected_seq", "duplicates"] {
        assert_eq!(param(r, key), 0, "{key}");
    }
    // One latency per forward received.
    assert_eq!(param(r, "latency_samples"), forwards);
    assert_eq!(r.latency().expect("histogram").count(), forwards);

    let p = r.latency_ns;
    let ordered = [p.p50, p.p90, p.p99, p.p99_9, p.p99_99, p.max];
    assert!(p.p50 > 0, "{p:?}");
    assert!(
        ordered.windows(2).all(|w| w[0] <= w[1]),
        "percentiles out of order: {p:?}"
    );
    assert!(param(r, "ack_latency_p50_ns") <= param(r, "ack_latency_p99_ns"));
    assert!(param(r, "ack_latency_p99_ns") <= param(r, "ack_latency_max_ns"));
    assert_eq!(r.window_ms, 100);
    assert_eq!(
        r.windows.iter().map(|w| w.operations).sum::<u64>(),
        forwards
    );
    assert!(
        r.windows
            .iter()
            .all(|w| w.max_ns <= p.max && w.p99_ns <= w.max_ns)
    );
}

#[track_caller]
fn check_lossless_summary(s: &serde_json::Value, r: &DriverResult, mode: &str, end: End) {
    assert_eq!(s["format"], "mmsg-relay-summary", "{s}");
    assert_eq!(s["schema_version"], 1);
    assert_eq!(s["mode"], mode);
    assert_eq!(
        s["ended_by"],
        match end {
            End::Idle => "idle",
            End::Sigterm => "signal",
        }
    );
    let packets = r.operations;
    assert_eq!(s["voice_received"], packets, "{s}");
    assert_eq!(s["acks_sent"], packets, "{s}");
    assert_eq!(s["forwards_sent"], packets * (SPEAKERS - 1), "{s}");
    assert_eq!(
        (s["rooms"].as_u64(), s["members"].as_u64()),
        (Some(ROOMS), Some(ROOMS * SPEAKERS))
    );
    // A join is resent only if its ack is slow; each is acked.
    let joins = s["joins"].as_u64().expect("joins");
    assert!(joins >= ROOMS * SPEAKERS, "{s}");
    assert_eq!(s["join_acks_sent"], joins);
    assert_eq!(s["packets_received"], packets + joins);
    assert_eq!(s["drops"]["total"], 0, "{s}");
    assert_eq!(s["drops"]["kernel_rx_queue_full"], 0, "{s}");
    assert!(s["syscalls"]["recv"].as_u64() >= Some(1));
    assert!(s["syscalls"]["send"].as_u64() >= Some(1));
    assert!(s["process"]["cpu_ns_per_packet"].as_f64().is_some());
    let datagrams = s["datagrams_sent"].as_u64().expect("datagrams_sent");
    let frames = packets * SPEAKERS + joins;
    match mode {
        "lite" => {
            // Waiting for 4 datagrams (the test's timeout is long enough for them to come),
            // every batch has two voice packets of one room or two of one speaker, so a
            // speaker's acks and forwards share datagrams: two frames a datagram or so.
            assert_eq!(s["batch"], 4);
            assert!(datagrams * 3 < frames * 2, "{s}");
            let per = s["frames_per_datagram"]
                .as_f64()
                .expect("frames_per_datagram");
            assert!((per - frames as f64 / datagrams as f64).abs() < 1e-9, "{s}");
            let received = param(r, "datagrams_received");
            assert!(received < param(r, "frames_received"), "{:?}", r.parameters);
        }
        "mmsg" => {
            assert_eq!(s["loops"], 2);
            let batches = s["batches"].as_u64().expect("batches");
            assert!(batches >= 1 && batches <= packets + joins, "{s}");
            assert!(s["mean_batch_size"].as_f64() >= Some(1.0), "{s}");
            assert!(s["mean_send_batch"].as_f64() >= Some(1.0), "{s}");
            assert!(s["workers"].is_null());
            assert_eq!(datagrams, frames, "one datagram a frame: {s}");
        }
        _ => {
            assert_eq!(s["workers"], 2);
            // Without batching: one sendto per ack and per forward.
            assert_eq!(s["syscalls"]["send"], packets * SPEAKERS + joins);
            assert!(s["batches"].is_null() && s["loops"].is_null());
        }
    }
}

#[track_caller]
fn lossless(mode: &str, end: End, extra: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("result.json");
    let server = server(mode, end, extra);
    drive(&server, mode, &out, &["--duration", "1s"]);
    let summary = finish(server, end);
    let result = DriverResult::read(&out).expect("driver result");
    check_lossless_result(&result, mode);
    check_lossless_summary(&summary, &result, mode, end);
    assert!(!Path::new(&format!("{}.tmp", out.display())).exists());
}

/// The relay drops every 7th forward; the driver must report exactly those as lost.
#[track_caller]
fn lossy(mode: &str) {
    const PACKETS: u64 = 200;
    const EVERY: u64 = 7;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("result.json");
    let server = server(mode, End::Idle, &["--drop-every", &EVERY.to_string()]);
    drive(
        &server,
        mode,
        &out,
        &["--packets", &PACKETS.to_string(), "--drain", "300ms"],
    );
    let s = finish(server, End::Idle);
    let r = DriverResult::read(&out).expect("driver result");

    let attempted = PACKETS * (SPEAKERS - 1);
    let dropped = attempted / EVERY;
    assert_eq!(r.operations, PACKETS);
    assert_eq!(param(&r, "packets"), PACKETS);
    assert_eq!(s["drop_every"], EVERY);
    assert_eq!(s["drops"]["injected"], dropped, "{s}");
    assert_eq!(s["forwards_sent"], attempted - dropped, "{s}");
    assert_eq!(s["acks_sent"], PACKETS);

    assert_eq!(param(&r, "forwards_expected"), attempted);
    assert_eq!(param(&r, "forwards_lost"), dropped, "{:?}", r.parameters);
    assert_eq!(param(&r, "forwards_received"), attempted - dropped);
    let ratio = r.parameters["loss_ratio"].as_f64().expect("ratio");
    assert!((ratio - dropped as f64 / attempted as f64).abs() < 1e-12);
    // Dropped forwards show as gaps in the sequence, except those after the last arrival of a
    // pair; none arrives late on loopback.
    assert!(param(&r, "loss_gaps") <= dropped);
    assert_eq!(param(&r, "loss_late"), 0);
    // Acks are never dropped, and every forward received has a latency.
    assert_eq!(param(&r, "acks_received"), PACKETS);
    assert_eq!(param(&r, "latency_samples"), attempted - dropped);
    assert_eq!(r.parameters["drained_early"], false);
}

#[test]
fn threads_build_end_to_end() {
    lossless("threads", End::Sigterm, &[]);
}

#[test]
fn mmsg_build_end_to_end() {
    lossless("mmsg", End::Idle, &[]);
}

/// 50 ms rather than 1 ms for the batch: at this test's 400 packets/s the batch of 4 fills
/// every time, so the bundles are sure to carry several frames.
#[test]
fn lite_build_end_to_end() {
    lossless("lite", End::Idle, &["--batch-timeout-us", "50000"]);
}

#[test]
fn threads_build_loss_is_counted_exactly() {
    lossy("threads");
}

#[test]
fn mmsg_build_loss_is_counted_exactly() {
    lossy("mmsg");
}

#[test]
fn lite_build_loss_is_counted_exactly() {
    lossy("lite");
}

#[test]
fn server_refuses_the_other_modes_options() {
    for (mode, flag) in [
        ("threads", "--batch"),
        ("threads", "--batch-timeout-us"),
        ("mmsg", "--workers"),
        ("lite", "--workers"),
    ] {
        let out = Command::new(SERVER)
            .args(["--mode", mode, flag, "4"])
            .output()
            .expect("server runs");
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("applies to --mode"), "{stderr}");
        assert!(out.stdout.is_empty(), "no ready line");
    }
}

#[test]
fn driver_refuses_non_loopback_and_missing_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.json");
    let refused = Command::new(DRIVER)
        .args(["--addr", "10.1.2.3:9", "--packets", "1", "--out"])
        .arg(&out)
        .output()
        .expect("driver runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a loopback address"));

    // A port nothing listens on (bound, then released).
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free port")
        .port();
    let missing = Command::new(DRIVER)
        .args(["--addr", &format!("127.0.0.1:{port}"), "--packets", "1"])
        .args(["--connect-timeout", "300ms", "--out"])
        .arg(&out)
        .output()
        .expect("driver runs");
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("hint: start `mmsg-relay"), "{stderr}");
    assert!(!out.exists());
}
