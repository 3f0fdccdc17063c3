//! A target with a known allocation pattern, under dhat's heap profiler, for the heap-profile
//! tests: `--ops N` operations of `--allocs K` heap allocations of `--bytes B` bytes each
//! (all freed before the next operation), then a driver result file with N operations.
//!
//! ```text
//! switchyard-demo-heap --ops N --allocs K --bytes B --result FILE [--dhat FILE]
//! ```
//!
//! dhat writes its profile (`--dhat`, default `dhat-heap.json`) when the program ends. The
//! runtime's own allocations (arguments, the result file) come on top of the N × K: a few
//! dozen.

use std::{
    collections::BTreeMap,
    hint::black_box,
    time::{Duration, Instant},
};

use switchyard_harness::{DriverResult, Measured, Recorder, heap};

#[global_allocator]
static ALLOC: heap::Alloc = heap::Alloc;

fn main() {
    let mut ops = 0u64;
    let mut allocs = 1usize;
    let mut bytes = 64usize;
    let mut result = None;
    let mut dhat_file = "dhat-heap.json".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--ops" => ops = value().parse().unwrap_or_else(|_| usage("--ops: a number")),
            "--allocs" => {
                allocs = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--allocs: a number"))
            }
            "--bytes" => {
                bytes = value()
                    .parse()
                    .unwrap_or_else(|_| usage("--bytes: a number"))
            }
            "--result" => result = Some(value()),
            "--dhat" => dhat_file = value(),
            other => usage(&format!("unknown flag {other}")),
        }
    }
    let result = result.unwrap_or_else(|| usage("--result FILE is required"));
    let profiler = heap::profiler(&dhat_file);

    let start = Instant::now();
    let mut recorder = Recorder::new(start, Duration::from_millis(100));
    let mut held: Vec<Box<[u8]>> = Vec::with_capacity(allocs);
    for _ in 0..ops {
        let t = Instant::now();
        operation(&mut held, allocs, bytes);
        let done = Instant::now();
        recorder.record(done - t, done);
    }
    let r = DriverResult::new(
        "heap-demo",
        format!("{allocs}x{bytes}"),
        BTreeMap::new(),
        &recorder,
        0,
        start.elapsed(),
    )
    .expect("building the result");
    r.write(&result).expect("writing the result");
    drop(profiler);
}

/// One operation: `allocs` blocks of `bytes`, held together, then freed.
#[inline(never)]
fn operation(held: &mut Vec<Box<[u8]>>, allocs: usize, bytes: usize) {
    for i in 0..allocs {
        held.push(black_box(vec![i as u8; bytes].into_boxed_slice()));
    }
    black_box(&held);
    held.clear();
}

fn usage(why: &str) -> ! {
    eprintln!("switchyard-demo-heap: {why}");
    eprintln!(
        "usage: switchyard-demo-heap --ops N --allocs K --bytes B --result FILE [--dhat FILE]"
    );
    std::process::exit(2);
}
