//! Golden tests of the comparison: the terminal table, the differential folded stacks and the
//! page's structure, from two handwritten runs (and three of each, for verdicts).
//! `SWITCHYARD_BLESS=1` rewrites the expectations.

use std::path::PathBuf;

use switchyard_compare::Verdict;
use switchyard_golden::Golden;
use switchyard_model::Run;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[track_caller]
fn golden(name: &str, actual: &str) {
    Golden::new(
        data("results"),
        "cargo test -p switchyard-compare --test golden",
    )
    .check(name, actual);
}

fn runs() -> (Vec<Run>, Vec<Run>) {
    let a = Run::load(&data("a.json")).unwrap();
    let b = Run::load(&data("b.json")).unwrap();
    (vec![a], vec![b])
}

/// Three runs of each side, their operations 1% apart, so that throughput and the figures per
/// operation spread a little (the medians are the single runs' figures).
fn three_runs() -> (Vec<Run>, Vec<Run>) {
    repeated(&[0.99, 1.0, 1.01])
}

/// Five runs of each side, as [`three_runs`]: enough for every verdict.
fn five_runs() -> (Vec<Run>, Vec<Run>) {
    repeated(&[0.98, 0.99, 1.0, 1.01, 1.02])
}

/// A run of each side per factor, its operations scaled by it.
fn repeated(factors: &[f64]) -> (Vec<Run>, Vec<Run>) {
    let (a, b) = runs();
    let three = |run: &Run| -> Vec<Run> {
        factors
            .iter()
            .map(|f| {
                let mut r = run.clone();
                r.operations = r.operations.map(|o| (o as f64 * f).round() as u64);
                r
            })
            .collect()
    };
    (three(&a[0]), three(&b[0]))
}

