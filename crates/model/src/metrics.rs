//! Named figures of a run, the vocabulary shared by comparisons and budgets.
//!
//! Every figure has a stable dotted name (`switches.voluntary.per_op`), a unit and the
//! direction that counts as better. Per-second figures divide by the recording's duration;
//! per-operation figures exist only when the run carries an operation count.

use std::collections::BTreeMap;

use crate::{Run, units::Unit};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// Informational (duration, operation count).
    Neither,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub value: f64,
    pub unit: Unit,
    pub better: Better,
}

const MIB: f64 = 1024.0 * 1024.0;

fn put(
    m: &mut BTreeMap<String, Metric>,
    name: impl Into<String>,
    value: f64,
    unit: Unit,
    better: Better,
) {
    m.insert(
        name.into(),
        Metric {
            value,
            unit,
            better,
        },
    );
}

/// A count with its per-second and (when known) per-operation rates.
fn rates(
    m: &mut BTreeMap<String, Metric>,
    name: &str,
    count: f64,
    secs: f64,
    ops: Option<f64>,
    better: Better,
) {
    put(m, name, count, Unit::Count, better);
    if secs > 0.0 {
        put(
            m,
            format!("{name}.per_s"),
            count / secs,
            Unit::PerSecond,
            better,
        );
    }
    if let Some(ops) = ops.filter(|o| *o > 0.0) {
        put(
            m,
            format!("{name}.per_op"),
            count / ops,
            Unit::PerOp,
            better,
        );
    }
}

