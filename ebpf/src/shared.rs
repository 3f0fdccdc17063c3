//! The target filter, the drop counters and the globals every program reads.

use aya_ebpf::{
    helpers::bpf_get_current_comm,
    macros::map,
    maps::{Array, HashMap, PerCpuArray},
};
use switchyard_common::{MAX_TARGETS, drops};

/// Set by the loader before load: the target's tgid.
#[unsafe(no_mangle)]
static TARGET_TGID: u32 = 0;

/// Set by the loader before load: 1 to follow child processes.
#[unsafe(no_mangle)]
static FOLLOW_CHILDREN: u8 = 0;

#[map]
pub static TARGETS: HashMap<u32, u8> = HashMap::with_max_entries(MAX_TARGETS, 0);

/// Written by the loader once every program is attached and the target's threads are known:
/// the recording's start (CLOCK_MONOTONIC ns). 0 before: nothing is timed yet.
#[map]
static START: Array<u64> = Array::with_max_entries(1, 0);

/// The recording's start, or 0 while the probes are still being set up.
#[inline(always)]
pub fn start_ns() -> u64 {
    START.get(0).copied().unwrap_or(0)
}

/// Between the start and the stop: counts are only taken then. Attaching before the start and
/// detaching after the stop take a second or more (every detach waits for an RCU grace
/// period); what a live target does meanwhile is outside the run's window.
#[inline(always)]
pub fn recording() -> bool {
    let start = start_ns();
    start != 0 && start != u64::MAX
}

#[map]
static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(drops::COUNT, 0);

/// Set by the loader: INFLIGHT's size minus one; thread slots of every per-thread array.
#[unsafe(no_mangle)]
static INFLIGHT_MASK: u32 = 0;

#[inline(always)]
pub fn inflight_mask() -> u32 {
    // SAFETY: a read-only global the loader rewrites before load.
    unsafe { core::ptr::read_volatile(&INFLIGHT_MASK) }
}

#[inline(always)]
pub fn follow_children() -> bool {
    // SAFETY: a read-only global the loader rewrites before load.
    unsafe { core::ptr::read_volatile(&FOLLOW_CHILDREN) != 0 }
}

/// How many child processes have been followed: until the first, `is_target` needs no hash
/// lookup (it runs for every switch and syscall on the host).
#[map]
pub static FOLLOWED: Array<u64> = Array::with_max_entries(1, 0);

/// True when `tgid` is the target or a followed child process.
#[inline(always)]
pub fn is_target(tgid: u32) -> bool {
    // SAFETY: as above.
    let target = unsafe { core::ptr::read_volatile(&TARGET_TGID) };
    if tgid == target {
        return true;
    }
    FOLLOWED.get(0).copied().unwrap_or(0) != 0 && TARGETS.get_ptr(tgid).is_some()
}

/// The current task's name, NUL-padded, as two little-endian words.
#[inline(always)]
pub fn current_comm() -> [u64; 2] {
    let c = bpf_get_current_comm().unwrap_or([0; 16]);
    [
        u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        u64::from_ne_bytes([c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]]),
    ]
}

/// The flags every ring buffer output commits with: no wake-up. User space drains the rings
/// on its own timer and never sleeps on them, so the wake-up a commit would otherwise raise
/// when the reader has caught up (an irq_work self-interrupt, which exits to the hypervisor
/// in a VM) would be paid by the target for nothing.
pub const RING_NO_WAKEUP: u64 = 1;

/// Counts one event that could not be recorded.
#[inline(always)]
pub fn drop_event(reason: u32) {
    if let Some(slot) = DROPS.get_ptr_mut(reason) {
        // SAFETY: a per-CPU slot; programs on one CPU do not run concurrently.
        unsafe { *slot += 1 };
    }
}

/// One step of a stack's hash: the frames so far, and the next word.
#[inline(always)]
pub fn mix(hash: u64, word: u64) -> u64 {
    (hash.rotate_left(5) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
