//! Java targets: a JVM started with no profiling flag gets its JIT-compiled methods named
//! (switchyard asks it for its perf map with jcmd while it runs), the stack-quality figure does
//! not count stacks through `[unknown]` frames as complete, and the summary says which flag
//! lets the callers of JIT code be walked. Needs root and a JDK (javac, java, jcmd); under
//! CI=true a missing JDK is a failure.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use common::*;

/// The program: one hot method, `HotLoop.spin`, called from main for the seconds given.
const SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../workloads/demo/java-hot/HotLoop.java"
);

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The absolute path of `tool` on PATH.
fn on_path(tool: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(tool))
                .find(|f| f.is_file())
        })
        .unwrap_or_else(|| panic!("{tool} not on PATH"))
}

/// What a recording of the program holds: on-CPU samples in all, those whose user leaf is
/// `HotLoop.spin` named as JIT code, those of them whose caller is the interpreter, those
/// through an `[unknown]` user frame, and those the quality figure counts complete.
#[derive(Debug)]
struct Seen {
    total: u64,
    in_spin: u64,
    spin_from_interpreter: u64,
    through_unknown: u64,
    complete: u64,
    stderr: String,
}

/// Records `java [flags] -cp classes HotLoop 3`; `path` replaces switchyard's PATH.
fn record_java(dir: &Path, classes: &Path, flags: &[&str], path: Option<&Path>) -> Seen {
    let run_path = dir.join("run.json");
    let mut cmd = Command::new(switchyard());
    cmd.arg("record").arg("-o").arg(&run_path).arg("--");
    cmd.arg(on_path("java")).args(flags).arg("-cp").arg(classes);
    cmd.args(["HotLoop", "3"]);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let out = cmd.output().expect("running switchyard");
    let stderr = text(&out).1;
    assert!(out.status.success(), "{stderr}");
    let run = load_run(&run_path);

    let frames = run["profiles"]["frames"].as_array().unwrap();
    let frame = |i: &serde_json::Value| &frames[i.as_u64().unwrap() as usize];
    let (mut total, mut in_spin, mut from_interpreter, mut through_unknown) = (0, 0, 0, 0);
    for s in run["profiles"]["oncpu"]["stacks"].as_array().unwrap() {
        let value = s["value"].as_u64().unwrap();
        total += value;
        let user: Vec<&serde_json::Value> = s["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(frame)
            .filter(|f| f["module"] != "kernel")
            .collect();
        let spin = |f: &serde_json::Value| {
            f["kind"] == "jit" && f["name"].as_str().unwrap().contains("HotLoop.spin")
        };
        if let [.., caller, leaf] = user.as_slice()
            && spin(leaf)
        {
            in_spin += value;
            if caller["name"] == "[jvm interpreter]" {
                from_interpreter += value;
            }
        }
        if user.iter().any(|f| f["name"] == "[unknown]") {
            through_unknown += value;
        }
    }
    let quality = run["profiles"]["stats"]["quality"].as_array().unwrap();
    let oncpu = quality.iter().find(|q| q["profile"] == "oncpu").unwrap();
    assert_eq!(oncpu["total"].as_u64().unwrap(), total, "{oncpu}");
    // The map switchyard had the JVM write is removed once copied.
    let pid = run["meta"]["pid"].as_u64().unwrap();
    let map = format!("/tmp/perf-{pid}.map");
    assert!(!Path::new(&map).exists(), "{map} left behind");
    Seen {
        total,
        in_spin,
        spin_from_interpreter: from_interpreter,
        through_unknown,
        complete: oncpu["complete"].as_u64().unwrap(),
        stderr,
    }
}

#[test]
fn jit_compiled_java_methods_are_named_without_flags_in_the_target() {
    if !privileged("jit_compiled_java_methods_are_named_without_flags_in_the_target") {
        return;
    }
    if !(have("javac") && have("java") && Command::new("jcmd").arg("-h").output().is_ok()) {
        let reason = "skipping: a JDK (javac, java, jcmd) is not installed";
        assert!(
            std::env::var("CI").is_err(),
            "{reason}; CI=true turns a skip into a failure"
        );
        eprintln!("{reason}");
        return;
    }
    let dir = tempdir("jvm");
    let classes = dir.join("classes");
    let status = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg(Path::new(SOURCE))
        .status()
        .expect("running javac");
    assert!(status.success(), "javac {SOURCE} failed");

    // No flag: the hot method is named, as the leaf of most on-CPU samples; without frame
    // pointers in JIT code, the summary says which flag to pass.
    let plain = record_java(&dir, &classes, &[], None);
    assert!(plain.total > 100, "{plain:?}");
    assert!(
        plain.in_spin * 100 >= plain.total * 60,
        "HotLoop.spin leads {} of {} on-CPU samples\n{}",
        plain.in_spin,
        plain.total,
        plain.stderr
    );
    assert!(
        plain.complete + plain.through_unknown <= plain.total,
        "{plain:?}"
    );
    assert!(
        plain
            .stderr
            .contains("run the JVM with -XX:+PreserveFramePointer"),
        "{}",
        plain.stderr
    );

    // No jcmd to ask the JVM with: a warning, not a failure; the JIT code stays [unknown],
    // and the quality figure does not count those stacks complete.
    let no_jdk = dir.join("no-jdk");
    std::fs::create_dir_all(&no_jdk).unwrap();
    let unnamed = record_java(&dir, &classes, &[], Some(&no_jdk));
    assert!(
        unnamed.stderr.contains("warning: jcmd"),
        "{}",
        unnamed.stderr
    );
    assert!(
        unnamed.through_unknown * 100 >= unnamed.total * 60,
        "{unnamed:?}"
    );
    assert!(
        unnamed.complete + unnamed.through_unknown <= unnamed.total,
        "{unnamed:?}"
    );

    // With frame pointers, the interpreted caller (main) is walked and labelled, and no
    // advice is printed.
    let fp = record_java(&dir, &classes, &["-XX:+PreserveFramePointer"], None);
    assert!(fp.spin_from_interpreter * 100 >= fp.total * 60, "{fp:?}");
    assert!(!fp.stderr.contains("run the JVM with"), "{}", fp.stderr);
    eprintln!("no flag: {plain:?}\nno jcmd: {unnamed:?}\nframe pointers: {fp:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
