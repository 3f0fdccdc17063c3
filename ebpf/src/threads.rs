//! Each target thread's entry: its switches, times and the span open on it. Read and
//! written by the switch, wakeup, syscall, sampling and span programs, each in a context
//! where the thread's own switches are not running (see `sched`).

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST},
    macros::map,
    maps::{Array, HashMap, PerCpuArray},
};
use switchyard_common::{MAX_THREADS, ThreadStats, drops};

use crate::shared::{drop_event, recording, start_ns};

/// Each thread's state, in the slot `tid & THREAD_MASK`. An array, not a hash: its lookup is
/// inlined by the verifier, where a hash lookup cost ~60 ns here, and a switch between two
/// target threads makes two. The loader sizes it to cover pid_max up to `MAX_THREAD_SLOTS`:
/// where pid_max is no larger (the kernel's default of 32,768) no two threads share a slot;
/// where it is (systemd raises it to 4,194,304), a thread whose slot another thread holds goes
/// to `THREAD_SPILL`.
#[map]
static THREADS: Array<ThreadStats> = Array::with_max_entries(1, 0);

/// Who holds each claimed `THREADS` slot: claimed here with `BPF_NOEXIST` (atomic, so two
/// CPUs cannot both take a free slot), released by user space with the exited thread.
#[map]
static THREAD_CLAIMS: HashMap<u32, u32> = HashMap::with_max_entries(1, 0);

/// Threads whose `THREADS` slot another thread held when they were first seen.
#[map]
static THREAD_SPILL: HashMap<u32, ThreadStats> =
    HashMap::with_max_entries(MAX_THREADS, BPF_F_NO_PREALLOC);

/// One zeroed entry, the template for a new thread's entry.
#[map]
static ZERO_THREAD: PerCpuArray<ThreadStats> = PerCpuArray::with_max_entries(1, 0);

/// The time of the last switch reported on this CPU.
///
/// Some switches are never reported: on this machine kind, a switch to one of the
/// hypervisor agent's threads is reported, but not the switch back from it, so the thread
/// that runs next was never seen to switch in. When such a thread switches out, its
/// switch-in is taken to be this CPU's last reported switch, the latest it can have been
/// seen: its on-CPU and off-CPU intervals then still add up to the window, never overlap.
#[map]
pub static LAST_SWITCH: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Set by the loader before load: `THREADS`' size minus one.
#[unsafe(no_mangle)]
static THREAD_MASK: u32 = 0;

/// Thread `tid`'s entry, if it has one.
#[inline(always)]
pub fn thread(tid: u32) -> Option<*mut ThreadStats> {
    // A free slot's tid is 0: the idle task never has an entry.
    if tid == 0 {
        return None;
    }
    // SAFETY: a read-only global the loader rewrites before load.
    let slot = tid & unsafe { core::ptr::read_volatile(&THREAD_MASK) };
    let t = THREADS.get_ptr_mut(slot)?;
    // SAFETY: a live array value; whose it is, its `tid` says.
    if unsafe { (*t).tid } == tid {
        return Some(t);
    }
    THREAD_SPILL.get_ptr_mut(&tid)
}

/// The entry of thread `tid`, created zeroed when it has none.
#[inline(always)]
pub fn thread_entry(tid: u32) -> Option<*mut ThreadStats> {
    if let Some(t) = thread(tid) {
        return Some(t);
    }
    // SAFETY: a read-only global the loader rewrites before load.
    let slot = tid & unsafe { core::ptr::read_volatile(&THREAD_MASK) };
    let t = THREADS.get_ptr_mut(slot)?;
    let zero = ZERO_THREAD.get_ptr(0)?;
    // SAFETY: a live array value; 0 is a free slot's tid.
    if unsafe { (*t).tid } == 0
        && THREAD_CLAIMS
            .insert(&slot, &tid, BPF_NOEXIST as u64)
            .is_ok()
    {
        // SAFETY: the slot is this thread's now; the template is only ever read.
        unsafe {
            *t = *zero;
            (*t).tid = tid;
        }
        return Some(t);
    }
    // SAFETY: a live map value, only ever read.
    if THREAD_SPILL
        .insert(&tid, unsafe { &*zero }, BPF_NOEXIST as u64)
        .is_err()
    {
        drop_event(drops::THREADS_FULL);
        return None;
    }
    let s = THREAD_SPILL.get_ptr_mut(&tid)?;
    // SAFETY: the new entry, this thread's.
    unsafe { (*s).tid = tid };
    Some(s)
}

/// The time on CPU so far, counted to `now`, of the thread that runs now (a probe in it
/// fired): its switch-outs add what ran before them, the run in progress is added here. When
/// its switch-in was not reported (see `LAST_SWITCH`), the run began at this CPU's last
/// reported switch, as its switch-out will take it: counted from its last switch-in instead,
/// the time it spent off CPU since would count as on CPU, and again at that switch-out.
#[inline(always)]
pub fn oncpu_so_far(t: &ThreadStats, now: u64) -> u64 {
    let start = start_ns();
    let since = if t.last_out != 0 && t.last_in <= t.last_out {
        // No earlier than the start either, as the switch-out takes it: a thread seeded
        // asleep has `last_out` 1, and this CPU may have reported no switch yet.
        let here = LAST_SWITCH.get(0).copied().unwrap_or(0);
        here.max(t.last_out).max(start)
    } else if t.last_in != 0 {
        t.last_in
    } else {
        start
    };
    t.oncpu_ns + now.saturating_sub(since)
}

/// The entry of thread `tid`, which runs now (a probe in it fired): one created here while
/// recording starts its time on CPU now. Created zeroed, its next switch-in would take the
/// thread as off CPU since the recording's start, and its time on CPU as counted from the
/// start too. Before the start it stays zeroed: the switches that follow are not seen until
/// then, and a thread that blocks before the start and sleeps through the recording would
/// read as on CPU for all of it.
#[inline(always)]
pub fn running_thread_entry(tid: u32, now: u64) -> Option<*mut ThreadStats> {
    if let Some(t) = thread(tid) {
        return Some(t);
    }
    let t = thread_entry(tid)?;
    if !recording() {
        return Some(t);
    }
    // SAFETY: the entry is this running thread's, just made.
    unsafe {
        if (*t).last_in == 0 && (*t).last_out == 0 {
            (*t).last_in = now;
        }
    }
    Some(t)
}
