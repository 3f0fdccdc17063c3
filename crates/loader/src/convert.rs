//! The kernel's map contents ([`Snapshot`], [`Stacks`]) as model rows. Pure: no maps, no
//! system calls, no clock; a continuous recording's [`LastCut`] says what earlier cuts already
//! reported.

use std::collections::BTreeMap;

use switchyard_common::{
    HIST_BUCKETS, NR_EXIT, NR_EXIT_GROUP, SyscallStats, ThreadStats, UserStack, WaitStats, maps,
    sampling, tp,
};
use switchyard_model::raw::{Raw, RawSample, RawWaker, USER_STACK_OPEN_AT_STOP};
use switchyard_model::{
    DropRow, ErrnoCount, FutexRow, Label, Locks, Log2Hist, RunqueueHolder, SpanRow, SyscallRow,
    ThreadRow, WaitSummary, errno_name, syscall_name,
};

use crate::{
    Collected, DropKind, GcCollected, GcKind, Span,
    bounds::Bounds,
    read::{PerCpu, Snapshot, Stacks},
    window::{Cumulative, LastCut, Seen, ThreadTimes},
};

/// What a reading needs besides the maps.
pub(crate) struct Input<'a> {
    /// The target's tgid: every other followed process is a child.
    pub target: u32,
    /// When the recording started (CLOCK_MONOTONIC ns; 0: unknown): nothing before it counts.
    pub start: u64,
    /// Where the intervals in progress end (CLOCK_MONOTONIC ns); `None` leaves them out.
    pub end: Option<u64>,
    /// The threads as /proc showed them at the start and at `end`, when `end` is the stop:
    /// the waits still open then get their state and kernel stack, and a thread that never
    /// switched its figures.
    pub bounds: Option<&'a Bounds>,
    /// Stacks were recorded.
    pub stacks: bool,
    /// The spans timed, in `SPAN_HIST` order.
    pub spans: &'a [Span],
    /// What each span measured one by one, in the same order.
    pub measured: &'a [crate::spans::Measured],
    /// The Go GC probes' symbols, when they are attached.
    pub gc_symbols: Option<&'a [(String, bool)]>,
}

/// Every row of a reading but the stacks' frames (see [`stack_frames`]) and the unwind
/// tables' figures. `windows`: a continuous recording's values at the last cut; the rows are
/// then what was added since, and `windows` moves on to this cut.
pub(crate) fn collected(
    snap: &Snapshot,
    input: &Input,
    mut windows: Option<&mut LastCut>,
) -> Collected {
    let syscalls = syscall_rows(snap, windows.as_deref_mut());
    let threads = thread_rows(snap, input, windows.as_deref_mut());
    let runqueue_holders = runqueue_holders(snap, windows.as_deref_mut());
    let (drops, drop_counts) = drops(snap, windows.as_deref_mut());
    let mut per = |i: u32| {
        let now = snap.sampling.get(i as usize).map_or(0, |v| v.iter().sum());
        added(windows.as_deref_mut().map(|w| &mut w.sampling), i, now)
    };
    let offcpu_sampling = (per(sampling::INTERVALS), per(sampling::WALKED));
    let mut children: Vec<u32> = snap
        .targets
        .iter()
        .copied()
        .filter(|&t| t != input.target)
        .collect();
    children.sort_unstable();
    let mut raw = samples(snap, windows.as_deref_mut());
    if windows.is_none() {
        open_waits(snap, input, &mut raw);
    }
    let mut locks = locks(snap, input.spans, &mut raw, windows.as_deref_mut());
    let mut span_stacks = std::collections::HashMap::new();
    for (row, m) in locks.spans.iter_mut().zip(input.measured) {
        row.anatomy = Some(span_anatomy(m, input.start, &mut raw, &mut span_stacks));
    }
    let gc = input.gc_symbols.map(|symbols| gc(snap, symbols, windows));
    Collected {
        syscalls,
        threads,
        runqueue_holders,
        drops,
        drop_counts,
        children,
        raw,
        locks,
        gc,
        unwind: None,
        offcpu_sampling,
        otel: None,
        probe_costs: None,
        program_times: None,
    }
}

