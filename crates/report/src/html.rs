//! The HTML report: one self-contained file (inline CSS, JS and SVG; nothing fetched) that
//! leads with why the run waited (its findings), then a summary, the slow requests (spans
//! measured one by one, when the run has any), sortable syscall and thread tables, latency
//! histograms, flame graphs and the drops and warnings of the run. The
//! off-CPU and wakeup flame graphs leave idle waits (waiting for work) out, and a checkbox
//! shows the graphs with them.
//!
//! Every string from the target (command line, thread and symbol names, paths) goes through
//! [`Esc`]. Table rows and headings sit on lines of their own, so golden files diff well.

use std::fmt::Write as _;

use switchyard_model::{
    Collector, Counter, Log2Hist, Profiles, Run, SyscallRow, TargetMode, Totals, metrics,
};

use crate::{
    Error, ProfileKind,
    chart::{bucket_floor, bucket_range, log2_chart},
    escape::{Esc, html as esc},
    flame, idle,
    sentences::{
        Figures, OffCpu, command_line, counted, go_gc, heap_per_operation, kernel_lock_waits,
        kib_as_mib, ns, ns_f, percent, rate, span_calls, stack_quality, thousands, unwind_tables,
        utc,
    },
};

/// Latency charts are drawn for this many syscalls, the top ones by total time.
const TOP_HISTOGRAMS: usize = 6;
/// Tables of threads (scheduler delay, CPU holders) show this many rows, the top by time.
const TOP_ROWS: usize = 20;

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("sort.js");

/// The report of a run as one HTML document.
pub fn html(run: &Run) -> Result<String, Error> {
    let mut graphs = Vec::new();
    for kind in ProfileKind::ALL.into_iter().filter(|k| k.present(run)) {
        graphs.push(Graphs::new(run, kind)?);
    }
    let explanation = switchyard_findings::explain(run);
    let figures = metrics::extract(run);

    let m = &run.meta;
    let command = command_line(&m.command);
    // A target with no GC and no driver timeline gets no empty box for them.
    let timeline = run
        .workload
        .as_ref()
        .and_then(|w| crate::timeline::timeline(w, run.gc.as_ref()));
    let gc_title = match (&run.gc, &timeline) {
        (Some(_), _) => Some("GC and timeline"),
        (None, Some(_)) => Some("Timeline"),
        (None, None) => None,
    };
    // A run with spans opens with its slowest requests: the tail is what it was recorded for.
    let slow = if crate::slow::shown(run) {
        "Slow requests"
    } else {
        ""
    };
    let nav = [
        ("slow-requests", slow),
        ("findings", "Why it waited"),
        ("summary", "Summary"),
        ("figures", "Figures"),
        ("syscalls", "Syscalls"),
        ("threads", "Threads"),
        ("latency", "Histograms"),
        ("locks", "Lock waits"),
        ("gc", gc_title.unwrap_or_default()),
        (
            "timeline",
            if run.timeline.is_some() {
                "Thread states"
            } else {
                ""
            },
        ),
        ("flame-oncpu", "On-CPU"),
        ("flame-offcpu", "Off-CPU"),
        ("flame-wakeup", "Wakeups"),
        ("flame-syscalls", "Syscall stacks"),
        ("flame-futex", "Futex waits"),
        ("flame-heap", if run.heap.is_some() { "Heap" } else { "" }),
        ("warnings", "Drops and warnings"),
    ];
    let nav: Vec<(&str, &str)> = nav.into_iter().filter(|(_, t)| !t.is_empty()).collect();
    let mut out = String::with_capacity(64 * 1024);
    crate::slow::section(&mut out, run, &explanation);
    crate::why::section(&mut out, &explanation);
    summary(&mut out, run, &command, &figures);
    figures_section(&mut out, &figures);
    syscalls(&mut out, run);
    threads(&mut out, run);
    histograms(&mut out, run);
    locks(&mut out, run);
    if let Some(title) = gc_title {
        gc_section(&mut out, run, title, timeline.as_deref());
    }
    if let Some(section) = crate::tracks::section(run) {
        out.push_str(&section);
    }
    for g in &graphs {
        flame_section(&mut out, run, g);
    }
    warnings(&mut out, run);
    let footer = format!(
        "switchyard {} · run file schema {}",
        m.tool_version, run.schema_version
    );
    let out = document(
        &format!("switchyard: {command}"),
        "switchyard report",
        &command,
        &nav,
        &out,
        &footer,
    );
    Ok(out)
}

/// Whether the run tells the waits for a CPU after a wakeup apart: every wait for a CPU is in
/// some thread's `runqueue_waits`, which a run file from before the split does not have.
fn delay_recorded(run: &Run) -> bool {
    run.threads.iter().any(|t| t.runqueue_waits.count() > 0)
}

fn secs(run: &Run) -> f64 {
    run.meta.duration_ns() as f64 / 1e9
}

/// A key/value row; `value` is HTML already.
fn kv(out: &mut String, key: &str, value: &str) {
    let _ = writeln!(out, "<tr><th scope=\"row\">{key}</th><td>{value}</td></tr>");
}

/// A right-aligned number cell that sorts by `v`.
fn num(v: impl std::fmt::Display, text: &str) -> String {
    format!("<td class=\"num\" data-v=\"{v}\">{text}</td>")
}

fn not_available(why: &str) -> String {
    format!("<span class=\"na\">{}</span>", Esc(why))
}

fn card(out: &mut String, value: &str, key: &str, sub: &str) {
    let _ = writeln!(
        out,
        "<div class=\"card\"><div class=\"v\">{value}</div><div class=\"k\">{key}</div><div class=\"s\">{sub}</div></div>"
    );
}

/// What recorded the run, as recorded: perf counters only when the run carries them
/// (`record --perf-counters`; always asked for in degraded mode).
fn collector(run: &Run) -> &'static str {
    match (run.meta.collector, run.counters.is_empty()) {
        (Collector::Ebpf, false) => "eBPF and perf counters",
        (Collector::Ebpf, true) => {
            "eBPF; no perf counters (<code>record --perf-counters</code> adds them)"
        }
        (Collector::Degraded, false) => "degraded: /proc and perf software counters, no eBPF",
        (Collector::Degraded, true) => "degraded: /proc only, no eBPF, no perf counters",
    }
}

