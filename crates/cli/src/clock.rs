//! The recording's two clocks: CLOCK_MONOTONIC, the clock of every kernel-side timestamp and
//! of a run's `*_mono_ns`, and the wall clock, kept in a run as Unix ns.

use std::time::{SystemTime, UNIX_EPOCH};

pub use switchyard_model::driver::monotonic_ns;

/// A wall-clock time as Unix ns (0 before the epoch).
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
