//! Bad input gets one clear error line, a hint and exit code 2; where data was collected,
//! run.json is still written.

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Command, Stdio},
    thread,
    time::Duration,
};

use common::*;

#[test]
fn unknown_pid() {
    let out = Command::new(switchyard())
        .args(["record", "--pid", "4000000"])
        .output()
        .unwrap();
    assert_user_error(&out, "no process with pid 4000000");
}

#[test]
fn kernel_thread_pid() {
    // kthreadd is pid 2 on Linux; skip quietly in a pid namespace without it.
    let comm = std::fs::read_to_string("/proc/2/comm").unwrap_or_default();
    if comm.trim() != "kthreadd" {
        eprintln!("skipping kernel_thread_pid: pid 2 is not kthreadd here");
        return;
    }
    let out = Command::new(switchyard())
        .args(["record", "--pid", "2"])
        .output()
        .unwrap();
    assert_user_error(&out, "kernel thread");
}

#[test]
fn command_that_does_not_exist() {
    let out = Command::new(switchyard())
        .args(["record", "--", "switchyard-no-such-command"])
        .output()
        .unwrap();
    assert_user_error(&out, "not found");
    let out = Command::new(switchyard())
        .args(["record", "--", "/nonexistent/bin/x"])
        .output()
        .unwrap();
    assert_user_error(&out, "does not exist");
}

#[test]
fn ready_fd_that_is_not_open() {
    // Refused before anything is spawned or attached.
    let out = Command::new(switchyard())
        .args(["record", "--ready-fd", "917", "--", "true"])
        .output()
        .unwrap();
    assert_user_error(&out, "--ready-fd 917 is not an open file descriptor");
}

#[test]
fn nothing_to_record() {
    let out = Command::new(switchyard())
        .args(["record"])
        .output()
        .unwrap();
    assert_user_error(&out, "nothing to record");
}

