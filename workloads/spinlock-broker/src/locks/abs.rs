//! The adaptive backoff spin lock (ABS): spin while spinning pays, sleep when it does not.
//!
//! # Algorithm
//!
//! The lock word is the [futex mutex](super::futex)'s three-state word in both modes, so a
//! thread that spins and one that sleeps can meet on the same lock at any time; the release
//! path is the mutex's (swap 0, `FUTEX_WAKE` one sleeper if the word was 2).
//!
//! **Spin mode.** A taker makes up to `K` attempts. An attempt reads the word and, when it is 0,
//! tries a CAS 0→1 (test-and-test-and-set); after a failed attempt it waits with exponential
//! backoff: 1, 2, 4, … `pause` hints, capped at [`AbsConfig::backoff_cap`]. A *round* of `K`
//! attempts either succeeds (the lock is taken) or fails: the taker then *retreats* — counts
//! the failure and yields the CPU (`sched_yield`) — and starts a new round. (The mode is read
//! at the start of each round, so a taker follows a mode change within one round.)
//!
//! **Mutex mode.** A taker tries one CAS 0→1 and otherwise takes the futex slow path: it marks
//! the word contended and sleeps in `FUTEX_WAIT` until woken.
//!
//! **Adaptation** runs in windows of [`AbsConfig::window`] (100 ms by default), by the thread
//! that holds the lock when a window has elapsed (so its state needs no synchronisation). A
//! window's sample is the number of acquisitions, the number of retreats and its length; the
//! *request rate* is acquisitions per second. The success rate of spinning is judged from
//! retreats per acquisition: spinning *fails* in a window when
//! `retreats × retreat_ratio ≥ acquisitions` (with the default ratio 320, more than about one
//! failed round per 320 acquisitions: a success rate below ~99.7%).
//!
//! - Spin mode, spinning failed: if `K < K_max`, **K grows** (doubles, capped at `K_max` =
//!   10,000): waits are longer than the budget, so spin longer before yielding. If `K` is
//!   already `K_max`, spinning cannot pay under this contention: **switch to mutex mode** and
//!   remember the window's request rate as the *rate at the switch*.
//! - Spin mode, spinning succeeded: **K shrinks** (halves, not below `K_min`): waits are short,
//!   a smaller budget yields sooner when the holder is off CPU.
//! - Mutex mode: when a window's request rate is **below 80%** (`return_ratio`) of the rate
//!   at the switch, contention has dropped: **switch back to spin mode**, with `K` reset to its
//!   initial value (so going back to the mutex again takes several failing windows).
//!
//! A window in which nothing took the lock is folded into the next acquisition's window, so
//! after a quiet period the first acquisition sees a low rate (and, in mutex mode, returns to
//! spinning). Time comes from `CLOCK_MONOTONIC_COARSE` (a few ns, jiffy resolution, ample for
//! 100 ms windows), read once per acquisition while the lock is held.
//!
//! This follows the adaptive backoff spin lock of Apache RocketMQ's commit log (spin up to K,
//! yield, grow K when rounds fail, fall back to a blocking lock at the maximum, return when
//! throughput falls below 80% of the rate at the switch); K is halved rather than decremented,
//! and the fallback is a futex mutex rather than a JVM lock.
//!
//! **Fixed K** ([`AbsConfig::fixed`], the broker's `fixed` build): the same spin rounds and
//! yields with adaptation off: K never changes and the lock never switches to the mutex. This
//! is the fixed spin count RocketMQ's article sweeps (spin up to k attempts, `Thread.yield`,
//! repeat); unlike it, attempts here back off exponentially as in spin mode above.
//!
//! Every adaptation step that changes K or the mode is logged ([`AbsLock::steps`], the first
//! [`MAX_STEPS`]) with its time, the window's rate and the K after it, so a run's summary says
//! when the lock grew K and when it switched.
//!
//! [`Adaptive`] is the decision part alone, a pure state machine fed [`Sample`]s, so it is tested
//! without threads or clocks; [`AbsLock::adapt_now`] feeds one sample to a live lock.

use std::{
    cell::UnsafeCell,
    hint,
    sync::atomic::{AtomicU32, AtomicU64, Ordering},
    thread,
    time::Duration,
};

use serde::Serialize;

