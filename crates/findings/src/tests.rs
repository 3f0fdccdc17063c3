//! Findings from a small fixed run: a pinned worker behind a hog, a lock held across a sleep,
//! an fsync, an idle epoll loop.

use switchyard_model::{
    Frame, FrameKind, Label, Log2Hist, Profile, Run, RunqueueHolder, Stack, ThreadRow, metrics,
};

use super::*;

const MS: u64 = 1_000_000;

fn thread(tid: u32, comm: &str, on: u64, blocked: u64, runq: u64) -> ThreadRow {
    ThreadRow {
        tid,
        tgid: 100,
        comm: comm.into(),
        voluntary: 10,
        involuntary: 1,
        oncpu_ns: on,
        blocked_ns: blocked,
        runqueue_ns: runq,
        runqueue_after_wakeup_ns: runq,
        offcpu: Log2Hist::default(),
        runqueue_waits: Log2Hist::default(),
    }
}

/// Interns frames: user names then kernel names, root first.
fn stack(run: &mut Run, tid: u32, label: &str, user: &[&str], kernel: &[&str], ns: u64) -> Stack {
    let mut frames = Vec::new();
    for (name, kind) in user
        .iter()
        .map(|n| (n, FrameKind::User))
        .chain(kernel.iter().map(|n| (n, FrameKind::Kernel)))
    {
        let f = Frame {
            name: name.to_string(),
            module: match kind {
                FrameKind::Kernel => "kernel".into(),
                _ if name.starts_with("__") || name.starts_with("pthread") => "libc.so.6".into(),
                _ => "demo".into(),
            },
            kind,
            ..Default::default()
        };
        let i = match run.profiles.frames.iter().position(|g| *g == f) {
            Some(i) => i,
            None => {
                run.profiles.frames.push(f);
                run.profiles.frames.len() - 1
            }
        };
        frames.push(i as u32);
    }
    let comm = run
        .threads
        .iter()
        .find(|t| t.tid == tid)
        .map(|t| t.comm.clone())
        .unwrap_or_default();
    Stack {
        tgid: 100,
        tid,
        comm,
        label: label.into(),
        frames,
        value: ns,
        ..Default::default()
    }
}

pub(crate) fn waits_run() -> Run {
    let mut run: Run = serde_json::from_str(include_str!("../tests/data/bare.json")).unwrap();
    run.meta.command = vec!["/usr/bin/demo".into(), "waits".into()];
    run.threads = vec![
        thread(1, "worker", 60 * MS, 40 * MS, 2_900 * MS),
        thread(2, "hog", 2_800 * MS, 0, 200 * MS),
        thread(3, "lock-holder", 10 * MS, 2_990 * MS, 0),
        thread(4, "lock-waiter", 5 * MS, 2_995 * MS, 0),
        thread(5, "syncer", 20 * MS, 2_980 * MS, 0),
        thread(6, "event-loop", MS, 2_999 * MS, 0),
    ];
    run.runqueue_holders = vec![
        RunqueueHolder {
            tgid: 100,
            tid: 1,
            cpu: 0,
            holder_tgid: 100,
            holder_tid: 2,
            holder_comm: "hog".into(),
            holder_nice: -15,
            count: 5000,
            ns: 2_850 * MS,
        },
        RunqueueHolder {
            tgid: 100,
            tid: 1,
            cpu: 0,
            holder_tgid: 999,
            holder_tid: 999,
            holder_comm: "sshd".into(),
            holder_nice: 0,
            count: 10,
            ns: 50 * MS,
        },
    ];
    run.profiles.stats.oncpu_hz = 99;
    let oncpu = vec![
        stack(&mut run, 2, "", &["main", "hog_spin"], &[], 270),
        stack(&mut run, 1, "", &["main", "parse_request"], &[], 6),
    ];
    let nanosleep = [
        "__x64_sys_clock_nanosleep",
        "hrtimer_nanosleep",
        "do_nanosleep",
        "schedule",
    ];
    let futex = ["__x64_sys_futex", "do_futex", "futex_wait", "schedule"];
    let offcpu = vec![
        stack(
            &mut run,
            1,
            "S",
            &["main", "worker_nap", "clock_nanosleep"],
            &nanosleep,
            40 * MS,
        ),
        stack(
            &mut run,
            1,
            "W",
            &["main", "worker_nap", "clock_nanosleep"],
            &nanosleep,
            2_900 * MS,
        ),
        stack(
            &mut run,
            3,
            "S",
            &["main", "sleep_holding_lock", "clock_nanosleep"],
            &nanosleep,
            2_000 * MS,
        ),
        stack(
            &mut run,
            3,
            "S",
            &["main", "rest", "clock_nanosleep"],
            &nanosleep,
            990 * MS,
        ),
        stack(
            &mut run,
            4,
            "S",
            &[
                "main",
                "wait_for_lock",
                "___pthread_mutex_lock",
                "__lll_lock_wait",
            ],
            &futex,
            2_000 * MS,
        ),
        stack(
            &mut run,
            4,
            "S",
            &["main", "pause_briefly", "clock_nanosleep"],
            &nanosleep,
            995 * MS,
        ),
        stack(
            &mut run,
            5,
            "D",
            &["main", "flush_to_disk", "fsync"],
            &[
                "do_fsync",
                "ext4_sync_file",
                "jbd2_log_wait_commit",
                "schedule",
            ],
            2_400 * MS,
        ),
        stack(
            &mut run,
            5,
            "S",
            &["main", "between_syncs", "clock_nanosleep"],
            &nanosleep,
            580 * MS,
        ),
        stack(
            &mut run,
            6,
            "S",
            &["main", "idle_wait", "epoll_wait"],
            &["do_epoll_wait", "ep_poll", "schedule"],
            2_999 * MS,
        ),
    ];
    let mut waiter = stack(
        &mut run,
        4,
        "S",
        &[
            "main",
            "wait_for_lock",
            "___pthread_mutex_lock",
            "__lll_lock_wait",
        ],
        &futex,
        2_000 * MS,
    );
    let releaser = stack(
        &mut run,
        3,
        "",
        &["main", "release", "___pthread_mutex_unlock"],
        &["futex_wake"],
        0,
    );
    waiter.waker_frames = releaser.frames;
    waiter.waker_comm = "lock-holder".into();
    waiter.waker_tid = 3;
    let mut futex_profile = stack(
        &mut run,
        4,
        "0x5555deadbeef",
        &[
            "main",
            "wait_for_lock",
            "___pthread_mutex_lock",
            "__lll_lock_wait",
        ],
        &[],
        2_000 * MS,
    );
    futex_profile.frames.truncate(4);
    run.profiles.oncpu = Profile {
        unit: "samples".into(),
        stacks: oncpu,
    };
    run.profiles.offcpu = Profile {
        unit: "ns".into(),
        stacks: offcpu,
    };
    run.profiles.wakeup = Profile {
        unit: "ns".into(),
        stacks: vec![waiter],
    };
    run.profiles.futex = Profile {
        unit: "ns".into(),
        stacks: vec![futex_profile],
    };
    run
}

