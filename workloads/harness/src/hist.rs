//! The histogram every latency goes into, shared by the whole-run recorder and the window
//! series: hdrhistograms of nanoseconds with 3 significant digits.

use hdrhistogram::Histogram;

/// Precision of every histogram: values are kept to 3 significant decimal digits (0.1%).
pub const SIGNIFICANT_DIGITS: u8 = 3;

pub(crate) fn new_histogram() -> Histogram<u64> {
    // An auto-resizing histogram starting at [1, 2]; it grows to whatever is recorded.
    match Histogram::new(SIGNIFICANT_DIGITS) {
        Ok(h) => h,
        // 3 significant digits is within hdrhistogram's 0..=5.
        Err(_) => unreachable!("3 significant digits is a valid hdrhistogram precision"),
    }
}

/// Records into an auto-resizing histogram. `saturating_record` would clamp to the current
/// range instead of growing it, so it is only the fallback for values no histogram can hold.
pub(crate) fn record(hist: &mut Histogram<u64>, ns: u64) {
    if hist.record(ns).is_err() {
        hist.saturating_record(ns);
    }
}

/// Why two recorders could not be merged.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MergeError {
    #[error("window series differ in width ({left_ms} ms and {right_ms} ms)")]
    WindowWidth { left_ms: u64, right_ms: u64 },
    #[error(
        "recorders started at different instants; create every thread's recorder from one start"
    )]
    Start,
    #[error("histogram addition failed: {0}")]
    Histogram(String),
}
