//! `sched_switch`, as a BTF tracepoint (the kernel hands over `prev` and `next` directly, with
//! no trace record to fill): per-thread voluntary/involuntary switches, on/off-CPU time, and
//! the off-CPU stacks.
//!
//! The program runs on the CPU doing the switch, in the context of `prev`. A thread's
//! switch-out and its next switch-in are serialised by the scheduler, so the per-thread entry
//! is never written from two CPUs at once.
//!
//! **Off-CPU stacks are sampled.** An interval is walked with probability `p` and its time
//! added with weight `1/p`, so every interval's expected weight is its length whatever `p` is;
//! `p` only trades walks for variance. It is chosen as late as the stacks allow:
//! - A thread that goes off CPU inside a syscall the probes follow keeps its user registers
//!   until the syscall returns. The off-CPU profile's choice waits until the interval's
//!   length is known, at the switch-in, with `p = min(1, length / period)`: every interval of
//!   a period or more is walked, the short ones in proportion to their length. The wakeup
//!   profile chooses on its own at the wakeup (`wakeup`). The kernel stack is then walked from
//!   `next` (`bpf_get_task_stack`) and the user stack where the thread runs again: at the
//!   syscall's exit, or its next switch-out if it blocks again first.
//! - Any other interval (a preemption, a page fault) has its user stack only at switch-out,
//!   so the choice is made there, for both profiles, from a moving average of the thread's
//!   past such intervals.
//! - The probes' own walks, done only for chosen intervals, are left out of their weights.
//!
//! With `--offcpu-period 0`, `p` is 1: every interval is walked.

use core::ffi::c_void;

use aya_ebpf::{
    helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map},
    maps::{HashMap, PerCpuArray, ProgramArray},
    programs::BtfTracePointContext,
};
use switchyard_common::{
    HIST_BUCKETS, HeldKey, MAX_THREADS, OffCpuKey, RunqueueHolderKey, RunqueueHolderStats,
    ThreadStats, WakeupKey, drops, log2_bucket, sampling, timeline as tl, tp, unwind,
};

use crate::{
    inflight::{in_syscall, slot},
    otelctx,
    sampling::{count, draw, moving_average, sample_probability},
    shared::{current_comm, drop_event, is_target, start_ns},
    spans,
    stacks::{KEYS, add, blocked_kernel_stack, stacks_on, user_stack},
    task::task_ids,
    threads::{LAST_SWITCH, thread, thread_entry},
    timeline,
};

#[map]
static OFFCPU: HashMap<OffCpuKey, u64> = HashMap::with_max_entries(KEYS, 0);

#[map]
static WAKEUPS: HashMap<WakeupKey, u64> = HashMap::with_max_entries(KEYS, 0);

/// What each waker of a target thread did while it waited (see `HeldKey`).
#[map]
pub static HELD: HashMap<HeldKey, u64> = HashMap::with_max_entries(KEYS, 0);

/// Who held the CPU while a target thread waited for one, by waiter, holder and CPU.
#[map]
static RUNQUEUE_HOLDERS: HashMap<RunqueueHolderKey, RunqueueHolderStats> =
    HashMap::with_max_entries(MAX_THREADS, 0);

/// The user-stack walk of a switch-out, in programs of their own, reached by tail calls only
/// when a walk is due: 0, `sched_switch_walk`; 1, `sched_switch_finish`. Each is verified
/// apart: code after a walk would be verified once for every way the walk can end.
#[map]
static SWITCH_JUMP: ProgramArray = ProgramArray::with_max_entries(2, 0);

/// A walked user stack's id, handed from a walk program to the next, per CPU and scratch slot.
#[map]
pub static WALKED: PerCpuArray<i32> = PerCpuArray::with_max_entries(unwind::SLOTS, 0);

