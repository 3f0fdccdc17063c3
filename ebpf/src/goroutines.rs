//! Goroutines with a Go span open, followed from thread to thread.
//!
//! A goroutine runs on a thread between `runtime.execute` and its leaving: it parks
//! (`runtime.gopark`, with a wait reason), yields or is preempted (`runtime.goschedImpl`,
//! `goyield_m`), comes back from a syscall with no P, or is suspended for a stack scan
//! (`runtime.preemptPark`). While on a thread, its time is the thread's counters (on CPU,
//! blocked, waiting for a CPU); off every thread it is parked, by reason, until
//! `runtime.ready`, then runnable (waiting in the Go scheduler) until it runs again. A
//! goroutine readied by the network poller is not seen through `ready`: its time from park
//! to run is parked time. Every probe is an entry probe; the arguments are read from Go's
//! register ABI (the first in rax, the third in rcx; the running g in r14).
//!
//! Only goroutines with an open instance have an entry (`GO_TRACKS`); the other goroutines
//! cost each probe a map lookup.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, generated::bpf_get_attach_cookie},
    macros::{map, uprobe},
    maps::HashMap,
    programs::ProbeContext,
};
use switchyard_common::{GO_PARK_SLOTS, GoTime, GoTrack, go_sched, unwind};

use crate::{
    shared::is_target,
    stacks::{stacks_on, user_stack},
    threads::{oncpu_so_far, running_thread_entry},
};

#[map]
static GO_TRACKS: HashMap<u64, GoTrack> = HashMap::with_max_entries(16384, 0);

/// Thread `tid`'s time on CPU, blocked and waiting for a CPU, so far. The thread is the
/// probe's own: a goroutine runs on it, or has just left it.
#[inline(always)]
fn counters(tid: u32, now: u64) -> [u64; 3] {
    match running_thread_entry(tid, now) {
        // SAFETY: a live entry; only its own thread's programs and switches write it.
        Some(t) => {
            let t = unsafe { &*t };
            [oncpu_so_far(t, now), t.blocked_ns, t.runqueue_ns]
        }
        None => [0; 3],
    }
}

/// `tr` runs on thread `tid` from now.
#[inline(always)]
fn on_thread(tr: &mut GoTrack, tid: u32, now: u64) {
    tr.tid = tid;
    tr.state = go_sched::ON;
    tr.base = counters(tid, now);
}

/// `tr` leaves its thread now, into `state`; `tid`: the thread the probe runs on. A goroutine
/// followed on another thread left that one unseen: its time there is not known.
#[inline(always)]
fn off_thread(tr: &mut GoTrack, tid: u32, now: u64, state: u32, reason: u32) {
    if tr.state == go_sched::ON && tr.tid == tid && tid != 0 {
        let c = counters(tr.tid, now);
        tr.acc = add_since(tr.acc, c, tr.base);
    } else {
        // Off already (a leaving whose coming on was not seen): its time so far is kept.
        settle(tr, now, NO_WAKER);
    }
    tr.tid = 0;
    tr.state = state;
    tr.reason = reason;
    tr.off_at = now;
    tr.park_stack = -1;
}

/// Who made a goroutine ready: the thread, and its user stack (-1: not seen).
const NO_WAKER: (u32, i32) = (0, -1);

/// `tr`'s time off its thread, from `off_at` to now, into its parts; `waker`: who ends a
/// park now, when known.
#[inline(always)]
fn settle(tr: &mut GoTrack, now: u64, waker: (u32, i32)) {
    let took = now.saturating_sub(tr.off_at);
    if tr.off_at == 0 || took == 0 {
        return;
    }
    if tr.state == go_sched::RUNNABLE {
        tr.time.sched_ns += took;
    } else if tr.state == go_sched::PARKED {
        parked(&mut tr.time, tr.reason, took, tr.park_stack, waker);
    }
    tr.off_at = now;
}

/// `ns` parked for `reason` into its slot; a new slot keeps this park's stack, and a slot
/// the waker of its longest park seen.
#[inline(always)]
fn parked(t: &mut GoTime, reason: u32, ns: u64, user: i32, waker: (u32, i32)) {
    for i in 0..GO_PARK_SLOTS {
        let p = &mut t.parked[i];
        if p.reason == 0 {
            p.reason = reason;
            p.user_stack = user;
            p.waker_stack = -1;
        }
        if p.reason == reason {
            p.count += 1;
            p.ns += ns;
            if waker.1 >= 0 && ns > p.longest_ns {
                p.longest_ns = ns;
                p.waker_tid = waker.0;
                p.waker_stack = waker.1;
            }
            return;
        }
    }
    t.other_parked_ns += ns;
}

/// The current goroutine's user stack, when stacks are on.
#[inline(always)]
fn stack(ctx: &ProbeContext) -> i32 {
    if stacks_on() {
        user_stack(ctx, unwind::SLOT_UPROBE, false)
    } else {
        -1
    }
}

/// `tr`'s time on threads (on CPU, blocked, waiting for a CPU) so far, when it runs on `tid`.
#[inline(always)]
pub fn totals(tr: &GoTrack, tid: u32, now: u64) -> [u64; 3] {
    if tr.state == go_sched::ON && tr.tid == tid {
        add_since(tr.acc, counters(tid, now), tr.base)
    } else {
        tr.acc
    }
}

