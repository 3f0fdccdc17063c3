//! New tasks of the targets: every new thread gets its `THREADS` entry before it first runs
//! (so its first switch-in is timed), and a new *process* (no `CLONE_THREAD`) created by a
//! target is added to `TARGETS` when following is on. `task_newtask` runs in the parent's
//! context, so the current tgid is the parent's.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::tracepoint,
    programs::TracePointContext,
};
use switchyard_common::{drops, tp};

use crate::{
    shared::{FOLLOWED, TARGETS, drop_event, follow_children, is_target},
    stacks::atomic_add,
    threads::thread_entry,
};

#[tracepoint]
pub fn task_newtask(ctx: TracePointContext) -> u32 {
    try_task_newtask(&ctx);
    0
}

#[inline(always)]
fn try_task_newtask(ctx: &TracePointContext) {
    let parent = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !is_target(parent) {
        return;
    }
    let base = ctx.as_ptr() as *const u8;
    // SAFETY: constant offsets inside the record; the loader checked them against tracefs.
    let (pid, flags) = unsafe {
        (
            *(base.add(tp::NEWTASK_PID) as *const i32),
            *(base.add(tp::NEWTASK_CLONE_FLAGS) as *const u64),
        )
    };
    if flags & tp::CLONE_THREAD == 0 && !follow_children() {
        return;
    }
    // A new task is runnable from now until it first runs: a run-queue wait.
    if let Some(t) = thread_entry(pid as u32) {
        // SAFETY: the new task has not run yet; nothing else writes its entry.
        let t = unsafe { &mut *t };
        t.last_out = unsafe { bpf_ktime_get_ns() };
        t.last_out_involuntary = 1;
    }
    if flags & tp::CLONE_THREAD != 0 {
        return;
    }
    if TARGETS.insert(pid as u32, 1u8, 0).is_err() {
        drop_event(drops::TARGETS_FULL);
        return;
    }
    if let Some(n) = FOLLOWED.get_ptr_mut(0) {
        // SAFETY: a live array value; two CPUs may add at once.
        unsafe { atomic_add(n, 1) };
    }
}
