//! Convert: what a recording collected, into a `Run`. Pure (no kernel, no /proc, no clock),
//! so every conversion is tested from fixtures without privileges; `record` plans, polls and
//! decides how to exit.

use std::{collections::BTreeMap, path::PathBuf};

use switchyard_loader::{
    Collected, DropKind, GcEvent, GcKind, StackConfig, TimelineEvent, Unwind, UnwindStats,
};
use switchyard_model::{
    Collector, Counter, FORMAT, Locks, Log2Hist, Meta, Missing, Profiles, Run, SCHEMA_VERSION,
    StackStats, ThreadRow, UnwindTables, Workload,
};
use switchyard_symbolize::Maps;

use crate::procfs::ThreadSample;

/// How often degraded mode samples /proc (its figures stop at the last sample).
pub const DEGRADED_TICK_MS: u64 = 10;

/// Where the figures came from.
pub enum Source {
    /// The kernel side's maps, read after the programs were detached.
    Ebpf(Box<Collected>),
    /// /proc samples: the first and the last seen figures of every thread, why eBPF was not
    /// used, and a spawned target's exact totals from wait4.
    Degraded {
        first: BTreeMap<u32, ThreadSample>,
        last: BTreeMap<u32, ThreadSample>,
        why: String,
        totals: Option<(u64, u64)>,
    },
}

/// Everything a recording (or one window of it) produced.
pub struct Recording<'a> {
    /// The run's metadata; `children` and `collector` are filled in from the source.
    pub meta: Meta,
    pub source: Source,
    /// The perf counters, or `None` when they could not be opened.
    pub counters: Option<Vec<Counter>>,
    /// The stacks asked for (`None`: --no-stacks).
    pub stacks: Option<StackConfig>,
    /// The targets' memory maps, for symbolising (kept across a continuous recording's
    /// windows).
    pub maps: &'a Maps,
    /// A Go target's binary and the GC events drained during the run.
    pub go_gc: Option<(PathBuf, Vec<GcEvent>)>,
    pub workload: Option<Workload>,
    pub max_rss_kb: Option<u64>,
    /// The timeline's events (`--timeline`) and its syscall threshold.
    pub timeline: Option<(Vec<TimelineEvent>, u64)>,
    /// A symbolizer that outlives this recording (a continuous recording's windows share
    /// one); `None` makes one for this run.
    pub symbolizer: Option<&'a switchyard_symbolize::Symbolizer>,
    /// The target's CPU controller over the recording.
    pub cgroup: Option<switchyard_model::CgroupCpu>,
}

