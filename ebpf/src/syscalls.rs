//! `raw_syscalls` enter/exit (as raw tracepoints, the cheapest attachment): per syscall number,
//! count, errors by errno, total and max time and a log2 latency histogram.
//!
//! Counting happens at exit, with the latency; `exit` and `exit_group` never return, so they
//! are counted at entry. A syscall still in flight when the recording stops is not counted.
//!
//! Timing a call takes a clock read at entry and one at exit, which on a hot loop is all the
//! cost above an empty program's; `--syscall-latency N` times one call in about N per thread
//! (futex waits always), counting every one.

use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel,
        generated::{bpf_get_prandom_u32, bpf_jiffies64},
    },
    macros::{map, raw_tracepoint},
    maps::{Array, HashMap, PerCpuArray, PerCpuHashMap, ProgramArray},
    programs::RawTracePointContext,
};
use switchyard_common::{
    ErrnoKey, InFlight, MAX_ERRNOS, MAX_SYSCALLS, NR_EXIT, NR_EXIT_GROUP, SYSCALL_BUDGET_PERIOD_NS,
    SyscallStackKey, SyscallStats, drops, timeline as tl, unwind,
};

use crate::{
    inflight::slot,
    locks::futex_done,
    sched::{discard_pending, flush_pending, walk_then_finish, walked},
    shared::{drop_event, is_target, recording},
    stacks::{KEYS, add, stacks_on, user_stack},
    timeline,
};

const NR_URETPROBE: u64 = 335;
const NR_UPROBE: u64 = 336;
/// Return values in [-4095, -1] are errnos.
const MAX_ERRNO: i64 = 4095;

#[map]
static SYSCALLS: PerCpuArray<SyscallStats> = PerCpuArray::with_max_entries(MAX_SYSCALLS, 0);

#[map]
static ERRNOS: PerCpuHashMap<ErrnoKey, u64> = PerCpuHashMap::with_max_entries(MAX_ERRNOS, 0);

/// 0: `sys_exit_walk`; 1: `sys_exit_finish` (see `sched::SWITCH_JUMP`).
#[map]
static SYSCALL_JUMP: ProgramArray = ProgramArray::with_max_entries(2, 0);

/// 1 at each syscall number to record, when `SYSCALL_FILTER_ON` (`--syscalls`).
#[map]
static SYSCALL_FILTER: Array<u8> = Array::with_max_entries(MAX_SYSCALLS, 0);

/// Set by the loader before load: 1 to record only the syscalls in `SYSCALL_FILTER`.
#[unsafe(no_mangle)]
static SYSCALL_FILTER_ON: u8 = 0;

#[inline(always)]
fn recorded(nr: u64) -> bool {
    // SAFETY: a read-only global the loader rewrites before load.
    if unsafe { core::ptr::read_volatile(&SYSCALL_FILTER_ON) } == 0 {
        return true;
    }
    nr < MAX_SYSCALLS as u64 && SYSCALL_FILTER.get(nr as u32).copied().unwrap_or(0) != 0
}

#[map]
static SYSCALL_STACKS: HashMap<SyscallStackKey, u64> = HashMap::with_max_entries(KEYS, 0);

/// Per CPU, where syscall-stack sampling stands.
#[repr(C)]
#[derive(Clone, Copy)]
struct Tick {
    /// Calls since the last stack taken.
    calls: u64,
    /// The stack is taken at this many calls: drawn at random around the current interval,
    /// so that a loop of a few syscalls is not always sampled at the same one (0: not drawn).
    target: u64,
    /// The current interval N (0: not raised yet).
    every: u64,
    /// When the last stack was taken.
    last: u64,
    /// The same, in jiffies.
    last_jiffies: u64,
}

#[map]
static SYSCALL_TICK: PerCpuArray<Tick> = PerCpuArray::with_max_entries(1, 0);

/// Set by the loader: take the user stack of one syscall in this many at the most (0: none).
#[unsafe(no_mangle)]
static SYSCALL_STACK_EVERY: u64 = 0;

/// Set by the loader: time one syscall in about this many per thread (1: every one; 0: none).
#[unsafe(no_mangle)]
static SYSCALL_TIME_EVERY: u64 = 1;

/// Set by the loader: timed calls each thread gets in a budget period, every one of them,
/// before its calls are drawn one in `SYSCALL_TIME_EVERY` (0: no budget, the draw alone).
#[unsafe(no_mangle)]
static SYSCALL_TIME_BUDGET: u64 = 0;

