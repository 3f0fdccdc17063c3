//! The user side of spans measured one by one: the instances the kernel sends whole are kept
//! here (the slowest ones, and a uniform sample of the others), and the thresholds that
//! decide what it sends are set from the histogram as the recording goes.
//!
//! A typical instance costs the kernel a histogram update and nothing that crosses to user
//! space: only an instance at least as slow as the threshold (the P95 so far,
//! bucket-exact) crosses, or one in `every` of the others, `every` chosen so that about
//! [`TYPICAL_PER_S`] a second do.

use std::{cmp::Reverse, collections::BinaryHeap};

use switchyard_common::{SPAN_HIST_BUCKETS, SpanHist, SpanInstance, span_bucket_low, span_flags};

/// Slow instances kept per span (and window); the fastest of them go first when it fills.
pub const KEEP_SLOW: usize = 8192;
/// Typical instances kept per span (and window), a uniform sample of those sent.
pub const KEEP_TYPICAL: usize = 1024;
/// Typical instances the kernel is asked to send a second, per span.
pub const TYPICAL_PER_S: u64 = 200;
/// Until a span has this many instances, every one is sent: there is no P99 to go by yet.
const MIN_FOR_THRESHOLD: u64 = 200;

/// One span's durations, summed over CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hist {
    pub count: u64,
    pub total_ns: u64,
    pub open_at_start: u64,
    pub nested: u64,
    pub missed: u64,
    /// Slow instances the kernel did not send: the kept table held slower ones.
    pub passed_over: u64,
    pub buckets: Vec<u64>,
}

impl Default for Hist {
    fn default() -> Hist {
        Hist {
            count: 0,
            total_ns: 0,
            open_at_start: 0,
            nested: 0,
            missed: 0,
            passed_over: 0,
            buckets: vec![0; SPAN_HIST_BUCKETS],
        }
    }
}

impl Hist {
    /// The per-CPU values of one span, summed.
    pub fn sum(values: &[SpanHist]) -> Hist {
        let mut h = Hist::default();
        for v in values {
            h.count += v.count;
            h.total_ns += v.total_ns;
            h.open_at_start += v.open_at_start;
            h.nested += v.nested;
            h.missed += v.missed;
            h.passed_over += v.passed_over;
            for (a, b) in h.buckets.iter_mut().zip(v.buckets.iter()) {
                *a += b;
            }
        }
        h
    }

    /// What was added since `before`.
    pub fn since(&self, before: &Hist) -> Hist {
        Hist {
            count: self.count.saturating_sub(before.count),
            total_ns: self.total_ns.saturating_sub(before.total_ns),
            open_at_start: self.open_at_start.saturating_sub(before.open_at_start),
            nested: self.nested.saturating_sub(before.nested),
            missed: self.missed.saturating_sub(before.missed),
            passed_over: self.passed_over.saturating_sub(before.passed_over),
            buckets: self
                .buckets
                .iter()
                .zip(&before.buckets)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }

    /// The lowest duration (bucket-exact: the bucket's lowest) at or above which lie
    /// `ceil(count × (1 − q))` instances; 0 when empty.
    pub fn at_quantile(&self, q: f64) -> u64 {
        let slowest_first = self.buckets.iter().enumerate().rev();
        switchyard_model::quantile_low(
            self.count,
            slowest_first.map(|(b, n)| (span_bucket_low(b), *n)),
            q,
        )
    }

    /// (bucket's lowest ns, count) of the buckets that have any, ascending.
    pub fn sparse(&self) -> Vec<(u64, u64)> {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, n)| **n != 0)
            .map(|(b, n)| (span_bucket_low(b), *n))
            .collect()
    }
}

/// A slow instance in the heap: ordered by duration, then by arrival.
struct Slow(u64, u64, Box<SpanInstance>);

