//! Budgets for CI: limits on a run's figures, absolute or against a baseline run.
//!
//! A budget file is TOML, a list of `[[budget]]` tables:
//!
//! ```toml
//! [[budget]]
//! workload = "mmsg-relay"          # optional: runs of this workload (run.workload.name)
//! build = "mmsg"                   # optional: and this build
//! metric = "syscalls.total.per_op" # a figure name (see `switchyard_model::metrics`)
//! max = 1.5                        # optional: fail above
//! min = 40000                      # optional: fail below
//! regression = 10                  # optional: fail when worse than --baseline by more than 10%
//! ```
//!
//! Parsing is strict (unknown keys, unknown figures, wrong types and empty budgets are errors
//! naming the line and column), because a typo in a CI budget must not pass silently.

mod output;

use std::{collections::BTreeMap, ops::Range};

use serde::Deserialize;
use switchyard_model::{
    Run,
    metrics::{self, Better, Metric},
    units::Unit,
};

pub use output::{junit, markdown, text};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}:{line}:{column}: {message}")]
    Budget {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    budget: Vec<toml::Spanned<RawBudget>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    workload: Option<String>,
    build: Option<String>,
    metric: toml::Spanned<String>,
    max: Option<toml::Spanned<f64>>,
    min: Option<toml::Spanned<f64>>,
    regression: Option<toml::Spanned<f64>>,
}

/// One validated budget.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    pub workload: Option<String>,
    pub build: Option<String>,
    pub metric: String,
    pub max: Option<f64>,
    pub min: Option<f64>,
    /// Allowed worsening against the baseline, percent.
    pub regression: Option<f64>,
    /// Where it was written (line), for messages.
    pub line: usize,
}

impl Budget {
    /// Whether this budget is checked on `run`: its workload and build, where it names them,
    /// are the run's.
    pub fn applies(&self, run: &Run) -> bool {
        let matches = |want: &Option<String>, have: Option<&str>| match want {
            None => true,
            Some(want) => have == Some(want.as_str()),
        };
        matches(&self.workload, run.workload_name()) && matches(&self.build, run.build_name())
    }

    /// "spinlock-broker/abs switches.total.per_op".
    pub fn name(&self) -> String {
        let scope = match (&self.workload, &self.build) {
            (Some(w), Some(b)) => format!("{w}/{b} "),
            (Some(w), None) => format!("{w} "),
            (None, Some(b)) => format!("*/{b} "),
            (None, None) => String::new(),
        };
        format!("{scope}{}", self.metric)
    }
}

fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, column)
}

/// Parses and validates a budget file's text; `path` names it in errors.
pub fn parse(src: &str, path: &str) -> Result<Vec<Budget>, Error> {
    let at = |span: Option<Range<usize>>, message: String| {
        let (line, column) = span.map_or((1, 1), |s| line_col(src, s.start));
        Error::Budget {
            path: path.to_string(),
            line,
            column,
            message,
        }
    };
    let file: File = toml::from_str(src).map_err(|e| at(e.span(), e.message().to_string()))?;
    let mut out = Vec::new();
    for spanned in file.budget {
        let span = spanned.span();
        let raw = spanned.into_inner();
        let metric_span = raw.metric.span();
        let metric = raw.metric.into_inner();
        if !metrics::is_known(&metric) {
            return Err(at(
                Some(metric_span),
                format!("unknown figure `{metric}` (see `switchyard gate --list`)"),
            ));
        }
        if raw.max.is_none() && raw.min.is_none() && raw.regression.is_none() {
            return Err(at(
                Some(span),
                format!("budget for `{metric}` sets none of max, min, regression"),
            ));
        }
        // Each limit, refused at its own line and column: NaN passes every comparison and inf
        // none, a negative max always fails and a negative min always holds (no figure is
        // below zero), and a min above the max cannot be met. Any of them would make the
        // budget mean something else than it says, silently.
        let field = |key: &str, value: f64, span: Range<usize>, why: &str| {
            at(
                Some(span),
                format!("budget for `{metric}` has {key} = {value}: {why}"),
            )
        };
        for (key, limit) in [("max", &raw.max), ("min", &raw.min)] {
            let Some(limit) = limit else { continue };
            let v = *limit.get_ref();
            if !v.is_finite() {
                return Err(field(key, v, limit.span(), "a limit is a finite number"));
            }
            if v < 0.0 {
                let effect = if key == "max" {
                    "always fail"
                } else {
                    "always hold"
                };
                return Err(field(
                    key,
                    v,
                    limit.span(),
                    &format!(
                        "no figure is below zero, so the budget would {effect} (a limit is 0 or more, in the figure's unit)"
                    ),
                ));
            }
        }
        if let (Some(min), Some(max)) = (&raw.min, &raw.max)
            && min.get_ref() > max.get_ref()
        {
            return Err(field(
                "min",
                *min.get_ref(),
                min.span(),
                &format!("above max = {}, so the budget cannot hold", max.get_ref()),
            ));
        }
        let regression = match raw.regression {
            Some(r) if *r.get_ref() < 0.0 || !r.get_ref().is_finite() => {
                return Err(field(
                    "regression",
                    *r.get_ref(),
                    r.span(),
                    "a regression is the worsening allowed against --baseline, in percent, 0 or more",
                ));
            }
            Some(r) => Some(r.into_inner()),
            None => None,
        };
        out.push(Budget {
            workload: raw.workload,
            build: raw.build,
            metric,
            max: raw.max.map(toml::Spanned::into_inner),
            min: raw.min.map(toml::Spanned::into_inner),
            regression,
            line: line_col(src, span.start).0,
        });
    }
    Ok(out)
}

