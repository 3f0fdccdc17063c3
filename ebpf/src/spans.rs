//! Spans (`--span`): one request, from a function's entry (a uprobe) to its return (a
//! uretprobe) on one thread, measured one by one.
//!
//! The instance open on a thread lives in the thread's own entry (`ThreadStats::span`). Its
//! entry keeps the thread's counters; its return turns them into the instance's time on CPU,
//! blocked and waiting for a CPU. Meanwhile the switch program adds each interval off CPU by
//! its stacks and waker, and each wait for a CPU by the task that held it; the on-CPU sampler
//! adds its samples by stack. At the return every duration goes into the span's histogram,
//! and only an instance at least as slow as the threshold user space keeps (or one in N of
//! the others, for contrast) crosses to user space whole.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user,
        generated::bpf_get_attach_cookie,
    },
    macros::{map, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray, RingBuf},
    programs::{ProbeContext, RetProbeContext},
};
use switchyard_common::{
    GO_PARK_SLOTS, GoTime, MAX_SPANS, SPAN_CTL_WORDS, SPAN_HOLDERS, SPAN_PARTS, SPAN_SITES,
    SpanHist, SpanInstance, ThreadStats, drops, span_bucket, span_flags,
};

use crate::{
    goroutines::{release, totals, track},
    shared::{RING_NO_WAKEUP, current_comm, drop_event, is_target, mix, recording, start_ns},
    threads::{oncpu_so_far, running_thread_entry, thread},
};

/// Every span's durations (the figures' count, total, longest and histogram are read from it).
#[map]
static SPAN_HIST: PerCpuArray<SpanHist> = PerCpuArray::with_max_entries(MAX_SPANS, 0);

#[map]
static SPAN_CTL: Array<u64> = Array::with_max_entries(SPAN_CTL_WORDS * MAX_SPANS, 0);

/// Sized by the loader; one page without spans.
#[map]
static SPAN_EVENTS: RingBuf = RingBuf::with_byte_size(4096, 0);

/// The Go span open on each goroutine, by its g.
#[map]
static GO_SPANS: HashMap<u64, SpanInstance> = HashMap::with_max_entries(16384, 0);

/// Where a Go instance is built before it goes into `GO_SPANS` (too big for the stack).
#[map]
static GO_SCRATCH: PerCpuArray<SpanInstance> = PerCpuArray::with_max_entries(1, 0);

/// Set by the loader before load: how many spans are recorded.
#[unsafe(no_mangle)]
static SPAN_COUNT: u32 = 0;

/// The index of the span whose probe runs: the cookie the loader attached it with. With one
/// span (the usual case) it is 0, and the helper call is saved: on this kind of host a helper
/// call costs more than the rest of an entry's bookkeeping together.
#[inline(always)]
fn span_index(ctx: *mut core::ffi::c_void) -> u32 {
    // SAFETY: a read-only global the loader rewrites before load.
    if unsafe { core::ptr::read_volatile(&SPAN_COUNT) } <= 1 {
        return 0;
    }
    // SAFETY: the cookie the loader attached with: the span's index.
    unsafe { bpf_get_attach_cookie(ctx) as u32 }
}

#[inline(always)]
fn hist(span: u32) -> Option<&'static mut SpanHist> {
    // SAFETY: a per-CPU slot; programs on one CPU do not run concurrently.
    SPAN_HIST.get_ptr_mut(span).map(|h| unsafe { &mut *h })
}

#[uprobe]
pub fn span_enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) {
        return 0;
    }
    let span = span_index(ctx.as_ptr());
    if span >= MAX_SPANS {
        return 0;
    }
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let Some(t) = running_thread_entry(pid_tgid as u32, now) else {
        return 0;
    };
    // SAFETY: the thread runs here, so its switches are not writing its entry.
    let t = unsafe { &mut *t };
    let on = recording();
    if t.span.index != 0 {
        t.span.depth += 1;
        if on && let Some(h) = hist(span) {
            h.nested += 1;
        }
        return 0;
    }
    let oncpu = oncpu_so_far(t, now);
    let (blocked, runqueue) = (t.blocked_ns, t.runqueue_ns);
    let flags = if on { 0 } else { span_flags::OPEN_AT_START };
    begin(
        &mut t.span,
        span,
        flags,
        pid_tgid,
        now,
        [oncpu, blocked, runqueue],
    );
    0
}