fn find<'a>(ex: &'a Explanation, kind: Kind, thread: &str) -> &'a Finding {
    ex.findings
        .iter()
        .find(|f| f.kind == kind && f.threads.iter().any(|t| t == thread))
        .unwrap_or_else(|| panic!("no {kind:?} finding for {thread}: {:#?}", ex.findings))
}

#[test]
fn a_worker_behind_a_hog_waits_for_a_cpu_held_by_the_hog_in_its_spin() {
    let ex = explain(&waits_run());
    let f = find(&ex, Kind::Runqueue, "worker");
    assert!((f.seconds - 2.9).abs() < 1e-9, "{}", f.seconds);
    assert!((f.share - 2.9 / 3.0).abs() < 1e-9);
    let c = f.culprit.as_ref().unwrap();
    assert_eq!(
        (c.thread.as_str(), c.tid, c.nice, c.cpu),
        ("hog", 2, Some(-15), Some(0))
    );
    assert!(c.same_process && c.process == "demo", "{c:?}");
    assert_eq!(c.frames.first().map(String::as_str), Some("hog_spin"));
    assert_eq!(
        f.summary,
        "worker waited 2.90 s (96.7% of its time) for a CPU (CPU 0 mostly), held by hog (this process, nice -15) in hog_spin"
    );
    // The worker's own on-CPU time is small, its wait heads the list.
    assert_eq!(ex.findings[0].kind, Kind::Runqueue);
}

#[test]
fn cpu_holders_of_one_program_in_several_processes_are_one_culprit() {
    // Two `busy` processes took the worker's CPU about equally: one program, one line of
    // 100%, not "busy (pid 300), 51.7% of the wait".
    let mut run = waits_run();
    let holder = |pid: u32, ns: u64| RunqueueHolder {
        tgid: 100,
        tid: 1,
        cpu: 0,
        holder_tgid: pid,
        holder_tid: pid,
        holder_comm: "busy".into(),
        holder_nice: 0,
        count: 100,
        ns,
    };
    run.runqueue_holders = vec![holder(300, 1_500 * MS), holder(400, 1_400 * MS)];
    let ex = explain(&run);
    let f = find(&ex, Kind::Runqueue, "worker");
    let c = f.culprit.as_ref().unwrap();
    assert_eq!(
        (c.thread.as_str(), c.pid, c.same_process),
        ("busy", 300, false)
    );
    assert!(!f.summary.contains("of the wait"), "{}", f.summary);
    assert!(f.summary.contains("2 other processes"), "{}", f.summary);
    assert!(f.evidence.contains("pids 300, 400"), "{}", f.evidence);
    // Two programs stay apart: the larger is the culprit, with its share.
    run.runqueue_holders[1].holder_comm = "other".into();
    let ex = explain(&run);
    let f = find(&ex, Kind::Runqueue, "worker");
    assert!(
        f.summary.contains("another process, pid 300"),
        "{}",
        f.summary
    );
    assert!(f.summary.contains("51.7% of the wait"), "{}", f.summary);
}