/// Syscall rows in number order, each with its errnos (most frequent first).
fn syscall_rows(snap: &Snapshot, mut windows: Option<&mut LastCut>) -> Vec<SyscallRow> {
    // Errnos first, so each syscall row can carry its own.
    let mut errnos: BTreeMap<u32, Vec<ErrnoCount>> = BTreeMap::new();
    for (key, values) in &snap.errnos {
        let count = added(
            windows.as_deref_mut().map(|w| &mut w.errnos),
            *key,
            values.iter().sum(),
        );
        if count == 0 {
            continue;
        }
        errnos.entry(key.nr).or_default().push(ErrnoCount {
            errno: key.errno,
            name: errno_name(key.errno),
            count,
        });
    }
    let mut rows = Vec::new();
    for (nr, values) in snap.syscalls.iter().enumerate() {
        let nr = nr as u32;
        let sum = added(
            windows.as_deref_mut().map(|w| &mut w.syscalls),
            nr,
            sum_syscalls(values),
        );
        if sum.count == 0 {
            continue;
        }
        let mut errs = errnos.remove(&nr).unwrap_or_default();
        errs.sort_by(|a, b| b.count.cmp(&a.count).then(a.errno.cmp(&b.errno)));
        // `exit` and `exit_group` never return, so they are counted at entry and never
        // timed; any other call counted and not timed was left out by sampled timing.
        let never_returns = nr == NR_EXIT || nr == NR_EXIT_GROUP;
        let timed = (sum.timed != sum.count && !never_returns).then_some(sum.timed);
        // The weighted total over the weights' sum, times the calls: each timed call stands
        // for 1 over its chance of being timed.
        let total_ns = match timed {
            Some(0) => 0,
            Some(_) if sum.weighted > 0 => {
                (sum.total_ns as u128 * sum.count as u128 / sum.weighted as u128) as u64
            }
            Some(_) => 0,
            None => sum.total_ns,
        };
        rows.push(SyscallRow {
            nr,
            name: syscall_name(nr),
            count: sum.count,
            errors: sum.errors,
            errnos: errs,
            total_ns,
            max_ns: sum.max_ns,
            latency: Log2Hist::from_buckets(&sum.hist),
            timed,
            drawn: timed.map(|_| sum.drawn),
        });
    }
    rows
}

fn sum_syscalls(values: &PerCpu<SyscallStats>) -> SyscallStats {
    let mut sum = SyscallStats::ZERO;
    for v in values {
        sum.count += v.count;
        sum.errors += v.errors;
        sum.timed += v.timed;
        sum.weighted += v.weighted;
        sum.drawn += v.drawn;
        sum.total_ns += v.total_ns;
        sum.max_ns = sum.max_ns.max(v.max_ns);
        for (a, b) in sum.hist.iter_mut().zip(v.hist.iter()) {
            *a += b;
        }
    }
    sum
}

/// True when a thread's last switch-out was its exit (state dead or zombie): it is gone, not
/// off CPU.
fn exited(t: &ThreadStats) -> bool {
    t.state as i64 & (tp::STATE_DEAD | tp::STATE_ZOMBIE) != 0
}

/// A thread's figures, with the interval in progress at `end` (on CPU since its last
/// switch-in, or off since its last switch-out, and never before `start`) counted up to `end`.
fn thread_times(t: &ThreadStats, start: u64, end: Option<u64>) -> ThreadTimes {
    let (mut oncpu, mut blocked, mut runqueue) = (t.oncpu_ns, t.blocked_ns, t.runqueue_ns);
    let mut woken_wait = t.runqueue_after_wakeup_ns;
    if let Some(end) = end {
        if t.last_in > t.last_out {
            oncpu += end.saturating_sub(t.last_in.max(start));
        } else if t.last_out_involuntary != 0 {
            runqueue += end.saturating_sub(t.last_out.max(start));
        } else if !exited(t) {
            // Woken and not yet run: blocked up to the wakeup, waiting since.
            let out = t.last_out.max(start);
            let woke = t.wakeup_at.clamp(out, end.max(out));
            let woke = if t.wakeup_at == 0 { end } else { woke };
            blocked += woke.saturating_sub(out);
            runqueue += end.saturating_sub(woke);
            woken_wait += end.saturating_sub(woke);
        }
    }
    ThreadTimes {
        voluntary: t.voluntary,
        involuntary: t.involuntary,
        oncpu_ns: oncpu,
        blocked_ns: blocked,
        runqueue_ns: runqueue,
        runqueue_after_wakeup_ns: woken_wait,
        offcpu_hist: t.offcpu_hist,
        delay_hist: t.delay_hist,
    }
}

