//! `just check-stories`: each story whose runs are committed (as `run.slim.json`) has its table
//! and chart recomputed from them, and they must be the committed `table.md` and `chart.svg`,
//! and the table must stand in the story's README as it is. A figure changed by hand, or runs
//! replaced without redrawing, fails here. No privileges.

use std::{fs, path::PathBuf};

use switchyard_workloads::{
    fail::Failure,
    story::{self, Group, Story},
};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Recomputes `story`'s table and chart from its committed runs (`configs` groups of them)
/// and checks them against `table.md`, `chart.svg` and the rows of `readme`.
fn check(
    story: &Story,
    configs: usize,
    table: fn(&[Group]) -> String,
    chart: fn(&[Group]) -> Result<String, Failure>,
    readme: &str,
) {
    let groups = check_table(story, configs, table, readme);
    let chart = chart(&groups).expect("drawing the chart");
    let committed =
        fs::read_to_string(repo().join(story.root).join("chart.svg")).expect("chart.svg");
    assert!(
        chart == committed,
        "chart.svg is not what the committed runs draw; {}",
        redraw(story)
    );
}

fn redraw(story: &Story) -> String {
    format!(
        "`switchyard-workload story-… --redraw` under {}",
        story.root
    )
}

/// The table half of [`check`], for a story without a chart; returns the runs' groups.
fn check_table(
    story: &Story,
    configs: usize,
    table: fn(&[Group]) -> String,
    readme: &str,
) -> Vec<Group> {
    let root = repo().join(story.root);
    let groups = story::load(&root, story.builds).expect("the committed runs");
    assert_eq!(
        groups.len(),
        configs,
        "one group of runs per configuration under {}",
        root.display()
    );
    assert!(
        groups.iter().all(|g| !g.runs.is_empty()),
        "a configuration without runs"
    );
    let table = table(&groups);
    let committed = fs::read_to_string(root.join("table.md")).expect("table.md");
    assert_eq!(
        table,
        committed,
        "table.md is not what the committed runs give; {}",
        redraw(story)
    );
    let text = fs::read_to_string(repo().join(readme)).unwrap();
    for row in table.lines() {
        assert!(text.contains(row), "{readme} lacks the table row\n{row}");
    }
    // The lead's every figure, range and verdict, recomputed from the same runs.
    if let Some(lead) = story.lead {
        let lead = lead(&groups);
        assert!(
            lead.lines().count() >= 3,
            "a lead of 3 lines or more:\n{lead}"
        );
        for line in lead.lines() {
            assert!(
                text.contains(&format!("\n{line}\n")),
                "{readme} lacks the lead's line\n{line}"
            );
        }
    }
    groups
}

#[test]
fn the_gogc_experiment_is_what_its_committed_runs_say() {
    check(
        &story::gogc(),
        3,
        story::gogc_table,
        story::gogc_chart,
        "reports/read-state-cache/README.md",
    );
}

#[test]
fn the_forced_gc_run_is_what_its_committed_run_says() {
    check(
        &story::forced_gc(),
        1,
        story::forced_gc_table,
        story::forced_gc_chart,
        "reports/read-state-cache/README.md",
    );
}

#[test]
fn the_cache_size_sweep_is_what_its_committed_runs_say() {
    // Three capacities, two builds each.
    check(
        &story::cache_size(),
        6,
        story::cache_size_table,
        story::cache_size_chart,
        "reports/read-state-cache/README.md",
    );
}

#[test]
fn the_go_rust_table_is_what_its_committed_runs_say() {
    check(
        &story::go_rust(),
        2,
        story::go_rust_table,
        story::go_rust_chart,
        "reports/read-state-cache/README.md",
    );
}

#[test]
fn the_broker_story_is_what_its_committed_runs_say() {
    // Four configurations (contention × message size), three builds each.
    check(
        &story::broker(2),
        12,
        story::broker_table,
        story::broker_chart,
        "reports/spinlock-broker/README.md",
    );
}

#[test]
fn the_relay_story_is_what_its_committed_runs_say() {
    // Four configurations (rooms × speakers), three builds each.
    check(
        &story::relay(),
        12,
        story::relay_table,
        story::relay_chart,
        "reports/mmsg-relay/README.md",
    );
}

#[test]
fn the_broker_sweep_is_what_its_committed_runs_say() {
    // mutex and abs, then the fixed-k lock at four k.
    check(
        &story::broker_sweep(2),
        6,
        story::sweep_table,
        story::sweep_chart,
        "reports/spinlock-broker/README.md",
    );
}

#[test]
fn the_broker_fallback_is_what_its_committed_run_says() {
    let fallback = story::broker_fallback();
    let root = repo().join(fallback.root);
    let groups = story::load(&root, fallback.builds).expect("the committed run");
    let runs = story::fallback_runs(&root, &groups).expect("its record.out");
    assert_eq!(runs.len(), 1, "one run under {}", root.display());
    let table = story::fallback_table(&runs);
    let committed = fs::read_to_string(root.join("table.md")).expect("table.md");
    assert_eq!(
        table, committed,
        "table.md is not what the committed run gives; `switchyard-workload story-broker-fallback --redraw`"
    );
    let readme = "reports/spinlock-broker/README.md";
    let text = fs::read_to_string(repo().join(readme)).unwrap();
    for row in table.lines().filter(|l| l.starts_with("| ")) {
        assert!(text.contains(row), "{readme} lacks the table row\n{row}");
    }
    let chart = story::fallback_chart(&runs).expect("drawing the chart");
    let committed = fs::read_to_string(root.join("chart.svg")).expect("chart.svg");
    assert!(
        chart == committed,
        "chart.svg is not what the committed run draws"
    );
}

#[test]
fn the_asset_story_at_one_request_a_second_is_what_its_committed_runs_say() {
    // One configuration, three builds; the concurrency story's runs, in a folder of their
    // own below, are not read as one.
    check_table(
        &story::assets(),
        3,
        story::asset_table,
        "reports/asset-server/README.md",
    );
}

#[test]
fn the_asset_concurrency_story_is_what_its_committed_runs_say() {
    // Three levels of concurrency, three builds each.
    check(
        &story::assets_concurrency(),
        9,
        story::asset_concurrency_table,
        story::asset_concurrency_chart,
        "reports/asset-server/README.md",
    );
}
