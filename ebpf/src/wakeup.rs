//! Who woke whom: at `sched_wakeup` of a target thread, the waker's stacks and name are kept
//! in the sleeper's entry; `sched_switch` joins them with the sleeper's off-CPU stack and
//! time when the sleeper runs again.
//!
//! The tracepoint runs in the waker's context (current = waker), while the sleeper is off CPU,
//! so the sleeper's own switch path is not writing its entry at the same time.
//!
//! The waker's stacks are taken only for an interval that will be walked (see `sched`): a
//! sleeper that blocked inside a syscall has its sampling choice made here, from the time it
//! has been blocked so far.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::tracepoint,
    programs::TracePointContext,
};
use switchyard_common::{tp, unwind};

use crate::{
    sched::{THREADS, draw, sample_probability},
    shared::current_comm,
    stacks::{stack_ids, stacks_on},
};

#[tracepoint]
pub fn sched_wakeup(ctx: TracePointContext) -> u32 {
    try_sched_wakeup(&ctx);
    0
}

#[inline(always)]
fn try_sched_wakeup(ctx: &TracePointContext) {
    if !stacks_on() {
        return;
    }
    let base = ctx.as_ptr() as *const u8;
    // SAFETY: a constant offset inside the record; the loader checked it against tracefs.
    let pid = unsafe { *(base.add(tp::WAKEUP_PID) as *const i32) } as u32;
    let Some(t) = THREADS.get_ptr_mut(pid) else {
        return;
    };
    // SAFETY: see the module comment.
    let t = unsafe { &mut *t };
    if t.sample_decided == 0 {
        let now = unsafe { bpf_ktime_get_ns() };
        t.sample_decided = 1;
        t.sample_p = draw(sample_probability(now.saturating_sub(t.last_out)));
    }
    if t.sample_p == 0 {
        return;
    }
    // A wakeup from an interrupt runs on whatever task was interrupted; user space tells
    // those apart by the interrupt entry in the kernel stack.
    let (user, kernel) = stack_ids(ctx, unwind::SLOT_TRACEPOINT, false);
    let waker = bpf_get_current_pid_tgid();
    t.waker_user_stack = user;
    t.waker_kernel_stack = kernel;
    t.waker_tgid = (waker >> 32) as u32;
    t.waker_tid = waker as u32;
    t.waker_comm = current_comm();
    t.waker_set = 1;
}
