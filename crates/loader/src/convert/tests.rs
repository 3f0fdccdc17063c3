//! The conversion from hand-built map contents: what the kernel side would have left in its
//! maps, and the exact rows a reading makes of it.

use std::collections::BTreeMap;

use switchyard_common::{
    ErrnoKey, FutexKey, FutexStats, HIST_BUCKETS, InFlight, OffCpuKey, OnCpuKey, RunqueueHolderKey,
    RunqueueHolderStats, SyscallStackKey, SyscallStats, ThreadStats, UserStack, WaitStats,
    WakeupKey, drops, unwind::COMPLETE,
};

use super::*;
use crate::{DropKind, GcKind, Span, read::Stacks, window::LastCut};

/// A task name as the kernel side keeps it: 16 bytes, NUL-padded, in two native words.
fn comm(name: &str) -> [u64; 2] {
    let mut bytes = [0u8; 16];
    bytes[..name.len()].copy_from_slice(name.as_bytes());
    [
        u64::from_ne_bytes(bytes[..8].try_into().unwrap()),
        u64::from_ne_bytes(bytes[8..].try_into().unwrap()),
    ]
}

/// A thread entry with nothing counted.
fn thread(tgid: u32) -> ThreadStats {
    // SAFETY: ThreadStats is plain integers; all-zero is a valid value.
    let mut t: ThreadStats = unsafe { std::mem::zeroed() };
    t.tgid = tgid;
    t.user_stack = -1;
    t.kernel_stack = -1;
    t
}

fn hist(buckets: &[(usize, u64)]) -> [u64; HIST_BUCKETS] {
    let mut h = [0; HIST_BUCKETS];
    for &(i, c) in buckets {
        h[i] = c;
    }
    h
}

fn syscall(
    count: u64,
    errors: u64,
    total_ns: u64,
    max_ns: u64,
    h: &[(usize, u64)],
) -> SyscallStats {
    SyscallStats {
        count,
        errors,
        timed: count,
        weighted: count,
        drawn: 0,
        total_ns,
        max_ns,
        hist: hist(h),
    }
}

fn wait(count: u64, total_ns: u64, max_ns: u64, timeouts: u64, eagain: u64) -> WaitStats {
    WaitStats {
        count,
        total_ns,
        max_ns,
        timeouts,
        eagain,
        hist: hist(&[(10, count)]),
    }
}

fn input(end: Option<u64>) -> Input<'static> {
    Input {
        target: 10,
        start: 0,
        end,
        bounds: None,
        stacks: true,
        spans: &[],
        measured: &[],
        gc_symbols: None,
    }
}

fn stack(frames: &[u64], complete: bool) -> UserStack {
    let mut s = UserStack {
        hash: 0,
        len: frames.len() as u64 | if complete { COMPLETE } else { 0 },
        frames: [0xdead; switchyard_common::unwind::MAX_FRAMES],
    };
    s.frames[..frames.len()].copy_from_slice(frames);
    s
}

#[test]
fn calls_timed_by_budget_and_by_draw_are_weighted() {
    let mut snap = Snapshot {
        syscalls: vec![vec![]; 1],
        ..Default::default()
    };
    // read: 100 calls; 20 timed within the budget (weight 1, 100 ns each), then 5 of the 80
    // beyond it drawn one in 16 (weight 16, 1,000 ns each).
    let mut h = [0u64; HIST_BUCKETS];
    h[6] = 20;
    h[9] = 5 * 16;
    snap.syscalls[0] = vec![SyscallStats {
        count: 100,
        errors: 0,
        timed: 25,
        weighted: 20 + 5 * 16,
        drawn: 5,
        total_ns: 20 * 100 + 5 * 16 * 1000,
        max_ns: 1000,
        hist: h,
    }];
    let c = collected(&snap, &input(None), None);
    let read = &c.syscalls[0];
    assert_eq!(
        (
            read.count,
            read.timed,
            read.drawn,
            read.total_ns,
            read.max_ns
        ),
        (100, Some(25), Some(5), 82_000, 1000)
    );
    // The histogram stands for every call: 20 short ones and 80 long.
    assert_eq!(read.latency.count(), 100);
}