#[test]
fn a_wait_ended_by_an_idle_cpu_waking_is_wake_up_latency_not_a_holder() {
    // The worker's waits ended on CPUs that were idle: the idle task "held" them, and the
    // wait was the CPU's way out of idle.
    let mut run = waits_run();
    run.runqueue_holders = vec![RunqueueHolder {
        tgid: 100,
        tid: 1,
        cpu: 1,
        holder_tgid: 0,
        holder_tid: 0,
        holder_comm: "swapper/1".into(),
        holder_nice: 0,
        count: 100,
        ns: 2_000 * MS,
    }];
    let ex = explain(&run);
    let f = find(&ex, Kind::Runqueue, "worker");
    assert!(
        f.summary
            .contains("on an idle CPU waking up (swapper/1): wake-up latency, no task held it"),
        "{}",
        f.summary
    );
    assert!(!f.summary.contains("held by swapper"), "{}", f.summary);
    assert!(f.evidence.contains("the idle task for"), "{}", f.evidence);
}

#[test]
fn a_cpu_holder_is_named_by_where_it_ran_not_by_its_idle_time() {
    // The hog ran 0.3 s and idled 9 s in epoll_wait: its idle time is heavier than its
    // running, but it held the worker's CPU by running, in hog_spin.
    let mut run = waits_run();
    run.threads[1].oncpu_ns = 300 * MS;
    run.threads[1].blocked_ns = 9_000 * MS;
    let idle = stack(
        &mut run,
        2,
        "S",
        &["main", "event_loop", "epoll_wait"],
        &["__x64_sys_epoll_wait", "do_epoll_wait", "schedule"],
        9_000 * MS,
    );
    run.profiles.offcpu.stacks.push(idle);
    let ex = explain(&run);
    let c = find(&ex, Kind::Runqueue, "worker").culprit.clone().unwrap();
    assert_eq!(c.doing, "running in hog_spin", "{c:?}");
    assert_eq!(c.frames.first().map(String::as_str), Some("hog_spin"));
}

#[test]
fn a_lock_held_across_a_sleep_names_the_holder_and_its_sleep() {
    let ex = explain(&waits_run());
    let f = find(&ex, Kind::Lock, "lock-waiter");
    assert_eq!(f.site, "wait_for_lock");
    assert_eq!(f.address.as_deref(), Some("0x5555deadbeef"));
    let c = f.culprit.as_ref().unwrap();
    assert_eq!((c.thread.as_str(), c.tid), ("lock-holder", 3));
    assert_eq!(
        c.frames.first().map(String::as_str),
        Some("sleep_holding_lock")
    );
    assert!(
        c.doing.starts_with("sleeping in sleep_holding_lock"),
        "{}",
        c.doing
    );
}

#[test]
fn io_sleep_and_idle_are_their_own_kinds_and_idle_ranks_last() {
    let ex = explain(&waits_run());
    let io = find(&ex, Kind::Io, "syncer");
    assert_eq!(io.site, "flush_to_disk");
    assert!((io.seconds - 2.4).abs() < 1e-9);
    assert!(
        io.evidence.contains("jbd2_log_wait_commit"),
        "{}",
        io.evidence
    );
    let idle = find(&ex, Kind::Idle, "event-loop");
    assert_eq!(idle.site, "idle_wait");
    assert_eq!(ex.findings.last().unwrap().kind, Kind::Idle);
    assert!(ex.busy().all(|f| f.kind != Kind::Idle));
    let sleep = find(&ex, Kind::Sleep, "lock-holder");
    assert_eq!(sleep.site, "sleep_holding_lock");
}

#[test]
fn the_json_is_the_documented_contract() {
    let ex = explain(&waits_run());
    let v: serde_json::Value = serde_json::to_value(&ex).unwrap();
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["spans"], serde_json::json!([]));
    let f = &v["findings"][0];
    for field in [
        "kind", "seconds", "share", "threads", "culprit", "evidence", "summary",
    ] {
        assert!(f.get(field).is_some(), "findings[0] has no {field}: {f}");
    }
    assert_eq!(f["kind"], "runqueue");
    assert_eq!(f["culprit"]["thread"], "hog");
    assert_eq!(f["culprit"]["frames"][0], "hog_spin");
    let back: Explanation = serde_json::from_value(v).unwrap();
    assert_eq!(back, ex);
}

#[test]
fn without_stacks_only_the_cpu_wait_has_a_cause() {
    let mut run = waits_run();
    run.profiles = Default::default();
    let ex = explain(&run);
    assert!(
        ex.limits.iter().any(|l| l.contains("without stacks")),
        "{:?}",
        ex.limits
    );
    assert_eq!(
        find(&ex, Kind::Runqueue, "worker")
            .culprit
            .as_ref()
            .unwrap()
            .thread,
        "hog"
    );
    assert!(find(&ex, Kind::Blocked, "syncer").culprit.is_none());
}

