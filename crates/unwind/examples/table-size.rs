//! How big an object's unwind table is and how long it takes to build, as the recorder would
//! build it: `cargo run --release -p switchyard-unwind --example table-size -- FILE...`
use std::{path::Path, process::ExitCode, time::Instant};

use switchyard_unwind::Table;

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: table-size FILE...");
        return ExitCode::from(2);
    }
    println!(
        "{:>10} {:>10} {:>10} {:>10}  {:<11} file",
        "file MB", "rows", "table KiB", "build ms", "source"
    );
    let mut status = ExitCode::SUCCESS;
    for p in paths {
        let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        let started = Instant::now();
        match Table::from_path(Path::new(&p)) {
            Ok(t) => println!(
                "{:>10.1} {:>10} {:>10} {:>10.1}  {:<11} {p}",
                size as f64 / 1e6,
                t.rows.len(),
                t.bytes() / 1024,
                started.elapsed().as_secs_f64() * 1000.0,
                format!("{:?}", t.source),
            ),
            Err(e) => {
                eprintln!("error: {e}");
                status = ExitCode::from(2);
            }
        }
    }
    status
}
