//! The terminal summary of a run.
//!
//! Names the target chose (its threads', its functions', its command line, the paths it maps)
//! are [escaped](escape) where they are written, a table's cells each on its own, so that none
//! acts on the terminal or forges a line; the findings escape their own sentences.

use std::fmt::Write as _;

use switchyard_model::{
    Collector, FrameKind, Run, SyscallRow, metrics,
    term::escape,
    units::{bytes, command_line, counted, kib_as_mib, ns, percent, rate, thousands},
};
use switchyard_report::sentences::{
    Figures, OffCpu, futex_waits, go_gc, heap_per_operation, kernel_lock_waits, offcpu_sampling,
    per_operation, span_calls, stack_quality, unwind_tables,
};
use switchyard_symbolize::JVM_INTERPRETER;

fn syscall_table(out: &mut String, title: &str, rows: &[&SyscallRow]) {
    let _ = writeln!(
        out,
        "  {title:<22} {:>12} {:>8} {:>10} {:>10} {:>10}",
        "count", "errors", "total", "avg", "max"
    );
    for s in rows {
        let avg = s.total_ns.checked_div(s.count).unwrap_or(0);
        let _ = writeln!(
            out,
            "  {:<22} {:>12} {:>8} {:>10} {:>10} {:>10}",
            escape(&s.name),
            thousands(s.count),
            thousands(s.errors),
            s.or_untimed(ns(s.total_ns)),
            s.or_untimed(ns(avg)),
            s.or_untimed(ns(s.max_ns))
        );
    }
}

/// The terminal summary of `run`, its tables `top` rows long.
pub fn render(run: &Run, top: usize) -> String {
    let mut out = String::new();
    let m = &run.meta;
    let secs = m.duration_ns() as f64 / 1e9;
    let figures = metrics::extract(run);
    header(&mut out, run);
    let findings = switchyard_findings::explain(run);
    if m.collector == Collector::Ebpf {
        out.push_str(&findings.render(5));
    }
    if m.collector == Collector::Degraded {
        let _ = writeln!(out, "degraded mode: no eBPF; figures missing:");
        for x in &run.missing {
            let _ = writeln!(out, "  - {} ({})", escape(&x.figure), escape(&x.reason));
        }
    }

    if m.collector == Collector::Ebpf {
        syscalls(&mut out, run, top, secs);
    }

    // What recording cost the target through its own probes, before any figure it bends.
    for lines in [run.probe_cost_lines(), run.program_time_lines()] {
        if !lines.is_empty() {
            out.push('\n');
            for line in &lines {
                let _ = writeln!(out, "{}", escape(line));
            }
        }
    }

    scheduling(&mut out, run, secs);
    if let Some(perf) = perf_counters(run) {
        let _ = writeln!(out, "perf: {perf}");
    }
    workload(&mut out, run, &figures);
    if m.collector == Collector::Ebpf {
        locks_and_spans(&mut out, run);
    }
    if let Some(o) = run
        .otel_spans
        .as_ref()
        .filter(|o| !o.spans.is_empty() || o.refused + o.unreadable + o.table_full > 0)
    {
        let _ = writeln!(out, "{}", otel_spans_line(o, run.profiles.stats.oncpu_hz));
    }
    if let Some(kb) = run.max_rss_kb {
        let _ = writeln!(out, "peak RSS: {}", kib_as_mib(kb));
    }
    if let Some(h) = &run.heap {
        let _ = writeln!(out, "heap (dhat): {}", heap_line(run, h, &figures));
    }
    if let Some(t) = &run.timeline {
        let _ = writeln!(out, "timeline: {}", timeline_line(t));
    }
    if let Some(g) = &run.gc {
        let _ = writeln!(out, "go gc: {}", go_gc(g));
    }
    let p = &run.profiles;
    if p.stats.oncpu_hz > 0 || !p.offcpu.stacks.is_empty() {
        stacks(&mut out, run);
    }
    for d in &run.drops {
        let _ = writeln!(out, "warning: {} {}", thousands(d.count), escape(&d.reason));
    }
    out
}