/// Whether the call entering in `e` (its thread's slot) is timed, and its weight (1 over the
/// chance it had) in `e.weight`:
/// - every call, or none;
/// - under a budget (the default), every call until the thread has had its budget of timed
///   calls in the period, then each with a chance of 1 in N, drawn independently: a thread
///   that calls rarely is timed exactly, a hot loop pays for counting and a few draws;
/// - without one, one in about N by the thread's own countdown, drawn at random so that a
///   loop of a few syscalls is not always timed at the same one.
///
/// The chance is known before the call runs, so the weighted figures are unbiased.
#[inline(always)]
fn timed_call(e: &mut InFlight) -> bool {
    // SAFETY: read-only globals the loader rewrites before load.
    let (every, budget) = unsafe {
        (
            core::ptr::read_volatile(&SYSCALL_TIME_EVERY),
            core::ptr::read_volatile(&SYSCALL_TIME_BUDGET),
        )
    };
    e.weight = 1;
    if every <= 1 {
        return every == 1;
    }
    if budget == 0 {
        if e.untimed_left > 0 {
            e.untimed_left -= 1;
            return false;
        }
        e.untimed_left = (countdown(every) - 1) as u32;
        e.weight = every as u32;
        return true;
    }
    // A new tick may have ended the period: the exact clock is read at most once a tick, the
    // tick itself being a plain load.
    // SAFETY: a helper with no arguments.
    let tick = unsafe { bpf_jiffies64() };
    if tick != e.budget_tick {
        e.budget_tick = tick;
        // SAFETY: as above.
        let now = unsafe { bpf_ktime_get_ns() };
        if now.wrapping_sub(e.budget_from) >= SYSCALL_BUDGET_PERIOD_NS {
            e.budget_from = now;
            e.budget_left = budget as u32;
        }
    }
    if e.budget_left > 0 {
        e.budget_left -= 1;
        return true;
    }
    // SAFETY: a helper with no arguments.
    if !(unsafe { bpf_get_prandom_u32() } as u64).is_multiple_of(every) {
        return false;
    }
    e.weight = every as u32;
    true
}

/// Set by the loader: the least time between two syscall stacks on one CPU, ns (0: no
/// limit). Where syscalls come faster than `SYSCALL_STACK_EVERY` of them in this time, the
/// interval doubles, up to `MAX_EVERY`; where they come slower, it halves back, and after a
/// quiet spell it starts again from `SYSCALL_STACK_EVERY`.
#[unsafe(no_mangle)]
static SYSCALL_STACK_GAP_NS: u64 = 0;

const MAX_EVERY: u64 = 1 << 20;

/// Ticks without a syscall stack after which a CPU's interval starts again from the least.
const QUIET_JIFFIES: u64 = 2;

/// Whether syscall stacks are taken at all.
#[inline(always)]
fn syscall_stacks_on() -> bool {
    // SAFETY: a read-only global the loader rewrites before load.
    unsafe { core::ptr::read_volatile(&SYSCALL_STACK_EVERY) != 0 }
}

/// A countdown with mean `n`: uniform in [1, 2n - 1].
#[inline(always)]
fn countdown(n: u64) -> u64 {
    if n <= 1 {
        return 1;
    }
    // SAFETY: a helper with no arguments.
    1 + unsafe { bpf_get_prandom_u32() } as u64 % (2 * n - 1)
}

/// Samples the user stack of one syscall entry in about N, per CPU, N being
/// `SYSCALL_STACK_EVERY` or, under a syscall rate above the budget, more. Each stack taken
/// stands for the calls counted since the one before on its CPU, its weight, so the counts by
/// stack add up to the calls whatever N was. The exact clock is read only when a stack is
/// due; the test for a quiet spell, at every call, reads jiffies instead, a plain load (the
/// coarse clock is refused to tracing programs): two ticks without a stack, 8 ms at HZ=250,
/// about the four gaps that the exact clock tested for at the default rate.
#[inline(always)]
fn sample_stack(ctx: &RawTracePointContext, pid_tgid: u64, nr: u64) {
    // SAFETY: a read-only global the loader rewrites before load.
    let least = unsafe { core::ptr::read_volatile(&SYSCALL_STACK_EVERY) };
    let Some(t) = SYSCALL_TICK.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: the per-CPU slot; programs on one CPU do not run concurrently.
    let t = unsafe { &mut *t };
    // SAFETY: a read-only global the loader rewrites before load.
    let gap = unsafe { core::ptr::read_volatile(&SYSCALL_STACK_GAP_NS) };
    if gap != 0
        && t.every > least
        // SAFETY: a helper with no arguments.
        && unsafe { bpf_jiffies64() }.saturating_sub(t.last_jiffies) >= QUIET_JIFFIES
    {
        // Quiet since the last stack: back to the configured interval, so that a burst's
        // large one does not hold the next stack back for long.
        t.every = least;
        t.target = 0;
    }
    let n = if t.every < least { least } else { t.every };
    if t.target == 0 {
        t.target = countdown(n);
    }
    t.calls += 1;
    if t.calls < t.target {
        return;
    }
    let weight = t.calls;
    t.calls = 0;
    let mut next = n;
    if gap != 0 {
        // SAFETY: helpers with no arguments.
        let now = unsafe { bpf_ktime_get_ns() };
        t.last_jiffies = unsafe { bpf_jiffies64() };
        let since = now.saturating_sub(t.last);
        t.last = now;
        next = if since < gap {
            if n < MAX_EVERY { n * 2 } else { n }
        } else if since > 4 * gap && n > least {
            n / 2
        } else {
            n
        };
        t.every = next;
    }
    t.target = countdown(next);
    let key = SyscallStackKey {
        tgid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        nr: nr as u32,
        user_stack: user_stack(ctx, unwind::SLOT_RAW_TRACEPOINT, true),
    };
    add(&SYSCALL_STACKS, &key, weight);
}