#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Pass,
    Fail(String),
}

/// One budget checked against one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// The run's label (its file name).
    pub run: String,
    pub budget: Budget,
    pub value: Option<f64>,
    /// The figure's unit; `None` when the run lacks the figure.
    pub unit: Option<Unit>,
    pub baseline: Option<f64>,
    pub status: Status,
}

impl Check {
    pub fn passed(&self) -> bool {
        self.status == Status::Pass
    }
}

/// Checks every budget that applies to each run. `runs` are (label, run); `baseline` is the
/// run regressions are measured against.
pub fn check(budgets: &[Budget], runs: &[(String, Run)], baseline: Option<&Run>) -> Vec<Check> {
    let groups: Vec<(String, Vec<&Run>)> = runs
        .iter()
        .map(|(label, run)| (label.clone(), vec![run]))
        .collect();
    check_repeats(budgets, &groups, baseline)
}

/// Checks every budget against groups of repeated runs (label, runs of one workload build),
/// on each figure's median over the group: a budget on a noisy figure holds over repeats,
/// as a comparison's medians do.
pub fn check_repeats(
    budgets: &[Budget],
    groups: &[(String, Vec<&Run>)],
    baseline: Option<&Run>,
) -> Vec<Check> {
    let base: Option<BTreeMap<String, Metric>> = baseline.map(metrics::extract);
    let mut out = Vec::new();
    for (label, runs) in groups {
        let Some(first) = runs.first() else { continue };
        let figures: Vec<_> = runs.iter().map(|r| metrics::extract(r)).collect();
        // The group's findings, read once, when a budget fails.
        let mut findings = None;
        for b in budgets.iter().filter(|b| b.applies(first)) {
            let found: Vec<Metric> = runs
                .iter()
                .zip(&figures)
                .filter_map(|(run, f)| metrics::lookup(run, f, &b.metric))
                .collect();
            let values: Vec<f64> = found.iter().map(|m| m.value).collect();
            let fig = found
                .first()
                .zip(metrics::spread(&values))
                .map(|(m, s)| Metric {
                    value: s.median,
                    ..m.clone()
                });
            let fig = fig.as_ref();
            let value = fig.map(|m| m.value);
            let base_value = base
                .as_ref()
                .and_then(|m| m.get(&b.metric))
                .map(|m| m.value);
            let status = match judge(b, fig, base_value, baseline.is_some()) {
                // A figure that failed says what is behind it, from the findings.
                Status::Fail(why) if fig.is_some() => {
                    let ex = findings.get_or_insert_with(|| switchyard_findings::explain(first));
                    Status::Fail(with_causes(why, ex, b))
                }
                s => s,
            };
            out.push(Check {
                run: label.clone(),
                budget: b.clone(),
                value,
                unit: fig.map(|m| m.unit),
                baseline: base_value,
                status,
            });
        }
    }
    out
}

