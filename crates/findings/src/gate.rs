//! The findings behind a figure: what a failed budget names as its cause.

use crate::{Explanation, Finding, Kind};

/// The kinds of finding that make up figure `name` (a `metrics` name).
fn kinds(name: &str) -> &'static [Kind] {
    use Kind::*;
    const WAITS: &[Kind] = &[Lock, Io, Net, Sleep, Fault, Gc, Ipc, Blocked, Idle];
    const SWITCHES: &[Kind] = &[Cpu, Lock, Io, Net, Sleep, Fault, Gc, Ipc, Blocked, Idle];
    const REQUEST: &[Kind] = &[Cpu, Lock, Io, Net, Sleep, Fault, Gc, Ipc, Blocked, Oncpu];
    if name.starts_with("switches.involuntary") || name.starts_with("runqueue") {
        &[Cpu]
    } else if name.starts_with("switches.voluntary") || name.starts_with("offcpu") {
        WAITS
    } else if name.starts_with("switches") {
        SWITCHES
    } else if name.starts_with("futex") || name.starts_with("kernel_locks") {
        &[Lock]
    } else if name.starts_with("cpu.") || name == "perf.task-clock" {
        &[Oncpu]
    } else if name.starts_with("gc.") {
        &[Gc]
    } else if name.starts_with("syscalls.") {
        WAITS
    } else if name.starts_with("latency") || name == "throughput" {
        REQUEST
    } else {
        &[]
    }
}

/// The top `n` findings behind figure `name`, each with its share of those kinds' time:
/// "70% lock waits …". Empty for a figure findings do not explain (memory, heap).
pub fn behind<'a>(name: &str, ex: &'a Explanation, n: usize) -> Vec<(f64, &'a Finding)> {
    let kinds = kinds(name);
    let mut matched: Vec<&Finding> = ex
        .findings
        .iter()
        .filter(|f| kinds.contains(&f.kind))
        .collect();
    // Idle waits only when nothing on the request path makes up the figure: they are rarely
    // what a budget is about.
    if matched.iter().any(|f| f.kind != Kind::Idle) {
        matched.retain(|f| f.kind != Kind::Idle);
    }
    let total: f64 = matched.iter().map(|f| f.seconds).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut out: Vec<(f64, &Finding)> = matched
        .into_iter()
        .map(|f| (f.seconds / total, f))
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    out.truncate(n);
    out
}
