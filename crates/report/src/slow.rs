//! The report's "Slow requests" section: each span measured one by one (a function's entry
//! to its return on one thread), shown when some span kept instances whole.
//!
//! Per span: its percentiles; a bar per percentile band of what its instances did (on CPU,
//! waiting for a CPU, blocked by kind of wait), averaged over the kept instances in the band;
//! why the slowest 1% were slow (the sentences `switchyard explain` gives); the slowest
//! instances one by one, each with a strip of its parts; and the typical instances' mean, for
//! contrast.
//!
//! Bands, over the instances kept whole (`SpanAnatomy::instances`): P50 and P90, the instances
//! within ±10% of the percentile; P99, from the P99 up to the P99.9; P99.9, from the P99.9
//! up; max, the slowest one. A band no kept instance falls in takes the instance nearest to
//! its percentile.

use std::{collections::BTreeMap, fmt::Write as _};

use switchyard_findings::{
    Explanation, Kind, Reader, classify,
    tail::{Percentiles, SpanTail},
};
use switchyard_model::{FrameKind, Label, Run, SpanAnatomy, SpanInstance, SpanRow, SpanWait};

use crate::{
    sentences::{counted, ns, percent, thousands},
    why::text,
};

/// Rows of the table of the slowest instances.
const SLOWEST: usize = 10;
/// Frames listed for a blocked part, innermost first.
const FRAMES: usize = 16;
/// A band around the P50 or the P90: the instances within this share of it, either side.
const AROUND: f64 = 0.1;
/// The parts of a bar, in this order: running, waiting for a CPU, then the blocked kinds.
const ORDER: [Kind; 11] = [
    Kind::Oncpu,
    Kind::Runqueue,
    Kind::Lock,
    Kind::Io,
    Kind::Net,
    Kind::Sleep,
    Kind::Fault,
    Kind::Gc,
    Kind::Ipc,
    Kind::Idle,
    Kind::Blocked,
];

/// The spans with instances measured one by one, in the order `explain` lists their tails.
fn measured(run: &Run) -> impl Iterator<Item = (&SpanRow, &SpanAnatomy)> {
    run.locks
        .spans
        .iter()
        .filter_map(|s| Some((s, s.anatomy.as_ref()?)))
        .filter(|(_, a)| a.count > 0)
}

/// Whether the page has the section: some span has instances measured one by one.
pub(crate) fn shown(run: &Run) -> bool {
    measured(run).next().is_some()
}

/// A part's name in a legend or a title.
fn label(kind: Kind) -> &'static str {
    match kind {
        Kind::Oncpu => "on CPU",
        Kind::Runqueue => "waiting for a CPU",
        Kind::Lock => "lock",
        Kind::Io => "block I/O",
        Kind::Net => "network",
        Kind::Sleep => "timer sleep",
        Kind::Fault => "page faults",
        Kind::Gc => "Go GC",
        Kind::Ipc => "pipe or child",
        Kind::Idle => "waiting for work",
        Kind::Blocked => "blocked, other",
    }
}

/// One part of an instance: its kind, its time, and what it was (plain text, for a title).
struct Segment {
    kind: Kind,
    ns: u64,
    about: String,
}

/// What the section reads a run with: its waits' classifier and its threads' names.
struct Cx<'a> {
    run: &'a Run,
    reader: Reader<'a>,
    names: BTreeMap<u32, &'a str>,
}

impl<'a> Cx<'a> {
    fn new(run: &'a Run) -> Cx<'a> {
        Cx {
            run,
            reader: Reader::new(run),
            names: run
                .threads
                .iter()
                .filter(|t| !t.comm.is_empty())
                .map(|t| (t.tid, t.comm.as_str()))
                .collect(),
        }
    }

    fn thread(&self, tid: u32) -> String {
        match self.names.get(&tid) {
            Some(name) => (*name).to_string(),
            None => format!("tid {tid}"),
        }
    }

    fn frames(&self, stack: Option<u32>) -> Vec<&'a switchyard_model::Frame> {
        let run = self.run;
        stack
            .and_then(|s| run.profiles.span_stacks.get(s as usize))
            .map(|f| switchyard_findings::frames(run, f))
            .unwrap_or_default()
    }

    fn read(&self, tgid: u32, w: &SpanWait) -> switchyard_findings::Reading {
        let frames = w
            .stack
            .and_then(|s| self.run.profiles.span_stacks.get(s as usize))
            .map(Vec::as_slice)
            .unwrap_or_default();
        self.reader.read_as(tgid, &w.state, frames)
    }

