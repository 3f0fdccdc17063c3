//! How every bench here measures: each configuration runs once per repeat, in an order rotated
//! by one each repeat (none always runs first or always follows the same one), and each figure
//! is a median over the repeats. A ratio compares a configuration with its anchor (untraced, or
//! a floor) repeat by repeat: each repeat's figure over the anchor's figure of the same repeat,
//! then the median of those ratios and their min–max, so that a host that is slower in one
//! repeat than in another moves both sides of that repeat's ratio alike. One table printer
//! writes every bench's tables, as markdown.

use std::fmt::Write as _;

use switchyard_model::{
    metrics::{Spread, spread},
    units::significant,
};

use crate::{fail::Failure, interrupt::Interrupts};

/// Where the kernel's BPF run-time statistics are switched on.
const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// A warning when the kernel's BPF run-time statistics are on, given that file's text: they
/// time every run of every BPF program (two clock reads each), which inflates every traced
/// figure and shrinks the ratios between them.
pub fn bpf_stats_warning(enabled: Option<&str>) -> Option<String> {
    (enabled?.trim() != "0").then(|| {
        format!(
            "warning: {BPF_STATS} is on: the kernel times every BPF program run, so every \
             traced figure here is inflated; `sysctl kernel.bpf_stats_enabled=0` first"
        )
    })
}

/// Prints [`bpf_stats_warning`] for this host, if any (to stdout, with the tables).
pub fn warn_of_bpf_stats() {
    let text = std::fs::read_to_string(BPF_STATS).ok();
    if let Some(w) = bpf_stats_warning(text.as_deref()) {
        println!("{w}\n");
    }
}

/// The order the configurations run in during repeat `repeat` (from 0): rotated by one each
/// repeat.
pub fn order(configurations: usize, repeat: usize) -> Vec<usize> {
    (0..configurations)
        .map(|i| (repeat + i) % configurations)
        .collect()
}

/// What an interleaved series of runs measured: per configuration, one sample per repeat that
/// ran it, in repeat order.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples<S> {
    pub rows: Vec<Vec<S>>,
    /// Ended early by Ctrl-C (or SIGTERM).
    pub interrupted: bool,
}

impl<S> Samples<S> {
    /// How many repeats every configuration completed: the rows' shortest length.
    pub fn complete(&self) -> usize {
        self.rows.iter().map(Vec::len).min().unwrap_or(0)
    }
}

/// Runs each of `configurations` once per repeat, `repeats` times, in the rotated [`order`],
/// through `run(configuration index, repeat, configuration)`. Stops at the first failure
/// (returned) or, keeping what was measured, once `interrupts` is raised.
pub fn interleave<C, S>(
    configurations: &[C],
    repeats: u32,
    interrupts: &Interrupts,
    mut run: impl FnMut(usize, usize, &C) -> Result<S, Failure>,
) -> Result<Samples<S>, Failure> {
    let mut rows: Vec<Vec<S>> = configurations.iter().map(|_| Vec::new()).collect();
    for r in 0..repeats as usize {
        for i in order(configurations.len(), r) {
            let measured = run(i, r, &configurations[i]);
            if interrupts.raised() {
                return Ok(Samples {
                    rows,
                    interrupted: true,
                });
            }
            rows[i].push(measured?);
        }
    }
    Ok(Samples {
        rows,
        interrupted: interrupts.raised(),
    })
}

/// Each repeat's `value` over the same repeat's `anchor`; pairs whose anchor is not positive are
/// left out.
pub fn ratios(values: &[f64], anchors: &[f64]) -> Vec<f64> {
    values
        .iter()
        .zip(anchors)
        .filter(|(_, a)| **a > 0.0)
        .map(|(v, a)| v / a)
        .collect()
}

/// Each repeat's added cost over the same repeat's `base` (`value - base`), over the anchor's
/// added cost in that repeat (`anchor - base`): what the configuration adds for each unit its
/// anchor adds. Repeats where the anchor added nothing (or less than nothing) are left out.
pub fn added_ratios(values: &[f64], anchors: &[f64], bases: &[f64]) -> Vec<f64> {
    values
        .iter()
        .zip(anchors)
        .zip(bases)
        .filter(|((_, a), b)| **a - **b > 0.0)
        .map(|((v, a), b)| (v - b) / (a - b))
        .collect()
}

/// The median of each repeat's ratio and their min–max (`None`: no repeat had one).
pub fn ratio_spread(ratios: &[f64]) -> Option<Spread> {
    spread(ratios)
}

/// A throughput bench's row, over the repeats every row completed: its throughput and each
/// repeat's throughput over the first (untraced) row's in the same repeat.
pub struct AgainstFirst<'a, S> {
    pub label: &'a str,
    /// Its samples of the repeats every row completed.
    pub samples: &'a [S],
    pub throughput: Spread,
    pub of_first: Option<Spread>,
}

