//! The verdicts as a terminal table, markdown (for CI step summaries) and JUnit XML.

use std::fmt::Write as _;

use switchyard_model::{term::escape, units::with_unit};

use crate::{Check, Status};

fn value(c: &Check) -> String {
    c.value.map_or_else(|| "-".into(), |v| with_unit(v, c.unit))
}

fn limit(c: &Check) -> String {
    let b = &c.budget;
    let mut parts = Vec::new();
    if let Some(max) = b.max {
        parts.push(format!("≤ {}", with_unit(max, c.unit)));
    }
    if let Some(min) = b.min {
        parts.push(format!("≥ {}", with_unit(min, c.unit)));
    }
    if let Some(r) = b.regression {
        match c.baseline {
            Some(base) => parts.push(format!("≤ {r}% worse than {}", with_unit(base, c.unit))),
            None => parts.push(format!("≤ {r}% worse than baseline")),
        }
    }
    parts.join(", ")
}

fn verdict(c: &Check) -> (&'static str, String) {
    match &c.status {
        Status::Pass => ("pass", String::new()),
        Status::Fail(why) => ("FAIL", why.clone()),
    }
}

/// A plain table for the terminal: one line per check. Each cell is
/// [escaped](switchyard_model::term::escape): a failure's reason carries the findings' thread
/// and function names, which the target chose.
pub fn text(checks: &[Check]) -> String {
    let mut out = String::new();
    let rows: Vec<[String; 3]> = checks
        .iter()
        .map(|c| {
            let (_, why) = verdict(c);
            [&c.run, &c.budget.name(), &why].map(|s| escape(s).into_owned())
        })
        .collect();
    let width = |i: usize, least: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(least)
            .max(least)
    };
    let (w_run, w_budget) = (width(0, 3), width(1, 6));
    let _ = writeln!(
        out,
        "{:<4}  {:<w_run$}  {:<w_budget$}  {:>12}  limit",
        "", "run", "budget", "value"
    );
    for (c, [run, budget, why]) in checks.iter().zip(&rows) {
        let (v, _) = verdict(c);
        let _ = writeln!(
            out,
            "{v:<4}  {run:<w_run$}  {budget:<w_budget$}  {:>12}  {}{}",
            value(c),
            limit(c),
            if why.is_empty() {
                String::new()
            } else {
                format!("  — {why}")
            }
        );
    }
    let failed = checks.iter().filter(|c| !c.passed()).count();
    let _ = writeln!(out, "{} budgets checked, {failed} failed", checks.len());
    out
}

/// A markdown table cell: no line break (it would end the row, and could forge one) and no
/// control character, as on the terminal; no `|` or tag.
fn md_escape(s: &str) -> String {
    escape(s)
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// GitHub-flavoured markdown, for `$GITHUB_STEP_SUMMARY` and the like.
pub fn markdown(checks: &[Check]) -> String {
    let failed = checks.iter().filter(|c| !c.passed()).count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### switchyard budgets: {}\n",
        if failed == 0 {
            format!("all {} passed", checks.len())
        } else {
            format!("{failed} of {} failed", checks.len())
        }
    );
    out.push_str("| | run | budget | value | limit | why |\n|---|---|---|---|---|---|\n");
    for c in checks {
        let (v, why) = verdict(c);
        let icon = if c.passed() { "✅" } else { "❌" };
        let _ = writeln!(
            out,
            "| {icon} {v} | {} | `{}` | {} | {} | {} |",
            md_escape(&c.run),
            md_escape(&c.budget.name()),
            value(c),
            md_escape(&limit(c)),
            md_escape(&why)
        );
    }
    out
}

/// An XML attribute or text: control characters (which XML 1.0 does not allow, so a parser
/// would reject the whole file) escaped as on the terminal, then the markup characters.
fn xml(s: &str) -> String {
    escape(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// JUnit XML: one test suite per run, one test case per budget.
pub fn junit(checks: &[Check]) -> String {
    let mut runs: Vec<&str> = checks.iter().map(|c| c.run.as_str()).collect();
    runs.dedup();
    let failures = checks.iter().filter(|c| !c.passed()).count();
    let mut out = String::new();
    let _ = writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(
        out,
        "<testsuites name=\"switchyard budgets\" tests=\"{}\" failures=\"{failures}\">",
        checks.len()
    );
    for run in runs {
        let cs: Vec<&Check> = checks.iter().filter(|c| c.run == run).collect();
        let f = cs.iter().filter(|c| !c.passed()).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\">",
            xml(run),
            cs.len()
        );
        for c in cs {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml(run),
                xml(&c.budget.name())
            );
            match &c.status {
                Status::Pass => out.push_str("/>\n"),
                Status::Fail(why) => {
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}\">value {}, limit {}</failure>\n    </testcase>",
                        xml(why),
                        xml(&value(c)),
                        xml(&limit(c))
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