    /// An instance's parts: on CPU, its waits for a CPU, then its blocked parts, each group
    /// largest first (the order within the instance is not recorded).
    fn segments(&self, i: &SpanInstance) -> Vec<Segment> {
        let mut out = Vec::new();
        let go = i.go_time.clone().unwrap_or_default();
        let assist = go.assist_ns.min(i.oncpu_ns);
        let running = i.oncpu_ns - assist;
        if running > 0 {
            out.push(Segment {
                kind: Kind::Oncpu,
                ns: running,
                about: format!("on CPU: {}", ns(running)),
            });
        }
        if assist > 0 {
            out.push(Segment {
                kind: Kind::Gc,
                ns: assist,
                about: format!("assisting the Go GC, on CPU: {}", ns(assist)),
            });
        }
        let mut cpu: Vec<Segment> = i
            .cpu
            .iter()
            .filter(|c| c.ns > 0)
            .map(|c| {
                let holder = if c.comm.is_empty() {
                    self.thread(c.tid)
                } else {
                    c.comm.clone()
                };
                // The idle task held it: the CPU was idle, and took that long to run the thread.
                let by = if c.tid == 0 {
                    format!("on an idle CPU ({holder})")
                } else {
                    format!("held by {holder} (tid {})", c.tid)
                };
                Segment {
                    kind: Kind::Runqueue,
                    ns: c.ns,
                    about: format!("waiting for a CPU: {}, {by}", ns(c.ns)),
                }
            })
            .collect();
        let named: u64 = cpu.iter().map(|s| s.ns).sum();
        let rest = i.runqueue_ns.saturating_sub(named);
        if rest > 0 {
            cpu.push(Segment {
                kind: Kind::Runqueue,
                ns: rest,
                about: format!("waiting for a CPU: {}", ns(rest)),
            });
        }
        if go.sched_ns > 0 {
            cpu.push(Segment {
                kind: Kind::Runqueue,
                ns: go.sched_ns,
                about: format!("runnable in the Go scheduler: {}", ns(go.sched_ns)),
            });
        }
        cpu.sort_by_key(|s| std::cmp::Reverse(s.ns));
        out.extend(cpu);
        let mut blocked: Vec<Segment> = i
            .blocked
            .iter()
            .filter(|w| w.ns > 0)
            .map(|w| {
                let r = self.read(i.tgid, w);
                let mut about = format!("{}: {}", label(r.kind), ns(w.ns));
                if !r.site.is_empty() {
                    let _ = write!(about, " in {}", r.site);
                }
                if let Some(waker) = self.waker(i, w) {
                    let _ = write!(about, "; woken by {waker}");
                }
                Segment {
                    kind: r.kind,
                    ns: w.ns,
                    about,
                }
            })
            .collect();
        let named: u64 = blocked.iter().map(|s| s.ns).sum();
        let rest = i.blocked_ns.saturating_sub(named);
        if rest > 0 {
            let what = if i.go {
                "blocked in a system call"
            } else {
                "blocked (parts not kept one by one)"
            };
            blocked.push(Segment {
                kind: Kind::Blocked,
                ns: rest,
                about: format!("{what}: {}", ns(rest)),
            });
        }
        for p in go.parked.iter().filter(|p| p.ns > 0) {
            let mut about = format!("parked ({}): {}", p.reason, ns(p.ns));
            let site = classify::site(&self.frames(p.stack));
            if !site.is_empty() {
                let _ = write!(about, " in {site}");
            }
            blocked.push(Segment {
                kind: switchyard_findings::go_reason_kind(&p.reason),
                ns: p.ns,
                about,
            });
        }
        if go.other_parked_ns > 0 {
            blocked.push(Segment {
                kind: Kind::Blocked,
                ns: go.other_parked_ns,
                about: format!("parked: {}", ns(go.other_parked_ns)),
            });
        }
        blocked.sort_by_key(|s| std::cmp::Reverse(s.ns));
        out.extend(blocked);
        out
    }