#[test]
fn sampled_syscall_latency_estimates_the_total_from_the_timed_calls() {
    let sampled = |count, timed, total_ns, max_ns, h: &[(usize, u64)]| SyscallStats {
        timed,
        weighted: timed,
        ..syscall(count, 0, total_ns, max_ns, h)
    };
    let mut snap = Snapshot {
        syscalls: vec![vec![]; 232],
        ..Default::default()
    };
    // read (0): 100 calls on two CPUs, 10 of them timed, 300 ns on average.
    snap.syscalls[0] = vec![
        sampled(60, 6, 1800, 400, &[(8, 6)]),
        sampled(40, 4, 1200, 350, &[(8, 4)]),
    ];
    // write (1): 7 calls, none timed (`--syscall-latency 0`).
    snap.syscalls[1] = vec![sampled(7, 0, 0, 0, &[]), sampled(0, 0, 0, 0, &[])];
    // getppid (110): every call timed.
    snap.syscalls[110] = vec![syscall(3, 0, 30, 12, &[(3, 3)]), syscall(0, 0, 0, 0, &[])];
    // exit_group (231): counted at entry, never timed, in any mode.
    snap.syscalls[231] = vec![sampled(1, 0, 0, 0, &[]), sampled(0, 0, 0, 0, &[])];
    let c = collected(&snap, &input(None), None);
    let rows: Vec<_> = c
        .syscalls
        .iter()
        .map(|r| (r.name.as_str(), r.count, r.timed, r.total_ns, r.max_ns))
        .collect();
    assert_eq!(
        rows,
        [
            ("read", 100, Some(10), 30_000, 400),
            ("write", 7, Some(0), 0, 0),
            ("getppid", 3, None, 30, 12),
            ("exit_group", 1, None, 0, 0),
        ]
    );
    assert_eq!(c.syscalls[0].latency.buckets, [0, 0, 0, 0, 0, 0, 0, 0, 10]);
}