#[test]
fn what_changed_ranks_by_the_share_of_the_change() {
    let a = waits_run();
    let mut b = waits_run();
    // B: the lock is held for a quarter as long; the hog is gone.
    for s in &mut b.profiles.offcpu.stacks {
        if s.tid == 4 && s.label == Label::Sleeping && s.value == 2_000 * MS {
            s.value = 500 * MS;
        }
        if s.label == Label::Woken {
            s.value = 100 * MS;
        }
    }
    b.threads[0].runqueue_ns = 100 * MS;
    b.threads[0].runqueue_after_wakeup_ns = 100 * MS;
    let ch = changes(&[a], &[b]);
    assert_eq!(ch.per, "s");
    let top = &ch.changes[0];
    assert_eq!(top.kind, Kind::Runqueue);
    assert!(top.delta < 0.0);
    assert_eq!(ch.changes[1].kind, Kind::Lock);
    let sum: f64 = ch.changes.iter().map(|c| c.explains).sum();
    assert!((sum - 1.0).abs() < 1e-9, "{sum}");
    assert!(ch.render(5).contains("explains"));
}

#[test]
fn a_failed_figure_names_the_findings_behind_it() {
    let ex = explain(&waits_run());
    let b = behind("switches.involuntary.per_op", &ex, 3);
    assert_eq!(b[0].1.kind, Kind::Runqueue);
    let b = behind("futex.wait_time", &ex, 3);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].1.culprit.as_ref().unwrap().thread, "lock-holder");
    assert!(behind("memory.max_rss", &ex, 3).is_empty());
    // Every figure a budget can name is either explained or knowingly not.
    for name in metrics::NAMES {
        let _ = behind(name, &ex, 3);
    }
}

#[test]
fn the_go_gc_on_cpu_is_its_own_finding() {
    let mut run = waits_run();
    run.threads
        .push(thread(7, "cache", 1_000 * MS, 2_000 * MS, 0));
    let gc = stack(
        &mut run,
        7,
        "",
        &[
            "runtime.gcBgMarkWorker",
            "runtime.gcDrain",
            "runtime.scanobject",
        ],
        &[],
        30,
    );
    let serve = stack(&mut run, 7, "", &["main.serve", "main.handle"], &[], 70);
    run.profiles.oncpu.stacks.extend([gc, serve]);
    let ex = explain(&run);
    let f = find(&ex, Kind::Gc, "cache");
    assert!((f.seconds - 0.3).abs() < 1e-9, "{f:?}");
    let on = find(&ex, Kind::Oncpu, "cache");
    assert!((on.seconds - 0.7).abs() < 1e-9, "{on:?}");
    assert_eq!(on.site, "main.handle");
}

#[test]
fn a_thread_parked_the_whole_recording_is_idle() {
    let mut run = waits_run();
    let mut parked = thread(8, "sysmon-ish", 0, 3_000 * MS, 0);
    parked.voluntary = 1;
    parked.involuntary = 0;
    run.threads.push(parked);
    let ex = explain(&run);
    let f = find(&ex, Kind::Idle, "sysmon-ish");
    assert!(
        f.summary.contains("parked the whole recording"),
        "{}",
        f.summary
    );
}

#[test]
fn holders_pool_by_process_and_name() {
    let mut run = waits_run();
    // The worker's CPU is now held by a driver's three connections and one server thread:
    // each connection less than the server thread, together more.
    let holder = |tgid, tid, comm: &str, ns| RunqueueHolder {
        tgid: 100,
        tid: 1,
        cpu: 0,
        holder_tgid: tgid,
        holder_tid: tid,
        holder_comm: comm.into(),
        holder_nice: 0,
        count: 10,
        ns,
    };
    run.runqueue_holders = vec![
        holder(100, 2, "hog", 1_000 * MS),
        holder(900, 901, "connection-1", 700 * MS),
        holder(900, 902, "connection-2", 600 * MS),
        holder(900, 903, "connection-3", 600 * MS),
    ];
    let ex = explain(&run);
    let f = find(&ex, Kind::Runqueue, "worker");
    let c = f.culprit.as_ref().unwrap();
    assert_eq!(
        (c.thread.as_str(), c.tid, c.pid),
        ("connection-1", 901, 900)
    );
    assert!(!c.same_process);
    assert!(
        f.summary
            .contains("held by connection-1 and 2 more threads like it (another process, pid 900"),
        "{}",
        f.summary
    );
}

/// The names a hostile target could choose, for `waits_run`'s: a thread that sets the window
/// title, a holder that clears the screen, a releaser and a function whose names forge lines
/// of their own, a site reversed by a bidi override, an idle site with a C1 CSI and a TAB.
const HOSTILE: &[(&str, &str)] = &[
    ("worker", "\x1b]0;pwned\x07"),
    ("hog", "\x1b[2Jhog"),
    ("lock-holder", "holder\r\n  9. [fake]"),
    ("hog_spin", "spin\r\n  1. [cpu] forged line"),
    ("wait_for_lock", "wait\u{202e}kcol"),
    ("idle_wait", "idle\u{9b}31m\twait"),
];