/// A thread that never switched, from start to `end`, by the scheduler's own clocks at both
/// bounds: on CPU and runnable as `schedstat` moved, blocked the rest (it slept throughout,
/// or ran or waited for a CPU without a switch). `None` when /proc did not show it at both.
fn unswitched_times(tid: u32, start: u64, end: u64, bounds: &Bounds) -> Option<ThreadTimes> {
    let (a, b) = (bounds.start.get(&tid)?, bounds.end.get(&tid)?);
    let window = end.saturating_sub(start);
    let oncpu = b.exec_ns.saturating_sub(a.exec_ns).min(window);
    let runqueue = b
        .runqueue_ns
        .saturating_sub(a.runqueue_ns)
        .min(window - oncpu);
    Some(ThreadTimes {
        voluntary: 0,
        involuntary: 0,
        oncpu_ns: oncpu,
        blocked_ns: window - oncpu - runqueue,
        runqueue_ns: runqueue,
        runqueue_after_wakeup_ns: 0,
        offcpu_hist: [0; HIST_BUCKETS],
        delay_hist: [0; HIST_BUCKETS],
    })
}

/// Thread rows by (tgid, tid); threads that added nothing to this window are left out, and,
/// without the bounds from /proc, threads that never switched. A window's exited threads are
/// noted for eviction.
fn thread_rows(
    snap: &Snapshot,
    input: &Input,
    mut windows: Option<&mut LastCut>,
) -> Vec<ThreadRow> {
    let mut threads = Vec::new();
    for (tid, t) in &snap.threads {
        let tid = *tid;
        let unswitched = t.voluntary + t.involuntary == 0 && t.last_in == 0;
        let times = match (input.bounds, input.end) {
            (Some(b), Some(end)) if unswitched => {
                match unswitched_times(tid, input.start, end, b) {
                    Some(times) => times,
                    None => continue,
                }
            }
            // Entries made at the start or at a thread's creation, for a thread that never
            // switched: nothing was counted.
            _ if unswitched => continue,
            _ => thread_times(t, input.start, input.end),
        };
        let times = match windows.as_deref_mut() {
            Some(w) => {
                if exited(t) {
                    w.exited.push(tid);
                }
                w.threads.take(tid, times)
            }
            None => times,
        };
        if times.is_zero() {
            continue;
        }
        threads.push(ThreadRow {
            tid,
            tgid: t.tgid,
            // A live thread's name now: the kernel side reads it only now and then.
            comm: snap
                .comms
                .get(&tid)
                .cloned()
                .unwrap_or_else(|| comm_string(t.comm)),
            voluntary: times.voluntary,
            involuntary: times.involuntary,
            oncpu_ns: times.oncpu_ns,
            blocked_ns: times.blocked_ns,
            runqueue_ns: times.runqueue_ns,
            runqueue_after_wakeup_ns: times.runqueue_after_wakeup_ns,
            offcpu: Log2Hist::from_buckets(&times.offcpu_hist),
            runqueue_waits: Log2Hist::from_buckets(&times.delay_hist),
        });
    }
    threads.sort_by_key(|t| (t.tgid, t.tid));
    threads
}

/// The first id of the kernel stacks made from /proc (the kernel side's ids are far below).
const PROC_STACK_IDS: i32 = 1 << 30;

/// The user stack thread `tid` enters syscall `nr` from, when the syscall-entry samples show
/// it entering that call from one stack only (an event loop's wait); otherwise
/// `USER_STACK_OPEN_AT_STOP`.
fn entered_from(snap: &Snapshot, tid: u32, nr: u32) -> i32 {
    let mut stacks = snap
        .syscall_stacks
        .iter()
        .filter(|(k, _)| k.tid == tid && k.nr == nr && k.user_stack >= 0)
        .map(|(k, _)| k.user_stack);
    match (stacks.next(), stacks.next()) {
        (Some(one), None) => one,
        _ => USER_STACK_OPEN_AT_STOP,
    }
}

