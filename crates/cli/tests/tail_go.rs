//! A Go span's anatomy, against the Go program's own account of its requests.
//!
//! `tests/data/requests.go` serves paced requests through `main.handle`: CPU, a megabyte of
//! garbage over a live heap (so that marking drafts allocators into assists), and the table's
//! `sync.Mutex`, which a compactor holds for 20 ms every 400 ms. The program times each
//! request and its lock wait, and reads the runtime's own GC cycles and assist time. Recorded
//! with a span on `main.handle`, at a rate low enough that every instance is kept as typical,
//! switchyard's anatomy must agree:
//! - every request counted, and each instance's parts (on CPU, waiting for a CPU, blocked,
//!   runnable in the Go scheduler, parked by wait reason) adding up to its duration;
//! - the slowest 1%'s lock share (parked in `sync.Mutex.Lock`) within 10 points of the
//!   program's, parked in `main.handle`; and the lock wait of every request within 5% of the
//!   program's sum;
//! - the GC cycles exactly as many as `GODEBUG=gctrace=1` prints;
//! - the GC assists' time on a thread within 20% of the runtime's assist CPU time.
//!
//! Needs root and Go.

mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

#[test]
fn a_go_spans_anatomy_matches_the_programs_own_account() {
    let test = "a_go_spans_anatomy_matches_the_programs_own_account";
    if !privileged(test) {
        return;
    }
    let dir = tempdir("tail-go");
    let Some(program) = go_build(&dir, "requests", include_str!("data/requests.go")) else {
        return;
    };
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .arg("record")
        .arg("-o")
        .arg(&run_path)
        .args(["--go-gc", "--span", "handle=main.handle", "--"])
        .arg(&program)
        .arg("4")
        .env("GODEBUG", "gctrace=1")
        .output()
        .expect("running switchyard record");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let own = json_line_with(&stdout, "requests");
    let run = load_run(&run_path);

    // GC cycles: gctrace prints one line per cycle, from the program's start (recorded from
    // its exec).
    let gctrace = stderr.lines().filter(|l| l.starts_with("gc ")).count() as u64;
    assert!(
        gctrace >= 5,
        "too few GC cycles to check: {gctrace}\n{stderr}"
    );
    assert_eq!(run["gc"]["cycles"], gctrace, "{stderr}");

    let anatomy = &run["locks"]["spans"][0]["anatomy"];
    assert_eq!(anatomy["count"], own["requests"], "{own}");

    // The span's probes are costed: its entry's breakpoint and the probe on the RET it left
    // by, timed as the recording started, for each of its calls.
    let costs = &run["meta"]["probe_costs"];
    let traps = &costs["traps"];
    let ret = traps["ret_ns"].as_f64().expect("a RET's probe timed");
    let p = &costs["probes"][0];
    assert_eq!(
        (p["span"].as_str(), p["go"].as_bool()),
        (Some("handle"), Some(true)),
        "{p}"
    );
    assert_eq!(p["calls"], own["requests"], "{p}");
    // Past its stack check, a Go function with a frame starts with `push %rbp`, which the
    // kernel emulates.
    assert_eq!(p["emulated"], true, "{p}");
    let each = traps["emulated_ns"].as_f64().unwrap() + ret;
    assert!(
        (p["ns_per_call"].as_f64().unwrap() - each).abs() < 1e-6,
        "{costs}"
    );
    assert!(stderr.contains("  handle (main.handle, Go: "), "{stderr}");
    let instances = anatomy["instances"].as_array().expect("instances");
    // Every instance is in the typical sample (fewer than 200 a second, all drawn).
    let census: Vec<&Value> = instances.iter().filter(|i| i["slow"] != true).collect();
    assert_eq!(
        census.len() as u64,
        own["requests"].as_u64().unwrap(),
        "{own}"
    );

    let ns = |v: &Value| v.as_u64().unwrap_or(0);
    let mut lock_ns = 0;
    let mut assist_ns = 0;
    for i in &census {
        let go = &i["go_time"];
        let parked: u64 = go["parked"]
            .as_array()
            .map(|p| p.iter().map(|p| ns(&p["ns"])).sum())
            .unwrap_or(0);
        let parts = ns(&i["oncpu_ns"])
            + ns(&i["blocked_ns"])
            + ns(&i["runqueue_ns"])
            + ns(&go["sched_ns"])
            + parked
            + ns(&go["other_parked_ns"]);
        let took = ns(&i["duration_ns"]);
        // A probe's own time between the reading of the clock and of the counters.
        assert!(
            parts.abs_diff(took) <= took / 100 + 200_000,
            "parts {parts} ns against {took} ns: {i:#}"
        );
        lock_ns += go["parked"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter(|p| p["reason"] == "sync.Mutex.Lock")
                    .map(|p| ns(&p["ns"]))
                    .sum()
            })
            .unwrap_or(0);
        assist_ns += ns(&go["assist_ns"]) + ns(&go["assist_runqueue_ns"]);
    }

    // The lock: parked in sync.Mutex.Lock, against the program's timing around Lock (which
    // also holds its spinning and its wait to run once woken: a little more).
    let own_lock = own["lock_seconds"].as_f64().unwrap() * 1e9;
    assert!(own_lock > 50e6, "too little lock wait to check: {own}");
    let ratio = lock_ns as f64 / own_lock;
    assert!(
        (0.95..=1.01).contains(&ratio),
        "lock {lock_ns} ns against {own_lock} ns: {own}"
    );

    // The assists: their time on a thread, against the runtime's assist time.
    let own_assist = own["assist_seconds"].as_f64().unwrap() * 1e9;
    assert!(own_assist > 5e6, "too little assist time to check: {own}");
    let ratio = assist_ns as f64 / own_assist;
    assert!(
        (0.80..=1.20).contains(&ratio),
        "assists {assist_ns} ns against {own_assist} ns ({ratio:.3}): {own}"
    );

    // The slowest 1%: explain's lock share against the program's.
    let ex = explain_run_json(&run_path);
    let span = &ex["spans"][0];
    assert_eq!(span["name"], "handle", "{span:#}");
    let lock = tail_share(span, "lock");
    let want = own["slow_lock_share"].as_f64().unwrap();
    assert!(
        (lock - want).abs() <= 0.10,
        "slow group's lock share {lock:.3}, the program's {want:.3}\n{span:#}"
    );
    let first = &span["slow"]["findings"][0];
    assert_eq!(first["kind"], "lock", "{span:#}");
    // Where it parked.
    assert!(
        first["summary"]
            .as_str()
            .unwrap()
            .contains("parked by the Go runtime (sync.Mutex.Lock in main.handle)"),
        "{first:#}"
    );
    assert_eq!(first["site"], "parked: sync.Mutex.Lock in main.handle");
    // Who made them ready: a goroutine unlocking the table, the compactor after its sleep
    // under the lock, or a handler the lock passed through after it. `ready` runs on the
    // system stack; the walk from there crosses to the waking goroutine's frames, down to
    // its start (a walk that stopped at runtime.systemstack would name the runtime).
    let culprit = &first["culprit"];
    let doing = culprit["doing"].as_str().unwrap();
    assert!(
        ["a goroutine in main.compact", "a goroutine in main.handle"].contains(&doing),
        "{first:#}"
    );
    let frames: Vec<&str> = culprit["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(frames.last(), Some(&"runtime.goexit"), "{first:#}");
    assert!(
        first["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("made ready by {doing} (thread requests)")),
        "{first:#}"
    );
}
