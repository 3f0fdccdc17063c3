//! Continuous recording (`record --every`): the kernel side counts from the recording's start
//! and never stops; a window is what its maps added since the last cut.
//!
//! Each map's cumulative values at the last cut are kept by key, so a window is a difference:
//! an increment lands in the window whose cut first reads it, never in two and never in none,
//! and nothing is deleted from under a program that is adding to it. What is kept grows only
//! with the maps' own (fixed) sizes; keys that stayed idle for a whole window are evicted from
//! the kernel at each cut, and forgotten here with them (see `Probes::evict`).

use std::{collections::HashMap, hash::Hash};

use switchyard_common::{
    ErrnoKey, FutexKey, FutexStats, HIST_BUCKETS, HeldKey, OffCpuKey, OnCpuKey, RunqueueHolderKey,
    RunqueueHolderStats, SyscallStackKey, SyscallStats, WaitStats, WakeupKey,
};

/// A cumulative value: what it added since an earlier reading of itself.
pub(crate) trait Cumulative: Copy {
    /// `self - prev`; when `self` is smaller (the entry was made anew, e.g. a reused thread
    /// id), all of `self`.
    fn since(&self, prev: &Self) -> Self;
    fn is_zero(&self) -> bool;
}

impl Cumulative for u64 {
    fn since(&self, prev: &Self) -> Self {
        if self >= prev { self - prev } else { *self }
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
}

impl Cumulative for RunqueueHolderStats {
    fn since(&self, prev: &Self) -> Self {
        if self.count < prev.count {
            return *self;
        }
        RunqueueHolderStats {
            count: self.count - prev.count,
            ns: self.ns.saturating_sub(prev.ns),
            ..*self
        }
    }
    fn is_zero(&self) -> bool {
        self.count == 0
    }
}

impl Cumulative for FutexStats {
    fn since(&self, prev: &Self) -> Self {
        if self.count < prev.count {
            return *self;
        }
        FutexStats {
            count: self.count - prev.count,
            total_ns: self.total_ns.saturating_sub(prev.total_ns),
        }
    }
    fn is_zero(&self) -> bool {
        self.count == 0
    }
}

/// The histogram a window added, bucket by bucket.
fn hist_since(cur: &[u64; HIST_BUCKETS], prev: &[u64; HIST_BUCKETS]) -> [u64; HIST_BUCKETS] {
    let mut out = [0; HIST_BUCKETS];
    for (o, (c, p)) in out.iter_mut().zip(cur.iter().zip(prev)) {
        *o = c.saturating_sub(*p);
    }
    out
}

/// A window's maximum. Exact when the running maximum rose in the window (the new maximum
/// happened in it); otherwise the largest value the window's histogram allows, its highest
/// bucket's upper bound, which never exceeds the running maximum.
pub(crate) fn window_max(cur_max: u64, prev_max: u64, hist: &[u64; HIST_BUCKETS]) -> u64 {
    if cur_max > prev_max {
        return cur_max;
    }
    match hist.iter().rposition(|&c| c != 0) {
        Some(i) if i + 1 < 64 => ((1u64 << (i + 1)) - 1).min(cur_max),
        Some(_) => cur_max,
        None => 0,
    }
}

impl Cumulative for SyscallStats {
    fn since(&self, prev: &Self) -> Self {
        if self.count < prev.count {
            return *self;
        }
        let hist = hist_since(&self.hist, &prev.hist);
        SyscallStats {
            count: self.count - prev.count,
            errors: self.errors.saturating_sub(prev.errors),
            timed: self.timed.saturating_sub(prev.timed),
            weighted: self.weighted.saturating_sub(prev.weighted),
            drawn: self.drawn.saturating_sub(prev.drawn),
            total_ns: self.total_ns.saturating_sub(prev.total_ns),
            max_ns: window_max(self.max_ns, prev.max_ns, &hist),
            hist,
        }
    }
    fn is_zero(&self) -> bool {
        self.count == 0
    }
}

impl Cumulative for WaitStats {
    fn since(&self, prev: &Self) -> Self {
        if self.count < prev.count {
            return *self;
        }
        let hist = hist_since(&self.hist, &prev.hist);
        WaitStats {
            count: self.count - prev.count,
            total_ns: self.total_ns.saturating_sub(prev.total_ns),
            max_ns: window_max(self.max_ns, prev.max_ns, &hist),
            timeouts: self.timeouts.saturating_sub(prev.timeouts),
            eagain: self.eagain.saturating_sub(prev.eagain),
            hist,
        }
    }
    fn is_zero(&self) -> bool {
        self.count == 0
    }
}

/// A thread's figures as `ThreadRow` carries them, with the interval in progress at the cut
/// counted up to the cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ThreadTimes {
    pub voluntary: u64,
    pub involuntary: u64,
    pub oncpu_ns: u64,
    pub blocked_ns: u64,
    pub runqueue_ns: u64,
    pub runqueue_after_wakeup_ns: u64,
    pub offcpu_hist: [u64; HIST_BUCKETS],
    pub delay_hist: [u64; HIST_BUCKETS],
}

