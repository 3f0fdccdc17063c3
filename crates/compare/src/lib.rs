//! Two builds compared: every figure side by side, with the delta and whether it is a change
//! or noise.
//!
//! Each side may hold several runs (repeats). A side's figure is then the median, shown with
//! its min–max; a delta whose sides' ranges overlap is noise, not a win or a loss. With one
//! run per side no spread is known, and a delta is reported as measured.

mod html;

use std::{collections::BTreeMap, fmt::Write as _};

pub use html::{Error, diff_folded, html};

use switchyard_model::{
    Run,
    metrics::{self, Better, Metric},
    units::{Unit, compact, compact_delta, counted, percent_change},
};

pub use switchyard_model::metrics::{Spread, spread};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    /// The two sides' min–max ranges overlap.
    Noise,
    Same,
    /// Informational figure, or present on one side only.
    Neutral,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    pub unit: Unit,
    pub a: Option<Spread>,
    pub b: Option<Spread>,
    pub delta: Option<f64>,
    pub delta_pct: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub a_label: String,
    pub b_label: String,
    pub a_runs: usize,
    pub b_runs: usize,
    pub rows: Vec<Row>,
}

/// Figures shown by default: the headline ones, then syscalls by name.
fn rank(name: &str) -> (u8, String) {
    let order = [
        "throughput",
        "latency.p50",
        "latency.p99",
        "latency.p99_9",
        "latency.p99_99",
        "latency.max",
        "operations",
        "duration",
        "cpu.per_op",
        "cpu.time",
        "cpu.utilisation",
        "switches.total.per_op",
        "switches.voluntary.per_op",
        "switches.involuntary.per_op",
        "syscalls.total.per_op",
        "futex.waits.per_op",
        "futex.wait_time.per_op",
        "span.acquire.time.per_op",
        "switches.total.per_s",
        "switches.voluntary.per_s",
        "switches.involuntary.per_s",
        "syscalls.total.per_s",
        "switches.voluntary",
        "switches.involuntary",
        "syscalls.total",
        "syscalls.errors",
        "syscalls.time",
        "offcpu.share",
        "offcpu.blocked",
        "runqueue.wait",
        "futex.waits",
        "futex.wait_time",
        "futex.wait_max",
        "kernel_locks.contended",
        "kernel_locks.wait_time",
        "gc.cycles",
        "gc.pause_total",
        "gc.pause_max",
        "gc.mark_assists",
        "memory.max_rss",
    ];
    match order.iter().position(|o| *o == name) {
        Some(i) => (0, format!("{i:03}")),
        None if name.starts_with("perf.") => (1, name.to_string()),
        None => (2, name.to_string()),
    }
}

/// Compares side A (`a`, the baseline) with side B.
pub fn compare(a_label: &str, a: &[Run], b_label: &str, b: &[Run]) -> Comparison {
    let ma: Vec<_> = a.iter().map(metrics::extract).collect();
    let mb: Vec<_> = b.iter().map(metrics::extract).collect();
    // Every figure either side has, with the unit and direction of its first occurrence.
    let mut names: BTreeMap<&String, &Metric> = BTreeMap::new();
    for (name, metric) in ma.iter().chain(&mb).flatten() {
        names.entry(name).or_insert(metric);
    }
    let mut rows: Vec<Row> = names
        .into_iter()
        .map(|(name, metric)| {
            let pick = |runs: &[Run], side: &[BTreeMap<String, Metric>]| {
                let vals: Vec<f64> = runs
                    .iter()
                    .zip(side)
                    .filter_map(|(run, m)| metrics::lookup(run, m, name).map(|x| x.value))
                    .collect();
                spread(&vals)
            };
            let (sa, sb) = (pick(a, &ma), pick(b, &mb));
            let (delta, delta_pct, verdict) = judge(sa.as_ref(), sb.as_ref(), metric.better);
            Row {
                name: name.clone(),
                unit: metric.unit,
                a: sa,
                b: sb,
                delta,
                delta_pct,
                verdict,
            }
        })
        .collect();
    rows.sort_by_key(|r| rank(&r.name));
    Comparison {
        a_label: a_label.to_string(),
        b_label: b_label.to_string(),
        a_runs: a.len(),
        b_runs: b.len(),
        rows,
    }
}

fn judge(
    a: Option<&Spread>,
    b: Option<&Spread>,
    better: Better,
) -> (Option<f64>, Option<f64>, Verdict) {
    let (Some(a), Some(b)) = (a, b) else {
        return (None, None, Verdict::Neutral);
    };
    let delta = b.median - a.median;
    let pct = (a.median != 0.0).then(|| delta / a.median.abs() * 100.0);
    if delta == 0.0 {
        return (Some(delta), pct, Verdict::Same);
    }
    if better == Better::Neither {
        return (Some(delta), pct, Verdict::Neutral);
    }
    // With repeats on both sides, overlapping ranges mean the delta is inside the spread.
    if a.n > 1 && b.n > 1 && a.min <= b.max && b.min <= a.max {
        return (Some(delta), pct, Verdict::Noise);
    }
    let improved = match better {
        Better::Lower => delta < 0.0,
        _ => delta > 0.0,
    };
    (
        Some(delta),
        pct,
        if improved {
            Verdict::Better
        } else {
            Verdict::Worse
        },
    )
}