    /// The thread that ended a blocked part, and what it did meanwhile: "compactor (tid 9),
    /// itself sleeping 7.9 ms of it".
    fn waker(&self, i: &SpanInstance, w: &SpanWait) -> Option<String> {
        if w.waker_tid == 0 || w.waker_tid == i.tid {
            return None;
        }
        let mut out = format!("{} (tid {})", self.thread(w.waker_tid), w.waker_tid);
        if w.held_ns > 0 {
            let doing = match &w.held_state {
                Label::Uninterruptible => "in I/O",
                l if l.waits_for_cpu() => "waiting for a CPU",
                _ => "sleeping",
            };
            let site = classify::site(&self.frames(w.held_stack));
            let _ = write!(out, ", itself {doing} {} of it", ns(w.held_ns));
            if !site.is_empty() {
                let _ = write!(out, " in {site}");
            }
        }
        Some(out)
    }

    /// Mean time by kind over `group`.
    fn mean(&self, group: &[&SpanInstance]) -> Mean {
        let mut by: BTreeMap<Kind, u64> = BTreeMap::new();
        for i in group {
            for s in self.segments(i) {
                *by.entry(s.kind).or_default() += s.ns;
            }
        }
        let n = group.len().max(1) as f64;
        Mean {
            duration: group.iter().map(|i| i.duration_ns).sum::<u64>() as f64 / n,
            parts: ORDER
                .iter()
                .filter_map(|k| Some((*k, *by.get(k)? as f64 / n)))
                .filter(|(_, v)| *v > 0.0)
                .collect(),
        }
    }
}

/// A group's mean duration and mean time by kind, in [`ORDER`].
struct Mean {
    duration: f64,
    parts: Vec<(Kind, f64)>,
}

/// The instances around one percentile.
struct Band<'a> {
    label: &'static str,
    /// Which instances, in words (HTML).
    about: String,
    members: Vec<&'a SpanInstance>,
}

/// The bands of a span's kept instances (see the module's documentation).
fn bands<'a>(a: &'a SpanAnatomy, p: &Percentiles) -> Vec<Band<'a>> {
    let kept = &a.instances;
    let between = |lo: u64, hi: u64| -> Vec<&SpanInstance> {
        kept.iter()
            .filter(|i| lo <= i.duration_ns && i.duration_ns < hi)
            .collect()
    };
    let nearest = |target: u64| kept.iter().min_by_key(|i| i.duration_ns.abs_diff(target));
    let band = |label, members: Vec<&'a SpanInstance>, range: String, target: u64| {
        if members.is_empty() {
            let near = nearest(target);
            Band {
                label,
                about: format!(
                    "no kept instance {range}: the nearest one, {}",
                    ns(near.map_or(0, |i| i.duration_ns))
                ),
                members: near.into_iter().collect(),
            }
        } else {
            Band {
                label,
                about: format!("{} {range}", kept_instances(members.len())),
                members,
            }
        }
    };
    let around = |v: u64| {
        (
            (v as f64 * (1.0 - AROUND)).floor() as u64,
            (v as f64 * (1.0 + AROUND)).ceil() as u64 + 1,
        )
    };
    let (lo50, hi50) = around(p.p50);
    let (lo90, hi90) = around(p.p90);
    let within = |v: u64| format!("within ±{:.0}% of {}", AROUND * 100.0, ns(v));
    let slowest = kept.iter().max_by_key(|i| i.duration_ns);
    vec![
        band("P50", between(lo50, hi50), within(p.p50), p.p50),
        band("P90", between(lo90, hi90), within(p.p90), p.p90),
        band(
            "P99",
            between(p.p99, p.p999),
            format!("from {} to {}", ns(p.p99), ns(p.p999)),
            p.p99,
        ),
        band(
            "P99.9",
            between(p.p999, u64::MAX),
            format!("from {} up", ns(p.p999)),
            p.p999,
        ),
        Band {
            label: "max",
            about: "the slowest kept instance".into(),
            members: slowest.into_iter().collect(),
        },
    ]
}

fn kept_instances(n: usize) -> String {
    format!(
        "{} kept instance{}",
        thousands(n as u64),
        if n == 1 { "" } else { "s" }
    )
}

/// A width in % of a bar, two decimals.
fn width(part: f64, whole: f64) -> String {
    format!(
        "{:.2}%",
        if whole > 0.0 {
            part / whole * 100.0
        } else {
            0.0
        }
    )
}

