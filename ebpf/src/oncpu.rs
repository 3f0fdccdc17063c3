//! On-CPU stacks: a perf_event program on every CPU's cpu-clock (sampling frequency set by the
//! loader), counting samples of target threads by user and kernel stack.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, perf_event},
    maps::HashMap,
    programs::PerfEventContext,
};
use switchyard_common::{OnCpuKey, timeline as tl, unwind};

use crate::{
    otelctx,
    shared::{is_target, recording},
    spans,
    stacks::{KEYS, add, stack_ids},
    threads::thread,
    timeline,
};

#[map]
static ONCPU: HashMap<OnCpuKey, u64> = HashMap::with_max_entries(KEYS, 0);

#[perf_event]
pub fn oncpu(ctx: PerfEventContext) -> u32 {
    try_oncpu(&ctx);
    0
}

#[inline(always)]
fn try_oncpu(ctx: &PerfEventContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // The idle task (pid 0) is never a target.
    if pid_tgid as u32 == 0 || !is_target(tgid) || !recording() {
        return;
    }
    let (user_stack, kernel_stack) = stack_ids(ctx, unwind::SLOT_PERF_EVENT, false);
    let key = OnCpuKey {
        tgid,
        tid: pid_tgid as u32,
        user_stack,
        kernel_stack,
    };
    add(&ONCPU, &key, 1);
    if let Some(t) = thread(key.tid) {
        // SAFETY: the sampled thread is the current one; its switches are not running.
        spans::sample(unsafe { &mut *t }, user_stack, kernel_stack);
    }
    otelctx::sample(tgid, key.tid, user_stack, kernel_stack);
    if timeline::on() {
        timeline::emit(
            tl::ONCPU,
            unsafe { bpf_ktime_get_ns() },
            0,
            key.tid,
            user_stack as u32,
            kernel_stack as u32,
            tgid,
        );
    }
}