#[uretprobe]
pub fn span_exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) {
        return 0;
    }
    let on = recording();
    let Some(t) = thread(pid_tgid as u32) else {
        return 0;
    };
    // SAFETY: as in `span_enter`.
    let t = unsafe { &mut *t };
    if t.span.index == 0 {
        // Entered before this entry probe was placed.
        let span = span_index(ctx.as_ptr());
        if on && let Some(h) = hist(span) {
            h.open_at_start += 1;
        }
        return 0;
    }
    if t.span.depth != 0 {
        t.span.depth -= 1;
        return 0;
    }
    // Returning before the start: entered and returned outside the recording. After the
    // stop: left open, user space counts it so.
    if !on {
        if start_ns() == 0 {
            t.span.index = 0;
        }
        return 0;
    }
    let span = t.span.index - 1;
    if span >= MAX_SPANS {
        t.span.index = 0;
        return 0;
    }
    if t.span.flags & span_flags::OPEN_AT_START != 0 {
        t.span.index = 0;
        if let Some(h) = hist(span) {
            h.open_at_start += 1;
        }
        return 0;
    }
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let oncpu = oncpu_so_far(t, now);
    let (blocked, runqueue) = (t.blocked_ns, t.runqueue_ns);
    let s = &mut t.span;
    s.oncpu_ns = oncpu.saturating_sub(s.oncpu_ns);
    s.blocked_ns = blocked.saturating_sub(s.blocked_ns);
    s.runqueue_ns = runqueue.saturating_sub(s.runqueue_ns);
    finish(s, span, now, pid_tgid as u32, 0);
    s.index = 0;
    0
}

/// A new instance of span `span` in `s`, entered now by `pid_tgid`; `counters`: the thread's
/// (a Go span's: the goroutine's) time on CPU, blocked and waiting for a CPU so far.
#[inline(always)]
fn begin(s: &mut SpanInstance, span: u32, flags: u32, pid_tgid: u64, now: u64, counters: [u64; 3]) {
    s.index = span + 1;
    s.flags = flags;
    s.tgid = (pid_tgid >> 32) as u32;
    s.tid = pid_tgid as u32;
    s.end_tid = 0;
    s.depth = 0;
    s.pending_part = 0;
    s.start = now;
    s.end = 0;
    s.depth_bytes = 0;
    s.oncpu_ns = counters[0];
    s.blocked_ns = counters[1];
    s.runqueue_ns = counters[2];
    s.other_blocked_ns = 0;
    s.other_held_ns = 0;
    s.samples = 0;
    s.used = 0;
}

/// Where `SpanInstance::used` counts each kind of slot.
const PARTS: u32 = 0;
const HOLDERS: u32 = 8;
const SITES: u32 = 16;

/// The slots of one kind in use.
#[inline(always)]
fn used(s: &SpanInstance, kind: u32) -> usize {
    ((s.used >> kind) & 0xff) as usize
}

/// `n` slots of one kind in use.
#[inline(always)]
fn set_used(s: &mut SpanInstance, kind: u32, n: usize) {
    s.used = (s.used & !(0xff << kind)) | ((n as u32) << kind);
}

/// The slots past their counts cleared, for an instance about to be sent (and a native
/// instance's Go part, which it never set).
#[inline(always)]
fn clear_unused(s: &mut SpanInstance, go: bool) {
    let (parts, holders, sites) = (used(s, PARTS), used(s, HOLDERS), used(s, SITES));
    for i in 0..SPAN_PARTS {
        if i >= parts {
            s.parts[i].ns = 0;
        }
    }
    for i in 0..SPAN_HOLDERS {
        if i >= holders {
            s.holders[i].ns = 0;
        }
    }
    for i in 0..SPAN_SITES {
        if i >= sites {
            s.sites[i].samples = 0;
        }
    }
    if !go {
        s.go = GoTime::default();
    }
}

