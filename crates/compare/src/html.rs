//! The comparison as a page: the table with verdicts, and differential flame graphs (on-CPU
//! and off-CPU) both ways: B's stacks coloured by their change from A, and A's stacks with the
//! same colours, so what B removed is drawn too; each normalised so the two sides' totals
//! match, threads merged by role, per thread under folds.

use std::fmt::Write as _;

use inferno::{
    differential,
    flamegraph::{self, Options},
};
use switchyard_model::{
    Run,
    units::{counted, ns, ns_f},
};
use switchyard_report::{
    ProfileKind, Threads, document, embed_flamegraph, escape_html as esc, folded_threads,
    folded_view, merges_threads,
};

use crate::{
    ALPHA, Area, Comparison, MIN_RUNS, MIN_TAIL_RUNS, NOISE_PCT, Row, Verdict, headline,
    no_verdicts, shown, spread_text, verdict_text, verdict_word,
};

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
fn side_folded(runs: &[Run], kind: ProfileKind, threads: Threads) -> Result<String, Error> {
    let mut out = String::new();
    for r in runs {
        out.push_str(&folded_threads(r, kind, threads)?);
    }
    Ok(out)
}

/// Which side a differential graph draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// B's stacks at B's widths, A's counts scaled to B's total: what B added or grew.
    BOverA,
    /// A's stacks at A's widths, B's counts scaled to A's total, hues negated so red still
    /// means "more in B": what B removed or shrank (flamegraph.pl's `--negate`).
    AOverB,
}

impl Direction {
    const BOTH: [Direction; 2] = [Direction::BOverA, Direction::AOverB];

    fn suffix(self) -> &'static str {
        match self {
            Direction::BOverA => "",
            Direction::AOverB => ".negated",
        }
    }
}

/// Differential folded stacks (`stack count_first count_second`, the first normalised to the
/// second's total) of one direction.
fn diff_lines(kind: ProfileKind, a: &str, b: &str, dir: Direction) -> Result<String, Error> {
    let (first, second) = match dir {
        Direction::BOverA => (a, b),
        Direction::AOverB => (b, a),
    };
    let mut opts = differential::Options {
        normalize: true,
        ..Default::default()
    };
    opts.strip_hex = true;
    let mut diff = Vec::new();
    differential::from_readers(opts, first.as_bytes(), second.as_bytes(), &mut diff)
        .map_err(|e| Error::Diff(kind.name(), e))?;
    // inferno writes in hash order: sort for stable output.
    let text = String::from_utf8_lossy(&diff);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    let mut sorted = lines.join("\n");
    if !sorted.is_empty() {
        sorted.push('\n');
    }
    Ok(sorted)
}

/// Differential folded stacks, threads merged by role, per profile kind and direction:
/// `oncpu` (B over A) and `oncpu.negated` (A over B), and so on.
pub fn diff_folded(a: &[Run], b: &[Run]) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for kind in KINDS {
        let fa = side_folded(a, kind, Threads::ByRole)?;
        let fb = side_folded(b, kind, Threads::ByRole)?;
        for dir in Direction::BOTH {
            out.push((
                format!("{}{}", kind.name(), dir.suffix()),
                diff_lines(kind, &fa, &fb, dir)?,
            ));
        }
    }
    Ok(out)
}