/// The summary's first lines: what ran and for how long, how it ended, the process context
/// the target published, what was redacted and the children followed.
fn header(out: &mut String, run: &Run) {
    let m = &run.meta;
    let ended = m.end.describe();
    // Each word escaped, then quoted as a shell would need it.
    let command: Vec<String> = m.command.iter().map(|a| escape(a).into()).collect();
    let _ = writeln!(
        out,
        "switchyard: {} (pid {}) for {} — {ended}",
        command_line(&command),
        m.pid,
        ns(m.duration_ns())
    );
    if !m.process.published.is_empty() {
        let attrs: Vec<String> = m
            .process
            .published
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(
            out,
            "process context (OpenTelemetry, published by the target): {}; the run's resource takes them",
            attrs.join(", ")
        );
    }
    if let Some(e) = &m.process.published_error {
        let _ = writeln!(
            out,
            "process context: the target publishes one, but it could not be read: {e}"
        );
    }
    if let Some(r) = m.redaction.note() {
        let _ = writeln!(out, "redaction: {r}");
    }
    if !m.children.is_empty() {
        let _ = writeln!(out, "followed child processes: {:?}", m.children);
    }
}

/// The system calls: their totals, the `top` by count and by time, and the errors they
/// returned.
fn syscalls(out: &mut String, run: &Run, top: usize, secs: f64) {
    let t = run.totals();
    let (total, errors, time) = (t.syscalls, t.syscall_errors, t.syscall_ns);
    let inside = if run.syscalls_timed() {
        format!("{} inside syscalls", ns(time))
    } else {
        "not timed".into()
    };
    let _ = writeln!(
        out,
        "\nsyscalls: {} total ({}/s), {} failed, {inside}",
        thousands(total),
        rate(total, secs),
        thousands(errors),
    );
    let mut by_count: Vec<&SyscallRow> = run.syscalls.iter().collect();
    by_count.sort_by(|a, b| b.count.cmp(&a.count).then(a.nr.cmp(&b.nr)));
    by_count.truncate(top);
    if let Some(timing) = run.syscall_timing() {
        let _ = writeln!(out, "  {timing}");
    }
    syscall_table(out, "top by count", &by_count);
    let mut by_time: Vec<&SyscallRow> = run.syscalls.iter().collect();
    by_time.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.nr.cmp(&b.nr)));
    by_time.truncate(top);
    syscall_table(out, "top by time", &by_time);
    let failing: Vec<String> = run
        .syscalls
        .iter()
        .filter(|s| s.errors > 0)
        .flat_map(|s| {
            s.errnos.iter().map(move |e| {
                let (call, errno) = (escape(&s.name), escape(&e.name));
                format!("{call} {errno}×{}", thousands(e.count))
            })
        })
        .take(top)
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "  errors: {}", failing.join(", "));
    }
}

/// The context switches, and where the threads' time went: off CPU (with eBPF), or on CPU and
/// waiting for one (degraded).
fn scheduling(out: &mut String, run: &Run, secs: f64) {
    let m = &run.meta;
    let vol = run.voluntary();
    let invol = run.involuntary();
    let _ = writeln!(
        out,
        "\ncontext switches: {} voluntary ({}/s), {} involuntary ({}/s), {} threads",
        thousands(vol),
        rate(vol, secs),
        thousands(invol),
        rate(invol, secs),
        run.threads.len()
    );
    let t = run.totals();
    let (on, runq) = (t.oncpu_ns, t.runqueue_ns);
    match (m.collector, t.offcpu_share()) {
        (Collector::Ebpf, Some(share)) => {
            let off = OffCpu::of(run, share, switchyard_findings::idle_offcpu_ns(run));
            let _ = writeln!(out, "off-CPU: {}", off.sentence());
            if m.unreported_switches > 0 {
                let _ = writeln!(
                    out,
                    "  {} switches the kernel did not report were timed from the nearest \
                     reported one",
                    thousands(m.unreported_switches)
                );
            }
        }
        (Collector::Degraded, _) => {
            let _ = writeln!(
                out,
                "on CPU {}, waiting for a CPU {} (blocked time needs eBPF)",
                ns(on),
                ns(runq)
            );
        }
        _ => {}
    }
}

/// The perf counters read, each by its value or why it has none; `None` when none were.
fn perf_counters(run: &Run) -> Option<String> {
    if run.counters.is_empty() {
        return None;
    }
    let parts: Vec<String> = run
        .counters
        .iter()
        .map(|c| match (c.value, escape(&c.name)) {
            (Some(v), name) if name == "task-clock" => format!("{name} {}", ns(v)),
            (Some(v), name) => format!("{name} {}", thousands(v)),
            (None, name) => format!(
                "{name} {}",
                escape(c.note.as_deref().unwrap_or("not supported"))
            ),
        })
        .collect();
    Some(parts.join(", "))
}

