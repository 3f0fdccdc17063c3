//! `record --timeline`: every switch of a target with known behaviour is on the timeline, the
//! exported trace loads in a trace viewer's own parser, and the report's tracks work in
//! headless Chromium. Needs root; the trace check needs Node.js and npm's registry, the page
//! check Chromium (installed when missing).

mod common;

use std::{collections::BTreeMap, path::Path, process::Command};

use common::*;

/// Skips (or, under CI=true, fails) when `tool` cannot run.
fn have(tool: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok() {
        return true;
    }
    let reason = format!("skipping: {tool} is not installed");
    assert!(
        std::env::var("CI").is_err(),
        "{reason}; CI=true turns a skip into a failure"
    );
    eprintln!("{reason}");
    false
}

#[test]
fn every_switch_of_the_ping_pong_is_on_the_timeline_and_in_the_trace() {
    if !privileged("every_switch_of_the_ping_pong_is_on_the_timeline_and_in_the_trace") {
        return;
    }
    let dir = tempdir("timeline");
    let demo = demo_command(&["known", "--pingpong", "5000", "--sleeps", "5"]);
    let demo: Vec<&std::ffi::OsStr> = demo.iter().map(|s| s.as_os_str()).collect();
    let (run, _) = record_spawned(&dir, &["--timeline"], &demo);
    let tl = &run["timeline"];
    assert_eq!(tl["lost"], 0, "no event may be lost at this rate");

    // Per thread: switches on the timeline = the aggregate's voluntary + involuntary, and
    // its slices cover its time from the first event without a gap or an overlap.
    let window = window_ns(&run) as u64;
    let mut aggregate = BTreeMap::new();
    for t in run["threads"].as_array().unwrap() {
        let n = t["voluntary"].as_u64().unwrap() + t["involuntary"].as_u64().unwrap();
        if n > 0 {
            aggregate.insert(t["tid"].as_u64().unwrap(), n);
        }
    }
    let mut on_timeline = BTreeMap::new();
    for t in tl["threads"].as_array().unwrap() {
        let tid = t["tid"].as_u64().unwrap();
        on_timeline.insert(tid, t["switches"].as_u64().unwrap());
        let slices = t["slices"].as_array().unwrap();
        let mut at = slices[0][0].as_u64().unwrap();
        for s in slices {
            assert_eq!(
                s[0].as_u64().unwrap(),
                at,
                "thread {tid}: a gap or overlap at {at}"
            );
            at += s[1].as_u64().unwrap();
        }
        assert_eq!(at, window, "thread {tid}: slices end with the window");
    }
    assert_eq!(
        on_timeline, aggregate,
        "switches per thread: timeline vs aggregate"
    );
    let total: u64 = aggregate.values().sum();
    assert!(
        total >= 10_000,
        "5000 round trips switch at least 10,000 times: {total}"
    );
    // The ping-pong's readv waits are named.
    let blocked_in_readv = tl["threads"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["slices"].as_array().unwrap())
        .filter(|s| s[2] == 2 && s[3] == 19 + 1)
        .count();
    // The pinger waits for each reply in readv (the reply cannot come between its writev
    // and its readv unless the ponger runs in that gap).
    assert!(
        blocked_in_readv >= 5000,
        "sleeping in readv: {blocked_in_readv}"
    );
    // A sleep is sleeping up to its wakeup, then runnable, waiting for a CPU, up to its
    // switch-in: each readv sleep is woken by a reply, so nearly every one is followed by a
    // runnable slice in readv.
    let woken_in_readv = tl["threads"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["slices"].as_array().unwrap().windows(2))
        .filter(|p| p[0][2] == 2 && p[0][3] == 19 + 1 && p[1][2] == 1 && p[1][3] == 19 + 1)
        .count();
    assert!(
        woken_in_readv >= blocked_in_readv * 99 / 100,
        "runnable in readv after sleeping in it: {woken_in_readv} of {blocked_in_readv}"
    );
    // Per thread, the runnable slices after a sleep (and a first slice runnable from a wakeup,
    // off CPU since before the start) add up to the aggregate's wait for a CPU after a wakeup:
    // the same timestamps split both. An unreported switch leaves the timeline to guess.
    let unreported = run["meta"]["unreported_switches"].as_u64().unwrap_or(0);
    for t in tl["threads"].as_array().unwrap() {
        let tid = t["tid"].as_u64().unwrap();
        let slices = t["slices"].as_array().unwrap();
        let mut after_wakeup = 0;
        if slices[0][2] == 1 {
            after_wakeup += slices[0][1].as_u64().unwrap();
        }
        for pair in slices.windows(2) {
            let before = pair[0][2].as_u64().unwrap();
            if pair[1][2] == 1 && (2..=4).contains(&before) {
                after_wakeup += pair[1][1].as_u64().unwrap();
            }
        }
        let row = run["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["tid"] == tid)
            .unwrap();
        let want = row["runqueue_after_wakeup_ns"].as_u64().unwrap();
        if unreported > 0 {
            eprintln!(
                "thread {tid}: runnable after a wakeup {after_wakeup} ns, aggregate {want} ns \
                 (not compared: {unreported} switches unreported)"
            );
            continue;
        }
        assert!(
            after_wakeup.abs_diff(want) <= want / 100 + 10_000,
            "thread {tid}: runnable after a wakeup {after_wakeup} ns on the timeline, \
             {want} ns waiting for a CPU after a wakeup in the aggregate"
        );
    }
    let voluntary = sum_threads(&run, "voluntary");
    // Wakeups: the first of each off-CPU interval; every voluntary switch here is a block
    // that a wakeup ends (the last of each thread may end after the window).
    let wakeups = tl["wakeups"].as_array().unwrap().len() as u64;
    assert!(
        wakeups.abs_diff(voluntary) <= voluntary / 100 + 2,
        "wakeups {wakeups}, voluntary switches {voluntary}"
    );
    // The five 200 µs sleeps are syscalls above the 100 µs threshold.
    let sleeps = tl["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[3] == 35)
        .count();
    assert_eq!(sleeps, 5, "nanosleep calls on the timeline");

    // The trace: every switch is the end of a Running slice.
    let out = Command::new(switchyard())
        .arg("report")
        .arg(dir.join("run.json"))
        .arg("-o")
        .arg(dir.join("report"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    let trace_path = dir.join("report/trace.json");
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&trace_path).unwrap()).unwrap();
    let mut slices: BTreeMap<u64, Vec<(f64, String)>> = BTreeMap::new();
    for e in trace["traceEvents"].as_array().unwrap() {
        if e["ph"] == "X" && e["cat"] == "sched" {
            slices.entry(e["tid"].as_u64().unwrap()).or_default().push((
                e["ts"].as_f64().unwrap(),
                e["name"].as_str().unwrap().to_string(),
            ));
        }
    }
    let mut ended_by_switch = BTreeMap::new();
    for (tid, mut s) in slices {
        s.sort_by(|a, b| a.0.total_cmp(&b.0));
        let running = s.iter().filter(|x| x.1 == "Running").count() as u64;
        let last_running = u64::from(s.last().is_some_and(|x| x.1 == "Running"));
        ended_by_switch.insert(tid, running - last_running);
    }
    assert_eq!(
        ended_by_switch, aggregate,
        "switches per thread: trace vs aggregate"
    );

    check_with_trace_engine(&trace_path, &trace);
    check_page(&dir.join("report/index.html"));
}

/// The trace loads in the Chrome DevTools Performance panel's own trace engine, which finds
/// every thread with every slice.
fn check_with_trace_engine(trace_path: &Path, trace: &serde_json::Value) {
    if !have("node") || !have("npm") {
        return;
    }
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/trace-check");
    if !tool.join("node_modules/@paulirish/trace_engine").is_dir() {
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&tool)
            .output()
            .unwrap();
        assert!(out.status.success(), "npm ci: {}", text(&out).1);
    }
    let out = Command::new("node")
        .arg(tool.join("check.mjs"))
        .arg(trace_path)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "trace engine: {stderr}");
    let seen: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let mut want: BTreeMap<u64, u64> = BTreeMap::new();
    for e in trace["traceEvents"].as_array().unwrap() {
        if e["ph"] == "X" {
            *want.entry(e["tid"].as_u64().unwrap()).or_default() += 1;
        }
    }
    let got: BTreeMap<u64, u64> = seen["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tid"].as_u64().unwrap(), t["entries"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, want, "slices per thread the trace engine found");
}

