//! The four locks the broker's send path can run under, and [`BrokerLock`], the guarded form
//! the broker uses.
//!
//! Each lock's take and release are `extern "C"`, unmangled and never inlined, so a uprobe can
//! attach to them by name in the server binary:
//!
//! | build   | take                   | release                |
//! |---------|------------------------|------------------------|
//! | `spin`  | `broker_spin_acquire`  | `broker_spin_release`  |
//! | `mutex` | `broker_mutex_acquire` | `broker_mutex_release` |
//! | `abs`   | `broker_abs_acquire`   | `broker_abs_release`   |
//! | `fixed` | `broker_fixed_acquire` | `broker_fixed_release` |
//!
//! `fixed` is the adaptive lock with adaptation off ([`AbsConfig::fixed`]): K attempts, a
//! yield, repeat.
//!
//! All take one argument, a pointer to the lock (`rdi` on x86-64). A take returns an
//! [`AcquireWait`], 16 bytes returned in registers (`rax` = spins, `rdx` = futex waits on
//! x86-64), so a return probe can read what the wait cost; the time between entry and return
//! is the wait itself.

pub mod abs;
pub mod futex;
pub mod spin;

use std::{cell::UnsafeCell, fmt, marker::PhantomData, ops};

use serde::Serialize;

pub use abs::{AbsConfig, AbsLock, Logged, Mode};
pub use futex::FutexMutex;
pub use spin::SpinLock;

/// What one take of a lock waited.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcquireWait {
    /// `pause` hints executed while spinning.
    pub spins: u64,
    /// `FUTEX_WAIT` calls made.
    pub futex_waits: u64,
}

impl AcquireWait {
    pub const NONE: Self = Self {
        spins: 0,
        futex_waits: 0,
    };
}

/// The build: which lock guards the send path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LockKind {
    /// Test-and-test-and-set spin lock.
    Spin,
    /// Futex-based three-state mutex.
    Mutex,
    /// Adaptive backoff spin lock (falls back to the futex mutex under heavy contention).
    Abs,
    /// The adaptive lock's spin rounds with K fixed (`--spin-k`): no adaptation, no mutex.
    Fixed,
}

impl LockKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Spin => "spin",
            Self::Mutex => "mutex",
            Self::Abs => "abs",
            Self::Fixed => "fixed",
        }
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One of the four locks, without data.
#[derive(Debug)]
pub enum RawLock {
    Spin(SpinLock),
    Mutex(FutexMutex),
    Abs(AbsLock),
    /// The adaptive lock built with adaptation off.
    Fixed(AbsLock),
}

impl RawLock {
    /// `abs` configures the `abs` lock; the `fixed` one holds K at `abs.k_initial`.
    pub fn new(kind: LockKind, abs: AbsConfig) -> Self {
        match kind {
            LockKind::Spin => Self::Spin(SpinLock::new()),
            LockKind::Mutex => Self::Mutex(FutexMutex::new()),
            LockKind::Abs => Self::Abs(AbsLock::new(abs)),
            LockKind::Fixed => Self::Fixed(AbsLock::new(AbsConfig {
                window: abs.window,
                ..AbsConfig::fixed(abs.k_initial)
            })),
        }
    }

    pub fn kind(&self) -> LockKind {
        match self {
            Self::Spin(_) => LockKind::Spin,
            Self::Mutex(_) => LockKind::Mutex,
            Self::Abs(_) => LockKind::Abs,
            Self::Fixed(_) => LockKind::Fixed,
        }
    }

    pub fn acquire(&self) -> AcquireWait {
        match self {
            Self::Spin(l) => spin::broker_spin_acquire(l),
            Self::Mutex(l) => futex::broker_mutex_acquire(l),
            Self::Abs(l) => abs::broker_abs_acquire(l),
            Self::Fixed(l) => abs::broker_fixed_acquire(l),
        }
    }

    /// # Safety
    ///
    /// The caller holds the lock.
    pub unsafe fn release(&self) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match self {
                Self::Spin(l) => spin::broker_spin_release(l),
                Self::Mutex(l) => futex::broker_mutex_release(l),
                Self::Abs(l) => abs::broker_abs_release(l),
                Self::Fixed(l) => abs::broker_fixed_release(l),
            }
        }
    }
}

/// Counters kept by the holder, so counting costs no atomic operation.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    acquisitions: u64,
    spin_iterations: u64,
    futex_waits: u64,
}