/// The workload's own report (operations, throughput, latency) and the figures per
/// operation.
fn workload(out: &mut String, run: &Run, figures: &Figures) {
    if let Some(w) = &run.workload {
        let _ = writeln!(
            out,
            "workload {} ({}): {} operations, {}/s; latency P50 {}, P99 {}, P99.99 {}, max {}",
            escape(&w.name),
            escape(&w.build),
            thousands(w.operations),
            thousands(w.throughput_per_s.round() as u64),
            ns(w.p50_ns),
            ns(w.p99_ns),
            ns(w.p99_99_ns),
            ns(w.max_ns)
        );
    }
    if let Some(per_op) = per_operation(figures) {
        let _ = writeln!(out, "per operation: {per_op}");
    }
}

/// The lock waits (futex words, the heaviest three; kernel lock contention) and the spans
/// measured, each with its tail.
fn locks_and_spans(out: &mut String, run: &Run) {
    let l = &run.locks;
    let _ = writeln!(out, "lock waits: {}", futex_waits(&l.futex));
    for f in l.futex_top.iter().take(3) {
        let _ = writeln!(
            out,
            "  futex {}{} (pid {}): {}, {}",
            escape(&f.uaddr),
            f.symbol
                .as_deref()
                .map_or(String::new(), |s| format!(" {}", escape(s))),
            f.tgid,
            counted(f.count, "wait"),
            ns(f.total_ns)
        );
    }
    if let Some(c) = &l.contention {
        let _ = writeln!(out, "kernel lock contention: {}", kernel_lock_waits(c));
    }
    for s in &l.spans {
        let name = if s.label.is_empty() {
            &s.symbol
        } else {
            &s.label
        };
        let _ = writeln!(out, "span {}: {}", escape(name), span_calls(&s.stats));
        if let Some(a) = s.anatomy.as_ref().filter(|a| a.count > 0) {
            let _ = writeln!(out, "  {}", span_tail_line(a));
        }
    }
}

/// The heap's allocations as dhat counted them, per operation when known, and its peak.
fn heap_line(run: &Run, h: &switchyard_model::Heap, figures: &Figures) -> String {
    // dhat counts an attached target's whole life, from before the recording.
    let life = (run.meta.mode == switchyard_model::TargetMode::Pid)
        .then_some("over the target's life, from before the recording");
    let per_op = match (heap_per_operation(figures), life) {
        (Some(p), Some(life)) => format!(" ({life}; {p})"),
        (Some(p), None) => format!(" ({p})"),
        (None, Some(life)) => format!(" ({life})"),
        (None, None) => String::new(),
    };
    format!(
        "{} allocations, {}{per_op}; peak {} in {} blocks",
        thousands(h.allocations),
        bytes(h.bytes),
        bytes(h.peak_bytes),
        thousands(h.peak_blocks)
    )
}

/// The timeline's events, of how many threads, and how many were lost.
fn timeline_line(t: &switchyard_model::Timeline) -> String {
    let lost = if t.lost == 0 {
        "none lost".to_string()
    } else {
        format!(
            "{} lost (ring buffer full); raise --timeline-buffer",
            thousands(t.lost)
        )
    };
    format!(
        "{} events of {} threads, {lost}",
        thousands(t.events()),
        t.threads.len(),
    )
}

/// The stacks walked, and how well: their counts, what the probes and the walk cost, their
/// quality and the unwind tables built.
fn stacks(out: &mut String, run: &Run) {
    let p = &run.profiles;
    let _ = writeln!(
        out,
        "stacks: {} on-CPU samples ({} Hz), off-CPU {} in {} stacks, wakeups {} in {} stacks, {} sampled syscall stacks; {} unknown frames",
        thousands(p.oncpu.total()),
        p.stats.oncpu_hz,
        ns(p.offcpu.total()),
        p.offcpu.stacks.len(),
        ns(p.wakeup.total()),
        p.wakeup.stacks.len(),
        p.syscalls.stacks.len(),
        thousands(p.stats.unknown_frames)
    );
    if let Some(line) = probe_share(p) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(line) = uprobe_cost(run) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(line) = offcpu_sampling(&p.stats) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(q) = stack_quality(&p.stats) {
        let _ = writeln!(out, "{}", escape(&q));
    }
    if let Some(hint) = jvm_frame_pointers(run) {
        let _ = writeln!(out, "{hint}");
    }
    if let Some(t) = &p.stats.tables {
        let _ = writeln!(out, "unwind tables: {}", unwind_tables(t));
        // A failure names the object, a path of the target's.
        for f in &t.failures {
            let _ = writeln!(out, "warning: unwind table not built: {}", escape(f));
        }
    }
}