/// The page's structure: headings, sections, the summary's headline and note, table rows,
/// without the graphs' bodies.
fn page_structure(page: &str) -> String {
    page.lines()
        .filter(|l| {
            l.starts_with("<h")
                || l.starts_with("<section")
                || l.starts_with("<tr")
                || l.starts_with("<p class=\"empty")
                || l.starts_with("<p class=\"headline")
                || l.starts_with("<p class=\"note verdicts")
                || l.starts_with("<li class=\"finding")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn table_diff_and_page_structure() {
    let (a, b) = runs();
    let c = switchyard_compare::compare("before", &a, "after", &b);
    golden("table.txt", &switchyard_compare::render_text(&c, false));
    golden("table-all.txt", &switchyard_compare::render_text(&c, true));
    for (kind, text) in switchyard_compare::diff_folded(&a, &b).unwrap() {
        golden(&format!("{kind}.diff.folded"), &text);
    }
    let page = switchyard_compare::html(&c, &a, &b, false).unwrap();
    golden("page-structure.txt", &page_structure(&page));
    // What changed, as the terminal gives it: the page leads with the same list.
    golden("what-changed.txt", &c.changed.render(5));
    assert!(page.contains("<iframe id=\"diff-oncpu-graph\""));
}

/// Three runs a side: verdicts, each with the runs behind it.
#[test]
fn table_and_page_structure_with_three_and_five_runs_a_side() {
    for (n, (a, b)) in [(3, three_runs()), (5, five_runs())] {
        let c = switchyard_compare::compare("before", &a, "after", &b);
        golden(
            &format!("table-{n}-runs.txt"),
            &switchyard_compare::render_text(&c, false),
        );
        let page = switchyard_compare::html(&c, &a, &b, false).unwrap();
        golden(
            &format!("page-structure-{n}-runs.txt"),
            &page_structure(&page),
        );
    }
}

/// One run a side says nothing of the run-to-run spread: every figure keeps its delta, ranked
/// as before, but gets no verdict, and the table and the page say why and what would give one.
#[test]
fn one_run_a_side_gets_no_verdict() {
    let (a, b) = runs();
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let get = |n: &str| c.rows.iter().find(|r| r.name == n).unwrap();
    let r = get("throughput");
    assert_eq!(r.verdict, Verdict::Withheld, "{r:?}");
    assert!((r.delta_pct.unwrap() - 10.0).abs() < 1e-9, "{r:?}");
    assert_eq!(
        switchyard_compare::verdict_text(r),
        "~ (1 run a side; a verdict needs 3)"
    );
    // Nothing is better, worse, without a difference or even the same.
    for r in &c.rows {
        assert!(
            matches!(r.verdict, Verdict::Withheld | Verdict::Neutral),
            "{r:?}"
        );
    }
    // Totals still get no verdict at all: more runs would not give them one.
    assert_eq!(get("switches.total").verdict, Verdict::Neutral);
    assert_eq!(switchyard_compare::verdict_text(get("switches.total")), "");
    // The headline still lists the changes, largest first within each group, as unjudged.
    assert_eq!(
        switchyard_compare::headline(&c),
        "after: +10% throughput, \u{2212}9% CPU/op, \u{2212}72% switches/op, \
         \u{2212}55% syscalls/op (no verdicts: 1 run a side)"
    );
    let why = "no verdicts: 1 run a side; run `just compare WORKLOAD A B 5` or pass 5 runs a \
               side (`--a` … `--b` …) for verdicts";
    assert_eq!(
        switchyard_compare::no_verdicts(&c, |s| format!("`{s}`")).as_deref(),
        Some(why)
    );
    let text = switchyard_compare::render_text(&c, true);
    assert!(
        text.contains("~ (1 run a side; a verdict needs 3)"),
        "{text}"
    );
    assert!(text.contains("`just compare WORKLOAD A B 5`"), "{text}");
    for row in text.lines().filter(|l| l.starts_with("  ")) {
        for word in ["better", "worse", "no difference", "same"] {
            assert!(!row.contains(word), "{word} in {row}");
        }
    }
    // The page: no row counted better or worse, and the summary says why.
    let page = switchyard_compare::html(&c, &a, &b, true).unwrap();
    assert!(
        page.contains("<td>~ (1 run a side; a verdict needs 3)</td>"),
        "no withheld verdict on the page"
    );
    for class in ["better", "worse", "nodiff", "same"] {
        assert!(!page.contains(&format!("<tr class=\"{class}\"")), "{class}");
    }
    assert!(page.contains(
        "<p class=\"note verdicts\">No verdicts: 1 run a side; run \
         <code>just compare WORKLOAD A B 5</code> or pass 5 runs a side \
         (<code>--a</code> … <code>--b</code> …) for verdicts.</p>"
    ));
}

/// Sides of different sizes say both; runs naming their workload and builds name the command
/// that repeats them.
#[test]
fn uneven_sides_say_both_counts_and_the_command_names_the_builds() {
    let (mut a, mut b) = runs();
    for (run, build) in a.iter_mut().chain(b.iter_mut()).zip(["base", "fast"]) {
        let w = run.workload.get_or_insert_with(Default::default);
        w.name = "demo".into();
        w.build = build.into();
    }
    let b = vec![b[0].clone(), b[0].clone()];
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let r = c.rows.iter().find(|r| r.name == "cpu.per_op").unwrap();
    assert_eq!(r.verdict, Verdict::Withheld, "{r:?}");
    assert_eq!(
        switchyard_compare::verdict_text(r),
        "~ (A 1 run, B 2; a verdict needs 3 a side)"
    );
    assert_eq!(
        switchyard_compare::no_verdicts(&c, |s| format!("`{s}`")).as_deref(),
        Some(
            "no verdicts: A 1 run, B 2; run `just compare demo base fast 5` or pass 5 runs a \
             side (`--a` … `--b` …) for verdicts"
        )
    );
    assert!(
        switchyard_compare::headline(&c).ends_with(" (no verdicts: A 1 run, B 2)"),
        "{}",
        switchyard_compare::headline(&c)
    );
    // One build named on both sides (a run recorded as another build): no command to give.
    for run in &mut a {
        run.workload.as_mut().unwrap().build = "fast".into();
    }
    let c = switchyard_compare::compare("before", &a, "after", &b);
    assert_eq!(c.rerun, "just compare WORKLOAD A B 5");
}

/// Five runs a side: the verdicts are back, each saying its p and the runs behind it, and
/// nothing is withheld.
#[test]
fn five_runs_a_side_get_verdicts() {
    let (a, b) = five_runs();
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert_eq!(r.verdict, Verdict::Better, "{r:?}");
    assert_eq!(switchyard_compare::verdict_text(r), "better (p=0.008 n=5)");
    let r = c.rows.iter().find(|r| r.name == "offcpu.share").unwrap();
    assert_eq!(r.verdict, Verdict::Worse, "{r:?}");
    assert!(c.rows.iter().all(|r| r.verdict != Verdict::Withheld));
    assert_eq!(switchyard_compare::no_verdicts(&c, str::to_string), None);
    assert_eq!(
        switchyard_compare::headline(&c),
        "after: +10% throughput, \u{2212}9% CPU/op, \u{2212}72% switches/op, \u{2212}55% syscalls/op"
    );
    let text = switchyard_compare::render_text(&c, false);
    assert!(text.contains("better (p=0.008 n=5)"), "{text}");
    assert!(!text.contains("~ ("), "{text}");
    let page = switchyard_compare::html(&c, &a, &b, false).unwrap();
    assert!(page.contains("<tr class=\"better\""));
    assert!(page.contains("<td>better (p=0.008 n=5)</td>"));
    assert!(!page.contains("note verdicts"));
    // Five against six: benchstat's n=5+6, and a p of 2/462.
    let mut b6 = b.clone();
    b6.push(b[2].clone());
    let c = switchyard_compare::compare("before", &a, "after", &b6);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert_eq!(
        switchyard_compare::verdict_text(r),
        "better (p=0.004 n=5+6)"
    );
}

/// Three runs a side: every figure is judged, but no rank test of 3 against 3 can give a p
/// under 0.10, so nothing is shown better or worse, the headline lists the changes as
/// unjudged, and the table says why and what would show them. Tail figures stay withheld.
#[test]
fn three_runs_a_side_cannot_show_a_difference() {
    let (a, b) = three_runs();
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert_eq!(r.verdict, Verdict::NoDifference, "{r:?}");
    assert_eq!(
        switchyard_compare::verdict_text(r),
        "no difference shown (p=0.100 n=3)"
    );
    assert!(
        c.rows
            .iter()
            .all(|r| !matches!(r.verdict, Verdict::Better | Verdict::Worse))
    );
    assert_eq!(
        switchyard_compare::headline(&c),
        "after: +10% throughput, \u{2212}9% CPU/op, \u{2212}72% switches/op, \
         \u{2212}55% syscalls/op (no verdicts: 3 runs a side)"
    );
    let why = switchyard_compare::no_verdicts(&c, |s| format!("`{s}`")).unwrap();
    assert!(
        why.starts_with(
            "3 runs a side cannot show a difference: the rank test's p is 0.100 at the least"
        ),
        "{why}"
    );
}

#[test]
fn interleaved_repeats_show_no_difference() {
    let (a, _) = runs();
    // Blocked time 2% apart within each side, the sides' runs interleaved: B's median is 2%
    // higher, yet its runs' ranks do not tell the sides apart.
    let scaled = |f: f64| {
        let mut r = a[0].clone();
        for t in &mut r.threads {
            t.blocked_ns = (t.blocked_ns as f64 * f) as u64;
        }
        r
    };
    let side = |fs: &[f64]| fs.iter().map(|&f| scaled(f)).collect::<Vec<_>>();
    let c = switchyard_compare::compare(
        "a",
        &side(&[1.0, 1.02, 1.04, 1.06, 1.08]),
        "b",
        &side(&[1.01, 1.03, 1.06, 1.07, 1.09]),
    );
    let row = c.rows.iter().find(|r| r.name == "offcpu.blocked").unwrap();
    assert!(row.delta_pct.unwrap() > 1.0, "{row:?}");
    assert_eq!(row.verdict, Verdict::NoDifference, "{row:?}");
    assert!(row.p.unwrap() > 0.5, "{row:?}");
    assert_eq!(row.a.as_ref().unwrap().n, 5);
    // Apart, the same change is one.
    let c = switchyard_compare::compare(
        "a",
        &side(&[1.0, 1.002, 1.004, 1.006, 1.008]),
        "b",
        &side(&[1.05, 1.052, 1.054, 1.056, 1.058]),
    );
    let row = c.rows.iter().find(|r| r.name == "offcpu.blocked").unwrap();
    assert_eq!(row.verdict, Verdict::Worse, "{row:?}");
    assert_eq!(switchyard_compare::verdict_text(row), "worse (p=0.008 n=5)");
}

#[test]
fn totals_get_no_verdict_when_a_per_operation_figure_exists() {
    let (a, b) = five_runs();
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let get = |n: &str| c.rows.iter().find(|r| r.name == n).unwrap();
    for total in [
        "switches.total",
        "switches.total.per_s",
        "syscalls.total",
        "syscalls.total.per_s",
        "cpu.time",
        "cpu.utilisation",
        "perf.task-clock",
    ] {
        let r = get(total);
        assert!(r.total, "{r:?}");
        assert_eq!(r.verdict, Verdict::Neutral, "{r:?}");
        assert_eq!(switchyard_compare::verdict_text(r), "(n=5)");
    }
    for per_op in [
        "switches.total.per_op",
        "syscalls.total.per_op",
        "cpu.per_op",
    ] {
        let r = get(per_op);
        assert!(!r.total, "{r:?}");
        assert_eq!(r.verdict, Verdict::Better, "{r:?}");
    }
    // task-clock is a time.
    assert_eq!(get("perf.task-clock").unit.suffix(), "ms");
    assert!(get("throughput").verdict == Verdict::Better);
    assert_eq!(
        switchyard_compare::headline(&c),
        "after: +10% throughput, \u{2212}9% CPU/op, \u{2212}72% switches/op, \u{2212}55% syscalls/op"
    );
}

/// A driver offering a fixed rate (open loop) sets the throughput: a difference there is the
/// drain time, so it gets no verdict and stays out of the headline; the costs still do. Closed
/// loop, throughput gets a verdict as any figure does: with 3 runs a side.
#[test]
fn an_offered_rate_gets_no_throughput_verdict() {
    let (mut a, mut b) = five_runs();
    let load = |runs: &mut [Run], per_s: f64| {
        for run in runs {
            let w = run.workload.get_or_insert_with(Default::default);
            w.operations = run.operations.unwrap_or(0);
            w.throughput_per_s = per_s;
            w.parameters.insert("rate".into(), "1".into());
        }
    };
    load(&mut a, 100.0);
    load(&mut b, 110.0);
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert!(r.delta_pct.unwrap() > 1.0, "{r:?}");
    assert_eq!(r.verdict, Verdict::Neutral, "{r:?}");
    assert!(
        switchyard_compare::headline(&c).starts_with("after: \u{2212}9% CPU/op"),
        "{}",
        switchyard_compare::headline(&c)
    );
    // One run a side: still no throughput verdict to withhold, and none of the costs'.
    let c = switchyard_compare::compare("before", &a[..1], "after", &b[..1]);
    let get = |n: &str| c.rows.iter().find(|r| r.name == n).unwrap();
    assert_eq!(get("throughput").verdict, Verdict::Neutral);
    assert_eq!(get("cpu.per_op").verdict, Verdict::Withheld);
    // Closed loop on one side: throughput is a result again, judged with 5 runs a side and
    // withheld with fewer than 3.
    for run in &mut b {
        let w = run.workload.as_mut().unwrap();
        w.parameters.insert("rate".into(), "0".into());
    }
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert_eq!(r.verdict, Verdict::Better, "{r:?}");
    let c = switchyard_compare::compare("before", &a[..1], "after", &b[..1]);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert_eq!(r.verdict, Verdict::Withheld, "{r:?}");
    assert_eq!(
        switchyard_compare::verdict_text(r),
        "~ (1 run a side; a verdict needs 3)"
    );
}

/// A change under 1% shows no difference even when every run of one side is below every run
/// of the other (999 against 1,000 operations, five identical runs a side).
#[test]
fn a_change_under_one_percent_shows_no_difference() {
    let (a, _) = runs();
    let mut b = a[0].clone();
    b.operations = b.operations.map(|o| o - 1);
    let (a, b) = (vec![a[0].clone(); 5], vec![b; 5]);
    let c = switchyard_compare::compare("a", &a, "b", &b);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert!(r.delta_pct.unwrap() < 0.0, "{r:?}");
    assert!(r.p.unwrap() < 0.05, "{r:?}");
    assert_eq!(r.verdict, Verdict::NoDifference, "{r:?}");
    assert_eq!(switchyard_compare::headline(&c), "b: no difference shown");
}

#[test]
fn the_terminal_tables_figures_fit_100_columns_but_for_long_names() {
    let (a, b) = runs();
    let (a3, b3) = three_runs();
    let (a5, b5) = five_runs();
    let comparisons = [
        switchyard_compare::compare("before", &a, "after", &b),
        switchyard_compare::compare("before", &a3, "after", &b3),
        switchyard_compare::compare("before", &a5, "after", &b5),
    ];
    for (c, all) in comparisons.iter().flat_map(|c| [(c, false), (c, true)]) {
        let text = switchyard_compare::render_text(c, all);
        let longest = c
            .rows
            .iter()
            .filter(|r| text.contains(&format!("  {} ", r.name)))
            .map(|r| r.name.chars().count())
            .max()
            .unwrap_or(0);
        // A row's verdict follows its figures, past the 100 columns if it must.
        let verdicts: Vec<String> = c
            .rows
            .iter()
            .map(switchyard_compare::verdict_text)
            .collect();
        for line in text.lines() {
            let figures = verdicts
                .iter()
                .filter(|v| !v.is_empty() && line.ends_with(&format!("  {v}")))
                .map(|v| line.chars().count() - v.chars().count() - 2)
                .max()
                .unwrap_or(line.chars().count());
            assert!(
                figures <= 100 + longest.saturating_sub(25),
                "{figures} columns before the verdict: {line}"
            );
        }
        assert!(!text.contains(".00 "), "{text}");
    }
}

/// A stack only A has (B removed it) is drawn in the negated view, A over B, at A's width,
/// and its frame is in that graph; in B over A it has no width.
#[test]
fn a_stack_only_in_a_appears_in_the_negated_view() {
    let (a, _) = runs();
    let mut b = a[0].clone();
    let frames = b.profiles.frames.clone();
    b.profiles.oncpu.stacks.retain(|s| {
        !s.frames
            .iter()
            .any(|&i| frames[i as usize].name.contains("compress"))
    });
    let diffs = switchyard_compare::diff_folded(&a, std::slice::from_ref(&b)).unwrap();
    let get = |name: &str| &diffs.iter().find(|(k, _)| k == name).unwrap().1;
    let counts = |text: &str| -> Vec<(u64, u64)> {
        text.lines()
            .filter(|l| l.contains("compress"))
            .map(|l| {
                let f: Vec<&str> = l.rsplitn(3, ' ').collect();
                (f[1].parse().unwrap(), f[0].parse().unwrap())
            })
            .collect()
    };
    // B over A: `stack a b`, B's width 0.
    assert!(
        counts(get("oncpu")).iter().all(|&(_, b)| b == 0),
        "{}",
        get("oncpu")
    );
    // A over B: `stack b a`, drawn at A's width.
    let negated = counts(get("oncpu.negated"));
    assert!(
        !negated.is_empty() && negated.iter().all(|&(b, a)| b == 0 && a > 0),
        "{negated:?}"
    );
    let c = switchyard_compare::compare("a", &a, "b", std::slice::from_ref(&b));
    let page = switchyard_compare::html(&c, &a, std::slice::from_ref(&b), false).unwrap();
    let negated_graph = page
        .split("id=\"diff-oncpu-negated-graph\"")
        .nth(1)
        .expect("the negated on-CPU graph")
        .split("</iframe>")
        .next()
        .unwrap();
    assert!(
        negated_graph.contains("compress"),
        "no compress frame in the negated graph"
    );
    assert!(page.contains("red: a larger share in B than in A"));
}

/// Diffs merge the threads of one role: eight producers are one root, `producer-*`.
#[test]
fn diffs_merge_threads_by_role() {
    let (a, b) = runs();
    let spread_threads = |run: &switchyard_model::Run| {
        let mut r = run.clone();
        for (i, s) in r.profiles.oncpu.stacks.iter_mut().enumerate() {
            s.comm = format!("producer-{i}");
        }
        r
    };
    let (a, b) = (vec![spread_threads(&a[0])], vec![spread_threads(&b[0])]);
    let diffs = switchyard_compare::diff_folded(&a, &b).unwrap();
    let oncpu = &diffs.iter().find(|(k, _)| k == "oncpu").unwrap().1;
    assert!(
        oncpu.lines().all(|l| l.starts_with("producer-*;")),
        "{oncpu}"
    );
    assert_eq!(switchyard_report::role("producer-12"), "producer-*");
    assert_eq!(switchyard_report::role("main"), "main");
    assert_eq!(switchyard_report::role("1234"), "1234");
    let c = switchyard_compare::compare("a", &a, "b", &b);
    let page = switchyard_compare::html(&c, &a, &b, false).unwrap();
    assert!(
        page.contains("id=\"diff-oncpu-threads-graph\""),
        "no per-thread view"
    );
}

/// Probes whose cost differs between the builds by more than a tenth of the change in CPU per
/// operation are warned of, naming the span: one build's probed function starting with an
/// instruction the kernel single-steps, the other's with one it emulates. Alike, no warning.
#[test]
fn unequal_probe_costs_are_warned_of_by_span() {
    use switchyard_model::{ProbeCost, ProbeCosts, TrapCosts};
    let traps = TrapCosts {
        emulated_ns: 700.0,
        stepped_ns: 9_200.0,
        emulated_with_return_ns: 1_450.0,
        stepped_with_return_ns: 14_170.0,
        ret_ns: None,
        calls: 1000,
    };
    let probed = |runs: &mut [Run], emulated: bool| {
        for run in runs {
            let calls = run.operations.unwrap();
            run.meta.probe_costs = Some(ProbeCosts {
                traps,
                probes: vec![ProbeCost {
                    span: "acquire".into(),
                    symbol: "broker_lock".into(),
                    emulated,
                    shared_return: true,
                    go: false,
                    calls,
                    ns_per_call: Some(traps.per_call(emulated, true)),
                }],
            });
        }
    };
    let (mut a, mut b) = five_runs();
    // A's lock starts with `push %rbp`, B's with an instruction the kernel single-steps.
    probed(&mut a, true);
    probed(&mut b, false);
    let c = switchyard_compare::compare("before", &a, "after", &b);
    // CPU per operation fell 92.7 µs; the probes, one call an operation, differ by 12.7 µs.
    let warning = "the recorder's probes cost the builds differently: span acquire's cost A \
                   1.4 µs and B 14.2 µs an operation, 12.7 µs apart, against a change in CPU \
                   per operation of \u{2212}92.7 µs an operation: up to 14% of that change is \
                   the recorder's, not the builds' (each run's summary gives its probes' costs)";
    assert_eq!(c.probe_warnings, [warning]);
    let text = switchyard_compare::render_text(&c, false);
    assert!(
        text.contains("warning: the recorder's probes cost the builds"),
        "{text}"
    );
    let page = switchyard_compare::html(&c, &a, &b, false).unwrap();
    assert!(
        page.contains("<p class=\"note warning\">Warning: the recorder"),
        "no warning on the page"
    );
    // Both emulated: nothing to warn of.
    probed(&mut b, true);
    let c = switchyard_compare::compare("before", &a, "after", &b);
    assert!(c.probe_warnings.is_empty(), "{:?}", c.probe_warnings);
}
