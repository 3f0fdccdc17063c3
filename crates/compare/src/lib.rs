//! Two builds compared: every figure side by side, with the delta and whether a difference
//! is shown.
//!
//! Each side may hold several runs (repeats). A side's figure is then the median, shown with
//! its min–max. A verdict needs [`MIN_RUNS`] runs a side, and [`MIN_TAIL_RUNS`] for a tail
//! figure (P99 and above, [`tail_figure`]): with fewer, a figure keeps its delta but gets none
//! (`~`, and why), since a few runs say nothing of the run-to-run spread. With enough, the
//! Mann–Whitney U test on the runs ([`ranktest`], as benchstat judges) decides: B is better or
//! worse only where its two-sided p is under [`ALPHA`], and the change is [`NOISE_PCT`] or
//! more; otherwise "no difference shown". Each verdict says its p and the runs it rests on
//! (`p=0.008 n=5`).
//!
//! Two builds rarely do the same amount of work in a recording, so a total (or a rate per
//! second) says as much about the load as about the build: when the figure also exists per
//! operation, the total gets no verdict and sits with the totals, after the figures that
//! compare the builds' work ([`Row::total`]).
//!
//! A span both sides measured one by one also gets its tail's "what changed" ([`tails`]): how
//! its percentiles moved, and the causes of its slowest 1% in A against B.

mod html;
pub mod identity;
pub mod ranktest;
pub mod tails;

use std::{collections::BTreeMap, fmt::Write as _};

pub use html::{Error, diff_folded, html};
pub use tails::{CauseChange, TailChange, tail_changes};

use switchyard_model::{
    Run,
    metrics::{self, Better, Metric},
    term::escape,
    units::{Unit, compact, counted, percent_change},
};

pub use switchyard_model::metrics::{Spread, spread};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    /// The rank test's p is [`ALPHA`] or more, or the change is under [`NOISE_PCT`].
    NoDifference,
    Same,
    /// Fewer than [`runs_needed`] runs on a side had the figure: the delta stands, unjudged.
    Withheld,
    /// Informational figure, or present on one side only.
    Neutral,
}

/// The area a figure belongs to, as its definition places it.
pub use switchyard_model::metrics::Area;

/// A change smaller than this, in percent, shows no difference whatever the ranks say: run-to-run
/// variation on a shared 2-core host is larger.
pub const NOISE_PCT: f64 = 1.0;

/// Runs a side a mean-like figure needs for a verdict: fewer give no spread worth judging a
/// change by. With 3 a side the rank test's smallest p is 0.10, so a verdict in fact needs 4;
/// 3 still earn "no difference shown" and its p, which says how far from one they were.
pub const MIN_RUNS: usize = 3;

/// Runs a side a tail figure needs for a verdict ([`tail_figure`]): one slow run moves a P99
/// far more than a median.
pub const MIN_TAIL_RUNS: usize = 5;

/// A difference is shown when the rank test's two-sided p is under this
/// ([`ranktest::mann_whitney`]).
pub const ALPHA: f64 = 0.05;

/// Whether `name` is a tail figure, P99 and above: a percentile from P99 up or a maximum.
pub fn tail_figure(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    matches!(last, "p99" | "p99_9" | "p99_99" | "max") || last.ends_with("_max")
}