/// For a Java target run without `-XX:+PreserveFramePointer`: compiled Java code keeps no
/// frame pointers, so a walk from it skips its caller or stops there; when that is a fair share
/// of the on-CPU samples (5% or more), the flag to pass.
fn jvm_frame_pointers(run: &Run) -> Option<String> {
    let p = &run.profiles;
    let command = &run.meta.command;
    let java = command
        .first()
        .is_some_and(|c| std::path::Path::new(c).file_name() == Some("java".as_ref()))
        || p.binaries.iter().any(|b| b.module == "libjvm.so");
    let total = p.oncpu.total();
    if !java || total == 0 || command.iter().any(|a| a == "-XX:+PreserveFramePointer") {
        return None;
    }
    // Samples through JIT code (the interpreter keeps frame pointers) or an unnamed frame.
    let broken: u64 = p
        .oncpu
        .stacks
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .filter_map(|&i| p.frames.get(i as usize))
                .any(|f| {
                    (f.kind == FrameKind::Jit && f.name != JVM_INTERPRETER)
                        || (f.name == "[unknown]" && f.module != "kernel")
                })
        })
        .map(|s| s.value)
        .sum();
    (broken * 20 >= total).then(|| {
        format!(
            "hint: {} of the Java on-CPU samples ran JIT-compiled code, whose callers a stack \
             walk skips or loses without frame pointers: run the JVM with \
             -XX:+PreserveFramePointer",
            percent(broken as f64 / total as f64)
        )
    })
}

/// The on-CPU samples with a frame that `under` picks.
fn samples_under(
    p: &switchyard_model::Profiles,
    under: impl Fn(&switchyard_model::Frame) -> bool,
) -> u64 {
    p.oncpu
        .stacks
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .any(|&i| p.frames.get(i as usize).is_some_and(&under))
        })
        .map(|s| s.value)
        .sum()
}

/// The share of the target's on-CPU samples taken inside switchyard's own BPF programs: what
/// the probes cost the target, as the profile sees it.
fn probe_share(p: &switchyard_model::Profiles) -> Option<String> {
    let total = p.oncpu.total();
    if p.stats.oncpu_hz == 0 || total == 0 {
        return None;
    }
    let in_probes = samples_under(p, |f| f.module == switchyard_symbolize::BPF_MODULE);
    Some(format!(
        "probes: {} of the target's on-CPU samples ran switchyard's own BPF programs \
         (bpf_prog_<tag>_<name> frames)",
        percent(in_probes as f64 / total as f64)
    ))
}

/// The OpenTelemetry spans of the target's thread context: how many, their time off CPU
/// (exact), on CPU (exact where the span did not change between two switches; else told by
/// samples), and what reading the records found.
fn otel_spans_line(o: &switchyard_model::OtelSpans, hz: u64) -> String {
    let sum = |f: fn(&switchyard_model::OtelSpan) -> u64| o.spans.iter().map(f).sum::<u64>();
    let samples = sum(|s| s.samples);
    let sampled = match 1_000_000_000u64.checked_div(hz) {
        Some(period) if samples > 0 => {
            format!(" ({} samples, about {})", samples, ns(samples * period))
        }
        _ => format!(" ({samples} samples)"),
    };
    format!(
        "OpenTelemetry spans (thread context, {}): {} spans seen at switches and samples; off CPU, exact: blocked {}, waiting for a CPU {}; on CPU: {} exact, {} where the span changed while it ran{sampled}\n  records: {} read, {} detached or being written, {} refused (lying), {} unreadable, {} spans over the table",
        o.source,
        o.spans.len(),
        ns(sum(|s| s.blocked_ns)),
        ns(sum(|s| s.runqueue_ns)),
        ns(sum(|s| s.oncpu_ns)),
        ns(sum(|s| s.changed_ns)),
        o.read,
        o.not_valid,
        o.refused,
        o.unreadable,
        o.table_full
    )
}

