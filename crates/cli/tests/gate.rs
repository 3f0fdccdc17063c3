//! `switchyard gate` from files: exit 0 when budgets hold, 1 when one fails, 2 for a bad budget
//! file with its line and column. No privileges needed.

mod common;

use std::{path::PathBuf, process::Command};

use common::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../compare/tests/data")
        .join(name)
}

fn gate(budgets: &str, extra: &[&str]) -> std::process::Output {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = tempdir(&format!("gate-{n}"));
    let file = dir.join("budgets.toml");
    std::fs::write(&file, budgets).unwrap();
    Command::new(switchyard())
        .args(["gate", "--budgets"])
        .arg(&file)
        .args(extra)
        .arg(fixture("b.json"))
        .output()
        .unwrap()
}

#[test]
fn budgets_pass_and_fail_with_exit_codes() {
    let a = fixture("a.json");
    let a = a.to_str().unwrap();
    // b.json: 2.18 voluntary switches per operation, 9.59 syscalls per operation.
    let ok = gate(
        "[[budget]]\nmetric = \"switches.voluntary.per_op\"\nmax = 3\n",
        &[],
    );
    assert_eq!(ok.status.code(), Some(0), "{:?}", text(&ok));
    let over = gate(
        "[[budget]]\nmetric = \"syscalls.total.per_op\"\nmax = 5\n",
        &[],
    );
    assert_eq!(over.status.code(), Some(1), "{:?}", text(&over));
    assert!(text(&over).0.contains("FAIL"), "{:?}", text(&over));
    // Against a.json, b.json's CPU per operation improved; its throughput rose too.
    let base = gate(
        "[[budget]]\nmetric = \"cpu.per_op\"\nregression = 0\n\n[[budget]]\nmetric = \"throughput\"\nregression = 0\n",
        &["--baseline", a],
    );
    assert_eq!(base.status.code(), Some(0), "{:?}", text(&base));
}