/// The runs a side figure `name` needs for a verdict.
pub fn runs_needed(name: &str) -> usize {
    if tail_figure(name) {
        MIN_TAIL_RUNS
    } else {
        MIN_RUNS
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    pub area: Area,
    /// A total or a rate per second of something the runs also have per operation: shown, but
    /// with no verdict (the builds did different amounts of work).
    pub total: bool,
    pub unit: Unit,
    pub a: Option<Spread>,
    pub b: Option<Spread>,
    pub delta: Option<f64>,
    pub delta_pct: Option<f64>,
    /// The rank test's two-sided p, when the row was judged by it.
    pub p: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub a_label: String,
    pub b_label: String,
    pub a_runs: usize,
    pub b_runs: usize,
    pub rows: Vec<Row>,
    /// What records [`MIN_TAIL_RUNS`] runs of each build, enough for every verdict:
    /// `just compare WORKLOAD A B 5`, with the runs' workload and builds when they name them.
    pub rerun: String,
    /// The findings that explain the difference, ranked: the terminal's and the page's "what
    /// changed".
    pub changed: switchyard_findings::Changes,
    /// Each span both sides measured one by one: its percentiles' moves and the causes of its
    /// slowest 1%, A against B ([`tail_changes`]).
    pub tails: Vec<TailChange>,
    /// Where the recorder's own probes cost the two builds differently by more than a tenth
    /// of the change in CPU per operation ([`probe_warnings`]).
    pub probe_warnings: Vec<String>,
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
    // A driver that offers a fixed rate (open loop, `rate` > 0 in its parameters) sets the
    // throughput itself: a difference there is its drain time, not the build's capacity.
    let open_loop = |runs: &[Run]| {
        !runs.is_empty()
            && runs.iter().all(|r| {
                r.workload
                    .as_ref()
                    .and_then(|w| w.parameters.get("rate"))
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|rate| rate > 0.0)
            })
    };
    let offered = open_loop(a) && open_loop(b);
    let mut rows: Vec<Row> = names
        .into_iter()
        .map(|(name, metric)| {
            let pick = |runs: &[Run], side: &[BTreeMap<String, Metric>]| -> Vec<f64> {
                runs.iter()
                    .zip(side)
                    .filter_map(|(run, m)| metrics::lookup(run, m, name).map(|x| x.value))
                    .collect()
            };
            let (va, vb) = (pick(a, &ma), pick(b, &mb));
            let total = per_op_twin(name)
                .is_some_and(|twin| ma.iter().chain(&mb).any(|m| m.contains_key(&twin)));
            let better = if total || (offered && name.as_str() == "throughput") {
                Better::Neither
            } else {
                metric.better
            };
            let Judged {
                delta,
                delta_pct,
                p,
                verdict,
            } = judge(&va, &vb, better, runs_needed(name));
            Row {
                name: name.clone(),
                area: Area::of(name),
                total,
                unit: metric.unit,
                a: spread(&va),
                b: spread(&vb),
                delta,
                delta_pct,
                p,
                verdict,
            }
        })
        .collect();
    // By area, what has a verdict before the totals and rates, then as the figures are
    // ranked (`metrics::FIGURES`). Each row's place is looked up once, not per comparison.
    rows.sort_by_cached_key(|r| {
        let (area, rank, fill, index, form) = metrics::placing(&r.name);
        (area, r.total, rank, fill, index, form)
    });
    let probe_warnings = probe_warnings(a, b, &rows);
    Comparison {
        a_label: a_label.to_string(),
        b_label: b_label.to_string(),
        a_runs: a.len(),
        b_runs: b.len(),
        rows,
        rerun: rerun(a, b),
        changed: switchyard_findings::changes(a, b),
        tails: tail_changes(a, b),
        probe_warnings,
    }
}

/// A probe cost this many times the change in CPU per operation, or more, is warned of.
pub const PROBE_SHARE: f64 = 0.1;

/// The recorder's probes, per span, in ns per operation on each side (medians over the
/// runs that measured them; a side without the span's probes pays 0), and a warning for each
/// span whose two costs differ by more than [`PROBE_SHARE`] of the change in `cpu.per_op`:
/// that much of the change is the recorder's, as when one build's probed function starts with
/// an instruction the kernel emulates and the other's with one it single-steps.
pub fn probe_warnings(a: &[Run], b: &[Run], rows: &[Row]) -> Vec<String> {
    let Some(cpu) = rows.iter().find(|r| r.name == "cpu.per_op") else {
        return Vec::new();
    };
    let Some(change_us) = cpu.delta.filter(|d| *d != 0.0) else {
        return Vec::new();
    };
    // Per span: its probes' cost in ns per operation in each run of a side.
    let per_op = |runs: &[Run]| -> BTreeMap<String, Vec<f64>> {
        let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for run in runs {
            let (Some(pc), Some(ops)) = (&run.meta.probe_costs, run.operations) else {
                continue;
            };
            if ops == 0 {
                continue;
            }
            for p in &pc.probes {
                if let Some(total) = p.total_ns() {
                    out.entry(p.span.clone())
                        .or_default()
                        .push(total / ops as f64);
                }
            }
        }
        out
    };
    let (pa, pb) = (per_op(a), per_op(b));
    let median = |m: &BTreeMap<String, Vec<f64>>, span: &str| {
        m.get(span)
            .and_then(|v| spread(v))
            .map_or(0.0, |s| s.median)
    };
    let change_ns = change_us * 1e3;
    let mut spans: Vec<&String> = pa.keys().chain(pb.keys()).collect();
    spans.sort();
    spans.dedup();
    spans
        .into_iter()
        .filter_map(|span| {
            // A span costed on one side only (a run from before its kind was timed) is not
            // compared: its absence is not a cost of 0.
            if !(pa.contains_key(span) && pb.contains_key(span)) {
                return None;
            }
            let (ca, cb) = (median(&pa, span), median(&pb, span));
            let apart = (cb - ca).abs();
            (apart > PROBE_SHARE * change_ns.abs()).then(|| {
                let share = if apart >= change_ns.abs() {
                    "all of that change, or more, may be".to_string()
                } else {
                    format!(
                        "up to {} of that change is",
                        switchyard_model::units::percent_whole(apart / change_ns.abs())
                    )
                };
                format!(
                    "the recorder's probes cost the builds differently: span {span}'s cost A {} \
                     and B {} an operation, {} apart, against a change in CPU per operation of \
                     {}: {share} the recorder's, not the builds' (each run's summary gives its \
                     probes' costs)",
                    per_op_text(ca),
                    per_op_text(cb),
                    per_op_text(apart),
                    signed_per_op(change_ns),
                )
            })
        })
        .collect()
}

fn per_op_text(ns: f64) -> String {
    switchyard_model::units::ns_latency(ns.round() as u64)
}

fn signed_per_op(ns: f64) -> String {
    format!(
        "{}{} an operation",
        if ns < 0.0 { "\u{2212}" } else { "+" },
        per_op_text(ns.abs())
    )
}

