//! Latency recording: hdrhistograms of nanosecond values with 3 significant digits, one
//! [`Recorder`] per driver thread, merged when the threads are done.

use std::time::{Duration, Instant};

use base64::Engine as _;
use hdrhistogram::{
    Histogram,
    serialization::{Deserializer, Serializer as _, V2DeflateSerializer},
};

use crate::window::WindowSeries;

pub use crate::hist::{MergeError, SIGNIFICANT_DIGITS};
use crate::hist::{new_histogram, record};

pub use switchyard_model::driver::Percentiles;

/// A latency histogram (nanoseconds, [`SIGNIFICANT_DIGITS`]).
#[derive(Clone, Debug)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    pub fn new() -> Self {
        Self {
            hist: new_histogram(),
        }
    }

    /// Records one latency in nanoseconds.
    pub fn record(&mut self, ns: u64) {
        record(&mut self.hist, ns);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LatencyRecorder) -> Result<(), MergeError> {
        self.hist
            .add(&other.hist)
            .map_err(|e| MergeError::Histogram(format!("{e:?}")))
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The value at quantile `q` (0.0..=1.0), as hdrhistogram reports it: the highest value
    /// equivalent (within the precision) to the recorded one. 0 when empty.
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(q)
        }
    }

    pub fn max(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.max()
        }
    }

    pub fn min(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.min()
        }
    }

    pub fn mean(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.mean()
        }
    }

    pub fn percentiles(&self) -> Percentiles {
        Percentiles {
            p50: self.value_at_quantile(0.50),
            p90: self.value_at_quantile(0.90),
            p99: self.value_at_quantile(0.99),
            p99_9: self.value_at_quantile(0.999),
            p99_99: self.value_at_quantile(0.9999),
            max: self.max(),
        }
    }

    /// The underlying histogram, for anything this type does not expose.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// hdrhistogram's V2 deflate serialisation, base64 (standard alphabet, padded): the form
    /// other hdrhistogram implementations read (`HistogramLogReader` and friends).
    pub fn to_base64(&self) -> Result<String, String> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.hist, &mut bytes)
            .map_err(|e| format!("{e:?}"))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// Reads what [`LatencyRecorder::to_base64`] wrote.
    pub fn from_base64(text: &str) -> Result<Self, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("not base64: {e}"))?;
        let mut hist: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("not an hdrhistogram V2 serialisation: {e:?}"))?;
        hist.auto(true);
        Ok(Self { hist })
    }
}

/// One driver thread's latencies: the whole-run histogram and the per-window series.
///
/// Every thread's recorder is created from the same `start`, so windows line up when merged.
#[derive(Clone, Debug)]
pub struct Recorder {
    start: Instant,
    latency: LatencyRecorder,
    windows: WindowSeries,
}

impl Recorder {
    pub fn new(start: Instant, window: Duration) -> Self {
        Self {
            start,
            latency: LatencyRecorder::new(),
            windows: WindowSeries::new(window),
        }
    }

