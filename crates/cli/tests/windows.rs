//! Continuous recording (`record --every`): windows of a target with known behaviour add up
//! to exactly what it did, follow each other without a gap, and read back as runs in
//! `compare` and `gate`; what --every cannot do is refused before anything runs.

mod common;

use std::process::Command;

use common::*;

#[test]
fn windows_add_up_exactly_to_what_the_target_did() {
    if !privileged("windows_add_up_exactly_to_what_the_target_did") {
        return;
    }
    let dir = tempdir("windows-exact");
    let out_dir = dir.join("w");
    // 60 sleeps of 20 ms: more than a second, so several windows of 250 ms (a busy host's
    // slower windows are longer, never lossy).
    let (n, m, k) = (300_000u64, 60u64, 20_000u64);
    let out = Command::new(switchyard())
        .args(["record", "--every", "250ms", "--perf-counters", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(demo())
        .args([
            "known",
            "--getppid",
            &n.to_string(),
            "--sleeps",
            &m.to_string(),
        ])
        .args(["--sleep-us", "20000", "--pingpong", &k.to_string()])
        .output()
        .expect("running switchyard");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "record failed:\n{stderr}");
    let runs = load_windows(&out_dir);
    assert!(runs.len() >= 3, "{} windows:\n{stderr}", runs.len());
    assert!(
        stderr.contains(&format!("{} windows over", runs.len())),
        "{stderr}"
    );

    // Numbered from 1, each starting where the last ended; every one but the last was cut.
    for (i, run) in runs.iter().enumerate() {
        let meta = &run["meta"];
        assert_eq!(meta["window"]["index"], i as u64 + 1);
        assert_eq!(meta["window"]["every_ns"], 250_000_000u64);
        if i > 0 {
            assert_eq!(
                meta["start_mono_ns"],
                runs[i - 1]["meta"]["end_mono_ns"],
                "window {} does not start where {} ended",
                i + 1,
                i
            );
        }
        let end = meta["end"]["kind"].as_str().unwrap();
        let last = i + 1 == runs.len();
        assert_eq!(
            end,
            if last { "target_exited" } else { "window" },
            "window {}",
            i + 1
        );
    }

    // Exact counts, summed over the windows: nothing lost at a cut, nothing counted twice.
    let sum = |f: &dyn Fn(&serde_json::Value) -> u64| -> u64 { runs.iter().map(f).sum() };
    assert_eq!(sum(&|r| syscall_count(r, "getppid")), n, "getppid");
    assert_eq!(sum(&|r| syscall_count(r, "nanosleep")), m, "nanosleep");
    assert_eq!(sum(&|r| syscall_count(r, "writev")), 2 * k, "writev");
    assert_eq!(sum(&|r| syscall_count(r, "readv")), 2 * k, "readv");
    assert_eq!(sum(&|r| syscall_count(r, "exit_group")), 1, "exit_group");
    // The sleeps span several windows: no single window holds them all.
    assert!(runs.iter().all(|r| syscall_count(r, "nanosleep") < m));

    // Switches against the target's own /proc figures and perf's counter, both summed.
    let own: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the demo's JSON line");
    let own_sum = |field: &str| -> u64 {
        own["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[field].as_u64().unwrap())
            .sum()
    };
    let vol = sum(&|r| sum_threads(r, "voluntary"));
    let invol = sum(&|r| sum_threads(r, "involuntary"));
    assert_close("voluntary vs /proc", vol, own_sum("voluntary"));
    assert_close("involuntary vs /proc", invol, own_sum("involuntary"));
    let perf = sum(&|r| counter(r, "context-switches").expect("perf context-switches"));
    assert_close("switches vs perf", vol + invol, perf);
    // Off-CPU time: 60 sleeps of 20 ms at least, spread over the windows.
    let blocked = sum(&|r| sum_threads(r, "blocked_ns"));
    assert!(blocked >= m * 20_000_000, "blocked_ns {blocked}");
    // Each window holds its own stacks only: every stack's frames are in its frame table.
    for run in &runs {
        let frames = run["profiles"]["frames"].as_array().unwrap().len() as u64;
        for s in run["profiles"]["offcpu"]["stacks"].as_array().unwrap() {
            for f in s["frames"].as_array().unwrap() {
                assert!(f.as_u64().unwrap() < frames);
            }
        }
    }

    // A folder of windows reads back as runs: gate checks each, compare takes them as repeats.
    let budgets = dir.join("budgets.toml");
    std::fs::write(
        &budgets,
        "[[budget]]\nmetric = \"syscalls.nanosleep\"\nmax = 59\n",
    )
    .unwrap();
    let junit = dir.join("junit.xml");
    let gate = Command::new(switchyard())
        .args(["gate", "--budgets"])
        .arg(&budgets)
        .arg("--junit")
        .arg(&junit)
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(gate.status.code(), Some(0), "{}", text(&gate).1);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(
        xml.matches("<testcase").count(),
        runs.len(),
        "one verdict per window:\n{xml}"
    );
    std::fs::write(
        &budgets,
        "[[budget]]\nmetric = \"syscalls.nanosleep\"\nmax = 0\n",
    )
    .unwrap();
    let gate = Command::new(switchyard())
        .args(["gate", "--budgets"])
        .arg(&budgets)
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(gate.status.code(), Some(1), "{}", text(&gate).1);
    let compare = Command::new(switchyard())
        .args(["compare", "--a"])
        .arg(&out_dir)
        .arg("--b")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(compare.status.success(), "{}", text(&compare).1);
}

#[test]
fn what_a_window_cannot_hold_is_refused_before_the_recording() {
    let dir = tempdir("windows-refused");
    let record = |args: &[&str]| {
        Command::new(switchyard())
            .arg("record")
            .args(args)
            .arg("--")
            .arg("/bin/true")
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    assert_user_error(&record(&["--every", "1s", "--timeline"]), "--timeline");
    assert_user_error(&record(&["--export-only"]), "--export-only");
    assert_user_error(
        &record(&["--otlp", "ftp://127.0.0.1:4318"]),
        "unknown scheme",
    );
    assert_user_error(
        &record(&["--otlp", "http://127.0.0.1:4318/v1development/profiles"]),
        "without a path",
    );
    assert_user_error(&record(&["--pyroscope", "not a url"]), "--pyroscope");
    // A folder that already holds an earlier recording's windows.
    let used = dir.join("used");
    std::fs::create_dir_all(&used).unwrap();
    std::fs::write(used.join("run-1.json"), "{}").unwrap();
    let out = record(&["--every", "1s", "-o", used.to_str().unwrap()]);
    assert_user_error(&out, "already holds");
    // A file where the folder should be.
    let file = dir.join("file");
    std::fs::write(&file, "").unwrap();
    assert_user_error(
        &record(&["--every", "1s", "-o", file.to_str().unwrap()]),
        "not a folder",
    );
    // An empty folder given to gate.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let budgets = dir.join("b.toml");
    std::fs::write(
        &budgets,
        "[[budget]]\nmetric = \"syscalls.total\"\nmax = 1\n",
    )
    .unwrap();
    let gate = Command::new(switchyard())
        .args(["gate", "--budgets"])
        .arg(&budgets)
        .arg(&empty)
        .output()
        .unwrap();
    assert_user_error(&gate, "holds no run-<n>.json windows");
}

/// A folder removed under a continuous recording: the windows cut after go to a fallback
/// folder, the recording goes on to its end, and the exit (2) says where they are.
#[test]
fn windows_that_cannot_be_written_go_to_a_fallback_folder() {
    if !privileged("windows_that_cannot_be_written_go_to_a_fallback_folder") {
        return;
    }
    let dir = tempdir("windows-fallback");
    let out_dir = dir.join("w");
    // 20 sleeps of 100 ms: about 2 s, windows of 200 ms.
    let record = Command::new(switchyard())
        .args(["record", "--every", "200ms", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(demo())
        .args(["known", "--sleeps", "20", "--sleep-us", "100000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !out_dir.join("run-1.json").exists() {
        assert!(std::time::Instant::now() < deadline, "no first window");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
    let out = record.wait_with_output().unwrap();
    let stderr = text(&out).1;
    assert_user_error(&out, "could not be written to");
    let saved = stderr
        .lines()
        .find_map(|l| l.split("they were saved to ").nth(1))
        .unwrap_or_else(|| panic!("no fallback folder named:\n{stderr}"));
    let fallback = std::path::PathBuf::from(saved);
    let runs = load_windows(&fallback);
    let _ = std::fs::remove_dir_all(&fallback);
    // Every window from the removal on, up to the last, is there.
    let count: u64 = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("switchyard: ")?
                .split(" windows over")
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no window count:\n{stderr}"));
    assert!(count >= 5, "{count} windows:\n{stderr}");
    let indices: Vec<u64> = runs
        .iter()
        .map(|r| r["meta"]["window"]["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices.last(), Some(&count), "{indices:?}:\n{stderr}");
    let first = indices[0];
    assert!(first >= 2, "{indices:?}");
    assert_eq!(indices, (first..=count).collect::<Vec<_>>(), "{stderr}");
    assert_eq!(
        runs.last().unwrap()["meta"]["end"]["kind"],
        "target_exited",
        "{stderr}"
    );
}