/// `just compare WORKLOAD A B 3` with the workload and the builds the runs name (one each,
/// the same workload on both sides, two builds), else with those placeholders: a run recorded
/// as another build (`--as-build`) names that one, so one name twice is no command.
fn rerun(a: &[Run], b: &[Run]) -> String {
    // The one word all `runs` give for `field` of their workload.
    fn one(runs: &[Run], field: fn(&switchyard_model::Workload) -> &str) -> Option<&str> {
        let mut names = runs.iter().map(|r| r.workload.as_ref().map(field));
        let first = names.next().flatten()?;
        let word = !first.is_empty() && !first.contains(char::is_whitespace);
        (word && names.all(|n| n == Some(first))).then_some(first)
    }
    let args = match (
        one(a, |w| &w.name),
        one(b, |w| &w.name),
        one(a, |w| &w.build),
        one(b, |w| &w.build),
    ) {
        (Some(wa), Some(wb), Some(ba), Some(bb)) if wa == wb && ba != bb => {
            format!("{wa} {ba} {bb}")
        }
        _ => "WORKLOAD A B".to_string(),
    };
    format!("just compare {args} {MIN_TAIL_RUNS}")
}

/// The per-operation figure that says what total (or per-second rate) `name` says, per unit
/// of work: `switches.total.per_s` → `switches.total.per_op`, `cpu.time` → `cpu.per_op`.
fn per_op_twin(name: &str) -> Option<String> {
    if name.ends_with(".per_op") {
        return None;
    }
    let fixed = match name {
        "cpu.time" | "cpu.utilisation" | "perf.task-clock" => Some("cpu.per_op"),
        "perf.context-switches" => Some("switches.total.per_op"),
        "syscalls.time" => Some("syscalls.total.per_op"),
        // What the builds are compared on, or no figure of the work.
        "throughput" | "operations" | "duration" => return None,
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_string());
    }
    let base = name.strip_suffix(".per_s").unwrap_or(name);
    let base = base.strip_suffix(".avg_us").map_or(base, |_| "");
    (!base.is_empty()).then(|| format!("{base}.per_op"))
}

/// A short name for a figure in the headline.
fn short_name(name: &str) -> String {
    match name {
        "throughput" => "throughput".into(),
        "cpu.per_op" => "CPU/op".into(),
        "switches.total.per_op" => "switches/op".into(),
        "syscalls.total.per_op" => "syscalls/op".into(),
        "futex.waits.per_op" => "futex waits/op".into(),
        "futex.wait_time.per_op" => "futex wait time/op".into(),
        "memory.max_rss" => "peak RSS".into(),
        "heap.allocs.per_op" => "allocations/op".into(),
        "heap.bytes.per_op" => "heap bytes/op".into(),
        n => match (n.strip_prefix("latency."), metrics::span_percentile(n)) {
            (Some(p), _) => format!("{} latency", p.replace('_', ".")),
            (None, Some((label, p))) => format!("{label} {}", p.replace('_', ".").to_uppercase()),
            (None, None) => n.replace(".per_op", "/op").replace(['.', '_'], " "),
        },
    }
}

/// The one line a reader needs: B's changes that are shown, throughput first, then the
/// largest; e.g. "abs: +59% throughput, −45% CPU/op, −100% futex waits/op".
pub fn headline(c: &Comparison) -> String {
    let headline_figure = |n: &str| {
        matches!(
            n,
            "throughput"
                | "cpu.per_op"
                | "switches.total.per_op"
                | "syscalls.total.per_op"
                | "futex.waits.per_op"
                | "futex.wait_time.per_op"
                | "memory.max_rss"
                | "heap.allocs.per_op"
                | "heap.bytes.per_op"
        ) || n.starts_with("latency.")
            || (n.starts_with("span.") && (n.ends_with(".time.per_op") || n.ends_with(".p99")))
            || (n.starts_with("gc.") && n.ends_with(".per_op"))
    };
    // With too few runs for any verdict, or too few for the rank test to show a difference,
    // the changes of NOISE_PCT or more are listed, said to be unjudged.
    let few = c.a_runs < MIN_RUNS || c.b_runs < MIN_RUNS;
    let unjudged = (few || !can_show(c.a_runs, c.b_runs))
        && c.rows
            .iter()
            .any(|r| matches!(r.verdict, Verdict::Withheld | Verdict::NoDifference));
    let listed = |r: &Row| match r.verdict {
        Verdict::Better | Verdict::Worse => true,
        Verdict::Withheld | Verdict::NoDifference => {
            unjudged && r.delta_pct.is_none_or(|p| p.abs() >= NOISE_PCT)
        }
        _ => false,
    };
    let mut changed: Vec<&Row> = c
        .rows
        .iter()
        .filter(|r| listed(r) && headline_figure(&r.name) && r.delta.is_some_and(|d| d != 0.0))
        .collect();
    // Throughput, CPU per operation, the work's other costs per operation, then latency; the
    // largest change first within each.
    let group = |r: &Row| match r.name.as_str() {
        "throughput" => 0,
        "cpu.per_op" => 1,
        n if n.ends_with(".per_op") => 2,
        n if n.starts_with("latency.") || metrics::span_percentile(n).is_some() => 3,
        _ => 4,
    };
    changed.sort_by(|x, y| {
        let big = |r: &Row| r.delta_pct.unwrap_or(0.0).abs();
        group(x).cmp(&group(y)).then(big(y).total_cmp(&big(x)))
    });
    let parts: Vec<String> = changed
        .iter()
        .take(4)
        .map(|r| {
            let delta = r.delta.unwrap_or(0.0);
            let sign = if delta < 0.0 { "\u{2212}" } else { "+" };
            let name = short_name(&r.name);
            // From a tiny base, the amount: "+0.90 futex waits/op", not "+112500%".
            let amount = if tiny_base(r) {
                let v = figure(delta.abs(), r.unit);
                match name.ends_with("/op") {
                    true => v.trim_end_matches("/op").to_string(),
                    false => v,
                }
            } else {
                let pct = r.delta_pct.unwrap_or(0.0);
                switchyard_model::units::percent_whole(pct.abs() / 100.0)
            };
            format!("{sign}{amount} {name}")
        })
        .collect();
    let unjudged = unjudged.then(|| {
        format!(
            " (no verdicts: {})",
            runs_a_side(c.a_runs as u64, c.b_runs as u64)
        )
    });
    match (parts.is_empty(), unjudged) {
        (true, None) => format!("{}: no difference shown", c.b_label),
        (true, Some(why)) => format!("{}: no change of {NOISE_PCT}% or more{why}", c.b_label),
        (false, why) => format!(
            "{}: {}{}",
            c.b_label,
            parts.join(", "),
            why.unwrap_or_default()
        ),
    }
}

