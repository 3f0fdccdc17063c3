//! Go GC events from an unmodified Go binary: the cycles switchyard counts equal the runtime's
//! own count (one `GODEBUG=gctrace=1` line per cycle, and runtime.NumGC). Needs root and Go.

mod common;

use std::{path::PathBuf, process::Command};

use common::*;

/// Builds the Go target, or says why it cannot (a skip; a failure under CI=true).
fn go_target(dir: &std::path::Path) -> Option<PathBuf> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../workloads/demo/go-gc");
    let out = dir.join("gogc");
    match Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .status()
    {
        Ok(s) if s.success() => Some(out),
        other => {
            let reason =
                format!("skipping: cannot build the Go target ({other:?}); is `go` on PATH?");
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{reason}; CI=true turns a skip into a failure");
            }
            eprintln!("{reason}");
            None
        }
    }
}

/// With `--go-gc`, and without it: a Go target is recognised by its runtime's symbols.
#[test]
fn go_gc_cycles_match_gctrace_exactly() {
    if !privileged("go_gc_cycles_match_gctrace_exactly") {
        return;
    }
    let dir = tempdir("gogc");
    let Some(target) = go_target(&dir) else {
        return;
    };
    // Whole, and cut into windows: every cycle lands in exactly one window.
    for flags in [&["--go-gc"][..], &[], &["--every", "40ms"]] {
        gc_cycles_match_gctrace(&dir, &target, flags);
    }
}

