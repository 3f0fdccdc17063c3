//! Numbers, durations and dates as people read them.

/// 12345678 → "12,345,678".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Nanoseconds, humanly: "812 ns", "3.4 µs", "12.0 ms", "1.25 s".
pub fn ns(v: u64) -> String {
    let f = v as f64;
    if v < 1_000 {
        format!("{v} ns")
    } else if v < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else if v < 1_000_000_000 {
        format!("{:.1} ms", f / 1e6)
    } else {
        format!("{:.2} s", f / 1e9)
    }
}

/// Fractional nanoseconds (a per-operation time): like [`ns`], with a decimal under 1 µs.
pub fn ns_f(v: f64) -> String {
    if v < 1_000.0 {
        format!("{} ns", significant(v))
    } else {
        ns(v.round() as u64)
    }
}

/// A compact bucket label: 2^i ns → "1ns", "512ns", "1.0µs", "65.5µs", "1.0ms", "4.3s".
pub fn ns_short(v: u64) -> String {
    let f = v as f64;
    if v < 1_000 {
        format!("{v}ns")
    } else if v < 1_000_000 {
        format!("{:.1}µs", f / 1e3)
    } else if v < 1_000_000_000 {
        format!("{:.1}ms", f / 1e6)
    } else {
        format!("{:.1}s", f / 1e9)
    }
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
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(0, 9) as usize;
    format!("{x:.decimals$}")
}

/// Unix time in ns → "2026-11-21 23:45:01 UTC".
pub fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
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

/// Bytes, humanly: "812 B", "3.4 KiB", "12.0 MiB".
pub fn bytes(v: u64) -> String {
    let f = v as f64;
    if v < 1024 {
        format!("{v} B")
    } else if v < 1024 * 1024 {
        format!("{:.1} KiB", f / 1024.0)
    } else if v < 1024 * 1024 * 1024 {
        format!("{:.1} MiB", f / (1024.0 * 1024.0))
    } else {
        format!("{:.2} GiB", f / (1024.0 * 1024.0 * 1024.0))
    }
}

/// The stack-quality line: how user stacks were walked and, per profile, the share whose user
/// stack reaches the thread's start. `None` for runs that carry no quality figures.
pub fn stack_quality(stats: &switchyard_model::StackStats) -> Option<String> {
    if stats.quality.is_empty() {
        return None;
    }
    let shares: Vec<String> = stats
        .quality
        .iter()
        .map(|q| {
            let name = match q.profile.as_str() {
                "oncpu" => "on-CPU",
                "offcpu" => "off-CPU",
                "wakeup" => "wakeups",
                "syscalls" => "syscalls",
                "futex" => "futex waits",
                other => other,
            };
            format!("{name} {:.1}%", q.percent())
        })
        .collect();
    Some(format!(
        "user stacks by {}; complete to the thread's start: {}",
        stats.unwind_label(),
        shares.join(", ")
    ))
}

/// What the unwind tables held and cost: "7 objects (1 without CFI), 153,201 rows, 1.2 MiB of
/// 32.0 MiB, built in 85.0 ms".
pub fn unwind_tables(t: &switchyard_model::UnwindTables) -> String {
    let mut s = format!(
        "{} objects ({} without CFI), {} rows, {} of {}, built in {}",
        thousands(t.objects),
        thousands(t.objects_without_cfi),
        thousands(t.rows),
        bytes(t.bytes),
        bytes(t.capacity_bytes),
        ns(t.build_us.saturating_mul(1000))
    );
    if t.objects_not_loaded > 0 {
        s += &format!(
            "; {} did not fit (raise --unwind-rows)",
            thousands(t.objects_not_loaded)
        );
    }
    s
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
        assert_eq!(significant(3.0214), "3.02");
        assert_eq!(significant(0.004123), "0.00412");
        assert_eq!(significant(1234.5), "1,235");
        assert_eq!(significant(0.0), "0");
    }

    #[test]
    fn formats_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2000-02-29 12:34:56 UTC
        assert_eq!(utc(951_827_696_000_000_000), "2000-02-29 12:34:56 UTC");
        assert_eq!(utc(1_795_305_029_440_925_409), "2026-11-21 23:50:29 UTC");
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
    fn stack_quality_and_tables_read_plainly() {
        use switchyard_model::{StackQuality, StackStats, UnwindTables};
        assert_eq!(stack_quality(&StackStats::default()), None);
        let stats = StackStats {
            unwind: "cfi".into(),
            quality: vec![
                StackQuality {
                    profile: "oncpu".into(),
                    complete: 95,
                    total: 100,
                },
                StackQuality {
                    profile: "offcpu".into(),
                    complete: 2_000,
                    total: 2_000,
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            stack_quality(&stats).unwrap(),
            "user stacks by CFI (.eh_frame), frame pointers where none; complete to the \
             thread's start: on-CPU 95.0%, off-CPU 100.0%"
        );
        let t = UnwindTables {
            objects: 7,
            objects_without_cfi: 1,
            objects_not_loaded: 2,
            rows: 153_201,
            capacity_rows: 4 << 20,
            bytes: 153_201 * 8,
            capacity_bytes: 32 << 20,
            build_us: 85_000,
            failures: Vec::new(),
        };
        assert_eq!(
            unwind_tables(&t),
            "7 objects (1 without CFI), 153,201 rows, 1.2 MiB of 32.0 MiB, built in 85.0 ms; \
             2 did not fit (raise --unwind-rows)"
        );
    }
}
