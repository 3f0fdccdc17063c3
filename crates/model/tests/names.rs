//! Run files written before the waiting-for-a-CPU family took one name (`runqueue`) read as
//! if written with it: `woken_wait_ns`, `sched_delay` and `cpu_holders` are serde aliases.

use std::path::Path;

use switchyard_model::Run;

#[test]
fn a_run_file_with_the_old_names_reads_as_the_new() {
    // The report's fixture keeps the old names on purpose.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/data/basic.json");
    let text = std::fs::read_to_string(&path).expect("the fixture");
    assert!(text.contains("\"woken_wait_ns\": 30000000") && text.contains("\"cpu_holders\""));
    let run = Run::from_json(&text, "basic.json").expect("it reads");
    let first = &run.threads[0];
    assert_eq!(first.runqueue_after_wakeup_ns, 30_000_000);
    assert!(first.runqueue_waits.buckets.iter().sum::<u64>() > 0);
    assert!(!run.runqueue_holders.is_empty());
    // Written again, it carries the new names only.
    let written = serde_json::to_string(&run).unwrap();
    for old in ["woken_wait_ns", "sched_delay", "cpu_holders"] {
        assert!(!written.contains(old), "{old} written");
    }
    assert!(written.contains("\"runqueue_after_wakeup_ns\":30000000"));
}
