//! Who woke whom, and when: at `sched_waking` of a target thread, the time is kept in the
//! sleeper's entry (its wait is blocked up to here, waiting for a CPU after), and the waker's
//! stacks and name; `sched_switch` joins them with the sleeper's off-CPU stack and time when
//! the sleeper runs again.
//!
//! A BTF tracepoint: the kernel hands over the woken task, and fills no trace record first
//! (a classic tracepoint's record costs more than this program's whole body).
//!
//! The tracepoint runs in the waker's context (current = waker), while the sleeper is off CPU,
//! so the sleeper's own switch path is not writing its entry at the same time.
//!
//! The waker's stacks are taken only for an interval the wakeup profile chose (see `sched`):
//! for a sleeper that blocked inside a syscall the choice is made here, at the first wakeup,
//! from the larger of the time blocked so far and the thread's usual; otherwise it was made
//! at the switch-out.

use core::ffi::c_void;

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_ktime_get_ns},
    macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use switchyard_common::{HELD_RUNNING, HeldKey, sampling, timeline as tl, tp, unwind};

use crate::{
    sampling::{draw, sample_probability},
    sched::HELD,
    shared::{current_comm, recording, start_ns},
    spans,
    stacks::{add, stack_ids, stacks_on},
    task::TASK_PID_OFFSET,
    threads::thread,
    timeline,
};

// `sched_waking`, not `sched_wakeup`: a wakeup of a task whose CPU is idle is queued to that
// CPU, and `sched_wakeup` fires there, in the interrupt that takes it, with the idle task as
// current; `sched_waking` fires in the waker's own context, always.
#[btf_tracepoint(function = "sched_waking")]
pub fn sched_wakeup(ctx: BtfTracePointContext) -> i32 {
    try_sched_wakeup(&ctx);
    0
}

#[inline(always)]
fn try_sched_wakeup(ctx: &BtfTracePointContext) {
    // Every wakeup is timed, stacks or not: it splits the interval it ends into blocked
    // time and time waiting for a CPU.
    if !recording() {
        return;
    }
    let timeline = timeline::on();
    // sched_waking(struct task_struct *p)
    let p: *mut c_void = ctx.arg(0);
    // SAFETY: `p` is the tracepoint's own task pointer, trusted by the verifier; the offset
    // is the loader's, from the kernel's BTF.
    let pid = unsafe {
        *((p as *const u8).add(core::ptr::read_volatile(&TASK_PID_OFFSET) as usize) as *const u32)
    };
    let Some(t) = thread(pid) else {
        return;
    };
    // SAFETY: see the module comment.
    let t = unsafe { &mut *t };
    // The first wakeup of an interval is the one that ends it.
    if t.wake_decided != 0 {
        return;
    }
    t.wake_decided = 1;
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    // Only a thread off CPU is waiting to be woken: one still running (woken before it
    // switched out) switches out runnable, and waits for a CPU from there.
    // (Both 0: off CPU since before the start.)
    if t.last_out >= t.last_in {
        t.wakeup_at = now;
    }
    if timeline {
        let waker = bpf_get_current_pid_tgid();
        timeline::emit(
            tl::WAKEUP,
            now,
            0,
            pid,
            waker as u32,
            (waker >> 32) as u32,
            0,
        );
    }
    if !stacks_on() {
        return;
    }
    if t.in_syscall != 0 {
        // Chosen by the interval's expected length: blocked so far, or the thread's usual;
        // inside a span, always (its instance may be kept whole).
        let so_far = now.saturating_sub(t.last_out);
        t.wake_p = draw(if spans::open(t) {
            sampling::ONE as u32
        } else {
            sample_probability(core::cmp::max(so_far, t.predicted_sys_ns))
        });
    }
    let (user, kernel) = if t.wake_p != 0 {
        // A wakeup from an interrupt runs on whatever task was interrupted; user space tells
        // those apart by the interrupt entry in the kernel stack.
        let (user, kernel) = stack_ids(ctx, unwind::SLOT_TRACEPOINT, false);
        // The walk holds this CPU: a sleeper that runs next on it runs that much later, only
        // because its interval was chosen; `sched` leaves that time out of the interval's
        // weight. Timed from `now`, read a few instructions before the walk: one clock read
        // fewer on every walked wakeup, for nanoseconds more counted as the walk's own.
        t.wake_walk_ns = unsafe { bpf_ktime_get_ns() }.saturating_sub(now);
        t.woken_at = now;
        t.wake_cpu = unsafe { bpf_get_smp_processor_id() };
        let waker = bpf_get_current_pid_tgid();
        t.waker_user_stack = user;
        t.waker_kernel_stack = kernel;
        t.waker_tgid = (waker >> 32) as u32;
        t.waker_tid = waker as u32;
        t.waker_comm = current_comm();
        t.waker_set = 1;
        (user, kernel)
    } else {
        (-1, -1)
    };
    let (held_ns, held_state, held_user) = held(pid, t.tgid, t.last_out, now, user, kernel);
    if spans::open(t) {
        t.wake_held_ns = held_ns;
        t.wake_held_state = held_state;
        t.wake_held_user_stack = held_user;
    }
}