/// The off-CPU intervals still open at the stop, which the kernel side records only when
/// they end: each as a sample under the state it began in (blocked, then woken and waiting
/// for a CPU, or preempted), with the kernel stack /proc showed at the stop and the user
/// stack walked at its switch-out, if one was. A thread that never switched is one such
/// interval, from the start.
fn open_waits(snap: &Snapshot, input: &Input, raw: &mut Raw) {
    let (Some(bounds), Some(end), true) = (input.bounds, input.end, input.stacks) else {
        return;
    };
    let mut next_id = PROC_STACK_IDS;
    for (tid, t) in &snap.threads {
        let tid = *tid;
        let Some(at) = bounds.end.get(&tid) else {
            continue;
        };
        let unswitched = t.voluntary + t.involuntary == 0 && t.last_in == 0;
        // On CPU at the stop, gone, or runnable throughout with no switch (`schedstat` has
        // its time, and it has no wait).
        if exited(t) || (t.last_in > t.last_out && !unswitched) || (unswitched && at.state == 'R') {
            continue;
        }
        let out = t.last_out.max(input.start);
        if end <= out {
            continue;
        }
        // A walk at switch-out, outside a syscall, chosen with probability `sample_p`.
        let (user, p) = if t.in_syscall == 0 && !unswitched {
            if t.sample_p == 0 || t.user_stack < 0 {
                continue;
            }
            (t.user_stack, t.sample_p as u64)
        } else {
            // Inside a syscall: the length is known now, so the interval is taken whole. Its
            // user stack is walked at the syscall's exit, still to come; a futex wait's was
            // walked at its entry.
            let user = match snap.inflight.get(&tid) {
                Some(e) if e.futex_wait != 0 && e.user_stack >= 0 => e.user_stack,
                Some(e) => entered_from(snap, tid, e.nr as u32),
                None => USER_STACK_OPEN_AT_STOP,
            };
            (user, sampling::ONE)
        };
        let weight = |ns: u64| ns.saturating_mul(sampling::ONE) / p;
        let kernel = if at.kernel_ips.is_empty() {
            -1
        } else {
            let id = next_id;
            next_id += 1;
            raw.stacks.insert(id, at.kernel_ips.clone());
            id
        };
        let mut push = |state: u32, ns: u64| {
            if ns != 0 {
                raw.offcpu.push(RawSample {
                    tgid: t.tgid,
                    tid,
                    user_stack: user,
                    kernel_stack: kernel,
                    label: state_label(state, tp::PREEMPT_FLAG as u32),
                    value: weight(ns),
                    waker: None,
                    ..Default::default()
                });
            }
        };
        let preempted = t.last_out_involuntary != 0 && !unswitched;
        let state = if unswitched {
            bounds
                .start
                .get(&tid)
                .map_or(t.state, |a| crate::bounds::report_state(a.state))
        } else {
            t.state
        };
        if preempted {
            push(tp::PREEMPT_FLAG as u32, end - out);
            continue;
        }
        let woke = if t.wakeup_at == 0 {
            end
        } else {
            t.wakeup_at.clamp(out, end)
        };
        push(state, woke - out);
        push(state | tp::WOKEN_FLAG as u32, end - woke);
    }
}

/// Who held the CPU, longest first.
fn runqueue_holders(snap: &Snapshot, mut windows: Option<&mut LastCut>) -> Vec<RunqueueHolder> {
    let mut rows = Vec::new();
    for (k, v) in &snap.runqueue_holders {
        let v = added(
            windows.as_deref_mut().map(|w| &mut w.runqueue_holders),
            *k,
            *v,
        );
        if v.count == 0 {
            continue;
        }
        rows.push(RunqueueHolder {
            tgid: k.tgid,
            tid: k.tid,
            cpu: k.cpu,
            holder_tgid: k.holder_tgid,
            holder_tid: k.holder_tid,
            holder_comm: comm_string(v.comm),
            holder_nice: v.prio as i32 - 120,
            count: v.count,
            ns: v.ns,
        });
    }
    rows.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then((a.tid, a.holder_tid, a.cpu).cmp(&(b.tid, b.holder_tid, b.cpu)))
    });
    rows
}

/// Drop rows in index order (inferred switches are counted, not shown as losses).
fn drops(
    snap: &Snapshot,
    mut windows: Option<&mut LastCut>,
) -> (Vec<DropRow>, BTreeMap<DropKind, u64>) {
    let mut rows = Vec::new();
    let mut counts = BTreeMap::new();
    for (i, values) in snap.drops.iter().enumerate() {
        let count = added(
            windows.as_deref_mut().map(|w| &mut w.drops),
            i as u32,
            values.iter().sum(),
        );
        if count == 0 {
            continue;
        }
        let kind = DropKind::from_index(i as u32);
        if let Some(kind) = kind {
            counts.insert(kind, count);
        }
        // Not a loss: the run's metadata says how many switches were inferred.
        if matches!(
            kind,
            Some(DropKind::SwitchInMissed | DropKind::SwitchOutMissed)
        ) {
            continue;
        }
        rows.push(DropRow {
            reason: kind.map_or("unknown", DropKind::reason).to_string(),
            count,
        });
    }
    (rows, counts)
}