#[test]
fn a_regression_budget_without_a_baseline_is_a_usage_error() {
    let nobase = gate("[[budget]]\nmetric = \"cpu.per_op\"\nregression = 5\n", &[]);
    assert_user_error(&nobase, "budget `cpu.per_op` (");
    let (stdout, stderr) = text(&nobase);
    assert!(
        stderr.contains("budgets.toml:1) sets regression = 5")
            && stderr.contains("no --baseline was given")
            && stderr.contains("hint: pass --baseline RUN"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "no verdicts: {stdout}");
    // One that applies to no run given asks for nothing.
    let elsewhere = gate(
        "[[budget]]\nmetric = \"cpu.per_op\"\nmax = 1000\n\n[[budget]]\nworkload = \"other\"\nmetric = \"cpu.per_op\"\nregression = 5\n",
        &[],
    );
    assert_eq!(elsewhere.status.code(), Some(0), "{:?}", text(&elsewhere));
}

#[test]
fn markdown_and_junit_are_written() {
    let dir = tempdir("gate-outputs");
    let (md, junit) = (dir.join("summary.md"), dir.join("junit.xml"));
    let out = gate(
        "[[budget]]\nmetric = \"syscalls.total.per_op\"\nmax = 5\n",
        &[
            "--markdown",
            md.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(
        md.contains("1 of 1 failed") && md.contains("syscalls.total.per_op"),
        "{md}"
    );
    let junit = std::fs::read_to_string(junit).unwrap();
    assert!(
        junit.contains("<failure message=") && junit.contains("tests=\"1\" failures=\"1\""),
        "{junit}"
    );
}

#[test]
fn bad_budget_files_name_line_and_column() {
    for (src, needle) in [
        (
            "[[budget]]\nmetric = \"switches.totl\"\nmax = 1\n",
            ":2:10: unknown figure",
        ),
        (
            "[[budget]]\nmetric = \"cpu.per_op\"\nmax = \"fast\"\n",
            ":3:",
        ),
        ("[[budget]\nmetric = 1\n", ":1:"),
        (
            "[[budget]]\nmetric = \"cpu.per_op\"\nmx = 3\n",
            ":3:1: unknown field `mx`",
        ),
        (
            "[[budget]]\nmetric = \"cpu.per_op\"\nmax = -5\n",
            ":3:7: budget for `cpu.per_op` has max = -5",
        ),
        (
            "[[budget]]\nmetric = \"cpu.per_op\"\nmin = nan\n",
            ":3:7: budget for `cpu.per_op` has min = NaN",
        ),
        (
            "[[budget]]\nmetric = \"cpu.per_op\"\nmax = 1\nmin = 2\n",
            ":4:7: budget for `cpu.per_op` has min = 2: above max = 1",
        ),
        (
            "[[budget]]\nmetric = \"cpu.per_op\"\nregression = -10\n",
            ":3:14: budget for `cpu.per_op` has regression = -10",
        ),
    ] {
        let out = gate(src, &[]);
        assert_user_error(&out, needle);
    }
}

/// Recorded runs of the workloads (stacks dropped to keep them small), two of them regressions
/// labelled as the build they stand in for (`--as-build`, or `AS_BUILD`, of switchyard-workload):
/// `spin-as-abs` is the pure spin lock under high contention (4 producers per CPU) reporting as
/// abs, `threads-as-mmsg` is the relay sending one datagram per packet and destination
/// reporting as mmsg. The project's own budget file must pass the real builds and fail these.
fn recorded(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/gate")
        .join(format!("{name}.json"))
}

fn gate_workloads(run: &str) -> (Option<i32>, String) {
    let budgets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../workloads/budgets.toml");
    let out = Command::new(switchyard())
        .args(["gate", "--budgets"])
        .arg(&budgets)
        .arg(recorded(run))
        .output()
        .unwrap();
    (out.status.code(), text(&out).0)
}

fn failed_budgets(table: &str) -> Vec<String> {
    table
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .map(|l| l.split_whitespace().nth(3).unwrap_or_default().to_string())
        .collect()
}

#[test]
fn workload_budgets_pass_the_builds_and_fail_injected_regressions() {
    for good in ["abs", "mmsg"] {
        let (code, table) = gate_workloads(good);
        assert_eq!(code, Some(0), "{good} should pass:\n{table}");
        assert!(table.contains("0 failed"), "{table}");
    }

    let (code, table) = gate_workloads("spin-as-abs");
    assert_eq!(code, Some(1), "{table}");
    assert_eq!(
        failed_budgets(&table),
        ["syscalls.sched_yield.per_op"],
        "a spin lock serving as abs never yields:\n{table}"
    );

    let (code, table) = gate_workloads("threads-as-mmsg");
    assert_eq!(code, Some(1), "{table}");
    assert_eq!(
        failed_budgets(&table),
        ["syscalls.sendto.per_op", "syscalls.total.per_op"],
        "per-packet sends serving as mmsg:\n{table}"
    );
}

#[test]
fn median_judges_repeats_of_a_build_together() {
    let budgets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../workloads/budgets.toml");
    let run = |median: bool| {
        let mut cmd = Command::new(switchyard());
        cmd.args(["gate", "--budgets"]).arg(&budgets);
        if median {
            cmd.arg("--median");
        }
        // Three runs labelled abs: two of the real build and one spin lock in its place.
        let out = cmd
            .arg(recorded("abs"))
            .arg(recorded("spin-as-abs"))
            .arg(recorded("abs"))
            .output()
            .unwrap();
        (out.status.code(), text(&out).0)
    };
    let (code, table) = run(false);
    assert_eq!(
        code,
        Some(1),
        "each run on its own: the spin lock fails\n{table}"
    );
    let (code, table) = run(true);
    assert_eq!(code, Some(0), "the median of the three is abs's\n{table}");
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("span.acquire.time.per_op"))
        .collect();
    assert_eq!(rows.len(), 1, "{table}");
    assert!(rows[0].contains("abs.json (median of 3)"), "{table}");
}

#[test]
fn a_baseline_of_another_workload_is_refused_unless_allowed() {
    let dir = tempdir("gate-baseline-workload");
    let budgets = dir.join("budgets.toml");
    std::fs::write(
        &budgets,
        "[[budget]]\nmetric = \"cpu.per_op\"\nregression = 1000\n",
    )
    .unwrap();
    let run = |baseline: &str, candidate: &str, extra: &[&str]| {
        Command::new(switchyard())
            .args(["gate", "--budgets"])
            .arg(&budgets)
            .arg("--baseline")
            .arg(recorded(baseline))
            .args(extra)
            .arg(recorded(candidate))
            .output()
            .unwrap()
    };
    // The relay measured against the broker: a regression that means nothing.
    let out = run("abs", "mmsg", &[]);
    assert_user_error(&out, "are runs of different workloads");
    let stderr = text(&out).1;
    assert!(
        stderr.contains("workload `spinlock-broker`")
            && stderr.contains("workload `mmsg-relay`")
            && stderr.contains("--allow-mismatch"),
        "{stderr}"
    );
    let out = run("abs", "mmsg", &["--allow-mismatch"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert!(
        text(&out).1.contains("warning: the baseline"),
        "{:?}",
        text(&out)
    );
    // Another build of one workload is what a baseline is for.
    let out = run("abs", "spin-as-abs", &[]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert!(text(&out).1.is_empty(), "{:?}", text(&out));
}
