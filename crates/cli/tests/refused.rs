//! `switchyard record` flags and targets that would record nothing, or fail deep in the
//! kernel, are refused before anything is recorded: exit 2 and a clear error. No privileges
//! needed.

mod common;

use std::process::Command;

use common::*;

fn record(args: &[&str]) -> std::process::Output {
    Command::new(switchyard())
        .arg("record")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn zero_frequency_unwind_rows_and_top_are_refused() {
    for (flag, needle) in [
        ("--freq", "0 Hz takes no on-CPU sample"),
        ("--unwind-rows", "0 rows hold no unwind table"),
        ("--top", "0 rows show an empty table"),
    ] {
        let out = record(&[flag, "0", "--", "true"]);
        assert_eq!(out.status.code(), Some(2), "{flag} 0: {:?}", text(&out));
        let err = text(&out).1;
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{flag} 0: {err}"
        );
    }
}

#[test]
fn a_frequency_above_the_hosts_limit_is_refused_before_recording() {
    let Some(max) = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        eprintln!("skipping: this host has no /proc/sys/kernel/perf_event_max_sample_rate");
        return;
    };
    let dir = tempdir("freq-limit");
    let run = dir.join("run.json");
    let over = (max + 1).to_string();
    let out = record(&["--freq", &over, "-o", run.to_str().unwrap(), "--", "true"]);
    assert_user_error(&out, &format!("limit of {max} samples a second"));
    assert!(text(&out).1.contains("perf_event_max_sample_rate"));
    assert!(!run.exists(), "a run was recorded");
    // No stacks, no sampling: the limit does not apply.
    let out = record(&[
        "--freq",
        &over,
        "--no-stacks",
        "-o",
        "/nonexistent/run.json",
        "--",
        "true",
    ]);
    assert_user_error(&out, "cannot write the run file");
}

#[test]
fn a_zombie_pid_is_refused_before_recording() {
    // A child that has exited and is not reaped: waitid with WNOWAIT waits for the exit and
    // leaves the zombie in place.
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    // SAFETY: a zeroed siginfo_t for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child's exit without reaping it.
    let waited =
        unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
    assert_eq!(waited, 0, "{}", std::io::Error::last_os_error());
    let dir = tempdir("zombie");
    let run = dir.join("run.json");
    let out = record(&[
        "--pid",
        &pid.to_string(),
        "-d",
        "1s",
        "-o",
        run.to_str().unwrap(),
    ]);
    child.wait().unwrap();
    assert_user_error(&out, &format!("pid {pid} (true) has exited"));
    assert!(text(&out).1.contains("zombie"), "{:?}", text(&out));
    assert!(!run.exists(), "a run was recorded");
}