/// The stack-keyed samples, in map order (the frames come later, from [`stack_frames`]).
fn samples(snap: &Snapshot, mut windows: Option<&mut LastCut>) -> Raw {
    let mut raw = Raw::default();
    for (k, v) in &snap.oncpu {
        let v = added(windows.as_deref_mut().map(|w| &mut w.oncpu), *k, *v);
        if v == 0 {
            continue;
        }
        raw.oncpu.push(RawSample {
            tgid: k.tgid,
            tid: k.tid,
            user_stack: k.user_stack,
            kernel_stack: k.kernel_stack,
            value: v,
            ..Default::default()
        });
    }
    for (k, v) in &snap.offcpu {
        let v = added(windows.as_deref_mut().map(|w| &mut w.offcpu), *k, *v);
        if v == 0 {
            continue;
        }
        raw.offcpu.push(RawSample {
            tgid: k.tgid,
            tid: k.tid,
            user_stack: k.user_stack,
            kernel_stack: k.kernel_stack,
            label: state_label(k.state, tp::PREEMPT_FLAG as u32),
            value: v,
            waker: None,
            ..Default::default()
        });
    }
    for (k, v) in &snap.wakeups {
        let v = added(windows.as_deref_mut().map(|w| &mut w.wakeups), *k, *v);
        if v == 0 {
            continue;
        }
        raw.wakeup.push(RawSample {
            tgid: k.tgid,
            tid: k.tid,
            user_stack: k.user_stack,
            kernel_stack: k.kernel_stack,
            label: Label::Empty,
            value: v,
            waker: Some(RawWaker {
                tgid: k.waker_tgid,
                tid: k.waker_tid,
                comm: comm_string(k.waker_comm),
                user_stack: k.waker_user_stack,
                kernel_stack: k.waker_kernel_stack,
            }),
            ..Default::default()
        });
    }
    // The waker's interval in the waker's place: the thread woken, by what its waker did.
    for (k, v) in &snap.held {
        let v = added(windows.as_deref_mut().map(|w| &mut w.held), *k, *v);
        if v == 0 {
            continue;
        }
        let running = k.state == switchyard_common::HELD_RUNNING;
        raw.held.push(RawSample {
            tgid: k.tgid,
            tid: k.tid,
            user_stack: -1,
            kernel_stack: -1,
            label: if running {
                Label::Running
            } else {
                state_label(k.state, tp::PREEMPT_FLAG as u32)
            },
            value: v,
            waker: Some(RawWaker {
                tgid: k.holder_tgid,
                tid: k.holder_tid,
                comm: String::new(),
                user_stack: k.user_stack,
                kernel_stack: k.kernel_stack,
            }),
            ..Default::default()
        });
    }
    for (k, v) in &snap.syscall_stacks {
        let v = added(
            windows.as_deref_mut().map(|w| &mut w.syscall_stacks),
            *k,
            *v,
        );
        if v == 0 {
            continue;
        }
        raw.syscalls.push(RawSample {
            tgid: k.tgid,
            tid: k.tid,
            user_stack: k.user_stack,
            kernel_stack: -1,
            label: Label::Name(syscall_name(k.nr)),
            value: v,
            waker: None,
            ..Default::default()
        });
    }
    raw
}

