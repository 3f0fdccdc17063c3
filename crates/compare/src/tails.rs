//! The tail's "what changed": for each span both sides measured one by one, how its
//! percentiles moved, and the causes of its slowest 1% ([`switchyard_findings::tail`]) in A
//! against B.
//!
//! Causes are matched by what they are: their kind, the program's site and the culprit
//! thread's name (time on CPU by kind alone: a build that moves the hot code moves the site,
//! not the work). Each has its share of the slow group's time on each side, and they are
//! ranked by how much that share changed. With repeats, each figure is the median over the
//! side's runs that have the span (a run whose slow group lacks a cause counts 0).

use std::{collections::BTreeMap, fmt::Write as _};

use switchyard_findings::{
    Finding, Kind,
    tail::{Percentiles, SpanTail},
};
use switchyard_model::{
    Run,
    metrics::spread,
    term::escape,
    units::{ns, percent, percent_change},
};

/// One span's tail in A and in B.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TailChange {
    /// The span's label.
    pub name: String,
    /// Its calls' percentiles, ns: medians over each side's runs.
    pub a: Percentiles,
    pub b: Percentiles,
    /// The slow group's causes, largest change of share first.
    pub causes: Vec<CauseChange>,
}

/// One cause of a span's slowest 1%, in A and in B.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CauseChange {
    pub kind: Kind,
    /// What it is: "waited for a lock in lock_table, released by compactor".
    pub what: String,
    /// Its share of the slow group's time in A and in B; `None` where it is not among that
    /// side's causes (it explains under 2% of the slow group's excess there, or is absent).
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// `b - a`, a missing side counting 0.
    pub delta: f64,
}

/// A cause as tails are matched: kind, site (none for time on CPU) and culprit's name.
type Key = (Kind, String, String);

fn key(f: &Finding) -> Key {
    let site = if f.kind == Kind::Oncpu {
        String::new()
    } else {
        f.site.clone()
    };
    let culprit = f.culprit.as_ref().map(|c| c.thread.clone());
    (f.kind, site, culprit.unwrap_or_default())
}

fn describe(f: &Finding) -> String {
    let mut s = f.kind.verb().trim_end_matches(',').to_string();
    if !f.site.is_empty() {
        s += &format!(" in {}", f.site);
    }
    if let Some(c) = &f.culprit {
        let by = match f.kind {
            Kind::Runqueue => "held by",
            Kind::Lock => "released by",
            _ => "woken by",
        };
        s += &format!(", {by} {}", c.thread);
    }
    s
}

/// Whether `run` has a span with calls measured one by one (else its tails are empty, and
/// not worth explaining the run for).
fn has_tails(run: &Run) -> bool {
    run.locks
        .spans
        .iter()
        .any(|s| s.anatomy.as_ref().is_some_and(|a| a.count > 0))
}

fn median(v: &[f64]) -> f64 {
    spread(v).map_or(0.0, |s| s.median)
}

/// Every span's tail that both sides have, in A's order.
pub fn tail_changes(a: &[Run], b: &[Run]) -> Vec<TailChange> {
    let tails = |runs: &[Run]| -> Vec<Vec<SpanTail>> {
        runs.iter()
            .map(|r| {
                if has_tails(r) {
                    switchyard_findings::explain(r).spans
                } else {
                    Vec::new()
                }
            })
            .collect()
    };
    let (ta, tb) = (tails(a), tails(b));
    let mut names: Vec<&str> = Vec::new();
    for t in ta.iter().flatten() {
        if !names.contains(&t.name.as_str()) {
            names.push(&t.name);
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let of = |side: &[Vec<SpanTail>]| -> Vec<SpanTail> {
                side.iter()
                    .filter_map(|ts| ts.iter().find(|t| t.name == name).cloned())
                    .collect()
            };
            let (sa, sb) = (of(&ta), of(&tb));
            (!sa.is_empty() && !sb.is_empty()).then(|| change(name, &sa, &sb))
        })
        .collect()
}

fn percentiles(side: &[SpanTail]) -> Percentiles {
    let m = |f: fn(&Percentiles) -> u64| {
        let v: Vec<f64> = side.iter().map(|t| f(&t.percentiles_ns) as f64).collect();
        median(&v).round() as u64
    };
    Percentiles {
        p50: m(|p| p.p50),
        p90: m(|p| p.p90),
        p99: m(|p| p.p99),
        p999: m(|p| p.p999),
        max: m(|p| p.max),
    }
}