/// "1 run a side", or "A 1 run, B 2" when the sides differ.
pub fn runs_a_side(a: u64, b: u64) -> String {
    if a == b {
        format!("{} a side", counted(a, "run"))
    } else {
        format!("A {}, B {b}", counted(a, "run"))
    }
}

/// Runs behind a figure as benchstat writes them: "n=3", or "n=3+4" when the sides differ.
fn runs_behind(a: usize, b: usize) -> String {
    if a == b {
        format!("n={a}")
    } else {
        format!("n={a}+{b}")
    }
}

/// Why the comparison lacks verdicts, and how to get them; `None` when every figure could
/// have one. `code` marks up a command: "no verdicts: 1 run a side; run `just compare … 5` or
/// pass 5 runs a side (`--a` … `--b` …) for verdicts".
pub fn no_verdicts(c: &Comparison, code: impl Fn(&str) -> String) -> Option<String> {
    let withheld = |tail: bool| {
        c.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Withheld && tail_figure(&r.name) == tail)
            .count()
    };
    let (mean, tail) = (withheld(false), withheld(true));
    let sides = runs_a_side(c.a_runs as u64, c.b_runs as u64);
    let rerun = || {
        format!(
            "run {} or pass {MIN_TAIL_RUNS} runs a side ({} … {} …)",
            code(&c.rerun),
            code("--a"),
            code("--b"),
        )
    };
    if mean + tail > 0 && (c.a_runs < MIN_RUNS || c.b_runs < MIN_RUNS) {
        return Some(format!("no verdicts: {sides}; {} for verdicts", rerun()));
    }
    let mut why = Vec::new();
    if c.a_runs.min(c.b_runs) > 0 && !can_show(c.a_runs, c.b_runs) {
        why.push(format!(
            "{sides} cannot show a difference: the rank test's p is {:.3} at the least",
            ranktest::smallest_p(c.a_runs, c.b_runs)
        ));
    }
    if tail > 0 && (c.a_runs < MIN_TAIL_RUNS || c.b_runs < MIN_TAIL_RUNS) {
        why.push(format!(
            "{} (P99 and up) without a verdict: those need {MIN_TAIL_RUNS} runs a side",
            counted(tail as u64, "tail figure")
        ));
    } else if tail > 0 {
        why.push(format!(
            "{} without a verdict: fewer than {MIN_TAIL_RUNS} runs on a side had them",
            counted(tail as u64, "tail figure")
        ));
    }
    if mean > 0 {
        why.push(format!(
            "{} without a verdict: fewer than {MIN_RUNS} runs on a side had them",
            counted(mean as u64, "figure")
        ));
    }
    if why.is_empty() {
        return None;
    }
    if c.a_runs < MIN_TAIL_RUNS || c.b_runs < MIN_TAIL_RUNS {
        why.push(format!("{} for every verdict", rerun()));
    }
    Some(why.join("; "))
}

/// Whether `n` runs against `m` can show a difference at all ([`ALPHA`]).
pub fn can_show(n: usize, m: usize) -> bool {
    ranktest::smallest_p(n, m) < ALPHA
}

/// A figure judged: B's delta from A (medians), as an amount and a percentage, and the rank
/// test's p when it ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judged {
    pub delta: Option<f64>,
    pub delta_pct: Option<f64>,
    pub p: Option<f64>,
    pub verdict: Verdict,
}