use super::{
    AcquireWait,
    futex::{FutexMutex, UNLOCKED},
};

/// Tunables of the adaptive lock; [`AbsConfig::default`] is what the broker runs with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AbsConfig {
    /// K when the lock is created and when it returns to spinning.
    pub k_initial: u32,
    /// K never shrinks below this.
    pub k_min: u32,
    /// K never grows above this; failing at this K switches to the mutex.
    pub k_max: u32,
    /// Length of an adaptation window.
    pub window: Duration,
    /// Spinning fails in a window when `retreats × retreat_ratio ≥ acquisitions`.
    pub retreat_ratio: u64,
    /// Mutex mode returns to spinning below this share of the rate at the switch.
    pub return_ratio: f64,
    /// Upper bound of the exponential backoff between attempts, in `pause` hints.
    pub backoff_cap: u32,
    /// Whether windows adapt K and the mode; off, K stays at `k_initial` in spin mode.
    pub adapt: bool,
}

impl Default for AbsConfig {
    fn default() -> Self {
        Self {
            k_initial: 1_000,
            k_min: 100,
            k_max: 10_000,
            window: Duration::from_millis(100),
            retreat_ratio: 320,
            return_ratio: 0.8,
            backoff_cap: 16,
            adapt: true,
        }
    }
}

/// Why an [`AbsConfig`] was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid adaptive lock settings: {0}")]
pub struct AbsConfigError(&'static str);

impl AbsConfig {
    /// The fixed-K lock: `k` attempts a round, then a yield, for ever (no adaptation).
    pub fn fixed(k: u32) -> Self {
        Self {
            k_initial: k,
            k_min: k,
            k_max: k,
            adapt: false,
            ..Self::default()
        }
    }

    pub fn validate(&self) -> Result<(), AbsConfigError> {
        if self.k_min == 0 {
            return Err(AbsConfigError("K_min must be at least 1"));
        }
        if !(self.k_min <= self.k_initial && self.k_initial <= self.k_max) {
            return Err(AbsConfigError("K_min <= K_initial <= K_max must hold"));
        }
        if self.retreat_ratio == 0 {
            return Err(AbsConfigError("the retreat ratio must be at least 1"));
        }
        if !(self.return_ratio > 0.0 && self.return_ratio <= 1.0) {
            return Err(AbsConfigError("the return ratio must be in (0, 1]"));
        }
        if self.backoff_cap == 0 {
            return Err(AbsConfigError("the backoff cap must be at least 1"));
        }
        Ok(())
    }
}

/// Which path takers use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Spin,
    Mutex,
}

/// One adaptation window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub acquisitions: u64,
    pub retreats: u64,
    pub elapsed: Duration,
}

impl Sample {
    /// Acquisitions per second (a zero-length window counts as 1 ns).
    pub fn rate(&self) -> f64 {
        self.acquisitions as f64 / self.elapsed.max(Duration::from_nanos(1)).as_secs_f64()
    }
}

/// What one adaptation step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Kept,
    Grew,
    Shrank,
    ToMutex,
    ToSpin,
}

/// The adaptation state machine (see the module documentation).
#[derive(Clone, Debug)]
pub struct Adaptive {
    config: AbsConfig,
    k: u32,
    mode: Mode,
    rate_at_switch: f64,
    mode_switches: u64,
}

impl Adaptive {
    pub fn new(config: AbsConfig) -> Self {
        Self {
            config,
            k: config.k_initial,
            mode: Mode::Spin,
            rate_at_switch: 0.0,
            mode_switches: 0,
        }
    }