/// Instance `s` of span `span` returns now on thread `tid`: its duration into the histograms,
/// and the instance whole to user space when it is at least as slow as the threshold, or
/// drawn as a typical one (or both). `kind`: flags it keeps (`span_flags::GO`).
#[inline(always)]
fn finish(s: &mut SpanInstance, span: u32, now: u64, tid: u32, kind: u32) {
    let took = now.saturating_sub(s.start);
    s.end = now;
    s.end_tid = tid;
    let mut h = hist(span);
    if let Some(h) = h.as_deref_mut() {
        h.count += 1;
        h.total_ns += took;
        if took > h.max_ns {
            h.max_ns = took;
        }
        let b = span_bucket(took);
        if b < h.buckets.len() {
            h.buckets[b] += 1;
        }
    }
    let ctl = SPAN_CTL_WORDS * span;
    let threshold = SPAN_CTL.get(ctl).copied().unwrap_or(0);
    // Until user space sets it (0), every instance is drawn.
    let every = SPAN_CTL.get(ctl + 1).copied().unwrap_or(0).max(1);
    let floor = SPAN_CTL.get(ctl + 2).copied().unwrap_or(0);
    // The typical sample is drawn from every instance, slow or not: the instances between
    // the threshold and the P99 are typical too, and a sample without them would miss
    // what slows them.
    let mut slow = 0;
    if took >= threshold {
        if took >= floor {
            slow = span_flags::SLOW;
        } else if let Some(h) = h {
            // User space would drop it: its table holds only slower ones.
            h.passed_over += 1;
        }
    }
    // The draw is the return time's bits, mixed: as uniform as a helper's random number for
    // this, without the helper call.
    let drawn = if (mix(now, took) >> 32).is_multiple_of(every) {
        span_flags::TYPICAL
    } else {
        0
    };
    let flag = slow | drawn;
    if flag != 0 {
        clear_unused(s, kind & span_flags::GO != 0);
        s.flags = kind | flag;
        if SPAN_EVENTS
            .output::<SpanInstance>(&*s, RING_NO_WAKEUP)
            .is_err()
        {
            drop_event(drops::SPAN_EVENTS_FULL);
        }
    }
}

/// An interval off CPU of thread `t`'s open span, ending now: `blocked` ns blocked (its stacks
/// and waker are the thread's own for the interval, as the switch program left them), then
/// `waiting` ns waiting for the CPU the current task (`holder`: its tgid and pid) held.
#[inline(always)]
pub fn interval(t: &ThreadStats, tid: u32, holder: u64, blocked: u64, waiting: u64) {
    if t.span.index == 0 || t.span.flags & span_flags::OPEN_AT_START != 0 {
        return;
    }
    span_interval(tid, holder, blocked, waiting);
}

/// [`interval`]'s work inside a span. A global function, verified once rather than on each
/// path of the switch program; it finds the thread's entry again, one array lookup that only
/// an interval inside a span pays.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn span_interval(tid: u32, holder: u64, blocked: u64, waiting: u64) -> u64 {
    let Some(t) = thread(tid) else {
        return 0;
    };
    // SAFETY: the entry of the thread switching in: only its own switches write it.
    let t = unsafe { &mut *t };
    if waiting != 0 {
        let (tgid, tid) = ((holder >> 32) as u32, holder as u32);
        let n = used(&t.span, HOLDERS);
        let mut placed = false;
        let mut grown = 0;
        for i in 0..SPAN_HOLDERS {
            let h = &mut t.span.holders[i];
            if i < n {
                if h.tid == tid {
                    h.ns += waiting;
                    placed = true;
                    break;
                }
                continue;
            }
            h.ns = waiting;
            h.tgid = tgid;
            h.tid = tid;
            h.comm = current_comm();
            placed = true;
            grown = i + 1;
            break;
        }
        if grown != 0 {
            set_used(&mut t.span, HOLDERS, grown);
        }
        if !placed {
            t.span.other_held_ns += waiting;
        }
    }
    if blocked == 0 {
        return 0;
    }
    let kernel = t.kernel_stack;
    let waker = if t.waker_set != 0 { t.waker_tid } else { 0 };
    let pending = t.pending != 0;
    let user = if pending { -1 } else { t.user_stack };
    let (held_ns, held_state, held_user) =
        (t.wake_held_ns, t.wake_held_state, t.wake_held_user_stack);
    t.wake_held_ns = 0;
    let (waker_tgid, waker_user, waker_kernel) = if waker != 0 {
        (t.waker_tgid, t.waker_user_stack, t.waker_kernel_stack)
    } else {
        (0, -1, -1)
    };
    let n = used(&t.span, PARTS);
    for i in 0..SPAN_PARTS {
        let p = &mut t.span.parts[i];
        let fresh = i >= n;
        if fresh || (p.kernel_stack == kernel && p.waker_tid == waker) {
            if fresh {
                p.ns = 0;
                p.count = 0;
                p.user_stack = user;
                p.kernel_stack = kernel;
                p.state = t.state;
                p.waker_tgid = waker_tgid;
                p.waker_tid = waker;
                p.waker_user_stack = waker_user;
                p.waker_kernel_stack = waker_kernel;
                p.held_ns = 0;
                p.held_state = held_state;
                p.held_user_stack = held_user;
            }
            p.ns += blocked;
            p.count += 1;
            p.held_ns += held_ns;
            let unwalked = pending && p.user_stack < 0;
            if unwalked {
                t.span.pending_part = i as u32 + 1;
            }
            if fresh {
                set_used(&mut t.span, PARTS, i + 1);
            }
            return 0;
        }
    }
    t.span.other_blocked_ns += blocked;
    0
}

