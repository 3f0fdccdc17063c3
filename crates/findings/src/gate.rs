//! The findings behind a figure: what a failed budget names as its cause.

use switchyard_model::metrics::{self, Explains};

use crate::{Explanation, Finding, Kind};

/// The kinds of finding that make up a figure made of `what`.
fn kinds(what: Explains) -> &'static [Kind] {
    use Kind::*;
    match what {
        Explains::Nothing | Explains::SpanCalls => &[],
        Explains::Requests => &[
            Runqueue, Lock, Io, Net, Sleep, Fault, Gc, Ipc, Blocked, Oncpu,
        ],
        Explains::Switches => &[
            Runqueue, Lock, Io, Net, Sleep, Fault, Gc, Ipc, Blocked, Idle,
        ],
        Explains::Blocking => &[Lock, Io, Net, Sleep, Fault, Gc, Ipc, Blocked, Idle],
        Explains::WaitsForCpu => &[Runqueue],
        Explains::Locks => &[Lock],
        Explains::OnCpu => &[Oncpu],
        Explains::Gc => &[Gc],
    }
}

/// The top `n` findings behind figure `name`, each with its share of those kinds' time:
/// "70% lock waits …". Empty for a figure findings do not explain (memory, heap).
///
/// A span's percentile (`span.<label>.p99`) is explained by its tail ([`crate::tail`]): the
/// P99, P99.9 and longest call by the slow group's causes, ranked by the excess each
/// explains; the P50 and P90 by the typical group's, by time. Each comes with its share of
/// the group's time.
pub fn behind<'a>(name: &str, ex: &'a Explanation, n: usize) -> Vec<(f64, &'a Finding)> {
    let Some((figure, _)) = metrics::definition(name) else {
        return Vec::new();
    };
    if figure.explained_by == Explains::SpanCalls {
        return match metrics::span_percentile(name) {
            Some((label, which)) => span_causes(label, which, ex, n),
            None => Vec::new(),
        };
    }
    let kinds = kinds(figure.explained_by);
    let mut matched: Vec<&Finding> = ex
        .findings
        .iter()
        .filter(|f| kinds.contains(&f.kind))
        .collect();
    // Idle waits only when nothing on the request path makes up the figure: they are rarely
    // what a budget is about.
    if matched.iter().any(|f| f.kind != Kind::Idle) {
        matched.retain(|f| f.kind != Kind::Idle);
    }
    let total: f64 = matched.iter().map(|f| f.seconds).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut out: Vec<(f64, &Finding)> = matched
        .into_iter()
        .map(|f| (f.seconds / total, f))
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    out.truncate(n);
    out
}

/// The causes of a span's percentile `which` (`p99`), from the tail of the span whose figure
/// label is `label` (a label's dots are underscores in figure names).
fn span_causes<'a>(
    label: &str,
    which: &str,
    ex: &'a Explanation,
    n: usize,
) -> Vec<(f64, &'a Finding)> {
    let Some(tail) = ex.spans.iter().find(|t| t.name.replace('.', "_") == label) else {
        return Vec::new();
    };
    let group = match which {
        "p50" | "p90" => &tail.typical,
        _ => &tail.slow,
    };
    group
        .findings
        .iter()
        .take(n)
        .map(|f| (f.finding.share, &f.finding))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tail::{SpanTail, TailFinding, TailGroup};

    fn cause(kind: Kind, share: f64, summary: &str) -> TailFinding {
        TailFinding {
            finding: Finding {
                kind,
                share,
                summary: summary.into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_span_percentile_is_behind_its_tails_group() {
        let ex = Explanation {
            spans: vec![SpanTail {
                name: "handle.request".into(),
                slow: TailGroup {
                    findings: vec![
                        cause(Kind::Lock, 0.5, "lock"),
                        cause(Kind::Runqueue, 0.3, "cpu"),
                        cause(Kind::Io, 0.1, "io"),
                        cause(Kind::Oncpu, 0.1, "oncpu"),
                    ],
                    ..Default::default()
                },
                typical: TailGroup {
                    findings: vec![cause(Kind::Oncpu, 0.9, "running")],
                    ..Default::default()
                },
                ..Default::default()
            }],
            findings: vec![Finding {
                kind: Kind::Lock,
                seconds: 1.0,
                summary: "a lock of the whole run".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let got = |name: &str, n: usize| -> Vec<(f64, String)> {
            behind(name, &ex, n)
                .into_iter()
                .map(|(share, f)| (share, f.summary.clone()))
                .collect()
        };
        // The slow group's causes, in their order, for the tail's figures; the label's dot is
        // an underscore in the figure's name.
        let slow = vec![
            (0.5, "lock".to_string()),
            (0.3, "cpu".into()),
            (0.1, "io".into()),
        ];
        for p in ["p99", "p99_9", "max"] {
            assert_eq!(got(&format!("span.handle_request.{p}"), 3), slow, "{p}");
        }
        // The typical group's for the middle.
        for p in ["p50", "p90"] {
            assert_eq!(
                got(&format!("span.handle_request.{p}"), 3),
                [(0.9, "running".to_string())]
            );
        }
        // Another span, or a span's other figures: nothing from the tail.
        assert!(got("span.other.p99", 3).is_empty());
        assert!(got("span.handle_request.time", 3).is_empty());
        assert_eq!(
            got("futex.wait_time", 3),
            [(1.0, "a lock of the whole run".to_string())]
        );
    }
}