/// One bar of mean parts: `name`, the bar, the mean duration at its end, then `about`
/// (HTML).
fn bar_row(out: &mut String, name: &str, m: &Mean, about: &str) {
    let whole = m.duration.max(m.parts.iter().map(|(_, v)| v).sum());
    let mut segments = String::new();
    let mut described = Vec::new();
    for (kind, v) in &m.parts {
        let share = if whole > 0.0 { v / whole } else { 0.0 };
        let title = format!(
            "{}: {} ({})",
            label(*kind),
            ns(v.round() as u64),
            percent(share)
        );
        let _ = write!(
            segments,
            "<span class=\"seg k-{}\" style=\"width:{}\" title=\"{title}\"></span>",
            kind.name(),
            width(*v, whole)
        );
        described.push(format!("{} {}", label(*kind), percent(share)));
    }
    let mean = ns(m.duration.round() as u64);
    let _ = writeln!(
        out,
        "<div class=\"a-row\"><span class=\"a-label\">{name}</span>\
         <span class=\"a-bar\" role=\"img\" aria-label=\"{name}, mean {mean}: {}\">{segments}</span>\
         <span class=\"a-mean\">{mean}</span><span class=\"a-about\">{about}</span></div>",
        described.join(", ")
    );
}

/// The legend of the kinds `present`, in [`ORDER`].
fn legend(out: &mut String, present: &[Kind]) {
    let items: Vec<String> = ORDER
        .iter()
        .filter(|k| present.contains(k))
        .map(|k| {
            format!(
                "<span><i class=\"seg k-{}\"></i>{}</span>",
                k.name(),
                label(*k)
            )
        })
        .collect();
    let _ = writeln!(out, "<p class=\"a-legend\">{}</p>", items.join(" "));
}

/// The section, `<section id="slow-requests">`; nothing when no span kept instances whole.
pub(crate) fn section(out: &mut String, run: &Run, ex: &Explanation) {
    if !shown(run) {
        return;
    }
    let cx = Cx::new(run);
    out.push_str("<section id=\"slow-requests\">\n<h2>Slow requests</h2>\n");
    out.push_str(
        "<p class=\"note\">Each span measured one by one, from the function’s entry to its \
         return on one thread: what its instances did at each percentile, why the slowest 1% \
         were slow against a uniform sample of the others, and the slowest instances one by \
         one. Each bar is its band’s mean duration, split into time on CPU, waiting for a CPU \
         and blocked by kind of wait.</p>\n",
    );
    for ((s, a), tail) in measured(run).zip(&ex.spans) {
        span(out, &cx, s, a, tail);
    }
    out.push_str("</section>\n");
}

fn span(out: &mut String, cx: &Cx, s: &SpanRow, a: &SpanAnatomy, t: &SpanTail) {
    let p = &t.percentiles_ns;
    let _ = writeln!(
        out,
        "<div class=\"span-tail\">\n<h3 class=\"span-head\"><code>{}</code> \
         <span class=\"span-figures\">{} instances · P50 {} · P90 {} · P99 {} · P99.9 {} · \
         max {}</span></h3>",
        text(switchyard_findings::tail::span_name(s)),
        thousands(t.count),
        ns(p.p50),
        ns(p.p90),
        ns(p.p99),
        ns(p.p999),
        ns(p.max)
    );
    if a.instances.is_empty() {
        out.push_str(
            "<p class=\"none\">No instance was kept whole: only the durations.</p>\n</div>\n",
        );
        return;
    }
    // The typical group, as `explain` reads it: the sample of the instances below the P99.
    let sampled: Vec<&SpanInstance> = a
        .instances
        .iter()
        .filter(|i| !i.slow && i.duration_ns < p.p99)
        .collect();
    let typical = cx.mean(&sampled);
    let bands: Vec<(Band, Mean)> = bands(a, p)
        .into_iter()
        .map(|b| {
            let m = cx.mean(&b.members);
            (b, m)
        })
        .collect();
    let present: Vec<Kind> = bands
        .iter()
        .map(|(_, m)| m)
        .chain([&typical])
        .flat_map(|m| m.parts.iter().map(|(k, _)| *k))
        .collect();
    out.push_str("<h4>Anatomy by percentile</h4>\n<div class=\"anatomy\">\n");
    for (b, m) in &bands {
        bar_row(out, b.label, m, &b.about);
    }
    out.push_str("</div>\n");
    legend(out, &present);

    out.push_str("<h4>Why the slowest 1% were slow</h4>\n");
    let _ = writeln!(
        out,
        "<p class=\"note\">{} from the P99 ({}) up, kept whole, against {} typical ones \
         sampled{}.</p>",
        counted(t.slow.count, "instance"),
        ns(t.slow.threshold_ns),
        thousands(t.typical.count),
        if a.typical_every > 1 {
            format!(
                " (one in {} of the faster instances)",
                thousands(a.typical_every)
            )
        } else {
            String::new()
        }
    );
    if t.slow.count == 0 {
        out.push_str("<p class=\"none\">No instance from the P99 up was kept whole.</p>\n");
    } else if t.slow.findings.is_empty() {
        out.push_str(
            "<p class=\"none\">Nothing stands out: the slowest spent their time as the \
             typical ones did.</p>\n",
        );
    } else {
        out.push_str("<ol class=\"tail-findings\">\n");
        for f in &t.slow.findings {
            let kind = f.finding.kind.name();
            let _ = writeln!(
                out,
                "<li class=\"k-{kind}\"><span class=\"kind\">{kind}</span> \
                 <span class=\"f-share\">{} of the excess</span> {}</li>",
                percent(f.excess_share.min(1.0)),
                text(&sentence(&f.finding.summary))
            );
        }
        out.push_str("</ol>\n");
    }
    for n in &t.notes {
        let _ = writeln!(out, "<p class=\"note\">Note: {}.</p>", text(n));
    }

    slowest(out, cx, a);

    out.push_str("<h4>Typical instances, for contrast</h4>\n");
    if sampled.is_empty() {
        out.push_str("<p class=\"none\">No typical instance was sampled.</p>\n");
    } else {
        out.push_str("<div class=\"anatomy\">\n");
        bar_row(
            out,
            "typical",
            &typical,
            &format!(
                "mean of {} sampled below the P99",
                thousands(sampled.len() as u64)
            ),
        );
        out.push_str("</div>\n");
    }
    out.push_str("</div>\n");
}