/// What the waker (the current task), when it is a target thread, did while thread `tid`
/// waited from `out` to `now`: the part of its own last interval off CPU within the wait, by
/// that interval's state and stacks, and the part it ran since, by its stacks at this wakeup
/// (`user`, `kernel`; negative when not walked). A lock's holder that slept holding it shows
/// that sleep; one that slept elsewhere and ran into the lock does not.
///
/// Returns the waker's time off CPU within the wait, blocked, with that interval's state and
/// user stack ((0, 0, -1): none).
#[inline(always)]
fn held(tid: u32, tgid: u32, out: u64, now: u64, user: i32, kernel: i32) -> (u64, u32, i32) {
    let mut off = (0, 0, -1);
    let waker_id = bpf_get_current_pid_tgid();
    let (waker, waker_tgid) = (waker_id as u32, (waker_id >> 32) as u32);
    if waker == tid {
        return off;
    }
    let Some(w) = thread(waker) else {
        return off;
    };
    // SAFETY: the waker is running here, so its own switches are not writing its entry.
    let w = unsafe { &*w };
    // Waiting since its switch-out, or since the start for a wait under way then.
    let start = start_ns();
    let from = if out > start { out } else { start };
    // The waker runs now; it ran from `last_in`, off CPU from `last_out` to then.
    if w.last_in == 0 || w.last_in > now {
        return off;
    }
    if w.last_out != 0 && w.last_out < w.last_in && w.last_in > from {
        let off_from = if w.last_out > from { w.last_out } else { from };
        // Blocked up to its own wakeup, then waiting for a CPU (no wakeup seen: blocked
        // throughout, or preempted, which its state says).
        let woke = w.last_wakeup_at;
        let split = if woke > w.last_out && woke < w.last_in {
            woke
        } else {
            w.last_in
        };
        let mut key = HeldKey {
            tgid,
            tid,
            holder_tgid: waker_tgid,
            holder_tid: waker,
            state: w.state,
            user_stack: w.last_user_stack as i32 - 1,
            kernel_stack: w.kernel_stack,
            _pad: 0,
        };
        if split > off_from {
            add(&HELD, &key, split - off_from);
            off = (split - off_from, w.state, key.user_stack);
        }
        let runnable_from = if split > off_from { split } else { off_from };
        if w.last_in > runnable_from {
            key.state = w.state | tp::WOKEN_FLAG as u32;
            add(&HELD, &key, w.last_in - runnable_from);
        }
    }
    let ran_from = if w.last_in > from { w.last_in } else { from };
    if now > ran_from {
        let key = HeldKey {
            tgid,
            tid,
            holder_tgid: waker_tgid,
            holder_tid: waker,
            state: HELD_RUNNING,
            user_stack: user,
            kernel_stack: kernel,
            _pad: 0,
        };
        add(&HELD, &key, now - ran_from);
    }
    off
}