fn change(name: &str, a: &[SpanTail], b: &[SpanTail]) -> TailChange {
    type Side = BTreeMap<Key, (Vec<f64>, String)>;
    let shares = |side: &[SpanTail]| -> Side {
        let mut m: Side = BTreeMap::new();
        for (i, t) in side.iter().enumerate() {
            for f in &t.slow.findings {
                let e = m
                    .entry(key(&f.finding))
                    .or_insert_with(|| (vec![0.0; side.len()], describe(&f.finding)));
                e.0[i] += f.finding.share;
            }
        }
        m
    };
    let (ma, mb) = (shares(a), shares(b));
    let mut keys: Vec<&Key> = ma.keys().chain(mb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut causes: Vec<CauseChange> = keys
        .into_iter()
        .map(|k| {
            let va = ma.get(k).map(|(v, _)| median(v));
            let vb = mb.get(k).map(|(v, _)| median(v));
            let what = mb.get(k).or(ma.get(k)).map(|(_, w)| w.clone());
            CauseChange {
                kind: k.0,
                what: what.unwrap_or_default(),
                a: va,
                b: vb,
                delta: vb.unwrap_or(0.0) - va.unwrap_or(0.0),
            }
        })
        .collect();
    // The largest change first; among equal ones, the larger share.
    let share = |c: &CauseChange| c.a.unwrap_or(0.0).max(c.b.unwrap_or(0.0));
    causes.sort_by(|x, y| {
        y.delta
            .abs()
            .total_cmp(&x.delta.abs())
            .then_with(|| share(y).total_cmp(&share(x)))
            .then_with(|| x.what.cmp(&y.what))
    });
    TailChange {
        name: name.to_string(),
        a: percentiles(a),
        b: percentiles(b),
        causes,
    }
}

/// The percentiles a comparison shows, as (name, A, B) in ns.
pub fn moves(t: &TailChange) -> [(&'static str, u64, u64); 4] {
    [
        ("P50", t.a.p50, t.b.p50),
        ("P99", t.a.p99, t.b.p99),
        ("P99.9", t.a.p999, t.b.p999),
        ("max", t.a.max, t.b.max),
    ]
}

/// A percentile's move in words: "729.1 µs → 1.1 ms (+52.3%)", or "213.0 µs → 213.0 µs".
pub fn move_text(a: u64, b: u64) -> String {
    let pct = if a > 0 && a != b {
        format!(
            " ({})",
            percent_change((b as f64 - a as f64) / a as f64 * 100.0)
        )
    } else {
        String::new()
    };
    format!("{} → {}{pct}", ns(a), ns(b))
}

/// A cause's share on one side: "46.4%", or "-" where it is not among that side's causes.
pub fn share_text(s: Option<f64>) -> String {
    s.map_or_else(|| "-".into(), percent)
}

/// A change of share, in percentage points: "+23.7 points".
pub fn points(delta: f64) -> String {
    // Rounded first, so that no change reads "-0.0".
    let p = (delta * 1000.0).round() / 10.0;
    format!("{}{:.1} points", if p < 0.0 { "-" } else { "+" }, p.abs())
}

/// Columns the terminal keeps a span's percentiles within.
const WIDTH: usize = 100;

/// The terminal's form: a paragraph per span, its percentiles' moves, then its slow group's
/// causes with their shares in A and B; each line [escaped](escape) (it carries the target's
/// names). Empty when no span is on both sides.
pub fn render(tails: &[TailChange]) -> String {
    let mut out = String::new();
    if tails.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "slow requests, what changed (each span's slowest 1%; medians over each side's runs):"
    );
    for t in tails {
        let moved: Vec<String> = moves(t)
            .iter()
            .map(|(p, a, b)| format!("{p} {}", move_text(*a, *b)))
            .collect();
        let line = format!("  {}: {}", escape(&t.name), moved.join(", "));
        if line.chars().count() <= WIDTH {
            let _ = writeln!(out, "{line}");
        } else {
            let (first, rest) = moved.split_at(2);
            let _ = writeln!(out, "  {}: {},", escape(&t.name), first.join(", "));
            let _ = writeln!(out, "    {}", rest.join(", "));
        }
        if t.causes.is_empty() {
            let _ = writeln!(out, "  no cause of its slowest calls on either side");
            continue;
        }
        let _ = writeln!(
            out,
            "  causes of its slowest 1%, by share of their time, A → B (-: not among that side's):"
        );
        let changes: Vec<String> = t.causes.iter().map(|c| points(c.delta)).collect();
        let w = changes.iter().map(|p| p.chars().count()).max().unwrap_or(0);
        for (c, change) in t.causes.iter().zip(&changes) {
            let _ = writeln!(
                out,
                "    {:>6} → {:>6}  {change:>w$}  [{}] {}",
                share_text(c.a),
                share_text(c.b),
                c.kind.name(),
                escape(&c.what),
            );
        }
    }
    out
}
