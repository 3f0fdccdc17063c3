//! "What changed" between two builds: the findings of each side's runs, matched by what they
//! are (kind, site, the threads' pool and the culprit's), and ranked by how much of the change
//! in thread time per operation each explains.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use switchyard_model::{Run, metrics::spread, units::ns_f};

use crate::{Finding, Kind, explain, pattern};

/// One difference between A and B.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Change {
    pub kind: Kind,
    /// What it is: the threads' pool, the site, the culprit.
    pub what: String,
    /// Thread time per operation (or per second of recording, when a side has no operation
    /// count), ns: medians over each side's runs (a run without the finding counts 0).
    pub a: f64,
    pub b: f64,
    /// `b - a`.
    pub delta: f64,
    /// Its share of all the changes' sizes (the sum of |delta| over every change).
    pub explains: f64,
    /// The change in one plain sentence.
    pub summary: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Changes {
    /// "op" or "s": what the times are per.
    pub per: String,
    /// Total thread time per `per`, ns, medians of A and B.
    pub total_a: f64,
    pub total_b: f64,
    /// Ranked by |delta|, largest first; idle waits (and waits of parked threads) are not
    /// among them.
    pub changes: Vec<Change>,
    /// Idle waits (threads waiting for work, and threads parked the whole recording) per
    /// `per`, ns, medians of A and B: apart from the request path's changes.
    pub idle_a: f64,
    pub idle_b: f64,
}

/// Matches findings across runs: same kind, site, pool and culprit pool. Time on CPU matches by
/// pool alone: a build that moves the hot code moves the site, not the pool's work.
fn key(f: &Finding) -> (Kind, String, String, String) {
    let site = if f.kind == Kind::Oncpu {
        String::new()
    } else {
        f.site.clone()
    };
    let pool = f.threads.first().map(|t| pattern(t)).unwrap_or_default();
    let culprit = f
        .culprit
        .as_ref()
        .map(|c| pattern(&c.thread))
        .unwrap_or_default();
    (f.kind, site, pool, culprit)
}

fn describe(f: &Finding) -> String {
    let mut s = format!(
        "{} {}",
        crate::thread_list(&f.threads),
        f.kind.verb().trim_end_matches(',')
    );
    if !f.site.is_empty() {
        s += &format!(" in {}", f.site);
    }
    if let Some(c) = &f.culprit {
        s += &match f.kind {
            Kind::Runqueue => format!(", held by {}", c.thread),
            _ => format!(", released by {} ({})", c.thread, c.doing),
        };
    }
    s
}

/// Whether thread `tid` of `run` was parked: it switched at most once a second and ran under
/// 1% of its time. Its wall time is the recording's length, not the work's: per operation it
/// only says how many operations fit in the recording (a parked `jemalloc_bg_thd` "costs"
/// more per operation in the build that did fewer), so compare counts it as idle.
fn parked(run: &Run, tid: u32) -> bool {
    let Some(t) = run.threads.iter().find(|t| t.tid == tid) else {
        return false;
    };
    let secs = run.meta.duration_ns() as f64 / 1e9;
    let wall = (t.oncpu_ns + t.offcpu_ns()) as f64;
    (t.voluntary + t.involuntary) as f64 <= secs.max(1.0) && (t.oncpu_ns as f64) < wall * 0.01
}

/// The differences between runs of A and runs of B, ranked. A wait of threads that were
/// [parked] the whole recording counts as idle, whatever explain calls it.
pub fn changes(a: &[Run], b: &[Run]) -> Changes {
    let per_op = a
        .iter()
        .chain(b)
        .all(|r| r.operations.is_some_and(|o| o > 0));
    let norm = |r: &Run| {
        if per_op {
            r.operations.unwrap_or(1) as f64
        } else {
            (r.meta.duration_ns() as f64 / 1e9).max(1e-9)
        }
    };
    type Side = BTreeMap<(Kind, String, String, String), (Vec<f64>, String)>;
    let side = |runs: &[Run]| -> (Side, Vec<f64>) {
        let mut m: Side = BTreeMap::new();
        let mut totals = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            let n = norm(r);
            let ex = explain(r);
            let t = r.totals();
            let total = t.oncpu_ns + t.offcpu_ns();
            totals.push(total as f64 / n);
            for f in &ex.findings {
                let mut k = key(f);
                let waits = !matches!(f.kind, Kind::Runqueue | Kind::Oncpu);
                if waits && !f.tids.is_empty() && f.tids.iter().all(|&t| parked(r, t)) {
                    k.0 = Kind::Idle;
                }
                let e = m
                    .entry(k)
                    .or_insert_with(|| (vec![0.0; runs.len()], describe(f)));
                e.0[i] += f.seconds * 1e9 / n;
            }
        }
        (m, totals)
    };
    let (mut ma, ta) = side(a);
    let (mut mb, tb) = side(b);
    let median = |v: &[f64]| spread(v).map_or(0.0, |s| s.median);
    // Idle waits, summed per run, then apart.
    let idle = |m: &mut Side, runs: usize| -> f64 {
        let mut per_run = vec![0.0; runs];
        m.retain(|k, (v, _)| {
            if k.0 != Kind::Idle {
                return true;
            }
            for (p, x) in per_run.iter_mut().zip(v.iter()) {
                *p += x;
            }
            false
        });
        median(&per_run)
    };
    let (idle_a, idle_b) = (idle(&mut ma, a.len()), idle(&mut mb, b.len()));
    let mut keys: Vec<_> = ma.keys().chain(mb.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let unit = if per_op { "/op" } else { "/s" };
    let mut out: Vec<Change> = keys
        .into_iter()
        .map(|k| {
            let va = ma.get(&k).map_or(0.0, |(v, _)| median(v));
            let vb = mb.get(&k).map_or(0.0, |(v, _)| median(v));
            let what = mb
                .get(&k)
                .or(ma.get(&k))
                .map(|(_, d)| d.clone())
                .unwrap_or_default();
            Change {
                kind: k.0,
                summary: format!(
                    "{what}: {} → {}{unit} ({}{})",
                    ns_f(va),
                    ns_f(vb),
                    if vb >= va { "+" } else { "−" },
                    ns_f((vb - va).abs())
                ),
                what,
                a: va,
                b: vb,
                delta: vb - va,
                explains: 0.0,
            }
        })
        .collect();
    let size: f64 = out.iter().map(|c| c.delta.abs()).sum();
    for c in &mut out {
        c.explains = if size > 0.0 {
            c.delta.abs() / size
        } else {
            0.0
        };
    }
    out.retain(|c| c.delta != 0.0);
    out.sort_by(|x, y| y.delta.abs().total_cmp(&x.delta.abs()));
    Changes {
        per: if per_op { "op".into() } else { "s".into() },
        total_a: median(&ta),
        total_b: median(&tb),
        changes: out,
        idle_a,
        idle_b,
    }
}