/// `waits_run` with the names in `names` replaced, throttled by a cgroup at `cgroup`.
fn renamed(names: &[(&str, &str)], cgroup: &str) -> Run {
    let mut run = waits_run();
    let rename = |name: &mut String| {
        if let Some((_, to)) = names.iter().find(|(from, _)| from == name) {
            *name = to.to_string();
        }
    };
    run.threads.iter_mut().for_each(|t| rename(&mut t.comm));
    run.runqueue_holders
        .iter_mut()
        .for_each(|h| rename(&mut h.holder_comm));
    run.profiles
        .frames
        .iter_mut()
        .for_each(|f| rename(&mut f.name));
    for p in [
        &mut run.profiles.oncpu,
        &mut run.profiles.offcpu,
        &mut run.profiles.wakeup,
    ] {
        for s in &mut p.stacks {
            rename(&mut s.comm);
            rename(&mut s.waker_comm);
        }
    }
    run.cgroup = Some(switchyard_model::CgroupCpu {
        path: cgroup.into(),
        quota_us: Some(20_000),
        period_us: 100_000,
        periods: 30,
        throttled_periods: 28,
        throttled_ns: 900 * MS,
    });
    run
}

/// No control character but the line ends, no bidi format character.
#[track_caller]
fn assert_terminal_safe(text: &str) {
    assert!(
        !text
            .chars()
            .any(|c| c != '\n' && switchyard_model::term::is_unsafe(c)),
        "a control character reached the terminal text: {text:?}"
    );
}

#[test]
fn the_terminal_text_escapes_the_targets_names_and_keeps_its_lines() {
    let hostile = explain(&renamed(HOSTILE, "/sys/fs/cgroup/\x1b[31mred"));
    let plain = explain(&renamed(&[], "/sys/fs/cgroup/red"));
    let text = hostile.render(10);
    assert_terminal_safe(&text);
    // As many lines as with plain names: no name forged one.
    assert_eq!(
        text.lines().count(),
        plain.render(10).lines().count(),
        "{text}"
    );
    for shown in [
        r"1. [runqueue] \x1b]0;pwned\x07 waited",
        r"held by \x1b[2Jhog",
        r"in spin\r\n  1. [cpu] forged line",
        r"in wait\u{202e}kcol",
        r"(idle\u{9b}31m\twait)",
        r"cgroup (/sys/fs/cgroup/\x1b[31mred)",
    ] {
        assert!(text.contains(shown), "no {shown} in:\n{text}");
    }
    // The findings keep the names as recorded: the JSON and the page escape them their way.
    assert!(
        hostile
            .findings
            .iter()
            .any(|f| f.threads == ["\x1b]0;pwned\x07"])
    );

    let ch = changes(&[waits_run()], &[renamed(HOSTILE, "/")]);
    let text = ch.render(20);
    assert_terminal_safe(&text);
    let idle = usize::from(ch.idle_a + ch.idle_b > 0.0);
    assert_eq!(
        text.lines().count(),
        1 + ch.changes.len().min(20) + idle,
        "{text}"
    );
    assert!(
        text.contains(r"\x1b]0;pwned\x07 waited for a CPU"),
        "{text}"
    );
}

/// Two CPython threads fighting for the GIL on a stripped interpreter: their stacks name no
/// `take_gil`, only a condition variable (the idle rule's park), but the futex words they
/// wait on lie inside `_PyRuntime.ceval.gil`, so the wait is the GIL, held by the other.
fn gil_run(with_gil: bool) -> Run {
    let mut run = waits_run();
    run.threads = vec![
        thread(11, "python3.11", 1_400 * MS, 1_500 * MS, 100 * MS),
        thread(12, "python3.11", 1_450 * MS, 1_450 * MS, 100 * MS),
    ];
    run.runqueue_holders.clear();
    if with_gil {
        run.locks.runtime_locks = vec![switchyard_model::RuntimeLock {
            tgid: 100,
            name: "the GIL".into(),
            symbol: "_PyRuntime.ceval.gil".into(),
            start: 0xa5b8a8,
            len: 208,
        }];
    }
    let user = [
        "Thread.run (threading.py:975)",
        "crunch (gil.py:8)",
        "[python3.11+0xf94ed]",
        "___pthread_cond_timedwait64",
        "__pthread_cond_wait_common",
        "__futex_abstimed_wait_common",
    ];
    let futex = ["__x64_sys_futex", "do_futex", "futex_wait", "schedule"];
    let mut off = Vec::new();
    let mut words = Vec::new();
    let mut wakes = Vec::new();
    for (tid, other, ns) in [(11, 12, 1_500 * MS), (12, 11, 1_450 * MS)] {
        off.push(stack(&mut run, tid, "S", &user, &futex, ns));
        // The condition variable's two futex words, +0x48 and +0x4c into the GIL.
        for (word, share) in [("0xa5b8f0", 3), ("0xa5b8f4", 2)] {
            words.push(stack(&mut run, tid, word, &user, &[], ns * share / 5));
        }
        let mut wake = stack(&mut run, tid, "S", &user, &futex, 300);
        wake.waker_tid = other;
        wake.waker_comm = "python3.11".into();
        wake.waker_frames = stack(
            &mut run,
            other,
            "",
            &[
                "crunch (gil.py:8)",
                "[python3.11+0xf8a12]",
                "___pthread_cond_signal",
            ],
            &[],
            0,
        )
        .frames;
        wakes.push(wake);
    }
    run.profiles.offcpu.stacks = off;
    run.profiles.futex.stacks = words;
    run.profiles.wakeup.stacks = wakes;
    run.profiles.oncpu.stacks.clear();
    for f in run
        .profiles
        .frames
        .iter_mut()
        .filter(|f| f.name.contains(".py:"))
    {
        f.kind = FrameKind::Python;
    }
    run
}