/// Futex waits, kernel lock contention and spans; futex stacks go into `raw.futex`.
fn locks(
    snap: &Snapshot,
    spans: &[Span],
    raw: &mut Raw,
    mut windows: Option<&mut LastCut>,
) -> Locks {
    let mut wait = |name: &'static str, index: u32, values: &PerCpu<WaitStats>| {
        wait_summary(
            windows.as_deref_mut().map(|w| &mut w.waits),
            (name, index),
            values,
        )
    };
    let mut locks = Locks {
        futex: wait(maps::FUTEX_WAITS, 0, &snap.futex_waits),
        contention: snap
            .lock_contention
            .as_ref()
            .map(|v| wait(maps::LOCK_CONTENTION, 0, v)),
        ..Default::default()
    };
    let empty = Vec::new();
    for (i, span) in spans.iter().enumerate() {
        let values = snap.spans.get(i).unwrap_or(&empty);
        locks.spans.push(SpanRow {
            stats: wait(maps::SPAN_HIST, i as u32, values),
            label: span.label.clone(),
            symbol: span.symbol.clone(),
            binary: span.binary.display().to_string(),
            anatomy: None,
        });
    }
    let mut by_addr: BTreeMap<(u32, u64), (u64, u64)> = BTreeMap::new();
    for (k, v) in &snap.futexes {
        let v = added(windows.as_deref_mut().map(|w| &mut w.futexes), *k, *v);
        if v.is_zero() {
            continue;
        }
        let e = by_addr.entry((k.tgid, k.uaddr)).or_default();
        e.0 += v.count;
        e.1 += v.total_ns;
        raw.futex.push(RawSample {
            tgid: k.tgid,
            tid: k.tgid,
            user_stack: k.user_stack,
            kernel_stack: -1,
            label: Label::Name(format!("{:#x}", k.uaddr)),
            value: v.total_ns,
            waker: None,
            ..Default::default()
        });
    }
    locks.futex_top = by_addr
        .into_iter()
        .map(|((tgid, uaddr), (count, total_ns))| FutexRow {
            tgid,
            uaddr: format!("{uaddr:#x}"),
            symbol: None,
            count,
            total_ns,
        })
        .collect();
    locks
        .futex_top
        .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(b.count.cmp(&a.count)));
    locks
}

/// One wait statistic, summed over CPUs.
fn wait_summary(
    seen: Option<&mut Seen<(&'static str, u32), WaitStats>>,
    key: (&'static str, u32),
    values: &PerCpu<WaitStats>,
) -> WaitSummary {
    let mut sum = WaitStats::ZERO;
    for v in values {
        sum.count += v.count;
        sum.total_ns += v.total_ns;
        sum.max_ns = sum.max_ns.max(v.max_ns);
        sum.timeouts += v.timeouts;
        sum.eagain += v.eagain;
        for (a, b) in sum.hist.iter_mut().zip(v.hist.iter()) {
            *a += b;
        }
    }
    let v = added(seen, key, sum);
    WaitSummary {
        count: v.count,
        total_ns: v.total_ns,
        max_ns: v.max_ns,
        timeouts: v.timeouts,
        eagain: v.eagain,
        hist: Log2Hist::from_buckets(&v.hist),
    }
}

/// Go GC events by kind.
fn gc(
    snap: &Snapshot,
    symbols: &[(String, bool)],
    mut windows: Option<&mut LastCut>,
) -> GcCollected {
    let mut counts = BTreeMap::new();
    for kind in GcKind::ALL {
        let now = snap
            .gc_counts
            .get(kind.index() as usize)
            .map_or(0, |v| v.iter().sum());
        let seen = windows.as_deref_mut().map(|w| &mut w.gc);
        counts.insert(kind, added(seen, kind.index(), now));
    }
    GcCollected {
        symbols: symbols.to_vec(),
        counts,
    }
}

/// The stack ids a window's samples refer to whose frames are not kept yet: (user, kernel).
pub(crate) fn stacks_to_read(
    raw: &Raw,
    windows: &LastCut,
) -> (
    std::collections::HashSet<i32>,
    std::collections::HashSet<i32>,
) {
    let (mut user, mut kernel) = raw.referenced();
    user.retain(|id| *id >= 0 && !windows.user_frames.contains_key(id));
    kernel.retain(|id| *id >= 0 && !windows.kernel_frames.contains_key(id));
    (user, kernel)
}

/// The frames of the stacks into `raw`: every stack read, for a recording read once; for a
/// window, those its samples refer to, from `stacks` (the ones [`stacks_to_read`] named) and
/// from the frames kept from earlier windows (a stack id is a hash of its frames, written
/// once: it never changes while it exists).
pub(crate) fn stack_frames(raw: &mut Raw, stacks: &Stacks, windows: Option<&mut LastCut>) {
    let Some(w) = windows else {
        for (id, s) in &stacks.kernel {
            raw.stacks.insert(*id, frames(s).0);
        }
        for (id, s) in &stacks.user {
            let (f, complete) = frames(s);
            raw.user_stacks.insert(*id, f);
            if complete {
                raw.complete_user_stacks.insert(*id);
            }
        }
        return;
    };
    for (id, s) in &stacks.kernel {
        w.kernel_frames.entry(*id).or_insert_with(|| frames(s).0);
    }
    for (id, s) in &stacks.user {
        w.user_frames.entry(*id).or_insert_with(|| frames(s));
    }
    let (user_ids, kernel_ids) = raw.referenced();
    for id in kernel_ids {
        if let Some(f) = w.kernel_frames.get(&id) {
            raw.stacks.insert(id, f.clone());
        }
    }
    for id in user_ids {
        if let Some((f, complete)) = w.user_frames.get(&id) {
            raw.user_stacks.insert(id, f.clone());
            if *complete {
                raw.complete_user_stacks.insert(id);
            }
        }
    }
}

/// A stack entry's frames, and whether the walk reached the outermost frame (user stacks
/// carry `unwind::COMPLETE` in their length; kernel stacks never have it set).
fn frames(s: &UserStack) -> (Vec<u64>, bool) {
    let complete = s.len & switchyard_common::unwind::COMPLETE != 0;
    let len = ((s.len & !switchyard_common::unwind::COMPLETE) as usize).min(s.frames.len());
    (s.frames[..len].to_vec(), complete)
}

/// What `key` added since the last cut of a continuous recording (`seen`), or all of `now`
/// in a recording that is read once.
fn added<K: std::hash::Hash + Eq + Copy, V: Cumulative>(
    seen: Option<&mut Seen<K, V>>,
    key: K,
    now: V,
) -> V {
    match seen {
        Some(s) => s.take(key, now),
        None => now,
    }
}

/// A task name kept as two native-endian words.
pub(crate) fn comm_string(words: [u64; 2]) -> String {
    let mut comm = [0u8; 16];
    comm[..8].copy_from_slice(&words[0].to_ne_bytes());
    comm[8..].copy_from_slice(&words[1].to_ne_bytes());
    let len = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..len]).into_owned()
}

