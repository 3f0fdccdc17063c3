//! The story tables from run files (tests/data/story, trimmed from recorded runs), against the
//! tables the story READMEs hold (tests/data/results, first written by the Python scripts the
//! tables replace). `SWITCHYARD_BLESS=1` rewrites the expected files.

use std::{fs, path::PathBuf};

use switchyard_workloads::story;

fn data(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path)
}

fn golden() -> switchyard_golden::Golden {
    switchyard_golden::Golden::new(
        data("results"),
        "cargo test -p switchyard-workloads --test story",
    )
}

#[test]
fn broker_table() {
    let groups = story::load(&data("story/spinlock-broker"), story::broker(2).builds).unwrap();
    // Configurations in name order, builds in story order, only those with runs.
    let order: Vec<(&str, &str, usize)> = groups
        .iter()
        .map(|g| (g.config.as_str(), g.build, g.runs.len()))
        .collect();
    assert_eq!(
        order,
        [
            ("high-1024B", "spin", 1),
            ("high-1024B", "mutex", 2),
            ("high-1024B", "abs", 3),
            ("low-2B", "spin", 2),
            ("low-2B", "mutex", 3),
            ("low-2B", "abs", 1),
        ]
    );
    golden().check("broker-table.md", &story::broker_table(&groups));
}

#[test]
fn relay_table() {
    let groups = story::load(&data("story/mmsg-relay"), story::relay().builds).unwrap();
    golden().check("relay-table.md", &story::relay_table(&groups));
}

#[test]
fn a_run_of_another_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("low-2B/spin-1");
    fs::create_dir_all(&run).unwrap();
    let text = fs::read_to_string(data("story/spinlock-broker/low-2B/spin-1/run.json")).unwrap();
    fs::write(
        run.join("run.json"),
        text.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1),
    )
    .unwrap();
    let err = match story::load(dir.path(), story::broker(2).builds) {
        Ok(_) => panic!("a version-99 run was read"),
        Err(e) => e,
    };
    assert!(err.message.contains("schema version 99"), "{}", err.message);
    assert!(err.hint.is_some());
}

#[test]
fn a_missing_story_says_how_to_record_it() {
    let err = match story::load(&data("story/nowhere"), story::relay().builds) {
        Ok(_) => panic!("nothing to read"),
        Err(e) => e,
    };
    assert!(
        err.render().contains("hint: record the story first"),
        "{}",
        err.render()
    );
}