const NR_FUTEX: u64 = 202;
const NR_FUTEX_WAITV: u64 = 449;
const NR_FUTEX_WAIT: u64 = 455;
/// pt_regs offsets of the first two syscall arguments on x86_64 (di, si).
const REGS_DI: usize = 112;
const REGS_SI: usize = 104;

/// For a futex syscall that waits, the futex word's address (0 for futex_waitv).
#[inline(always)]
fn futex_wait_addr(ctx: &RawTracePointContext, nr: u64) -> Option<u64> {
    match nr {
        NR_FUTEX => {
            let regs: *const u8 = ctx.arg(0);
            // SAFETY: the syscall's saved registers; a failed read reads as "not a wait".
            let (uaddr, op) = unsafe {
                (
                    bpf_probe_read_kernel(regs.add(REGS_DI) as *const u64).ok()?,
                    bpf_probe_read_kernel(regs.add(REGS_SI) as *const u64).ok()?,
                )
            };
            // FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI, FUTEX_LOCK_PI2
            match op & 0x7f {
                0 | 6 | 9 | 11 | 13 => Some(uaddr),
                _ => None,
            }
        }
        NR_FUTEX_WAIT => {
            let regs: *const u8 = ctx.arg(0);
            // SAFETY: as above.
            unsafe { bpf_probe_read_kernel(regs.add(REGS_DI) as *const u64).ok() }
        }
        NR_FUTEX_WAITV => Some(0),
        _ => None,
    }
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter(ctx: RawTracePointContext) -> i32 {
    try_sys_enter(&ctx);
    0
}

#[inline(always)]
fn try_sys_enter(ctx: &RawTracePointContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) {
        return;
    }
    // sys_enter(struct pt_regs *regs, long id)
    let nr: u64 = ctx.arg(1);
    // The kernel's own trampolines for uprobes and uretprobes (ours, for --uprobe-span) enter
    // through these; they are not the target's syscalls.
    if nr == NR_URETPROBE || nr == NR_UPROBE || !recorded(nr) {
        return;
    }
    // The start flag is read only where the entry counts something itself: an ordinary
    // call is counted at its exit.
    if syscall_stacks_on() && recording() {
        sample_stack(ctx, pid_tgid, nr);
    }
    if nr == NR_EXIT as u64 || nr == NR_EXIT_GROUP as u64 {
        if recording()
            && let Some(s) = stats(nr)
        {
            // SAFETY: a per-CPU slot.
            unsafe { (*s).count += 1 };
        }
        return;
    }
    let Some(e) = slot(pid_tgid) else { return };
    // SAFETY: the slot belongs to this thread (a clash is detected below and at exit).
    let e = unsafe { &mut *e };
    if e.ts != 0 && e.pid_tgid != pid_tgid {
        // Another thread is inside a syscall in this slot (pid_max exceeds the array).
        drop_event(drops::INFLIGHT_FULL);
        return;
    }
    if e.offcpu_pending != 0 && e.pid_tgid == pid_tgid {
        // Waiting for the exit of a syscall this thread was never in (it was off CPU for
        // another reason when the recording began): no stack to give it.
        e.offcpu_pending = 0;
        discard_pending(pid_tgid as u32);
    }
    e.pid_tgid = pid_tgid;
    e.nr = nr;
    e.offcpu_pending = 0;
    match futex_wait_addr(ctx, nr) {
        Some(uaddr) => {
            e.futex_wait = 1;
            e.uaddr = uaddr;
            e.user_stack = if stacks_on() {
                user_stack(ctx, unwind::SLOT_RAW_TRACEPOINT, true)
            } else {
                -1
            };
        }
        None => e.futex_wait = 0,
    }
    // Read last, so that no walk above is the syscall's time. A futex wait is always timed:
    // lock waits are totals.
    let timed = if e.futex_wait != 0 {
        e.weight = 1;
        true
    } else {
        timed_call(e)
    };
    e.ts = if timed {
        // SAFETY: a helper with no arguments.
        unsafe { bpf_ktime_get_ns() }
    } else {
        InFlight::UNTIMED
    };
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(ctx: RawTracePointContext) -> i32 {
    try_sys_exit(&ctx);
    0
}

#[inline(always)]
fn try_sys_exit(ctx: &RawTracePointContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    // The in-flight slot is the filter: only target threads fill one.
    let Some(e) = slot(pid_tgid) else { return };
    // SAFETY: only this thread writes its own slot (see `INFLIGHT`).
    let e = unsafe { &mut *e };
    if e.pid_tgid != pid_tgid {
        return;
    }
    // Still the registers the thread went off CPU with: the user stack of an interval that
    // waits for it is walked last, by tail call (also for a thread that was inside this
    // syscall when the recording began: its slot holds only this flag).
    let pending = e.offcpu_pending != 0;
    e.offcpu_pending = 0;
    if e.ts != 0 {
        exit_counts(e, pid_tgid, ctx.arg(1));
    }
    if pending {
        // SAFETY: the program array holds this program type's walk; a failed call is a lost
        // stack, nothing more.
        unsafe { SYSCALL_JUMP.tail_call(ctx, 0) };
    }
}

/// `sys_exit_walk`: the user stack of an off-CPU interval that waited for this syscall's exit.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit_walk(ctx: RawTracePointContext) -> i32 {
    walk_then_finish(&ctx, unwind::SLOT_RAW_TRACEPOINT, &SYSCALL_JUMP);
    0
}

