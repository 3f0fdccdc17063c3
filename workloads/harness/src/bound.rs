//! What ends a driver run: a duration or an operation count (`--duration 5s | --ops N`).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use crate::shutdown::Shutdown;

/// Why a run bound was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BoundError {
    #[error("--duration and --ops both given; a run is bounded by one of them")]
    Both,
    #[error("--ops must be at least 1")]
    ZeroOps,
    #[error("--duration must be longer than zero")]
    ZeroDuration,
}

/// How long a driver runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunBound {
    Duration(Duration),
    /// A total across all driver threads.
    Ops(u64),
}

impl RunBound {
    /// From the two flags, `default` when neither was given.
    pub fn from_flags(
        duration: Option<Duration>,
        ops: Option<u64>,
        default: Duration,
    ) -> Result<Self, BoundError> {
        match (duration, ops) {
            (Some(_), Some(_)) => Err(BoundError::Both),
            (_, Some(0)) => Err(BoundError::ZeroOps),
            (_, Some(n)) => Ok(Self::Ops(n)),
            (Some(d), None) if d.is_zero() => Err(BoundError::ZeroDuration),
            (Some(d), None) => Ok(Self::Duration(d)),
            (None, None) => Ok(Self::Duration(default)),
        }
    }

    /// The bound as driver-result parameters (`duration_ms` or `ops`).
    pub fn parameter(&self) -> (&'static str, serde_json::Value) {
        match self {
            Self::Duration(d) => ("duration_ms", serde_json::json!(d.as_millis() as u64)),
            Self::Ops(n) => ("ops", serde_json::json!(n)),
        }
    }
}

/// Shared by a run's threads: each asks [`Budget::next`] before every operation.
#[derive(Debug)]
pub struct Budget {
    deadline: Option<Instant>,
    ops: Option<u64>,
    issued: AtomicU64,
    shutdown: Shutdown,
}

impl Budget {
    /// A budget whose clock (for a duration bound) starts at `start`.
    pub fn new(bound: RunBound, start: Instant, shutdown: Shutdown) -> Self {
        let (deadline, ops) = match bound {
            RunBound::Duration(d) => (Some(start + d), None),
            RunBound::Ops(n) => (None, Some(n)),
        };
        Self {
            deadline,
            ops,
            issued: AtomicU64::new(0),
            shutdown,
        }
    }

    /// Whether the caller may start one more operation (claiming it, for an ops bound).
    pub fn next(&self) -> bool {
        if self.shutdown.requested() {
            return false;
        }
        if let Some(deadline) = self.deadline
            && Instant::now() >= deadline
        {
            return false;
        }
        match self.ops {
            Some(n) => self.issued.fetch_add(1, Ordering::Relaxed) < n,
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        let d = Duration::from_secs(5);
        assert_eq!(
            RunBound::from_flags(None, None, d),
            Ok(RunBound::Duration(d))
        );
        assert_eq!(
            RunBound::from_flags(Some(Duration::from_secs(1)), None, d),
            Ok(RunBound::Duration(Duration::from_secs(1)))
        );
        assert_eq!(
            RunBound::from_flags(None, Some(10), d),
            Ok(RunBound::Ops(10))
        );
        assert_eq!(
            RunBound::from_flags(Some(d), Some(10), d),
            Err(BoundError::Both)
        );
        assert_eq!(
            RunBound::from_flags(None, Some(0), d),
            Err(BoundError::ZeroOps)
        );
        assert_eq!(
            RunBound::from_flags(Some(Duration::ZERO), None, d),
            Err(BoundError::ZeroDuration)
        );
    }

    #[test]
    fn ops_budget_is_exact_across_threads() {
        let budget = Budget::new(RunBound::Ops(10_000), Instant::now(), Shutdown::new());
        let granted = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    while budget.next() {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(granted.into_inner(), 10_000);
    }

    #[test]
    fn a_past_deadline_or_a_shutdown_ends_the_run() {
        let start = Instant::now();
        let over = Budget::new(
            RunBound::Duration(Duration::from_nanos(1)),
            start,
            Shutdown::new(),
        );
        std::thread::sleep(Duration::from_millis(1));
        assert!(!over.next());

        let shutdown = Shutdown::new();
        let budget = Budget::new(RunBound::Ops(5), start, shutdown.clone());
        assert!(budget.next());
        shutdown.request();
        assert!(!budget.next());
    }
}
