//! JIT frames: a Node.js target run with `--perf-basic-prof` gets its JavaScript functions
//! named from its perf map, read while it lives, and marked as JIT frames. Needs root and
//! Node.js (in the machine's base image; under CI=true its absence is a failure).

mod common;

use std::process::Command;

use common::*;

/// A hot function called from a known caller, for 1.5 s; then the script deletes its own perf
/// map, as a target whose /tmp is private or cleaned would lose it before symbolisation.
const SCRIPT: &str = r#"
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function hot() {
  let s = 0;
  const end = Date.now() + 1500;
  while (Date.now() < end) s += fib(20);
  return s;
}
console.log(hot());
require("fs").unlinkSync(`/tmp/perf-${process.pid}.map`);
"#;

#[test]
fn node_functions_are_named_from_the_perf_map_read_while_the_target_lives() {
    if !privileged("node_functions_are_named_from_the_perf_map_read_while_the_target_lives") {
        return;
    }
    if Command::new("node").arg("--version").output().is_err() {
        let reason = "skipping: node is not installed";
        assert!(
            std::env::var("CI").is_err(),
            "{reason}; CI=true turns a skip into a failure"
        );
        eprintln!("{reason}");
        return;
    }
    let dir = tempdir("jit");
    let script = dir.join("fib.js");
    std::fs::write(&script, SCRIPT).unwrap();
    let node = [
        "node".as_ref(),
        "--perf-basic-prof".as_ref(),
        // --perf-basic-prof also turns on V8's code-event log, one isolate-*.log per run in
        // the working directory; the perf map is all a profiler reads.
        "--logfile=/dev/null".as_ref(),
        "--interpreted-frames-native-stack".as_ref(),
        script.as_os_str(),
    ];
    let (run, _) = record_spawned(&dir, &[], &node);
    let frames = run["profiles"]["frames"].as_array().unwrap();
    let name = |i: &serde_json::Value| {
        frames[i.as_u64().unwrap() as usize]["name"]
            .as_str()
            .unwrap()
    };
    let kind = |i: &serde_json::Value| {
        frames[i.as_u64().unwrap() as usize]["kind"]
            .as_str()
            .unwrap()
    };
    let (mut total, mut in_fib, mut unknown) = (0, 0, 0);
    for s in run["profiles"]["oncpu"]["stacks"].as_array().unwrap() {
        let value = s["value"].as_u64().unwrap();
        total += value;
        let ids = s["frames"].as_array().unwrap();
        if ids.iter().any(|i| kind(i) == "unknown") {
            unknown += value;
        }
        // Root first: the first fib frame's caller is hot, both JIT frames of the script.
        let Some(at) = ids.iter().position(|i| name(i).contains("fib ")) else {
            continue;
        };
        let script_frame = |i: &serde_json::Value| {
            kind(i) == "jit" && name(i).starts_with("JS:") && name(i).contains("fib.js:")
        };
        assert!(script_frame(&ids[at]), "{}", name(&ids[at]));
        assert!(
            at > 0 && name(&ids[at - 1]).contains("hot "),
            "{:?}",
            ids.iter().map(name).collect::<Vec<_>>()
        );
        assert!(script_frame(&ids[at - 1]));
        in_fib += value;
    }
    assert!(total > 50, "{total} on-CPU samples");
    assert!(
        in_fib * 100 >= total * 60,
        "fib in {in_fib} of {total} samples"
    );
    assert!(
        unknown * 100 < total * 5,
        "[unknown] in {unknown} of {total} samples"
    );
}