/// Walks the current task's user stack into `WALKED[slot]`, then tail-calls `jump[1]`.
#[inline(always)]
pub fn walk_then_finish<C: aya_ebpf::EbpfContext>(ctx: &C, slot: u32, jump: &ProgramArray) {
    let user = user_stack(ctx, slot, true);
    if let Some(w) = WALKED.get_ptr_mut(slot) {
        // SAFETY: a per-CPU slot.
        unsafe {
            *w = user;
            jump.tail_call(ctx, 1);
        }
    }
}

/// The user stack `walk_then_finish` left in `WALKED[slot]`.
#[inline(always)]
pub fn walked(slot: u32) -> i32 {
    WALKED.get(slot).copied().unwrap_or(-1)
}

/// What a switch-out hands to `sched_switch_walk`, per CPU.
#[repr(C)]
#[derive(Clone, Copy)]
struct Interval {
    now: u64,
    pid_tgid: u64,
    state: u32,
    involuntary: u32,
    in_syscall: u32,
    sample_p: u32,
    /// 1 when an earlier interval's stacks wait for the user stack taken now.
    flush: u32,
    _pad: u32,
}

#[map]
static SWITCH_OUT: PerCpuArray<Interval> = PerCpuArray::with_max_entries(1, 0);

/// Set by the loader before load.
#[unsafe(no_mangle)]
static MIN_BLOCK_NS: u64 = 0;
#[unsafe(no_mangle)]
static TASK_PRIO_OFFSET: u32 = 0;

/// `task_struct::__state` bits (include/linux/sched.h).
const TASK_DEAD: u32 = 0x80;
const TASK_IDLE: u32 = 0x402;
const TASK_RTLOCK_WAIT: u32 = 0x1000;
/// The bits `sched_switch`'s trace event reports (TASK_REPORT), and its "idle" report.
const TASK_REPORT: u32 = 0x7f;
const REPORT_IDLE: u32 = 0x80;

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch(ctx: BtfTracePointContext) -> i32 {
    try_sched_switch(&ctx);
    0
}

