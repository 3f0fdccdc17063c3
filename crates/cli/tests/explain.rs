//! `switchyard explain` against a target with designed waits of every kind, each of a known
//! amount that the target measures itself (`switchyard-demo waits`): a worker pinned behind a
//! nice −15 hog, a pthread mutex and a Rust mutex held across a sleep, an fsync loop and an
//! idle epoll loop. The same recording runs under `perf sched record`, whose per-thread
//! "sch delay" is the peer for waiting for a CPU. Needs root.

mod common;

use std::{collections::BTreeMap, process::Command};

use common::*;
use serde_json::Value;

/// `got` within `pct`% of `want`.
#[track_caller]
fn within(what: &str, got: f64, want: f64, pct: f64) {
    let off = (got - want).abs() / want * 100.0;
    // `--nocapture` shows every comparison, the figures a reader checks.
    eprintln!(
        "{what}: {:.1} ms against {:.1} ms ({:+.1}%)",
        got / 1e6,
        want / 1e6,
        (got - want) / want * 100.0
    );
    assert!(
        off <= pct,
        "{what}: switchyard says {:.1} ms, the reference {:.1} ms ({off:.1}% apart, {pct}% allowed)",
        got / 1e6,
        want / 1e6
    );
}

/// The finding of `kind` whose threads include `thread`.
#[track_caller]
fn finding<'a>(ex: &'a Value, kind: &str, thread: &str) -> &'a Value {
    ex["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["kind"] == kind && f["threads"].as_array().unwrap().iter().any(|t| t == thread)
        })
        .max_by(|a, b| {
            a["seconds"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["seconds"].as_f64().unwrap())
        })
        .unwrap_or_else(|| panic!("no {kind} finding for {thread}: {ex:#}"))
}

#[track_caller]
fn ns(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Sums `perf sched timehist`'s "sch delay" column (ms) by tid.
fn sched_delay_by_tid(perf_data: &std::path::Path) -> BTreeMap<u32, f64> {
    let out = Command::new("perf")
        .args(["sched", "timehist", "-i"])
        .arg(perf_data)
        .output()
        .expect("running perf sched timehist");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut by = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "  1234.567890 [0000]  worker[7655/7653]   0.003   2.961   0.052"
        let cols: Vec<&str> = line.split_whitespace().collect();
        let Some(task) = cols.get(2) else { continue };
        let Some(ids) = task.rsplit_once('[').and_then(|(_, r)| r.strip_suffix(']')) else {
            continue;
        };
        let tid: u32 = match ids.split('/').next().and_then(|t| t.parse().ok()) {
            Some(t) => t,
            None => continue,
        };
        if let Some(delay) = cols.get(4).and_then(|d| d.parse::<f64>().ok()) {
            *by.entry(tid).or_default() += delay * 1e6;
        }
    }
    by
}

