//! Real runs: switchyard records a workload server under load, spawned (the broker) and
//! attached after its prefill (the Rust cache). They need root (eBPF) and the binaries beside
//! this one (`cargo build --bins`, as `just test` runs first). Without either they skip with
//! the reason; under CI=true a skip is a failure. Run them one at a time
//! (`--test-threads=1`): they share the kernel's probes.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use switchyard_model::{Run, TargetMode};

fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard-workload"))
        .parent()
        .expect("a directory")
        .to_path_buf()
}

/// Whether the test can run; prints why not, and panics instead under CI.
fn can_run(test: &str, needs: &[&str]) -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    let why = if unsafe { libc::geteuid() } != 0 {
        Some("needs root (eBPF)".to_string())
    } else {
        needs
            .iter()
            .map(|n| bin_dir().join(n))
            .find(|p| !p.exists())
            .map(|p| format!("{} is not built (cargo build --bins)", p.display()))
    };
    match why {
        None => true,
        Some(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: {why}; under CI=true this is a failure, not a skip")
        }
        Some(why) => {
            eprintln!("skipped {test}: {why}");
            false
        }
    }
}

#[track_caller]
fn run(args: &[&str], out: &Path) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_switchyard-workload"))
        .args(["--bin-dir", bin_dir().to_str().unwrap()])
        .arg("run")
        .args(&args[..2])
        .arg(out)
        .args(&args[2..])
        .env_remove("AS_BUILD")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "switchyard-workload run {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for f in [
        "run.json",
        "result.json",
        "index.html",
        "record.err",
        "driver.out",
    ] {
        assert!(out.join(f).exists(), "{f} was not written");
    }
    Run::load(&out.join("run.json")).expect("a run file of this version")
}

#[test]
fn broker_spawned_with_its_acquire_span() {
    let needs = ["switchyard", "spinlock-broker", "spinlock-broker-driver"];
    if !can_run("broker_spawned_with_its_acquire_span", &needs) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = run(
        &["spinlock-broker", "mutex", "producers=2", "--seconds", "1"],
        dir.path(),
    );
    assert_eq!(run.meta.mode, TargetMode::Spawn);
    let ops = run.operations.expect("the driver's operation count");
    assert!(ops > 0);
    let w = run.workload.as_ref().expect("the driver's result");
    assert_eq!(w.build, "mutex");
    let span = run
        .locks
        .spans
        .iter()
        .find(|s| s.label == "acquire")
        .expect("the acquire span");
    assert_eq!(span.symbol, "broker_mutex_acquire");
    // Every message takes the lock once: acquisitions at least the messages acked.
    assert!(
        span.stats.count >= ops,
        "{} acquisitions for {ops} messages",
        span.stats.count
    );
}

#[test]
fn cache_attached_after_its_prefill() {
    let needs = ["switchyard", "read-state-cache", "read-state-cache-driver"];
    if !can_run("cache_attached_after_its_prefill", &needs) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = run(
        &[
            "read-state-cache",
            "rust",
            "capacity=20000",
            "rate=2000",
            "--seconds",
            "1",
        ],
        dir.path(),
    );
    assert_eq!(run.meta.mode, TargetMode::Pid);
    assert!(run.operations.is_some_and(|o| o > 0));
    assert!(dir.path().join("server.err").exists());
    assert!(dir.path().join("prefill.out").exists());
}