/// The table of the slowest kept instances, each with a strip of its parts.
fn slowest(out: &mut String, cx: &Cx, a: &SpanAnatomy) {
    let mut slow: Vec<&SpanInstance> = a.instances.iter().filter(|i| i.slow).collect();
    if slow.is_empty() {
        return;
    }
    slow.sort_by(|x, y| {
        y.duration_ns
            .cmp(&x.duration_ns)
            .then(x.start_ns.cmp(&y.start_ns))
    });
    let _ = writeln!(
        out,
        "<h4>The slowest instances</h4>\n<p class=\"note\">The {} slowest of the {} kept \
         whole because they were slow. The order of the parts within an instance is not \
         recorded: each strip shows the time on CPU, then the waits for a CPU, then the \
         blocked parts, largest first; hover a part for what it was.</p>",
        slow.len().min(SLOWEST),
        thousands(slow.len() as u64)
    );
    out.push_str(
        "<div class=\"scroll\"><table class=\"data slowest\">\n<thead><tr><th>Thread</th>\
         <th class=\"num\">Start</th><th class=\"num\">Duration</th><th class=\"strip-cell\">\
         States</th><th>Stacks</th></tr></thead>\n<tbody>\n",
    );
    for i in slow.iter().take(SLOWEST) {
        let segments = cx.segments(i);
        let whole = i.duration_ns.max(segments.iter().map(|s| s.ns).sum());
        let mut strip = String::new();
        for s in &segments {
            let _ = write!(
                strip,
                "<span class=\"seg k-{}\" style=\"width:{}\" title=\"{}\"></span>",
                s.kind.name(),
                width(s.ns as f64, whole as f64),
                text(&s.about)
            );
        }
        let described: Vec<String> = segments.iter().map(|s| text(&s.about)).collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{:.3} s</td><td class=\"num\">{}</td>\
             <td class=\"strip-cell\"><span class=\"strip\" role=\"img\" aria-label=\"{}\">\
             {strip}</span></td><td class=\"stacks\">{}</td></tr>",
            text(&cx.thread(i.tid)),
            i.start_ns as f64 / 1e9,
            ns(i.duration_ns),
            described.join("; "),
            stacks(cx, i)
        );
    }
    out.push_str("</tbody>\n</table></div>\n");
}