/// Judges the figure `name` by compare's own rule from each side's values, one a run (A the
/// baseline): the runs it needs a side, the rank test, the noise floor. A story's table
/// judges its builds through this, so what it says and what `switchyard compare` says agree.
pub fn judge_figure(name: &str, a: &[f64], b: &[f64]) -> Judged {
    let better = metrics::definition(name).map_or(Better::Neither, |(f, _)| f.better);
    judge(a, b, better, runs_needed(name))
}

/// Judges one figure from each side's runs (`a`, `b`), `needed` runs a side for a verdict.
fn judge(a: &[f64], b: &[f64], better: Better, needed: usize) -> Judged {
    let (Some(sa), Some(sb)) = (spread(a), spread(b)) else {
        return Judged {
            delta: None,
            delta_pct: None,
            p: None,
            verdict: Verdict::Neutral,
        };
    };
    let delta = sb.median - sa.median;
    let delta_pct = (sa.median != 0.0).then(|| delta / sa.median.abs() * 100.0);
    let judged = |p, verdict| Judged {
        delta: Some(delta),
        delta_pct,
        p,
        verdict,
    };
    if better == Better::Neither {
        return judged(None, Verdict::Neutral);
    }
    // Too few runs to know the spread: not even "same" or "no difference" can be said.
    if sa.n < needed || sb.n < needed {
        return judged(None, Verdict::Withheld);
    }
    // No ranks to test only when every run of both sides is alike.
    let Some(p) = ranktest::mann_whitney(a, b) else {
        return judged(None, Verdict::Same);
    };
    // A change under NOISE_PCT is inside any run-to-run spread here, whatever the ranks say.
    if p >= ALPHA || delta == 0.0 || delta_pct.is_some_and(|x| x.abs() < NOISE_PCT) {
        return judged(Some(p), Verdict::NoDifference);
    }
    let improved = match better {
        Better::Lower => delta < 0.0,
        _ => delta > 0.0,
    };
    judged(
        Some(p),
        if improved {
            Verdict::Better
        } else {
            Verdict::Worse
        },
    )
}

/// A base below the other side over this is tiny: a percentage from it (`+112500%`) says
/// only that it was near zero, so the delta is given as an amount (`+0.90/op`).
pub const TINY_BASE: f64 = 10.0;

/// Whether row `r`'s delta reads as an amount rather than a percentage: A is zero or
/// [tiny](TINY_BASE) next to B.
fn tiny_base(r: &Row) -> bool {
    let (Some(a), Some(b), Some(d)) = (&r.a, &r.b, r.delta) else {
        return false;
    };
    d != 0.0 && (r.delta_pct.is_none() || a.median.abs() * TINY_BASE < b.median.abs())
}

/// A row's delta as tables show it: a percentage ("+10.0%"), or from a zero or
/// [tiny](TINY_BASE) base the amount with its unit ("+0.90/op"); "-" for none.
pub fn delta_text(r: &Row) -> String {
    match (r.delta, r.delta_pct) {
        (Some(d), _) if tiny_base(r) => signed(d, r.unit),
        (_, Some(p)) => percent_change(p),
        _ => "-".into(),
    }
}

/// `d` with its sign and unit, signed as [`percent_change`] signs.
fn signed(d: f64, unit: Unit) -> String {
    format!(
        "{}{}",
        if d < 0.0 { "-" } else { "+" },
        figure(d.abs(), unit)
    )
}

/// A figure in a table: compact, a whole count without decimals, with its unit.
pub fn figure(v: f64, unit: Unit) -> String {
    let n = if v.fract() == 0.0 && v.abs() < 1e6 {
        compact(v).split('.').next().unwrap_or_default().to_string()
    } else {
        compact(v)
    };
    unit.attach(n)
}

/// A side's figure: its median with its unit, then with repeats the min–max range as `range`
/// writes it.
fn spread_text(s: &Option<Spread>, unit: Unit, range: impl Fn(String, String) -> String) -> String {
    let bare = |v: f64| figure(v, Unit::Count);
    match s {
        None => "-".into(),
        Some(s) if s.n > 1 => format!(
            "{} {}",
            figure(s.median, unit),
            range(bare(s.min), bare(s.max))
        ),
        Some(s) => figure(s.median, unit),
    }
}

fn side(s: &Option<Spread>, unit: Unit) -> String {
    spread_text(s, unit, |min, max| format!("[{min}–{max}]"))
}

pub fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::NoDifference => "no difference shown",
        Verdict::Same => "same",
        Verdict::Withheld => "~",
        Verdict::Neutral => "",
    }
}