    pub fn k(&self) -> u32 {
        self.k
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The request rate (per second) of the window that switched to the mutex.
    pub fn rate_at_switch(&self) -> f64 {
        self.rate_at_switch
    }

    pub fn mode_switches(&self) -> u64 {
        self.mode_switches
    }

    /// Whether spinning failed in `sample`.
    pub fn spinning_failed(&self, sample: &Sample) -> bool {
        sample.acquisitions > 0
            && sample.retreats.saturating_mul(self.config.retreat_ratio) >= sample.acquisitions
    }

    pub fn step(&mut self, sample: Sample) -> Step {
        let c = self.config;
        if !c.adapt {
            return Step::Kept;
        }
        match self.mode {
            Mode::Spin if sample.acquisitions == 0 => Step::Kept,
            Mode::Spin if self.spinning_failed(&sample) => {
                if self.k < c.k_max {
                    self.k = self.k.saturating_mul(2).min(c.k_max);
                    Step::Grew
                } else {
                    self.mode = Mode::Mutex;
                    self.rate_at_switch = sample.rate();
                    self.mode_switches += 1;
                    Step::ToMutex
                }
            }
            Mode::Spin => {
                if self.k > c.k_min {
                    self.k = (self.k / 2).max(c.k_min);
                    Step::Shrank
                } else {
                    Step::Kept
                }
            }
            Mode::Mutex => {
                if sample.rate() < c.return_ratio * self.rate_at_switch {
                    self.mode = Mode::Spin;
                    self.k = c.k_initial;
                    self.mode_switches += 1;
                    Step::ToSpin
                } else {
                    Step::Kept
                }
            }
        }
    }
}

/// One logged adaptation step: one that changed K or the mode.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Logged {
    /// When, on `CLOCK_MONOTONIC` (its coarse form: a few ms late at most), the clock a
    /// recording's `meta.start_mono_ns` is on.
    pub at_ns: u64,
    pub step: Step,
    /// K after the step.
    pub k: u32,
    /// The window's request rate (acquisitions per second).
    pub rate: f64,
    /// The rate at the last switch to the mutex (0 before any).
    pub rate_at_switch: f64,
}

/// Steps logged at most (a step ends a 100-ms window at most: over 10 minutes of them).
pub const MAX_STEPS: usize = 6_000;

const MODE_SPIN: u32 = 0;
const MODE_MUTEX: u32 = 1;

/// State only the lock holder touches.
#[derive(Debug)]
struct Window {
    adaptive: Adaptive,
    steps: Vec<Logged>,
    start_ns: u64,
    acquisitions: u64,
    length_ns: u64,
}

/// The adaptive backoff spin lock.
///
/// `mode`, `k` and the counters are atomics so takers and observers read them without the
/// lock; they are written only by the holder (adaptation) or, for retreats, by the taker that
/// retreated.
#[repr(C)]
#[derive(Debug)]
pub struct AbsLock {
    word: FutexMutex,
    mode: AtomicU32,
    k: AtomicU32,
    backoff_cap: u32,
    window_retreats: AtomicU64,
    retreats: AtomicU64,
    mode_switches: AtomicU64,
    window: UnsafeCell<Window>,
    /// Its configuration's `return_ratio`, for its summary.
    return_ratio: f64,
}

// SAFETY: `window` is only accessed by the thread holding the lock word (acquire/release
// ordering on the word orders those accesses); everything else is atomic or immutable.
unsafe impl Sync for AbsLock {}

impl Default for AbsLock {
    fn default() -> Self {
        Self::new(AbsConfig::default())
    }
}

impl AbsLock {
    /// A lock with `config` (validate it first with [`AbsConfig::validate`]).
    pub fn new(config: AbsConfig) -> Self {
        let adaptive = Adaptive::new(config);
        let now = coarse_now_ns();
        Self {
            word: FutexMutex::new(),
            mode: AtomicU32::new(MODE_SPIN),
            k: AtomicU32::new(adaptive.k()),
            backoff_cap: config.backoff_cap.max(1),
            window_retreats: AtomicU64::new(0),
            retreats: AtomicU64::new(0),
            mode_switches: AtomicU64::new(0),
            window: UnsafeCell::new(Window {
                adaptive,
                steps: Vec::new(),
                start_ns: now,
                acquisitions: 0,
                length_ns: u64::try_from(config.window.as_nanos()).unwrap_or(u64::MAX),
            }),
            return_ratio: config.return_ratio,
        }
    }

    /// The share of the rate at the switch to the mutex under which a window returns to
    /// spinning.
    pub fn return_ratio(&self) -> f64 {
        self.return_ratio
    }

    pub fn mode(&self) -> Mode {
        if self.mode.load(Ordering::Relaxed) == MODE_MUTEX {
            Mode::Mutex
        } else {
            Mode::Spin
        }
    }

    pub fn k(&self) -> u32 {
        self.k.load(Ordering::Relaxed)
    }