/// The rows of `rows` (the first is the anchor) as [`AgainstFirst`], and how many repeats
/// every row completed; rows with no throughput are left out.
pub fn against_first<'a, S>(
    rows: &'a [(String, Vec<S>)],
    throughput: impl Fn(&S) -> f64,
) -> (usize, Vec<AgainstFirst<'a, S>>) {
    let repeats = rows.iter().map(|(_, s)| s.len()).min().unwrap_or(0);
    let Some((_, first)) = rows.first() else {
        return (repeats, Vec::new());
    };
    let first: Vec<f64> = first[..repeats].iter().map(&throughput).collect();
    let out = rows
        .iter()
        .filter_map(|(label, samples)| {
            let samples = &samples[..repeats];
            let values: Vec<f64> = samples.iter().map(&throughput).collect();
            Some(AgainstFirst {
                label,
                samples,
                throughput: spread(&values)?,
                of_first: ratio_spread(&ratios(&values, &first)),
            })
        })
        .collect();
    (repeats, out)
}

/// A ratio's cell: "0.775 (0.750–0.800)", the median and the min–max over the repeats; the
/// median alone when there was one repeat; "–" when there was none.
pub fn ratio_cell(ratio: Option<Spread>) -> String {
    match ratio {
        None => "–".into(),
        Some(s) if s.n == 1 => significant(s.median),
        Some(s) => format!(
            "{} ({}–{})",
            significant(s.median),
            significant(s.min),
            significant(s.max)
        ),
    }
}

/// A markdown table: a header and rows of cells, printed as `| a | b |` lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: AsRef<str>>(head: &[S]) -> Table {
        Table {
            head: head.iter().map(|h| h.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// A row that did not run: its label, what it needed, and empty cells to the width.
    pub fn missing_row(&mut self, label: &str, why: &str) {
        let mut cells = vec![label.to_string(), format!("(needs {why})")];
        cells.resize(self.head.len(), String::new());
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "| {} |\n|{}\n",
            self.head.join(" | "),
            "---|".repeat(self.head.len())
        );
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_statistics_left_on_are_warned_of() {
        assert_eq!(bpf_stats_warning(Some("0\n")), None);
        assert_eq!(bpf_stats_warning(None), None);
        let w = bpf_stats_warning(Some("1\n")).unwrap();
        assert!(w.contains("bpf_stats_enabled=0"), "{w}");
    }

    #[test]
    fn every_configuration_leads_a_repeat_in_turn() {
        assert_eq!(order(4, 0), [0, 1, 2, 3]);
        assert_eq!(order(4, 1), [1, 2, 3, 0]);
        assert_eq!(order(4, 5), [1, 2, 3, 0]);
        assert_eq!(order(0, 3), Vec::<usize>::new());
    }

    #[test]
    fn interleaving_runs_in_the_rotated_order_and_keeps_repeat_order_per_row() {
        let mut seen = Vec::new();
        let samples = interleave(&["a", "b", "c"], 2, &Interrupts::none(), |i, r, c| {
            seen.push(format!("{c}{r}"));
            Ok((i, r))
        })
        .unwrap();
        assert_eq!(seen, ["a0", "b0", "c0", "b1", "c1", "a1"]);
        assert_eq!(samples.rows[0], [(0, 0), (0, 1)]);
        assert_eq!(samples.complete(), 2);
        assert!(!samples.interrupted);
    }

    #[test]
    fn a_failure_ends_the_series() {
        let mut runs = 0;
        let e = interleave(&[1, 2], 3, &Interrupts::none(), |_, r, c| {
            runs += 1;
            if r == 1 && *c == 1 {
                Err(Failure::new("no"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!(e.message, "no");
        // Repeat 0: 1, 2; repeat 1: 2, then 1 fails.
        assert_eq!(runs, 4);
    }

    #[test]
    fn ratios_pair_each_repeat_with_its_own_anchor() {
        // The ratio of the medians (270/350 = 0.771) is not what is reported.
        let r = ratios(&[300.0, 240.0], &[400.0, 300.0]);
        assert_eq!(r, [0.75, 0.8]);
        let s = ratio_spread(&r).unwrap();
        assert_eq!((s.median, s.min, s.max), (0.775, 0.75, 0.8));
        assert_eq!(ratio_cell(Some(s)), "0.775 (0.750–0.800)");
        assert_eq!(ratio_cell(ratio_spread(&[0.5])), "0.500");
        assert_eq!(ratio_cell(None), "–");
        assert_eq!(ratios(&[1.0, 2.0], &[0.0, 4.0]), [0.5]);
    }

    #[test]
    fn added_ratios_divide_added_cost_by_the_anchors_added_cost() {
        // Base 100 and 120; anchor adds 100 and 80; the row adds 50 and 60.
        let r = added_ratios(&[150.0, 180.0], &[200.0, 200.0], &[100.0, 120.0]);
        assert_eq!(r, [0.5, 0.75]);
        // An anchor that added nothing gives no ratio.
        assert!(added_ratios(&[150.0], &[100.0], &[100.0]).is_empty());
    }

    #[test]
    fn the_table_is_markdown() {
        let mut t = Table::new(&["condition", "throughput"]);
        t.row(vec!["untraced".into(), "1,000 ops/s".into()]);
        assert_eq!(
            t.render(),
            "| condition | throughput |\n|---|---|\n| untraced | 1,000 ops/s |\n"
        );
    }
}