/// `why`, and the top findings behind the budget's figure: "…; behind it: 70% [lock] …". A
/// span's percentile names the top three causes of its tail ([`switchyard_findings::tail`]),
/// whose sentences give their own shares: "…; behind it: [lock] the slowest 1% of …".
fn with_causes(why: String, ex: &switchyard_findings::Explanation, b: &Budget) -> String {
    let span = metrics::span_percentile(&b.metric).is_some();
    let behind = switchyard_findings::behind(&b.metric, ex, if span { 3 } else { 2 });
    if behind.is_empty() {
        return why;
    }
    let causes: Vec<String> = behind
        .iter()
        .map(|(share, f)| {
            let share = if span {
                String::new()
            } else {
                format!("{} ", switchyard_model::units::percent(*share))
            };
            format!("{share}[{}] {}", f.kind.name(), f.summary)
        })
        .collect();
    format!("{why}; behind it: {}", causes.join("; "))
}

fn judge(b: &Budget, fig: Option<&Metric>, base: Option<f64>, has_baseline: bool) -> Status {
    let Some(fig) = fig else {
        return Status::Fail(format!(
            "the run has no `{}`{}",
            b.metric,
            why_absent(&b.metric)
        ));
    };
    let v = fig.value;
    if let Some(max) = b.max
        && v > max
    {
        return Status::Fail(format!(
            "{} above the maximum {}",
            fig.unit.show(v),
            fig.unit.show(max)
        ));
    }
    if let Some(min) = b.min
        && v < min
    {
        return Status::Fail(format!(
            "{} below the minimum {}",
            fig.unit.show(v),
            fig.unit.show(min)
        ));
    }
    if let Some(allowed) = b.regression {
        if !has_baseline {
            return Status::Fail("a regression budget needs --baseline".into());
        }
        let Some(base) = base else {
            return Status::Fail(format!("the baseline has no `{}`", b.metric));
        };
        let worse_by = match fig.better {
            Better::Lower => v - base,
            Better::Higher => base - v,
            Better::Neither => 0.0,
        };
        let pct = if base != 0.0 {
            worse_by / base.abs() * 100.0
        } else if worse_by > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        if pct > allowed {
            return Status::Fail(format!(
                "{} is {} worse than the baseline {} (allowed {allowed}%)",
                fig.unit.show(v),
                switchyard_model::units::percent(pct / 100.0),
                fig.unit.show(base)
            ));
        }
    }
    Status::Pass
}

