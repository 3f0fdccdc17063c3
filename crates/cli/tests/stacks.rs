//! Stacks of a target with one known hot function, one known blocking function and one
//! known waker: each leads its flame graph. Needs root.

mod common;

use std::{collections::HashMap, process::Command};

use common::*;

/// The demo's own functions that compete for the lead.
const CANDIDATES: [&str; 5] = [
    "switchyard_demo::hot_spin",
    "switchyard_demo::prepare_wakeup",
    "switchyard_demo::block_on_pipe",
    "switchyard_demo::wake_sleeper",
    "switchyard_demo::nap",
];

/// Inclusive value per frame name of a profile (a frame counts once per stack).
fn inclusive(run: &serde_json::Value, profile: &str, waker: bool) -> HashMap<String, u64> {
    inclusive_frames(run, profile, waker, |_| true).0
}

#[track_caller]
fn assert_leads(run: &serde_json::Value, profile: &str, leader: &str) {
    let (incl, total) = inclusive_frames(run, profile, false, |_| true);
    let get = |n: &str| incl.get(n).copied().unwrap_or(0);
    let lead = get(leader);
    for other in CANDIDATES.iter().filter(|c| **c != leader) {
        assert!(
            lead > get(other),
            "{profile}: {leader} ({lead}) does not lead {other} ({})",
            get(other)
        );
    }
    // A share, never an exact count: the profile is statistical.
    assert!(
        lead * 100 >= total * 30,
        "{profile}: {leader} has {lead} of {total}"
    );
}

#[test]
fn hot_blocking_and_waking_functions_lead_their_profiles() {
    if !privileged("hot_blocking_and_waking_functions_lead_their_profiles") {
        return;
    }
    let dir = tempdir("stacks");
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "--freq", "199", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args(["stacks", "--seconds", "2"])
        .output()
        .expect("running switchyard");
    assert!(out.status.success(), "{:?}", text(&out));
    let run = load_run(&run_path);

    assert_leads(&run, "oncpu", "switchyard_demo::hot_spin");
    assert_leads(&run, "offcpu", "switchyard_demo::block_on_pipe");

    // Wakeups of the sleepers name the waker thread and its waking function.
    let frames = run["profiles"]["frames"].as_array().unwrap();
    let has = |ids: &serde_json::Value, name: &str| {
        ids.as_array()
            .unwrap()
            .iter()
            .any(|i| frames[i.as_u64().unwrap() as usize]["name"] == name)
    };
    let (mut by_waker, mut all) = (0u64, 0u64);
    for s in run["profiles"]["wakeup"]["stacks"].as_array().unwrap() {
        if has(&s["frames"], "switchyard_demo::block_on_pipe") {
            let v = s["value"].as_u64().unwrap();
            all += v;
            if s["waker_comm"] == "waker"
                && has(&s["waker_frames"], "switchyard_demo::wake_sleeper")
            {
                by_waker += v;
            }
        }
    }
    assert!(all > 0, "no wakeups of block_on_pipe recorded");
    assert!(
        by_waker * 2 > all,
        "wake_sleeper woke {by_waker} of {all} ns"
    );

    // Kernel frames are symbolised: the sleepers' stacks reach the kernel function they
    // block in (a blocked thread's kernel stack is walked as the kernel shows it in
    // /proc/<pid>/stack, from the caller of the scheduler's own functions).
    let incl = inclusive(&run, "offcpu", false);
    assert!(
        incl.contains_key("anon_pipe_read") && !incl.contains_key("__schedule"),
        "kernel frames: {:?}",
        incl.keys()
    );

    // Syscall stacks: the sampled readv/write/read calls carry user frames.
    assert!(
        !run["profiles"]["syscalls"]["stacks"]
            .as_array()
            .unwrap()
            .is_empty(),
        "no syscall stacks"
    );
    // Stack-map collisions are possible (stacks hash into buckets) but are reported, in the
    // run's drops and in the stack statistics alike.
    let collisions = run["profiles"]["stats"]["collisions"].as_u64().unwrap();
    let reported: u64 = run["drops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["reason"].as_str().unwrap().starts_with("stacks lost"))
        .map(|d| d["count"].as_u64().unwrap())
        .sum();
    assert_eq!(collisions, reported, "drops: {}", run["drops"]);
}

/// switchyard's own BPF programs are named in on-CPU kernel stacks as perf names them
/// (`bpf_prog_<tag>_<name>`), not as whatever kernel symbol precedes their JIT image, and the
/// summary says what share of the target's samples they took.
#[test]
fn the_probes_own_programs_are_named_in_kernel_stacks() {
    if !privileged("the_probes_own_programs_are_named_in_kernel_stacks") {
        return;
    }
    let dir = tempdir("bpf-names");
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "--freq", "999", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args(["getppid-loop", "--count", "3000000"])
        .output()
        .unwrap();
    let stderr = text(&out).1;
    assert!(out.status.success(), "{stderr}");
    let run = load_run(&run_path);
    let (incl, total) = inclusive_frames(&run, "oncpu", false, |_| true);
    let in_probe: u64 = incl
        .iter()
        .filter(|(n, _)| n.starts_with("bpf_prog_") && n.ends_with("_sys_enter"))
        .map(|(_, v)| *v)
        .sum();
    assert!(
        in_probe > 0,
        "no bpf_prog_<tag>_sys_enter frame in {total} samples: {incl:?}"
    );
    assert!(
        !incl.keys().any(|n| n.contains("__stop_runtime_ptr")),
        "{:?}",
        incl.keys()
            .filter(|n| n.contains("__stop"))
            .collect::<Vec<_>>()
    );
    let frames = run["profiles"]["frames"].as_array().unwrap();
    assert!(
        frames
            .iter()
            .filter(|f| f["name"].as_str().unwrap().starts_with("bpf_prog_"))
            .all(|f| f["module"] == "[bpf]" && f["kind"] == "kernel")
    );
    assert!(stderr.contains("probes: "), "{stderr}");
}
