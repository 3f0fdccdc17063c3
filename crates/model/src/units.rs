//! Units of named figures, and numbers, durations, sizes and dates as people read them.
//!
//! The terminal summary, the HTML report, comparisons and budget verdicts all format through
//! this module, so a figure reads the same wherever it is shown.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// The unit of a named figure (see [`crate::metrics`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Events, calls or operations.
    Count,
    /// Events per second.
    PerSecond,
    /// Events per operation.
    PerOp,
    /// Microseconds per operation.
    MicrosPerOp,
    Micros,
    Millis,
    Seconds,
    /// A percentage, 0–100 (not a share).
    Percent,
    MiB,
    /// Bytes per operation.
    BytesPerOp,
}

/// A unit name that is not one of [`Unit::ALL`]'s suffixes.
#[derive(Debug, thiserror::Error)]
#[error("unknown unit `{0}`")]
pub struct UnknownUnit(pub String);

impl Unit {
    pub const ALL: [Unit; 10] = [
        Unit::Count,
        Unit::PerSecond,
        Unit::PerOp,
        Unit::MicrosPerOp,
        Unit::Micros,
        Unit::Millis,
        Unit::Seconds,
        Unit::Percent,
        Unit::MiB,
        Unit::BytesPerOp,
    ];

    /// The unit as tables and serialized figures spell it: "count", "1/s", "µs/op", "%".
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Count => "count",
            Unit::PerSecond => "1/s",
            Unit::PerOp => "1/op",
            Unit::MicrosPerOp => "µs/op",
            Unit::Micros => "µs",
            Unit::Millis => "ms",
            Unit::Seconds => "s",
            Unit::Percent => "%",
            Unit::MiB => "MiB",
            Unit::BytesPerOp => "B/op",
        }
    }

    /// `v` with this unit, as messages show it: "93.76 µs", "1.5/op", "85.84%", "7".
    pub fn show(self, v: f64) -> String {
        self.attach(plain(v))
    }

    /// `v` in this unit as people read it, with significant digits: a count or a rate
    /// "3.02", "1,235" (its "/s" or "/op" left to the sentence); a time "12.3 µs"; a share
    /// "67.2%"; a size "12.0 MiB", "312 B". The summary and the page give figures so.
    pub fn human(self, v: f64) -> String {
        match self {
            Unit::Count | Unit::PerSecond | Unit::PerOp => significant(v),
            Unit::Micros | Unit::MicrosPerOp => ns_f(v * 1e3),
            Unit::Millis => ns_f(v * 1e6),
            Unit::Seconds => ns_f(v * 1e9),
            Unit::Percent => percent(v / 100.0),
            Unit::MiB => bytes((v * 1024.0 * 1024.0).round() as u64),
            Unit::BytesPerOp => bytes(v.round() as u64),
        }
    }

    /// [`Unit::human`] with the unit's rate after it, for a table of named figures:
    /// "12,345", "3.02/op", "240/s", "1.5 µs/op", "312 B/op", "82.2%".
    pub fn human_unit(self, v: f64) -> String {
        match self {
            Unit::Count if v.fract() == 0.0 && (0.0..1e15).contains(&v) => thousands(v as u64),
            Unit::PerSecond => format!("{}/s", self.human(v)),
            Unit::PerOp | Unit::MicrosPerOp | Unit::BytesPerOp => format!("{}/op", self.human(v)),
            _ => self.human(v),
        }
    }

    /// A number already written, `n`, with this unit after it.
    pub fn attach(self, n: String) -> String {
        match self {
            Unit::Count => n,
            Unit::Percent => format!("{n}%"),
            Unit::PerSecond => format!("{n}/s"),
            Unit::PerOp => format!("{n}/op"),
            u => format!("{n} {}", u.suffix()),
        }
    }
}

/// Pads like a string, so `{:>7}` aligns table columns.
impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.suffix())
    }
}

impl FromStr for Unit {
    type Err = UnknownUnit;

    fn from_str(s: &str) -> Result<Unit, UnknownUnit> {
        Unit::ALL
            .into_iter()
            .find(|u| u.suffix() == s)
            .ok_or_else(|| UnknownUnit(s.to_string()))
    }
}

/// Serialized as its suffix, the string figures carried before units were typed.
impl Serialize for Unit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.suffix())
    }
}

impl<'de> Deserialize<'de> for Unit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Unit, D::Error> {
        String::deserialize(d)?.parse().map_err(de::Error::custom)
    }
}

/// A figure with its unit, or the bare number when the unit is not known (a figure the run
/// lacks): see [`Unit::show`].
pub fn with_unit(v: f64, unit: Option<Unit>) -> String {
    unit.map_or_else(|| plain(v), |u| u.show(v))
}