/// The user stack of the interval that waited for it, walked where its syscall returned.
#[inline(always)]
pub fn pending_user_stack(t: &mut ThreadStats, user: i32) {
    let i = t.span.pending_part;
    if i == 0 {
        return;
    }
    t.span.pending_part = 0;
    let i = (i - 1) as usize;
    if i < SPAN_PARTS {
        t.span.parts[i].user_stack = user;
    }
}

/// An on-CPU sample of thread `t`, with its stacks.
#[inline(always)]
pub fn sample(t: &mut ThreadStats, user: i32, kernel: i32) {
    if t.span.index == 0 || t.span.flags & span_flags::OPEN_AT_START != 0 {
        return;
    }
    t.span.samples += 1;
    let n = used(&t.span, SITES);
    for i in 0..SPAN_SITES {
        let s = &mut t.span.sites[i];
        if i < n {
            if s.user_stack == user {
                s.samples += 1;
                return;
            }
            continue;
        }
        s.samples = 1;
        s.user_stack = user;
        s.kernel_stack = kernel;
        set_used(&mut t.span, SITES, i + 1);
        return;
    }
}

/// True when a span is open on thread `t`: its intervals off CPU are all walked.
#[inline(always)]
pub fn open(t: &ThreadStats) -> bool {
    t.span.index != 0
}

/// The running goroutine: Go's register ABI keeps it in r14 on amd64, at a function's body
/// and at its returns.
#[inline(always)]
fn goroutine(ctx: &ProbeContext) -> u64 {
    // SAFETY: the probe's own registers.
    unsafe { (*ctx.regs).r14 }
}

/// A Go span's key: its goroutine (an address below 2^47) and the span, in the top byte:
/// one goroutine can be inside two spans at once (a handler and a call it makes).
#[inline(always)]
fn go_key(g: u64, span: u32) -> u64 {
    g | ((span as u64 + 1) << 56)
}

/// How deep the goroutine's stack is at this probe, in bytes from its top (`g.stack.hi`, the
/// second word of the g): a stack that grows is copied, and every address on it moves, but
/// not its depth. At a function's body (past its stack check) and at its `RET`, the stack
/// pointer is at the return address: the same depth for one call.
#[inline(always)]
fn stack_depth(ctx: &ProbeContext, g: u64) -> u64 {
    // SAFETY: the probe's own registers; the g's words are read as user memory.
    let sp = unsafe { (*ctx.regs).rsp };
    let hi: u64 = unsafe { bpf_probe_read_user((g + 8) as *const u64) }.unwrap_or(0);
    hi.wrapping_sub(sp)
}

/// A Go function's entry, past its stack check: the instance is the goroutine's, wherever
/// it runs until it returns.
#[uprobe]
pub fn span_enter_go(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) {
        return 0;
    }
    let span = span_index(ctx.as_ptr());
    let g = goroutine(&ctx);
    if span >= MAX_SPANS || g == 0 {
        return 0;
    }
    let on = recording();
    let depth = stack_depth(&ctx, g);
    let key = go_key(g, span);
    if let Some(open) = GO_SPANS.get_ptr_mut(&key) {
        // SAFETY: a live map value; only this goroutine's probes touch its entry, and it
        // runs on one thread at a time.
        let open_depth = unsafe { (*open).depth_bytes };
        if depth > open_depth {
            // Deeper: a call inside the open instance.
            if on && let Some(h) = hist(span) {
                h.nested += 1;
            }
            return 0;
        }
        // At its depth or above: its return was never seen. This call replaces it.
        if on && let Some(h) = hist(span) {
            h.missed += 1;
        }
        release(g);
    }
    let Some(s) = GO_SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: the per-CPU scratch slot.
    let s = unsafe { &mut *s };
    let flags = span_flags::GO | if on { 0 } else { span_flags::OPEN_AT_START };
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let tid = pid_tgid as u32;
    let Some(tr) = track(g, tid, now) else {
        drop_event(drops::SPAN_EVENTS_FULL);
        return 0;
    };
    begin(s, span, flags, pid_tgid, now, totals(tr, tid, now));
    s.go = tr.time;
    s.depth_bytes = depth;
    if GO_SPANS.insert(&key, s, 0).is_err() {
        drop_event(drops::SPAN_EVENTS_FULL);
        return 0;
    }
    tr.open += 1;
    0
}