/// The run file of a recording.
pub fn assemble(r: Recording) -> Run {
    let mut meta = r.meta;
    let mut missing = Vec::new();
    if r.counters.is_none() {
        missing.push(Missing {
            figure: "perf counters".into(),
            reason: "could not be opened for the target".into(),
        });
    }
    let mut profiles = Profiles::default();
    let mut locks = Locks::default();
    let mut gc = None;
    let mut timeline = None;
    let mut runqueue_holders = Vec::new();
    let mut otel_spans = None;
    let (syscalls, threads, run_drops) = match r.source {
        Source::Ebpf(c) => {
            let c = *c;
            meta.collector = Collector::Ebpf;
            meta.children = c.children;
            let dropped = |kind: DropKind| c.drop_counts.get(&kind).copied().unwrap_or(0);
            meta.unreported_switches =
                dropped(DropKind::SwitchInMissed) + dropped(DropKind::SwitchOutMissed);
            locks = c.locks;
            // The static a lock's futex word is, where it is one.
            for f in locks.futex_top.iter_mut().take(16) {
                if let Ok(addr) = u64::from_str_radix(f.uaddr.trim_start_matches("0x"), 16) {
                    f.symbol = switchyard_symbolize::data_symbol(r.maps, f.tgid, addr);
                }
            }
            runqueue_holders = c.runqueue_holders;
            otel_spans = c.otel;
            meta.probe_costs = c.probe_costs;
            meta.program_times = c.program_times;
            if let (Some(g), Some((binary, events))) = (c.gc, &r.go_gc) {
                let lost = dropped(DropKind::GcEventsFull);
                gc = Some(go_gc_summary(&g, binary, events, meta.start_mono_ns, lost));
                gc_in_spans(&mut locks, events, meta.start_mono_ns);
            }
            let comms = c.threads.iter().map(|t| (t.tid, t.comm.clone())).collect();
            let mut raw = c.raw;
            if let Some((events, syscall_ns)) = &r.timeline {
                let (t, keys) = crate::timeline::build(
                    events,
                    meta.start_mono_ns,
                    meta.end_mono_ns,
                    &comms,
                    dropped(DropKind::TimelineFull),
                    *syscall_ns,
                );
                raw.timeline = keys;
                timeline = Some(t);
            }
            if let Some(s) = &r.stacks {
                raw.stats = StackStats {
                    unwind: match s.unwind {
                        Unwind::Cfi => "cfi",
                        Unwind::FramePointers => "fp",
                    }
                    .into(),
                    oncpu_hz: s.oncpu_hz,
                    min_block_ns: s.min_block_ns,
                    syscall_sample_every: s.syscall_every,
                    syscall_stacks_per_s: if s.syscall_every > 1 {
                        s.syscall_stacks_per_s
                    } else {
                        0
                    },
                    stack_map_size: s.stack_map_size,
                    ..Default::default()
                };
                profiles = match r.symbolizer {
                    Some(sym) => switchyard_symbolize::symbolize_with(sym, &raw, r.maps, &comms),
                    None => switchyard_symbolize::symbolize(&raw, r.maps, &comms),
                };
                if let Some(t) = &mut timeline {
                    t.stacks = std::mem::take(&mut profiles.timeline_stacks);
                }
                let st = &mut profiles.stats;
                st.collisions = dropped(DropKind::StackCollision);
                st.missing_user = dropped(DropKind::UserStackMissing);
                st.missing_kernel = dropped(DropKind::KernelStackMissing);
                st.tables = c.unwind.as_ref().map(unwind_tables);
                st.offcpu_period_ns = s.offcpu_period_ns;
                (st.offcpu_intervals, st.offcpu_walked) = c.offcpu_sampling;
            }
            (c.syscalls, c.threads, c.drops)
        }
        Source::Degraded {
            first,
            last,
            why,
            totals,
        } => {
            meta.collector = Collector::Degraded;
            meta.children = Vec::new();
            missing.extend(degraded_missing(&why));
            (
                Vec::new(),
                degraded_threads(&first, &last, totals),
                Vec::new(),
            )
        }
    };
    Run {
        format: FORMAT.into(),
        schema_version: SCHEMA_VERSION,
        meta,
        missing,
        counters: r.counters.unwrap_or_default(),
        syscalls,
        threads,
        drops: run_drops,
        profiles,
        operations: r.workload.as_ref().map(|w| w.operations),
        locks,
        workload: r.workload,
        gc,
        max_rss_kb: r.max_rss_kb,
        heap: None,
        timeline,
        runqueue_holders,
        cgroup: r.cgroup,
        otel_spans,
    }
}

fn unwind_tables(u: &UnwindStats) -> UnwindTables {
    let row = switchyard_loader::UNWIND_ROW_BYTES;
    UnwindTables {
        objects: u.objects,
        objects_without_cfi: u.objects_without_cfi,
        objects_not_loaded: u.objects_not_loaded,
        rows: u.rows,
        capacity_rows: u.capacity_rows,
        bytes: u.rows * row,
        capacity_bytes: u.capacity_rows * row,
        build_us: u.build.as_micros() as u64,
        failures: u
            .failures
            .iter()
            .map(|(path, e)| format!("{path}: {e}"))
            .collect(),
    }
}

/// What degraded mode cannot give, and why.
fn degraded_missing(why: &str) -> Vec<Missing> {
    [
        "syscalls (counts, errors, latency)",
        "blocked (off-CPU) time and off-CPU histograms",
        "child processes",
    ]
    .into_iter()
    .map(|figure| Missing {
        figure: figure.into(),
        reason: why.into(),
    })
    .chain([Missing {
        figure: "threads that exited between /proc samples".into(),
        reason: format!(
            "per-thread figures stop at the last sample ({} ms apart); a spawned target's totals are exact (wait4)",
            DEGRADED_TICK_MS
        ),
    }])
    .collect()
}

