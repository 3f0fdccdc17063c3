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