impl Cumulative for ThreadTimes {
    fn since(&self, prev: &Self) -> Self {
        if self.voluntary + self.involuntary < prev.voluntary + prev.involuntary {
            return *self;
        }
        ThreadTimes {
            voluntary: self.voluntary.saturating_sub(prev.voluntary),
            involuntary: self.involuntary.saturating_sub(prev.involuntary),
            oncpu_ns: self.oncpu_ns.saturating_sub(prev.oncpu_ns),
            blocked_ns: self.blocked_ns.saturating_sub(prev.blocked_ns),
            runqueue_ns: self.runqueue_ns.saturating_sub(prev.runqueue_ns),
            runqueue_after_wakeup_ns: self
                .runqueue_after_wakeup_ns
                .saturating_sub(prev.runqueue_after_wakeup_ns),
            offcpu_hist: hist_since(&self.offcpu_hist, &prev.offcpu_hist),
            delay_hist: hist_since(&self.delay_hist, &prev.delay_hist),
        }
    }
    fn is_zero(&self) -> bool {
        self.voluntary + self.involuntary == 0
            && self.oncpu_ns + self.blocked_ns + self.runqueue_ns == 0
    }
}

/// One map's values at the last cut, by key, and the keys that added nothing in the window
/// being read.
pub(crate) struct Seen<K, V> {
    last: HashMap<K, V>,
    idle: Vec<K>,
}

impl<K, V> Default for Seen<K, V> {
    fn default() -> Self {
        Seen {
            last: HashMap::new(),
            idle: Vec::new(),
        }
    }
}

impl<K: Hash + Eq + Copy, V: Cumulative> Seen<K, V> {
    /// What `key` added since the last cut, given its cumulative value now.
    pub fn take(&mut self, key: K, now: V) -> V {
        let added = match self.last.get(&key) {
            Some(prev) => now.since(prev),
            None => now,
        };
        if added.is_zero() {
            self.idle.push(key);
        }
        self.last.insert(key, now);
        added
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.last.keys()
    }

    /// The keys idle in the window just read; the list starts anew.
    pub fn take_idle(&mut self) -> Vec<K> {
        std::mem::take(&mut self.idle)
    }

    /// Forgets `key`: its kernel entry was deleted, and a new one counts from zero.
    pub fn forget(&mut self, key: &K) {
        self.last.remove(key);
    }
}

/// Every map's values at the last cut.
#[derive(Default)]
pub(crate) struct LastCut {
    pub syscalls: Seen<u32, SyscallStats>,
    pub errnos: Seen<ErrnoKey, u64>,
    pub threads: Seen<u32, ThreadTimes>,
    pub drops: Seen<u32, u64>,
    pub sampling: Seen<u32, u64>,
    /// Futex waits, kernel lock contention and spans: (map name, index).
    pub waits: Seen<(&'static str, u32), WaitStats>,
    pub gc: Seen<u32, u64>,
    pub oncpu: Seen<OnCpuKey, u64>,
    pub offcpu: Seen<OffCpuKey, u64>,
    pub wakeups: Seen<WakeupKey, u64>,
    pub held: Seen<HeldKey, u64>,
    pub syscall_stacks: Seen<SyscallStackKey, u64>,
    pub futexes: Seen<FutexKey, FutexStats>,
    pub runqueue_holders: Seen<RunqueueHolderKey, RunqueueHolderStats>,
    /// Threads whose exit was read in the window just cut: their entries go at the next evict.
    pub exited: Vec<u32>,
    /// The frames of the stacks read so far, by id (user stacks with their completeness):
    /// each is read from the kernel once, and forgotten when evicted there.
    pub user_frames: HashMap<i32, (Vec<u64>, bool)>,
    pub kernel_frames: HashMap<i32, Vec<u64>>,
}

impl LastCut {
    /// Forgets which keys of the maps that are never evicted were idle.
    pub fn clear_idle(&mut self) {
        self.syscalls.take_idle();
        self.errnos.take_idle();
        self.threads.take_idle();
        self.drops.take_idle();
        self.sampling.take_idle();
        self.waits.take_idle();
        self.gc.take_idle();
        self.runqueue_holders.take_idle();
    }