/// Instance `s` of goroutine `g` returns now on thread `tid`: its time on threads and off
/// them, from the goroutine's totals less those at its entry.
#[inline(always)]
fn go_parts(s: &mut SpanInstance, g: u64, tid: u32, now: u64) {
    let Some(tr) = crate::goroutines::tracked(g) else {
        return;
    };
    let c = totals(tr, tid, now);
    s.oncpu_ns = c[0].saturating_sub(s.oncpu_ns);
    s.blocked_ns = c[1].saturating_sub(s.blocked_ns);
    s.runqueue_ns = c[2].saturating_sub(s.runqueue_ns);
    let t = &tr.time;
    s.go.sched_ns = t.sched_ns.saturating_sub(s.go.sched_ns);
    s.go.assist_ns = t.assist_ns.saturating_sub(s.go.assist_ns);
    s.go.assist_runqueue_ns = t.assist_runqueue_ns.saturating_sub(s.go.assist_runqueue_ns);
    s.go.other_parked_ns = t.other_parked_ns.saturating_sub(s.go.other_parked_ns);
    // Slots are taken in order and never freed while the goroutine is followed: one
    // empty at the entry holds only time since.
    for i in 0..GO_PARK_SLOTS {
        let p = &mut s.go.parked[i];
        p.reason = t.parked[i].reason;
        p.user_stack = t.parked[i].user_stack;
        p.waker_tid = t.parked[i].waker_tid;
        p.waker_stack = t.parked[i].waker_stack;
        p.longest_ns = t.parked[i].longest_ns;
        p.ns = t.parked[i].ns.saturating_sub(p.ns);
        p.count = t.parked[i].count.saturating_sub(p.count);
    }
}

/// One of a Go function's `RET` instructions.
#[uprobe]
pub fn span_exit_go(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) {
        return 0;
    }
    let g = goroutine(&ctx);
    let on = recording();
    let span = span_index(ctx.as_ptr());
    if span >= MAX_SPANS {
        return 0;
    }
    let key = go_key(g, span);
    let Some(s) = GO_SPANS.get_ptr_mut(&key) else {
        // Entered before its entry probe was placed.
        if on && let Some(h) = hist(span) {
            h.open_at_start += 1;
        }
        return 0;
    };
    // SAFETY: a live map value (see `span_enter_go`).
    let s = unsafe { &mut *s };
    let depth = stack_depth(&ctx, g);
    if depth > s.depth_bytes {
        // A nested call's return.
        return 0;
    }
    if depth < s.depth_bytes {
        // Above the instance: its own return was never seen.
        let span = s.index.wrapping_sub(1);
        if on
            && span < MAX_SPANS
            && let Some(h) = hist(span)
        {
            h.missed += 1;
        }
        let _ = GO_SPANS.remove(&key);
        release(g);
        return 0;
    }
    // As a native span's (see `span_exit`).
    if !on {
        if start_ns() == 0 {
            let _ = GO_SPANS.remove(&key);
            release(g);
        }
        return 0;
    }
    let span = s.index.wrapping_sub(1);
    if span >= MAX_SPANS || s.flags & span_flags::OPEN_AT_START != 0 {
        if span < MAX_SPANS
            && let Some(h) = hist(span)
        {
            h.open_at_start += 1;
        }
        let _ = GO_SPANS.remove(&key);
        release(g);
        return 0;
    }
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    go_parts(s, g, pid_tgid as u32, now);
    finish(s, span, now, pid_tgid as u32, span_flags::GO);
    let _ = GO_SPANS.remove(&key);
    release(g);
    0
}
