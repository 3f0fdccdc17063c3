//! `sched_switch`: per-thread voluntary/involuntary switches and on/off-CPU time.
//!
//! The tracepoint runs on the CPU doing the switch, in the context of `prev`. A thread's
//! switch-out and its next switch-in are serialised by the scheduler, so the per-thread entry
//! is never written from two CPUs at once.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::HashMap,
    programs::TracePointContext,
};
use switchyard_common::{HIST_BUCKETS, MAX_THREADS, ThreadStats, drops, log2_bucket, tp};

use crate::shared::{drop_event, is_target};

#[map(name = "THREADS")]
static THREADS: HashMap<u32, ThreadStats> = HashMap::with_max_entries(MAX_THREADS, 0);

const EMPTY: ThreadStats = ThreadStats {
    tgid: 0,
    last_out_involuntary: 0,
    voluntary: 0,
    involuntary: 0,
    oncpu_ns: 0,
    blocked_ns: 0,
    runqueue_ns: 0,
    last_in: 0,
    last_out: 0,
    comm: [0; 2],
    offcpu_hist: [0; HIST_BUCKETS],
};

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    try_sched_switch(&ctx);
    0
}

#[inline(always)]
fn try_sched_switch(ctx: &TracePointContext) {
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
        switch_out(now, tgid, prev_pid, prev_state, comm);
    }

    // SAFETY: as above.
    let next_pid = unsafe { *(base.add(tp::SWITCH_NEXT_PID) as *const i32) } as u32;
    if next_pid != 0
        && let Some(t) = THREADS.get_ptr_mut(next_pid)
    {
        // SAFETY: this thread's entry is only touched by its own switches (see above).
        let t = unsafe { &mut *t };
        if t.last_out != 0 && now > t.last_out {
            let off = now - t.last_out;
            if t.last_out_involuntary != 0 {
                t.runqueue_ns += off;
            } else {
                t.blocked_ns += off;
            }
            let b = log2_bucket(off);
            if b < HIST_BUCKETS {
                t.offcpu_hist[b] += 1;
            }
        }
        t.last_in = now;
    }
}

#[inline(always)]
fn switch_out(now: u64, tgid: u32, tid: u32, prev_state: i64, comm: [u64; 2]) {
    let t = match THREADS.get_ptr_mut(tid) {
        Some(t) => t,
        None => {
            let mut fresh = EMPTY;
            fresh.tgid = tgid;
            if THREADS.insert(tid, fresh, 0).is_err() {
                drop_event(drops::THREADS_FULL);
                return;
            }
            match THREADS.get_ptr_mut(tid) {
                Some(t) => t,
                None => return,
            }
        }
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
    if t.last_in != 0 && now > t.last_in {
        t.oncpu_ns += now - t.last_in;
    }
    t.last_out = now;
    t.last_out_involuntary = involuntary as u32;
    t.tgid = tgid;
    t.comm = comm;
}