/// Per-thread deltas between the first and last /proc samples (0 for threads born later).
///
/// A spawned target's exact totals come from wait4 (all its threads, exited ones included);
/// what the samples missed becomes one row for the threads that exited unsampled.
fn degraded_threads(
    first: &BTreeMap<u32, ThreadSample>,
    last: &BTreeMap<u32, ThreadSample>,
    totals: Option<(u64, u64)>,
) -> Vec<ThreadRow> {
    let mut rows: Vec<ThreadRow> = last
        .iter()
        .map(|(&tid, l)| {
            let f = first.get(&tid).cloned().unwrap_or_default();
            ThreadRow {
                tid,
                tgid: l.tgid,
                comm: l.comm.clone(),
                voluntary: l.voluntary.saturating_sub(f.voluntary),
                involuntary: l.involuntary.saturating_sub(f.involuntary),
                oncpu_ns: l.oncpu_ns.saturating_sub(f.oncpu_ns),
                blocked_ns: 0,
                runqueue_ns: l.runqueue_ns.saturating_sub(f.runqueue_ns),
                runqueue_after_wakeup_ns: 0,
                offcpu: Log2Hist::default(),
                runqueue_waits: Log2Hist::default(),
            }
        })
        .collect();
    if let Some((vol, invol)) = totals {
        // wait4 counts from the fork; the first sample is the baseline.
        let base_vol: u64 = first.values().map(|s| s.voluntary).sum();
        let base_invol: u64 = first.values().map(|s| s.involuntary).sum();
        let seen_vol: u64 = rows.iter().map(|r| r.voluntary).sum();
        let seen_invol: u64 = rows.iter().map(|r| r.involuntary).sum();
        let extra_vol = vol.saturating_sub(base_vol + seen_vol);
        let extra_invol = invol.saturating_sub(base_invol + seen_invol);
        if extra_vol + extra_invol > 0 {
            rows.push(ThreadRow {
                tid: 0,
                tgid: last.values().next().map_or(0, |s| s.tgid),
                comm: "(exited unsampled)".into(),
                voluntary: extra_vol,
                involuntary: extra_invol,
                oncpu_ns: 0,
                blocked_ns: 0,
                runqueue_ns: 0,
                runqueue_after_wakeup_ns: 0,
                offcpu: Log2Hist::default(),
                runqueue_waits: Log2Hist::default(),
            });
        }
    }
    rows
}

/// The part of each Go span instance during a GC mark phase (from a cycle's first start to
/// its mark termination) and during a stop-the-world pause, from the GC's timestamped events.
fn gc_in_spans(locks: &mut switchyard_model::Locks, events: &[GcEvent], start_mono: u64) {
    let mut events: Vec<_> = events.to_vec();
    events.sort_by_key(|e| e.mono_ns);
    let (mut marks, mut pauses) = (Vec::new(), Vec::new());
    let (mut marking, mut stopped): (Option<u64>, Option<u64>) = (None, None);
    for e in &events {
        let at = e.mono_ns.saturating_sub(start_mono);
        match e.kind {
            GcKind::Start => {
                marking.get_or_insert(at);
            }
            GcKind::MarkTermination => {
                if let Some(from) = marking.take() {
                    marks.push((from, at));
                }
            }
            GcKind::StopTheWorld => stopped = Some(at),
            GcKind::StartTheWorld => {
                if let Some(from) = stopped.take() {
                    pauses.push((from, at));
                }
            }
            _ => {}
        }
    }
    let overlap = |spans: &[(u64, u64)], from: u64, to: u64| -> u64 {
        spans
            .iter()
            .map(|&(a, b)| b.min(to).saturating_sub(a.max(from)))
            .sum()
    };
    for row in &mut locks.spans {
        let Some(a) = row.anatomy.as_mut() else {
            continue;
        };
        for i in a.instances.iter_mut().filter(|i| i.go) {
            let (from, to) = (i.start_ns, i.start_ns + i.duration_ns);
            i.gc_mark_ns = overlap(&marks, from, to);
            i.gc_stw_ns = overlap(&pauses, from, to);
        }
    }
}

/// GC figures from the exact per-kind counts and the timestamped events: pauses pair each
/// stop-the-world with the next restart (the world stops one at a time).
fn go_gc_summary(
    g: &switchyard_loader::GcCollected,
    binary: &std::path::Path,
    events: &[GcEvent],
    start_mono: u64,
    lost: u64,
) -> switchyard_model::GoGc {
    let mut events: Vec<_> = events.to_vec();
    events.sort_by_key(|e| e.mono_ns);
    let mut timeline = Vec::new();
    let (mut pauses, mut total, mut max) = (0u64, 0u64, 0u64);
    let mut stopped: Option<u64> = None;
    for e in &events {
        let at_ns = e.mono_ns.saturating_sub(start_mono);
        match e.kind {
            GcKind::MarkTermination => timeline.push(switchyard_model::GcMark {
                kind: "cycle".into(),
                at_ns,
                duration_ns: 0,
            }),
            GcKind::StopTheWorld => stopped = Some(e.mono_ns),
            GcKind::StartTheWorld => {
                if let Some(t) = stopped.take() {
                    let d = e.mono_ns.saturating_sub(t);
                    pauses += 1;
                    total += d;
                    max = max.max(d);
                    timeline.push(switchyard_model::GcMark {
                        kind: "pause".into(),
                        at_ns: t.saturating_sub(start_mono),
                        duration_ns: d,
                    });
                }
            }
            _ => {}
        }
    }
    switchyard_model::GoGc {
        binary: binary.display().to_string(),
        symbols: g
            .symbols
            .iter()
            .map(|(symbol, found)| switchyard_model::GcSymbol {
                symbol: symbol.clone(),
                found: *found,
            })
            .collect(),
        cycles: g.count(GcKind::MarkTermination),
        starts: g.count(GcKind::Start),
        pauses,
        pause_total_ns: total,
        pause_max_ns: max,
        mark_assists: g.count(GcKind::MarkAssist),
        mark_done: g.count(GcKind::MarkDone),
        timeline,
        events_lost: lost,
    }
}