#[test]
fn bad_duration() {
    let out = Command::new(switchyard())
        .args(["record", "--duration", "ten", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    assert!(text(&out).1.contains("not a duration"), "{:?}", text(&out));
}

/// Runs switchyard as `nobody` (needs root to drop to it).
fn as_nobody(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(switchyard())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running setpriv")
}

#[test]
fn no_privileges_is_a_clear_error_and_degraded_mode_still_counts_switches() {
    if !privileged("no_privileges_is_a_clear_error…") {
        return;
    }
    let dir = tempdir("nopriv");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let demo = demo();
    let demo = demo.to_str().unwrap();

    let out = as_nobody(&["record", "--", demo, "known", "--pingpong", "500"], &dir);
    assert_user_error(&out, "attaching the probes");
    assert!(text(&out).1.contains("run as root"), "{:?}", text(&out));
    assert!(!dir.join("run.json").exists(), "no data, so no run file");

    let out = as_nobody(
        &[
            "record",
            "--degraded",
            "--",
            demo,
            "known",
            "--getppid",
            "10",
            "--sleeps",
            "20",
            "--pingpong",
            "500",
        ],
        &dir,
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("degraded mode"), "{stderr}");
    let run = load_run(&dir.join("run.json"));
    assert_eq!(run["meta"]["collector"], "degraded");
    let missing: Vec<String> = run["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["figure"].as_str().unwrap().to_string())
        .collect();
    assert!(
        missing.iter().any(|m| m.starts_with("syscalls")),
        "{missing:?}"
    );
    // At least the 500 blocking reads of the main thread and the 20 sleeps.
    let vol = sum_threads(&run, "voluntary");
    assert!(vol >= 520, "voluntary {vol}");
    // perf software counters still work for one's own processes, in user mode only; the
    // scheduler's counters need kernel mode, so they are reported missing, not as 0.
    assert!(
        counter(&run, "task-clock").is_some_and(|c| c > 0),
        "{}",
        run["counters"]
    );
    assert_eq!(
        counter(&run, "context-switches"),
        None,
        "{}",
        run["counters"]
    );
    assert!(stderr.contains("degraded mode"), "{stderr}");
}

#[test]
fn ctrl_c_mid_run_writes_the_run_file() {
    if !privileged("ctrl_c_mid_run_writes_the_run_file") {
        return;
    }
    let dir = tempdir("sigint");
    let run_path = dir.join("run.json");
    let rec = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args(["mix", "--seconds", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = rec.id();
    let mut rec = rec;
    let mut err = BufReader::new(rec.stderr.take().unwrap());
    let mut l = String::new();
    err.read_line(&mut l).unwrap();
    assert!(l.contains("recording pid"), "{l}");
    thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let out = rec.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{rest}");
    assert!(rest.contains("error: interrupted by SIGINT"), "{rest}");
    assert!(rest.contains("hint: "), "{rest}");
    let run = load_run(&run_path);
    assert_eq!(run["meta"]["end"]["kind"], "interrupted");
    assert!(syscall_count(&run, "getppid") > 0, "no data kept");
}

#[test]
fn target_exiting_mid_run_writes_the_run_file() {
    if !privileged("target_exiting_mid_run_writes_the_run_file") {
        return;
    }
    let dir = tempdir("exit");
    let run_path = dir.join("run.json");
    let mut target = Command::new(demo())
        .args([
            "known",
            "--getppid",
            "777",
            "--sleeps",
            "1",
            "--pingpong",
            "10",
            "--wait-stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let rec = Command::new(switchyard())
        .args([
            "record",
            "--pid",
            &target.id().to_string(),
            "--duration",
            "60s",
            "-o",
        ])
        .arg(&run_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut rec = rec;
    let mut err = BufReader::new(rec.stderr.take().unwrap());
    let mut l = String::new();
    err.read_line(&mut l).unwrap();
    assert!(l.contains("recording pid"), "{l}");
    target.stdin.take().unwrap().write_all(b"g").unwrap();
    target.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = rec.wait().unwrap();
    assert_eq!(status.code(), Some(2), "{rest}");
    assert!(rest.contains("exited") && rest.contains("hint: "), "{rest}");
    let run = load_run(&run_path);
    assert_eq!(syscall_count(&run, "getppid"), 777);
}

#[test]
fn output_path_that_cannot_be_written_is_refused_before_recording() {
    // Refused before the command is spawned: `sleep 30` would otherwise run to its end.
    let started = std::time::Instant::now();
    for (path, why) in [
        ("/nonexistent/dir/run.json", "is not a directory"),
        ("/", "it is a directory"),
    ] {
        let out = Command::new(switchyard())
            .args(["record", "-o", path, "--", "sleep", "30"])
            .output()
            .unwrap();
        assert_user_error(&out, why);
        assert!(
            text(&out).1.contains("cannot write the run file"),
            "{:?}",
            text(&out)
        );
    }
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_thread_id_records_its_process() {
    if !privileged("a_thread_id_records_its_process") {
        return;
    }
    // A process whose main thread wakes every 10 ms, and a second thread blocked throughout.
    let mut target = Command::new("python3")
        .args([
            "-c",
            "import threading, time\nt = threading.Thread(target=time.sleep, args=(30,))\nt.start()\nprint('up', flush=True)\nwhile t.is_alive(): time.sleep(0.01)",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(target.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = target.id();
    let tid: u32 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .find(|&t| t != pid)
        .expect("a second thread");
    let dir = tempdir("thread-id");
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "--pid", &tid.to_string(), "-d", "1s", "-o"])
        .arg(&run_path)
        .output()
        .unwrap();
    let _ = target.kill();
    let _ = target.wait();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("{tid} is a thread of process {pid}")),
        "{stderr}"
    );
    let run = load_run(&run_path);
    assert_eq!(run["meta"]["pid"], pid);
    // The main thread's switches are recorded: the process, not the thread given, was followed.
    let main_thread = run["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == pid)
        .cloned();
    assert!(
        main_thread.is_some_and(|t| t["voluntary"].as_u64() > Some(10)),
        "{}",
        run["threads"]
    );
}

#[test]
fn a_full_disk_at_the_end_saves_the_run_to_a_fallback_file() {
    if !privileged("a_full_disk_at_the_end_saves_the_run_to_a_fallback_file") {
        return;
    }
    // A tiny tmpfs, filled before the run: the path checks pass, the write fails.
    let dir = tempdir("full-disk");
    let mount = dir.join("full");
    std::fs::create_dir_all(&mount).unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mount)
        .status()
        .unwrap();
    assert!(status.success(), "mounting a tmpfs");
    let _ = std::fs::write(mount.join("filler"), vec![0u8; 1 << 20]);
    let out = Command::new(switchyard())
        .args(["record", "--no-stacks", "-o"])
        .arg(mount.join("run.json"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let _ = Command::new("umount").arg(&mount).status();
    assert_user_error(&out, "the run was saved to");
    let stderr = text(&out).1;
    let saved = stderr
        .split("the run was saved to ")
        .nth(1)
        .and_then(|s| s.lines().next())
        .expect("the fallback path");
    let run = load_run(Path::new(saved));
    assert_eq!(run["format"], "switchyard-run");
    let _ = std::fs::remove_file(saved);
}

#[test]
fn a_stack_map_too_small_to_hold_stacks_is_refused() {
    for n in ["0", "1"] {
        let out = Command::new(switchyard())
            .args(["record", "--stack-map-size", n, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
        assert!(text(&out).1.contains("at least 64"), "{:?}", text(&out));
    }
}

#[test]
fn sampled_syscall_latency_with_a_timeline_is_refused() {
    let out = Command::new(switchyard())
        .args([
            "record",
            "--timeline",
            "--syscall-latency",
            "16",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_user_error(
        &out,
        "--syscall-latency 16 cannot be combined with --timeline",
    );
}

#[test]
fn a_timeline_ring_that_is_not_a_power_of_two_is_refused() {
    for size in ["3K", "1K", "2G", "lots"] {
        let out = Command::new(switchyard())
            .args([
                "record",
                "--timeline",
                "--timeline-buffer",
                size,
                "--",
                "true",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
        let err = text(&out).1;
        assert!(err.contains("4K") && err.contains("1G"), "{err}");
    }
}

#[test]
fn damaged_and_foreign_run_files_are_named_as_such() {
    let dir = tempdir("damaged-run");
    let random = dir.join("random.json");
    std::fs::write(&random, [0xffu8, 0xfe, 0x00, 0x9c, 0x80, 0x41]).unwrap();
    let foreign = dir.join("foreign.json");
    std::fs::write(&foreign, r#"{"format":"other","schema_version":1}"#).unwrap();
    for command in ["report", "gate"] {
        let mut cmd = Command::new(switchyard());
        cmd.arg(command);
        if command == "gate" {
            cmd.args(["--budgets", "/dev/null"]);
        }
        let out = cmd.arg(&random).output().unwrap();
        assert_user_error(&out, "it is not text");
        assert!(text(&out).1.contains("damaged"), "{:?}", text(&out));
        let mut cmd = Command::new(switchyard());
        cmd.arg(command);
        if command == "gate" {
            cmd.args(["--budgets", "/dev/null"]);
        }
        let out = cmd.arg(&foreign).output().unwrap();
        assert_user_error(&out, "its format is `other`");
        assert!(!text(&out).1.contains("line 0"), "{:?}", text(&out));
    }
    // compare keeps the cause of an unreadable file.
    let out = Command::new(switchyard())
        .args(["compare", "--a"])
        .arg(dir.join("missing.json"))
        .arg("--b")
        .arg(&foreign)
        .output()
        .unwrap();
    assert_user_error(&out, "No such file or directory");
}

#[test]
fn the_end_of_a_recording_stops_what_the_command_started() {
    if !privileged("the_end_of_a_recording_stops_what_the_command_started") {
        return;
    }
    // Background children of the command: left running, they would outlive the recording
    // and hold its output open.
    let dir = tempdir("grandchildren");
    let log = std::fs::File::create(dir.join("stdout")).unwrap();
    let status = Command::new(switchyard())
        .args(["record", "--no-stacks", "-d", "1s", "-o"])
        .arg(dir.join("run.json"))
        .args(["--", "sh", "-c", "sleep 3331 & sleep 3332 & wait"])
        .stdout(log)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with("sleep 333"))
        .collect();
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn unprivileged_errors_give_the_real_reason_for_tracefs() {
    if !privileged("unprivileged_errors_give_the_real_reason_for_tracefs") {
        return;
    }
    // tracefs is mounted (root made sure of it), but root-only: not "not mounted".
    let _ = Command::new(switchyard()).arg("doctor").output();
    let mode = std::fs::metadata("/sys/kernel/tracing").map(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o007
    });
    if mode.as_ref().map_or(true, |m| *m != 0) {
        eprintln!("skipping: /sys/kernel/tracing is readable by others here");
        return;
    }
    let dir = tempdir("tracefs-reason");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = as_nobody(&["record", "--", "true"], &dir);
    assert_user_error(&out, "this user cannot read it");
    assert!(!text(&out).1.contains("not mounted"), "{:?}", text(&out));
    let out = as_nobody(&["doctor"], &dir);
    let report = text(&out).0;
    assert!(
        report.contains("mounted at /sys/kernel/tracing, but not readable by this user"),
        "{report}"
    );
    assert!(!report.contains("not mounted"), "{report}");
}

/// A malformed OpenTelemetry variable is refused before the recording, by its name, and never
/// with its value (a header may be the credential).
#[test]
fn malformed_otel_variables_are_refused_by_name() {
    let dir = tempdir("otel-env");
    let run = dir.join("run.json");
    for (vars, says) in [
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "authorization Bearer hunter2"),
            ][..],
            "OTEL_EXPORTER_OTLP_HEADERS: entry 1: not key=value",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "http/xml"),
            ][..],
            "OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL: unknown protocol `http/xml`",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:4318"),
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"),
            ][..],
            "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read `/nonexistent/ca.pem`",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
                ("OTEL_RESOURCE_ATTRIBUTES", "team=a,hunter2"),
            ][..],
            "OTEL_RESOURCE_ATTRIBUTES: entry 2: not key=value",
        ),
    ] {
        let out = Command::new(switchyard())
            .args(["record", "-o"])
            .arg(&run)
            .envs(vars.iter().copied())
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_user_error(&out, says);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("hunter2"), "{stderr}");
        assert!(!run.exists(), "{says}: a run was recorded");
    }
}