#[test]
fn every_designed_wait_has_its_cause_its_culprit_and_the_targets_own_amount() {
    let test = "every_designed_wait_has_its_cause_its_culprit_and_the_targets_own_amount";
    if !privileged(test) {
        return;
    }
    let dir = tempdir("explain");
    let run_path = dir.join("run.json");
    let perf_data = dir.join("perf.data");
    let out = Command::new("perf")
        .args(["sched", "record", "-o"])
        .arg(&perf_data)
        .arg("--")
        .arg(switchyard())
        .arg("record")
        .arg("-o")
        .arg(&run_path)
        .arg("--")
        .arg(demo())
        .args(["waits", "--seconds", "3", "--dir"])
        .arg(&dir)
        .output()
        .expect("running perf sched record (install Debian's linux-perf)");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let own: Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("the demo's JSON line");
    assert_eq!(own["hog_nice"], -15, "the hog must run at nice -15: {own}");
    let tid = |name: &str| own["threads"][name].as_u64().unwrap() as u32;

    let ex = explain_run_json(&run_path);

    // A worker pinned behind a nice −15 hog waits for CPU 0, held by the hog in hog_spin.
    let cpu = finding(&ex, "runqueue", "worker");
    within(
        "the worker's wait for a CPU against its own schedstat run_delay",
        ns(&cpu["seconds"]) * 1e9,
        ns(&own["worker"]["run_delay_ns"]),
        10.0,
    );
    assert_eq!(cpu["culprit"]["thread"], "hog", "{cpu:#}");
    assert_eq!(cpu["culprit"]["tid"], tid("hog"));
    assert_eq!(cpu["culprit"]["nice"], -15);
    assert_eq!(cpu["culprit"]["cpu"], 0);
    assert_eq!(cpu["culprit"]["same_process"], true);
    assert!(
        cpu["culprit"]["frames"][0]
            .as_str()
            .unwrap()
            .ends_with("hog_spin"),
        "{cpu:#}"
    );

    // perf sched timehist's sch delay of the worker, and switchyard's wait for a CPU.
    let run = load_run(&run_path);
    let worker = run["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == tid("worker"))
        .expect("the worker's row");
    let perf = sched_delay_by_tid(&perf_data);
    let perf_delay = perf
        .get(&tid("worker"))
        .copied()
        .unwrap_or_else(|| panic!("perf sched saw no worker: {perf:?}"));
    within(
        "the worker's wait for a CPU against perf sched timehist's sch delay",
        ns(&worker["runqueue_ns"]),
        perf_delay,
        5.0,
    );
    // Almost all of it after a wakeup: the worker sleeps, then the hog holds the CPU.
    assert!(
        ns(&worker["runqueue_after_wakeup_ns"]) > 0.9 * ns(&worker["runqueue_ns"]),
        "{worker}"
    );

    // A pthread mutex held across a sleep: the holder, and what it did meanwhile.
    let lock = finding(&ex, "lock", "lock-waiter");
    // The waiter's own clock runs on after the release until it has a CPU again.
    let whole =
        |f: &Value| (ns(&f["seconds"]) + f["then_runqueue_s"].as_f64().unwrap_or(0.0)) * 1e9;
    within(
        "the pthread mutex wait (and the CPU wait after it) against the waiter's own timing",
        whole(lock),
        ns(&own["lock_wait"]["ns"]),
        10.0,
    );
    assert_eq!(lock["address"], own["lock_addr"], "{lock:#}");
    // A static mutex is named by its symbol.
    assert_eq!(lock["symbol"], "DEMO_LOCK", "{lock:#}");
    // The waiter's own function, or its wrapper of pthread_mutex_lock where the walk kept it.
    let site = lock["site"].as_str().unwrap();
    assert!(
        site.ends_with("wait_for_lock") || site.ends_with("demo_lock_lock"),
        "{lock:#}"
    );
    assert_eq!(lock["culprit"]["thread"], "lock-holder", "{lock:#}");
    assert_eq!(lock["culprit"]["tid"], tid("lock-holder"));
    assert!(
        lock["culprit"]["frames"][0]
            .as_str()
            .unwrap()
            .ends_with("sleep_holding_lock"),
        "{lock:#}"
    );

    // The same with Rust's std mutex, which keeps no owner: its releaser names it.
    let rust = finding(&ex, "lock", "rust-waiter");
    within(
        "the Rust mutex wait (and the CPU wait after it) against the waiter's own timing",
        whole(rust),
        ns(&own["rust_lock_wait"]["ns"]),
        10.0,
    );
    assert_eq!(rust["culprit"]["thread"], "rust-holder", "{rust:#}");
    assert!(
        rust["culprit"]["frames"][0]
            .as_str()
            .unwrap()
            .ends_with("sleep_holding_rust_lock"),
        "{rust:#}"
    );

    // The holder's own sleep inside the lock, as a sleep of its own.
    let held = ex["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["kind"] == "sleep" && f["site"].as_str().unwrap().ends_with("sleep_holding_lock")
        })
        .expect("the holder's sleep inside the lock");
    within(
        "the holder's sleep inside the lock (and the CPU wait after it) against its own timing",
        whole(held),
        ns(&own["lock_held_sleeping"]["ns"]),
        10.0,
    );

    // An idle epoll loop: idle, apart from the request path, ranked after it.
    let idle = finding(&ex, "idle", "event-loop");
    within(
        "the idle epoll loop (and the CPU wait after it) against its own timing",
        whole(idle),
        ns(&own["idle"]["ns"]),
        10.0,
    );
    assert!(
        idle["site"].as_str().unwrap().ends_with("idle_wait"),
        "{idle:#}"
    );
    let kinds: Vec<&str> = ex["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    let first_idle = kinds.iter().position(|k| *k == "idle").unwrap();
    assert!(
        kinds[first_idle..].iter().all(|k| *k == "idle"),
        "{kinds:?}"
    );

    // fsync: block I/O in flush_to_disk. The target's own time in fsync also holds its time
    // on CPU inside the call and its waits for a CPU; the syscall table times the call whole.
    let io = finding(&ex, "io", "syncer");
    assert!(
        io["site"].as_str().unwrap().ends_with("flush_to_disk"),
        "{io:#}"
    );
    let fsync_own = ns(&own["fsync"]["ns"]);
    assert!(ns(&io["seconds"]) * 1e9 <= fsync_own * 1.1, "{io:#}");
    let fsync = run["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fsync")
        .expect("fsync in the syscall table");
    within(
        "fsync's time in the syscall table against the target's own",
        ns(&fsync["total_ns"]),
        fsync_own,
        10.0,
    );

    // The terminal's form leads with the same findings.
    let text_out = Command::new(switchyard())
        .arg("explain")
        .arg(&run_path)
        .output()
        .unwrap();
    let (plain, _) = text(&text_out);
    assert!(plain.starts_with("why it waited"), "{plain}");
    assert!(plain.contains("held by hog"), "{plain}");
    assert!(plain.contains("released by lock-holder"), "{plain}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn explain_refuses_a_file_that_is_not_a_run() {
    let dir = tempdir("explain-bad");
    let path = dir.join("run.json");
    std::fs::write(&path, "{\"format\": \"other\"}").unwrap();
    let out = Command::new(switchyard())
        .arg("explain")
        .arg(&path)
        .output()
        .unwrap();
    assert_user_error(&out, "not a valid run file");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cgroup with a CPU quota (20% of one CPU), removed when dropped; `None` where this host
/// has no writable CPU controller (cgroup v1's `cpu`, or v2 with `cpu` enabled).
struct QuotaGroup {
    dir: std::path::PathBuf,
    procs: std::path::PathBuf,
}

impl QuotaGroup {
    fn new(name: &str) -> Option<QuotaGroup> {
        let v1 = std::path::Path::new("/sys/fs/cgroup/cpu");
        if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(name);
            std::fs::create_dir_all(&dir).ok()?;
            std::fs::write(dir.join("cpu.cfs_quota_us"), "20000").ok()?;
            return Some(QuotaGroup {
                procs: dir.join("cgroup.procs"),
                dir,
            });
        }
        let root = std::path::Path::new("/sys/fs/cgroup");
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
        if !controllers.split_whitespace().any(|c| c == "cpu") {
            return None;
        }
        let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(dir.join("cpu.max"), "20000 100000").ok()?;
        Some(QuotaGroup {
            procs: dir.join("cgroup.procs"),
            dir,
        })
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn a_target_throttled_by_its_cgroup_quota_is_told() {
    let test = "a_target_throttled_by_its_cgroup_quota_is_told";
    if !privileged(test) {
        return;
    }
    let name = format!("switchyard-test-quota-{}", std::process::id());
    let Some(group) = QuotaGroup::new(&name) else {
        let reason = format!("skipping {test}: no writable cgroup CPU controller on this host");
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
            "{reason}; CI=true turns a skip into a failure"
        );
        eprintln!("{reason}");
        return;
    };
    // The target moves itself into the group, then spins on CPU for longer than the recording.
    let mut target = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && exec {} spin --iters 400000000000",
            group.procs.display(),
            demo().display()
        ))
        .spawn()
        .expect("starting the target");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let dir = tempdir("explain-quota");
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "--duration", "1s", "--pid"])
        .arg(target.id().to_string())
        .arg("-o")
        .arg(&run_path)
        .output()
        .expect("running switchyard");
    let _ = target.kill();
    let _ = target.wait();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let run = load_run(&run_path);
    let cg = &run["cgroup"];
    assert!(
        cg["path"].as_str().unwrap().ends_with(&name),
        "the run's cgroup is the target's: {cg}"
    );
    assert_eq!(cg["quota_us"], 20000, "{cg}");
    // About 10 periods of 100 ms in a second, nearly all throttled at 20% of a CPU.
    assert!(cg["throttled_periods"].as_u64().unwrap() >= 5, "{cg}");
    assert!(cg["throttled_ns"].as_u64().unwrap() >= 300_000_000, "{cg}");
    let ex = Command::new(switchyard())
        .args(["explain", "--json"])
        .arg(&run_path)
        .output()
        .unwrap();
    let ex: Value = serde_json::from_slice(&ex.stdout).expect("explain --json");
    let throttled = ex["throttled"].as_str().unwrap_or_default();
    assert!(throttled.contains("throttled by its CPU quota"), "{ex:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run file of `tests/data`, by name.
fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[track_caller]
fn explain_json(args: &[&str]) -> Value {
    let out = Command::new(switchyard())
        .arg("explain")
        .args(args)
        .arg(fixture("hostile.json"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn explain_json_keeps_the_findings_top_chooses_for_the_text() {
    let all = explain_json(&["--json"]);
    let all = all["findings"].as_array().unwrap();
    let busy: Vec<&Value> = all.iter().filter(|f| f["kind"] != "idle").collect();
    let idle: Vec<&Value> = all.iter().filter(|f| f["kind"] == "idle").collect();
    assert!(busy.len() > 2 && !idle.is_empty(), "{all:#?}");
    let top = explain_json(&["--json", "--top", "2"]);
    let top = top["findings"].as_array().unwrap();
    // The first two of the request path, in rank order, then every idle wait, as the text
    // shows them (the idle ones summed in one line).
    let want: Vec<&Value> = busy[..2].iter().chain(&idle).copied().collect();
    assert_eq!(top.iter().collect::<Vec<_>>(), want);
    let out = Command::new(switchyard())
        .args(["explain", "--top", "2"])
        .arg(fixture("hostile.json"))
        .output()
        .unwrap();
    let (plain, _) = text(&out);
    let numbered = plain
        .lines()
        .take_while(|l| !l.starts_with("evidence"))
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert_eq!(numbered, 2, "{plain}");
}

#[test]
fn explain_top_zero_is_refused() {
    for json in [false, true] {
        let out = Command::new(switchyard())
            .arg("explain")
            .args(["--top", "0"])
            .args(json.then_some("--json"))
            .arg(fixture("hostile.json"))
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains("'0'") && stderr.contains("--top"),
            "{stderr}"
        );
    }
}

#[test]
fn explain_json_has_every_field_the_contract_lists_even_when_empty() {
    let ex = explain_json(&["--json"]);
    // docs/explain.md lists them: a reader tells "none" from "not recorded" by null and [].
    for field in [
        "schema_version",
        "duration_s",
        "operations",
        "spans",
        "findings",
        "throttled",
        "limits",
    ] {
        assert!(ex.get(field).is_some(), "`{field}` missing: {ex:#}");
    }
    assert!(
        ex["throttled"].is_null() || ex["throttled"].is_string(),
        "{ex:#}"
    );
    assert!(ex["limits"].is_array(), "{ex:#}");
    assert!(ex["spans"].is_array(), "{ex:#}");
}

/// The demo's epoll server, started and idle: its JSON line (port, pid, tids) and the child.
fn epoll_server(args: &[&str]) -> (Value, std::process::Child) {
    use std::io::BufRead;
    let mut child = Command::new(demo())
        .arg("epoll-server")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("starting the demo's epoll server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let own: Value = serde_json::from_str(&line).expect("the server's JSON line");
    (own, child)
}

/// One request to the server on `port`, its answer.
fn ask(port: u64, line: &str) -> String {
    use std::io::{BufRead, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
    c.write_all(line.as_bytes()).unwrap();
    let mut answer = String::new();
    std::io::BufReader::new(c).read_line(&mut answer).unwrap();
    answer
}

/// The seconds of the findings of `kind` about thread `tid`.
fn seconds_of(ex: &Value, kind: &str, tid: u64) -> f64 {
    ex["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind && f["tids"].as_array().unwrap().iter().any(|t| t == tid))
        .map(|f| ns(&f["seconds"]))
        .sum()
}

#[test]
fn a_server_attached_idle_then_loaded_then_idle_waits_for_work_not_blocked() {
    let test = "a_server_attached_idle_then_loaded_then_idle_waits_for_work_not_blocked";
    if !privileged(test) {
        return;
    }
    let dir = tempdir("epoll-server");
    let run_path = dir.join("run.json");
    let (own, mut server) = epoll_server(&["--work-us", "300"]);
    let port = own["port"].as_u64().unwrap();
    let pid = own["pid"].to_string();
    // Idle in epoll_wait (no timeout) since before the recording: a wait open at its start.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let rec = record_ready(&[
        "--pid",
        &pid,
        "--duration",
        "5s",
        "-o",
        run_path.to_str().unwrap(),
    ]);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let before: Value = serde_json::from_str(&ask(port, "stats\n")).unwrap();
    // Loaded: two clients, one request at a time each, for 1.5 s.
    let clients: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                use std::io::{BufRead, Write};
                let c = std::net::TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
                let mut r = std::io::BufReader::new(c.try_clone().unwrap());
                let mut w = c;
                let t = std::time::Instant::now();
                let mut line = String::new();
                while t.elapsed() < std::time::Duration::from_millis(1500) {
                    w.write_all(b"x\n").unwrap();
                    line.clear();
                    r.read_line(&mut line).unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    // Idle again, still waiting when the recording stops: a wait open at its end.
    let (code, stderr) = wait_output(rec);
    assert_eq!(code, Some(0), "{stderr}");
    let after: Value = serde_json::from_str(&ask(port, "stats\n")).unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(after["requests"].as_u64().unwrap() > 100, "{after}");

    let run = load_run(&run_path);
    let (start, end) = (
        ns(&run["meta"]["start_mono_ns"]),
        ns(&run["meta"]["end_mono_ns"]),
    );
    // The server's own time in epoll_wait over the window: what it waited between the two
    // stats requests, less the last wait's part after the stop, plus the first wait's part
    // after the start (that wait ended with the first request).
    let waited = ns(&after["epoll_ns"]) - ns(&before["epoll_ns"]) - (ns(&after["wake_ns"]) - end)
        + (ns(&before["wake_ns"]) - start);
    let ran = ns(&after["cpu_ns"]) - ns(&before["cpu_ns"]);

    // Its one thread is listed, and every nanosecond of its window has a cause.
    let threads = run["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1, "{threads:#?}");
    let ex = explain_run_json(&run_path);
    let findings = ex["findings"].as_array().unwrap();
    let first = &findings[0];
    // What it did besides waiting for work: it ran (or waited for a CPU, on a busy machine).
    assert!(
        first["kind"] == "oncpu" || first["kind"] == "runqueue",
        "first finding: {first:#}"
    );
    assert!(
        !findings.iter().any(|f| f["kind"] == "blocked"),
        "a wait for work open at either bound read as blocked: {ex:#}"
    );
    let tid = own["tid"].as_u64().unwrap();
    within(
        "the server's idle time against its own time in epoll_wait",
        seconds_of(&ex, "idle", tid) * 1e9,
        waited,
        10.0,
    );
    within(
        "the server's on-CPU time against its own CPU clock",
        seconds_of(&ex, "oncpu", tid) * 1e9,
        ran,
        10.0,
    );
    let window = end - start;
    within(
        "the server's idle share against its own",
        seconds_of(&ex, "idle", tid) * 1e9 / window * 1e9,
        waited / window * 1e9,
        10.0,
    );
}

#[test]
fn threads_that_never_switch_are_listed_with_their_state_and_time() {
    let test = "threads_that_never_switch_are_listed_with_their_state_and_time";
    if !privileged(test) {
        return;
    }
    let dir = tempdir("never-switch");
    let run_path = dir.join("run.json");
    let (own, mut server) = epoll_server(&["--parked", "2", "--sleepers", "1"]);
    let pid = own["pid"].to_string();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let rec = record_ready(&[
        "--pid",
        &pid,
        "--duration",
        "2s",
        "-o",
        run_path.to_str().unwrap(),
    ]);
    let (code, stderr) = wait_output(rec);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, Some(0), "{stderr}");

    let run = load_run(&run_path);
    let window = window_ns(&run);
    let tids = |what: &str| -> Vec<u64> {
        own[what]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap())
            .collect()
    };
    let (parked, sleepers, main) = (
        tids("parked"),
        tids("sleepers"),
        own["tid"].as_u64().unwrap(),
    );
    // Every thread, though none switched: the server idle in epoll_wait, two parked on a
    // condvar, one asleep, each blocked its whole window.
    let threads = run["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 4, "{threads:#?}");
    assert!(stderr.contains(", 4 threads"), "{stderr}");
    for t in threads {
        assert_eq!(
            t["voluntary"].as_u64().unwrap() + t["involuntary"].as_u64().unwrap(),
            0
        );
        within(
            &format!("thread {}'s blocked time against the window", t["tid"]),
            ns(&t["blocked_ns"]),
            window,
            1.0,
        );
    }
    let ex = explain_run_json(&run_path);
    assert!(
        !ex["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "blocked"),
        "{ex:#}"
    );
    // The server and the two parked threads wait for work, each its whole window (a finding
    // may hold several threads).
    let idle: Vec<&Value> = ex["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "idle")
        .collect();
    for &tid in parked.iter().chain([&main]) {
        assert!(
            idle.iter()
                .any(|f| f["tids"].as_array().unwrap().iter().any(|t| t == tid)),
            "thread {tid} is in no idle finding: {ex:#}"
        );
    }
    within(
        "the idle time of the server and the parked threads against 3 windows",
        idle.iter().map(|f| ns(&f["seconds"])).sum::<f64>() * 1e9,
        3.0 * window,
        1.0,
    );
    within(
        "the sleeper's time on a timer against the window",
        seconds_of(&ex, "sleep", sleepers[0]) * 1e9,
        window,
        1.0,
    );
    // The sleeper is the only thing that is not waiting for work: it comes first.
    let first = &ex["findings"][0];
    assert_eq!(first["kind"], "sleep", "{first:#}");
    assert_eq!(first["tids"][0], sleepers[0], "{first:#}");
}

/// A lock's holder is read over the waits it ended, never over its whole recording: the
/// demo's holders sleep 2 ms holding their lock and rest 6 ms outside it, so most of their
/// own time is the rest, while every wait of theirs was the sleep under the lock.
#[test]
fn a_lock_holder_is_read_over_the_waits_it_ended() {
    if !privileged("a_lock_holder_is_read_over_the_waits_it_ended") {
        return;
    }
    let dir = tempdir("explain-held");
    let run = dir.join("run.json");
    let out = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(&run)
        .arg("--")
        .arg(demo())
        .args(["waits", "--seconds", "2", "--rest-us", "6000", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let ex = explain_run_json(&run);
    for (waiter, holder, under) in [
        ("lock-waiter", "lock-holder", "sleep_holding_lock"),
        ("rust-waiter", "rust-holder", "sleep_holding_rust_lock"),
    ] {
        let lock = finding(&ex, "lock", waiter);
        let c = &lock["culprit"];
        assert_eq!(c["thread"], holder, "{lock:#}");
        let doing = c["doing"].as_str().unwrap();
        assert!(
            doing.starts_with(&format!("sleeping in switchyard_demo::{under} for ")),
            "{waiter}'s holder is named by what it did during the waits: {doing}"
        );
        // "… for 98.1% of the waits" on an idle host: most of each wait was that sleep (the
        // rest, waiting for a CPU after it, grows with the host's load).
        let share: f64 = doing
            .rsplit(" for ")
            .next()
            .and_then(|s| s.strip_suffix("% of the waits"))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no share in {doing:?}"));
        assert!(share >= 50.0, "{doing}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
