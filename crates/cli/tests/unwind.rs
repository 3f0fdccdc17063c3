//! Complete user stacks through code without frame pointers: a C target built with
//! `-fomit-frame-pointer` against the distribution's glibc (which keeps none either), walked
//! by call-frame information. Exact caller chains, for a process started by `record`, a child
//! it forks and execs, and a library it dlopens after recording starts. Needs root and a C
//! compiler.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use common::*;

/// Compiles the C targets into `dir`.
fn build(dir: &Path) -> (PathBuf, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nofp");
    let exe = dir.join("nofp");
    let lib = dir.join("libnap.so");
    for (out, args) in [
        (
            &exe,
            vec![src.join("nofp.c").display().to_string(), "-ldl".into()],
        ),
        (
            &lib,
            vec![
                "-shared".into(),
                "-fPIC".into(),
                src.join("nap.c").display().to_string(),
            ],
        ),
    ] {
        let status = Command::new("cc")
            .args(["-O2", "-g", "-fomit-frame-pointer", "-o"])
            .arg(out)
            .args(&args)
            .status()
            .expect("running cc (a C compiler is needed for this test)");
        assert!(status.success(), "cc failed for {}", out.display());
    }
    (exe, lib)
}

/// Records `args` (after `--`) with `extra` options and returns the run.
fn record(dir: &Path, name: &str, extra: &[&str], args: &[&str]) -> serde_json::Value {
    let run_path = dir.join(format!("{name}.json"));
    let out = Command::new(switchyard())
        .args(["record", "--freq", "199", "-o"])
        .arg(&run_path)
        .args(extra)
        .arg("--")
        .args(args)
        .output()
        .expect("running switchyard");
    assert!(out.status.success(), "{:?}", text(&out));
    load_run(&run_path)
}

/// The user frames of a stack (root first), by name.
fn user_frames(run: &serde_json::Value, stack: &serde_json::Value) -> Vec<String> {
    let frames = run["profiles"]["frames"].as_array().unwrap();
    stack["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &frames[i.as_u64().unwrap() as usize])
        .filter(|f| f["kind"] != "kernel")
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// The heaviest stack of `profile` among those of process `tgid` (any when `None`).
fn leading(run: &serde_json::Value, profile: &str, tgid: Option<u64>) -> Vec<String> {
    let stack = run["profiles"][profile]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| tgid.is_none_or(|t| s["tgid"].as_u64() == Some(t)))
        .max_by_key(|s| s["value"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("no {profile} stacks"));
    user_frames(run, stack)
}

/// `chain` (root first) is the user stack's start at `_start` and, from `main` on, exactly
/// `from_main`; then anything (the C library's own frames) up to the leaf.
#[track_caller]
fn assert_chain(stack: &[String], from_main: &[&str]) {
    assert_eq!(
        stack.first().map(String::as_str),
        Some("_start"),
        "{stack:?}"
    );
    let main = stack
        .iter()
        .position(|f| f == "main")
        .unwrap_or_else(|| panic!("no main in {stack:?}"));
    let after: Vec<&str> = stack[main..]
        .iter()
        .take(from_main.len())
        .map(String::as_str)
        .collect();
    assert_eq!(after, from_main, "whole stack: {stack:?}");
}

#[test]
fn stacks_without_frame_pointers_reach_main() {
    if !privileged("stacks_without_frame_pointers_reach_main") {
        return;
    }
    let dir = tempdir("unwind");
    let (exe, _) = build(&dir);
    let exe = exe.display().to_string();
    let run = record(&dir, "run", &[], &[&exe, "run", "8"]);
    assert_eq!(run["profiles"]["stats"]["unwind"], "cfi");

    // The blocking function leads the off-CPU graph, with its caller chain down to _start.
    let off = leading(&run, "offcpu", None);
    assert_chain(&off, &["main", "sleeper", "usleep"]);
    // The hot leaf leads the on-CPU graph with its caller and main below it.
    let on = leading(&run, "oncpu", None);
    assert_chain(&on, &["main", "burn", "hot_leaf"]);
    assert_eq!(on.last().map(String::as_str), Some("hot_leaf"), "{on:?}");

    // The quality line says so: the off-CPU time reaches the thread's start, the first nap
    // included (the spawned program is held until its loader has mapped libc, so libc's table
    // is in place before main runs).
    let quality = run["profiles"]["stats"]["quality"].as_array().unwrap();
    let offcpu = quality.iter().find(|q| q["profile"] == "offcpu").unwrap();
    let (complete, total) = (
        offcpu["complete"].as_u64().unwrap(),
        offcpu["total"].as_u64().unwrap(),
    );
    assert!(complete * 100 >= total * 99, "{offcpu}");
    let tables = &run["profiles"]["stats"]["tables"];
    assert!(tables["rows"].as_u64().unwrap() > 0, "{tables}");
}

#[test]
fn a_forked_and_execd_child_gets_its_tables() {
    if !privileged("a_forked_and_execd_child_gets_its_tables") {
        return;
    }
    let dir = tempdir("unwind-fork");
    let (exe, _) = build(&dir);
    let exe = exe.display().to_string();
    let run = record(&dir, "fork", &[], &[&exe, "fork", "6"]);
    let children = run["meta"]["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{}", run["meta"]);
    let child = children[0].as_u64().unwrap();
    let off = leading(&run, "offcpu", Some(child));
    assert_chain(&off, &["main", "sleeper", "usleep"]);
    let on = leading(&run, "oncpu", Some(child));
    assert_chain(&on, &["main", "burn", "hot_leaf"]);
}

#[test]
fn a_library_opened_after_attach_gets_its_table() {
    if !privileged("a_library_opened_after_attach_gets_its_table") {
        return;
    }
    let dir = tempdir("unwind-dlopen");
    let (exe, lib) = build(&dir);
    let (exe, lib) = (exe.display().to_string(), lib.display().to_string());
    let run = record(&dir, "dlopen", &[], &[&exe, "dlopen", &lib, "40"]);
    let off = leading(&run, "offcpu", None);
    assert_chain(
        &off,
        &["main", "call_library", "nap", "nap_inner", "usleep"],
    );
}

#[test]
fn frame_pointer_walks_are_still_available() {
    if !privileged("frame_pointer_walks_are_still_available") {
        return;
    }
    let dir = tempdir("unwind-fp");
    let (exe, _) = build(&dir);
    let exe = exe.display().to_string();
    let run = record(&dir, "fp", &["--unwind", "fp"], &[&exe, "run", "2"]);
    let stats = &run["profiles"]["stats"];
    assert_eq!(stats["unwind"], "fp");
    assert!(stats.get("tables").is_none(), "{stats}");
}
