//! Which syscall each thread is inside: written by the syscall programs at entry and exit,
//! read by the scheduler's when a thread switches inside one. Apart from both so that
//! neither imports the other.

use aya_ebpf::{macros::map, maps::Array};
use switchyard_common::InFlight;

use crate::shared::inflight_mask;

/// The syscall each thread is inside, in the slot `tid & INFLIGHT_MASK`. An array, not a hash:
/// its lookup is inlined by the verifier, which is most of the difference between adding
/// ~50 ns and ~300 ns per syscall. The loader sizes it to cover pid_max when it can, so slots
/// are then exact; beyond that a clash is detected by `pid_tgid` and counted as a drop.
#[map]
static INFLIGHT: Array<InFlight> = Array::with_max_entries(1, 0);

/// Thread `pid_tgid`'s slot, whoever holds it.
#[inline(always)]
pub fn slot(pid_tgid: u64) -> Option<*mut InFlight> {
    INFLIGHT.get_ptr_mut(pid_tgid as u32 & inflight_mask())
}

/// The syscall thread `pid_tgid` is inside, if the probes follow it.
#[inline(always)]
pub fn in_syscall(pid_tgid: u64) -> Option<*mut InFlight> {
    let e = slot(pid_tgid)?;
    // SAFETY: a live array value; a stale or clashing slot is told apart by `pid_tgid`.
    let v = unsafe { &*e };
    (v.ts != 0 && v.pid_tgid == pid_tgid).then_some(e)
}
