//! `record --heap-profile`: a dhat-instrumented target with a known number of allocations per
//! operation gets that number in the run, per operation, gated by a budget; a profile that is
//! missing, stale or not dhat's is a clear error (exit 2) with the run still saved. Needs root.

mod common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use common::*;

const OPS: &str = "20000";

/// Records the heap demo doing `allocs` allocations of 100 bytes per operation.
fn record_heap_demo(dir: &Path, allocs: &str, extra: &[&str]) -> (Output, PathBuf) {
    let demo = workspace_bin("switchyard-demo", "switchyard-demo-heap");
    let run = dir.join("run.json");
    let result = dir.join("result.json");
    let dhat = dir.join("dhat-heap.json");
    let out = Command::new(switchyard())
        .args(["record", "--no-stacks", "--syscalls", "none"])
        .arg("--heap-profile")
        .arg(&dhat)
        .arg("--workload-result")
        .arg(&result)
        .arg("-o")
        .arg(&run)
        .args(extra)
        .arg("--")
        .arg(demo)
        .args([
            "--ops", OPS, "--allocs", allocs, "--bytes", "100", "--result",
        ])
        .arg(&result)
        .arg("--dhat")
        .arg(&dhat)
        .output()
        .unwrap();
    (out, run)
}

fn gate(budgets: &Path, run: &Path) -> Output {
    Command::new(switchyard())
        .arg("gate")
        .arg("--budgets")
        .arg(budgets)
        .arg(run)
        .output()
        .unwrap()
}

#[test]
fn allocations_per_operation_are_exact_and_gated() {
    if !privileged("allocations_per_operation_are_exact_and_gated") {
        return;
    }
    let dir = tempdir("heap");
    let (out, run_path) = record_heap_demo(&dir, "3", &[]);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let run = load_run(&run_path);
    let ops: u64 = OPS.parse().unwrap();
    assert_eq!(run["operations"], ops);
    // 3 per operation, and the runtime's own few dozen (arguments, the result file).
    let allocs = run["heap"]["allocations"].as_u64().unwrap();
    assert!(
        (3 * ops..3 * ops + 300).contains(&allocs),
        "allocations: {allocs} for {ops} operations of 3"
    );
    let bytes = run["heap"]["bytes"].as_u64().unwrap();
    assert!(bytes >= 300 * ops, "bytes: {bytes}");
    assert!(
        stderr.contains("(3.00/op, "),
        "the summary gives allocations per op: {stderr}"
    );
    // The site: every one of the 3 × N allocations is under `operation`.
    let (by_function, total) = inclusive_frames(&run, "heap", false, |_| true);
    assert_eq!(total, allocs);
    let in_operation = by_function["switchyard_demo_heap::operation"];
    assert_eq!(in_operation, 3 * ops, "allocations under operation()");

    // Gated: at most 3 per operation passes; the same budget fails a build that makes 4.
    let budgets = dir.join("budgets.toml");
    std::fs::write(
        &budgets,
        "[[budget]]\nworkload = \"heap-demo\"\nmetric = \"heap.allocs.per_op\"\nmax = 3.01\n",
    )
    .unwrap();
    let pass = gate(&budgets, &run_path);
    assert_eq!(pass.status.code(), Some(0), "{:?}", text(&pass));
    let worse = tempdir("heap-worse");
    let (out, worse_run) = record_heap_demo(&worse, "4", &[]);
    assert!(out.status.success(), "{}", text(&out).1);
    let fail = gate(&budgets, &worse_run);
    assert_eq!(fail.status.code(), Some(1), "{:?}", text(&fail));
    assert!(
        text(&fail).0.contains("heap.allocs.per_op"),
        "{:?}",
        text(&fail)
    );
}

#[test]
fn a_missing_stale_or_foreign_heap_profile_is_an_error_and_the_run_is_kept() {
    if !privileged("a_missing_stale_or_foreign_heap_profile_is_an_error_and_the_run_is_kept") {
        return;
    }
    // Refused before anything runs: a directory that does not exist.
    let out = Command::new(switchyard())
        .args([
            "record",
            "--heap-profile",
            "/nonexistent/dir/dhat-heap.json",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_user_error(&out, "does not exist");

    // A target that writes no profile: the file left by an earlier run is not this run's.
    let dir = tempdir("heap-stale");
    let stale = dir.join("dhat-heap.json");
    std::fs::write(&stale, "{}").unwrap();
    let run = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "--no-stacks", "--heap-profile"])
        .arg(&stale)
        .arg("-o")
        .arg(&run)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_user_error(&out, "was not rewritten during the recording");
    assert!(
        text(&out).1.contains("holds the run without it"),
        "{:?}",
        text(&out)
    );
    assert_eq!(load_run(&run)["format"], "switchyard-run");

    // A file that is written, but is not a dhat profile.
    let foreign = tempdir("heap-foreign");
    let profile = foreign.join("profile.json");
    let run = foreign.join("run.json");
    let script = format!("echo '{{\"format\":\"other\"}}' > {}", profile.display());
    let out = Command::new(switchyard())
        .args(["record", "--no-stacks", "--heap-profile"])
        .arg(&profile)
        .arg("-o")
        .arg(&run)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_user_error(&out, "not a dhat heap profile");
    assert_eq!(load_run(&run)["format"], "switchyard-run");
}