/// The top blocked part's frames, user frames innermost first, under a fold named by its
/// site.
fn stacks(cx: &Cx, i: &SpanInstance) -> String {
    // A Go instance's longest park, when it is longer than any blocked part.
    let park = i
        .go_time
        .as_ref()
        .and_then(|g| g.parked.iter().max_by_key(|p| p.ns))
        .filter(|p| i.blocked.iter().all(|w| w.ns < p.ns));
    if let Some(p) = park {
        let frames = cx.frames(p.stack);
        let site = classify::site(&frames);
        let summary = format!(
            "{} {} (parked: {})",
            label(switchyard_findings::go_reason_kind(&p.reason)),
            ns(p.ns),
            text(&p.reason)
        );
        return frame_list(&frames, &site, summary, String::new());
    }
    let Some(w) = i.blocked.iter().max_by_key(|w| w.ns) else {
        return "<span class=\"na\">not blocked</span>".into();
    };
    let r = cx.read(i.tgid, w);
    let waker = cx.waker(i, w).map_or_else(String::new, |w| {
        format!(" <p class=\"waker\">Woken by {}.</p>", text(&w))
    });
    let summary = format!("{} {}", label(r.kind), ns(w.ns));
    frame_list(&cx.frames(w.stack), &r.site, summary, waker)
}

/// A stack's user frames, innermost first (the site in bold), under `summary` and the site;
/// `after`: HTML that follows the list.
fn frame_list(
    frames: &[&switchyard_model::Frame],
    site: &str,
    summary: String,
    after: String,
) -> String {
    let user: Vec<&str> = frames
        .iter()
        .rev()
        .filter(|f| f.kind != FrameKind::Kernel)
        .map(|f| f.name.as_str())
        .collect();
    if user.is_empty() {
        return "<span class=\"na\">no stack</span>".into();
    }
    let mut items: Vec<String> = user
        .iter()
        .take(FRAMES)
        .map(|n| {
            if *n == site {
                format!("<li><b><code>{}</code></b></li>", text(n))
            } else {
                format!("<li><code>{}</code></li>", text(n))
            }
        })
        .collect();
    if user.len() > FRAMES {
        items.push(format!(
            "<li class=\"more\">… {} more</li>",
            user.len() - FRAMES
        ));
    }
    let at = if site.is_empty() {
        String::new()
    } else {
        format!(" in <code>{}</code>", text(site))
    };
    format!(
        "<details class=\"frames\"><summary>{summary}{at}</summary> <ol>{}</ol>{after}</details>",
        items.join(" ")
    )
}

/// A finding's summary as a sentence: a capital first letter and a full stop.
fn sentence(summary: &str) -> String {
    let mut c = summary.chars();
    let mut out: String = c
        .next()
        .map(|first| first.to_uppercase().chain(c).collect())
        .unwrap_or_default();
    if !out.is_empty() && !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(duration_ns: u64, slow: bool) -> SpanInstance {
        SpanInstance {
            duration_ns,
            oncpu_ns: duration_ns,
            slow,
            ..SpanInstance::default()
        }
    }

    fn durations(b: &Band) -> Vec<u64> {
        b.members.iter().map(|i| i.duration_ns).collect()
    }

    /// P50 and P90: within ±10%; P99: from the P99 to the P99.9; P99.9: from it up; max: the
    /// slowest. A band no kept instance falls in takes the nearest one.
    #[test]
    fn bands_take_the_instances_around_each_percentile() {
        let a = SpanAnatomy {
            instances: [100, 95, 109, 120, 300, 900, 1_000, 5_000]
                .into_iter()
                .map(|d| instance(d, d >= 300))
                .collect(),
            ..SpanAnatomy::default()
        };
        let p = Percentiles {
            p50: 100,
            p90: 200,
            p99: 800,
            p999: 1_000,
            max: 5_000,
        };
        let b = bands(&a, &p);
        let labels: Vec<&str> = b.iter().map(|b| b.label).collect();
        assert_eq!(labels, ["P50", "P90", "P99", "P99.9", "max"]);
        assert_eq!(durations(&b[0]), [100, 95, 109]);
        assert_eq!(b[0].about, "3 kept instances within ±10% of 100 ns");
        // Nothing within 180..220 ns: the nearest, 120 ns.
        assert_eq!(durations(&b[1]), [120]);
        assert!(
            b[1].about.starts_with("no kept instance within ±10%"),
            "{}",
            b[1].about
        );
        assert_eq!(durations(&b[2]), [900]);
        assert_eq!(durations(&b[3]), [1_000, 5_000]);
        assert_eq!(durations(&b[4]), [5_000]);
    }

    #[test]
    fn a_summary_reads_as_a_sentence() {
        assert_eq!(sentence("the slowest 1% waited"), "The slowest 1% waited.");
        assert_eq!(sentence("done."), "Done.");
        assert_eq!(sentence(""), "");
    }
}