/// What a lock did over its life.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LockStats {
    pub kind: LockKind,
    /// Takes through [`BrokerLock::lock`].
    pub acquisitions: u64,
    /// `pause` hints executed by waiters.
    pub spin_iterations: u64,
    /// `FUTEX_WAIT` calls made by waiters.
    pub futex_waits: u64,
    /// `FUTEX_WAKE` calls made by releases.
    pub futex_wakes: u64,
    /// The adaptive lock's own figures (`abs` and `fixed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abs: Option<AbsStats>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AbsStats {
    /// Failed spin rounds (each followed by a yield).
    pub retreats: u64,
    /// Switches between spin and mutex mode, both ways.
    pub mode_switches: u64,
    /// K and the mode at the time of the snapshot.
    pub k: u32,
    pub mode: Mode,
    /// Mutex mode returns to spinning when a window's rate falls below this share of the
    /// rate at the switch.
    pub return_ratio: f64,
    /// The adaptation steps that changed K or the mode, with their times (see
    /// [`abs::Logged`]); none for `fixed`.
    pub steps: Vec<Logged>,
}

/// Data guarded by one of the three locks; the counters of [`LockStats`] are kept by the
/// holder.
pub struct BrokerLock<T> {
    raw: RawLock,
    counters: UnsafeCell<Counters>,
    data: UnsafeCell<T>,
}

// SAFETY: `data` and `counters` are only reached through a guard, which exists only while the
// raw lock is held, and the raw locks order the holders' accesses (acquire/release).
unsafe impl<T: Send> Sync for BrokerLock<T> {}

impl<T> BrokerLock<T> {
    pub fn new(kind: LockKind, abs: AbsConfig, data: T) -> Self {
        Self {
            raw: RawLock::new(kind, abs),
            counters: UnsafeCell::new(Counters::default()),
            data: UnsafeCell::new(data),
        }
    }

    pub fn kind(&self) -> LockKind {
        self.raw.kind()
    }

    pub fn raw(&self) -> &RawLock {
        &self.raw
    }

    pub fn lock(&self) -> BrokerGuard<'_, T> {
        let wait = self.raw.acquire();
        // SAFETY: the lock is held.
        let c = unsafe { &mut *self.counters.get() };
        c.acquisitions += 1;
        c.spin_iterations += wait.spins;
        c.futex_waits += wait.futex_waits;
        BrokerGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }

    /// A snapshot of the counters (taking the lock for it is not counted).
    pub fn stats(&self) -> LockStats {
        let wait = self.raw.acquire();
        // SAFETY: the lock is held until the release below.
        let mut c = unsafe { *self.counters.get() };
        // SAFETY: taken above.
        unsafe { self.raw.release() };
        c.spin_iterations += wait.spins;
        c.futex_waits += wait.futex_waits;
        let (futex_wakes, abs) = match &self.raw {
            RawLock::Spin(_) => (0, None),
            RawLock::Mutex(l) => (l.wakes(), None),
            RawLock::Abs(l) | RawLock::Fixed(l) => (
                l.futex_wakes(),
                Some(AbsStats {
                    retreats: l.retreats(),
                    mode_switches: l.mode_switches(),
                    k: l.k(),
                    mode: l.mode(),
                    return_ratio: l.return_ratio(),
                    steps: l.steps(),
                }),
            ),
        };
        LockStats {
            kind: self.kind(),
            acquisitions: c.acquisitions,
            spin_iterations: c.spin_iterations,
            futex_waits: c.futex_waits,
            futex_wakes,
            abs,
        }
    }

    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

/// Access to the data while the lock is held; releases on drop.
pub struct BrokerGuard<'a, T> {
    lock: &'a BrokerLock<T>,
    /// The release belongs to the taking thread (keeps the guard `!Send`).
    _not_send: PhantomData<*const ()>,
}