#[test]
fn a_gil_wait_is_found_by_its_futex_word_on_a_stripped_interpreter() {
    let ex = explain(&gil_run(true));
    let f = &ex.findings[0];
    assert_eq!(f.kind, Kind::Lock, "{:#?}", ex.findings);
    assert!(f.summary.contains("waited for the GIL"), "{}", f.summary);
    assert_eq!(f.tids, vec![11, 12]);
    assert_eq!(f.site, "crunch (gil.py:8)");
    // Half of each thread's time, over the threads that fought.
    assert!((f.share - 2.95 / 6.0).abs() < 1e-6, "{}", f.share);
    assert_eq!(f.symbol.as_deref(), Some("_PyRuntime.ceval.gil+0x48"));
    // What held it: the other thread, told apart by its id.
    let c = f.culprit.as_ref().expect("a holder");
    assert!([11, 12].contains(&c.tid), "{c:?}");
    assert!(
        f.summary.contains(&format!("python3.11 (tid {})", c.tid)),
        "{}",
        f.summary
    );
    assert!(
        !ex.findings.iter().any(|f| f.kind == Kind::Idle),
        "{:#?}",
        ex.findings
    );
    assert_eq!(idle_offcpu_ns(&gil_run(true)), 0);

    // A run that does not know where the GIL is reads the same stacks as a park.
    let ex = explain(&gil_run(false));
    assert!(
        ex.findings.iter().any(|f| f.kind == Kind::Idle)
            && !ex.findings.iter().any(|f| f.kind == Kind::Lock),
        "{:#?}",
        ex.findings
    );
}

#[test]
fn a_gil_fighter_runnable_behind_the_other_waits_for_the_gil_and_its_running_ranks_after() {
    let mut run = gil_run(true);
    // Each fighter waited 100 ms for a CPU: 80 ms behind the other fighter, 20 ms behind
    // another process.
    for (tid, other) in [(11, 12), (12, 11)] {
        for (holder, tgid, ns) in [(other, 100, 80 * MS), (900, 900, 20 * MS)] {
            run.runqueue_holders.push(RunqueueHolder {
                tgid: 100,
                tid,
                cpu: 0,
                holder_tgid: tgid,
                holder_tid: holder,
                holder_comm: if tgid == 100 { "python3.11" } else { "rustc" }.into(),
                holder_nice: 0,
                count: 10,
                ns,
            });
        }
    }
    // They ran longer than they waited.
    run.threads[0].oncpu_ns = 3_000 * MS;
    run.threads[1].oncpu_ns = 3_000 * MS;
    let ex = explain(&run);
    let gil = &ex.findings[0];
    assert!(
        gil.summary.contains("waited for the GIL"),
        "{:#?}",
        ex.findings
    );
    assert!((gil.seconds - 3.11).abs() < 1e-6, "{}", gil.seconds);
    assert!(
        gil.summary
            .contains("160.0 ms of it runnable behind the thread that held it"),
        "{}",
        gil.summary
    );
    // Their running is what held it: right after.
    assert_eq!(ex.findings[1].kind, Kind::Oncpu, "{:#?}", ex.findings);
    assert!(ex.findings[1].seconds > gil.seconds);
    // Only the wait behind another process is a wait for a CPU (40 ms, under the floor).
    assert!(
        !ex.findings.iter().any(|f| f.kind == Kind::Runqueue),
        "{:#?}",
        ex.findings
    );
}

