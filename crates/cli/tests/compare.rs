//! `switchyard compare` from recorded run files: the sides' default names and the help.

mod common;

use std::{path::PathBuf, process::Command};

use common::*;

fn recorded(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/gate")
        .join(format!("{name}.json"))
}

fn header(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(switchyard())
        .arg("compare")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    // The headline ("spin-as-abs: −21% throughput, …"), then "A = abs (1 run), B = …".
    let stdout = text(&out).0;
    let mut lines = stdout.lines();
    let headline = lines.next().unwrap_or_default();
    let sides = lines.next().unwrap_or_default().to_string();
    let b = sides
        .split("B = ")
        .nth(1)
        .and_then(|b| b.split(" (").next());
    assert!(
        b.is_some_and(|b| headline.starts_with(&format!("{b}: "))),
        "{headline}\n{sides}"
    );
    sides
}

#[test]
fn sides_are_named_after_their_run_files() {
    let (abs, spin) = (recorded("abs"), recorded("spin-as-abs"));
    let h = header(&[abs.as_os_str(), spin.as_os_str()]);
    assert!(
        h.starts_with("A = abs (1 run), B = spin-as-abs (1 run)"),
        "{h}"
    );
    // Given names win; repeats fall back to A and B.
    let h = header(&[
        "--a".as_ref(),
        abs.as_os_str(),
        abs.as_os_str(),
        "--b".as_ref(),
        spin.as_os_str(),
        "--b-label".as_ref(),
        "spin".as_ref(),
    ]);
    assert!(h.starts_with("A = A (2 runs), B = spin (1 run)"), "{h}");
}

#[test]
fn help_fits_a_hundred_columns() {
    for sub in ["record", "report", "compare", "gate", "doctor"] {
        let out = Command::new(switchyard())
            .args([sub, "--help"])
            .output()
            .unwrap();
        let long: Vec<String> = text(&out)
            .0
            .lines()
            .filter(|l| l.chars().count() > 100)
            .map(str::to_string)
            .collect();
        assert!(long.is_empty(), "{sub} --help: {long:#?}");
    }
}

/// `name`'s recorded run with `edit` applied, written to `dir`.
fn edited(dir: &std::path::Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let mut run = load_run(&recorded(name));
    edit(&mut run);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, run.to_string()).unwrap();
    path
}

fn compare(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(switchyard())
        .arg("compare")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn runs_of_unrelated_programs_are_refused_unless_allowed() {
    let (broker, relay) = (recorded("abs"), recorded("mmsg"));
    let out = compare(&[broker.as_os_str(), relay.as_os_str()]);
    assert_user_error(&out, "are runs of different workloads");
    assert!(
        text(&out).1.contains("--allow-mismatch"),
        "{:?}",
        text(&out)
    );
    // A third run on one side is checked too.
    let out = compare(&[
        "--a".as_ref(),
        broker.as_os_str(),
        relay.as_os_str(),
        "--b".as_ref(),
        broker.as_os_str(),
    ]);
    assert_user_error(&out, "are runs of different workloads");
    let out = compare(&[
        broker.as_os_str(),
        relay.as_os_str(),
        "--allow-mismatch".as_ref(),
    ]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(
        text(&out).1.starts_with("warning: ") && text(&out).1.contains("different workloads"),
        "{:?}",
        text(&out)
    );

    // Without a workload named, the programs decide: a Python script against the broker.
    let dir = tempdir("compare-programs");
    let unnamed = |run: &mut serde_json::Value| {
        run["workload"] = serde_json::Value::Null;
        run["operations"] = serde_json::Value::Null;
    };
    let script = edited(&dir, "mmsg", |run| {
        unnamed(run);
        run["meta"]["command"] = serde_json::json!(["/usr/bin/python3", "relay.py"]);
    });
    let binary = edited(&dir, "abs", unnamed);
    let out = compare(&[binary.as_os_str(), script.as_os_str()]);
    assert_user_error(&out, "are runs of different programs");
    let stderr = text(&out).1;
    assert!(
        stderr.contains("`spinlock-broker`") && stderr.contains("`python3 relay.py` (Python)"),
        "{stderr}"
    );
}

#[test]
fn builds_of_one_workload_in_two_runtimes_compare_with_a_note() {
    // The broker's abs build, and a Python build of the same workload.
    let dir = tempdir("compare-runtimes");
    let python = edited(&dir, "spin-as-abs", |run| {
        run["meta"]["command"] = serde_json::json!(["python3", "broker.py", "--lock", "spin"]);
    });
    let abs = recorded("abs");
    let out = compare(&[abs.as_os_str(), python.as_os_str()]);
    assert!(out.status.success(), "{:?}", text(&out));
    let stderr = text(&out).1;
    assert!(
        stderr.starts_with("note: abs runs no runtime detected and spin-as-abs Python"),
        "{stderr}"
    );
    // Builds of one program in one runtime: nothing to say.
    let out = compare(&[abs.as_os_str(), recorded("spin-as-abs").as_os_str()]);
    assert!(
        out.status.success() && text(&out).1.is_empty(),
        "{:?}",
        text(&out)
    );
}