impl PartialEq for Slow {
    fn eq(&self, other: &Slow) -> bool {
        (self.0, self.1) == (other.0, other.1)
    }
}
impl Eq for Slow {}
impl PartialOrd for Slow {
    fn partial_cmp(&self, other: &Slow) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Slow {
    fn cmp(&self, other: &Slow) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(other.0, other.1))
    }
}

/// The instances kept of one span.
#[derive(Default)]
pub struct Kept {
    /// The slowest, by duration (a min-heap: the fastest of them leaves first).
    slow: BinaryHeap<Reverse<Slow>>,
    typical: Vec<SpanInstance>,
    typical_seen: u64,
    seq: u64,
    /// Slow instances the table had no room for.
    pub dropped: u64,
    rng: u64,
}

impl Kept {
    pub fn add(&mut self, i: SpanInstance) {
        self.seq += 1;
        let took = i.end.saturating_sub(i.start);
        if i.flags & span_flags::SLOW != 0 {
            if self.slow.len() < KEEP_SLOW {
                self.slow.push(Reverse(Slow(took, self.seq, Box::new(i))));
            } else if self.slow.peek().is_some_and(|Reverse(s)| s.0 < took) {
                self.slow.pop();
                self.slow.push(Reverse(Slow(took, self.seq, Box::new(i))));
                self.dropped += 1;
            } else {
                self.dropped += 1;
            }
        }
        if i.flags & span_flags::TYPICAL == 0 {
            return;
        }
        // Drawn as typical too: a copy in the sample, as typical.
        let mut i = i;
        i.flags &= !span_flags::SLOW;
        // Reservoir sampling: every typical instance sent has the same chance to stay.
        self.typical_seen += 1;
        if self.typical.len() < KEEP_TYPICAL {
            self.typical.push(i);
            return;
        }
        let r = self.next_random() % self.typical_seen;
        if (r as usize) < KEEP_TYPICAL {
            self.typical[r as usize] = i;
        }
    }