    /// Failed spin rounds (each followed by a yield), over the lock's life.
    pub fn retreats(&self) -> u64 {
        self.retreats.load(Ordering::Relaxed)
    }

    pub fn mode_switches(&self) -> u64 {
        self.mode_switches.load(Ordering::Relaxed)
    }

    pub fn futex_wakes(&self) -> u64 {
        self.word.wakes()
    }

    pub fn is_locked(&self) -> bool {
        self.word.is_locked()
    }

    /// The adaptation steps that changed K or the mode, oldest first (the first
    /// [`MAX_STEPS`]). Takes the lock to read them.
    pub fn steps(&self) -> Vec<Logged> {
        self.with_window(|window| window.steps.clone())
    }

    /// Runs `f` on the holder's state, the lock taken for it.
    fn with_window<R>(&self, f: impl FnOnce(&mut Window) -> R) -> R {
        if !self.word.try_lock() {
            self.word.lock_contended();
        }
        // SAFETY: the lock is held until the unlock below.
        let r = f(unsafe { &mut *self.window.get() });
        self.word.unlock();
        r
    }

    /// Runs one adaptation step with `sample` on the live lock, as if a window had just ended
    /// (the window's own counts are left alone). Takes the lock to do so. For tests and tools
    /// that drive the adaptation deterministically.
    pub fn adapt_now(&self, sample: Sample) -> Step {
        self.with_window(|window| self.apply(window, sample, coarse_now_ns()))
    }

    /// One spin round of at most `k` attempts with exponential backoff. Returns whether the
    /// lock was taken, adding the `pause` hints executed to `spins`.
    fn spin_round(&self, k: u32, spins: &mut u64) -> bool {
        let word = self.word.word();
        let mut backoff = 1u32;
        for _ in 0..k {
            if word.load(Ordering::Relaxed) == UNLOCKED && self.word.try_lock() {
                return true;
            }
            for _ in 0..backoff {
                hint::spin_loop();
            }
            *spins += u64::from(backoff);
            backoff = backoff.saturating_mul(2).min(self.backoff_cap);
        }
        false
    }

    /// Window accounting and, when a window has elapsed, adaptation. Called with the lock held.
    fn on_acquired(&self) {
        // SAFETY: the lock is held (called only right after taking it).
        let window = unsafe { &mut *self.window.get() };
        window.acquisitions += 1;
        let now = coarse_now_ns();
        let elapsed = now.saturating_sub(window.start_ns);
        if elapsed >= window.length_ns {
            let sample = Sample {
                acquisitions: window.acquisitions,
                retreats: self.window_retreats.swap(0, Ordering::Relaxed),
                elapsed: Duration::from_nanos(elapsed),
            };
            self.apply(window, sample, now);
            window.acquisitions = 0;
            window.start_ns = now;
        }
    }

    fn apply(&self, window: &mut Window, sample: Sample, now: u64) -> Step {
        let step = window.adaptive.step(sample);
        if step != Step::Kept && window.steps.len() < MAX_STEPS {
            window.steps.push(Logged {
                at_ns: now,
                step,
                k: window.adaptive.k(),
                rate: sample.rate(),
                rate_at_switch: window.adaptive.rate_at_switch(),
            });
        }
        self.k.store(window.adaptive.k(), Ordering::Relaxed);
        let mode = match window.adaptive.mode() {
            Mode::Spin => MODE_SPIN,
            Mode::Mutex => MODE_MUTEX,
        };
        self.mode.store(mode, Ordering::Relaxed);
        self.mode_switches
            .store(window.adaptive.mode_switches(), Ordering::Relaxed);
        step
    }
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds.
fn coarse_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; this clock id exists on every Linux since 2.6.32.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Takes the adaptive lock; the uprobe point for the `abs` build. Returns the `pause` hints
/// spun (`spins`) and the `FUTEX_WAIT` calls made (`futex_waits`).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn broker_abs_acquire(lock: &AbsLock) -> AcquireWait {
    acquire(lock)
}

/// Takes the lock built with [`AbsConfig::fixed`]; the uprobe point for the `fixed` build.
/// The same path as [`broker_abs_acquire`], under its own name so the catalogue names each
/// build's probe. The code is identical, so the linker may give both names one address
/// (release builds do); a server runs one lock, so a probe there times that lock's takes.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn broker_fixed_acquire(lock: &AbsLock) -> AcquireWait {
    acquire(lock)
}