    /// The stack ids the kept keys still refer to: (user ids, kernel ids).
    pub fn referenced_stacks(
        &self,
    ) -> (
        std::collections::HashSet<i32>,
        std::collections::HashSet<i32>,
    ) {
        let mut user = std::collections::HashSet::new();
        let mut kernel = std::collections::HashSet::new();
        for k in self.oncpu.keys() {
            user.insert(k.user_stack);
            kernel.insert(k.kernel_stack);
        }
        for k in self.offcpu.keys() {
            user.insert(k.user_stack);
            kernel.insert(k.kernel_stack);
        }
        for k in self.wakeups.keys() {
            user.extend([k.user_stack, k.waker_user_stack]);
            kernel.extend([k.kernel_stack, k.waker_kernel_stack]);
        }
        for k in self.held.keys() {
            user.insert(k.user_stack);
            kernel.insert(k.kernel_stack);
        }
        for k in self.syscall_stacks.keys() {
            user.insert(k.user_stack);
        }
        for k in self.futexes.keys() {
            user.insert(k.user_stack);
        }
        (user, kernel)
    }
}

/// Tallies of what eviction removed from the kernel's maps over the recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evicted {
    /// Stack-keyed entries idle for a whole window, removed at the cut.
    pub idle_keys: u64,
    /// Stacks no kept entry referred to, removed from stack maps over half full.
    pub stacks: u64,
    /// Entries of threads that had exited, removed once their last window was read.
    pub threads: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_what_each_key_added_since_the_last_cut() {
        let mut seen: Seen<u32, u64> = Seen::default();
        assert_eq!(seen.take(1, 10), 10);
        assert_eq!(seen.take(2, 5), 5);
        assert!(seen.take_idle().is_empty());
        // Key 1 added 7, key 2 nothing (idle).
        assert_eq!(seen.take(1, 17), 7);
        assert_eq!(seen.take(2, 5), 0);
        assert_eq!(seen.take_idle(), vec![2]);
        // A key made anew (smaller than before) counts whole; a forgotten key counts from zero.
        assert_eq!(seen.take(1, 3), 3);
        seen.forget(&2);
        assert_eq!(seen.take(2, 4), 4);
        assert_eq!(seen.keys().count(), 2);
    }

    #[test]
    fn syscall_windows_subtract_counts_and_histograms() {
        let mut hist = [0u64; HIST_BUCKETS];
        hist[10] = 4;
        let a = SyscallStats {
            count: 4,
            errors: 1,
            timed: 4,
            weighted: 4,
            drawn: 0,
            total_ns: 4000,
            max_ns: 1500,
            hist,
        };
        let mut b = a;
        b.count = 10;
        b.errors = 2;
        b.total_ns = 10_000;
        b.hist[9] = 6;
        // The running maximum did not rise: the window's is bounded by its highest bucket.
        let w = b.since(&a);
        assert_eq!((w.count, w.errors, w.total_ns), (6, 1, 6000));
        assert_eq!(w.hist[9], 6);
        assert_eq!(w.hist[10], 0);
        assert_eq!(w.max_ns, 1023);
        // It rose: the window holds the new maximum, exactly.
        b.max_ns = 9000;
        b.hist[13] = 1;
        b.count = 11;
        assert_eq!(b.since(&a).max_ns, 9000);
    }

    #[test]
    fn window_max_never_exceeds_the_running_maximum() {
        let mut hist = [0u64; HIST_BUCKETS];
        hist[12] = 1;
        assert_eq!(window_max(5000, 5000, &hist), 5000);
        assert_eq!(window_max(9000, 9000, &[0; HIST_BUCKETS]), 0);
    }

    #[test]
    fn thread_times_subtract() {
        let a = ThreadTimes {
            voluntary: 3,
            involuntary: 1,
            oncpu_ns: 100,
            blocked_ns: 50,
            runqueue_ns: 5,
            runqueue_after_wakeup_ns: 2,
            offcpu_hist: [0; HIST_BUCKETS],
            delay_hist: [0; HIST_BUCKETS],
        };
        let mut b = a;
        b.voluntary = 5;
        b.oncpu_ns = 180;
        let w = b.since(&a);
        assert_eq!(
            (w.voluntary, w.involuntary, w.oncpu_ns, w.blocked_ns),
            (2, 0, 80, 0)
        );
        assert!(!w.is_zero());
        assert!(a.since(&a).is_zero());
    }
}
