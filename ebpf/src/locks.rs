//! Lock waits: futex waits (from the syscall probes, see `syscalls.rs`), kernel lock
//! contention (`lock:contention_begin/end`, BTF tracepoints: they fire host-wide, and fill no
//! trace record for the tasks turned away).

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map},
    maps::{Array, HashMap, PerCpuArray},
    programs::BtfTracePointContext,
};
use switchyard_common::{FutexKey, FutexStats, WaitStats, drops};

use crate::{
    shared::{drop_event, inflight_mask, is_target, recording},
    stacks::KEYS,
};

#[map]
static FUTEXES: HashMap<FutexKey, FutexStats> = HashMap::with_max_entries(KEYS, 0);

#[map]
static FUTEX_WAITS: PerCpuArray<WaitStats> = PerCpuArray::with_max_entries(1, 0);

#[map]
static LOCK_CONTENTION: PerCpuArray<WaitStats> = PerCpuArray::with_max_entries(1, 0);

/// Sized by the loader like INFLIGHT.
#[map]
static LOCK_INFLIGHT: Array<u64> = Array::with_max_entries(1, 0);

const ETIMEDOUT: i64 = 110;
const EAGAIN: i64 = 11;

#[inline(always)]
fn record(stats: *mut WaitStats, took: u64) {
    // SAFETY: a per-CPU slot.
    unsafe { &mut *stats }.add(took);
}

/// Called by `sys_exit` for a futex wait that began at `ts`.
#[inline(always)]
pub fn futex_done(tgid: u32, uaddr: u64, user_stack: i32, took: u64, ret: i64) {
    if let Some(s) = FUTEX_WAITS.get_ptr_mut(0) {
        record(s, took);
        // SAFETY: a per-CPU slot.
        let s = unsafe { &mut *s };
        if ret == -ETIMEDOUT {
            s.timeouts += 1;
        } else if ret == -EAGAIN {
            s.eagain += 1;
        }
    }
    let key = FutexKey {
        tgid,
        user_stack,
        uaddr,
    };
    match FUTEXES.get_ptr_mut(&key) {
        Some(v) => {
            // SAFETY: a live map value; other CPUs may add to the same key: atomic adds.
            unsafe {
                crate::stacks::atomic_add(&raw mut (*v).count, 1);
                crate::stacks::atomic_add(&raw mut (*v).total_ns, took);
            }
        }
        None => {
            let v = FutexStats {
                count: 1,
                total_ns: took,
            };
            if FUTEXES.insert(&key, &v, 0).is_err() {
                drop_event(drops::STACK_KEYS_FULL);
            }
        }
    }
}

/// contention_begin(void *lock, unsigned int flags)
#[btf_tracepoint(function = "contention_begin")]
pub fn contention_begin(ctx: BtfTracePointContext) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if is_target((pid_tgid >> 32) as u32)
        && let Some(slot) = LOCK_INFLIGHT.get_ptr_mut(pid_tgid as u32 & inflight_mask())
    {
        // SAFETY: this thread's slot.
        unsafe { *slot = bpf_ktime_get_ns() };
    }
    let _ = ctx;
    0
}

/// contention_end(void *lock, int ret)
#[btf_tracepoint(function = "contention_end")]
pub fn contention_end(ctx: BtfTracePointContext) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(slot) = LOCK_INFLIGHT.get_ptr_mut(pid_tgid as u32 & inflight_mask()) else {
        return 0;
    };
    // SAFETY: this thread's slot.
    let start = unsafe { *slot };
    if start == 0 || !is_target((pid_tgid >> 32) as u32) {
        return 0;
    }
    // SAFETY: as above.
    unsafe { *slot = 0 };
    if !recording() {
        return 0;
    }
    let took = unsafe { bpf_ktime_get_ns() }.saturating_sub(start);
    if let Some(s) = LOCK_CONTENTION.get_ptr_mut(0) {
        record(s, took);
        let ret: u64 = ctx.arg(1);
        if ret as i32 != 0 {
            // SAFETY: a per-CPU slot.
            unsafe { (*s).timeouts += 1 };
        }
    }
    0
}