#[inline(always)]
fn acquire(lock: &AbsLock) -> AcquireWait {
    let mut wait = AcquireWait::NONE;
    loop {
        if lock.mode.load(Ordering::Relaxed) == MODE_MUTEX {
            if !lock.word.try_lock() {
                wait.futex_waits += lock.word.lock_contended();
            }
            break;
        }
        if lock.spin_round(lock.k.load(Ordering::Relaxed), &mut wait.spins) {
            break;
        }
        lock.window_retreats.fetch_add(1, Ordering::Relaxed);
        lock.retreats.fetch_add(1, Ordering::Relaxed);
        thread::yield_now();
    }
    lock.on_acquired();
    wait
}

/// Releases the adaptive lock; the uprobe point for the `abs` build.
///
/// # Safety
///
/// The caller holds the lock (took it with [`broker_abs_acquire`] and has not released it).
#[unsafe(no_mangle)]
#[inline(never)]
pub unsafe extern "C" fn broker_abs_release(lock: &AbsLock) {
    lock.word.unlock();
}

/// Releases the fixed-K lock; the uprobe point for the `fixed` build.
///
/// # Safety
///
/// The caller holds the lock (took it with [`broker_fixed_acquire`] and has not released it).
#[unsafe(no_mangle)]
#[inline(never)]
pub unsafe extern "C" fn broker_fixed_release(lock: &AbsLock) {
    lock.word.unlock();
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, atomic::AtomicBool};

    use super::*;

    fn sample(acquisitions: u64, retreats: u64) -> Sample {
        Sample {
            acquisitions,
            retreats,
            elapsed: Duration::from_millis(100),
        }
    }

    /// A window in which spinning failed (1 retreat per 10 acquisitions).
    fn failing() -> Sample {
        sample(10_000, 1_000)
    }

    /// A window in which spinning succeeded (no retreats).
    fn succeeding() -> Sample {
        sample(10_000, 0)
    }

    #[test]
    fn default_config_is_valid() {
        assert_eq!(AbsConfig::default().validate(), Ok(()));
        let bad = AbsConfig {
            k_initial: 20_000,
            ..AbsConfig::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn fixed_k_never_changes_k_or_the_mode() {
        let config = AbsConfig::fixed(1_000);
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(
            (config.k_min, config.k_initial, config.k_max),
            (1_000, 1_000, 1_000)
        );
        assert!(
            AbsConfig::fixed(0).validate().is_err(),
            "k = 0 spins no attempt"
        );
        let mut a = Adaptive::new(config);
        for s in [failing(), failing(), succeeding(), sample(0, 0), failing()] {
            assert_eq!(a.step(s), Step::Kept);
        }
        assert_eq!((a.k(), a.mode(), a.mode_switches()), (1_000, Mode::Spin, 0));
        // On a live lock too: failing windows log nothing and leave K where it was.
        let lock = AbsLock::new(AbsConfig::fixed(10));
        for _ in 0..10 {
            assert_eq!(lock.adapt_now(failing()), Step::Kept);
        }
        assert_eq!(
            (lock.k(), lock.mode(), lock.mode_switches()),
            (10, Mode::Spin, 0)
        );
        assert!(lock.steps().is_empty());
    }

    #[test]
    fn steps_that_change_k_or_the_mode_are_logged() {
        let lock = AbsLock::default();
        assert_eq!(lock.adapt_now(failing()), Step::Grew);
        while lock.adapt_now(failing()) != Step::ToMutex {}
        assert_eq!(
            lock.adapt_now(sample(10_000, 0)),
            Step::Kept,
            "the rate held"
        );
        assert_eq!(lock.adapt_now(sample(7_000, 0)), Step::ToSpin, "below 80%");
        let steps: Vec<(Step, u32, f64, f64)> = lock
            .steps()
            .iter()
            .map(|l| (l.step, l.k, l.rate, l.rate_at_switch))
            .collect();
        assert_eq!(
            steps,
            [
                (Step::Grew, 2_000, 100_000.0, 0.0),
                (Step::Grew, 4_000, 100_000.0, 0.0),
                (Step::Grew, 8_000, 100_000.0, 0.0),
                (Step::Grew, 10_000, 100_000.0, 0.0),
                (Step::ToMutex, 10_000, 100_000.0, 100_000.0),
                (Step::ToSpin, 1_000, 70_000.0, 100_000.0),
            ]
        );
        let times: Vec<u64> = lock.steps().iter().map(|l| l.at_ns).collect();
        assert!(times.is_sorted(), "{times:?}");
    }

    #[test]
    fn failure_threshold_is_one_retreat_per_320_acquisitions() {
        let a = Adaptive::new(AbsConfig::default());
        assert!(a.spinning_failed(&sample(320, 1)));
        assert!(!a.spinning_failed(&sample(321, 1)));
        assert!(!a.spinning_failed(&sample(1_000, 0)));
        assert!(!a.spinning_failed(&sample(0, 5)));
    }

    #[test]
    fn k_grows_while_spinning_fails_and_shrinks_while_it_succeeds() {
        let mut a = Adaptive::new(AbsConfig::default());
        assert_eq!((a.k(), a.mode()), (1_000, Mode::Spin));
        assert_eq!(a.step(failing()), Step::Grew);
        assert_eq!(a.k(), 2_000);
        assert_eq!(a.step(succeeding()), Step::Shrank);
        assert_eq!(a.k(), 1_000);
        let mut ks = Vec::new();
        for _ in 0..6 {
            a.step(succeeding());
            ks.push(a.k());
        }
        assert_eq!(ks, [500, 250, 125, 100, 100, 100], "halving stops at K_min");
        assert_eq!(a.mode(), Mode::Spin);
        assert_eq!(a.mode_switches(), 0);
    }

    #[test]
    fn empty_windows_change_nothing_while_spinning() {
        let mut a = Adaptive::new(AbsConfig::default());
        assert_eq!(a.step(sample(0, 0)), Step::Kept);
        assert_eq!(a.k(), 1_000);
    }

    #[test]
    fn falls_back_to_the_mutex_once_k_is_at_its_maximum() {
        let mut a = Adaptive::new(AbsConfig::default());
        let mut ks = Vec::new();
        while a.step(failing()) == Step::Grew {
            ks.push(a.k());
        }
        assert_eq!(ks, [2_000, 4_000, 8_000, 10_000]);
        assert_eq!(
            a.mode(),
            Mode::Mutex,
            "the failing window at K_max switches"
        );
        assert_eq!(a.k(), 10_000);
        assert_eq!(a.mode_switches(), 1);
        assert_eq!(a.rate_at_switch(), 100_000.0); // 10,000 acquisitions in 100 ms
    }

    #[test]
    fn returns_to_spinning_below_80_percent_of_the_rate_at_the_switch() {
        let mut a = Adaptive::new(AbsConfig::default());
        while a.mode() == Mode::Spin {
            a.step(failing());
        }
        // Rate at the switch: 100,000/s. 81% and exactly 80% keep the mutex…
        assert_eq!(a.step(sample(8_100, 0)), Step::Kept);
        assert_eq!(a.step(sample(8_000, 0)), Step::Kept);
        assert_eq!(a.mode(), Mode::Mutex);
        // …79% goes back to spinning, with K reset.
        assert_eq!(a.step(sample(7_900, 0)), Step::ToSpin);
        assert_eq!((a.mode(), a.k()), (Mode::Spin, 1_000));
        assert_eq!(a.mode_switches(), 2);
        // Going back to the mutex takes the climb to K_max again.
        assert_eq!(a.step(failing()), Step::Grew);
        assert_eq!(a.mode(), Mode::Spin);
    }

    #[test]
    fn the_rate_is_per_second_not_per_window() {
        let mut a = Adaptive::new(AbsConfig::default());
        while a.mode() == Mode::Spin {
            a.step(failing()); // 100,000/s
        }
        // A window twice as long with 1.7× the acquisitions is 85% of the rate: kept.
        let long = Sample {
            acquisitions: 17_000,
            retreats: 0,
            elapsed: Duration::from_millis(200),
        };
        assert_eq!(a.step(long), Step::Kept);
        // A quiet second folded into one window: far below, back to spinning.
        let quiet = Sample {
            acquisitions: 1,
            retreats: 0,
            elapsed: Duration::from_secs(1),
        };
        assert_eq!(a.step(quiet), Step::ToSpin);
    }

    #[test]
    fn live_lock_follows_adaptation_steps() {
        let lock = AbsLock::default();
        assert_eq!((lock.mode(), lock.k()), (Mode::Spin, 1_000));
        for _ in 0..4 {
            assert_eq!(lock.adapt_now(failing()), Step::Grew);
        }
        assert_eq!(lock.k(), 10_000);
        assert_eq!(lock.adapt_now(failing()), Step::ToMutex);
        assert_eq!((lock.mode(), lock.mode_switches()), (Mode::Mutex, 1));
        assert_eq!(lock.adapt_now(sample(7_900, 0)), Step::ToSpin);
        assert_eq!(
            (lock.mode(), lock.k(), lock.mode_switches()),
            (Mode::Spin, 1_000, 2)
        );
        assert!(!lock.is_locked());
    }

    #[test]
    fn acquisitions_drive_the_windows() {
        // Zero-length windows: every acquisition ends one. Uncontended acquisitions never
        // retreat, so each window is a success and K halves down to K_min.
        let lock = AbsLock::new(AbsConfig {
            window: Duration::ZERO,
            ..AbsConfig::default()
        });
        let mut ks = Vec::new();
        for _ in 0..5 {
            let wait = broker_abs_acquire(&lock);
            assert_eq!(wait, AcquireWait::NONE);
            // SAFETY: taken just above.
            unsafe { broker_abs_release(&lock) };
            ks.push(lock.k());
        }
        assert_eq!(ks, [500, 250, 125, 100, 100]);
    }

    /// Holds `lock` in this thread, starts a taker, and releases once `ready` says the taker
    /// has reached the point the test is about; returns what the taker's acquire reported.
    #[track_caller]
    fn contend(lock: &Arc<AbsLock>, ready: impl Fn(&AbsLock) -> bool) -> AcquireWait {
        assert!(lock.word.try_lock(), "lock must start free");
        let started = Arc::new(AtomicBool::new(false));
        let taker = {
            let lock = Arc::clone(lock);
            let started = Arc::clone(&started);
            thread::spawn(move || {
                started.store(true, Ordering::SeqCst);
                let wait = broker_abs_acquire(&lock);
                // SAFETY: taken just above.
                unsafe { broker_abs_release(&lock) };
                wait
            })
        };
        while !(started.load(Ordering::SeqCst) && ready(lock)) {
            thread::yield_now();
        }
        // SAFETY: taken by `try_lock` above, in this thread.
        unsafe { broker_abs_release(lock) };
        taker.join().expect("taker thread")
    }

    #[test]
    fn a_failed_spin_round_retreats_and_keeps_spinning() {
        let lock = Arc::new(AbsLock::new(AbsConfig {
            k_initial: 4,
            k_min: 1,
            ..AbsConfig::default()
        }));
        // Released only after the taker has used up a whole round of 4 attempts.
        let wait = contend(&lock, |l| l.retreats() >= 1);
        assert_eq!(wait.futex_waits, 0, "spin mode never sleeps in the kernel");
        assert!(
            wait.spins >= 1 + 2 + 4 + 8,
            "a full round backs off 1, 2, 4, 8: {wait:?}"
        );
        assert!(lock.retreats() >= 1);
        assert_eq!(lock.futex_wakes(), 0);
    }

    #[test]
    fn in_mutex_mode_a_contended_taker_sleeps_on_the_futex() {
        let lock = Arc::new(AbsLock::default());
        while lock.adapt_now(failing()) != Step::ToMutex {}
        assert_eq!(lock.mode(), Mode::Mutex);
        // The taker marks the word contended (2) right before FUTEX_WAIT.
        let wait = contend(&lock, |l| l.word.word().load(Ordering::SeqCst) == 2);
        assert!(wait.futex_waits >= 1, "{wait:?}");
        assert_eq!(wait.spins, 0);
        assert_eq!(lock.retreats(), 0);
        // Two wakes: ours, which saw the taker's 2; and the taker's own, because a thread
        // that slept takes the lock with the word at 2 (it cannot know whether others sleep),
        // the three-state mutex's known spare wake.
        assert_eq!(lock.futex_wakes(), 2);
    }
}