fn summary(out: &mut String, run: &Run, command: &str, figures: &Figures) {
    let t = run.totals();
    let idle = switchyard_findings::idle_offcpu_ns(run).min(t.blocked_ns);
    out.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n<div class=\"cards\">\n");
    summary_cards(out, run, &t, idle);
    out.push_str("</div>\n<table class=\"kv\">\n");
    recording_facts(out, run, command);
    out.push_str("</table>\n<h3>Totals</h3>\n<table class=\"kv\">\n");
    totals_table(out, run, &t, idle);
    out.push_str("</table>\n");
    if let Some(ops) = run.operations {
        per_operation(out, run, ops, figures);
    }
    if let Some(w) = &run.workload {
        workload(out, w);
    }
    counters(out, run);
    probe_costs(out, run);
    out.push_str("</section>\n");
}

/// The summary's cards: how long, syscalls, switches, and the off-CPU share (`idle` of the
/// blocked time left out).
fn summary_cards(out: &mut String, run: &Run, t: &Totals, idle: u64) {
    let m = &run.meta;
    let secs = secs(run);
    let ebpf = m.collector == Collector::Ebpf;
    let (total, errors) = (t.syscalls, t.syscall_errors);
    let (vol, invol) = (t.voluntary, t.involuntary);
    let (on, blocked, runq) = (t.oncpu_ns, t.blocked_ns, t.runqueue_ns);
    card(
        out,
        &ns(m.duration_ns()),
        "recorded",
        &Esc(&m.end.describe()).to_string(),
    );
    if ebpf {
        card(
            out,
            &thousands(total),
            "syscalls",
            &format!("{}/s · {} failed", rate(total, secs), thousands(errors)),
        );
    } else {
        card(out, "–", "syscalls", "not recorded in degraded mode");
    }
    card(
        out,
        &thousands(vol + invol),
        "context switches",
        &format!(
            "{} voluntary · {} involuntary",
            thousands(vol),
            thousands(invol)
        ),
    );
    // Idle waits (waiting for work) are left out of the headline, as from the flame graphs;
    // the share with them is beside it.
    let off = blocked + runq;
    match (ebpf, run.offcpu_share()) {
        (true, Some(share)) if idle > 0 && on + off > idle => card(
            out,
            &percent(off.saturating_sub(idle) as f64 / (on + off - idle) as f64),
            "off-CPU, idle waits left out",
            &format!(
                "of thread time not idle · idle waits {} ({} off-CPU with them) · on CPU {}",
                ns(idle),
                percent(share),
                ns(on)
            ),
        ),
        (true, Some(share)) => card(
            out,
            &percent(share),
            "off-CPU",
            &format!("of thread time · on CPU {}", ns(on)),
        ),
        _ => card(out, "–", "off-CPU", "needs eBPF (blocked time)"),
    }
}