#[inline(always)]
fn try_sched_switch(ctx: &BtfTracePointContext) {
    // Times count from the recording's start: before it, intervals would begin before the
    // window they are reported in.
    // 0: not started yet; u64::MAX: stopped.
    let start = start_ns();
    if start == 0 || start == u64::MAX {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    // This CPU's previous reported switch; from now on, this one.
    let last_switch = match LAST_SWITCH.get_ptr_mut(0) {
        // SAFETY: the per-CPU slot; switches on one CPU do not run concurrently.
        Some(slot) => unsafe { core::mem::replace(&mut *slot, now) },
        None => 0,
    };
    // sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
    //              unsigned int prev_state)
    let next: *mut c_void = ctx.arg(2);
    let prev: *mut c_void = ctx.arg(1);
    let (next_pid, next_tgid) = task_ids(next);
    // `prev` is the current task: read as `next` is, with no helper call.
    let (prev_pid, prev_tgid) = task_ids(prev);
    let pid_tgid = (prev_tgid as u64) << 32 | prev_pid as u64;
    if next_pid != 0 && is_target(next_tgid) {
        switch_in(next, prev, pid_tgid, next_tgid, next_pid, now, start);
    }
    // Last: it may end in a tail call.
    if is_target(prev_tgid) {
        let preempt: u64 = ctx.arg(0);
        let prev_state: u64 = ctx.arg(3);
        switch_out(
            ctx,
            now,
            start,
            last_switch,
            pid_tgid,
            preempt & 0xff != 0,
            prev_state as u32,
        );
    }
}

/// Thread `tid` of `tgid` runs again, taking the CPU from `prev`: the interval it was off CPU
/// for.
#[inline(always)]
fn switch_in(
    next: *mut c_void,
    prev: *mut c_void,
    prev_id: u64,
    tgid: u32,
    tid: u32,
    now: u64,
    start: u64,
) {
    let Some(t) = thread(tid) else {
        return;
    };
    // SAFETY: this thread's entry is only touched by its own switches (see above).
    let t = unsafe { &mut *t };
    // Switched in again with no switch-out reported since its last switch-in (see
    // `LAST_SWITCH`): it left the CPU at once, still runnable, as far as anything can tell.
    // That interval's choices were never made, so it gets no stacks.
    let missed_out = t.last_in != 0 && t.last_in > t.last_out;
    if missed_out {
        drop_event(drops::SWITCH_OUT_MISSED);
        t.last_out = t.last_in;
        t.last_out_involuntary = 1;
    }
    // Off CPU since its last switch-out; a thread that has not switched since the start
    // has been off CPU since the start (blocked, or runnable: the loader seeded which).
    // Nothing before the start counts.
    let out = if t.last_out != 0 || t.last_in != 0 {
        t.last_out
    } else {
        start
    };
    let out = if out != 0 && out < start { start } else { out };
    if out != 0 && now > out {
        let off = now - out;
        let (blocked, waiting) = split(t, out, now);
        off_cpu(t, off, blocked, waiting);
        if waiting != 0 {
            held_by(t, prev, prev_id, tgid, tid, waiting);
        }
        // SAFETY: a read-only global the loader rewrites before load.
        let min = unsafe { core::ptr::read_volatile(&MIN_BLOCK_NS) };
        if stacks_on() && off >= min && !missed_out {
            offcpu_stacks(t, next, tgid, tid, off, blocked, now);
        }
        spans::interval(t, tid, prev_id, blocked, waiting);
    }
    t.waker_set = 0;
    // Kept for a thread this one wakes while it runs (`HeldKey`).
    t.last_wakeup_at = if t.last_out_involuntary == 0 {
        t.wakeup_at
    } else {
        0
    };
    t.wakeup_at = 0;
    t.last_in = now;
    if timeline::on() {
        timeline::emit(tl::SWITCH_IN, now, 0, tid, 0, 0, tgid);
    }
}

/// An off-CPU interval from `out` to `now`, split at its first wakeup: (blocked, waiting
/// for a CPU). A preempted thread waits for a CPU from its switch-out; a blocked one whose
/// wakeup was not seen (before the start, or lost) counts as blocked throughout.
#[inline(always)]
fn split(t: &ThreadStats, out: u64, now: u64) -> (u64, u64) {
    let off = now - out;
    if t.last_out_involuntary != 0 {
        return (0, off);
    }
    let woke = t.wakeup_at;
    if woke >= out && woke <= now {
        (woke - out, now - woke)
    } else {
        (off, 0)
    }
}

/// The task `prev` (`holder`: its tgid and pid), on this CPU until now, held it while thread
/// `tid` waited `ns` for it.
#[inline(always)]
fn held_by(t: &mut ThreadStats, prev: *mut c_void, holder: u64, tgid: u32, tid: u32, ns: u64) {
    let key = RunqueueHolderKey {
        tgid,
        tid,
        holder_tgid: (holder >> 32) as u32,
        holder_tid: holder as u32,
        // SAFETY: a helper with no arguments.
        cpu: unsafe { bpf_get_smp_processor_id() },
        _pad: 0,
    };
    // The thread's own row first (see `ThreadStats::held_by`).
    if t.held.count != 0 && t.held_by == key {
        t.held.count += 1;
        t.held.ns += ns;
        return;
    }
    // SAFETY: `prev` is the tracepoint's own task pointer; the offset is the loader's, from
    // the kernel's BTF.
    let prio = unsafe {
        *((prev as *const u8).add(core::ptr::read_volatile(&TASK_PRIO_OFFSET) as usize)
            as *const u32)
    };
    if t.held.count == 0 {
        t.held_by = key;
        t.held = RunqueueHolderStats {
            count: 1,
            ns,
            comm: current_comm(),
            prio,
            _pad: 0,
        };
        return;
    }
    if let Some(v) = RUNQUEUE_HOLDERS.get_ptr_mut(&key) {
        // SAFETY: a live map value; only this waiter's switch-in writes its keys, and its
        // switches are serialised.
        unsafe {
            (*v).count += 1;
            (*v).ns += ns;
        }
        return;
    }
    let v = RunqueueHolderStats {
        count: 1,
        ns,
        comm: current_comm(),
        prio,
        _pad: 0,
    };
    if RUNQUEUE_HOLDERS.insert(&key, &v, 0).is_err() {
        drop_event(drops::STACK_KEYS_FULL);
    }
}

/// Counts an interval of `off` ns off CPU that ends now: `blocked` ns blocked, then
/// `waiting` ns waiting for a CPU.
#[inline(always)]
fn off_cpu(t: &mut ThreadStats, off: u64, blocked: u64, waiting: u64) {
    t.blocked_ns += blocked;
    t.runqueue_ns += waiting;
    if t.last_out_involuntary == 0 {
        t.runqueue_after_wakeup_ns += waiting;
    }
    if waiting != 0 {
        let b = log2_bucket(waiting);
        if b < HIST_BUCKETS {
            t.delay_hist[b] += 1;
        }
    }
    let b = log2_bucket(off);
    if b < HIST_BUCKETS {
        t.offcpu_hist[b] += 1;
    }
    if t.in_syscall == 0 {
        t.predicted_ns = moving_average(t.predicted_ns, off);
    } else {
        t.predicted_sys_ns = moving_average(t.predicted_sys_ns, off);
    }
}

/// One off-CPU interval of `off` ns of thread `tid`, about to run again, into the
/// stack-keyed maps, if it is walked: for the off-CPU profile, with the probability chosen at
/// switch-out or, inside a syscall, now, from its length; for the wakeup profile, with the
/// one chosen at its wakeup. The two choices are independent, each profile stays unbiased.
#[inline(always)]
fn offcpu_stacks(
    t: &mut ThreadStats,
    next: *mut c_void,
    tgid: u32,
    tid: u32,
    off: u64,
    blocked: u64,
    now: u64,
) {
    count(sampling::INTERVALS);
    let p = if t.in_syscall != 0 {
        // An interval inside a span is always walked: its instance may be kept whole.
        draw(if spans::open(t) {
            sampling::ONE as u32
        } else {
            sample_probability(off)
        })
    } else {
        t.sample_p
    };
    let wake_p = if t.waker_set != 0 { t.wake_p } else { 0 };
    if p == 0 && wake_p == 0 {
        return;
    }
    count(sampling::WALKED);
    // The probes' own walks, done only because the interval was chosen, would lengthen
    // exactly the chosen intervals, and a chosen interval stands for 1/p of them: under
    // sampling they are left out. (An interval walked for certain stands for itself alone,
    // and keeps the length the thread's counters have.)
    // The interval's two parts: blocked, then waiting for a CPU (all of it, preempted).
    let waiting = off - blocked;
    // A switch-out that walked the user stack marked the interval's start before the walk:
    // the blocked part, or a preempted thread's wait.
    let mut own_out = 0;
    if t.in_syscall == 0 && t.walked_at > t.last_out && now > t.walked_at {
        own_out = t.walked_at - t.last_out;
    }
    // The waker's walk held this CPU, where the sleeper runs now: the wait for a CPU.
    let mut own_wake = 0;
    if wake_p != 0
        && t.wake_cpu == unsafe { bpf_get_smp_processor_id() }
        && t.woken_at >= t.last_out
        && now > t.woken_at
    {
        own_wake = core::cmp::min(t.wake_walk_ns, now - t.woken_at);
    }
    let (own_blocked, own_waiting) = if blocked != 0 {
        (own_out, own_wake)
    } else {
        (0, own_out + own_wake)
    };
    let weight = |p: u32, part: u64, own: u64| {
        if p == 0 {
            0
        } else if p as u64 >= sampling::ONE {
            part
        } else {
            part.saturating_sub(own) * sampling::ONE / p as u64
        }
    };
    let offcpu_ns = weight(p, blocked, own_blocked);
    let delay_ns = weight(p, waiting, own_waiting);
    // The wakeup profile weights the blocked part only: the waker ended that.
    let wake_ns = weight(wake_p, blocked, own_blocked);
    let kernel = blocked_kernel_stack(next);
    // Kept until the next switch-out: what this thread was doing, should it wake another.
    t.kernel_stack = kernel;
    if t.in_syscall == 0 {
        record_interval(
            tid,
            stack_pair(t.user_stack, kernel),
            offcpu_ns,
            delay_ns,
            wake_ns,
        );
        return;
    }
    // The user stack is taken where the thread runs again (`flush_pending`).
    t.pending = 1;
    t.pending_ns = offcpu_ns;
    t.pending_delay_ns = delay_ns;
    t.pending_wake_ns = wake_ns;
    t.kernel_stack = kernel;
    let pid_tgid = (tgid as u64) << 32 | tid as u64;
    if let Some(e) = slot(pid_tgid) {
        // SAFETY: the thread is off CPU, so its own syscall probes are not running; a slot
        // another thread is using is left alone (the switch-out then takes the stack).
        let e = unsafe { &mut *e };
        if e.pid_tgid == pid_tgid || e.ts == 0 {
            e.pid_tgid = pid_tgid;
            e.offcpu_pending = 1;
        }
    }
}

/// Adds one walked interval: by its stacks and state (weight `offcpu_ns` for the part
/// blocked, or a preempted thread's wait; `delay_ns` for the wait for a CPU after a wakeup,
/// under the state with `WOKEN_FLAG`), and by sleeper and waker stacks together (weight
/// `wake_ns`); a weight of 0 is an interval not chosen for that profile.
///
/// A global function, verified once rather than on each of the many paths of the programs that
/// call it; it finds the thread's entry again, which costs a walked interval one array lookup.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn record_interval(
    tid: u32,
    stacks: u64,
    offcpu_ns: u64,
    delay_ns: u64,
    wake_ns: u64,
) -> u64 {
    let Some(t) = thread(tid) else {
        return 0;
    };
    // SAFETY: the entry of a thread off CPU or running this program: nothing else writes it.
    let t = unsafe { &*t };
    let (user, kernel) = ((stacks >> 32) as i32, stacks as i32);
    // A preempted thread's whole wait is under its own state (R); a blocked one's is split.
    let preempted = t.state == tp::PREEMPT_FLAG as u32 || t.state == 0;
    if preempted {
        offcpu(t, tid, user, kernel, t.state, offcpu_ns + delay_ns);
    } else {
        offcpu(t, tid, user, kernel, t.state, offcpu_ns);
        offcpu(
            t,
            tid,
            user,
            kernel,
            t.state | tp::WOKEN_FLAG as u32,
            delay_ns,
        );
    }
    if wake_ns != 0 {
        let key = WakeupKey {
            tgid: t.tgid,
            tid,
            user_stack: user,
            kernel_stack: kernel,
            waker_user_stack: t.waker_user_stack,
            waker_kernel_stack: t.waker_kernel_stack,
            waker_tgid: t.waker_tgid,
            waker_tid: t.waker_tid,
            waker_comm: t.waker_comm,
        };
        add(&WAKEUPS, &key, wake_ns);
    }
    0
}

