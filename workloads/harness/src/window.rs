//! The per-window latency series: for each window of a run (100 ms by default) the number of
//! operations completed in it, and their p99 and maximum latency.

use std::time::Duration;

use hdrhistogram::Histogram;

use crate::hist::{MergeError, new_histogram, record};

/// Width of a window when a driver is not told otherwise.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(100);

/// One window of the series, as written in a driver result.
pub use switchyard_model::WorkloadWindow as Window;

/// Latencies bucketed by completion time into fixed-width windows, one histogram per window.
#[derive(Clone, Debug)]
pub struct WindowSeries {
    width_ns: u64,
    windows: Vec<Histogram<u64>>,
}

impl WindowSeries {
    /// A series of `width` windows, in whole milliseconds (rounded down, at least 1 ms).
    pub fn new(width: Duration) -> Self {
        let width_ms = u64::try_from(width.as_millis())
            .unwrap_or(u64::MAX / 1_000_000)
            .clamp(1, u64::MAX / 1_000_000);
        let width_ns = width_ms * 1_000_000;
        Self {
            width_ns,
            windows: Vec::new(),
        }
    }

    pub fn width(&self) -> Duration {
        Duration::from_nanos(self.width_ns)
    }

    pub fn width_ms(&self) -> u64 {
        self.width_ns / 1_000_000
    }

    /// Records a latency for an operation that completed `offset_ns` after the start.
    pub fn record(&mut self, offset_ns: u64, latency_ns: u64) {
        let index = usize::try_from(offset_ns / self.width_ns).unwrap_or(usize::MAX);
        if index >= self.windows.len() {
            self.windows.resize_with(index + 1, new_histogram);
        }
        record(&mut self.windows[index], latency_ns);
    }

    /// Adds `other`'s windows to this series, window by window.
    pub fn merge(&mut self, other: &WindowSeries) -> Result<(), MergeError> {
        if self.width_ns != other.width_ns {
            return Err(MergeError::WindowWidth {
                left_ms: self.width_ms(),
                right_ms: other.width_ms(),
            });
        }
        if other.windows.len() > self.windows.len() {
            self.windows.resize_with(other.windows.len(), new_histogram);
        }
        for (mine, theirs) in self.windows.iter_mut().zip(&other.windows) {
            mine.add(theirs)
                .map_err(|e| MergeError::Histogram(format!("{e:?}")))?;
        }
        Ok(())
    }

    /// The series from the first window to the last one with an operation; windows in between
    /// with none are kept (zero operations), so the series is a continuous timeline.
    pub fn summary(&self) -> Vec<Window> {
        let width_ms = self.width_ms();
        self.windows
            .iter()
            .enumerate()
            .map(|(i, h)| Window {
                start_ms: (i as u64).saturating_mul(width_ms),
                operations: h.len(),
                p99_ns: if h.is_empty() {
                    0
                } else {
                    h.value_at_quantile(0.99)
                },
                max_ns: if h.is_empty() { 0 } else { h.max() },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn buckets_by_completion_time() {
        let mut s = WindowSeries::new(Duration::from_millis(100));
        for i in 0..100 {
            s.record(5 * MS, 1_000 + i); // window 0: 100 ops, 1,000..1,099 ns
        }
        s.record(99 * MS, 50_000); // still window 0, its max
        s.record(100 * MS, 7); // window 1 starts at exactly 100 ms
        s.record(350 * MS, 9); // window 3; window 2 stays empty
        let w = s.summary();
        assert_eq!(w.len(), 4);
        assert_eq!(
            w.iter().map(|w| w.start_ms).collect::<Vec<_>>(),
            [0, 100, 200, 300]
        );
        assert_eq!(
            w.iter().map(|w| w.operations).collect::<Vec<_>>(),
            [101, 1, 0, 1]
        );
        assert!(
            (1_098..=1_100).contains(&w[0].p99_ns),
            "p99 {}",
            w[0].p99_ns
        );
        assert!(w[0].max_ns.abs_diff(50_000) <= 50, "max {}", w[0].max_ns);
        assert_eq!((w[1].p99_ns, w[1].max_ns), (7, 7));
        assert_eq!((w[2].p99_ns, w[2].max_ns), (0, 0));
    }

    #[test]
    fn merge_lines_windows_up() {
        let mut a = WindowSeries::new(Duration::from_millis(10));
        let mut b = WindowSeries::new(Duration::from_millis(10));
        a.record(MS, 100);
        b.record(2 * MS, 300);
        b.record(25 * MS, 200);
        a.merge(&b).expect("merge");
        let w = a.summary();
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].operations, 2);
        assert_eq!(w[0].max_ns, 300);
        assert_eq!(w[1].operations, 0);
        assert_eq!((w[2].start_ms, w[2].operations), (20, 1));
    }

    #[test]
    fn widths_are_whole_milliseconds() {
        assert_eq!(WindowSeries::new(Duration::from_micros(10)).width_ms(), 1);
        assert_eq!(WindowSeries::new(Duration::ZERO).width_ms(), 1);
        assert_eq!(
            WindowSeries::new(Duration::from_micros(2_500)).width_ms(),
            2
        );
    }
}