/// What was recorded, and how: the command, the target, its children, when, the collector,
/// the host, and how complete the stacks are.
fn recording_facts(out: &mut String, run: &Run, command: &str) {
    let m = &run.meta;
    kv(out, "Command", &format!("<code>{}</code>", Esc(command)));
    if let Some(r) = run.meta.redaction.note() {
        kv(out, "Redaction", &Esc(&r).to_string());
    }
    let mode = match m.mode {
        TargetMode::Spawn => "spawned",
        TargetMode::Pid => "attached",
    };
    kv(out, "Target", &format!("pid {} ({mode})", m.pid));
    let children = if !m.follow_children {
        "not followed".to_string()
    } else if m.children.is_empty() {
        "none".to_string()
    } else {
        m.children
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    kv(out, "Child processes", &children);
    kv(out, "Started", &utc(m.start_wall_ns));
    kv(out, "Duration", &ns(m.duration_ns()));
    kv(out, "Ended", &Esc(&m.end.describe()).to_string());
    kv(out, "Collector", collector(run));
    kv(
        out,
        "Host",
        &format!("{} · Linux {}", Esc(&m.host), Esc(&m.kernel)),
    );
    let stats = &run.profiles.stats;
    if let Some(q) = stack_quality(stats) {
        kv(out, "Stack quality", &Esc(&q).to_string());
    }
    if let Some(t) = &stats.tables {
        kv(out, "Unwind tables", &Esc(&unwind_tables(t)).to_string());
    }
}

/// The run's totals: syscalls, switches, threads, the off-CPU share (`idle` of the blocked
/// time told apart) and the peak RSS.
fn totals_table(out: &mut String, run: &Run, t: &Totals, idle: u64) {
    let secs = secs(run);
    let ebpf = run.meta.collector == Collector::Ebpf;
    let (total, errors, in_syscalls) = (t.syscalls, t.syscall_errors, t.syscall_ns);
    let (vol, invol) = (t.voluntary, t.involuntary);
    let (on, runq) = (t.oncpu_ns, t.runqueue_ns);
    if ebpf {
        kv(
            out,
            "Syscalls",
            &format!("{} ({}/s)", thousands(total), rate(total, secs)),
        );
        kv(out, "Failed syscalls", &thousands(errors));
        kv(
            out,
            "Time inside syscalls",
            &syscall_time(run, ns(in_syscalls)),
        );
    } else {
        kv(
            out,
            "Syscalls",
            &not_available("not recorded in degraded mode"),
        );
    }
    kv(
        out,
        "Voluntary switches",
        &format!("{} ({}/s)", thousands(vol), rate(vol, secs)),
    );
    kv(
        out,
        "Involuntary switches",
        &format!("{} ({}/s)", thousands(invol), rate(invol, secs)),
    );
    kv(out, "Threads", &thousands(run.threads.len() as u64));
    match (ebpf, run.offcpu_share()) {
        (true, Some(share)) => kv(
            out,
            "Off-CPU share",
            &OffCpu::of(run, share, idle).sentence(),
        ),
        (true, None) => kv(out, "Off-CPU share", &not_available("no thread time")),
        (false, _) => kv(
            out,
            "Off-CPU share",
            &format!(
                "{} (on CPU {}, waiting for a CPU {})",
                not_available("blocked time needs eBPF"),
                ns(on),
                ns(runq)
            ),
        ),
    }
    if let Some(kb) = run.max_rss_kb {
        kv(out, "Peak RSS", &kib_as_mib(kb));
    }
}

/// What the recorder's own probes cost the target, where any figure above includes it.
fn probe_costs(out: &mut String, run: &Run) {
    for (id, lines) in [
        ("probe-costs", run.probe_cost_lines()),
        ("program-times", run.program_time_lines()),
    ] {
        noted_list(out, id, &lines);
    }
}

/// A note (the first line) and a list of the rest.
fn noted_list(out: &mut String, id: &str, lines: &[String]) {
    if let Some((head, rest)) = lines.split_first() {
        let _ = writeln!(out, "<p class=\"note\" id=\"{id}\">{}.</p>", Esc(head));
        if !rest.is_empty() {
            out.push_str("<ul class=\"probe-costs\">\n");
            for line in rest {
                let _ = writeln!(out, "<li>{}</li>", Esc(line.trim()));
            }
            out.push_str("</ul>\n");
        }
    }
}

/// What the workload's driver measured: throughput and latency percentiles.
fn workload(out: &mut String, w: &switchyard_model::Workload) {
    let _ = writeln!(
        out,
        "<h3>Workload: {} ({})</h3>\n<table class=\"kv\">",
        Esc(&w.name),
        Esc(&w.build)
    );
    let params: Vec<String> = w
        .parameters
        .iter()
        .map(|(k, v)| format!("{}={}", Esc(k), Esc(v)))
        .collect();
    kv(out, "Parameters", &params.join(", "));
    kv(
        out,
        "Throughput",
        &format!(
            "{}/s ({} operations, {} errors)",
            thousands(w.throughput_per_s.round() as u64),
            thousands(w.operations),
            thousands(w.errors)
        ),
    );
    kv(
        out,
        "Latency",
        &format!(
            "P50 {} · P90 {} · P99 {} · P99.9 {} · P99.99 {} · max {}",
            ns(w.p50_ns),
            ns(w.p90_ns),
            ns(w.p99_ns),
            ns(w.p99_9_ns),
            ns(w.p99_99_ns),
            ns(w.max_ns)
        ),
    );
    out.push_str("</table>\n");
}

fn per_operation(out: &mut String, run: &Run, ops: u64, figures: &Figures) {
    out.push_str("<h3>Per operation</h3>\n<table class=\"kv\">\n");
    kv(
        out,
        "Operations",
        &format!("{} ({}/s)", thousands(ops), rate(ops, secs(run))),
    );
    if ops == 0 {
        kv(
            out,
            "Per operation",
            &not_available("no operations completed"),
        );
        out.push_str("</table>\n");
        return;
    }
    // The headline figures, as the terminal summary gives them.
    for (f, m) in metrics::headline_per_op(figures) {
        kv(out, &capitalised(f.label), &m.unit.human(m.value));
    }
    let per = |v: u64| v as f64 / ops as f64;
    let human = |name: &str| figures.get(name).map(|m| m.unit.human(m.value));
    if let (Some(vol), Some(invol)) = (
        human("switches.voluntary.per_op"),
        human("switches.involuntary.per_op"),
    ) {
        kv(
            out,
            "Of the switches",
            &format!("{vol} voluntary, {invol} involuntary"),
        );
    }
    if run.meta.collector == Collector::Ebpf {
        let t = run.totals();
        kv(
            out,
            "Time inside syscalls",
            &syscall_time(run, ns_f(per(t.syscall_ns))),
        );
        kv(out, "Off-CPU time", &ns_f(per(t.offcpu_ns())));
    }
    if let Some(heap) = heap_per_operation(figures) {
        let life = if run.meta.mode == TargetMode::Pid {
            " over the target's life, from before the recording"
        } else {
            ""
        };
        kv(out, "Heap allocations (dhat)", &format!("{heap}{life}"));
    }
    out.push_str("</table>\n");
}

/// `label` with a capital first letter, as a table's key: "Context switches".
fn capitalised(label: &str) -> String {
    let mut c = label.chars();
    c.next()
        .map_or_else(String::new, |first| first.to_uppercase().chain(c).collect())
}

/// Every named figure of the run, as comparisons and budgets name them, with its value and
/// what it measures. Folded by default: a run has a couple of hundred, and the sections after them matter more.
fn figures_section(out: &mut String, figures: &Figures) {
    let n = figures.len();
    let _ = write!(
        out,
        "<section id=\"figures\">\n<h2>Figures</h2>\n\
         <p class=\"note\">The run's named figures: <code>switchyard compare</code> and budgets \
         (<code>switchyard gate</code>) read these. Click a column to sort.</p>\n\
         <details class=\"view\">\n<summary>{n} {}</summary>\n\
         <div class=\"scroll\"><table class=\"data sortable\" id=\"figure-table\">\n<thead><tr>\
         <th>Figure</th><th class=\"num\">Value</th><th>What it measures</th></tr></thead>\n<tbody>\n",
        if n == 1 { "figure" } else { "figures" }
    );
    for (name, m) in figures {
        let about = metrics::definition(name).map_or("", |(f, _)| f.about);
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td>{}<td class=\"text\">{}</td></tr>",
            Esc(name),
            num(m.value, &Esc(&m.unit.human_unit(m.value)).to_string()),
            Esc(about)
        );
    }
    out.push_str("</tbody>\n</table></div>\n</details>\n</section>\n");
}

fn counter_value(c: &Counter) -> String {
    match c.value {
        Some(v) if c.name == "task-clock" => ns(v),
        Some(v) => thousands(v),
        // Why is in the note column ("not supported", "needs kernel-mode counting", …).
        None => not_available("unavailable"),
    }
}

