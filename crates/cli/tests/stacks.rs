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

/// A million getppid calls, far more a second than the syscall-stack limit allows at one in
/// 16: fewer stacks are taken, each counting the calls it stood for, so the getppid stacks
/// still add up to the calls (less the last interval's, not yet sampled when the target
/// exits: within 5%), and all of them reach the loop's function.
#[test]
fn syscall_stacks_under_the_rate_limit_add_up_to_the_calls() {
    if !privileged("syscall_stacks_under_the_rate_limit_add_up_to_the_calls") {
        return;
    }
    let dir = tempdir("syscall-rate");
    let run_path = dir.join("run.json");
    let calls = 1_000_000u64;
    let out = Command::new(switchyard())
        .args(["record", "--syscall-stack-rate", "1000", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args(["getppid-loop", "--count", &calls.to_string()])
        .output()
        .expect("running switchyard");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "record failed:\n{stdout}\n{stderr}");
    let run = load_run(&run_path);
    assert_eq!(syscall_count(&run, "getppid"), calls);
    let stacks = run["profiles"]["syscalls"]["stacks"].as_array().unwrap();
    let getppid: Vec<&serde_json::Value> =
        stacks.iter().filter(|s| s["label"] == "getppid").collect();
    let weighed: u64 = getppid.iter().map(|s| s["value"].as_u64().unwrap()).sum();
    // Each CPU's calls since its last stack (fewer than twice its interval) are in no stack.
    assert!(
        weighed <= calls && weighed >= calls - calls / 20,
        "getppid stacks weigh {weighed} calls of {calls}"
    );
    let (incl, _) = inclusive_frames(&run, "syscalls", false, |_| true);
    let in_loop = incl.get("switchyard_demo::getppid").copied().unwrap_or(0);
    assert!(
        in_loop >= weighed,
        "switchyard_demo::getppid in {in_loop} of {weighed}: {:?}",
        incl.keys()
    );
    let stats = &run["profiles"]["stats"];
    assert_eq!(stats["syscall_stacks_per_s"], 1000, "{stats}");
}

/// switchyard's own BPF programs are named in on-CPU kernel stacks as perf names them
/// (`bpf_prog_<tag>_<name>`), not as whatever kernel symbol precedes their JIT image, and the
/// summary says what share of the target's samples they took.
#[test]
fn the_probes_own_programs_are_named_in_kernel_stacks() {
    if !privileged("the_probes_own_programs_are_named_in_kernel_stacks") {
        return;
    }
    let command = demo_command(&["getppid-loop", "--count", "3000000"]);
    let command: Vec<&std::ffi::OsStr> = command.iter().map(|c| c.as_os_str()).collect();
    let (run, stderr) = record_spawned(&tempdir("bpf-names"), &["--freq", "999"], &command);
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

/// The pprof export keeps what `go tool pprof` needs to go back to the code: every user
/// location has its address, inside its mapping, and the mappings carry the binary's full
/// path and GNU build ID; `-disasm` then disassembles the hot function from the binary.
/// Needs Go (in the machine's base image; under CI=true its absence is a failure).
#[test]
fn pprof_has_addresses_mappings_and_build_ids() {
    if !privileged("pprof_has_addresses_mappings_and_build_ids") {
        return;
    }
    if Command::new("go").arg("version").output().is_err() {
        assert!(
            std::env::var("CI").is_err(),
            "go is missing; CI=true turns a skip into a failure"
        );
        eprintln!("skipping: go is not installed");
        return;
    }
    let dir = tempdir("pprof-addresses");
    let command = demo_command(&["stacks", "--seconds", "1"]);
    let command: Vec<&std::ffi::OsStr> = command.iter().map(|c| c.as_os_str()).collect();
    record_spawned(&dir, &[], &command);
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .arg("report")
        .arg(&run_path)
        .arg("-o")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    let profile = dir.join("oncpu.pb.gz");
    let raw = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&profile)
        .output()
        .unwrap();
    let raw = text(&raw).0;
    // Mappings: `1: 0xstart/0xlimit/0xoffset /path buildid [FN]…`.
    let demo_path = demo().canonicalize().unwrap();
    let section = |name: &str| -> Vec<&str> {
        raw.lines()
            .skip_while(|l| *l != name)
            .skip(1)
            .take_while(|l| {
                l.starts_with(' ') || l.chars().next().is_some_and(|c| c.is_ascii_digit())
            })
            .collect()
    };
    let mappings = section("Mappings");
    let demo_mapping = mappings
        .iter()
        .find(|l| l.contains(demo_path.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no mapping of {}: {mappings:#?}", demo_path.display()));
    let fields: Vec<&str> = demo_mapping.split_whitespace().collect();
    let range: Vec<u64> = fields[1]
        .split('/')
        .map(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).unwrap())
        .collect();
    assert!(range[0] > 0 && range[1] > range[0], "{demo_mapping}");
    let build_id = fields[3];
    assert!(
        build_id.len() >= 32 && build_id.chars().all(|c| c.is_ascii_hexdigit()),
        "{demo_mapping}"
    );
    let id = fields[0].trim_end_matches(':');
    // Locations: `N: 0xaddress M=mapping function …`; the demo's are inside its mapping.
    let locations = section("Locations");
    let ours: Vec<u64> = locations
        .iter()
        .filter(|l| l.contains(&format!(" M={id} ")))
        .map(|l| {
            let a = l.split_whitespace().nth(1).unwrap();
            u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap()
        })
        .collect();
    assert!(!ours.is_empty(), "{locations:#?}");
    assert!(
        ours.iter().all(|&a| range[0] <= a && a < range[1]),
        "{ours:x?} outside {demo_mapping}"
    );
    let disasm = Command::new("go")
        .args(["tool", "pprof", "-disasm", "hot_spin"])
        .arg(&profile)
        .output()
        .unwrap();
    let listing = text(&disasm).0;
    assert!(
        listing.contains("ROUTINE") && listing.contains("hot_spin"),
        "{listing}\n{}",
        text(&disasm).1
    );
}
