//! Sampled off-CPU stacks keep the flame graph's shape. Two recordings of one target run at
//! once over the same window, one taking the stacks of every block (`--offcpu-period 0`), one
//! sampling them (the default): both see the same blocks, so what differs is the sampling
//! alone. Each frame's share of the target's off-CPU time must agree within 2 percentage
//! points, and the exact run must give the target's known blocking functions the time their
//! design implies. Needs root.

mod common;

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
};

use common::*;

/// Seconds the target blocks for, inside both recordings.
const SECONDS: u64 = 4;

/// The most a frame's share may move under sampling, percentage points.
const MAX_DIFF_PP: f64 = 2.0;

/// Frames compared: the exact run's `TOP` largest, every frame with at least `MIN_SHARE`
/// percent of its time, and the known blocking functions.
const TOP: usize = 10;
const MIN_SHARE: f64 = 1.0;

/// The blocking functions of `switchyard-demo blockers`, as its JSON names them.
const KNOWN: [&str; 7] = [
    "await_return",
    "await_serve",
    "pace",
    "sleep_1ms",
    "sleep_5ms",
    "sleep_short",
    "block_mixed",
];

/// The flags of each recording.
const SAMPLED: &[&str] = &[];
const EXACT: &[&str] = &["--offcpu-period", "0"];

/// One run's off-CPU time per frame name, inclusive (a frame counts once per stack), and in
/// all.
struct Frames {
    times: HashMap<String, u64>,
    total: u64,
}

impl Frames {
    /// Over the stacks of `profile` (`offcpu`, or `wakeup`: the sleeper's frames) of the
    /// threads of process `tgid` but `skip_tid`.
    fn of(run: &serde_json::Value, profile: &str, tgid: u64, skip_tid: u64) -> Self {
        let (times, total) = inclusive_frames(run, profile, false, |s| {
            s["tgid"].as_u64() == Some(tgid) && s["tid"].as_u64() != Some(skip_tid)
        });
        Frames { times, total }
    }

    fn time(&self, name: &str) -> u64 {
        self.times.get(name).copied().unwrap_or(0)
    }

    /// Percent of the total.
    fn share(&self, name: &str) -> f64 {
        self.time(name) as f64 * 100.0 / self.total as f64
    }
}

fn demo_frame(name: &str) -> String {
    format!("switchyard_demo::{name}")
}

/// A frame name cut to `width` characters for the table (Rust's generic names run long).
fn cut(name: &str, width: usize) -> String {
    if name.chars().count() <= width {
        name.to_string()
    } else {
        let mut s: String = name.chars().take(width - 1).collect();
        s.push('…');
        s
    }
}

/// The frames to compare, largest first in the exact run.
fn compared(exact: &Frames) -> Vec<String> {
    let mut by_time: Vec<(&String, &u64)> = exact.times.iter().collect();
    by_time.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut rows: Vec<String> = by_time
        .iter()
        .enumerate()
        .filter(|(i, (n, _))| *i < TOP || exact.share(n) >= MIN_SHARE)
        .map(|(_, (n, _))| (*n).clone())
        .collect();
    for name in KNOWN.map(demo_frame) {
        if !rows.contains(&name) {
            rows.push(name);
        }
    }
    rows
}