    /// xorshift64*: a uniform draw for the reservoir (no cryptographic need).
    fn next_random(&mut self) -> u64 {
        if self.rng == 0 {
            self.rng = 0x9e37_79b9_7f4a_7c15 ^ self.seq;
        }
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The duration below which a slow instance would be dropped here (the table is full of
    /// slower ones), so the kernel need not send it; 0 while the table has room.
    pub fn floor(&self) -> u64 {
        match self.slow.peek() {
            Some(Reverse(s)) if self.slow.len() >= KEEP_SLOW => s.0 + 1,
            _ => 0,
        }
    }

    /// Everything kept, slowest first, then the typical sample by start; the table empties
    /// (the next window keeps its own).
    pub fn take(&mut self) -> (Vec<SpanInstance>, u64) {
        let mut slow: Vec<_> = std::mem::take(&mut self.slow)
            .into_iter()
            .map(|Reverse(s)| *s.2)
            .collect();
        slow.sort_by_key(|i| Reverse(i.end.saturating_sub(i.start)));
        let mut typical = std::mem::take(&mut self.typical);
        typical.sort_by_key(|i| i.start);
        slow.extend(typical);
        self.typical_seen = 0;
        (slow, std::mem::take(&mut self.dropped))
    }
}

/// What the kernel is told for one span: (threshold ns, one in `every` of the others).
pub fn control(h: &Hist, elapsed_s: f64) -> (u64, u64) {
    if h.count < MIN_FOR_THRESHOLD {
        return (0, 1);
    }
    // The P95, not the P99: the P99 so far can stand above the recording's final one (a slow
    // start), and an instance between the two would then be in the slowest 1% but not kept.
    let threshold = h.at_quantile(0.95);
    let rate = h.count as f64 / elapsed_s.max(0.001);
    let every = ((rate / TYPICAL_PER_S as f64).ceil() as u64).max(1);
    (threshold, every)
}

/// What one span measured over a reading (the recording, or a window).
#[derive(Default)]
pub struct Measured {
    pub hist: Hist,
    /// The instances kept, slowest first, then the typical sample.
    pub kept: Vec<SpanInstance>,
    /// Kept-table and ring-buffer losses.
    pub dropped: u64,
    /// The threshold and sampling in force at the end ([`control`]).
    pub control: (u64, u64),
    /// Instances open at the end: on a live thread, on a thread that exited.
    pub open: (u64, u64),
    /// A Go span's binary's wait reasons, by number (empty for a native span).
    pub reasons: std::sync::Arc<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_common::span_bucket;

    fn hist(durations: &[u64]) -> Hist {
        let mut h = Hist::default();
        for &d in durations {
            h.count += 1;
            h.total_ns += d;
            h.buckets[span_bucket(d)] += 1;
        }
        h
    }

    #[test]
    fn the_p99_is_where_the_slowest_hundredth_begins() {
        // 990 instances of 200 µs, 10 of 8 ms: the P99 is the slowest ten's bucket.
        let mut d = vec![200_000; 990];
        d.extend([8_000_000; 10]);
        let h = hist(&d);
        let p99 = h.at_quantile(0.99);
        assert!(
            p99 <= 8_000_000 && 8_000_000 - p99 < 8_000_000 / 64,
            "{p99}"
        );
        let p50 = h.at_quantile(0.5);
        assert!(p50 <= 200_000 && 200_000 - p50 < 200_000 / 64, "{p50}");
        assert_eq!(h.at_quantile(1.0), p99);
        assert_eq!(Hist::default().at_quantile(0.99), 0);
    }

    #[test]
    fn the_control_sends_everything_until_there_is_a_p99() {
        assert_eq!(control(&hist(&[5; 10]), 1.0), (0, 1));
        let mut d = vec![1_000; 9_000];
        d.extend([1_000_000; 1_000]);
        let (threshold, every) = control(&hist(&d), 1.0);
        assert!(threshold > 1_000 && threshold < 1_000_000, "{threshold}");
        assert_eq!(every, 50);
    }

    fn instance(took: u64, flags: u32, start: u64) -> SpanInstance {
        // SAFETY: a plain-old-data struct; all zeroes is a valid value.
        let mut i: SpanInstance = unsafe { std::mem::zeroed() };
        i.start = start;
        i.end = start + took;
        i.flags = flags;
        i
    }

    #[test]
    fn the_slowest_stay_when_the_table_fills() {
        let mut k = Kept::default();
        for n in 0..(KEEP_SLOW as u64 + 10) {
            k.add(instance(1_000 + n, span_flags::SLOW, n));
        }
        let (kept, dropped) = k.take();
        assert_eq!(kept.len(), KEEP_SLOW);
        assert_eq!(dropped, 10);
        assert_eq!(kept[0].end - kept[0].start, 1_000 + KEEP_SLOW as u64 + 9);
        assert_eq!(kept.last().map(|i| i.end - i.start), Some(1_010));
        assert_eq!(k.floor(), 0, "an empty table takes every slow one");
        for n in 0..KEEP_SLOW as u64 {
            k.add(instance(2_000 + n, span_flags::SLOW, n));
        }
        // Full: only one slower than its fastest (2,000 ns) would stay.
        assert_eq!(k.floor(), 2_001);
        k.add(instance(2_001, span_flags::SLOW, 0));
        assert_eq!(k.floor(), 2_002);
        k.take();
        for n in 0..(KEEP_TYPICAL as u64 * 3) {
            k.add(instance(10, span_flags::TYPICAL, n));
        }
        let (kept, dropped) = k.take();
        assert_eq!((kept.len(), dropped), (KEEP_TYPICAL, 0));
        // A uniform sample of 3× as many: some of each third stay.
        for third in 0..3u64 {
            let lo = third * KEEP_TYPICAL as u64;
            let hi = lo + KEEP_TYPICAL as u64;
            let n = kept.iter().filter(|i| (lo..hi).contains(&i.start)).count();
            assert!(n > KEEP_TYPICAL / 6, "third {third}: {n}");
        }
    }
}