/// Every named figure of `run`.
pub fn extract(run: &Run) -> BTreeMap<String, Metric> {
    use Better::*;
    use Unit::*;
    let mut m = BTreeMap::new();
    let secs = run.meta.duration_ns() as f64 / 1e9;
    let ops = run.operations.map(|o| o as f64);
    put(&mut m, "duration", secs, Seconds, Neither);
    if let Some(ops) = ops {
        put(&mut m, "operations", ops, Count, Neither);
        match &run.workload {
            // The driver's own clock covers exactly the load.
            Some(w) => put(&mut m, "throughput", w.throughput_per_s, PerSecond, Higher),
            None if secs > 0.0 => put(&mut m, "throughput", ops / secs, PerSecond, Higher),
            None => {}
        }
    }
    if let Some(w) = &run.workload {
        for (name, v) in [
            ("latency.p50", w.p50_ns),
            ("latency.p90", w.p90_ns),
            ("latency.p99", w.p99_ns),
            ("latency.p99_9", w.p99_9_ns),
            ("latency.p99_99", w.p99_99_ns),
            ("latency.max", w.max_ns),
        ] {
            put(&mut m, name, v as f64 / 1e3, Micros, Lower);
        }
        put(&mut m, "workload.errors", w.errors as f64, Count, Lower);
    }

    if run.meta.collector == crate::Collector::Ebpf {
        rates(
            &mut m,
            "syscalls.total",
            run.syscall_total() as f64,
            secs,
            ops,
            Lower,
        );
        let errors: u64 = run.syscalls.iter().map(|s| s.errors).sum();
        rates(&mut m, "syscalls.errors", errors as f64, secs, ops, Lower);
        let time: u64 = run.syscalls.iter().map(|s| s.total_ns).sum();
        put(&mut m, "syscalls.time", time as f64 / 1e6, Millis, Lower);
        for s in &run.syscalls {
            rates(
                &mut m,
                &format!("syscalls.{}", s.name),
                s.count as f64,
                secs,
                ops,
                Lower,
            );
            if s.count > 0 {
                put(
                    &mut m,
                    format!("syscalls.{}.avg_us", s.name),
                    s.total_ns as f64 / s.count as f64 / 1e3,
                    Micros,
                    Lower,
                );
            }
        }
        let blocked: u64 = run.threads.iter().map(|t| t.blocked_ns).sum();
        let runq: u64 = run.threads.iter().map(|t| t.runqueue_ns).sum();
        put(
            &mut m,
            "offcpu.blocked",
            blocked as f64 / 1e6,
            Millis,
            Lower,
        );
        if let Some(share) = run.offcpu_share() {
            put(&mut m, "offcpu.share", share * 100.0, Percent, Lower);
        }
        put(&mut m, "runqueue.wait", runq as f64 / 1e6, Millis, Lower);
        // Of the wait for a CPU, the part after wakeups: scheduler delay.
        let woken: u64 = run.threads.iter().map(|t| t.woken_wait_ns).sum();
        put(
            &mut m,
            "runqueue.after_wakeup",
            woken as f64 / 1e6,
            Millis,
            Lower,
        );
        if let Some(ops) = ops.filter(|o| *o > 0.0) {
            put(
                &mut m,
                "runqueue.wait.per_op",
                runq as f64 / 1e3 / ops,
                MicrosPerOp,
                Lower,
            );
        }
    }

    let l = &run.locks;
    if run.meta.collector == crate::Collector::Ebpf {
        rates(
            &mut m,
            "futex.waits",
            l.futex.count as f64,
            secs,
            ops,
            Lower,
        );
        put(
            &mut m,
            "futex.wait_time",
            l.futex.total_ns as f64 / 1e6,
            Millis,
            Lower,
        );
        if let Some(ops) = ops.filter(|o| *o > 0.0) {
            put(
                &mut m,
                "futex.wait_time.per_op",
                l.futex.total_ns as f64 / 1e3 / ops,
                MicrosPerOp,
                Lower,
            );
        }
        put(
            &mut m,
            "futex.wait_max",
            l.futex.max_ns as f64 / 1e6,
            Millis,
            Lower,
        );
        if let Some(c) = &l.contention {
            rates(
                &mut m,
                "kernel_locks.contended",
                c.count as f64,
                secs,
                ops,
                Lower,
            );
            put(
                &mut m,
                "kernel_locks.wait_time",
                c.total_ns as f64 / 1e6,
                Millis,
                Lower,
            );
        }
        for s in &l.spans {
            let label = if s.label.is_empty() {
                &s.symbol
            } else {
                &s.label
            };
            let name = format!("span.{label}");
            rates(&mut m, &name, s.stats.count as f64, secs, ops, Neither);
            put(
                &mut m,
                format!("{name}.time"),
                s.stats.total_ns as f64 / 1e6,
                Millis,
                Lower,
            );
            if let Some(ops) = ops.filter(|o| *o > 0.0) {
                put(
                    &mut m,
                    format!("{name}.time.per_op"),
                    s.stats.total_ns as f64 / 1e3 / ops,
                    MicrosPerOp,
                    Lower,
                );
            }
        }
    }

    if let Some(kb) = run.max_rss_kb {
        put(&mut m, "memory.max_rss", kb as f64 / 1024.0, MiB, Lower);
    }
    if let Some(h) = &run.heap {
        rates(
            &mut m,
            "heap.allocs",
            h.allocations as f64,
            secs,
            ops,
            Lower,
        );
        put(&mut m, "heap.bytes", h.bytes as f64 / MIB, MiB, Lower);
        if let Some(ops) = ops.filter(|o| *o > 0.0) {
            put(
                &mut m,
                "heap.bytes.per_op",
                h.bytes as f64 / ops,
                BytesPerOp,
                Lower,
            );
        }
        put(&mut m, "heap.peak", h.peak_bytes as f64 / MIB, MiB, Lower);
    }
    if let Some(g) = &run.gc {
        rates(&mut m, "gc.cycles", g.cycles as f64, secs, ops, Lower);
        put(&mut m, "gc.pauses", g.pauses as f64, Count, Lower);
        put(
            &mut m,
            "gc.pause_total",
            g.pause_total_ns as f64 / 1e6,
            Millis,
            Lower,
        );
        put(
            &mut m,
            "gc.pause_max",
            g.pause_max_ns as f64 / 1e6,
            Millis,
            Lower,
        );
        rates(
            &mut m,
            "gc.mark_assists",
            g.mark_assists as f64,
            secs,
            ops,
            Lower,
        );
    }

    let vol = run.voluntary() as f64;
    let invol = run.involuntary() as f64;
    rates(&mut m, "switches.voluntary", vol, secs, ops, Lower);
    rates(&mut m, "switches.involuntary", invol, secs, ops, Lower);
    rates(&mut m, "switches.total", vol + invol, secs, ops, Lower);

    let oncpu: u64 = run.threads.iter().map(|t| t.oncpu_ns).sum();
    let cpu_ns = run.counter("task-clock").unwrap_or(oncpu) as f64;
    put(&mut m, "cpu.time", cpu_ns / 1e6, Millis, Lower);
    if let Some(ops) = ops.filter(|o| *o > 0.0) {
        put(&mut m, "cpu.per_op", cpu_ns / 1e3 / ops, MicrosPerOp, Lower);
    }
    if secs > 0.0 {
        put(
            &mut m,
            "cpu.utilisation",
            cpu_ns / 1e9 / secs * 100.0,
            Percent,
            Lower,
        );
    }
    for c in &run.counters {
        if let Some(v) = c.value {
            // task-clock counts nanoseconds of CPU: a time, shown and budgeted in ms.
            if c.name == "task-clock" {
                put(&mut m, "perf.task-clock", v as f64 / 1e6, Millis, Lower);
            } else {
                put(&mut m, format!("perf.{}", c.name), v as f64, Count, Lower);
            }
        }
    }
    m
}

