//! Stacks walked inside a span name the probed function's caller. While the function runs, its
//! return probe has replaced its return address with the address of the kernel's trampoline
//! (the `[uprobes]` page); the walker puts the original back, from the task's pending return
//! instances, and goes on to the caller and up to the thread's start.
//!
//! `switchyard-demo requests` calls `handle_request` from its worker thread's loop (a closure
//! in `requests`), and `handle_request` burns 200 µs of CPU in `compute_response`: walked by
//! call-frame information. A C program built without unwind tables calls `work` from `caller`:
//! walked by frame pointers. Needs root (and gcc for the second).

mod common;

use std::{collections::HashMap, path::Path, process::Command};

use common::*;
use serde_json::Value;

/// The frame names of each stack of `profile` (root first), with its value.
fn stacks(run: &Value, profile: &str) -> Vec<(Vec<String>, u64)> {
    let frames = run["profiles"]["frames"].as_array().expect("frames");
    run["profiles"][profile]["stacks"]
        .as_array()
        .unwrap_or_else(|| panic!("no {profile} stacks"))
        .iter()
        .map(|s| {
            let names = s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| {
                    frames[i.as_u64().unwrap() as usize]["name"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            (names, s["value"].as_u64().unwrap())
        })
        .collect()
}

/// Of the stacks of `profile` that `keep` selects, the total value, the value of those whose
/// frame right above `probed` (its caller) `is_caller` accepts, and the values by that frame.
fn callers(
    run: &Value,
    profile: &str,
    probed: &str,
    keep: impl Fn(&[String]) -> bool,
    is_caller: impl Fn(&str) -> bool,
) -> (u64, u64, Vec<(String, u64)>) {
    let (mut total, mut good) = (0, 0);
    let mut above: HashMap<String, u64> = HashMap::new();
    for (names, value) in stacks(run, profile) {
        if !keep(&names) {
            continue;
        }
        total += value;
        let caller = match names.iter().position(|n| n == probed) {
            Some(0) => "(none: the stack starts there)".to_string(),
            Some(i) => names[i - 1].clone(),
            None => format!("(no {probed} frame)"),
        };
        if is_caller(&caller) {
            good += value;
        }
        *above.entry(caller).or_default() += value;
    }
    let mut above: Vec<(String, u64)> = above.into_iter().collect();
    above.sort_by_key(|a| std::cmp::Reverse(a.1));
    (total, good, above)
}

/// The summary's line on how complete the user stacks were.
fn completeness(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.contains("complete to the thread's start"))
        .unwrap_or("(no completeness line)")
}

#[test]
fn stacks_walked_inside_a_span_name_the_probed_functions_caller() {
    let test = "stacks_walked_inside_a_span_name_the_probed_functions_caller";
    if !privileged(test) {
        return;
    }
    let dir = tempdir("retprobe-stacks");
    let (run, stderr) = record_spawned(
        &dir,
        &["--span", "handle_request", "--freq", "999"],
        &demo_command(&["requests", "--seconds", "3", "--dir", dir.to_str().unwrap()])
            .iter()
            .map(|a| a.as_os_str())
            .collect::<Vec<_>>(),
    );
    eprintln!("{}", completeness(&stderr));
    // The worker's loop: a closure in `requests` (named `{{closure}}` or `{closure#0}`).
    let is_loop = |n: &str| n.starts_with("switchyard_demo::requests::") && n.contains("closure");

    let in_compute = |names: &[String]| names.iter().any(|n| n.ends_with("compute_response"));
    let (total, good, above) = callers(&run, "oncpu", "handle_request", in_compute, is_loop);
    eprintln!("on-CPU samples in compute_response: {total}, by handle_request's caller: {above:?}");
    assert!(
        total >= 100,
        "only {total} on-CPU samples in compute_response (3 s of 200-µs requests at 999 Hz \
         should give several hundred)\n{stderr}"
    );
    assert!(
        good as f64 >= 0.95 * total as f64,
        "on-CPU samples in compute_response: {good} of {total} have the worker's loop right \
         above handle_request; the frames found there: {above:?}"
    );

    // Blocked in the span (the lock, fsync, preemption), walked at the switch, and at syscalls.
    for profile in ["offcpu", "syscalls", "futex"] {
        let in_span = |names: &[String]| names.iter().any(|n| n == "handle_request");
        let (total, good, above) = callers(&run, profile, "handle_request", in_span, is_loop);
        eprintln!("{profile} weight through handle_request: {total}, by its caller: {above:?}");
        assert!(
            good as f64 >= 0.95 * total as f64,
            "{profile} stacks through handle_request: {good} of {total} (by weight) have the \
             worker's loop right above it; the frames found there: {above:?}"
        );
    }
}

/// `work` (probed) called by `caller` in a loop for argv[1] seconds; built without unwind
/// tables, so the walker steps through these frames by their frame pointers.
const NO_CFI_PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* A call, so that `work` is no leaf and keeps a frame pointer. */
__attribute__((noipa)) void seed(unsigned long *h) { *h ^= 0x9e3779b97f4a7c15UL; }

__attribute__((noipa)) unsigned long work(unsigned long n) {
    unsigned long h = n;
    seed(&h);
    for (unsigned long i = 0; i < 200000; i++)
        h = h * 6364136223846793005UL + i;
    return h;
}

__attribute__((noipa)) unsigned long caller(unsigned long n) { return work(n) + 1; }

int main(int argc, char **argv) {
    double secs = atof(argv[1]);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long sum = 0, calls = 0;
    do {
        sum += caller(calls++);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
    printf("calls %lu sum %lu\n", calls, sum & 0xff);
    return 0;
}
"#;

/// A skip, printed; a failure under CI=true, so a missing compiler cannot pass silently.
#[track_caller]
fn skip(reason: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{reason}; CI=true turns a skip into a failure");
    }
    eprintln!("skipping: {reason}");
}

#[test]
fn frame_pointer_steps_inside_a_span_name_the_probed_functions_caller() {
    let test = "frame_pointer_steps_inside_a_span_name_the_probed_functions_caller";
    if !privileged(test) {
        return;
    }
    let dir = tempdir("retprobe-stacks-fp");
    std::fs::write(dir.join("nocfi.c"), NO_CFI_PROGRAM).unwrap();
    let exe = dir.join("nocfi");
    match Command::new("gcc")
        .args([
            "-O1",
            "-fno-omit-frame-pointer",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
            "-o",
        ])
        .arg(&exe)
        .arg(dir.join("nocfi.c"))
        .output()
    {
        Ok(o) if o.status.success() => {}
        other => return skip(&format!("cannot compile with gcc: {other:?}")),
    }
    assert!(
        !has_unwind_info_for(&exe, "work"),
        "{} has CFI for work: the test would not take the frame-pointer path",
        exe.display()
    );
    let (run, stderr) = record_spawned(
        &dir,
        &["--span", "work", "--freq", "999"],
        &[exe.as_os_str(), "2".as_ref()],
    );
    eprintln!("{}", completeness(&stderr));
    let in_work = |names: &[String]| names.iter().any(|n| n == "work");
    let (total, good, above) = callers(&run, "oncpu", "work", in_work, |n| n == "caller");
    eprintln!("on-CPU samples in work: {total}, by its caller: {above:?}");
    assert!(
        total >= 100,
        "only {total} on-CPU samples in work\n{stderr}"
    );
    // A sample at `work`'s first instructions, before its frame pointer is set, finds
    // `caller`'s frame pointer and steps past `caller`: a frame-pointer walk's nature, rare.
    assert!(
        good as f64 >= 0.9 * total as f64,
        "on-CPU samples in work: {good} of {total} have caller right above it; the frames \
         found there: {above:?}"
    );
}

/// True when `exe`'s `.eh_frame` has an FDE covering the symbol `name` (by `readelf`); false
/// when it cannot tell.
fn has_unwind_info_for(exe: &Path, name: &str) -> bool {
    let Ok(syms) = Command::new("nm").arg(exe).output() else {
        return false;
    };
    let Some(addr) = String::from_utf8_lossy(&syms.stdout).lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (a, _, n) = (f.next()?, f.next()?, f.next()?);
        (n == name).then(|| u64::from_str_radix(a, 16).ok())?
    }) else {
        return false;
    };
    let Ok(frames) = Command::new("readelf").args(["-wf"]).arg(exe).output() else {
        return false;
    };
    // FDE lines: "... FDE cie=... pc=0000000000001040..0000000000001066".
    String::from_utf8_lossy(&frames.stdout).lines().any(|l| {
        let Some(range) = l.split("pc=").nth(1) else {
            return false;
        };
        let mut ends = range.split("..");
        let parse = |s: Option<&str>| s.and_then(|s| u64::from_str_radix(s.trim(), 16).ok());
        matches!((parse(ends.next()), parse(ends.next())), (Some(lo), Some(hi)) if lo <= addr && addr < hi)
    })
}