/// A user and a kernel stack id as [`record_interval`] takes them: in one argument, as a BPF
/// function takes five at most.
#[inline(always)]
fn stack_pair(user: i32, kernel: i32) -> u64 {
    (user as u32 as u64) << 32 | kernel as u32 as u64
}

/// `ns` of off-CPU time by stacks and state.
#[inline(always)]
fn offcpu(t: &ThreadStats, tid: u32, user: i32, kernel: i32, state: u32, ns: u64) {
    if ns == 0 {
        return;
    }
    let key = OffCpuKey {
        tgid: t.tgid,
        tid,
        user_stack: user,
        kernel_stack: kernel,
        state,
        _pad: 0,
    };
    add(&OFFCPU, &key, ns);
    otelctx::offcpu(&key, ns);
    if timeline::on() {
        timeline::emit(
            tl::OFFCPU,
            unsafe { bpf_ktime_get_ns() },
            ns,
            tid,
            user as u32,
            kernel as u32,
            state,
        );
    }
}

/// In thread `tid`'s own context, still inside the syscall it went off CPU in: the interval
/// waiting for its user stack recorded, with `user`, walked there.
#[inline(always)]
pub fn flush_pending(tid: u32, user: i32) {
    let Some(t) = thread(tid) else {
        return;
    };
    // SAFETY: the thread is running here, so its switches are not.
    let t = unsafe { &mut *t };
    if t.pending != 0 {
        flush(t, tid, user);
    }
}