/// A row's verdict as tables show it: the word, the rank test's p and the runs behind it
/// ("better (p=0.008 n=5)", "no difference shown (p=0.100 n=3)"); for a withheld one, `~`
/// and why ("~ (1 run a side; a verdict needs 3)"); for a figure with no verdict, the runs
/// alone when a verdict could have had them.
pub fn verdict_text(r: &Row) -> String {
    let n = |s: &Option<Spread>| s.as_ref().map_or(0, |s| s.n);
    let (a, b) = (n(&r.a), n(&r.b));
    let needed = runs_needed(&r.name);
    let what = if needed == MIN_TAIL_RUNS {
        "P99 and up need"
    } else {
        "a verdict needs"
    };
    match r.verdict {
        Verdict::Withheld if a == b => {
            format!("~ ({}; {what} {needed})", runs_a_side(a as u64, b as u64))
        }
        Verdict::Withheld => format!(
            "~ ({}; {what} {needed} a side)",
            runs_a_side(a as u64, b as u64)
        ),
        Verdict::Neutral if a >= needed && b >= needed => format!("({})", runs_behind(a, b)),
        Verdict::Neutral => String::new(),
        v => match r.p {
            Some(p) => format!("{} ({} {})", verdict_word(v), p_text(p), runs_behind(a, b)),
            None => format!("{} ({})", verdict_word(v), runs_behind(a, b)),
        },
    }
}

/// A p-value as benchstat writes it: "p=0.008", and "p<0.001" below that.
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p<0.001".into()
    } else {
        format!("p={p:.3}")
    }
}

/// Columns the terminal table keeps within, when its figures' names allow: a name is never
/// cut (it is what a budget file names), so a long one widens its table.
const WIDTH: usize = 100;

