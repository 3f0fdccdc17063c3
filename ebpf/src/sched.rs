//! `sched_switch`: per-thread voluntary/involuntary switches and on/off-CPU time.
//!
//! The tracepoint runs on the CPU doing the switch, in the context of `prev`. A thread's
//! switch-out and its next switch-in are serialised by the scheduler, so the per-thread entry
//! is never written from two CPUs at once.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::{HashMap, PerCpuArray},
    programs::TracePointContext,
};
use switchyard_common::{
    HIST_BUCKETS, MAX_THREADS, OffCpuKey, ThreadStats, WakeupKey, drops, log2_bucket, tp, unwind,
};

use crate::{
    shared::{drop_event, is_target, start_ns},
    stacks::{KEYS, add, stack_ids, stacks_on},
};

#[map(name = "THREADS")]
pub static THREADS: HashMap<u32, ThreadStats> = HashMap::with_max_entries(MAX_THREADS, 0);

/// One zeroed entry, the template for a new thread's entry.
#[map(name = "ZERO_THREAD")]
static ZERO_THREAD: PerCpuArray<ThreadStats> = PerCpuArray::with_max_entries(1, 0);

#[map(name = "OFFCPU")]
static OFFCPU: HashMap<OffCpuKey, u64> = HashMap::with_max_entries(KEYS, 0);

#[map(name = "WAKEUPS")]
static WAKEUPS: HashMap<WakeupKey, u64> = HashMap::with_max_entries(KEYS, 0);

/// Set by the loader before load.
#[unsafe(no_mangle)]
static MIN_BLOCK_NS: u64 = 0;

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    try_sched_switch(&ctx);
    0
}

#[inline(always)]
fn try_sched_switch(ctx: &TracePointContext) {
    // Times count from the recording's start: before it, intervals would begin before the
    // window they are reported in.
    // 0: not started yet; u64::MAX: stopped.
    let start = start_ns();
    if start == 0 || start == u64::MAX {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let base = ctx.as_ptr() as *const u8;

    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if is_target(tgid) {
        // SAFETY: constant offsets inside the record; the loader checked them against tracefs.
        // The comm is read as two words: the verifier refuses byte loads through a context
        // pointer moved by an offset, which a 16-byte array copy compiles to.
        let (prev_pid, prev_state, comm) = unsafe {
            (
                *(base.add(tp::SWITCH_PREV_PID) as *const i32) as u32,
                *(base.add(tp::SWITCH_PREV_STATE) as *const i64),
                [
                    *(base.add(tp::SWITCH_PREV_COMM) as *const u64),
                    *(base.add(tp::SWITCH_PREV_COMM + 8) as *const u64),
                ],
            )
        };
        switch_out(ctx, now, start, tgid, prev_pid, prev_state, comm);
    }

    // SAFETY: as above.
    let next_pid = unsafe { *(base.add(tp::SWITCH_NEXT_PID) as *const i32) } as u32;
    if next_pid != 0
        && let Some(t) = THREADS.get_ptr_mut(next_pid)
    {
        // SAFETY: this thread's entry is only touched by its own switches (see above).
        let t = unsafe { &mut *t };
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
            if t.last_out_involuntary != 0 {
                t.runqueue_ns += off;
            } else {
                t.blocked_ns += off;
            }
            let b = log2_bucket(off);
            if b < HIST_BUCKETS {
                t.offcpu_hist[b] += 1;
            }
            // SAFETY: a read-only global the loader rewrites before load.
            let min = unsafe { core::ptr::read_volatile(&MIN_BLOCK_NS) };
            if stacks_on() && off >= min {
                offcpu_stacks(t, next_pid, off);
            }
        }
        t.waker_set = 0;
        t.last_in = now;
    }
}

/// The entry of thread `tid`, created zeroed when it has none.
#[inline(always)]
pub fn thread_entry(tid: u32) -> Option<*mut ThreadStats> {
    if let Some(t) = THREADS.get_ptr_mut(tid) {
        return Some(t);
    }
    let zero = ZERO_THREAD.get_ptr(0)?;
    // SAFETY: a live map value, only ever read.
    if THREADS.insert(tid, unsafe { &*zero }, 0).is_err() {
        drop_event(drops::THREADS_FULL);
        return None;
    }
    THREADS.get_ptr_mut(tid)
}

/// Adds one off-CPU interval to the stack-keyed maps: by the stack at switch-out, and, when a
/// waker was seen, by sleeper and waker stacks together.
#[inline(always)]
fn offcpu_stacks(t: &ThreadStats, tid: u32, off: u64) {
    let key = OffCpuKey {
        tgid: t.tgid,
        tid,
        user_stack: t.user_stack,
        kernel_stack: t.kernel_stack,
        state: t.state,
        _pad: 0,
    };
    add(&OFFCPU, &key, off);
    if t.waker_set != 0 {
        let key = WakeupKey {
            tgid: t.tgid,
            tid,
            user_stack: t.user_stack,
            kernel_stack: t.kernel_stack,
            waker_user_stack: t.waker_user_stack,
            waker_kernel_stack: t.waker_kernel_stack,
            waker_tgid: t.waker_tgid,
            waker_tid: t.waker_tid,
            waker_comm: t.waker_comm,
        };
        add(&WAKEUPS, &key, off);
    }
}

#[inline(always)]
fn switch_out(
    ctx: &TracePointContext,
    now: u64,
    start: u64,
    tgid: u32,
    tid: u32,
    prev_state: i64,
    comm: [u64; 2],
) {
    let Some(t) = thread_entry(tid) else {
        return;
    };
    // SAFETY: see the module comment.
    let t = unsafe { &mut *t };
    // Runnable (0) or preempted: the kernel counts it in nivcsw.
    let involuntary = prev_state == 0 || prev_state & tp::PREEMPT_FLAG != 0;
    if involuntary {
        t.involuntary += 1;
    } else {
        t.voluntary += 1;
    }
    // Every thread of the targets has an entry from the start (the loader's, or task_newtask's
    // for a thread created since), and a switch-in sets `last_in`: a thread switched out
    // without one has run since before the start.
    let since = if t.last_in != 0 { t.last_in } else { start };
    if now > since {
        t.oncpu_ns += now - since;
    }
    t.last_out = now;
    t.last_out_involuntary = involuntary as u32;
    t.tgid = tgid;
    t.comm = comm;
    t.state = prev_state as u32;
    if stacks_on() {
        // An exiting thread (state X or Z) has no user stack left: not a loss.
        let exiting = prev_state & (tp::STATE_DEAD | tp::STATE_ZOMBIE) != 0;
        let (user, kernel) = stack_ids(ctx, unwind::SLOT_TRACEPOINT, !exiting);
        t.user_stack = user;
        t.kernel_stack = kernel;
    } else {
        t.user_stack = -1;
        t.kernel_stack = -1;
    }
}