/// Records the interval that waited for its user stack, with `user`.
#[inline(always)]
fn flush(t: &mut ThreadStats, tid: u32, user: i32) {
    t.pending = 0;
    spans::pending_user_stack(t, user);
    t.last_user_stack = if user >= 0 { user as u32 + 1 } else { 0 };
    record_interval(
        tid,
        stack_pair(user, t.kernel_stack),
        t.pending_ns,
        t.pending_delay_ns,
        t.pending_wake_ns,
    );
}

/// Drops an interval that waits for a user stack it cannot have.
#[inline(always)]
pub fn discard_pending(tid: u32) {
    if let Some(t) = thread(tid) {
        // SAFETY: as above.
        unsafe { (*t).pending = 0 };
    }
}

/// `prev_state` as the `sched_switch` trace event reports it (what user space labels): the
/// preempt flag, or the highest reportable state bit.
#[inline(always)]
fn report_state(preempt: bool, raw: u32) -> u32 {
    if preempt {
        return tp::PREEMPT_FLAG as u32;
    }
    if raw == 0 {
        return 0;
    }
    if raw & TASK_DEAD != 0 {
        return tp::STATE_DEAD as u32;
    }
    if raw & TASK_IDLE == TASK_IDLE {
        return REPORT_IDLE;
    }
    if raw & TASK_RTLOCK_WAIT != 0 {
        return 2;
    }
    let s = raw & TASK_REPORT;
    let mut bit = 0x40;
    while bit > 1 && s & bit == 0 {
        bit >>= 1;
    }
    bit
}

