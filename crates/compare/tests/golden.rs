//! Golden tests of the comparison: the terminal table, the differential folded stacks and the
//! page's structure, from two handwritten runs. `SWITCHYARD_BLESS=1` rewrites the expectations.

use std::path::PathBuf;

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

#[test]
fn table_diff_and_page_structure() {
    let (a, b) = runs();
    let c = switchyard_compare::compare("before", &a, "after", &b);
    golden("table.txt", &switchyard_compare::render_text(&c, false));
    golden("table-all.txt", &switchyard_compare::render_text(&c, true));
    for (kind, text) in switchyard_compare::diff_folded(&a, &b).unwrap() {
        golden(&format!("{kind}.diff.folded"), &text);
    }
    // The page's structure: headings, sections and table rows, without the graphs' bodies.
    let page = switchyard_compare::html(&c, &a, &b, false).unwrap();
    let structure: String = page
        .lines()
        .filter(|l| {
            l.starts_with("<h")
                || l.starts_with("<section")
                || l.starts_with("<tr")
                || l.starts_with("<p class=\"empty")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    golden("page-structure.txt", &structure);
    assert!(page.contains("<iframe id=\"diff-oncpu-graph\""));
}

#[test]
fn repeats_inside_the_spread_are_noise() {
    let (a, _) = runs();
    // Blocked time 3% apart within each side, 2% apart between them: inside the spread.
    let scaled = |f: f64| {
        let mut r = a[0].clone();
        for t in &mut r.threads {
            t.blocked_ns = (t.blocked_ns as f64 * f) as u64;
        }
        r
    };
    let c = switchyard_compare::compare(
        "a",
        &[scaled(1.0), scaled(1.03)],
        "b",
        &[scaled(1.02), scaled(1.05)],
    );
    let row = c.rows.iter().find(|r| r.name == "offcpu.blocked").unwrap();
    assert!(row.delta_pct.unwrap() > 1.0, "{row:?}");
    assert_eq!(row.verdict, switchyard_compare::Verdict::Noise, "{row:?}");
    assert_eq!(row.a.as_ref().unwrap().n, 2);
    // Apart, the same change is one.
    let c = switchyard_compare::compare("a", &[scaled(1.0)], "b", &[scaled(1.05)]);
    let row = c.rows.iter().find(|r| r.name == "offcpu.blocked").unwrap();
    assert_eq!(row.verdict, switchyard_compare::Verdict::Worse, "{row:?}");
}

/// A total or a rate per second gets no verdict when the figure exists per operation: the
/// builds did different amounts of work. The per-operation figure carries the verdict.
#[test]
fn totals_get_no_verdict_when_a_per_operation_figure_exists() {
    let (a, b) = runs();
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
        assert_eq!(r.verdict, switchyard_compare::Verdict::Neutral, "{r:?}");
    }
    for per_op in [
        "switches.total.per_op",
        "syscalls.total.per_op",
        "cpu.per_op",
    ] {
        let r = get(per_op);
        assert!(!r.total, "{r:?}");
        assert_eq!(r.verdict, switchyard_compare::Verdict::Better, "{r:?}");
    }
    // task-clock is a time.
    assert_eq!(get("perf.task-clock").unit.suffix(), "ms");
    assert!(get("throughput").verdict == switchyard_compare::Verdict::Better);
    assert_eq!(
        switchyard_compare::headline(&c),
        "after: +10% throughput, \u{2212}9% CPU/op, \u{2212}72% switches/op, \u{2212}55% syscalls/op"
    );
}

/// A driver offering a fixed rate (open loop) sets the throughput: a difference there is the
/// drain time, so it gets no verdict and stays out of the headline; the costs still do.
#[test]
fn an_offered_rate_gets_no_throughput_verdict() {
    let (mut a, mut b) = runs();
    for (run, per_s) in a.iter_mut().chain(b.iter_mut()).zip([100.0, 110.0]) {
        let w = run.workload.get_or_insert_with(Default::default);
        w.operations = run.operations.unwrap_or(0);
        w.throughput_per_s = per_s;
        w.parameters.insert("rate".into(), "1".into());
    }
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert!(r.delta_pct.unwrap() > 1.0, "{r:?}");
    assert_eq!(r.verdict, switchyard_compare::Verdict::Neutral, "{r:?}");
    assert!(
        switchyard_compare::headline(&c).starts_with("after: \u{2212}9% CPU/op"),
        "{}",
        switchyard_compare::headline(&c)
    );
    // Closed loop on one side: throughput is a result again.
    b[0].workload
        .as_mut()
        .unwrap()
        .parameters
        .insert("rate".into(), "0".into());
    let c = switchyard_compare::compare("before", &a, "after", &b);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert_eq!(r.verdict, switchyard_compare::Verdict::Better, "{r:?}");
}

/// A change under 1% is noise even with one run per side (4,499 against 4,500 requests/s).
#[test]
fn a_change_under_one_percent_is_noise() {
    let (a, _) = runs();
    let mut b = a[0].clone();
    b.operations = b.operations.map(|o| o - 1);
    let c = switchyard_compare::compare("a", &a, "b", &[b]);
    let r = c.rows.iter().find(|r| r.name == "throughput").unwrap();
    assert!(r.delta_pct.unwrap() < 0.0, "{r:?}");
    assert_eq!(r.verdict, switchyard_compare::Verdict::Noise, "{r:?}");
    assert_eq!(
        switchyard_compare::headline(&c),
        "b: no change beyond the noise"
    );
}

/// The terminal table fits 100 columns, and whole counts print without decimals.
#[test]
fn the_terminal_table_fits_100_columns() {
    let (a, b) = runs();
    let c = switchyard_compare::compare("before", &a, "after", &b);
    for all in [false, true] {
        let text = switchyard_compare::render_text(&c, all);
        for line in text.lines() {
            assert!(
                line.chars().count() <= 100,
                "{} columns: {line}",
                line.chars().count()
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