fn diff_svg(kind: ProfileKind, diff: &str, dir: Direction) -> Result<Option<String>, Error> {
    if diff.trim().is_empty() {
        return Ok(None);
    }
    let mut opt = Options::default();
    opt.title = match dir {
        Direction::BOverA => format!("{}: B's stacks, coloured by change from A", kind.title()),
        Direction::AOverB => format!("{}: A's stacks, coloured by change to B", kind.title()),
    };
    opt.negate_differentials = dir == Direction::AOverB;
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

/// What the differential graphs' colours and widths mean.
const KEY: &str = "<p class=\"note key\"><span class=\"swatch red\"></span> red: a larger \
     share in B than in A; <span class=\"swatch blue\"></span> blue: a smaller one; the \
     deeper, the larger the change. Each pair is normalised: the side drawn for comparison is \
     scaled to the drawn side's total, so colours compare shares, not amounts. The first graph \
     draws B's stacks at B's widths (what B added or grew; a stack only in A is not in it); \
     the second draws A's stacks at A's widths with the same colours (what B removed or shrank \
     shows blue; a stack only in B is not in it). Threads of one role are merged \
     (<code>producer-*</code>); the per-thread graphs are under the folds.</p>";

/// One profile's differential section: both directions, threads merged, and the per-thread
/// graphs under folds.
fn diff_section(out: &mut String, kind: ProfileKind, a: &[Run], b: &[Run]) -> Result<(), Error> {
    let _ = writeln!(
        out,
        "<section id=\"diff-{}\">\n<h2>{} differential flame graphs</h2>\n{KEY}",
        kind.name(),
        kind.title()
    );
    if kind != ProfileKind::OffCpu {
        diff_graphs(out, kind, a, b, "")?;
        out.push_str("</section>\n");
        return Ok(());
    }
    // Off CPU, idle waits (threads waiting for work) are left out, and one click away.
    let strip = |runs: &[Run]| -> (Vec<Run>, u64) {
        let mut idle = 0;
        let runs = runs
            .iter()
            .map(|r| {
                let (r, ns) = switchyard_report::without_idle(r);
                idle += ns;
                r
            })
            .collect();
        (runs, idle)
    };
    let ((a_busy, a_idle), (b_busy, b_idle)) = (strip(a), strip(b));
    if a_idle + b_idle == 0 {
        diff_graphs(out, kind, a, b, "")?;
        out.push_str("</section>\n");
        return Ok(());
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">Idle waits, threads waiting for work (an event wait such as \
         <code>epoll_wait</code> or <code>accept</code>, or a park), are left out: {} in A, {} in \
         B (over all runs). They are drawn below, one click away.</p>",
        ns(a_idle),
        ns(b_idle)
    );
    diff_graphs(out, kind, &a_busy, &b_busy, "")?;
    out.push_str("<details class=\"idle\">\n<summary>With idle waits</summary>\n");
    diff_graphs(out, kind, a, b, "-all")?;
    out.push_str("</details>\n</section>\n");
    Ok(())
}

/// The differential graphs of one kind, merged by role and (folded) per thread; `tag` keeps
/// the ids of a second set apart.
fn diff_graphs(
    out: &mut String,
    kind: ProfileKind,
    a: &[Run],
    b: &[Run],
    tag: &str,
) -> Result<(), Error> {
    let per_thread = a.iter().chain(b).any(|r| merges_threads(r, kind));
    for (threads, fold) in [(Threads::ByRole, false), (Threads::Each, true)] {
        if fold && !per_thread {
            continue;
        }
        let fa = side_folded(a, kind, threads)?;
        let fb = side_folded(b, kind, threads)?;
        for dir in Direction::BOTH {
            let diff = diff_lines(kind, &fa, &fb, dir)?;
            let what = match dir {
                Direction::BOverA => "B over A",
                Direction::AOverB => "A over B (negated)",
            };
            let id = format!(
                "diff-{}{}{}{tag}-graph",
                kind.name(),
                dir.suffix().replace('.', "-"),
                if fold { "-threads" } else { "" }
            );
            let title = format!("{} differential flame graph, {what}", kind.title());
            match diff_svg(kind, &diff, dir)? {
                Some(svg) if fold => out.push_str(&folded_view(
                    &id,
                    &title,
                    &format!("Per thread: {what}"),
                    &svg,
                )),
                Some(svg) => {
                    let _ = writeln!(out, "<h3>{what}</h3>");
                    out.push_str(&embed_flamegraph(&id, &title, &svg));
                }
                None if !fold => {
                    let _ = writeln!(out, "<h3>{what}</h3>\n<p class=\"empty\">no samples</p>");
                }
                None => {}
            }
        }
    }
    Ok(())
}

fn cell(s: &Option<crate::Spread>, unit: switchyard_model::units::Unit) -> String {
    spread_text(s, unit, |min, max| {
        format!("<span class=\"spread\">[{min}–{max}]</span>")
    })
}

fn row(out: &mut String, r: &Row) {
    let pct = crate::delta_text(r);
    // The row's class is its verdict: better, worse, nodiff, same; withheld, or none.
    let class = match r.verdict {
        Verdict::Withheld => "withheld",
        Verdict::NoDifference => "nodiff",
        v => verdict_word(v),
    };
    let _ = writeln!(
        out,
        "<tr class=\"{class}\"><td><code>{}</code></td><td class=\"num\" data-v=\"{}\">{}</td>\
         <td class=\"num\" data-v=\"{}\">{}</td><td class=\"num\" data-v=\"{}\">{pct}</td><td>{}</td></tr>",
        esc(&r.name),
        r.a.as_ref().map_or(0.0, |s| s.median),
        cell(&r.a, r.unit),
        r.b.as_ref().map_or(0.0, |s| s.median),
        cell(&r.b, r.unit),
        r.delta_pct.unwrap_or(0.0),
        esc(&verdict_text(r)),
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

/// The page's lead: the few findings that explain the difference, at most five.
fn what_changed(out: &mut String, ch: &switchyard_findings::Changes) {
    let _ = writeln!(
        out,
        "<section id=\"changed\">\n<h2>What changed</h2>\n<p>Thread time per {}: {} in A, {} in B. \
         The findings of each side, matched by what they are, ranked by how much of the change \
         each explains (its share of all the changes' sizes); medians over each side's runs.</p>",
        esc(&ch.per),
        esc(&ns_f(ch.total_a)),
        esc(&ns_f(ch.total_b)),
    );
    if ch.changes.is_empty() {
        out.push_str("<p>Nothing: the same findings, in the same amounts.</p>\n</section>\n");
        return;
    }
    out.push_str("<ol class=\"findings\">\n");
    for c in ch.changes.iter().take(5) {
        let _ = writeln!(
            out,
            "<li class=\"finding k-{k}\"><span class=\"kind\">{k}</span> \
             <span class=\"f-time\">explains {}</span>\
             <span class=\"f-summary\">{}</span></li>",
            switchyard_model::units::percent_whole(c.explains),
            esc(&c.summary),
            k = c.kind.name(),
        );
    }
    out.push_str("</ol>\n");
    if ch.idle_a + ch.idle_b > 0.0 {
        let _ = writeln!(
            out,
            "<p class=\"note\">Idle, not on the request path (threads waiting for work): {} → \
             {} per {}.</p>",
            esc(&ns_f(ch.idle_a)),
            esc(&ns_f(ch.idle_b)),
            esc(&ch.per)
        );
    }
    out.push_str("</section>\n");
}

/// The tail's "what changed": each span both sides measured one by one, its percentiles in A
/// and B, and the causes of its slowest 1% with their share of those calls' time on each side.
fn tails_changed(out: &mut String, tails: &[crate::TailChange]) {
    if tails.is_empty() {
        return;
    }
    out.push_str(
        "<section id=\"tails\">\n<h2>Slow requests: what changed</h2>\n<p>Each span measured one \
         by one on both sides: its percentiles, and the causes of its slowest 1% (the calls from \
         its P99 up, explained against its typical ones), matched by kind, site and culprit, \
         with their share of the slowest calls' time in A and in B, the largest change first. \
         A cause shown <i>-</i> is not among that side's (it explains under 2% of the slowest \
         calls' excess there). Medians over each side's runs.</p>\n",
    );
    for t in tails {
        let _ = writeln!(
            out,
            "<h3><code>{}</code></h3>\n<table class=\"compare\">\n<thead><tr><th>percentile</th>\
             <th class=\"num\">A</th><th class=\"num\">B</th><th class=\"num\">delta</th></tr>\
             </thead>\n<tbody>",
            esc(&t.name)
        );
        for (p, a, b) in crate::tails::moves(t) {
            let delta = if a > 0 {
                switchyard_model::units::percent_change((b as f64 - a as f64) / a as f64 * 100.0)
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "<tr><td>{p}</td><td class=\"num\" data-v=\"{a}\">{}</td>\
                 <td class=\"num\" data-v=\"{b}\">{}</td><td class=\"num\">{delta}</td></tr>",
                esc(&ns(a)),
                esc(&ns(b)),
            );
        }
        out.push_str("</tbody>\n</table>\n");
        if t.causes.is_empty() {
            out.push_str("<p class=\"empty\">no cause of the slowest calls on either side</p>\n");
            continue;
        }
        out.push_str(
            "<table class=\"compare\">\n<thead><tr><th>cause of the slowest calls</th>\
             <th class=\"num\">A</th><th class=\"num\">B</th><th class=\"num\">change</th>\
             </tr></thead>\n<tbody>\n",
        );
        for c in &t.causes {
            let _ = writeln!(
                out,
                "<tr class=\"k-{k}\"><td><span class=\"kind\">{k}</span> {}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(&c.what),
                crate::tails::share_text(c.a),
                crate::tails::share_text(c.b),
                crate::tails::points(c.delta),
                k = c.kind.name(),
            );
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str("</section>\n");
}

/// The comparison page.
pub fn html(c: &Comparison, a: &[Run], b: &[Run], all: bool) -> Result<String, Error> {
    let mut main = String::new();
    what_changed(&mut main, &c.changed);
    tails_changed(&mut main, &c.tails);
    let _ = writeln!(
        main,
        "<section id=\"summary\">\n<h2>Summary</h2>\n<p class=\"headline\"><b>{}</b></p>\n\
         <p>A = <b>{}</b> ({}), B = <b>{}</b> ({}). Figures are medians; with repeats, \
         [min–max] follows. A verdict needs {MIN_RUNS} runs a side, {MIN_TAIL_RUNS} for a tail \
         figure (P99 and above); with fewer, a figure keeps its delta and shows <i>~</i>, no \
         verdict. B is better or worse only where the Mann–Whitney U test on the runs' ranks \
         gives p &lt; {ALPHA} and the change is {NOISE_PCT}% or more; otherwise it is marked \
         <i>no difference shown</i>. Each verdict says its p and the runs it rests on \
         (<i>p=0.008 n=5</i>, or <i>n=4+5</i> when the sides differ); 3 runs a side cannot \
         show a difference, as their smallest p is 0.10. Totals and rates per \
         second of figures also known per operation get no verdict: the builds did different \
         amounts of work.</p>",
        esc(&headline(c)),
        esc(&c.a_label),
        counted(c.a_runs as u64, "run"),
        esc(&c.b_label),
        counted(c.b_runs as u64, "run"),
    );
    for w in &c.probe_warnings {
        let _ = writeln!(main, "<p class=\"note warning\">Warning: {}.</p>", esc(w));
    }
    // The sentence's own words need no escaping; its commands do.
    if let Some(why) = no_verdicts(c, |s| format!("<code>{}</code>", esc(s))) {
        let mut chars = why.chars();
        let first = chars.next().map(|f| f.to_uppercase().to_string());
        let _ = writeln!(
            main,
            "<p class=\"note verdicts\">{}{}.</p>",
            first.unwrap_or_default(),
            chars.as_str()
        );
    }
    for (label, runs) in [(&c.a_label, a), (&c.b_label, b)] {
        if let Some(r) = runs.first() {
            let _ = writeln!(
                main,
                "<p>{}: <code>{}</code></p>",
                esc(label),
                esc(&switchyard_model::units::command_line(&r.meta.command))
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
    for kind in KINDS {
        diff_section(&mut main, kind, a, b)?;
    }
    let title = format!("switchyard: {} vs {}", c.a_label, c.b_label);
    Ok(document(
        &title,
        "switchyard comparison",
        &format!("{} vs {}", c.a_label, c.b_label),
        &[
            ("tails", "Slow requests"),
            ("summary", "Summary"),
            ("table", "Figures"),
            ("diff-oncpu", "On-CPU diff"),
            ("diff-offcpu", "Off-CPU diff"),
        ][..]
            .iter()
            .copied()
            .filter(|(id, _)| *id != "tails" || !c.tails.is_empty())
            .collect::<Vec<_>>(),
        &main,
        "switchyard comparison",
    ))
}
