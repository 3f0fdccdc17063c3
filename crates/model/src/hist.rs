//! Log2 histograms of nanoseconds, as the kernel side aggregates them.

use serde::{Deserialize, Serialize};

/// Bucket `i` counts values in `[2^i, 2^(i+1))` ns (bucket 0 also holds 0); the last bucket is
/// open-ended. Trailing empty buckets are not stored.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Log2Hist {
    pub buckets: Vec<u64>,
}

impl Log2Hist {
    pub fn from_buckets(buckets: &[u64]) -> Self {
        let len = buckets.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        Log2Hist {
            buckets: buckets[..len].to_vec(),
        }
    }

    pub fn add(&mut self, other: &Log2Hist) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Lower bound (ns) of the bucket holding quantile `q` (0..=1), or `None` when empty.
    pub fn quantile_floor(&self, q: f64) -> Option<u64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(if i == 0 { 0 } else { 1u64 << i });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_adds() {
        let mut a = Log2Hist::from_buckets(&[1, 0, 2, 0, 0]);
        assert_eq!(a.buckets, vec![1, 0, 2]);
        a.add(&Log2Hist::from_buckets(&[0, 0, 0, 0, 5]));
        assert_eq!(a.buckets, vec![1, 0, 2, 0, 5]);
        assert_eq!(a.count(), 8);
        assert_eq!(a.quantile_floor(0.5), Some(16));
        assert_eq!(a.quantile_floor(0.1), Some(0));
        assert_eq!(Log2Hist::default().quantile_floor(0.5), None);
    }
}