#[cfg(test)]
mod tests {
    use switchyard_loader::GcCollected;
    use switchyard_model::{DropRow, EndReason, TargetMode, WorkloadWindow};

    use super::*;

    const START: u64 = 1_000_000_000;

    fn meta() -> Meta {
        Meta {
            tool_version: "test".into(),
            command: vec!["./server".into()],
            mode: TargetMode::Spawn,
            pid: 42,
            follow_children: true,
            children: Vec::new(),
            host: "h".into(),
            kernel: "k".into(),
            start_wall_ns: 0,
            end_wall_ns: 2_000_000_000,
            start_mono_ns: START,
            end_mono_ns: START + 2_000_000_000,
            end: EndReason::Duration,
            collector: Collector::Ebpf,
            unreported_switches: 0,
            window: None,
            labels: Default::default(),
            process: Default::default(),
            redaction: Default::default(),
            syscall_timing: None,
            probe_costs: None,
            program_times: None,
        }
    }

    static NO_MAPS: std::sync::LazyLock<Maps> = std::sync::LazyLock::new(Maps::default);

    fn recording(source: Source) -> Recording<'static> {
        Recording {
            meta: meta(),
            source,
            counters: Some(Vec::new()),
            stacks: None,
            maps: &NO_MAPS,
            go_gc: None,
            workload: None,
            max_rss_kb: Some(1024),
            timeline: None,
            symbolizer: None,
            cgroup: None,
        }
    }

    fn stacks() -> StackConfig {
        StackConfig {
            oncpu_hz: 99,
            min_block_ns: 1000,
            syscall_every: 16,
            syscall_stacks_per_s: 1000,
            stack_map_size: 1024,
            unwind: Unwind::Cfi,
            unwind_rows: 1 << 20,
            python_frames: true,
            offcpu_period_ns: 100_000,
        }
    }

    #[test]
    fn drops_reach_the_stack_statistics_by_kind() {
        let mut c = Collected {
            children: vec![43],
            ..Default::default()
        };
        for (kind, count) in [
            (DropKind::StackCollision, 3),
            (DropKind::UserStackMissing, 2),
            (DropKind::KernelStackMissing, 1),
            (DropKind::UnwindNoCfi, 7),
        ] {
            c.drop_counts.insert(kind, count);
            c.drops.push(DropRow {
                reason: kind.reason().into(),
                count,
            });
        }
        c.unwind = Some(UnwindStats {
            objects: 5,
            rows: 1000,
            capacity_rows: 4096,
            ..Default::default()
        });
        let mut r = recording(Source::Ebpf(Box::new(c)));
        r.stacks = Some(stacks());
        let run = assemble(r);
        let st = &run.profiles.stats;
        assert_eq!(
            (st.collisions, st.missing_user, st.missing_kernel),
            (3, 2, 1)
        );
        assert_eq!(st.unwind, "cfi");
        let t = st.tables.as_ref().unwrap();
        assert_eq!(
            (t.objects, t.rows, t.bytes, t.capacity_bytes),
            (5, 1000, 8000, 32768)
        );
        assert_eq!(run.drops.len(), 4);
        assert_eq!(run.drops[3].count, 7);
        assert_eq!(run.meta.children, vec![43]);
        assert_eq!(run.meta.collector, Collector::Ebpf);
        assert!(run.missing.is_empty(), "{:?}", run.missing);
    }

    #[test]
    fn gc_events_pair_into_pauses() {
        let counts = BTreeMap::from([
            (GcKind::MarkTermination, 2),
            (GcKind::Start, 3),
            (GcKind::MarkAssist, 5),
        ]);
        let mut c = Collected {
            gc: Some(GcCollected {
                symbols: vec![
                    ("runtime.gcStart".into(), true),
                    ("runtime.gcMarkDone".into(), false),
                ],
                counts,
            }),
            ..Default::default()
        };
        c.drop_counts.insert(DropKind::GcEventsFull, 1);
        let event = |at: u64, kind: GcKind| GcEvent {
            mono_ns: START + at,
            kind,
            tid: 7,
        };
        // Out of order, as several CPUs' events arrive: sorted by time first.
        let events = vec![
            event(310, GcKind::StartTheWorld),
            event(100, GcKind::StopTheWorld),
            event(150, GcKind::StartTheWorld),
            event(200, GcKind::MarkTermination),
            event(300, GcKind::StopTheWorld),
            // A restart without a stop is not a pause.
            event(400, GcKind::StartTheWorld),
        ];
        let mut r = recording(Source::Ebpf(Box::new(c)));
        r.go_gc = Some(("/bin/server".into(), events));
        let g = assemble(r).gc.unwrap();
        assert_eq!(
            (g.cycles, g.starts, g.mark_assists, g.events_lost),
            (2, 3, 5, 1)
        );
        assert_eq!((g.pauses, g.pause_total_ns, g.pause_max_ns), (2, 60, 50));
        let marks: Vec<(&str, u64, u64)> = g
            .timeline
            .iter()
            .map(|m| (m.kind.as_str(), m.at_ns, m.duration_ns))
            .collect();
        assert_eq!(
            marks,
            vec![("pause", 100, 50), ("cycle", 200, 0), ("pause", 300, 10)]
        );
        assert_eq!(g.symbols.len(), 2);
        assert!(!g.symbols[1].found);
    }

    #[test]
    fn degraded_runs_take_thread_deltas_and_say_what_is_missing() {
        let sample = |tgid, comm: &str, vol, invol, on, rq| ThreadSample {
            tgid,
            comm: comm.into(),
            voluntary: vol,
            involuntary: invol,
            oncpu_ns: on,
            runqueue_ns: rq,
        };
        let first = BTreeMap::from([(42, sample(42, "main", 10, 1, 1000, 100))]);
        let last = BTreeMap::from([
            (42, sample(42, "main", 25, 3, 5000, 300)),
            // Born after the first sample: counted from 0.
            (44, sample(42, "worker", 4, 0, 700, 0)),
        ]);
        let mut r = recording(Source::Degraded {
            first,
            last,
            why: "eBPF not permitted".into(),
            // wait4's totals since the fork: 10 + 15 + 4 seen, 6 more from threads that exited
            // between samples.
            totals: Some((35, 3)),
        });
        r.counters = None;
        let run = assemble(r);
        assert_eq!(run.meta.collector, Collector::Degraded);
        let rows: Vec<(u32, &str, u64, u64, u64)> = run
            .threads
            .iter()
            .map(|t| {
                (
                    t.tid,
                    t.comm.as_str(),
                    t.voluntary,
                    t.involuntary,
                    t.oncpu_ns,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (42, "main", 15, 2, 4000),
                (44, "worker", 4, 0, 700),
                (0, "(exited unsampled)", 6, 0, 0),
            ]
        );
        let missing: Vec<&str> = run.missing.iter().map(|m| m.figure.as_str()).collect();
        assert_eq!(missing[0], "perf counters");
        assert!(
            missing.contains(&"syscalls (counts, errors, latency)"),
            "{missing:?}"
        );
        assert!(run.syscalls.is_empty() && run.drops.is_empty());
    }

    #[test]
    fn a_driver_result_gives_operations_and_keeps_its_windows() {
        let workload = Workload {
            name: "spinlock-broker".into(),
            build: "abs".into(),
            operations: 1000,
            windows: vec![
                WorkloadWindow {
                    start_ms: 0,
                    operations: 600,
                    p99_ns: 9000,
                    max_ns: 12000,
                },
                WorkloadWindow {
                    start_ms: 1000,
                    operations: 400,
                    p99_ns: 8000,
                    max_ns: 30000,
                },
            ],
            ..Default::default()
        };
        let mut r = recording(Source::Ebpf(Box::default()));
        r.workload = Some(workload.clone());
        let run = assemble(r);
        assert_eq!(run.operations, Some(1000));
        assert_eq!(run.workload, Some(workload));
        assert_eq!(run.max_rss_kb, Some(1024));
    }
}