fn counters(out: &mut String, run: &Run) {
    out.push_str("<h3>perf counters</h3>\n");
    if run.counters.is_empty() {
        out.push_str("<p class=\"none\">none recorded</p>\n");
        return;
    }
    out.push_str(
        "<table class=\"data counters\">\n<thead><tr><th>Counter</th><th class=\"num\">Value</th>\
         <th class=\"num\">Per second</th><th>Note</th></tr></thead>\n<tbody>\n",
    );
    for c in &run.counters {
        let per_sec = match c.value {
            Some(_) if c.name == "task-clock" => "–".to_string(),
            Some(v) => rate(v, secs(run)),
            None => "–".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{per_sec}</td><td>{}</td></tr>",
            Esc(&c.name),
            counter_value(c),
            Esc(c.note.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</tbody>\n</table>\n");
}

fn errnos(s: &SyscallRow) -> String {
    s.errnos
        .iter()
        .map(|e| format!("{}×{}", Esc(&e.name), thousands(e.count)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn syscalls(out: &mut String, run: &Run) {
    out.push_str("<section id=\"syscalls\">\n<h2>Syscalls</h2>\n");
    if run.meta.collector == Collector::Degraded {
        out.push_str("<p class=\"none\">not recorded: degraded mode has no eBPF</p>\n</section>\n");
        return;
    }
    if run.syscalls.is_empty() {
        out.push_str("<p class=\"none\">no syscalls recorded</p>\n</section>\n");
        return;
    }
    let secs = secs(run);
    let all = run.totals().syscall_ns;
    let mut rows: Vec<&SyscallRow> = run.syscalls.iter().collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.nr.cmp(&b.nr)));
    if let Some(timing) = run.syscall_timing() {
        let _ = writeln!(out, "<p class=\"note\">{}.</p>", Esc(&timing));
    }
    out.push_str(
        "<p class=\"note\">Every syscall of the target, counted at exit. Click a column to sort.</p>\n\
         <div class=\"scroll\"><table class=\"data sortable\" id=\"syscall-table\">\n<thead><tr>\
         <th>Syscall</th><th class=\"num\">Nr</th><th class=\"num\">Count</th>\
         <th class=\"num\">Per second</th><th class=\"num\">Errors</th><th>Errnos</th>\
         <th class=\"num\" aria-sort=\"descending\">Total time</th><th class=\"num\">Share</th>\
         <th class=\"num\">Average</th><th class=\"num\">Max</th></tr></thead>\n<tbody>\n",
    );
    for s in rows {
        let avg = s.total_ns.checked_div(s.count).unwrap_or(0);
        let share = if all > 0 {
            s.total_ns as f64 / all as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td>{}{}{}{}<td class=\"text\">{}</td>{}{}{}{}</tr>",
            Esc(&s.name),
            num(s.nr, &s.nr.to_string()),
            num(s.count, &thousands(s.count)),
            num(
                s.count as f64 / secs.max(f64::MIN_POSITIVE),
                &rate(s.count, secs)
            ),
            num(s.errors, &thousands(s.errors)),
            errnos(s),
            num(s.total_ns, &s.or_untimed(ns(s.total_ns))),
            num(format!("{share:.6}"), &s.or_untimed(percent(share))),
            num(avg, &s.or_untimed(ns(avg))),
            num(s.max_ns, &s.or_untimed(ns(s.max_ns))),
        );
    }
    out.push_str("</tbody>\n</table></div>\n</section>\n");
}

/// The time inside syscalls as shown, or why there is none (`record --syscall-latency 0`).
fn syscall_time(run: &Run, shown: String) -> String {
    if run.syscalls_timed() {
        shown
    } else {
        "not timed (--syscall-latency 0)".into()
    }
}

fn threads(out: &mut String, run: &Run) {
    out.push_str("<section id=\"threads\">\n<h2>Threads</h2>\n");
    if run.threads.is_empty() {
        out.push_str("<p class=\"none\">no threads recorded</p>\n</section>\n");
        return;
    }
    let secs = secs(run);
    let ebpf = run.meta.collector == Collector::Ebpf;
    let delays = delay_recorded(run);
    out.push_str(
        "<p class=\"note\">Voluntary switches: the thread blocked (I/O, a lock, a sleep); involuntary: it was \
         preempted while still runnable. Blocked: off CPU from a voluntary switch up to the wakeup \
         that ended the wait. Waiting for a CPU: runnable but not running, from a preemption or a \
         wakeup up to the switch-in that ran the thread; the part after a wakeup is the scheduler \
         delay. Click a column to sort.</p>\n\
         <div class=\"scroll\"><table class=\"data sortable\" id=\"thread-table\">\n<thead><tr>\
         <th class=\"num\">TID</th><th class=\"num\">PID</th><th>Thread</th>\
         <th class=\"num\">Voluntary</th><th class=\"num\">Involuntary</th>\
         <th class=\"num\">Voluntary/s</th><th class=\"num\">Involuntary/s</th>\
         <th class=\"num\">On CPU</th><th class=\"num\">Blocked</th>\
         <th class=\"num\">Waiting for a CPU</th>\
         <th class=\"num wrap\">of which after a wakeup (scheduler delay)</th>\
         <th class=\"num\">Off-CPU share</th></tr></thead>\n<tbody>\n",
    );
    for t in &run.threads {
        let (blocked, woken, share) = if ebpf {
            let total = t.oncpu_ns + t.offcpu_ns();
            let share = if total > 0 {
                t.offcpu_ns() as f64 / total as f64
            } else {
                0.0
            };
            let woken = if delays {
                num(t.runqueue_after_wakeup_ns, &ns(t.runqueue_after_wakeup_ns))
            } else {
                format!("<td class=\"num\">{}</td>", not_available("not recorded"))
            };
            (
                num(t.blocked_ns, &ns(t.blocked_ns)),
                woken,
                num(format!("{share:.6}"), &percent(share)),
            )
        } else {
            let na = format!("<td class=\"num\">{}</td>", not_available("needs eBPF"));
            (na.clone(), na.clone(), na)
        };
        let _ = writeln!(
            out,
            "<tr>{}{}<td>{}</td>{}{}{}{}{}{blocked}{}{woken}{share}</tr>",
            num(t.tid, &t.tid.to_string()),
            num(t.tgid, &t.tgid.to_string()),
            Esc(&t.comm),
            num(t.voluntary, &thousands(t.voluntary)),
            num(t.involuntary, &thousands(t.involuntary)),
            num(
                t.voluntary as f64 / secs.max(f64::MIN_POSITIVE),
                &rate(t.voluntary, secs)
            ),
            num(
                t.involuntary as f64 / secs.max(f64::MIN_POSITIVE),
                &rate(t.involuntary, secs)
            ),
            num(t.oncpu_ns, &ns(t.oncpu_ns)),
            num(t.runqueue_ns, &ns(t.runqueue_ns)),
        );
    }
    out.push_str("</tbody>\n</table></div>\n");
    runqueue_holders(out, run);
    out.push_str("</section>\n");
}

/// Who held the CPU while a thread waited for one: the task each wait ended by taking the CPU
/// from, top [`TOP_ROWS`] by time.
fn runqueue_holders(out: &mut String, run: &Run) {
    if run.runqueue_holders.is_empty() {
        return;
    }
    out.push_str(
        "<h3>Who held the CPU while a thread waited for one</h3>\n\
         <p class=\"note\">The task a waiting thread took the CPU from when it finally ran: the \
         one on that CPU last (swapper: the CPU was idle). Waits: the waits that ended with it \
         giving up the CPU; waiting for a CPU: their total time.</p>\n\
         <div class=\"scroll\"><table class=\"data sortable\" id=\"cpu-holder-table\">\n<thead><tr>\
         <th class=\"num\">TID</th><th>Waiting thread</th><th class=\"num\">CPU</th>\
         <th>Held by</th><th class=\"num\">Holder TID</th><th class=\"num\">Holder PID</th>\
         <th class=\"num\">Nice</th><th class=\"num\">Waits</th>\
         <th class=\"num\" aria-sort=\"descending\">Waiting for a CPU</th></tr></thead>\n<tbody>\n",
    );
    let comm = |tid: u32| {
        run.threads
            .iter()
            .find(|t| t.tid == tid)
            .map_or("", |t| t.comm.as_str())
    };
    let mut rows: Vec<&switchyard_model::RunqueueHolder> = run.runqueue_holders.iter().collect();
    rows.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then((a.tid, a.holder_tid, a.cpu).cmp(&(b.tid, b.holder_tid, b.cpu)))
    });
    for h in rows.iter().take(TOP_ROWS) {
        let _ = writeln!(
            out,
            "<tr>{}<td>{}</td>{}<td>{}</td>{}{}{}{}{}</tr>",
            num(h.tid, &h.tid.to_string()),
            Esc(comm(h.tid)),
            num(h.cpu, &h.cpu.to_string()),
            Esc(&h.holder_comm),
            num(h.holder_tid, &h.holder_tid.to_string()),
            num(h.holder_tgid, &h.holder_tgid.to_string()),
            num(h.holder_nice, &h.holder_nice.to_string()),
            num(h.count, &thousands(h.count)),
            num(h.ns, &ns(h.ns)),
        );
    }
    out.push_str("</tbody>\n</table></div>\n");
    if rows.len() > TOP_ROWS {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more rows, each shorter.</p>",
            thousands((rows.len() - TOP_ROWS) as u64)
        );
    }
}

fn histograms(out: &mut String, run: &Run) {
    out.push_str("<section id=\"latency\">\n<h2>Latency histograms</h2>\n");
    out.push_str(
        "<p class=\"note\">Log2 buckets: a bar counts the values from its left edge to twice that. \
         Hover a bar for its range and count.</p>\n",
    );
    let mut top: Vec<&SyscallRow> = run
        .syscalls
        .iter()
        .filter(|s| s.latency.count() > 0)
        .collect();
    top.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.nr.cmp(&b.nr)));
    if top.len() > TOP_HISTOGRAMS {
        top.truncate(TOP_HISTOGRAMS);
        let _ = writeln!(
            out,
            "<h3>Syscall latency, top {TOP_HISTOGRAMS} by total time</h3>"
        );
    } else {
        out.push_str("<h3>Syscall latency, by total time</h3>\n");
    }
    if top.is_empty() {
        out.push_str("<p class=\"none\">no syscall latencies recorded</p>\n");
    } else {
        out.push_str("<div class=\"charts\">\n");
        for s in top {
            let avg = s.total_ns.checked_div(s.count).unwrap_or(0);
            let timed = s
                .timed
                .map(|t| format!(" ({} timed)", thousands(t)))
                .unwrap_or_default();
            let caption = format!(
                "<b>{}</b> {}{timed} · total {} · average {} · max {}",
                Esc(&s.name),
                counted(s.count, "call"),
                ns(s.total_ns),
                ns(avg),
                ns(s.max_ns)
            );
            let label = format!("{} latency histogram", s.name);
            figure(out, &caption, &s.latency, "syscall", "calls", &label);
        }
        out.push_str("</div>\n");
    }
    out.push_str("<h3>Off-CPU intervals, all threads</h3>\n");
    let mut offcpu = Log2Hist::default();
    for t in &run.threads {
        offcpu.add(&t.offcpu);
    }
    if offcpu.count() == 0 {
        out.push_str("<p class=\"none\">no off-CPU intervals recorded</p>\n");
    } else {
        let off = run.totals().offcpu_ns();
        let caption = format!(
            "<b>off-CPU</b> {} · total {}",
            counted(offcpu.count(), "interval"),
            ns(off)
        );
        out.push_str("<div class=\"charts\">\n");
        figure(
            out,
            &caption,
            &offcpu,
            "offcpu",
            "intervals",
            "off-CPU interval histogram",
        );
        out.push_str("</div>\n");
    }
    runqueue_waits(out, run);
    out.push_str("</section>\n");
}