/// The Go GC's work, its mark assists and its pauses are each a finding, their shares of the
/// process's CPU (not of mostly idle threads' time), the assists at the site that allocated,
/// and the GC driven by the allocating site.
#[test]
fn the_go_gc_s_work_assists_and_pauses_are_findings_of_the_process_s_cpu() {
    let mut run = waits_run();
    run.threads
        .push(thread(7, "cache", 1_000 * MS, 9_000 * MS, 0));
    let collector = stack(
        &mut run,
        7,
        "",
        &[
            "runtime.gcBgMarkWorker",
            "runtime.gcDrain",
            "runtime.scanobject",
        ],
        &[],
        30,
    );
    let assist = stack(
        &mut run,
        7,
        "",
        &[
            "main.serve",
            "main.handle",
            "runtime.mallocgc",
            "runtime.gcAssistAlloc",
            "runtime.gcDrainN",
        ],
        &[],
        20,
    );
    let serve = stack(&mut run, 7, "", &["main.serve", "main.handle"], &[], 50);
    run.profiles.oncpu.stacks = vec![collector, assist, serve];
    run.gc = Some(switchyard_model::GoGc {
        cycles: 10,
        pauses: 100,
        pause_total_ns: 50 * MS,
        pause_max_ns: MS,
        mark_assists: 500,
        ..Default::default()
    });
    let ex = explain(&run);
    // Every target thread's CPU: the waits run's 2.896 s and the cache's 1 s.
    let process_cpu = 3.896;
    let gc = |what: &str| {
        ex.findings
            .iter()
            .find(|f| f.kind == Kind::Gc && f.summary.contains(what))
            .unwrap_or_else(|| panic!("no GC finding with {what:?}: {:#?}", ex.findings))
    };
    let own = gc("mark workers");
    assert!((own.seconds - 0.3).abs() < 1e-9, "{own:?}");
    assert!((own.share - 0.3 / process_cpu).abs() < 1e-9, "{own:?}");
    assert!(
        own.summary.contains("of the process's CPU"),
        "{}",
        own.summary
    );
    assert_eq!(
        own.culprit.as_ref().map(|c| c.doing.as_str()),
        Some("allocating in main.handle")
    );
    let assists = gc("500 mark assists");
    assert!((assists.seconds - 0.2).abs() < 1e-9, "{assists:?}");
    assert!((assists.share - 0.2 / process_cpu).abs() < 1e-9);
    assert_eq!(assists.site, "main.handle");
    // The world stopped 50 ms while the process kept 3.896 s / 2.95 s = 1.32 CPUs busy.
    let pauses = gc("stopped the world 100 times");
    let lost = 0.05 * process_cpu / 2.95;
    assert!((pauses.seconds - lost).abs() < 1e-9, "{pauses:?}");
    assert!((pauses.share - lost / process_cpu).abs() < 1e-9);
    // The rest of the cache's CPU is its own, over the process's CPU too.
    let on = find(&ex, Kind::Oncpu, "cache");
    assert!((on.seconds - 0.5).abs() < 1e-9, "{on:?}");
    assert!((on.share - 0.5 / process_cpu).abs() < 1e-9, "{on:?}");
    // Ranked by their effect: the collector's 0.3 s before the assists' 0.2 s before the
    // pauses' 66 ms.
    let rank = |f: &Finding| ex.findings.iter().position(|g| g == f).unwrap();
    assert!(rank(own) < rank(assists) && rank(assists) < rank(pauses));
}

/// A span of 1,000 requests: 990 of 200 µs on CPU, 10 of 8 ms that waited 7.8 ms each for a
/// lock whose releaser (the compactor) slept 7.8 ms holding it. Kept: the 10 slow ones, and 20
/// typical ones.
fn tail_run() -> Run {
    use switchyard_model::{SpanAnatomy, SpanInstance, SpanRow, SpanWait};
    let mut run: Run = serde_json::from_str(include_str!("../tests/data/bare.json")).unwrap();
    run.meta.pid = 100;
    run.threads = vec![
        thread(1, "worker", 400 * MS, 80 * MS, 0),
        thread(2, "compactor", MS, 500 * MS, 0),
    ];
    let wait = stack(
        &mut run,
        1,
        "S",
        &["serve", "handle_request", "lock_table", "__lll_lock_wait"],
        &["do_futex", "futex_wait"],
        0,
    );
    let held = stack(
        &mut run,
        2,
        "S",
        &["compactor_main", "compact_table", "__nanosleep"],
        &[],
        0,
    );
    run.profiles.span_stacks = vec![wait.frames, held.frames];
    let slow = |k: u64| SpanInstance {
        tgid: 100,
        tid: 1,
        start_ns: k * 100 * MS,
        duration_ns: 8 * MS,
        oncpu_ns: 200_000,
        blocked_ns: 7_800_000,
        slow: true,
        blocked: vec![SpanWait {
            ns: 7_800_000,
            count: 1,
            state: "S".into(),
            stack: Some(0),
            waker_tgid: 100,
            waker_tid: 2,
            held_ns: 7_800_000,
            held_state: "S".into(),
            held_stack: Some(1),
            ..Default::default()
        }],
        ..Default::default()
    };
    let typical = |k: u64| SpanInstance {
        tgid: 100,
        tid: 1,
        start_ns: k * MS,
        duration_ns: 200_000,
        oncpu_ns: 200_000,
        ..Default::default()
    };
    let mut instances: Vec<SpanInstance> = (0..10).map(slow).collect();
    instances.extend((0..20).map(typical));
    run.locks.spans = vec![SpanRow {
        label: "handle_request".into(),
        symbol: "handle_request".into(),
        anatomy: Some(SpanAnatomy {
            count: 1000,
            total_ns: 990 * 200_000 + 10 * 8 * MS,
            // The histogram's buckets hold these values exactly (their lowest).
            hist: vec![(199_680, 990), (7_995_392, 10)],
            instances,
            ..Default::default()
        }),
        ..Default::default()
    }];
    run
}

