//! Durations on every command line of the project (switchyard's flags, the workloads' servers
//! and drivers): a number and a unit, `10s`, `500ms`, `1.5s`, `2m`. One grammar, so a value
//! that one tool accepts means the same to every other.

use std::time::Duration;

/// Why a duration argument was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("duration `{0}` has no unit (use ns, us, ms, s, m or h, e.g. `500ms` or `10s`)")]
    NoUnit(String),
    #[error("duration `{input}` has an unknown unit `{unit}` (use ns, us, ms, s, m or h)")]
    UnknownUnit { input: String, unit: String },
    #[error("`{0}` is not a duration (a number and a unit: 10s, 500ms, 2m)")]
    NotANumber(String),
    #[error("duration `{0}` is out of range")]
    OutOfRange(String),
    #[error("`{0}` must be a positive duration")]
    Zero(String),
}

/// Parses a non-negative number followed by a unit: `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`.
///
/// Fractions are allowed (`1.5s`); a bare number is refused because its unit would be a guess.
/// Usable directly as a clap `value_parser`.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| DurationError::NoUnit(input.to_owned()))?;
    let (number, unit) = s.split_at(split);
    if number.is_empty() {
        return Err(DurationError::NotANumber(input.to_owned()));
    }
    let nanos_per_unit: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        other => {
            return Err(DurationError::UnknownUnit {
                input: input.to_owned(),
                unit: other.to_owned(),
            });
        }
    };
    // Integers are converted exactly; fractions through f64, which is exact to the nanosecond
    // for any duration a workload runs.
    if let Ok(whole) = number.parse::<u64>() {
        return (whole as u128 * nanos_per_unit as u128)
            .try_into()
            .map(Duration::from_nanos)
            .map_err(|_| DurationError::OutOfRange(input.to_owned()));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError::NotANumber(input.to_owned()))?;
    let nanos = (value * nanos_per_unit).round();
    if !nanos.is_finite() || nanos >= u64::MAX as f64 {
        return Err(DurationError::OutOfRange(input.to_owned()));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// [`parse_duration`], refusing zero: for lengths and thresholds where zero means nothing.
pub fn parse_positive_duration(input: &str) -> Result<Duration, DurationError> {
    match parse_duration(input)? {
        Duration::ZERO => Err(DurationError::Zero(input.trim().to_owned())),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration(" 0s "), Ok(Duration::ZERO));
    }

    #[test]
    fn fractions() {
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.25ms"), Ok(Duration::from_micros(250)));
    }

    #[test]
    fn refusals() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(
            parse_duration("10"),
            Err(DurationError::NoUnit("10".into()))
        );
        assert!(matches!(
            parse_duration("10sec"),
            Err(DurationError::UnknownUnit { unit, .. }) if unit == "sec"
        ));
        assert_eq!(
            parse_duration("ms"),
            Err(DurationError::NotANumber("ms".into()))
        );
        assert_eq!(
            parse_duration("1.2.3s"),
            Err(DurationError::NotANumber("1.2.3s".into()))
        );
        assert_eq!(
            parse_duration("-1s"),
            Err(DurationError::NotANumber("-1s".into()))
        );
        assert!(matches!(
            parse_duration("99999999999999h"),
            Err(DurationError::OutOfRange(_))
        ));
    }

    #[test]
    fn positive() {
        assert_eq!(parse_positive_duration("1us"), Ok(Duration::from_micros(1)));
        assert_eq!(
            parse_positive_duration(" 0ms"),
            Err(DurationError::Zero("0ms".into()))
        );
        let e = parse_duration("ten").unwrap_err().to_string();
        assert!(e.contains("not a duration"), "{e}");
    }
}