/// Each wait for a CPU, by thread, as `runqlat -P` prints it: a chart of all threads, and a
/// table of each thread's log2 buckets.
fn runqueue_waits(out: &mut String, run: &Run) {
    out.push_str("<h3>Waits for a CPU (scheduler delay), by thread</h3>\n");
    if run.meta.collector != Collector::Ebpf {
        out.push_str("<p class=\"none\">not recorded (needs eBPF)</p>\n");
        return;
    }
    if !delay_recorded(run) {
        out.push_str("<p class=\"none\">no waits for a CPU recorded</p>\n");
        return;
    }
    let mut all = Log2Hist::default();
    for t in &run.threads {
        all.add(&t.runqueue_waits);
    }
    out.push_str(
        "<p class=\"note\">Each wait for a CPU: from the wakeup that ended a sleep, or from a \
         preemption, to the switch-in that ran the thread (<code>runqlat -P</code>, per thread). \
         A column counts the waits from its time up to twice that.</p>\n",
    );
    let t = run.totals();
    let (runq, woken) = (t.runqueue_ns, t.runqueue_after_wakeup_ns);
    let caption = format!(
        "<b>waiting for a CPU</b> {} · total {} · of which after a wakeup {}",
        counted(all.count(), "wait"),
        ns(runq),
        ns(woken)
    );
    out.push_str("<div class=\"charts\">\n");
    figure(
        out,
        &caption,
        &all,
        "delay",
        "waits",
        "wait for a CPU histogram",
    );
    out.push_str("</div>\n");
    let mut rows: Vec<&switchyard_model::ThreadRow> = run
        .threads
        .iter()
        .filter(|t| t.runqueue_waits.count() > 0)
        .collect();
    rows.sort_by(|a, b| b.runqueue_ns.cmp(&a.runqueue_ns).then(a.tid.cmp(&b.tid)));
    let more = rows.len().saturating_sub(TOP_ROWS);
    rows.truncate(TOP_ROWS);
    // The buckets any row shown has, first to last.
    let first = rows
        .iter()
        .filter_map(|t| t.runqueue_waits.buckets.iter().position(|&c| c > 0))
        .min()
        .unwrap_or(0);
    let last = rows
        .iter()
        .filter_map(|t| t.runqueue_waits.buckets.iter().rposition(|&c| c > 0))
        .max()
        .unwrap_or(0);
    out.push_str(
        "<div class=\"scroll\"><table class=\"data sortable wide\" id=\"sched-delay-table\">\n<thead><tr>\
         <th class=\"num\">TID</th><th>Thread</th><th class=\"num\">Waits</th>\
         <th class=\"num\" aria-sort=\"descending\">Waiting for a CPU</th>\
         <th class=\"num wrap\">of which after a wakeup (scheduler delay)</th>",
    );
    for i in first..=last {
        let _ = write!(
            out,
            "<th class=\"num bucket\" title=\"{}\">{}</th>",
            bucket_range(i),
            bucket_floor(i)
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for t in rows {
        let h = &t.runqueue_waits;
        let _ = write!(
            out,
            "<tr>{}<td>{}</td>{}{}{}",
            num(t.tid, &t.tid.to_string()),
            Esc(&t.comm),
            num(h.count(), &thousands(h.count())),
            num(t.runqueue_ns, &ns(t.runqueue_ns)),
            num(t.runqueue_after_wakeup_ns, &ns(t.runqueue_after_wakeup_ns)),
        );
        for i in first..=last {
            match h.buckets.get(i).copied().unwrap_or(0) {
                0 => out.push_str("<td class=\"num bucket zero\" data-v=\"0\">0</td>"),
                c => {
                    let _ = write!(
                        out,
                        "<td class=\"num bucket\" data-v=\"{c}\">{}</td>",
                        thousands(c)
                    );
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
    if more > 0 {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more threads waited for a CPU, each for less; the chart counts \
             them too.</p>",
            thousands(more as u64)
        );
    }
}

fn figure(out: &mut String, caption: &str, hist: &Log2Hist, class: &str, noun: &str, label: &str) {
    if let Some(svg) = log2_chart(hist, class, noun, label) {
        let _ = writeln!(
            out,
            "<figure>\n<figcaption>{caption}</figcaption>\n{svg}\n</figure>"
        );
    }
}

fn flame_note(run: &Run, kind: ProfileKind) -> String {
    let stats = &run.profiles.stats;
    let profile = kind.of(&run.profiles);
    let total = profile.total();
    let stacks = profile.stacks.len() as u64;
    if run.profiles == Profiles::default() {
        return "This run has no stacks (recorded with --no-stacks, or without eBPF).".into();
    }
    match kind {
        ProfileKind::OnCpu if stats.oncpu_hz == 0 => {
            "On-CPU sampling was off for this run.".to_string()
        }
        ProfileKind::OnCpu => format!(
            "{} of the target's threads at {} Hz (perf cpu-clock), about {} on CPU. \
             Kernel frames are orange, inlined frames aqua.",
            counted(total, "sample"),
            thousands(stats.oncpu_hz),
            ns(total.saturating_mul(1_000_000_000) / stats.oncpu_hz)
        ),
        ProfileKind::OffCpu => {
            let mut note = format!(
                "{} off CPU in {}, by the stack at switch-out; the frame above the thread name \
                 is its state: [S] sleeping, [D] uninterruptible, [R] preempted and waiting for \
                 a CPU, [R after wakeup] woken and waiting for a CPU (scheduler delay: the part \
                 of a sleep from its wakeup to the switch-in, under the stack it slept in).",
                ns(total),
                counted(stacks, "stack"),
            );
            if stats.min_block_ns > 0 {
                note += &format!(
                    " Blocks shorter than {} are not recorded by stack.",
                    ns(stats.min_block_ns)
                );
            }
            note += &offcpu_sampling_note(stats);
            note
        }
        ProfileKind::Wakeup => format!(
            "{} of blocked time by who ended it, up to the wakeup (the wait for a CPU after it \
             is in the off-CPU graph, as [R after wakeup]): the sleeper's stack grows from the \
             bottom, <code>--</code> separates it from the waker's stack, drawn upside down, with \
             the waker's thread name on top.{}",
            ns(total),
            offcpu_sampling_note(stats)
        ),
        ProfileKind::Heap => match &run.heap {
            Some(h) => format!(
                "{} ({}) allocated by the target over its life, by allocation site, from the \
                 heap profile <code>{}</code> its dhat allocator wrote; peak heap {} in {}.",
                counted(h.allocations, "allocation"),
                switchyard_model::units::bytes(h.bytes),
                Esc(&h.source),
                switchyard_model::units::bytes(h.peak_bytes),
                counted(h.peak_blocks, "block"),
            ),
            None => String::new(),
        },
        ProfileKind::Futex => format!(
            "{} waiting on futexes, by the user stack at the wait; the frame above the thread \
             name is the futex word's address.",
            ns(total)
        ),
        ProfileKind::Syscalls if stats.syscall_sample_every == 0 => {
            "Syscall stacks were off for this run.".to_string()
        }
        ProfileKind::Syscalls if stats.syscall_sample_every == 1 => format!(
            "{} by user stack at entry; every syscall had its stack taken.",
            counted(total, "syscall")
        ),
        ProfileKind::Syscalls if stats.syscall_stacks_per_s == 0 => format!(
            "{} by user stack at entry; one syscall in {} had its stack taken and the counts \
             are scaled back.",
            counted(total, "syscall"),
            thousands(stats.syscall_sample_every)
        ),
        ProfileKind::Syscalls => format!(
            "{} by user stack at entry; one syscall in {} had its stack taken, or in more where \
             a CPU made more than {} a second, and each stack counts the calls it stood for.",
            counted(total, "syscall"),
            thousands(stats.syscall_sample_every),
            thousands(stats.syscall_sample_every * stats.syscall_stacks_per_s)
        ),
    }
}

/// How off-CPU stacks were sampled, as a sentence to append; empty when every block was walked.
fn offcpu_sampling_note(stats: &switchyard_model::StackStats) -> String {
    crate::sentences::offcpu_sampling(stats).map_or_else(String::new, |s| {
        let mut c = s.chars();
        let first = c
            .next()
            .map(|f| f.to_uppercase().to_string())
            .unwrap_or_default();
        format!(" {first}{}.", c.as_str())
    })
}

/// A flame graph SVG embedded in a page: its own document in an `<iframe srcdoc>` (scripts and
/// ids of several graphs cannot clash) that keeps the graph's aspect ratio.
pub fn embed_flamegraph(id: &str, title: &str, svg: &str) -> String {
    let height = flame::svg_height(svg).unwrap_or(600);
    format!(
        "<p class=\"hint\">Click a frame to zoom in, Search (or Ctrl-F inside the graph) to highlight.</p>\n\
         <div class=\"flame\"><iframe id=\"{}\" title=\"{}\" \
         style=\"aspect-ratio:{}/{height}\" srcdoc=\"{}\"></iframe></div>\n",
        Esc(id),
        Esc(title),
        flame::IMAGE_WIDTH,
        esc(&flame::srcdoc(svg))
    )
}

/// A whole page in the report's style: head with the stylesheet, a header with `heading`,
/// `subtitle` and a navigation bar of (anchor, title), the `main` content, and the table
/// sorting script.
pub fn document(
    title: &str,
    heading: &str,
    subtitle: &str,
    nav: &[(&str, &str)],
    main: &str,
    footer: &str,
) -> String {
    let mut out = String::with_capacity(main.len() + STYLE.len() + SCRIPT.len() + 1024);
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>",
        Esc(title)
    );
    let _ = writeln!(
        out,
        "<header>\n<h1>{}</h1>\n<p class=\"cmd\"><code>{}</code></p>\n<nav>",
        Esc(heading),
        Esc(subtitle)
    );
    for (id, t) in nav {
        let _ = writeln!(out, "<a href=\"#{}\">{}</a>", Esc(id), Esc(t));
    }
    out.push_str("</nav>\n</header>\n<main>\n");
    out.push_str(main);
    let _ = writeln!(
        out,
        "</main>\n<footer>{}</footer>\n<script>\n{SCRIPT}</script>\n</body>\n</html>",
        Esc(footer)
    );
    out
}

/// True when two threads of `kind`'s stacks share a role (`producer-0`, `producer-1`).
pub fn merges_threads(run: &Run, kind: ProfileKind) -> bool {
    let comms: std::collections::BTreeSet<&str> = kind
        .of(&run.profiles)
        .stacks
        .iter()
        .flat_map(|s| [s.comm.as_str(), s.waker_comm.as_str()])
        .filter(|c| !c.is_empty())
        .collect();
    let roles: std::collections::BTreeSet<String> = comms.iter().map(|c| crate::role(c)).collect();
    roles.len() < comms.len()
}

/// A second view of a flame graph, under a fold: `summary` says what it shows.
pub fn folded_view(id: &str, title: &str, summary: &str, svg: &str) -> String {
    format!(
        "<details class=\"view\">\n<summary>{}</summary>\n{}</details>\n",
        Esc(summary),
        embed_flamegraph(id, title, svg)
    )
}

/// One profile's flame graphs: every stack, drawn per thread and, when that merges any, by
/// role; and, for a profile with idle waits, the same without them.
struct Graphs {
    kind: ProfileKind,
    all: Option<String>,
    all_by_role: Option<String>,
    /// Without idle waits (per thread, by role), when the profile has any.
    busy: Option<(Option<String>, Option<String>)>,
    /// The idle waits' time, ns.
    idle_ns: u64,
}

impl Graphs {
    fn new(run: &Run, kind: ProfileKind) -> Result<Graphs, Error> {
        let roles = merges_threads(run, kind);
        let draw = |keep: &dyn Fn(&switchyard_model::Stack) -> bool| -> Result<_, Error> {
            let each = flame::flamegraph_where(run, kind, crate::Threads::Each, keep)?;
            let by_role = if roles {
                flame::flamegraph_where(run, kind, crate::Threads::ByRole, keep)?
            } else {
                None
            };
            Ok((each, by_role))
        };
        let (all, all_by_role) = draw(&|_| true)?;
        let idle_ns = idle::idle_ns(run, kind);
        let busy = if idle_ns > 0 {
            Some(draw(&|s| !idle::is_idle(run, s))?)
        } else {
            None
        };
        Ok(Graphs {
            kind,
            all,
            all_by_role,
            busy,
            idle_ns,
        })
    }
}

/// A flame graph and its view by role, under ids `flame-<kind><suffix>-graph` and `-roles`;
/// `empty` when there is no graph.
fn flame_views(
    out: &mut String,
    kind: ProfileKind,
    suffix: &str,
    title: &str,
    svg: Option<&str>,
    by_role: Option<&str>,
    empty: &str,
) {
    match svg {
        None => {
            let _ = writeln!(out, "<p class=\"empty\">{empty}</p>");
        }
        Some(svg) => out.push_str(&embed_flamegraph(
            &format!("flame-{}{suffix}-graph", kind.name()),
            title,
            svg,
        )),
    }
    if let Some(merged) = by_role {
        out.push_str(&folded_view(
            &format!("flame-{}{suffix}-roles", kind.name()),
            &format!("{title}, threads merged by role"),
            "Threads merged by role (producer-0 … producer-7 as producer-*)",
            merged,
        ));
    }
}

fn flame_section(out: &mut String, run: &Run, g: &Graphs) {
    let kind = g.kind;
    let title = format!("{} flame graph", kind.title());
    let _ = writeln!(
        out,
        "<section id=\"flame-{}\">\n<h2>{title}</h2>\n<p class=\"note\">{}</p>",
        kind.name(),
        flame_note(run, kind)
    );
    let Some((busy, busy_by_role)) = &g.busy else {
        flame_views(
            out,
            kind,
            "",
            &title,
            g.all.as_deref(),
            g.all_by_role.as_deref(),
            "no samples",
        );
        out.push_str("</section>\n");
        return;
    };
    // Two views, one shown: the checkbox swaps them (CSS only). The hidden one keeps its
    // layout (clipped, not `display: none`), so its graph sizes its labels when it loads.
    let id = format!("flame-{}-idle", kind.name());
    let _ = writeln!(
        out,
        "<p class=\"note\">Idle waits ({}) are left out of this graph. {}</p>\n\
         <input type=\"checkbox\" class=\"idle-switch\" id=\"{id}\">\
         <label class=\"idle-label\" for=\"{id}\">show idle waits ({})</label>\n\
         <div class=\"idle-off\">",
        ns(g.idle_ns),
        idle::RULE,
        ns(g.idle_ns)
    );
    flame_views(
        out,
        kind,
        "",
        &title,
        busy.as_deref(),
        busy_by_role.as_deref(),
        "only idle waits here: “show idle waits” draws them",
    );
    out.push_str("</div>\n<div class=\"idle-on\">\n");
    flame_views(
        out,
        kind,
        "-all",
        &format!("{title}, idle waits included"),
        g.all.as_deref(),
        g.all_by_role.as_deref(),
        "no samples",
    );
    out.push_str("</div>\n</section>\n");
}

/// Go GC figures and the request-latency timeline with GC laid over it.
fn gc_section(out: &mut String, run: &Run, title: &str, timeline: Option<&str>) {
    let _ = writeln!(out, "<section id=\"gc\">\n<h2>{title}</h2>");
    if let Some(g) = &run.gc {
        let _ = writeln!(
            out,
            "<p>{}; {} requests to start a cycle (<code>{}</code>).</p>",
            go_gc(g),
            thousands(g.starts),
            Esc(&g.binary)
        );
        let found: Vec<String> = g
            .symbols
            .iter()
            .map(|s| {
                format!(
                    "<code>{}</code> {}",
                    Esc(&s.symbol),
                    if s.found { "found" } else { "<b>missing</b>" }
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "<p class=\"note\">Runtime probes: {}.</p>",
            found.join(", ")
        );
        if g.events_lost > 0 {
            let _ = writeln!(
                out,
                "<p class=\"note\">{} event timestamps lost (ring buffer full); the counts are exact.</p>",
                thousands(g.events_lost)
            );
        }
    }
    match timeline {
        Some(svg) => {
            out.push_str("<figure class=\"wide\">\n<figcaption>Request latency per window (driver), over the recording</figcaption>\n");
            out.push_str(svg);
            out.push_str("</figure>\n");
        }
        None => {
            out.push_str("<p class=\"empty\">no latency timeline (no workload driver result)</p>\n")
        }
    }
    out.push_str("</section>\n");
}

/// Futex waits, kernel lock contention and uprobe spans.
fn locks(out: &mut String, run: &Run) {
    let l = &run.locks;
    out.push_str("<section id=\"locks\">\n<h2>Lock waits</h2>\n");
    if run.meta.collector != Collector::Ebpf {
        out.push_str("<p class=\"empty\">not recorded (needs eBPF)</p>\n</section>\n");
        return;
    }
    let _ = writeln!(
        out,
        "<p>{}.</p>",
        Esc(&crate::sentences::futex_waits(&l.futex))
    );
    if !l.futex_top.is_empty() {
        out.push_str(
            "<table class=\"sortable\" id=\"futex-table\">\n<thead><tr><th>futex word</th><th>symbol</th><th>pid</th>\
             <th class=\"num\">waits</th><th class=\"num\">total</th><th class=\"num\">average</th></tr></thead>\n<tbody>\n",
        );
        for f in l.futex_top.iter().take(20) {
            let _ = writeln!(
                out,
                "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td class=\"num\" data-v=\"{}\">{}</td>\
                 <td class=\"num\" data-v=\"{}\">{}</td><td class=\"num\">{}</td></tr>",
                Esc(&f.uaddr),
                Esc(f.symbol.as_deref().unwrap_or("")),
                f.tgid,
                f.count,
                thousands(f.count),
                f.total_ns,
                ns(f.total_ns),
                ns(f.total_ns.checked_div(f.count).unwrap_or(0))
            );
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str("<div class=\"charts\">\n");
    figure(
        out,
        "futex wait time",
        &l.futex.hist,
        "offcpu",
        "waits",
        "futex wait time histogram",
    );
    for s in &l.spans {
        figure(
            out,
            &format!("{} entry to return", Esc(&s.symbol)),
            &s.stats.hist,
            "syscall",
            "calls",
            &format!("{} time histogram", s.symbol),
        );
    }
    out.push_str("</div>\n");
    match &l.contention {
        Some(c) => {
            let _ = writeln!(
                out,
                "<p>Kernel lock contention (lock:contention_begin/end): {}.</p>",
                kernel_lock_waits(c)
            );
        }
        None => out.push_str("<p>Kernel lock contention: not available on this kernel.</p>\n"),
    }
    for s in &l.spans {
        let _ = writeln!(
            out,
            "<h3>Span <code>{}</code></h3>\n<p>In <code>{}</code>: {}.</p>",
            Esc(&s.symbol),
            Esc(&s.binary),
            span_calls(&s.stats)
        );
    }
    out.push_str("</section>\n");
}

fn warnings(out: &mut String, run: &Run) {
    let stats = &run.profiles.stats;
    let mut items: Vec<(&str, String)> = Vec::new();
    for d in &run.drops {
        items.push((
            "dropped",
            format!("{} {}", thousands(d.count), Esc(&d.reason)),
        ));
    }
    // The recorder may also list a stack loss among the drops; say it once.
    let in_drops = |n: u64, word: &str| {
        run.drops
            .iter()
            .any(|d| d.count == n && d.reason.contains(word))
    };
    if stats.collisions > 0 && !in_drops(stats.collisions, "collision") {
        items.push((
            "stacks",
            format!(
                "{} stacks lost: the stack map was full or two stacks hashed alike (map size {}); \
                 raise <code>--stack-map-size</code>",
                thousands(stats.collisions),
                thousands(u64::from(stats.stack_map_size))
            ),
        ));
    }
    if stats.missing_user > 0 && !in_drops(stats.missing_user, "user stack") {
        items.push((
            "stacks",
            format!(
                "{} user stacks missing (a kernel thread, or code built without frame pointers)",
                thousands(stats.missing_user)
            ),
        ));
    }
    if stats.missing_kernel > 0 && !in_drops(stats.missing_kernel, "kernel stack") {
        items.push((
            "stacks",
            format!("{} kernel stacks missing", thousands(stats.missing_kernel)),
        ));
    }
    if stats.unknown_frames > 0 {
        items.push((
            "stacks",
            format!(
                "{} no symbol covers (shown as [unknown] or module+offset)",
                counted(stats.unknown_frames, "frame")
            ),
        ));
    }
    for x in &run.missing {
        items.push(("missing", format!("{}: {}", Esc(&x.figure), Esc(&x.reason))));
    }
    out.push_str("<section id=\"warnings\">\n<h2>Drops and warnings</h2>\n");
    if items.is_empty() {
        out.push_str("<p class=\"none\">none</p>\n");
    } else {
        out.push_str("<ul class=\"warnings\">\n");
        for (source, text) in items {
            let _ = writeln!(out, "<li><span class=\"src\">{source}</span> {text}</li>");
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}