/// `acc` plus what the counters gained from `base` to `now`.
#[inline(always)]
fn add_since(acc: [u64; 3], now: [u64; 3], base: [u64; 3]) -> [u64; 3] {
    [
        acc[0] + now[0].saturating_sub(base[0]),
        acc[1] + now[1].saturating_sub(base[1]),
        acc[2] + now[2].saturating_sub(base[2]),
    ]
}

/// Goroutine `g`'s entry, created when an instance opens on it while it runs on `tid`.
#[inline(always)]
pub fn track(g: u64, tid: u32, now: u64) -> Option<&'static mut GoTrack> {
    if let Some(tr) = GO_TRACKS.get_ptr_mut(&g) {
        // SAFETY: a live map value; only the goroutine's own probes and the scheduler's
        // probes about it write it, one at a time (it is on one thread, or on none).
        let tr = unsafe { &mut *tr };
        if tr.state != go_sched::ON || tr.tid != tid {
            // Running, though its coming on was not seen.
            settle(tr, now, NO_WAKER);
            on_thread(tr, tid, now);
        }
        return Some(tr);
    }
    let mut tr = GoTrack {
        park_stack: -1,
        ..GoTrack::default()
    };
    on_thread(&mut tr, tid, now);
    GO_TRACKS.insert(&g, &tr, 0).ok()?;
    // SAFETY: as above.
    GO_TRACKS.get_ptr_mut(&g).map(|t| unsafe { &mut *t })
}

/// Goroutine `g`'s entry, if it has one.
#[inline(always)]
pub fn tracked(g: u64) -> Option<&'static mut GoTrack> {
    // SAFETY: as in `track`.
    GO_TRACKS.get_ptr_mut(&g).map(|t| unsafe { &mut *t })
}

/// One of `g`'s instances closed: its entry goes with the last.
#[inline(always)]
pub fn release(g: u64) {
    if let Some(tr) = tracked(g) {
        tr.open = tr.open.saturating_sub(1);
        if tr.open == 0 {
            let _ = GO_TRACKS.remove(&g);
        }
    }
}

/// The Go scheduler's functions (the cookie: `go_sched`'s kind), and `runtime.gcAssistAlloc`.
#[uprobe]
pub fn go_sched(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: the cookie the loader attached with.
    let kind = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) } as u32;
    // Each register read on its own: the verifier refuses a context read at a computed
    // offset. SAFETY: the probe's own registers.
    let (r14, rax, rcx) = unsafe {
        (
            core::ptr::read_volatile(&(*ctx.regs).r14),
            core::ptr::read_volatile(&(*ctx.regs).rax),
            core::ptr::read_volatile(&(*ctx.regs).rcx),
        )
    };
    // gopark and the assist run on the goroutine itself; the others on g0, given it.
    let g = match kind {
        go_sched::PARK | go_sched::ASSIST_ENTRY | go_sched::ASSIST_RETURN => r14,
        _ => rax,
    };
    let Some(tr) = tracked(g) else {
        return 0;
    };
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let tid = pid_tgid as u32;
    match kind {
        go_sched::EXECUTE => {
            settle(tr, now, NO_WAKER);
            on_thread(tr, tid, now);
        }
        go_sched::PARK => {
            off_thread(tr, tid, now, go_sched::PARKED, (rcx & 0xff) as u32 + 1);
            tr.park_stack = stack(&ctx);
        }
        go_sched::YIELD => off_thread(tr, tid, now, go_sched::RUNNABLE, 0),
        go_sched::PREEMPT_PARK => {
            off_thread(tr, tid, now, go_sched::PARKED, go_sched::PREEMPTED + 1);
        }
        go_sched::ASSIST_ENTRY => {
            let c = totals(tr, tid, now);
            tr.assist_from = c[0] + 1;
            tr.assist_runqueue_from = c[2];
        }
        go_sched::ASSIST_RETURN if tr.assist_from != 0 => {
            let c = totals(tr, tid, now);
            tr.time.assist_ns += c[0].saturating_sub(tr.assist_from - 1);
            tr.time.assist_runqueue_ns += c[2].saturating_sub(tr.assist_runqueue_from);
            tr.assist_from = 0;
        }
        _ => {}
    }
    0
}

/// `runtime.ready(gp, …)`: a goroutine made ready to run, and by whom. A program of its own,
/// so that each program walks one stack (the verifier explores a walk once per way into it).
/// `ready` runs on the system stack (`goready` calls it through `runtime.systemstack`),
/// which keeps the waking goroutine's frame pointer: the walk from here crosses to that
/// goroutine's own frames, where it released what the parked one waited for.
#[uprobe]
pub fn go_ready(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: the probe's own registers: the first argument, in Go's register ABI.
    let g = unsafe { core::ptr::read_volatile(&(*ctx.regs).rax) };
    let Some(tr) = tracked(g) else {
        return 0;
    };
    if tr.state != go_sched::PARKED {
        return 0;
    }
    let waker = (pid_tgid as u32, stack(&ctx));
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    settle(tr, now, waker);
    tr.state = go_sched::RUNNABLE;
    tr.off_at = now;
    0
}
