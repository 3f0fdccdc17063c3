//! `switchyard floor`: the empty programs are attached when the ready line arrives, and a
//! SIGINT detaches them and ends the process with exit 0; the two lookup floors run at every
//! switch of a pinned ping-pong and say so. Needs root.

mod common;

use std::{
    fs::File,
    io::{BufRead as _, BufReader, Read as _},
    os::{
        fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
        unix::process::CommandExt as _,
    },
    process::{Command, Stdio},
    sync::mpsc,
    thread,
    time::Duration,
};

use common::*;

/// The tracepoints of the BPF links process `pid` holds (from /proc/PID/fdinfo).
fn attached_tracepoints(pid: u32) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).expect("reading fdinfo") {
        let Ok(text) = std::fs::read_to_string(entry.unwrap().path()) else {
            continue;
        };
        if !text.contains("link_type:\traw_tracepoint") {
            continue;
        }
        if let Some(name) = text.lines().find_map(|l| l.strip_prefix("tp_name:\t")) {
            names.push(name.to_string());
        }
    }
    names.sort();
    names
}

/// Runs `switchyard floor WHAT --ready-fd 3` with fd 3 the write end of a pipe, checks the
/// ready line and the links it holds then, SIGINTs it and checks how it ends.
fn floor_attaches_and_detaches(what: &str, expected: &[&str]) {
    floor_around(what, &[], expected, || ());
}

/// [`floor_attaches_and_detaches`] with more flags, running `meanwhile` once the floor is
/// attached; the floor's stdout.
fn floor_around(what: &str, flags: &[&str], expected: &[&str], meanwhile: impl FnOnce()) -> String {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both just opened, owned here alone.
    let (read_end, write_end) =
        unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let write_fd = write_end.as_raw_fd();
    let mut cmd = Command::new(switchyard());
    cmd.args(["floor", what, "--ready-fd", "3"])
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: dup2 is async-signal-safe; the copy at 3 is not close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(write_fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("running switchyard floor");
    drop(write_end);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(read_end).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(30));
    let pid = child.id();
    let attached = attached_tracepoints(pid);
    if line.is_ok() {
        meanwhile();
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        line.as_deref(),
        Ok(format!("floor {what}\n").as_str()),
        "no ready line; stderr:\n{stderr}"
    );
    assert_eq!(
        attached, expected,
        "links held once ready; stderr:\n{stderr}"
    );
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr:\n{stderr}");
    assert!(
        lines[0].contains(&format!("floor {what}")) && lines[0].contains("Ctrl-C"),
        "{stderr}"
    );
    stdout
}

/// A switch floor with `--program-time`, around a ping-pong of `ROUNDS` round trips pinned to
/// one CPU: each round trip is two switches at least, each a run of the program, which the
/// floor prints (`program NAME: RUNS runs, NS ns a run`).
fn switch_floor_runs_at_every_switch(what: &str, program: &str) {
    const ROUNDS: u64 = 20_000;
    let stdout = floor_around(what, &["--program-time"], &["sched_switch"], || {
        let out = Command::new("taskset")
            .args(["-c", "1"])
            .arg(demo())
            .args(["pingpong", "--rounds", &ROUNDS.to_string()])
            .output()
            .expect("running the ping-pong under taskset");
        assert!(out.status.success(), "ping-pong: {out:?}");
    });
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("program {program}: ")))
        .unwrap_or_else(|| panic!("no line for {program} in:\n{stdout}"));
    let runs: u64 = line
        .split(": ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no runs in {line}"));
    assert!(
        runs >= 2 * ROUNDS,
        "{runs} runs for {ROUNDS} round trips: {line}"
    );
    assert!(line.ends_with(" ns a run"), "{line}");
}

#[test]
fn the_clock_floor_runs_at_every_switch() {
    if !privileged("the_clock_floor_runs_at_every_switch") {
        return;
    }
    switch_floor_runs_at_every_switch("switch-clock", "floor_switch_clock");
}

#[test]
fn the_array_switch_floor_runs_at_every_switch() {
    if !privileged("the_array_switch_floor_runs_at_every_switch") {
        return;
    }
    switch_floor_runs_at_every_switch("switch-array", "floor_switch_array");
}

#[test]
fn the_task_storage_floor_loads_and_runs_at_every_switch() {
    if !privileged("the_task_storage_floor_loads_and_runs_at_every_switch") {
        return;
    }
    switch_floor_runs_at_every_switch("switch-task-storage", "floor_switch_task_storage");
}

#[test]
fn floor_syscalls_attaches_until_sigint() {
    if !privileged("floor_syscalls_attaches_until_sigint") {
        return;
    }
    floor_attaches_and_detaches("syscalls", &["sys_enter", "sys_exit"]);
}

#[test]
fn floor_switch_attaches_until_sigint() {
    if !privileged("floor_switch_attaches_until_sigint") {
        return;
    }
    floor_attaches_and_detaches("switch", &["sched_switch"]);
}
