//! Lock waits against a target with known behaviour: N futex waits on one word and M calls of
//! a named function are counted exactly. Needs root.

mod common;

use std::process::Command;

use common::*;

#[test]
fn futex_waits_and_uprobe_spans_are_exact() {
    if !privileged("futex_waits_and_uprobe_spans_are_exact") {
        return;
    }
    let dir = tempdir("locks");
    let run_path = dir.join("run.json");
    let (n, m) = (400u64, 1500u64);
    let out = Command::new(switchyard())
        .args(["record", "--uprobe-span", "demo_span_target", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args([
            "locks",
            "--futex-waits",
            &n.to_string(),
            "--span-calls",
            &m.to_string(),
        ])
        .output()
        .expect("running switchyard");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let own: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the demo's JSON line");
    let run = load_run(&run_path);
    let locks = &run["locks"];

    assert_eq!(locks["futex"]["count"], n, "{locks}");
    assert_eq!(locks["futex"]["timeouts"], own["timed_out"], "{locks}");
    let top = &locks["futex_top"][0];
    assert_eq!(top["uaddr"], own["futex_word"], "{locks}");
    assert_eq!(top["count"], n);
    // Each wait times out after 20 µs at the earliest.
    assert!(locks["futex"]["total_ns"].as_u64().unwrap() >= n * 20_000);

    let span = &locks["spans"][0];
    assert_eq!(span["symbol"], "demo_span_target");
    assert_eq!(span["stats"]["count"], m, "{span}");

    // The futex wait stacks name the waiting function.
    let frames = run["profiles"]["frames"].as_array().unwrap();
    let waiting =
        run["profiles"]["futex"]["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| {
                s["frames"].as_array().unwrap().iter().any(|i| {
                    frames[i.as_u64().unwrap() as usize]["name"] == "switchyard_demo::locks"
                })
            });
    assert!(waiting, "no futex stack names switchyard_demo::locks");
}

#[test]
fn unknown_uprobe_symbol_is_a_clear_error() {
    if !privileged("unknown_uprobe_symbol_is_a_clear_error") {
        return;
    }
    let out = Command::new(switchyard())
        .args(["record", "--uprobe-span", "no_such_symbol_here", "--"])
        .arg(demo())
        .args(["locks", "--futex-waits", "1", "--span-calls", "1"])
        .output()
        .unwrap();
    assert_user_error(&out, "no_such_symbol_here");
}