/// The figure `name` of `run` (`figures` is `extract(run)`). A syscall the run never made is a
/// figure of 0, not a missing one, when the kernel side saw every syscall; per-operation
/// figures still need an operation count.
pub fn lookup(run: &Run, figures: &BTreeMap<String, Metric>, name: &str) -> Option<Metric> {
    if let Some(m) = figures.get(name) {
        return Some(m.clone());
    }
    let counted = run.meta.collector == crate::Collector::Ebpf;
    let per_op_ok = !name.ends_with(".per_op") || run.operations.is_some_and(|o| o > 0);
    let unit = if name.ends_with(".per_op") {
        Unit::PerOp
    } else if name.ends_with(".per_s") {
        Unit::PerSecond
    } else if name.ends_with(".avg_us") {
        Unit::Micros
    } else {
        Unit::Count
    };
    (counted && per_op_ok && name.starts_with("syscalls.") && is_known(name)).then_some(Metric {
        value: 0.0,
        unit,
        better: Better::Lower,
    })
}

/// Figure names with a fixed spelling; `<…>` parts stand for a syscall name, a span label or a
/// perf counter, and `[.per_s|.per_op]` for the rates of a count.
pub const NAMES: &[&str] = &[
    "duration",
    "operations",
    "throughput",
    "latency.p50",
    "latency.p90",
    "latency.p99",
    "latency.p99_9",
    "latency.p99_99",
    "latency.max",
    "workload.errors",
    "syscalls.total[.per_s|.per_op]",
    "syscalls.errors[.per_s|.per_op]",
    "syscalls.time",
    "syscalls.<name>[.per_s|.per_op]",
    "syscalls.<name>.avg_us",
    "offcpu.blocked",
    "offcpu.share",
    "runqueue.wait",
    "runqueue.wait.per_op",
    "runqueue.after_wakeup",
    "futex.waits[.per_s|.per_op]",
    "futex.wait_time",
    "futex.wait_time.per_op",
    "futex.wait_max",
    "kernel_locks.contended[.per_s|.per_op]",
    "kernel_locks.wait_time",
    "span.<label>[.per_s|.per_op]",
    "span.<label>.time",
    "span.<label>.time.per_op",
    "switches.voluntary[.per_s|.per_op]",
    "switches.involuntary[.per_s|.per_op]",
    "switches.total[.per_s|.per_op]",
    "cpu.time",
    "cpu.per_op",
    "cpu.utilisation",
    "perf.<counter>",
    "memory.max_rss",
    "gc.cycles[.per_s|.per_op]",
    "gc.pauses",
    "gc.pause_total",
    "gc.pause_max",
    "gc.mark_assists[.per_s|.per_op]",
    "heap.allocs[.per_s|.per_op]",
    "heap.bytes",
    "heap.bytes.per_op",
    "heap.peak",
];

