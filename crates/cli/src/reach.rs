//! The newcomer's path for a new figure (docs/design.md, "A new figure, start to end"): a
//! figure defined in `metrics::FIGURES` and computed in `extract` reaches every presenter with
//! no edit of theirs. For every figure the crates' recorded test runs have: the page's table of
//! figures lists it, `compare` sets it in the area its definition declares, a budget on it is
//! checked against its value, `gate --list` names its pattern, and a headline figure leads the
//! summary's per-operation line.

use std::{collections::BTreeSet, path::Path};

use switchyard_compare::Area;
use switchyard_gate::Budget;
use switchyard_model::{Run, metrics};

fn runs() -> Vec<(String, Run)> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/data");
    [
        "basic.json",
        "timeline.json",
        "cfi.json",
        "spans/slow-requests.json",
    ]
    .iter()
    .map(|name| {
        let mut run = Run::load(&data.join(name)).expect(name);
        // Per-operation figures need an operation count.
        run.operations = Some(1000);
        (name.to_string(), run)
    })
    .collect()
}

#[test]
fn every_figure_reaches_the_page_compare_gate_and_summary() {
    let mut seen = BTreeSet::new();
    for (label, run) in runs() {
        let figures = metrics::extract(&run);
        let page = switchyard_report::html(&run).expect("page");
        let compared = switchyard_compare::compare(
            "a",
            std::slice::from_ref(&run),
            "b",
            std::slice::from_ref(&run),
        );
        let per_op = switchyard_report::sentences::per_operation(&figures).unwrap_or_default();
        for (name, metric) in &figures {
            let (figure, _) = metrics::definition(name).expect("one definition");
            seen.insert(figure.pattern);
            assert!(
                page.contains(&format!("<code>{name}</code>")),
                "{label}: the page's figures lack {name}"
            );
            let row = compared.rows.iter().find(|r| &r.name == name);
            assert!(
                row.is_some_and(|r| r.area == figure.area && r.area != Area::Other),
                "{label}: compare files {name} under {:?}, its definition under {:?}",
                row.map(|r| r.area),
                figure.area
            );
            let budget = Budget {
                workload: None,
                build: None,
                metric: name.clone(),
                max: Some(f64::MAX),
                min: None,
                regression: None,
                line: 1,
            };
            let checks = switchyard_gate::check(&[budget], &[(label.clone(), run.clone())], None);
            assert_eq!(
                checks.first().and_then(|c| c.value),
                Some(metric.value),
                "{label}: a budget on {name} is not checked against its value"
            );
            assert!(metrics::NAMES.contains(&figure.pattern));
            if figure.headline && name.ends_with(".per_op") {
                assert!(
                    per_op.contains(figure.label),
                    "{label}: the summary's per-operation line lacks {name}: {per_op}"
                );
            }
        }
    }
    eprintln!(
        "{} of {} figures reached every presenter",
        seen.len(),
        metrics::FIGURES.len()
    );
    // The runs carry most figures; those they lack (a Go GC, a heap profile, spans) have the
    // same path, and crates/model/tests/figures.rs holds their names to their definitions.
    assert!(seen.len() * 3 >= metrics::FIGURES.len() * 2, "{seen:?}");
}