    /// Records an operation that took `latency` and completed at `completed_at`; the window is
    /// chosen by completion time (a completion before `start` counts in the first window).
    pub fn record(&mut self, latency: Duration, completed_at: Instant) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.record_ns(ns, completed_at);
    }

    pub fn record_ns(&mut self, latency_ns: u64, completed_at: Instant) {
        let offset = completed_at.saturating_duration_since(self.start);
        self.latency.record(latency_ns);
        self.windows.record(
            u64::try_from(offset.as_nanos()).unwrap_or(u64::MAX),
            latency_ns,
        );
    }

    pub fn merge(&mut self, other: &Recorder) -> Result<(), MergeError> {
        if self.start != other.start {
            return Err(MergeError::Start);
        }
        self.windows.merge(&other.windows)?;
        self.latency.merge(&other.latency)
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    pub fn latency(&self) -> &LatencyRecorder {
        &self.latency
    }

    pub fn windows(&self) -> &WindowSeries {
        &self.windows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hdrhistogram answers with the highest value equivalent to the true one: within 0.1%.
    #[track_caller]
    fn assert_close(actual: u64, expected: u64) {
        let tolerance = expected / 1000 + 1;
        assert!(
            actual.abs_diff(expected) <= tolerance,
            "expected {expected} ±{tolerance}, got {actual}"
        );
    }

    #[test]
    fn percentiles_of_a_uniform_distribution() {
        let mut r = LatencyRecorder::new();
        for ns in 1..=100_000 {
            r.record(ns);
        }
        let p = r.percentiles();
        assert_eq!(r.count(), 100_000);
        assert_close(p.p50, 50_000);
        assert_close(p.p90, 90_000);
        assert_close(p.p99, 99_000);
        assert_close(p.p99_9, 99_900);
        assert_close(p.p99_99, 99_990);
        assert_close(p.max, 100_000);
        assert_eq!(r.min(), 1);
    }

    #[test]
    fn percentiles_of_a_long_tail() {
        // 9,990 fast operations at 1 µs and 10 slow ones at 5 ms: p99.9 is still fast,
        // p99.99 lands in the tail.
        let mut r = LatencyRecorder::new();
        for _ in 0..9_990 {
            r.record(1_000);
        }
        for _ in 0..10 {
            r.record(5_000_000);
        }
        let p = r.percentiles();
        assert_close(p.p50, 1_000);
        assert_close(p.p99, 1_000);
        assert_close(p.p99_9, 1_000);
        assert_close(p.p99_99, 5_000_000);
        assert_close(p.max, 5_000_000);
    }

    #[test]
    fn empty_recorder_reports_zeros() {
        let r = LatencyRecorder::new();
        assert_eq!(r.percentiles(), Percentiles::default());
        assert_eq!(r.count(), 0);
    }

    #[test]
    fn merge_adds_counts_and_keeps_extremes() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        for ns in 1..=1_000 {
            a.record(ns);
        }
        for ns in 1_001..=2_000 {
            b.record(ns * 1_000);
        }
        a.merge(&b).expect("merge");
        assert_eq!(a.count(), 2_000);
        assert_eq!(a.min(), 1);
        assert_close(a.max(), 2_000_000);
        assert_close(a.value_at_quantile(0.5), 1_000);
    }

    #[test]
    fn base64_round_trip() {
        let mut a = LatencyRecorder::new();
        for ns in [0, 1, 17, 1_000, 123_456, 9_876_543_210] {
            a.record(ns);
        }
        let text = a.to_base64().expect("serialise");
        let b = LatencyRecorder::from_base64(&text).expect("deserialise");
        assert_eq!(a.histogram(), b.histogram());
        // What is read back can still grow: it merges with a histogram of larger values.
        let mut c = b.clone();
        let mut big = LatencyRecorder::new();
        big.record(u64::MAX / 4);
        c.merge(&big).expect("merge into a deserialised histogram");
        assert_eq!(c.count(), 7);
    }

    #[test]
    fn from_base64_refuses_garbage() {
        assert!(LatencyRecorder::from_base64("not base64!").is_err());
        assert!(LatencyRecorder::from_base64("aGVsbG8=").is_err());
    }

    #[test]
    fn recorders_merge_across_threads() {
        let start = Instant::now();
        let window = Duration::from_millis(100);
        let mut a = Recorder::new(start, window);
        let mut b = Recorder::new(start, window);
        a.record_ns(1_000, start + Duration::from_millis(10));
        b.record_ns(3_000, start + Duration::from_millis(20));
        b.record_ns(7_000, start + Duration::from_millis(150));
        a.merge(&b).expect("merge");
        assert_eq!(a.latency().count(), 3);
        let w = a.windows().summary();
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].operations, w[1].operations), (2, 1));

        let other_start = Recorder::new(start + Duration::from_millis(1), window);
        assert_eq!(a.merge(&other_start), Err(MergeError::Start));
        let other_width = Recorder::new(start, Duration::from_millis(50));
        assert!(matches!(
            a.merge(&other_width),
            Err(MergeError::WindowWidth { .. })
        ));
    }
}