#[test]
fn the_slowest_requests_lock_wait_explains_their_excess_and_names_the_sleeping_holder() {
    let ex = explain(&tail_run());
    let span = &ex.spans[0];
    assert_eq!(span.name, "handle_request");
    assert_eq!(span.count, 1000);
    assert_eq!(
        (
            span.percentiles_ns.p50,
            span.percentiles_ns.p99,
            span.percentiles_ns.max
        ),
        (199_680, 7_995_392, 8 * MS)
    );
    assert_eq!((span.slow.count, span.typical.count), (10, 20));
    let lock = &span.slow.findings[0];
    assert_eq!(lock.finding.kind, Kind::Lock);
    assert_eq!(lock.finding.site, "lock_table");
    assert!(
        (lock.finding.share - 0.975).abs() < 1e-9,
        "{}",
        lock.finding.share
    );
    // The slow ones' excess over the typical ones: 7.8 ms, all of it this wait.
    assert!(
        (lock.excess_share - 1.0).abs() < 1e-9,
        "{}",
        lock.excess_share
    );
    let culprit = lock.finding.culprit.as_ref().unwrap();
    assert_eq!((culprit.thread.as_str(), culprit.tid), ("compactor", 2));
    assert_eq!(culprit.doing, "sleeping in compact_table");
    // Without the wait the slow ones take 200 µs: the P99 falls to theirs.
    assert_eq!(lock.what_if_p99_ns, 200_000);
    assert!(
        lock.finding.summary.starts_with(
            "the slowest 1% of handle_request (P99 8.0 ms, against P50 199.7 µs) spent 97.5% of their time waiting for a lock in lock_table, released by compactor, which was sleeping in compact_table holding it"
        ),
        "{}",
        lock.finding.summary
    );
    // Running is no part of the excess: the typical ones run as long.
    assert!(
        span.slow
            .findings
            .iter()
            .all(|f| f.finding.kind != Kind::Oncpu)
    );
    let typical = &span.typical.findings[0];
    assert_eq!(typical.finding.kind, Kind::Oncpu);
    assert!((typical.finding.share - 1.0).abs() < 1e-9);
    let text = ex.render(5);
    assert!(
        text.starts_with("slow requests: handle_request (1000 instances;"),
        "{text}"
    );
}

/// OpenTelemetry spans read from the thread context: 200 spans; two blocked 5 ms on the
/// table's lock (their off-CPU time linked to them by stack), the rest 100 µs waiting for a
/// CPU. The two are the slowest 1% and their lock wait is their excess.
#[test]
fn opentelemetry_spans_have_their_tail_explained_by_span_id() {
    use switchyard_model::{OtelSpan, OtelSpans};
    let mut run: Run = serde_json::from_str(include_str!("../tests/data/bare.json")).unwrap();
    run.meta.pid = 100;
    run.meta.start_mono_ns = 1_000 * MS;
    run.threads = vec![thread(1, "worker", 400 * MS, 10 * MS, 20 * MS)];
    let span_id = |n: u64| format!("{:016x}", 0x8000_0000_0000_0000u64 | n);
    let mut spans = Vec::new();
    for n in 0..200u64 {
        let slow = n < 2;
        spans.push(OtelSpan {
            trace_id: format!("{:032x}", n + 1),
            span_id: span_id(n),
            tid: 1,
            blocked_ns: if slow { 5 * MS } else { 0 },
            runqueue_ns: 100_000,
            switches: 1,
            first_ns: 1_000 * MS + n * MS,
            last_ns: 1_000 * MS + n * MS + 1,
            ..Default::default()
        });
    }
    // The slow spans' blocked time by stack, as the kernel side linked it; a wait for a CPU
    // after the wakeup ("W") is not blocked time.
    for n in 0..2 {
        for (label, ns) in [("S", 5 * MS), ("W", 100_000)] {
            let mut s = stack(
                &mut run,
                1,
                label,
                &["serve", "lock_table", "__lll_lock_wait"],
                &["do_futex", "futex_wait"],
                ns,
            );
            s.span_id = span_id(n);
            s.trace_id = format!("{:032x}", n + 1);
            run.profiles.offcpu.stacks.push(s);
        }
    }
    run.otel_spans = Some(OtelSpans {
        source: "otel_thread_ctx_v1 in /srv/server (thread pointer -8)".into(),
        spans,
        ..Default::default()
    });
    let ex = explain(&run);
    let span = &ex.spans[0];
    assert_eq!(span.name, "OpenTelemetry spans");
    assert_eq!(span.count, 200);
    assert_eq!(
        (
            span.percentiles_ns.p50,
            span.percentiles_ns.p99,
            span.percentiles_ns.max
        ),
        (100_000, 5_100_000, 5_100_000)
    );
    assert_eq!((span.slow.count, span.typical.count), (2, 198));
    let lock = &span.slow.findings[0];
    assert_eq!(lock.finding.kind, Kind::Lock);
    assert_eq!(lock.finding.site, "lock_table");
    // 5 ms of their 5.1 ms, and all of their excess over the typical ones' 100 µs.
    assert!(
        (lock.finding.share - 5.0 / 5.1).abs() < 1e-9,
        "{}",
        lock.finding.share
    );
    assert!(
        (lock.excess_share - 1.0).abs() < 1e-9,
        "{}",
        lock.excess_share
    );
    assert_eq!(lock.what_if_p99_ns, 100_000);
    let typical = &span.typical.findings[0];
    assert_eq!(typical.finding.kind, Kind::Runqueue);
    assert!((typical.finding.share - 1.0).abs() < 1e-9);
    assert!(
        span.notes
            .iter()
            .any(|n| n.contains("with no probe per request")),
        "{:?}",
        span.notes
    );
    // The run itself is left as it was: the spans' stacks were added to a copy.
    assert!(run.profiles.span_stacks.is_empty());
    assert!(run.locks.spans.is_empty());
}