/// Groups a string of decimal digits by thousands: "1234567" → "1,234,567".
fn group(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Decimals that leave `x` with `significant` significant digits, at most `max`.
fn decimals(x: f64, significant: i32, max: i32) -> usize {
    let magnitude = x.abs().log10().floor() as i32;
    (significant - 1 - magnitude).clamp(0, max) as usize
}

/// `v` in the largest of `steps` (unit, size, decimals) it reaches, joined by `sep`; below the
/// first step, as a whole number of `base`.
fn scaled(v: u64, base: &str, sep: &str, steps: &[(&str, u64, usize)]) -> String {
    match steps.iter().rev().find(|(_, size, _)| v >= *size) {
        Some((unit, size, decimals)) => {
            format!("{:.decimals$}{sep}{unit}", v as f64 / *size as f64)
        }
        None => format!("{v}{sep}{base}"),
    }
}

/// 12345678 → "12,345,678".
pub fn thousands(n: u64) -> String {
    group(&n.to_string())
}

/// Steps from nanoseconds up to seconds, with `secs` decimals for seconds.
fn time_steps(secs: usize) -> [(&'static str, u64, usize); 3] {
    [
        ("µs", 1_000, 1),
        ("ms", 1_000_000, 1),
        ("s", 1_000_000_000, secs),
    ]
}

/// A count and its noun, plural unless one: "1 stack", "3 stacks", "1,024 calls".
pub fn counted(n: u64, noun: &str) -> String {
    format!("{} {noun}{}", thousands(n), if n == 1 { "" } else { "s" })
}

/// Nanoseconds, humanly: "812 ns", "3.4 µs", "12.0 ms", "1.25 s".
pub fn ns(v: u64) -> String {
    scaled(v, "ns", " ", &time_steps(2))
}

/// Fractional nanoseconds (a per-operation time): like [`ns`], with a decimal under 1 µs.
pub fn ns_f(v: f64) -> String {
    if v < 1_000.0 {
        format!("{} ns", significant(v))
    } else {
        ns(v.round() as u64)
    }
}

/// A latency in a driver's one-line summary, two decimals from milliseconds up: "850 ns",
/// "25.6 µs", "8.12 ms", "1.50 s".
pub fn ns_latency(v: u64) -> String {
    scaled(
        v,
        "ns",
        " ",
        &[
            ("µs", 1_000, 1),
            ("ms", 1_000_000, 2),
            ("s", 1_000_000_000, 2),
        ],
    )
}

/// A compact bucket label: 2^i ns → "1ns", "512ns", "1.0µs", "65.5µs", "1.0ms", "4.3s".
pub fn ns_short(v: u64) -> String {
    scaled(v, "ns", "", &time_steps(1))
}

/// Bytes, humanly: "812 B", "3.4 KiB", "12.0 MiB", "1.50 GiB".
pub fn bytes(v: u64) -> String {
    scaled(
        v,
        "B",
        " ",
        &[
            ("KiB", 1 << 10, 1),
            ("MiB", 1 << 20, 1),
            ("GiB", 1 << 30, 2),
        ],
    )
}

/// Seconds of wall time with one decimal: 2.04 → "2.0 s" (a recording's or a window's length).
pub fn seconds(secs: f64) -> String {
    format!("{secs:.1} s")
}

/// A length as a progress bar's total, whole seconds when it is one: "30s", "1.5s".
pub fn seconds_short(secs: f64) -> String {
    if secs.fract() == 0.0 {
        format!("{secs:.0}s")
    } else {
        format!("{secs:.1}s")
    }
}

/// KiB (as the kernel reports resident memory) in MiB with one decimal: 2048 → "2.0 MiB".
pub fn kib_as_mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Events per second: "240,855", "12.5"; "–" when the duration is zero.
pub fn rate(n: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return "–".into();
    }
    let r = n as f64 / secs;
    if r >= 100.0 {
        thousands(r.round() as u64)
    } else {
        format!("{r:.1}")
    }
}

/// A share as a whole percentage, where a decimal would claim too much: 0.6723 → "67%".
pub fn percent_whole(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// Nanoseconds compactly with three significant digits, for a histogram's binary bucket
/// edges: 2^10 ns → "1.02µs", 2^20 ns → "1.05ms", never a rounded "1.0µs" that would put a
/// decimal edge where the bucket has a binary one; "512ns" below a microsecond.
pub fn ns_compact(v: u64) -> String {
    if v < 1_000 {
        return format!("{v}ns");
    }
    let (div, unit) = match v {
        1_000_000_000.. => (1e9, "s"),
        1_000_000.. => (1e6, "ms"),
        _ => (1e3, "µs"),
    };
    let x = v as f64 / div;
    let digits = decimals(x, 3, 2);
    format!("{x:.digits$}{unit}")
}

/// A share as a percentage with one decimal: 0.6723 → "67.2%".
pub fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// A ratio with three significant digits: 3.0214 → "3.02", 0.004123 → "0.00412",
/// 1234.5 → "1,235".
pub fn significant(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    if x.abs() >= 100.0 {
        return thousands(x.round() as u64);
    }
    let decimals = decimals(x, 3, 9);
    format!("{x:.decimals$}")
}

/// A signed figure in a table column, compactly: "1.235e6", "-1,500", "123.5", "1.23",
/// "0.0123".
pub fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{v:.3e}")
    } else if a >= 1000.0 {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("{sign}{}", group(&format!("{a:.0}")))
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a == 0.0 {
        "0".into()
    } else {
        format!("{v:.4}")
    }
}

/// A change as [`compact`], with a "+" when it grew: "+50.00", "-92.73", "0".
pub fn compact_delta(d: f64) -> String {
    format!("{}{}", if d > 0.0 { "+" } else { "" }, compact(d))
}

/// A change already in percent, signed, with one decimal: 10.04 → "+10.0%".
pub fn percent_change(p: f64) -> String {
    format!("{p:+.1}%")
}

/// A figure as budget files write limits: whole numbers as they are, others with 4
/// significant digits and no trailing zeros ("0.05", not "0.05000").
pub fn plain(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{v:.0}");
    }
    let digits = decimals(v, 4, 6);
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Unix time in ns → "2026-11-21 23:45:01 UTC".
pub fn utc(unix_ns: u64) -> String {
    // Every u64 of nanoseconds (up to the year 2554) is inside jiff's range.
    match jiff::Timestamp::from_nanosecond(i128::from(unix_ns)) {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
        Err(_) => format!("{unix_ns} ns after 1970-01-01 UTC"),
    }
}

/// `v` with `decimals` digits after the point and a comma between thousands (`38,007`,
/// `1,234,567.89`): the story tables' figures.
pub fn grouped(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    let (sign, digits) = match text.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", text.as_str()),
    };
    match digits.split_once('.') {
        Some((int, frac)) => format!("{sign}{}.{frac}", group(int)),
        None => format!("{sign}{}", group(digits)),
    }
}