/// The unit a budget's number is in, for a [`NAMES`] entry: "µs", "count, /s, /op" for a
/// count with its rates.
pub fn unit_label(pattern: &str) -> String {
    if let Some(base) = pattern.strip_suffix("[.per_s|.per_op]") {
        let unit = if base.ends_with("time") {
            "ms"
        } else {
            "count"
        };
        return format!("{unit}; .per_s: 1/s; .per_op: 1/op");
    }
    let unit = match pattern {
        "duration" => Unit::Seconds,
        "throughput" => Unit::PerSecond,
        "offcpu.share" | "cpu.utilisation" => Unit::Percent,
        "memory.max_rss" | "heap.bytes" | "heap.peak" => Unit::MiB,
        "heap.bytes.per_op" => Unit::BytesPerOp,
        "perf.<counter>" => return "count (task-clock: ms)".into(),
        p if p.starts_with("latency.") || p.ends_with(".avg_us") => Unit::Micros,
        p if p.ends_with("time.per_op") || p == "cpu.per_op" || p == "runqueue.wait.per_op" => {
            Unit::MicrosPerOp
        }
        p if p.ends_with(".per_op") => Unit::PerOp,
        p if p.ends_with(".per_s") => Unit::PerSecond,
        p if p.ends_with("time")
            || p.ends_with("_max")
            || p.ends_with("_total")
            || p.ends_with(".blocked")
            || p.ends_with(".wait")
            || p.ends_with(".after_wakeup") =>
        {
            Unit::Millis
        }
        _ => Unit::Count,
    };
    unit.suffix().to_string()
}

/// Whether `name` is a figure some run can have (for validating budgets).
pub fn is_known(name: &str) -> bool {
    let rates = |rest: &str| matches!(rest, "" | ".per_s" | ".per_op");
    if let Some(rest) = name.strip_prefix("perf.") {
        return crate::COUNTER_NAMES.contains(&rest);
    }
    if let Some(rest) = name.strip_prefix("syscalls.") {
        for fixed in ["total", "errors"] {
            if let Some(r) = rest.strip_prefix(fixed) {
                return rates(r);
            }
        }
        if rest == "time" {
            return true;
        }
        let (sys, r) = rest.split_once('.').map_or((rest, ""), |(a, b)| (a, b));
        let r = if r.is_empty() {
            String::new()
        } else {
            format!(".{r}")
        };
        return crate::syscall_nr(sys).is_some() && (rates(&r) || r == ".avg_us");
    }
    if let Some(rest) = name.strip_prefix("span.") {
        let (label, r) = rest.split_once('.').map_or((rest, ""), |(a, b)| (a, b));
        let r = if r.is_empty() {
            String::new()
        } else {
            format!(".{r}")
        };
        return !label.is_empty() && (rates(&r) || r == ".time" || r == ".time.per_op");
    }
    // Every fixed count listed with its rates: `gc.cycles[.per_s|.per_op]` and the like.
    let families = NAMES
        .iter()
        .filter_map(|n| n.strip_suffix("[.per_s|.per_op]"))
        .filter(|base| !base.contains('<'));
    for base in families {
        if let Some(r) = name.strip_prefix(base)
            && rates(r)
        {
            return true;
        }
    }
    NAMES.contains(&name)
}

/// A figure over repeated runs: its median, range and how many runs had it.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Runs that had the figure.
    pub n: usize,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        })
    }
}

