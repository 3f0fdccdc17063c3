//! `record --ops N` and `--ops-file FILE`: a plain count of operations, for a load with no
//! driver result (redis-benchmark, wrk), gives the run its per-operation figures. Recording
//! needs root; the refusals do not.

mod common;

use std::process::Command;

use common::*;
use switchyard_model::{Run, metrics};

/// `sh` running `true` a few times: some syscalls and switches to divide.
const SCRIPT: &str = "for i in 1 2 3 4 5; do /bin/true; done";

/// A figure of the run at `path`, by name.
#[track_caller]
fn figure(run: &Run, name: &str) -> f64 {
    let figures = metrics::extract(run);
    metrics::lookup(run, &figures, name)
        .unwrap_or_else(|| panic!("no `{name}` in the run: {:?}", figures.keys()))
        .value
}

#[test]
fn ops_gives_per_operation_figures_of_the_total_over_n() {
    if !privileged("ops_gives_per_operation_figures_of_the_total_over_n") {
        return;
    }
    let dir = tempdir("ops");
    let (_, stderr) = record_spawned(
        &dir,
        &["--ops", "1000", "--no-stacks"],
        &["sh".as_ref(), "-c".as_ref(), SCRIPT.as_ref()],
    );
    let run = Run::load(&dir.join("run.json")).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    assert_eq!(run.operations, Some(1000), "{stderr}");
    for (total, per_op) in [
        ("syscalls.total", "syscalls.total.per_op"),
        ("switches.voluntary", "switches.voluntary.per_op"),
    ] {
        let (total, per_op) = (figure(&run, total), figure(&run, per_op));
        assert!(total > 0.0, "{stderr}");
        assert!(
            (per_op - total / 1000.0).abs() < 1e-9,
            "{per_op} per op against {total} in all"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ops_file_is_read_when_the_recording_ends() {
    if !privileged("ops_file_is_read_when_the_recording_ends") {
        return;
    }
    let dir = tempdir("ops-file");
    let file = dir.join("ops.txt");
    // The target writes the count as it ends, as a benchmark's wrapper would.
    let script = format!("{SCRIPT}; printf '  250\\n\\n' > {}", file.display());
    let (_, stderr) = record_spawned(
        &dir,
        &["--ops-file", file.to_str().unwrap(), "--no-stacks"],
        &["sh".as_ref(), "-c".as_ref(), script.as_ref()],
    );
    let run = Run::load(&dir.join("run.json")).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    assert_eq!(run.operations, Some(250), "{stderr}");
    let total = figure(&run, "syscalls.total");
    assert!((figure(&run, "syscalls.total.per_op") - total / 250.0).abs() < 1e-9);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_zero_count_or_a_driver_result_with_it_is_refused() {
    for (flags, needle) in [
        (&["--ops", "0"][..], "0 operations"),
        (&["--ops", "many"][..], "not a whole number of operations"),
        (
            &["--ops", "5", "--workload-result", "r.json"][..],
            "cannot be used with",
        ),
        (
            &["--ops", "5", "--ops-file", "n.txt"][..],
            "cannot be used with",
        ),
    ] {
        let out = Command::new(switchyard())
            .arg("record")
            .args(flags)
            .args(["-o", "/dev/null", "--", "true"])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stdout}\n{stderr}");
        assert!(stderr.contains(needle), "{flags:?}: {stderr}");
    }
}