/// A command line as a shell would read it back: arguments with spaces or shell characters
/// are single-quoted.
pub fn command_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_alphanumeric() || "_-./:=,+@%^".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(ns(999), "999 ns");
        assert_eq!(ns(1500), "1.5 µs");
        assert_eq!(ns(2_500_000), "2.5 ms");
        assert_eq!(ns(1_250_000_000), "1.25 s");
        assert_eq!(ns_f(12.345), "12.3 ns");
        assert_eq!(ns_short(1), "1ns");
        assert_eq!(ns_short(1024), "1.0µs");
        assert_eq!(ns_short(1 << 20), "1.0ms");
        assert_eq!(rate(10, 0.0), "–");
        assert_eq!(rate(1000, 2.0), "500");
        assert_eq!(rate(25, 2.0), "12.5");
        assert_eq!(percent(0.6723), "67.2%");
        assert_eq!(percent_whole(0.6723), "67%");
        assert_eq!(ns_compact(512), "512ns");
        assert_eq!(ns_compact(1 << 10), "1.02µs");
        assert_eq!(ns_compact(1 << 20), "1.05ms");
        assert_eq!(ns_compact(1 << 17), "131µs");
        assert_eq!(ns_compact(1 << 14), "16.4µs");
        assert_eq!(seconds(2.04), "2.0 s");
        assert_eq!(Unit::Count.human_unit(12345.0), "12,345");
        assert_eq!(Unit::Count.human_unit(12.5), "12.5");
        assert_eq!(Unit::PerOp.human_unit(3.0214), "3.02/op");
        assert_eq!(Unit::PerSecond.human_unit(240.0), "240/s");
        assert_eq!(Unit::MicrosPerOp.human_unit(1.5), "1.5 µs/op");
        assert_eq!(Unit::BytesPerOp.human_unit(312.0), "312 B/op");
        assert_eq!(Unit::Percent.human_unit(82.16), "82.2%");
        assert_eq!(seconds_short(30.0), "30s");
        assert_eq!(seconds_short(1.5), "1.5s");
        assert_eq!(significant(3.0214), "3.02");
        assert_eq!(significant(0.004123), "0.00412");
        assert_eq!(significant(1234.5), "1,235");
        assert_eq!(significant(0.0), "0");
    }

    #[test]
    fn scales_at_each_step() {
        assert_eq!(ns_short(4_300_000_000), "4.3s");
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(3_500), "3.4 KiB");
        assert_eq!(bytes(32 << 20), "32.0 MiB");
        assert_eq!(bytes(3 << 29), "1.50 GiB");
        assert_eq!(kib_as_mib(2048), "2.0 MiB");
        assert_eq!(counted(1, "run"), "1 run");
        assert_eq!(counted(1024, "call"), "1,024 calls");
    }

    #[test]
    fn formats_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2000-02-29 12:34:56 UTC
        assert_eq!(utc(951_827_696_000_000_000), "2000-02-29 12:34:56 UTC");
        assert_eq!(utc(1_795_305_029_440_925_409), "2026-11-21 23:50:29 UTC");
        assert_eq!(utc(u64::MAX), "2554-07-21 23:34:33 UTC");
    }

    #[test]
    fn compact_table_values() {
        assert_eq!(compact(1234567.0), "1.235e6");
        assert_eq!(compact(12345.4), "12,345");
        assert_eq!(compact(-1500.0), "-1,500");
        assert_eq!(compact(123.45), "123.5");
        assert_eq!(compact(1.2345), "1.23");
        assert_eq!(compact(0.012345), "0.0123");
        assert_eq!(compact_delta(50.0), "+50.00");
        assert_eq!(compact_delta(-92.73), "-92.73");
        assert_eq!(compact_delta(0.0), "0");
        assert_eq!(percent_change(10.04), "+10.0%");
        assert_eq!(percent_change(-71.5), "-71.5%");
    }

    #[test]
    fn figures_read_humanly() {
        assert_eq!(Unit::PerOp.human(10747.0), "10,747");
        assert_eq!(Unit::PerOp.human(4457.1667), "4,457");
        assert_eq!(Unit::PerOp.human(3.0014), "3.00");
        assert_eq!(Unit::MicrosPerOp.human(12.34), "12.3 µs");
        assert_eq!(Unit::Millis.human(0.5), "500.0 µs");
        assert_eq!(Unit::Percent.human(67.23), "67.2%");
        assert_eq!(Unit::MiB.human(12.0), "12.0 MiB");
        assert_eq!(Unit::BytesPerOp.human(311.6), "312 B");
    }

    fn unit(s: &str) -> Option<Unit> {
        Some(s.parse().expect("a known unit"))
    }

    #[test]
    fn plain_numbers_with_units() {
        assert_eq!(plain(1.23456), "1.235");
        assert_eq!(plain(12345.6), "12346");
        assert_eq!(plain(0.0012346), "0.001235");
        assert_eq!(with_unit(93.756, unit("µs")), "93.76 µs");
        assert_eq!(with_unit(1.5, unit("1/op")), "1.5/op");
        assert_eq!(with_unit(0.05, unit("1/op")), "0.05/op");
        assert_eq!(plain(2.0004), "2");
        assert_eq!(with_unit(85.84, unit("%")), "85.84%");
        assert_eq!(with_unit(7.0, unit("count")), "7");
        assert_eq!(with_unit(1024.0, unit("MiB")), "1024 MiB");
        assert_eq!(with_unit(1.5, None), "1.5");
    }

    #[test]
    fn units_spell_and_serialize_as_their_suffix() {
        for u in Unit::ALL {
            assert_eq!(u.suffix().parse::<Unit>().unwrap(), u);
            let json = serde_json::to_string(&u).unwrap();
            assert_eq!(json, format!("\"{}\"", u.suffix()));
            assert_eq!(serde_json::from_str::<Unit>(&json).unwrap(), u);
        }
        assert_eq!(format!("[{:>7}]", Unit::MicrosPerOp), "[  µs/op]");
        let e = serde_json::from_str::<Unit>("\"furlongs\"").unwrap_err();
        assert!(e.to_string().contains("unknown unit `furlongs`"), "{e}");
    }

    #[test]
    fn quotes_command_lines() {
        let args: Vec<String> = ["./srv", "--port", "9000", "a b", "it's", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(command_line(&args), r"./srv --port 9000 'a b' 'it'\''s' ''");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0.0, 0), "0");
        assert_eq!(grouped(999.4, 0), "999");
        assert_eq!(grouped(38007.4, 0), "38,007");
        assert_eq!(grouped(1234567.891, 2), "1,234,567.89");
        assert_eq!(grouped(-1234.0, 0), "-1,234");
        // Ties to even, as Python's format does.
        assert_eq!(grouped(2.5, 0), "2");
        assert_eq!(grouped(3.5, 0), "4");
    }
}