/// Frame, exact %, sampled %, difference; frames in every stack of both runs (100% in each)
/// are counted on one line.
fn share_table(rows: &[String], exact: &Frames, sampled: &Frames) -> String {
    let width = rows
        .iter()
        .map(|r| r.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(5, 64);
    let mut out = format!(
        "off-CPU time of the target's workers: exact {:.3} s, sampled {:.3} s\n{:width$}  {:>8}  {:>9}  {:>7}\n",
        exact.total as f64 / 1e9,
        sampled.total as f64 / 1e9,
        "frame",
        "exact %",
        "sampled %",
        "diff pp",
    );
    let mut everywhere = 0;
    for name in rows {
        if exact.time(name) == exact.total && sampled.time(name) == sampled.total {
            everywhere += 1;
            continue;
        }
        let (e, s) = (exact.share(name), sampled.share(name));
        out.push_str(&format!(
            "{:width$}  {e:>8.2}  {s:>9.2}  {:>+7.2}\n",
            cut(name, width),
            s - e
        ));
    }
    out.push_str(&format!(
        "and {everywhere} frames in every stack of both runs (100% in each)\n"
    ));
    out
}

#[test]
fn sampled_offcpu_stacks_keep_each_frames_share() {
    if !privileged("sampled_offcpu_stacks_keep_each_frames_share") {
        return;
    }
    let mut target = Reaped(
        Command::new(demo())
            .args([
                "blockers",
                "--seconds",
                &SECONDS.to_string(),
                "--wait-stdin",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the demo"),
    );
    let mut target_out = BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    target_out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready"), "demo said {line:?}");
    let pid = target.id();

    // Both attached before the target starts blocking. The sampled recording attaches first:
    // at each switch the programs run in the order they attached, and the first one's clock
    // reads are not delayed by the other's stack walks, which are the costlier ones in the
    // exact recording (the other way round, the second recording would see each short block
    // a few µs shorter, a difference that is not the sampling's).
    let dir = tempdir("sampling");
    let paths = [dir.join("sampled.json"), dir.join("exact.json")];
    let recs: Vec<_> = [SAMPLED, EXACT]
        .iter()
        .zip(&paths)
        .map(|(flags, path)| {
            let pid = pid.to_string();
            let mut args = vec!["--pid", &pid, "-o", path.to_str().unwrap()];
            args.extend_from_slice(flags);
            record_ready(&args)
        })
        .collect();
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    target_out.read_line(&mut line).unwrap();
    let printed: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("demo printed {line:?}: {e}"));
    assert!(target.wait().unwrap().success());
    for (rec, path) in recs.into_iter().zip(&paths) {
        let (code, stderr) = wait_output(rec);
        assert_eq!(code, Some(0), "{}: {stderr}", path.display());
    }

    // The main thread is left out: it was blocked on stdin before either recording started,
    // and how much of that wait each one saw depends on when it attached, not on sampling.
    // The workers start after both attached and end before either stops.
    let pid = u64::from(pid);
    let (sampled_run, exact_run) = (load_run(&paths[0]), load_run(&paths[1]));
    let sampled = Frames::of(&sampled_run, "offcpu", pid, pid);
    let exact = Frames::of(&exact_run, "offcpu", pid, pid);
    assert!(exact.total > 0 && sampled.total > 0, "no off-CPU stacks");
    let rows = compared(&exact);
    let table = share_table(&rows, &exact, &sampled);
    eprintln!("{table}demo: {}", line.trim());

    // Sampling keeps the total: the weights make up for the blocks not walked. (The sampled
    // recording leaves out the time of its own walks, which only its chosen blocks have; the
    // exact one walks every block and counts it, as the thread counters do: a few percent
    // here, where blocks last microseconds.)
    let total_ratio = sampled.total as f64 / exact.total as f64;
    assert!(
        (total_ratio - 1.0).abs() <= 0.05,
        "the sampled off-CPU total is {total_ratio:.3} of the exact one:\n{table}"
    );

    // Sampling keeps every compared frame's share.
    let (worst, diff) = rows
        .iter()
        .map(|n| (n, sampled.share(n) - exact.share(n)))
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .unwrap();
    assert!(
        diff.abs() <= MAX_DIFF_PP,
        "{worst} moved {diff:+.2} percentage points under sampling (at most {MAX_DIFF_PP}):\n{table}"
    );

    // The wakeup profile is sampled on its own (chosen at the wakeup): the sleepers' frames
    // keep their shares of it too.
    let sampled_wakeups = Frames::of(&sampled_run, "wakeup", pid, pid);
    let exact_wakeups = Frames::of(&exact_run, "wakeup", pid, pid);
    let wakeup_rows = compared(&exact_wakeups);
    let wakeup_table = share_table(&wakeup_rows, &exact_wakeups, &sampled_wakeups);
    eprintln!("wakeups:\n{wakeup_table}");
    let (worst, diff) = wakeup_rows
        .iter()
        .map(|n| (n, sampled_wakeups.share(n) - exact_wakeups.share(n)))
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .unwrap();
    assert!(
        diff.abs() <= MAX_DIFF_PP,
        "{worst} moved {diff:+.2} percentage points of the wakeup profile under sampling (at most {MAX_DIFF_PP}):\n{wakeup_table}"
    );

    // The exact run gives the known functions the time the target's design implies.
    let time = |name: &str| exact.time(&demo_frame(name));
    for name in KNOWN {
        assert!(
            exact.share(&demo_frame(name)) >= 0.1,
            "{name} has almost no off-CPU time in the exact run:\n{table}"
        );
    }
    // The sleeper is one of five workers and blocked nearly all the time: a fifth of their
    // off-CPU time, or more as the others spend some of theirs on CPU; not above a third, as
    // the short sleeper and the mixed thread are blocked most of the time too.
    let sleeper = exact.share(&demo_frame("sleep_1ms")) + exact.share(&demo_frame("sleep_5ms"));
    assert!(
        (18.0..=34.0).contains(&sleeper),
        "the sleeper has {sleeper:.2}% of the off-CPU time, by design about 20-33%:\n{table}"
    );
    // The sleeper alternates 1 ms and 5 ms sleeps: 5 times the time in the second by design,
    // less on a busy host that wakes each sleep late by the same amount (2 times with 3 ms).
    let ratio = time("sleep_5ms") as f64 / time("sleep_1ms") as f64;
    assert!(
        (2.0..=6.0).contains(&ratio),
        "sleep_5ms has {ratio:.2} times the off-CPU time of sleep_1ms, by design 5:\n{table}"
    );
    // Blocks of a millisecond or more: the time the target measured around them is off CPU
    // but for a few µs of syscall each.
    for name in ["pace", "sleep_1ms", "sleep_5ms"] {
        let measured = printed["functions"][name]["blocked_ns"].as_u64().unwrap() as f64;
        let seen = time(name) as f64;
        assert!(
            (seen / measured - 1.0).abs() <= 0.1,
            "{name}: {seen} ns off CPU in the exact run, the target measured {measured} ns:\n{table}"
        );
    }
}
