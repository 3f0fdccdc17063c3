//! Every name `metrics::extract` gives the recorded runs under the crates' test data has
//! exactly one definition in `metrics::FIGURES`, and takes its unit from it.

use std::{
    fs,
    path::{Path, PathBuf},
};

use switchyard_model::{GoGc, Run, metrics};

/// The run files among the crates' test data: runs with workload results, spans, heap
/// profiles, perf counters, degraded and hostile ones.
fn recorded_runs() -> Vec<(PathBuf, Run)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&crates)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path().join("tests/data")))
        .filter(|d| d.is_dir())
        .collect();
    let mut runs = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "json")
                && let Ok(run) = Run::load(&path)
            {
                runs.push((path, run));
            }
        }
    }
    runs.sort_by(|a, b| a.0.cmp(&b.0));
    runs
}

/// `run` with the figures no recorded fixture has: a Go GC, and an operation count.
fn richer(run: &Run) -> Run {
    let mut run = run.clone();
    let gc = GoGc {
        cycles: 5,
        pauses: 11,
        mark_assists: 2,
        ..Default::default()
    };
    run.gc.get_or_insert(gc);
    run.operations.get_or_insert(1_000);
    run
}

#[test]
fn every_extracted_figure_has_one_definition() {
    let runs = recorded_runs();
    assert!(runs.len() >= 8, "found only {} run files", runs.len());
    let has = |f: &dyn Fn(&Run) -> bool| runs.iter().any(|(_, r)| f(r));
    assert!(
        has(&|r| r.workload.is_some()),
        "no run with workload results"
    );
    assert!(has(&|r| r.heap.is_some()), "no run with a heap profile");
    assert!(has(&|r| !r.locks.spans.is_empty()), "no run with spans");
    assert!(
        has(&|r| !r.counters.is_empty()),
        "no run with perf counters"
    );
    let mut seen = std::collections::BTreeSet::new();
    for (path, run) in &runs {
        for run in [run.clone(), richer(run)] {
            for (name, metric) in metrics::extract(&run) {
                let defs = metrics::definitions(&name);
                let patterns: Vec<&str> = defs.iter().map(|(f, _)| f.pattern).collect();
                assert_eq!(
                    defs.len(),
                    1,
                    "{}: `{name}` matches {patterns:?}",
                    path.display()
                );
                let (figure, form) = defs[0];
                assert_eq!(metric.unit, figure.unit_of(form), "{name}");
                assert_eq!(metric.better, figure.better, "{name}");
                seen.insert(figure.pattern);
            }
        }
    }
    // The fixtures reach most of the table, so a double definition has names to show up in.
    assert!(seen.len() * 4 >= metrics::FIGURES.len() * 3, "{seen:?}");
}
