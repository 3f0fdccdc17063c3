//! Recording real targets with known behaviour: exact syscall counts, switch counts that agree
//! with the kernel's own (/proc) and with perf, spawn and live-attach modes, threads and a
//! forked child. Needs root; run one at a time (they share kernel state).

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
};

use common::*;

#[test]
fn spawned_target_counts_are_exact() {
    if !privileged("spawned_target_counts_are_exact") {
        return;
    }
    let dir = tempdir("exact");
    let run_path = dir.join("run.json");
    let (n, m, k) = (5000u64, 50u64, 2000u64);
    let out = Command::new(switchyard())
        .args(["record", "--perf-counters", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args([
            "known",
            "--getppid",
            &n.to_string(),
            "--sleeps",
            &m.to_string(),
        ])
        .args(["--sleep-us", "200", "--pingpong", &k.to_string()])
        .output()
        .expect("running switchyard");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "record failed:\n{stdout}\n{stderr}");
    let run = load_run(&run_path);

    assert_eq!(syscall_count(&run, "getppid"), n, "getppid");
    assert_eq!(syscall_count(&run, "nanosleep"), m, "nanosleep");
    // K round trips: each side writes K times and reads K times.
    assert_eq!(syscall_count(&run, "writev"), 2 * k, "writev");
    assert_eq!(syscall_count(&run, "readv"), 2 * k, "readv");
    assert_eq!(syscall_count(&run, "exit_group"), 1, "exit_group");

    // The target's own view of its switches, read from /proc/thread-self/status at its end.
    let own: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the demo's JSON line");
    let own_vol: u64 = own["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["voluntary"].as_u64().unwrap())
        .sum();
    let own_invol: u64 = own["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["involuntary"].as_u64().unwrap())
        .sum();
    let vol = sum_threads(&run, "voluntary");
    let invol = sum_threads(&run, "involuntary");
    // Every sleep blocks (a pipe read may find its byte already there on another CPU).
    assert!(vol >= m, "voluntary {vol} < {m}");
    assert_close("voluntary vs /proc", vol, own_vol);
    assert_close("involuntary vs /proc", invol, own_invol);
    let perf = counter(&run, "context-switches").expect("perf context-switches counter");
    assert_close("switches vs perf", vol + invol, perf);

    // Off-CPU time: 50 sleeps of 200 µs at least.
    let blocked = sum_threads(&run, "blocked_ns");
    assert!(blocked >= m * 200_000, "blocked_ns {blocked}");
    assert_eq!(run["meta"]["end"]["kind"], "target_exited");
    assert_eq!(run["meta"]["end"]["code"], 0);
    assert_no_counting_drops(&run);

    // The terminal summary (on stderr) names the top syscalls and the switch figures.
    assert!(
        stderr.contains("top by count") && stderr.contains("getppid"),
        "{stderr}"
    );
    assert!(stderr.contains("context switches:"), "{stderr}");
    assert!(!stdout.contains("context switches:"), "{stdout}");
}

/// `--syscall-latency 16` counts every call and times one in about 16 per thread: the
/// counts stay exact, the timed calls are ~1/16 of them (a countdown drawn uniformly from
/// 1..=31: within 10% over 200,000 calls is some 40 standard deviations), the histogram holds
/// exactly the timed calls and the total is their mean times the count. `--syscall-latency
/// 0` times none, and the summary says which. (The first run takes stacks, the second not:
/// the verifier sees each way.)
/// By default each thread's calls are all timed up to its budget (2,000 a second), and one in
/// 16 beyond it, weighted by 16: a loop under the budget is timed exactly, a hot loop is
/// sampled, and its weighted histogram still stands for every call.
#[test]
fn syscalls_are_timed_by_budget_by_default() {
    if !privileged("syscalls_are_timed_by_budget_by_default") {
        return;
    }
    let dir = tempdir("latency-budget");
    // 1,000 calls a second, spinning between them, recorded by pid once the program's start
    // (a burst of some 200 calls) is over: under the budget, every call timed. The loop runs
    // for a minute, so that however long the attach takes on a loaded host, the target
    // outlives the recording; it is killed once the recording is done.
    let stamps = dir.join("stamps.bin");
    let slow = stamped_getppid_loop("60000", "1000", &stamps);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let slow_run = dir.join("slow.json");
    let out = Command::new(switchyard())
        .args([
            "record",
            "--no-stacks",
            "-d",
            "1s",
            "--pid",
            &slow.id().to_string(),
            "-o",
        ])
        .arg(&slow_run)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    drop(slow);
    let run = load_run(&slow_run);
    let calls = syscall_count(&run, "getppid");
    assert!(calls >= 500, "{calls} getppid calls in a second");
    let row = syscall_row(&run, "getppid");
    assert!(row.get("timed").is_none(), "every call timed: {row}");
    assert_eq!(hist_total(&row), calls, "{row}");
    assert!(!text(&out).1.contains("calls timed"), "{}", text(&out).1);

    // 2,000,000 calls as fast as they go: beyond the budget within milliseconds, and long
    // enough (at least 150 ms at 76 ns a call, untraced) to start a second 100-ms period,
    // whatever the program's start (some 200 calls) spent of the first one's budget.
    let n = 2_000_000u64;
    let hot = demo_command(&["getppid-loop", "--count", &n.to_string()]);
    let hot: Vec<&std::ffi::OsStr> = hot.iter().map(|c| c.as_os_str()).collect();
    let (run, stderr) = record_spawned(&dir, &["--no-stacks"], &hot);
    assert_eq!(syscall_count(&run, "getppid"), n);
    assert_no_counting_drops(&run);
    let row = syscall_row(&run, "getppid");
    let timed = row["timed"]
        .as_u64()
        .expect("a sampled row says how many were timed");
    let drawn = row["drawn"].as_u64().expect("and how many were drawn");
    // The budget's calls (200 a 100-ms period) and about one in 16 of the rest.
    assert!(drawn > 0 && drawn < timed, "{row}");
    assert!(
        timed.abs_diff(n / 16) <= n / 16 / 5 + (timed - drawn),
        "{timed} timed of {n}: {row}"
    );
    // Each drawn call stands for 16: the histogram's weights add up to about every call.
    let in_hist = hist_total(&row);
    assert!(
        in_hist.abs_diff(n) <= n / 20,
        "{in_hist} in the histogram for {n} calls"
    );
    assert!(
        stderr.contains("--syscall-budget") && stderr.contains("sampled: getppid"),
        "{stderr}"
    );
}

#[test]
fn the_programs_own_run_time_is_sampled_and_scaled_to_the_recording() {
    if !privileged("the_programs_own_run_time_is_sampled_and_scaled_to_the_recording") {
        return;
    }
    let dir = tempdir("program-times");
    // A call a millisecond for a minute, recorded by pid for 3 s and killed after.
    let stamps = dir.join("stamps.bin");
    let target = stamped_getppid_loop("60000", "1000", &stamps);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args([
            "record",
            "-d",
            "3s",
            "--pid",
            &target.id().to_string(),
            "-o",
        ])
        .arg(&run_path)
        .output()
        .unwrap();
    let stderr = text(&out).1;
    assert!(out.status.success(), "{stderr}");
    drop(target);
    let run = load_run(&run_path);
    let times = &run["meta"]["program_times"];
    // 100 ms of each second, at a random point: a tenth of the recording, less the last
    // second's slice where the stop came first.
    let covered = times["covered"].as_f64().expect("program_times.covered");
    assert!(covered > 0.0 && covered <= 0.2, "{times}");
    let programs = times["programs"]
        .as_array()
        .expect("program_times.programs");
    let sys_enter = programs
        .iter()
        .find(|p| p["name"] == "sys_enter")
        .unwrap_or_else(|| panic!("no sys_enter among {times}"));
    let runs = sys_enter["runs"].as_u64().unwrap();
    assert!(
        runs > 0 && sys_enter["run_ns"].as_u64().unwrap() > 0,
        "{sys_enter}"
    );
    // The program runs for every syscall on the host, the target's among them: scaled to the
    // whole recording, its runs are at least most of the target's calls. Counted only while
    // the statistics were on, unscaled, they would be about a tenth.
    let calls = syscall_count(&run, "getppid");
    assert!(
        runs as f64 / covered >= calls as f64 * 0.5,
        "{runs} runs counted over {covered} of the recording, against {calls} getppid calls"
    );
    assert!(
        stderr.contains("the recorder's BPF programs ran") && stderr.contains("sys_enter: "),
        "{stderr}"
    );
}

/// The demo's loop of `calls` getppid calls, one every `gap_us` µs, each return's time
/// written to `stamps` when it ends.
fn stamped_getppid_loop(calls: &str, gap_us: &str, stamps: &std::path::Path) -> Reaped {
    Reaped(
        Command::new(demo())
            .args([
                "getppid-loop",
                "--count",
                calls,
                "--gap-us",
                gap_us,
                "--stamps",
            ])
            .arg(stamps)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn syscall_row(run: &serde_json::Value, name: &str) -> serde_json::Value {
    run["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} row"))
}

fn hist_total(row: &serde_json::Value) -> u64 {
    row["latency"]["buckets"]
        .as_array()
        .map_or(0, |b| b.iter().map(|c| c.as_u64().unwrap()).sum())
}

#[test]
fn sampled_syscall_latency_counts_every_call_and_times_one_in_n() {
    if !privileged("sampled_syscall_latency_counts_every_call_and_times_one_in_n") {
        return;
    }
    let (n, k) = (200_000u64, 2000u64);
    for (every, stacks) in [(16u64, "--syscall-stacks=16"), (0, "--no-stacks")] {
        let (n_text, k_text) = (n.to_string(), k.to_string());
        let command = demo_command(&[
            "known",
            "--getppid",
            &n_text,
            "--sleeps",
            "0",
            "--pingpong",
            &k_text,
        ]);
        let command: Vec<&std::ffi::OsStr> = command.iter().map(|c| c.as_os_str()).collect();
        let (run, stderr) = record_spawned(
            &tempdir(&format!("latency-{every}")),
            &[stacks, "--syscall-latency", &every.to_string()],
            &command,
        );
        assert_eq!(syscall_count(&run, "getppid"), n, "getppid");
        assert_eq!(syscall_count(&run, "writev"), 2 * k, "writev");
        assert_eq!(syscall_count(&run, "readv"), 2 * k, "readv");
        assert_eq!(syscall_count(&run, "exit_group"), 1, "exit_group");
        assert_no_counting_drops(&run);
        let row = run["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "getppid")
            .unwrap();
        let timed = row["timed"]
            .as_u64()
            .expect("a sampled row says how many were timed");
        let in_hist: u64 = row["latency"]["buckets"]
            .as_array()
            .map_or(0, |b| b.iter().map(|c| c.as_u64().unwrap()).sum());
        // Each timed call counts in the histogram by its weight, `every`.
        assert_eq!(in_hist, timed * every, "{row}");
        let total = row["total_ns"].as_u64().unwrap();
        match n.checked_div(every) {
            None => {
                assert_eq!((timed, total), (0, 0), "{row}");
                assert!(stderr.contains("latency not timed"), "{stderr}");
            }
            Some(want) => {
                assert!(
                    timed.abs_diff(want) <= want / 10,
                    "{timed} getppid calls timed, want about {want}"
                );
                assert!(total > 0 && row["max_ns"].as_u64().unwrap() > 0, "{row}");
                assert!(
                    stderr.contains(&format!("a thread (--syscall-latency {every})")),
                    "{stderr}"
                );
            }
        }
    }
}

/// With one `THREADS` slot, every thread but the first to claim it has its entry in the
/// spill hash (the path of a host whose pid_max is beyond the array): each thread's switches
/// still match its own count, and its CPU holders are still there.
#[test]
fn threads_whose_slots_clash_count_exactly() {
    if !privileged("threads_whose_slots_clash_count_exactly") {
        return;
    }
    let dir = tempdir("spill");
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .env("SWITCHYARD_THREAD_SLOTS", "1")
        .args(["record", "--syscalls", "none", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args([
            "known",
            "--getppid",
            "10",
            "--sleeps",
            "20",
            "--sleep-us",
            "200",
        ])
        .args(["--pingpong", "3000"])
        .output()
        .expect("running switchyard");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "record failed:\n{stdout}\n{stderr}");
    let run = load_run(&run_path);
    let own: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the demo's JSON line");
    let threads = run["threads"].as_array().expect("threads");
    for t in own["threads"].as_array().unwrap() {
        let tid = t["tid"].as_u64().unwrap();
        let rec = threads
            .iter()
            .find(|r| r["tid"].as_u64() == Some(tid))
            .unwrap_or_else(|| panic!("thread {tid} not recorded: {}", run["threads"]));
        for field in ["voluntary", "involuntary"] {
            assert_close(
                &format!("thread {tid} {field} vs /proc"),
                rec[field].as_u64().unwrap(),
                t[field].as_u64().unwrap(),
            );
        }
    }
    assert_eq!(threads.len(), 2, "{}", run["threads"]);
    // Every switch-in was seen too: one the kernel side missed would be counted here. The
    // hypervisor's own switches make a few on these VMs (see `LAST_SWITCH`), more under load:
    // at most one in a thousand; a spilled entry that lost its writes would miss them all.
    let unreported = run["meta"]["unreported_switches"].as_u64().unwrap_or(0);
    let switches: u64 = threads
        .iter()
        .map(|t| t["voluntary"].as_u64().unwrap() + t["involuntary"].as_u64().unwrap())
        .sum();
    assert!(
        unreported * 1000 <= switches,
        "switch-ins not seen: {unreported} of {switches} switches"
    );
    assert_no_counting_drops(&run);
}

#[test]
fn spawn_mode_counts_the_first_syscalls_after_exec() {
    if !privileged("spawn_mode_counts_the_first_syscalls_after_exec") {
        return;
    }
    let dir = tempdir("first");
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(&run_path)
        .args(["--", "/bin/true"])
        .output()
        .expect("running switchyard");
    assert!(out.status.success(), "{:?}", text(&out));
    let run = load_run(&run_path);
    // The exec itself and what the dynamic loader does right after it.
    assert_eq!(syscall_count(&run, "execve"), 1);
    for name in ["brk", "mmap", "openat"] {
        assert!(
            syscall_count(&run, name) >= 1,
            "{name} not counted: {}",
            run["syscalls"]
        );
    }
    assert_eq!(syscall_count(&run, "exit_group"), 1);
}

#[test]
fn live_attach_follows_threads_and_a_forked_child() {
    if !privileged("live_attach_follows_threads_and_a_forked_child") {
        return;
    }
    let dir = tempdir("live");
    let run_path = dir.join("run.json");
    let per_thread = 3000u64;
    let mut target = Command::new(demo())
        .args(["threads", "--threads", "8", "--fork-child", "--wait-stdin"])
        .args(["--getppid", &per_thread.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the demo");
    let mut target_out = BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    target_out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready"), "demo said {line:?}");
    let pid = target.id();

    let mut rec = Command::new(switchyard())
        .args(["record", "--pid", &pid.to_string(), "-o"])
        .arg(&run_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting switchyard");
    // Wait until the probes are attached.
    let mut rec_err = BufReader::new(rec.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut l = String::new();
        if rec_err.read_line(&mut l).unwrap() == 0 {
            break;
        }
        said.push_str(&l);
        if l.contains("recording pid") {
            break;
        }
    }
    assert!(said.contains("recording pid"), "switchyard said: {said}");
    target.stdin.take().unwrap().write_all(b"g").unwrap();
    let status = target.wait().unwrap();
    assert!(status.success());
    let out = rec.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", text(&out));

    let run = load_run(&run_path);
    // 8 threads and one child process, each making `per_thread` getppid calls.
    assert_eq!(syscall_count(&run, "getppid"), 9 * per_thread);
    let threads = run["threads"].as_array().unwrap();
    let in_target = threads.iter().filter(|t| t["tgid"] == pid).count();
    assert!(
        in_target >= 9,
        "{in_target} threads of the target seen (main + 8)"
    );
    let children = run["meta"]["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "children: {children:?}");
    let child = children[0].as_u64().unwrap();
    assert!(
        threads.iter().any(|t| t["tgid"].as_u64() == Some(child)),
        "no thread of the child {child} in the thread table"
    );
    assert_eq!(run["meta"]["mode"], "pid");
}

#[test]
fn no_follow_children_leaves_the_child_out() {
    if !privileged("no_follow_children_leaves_the_child_out") {
        return;
    }
    let dir = tempdir("nofollow");
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "--no-follow-children", "-o"])
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args([
            "threads",
            "--threads",
            "2",
            "--fork-child",
            "--getppid",
            "1000",
        ])
        .output()
        .expect("running switchyard");
    assert!(out.status.success(), "{:?}", text(&out));
    let run = load_run(&run_path);
    // Two threads; the child's 1000 calls are not counted.
    assert_eq!(syscall_count(&run, "getppid"), 2000);
    assert!(run["meta"]["children"].as_array().unwrap().is_empty());
}

/// A thread's on-CPU, run-queue and blocked time add up to the recording's window, and the
/// perf task-clock agrees: every interval is clipped to the window, including the ones in
/// progress at the start (a thread already running) and at the end.
#[test]
fn times_add_up_to_the_window_for_a_thread_running_throughout() {
    if !privileged("times_add_up_to_the_window_for_a_thread_running_throughout") {
        return;
    }
    let mut busy = Reaped(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let dir = tempdir("window");
    let mut worst: f64 = 0.0;
    for (i, flags) in [&["--no-stacks"][..], &[], &["--freq", "1"]]
        .iter()
        .enumerate()
    {
        let run_path = dir.join(format!("run-{i}.json"));
        let out = Command::new(switchyard())
            .args([
                "record",
                "--perf-counters",
                "--pid",
                &busy.id().to_string(),
                "-d",
                "1s",
                "-o",
            ])
            .arg(&run_path)
            .args(*flags)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out).1);
        let run = load_run(&run_path);
        let window = window_ns(&run);
        let t = &run["threads"][0];
        let oncpu = t["oncpu_ns"].as_u64().unwrap() as f64;
        let life = lifetime_ns(t);
        let task_clock = counter(&run, "task-clock").unwrap() as f64;
        assert!(
            (life / window - 1.0).abs() < 0.01,
            "{flags:?}: on+runqueue+blocked {life} ns in a {window} ns window"
        );
        assert!(
            (task_clock / oncpu - 1.0).abs() < 0.02,
            "{flags:?}: task-clock {task_clock} ns, eBPF on-CPU {oncpu} ns"
        );
        worst = worst.max(oncpu / window);
    }
    let _ = busy.kill();
    let _ = busy.wait();
    eprintln!("worst on-CPU / window: {worst:.4}");
}

/// The same for a thread that is blocked when the recording starts and wakes twice a second:
/// its off-CPU interval in progress at the start counts from the start.
#[test]
fn times_add_up_to_the_window_for_a_thread_blocked_at_the_start() {
    if !privileged("times_add_up_to_the_window_for_a_thread_blocked_at_the_start") {
        return;
    }
    let mut shell = Reaped(
        Command::new("sh")
            .args(["-c", "while :; do sleep 0.5; done"])
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = shell.id();
    let dir = tempdir("window-blocked");
    for i in 0..3 {
        let run_path = dir.join(format!("run-{i}.json"));
        let out = Command::new(switchyard())
            .args(["record", "--pid", &pid.to_string(), "-d", "2s", "-o"])
            .arg(&run_path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out).1);
        let run = load_run(&run_path);
        let window = window_ns(&run);
        let t = run["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tid"] == pid)
            .expect("the shell's thread")
            .clone();
        let life = lifetime_ns(&t);
        assert!(
            (life / window - 1.0).abs() < 0.01,
            "run {i}: on+runqueue+blocked {life} ns in a {window} ns window: {t}; drops: {}",
            run["drops"]
        );
    }
    let _ = shell.kill();
    let _ = shell.wait();
}

/// A live target's syscalls count when they return inside the run's window, and only then:
/// attaching before the start and detaching after the stop take a second or more, while the
/// target goes on calling. The target stamps every return with CLOCK_MONOTONIC, the clock of
/// the window's bounds; once with --every, where every window must hold its own stamps.
#[test]
fn a_live_targets_syscalls_count_inside_the_window_only() {
    if !privileged("a_live_targets_syscalls_count_inside_the_window_only") {
        return;
    }
    let dir = tempdir("window-stamps");
    for every in [None, Some("400ms")] {
        window_counts_match_the_targets_stamps(&dir, every, "300000");
    }
}

/// Other recordings, and a storm of switches, do not move a window's bounds: the check above,
/// five times, while two recordings of switch storms run beside it.
#[test]
fn windows_stay_exact_beside_other_recordings_and_a_switch_storm() {
    if !privileged("windows_stay_exact_beside_other_recordings_and_a_switch_storm") {
        return;
    }
    let dir = tempdir("window-neighbours");
    let storm = demo_command(&[
        "storm",
        "--seconds",
        "150",
        "--threads",
        "1",
        "--pairs",
        "2",
    ]);
    let neighbours: Vec<Reaped> = (0..2)
        .map(|i| {
            Reaped(
                Command::new(switchyard())
                    .args(["record", "-d", "150s", "--every", "300ms", "-o"])
                    .arg(dir.join(format!("neighbour-{i}")))
                    .arg("--")
                    .args(&storm)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    // Attached and recording before the first check.
    std::thread::sleep(std::time::Duration::from_secs(3));
    for _ in 0..5 {
        // Fewer calls: beside the storms each 20 µs gap takes longer, and the loop still
        // outlives the recording by seconds.
        window_counts_match_the_targets_stamps(&dir, Some("400ms"), "100000");
    }
    for mut n in neighbours {
        assert!(
            n.0.try_wait().unwrap().is_none(),
            "a neighbour recording ended before the checks did"
        );
        // SAFETY: a plain signal to our own child.
        unsafe { libc::kill(n.0.id() as i32, libc::SIGINT) };
        let _ = n.0.wait();
    }
}

/// Records a loop of `calls` getppid calls by pid (windows of `every`, or one run) and checks
/// the counts against the calls the loop stamped as returned inside the recording, and each
/// window.
fn window_counts_match_the_targets_stamps(dir: &std::path::Path, every: Option<&str>, calls: &str) {
    let stamps = dir.join("stamps.bin");
    let _ = std::fs::remove_file(&stamps);
    // A call every 20 µs for seconds, well past the recording's end (and its detaching).
    let mut target = stamped_getppid_loop(calls, "20", &stamps);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let pid = target.id();
    let out_path = dir.join(if every.is_some() { "w" } else { "run.json" });
    // A folder of windows is written once: the last check's is replaced.
    let _ = std::fs::remove_dir_all(&out_path);
    let mut args = vec!["record", "--pid"];
    let pid_arg = pid.to_string();
    args.extend([pid_arg.as_str(), "-d", "1200ms", "--no-stacks"]);
    if let Some(e) = every {
        args.extend(["--every", e]);
    }
    let out = Command::new(switchyard())
        .args(&args)
        .arg("-o")
        .arg(&out_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    assert!(target.0.wait().unwrap().success());
    let bytes = std::fs::read(&stamps).unwrap();
    let stamps: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let runs: Vec<serde_json::Value> = match every {
        None => vec![load_run(&out_path)],
        Some(_) => load_windows(&out_path),
    };
    assert!(!runs.is_empty());
    let inside =
        |start: u64, end: u64| stamps.iter().filter(|t| (start..end).contains(*t)).count() as i64;
    let bounds = |run: &serde_json::Value| {
        (
            run["meta"]["start_mono_ns"].as_u64().unwrap(),
            run["meta"]["end_mono_ns"].as_u64().unwrap(),
        )
    };
    let (start, _) = bounds(&runs[0]);
    let (_, end) = bounds(runs.last().unwrap());
    assert!(
        stamps.last().copied().unwrap_or(0) > end + 1_000_000_000,
        "the target stopped too soon"
    );
    // The recording: a call returning as the clock is read at the start or the stop can
    // fall on the other side of it, one call a bound. Counting until the programs are
    // detached would add about 50,000.
    let counted: i64 = runs
        .iter()
        .map(|r| syscall_count(r, "getppid") as i64)
        .sum();
    let expected = inside(start, end);
    eprintln!(
        "{every:?}: {counted} getppid counted in {} windows, {expected} returned inside",
        runs.len()
    );
    assert!(
        (counted - expected).abs() <= 2,
        "{every:?}: {counted} getppid counted, {expected} returned inside {start}..{end}"
    );
    // Each window: a cut takes its time, then reads the maps over about a millisecond;
    // a call returning meanwhile is the window's (and not the next one's).
    for run in &runs {
        let (start, end) = bounds(run);
        let (counted, expected) = (syscall_count(run, "getppid") as i64, inside(start, end));
        assert!(
            (counted - expected).abs() <= 150,
            "{every:?}: {counted} getppid counted, {expected} returned inside {start}..{end}"
        );
    }
}

/// No thread lives longer than the window, on a target that creates threads by the hundred
/// and switches 100k times a second: a switch the kernel does not report (this machine kind
/// reports a switch to its agent's threads but not the switch back) is timed from the CPU's
/// last reported switch, so a thread's intervals never overlap.
#[test]
fn no_thread_outlives_the_window_under_a_switch_storm() {
    if !privileged("no_thread_outlives_the_window_under_a_switch_storm") {
        return;
    }
    let command = demo_command(&["storm", "--seconds", "2", "--threads", "1", "--pairs", "2"]);
    let command: Vec<&std::ffi::OsStr> = command.iter().map(|c| c.as_os_str()).collect();
    let (run, _) = record_spawned(&tempdir("window-storm"), &[], &command);
    let window = window_ns(&run);
    let threads = run["threads"].as_array().unwrap();
    assert!(threads.len() > 100, "{} threads", threads.len());
    for t in threads {
        let life = lifetime_ns(t);
        assert!(
            life <= window * 1.005,
            "thread {}: on+runqueue+blocked {life} ns in a {window} ns window: {t}; drops: {}",
            t["tid"],
            run["drops"]
        );
    }
    // The caller runs from the start to the end; the players for the storm's 2 s (the window
    // also holds the program's start, longer on a loaded host).
    let long: Vec<f64> = threads
        .iter()
        .map(lifetime_ns)
        .filter(|&l| l > window * 0.5)
        .collect();
    assert!(long.len() >= 3, "{long:?} in a {window} ns window");
    let caller = long.iter().copied().fold(0.0, f64::max);
    assert!(
        caller >= window * 0.99,
        "the caller: {caller} ns in a {window} ns window"
    );
    for l in long {
        assert!(
            l >= 2e9 * 0.95,
            "{l} ns for a 2 s storm, in a {window} ns window"
        );
    }
}

/// The summary goes to stderr, as `perf stat`'s and `strace -c`'s do: stdout is the target's
/// alone, byte for byte.
#[test]
fn the_summary_leaves_the_targets_stdout_alone() {
    if !privileged("the_summary_leaves_the_targets_stdout_alone") {
        return;
    }
    let dir = tempdir("summary-stderr");
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "--no-stacks", "-o"])
        .arg(&run_path)
        .args(["--", "sh", "-c", "echo first; echo second"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, "first\nsecond\n");
    assert!(stderr.contains("switchyard: sh -c"), "{stderr}");
    assert!(stderr.contains("run file: "), "{stderr}");
}
