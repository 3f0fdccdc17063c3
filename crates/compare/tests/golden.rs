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
    let mut a2 = a[0].clone();
    a2.meta.end_mono_ns += 10_000_000;
    let mut b1 = a[0].clone();
    b1.meta.end_mono_ns += 5_000_000;
    let mut b2 = a[0].clone();
    b2.meta.end_mono_ns += 15_000_000;
    let c = switchyard_compare::compare("a", &[a[0].clone(), a2], "b", &[b1, b2]);
    let row = c
        .rows
        .iter()
        .find(|r| r.name == "switches.voluntary.per_s")
        .unwrap();
    assert_eq!(row.verdict, switchyard_compare::Verdict::Noise, "{row:?}");
    assert_eq!(row.a.as_ref().unwrap().n, 2);
}