impl Changes {
    /// The top `n`, a line each, with the share of the change each explains: the terminal's
    /// form, each sentence [escaped](switchyard_model::term::escape) (it carries the target's
    /// names).
    pub fn render(&self, n: usize) -> String {
        let mut out = format!(
            "what changed (thread time per {}: {} → {}):\n",
            self.per,
            ns_f(self.total_a),
            ns_f(self.total_b)
        );
        if self.changes.is_empty() {
            out.push_str("  nothing: the same findings, in the same amounts\n");
        }
        for (i, c) in self.changes.iter().take(n).enumerate() {
            out.push_str(&format!(
                "  {}. [{}] {} — explains {} of the change\n",
                i + 1,
                c.kind.name(),
                switchyard_model::term::escape(&c.summary),
                switchyard_model::units::percent_whole(c.explains)
            ));
        }
        if self.idle_a + self.idle_b > 0.0 {
            out.push_str(&format!(
                "  idle, not on the request path (waiting for work, or parked): {} → {}/{}\n",
                ns_f(self.idle_a),
                ns_f(self.idle_b),
                self.per
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use switchyard_model::{Frame, FrameKind, Log2Hist, Stack, ThreadRow};

    use super::*;
    use crate::tests::waits_run;

    const MS: u64 = 1_000_000;

    /// `run` with a thread that sat in one futex wait the whole recording, never switching
    /// (jemalloc's background thread with nothing to purge), and `ops` operations.
    fn with_parked_thread(mut run: Run, ops: u64) -> Run {
        run.operations = Some(ops);
        run.threads.push(ThreadRow {
            tid: 7,
            tgid: 100,
            comm: "jemalloc_bg_thd".into(),
            voluntary: 0,
            involuntary: 0,
            oncpu_ns: 0,
            blocked_ns: 3_000 * MS,
            runqueue_ns: 0,
            runqueue_after_wakeup_ns: 0,
            offcpu: Log2Hist::default(),
            runqueue_waits: Log2Hist::default(),
        });
        let first = run.profiles.frames.len() as u32;
        run.profiles.frames.push(Frame {
            name: "futex_wait".into(),
            module: "kernel".into(),
            kind: FrameKind::Kernel,
            ..Default::default()
        });
        run.profiles.offcpu.stacks.push(Stack {
            tgid: 100,
            tid: 7,
            comm: "jemalloc_bg_thd".into(),
            label: "S".into(),
            frames: vec![first],
            value: 3_000 * MS,
            ..Default::default()
        });
        run
    }

    #[test]
    fn a_parked_thread_is_idle_not_a_change_per_operation() {
        // The same run, B doing a third of A's operations: every finding costs more per
        // operation, the parked thread's 3 s the most, though it did nothing in either.
        let a = with_parked_thread(waits_run(), 3_000);
        let b = with_parked_thread(waits_run(), 1_000);
        let parked = explain(&b)
            .findings
            .into_iter()
            .find(|f| f.tids == [7])
            .expect("a finding for the parked thread");
        assert_ne!(parked.kind, Kind::Idle, "{parked:?}");
        let ch = changes(&[a], &[b]);
        assert_eq!(ch.per, "op");
        assert!(
            ch.changes
                .iter()
                .all(|c| !c.what.contains("jemalloc_bg_thd")),
            "{}",
            ch.render(9)
        );
        // Its 1 ms/op → 3 ms/op is with the idle waits.
        assert!(ch.idle_b - ch.idle_a >= 2e6 - 1.0, "{ch:?}");
        assert!(ch.render(5).contains("(waiting for work, or parked)"));
        // A thread that switched, though mostly asleep, is still compared.
        assert!(parked_threads_are_only_those(&with_parked_thread(
            waits_run(),
            1
        )));
    }

    fn parked_threads_are_only_those(run: &Run) -> bool {
        run.threads
            .iter()
            .all(|t| parked(run, t.tid) == (t.tid == 7))
    }
}
