//! The spin lock: test-and-test-and-set. A taker tries one CAS 0→1; while that fails it
//! spins on a plain load (the cache line stays shared instead of bouncing between cores)
//! with a `pause` hint per iteration, and tries the CAS again once the word reads 0. It never
//! yields or sleeps: under contention, waiters burn their CPU, and a preempted holder keeps
//! everyone spinning until it runs again.

use std::{
    hint,
    sync::atomic::{AtomicU32, Ordering},
};

use super::AcquireWait;

#[repr(C)]
#[derive(Debug, Default)]
pub struct SpinLock {
    state: AtomicU32,
}

impl SpinLock {
    pub const fn new() -> Self {
        Self {
            state: AtomicU32::new(0),
        }
    }

    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != 0
    }
}

/// Takes the spin lock; the uprobe point for the `spin` build. Returns the spin iterations
/// (`pause` hints) it waited (`futex_waits` is always 0).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn broker_spin_acquire(lock: &SpinLock) -> AcquireWait {
    let mut spins = 0;
    loop {
        if lock
            .state
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return AcquireWait {
                spins,
                futex_waits: 0,
            };
        }
        while lock.state.load(Ordering::Relaxed) != 0 {
            hint::spin_loop();
            spins += 1;
        }
    }
}

/// Releases the spin lock; the uprobe point for the `spin` build.
///
/// # Safety
///
/// The caller holds the lock (took it with [`broker_spin_acquire`] and has not released it).
#[unsafe(no_mangle)]
#[inline(never)]
pub unsafe extern "C" fn broker_spin_release(lock: &SpinLock) {
    lock.state.store(0, Ordering::Release);
}