impl<T> ops::Deref for BrokerGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the lock is held while the guard lives.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> ops::DerefMut for BrokerGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the lock is held while the guard lives, and the guard is borrowed mutably.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for BrokerGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard exists only while the lock is held by this thread.
        unsafe { self.lock.raw.release() }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
        thread,
        time::Duration,
    };

    use super::*;

    /// A counter that is not atomic: read, then write. Lost updates show up as a short count
    /// if two threads are ever inside at once.
    struct Plain {
        count: u64,
    }

    impl Plain {
        #[inline(never)]
        fn bump(&mut self) {
            let v = std::hint::black_box(self.count);
            std::hint::black_box(());
            self.count = v + 1;
        }
    }

    const THREADS: usize = 8;
    const PER_THREAD: u64 = 20_000;

    /// Many threads bump a plain counter under the lock: the count must be exact.
    #[track_caller]
    fn hammer(lock: &BrokerLock<Plain>) {
        hammer_counts(lock);
        assert!(!is_locked(lock.raw()));
    }

    #[track_caller]
    fn hammer_counts(lock: &BrokerLock<Plain>) {
        thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for _ in 0..PER_THREAD {
                        lock.lock().bump();
                    }
                });
            }
        });
        let expected = THREADS as u64 * PER_THREAD;
        assert_eq!(lock.lock().count, expected, "{} lost updates", lock.kind());
        let stats = lock.stats();
        assert_eq!(stats.acquisitions, expected + 1);
    }

    fn is_locked(raw: &RawLock) -> bool {
        match raw {
            RawLock::Spin(l) => l.is_locked(),
            RawLock::Mutex(l) => l.is_locked(),
            RawLock::Abs(l) | RawLock::Fixed(l) => l.is_locked(),
        }
    }

    #[test]
    fn spin_lock_excludes() {
        hammer(&BrokerLock::new(
            LockKind::Spin,
            AbsConfig::default(),
            Plain { count: 0 },
        ));
    }

    #[test]
    fn futex_mutex_excludes() {
        let lock = BrokerLock::new(LockKind::Mutex, AbsConfig::default(), Plain { count: 0 });
        hammer(&lock);
        let stats = lock.stats();
        assert_eq!(stats.spin_iterations, 0, "the mutex never spins");
    }

    #[test]
    fn adaptive_lock_excludes() {
        hammer(&BrokerLock::new(
            LockKind::Abs,
            AbsConfig::default(),
            Plain { count: 0 },
        ));
    }

    #[test]
    fn fixed_k_lock_excludes_and_keeps_its_k() {
        // K = 10: rounds fail often under 8 threads, so takers yield and retry.
        let lock = BrokerLock::new(
            LockKind::Fixed,
            AbsConfig {
                k_initial: 10,
                window: Duration::from_millis(1),
                ..AbsConfig::default()
            },
            Plain { count: 0 },
        );
        hammer(&lock);
        let abs = lock
            .stats()
            .abs
            .expect("fixed reports the adaptive lock's figures");
        assert_eq!((abs.k, abs.mode, abs.mode_switches), (10, Mode::Spin, 0));
        assert!(abs.steps.is_empty(), "{:?}", abs.steps);
        assert_eq!(
            lock.stats().futex_waits,
            0,
            "fixed never sleeps on the futex"
        );
    }

    #[test]
    fn adaptive_lock_excludes_while_switching_modes() {
        // Small K so rounds fail often, and a thread that flips the mode back and forth under
        // the workers' feet: spinners and futex sleepers meet on the same word.
        let config = AbsConfig {
            k_initial: 2,
            k_min: 1,
            k_max: 4,
            ..AbsConfig::default()
        };
        let lock = Arc::new(BrokerLock::new(LockKind::Abs, config, Plain { count: 0 }));
        let RawLock::Abs(_) = lock.raw() else {
            unreachable!("built as abs")
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flipper = {
            let lock = Arc::clone(&lock);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let RawLock::Abs(abs) = lock.raw() else {
                    unreachable!("built as abs")
                };
                let fail = abs::Sample {
                    acquisitions: 10,
                    retreats: 10,
                    elapsed: Duration::from_millis(1),
                };
                let quiet = abs::Sample {
                    acquisitions: 0,
                    retreats: 0,
                    elapsed: Duration::from_millis(1),
                };
                let mut flips = 0u64;
                while !stop.load(Ordering::Relaxed) || flips < 4 {
                    // Climb to K_max and over (→ mutex), then a quiet window (→ spin).
                    while abs.adapt_now(fail) != abs::Step::ToMutex {}
                    thread::yield_now();
                    abs.adapt_now(quiet);
                    flips += 2;
                    thread::yield_now();
                }
                flips
            })
        };
        // The flipper takes the lock to adapt, so the lock is only known free once it stops.
        hammer_counts(&lock);
        stop.store(true, Ordering::Relaxed);
        let flips = flipper.join().expect("flipper");
        assert!(!is_locked(lock.raw()));
        let stats = lock.stats();
        let abs = stats.abs.expect("abs stats");
        assert!(abs.mode_switches >= flips, "{abs:?} after {flips} flips");
    }

    #[test]
    fn stats_report_each_lock_kind() {
        for kind in [
            LockKind::Spin,
            LockKind::Mutex,
            LockKind::Abs,
            LockKind::Fixed,
        ] {
            let lock = BrokerLock::new(kind, AbsConfig::default(), 0u32);
            *lock.lock() += 1;
            *lock.lock() += 1;
            let stats = lock.stats();
            assert_eq!(stats.kind, kind);
            assert_eq!(stats.acquisitions, 2);
            assert_eq!(
                stats.abs.is_some(),
                matches!(kind, LockKind::Abs | LockKind::Fixed)
            );
            assert_eq!(lock.into_inner(), 2);
        }
    }
}
