//! Who woke whom: at `sched_wakeup` of a target thread, the waker's stacks and name are kept
//! in the sleeper's entry; `sched_switch` joins them with the sleeper's off-CPU stack and
//! time when the sleeper runs again.
//!
//! The tracepoint runs in the waker's context (current = waker), while the sleeper is off CPU,
//! so the sleeper's own switch path is not writing its entry at the same time.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
    macros::tracepoint,
    programs::TracePointContext,
};
use switchyard_common::{tp, unwind};

use crate::{
    sched::THREADS,
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
    // A wakeup from an interrupt runs on whatever task was interrupted; user space tells
    // those apart by the interrupt entry in the kernel stack.
    let (user, kernel) = stack_ids(ctx, unwind::SLOT_TRACEPOINT, false);
    let waker = bpf_get_current_pid_tgid();
    let comm = bpf_get_current_comm().unwrap_or([0; 16]);
    let mut words = [0u64; 2];
    words[0] = u64::from_ne_bytes([
        comm[0], comm[1], comm[2], comm[3], comm[4], comm[5], comm[6], comm[7],
    ]);
    words[1] = u64::from_ne_bytes([
        comm[8], comm[9], comm[10], comm[11], comm[12], comm[13], comm[14], comm[15],
    ]);
    // SAFETY: see the module comment.
    let t = unsafe { &mut *t };
    t.waker_user_stack = user;
    t.waker_kernel_stack = kernel;
    t.waker_tgid = (waker >> 32) as u32;
    t.waker_tid = waker as u32;
    t.waker_comm = words;
    t.waker_set = 1;
}
