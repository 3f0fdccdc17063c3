//! What reaches the terminal when the target chose hostile names: a thread that sets the
//! window title (`\x1b]0;pwned\x07`), one whose name forges a finding (`hog\r\n2. [fake]`), a
//! Python function that forges a line, a bidi override, a C1 CSI, a cgroup path, a futex
//! symbol and a workload that carry escape sequences (`tests/data/hostile.json`). `explain`,
//! `compare` and `gate` print them escaped, checked against golden files; the record summary
//! is checked the same way in `src/summary.rs`. `SWITCHYARD_BLESS=1` rewrites the files.
//!
//! Each output is also held to two rules whatever the golden files say: no control character
//! but the line ends (no ESC, CR, BEL, C1, bidi override), and as many lines as the same runs
//! with plain names print.

mod common;
#[path = "common/tame.rs"]
mod tame;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use common::*;
use serde_json::Value;
use switchyard_golden::Golden;
use switchyard_model::term::is_unsafe;
use tame::tame;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

#[track_caller]
fn golden(name: &str, actual: &str) {
    Golden::new(
        data().join("results"),
        "cargo test -p switchyard --test terminal",
    )
    .check(name, actual);
}

fn hostile() -> Value {
    load_run(&data().join("hostile.json"))
}

/// The hostile run rebuilt: the hog gave up half its CPU, and the build is another (its name
/// as hostile as the first).
fn hostile_b() -> Value {
    let mut b = hostile();
    b["workload"]["build"] = "abs\x1b[1m".into();
    b["threads"][0]["runqueue_ns"] = 1_450_000_000u64.into();
    b["threads"][0]["runqueue_after_wakeup_ns"] = 1_450_000_000u64.into();
    b["threads"][1]["oncpu_ns"] = 1_400_000_000u64.into();
    b["runqueue_holders"][0]["ns"] = 1_400_000_000u64.into();
    b
}

/// Writes `runs` (file name, run) into `dir`, as they are (`plain` false) or with plain names.
fn write(dir: &Path, runs: &[(&str, Value)], plain: bool) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, run) in runs {
        let mut run = run.clone();
        if plain {
            tame(&mut run);
        }
        std::fs::write(dir.join(name), run.to_string()).unwrap();
    }
}

/// `switchyard ARGS` in `dir`, its stdout and exit code.
#[track_caller]
fn switchyard_in(dir: &Path, args: &[&str]) -> (String, Option<i32>) {
    let out: Output = Command::new(switchyard())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(
        !stderr.contains("error"),
        "switchyard {args:?}:\n{stdout}\n{stderr}"
    );
    (stdout, out.status.code())
}

/// The two rules every terminal output keeps: nothing but text and line ends, and the lines
/// a plain run gives.
#[track_caller]
fn assert_safe(what: &str, text: &str, plain: &str) {
    assert!(
        !text.bytes().any(|b| (b < 0x20 && b != b'\n') || b == 0x7f),
        "{what}: a control byte reached the terminal: {text:?}"
    );
    assert!(
        !text.chars().any(|c| c != '\n' && is_unsafe(c)),
        "{what}: a control or bidi character reached the terminal: {text:?}"
    );
    assert_eq!(
        text.lines().count(),
        plain.lines().count(),
        "{what}: a name forged or swallowed a line:\n{text}\nwith plain names:\n{plain}"
    );
}

#[test]
fn explain_escapes_the_targets_names() {
    let dir = tempdir("terminal-explain");
    write(&dir.join("plain"), &[("hostile.json", hostile())], true);
    let (text, code) = switchyard_in(&data(), &["explain", "hostile.json"]);
    assert_eq!(code, Some(0));
    let (plain, _) = switchyard_in(&dir.join("plain"), &["explain", "hostile.json"]);
    assert_safe("explain", &text, &plain);
    golden("hostile.explain.txt", &text);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compare_escapes_the_targets_names() {
    let dir = tempdir("terminal-compare");
    let runs = [("hostile.json", hostile()), ("hostile-b.json", hostile_b())];
    write(&dir.join("hostile"), &runs, false);
    write(&dir.join("plain"), &runs, true);
    let args = ["compare", "hostile.json", "hostile-b.json"];
    let (text, code) = switchyard_in(&dir.join("hostile"), &args);
    assert_eq!(code, Some(0));
    let (plain, _) = switchyard_in(&dir.join("plain"), &args);
    assert_safe("compare", &text, &plain);
    // The command to rerun names the workload and the builds, escaped too.
    assert!(
        text.contains(r"just compare relay\x1b[5m spin\x1b[1m abs\x1b[1m 5"),
        "{text}"
    );
    golden("hostile.compare.txt", &text);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gate_escapes_the_targets_names() {
    let dir = tempdir("terminal-gate");
    write(&dir.join("plain"), &[("hostile.json", hostile())], true);
    let budgets = dir.join("budgets.toml");
    std::fs::write(
        &budgets,
        "[[budget]]\nmetric = \"switches.involuntary\"\nmax = 10\n\n\
         [[budget]]\nmetric = \"futex.wait_time\"\nmax = 1\n\n\
         [[budget]]\nmetric = \"memory.max_rss\"\nmax = 100\n",
    )
    .unwrap();
    let budgets = budgets.to_str().unwrap();
    let args = ["gate", "--budgets", budgets, "hostile.json"];
    let (text, code) = switchyard_in(&data(), &args);
    assert_eq!(code, Some(1), "two budgets fail:\n{text}");
    let (plain, _) = switchyard_in(&dir.join("plain"), &args);
    assert_safe("gate", &text, &plain);
    golden("hostile.gate.txt", &text);
    let _ = std::fs::remove_dir_all(&dir);
}