/// A side's figure: its median, then with repeats the min–max range as `range` writes it.
fn spread_text(s: &Option<Spread>, range: impl Fn(String, String) -> String) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n > 1 => format!(
            "{} {}",
            compact(s.median),
            range(compact(s.min), compact(s.max))
        ),
        Some(s) => compact(s.median),
    }
}

fn side(s: &Option<Spread>) -> String {
    spread_text(s, |min, max| format!("[{min}–{max}]"))
}

pub fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::Noise => "noise",
        Verdict::Same => "same",
        Verdict::Neutral => "",
    }
}

/// The terminal table. `all` includes every syscall; otherwise syscalls and perf counters
/// whose both sides are below 1% of the total syscalls are left out.
pub fn render_text(c: &Comparison, all: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A = {} ({}), B = {} ({}); medians, [min–max] with repeats",
        c.a_label,
        counted(c.a_runs as u64, "run"),
        c.b_label,
        counted(c.b_runs as u64, "run"),
    );
    let rows: Vec<&Row> = c.rows.iter().filter(|r| all || shown(r, c)).collect();
    let width = rows
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(10)
        .max(10);
    let _ = writeln!(
        out,
        "{:<width$}  {:>7}  {:>26}  {:>26}  {:>12}  {:>8}  verdict",
        "figure", "unit", "A", "B", "delta", "delta %"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>7}  {:>26}  {:>26}  {:>12}  {:>8}  {}",
            r.name,
            r.unit,
            side(&r.a),
            side(&r.b),
            r.delta.map_or_else(|| "-".into(), compact_delta),
            r.delta_pct.map_or_else(|| "-".into(), percent_change),
            verdict_word(r.verdict)
        );
    }
    out
}

/// Whether the default table shows a row: every headline figure; a syscall only when it is
/// at least 1% of either side's syscalls, and then per operation when the runs have
/// operations, else as a count; perf counters except page faults.
pub fn shown(r: &Row, c: &Comparison) -> bool {
    if r.name.starts_with("perf.") {
        return !r.name.ends_with("faults");
    }
    let Some(rest) = r.name.strip_prefix("syscalls.") else {
        return true;
    };
    if ["total", "errors", "time"]
        .iter()
        .any(|p| rest.starts_with(p))
    {
        return true;
    }
    let (name, suffix) = rest.split_once('.').unwrap_or((rest, ""));
    let has_per_op = c
        .rows
        .iter()
        .any(|x| x.name == format!("syscalls.{name}.per_op"));
    let wanted = if has_per_op { "per_op" } else { "" };
    if suffix != wanted {
        return false;
    }
    let median = |name: &str, side: fn(&Row) -> &Option<Spread>| {
        c.rows
            .iter()
            .find(|x| x.name == name)
            .and_then(|x| side(x).as_ref())
            .map_or(0.0, |s| s.median)
    };
    let count = format!("syscalls.{name}");
    let share = |side: fn(&Row) -> &Option<Spread>| {
        median(&count, side) / median("syscalls.total", side).max(1.0)
    };
    share(|x| &x.a) >= 0.01 || share(|x| &x.b) >= 0.01
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ranges() {
        let s = spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        let s = spread(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(spread(&[]).is_none());
    }

    #[test]
    fn overlap_is_noise_and_direction_counts() {
        let a = spread(&[10.0, 12.0, 11.0]);
        let b = spread(&[11.5, 13.0, 12.5]);
        assert_eq!(
            judge(a.as_ref(), b.as_ref(), Better::Lower).2,
            Verdict::Noise
        );
        let b = spread(&[20.0, 21.0, 22.0]);
        let (d, pct, v) = judge(a.as_ref(), b.as_ref(), Better::Lower);
        assert_eq!((d, v), (Some(10.0), Verdict::Worse));
        assert!((pct.unwrap() - 90.909).abs() < 0.01);
        assert_eq!(
            judge(a.as_ref(), b.as_ref(), Better::Higher).2,
            Verdict::Better
        );
        // One run per side: no spread to judge noise by.
        let (a1, b1) = (spread(&[10.0]), spread(&[10.5]));
        assert_eq!(
            judge(a1.as_ref(), b1.as_ref(), Better::Lower).2,
            Verdict::Worse
        );
        assert_eq!(judge(a1.as_ref(), None, Better::Lower).2, Verdict::Neutral);
    }
}
