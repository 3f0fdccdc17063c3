//! The comparison as a page: the table with verdicts, and differential flame graphs (on-CPU
//! and off-CPU) where B's stacks are coloured by their change from A, normalised so the two
//! sides' totals match.

use std::fmt::Write as _;

use inferno::{
    differential,
    flamegraph::{self, Options},
};
use switchyard_model::{
    Run,
    units::{counted, percent_change},
};
use switchyard_report::{ProfileKind, document, embed_flamegraph, escape_html as esc, folded};

use crate::{Area, Comparison, NOISE_PCT, Row, headline, shown, spread_text, verdict_word};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Report(#[from] switchyard_report::Error),
    #[error("differencing the {0} stacks")]
    Diff(&'static str, #[source] std::io::Error),
    #[error("drawing the differential {0} flame graph")]
    Flame(&'static str, #[source] std::io::Error),
}

/// Profiles compared as differential flame graphs.
const KINDS: [ProfileKind; 2] = [ProfileKind::OnCpu, ProfileKind::OffCpu];

/// Folded stacks of one side: every run's lines (inferno sums repeated stacks).
fn side_folded(runs: &[Run], kind: ProfileKind) -> Result<String, Error> {
    let mut out = String::new();
    for r in runs {
        out.push_str(&folded(r, kind)?);
    }
    Ok(out)
}

/// Differential folded stacks (`stack count_a count_b`), normalised, per profile kind name.
pub fn diff_folded(a: &[Run], b: &[Run]) -> Result<Vec<(&'static str, String)>, Error> {
    let mut out = Vec::new();
    for kind in KINDS {
        let (fa, fb) = (side_folded(a, kind)?, side_folded(b, kind)?);
        let mut opts = differential::Options {
            normalize: true,
            ..Default::default()
        };
        opts.strip_hex = true;
        let mut diff = Vec::new();
        differential::from_readers(opts, fa.as_bytes(), fb.as_bytes(), &mut diff)
            .map_err(|e| Error::Diff(kind.name(), e))?;
        // inferno writes in hash order: sort for stable output.
        let text = String::from_utf8_lossy(&diff);
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        let mut sorted = lines.join("\n");
        if !sorted.is_empty() {
            sorted.push('\n');
        }
        out.push((kind.name(), sorted));
    }
    Ok(out)
}

fn diff_svg(kind: ProfileKind, diff: &str) -> Result<Option<String>, Error> {
    if diff.trim().is_empty() {
        return Ok(None);
    }
    let mut opt = Options::default();
    opt.title = format!(
        "{} differential flame graph (B, coloured by change from A)",
        kind.title()
    );
    opt.deterministic = true;
    opt.image_width = Some(1200);
    opt.count_name = match kind {
        ProfileKind::OnCpu => "samples".into(),
        _ => "ns".into(),
    };
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut opt, diff.lines(), &mut svg)
        .map_err(|e| Error::Flame(kind.name(), e))?;
    Ok(Some(String::from_utf8_lossy(&svg).into_owned()))
}

fn cell(s: &Option<crate::Spread>, unit: switchyard_model::units::Unit) -> String {
    spread_text(s, unit, |min, max| {
        format!("<span class=\"spread\">[{min}–{max}]</span>")
    })
}

fn row(out: &mut String, r: &Row) {
    let pct = r.delta_pct.map_or_else(|| "-".into(), percent_change);
    let _ = writeln!(
        out,
        "<tr class=\"{v}\"><td><code>{}</code></td><td class=\"num\" data-v=\"{}\">{}</td>\
         <td class=\"num\" data-v=\"{}\">{}</td><td class=\"num\" data-v=\"{}\">{pct}</td><td>{v}</td></tr>",
        esc(&r.name),
        r.a.as_ref().map_or(0.0, |s| s.median),
        cell(&r.a, r.unit),
        r.b.as_ref().map_or(0.0, |s| s.median),
        cell(&r.b, r.unit),
        r.delta_pct.unwrap_or(0.0),
        v = verdict_word(r.verdict),
    );
}

/// One table of rows.
fn table(out: &mut String, rows: &[&Row]) {
    out.push_str(
        "<table class=\"sortable compare\">\n<thead><tr><th>figure</th><th class=\"num\">A</th>\
         <th class=\"num\">B</th><th class=\"num\">delta</th><th>verdict</th></tr></thead>\n<tbody>\n",
    );
    for r in rows {
        row(out, r);
    }
    out.push_str("</tbody>\n</table>\n");
}

/// The comparison page.
pub fn html(c: &Comparison, a: &[Run], b: &[Run], all: bool) -> Result<String, Error> {
    let mut main = String::new();
    let _ = writeln!(
        main,
        "<section id=\"summary\">\n<h2>Summary</h2>\n<p class=\"headline\"><b>{}</b></p>\n\
         <p>A = <b>{}</b> ({}), B = <b>{}</b> ({}). Figures are medians; with repeats, \
         [min–max] follows. A delta inside both ranges, or under {NOISE_PCT}%, is marked \
         <i>noise</i>, not a win or a loss. Totals and rates per second of figures also \
         known per operation get no verdict: the builds did different amounts of work.</p>",
        esc(&headline(c)),
        esc(&c.a_label),
        counted(c.a_runs as u64, "run"),
        esc(&c.b_label),
        counted(c.b_runs as u64, "run"),
    );
    for (label, runs) in [(&c.a_label, a), (&c.b_label, b)] {
        if let Some(r) = runs.first() {
            let _ = writeln!(
                main,
                "<p>{}: <code>{}</code></p>",
                esc(label),
                esc(&r.meta.command.join(" "))
            );
        }
    }
    main.push_str("</section>\n<section id=\"table\">\n<h2>Figures</h2>\n");
    let rows: Vec<&Row> = c.rows.iter().filter(|r| all || shown(r, c)).collect();
    let mut areas: Vec<Area> = rows.iter().map(|r| r.area).collect();
    areas.dedup();
    for area in areas {
        let of = |total: bool| -> Vec<&Row> {
            rows.iter()
                .copied()
                .filter(|r| r.area == area && r.total == total)
                .collect()
        };
        let _ = writeln!(main, "<h3>{}</h3>", area.title());
        let compared = of(false);
        if !compared.is_empty() {
            table(&mut main, &compared);
        }
        let totals = of(true);
        if !totals.is_empty() {
            let _ = writeln!(
                main,
                "<details>\n<summary>{} totals and rates per second (no verdict)</summary>",
                totals.len()
            );
            table(&mut main, &totals);
            main.push_str("</details>\n");
        }
    }
    main.push_str("</section>\n");
    let diffs = diff_folded(a, b)?;
    for (kind, (_, diff)) in KINDS.iter().zip(&diffs) {
        let _ = writeln!(
            main,
            "<section id=\"diff-{}\">\n<h2>{} differential flame graph</h2>\n\
             <p class=\"note\">B's stacks, widths as in B (normalised to A's total), red where B spends more than A, blue where less.</p>",
            kind.name(),
            kind.title()
        );
        match diff_svg(*kind, diff)? {
            Some(svg) => main.push_str(&embed_flamegraph(
                &format!("diff-{}-graph", kind.name()),
                &format!("{} differential flame graph", kind.title()),
                &svg,
            )),
            None => main.push_str("<p class=\"empty\">no samples</p>\n"),
        }
        main.push_str("</section>\n");
    }
    let title = format!("switchyard: {} vs {}", c.a_label, c.b_label);
    Ok(document(
        &title,
        "switchyard comparison",
        &format!("{} vs {}", c.a_label, c.b_label),
        &[
            ("summary", "Summary"),
            ("table", "Figures"),
            ("diff-oncpu", "On-CPU diff"),
            ("diff-offcpu", "Off-CPU diff"),
        ],
        &main,
        "switchyard comparison",
    ))
}
