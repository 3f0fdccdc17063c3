//! `just check-stories`: each story whose runs are committed (as `run.slim.json`) has its table
//! and chart recomputed from them, and they must be the committed `table.md` and `chart.svg`,
//! and the table must stand in the story's README as it is. A figure changed by hand, or runs
//! replaced without redrawing, fails here. No privileges.

use std::{fs, path::PathBuf};

use switchyard_workloads::story;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_gogc_experiment_is_what_its_committed_runs_say() {
    let root = repo().join(story::GOGC_ROOT);
    let groups = story::load(&root, story::gogc().builds).expect("the committed runs");
    assert_eq!(
        groups.len(),
        3,
        "one group of runs per GOGC value under {}",
        root.display()
    );
    assert!(
        groups.iter().all(|g| !g.runs.is_empty()),
        "a GOGC value without runs"
    );
    let table = story::gogc_table(&groups);
    let committed = fs::read_to_string(root.join("table.md")).expect("table.md");
    assert_eq!(
        table, committed,
        "table.md is not what the committed runs give; redraw it (`just story-gogc` records \
         anew)"
    );
    let readme = fs::read_to_string(repo().join("reports/read-state-cache/README.md")).unwrap();
    for row in table.lines() {
        assert!(
            readme.contains(row),
            "the story's README lacks the table row\n{row}"
        );
    }
    let chart = story::gogc_chart(&groups).expect("drawing the chart");
    let committed = fs::read_to_string(root.join("chart.svg")).expect("chart.svg");
    assert!(
        chart == committed,
        "chart.svg is not what the committed runs draw"
    );
}
