//! The benches' tables from fixed figures, against the tables in tests/data/results
//! (`SWITCHYARD_BLESS=1` rewrites them): bench-servers' per-server table (redis SET, first
//! repeats as docs/overhead.md's run measured them) and bench-overhead's per-syscall and
//! per-switch tables with the floor rows (medians as in docs/overhead.md, spread over three
//! repeats). No privileges and nothing timed.

use std::path::PathBuf;

use switchyard_workloads::{
    per_event::{self, Knobs, Section},
    servers::{self, Sample},
};

fn golden() -> switchyard_golden::Golden {
    switchyard_golden::Golden::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/results"),
        "cargo test -p switchyard-workloads --test bench",
    )
}

fn s(throughput: f64) -> Sample {
    Sample {
        throughput,
        counted: None,
    }
}

#[test]
fn servers_table() {
    let rows = vec![
        (
            "untraced".to_string(),
            vec![s(53_561.0), s(48_200.0), s(55_010.0)],
        ),
        (
            "switchyard record --pid (defaults)".to_string(),
            vec![s(36_050.0), s(22_400.0), s(42_350.0)],
        ),
        (
            "switchyard record --pid --no-stacks".to_string(),
            vec![s(33_881.0), s(23_230.0), s(49_840.0)],
        ),
        (
            "bpftrace: count syscalls and switches".to_string(),
            vec![
                Sample {
                    throughput: 39_301.0,
                    counted: Some((88_254.0, 5_397.0)),
                },
                Sample {
                    throughput: 28_400.0,
                    counted: Some((80_100.0, 5_002.0)),
                },
                Sample {
                    throughput: 42_080.0,
                    counted: Some((91_000.0, 5_600.0)),
                },
            ],
        ),
    ];
    let text = format!(
        "{}\n{}\n",
        servers::table("requests/s", &rows),
        servers::counted_line(&rows).unwrap()
    );
    golden().check("servers-table.md", &text);
}

#[test]
fn overhead_tables_with_the_floor() {
    let knobs = Knobs {
        calls: 5_000_000,
        rounds: 200_000,
        repeats: 3,
        iters: 3_000_000_000,
        depth: 24,
        hz: 2999,
        cpu: 1,
        switchyard: "target/release/switchyard".into(),
        demo: "target/release/switchyard-demo".into(),
        python: "/usr/bin/python3.11".into(),
        py_script: "workloads/demo/python/bench.py".into(),
        py_rounds: 100,
        py_iters: 1000,
        span_calls: 5_000,
        span_rates: vec![10_000, 100_000],
        span_dir: "target/release/span-loops".into(),
        go: "/usr/local/go/bin/go".into(),
        sections: Vec::new(),
    };
    // A build that knows every flag and has `switchyard floor`; perf present.
    let help = "--no-stacks --syscalls --syscall-latency --offcpu-period --unwind --freq --ready-fd --no-python-frames";
    let rows = per_event::rows(&knobs, help, true, true);
    let figures = |section: Section| -> Vec<Vec<f64>> {
        match section {
            // untraced, --no-stacks, defaults, the four --syscall-latency rows, bpftrace
            // empty, count, histogram, floor.
            Section::Syscall => vec![
                vec![122.5, 125.0, 119.8],
                vec![344.2, 350.1, 330.0],
                vec![435.3, 440.0, 420.9],
                vec![472.4, 480.0, 466.1],
                vec![283.1, 290.0, 279.5],
                vec![291.0, 295.5, 288.7],
                vec![270.2, 276.0, 268.8],
                vec![327.2, 335.0, 321.1],
                vec![339.2, 341.0, 330.5],
                vec![891.0, 900.2, 880.0],
                vec![260.4, 266.0, 255.0],
            ],
            // untraced, without Python frames, with them.
            Section::PySwitch => vec![
                vec![8200.0, 8300.0, 8250.0],
                vec![10400.0, 10500.0, 10300.0],
                vec![11800.0, 11900.0, 11700.0],
            ],
            Section::PySample => vec![
                vec![1.30e9, 1.31e9, 1.29e9],
                vec![1.33e9, 1.34e9, 1.32e9],
                vec![1.36e9, 1.37e9, 1.35e9],
            ],
            // untraced, four --syscalls none rows, defaults, bpftrace count, stacks, floor, the
            // floor with a clock read, a per-task perf event.
            _ => vec![
                vec![4582.4, 4600.0, 4550.0],
                vec![5299.0, 5320.0, 5260.0],
                vec![6156.2, 6200.0, 6100.0],
                vec![17462.0, 17500.0, 17300.0],
                vec![16040.2, 16100.0, 15990.0],
                vec![8362.6, 8400.0, 8300.0],
                vec![5490.2, 5510.0, 5460.0],
                vec![15608.8, 15700.0, 15500.0],
                vec![4990.0, 5010.0, 4960.0],
                vec![5066.0, 5080.0, 5040.0],
                vec![5210.0, 5240.0, 5190.0],
            ],
        }
    };
    let mut text = String::new();
    for section in [
        Section::Syscall,
        Section::Switch,
        Section::PySwitch,
        Section::PySample,
    ] {
        let section_rows: Vec<&per_event::Row> =
            rows.iter().filter(|r| r.section == section).collect();
        let data = figures(section);
        assert_eq!(section_rows.len(), data.len());
        let pairs: Vec<(&per_event::Row, &[f64])> = section_rows
            .into_iter()
            .zip(data.iter().map(Vec::as_slice))
            .collect();
        text.push_str(&per_event::table(section, knobs.hz, &pairs));
        text.push('\n');
    }
    golden().check("overhead-floor-tables.md", &text);
}