/// The median, min–max and count of `values` (`None` when empty), the one
/// statistic of repeats that comparisons, gates and story tables share.
pub fn spread(values: &[f64]) -> Option<Spread> {
    Spread::of(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_cover_what_extract_produces() {
        let mut run = crate::tests::sample_run();
        run.operations = Some(10);
        run.gc = Some(crate::GoGc {
            cycles: 3,
            pauses: 6,
            pause_total_ns: 600_000,
            pause_max_ns: 200_000,
            mark_assists: 40,
            ..Default::default()
        });
        let names = extract(&run);
        for family in [
            "gc.cycles",
            "gc.mark_assists",
            "switches.total",
            "futex.waits",
        ] {
            for rate in ["", ".per_s", ".per_op"] {
                let name = format!("{family}{rate}");
                assert!(names.contains_key(&name), "{name} is not produced");
            }
        }
        for name in names.keys() {
            assert!(is_known(name), "{name} is produced but not known");
        }
        for bad in [
            "switches.totl",
            "syscalls.nosuchcall",
            "perf.bogus",
            "syscalls.read.per_hour",
            "span.",
        ] {
            assert!(!is_known(bad), "{bad}");
        }
        assert!(is_known("syscalls.sendmmsg.per_op") && is_known("span.acquire.time.per_op"));
        // `gate --list` gives every produced figure the unit it is extracted in.
        for (name, metric) in &names {
            let pattern = NAMES
                .iter()
                .find(|p| {
                    let base = p.strip_suffix("[.per_s|.per_op]").unwrap_or(p);
                    let rest = if base.contains('<') {
                        // `syscalls.<name>…`: match on the prefix and the fixed tail.
                        let (head, tail) = base.split_once('<').unwrap();
                        let tail = tail.split_once('>').unwrap().1;
                        name.strip_prefix(head).and_then(|r| {
                            let after = r.split_once('.').map_or("", |(_, t)| t);
                            let after = if after.is_empty() {
                                String::new()
                            } else {
                                format!(".{after}")
                            };
                            after.strip_prefix(tail).map(str::to_string)
                        })
                    } else {
                        name.strip_prefix(base).map(str::to_string)
                    };
                    match rest.as_deref() {
                        Some("") => true,
                        Some(".per_s" | ".per_op") => p.ends_with("[.per_s|.per_op]"),
                        _ => false,
                    }
                })
                .unwrap_or_else(|| panic!("{name} matches no listed pattern"));
            let label = unit_label(pattern);
            let unit = metric.unit.suffix();
            let rate = [".per_s", ".per_op"].iter().find(|r| name.ends_with(*r));
            let listed = match (pattern.ends_with("[.per_s|.per_op]"), rate) {
                (true, Some(r)) => label.contains(&format!("{r}: {unit}")),
                // perf counters: a count, but task-clock's is a time.
                _ => {
                    label.starts_with(unit) || label.ends_with(&format!("{}: {unit})", &name[5..]))
                }
            };
            assert!(listed, "{name}: extracted in {unit}, listed as {label}");
        }
    }

    #[test]
    fn syscalls_never_made_are_zero() {
        let mut run = crate::tests::sample_run();
        let figures = extract(&run);
        assert_eq!(
            lookup(&run, &figures, "syscalls.sendto").unwrap().value,
            0.0
        );
        assert!(lookup(&run, &figures, "syscalls.sendto.per_op").is_none());
        assert!(lookup(&run, &figures, "syscalls.nosuchcall").is_none());
        run.operations = Some(10);
        let figures = extract(&run);
        let m = lookup(&run, &figures, "syscalls.sendto.per_op").unwrap();
        assert_eq!((m.value, m.unit.suffix()), (0.0, "1/op"));
        run.meta.collector = crate::Collector::Degraded;
        assert!(lookup(&run, &figures, "syscalls.sendto").is_none());
    }

    #[test]
    fn per_op_only_with_operations() {
        let mut run = crate::tests::sample_run();
        let m = extract(&run);
        assert!(m.contains_key("switches.voluntary.per_s"));
        assert!(!m.contains_key("switches.voluntary.per_op"));
        run.operations = Some(10);
        let m = extract(&run);
        assert_eq!(
            m["switches.voluntary.per_op"].value,
            run.voluntary() as f64 / 10.0
        );
        assert_eq!(m["syscalls.getppid"].value, 1000.0);
        assert_eq!(m["syscalls.getppid.per_op"].value, 100.0);
        assert_eq!(m["throughput"].better, Better::Higher);
    }
}