#[test]
fn syscalls_sum_every_cpu_and_carry_their_errnos_most_frequent_first() {
    let mut snap = Snapshot {
        syscalls: vec![
            // read (0): on two CPUs.
            vec![
                syscall(3, 1, 300, 200, &[(7, 2), (8, 1)]),
                syscall(2, 1, 50, 40, &[(5, 2)]),
            ],
            // write (1): never called, no row.
            vec![syscall(0, 0, 0, 0, &[]), syscall(0, 0, 0, 0, &[])],
            // open (2).
            vec![syscall(2, 2, 70, 60, &[(5, 1)]), syscall(0, 0, 0, 0, &[])],
        ],
        ..Default::default()
    };
    snap.errnos = vec![
        (ErrnoKey { nr: 0, errno: 4 }, vec![1, 0]),
        (ErrnoKey { nr: 0, errno: 11 }, vec![1, 1]),
        // Counted nowhere: no entry.
        (ErrnoKey { nr: 0, errno: 9 }, vec![0, 0]),
        // A tie: the lower errno first.
        (ErrnoKey { nr: 2, errno: 13 }, vec![1, 0]),
        (ErrnoKey { nr: 2, errno: 2 }, vec![0, 1]),
    ];
    let c = collected(&snap, &input(None), None);
    let rows: Vec<_> = c
        .syscalls
        .iter()
        .map(|r| {
            (
                r.nr,
                r.name.as_str(),
                r.count,
                r.errors,
                r.total_ns,
                r.max_ns,
                r.latency.buckets.clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (0, "read", 5, 2, 350, 200, vec![0, 0, 0, 0, 0, 2, 0, 2, 1]),
            (2, "open", 2, 2, 70, 60, vec![0, 0, 0, 0, 0, 1]),
        ]
    );
    let errnos = |i: usize| -> Vec<(u32, String, u64)> {
        c.syscalls[i]
            .errnos
            .iter()
            .map(|e| (e.errno, e.name.clone(), e.count))
            .collect()
    };
    assert_eq!(
        errnos(0),
        [(11, "EAGAIN".to_string(), 2), (4, "EINTR".to_string(), 1)]
    );
    assert_eq!(
        errnos(1),
        [(2, "ENOENT".to_string(), 1), (13, "EACCES".to_string(), 1)]
    );
}

/// Five threads of the target, one of another process, one that never switched.
fn threads_snapshot() -> Snapshot {
    // On CPU since 1000.
    let mut on = thread(10);
    on.voluntary = 2;
    on.oncpu_ns = 100;
    on.last_out = 500;
    on.last_in = 1000;
    on.comm = comm("stale-name");
    on.offcpu_hist = hist(&[(1, 3)]);
    // Preempted at 1200: waiting for a CPU since.
    let mut preempted = thread(10);
    preempted.involuntary = 1;
    preempted.runqueue_ns = 50;
    preempted.last_in = 100;
    preempted.last_out = 1200;
    preempted.last_out_involuntary = 1;
    preempted.comm = comm("worker");
    preempted.delay_hist = hist(&[(4, 1)]);
    // Blocked at 1000, woken at 1300: blocked up to the wakeup, waiting for a CPU since.
    let mut woken = thread(10);
    woken.voluntary = 1;
    woken.blocked_ns = 10;
    woken.runqueue_after_wakeup_ns = 5;
    woken.runqueue_ns = 5;
    woken.last_in = 400;
    woken.last_out = 1000;
    woken.wakeup_at = 1300;
    woken.comm = comm("waiter");
    // Blocked at 1100, not woken: blocked to the end.
    let mut asleep = thread(10);
    asleep.voluntary = 4;
    asleep.blocked_ns = 1;
    asleep.last_in = 900;
    asleep.last_out = 1100;
    asleep.comm = comm("sleeper");
    // Gone at 800: its last switch-out was its exit, nothing is added after it.
    let mut gone = thread(10);
    gone.voluntary = 3;
    gone.oncpu_ns = 70;
    gone.blocked_ns = 20;
    gone.last_in = 700;
    gone.last_out = 800;
    gone.state = switchyard_common::tp::STATE_DEAD as u32;
    gone.comm = comm("gone");
    // Another process's thread (a followed child): sorted after the target's.
    let mut child = thread(20);
    child.involuntary = 1;
    child.oncpu_ns = 7;
    child.last_in = 10;
    child.last_out = 20;
    child.last_out_involuntary = 1;
    child.comm = comm("child");
    // Made at the start, never switched: no row.
    let idle = thread(10);
    let mut comms = BTreeMap::new();
    comms.insert(11, "live-name".to_string());
    Snapshot {
        threads: vec![
            (5, child),
            (14, asleep),
            (11, on),
            (16, idle),
            (13, woken),
            (15, gone),
            (12, preempted),
        ],
        comms,
        ..Default::default()
    }
}

type Times = (u32, u32, String, u64, u64, u64, u64, u64, u64);

fn times(c: &Collected) -> Vec<Times> {
    c.threads
        .iter()
        .map(|t| {
            (
                t.tgid,
                t.tid,
                t.comm.clone(),
                t.voluntary,
                t.involuntary,
                t.oncpu_ns,
                t.blocked_ns,
                t.runqueue_ns,
                t.runqueue_after_wakeup_ns,
            )
        })
        .collect()
}

fn row(t: (u32, u32, &str, u64, u64, u64, u64, u64, u64)) -> Times {
    (t.0, t.1, t.2.to_string(), t.3, t.4, t.5, t.6, t.7, t.8)
}

#[test]
fn threads_close_the_interval_in_progress_at_the_end() {
    let c = collected(&threads_snapshot(), &input(Some(1500)), None);
    assert_eq!(
        times(&c),
        [
            // On CPU 1000..1500 added to its 100.
            row((10, 11, "live-name", 2, 0, 600, 0, 0, 0)),
            // Runnable 1200..1500: run queue, not a wakeup's wait.
            row((10, 12, "worker", 0, 1, 0, 0, 350, 0)),
            // Blocked 1000..1300, then waiting 1300..1500 after its wakeup.
            row((10, 13, "waiter", 1, 0, 0, 310, 205, 205)),
            // Blocked 1100..1500.
            row((10, 14, "sleeper", 4, 0, 0, 401, 0, 0)),
            // Exited: what it counted, nothing after its exit.
            row((10, 15, "gone", 3, 0, 70, 20, 0, 0)),
            // Preempted at 20: waiting for a CPU 20..1500.
            row((20, 5, "child", 0, 1, 7, 0, 1480, 0)),
        ]
    );
    // Histograms lose their trailing empty buckets.
    assert_eq!(c.threads[0].offcpu.buckets, [0, 3]);
    assert!(c.threads[0].runqueue_waits.buckets.is_empty());
    assert_eq!(c.threads[1].runqueue_waits.buckets, [0, 0, 0, 0, 1]);
}

#[test]
fn without_an_end_the_interval_in_progress_is_left_out() {
    let c = collected(&threads_snapshot(), &input(None), None);
    assert_eq!(
        times(&c),
        [
            row((10, 11, "live-name", 2, 0, 100, 0, 0, 0)),
            row((10, 12, "worker", 0, 1, 0, 0, 50, 0)),
            row((10, 13, "waiter", 1, 0, 0, 10, 5, 5)),
            row((10, 14, "sleeper", 4, 0, 0, 1, 0, 0)),
            row((10, 15, "gone", 3, 0, 70, 20, 0, 0)),
            row((20, 5, "child", 0, 1, 7, 0, 0, 0)),
        ]
    );
}

#[test]
fn a_window_reports_what_its_cut_added_and_notes_exited_threads() {
    let mut windows = LastCut::default();
    let mut snap = threads_snapshot();
    let first = collected(&snap, &input(Some(1500)), Some(&mut windows));
    assert_eq!(first.threads.len(), 6);
    assert_eq!(windows.exited, [15]);
    windows.exited.clear();

    // By the next cut at 2000: the on-CPU thread went off at 1800 and the sleeper ran once;
    // nothing else switched.
    for (tid, t) in &mut snap.threads {
        match tid {
            11 => {
                t.voluntary += 1;
                t.oncpu_ns += 800;
                t.last_out = 1800;
            }
            14 => {
                t.voluntary += 1;
                t.blocked_ns += 500;
                t.oncpu_ns += 100;
                t.last_in = 1600;
                t.last_out = 1700;
            }
            _ => {}
        }
    }
    let second = collected(&snap, &input(Some(2000)), Some(&mut windows));
    assert_eq!(
        times(&second),
        [
            // 900 on CPU in all (100, then 1000..1800) less the 600 already reported;
            // blocked 1800..2000.
            row((10, 11, "live-name", 1, 0, 300, 200, 0, 0)),
            // Still waiting: 1500..2000 added to the run queue.
            row((10, 12, "worker", 0, 0, 0, 0, 500, 0)),
            // Still waiting after its wakeup: 500 more.
            row((10, 13, "waiter", 0, 0, 0, 0, 500, 500)),
            // Blocked 1 + 1100..1600 + 1700..2000 = 801 in all, 401 already reported; ran 100.
            row((10, 14, "sleeper", 1, 0, 100, 400, 0, 0)),
            row((20, 5, "child", 0, 0, 0, 0, 500, 0)),
        ]
    );
    // The exited thread added nothing: no row, and it is noted again for eviction.
    assert_eq!(windows.exited, [15]);
}

#[test]
fn a_window_reports_the_syscalls_its_cut_added() {
    let mut windows = LastCut::default();
    let mut snap = Snapshot {
        syscalls: vec![vec![syscall(2, 0, 20, 15, &[(3, 2)])]],
        errnos: vec![(ErrnoKey { nr: 0, errno: 11 }, vec![1])],
        ..Default::default()
    };
    let first = collected(&snap, &input(None), Some(&mut windows));
    assert_eq!(first.syscalls[0].count, 2);
    snap.syscalls = vec![vec![syscall(5, 1, 1020, 900, &[(3, 2), (9, 3)])]];
    snap.errnos = vec![(ErrnoKey { nr: 0, errno: 11 }, vec![4])];
    let second = collected(&snap, &input(None), Some(&mut windows));
    let r = &second.syscalls[0];
    assert_eq!((r.count, r.errors, r.total_ns, r.max_ns), (3, 1, 1000, 900));
    assert_eq!(r.latency.buckets, [0, 0, 0, 0, 0, 0, 0, 0, 0, 3]);
    assert_eq!(r.errnos[0].count, 3);
    // Nothing new: no row at all.
    let third = collected(&snap, &input(None), Some(&mut windows));
    assert!(third.syscalls.is_empty());
}

#[test]
fn cpu_holders_longest_first_with_their_nice() {
    let key = |tid, holder_tid, cpu| RunqueueHolderKey {
        tgid: 10,
        tid,
        holder_tgid: 99,
        holder_tid,
        cpu,
        _pad: 0,
    };
    let stats = |count, ns, name, prio| RunqueueHolderStats {
        count,
        ns,
        comm: comm(name),
        prio,
        _pad: 0,
    };
    let snap = Snapshot {
        runqueue_holders: vec![
            (key(11, 100, 0), stats(1, 100, "kworker/0:1", 120)),
            (key(12, 100, 1), stats(2, 300, "ffmpeg", 139)),
            (key(11, 101, 3), stats(4, 300, "rustc", 100)),
            (key(11, 100, 2), stats(0, 0, "never", 120)),
        ],
        ..Default::default()
    };
    let c = collected(&snap, &input(None), None);
    let rows: Vec<_> = c
        .runqueue_holders
        .iter()
        .map(|h| {
            (
                h.tid,
                h.holder_tid,
                h.cpu,
                h.holder_comm.as_str(),
                h.holder_nice,
                h.count,
                h.ns,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (11, 101, 3, "rustc", -20, 4, 300),
            (12, 100, 1, "ffmpeg", 19, 2, 300),
            (11, 100, 0, "kworker/0:1", 0, 1, 100),
        ]
    );
}

#[test]
fn inferred_switches_are_counted_but_not_shown_as_losses() {
    let mut by_index = vec![vec![0, 0]; drops::COUNT as usize];
    by_index[drops::THREADS_FULL as usize] = vec![2, 3];
    by_index[drops::SWITCH_IN_MISSED as usize] = vec![4, 0];
    by_index[drops::TIMELINE_FULL as usize] = vec![0, 1];
    let snap = Snapshot {
        drops: by_index,
        ..Default::default()
    };
    let c = collected(&snap, &input(None), None);
    let rows: Vec<_> = c
        .drops
        .iter()
        .map(|d| (d.reason.as_str(), d.count))
        .collect();
    assert_eq!(
        rows,
        [
            ("threads lost (thread spill map full)", 5),
            (
                "timeline events lost (ring buffer full; raise --timeline-buffer)",
                1
            ),
        ]
    );
    assert_eq!(
        c.drop_counts.into_iter().collect::<Vec<_>>(),
        [
            (DropKind::ThreadsFull, 5),
            (DropKind::SwitchInMissed, 4),
            (DropKind::TimelineFull, 1),
        ]
    );
}

#[test]
fn followed_children_exclude_the_target_and_sampling_sums_cpus() {
    let snap = Snapshot {
        targets: vec![30, 10, 20],
        sampling: vec![vec![5, 6], vec![1, 2]],
        ..Default::default()
    };
    let c = collected(&snap, &input(None), None);
    assert_eq!(c.children, [20, 30]);
    assert_eq!(c.offcpu_sampling, (11, 3));
}

#[test]
fn futexes_by_address_heaviest_first_with_one_sample_per_stack() {
    let key = |user_stack, uaddr| FutexKey {
        tgid: 10,
        user_stack,
        uaddr,
    };
    let snap = Snapshot {
        futexes: vec![
            (
                key(1, 0x1000),
                FutexStats {
                    count: 3,
                    total_ns: 300,
                },
            ),
            (
                key(2, 0x2000),
                FutexStats {
                    count: 5,
                    total_ns: 1000,
                },
            ),
            (
                key(3, 0x1000),
                FutexStats {
                    count: 1,
                    total_ns: 100,
                },
            ),
            (
                key(4, 0x3000),
                FutexStats {
                    count: 0,
                    total_ns: 0,
                },
            ),
        ],
        futex_waits: vec![wait(4, 400, 300, 1, 0), wait(5, 1000, 900, 0, 2)],
        ..Default::default()
    };
    let c = collected(&snap, &input(None), None);
    let top: Vec<_> = c
        .locks
        .futex_top
        .iter()
        .map(|f| (f.tgid, f.uaddr.as_str(), f.count, f.total_ns))
        .collect();
    assert_eq!(top, [(10, "0x2000", 5, 1000), (10, "0x1000", 4, 400)]);
    let samples: Vec<_> = c
        .raw
        .futex
        .iter()
        .map(|s| (s.user_stack, s.kernel_stack, s.label.as_str(), s.value))
        .collect();
    assert_eq!(
        samples,
        [
            (1, -1, "0x1000", 300),
            (2, -1, "0x2000", 1000),
            (3, -1, "0x1000", 100)
        ]
    );
    let f = &c.locks.futex;
    assert_eq!(
        (f.count, f.total_ns, f.max_ns, f.timeouts, f.eagain),
        (9, 1400, 900, 1, 2)
    );
    assert_eq!(f.hist.buckets.len(), 11);
    assert_eq!(f.hist.buckets[10], 9);
    // Contention tracepoints not attached: no figure rather than a zero one.
    assert!(c.locks.contention.is_none());
}

#[test]
fn spans_and_contention_are_summed_per_entry() {
    let spans = [
        Span {
            label: "flush".into(),
            symbol: "app::flush".into(),
            binary: "/usr/bin/app".into(),
            go: false,
        },
        Span {
            label: "parse".into(),
            symbol: "app::parse".into(),
            binary: "/usr/bin/app".into(),
            go: false,
        },
    ];
    let snap = Snapshot {
        lock_contention: Some(vec![wait(1, 10, 10, 1, 0), wait(2, 30, 20, 0, 0)]),
        spans: vec![vec![wait(2, 200, 150, 0, 0)], vec![wait(7, 70, 20, 0, 0)]],
        ..Default::default()
    };
    let c = collected(
        &snap,
        &Input {
            spans: &spans,
            measured: &[],
            ..input(None)
        },
        None,
    );
    let contention = c.locks.contention.unwrap();
    assert_eq!(
        (
            contention.count,
            contention.total_ns,
            contention.max_ns,
            contention.timeouts
        ),
        (3, 40, 20, 1)
    );
    let rows: Vec<_> = c
        .locks
        .spans
        .iter()
        .map(|s| {
            (
                s.label.as_str(),
                s.symbol.as_str(),
                s.binary.as_str(),
                s.stats.count,
                s.stats.total_ns,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("flush", "app::flush", "/usr/bin/app", 2, 200),
            ("parse", "app::parse", "/usr/bin/app", 7, 70),
        ]
    );
}

#[test]
fn stack_samples_carry_state_labels_wakers_and_syscall_names() {
    let off = |tid, state| OffCpuKey {
        tgid: 10,
        tid,
        user_stack: 1,
        kernel_stack: 2,
        state,
        _pad: 0,
    };
    let preempt = switchyard_common::tp::PREEMPT_FLAG as u32;
    let woken = switchyard_common::tp::WOKEN_FLAG as u32;
    let snap = Snapshot {
        oncpu: vec![
            (
                OnCpuKey {
                    tgid: 10,
                    tid: 11,
                    user_stack: 3,
                    kernel_stack: -1,
                },
                7,
            ),
            (
                OnCpuKey {
                    tgid: 10,
                    tid: 12,
                    user_stack: 4,
                    kernel_stack: -1,
                },
                0,
            ),
        ],
        offcpu: vec![
            (off(11, 1), 100),
            (off(12, 2), 200),
            (off(13, preempt), 300),
            (off(14, 1 | woken), 400),
            (off(15, 0x400), 500),
        ],
        wakeups: vec![(
            WakeupKey {
                tgid: 10,
                tid: 11,
                user_stack: 5,
                kernel_stack: 6,
                waker_user_stack: 7,
                waker_kernel_stack: 8,
                waker_tgid: 30,
                waker_tid: 31,
                waker_comm: comm("producer"),
            },
            900,
        )],
        syscall_stacks: vec![(
            SyscallStackKey {
                tgid: 10,
                tid: 12,
                nr: 202,
                user_stack: 9,
            },
            3,
        )],
        ..Default::default()
    };
    let c = collected(&snap, &input(None), None);
    let oncpu: Vec<_> = c
        .raw
        .oncpu
        .iter()
        .map(|s| (s.tid, s.user_stack, s.kernel_stack, s.value))
        .collect();
    assert_eq!(oncpu, [(11, 3, -1, 7)]);
    let labels: Vec<_> = c
        .raw
        .offcpu
        .iter()
        .map(|s| (s.tid, s.label.as_str(), s.value))
        .collect();
    assert_eq!(
        labels,
        [
            (11, "S", 100),
            (12, "D", 200),
            (13, "R", 300),
            (14, "W", 400),
            (15, "state 0x400", 500)
        ]
    );
    let w = &c.raw.wakeup[0];
    let waker = w.waker.as_ref().unwrap();
    assert_eq!(
        (w.tid, w.user_stack, w.kernel_stack, w.value),
        (11, 5, 6, 900)
    );
    assert_eq!(
        (
            waker.tgid,
            waker.tid,
            waker.comm.as_str(),
            waker.user_stack,
            waker.kernel_stack
        ),
        (30, 31, "producer", 7, 8)
    );
    let s = &c.raw.syscalls[0];
    assert_eq!(
        (
            s.tid,
            s.user_stack,
            s.kernel_stack,
            s.label.as_str(),
            s.value
        ),
        (12, 9, -1, "futex", 3)
    );
}

#[test]
fn go_gc_counts_every_kind_only_when_probed() {
    let mut counts = vec![vec![0, 0]; switchyard_common::gc::KINDS as usize];
    counts[GcKind::Start.index() as usize] = vec![2, 1];
    counts[GcKind::MarkTermination.index() as usize] = vec![0, 1];
    let snap = Snapshot {
        gc_counts: counts,
        ..Default::default()
    };
    assert!(collected(&snap, &input(None), None).gc.is_none());
    let symbols = [("runtime.gcStart".to_string(), true)];
    let c = collected(
        &snap,
        &Input {
            gc_symbols: Some(&symbols),
            ..input(None)
        },
        None,
    );
    let gc = c.gc.unwrap();
    assert_eq!(gc.symbols, symbols);
    assert_eq!(gc.count(GcKind::Start), 3);
    assert_eq!(gc.count(GcKind::MarkTermination), 1);
    assert_eq!(gc.count(GcKind::MarkAssist), 0);
    assert_eq!(gc.counts.len(), GcKind::ALL.len());
}

#[test]
fn stacks_are_cut_to_their_length_and_complete_ones_marked() {
    let stacks = Stacks {
        kernel: vec![(
            1 | switchyard_common::KERNEL_STACK_ID,
            stack(&[0xa, 0xb, 0xc], false),
        )],
        user: vec![(3, stack(&[1, 2], true)), (4, stack(&[5, 6, 7], false))],
    };
    let mut raw = Raw::default();
    stack_frames(&mut raw, &stacks, None);
    let kernel_id = 1 | switchyard_common::KERNEL_STACK_ID;
    assert_eq!(raw.stacks[&kernel_id], [0xa, 0xb, 0xc]);
    assert_eq!(raw.user_stacks[&3], [1, 2]);
    assert_eq!(raw.user_stacks[&4], [5, 6, 7]);
    assert_eq!(raw.complete_user_stacks.iter().collect::<Vec<_>>(), [&3]);
}

#[test]
fn a_window_reads_each_stack_once_and_keeps_its_frames() {
    let mut windows = LastCut::default();
    let sample = |user_stack, kernel_stack| RawSample {
        tgid: 10,
        tid: 11,
        user_stack,
        kernel_stack,
        value: 1,
        ..Default::default()
    };
    let mut raw = Raw::default();
    raw.oncpu.push(sample(3, 8));
    raw.oncpu.push(sample(-1, -1));
    let (user, kernel) = stacks_to_read(&raw, &windows);
    assert_eq!(
        (
            user.into_iter().collect::<Vec<_>>(),
            kernel.into_iter().collect::<Vec<_>>()
        ),
        (vec![3], vec![8])
    );
    let stacks = Stacks {
        kernel: vec![(8, stack(&[0xa], false))],
        // A stack no sample of this window refers to is kept, not reported.
        user: vec![(3, stack(&[1, 2], true)), (5, stack(&[9], false))],
    };
    stack_frames(&mut raw, &stacks, Some(&mut windows));
    assert_eq!(raw.user_stacks.len(), 1);
    assert_eq!(raw.user_stacks[&3], [1, 2]);
    assert_eq!(raw.stacks[&8], [0xa]);

    // The next window refers to the same stacks: nothing to read, the frames come from what
    // was kept.
    let mut next = Raw::default();
    next.offcpu.push(sample(3, 8));
    next.offcpu.push(sample(5, -1));
    let (user, kernel) = stacks_to_read(&next, &windows);
    assert!(user.is_empty() && kernel.is_empty());
    stack_frames(&mut next, &Stacks::default(), Some(&mut windows));
    assert_eq!(next.user_stacks[&3], [1, 2]);
    assert_eq!(next.user_stacks[&5], [9]);
    assert_eq!(next.stacks[&8], [0xa]);
    assert!(next.complete_user_stacks.contains(&3) && !next.complete_user_stacks.contains(&5));
}

#[test]
fn state_labels() {
    let preempt = switchyard_common::tp::PREEMPT_FLAG as u32;
    let woken = switchyard_common::tp::WOKEN_FLAG as u32;
    let labels: Vec<String> = [0, preempt | 1, woken | 1, 1, 2, 4, 8, 0x80, 0x402]
        .into_iter()
        .map(|s| state_label(s, preempt).into())
        .collect();
    assert_eq!(
        labels,
        ["R", "R", "W", "S", "D", "T", "t", "I", "state 0x402"]
    );
}

/// The waits open at the stop, and threads that never switched, read with the bounds /proc
/// gave: each gets its state, its kernel stack and the user stack known for it, and its row.
#[test]
fn waits_open_at_the_bounds_have_their_state_stacks_and_rows() {
    use crate::bounds::{Bounds, TaskAt};
    let (start, end) = (1_000, 11_000);
    // Parked from before the start to after the stop: never switched.
    let mut parked = thread(10);
    parked.in_syscall = 1;
    parked.last_out = 1;
    parked.state = 1;
    // Ran, then blocked at 4000 in epoll_wait (nr 232), still waiting at the stop.
    let mut server = thread(10);
    server.voluntary = 3;
    server.oncpu_ns = 2_000;
    server.blocked_ns = 1_000;
    server.last_in = 3_000;
    server.last_out = 4_000;
    server.in_syscall = 1;
    server.state = 1;
    // Blocked at 6000 in a futex wait, woken at 10000, not yet run at the stop.
    let mut waiter = thread(10);
    waiter.voluntary = 1;
    waiter.last_in = 5_000;
    waiter.last_out = 6_000;
    waiter.wakeup_at = 10_000;
    waiter.in_syscall = 1;
    waiter.state = 1;
    // Runnable at the start and never switched: on CPU as schedstat moved.
    let mut spinner = thread(10);
    spinner.last_out_involuntary = 1;
    let inflight = |nr: u64, futex: u32, user_stack: i32| InFlight {
        pid_tgid: 0,
        ts: 1,
        nr,
        uaddr: 0,
        user_stack,
        futex_wait: futex,
        offcpu_pending: 0,
        untimed_left: 0,
        weight: 1,
        budget_left: 0,
        budget_from: 0,
        budget_tick: 0,
    };
    let snap = Snapshot {
        threads: vec![(21, parked), (22, server), (23, waiter), (24, spinner)],
        inflight: BTreeMap::from([(22, inflight(232, 0, -1)), (23, inflight(202, 1, 9))]),
        // The server enters epoll_wait from one stack only.
        syscall_stacks: vec![(
            SyscallStackKey {
                tgid: 10,
                tid: 22,
                nr: 232,
                user_stack: 7,
            },
            4,
        )],
        ..Default::default()
    };
    let at = |state: char, exec_ns: u64, kernel_ips: Vec<u64>| TaskAt {
        tgid: 10,
        state,
        wchan: String::new(),
        kernel_ips,
        exec_ns,
        runqueue_ns: 0,
    };
    let bounds = Bounds {
        start: BTreeMap::from([(21, at('S', 50, vec![])), (24, at('R', 100, vec![]))]),
        end: BTreeMap::from([
            (21, at('S', 50, vec![0xa1, 0xa2])),
            (22, at('S', 0, vec![0xb1])),
            (23, at('R', 0, vec![])),
            (24, at('R', 9_100, vec![])),
        ]),
    };
    let c = collected(
        &snap,
        &Input {
            start,
            bounds: Some(&bounds),
            ..input(Some(end))
        },
        None,
    );
    let rows: Vec<(u32, u64, u64, u64)> = c
        .threads
        .iter()
        .map(|t| (t.tid, t.oncpu_ns, t.blocked_ns, t.runqueue_ns))
        .collect();
    assert_eq!(
        rows,
        vec![
            (21, 0, 10_000, 0),
            (22, 2_000, 1_000 + 7_000, 0),
            (23, 0, 4_000, 1_000),
            (24, 9_000, 1_000, 0),
        ]
    );
    // (tid, user stack, kernel frames, state, ns)
    type Sample<'a> = (u32, i32, Option<Vec<u64>>, &'a str, u64);
    let samples: Vec<Sample> = c
        .raw
        .offcpu
        .iter()
        .map(|s| {
            (
                s.tid,
                s.user_stack,
                c.raw.stacks.get(&s.kernel_stack).cloned(),
                s.label.as_str(),
                s.value,
            )
        })
        .collect();
    assert_eq!(
        samples,
        vec![
            // Open from start to stop, the kernel stack from /proc, no user stack to be had.
            (
                21,
                USER_STACK_OPEN_AT_STOP,
                Some(vec![0xa1, 0xa2]),
                "S",
                10_000
            ),
            // The one stack it enters epoll_wait from.
            (22, 7, Some(vec![0xb1]), "S", 7_000),
            // The futex wait's user stack from its entry; blocked to the wakeup, then woken.
            (23, 9, None, "S", 4_000),
            (23, 9, None, "W", 1_000),
        ]
    );
}
