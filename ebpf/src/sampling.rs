//! How off-CPU intervals are chosen for a stack walk: each interval of a thread is walked
//! with a probability that grows with its length (certain from `--offcpu-period` up), drawn
//! independently, and weighted by its inverse so the profiles stay unbiased. The switch and
//! wakeup programs choose with these; `SAMPLING` counts what was chosen.

use aya_ebpf::{helpers::generated::bpf_get_prandom_u32, macros::map, maps::PerCpuArray};
use switchyard_common::sampling;

#[map]
static SAMPLING: PerCpuArray<u64> = PerCpuArray::with_max_entries(sampling::COUNT, 0);

/// Set by the loader before load: the interval length from which every one is walked.
#[unsafe(no_mangle)]
static OFFCPU_PERIOD_NS: u64 = 0;

/// A thread's expected interval: an average of its last ones, the latest weighing 1/8.
#[inline(always)]
pub fn moving_average(average: u64, sample: u64) -> u64 {
    if average == 0 {
        sample
    } else {
        average - average / 8 + sample / 8
    }
}

/// The probability, in `sampling::ONE` units, of walking an interval of `ns`: 1 from one
/// period up, proportionally less below.
#[inline(always)]
pub fn sample_probability(ns: u64) -> u32 {
    // SAFETY: a read-only global the loader rewrites before load.
    let period = unsafe { core::ptr::read_volatile(&OFFCPU_PERIOD_NS) };
    if period == 0 || ns >= period {
        return sampling::ONE as u32;
    }
    let p = ns * sampling::ONE / period;
    if p == 0 { 1 } else { p as u32 }
}

/// Walks with probability `p`: the probability kept, or 0.
#[inline(always)]
pub fn draw(p: u32) -> u32 {
    if p as u64 >= sampling::ONE {
        return p;
    }
    // SAFETY: a helper with no arguments.
    let r = unsafe { bpf_get_prandom_u32() } as u64 & (sampling::ONE - 1);
    if r < p as u64 { p } else { 0 }
}

/// Counts one more of `index` (a `sampling` index) on this CPU.
#[inline(always)]
pub fn count(index: u32) {
    if let Some(c) = SAMPLING.get_ptr_mut(index) {
        // SAFETY: a per-CPU slot.
        unsafe { *c += 1 };
    }
}