/// The report's timeline works in headless Chromium: tracks drawn, no console error, and a
/// selected range re-filters its flame graphs (check-html.sh checks each).
fn check_page(html: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/check-html.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(html)
        .arg(html.with_extension("png"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("timeline: "), "{stdout}");
}

#[test]
fn a_full_ring_loses_events_and_counts_every_one() {
    if !privileged("a_full_ring_loses_events_and_counts_every_one") {
        return;
    }
    // Every syscall on the timeline, into the smallest ring: millions of getppid a second
    // outrun a 4 KiB ring (about 100 events) drained every 10 ms.
    let dir = tempdir("timeline-loss");
    let demo = demo_command(&["getppid-loop", "--count", "3000000"]);
    let demo: Vec<&std::ffi::OsStr> = demo.iter().map(|s| s.as_os_str()).collect();
    let flags = [
        "--timeline",
        "--timeline-buffer",
        "4K",
        "--timeline-syscalls",
        "0",
        "--no-stacks",
    ];
    let (run, summary) = record_spawned(&dir, &flags, &demo);
    let tl = &run["timeline"];
    let lost = tl["lost"].as_u64().unwrap();
    let getppid = syscall_count(&run, "getppid");
    let on_timeline = tl["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[3] == 110)
        .count() as u64;
    assert_eq!(getppid, 3_000_000, "the aggregate counts every call");
    assert!(
        lost > 0,
        "the ring never filled: {on_timeline} getppid on the timeline"
    );
    assert!(
        on_timeline < getppid && on_timeline + lost >= getppid,
        "getppid: {on_timeline} on the timeline + {lost} lost must account for {getppid}"
    );
    assert!(
        summary.contains("lost (ring buffer full); raise --timeline-buffer"),
        "{summary}"
    );
}