/// What the uprobes (spans, the Go runtime's) cost the target: its on-CPU samples in their
/// traps, as a share and as time of its CPU, and per span call (an entry and a return, with
/// whatever other probes the calls brought: a Go span's scheduler probes).
fn uprobe_cost(run: &Run) -> Option<String> {
    let p = &run.profiles;
    let total = p.oncpu.total();
    if p.stats.oncpu_hz == 0 || total == 0 || (run.locks.spans.is_empty() && run.gc.is_none()) {
        return None;
    }
    // A sample under the kernel's uprobe machinery (the breakpoint's exception, a
    // single-step, the handler it defers to, the return trampoline) is time the target spent
    // in a probe, its BPF programs included.
    let trapped = samples_under(p, |f| switchyard_runtimes::is_probe_frame(&f.name));
    // Under 20 samples the share is a guess (a binomial count's error is its square root).
    if trapped < 20 {
        return Some(format!(
            "uprobes: {} of the target's {} on-CPU samples were in uprobe traps: too few to measure their cost (record longer, or at a higher --freq)",
            thousands(trapped),
            thousands(total)
        ));
    }
    let share = trapped as f64 / total as f64;
    let targets: std::collections::BTreeSet<u32> = p.oncpu.stacks.iter().map(|s| s.tgid).collect();
    let oncpu: u64 = run
        .threads
        .iter()
        .filter(|t| targets.contains(&t.tgid))
        .map(|t| t.oncpu_ns)
        .sum();
    let cost = share * oncpu as f64;
    let mut line = format!(
        "uprobes: {} of the target's on-CPU samples were in uprobe traps ({} of {}), about {} of its {} on CPU",
        percent(share),
        thousands(trapped),
        thousands(total),
        ns(cost as u64),
        ns(oncpu)
    );
    let calls: u64 = run.locks.spans.iter().map(|s| s.stats.count).sum();
    if calls > 0 {
        let go = run.locks.spans.iter().any(|s| {
            s.anatomy
                .as_ref()
                .is_some_and(|a| a.instances.iter().any(|i| i.go))
        });
        line += &format!(
            "; over {} span calls, about {} each{}",
            thousands(calls),
            ns((cost / calls as f64) as u64),
            if go {
                " (with the Go scheduler's probes, which trap on every goroutine's switch, and the GC's)"
            } else {
                ""
            }
        );
    }
    Some(line)
}

/// A span's percentiles and what was kept of its tail, in a line.
fn span_tail_line(a: &switchyard_model::SpanAnatomy) -> String {
    let at = |q: f64| a.at_quantile(q);
    let slow = a.instances.iter().filter(|i| i.slow).count();
    let typical = a.instances.len() - slow;
    let mut line = format!(
        "P50 {}, P99 {}, P99.9 {}; {slow} slow instances kept whole, {typical} typical ones sampled (`switchyard explain` says why the slowest were slow)",
        ns(at(0.5)),
        ns(at(0.99)),
        ns(at(0.999))
    );
    let open = a.open_at_start + a.open_at_stop + a.never_returned + a.missed;
    if open > 0 {
        line += &format!("; {open} open at the bounds, not counted");
    }
    if a.dropped > 0 {
        line += &format!("; {} slow instances dropped", a.dropped);
    }
    line
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use switchyard_golden::Golden;
    use switchyard_model::{Run, term::is_unsafe};

    use super::render;

    mod tame {
        include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/tame.rs"));
    }
    use tame::tame;

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name)
    }

    #[test]
    fn the_targets_names_are_escaped_and_forge_no_line() {
        let path = data("hostile.json");
        let run = Run::load(&path).unwrap_or_else(|e| panic!("{e:#}"));
        let text = render(&run, 10);
        Golden::new(
            data("results"),
            "cargo test -p switchyard --bin switchyard summary",
        )
        .check("hostile.summary.txt", &text);
        assert!(
            !text.chars().any(|c| c != '\n' && is_unsafe(c)),
            "a control character reached the summary: {text:?}"
        );
        // The same run with plain names prints as many lines: no name forged one.
        let mut plain: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        tame(&mut plain);
        let plain = Run::from_json(&plain.to_string(), "plain").unwrap();
        assert_eq!(
            text.lines().count(),
            render(&plain, 10).lines().count(),
            "{text}"
        );
    }
}
