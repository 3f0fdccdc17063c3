//! The servers' millisecond flags and the drivers' latency summaries, on top of the model's
//! duration grammar and formatting ([`switchyard_model::duration`], [`switchyard_model::units`]),
//! which every tool shares.

use std::time::Duration;

pub use switchyard_model::duration::{DurationError, parse_duration};

/// Milliseconds as a plain number (`300`), or a duration with a unit (`2s`): the servers'
/// `--exit-after-idle`. Usable directly as a clap `value_parser`.
pub fn parse_millis(s: &str) -> Result<Duration, String> {
    match s.parse::<u64>() {
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(_) => parse_duration(s).map_err(|e| e.to_string()),
    }
}

/// A latency for a driver's one-line summary: `850 ns`, `25.6 µs`, `8.12 ms`, `1.50 s`.
pub use switchyard_model::units::ns_latency as human_ns;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_and_human_ns() {
        assert_eq!(parse_millis("300"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_millis("2s"), Ok(Duration::from_secs(2)));
        assert!(parse_millis("soon").is_err());
        assert_eq!(human_ns(850), "850 ns");
        assert_eq!(human_ns(25_600), "25.6 µs");
        assert_eq!(human_ns(8_120_000), "8.12 ms");
        assert_eq!(human_ns(1_500_000_000), "1.50 s");
    }
}
