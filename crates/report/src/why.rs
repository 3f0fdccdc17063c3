//! The report's first section (after "Slow requests", in a run with spans), "Why it waited": the run's findings, as `switchyard explain`
//! ranks them. The request path's findings come first, a card each (kind, sentence, time,
//! who made the threads wait, what the figure was read from, when); idle waits follow in one
//! line, then throttling and what the answer could not use.

use std::{collections::BTreeSet, fmt::Write as _};

use switchyard_findings::{Explanation, Finding, Kind};

use crate::{
    escape::html as esc,
    sentences::{counted, ns, percent},
};

/// Findings shown, at most; `switchyard explain` lists them all.
pub(crate) const TOP: usize = 8;
/// A culprit's frames shown, innermost first.
const FRAMES: usize = 3;

/// Escaped text on one line: a name's line breaks and other control characters become spaces.
pub(crate) fn text(s: &str) -> String {
    esc(&s.replace(|c: char| c.is_control(), " "))
}

fn seconds(s: f64) -> String {
    ns((s * 1e9).round() as u64)
}

/// The sentence without the timeline's "[N intervals from … to …]", shown on a line of its own.
fn sentence(f: &Finding) -> &str {
    match &f.when {
        Some(w) => f.summary.strip_suffix(&w.tail()).unwrap_or(&f.summary),
        None => &f.summary,
    }
}

/// The section, `<section id="findings">`.
pub(crate) fn section(out: &mut String, ex: &Explanation) {
    out.push_str("<section id=\"findings\">\n<h2>Why it waited</h2>\n");
    out.push_str(
        "<p class=\"note\">What the threads waited on, by thread time, and who made them wait: \
         the findings <code>switchyard explain</code> prints. Waits for work (idle) are set \
         apart below the list.</p>\n",
    );
    let busy: Vec<&Finding> = ex.busy().collect();
    let idle: Vec<&Finding> = ex.idle().collect();
    if busy.is_empty() {
        out.push_str(if idle.is_empty() {
            "<p class=\"none\">Nothing stands out: no wait took a noticeable share of any \
             thread's time.</p>\n"
        } else {
            "<p class=\"none\">Nothing on the request path stands out: the threads' waits \
             were waits for work.</p>\n"
        });
    } else {
        out.push_str("<ol class=\"findings\">\n");
        for f in busy.iter().take(TOP) {
            finding(out, f);
        }
        out.push_str("</ol>\n");
        if busy.len() > TOP {
            let _ = writeln!(
                out,
                "<p class=\"note\">{} more findings, each smaller: <code>switchyard explain</code> \
                 lists them all.</p>",
                busy.len() - TOP
            );
        }
    }
    if !idle.is_empty() {
        let secs: f64 = idle.iter().map(|f| f.seconds).sum();
        let sites: BTreeSet<&str> = idle
            .iter()
            .map(|f| f.site.as_str())
            .filter(|s| !s.is_empty())
            .collect();
        let sites: Vec<String> = sites
            .into_iter()
            .map(|s| format!("<code>{}</code>", text(s)))
            .collect();
        let _ = writeln!(
            out,
            "<p class=\"f-idle\"><b>Idle, not on the request path:</b> {} waiting for work{} \
             — shown in the <a href=\"#flame-offcpu\">off-CPU</a> and \
             <a href=\"#flame-wakeup\">wakeup</a> flame graphs with “show idle waits”.</p>",
            seconds(secs),
            if sites.is_empty() {
                String::new()
            } else {
                format!(" in {}", sites.join(", "))
            }
        );
    }
    if let Some(t) = &ex.throttled {
        let _ = writeln!(out, "<p class=\"note\">Throttled: {}.</p>", text(t));
    }
    for l in &ex.limits {
        let _ = writeln!(out, "<p class=\"note\">Note: {}.</p>", text(l));
    }
    out.push_str("</section>\n");
}

fn finding(out: &mut String, f: &Finding) {
    let kind = f.kind.name();
    let _ = writeln!(
        out,
        "<li class=\"finding k-{kind}\"><span class=\"kind\">{kind}</span> \
         <span class=\"f-time\">{}</span> <span class=\"f-share\">{} {}</span> \
         <span class=\"f-summary\">{}</span>",
        seconds(f.seconds),
        percent(f.share),
        text(f.share_of()),
        text(sentence(f))
    );
    if let Some(c) = &f.culprit {
        let role = match f.kind {
            Kind::Runqueue => "Held the CPU",
            Kind::Lock => "Released the lock",
            _ => "Made them wait",
        };
        let process = if c.same_process {
            "this process".to_string()
        } else {
            format!("another process: {}", text(&c.process))
        };
        let mut who = format!(
            "{role}: <b>{}</b> (tid {}, {process})",
            text(&c.thread),
            c.tid
        );
        if let Some(n) = c.nice {
            let _ = write!(who, " · nice {n}");
        }
        if let Some(cpu) = c.cpu {
            let _ = write!(who, " · CPU {cpu}");
        }
        if !c.doing.is_empty() {
            let _ = write!(who, " · it was {}", text(&c.doing));
        }
        if !c.frames.is_empty() {
            let mut frames: Vec<String> = c
                .frames
                .iter()
                .take(FRAMES)
                .map(|f| format!("<code>{}</code>", text(f)))
                .collect();
            if c.frames.len() > FRAMES {
                frames.push("…".into());
            }
            let _ = write!(
                who,
                "<br><span class=\"f-frames\">its frames, innermost first: {}</span>",
                frames.join(" ← ")
            );
        }
        let _ = writeln!(out, "<p class=\"f-who\">{who}</p>");
    }
    if !f.evidence.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"f-evidence\">Evidence: {}</p>",
            text(&f.evidence)
        );
    }
    if let Some(w) = &f.when {
        let what = if f.kind == Kind::Oncpu {
            "sample"
        } else {
            "interval"
        };
        let _ = writeln!(
            out,
            "<p class=\"f-when\">When: {} from {:.2} s to {:.2} s into the recording</p>",
            counted(w.intervals, what),
            w.first_s,
            w.last_s
        );
    }
    out.push_str("</li>\n");
}