/// `text` in lines of at most [`WIDTH`] columns: one line when it fits, else a line per
/// clause (after "; "), each broken at spaces outside `code spans` if it is still too long.
fn wrapped(out: &mut String, text: &str) {
    if text.chars().count() > WIDTH
        && let Some((first, rest)) = text.split_once("; ")
    {
        wrapped(out, &format!("{first};"));
        wrapped(out, rest);
        return;
    }
    let mut words = Vec::new();
    let (mut word, mut code) = (String::new(), false);
    for ch in text.chars() {
        match ch {
            ' ' if !code => words.push(std::mem::take(&mut word)),
            '`' => {
                code = !code;
                word.push(ch);
            }
            _ => word.push(ch),
        }
    }
    words.push(word);
    let mut line = String::new();
    for w in words {
        if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > WIDTH {
            let _ = writeln!(out, "{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&w);
    }
    let _ = writeln!(out, "{line}");
}

/// The terminal table, its figures within 100 columns and each verdict after them: the
/// headline, then the figures by area, the ones
/// that compare the builds' work first. Totals and rates of figures also known per operation
/// get no verdict and are listed only with `all`, which also includes every syscall;
/// otherwise syscalls and perf counters whose both sides are below 1% of the total syscalls
/// are left out. Columns are as wide as their widest cell. A figure's name is whole, so that
/// it can be copied into a budget file: long names or wide ranges can take a row beyond 100
/// columns before its verdict. Spans both sides measured
/// one by one follow: their percentiles' moves and the causes of their slowest calls
/// ([`TailChange`]).
///
/// Text that is not ours (the sides' labels, the workload and build names in the command to
/// rerun, span labels in figure names) is [escaped](escape) as the page escapes it; "what
/// changed" escapes its own sentences ([`switchyard_findings::Changes::render`]).
pub fn render_text(c: &Comparison, all: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", escape(&headline(c)));
    let _ = writeln!(
        out,
        "A = {} ({}), B = {} ({})",
        escape(&c.a_label),
        counted(c.a_runs as u64, "run"),
        escape(&c.b_label),
        counted(c.b_runs as u64, "run"),
    );
    let _ = writeln!(
        out,
        "medians, [min–max] with repeats; a difference is shown at p < {ALPHA} (Mann–Whitney U) \
         and {NOISE_PCT}% or more"
    );
    if let Some(why) = no_verdicts(c, |s| format!("`{s}`")) {
        wrapped(&mut out, &escape(&why));
    }
    for w in &c.probe_warnings {
        wrapped(&mut out, &escape(&format!("warning: {w}")));
    }
    let rows: Vec<&Row> = c.rows.iter().filter(|r| all || shown(r, c)).collect();
    let hidden = rows.iter().filter(|r| r.total && !all).count();
    let rows: Vec<&Row> = rows.into_iter().filter(|r| all || !r.total).collect();
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                escape(&r.name).into_owned(),
                side(&r.a, r.unit),
                side(&r.b, r.unit),
                delta_text(r),
                verdict_text(r),
            ]
        })
        .collect();
    let header = ["figure", "A", "B", "delta", ""].map(String::from);
    let mut widths = [0; 5];
    for row in cells.iter().chain([&header]) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let [name_w, a_w, b_w, pct_w, _] = widths;
    let line = |out: &mut String, cells: &[String; 5]| {
        let [name, a, b, pct, v] = cells;
        let row = format!("  {name:<name_w$} {a:>a_w$} {b:>b_w$} {pct:>pct_w$}  {v}");
        let _ = writeln!(out, "{}", row.trim_end());
    };
    let mut area = None;
    for (r, cells) in rows.iter().zip(&cells) {
        if area != Some((r.area, r.total)) {
            area = Some((r.area, r.total));
            let title = if r.total {
                format!("{}: totals and rates (no verdict)", r.area.title())
            } else {
                r.area.title().to_string()
            };
            let _ = writeln!(out, "\n{title}");
            line(&mut out, &header);
        }
        line(&mut out, cells);
    }
    if hidden > 0 {
        let _ = writeln!(
            out,
            "\n{hidden} totals and rates per second, of figures compared per operation, \
             are left out (--all shows them)"
        );
    }
    if !c.tails.is_empty() {
        let _ = write!(out, "\n{}", tails::render(&c.tails));
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
    fn the_rank_test_decides_and_direction_counts() {
        let v = |a: &[f64], b: &[f64], better| judge(a, b, better, MIN_RUNS).verdict;
        let p = |a: &[f64], b: &[f64]| judge(a, b, Better::Lower, MIN_RUNS).p;
        // Five a side, apart: p = 2/252.
        let a = [10.0, 12.0, 11.0, 10.5, 11.5];
        let b = [20.0, 21.0, 22.0, 20.5, 21.5];
        let j = judge(&a, &b, Better::Lower, MIN_RUNS);
        assert_eq!((j.delta, j.verdict), (Some(10.0), Verdict::Worse));
        assert!((j.delta_pct.unwrap() - 90.909).abs() < 0.01);
        assert!((j.p.unwrap() - 2.0 / 252.0).abs() < 1e-9);
        assert_eq!(v(&a, &b, Better::Higher), Verdict::Better);
        // Ranges that overlap by one run still show a difference (p = 4/252)...
        let b1 = [11.7, 21.0, 22.0, 20.5, 21.5];
        assert_eq!(v(&a, &b1, Better::Lower), Verdict::Worse);
        // ...and interleaved runs do not, however far apart the medians.
        let b2 = [10.2, 11.2, 50.0, 12.1, 60.0];
        assert_eq!(v(&a, &b2, Better::Lower), Verdict::NoDifference);
        assert!(p(&a, &b2).unwrap() > 0.05);
        // Three a side can never show one: p is 0.1 at the least.
        let (a3, b3) = ([10.0, 11.0, 12.0], [20.0, 21.0, 22.0]);
        assert_eq!(v(&a3, &b3, Better::Lower), Verdict::NoDifference);
        assert!((p(&a3, &b3).unwrap() - 0.1).abs() < 1e-9);
        // A change under NOISE_PCT shows nothing, whatever the ranks.
        let c = [100.0, 100.1, 100.2, 100.3, 100.4];
        let d = [100.5, 100.6, 100.7, 100.8, 100.9];
        assert_eq!(v(&c, &d, Better::Lower), Verdict::NoDifference);
        // Every run alike on both sides: the same.
        assert_eq!(v(&[5.0; 3], &[5.0; 3], Better::Lower), Verdict::Same);
        // One run per side: no spread to judge by, so no verdict, not even "same"; the delta
        // stands.
        let j = judge(&[10.0], &[10.5], Better::Lower, MIN_RUNS);
        assert_eq!(
            (j.delta, j.delta_pct, j.p, j.verdict),
            (Some(0.5), Some(5.0), None, Verdict::Withheld)
        );
        assert_eq!(v(&[10.0], &[10.0], Better::Lower), Verdict::Withheld);
        // Two runs against three: still too few on one side.
        assert_eq!(v(&[10.0, 10.1], &b3, Better::Lower), Verdict::Withheld);
        // A tail figure needs five a side: four are too few.
        assert_eq!(
            judge(&a[..4], &b[..4], Better::Lower, runs_needed("latency.p99")).verdict,
            Verdict::Withheld
        );
        assert_eq!(v(&[10.0], &[], Better::Lower), Verdict::Neutral);
        assert_eq!(v(&[10.0], &[10.5], Better::Neither), Verdict::Neutral);
    }

    #[test]
    fn tail_figures_are_p99_and_above() {
        for tail in [
            "latency.p99",
            "latency.p99_9",
            "latency.p99_99",
            "latency.max",
            "span.acquire.p99",
            "span.acquire.max",
            "futex.wait_max",
            "gc.pause_max",
        ] {
            assert!(tail_figure(tail), "{tail}");
            assert_eq!(runs_needed(tail), MIN_TAIL_RUNS);
        }
        for mean in ["latency.p50", "latency.p90", "cpu.per_op", "memory.max_rss"] {
            assert!(!tail_figure(mean), "{mean}");
        }
        assert!((ranktest::smallest_p(3, 3) - 0.1).abs() < 1e-12);
        assert!(!can_show(3, 3) && can_show(4, 4) && can_show(3, 5) && !can_show(2, 5));
    }

    /// Five runs a side, a little apart around `a` and `b`.
    fn row(name: &str, unit: Unit, a: f64, b: f64) -> Row {
        let runs = |x: f64| [x, x * 1.001, x * 0.999, x * 1.002, x * 0.998];
        let (va, vb) = (runs(a), runs(b));
        let j = judge(&va, &vb, Better::Lower, MIN_RUNS);
        Row {
            name: name.into(),
            area: Area::of(name),
            total: false,
            unit,
            a: spread(&va),
            b: spread(&vb),
            delta: j.delta,
            delta_pct: j.delta_pct,
            p: j.p,
            verdict: j.verdict,
        }
    }

    fn comparison(rows: Vec<Row>) -> Comparison {
        Comparison {
            a_label: "a".into(),
            b_label: "b".into(),
            a_runs: 5,
            b_runs: 5,
            rows,
            rerun: String::new(),
            changed: Default::default(),
            tails: Vec::new(),
            probe_warnings: Vec::new(),
        }
    }

    #[test]
    fn a_tiny_base_gets_the_amount_not_a_percentage() {
        // 0.0008 → 0.9 futex waits/op is "+112400%" from a base that is all but zero.
        let tiny = row("futex.waits.per_op", Unit::PerOp, 0.0008, 0.9);
        assert_eq!(delta_text(&tiny), "+0.8992/op");
        let zero = row("futex.waits.per_op", Unit::PerOp, 0.0, 0.9);
        assert_eq!(delta_text(&zero), "+0.9000/op");
        // A fall to near zero is a percentage still: −99.9% says it.
        let fall = row("futex.waits.per_op", Unit::PerOp, 0.9, 0.0008);
        assert_eq!(delta_text(&fall), "-99.9%");
        let usual = row("cpu.per_op", Unit::MicrosPerOp, 100.0, 150.0);
        assert_eq!(delta_text(&usual), "+50.0%");
        let none = row("futex.waits.per_op", Unit::PerOp, 0.0, 0.0);
        assert_eq!(delta_text(&none), "-");
        let c = comparison(vec![usual, tiny]);
        assert_eq!(headline(&c), "b: +50% CPU/op, +0.8992 futex waits/op");
        assert!(render_text(&c, false).contains(" +0.8992/op "));
    }

    #[test]
    fn figure_names_are_never_cut() {
        let name = "switches.total.a_figure_with_a_long_name_from_a_span_label.per_op";
        let c = comparison(vec![row(name, Unit::PerOp, 1.0, 2.0)]);
        let text = render_text(&c, true);
        assert!(text.contains(&format!("  {name} ")), "{text}");
        assert!(!text.contains('…'), "{text}");
    }

    #[test]
    fn verdicts_say_their_p_and_runs_or_why_there_is_none() {
        let row = |name: &str, a: &[f64], b: &[f64], p, verdict| Row {
            name: name.into(),
            area: Area::Work,
            total: false,
            unit: Unit::Count,
            a: spread(a),
            b: spread(b),
            delta: None,
            delta_pct: None,
            p,
            verdict,
        };
        let text = |a: &[f64], b: &[f64], v| verdict_text(&row("throughput", a, b, None, v));
        assert_eq!(
            text(&[1.0], &[2.0], Verdict::Withheld),
            "~ (1 run a side; a verdict needs 3)"
        );
        assert_eq!(
            text(&[1.0, 1.0], &[2.0, 2.0], Verdict::Withheld),
            "~ (2 runs a side; a verdict needs 3)"
        );
        assert_eq!(
            text(&[1.0], &[2.0, 2.0], Verdict::Withheld),
            "~ (A 1 run, B 2; a verdict needs 3 a side)"
        );
        assert_eq!(
            verdict_text(&row(
                "latency.p99",
                &[1.0; 3],
                &[2.0; 3],
                None,
                Verdict::Withheld
            )),
            "~ (3 runs a side; P99 and up need 5)"
        );
        let judged =
            |a: &[f64], b: &[f64], p, v| verdict_text(&row("throughput", a, b, Some(p), v));
        assert_eq!(
            judged(&[1.0; 5], &[2.0; 5], 2.0 / 252.0, Verdict::Better),
            "better (p=0.008 n=5)"
        );
        assert_eq!(
            judged(&[1.0; 4], &[2.0; 5], 0.0001, Verdict::Worse),
            "worse (p<0.001 n=4+5)"
        );
        assert_eq!(
            judged(&[1.0; 3], &[2.0; 3], 0.1, Verdict::NoDifference),
            "no difference shown (p=0.100 n=3)"
        );
        assert_eq!(text(&[1.0; 3], &[1.0; 3], Verdict::Same), "same (n=3)");
        assert_eq!(text(&[1.0; 3], &[1.0; 3], Verdict::Neutral), "(n=3)");
        assert_eq!(text(&[1.0], &[1.0], Verdict::Neutral), "");
    }

    #[test]
    fn three_runs_a_side_say_they_cannot_show_a_difference() {
        let mut c = comparison(vec![row("cpu.per_op", Unit::MicrosPerOp, 100.0, 150.0)]);
        assert_eq!(no_verdicts(&c, |s| s.to_string()), None);
        c.a_runs = 3;
        c.b_runs = 3;
        c.rerun = "just compare w a b 5".into();
        let why = no_verdicts(&c, |s| format!("`{s}`")).unwrap();
        assert_eq!(
            why,
            "3 runs a side cannot show a difference: the rank test's p is 0.100 at the least; \
             run `just compare w a b 5` or pass 5 runs a side (`--a` … `--b` …) for every verdict"
        );
        c.rows[0].verdict = Verdict::NoDifference;
        assert_eq!(headline(&c), "b: +50% CPU/op (no verdicts: 3 runs a side)");
    }
}
