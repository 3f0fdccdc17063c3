//! The futex mutex: the classic three-state mutex on the raw futex syscall (Drepper,
//! "Futexes Are Tricky", mutex #3).
//!
//! The lock word is 0 (unlocked), 1 (locked) or 2 (locked, maybe with waiters). Taking it is one
//! CAS 0→1 when free; otherwise the taker swaps in 2 and sleeps in `FUTEX_WAIT_PRIVATE` until
//! the word changes, and retries the swap. Releasing swaps in 0 and, only when the word was 2,
//! wakes one sleeper with `FUTEX_WAKE_PRIVATE`. There is no spinning before sleeping, so every
//! wait is a `futex` syscall a tracer sees, and an uncontended lock never enters the kernel.

use std::{
    ptr,
    sync::atomic::{AtomicU32, AtomicU64, Ordering},
};

use super::AcquireWait;

pub(crate) const UNLOCKED: u32 = 0;
pub(crate) const LOCKED: u32 = 1;
pub(crate) const CONTENDED: u32 = 2;

/// A futex-based mutex (no data; see [`super::BrokerLock`] for the guarded form).
#[repr(C)]
#[derive(Debug, Default)]
pub struct FutexMutex {
    state: AtomicU32,
    /// `FUTEX_WAKE` calls made by releases (only ever touched on the slow path).
    wakes: AtomicU64,
}

impl FutexMutex {
    pub const fn new() -> Self {
        Self {
            state: AtomicU32::new(UNLOCKED),
            wakes: AtomicU64::new(0),
        }
    }

    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != UNLOCKED
    }

    /// The lock word, for callers that spin on it (the adaptive lock shares the protocol).
    pub(crate) fn word(&self) -> &AtomicU32 {
        &self.state
    }

    pub(crate) fn try_lock(&self) -> bool {
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The slow path: mark the word contended and sleep until it is ours. Returns the number
    /// of `FUTEX_WAIT` calls made.
    #[cold]
    pub(crate) fn lock_contended(&self) -> u64 {
        let mut waits = 0;
        let mut c = self.state.load(Ordering::Relaxed);
        if c != CONTENDED {
            c = self.state.swap(CONTENDED, Ordering::Acquire);
        }
        while c != UNLOCKED {
            futex_wait(&self.state, CONTENDED);
            waits += 1;
            c = self.state.swap(CONTENDED, Ordering::Acquire);
        }
        waits
    }

    /// Releases the lock; wakes one sleeper when the word said there may be one.
    pub(crate) fn unlock(&self) {
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            futex_wake_one(&self.state);
            self.wakes.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn wakes(&self) -> u64 {
        self.wakes.load(Ordering::Relaxed)
    }
}

/// `FUTEX_WAIT_PRIVATE` (libc has no constant for it): the word is private to this process.
const FUTEX_WAIT_PRIVATE: libc::c_int = libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG;
/// `FUTEX_WAKE_PRIVATE`.
const FUTEX_WAKE_PRIVATE: libc::c_int = libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG;

/// `FUTEX_WAIT_PRIVATE`: sleeps while `*word == expected`. Returns at once (EAGAIN) when the
/// word already differs, and may return early (EINTR, spurious); callers re-check the word.
fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: the address is a live, aligned u32 for the duration of the call; a null timeout
    // means no timeout. Errors need no handling (see above).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            FUTEX_WAIT_PRIVATE,
            expected,
            ptr::null::<libc::timespec>(),
        );
    }
}

/// `FUTEX_WAKE_PRIVATE` for one waiter.
fn futex_wake_one(word: &AtomicU32) {
    // SAFETY: the address is a live, aligned u32; FUTEX_WAKE only reads the address.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), FUTEX_WAKE_PRIVATE, 1);
    }
}

/// Takes the futex mutex; the uprobe point for the `mutex` build. Returns the `FUTEX_WAIT`
/// calls made (`futex_waits`; `spins` is always 0).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn broker_mutex_acquire(lock: &FutexMutex) -> AcquireWait {
    if lock.try_lock() {
        return AcquireWait::NONE;
    }
    AcquireWait {
        spins: 0,
        futex_waits: lock.lock_contended(),
    }
}

/// Releases the futex mutex; the uprobe point for the `mutex` build.
///
/// # Safety
///
/// The caller holds the lock (took it with [`broker_mutex_acquire`] and has not released it).
#[unsafe(no_mangle)]
#[inline(never)]
pub unsafe extern "C" fn broker_mutex_release(lock: &FutexMutex) {
    lock.unlock();
}