#[inline(always)]
fn switch_out(
    ctx: &BtfTracePointContext,
    now: u64,
    start: u64,
    last_switch: u64,
    pid_tgid: u64,
    preempt: bool,
    raw_state: u32,
) {
    let tid = pid_tgid as u32;
    let Some(t) = thread_entry(tid) else {
        return;
    };
    // SAFETY: see the module comment.
    let t = unsafe { &mut *t };
    // Preempted, or still runnable: the kernel counts it in nivcsw.
    let involuntary = preempt || raw_state == 0;
    if involuntary {
        t.involuntary += 1;
    } else {
        t.voluntary += 1;
    }
    // Switched out with no switch-in reported since its last switch-out (or since the start,
    // for a thread blocked then): it came back on this CPU no earlier than the CPU's last
    // reported switch (see `LAST_SWITCH`), and no later, as far as anything can tell.
    if t.last_out != 0 && t.last_in <= t.last_out {
        drop_event(drops::SWITCH_IN_MISSED);
        let from = if t.last_out > start {
            t.last_out
        } else {
            start
        };
        let back = if last_switch > from {
            last_switch
        } else {
            from
        };
        let back = if back > now { now } else { back };
        if back > from {
            let (blocked, waiting) = split(t, from, back);
            off_cpu(t, back - from, blocked, waiting);
        }
        t.last_in = back;
    }
    let since = if t.last_in != 0 { t.last_in } else { start };
    if now > since {
        t.oncpu_ns += now - since;
    }
    let stacks = stacks_on();
    let inflight = in_syscall(pid_tgid);
    let in_sys = inflight.is_some();
    if timeline::on() {
        // SAFETY: a live array value (see `in_syscall`).
        let nr = inflight.map_or(0, |e| unsafe { (*e).nr } as u32 + 1);
        timeline::emit(
            tl::SWITCH_OUT,
            now,
            0,
            tid,
            report_state(preempt, raw_state),
            nr,
            (pid_tgid >> 32) as u32,
        );
    }
    // Blocked again inside the syscall an earlier interval waits in: the same user registers,
    // so the walk is that interval's user stack.
    let flush = stacks && t.pending != 0;
    // Outside a syscall the user stack is only here: choose now, from the thread's past.
    // An exiting thread (TASK_DEAD) never runs again, and has no user stack left.
    let mut p = 0;
    if stacks && !in_sys && raw_state & TASK_DEAD == 0 {
        p = draw(if t.predicted_ns == 0 || spans::open(t) {
            sampling::ONE as u32
        } else {
            sample_probability(t.predicted_ns)
        });
    }
    let interval = Interval {
        now,
        pid_tgid,
        state: report_state(preempt, raw_state),
        involuntary: involuntary as u32,
        in_syscall: in_sys as u32,
        sample_p: p,
        flush: flush as u32,
        _pad: 0,
    };
    if (flush || p != 0)
        && let Some(slot) = SWITCH_OUT.get_ptr_mut(0)
    {
        // SAFETY: the per-CPU slot; the walk program reads it next, on this CPU.
        unsafe {
            *slot = interval;
            SWITCH_JUMP.tail_call(ctx, 0);
        }
        // Not reached unless the tail call failed: no walk.
    }
    begin(t, &interval, -1);
}