/// An off-CPU state as the kernel reports `prev_state`; woken for the wait for a CPU after a
/// wakeup (runnable, woken: scheduler delay).
pub fn state_label(state: u32, preempt_flag: u32) -> Label {
    if state & tp::WOKEN_FLAG as u32 != 0 {
        return Label::Woken;
    }
    if state == 0 || state & preempt_flag != 0 {
        return Label::Preempted;
    }
    match state {
        1 => Label::Sleeping,
        2 => Label::Uninterruptible,
        4 => Label::Stopped,
        8 => Label::Traced,
        0x80 => Label::Idle,
        s => Label::Name(format!("state {s:#x}")),
    }
}

/// One span's anatomy for the run: its histogram, the instances kept (their stacks added to
/// `raw.span_stacks`, deduplicated through `stacks`), and what was left open or lost. `start`:
/// the recording's, CLOCK_MONOTONIC ns.
fn span_anatomy(
    input: &crate::spans::Measured,
    start: u64,
    raw: &mut Raw,
    stacks: &mut std::collections::HashMap<(u32, i32, i32), u32>,
) -> switchyard_model::SpanAnatomy {
    let mut stack = |tgid: u32, user: i32, kernel: i32| -> Option<u32> {
        if user < 0 && kernel < 0 {
            return None;
        }
        Some(*stacks.entry((tgid, user, kernel)).or_insert_with(|| {
            raw.span_stacks.push(RawSample {
                tgid,
                user_stack: user,
                kernel_stack: kernel,
                ..Default::default()
            });
            raw.span_stacks.len() as u32 - 1
        }))
    };
    let instances = input
        .kept
        .iter()
        .map(|i| {
            let mut blocked: Vec<switchyard_model::SpanWait> = i
                .parts
                .iter()
                .filter(|p| p.ns != 0)
                .map(|p| switchyard_model::SpanWait {
                    ns: p.ns,
                    count: p.count,
                    state: state_label(p.state, tp::PREEMPT_FLAG as u32),
                    stack: stack(i.tgid, p.user_stack, p.kernel_stack),
                    waker_tgid: p.waker_tgid,
                    waker_tid: p.waker_tid,
                    waker_stack: if p.waker_tid != 0 {
                        stack(p.waker_tgid, p.waker_user_stack, p.waker_kernel_stack)
                    } else {
                        None
                    },
                    held_ns: p.held_ns,
                    held_state: if p.held_ns != 0 {
                        state_label(p.held_state, tp::PREEMPT_FLAG as u32)
                    } else {
                        Label::Empty
                    },
                    held_stack: if p.held_ns != 0 {
                        stack(p.waker_tgid, p.held_user_stack, -1)
                    } else {
                        None
                    },
                })
                .collect();
            blocked.sort_by_key(|w| std::cmp::Reverse(w.ns));
            let mut cpu: Vec<switchyard_model::SpanCpuWait> = i
                .holders
                .iter()
                .filter(|h| h.ns != 0)
                .map(|h| switchyard_model::SpanCpuWait {
                    ns: h.ns,
                    tgid: h.tgid,
                    tid: h.tid,
                    comm: comm_string(h.comm),
                })
                .collect();
            cpu.sort_by_key(|c| std::cmp::Reverse(c.ns));
            let mut samples: Vec<switchyard_model::SpanSample> = i
                .sites
                .iter()
                .filter(|s| s.samples != 0)
                .map(|s| switchyard_model::SpanSample {
                    samples: s.samples,
                    stack: stack(i.tgid, s.user_stack, s.kernel_stack),
                })
                .collect();
            samples.sort_by_key(|s| std::cmp::Reverse(s.samples));
            switchyard_model::SpanInstance {
                tgid: i.tgid,
                tid: i.tid,
                start_ns: i.start.saturating_sub(start),
                duration_ns: i.end.saturating_sub(i.start),
                oncpu_ns: i.oncpu_ns,
                blocked_ns: i.blocked_ns,
                runqueue_ns: i.runqueue_ns,
                slow: i.flags & switchyard_common::span_flags::SLOW != 0,
                blocked,
                other_blocked_ns: i.other_blocked_ns,
                cpu,
                other_cpu_ns: i.other_held_ns,
                samples,
                go: i.flags & switchyard_common::span_flags::GO != 0,
                go_time: (i.flags & switchyard_common::span_flags::GO != 0)
                    .then(|| go_time(&i.go, &input.reasons, |u| stack(i.tgid, u, -1))),
                end_tid: if i.end_tid != i.tid { i.end_tid } else { 0 },
                gc_mark_ns: 0,
                gc_stw_ns: 0,
            }
        })
        .collect();
    switchyard_model::SpanAnatomy {
        count: input.hist.count,
        total_ns: input.hist.total_ns,
        hist: input.hist.sparse(),
        open_at_start: input.hist.open_at_start,
        nested: input.hist.nested,
        open_at_stop: input.open.0,
        never_returned: input.open.1,
        missed: input.hist.missed,
        dropped: input.dropped,
        threshold_ns: input.control.0,
        typical_every: input.control.1,
        instances,
    }
}