fn gc_cycles_match_gctrace(dir: &std::path::Path, target: &std::path::Path, flags: &[&str]) {
    let windowed = flags.contains(&"--every");
    let run_path = dir.join(if windowed { "windows" } else { "run.json" });
    let out = Command::new(switchyard())
        .arg("record")
        .args(flags)
        .args(["--no-stacks", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(target)
        .args(["--forced", "7", "--alloc-mb", "300"])
        .env("GODEBUG", "gctrace=1")
        .output()
        .expect("running switchyard");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // gctrace prints "gc N @…" once per completed cycle, N counting from 1.
    let traced = gctrace_cycles(&stderr);
    let num_gc: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the Go target's JSON line");
    let runs: Vec<serde_json::Value> = if windowed {
        load_windows(&run_path)
    } else {
        vec![load_run(&run_path)]
    };
    if windowed {
        assert!(runs.len() >= 2, "{} windows:\n{stderr}", runs.len());
    }
    // The windows' figures, summed (a whole run is one window).
    let mut gc = runs[0]["gc"].clone();
    for key in ["cycles", "pauses", "events_lost"] {
        let sum: u64 = runs.iter().map(|r| r["gc"][key].as_u64().unwrap()).sum();
        gc[key] = sum.into();
    }
    let gc = &gc;
    assert!(
        traced >= 7,
        "{flags:?}: only {traced} gctrace lines:\n{stderr}"
    );
    assert_eq!(gc["cycles"], num_gc["num_gc"], "{flags:?}: gc: {gc}");
    assert_eq!(gc["cycles"], traced, "{flags:?}: gc: {gc}");
    // Two stop-the-world pauses per cycle, plus ReadMemStats' own.
    assert!(gc["pauses"].as_u64().unwrap() >= 2 * traced, "gc: {gc}");
    assert_eq!(gc["events_lost"], 0);
    let found: Vec<&serde_json::Value> = gc["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["found"] == true)
        .collect();
    assert!(
        found
            .iter()
            .any(|s| s["symbol"] == "runtime.gcMarkTermination"),
        "{gc}"
    );
}

/// The number of gctrace's "gc N @" lines in `text`, checked to run 1..=N without a gap.
///
/// The runtime prints a line in several writes, and switchyard prints a line per window (in one
/// write) while the target runs: one of ours may stand inside one of its. Ours are taken out
/// first.
fn gctrace_cycles(text: &str) -> u64 {
    let mut rest = text;
    let mut theirs = String::new();
    while let Some(at) = rest.find("window ") {
        let is_ours = rest[at + 7..]
            .split_once(':')
            .is_some_and(|(n, _)| n.parse::<u64>().is_ok());
        theirs.push_str(&rest[..at]);
        let end = if is_ours {
            rest[at..].find('\n').map_or(rest.len(), |n| at + n + 1)
        } else {
            theirs.push_str("window ");
            at + 7
        };
        rest = &rest[end..];
    }
    theirs.push_str(rest);
    let cycles: Vec<u64> = theirs
        .lines()
        .filter_map(|l| {
            let (n, tail) = l.strip_prefix("gc ")?.split_once(' ')?;
            tail.starts_with('@').then(|| n.parse().ok())?
        })
        .collect();
    let n = cycles.len() as u64;
    assert!(
        cycles.iter().copied().eq(1..=n),
        "gctrace's cycle numbers are not 1..={n}: {cycles:?}\n{text}"
    );
    n
}

#[test]
fn gctrace_lines_split_by_ours_are_read_whole() {
    let text = "switchyard: recording\ngc 1 @0.001s 2%: …\ngc window 1: 40.1ms, 3 switches → \
                run-1.json\n2 @0.05s 1%: …\ngc 3 @0.1s\nwindow 2: 1ms\n";
    assert_eq!(gctrace_cycles(text), 3);
    assert_eq!(gctrace_cycles("gc 12 x\nno gc window here\n"), 0);
}

/// `--no-go-gc` leaves a Go target's GC out, and a program that is not Go gets none.
#[test]
fn no_gc_for_a_non_go_target_or_with_no_go_gc() {
    if !privileged("no_gc_for_a_non_go_target_or_with_no_go_gc") {
        return;
    }
    let dir = tempdir("gogc-off");
    let Some(target) = go_target(&dir) else {
        return;
    };
    let run_path = dir.join("run.json");
    for (program, flags) in [
        (target.as_path(), &["--no-go-gc"][..]),
        (std::path::Path::new("/bin/true"), &[]),
    ] {
        let out = Command::new(switchyard())
            .arg("record")
            .args(flags)
            .args(["--no-stacks", "-o"])
            .arg(&run_path)
            .arg("--")
            .arg(program)
            .args(["--forced", "1", "--alloc-mb", "10"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out).1);
        assert!(
            !text(&out).1.contains("is a Go program"),
            "{}",
            text(&out).1
        );
        let run = load_run(&run_path);
        assert!(run["gc"].is_null(), "{program:?} {flags:?}: {}", run["gc"]);
    }
}

#[test]
fn go_gc_on_a_non_go_binary_is_a_clear_error() {
    if !privileged("go_gc_on_a_non_go_binary_is_a_clear_error") {
        return;
    }
    let out = Command::new(switchyard())
        .args(["record", "--go-gc", "--no-stacks", "--", "/bin/true"])
        .output()
        .unwrap();
    assert_user_error(&out, "none of the Go runtime's GC functions");
}

/// An allocating Go program (`go-gc -churn-s`: workers replacing the nodes of a large
/// pointer-rich live set) against its own `GODEBUG=gctrace=1`: the GC's findings (the
/// collector's work, the mark assists, the stop-the-world pauses) take gctrace's share of the
/// CPU, within 10 points, as shares of the process's CPU time; the GC is the first or second
/// of the program's own causes (waits for a CPU depend on the host's other load), and the
/// first is the program's own work or the GC it drives. Recorded at nice -15.
#[test]
fn go_gc_share_of_the_cpu_matches_gctrace() {
    if !privileged("go_gc_share_of_the_cpu_matches_gctrace") {
        return;
    }
    let dir = tempdir("gogc-share");
    let Some(target) = go_target(&dir) else {
        return;
    };
    let run_path = dir.join("run.json");
    let out = Command::new("nice")
        .args(["-n", "-15"])
        .arg(switchyard())
        .args(["record", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(&target)
        .args(["-churn-s", "3"])
        .env("GODEBUG", "gctrace=1")
        .output()
        .expect("running switchyard");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // "gc N @T s P%: …": P is the GC's share of the CPU since the program started.
    let traced: f64 = stderr
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.strip_prefix("gc ")?.split_once(" @")?;
            let (_, rest) = rest.split_once(' ')?;
            rest.split_once("%:")?.0.parse::<f64>().ok()
        })
        .next_back()
        .unwrap_or_else(|| panic!("no gctrace line:\n{stderr}"))
        / 100.0;
    let out = Command::new(switchyard())
        .args(["explain", "--json"])
        .arg(&run_path)
        .output()
        .expect("running switchyard explain");
    let (json, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let ex: serde_json::Value = serde_json::from_str(&json).unwrap();
    // The program's own causes, ranked: waits for a CPU are left out, since how long its
    // threads wait for one depends on the host's other load (these tests share a small host;
    // the program keeps both its Ps busy, so any other load makes its threads queue).
    let findings: Vec<&serde_json::Value> = ex["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] != "runqueue")
        .collect();
    let gc: Vec<&serde_json::Value> = findings
        .iter()
        .copied()
        .filter(|f| f["kind"] == "gc")
        .filter(|f| {
            !f["evidence"]
                .as_str()
                .unwrap()
                .starts_with("off-CPU profile")
        })
        .collect();
    let share: f64 = gc.iter().map(|f| f["share"].as_f64().unwrap()).sum();
    assert!(
        (share - traced).abs() <= 0.10,
        "the GC's findings take {share:.3} of the CPU, gctrace {traced:.3}:\n{json}"
    );
    let has = |what: &str| {
        gc.iter()
            .any(|f| f["summary"].as_str().unwrap().contains(what))
    };
    assert!(
        has("mark assists") && has("stopped the world") && has("mark workers"),
        "the assists, the pauses and the collector are not each a finding:\n{json}"
    );
    assert!(
        findings[..2].iter().any(|f| f["kind"] == "gc"),
        "the GC is neither first nor second:\n{json}"
    );
    let first = &findings[0];
    let culprit = first["culprit"]["doing"].as_str().unwrap_or_default();
    assert!(
        (first["kind"] == "oncpu"
            && first["site"] == "main.churn.func1"
            && first["culprit"].is_null())
            || (first["kind"] == "gc" && culprit == "allocating in main.churn.func1"),
        "the first finding is neither the churn nor the GC it drives:\n{json}"
    );
}