/// `sched_switch_walk`: the user stack of a switch-out that needs it.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_walk(ctx: BtfTracePointContext) -> i32 {
    walk_then_finish(&ctx, unwind::SLOT_TRACEPOINT, &SWITCH_JUMP);
    0
}

/// `sched_switch_finish`: the rest of that switch-out, with the stack walked.
#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch_finish(_ctx: BtfTracePointContext) -> i32 {
    try_sched_switch_finish();
    0
}

#[inline(always)]
fn try_sched_switch_finish() {
    let Some(slot) = SWITCH_OUT.get_ptr(0) else {
        return;
    };
    // SAFETY: the per-CPU slot the switch program wrote, on this CPU, just before.
    let interval = unsafe { *slot };
    let tid = interval.pid_tgid as u32;
    let Some(t) = thread(tid) else {
        return;
    };
    // SAFETY: see the module comment.
    let t = unsafe { &mut *t };
    let user = walked(unwind::SLOT_TRACEPOINT);
    if interval.flush != 0 {
        flush(t, tid, user);
    }
    begin(t, &interval, user);
}

/// The thread's new off-CPU interval, from its switch-out.
#[inline(always)]
fn begin(t: &mut ThreadStats, i: &Interval, user: i32) {
    t.last_out = i.now;
    t.last_out_involuntary = i.involuntary;
    t.tgid = (i.pid_tgid >> 32) as u32;
    // The name is read at the first switch-out and with every walk, not on each switch (a
    // live thread's name is read again at the end).
    if t.comm[0] == 0 || user >= 0 {
        t.comm = current_comm();
    }
    t.state = i.state;
    t.in_syscall = i.in_syscall;
    // Inside a syscall the choices wait: the wakeup's for the wakeup, the off-CPU profile's
    // for the interval's length. Outside one, the wakeup profile follows the switch-out's
    // choice (there is no user stack for it otherwise).
    t.sample_p = i.sample_p;
    t.wake_p = if i.in_syscall == 0 { i.sample_p } else { 0 };
    t.wake_decided = 0;
    // A wakeup before the switch-out woke a thread that had not gone off CPU yet.
    t.waker_set = 0;
    t.wakeup_at = 0;
    t.user_stack = if i.sample_p != 0 { user } else { -1 };
    // Inside a syscall, known where it returns (`flush`).
    t.last_user_stack = if i.sample_p != 0 && user >= 0 {
        user as u32 + 1
    } else {
        0
    };
    // Read only for an interval outside a syscall that was chosen, the one walked here.
    // SAFETY: a helper with no arguments.
    t.walked_at = if i.sample_p != 0 {
        unsafe { bpf_ktime_get_ns() }
    } else {
        0
    };
    t.kernel_stack = -1;
}