/// A Go instance's time on no thread, its parks named by the binary's wait reasons; `stack`
/// gives a user stack id its index in the run's span stacks.
fn go_time(
    t: &switchyard_common::GoTime,
    reasons: &[String],
    mut stack: impl FnMut(i32) -> Option<u32>,
) -> switchyard_model::GoTime {
    let mut parked: Vec<switchyard_model::GoParked> = Vec::new();
    for p in t.parked.iter().filter(|p| p.reason != 0 && p.ns != 0) {
        let reason = switchyard_runtimes::go::reasons::name(reasons, p.reason);
        // Two numbers can share a name (an unnamed one): one entry each name.
        let waker_stack = stack(p.waker_stack);
        let waker_tid = if waker_stack.is_some() {
            p.waker_tid
        } else {
            0
        };
        match parked.iter_mut().find(|q| q.reason == reason) {
            Some(q) => {
                q.ns += p.ns;
                q.count += p.count;
                if q.waker_stack.is_none() {
                    (q.waker_tid, q.waker_stack) = (waker_tid, waker_stack);
                }
            }
            None => parked.push(switchyard_model::GoParked {
                reason,
                count: p.count,
                ns: p.ns,
                stack: stack(p.user_stack),
                waker_tid,
                waker_stack,
            }),
        }
    }
    parked.sort_by_key(|p| std::cmp::Reverse(p.ns));
    switchyard_model::GoTime {
        sched_ns: t.sched_ns,
        parked,
        other_parked_ns: t.other_parked_ns,
        assist_ns: t.assist_ns,
        assist_runqueue_ns: t.assist_runqueue_ns,
    }
}

#[cfg(test)]
mod tests;