/// Why a run may lack a figure: the recording option or the input that produces it.
fn why_absent(metric: &str) -> &'static str {
    if metric.ends_with(".per_op") || metric == "operations" || metric == "cpu.per_op" {
        " (per-operation figures need a workload result: record --workload-result)"
    } else if metric.starts_with("gc.") {
        " (GC figures need `record --go-gc` on a Go binary)"
    } else if metrics::span_percentile(metric).is_some() {
        " (span percentiles need calls of the span that returned in the recording: record --uprobe-span LABEL=SYMBOL; runs recorded before spans were measured one by one have none)"
    } else if metric.starts_with("span.") {
        " (span figures need `record --uprobe-span LABEL=SYMBOL`)"
    } else if metric.starts_with("latency.")
        || metric.starts_with("workload.")
        || metric == "throughput"
    {
        " (workload figures need a workload result: record --workload-result)"
    } else if metric.starts_with("perf.") {
        " (the perf counter was not supported or not opened)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_errors_by_line_and_column() {
        let ok = "[[budget]]\nmetric = \"switches.total.per_op\"\nmax = 1.5\n\n[[budget]]\nworkload = \"w\"\nbuild = \"b\"\nmetric = \"latency.p99\"\nregression = 10\n";
        let b = parse(ok, "b.toml").unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].regression, Some(10.0));
        assert_eq!(b[1].name(), "w/b latency.p99");

        for limit in ["max = nan", "max = inf", "min = -inf"] {
            let text = format!("[[budget]]\nmetric = \"cpu.per_op\"\n{limit}\n");
            let e = parse(&text, "b.toml").unwrap_err().to_string();
            assert!(
                e.starts_with("b.toml:3:7:") && e.contains("a limit is a finite number"),
                "{e}"
            );
        }

        let unknown = "[[budget]]\nmetric = \"switches.totl\"\nmax = 1\n";
        let e = parse(unknown, "b.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("b.toml:2:10: unknown figure `switches.totl`"),
            "{e}"
        );

        let wrong_type = "[[budget]]\nmetric = \"cpu.per_op\"\nmax = \"fast\"\n";
        let e = parse(wrong_type, "b.toml").unwrap_err().to_string();
        assert!(e.starts_with("b.toml:3:"), "{e}");

        let syntax = "[[budget]\nmetric = 1\n";
        let e = parse(syntax, "b.toml").unwrap_err().to_string();
        assert!(e.starts_with("b.toml:1:"), "{e}");

        let typo = "[[budget]]\nmetric = \"cpu.per_op\"\nmx = 3\n";
        let e = parse(typo, "b.toml").unwrap_err().to_string();
        assert!(e.starts_with("b.toml:3:1:") && e.contains("mx"), "{e}");

        let empty = "[[budget]]\nmetric = \"cpu.per_op\"\n";
        assert!(
            parse(empty, "b.toml")
                .unwrap_err()
                .to_string()
                .contains("none of max")
        );
    }

    #[test]
    fn limits_that_change_what_a_budget_means_are_refused_at_their_field() {
        let refused = |limits: &str| {
            let text = format!("[[budget]]\nmetric = \"cpu.per_op\"\n{limits}\n");
            parse(&text, "b.toml").unwrap_err().to_string()
        };
        let e = refused("max = -5");
        assert!(
            e.starts_with("b.toml:3:7: budget for `cpu.per_op` has max = -5:")
                && e.contains("always fail"),
            "{e}"
        );
        let e = refused("min = -0.5");
        assert!(
            e.starts_with("b.toml:3:7: budget for `cpu.per_op` has min = -0.5:")
                && e.contains("always hold"),
            "{e}"
        );
        let e = refused("max = 2\nmin = 3");
        assert!(
            e.starts_with("b.toml:4:7: budget for `cpu.per_op` has min = 3: above max = 2"),
            "{e}"
        );
        for r in ["-1", "nan", "inf"] {
            let e = refused(&format!("regression = {r}"));
            assert!(
                e.starts_with("b.toml:3:14: budget for `cpu.per_op` has regression = ")
                    && e.contains("in percent, 0 or more"),
                "{e}"
            );
        }
        // Zero is a limit: no worsening at all, nothing at all, anything at all.
        for ok in ["regression = 0", "max = 0", "min = 0", "min = 1\nmax = 1"] {
            let text = format!("[[budget]]\nmetric = \"cpu.per_op\"\n{ok}\n");
            assert!(parse(&text, "b.toml").is_ok(), "{ok}");
        }
    }

    /// A run whose worker waited 2.9 s for a CPU held by a nice −15 hog.
    fn waited_for_a_hog() -> Run {
        let text = r#"{"format":"switchyard-run","schema_version":1,
          "meta":{"tool_version":"0","command":["demo"],"mode":"spawn","pid":100,
            "follow_children":true,"children":[],"host":"h","kernel":"6.18",
            "start_wall_ns":0,"end_wall_ns":3000000000,"start_mono_ns":0,
            "end_mono_ns":3000000000,"end":{"kind":"duration"},"collector":"ebpf"},
          "missing":[],"counters":[],"syscalls":[],"drops":[],
          "threads":[
            {"tid":101,"tgid":100,"comm":"worker","voluntary":1000,"involuntary":600,
             "oncpu_ns":60000000,"blocked_ns":40000000,"runqueue_ns":2900000000,
             "runqueue_after_wakeup_ns":2900000000,"offcpu":{"buckets":[]}},
            {"tid":102,"tgid":100,"comm":"hog","voluntary":0,"involuntary":600,
             "oncpu_ns":2990000000,"blocked_ns":0,"runqueue_ns":10000000,
             "offcpu":{"buckets":[]}}],
          "runqueue_holders":[{"tgid":100,"tid":101,"cpu":0,"holder_tgid":100,"holder_tid":102,
            "holder_comm":"hog","holder_nice":-15,"count":1000,"ns":2900000000}]}"#;
        Run::from_json(text, "waited.json").unwrap()
    }

    #[test]
    fn a_failed_figure_names_the_findings_behind_it_everywhere() {
        let budgets = parse(
            "[[budget]]\nmetric = \"switches.involuntary\"\nmax = 100\n",
            "b.toml",
        )
        .unwrap();
        let checks = check(&budgets, &[("run.json".into(), waited_for_a_hog())], None);
        let Status::Fail(why) = &checks[0].status else {
            panic!("{checks:?}")
        };
        assert!(
            why.starts_with("1200 above the maximum 100; behind it: "),
            "{why}"
        );
        assert!(
            why.contains("100.0% [runqueue] worker waited 2.90 s") && why.contains("held by hog"),
            "{why}"
        );
        for out in [
            crate::text(&checks),
            crate::markdown(&checks),
            crate::junit(&checks),
        ] {
            assert!(out.contains("held by hog"), "{out}");
        }
        // A figure the findings do not explain keeps its plain reason.
        let budgets = parse("[[budget]]\nmetric = \"duration\"\nmax = 1\n", "b.toml").unwrap();
        let checks = check(&budgets, &[("run.json".into(), waited_for_a_hog())], None);
        assert_eq!(
            checks[0].status,
            Status::Fail("3 s above the maximum 1 s".into())
        );
    }

    /// `waited_for_a_hog` with a span `handle.request` of 200 calls: 198 of 100 µs and two of
    /// 1 ms, each of those 600 µs waiting for a CPU the hog held and 300 µs blocked in I/O;
    /// three typical calls kept, 95 µs of each on a CPU.
    fn with_a_slow_span() -> Run {
        use switchyard_model::{SpanAnatomy, SpanCpuWait, SpanInstance, SpanRow, SpanWait};
        let slow = |start_ns| SpanInstance {
            tgid: 100,
            tid: 101,
            start_ns,
            duration_ns: 1_000_000,
            oncpu_ns: 100_000,
            blocked_ns: 300_000,
            runqueue_ns: 600_000,
            slow: true,
            blocked: vec![SpanWait {
                ns: 300_000,
                count: 1,
                state: "D".into(),
                ..Default::default()
            }],
            cpu: vec![SpanCpuWait {
                ns: 600_000,
                tgid: 100,
                tid: 102,
                comm: "hog".into(),
            }],
            ..Default::default()
        };
        let typical = |start_ns| SpanInstance {
            tgid: 100,
            tid: 101,
            start_ns,
            duration_ns: 100_000,
            oncpu_ns: 95_000,
            runqueue_ns: 5_000,
            ..Default::default()
        };
        let mut run = waited_for_a_hog();
        run.locks.spans.push(SpanRow {
            label: "handle.request".into(),
            symbol: "handle_request".into(),
            anatomy: Some(SpanAnatomy {
                count: 200,
                total_ns: 198 * 100_000 + 2 * 1_000_000,
                hist: vec![(100_000, 198), (1_000_000, 2)],
                instances: vec![
                    slow(1_000_000),
                    slow(2_000_000),
                    typical(3_000_000),
                    typical(4_000_000),
                    typical(5_000_000),
                ],
                ..Default::default()
            }),
            ..Default::default()
        });
        run
    }

    #[test]
    fn a_failed_span_percentile_names_its_tails_causes() {
        let budgets = parse(
            "[[budget]]\nmetric = \"span.handle_request.p99\"\nmax = 500\n\n\
             [[budget]]\nmetric = \"span.handle_request.p50\"\nmax = 50\n\n\
             [[budget]]\nmetric = \"span.handle_request.max\"\nmax = 2000\n",
            "b.toml",
        )
        .unwrap();
        let checks = check(&budgets, &[("run.json".into(), with_a_slow_span())], None);
        let verdicts: Vec<(Option<f64>, &Status)> =
            checks.iter().map(|c| (c.value, &c.status)).collect();
        let slowest = "the slowest 1% of handle.request (P99 1.0 ms, against P50 100.0 µs) spent";
        let estimate = "(an estimate: removing one wait can move time to another)";
        assert_eq!(
            verdicts,
            [
                // The P99: the slow group's causes, by the excess each explains.
                (
                    Some(1000.0),
                    &Status::Fail(format!(
                        "1000 µs above the maximum 500 µs; behind it: \
                         [runqueue] {slowest} 60.0% of their time waiting for a CPU held by hog (a \
                         thread of the target) (the typical ones: 0.0%); it explains 66.7% of \
                         their excess over the typical ones. Without it, P99 would be about \
                         400.0 µs {estimate}; \
                         [io] {slowest} 30.0% of their time in block I/O (the typical ones: \
                         0.0%); it explains 33.3% of their excess over the typical ones. \
                         Without it, P99 would be about 700.0 µs {estimate}"
                    ))
                ),
                // The P50: the typical group's, by time.
                (
                    Some(100.0),
                    &Status::Fail(
                        "100 µs above the maximum 50 µs; behind it: \
                         [oncpu] the typical instances of handle.request spent 95.0% of their \
                         time running; \
                         [runqueue] the typical instances of handle.request spent 5.0% of their time \
                         waiting for a CPU"
                            .into()
                    )
                ),
                (Some(1000.0), &Status::Pass),
            ]
        );
        assert!(crate::text(&checks).contains(
            "— 1000 µs above the maximum 500 µs; behind it: [runqueue] the slowest 1% of handle.request"
        ));
        // A span with no calls measured one by one has no percentiles, and says why.
        let mut run = with_a_slow_span();
        run.locks.spans[0].anatomy = None;
        let checks = check(&budgets[..1], &[("run.json".into(), run)], None);
        assert_eq!(
            checks[0].status,
            Status::Fail(
                "the run has no `span.handle_request.p99` (span percentiles need calls of the \
                 span that returned in the recording: record --uprobe-span LABEL=SYMBOL; runs \
                 recorded before spans were measured one by one have none)"
                    .into()
            )
        );
        // Against a baseline, a regression names the same causes.
        let mut base = with_a_slow_span();
        base.locks.spans[0].anatomy.as_mut().unwrap().hist[1].0 = 800_000;
        let budgets = parse(
            "[[budget]]\nmetric = \"span.handle_request.p99_9\"\nregression = 10\n",
            "b.toml",
        )
        .unwrap();
        let checks = check(
            &budgets,
            &[("run.json".into(), with_a_slow_span())],
            Some(&base),
        );
        let Status::Fail(why) = &checks[0].status else {
            panic!("{checks:?}")
        };
        assert!(
            why.starts_with(&format!(
                "1000 µs is 25.0% worse than the baseline 800 µs (allowed 10%); behind it: [runqueue] {slowest} 60.0%"
            )),
            "{why}"
        );
    }

    #[test]
    fn the_targets_names_are_escaped_in_every_output() {
        let mut run = waited_for_a_hog();
        run.threads[0].comm = "\x1b]0;pwned\x07\r\nFAIL forged".into();
        run.threads[1].comm = "hog\u{202e}".into();
        run.runqueue_holders[0].holder_comm = run.threads[1].comm.clone();
        let budgets = parse(
            "[[budget]]\nmetric = \"switches.involuntary\"\nmax = 100\n",
            "b.toml",
        )
        .unwrap();
        let checks = check(&budgets, &[("run.json".into(), run)], None);
        let Status::Fail(why) = &checks[0].status else {
            panic!("{checks:?}")
        };
        // The verdict keeps the names; each output escapes them its own way.
        assert!(why.contains("\x1b]0;pwned"), "{why}");
        for out in [
            crate::text(&checks),
            crate::markdown(&checks),
            crate::junit(&checks),
        ] {
            assert!(
                !out.chars()
                    .any(|c| c != '\n' && switchyard_model::term::is_unsafe(c)),
                "{out:?}"
            );
            assert!(
                out.contains(r"\x1b]0;pwned\x07\r\nFAIL forged waited"),
                "{out}"
            );
            assert!(out.contains(r"held by hog\u{202e}"), "{out}");
        }
        // A header, the check and the count: no forged line.
        assert_eq!(crate::text(&checks).lines().count(), 3);
        // The heading, a blank line, the table's head and rule, the check.
        assert_eq!(crate::markdown(&checks).lines().count(), 5);
    }

    #[test]
    fn absent_figures_say_what_produces_them() {
        assert!(why_absent("gc.pause_max").contains("--go-gc"));
        assert!(why_absent("span.acquire.time").contains("--uprobe-span"));
        assert!(why_absent("switches.total.per_op").contains("--workload-result"));
        assert!(why_absent("latency.p99").contains("--workload-result"));
    }
}
