//! A secret on the target's command line never reaches a file: the run keeps the line with its
//! secrets redacted, and the report, folded stacks and pprof profiles are made from the run.
//! Privileged (run one at a time).

mod common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use common::*;

const SECRET: &str = "hunter2";

/// Every file of `dir` (pprof profiles decompressed) that holds `needle`, by name.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = if path.extension().is_some_and(|e| e == "gz") {
            let out = Command::new("gzip")
                .arg("-dc")
                .arg(&path)
                .output()
                .expect("running gzip -dc");
            assert!(out.status.success(), "gzip -dc {}", path.display());
            out.stdout
        } else {
            std::fs::read(&path).unwrap()
        };
        if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            found.push(path);
        }
    }
    found
}

/// `switchyard report` of `dir/run.json` into `dir`, listing what it wrote.
fn report(dir: &Path) -> Vec<String> {
    let out = Command::new(switchyard())
        .arg("report")
        .arg(dir.join("run.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    let mut written: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    written
}

#[test]
fn a_spawned_commands_secrets_reach_no_file() {
    if !privileged("a_spawned_commands_secrets_reach_no_file") {
        return;
    }
    let dir = tempdir("redact-spawn");
    // sh's $0 and $1 are the two words after the script.
    let (run, stderr) = record_spawned(
        &dir,
        &["--freq", "999"],
        &[
            "sh".as_ref(),
            "-c".as_ref(),
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done".as_ref(),
            "--password=hunter2".as_ref(),
            "--token".as_ref(),
            "hunter2".as_ref(),
        ],
    );
    assert_eq!(
        run["meta"]["command"],
        serde_json::json!([
            "sh",
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
            "--password=[redacted]",
            "--token",
            "[redacted]"
        ])
    );
    assert!(!stderr.contains(SECRET), "the summary: {stderr}");
    let written = report(&dir);
    for kind in ["index.html", "oncpu.folded", "oncpu.pb.gz", "offcpu.pb.gz"] {
        assert!(written.iter().any(|w| w == kind), "{kind}: {written:?}");
    }
    let leaks = files_holding(&dir, SECRET);
    assert!(leaks.is_empty(), "{SECRET} in {leaks:?}");
    // What the secret was replaced by is there: the search would have found it.
    assert!(!files_holding(&dir, "--password=[redacted]").is_empty());

    // Asked for, the line is kept as it is.
    let kept = tempdir("redact-kept");
    let (run, _) = record_spawned(
        &kept,
        &["--no-redact", "--no-stacks"],
        &[
            "sh".as_ref(),
            "-c".as_ref(),
            "true".as_ref(),
            "--password=hunter2".as_ref(),
        ],
    );
    assert_eq!(run["meta"]["command"][3], "--password=hunter2");
    // Said in the run, its summary and its report.
    assert_eq!(run["meta"]["redaction"]["off"], true);
    let html = std::fs::read_to_string({
        report(&kept);
        kept.join("index.html")
    })
    .unwrap();
    assert!(
        html.contains("off (--no-redact)"),
        "the report says nothing of it"
    );

    // A rule of one's own: a pattern's first group, or its whole match.
    let added = tempdir("redact-added");
    let (run, stderr) = record_spawned(
        &added,
        &[
            "--no-stacks",
            "--redact",
            "session=(\\w+)",
            "--redact",
            "sk-[a-z0-9]+",
        ],
        &[
            "sh".as_ref(),
            "-c".as_ref(),
            "true".as_ref(),
            "session=abc123;path=/".as_ref(),
            "id=sk-live42/sk-test7".as_ref(),
        ],
    );
    assert_eq!(
        run["meta"]["command"],
        serde_json::json!([
            "sh",
            "-c",
            "true",
            "session=[redacted];path=/",
            "id=[redacted]/[redacted]"
        ])
    );
    assert_eq!(run["meta"]["redaction"]["added_rules"], 2);
    assert!(
        stderr.contains("redaction: the default rules and 2 added (--redact)"),
        "{stderr}"
    );
}

#[test]
fn a_bad_rule_or_both_switches_are_refused_before_the_recording() {
    let dir = tempdir("redact-bad");
    for (flags, says) in [
        (
            &["--redact", "(unclosed"][..],
            "--redact: not a regular expression",
        ),
        (&["--redact", "x", "--no-redact"][..], "cannot be used with"),
    ] {
        let out = Command::new(switchyard())
            .arg("record")
            .args(flags)
            .arg("-o")
            .arg(dir.join("run.json"))
            .args(["--", "true"])
            .output()
            .unwrap();
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(!dir.join("run.json").exists());
    }
}

#[test]
fn a_live_processs_secrets_reach_no_file() {
    if !privileged("a_live_processs_secrets_reach_no_file") {
        return;
    }
    let target = Reaped(
        Command::new("sh")
            .args(["-c", "sleep 30", "--api-key", SECRET])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let dir = tempdir("redact-pid");
    let out = Command::new(switchyard())
        .args([
            "record",
            "--pid",
            &target.id().to_string(),
            "-d",
            "500ms",
            "-o",
        ])
        .arg(dir.join("run.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    let run = load_run(&dir.join("run.json"));
    assert_eq!(
        run["meta"]["command"],
        serde_json::json!(["sh", "-c", "sleep 30", "--api-key", "[redacted]"])
    );
    report(&dir);
    let leaks = files_holding(&dir, SECRET);
    assert!(leaks.is_empty(), "{SECRET} in {leaks:?}");
}