/// `sys_exit_finish`: that interval recorded with its user stack.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit_finish(_ctx: RawTracePointContext) -> i32 {
    let tid = bpf_get_current_pid_tgid() as u32;
    flush_pending(tid, walked(unwind::SLOT_RAW_TRACEPOINT));
    0
}

/// A syscall's exit: its count, latency and error.
#[inline(always)]
fn exit_counts(e: &mut InFlight, pid_tgid: u64, ret: i64) {
    let timed = e.ts != InFlight::UNTIMED;
    let took = if timed {
        // SAFETY: a helper with no arguments.
        unsafe { bpf_ktime_get_ns() }.saturating_sub(e.ts)
    } else {
        0
    };
    let nr = e.nr;
    let entered = e.ts;
    e.ts = 0;
    // Counted at its exit: a syscall belongs to the window it returns in.
    if !recording() {
        return;
    }
    if e.futex_wait != 0 {
        futex_done((pid_tgid >> 32) as u32, e.uaddr, e.user_stack, took, ret);
    }
    if timed && timeline::on() {
        let tid = pid_tgid as u32;
        if e.futex_wait != 0 {
            timeline::emit(tl::FUTEX, entered, took, tid, nr as u32, ret as u32, 0);
        } else if took >= timeline::syscall_threshold() {
            timeline::emit(tl::SYSCALL, entered, took, tid, nr as u32, ret as u32, 0);
        }
    }

    let Some(s) = stats(nr) else { return };
    // SAFETY: a per-CPU slot.
    let s = unsafe { &mut *s };
    s.count += 1;
    if timed {
        s.time(took, e.weight as u64);
    }
    if (-MAX_ERRNO..0).contains(&ret) {
        s.errors += 1;
        count_errno(nr as u32, (-ret) as u32);
    }
}

#[inline(always)]
fn stats(nr: u64) -> Option<*mut SyscallStats> {
    if nr >= MAX_SYSCALLS as u64 {
        drop_event(drops::SYSCALL_NR);
        return None;
    }
    SYSCALLS.get_ptr_mut(nr as u32)
}

#[inline(always)]
fn count_errno(nr: u32, errno: u32) {
    let key = ErrnoKey { nr, errno };
    if let Some(c) = ERRNOS.get_ptr_mut(key) {
        // SAFETY: a per-CPU value.
        unsafe { *c += 1 };
    } else if ERRNOS.insert(key, 1u64, 0).is_err() {
        drop_event(drops::ERRNOS_FULL);
    }
}
