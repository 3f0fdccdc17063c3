//! `switchyard record`: plan, attach, poll until the end (target exit, --duration, Ctrl-C or
//! SIGTERM), collect, then [`assemble`] the run, write it and print the summary.

use std::{
    io::Write as _,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context as _, Result};
use nix::sys::signal::Signal;
use switchyard_counters::{Counters, Scope};
use switchyard_export::Exporter;
use switchyard_model::{
    Collector, EndReason, Meta, Run, TargetMode, Workload, driver::DriverResult,
};
use switchyard_symbolize::Maps;

use crate::{
    args::RecordArgs,
    assemble::{DEGRADED_TICK_MS, Recording, Source, assemble},
    clock::unix_ns,
    collect::Collection,
    fail::{hinted, signal_name},
    plan::{Plan, PlannedTarget},
    procfs::{self, PidFd},
    progress::Progress,
    spawn, summary,
    windows::Windows,
};

/// How often the loop checks for the end (and samples /proc in degraded mode).
const TICK: Duration = Duration::from_millis(DEGRADED_TICK_MS);

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let mut plan = Plan::new(args)?;
    // The senders run beside the recording from the start; a sink that is down only costs
    // retries in their threads.
    let exporter = plan.export.clone().map(Exporter::start);
    // Signals first, so a Ctrl-C while the probes load still ends cleanly.
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)
            .context("installing signal handlers")?;
    }
    let mode = plan.target.mode();
    // A spawned command waits before exec until the probes are attached; dropped on an error,
    // it is abandoned before it runs.
    let (pid, stopped) = match &plan.target {
        PlannedTarget::Pid(pid) => (*pid, None),
        PlannedTarget::Spawn {
            argv,
            program,
            hold,
        } => {
            let s = spawn::fork_stopped(argv, program, *hold)?;
            (s.pid, Some(s))
        }
    };
    let mut collection = Collection::attach(&plan, pid)?;
    // Degraded mode has no other source of CPU time and switches.
    let mut counters = (plan.perf_counters || collection.is_degraded())
        .then(|| {
            Counters::open(match mode {
                TargetMode::Pid => Scope::Pid(pid),
                TargetMode::Spawn => Scope::SpawnedBeforeExec(pid),
            })
            .map_err(|e| eprintln!("warning: perf counters unavailable: {e:#}"))
            .ok()
        })
        .flatten();

    // Before the start is announced (`--ready-fd`): a target that exits right after must
    // still be seen to exit.
    let pidfd = PidFd::open(pid);
    let start_wall = SystemTime::now();
    let start_mono = collection.start(pid)?;
    let started = Instant::now();
    // Memory maps of the targets, so stacks symbolise after they exit.
    let mut maps = Maps::default();
    // From here on, a spawned child is stopped when the recording ends, however it ends.
    let (mut child, command) = match (stopped, &plan.target) {
        (Some(s), PlannedTarget::Spawn { argv, .. }) => {
            let child = s.go(|| collection.refresh(&mut maps, pid))?;
            (Some(child), argv.clone())
        }
        _ => (None, procfs::cmdline(pid)),
    };
    eprintln!(
        "switchyard: recording pid {pid} ({}){}; Ctrl-C to stop",
        procfs::comm(pid).unwrap_or_else(|| "?".into()),
        plan.duration
            .map(|d| format!(" for {:.1} s", d.as_secs_f64()))
            .unwrap_or_default()
    );
    if let Some(mut ready) = plan.ready.take() {
        // A reader that has gone away is not an error of the recording.
        let _ = writeln!(ready, "recording {pid}");
    }

    // Every window's and the run's metadata, but for when each starts and ends and how.
    let meta = |start_wall: SystemTime, end_wall: SystemTime, start_mono, end_mono, end| Meta {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: command.clone(),
        mode,
        pid,
        follow_children: plan.follow_children,
        children: Vec::new(),
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        kernel: nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        start_wall_ns: unix_ns(start_wall),
        end_wall_ns: unix_ns(end_wall),
        start_mono_ns: start_mono,
        end_mono_ns: end_mono,
        end,
        collector: Collector::Ebpf,
        unreported_switches: 0,
        window: None,
        labels: plan.labels.clone(),
    };
    // Windows take the exporter: they are delivered in order by their own thread.
    let (mut windows, exporter) = match plan.every {
        Some(every) => (
            Some(Windows::new(
                every,
                plan.output.clone(),
                exporter,
                start_mono,
                start_wall,
            )?),
            None,
        ),
        None => (None, exporter),
    };

    // A spawned command writes to this terminal too, and a redrawn line would erase what it
    // wrote last: the line is only drawn for a target whose output goes elsewhere; windows
    // say their own line as they are cut.
    // The target's CPU quota and throttling, read again at every window and at the end.
    let mut cgroup_start = crate::cgroup::read(pid);
    let mut progress = Progress::start(plan.duration, child.is_some() || windows.is_some());
    let mut last_maps = Instant::now();
    let end = loop {
        // New processes, exec and dlopen: their maps for symbols and their unwind tables, as
        // soon as seen: every tick in the first second (the dynamic loader maps libraries
        // early), then every 100 ms.
        let maps_due = plan.stacks.is_some()
            && (started.elapsed() < Duration::from_secs(1)
                || last_maps.elapsed() >= Duration::from_millis(100));
        if maps_due {
            last_maps = Instant::now();
        }
        collection.tick(pid, &mut maps, maps_due);
        // A window due as the duration runs out is the last one, read at the end: cutting it
        // here would leave a last window of a few milliseconds.
        let over = plan.duration.is_some_and(|d| started.elapsed() >= d);
        if let Some(w) = windows.as_mut().filter(|w| !over && w.due()) {
            let (source, gc_events, at) = collection.cut(pid)?;
            let end_wall = SystemTime::now();
            let counter_rows = w.counters(counters.as_mut().map(Counters::read));
            let window_meta = meta(w.start_wall, end_wall, w.start_mono, at, EndReason::Window);
            let (stacks, go_gc) = (plan.stacks.clone(), plan.go_gc.clone());
            let (window_maps, max_rss_kb) = (maps.clone(), procfs::max_rss_kb(pid));
            let cgroup = cgroup_start
                .as_ref()
                .map(crate::cgroup::Reading::since_start);
            cgroup_start = crate::cgroup::read(pid).or(cgroup_start);
            w.cut(
                move |symbolizer| {
                    assemble(Recording {
                        meta: window_meta,
                        source,
                        counters: counter_rows,
                        stacks,
                        maps: &window_maps,
                        go_gc: go_gc.map(|binary| (binary, gc_events)),
                        workload: None,
                        max_rss_kb,
                        timeline: None,
                        cgroup,
                        symbolizer: Some(symbolizer),
                    })
                },
                at,
                end_wall,
            );
        }
        let sig = signal.load(Ordering::Relaxed);
        if sig != 0 {
            break EndReason::Interrupted { signal: sig as i32 };
        }
        let exited = match &mut child {
            Some(c) => c.exited(),
            None => pidfd.exited().then_some(spawn::Exit::default()),
        };
        if let Some(e) = exited {
            break EndReason::TargetExited {
                code: e.code,
                signal: e.signal,
            };
        }
        if over {
            break EndReason::Duration;
        }
        progress.tick(started.elapsed(), counters.as_mut());
        pidfd.wait(TICK);
    };
    progress.finish();
    // The counters' window ends with the recording's, before the probes are read and a
    // spawned command is stopped (which can take a second).
    let counter_rows = counters.as_mut().map(Counters::read);
    let counter_rows = match windows.as_mut() {
        Some(w) => w.counters(counter_rows),
        None => counter_rows,
    };
    let end_mono = collection.stop()?;
    let cgroup = cgroup_start
        .as_ref()
        .map(crate::cgroup::Reading::since_start);
    // A live target's peak RSS while it still exists; a spawned one's comes from wait4.
    let live_rss = procfs::max_rss_kb(pid);
    let end_wall = SystemTime::now();

    // The probes' own symbols leave /proc/kallsyms when they are unloaded.
    if plan.stacks.is_some() {
        maps.snapshot_bpf_symbols();
    }
    // Stop counting before touching the target.
    let collection_evicted = collection.evicted();
    let (mut source, gc_events, timeline_events) = collection.finish(pid)?;
    // Like timeout(1): a spawned command ends with the recording.
    let exit = child.as_mut().and_then(|c| match end {
        EndReason::Interrupted { signal } => {
            c.stop(Signal::try_from(signal).unwrap_or(Signal::SIGTERM))
        }
        _ => c.stop(Signal::SIGTERM),
    });
    // A spawned target's exact switch totals (wait4), known once it has been reaped.
    if let Source::Degraded { totals, .. } = &mut source {
        *totals = exit.and_then(|e| e.switches);
    }
    // The driver writes its result as the load ends, about when the target exits.
    let workload = plan.workload_result.as_deref().and_then(|path| {
        read_workload(path, start_mono)
            .map_err(|e| eprintln!("warning: {e:#}; the run has no per-operation figures"))
            .ok()
    });
    // A dhat target writes its heap profile as it exits, about when the recording ends.
    let heap = plan.heap.as_ref().map(|h| h.read(Duration::from_secs(5)));
    let (first_wall, first_mono) = match &windows {
        Some(w) => (w.start_wall, w.start_mono),
        None => (start_wall, start_mono),
    };
    let mut run = assemble(Recording {
        meta: meta(first_wall, end_wall, first_mono, end_mono, end),
        source,
        counters: counter_rows,
        stacks: plan.stacks.clone(),
        maps: &maps,
        go_gc: plan.go_gc.clone().map(|binary| (binary, gc_events)),
        workload,
        max_rss_kb: exit.and_then(|e| e.max_rss_kb).or(live_rss),
        timeline: plan.timeline.map(|t| (timeline_events, t.syscall_ns)),
        cgroup,
        symbolizer: None,
    });
    let heap_error = match heap {
        Some(Ok((h, sites))) => {
            crate::heap::attach(&mut run, h, sites);
            None
        }
        Some(Err(e)) => Some(e),
        None => None,
    };
    let evicted = collection_evicted;
    match windows {
        Some(w) => finish_windows(run, w, &plan, evicted),
        None => finish(run, &plan, heap_error, exporter),
    }
}

/// How long the senders may still take, once the recording has ended, for what is queued.
const EXPORT_FLUSH: Duration = Duration::from_secs(10);

/// The exit policy: the run file and the summary are written however the recording ended;
/// an end the user did not ask for is an error (exit 2) that says what the file holds.
fn finish(
    run: Run,
    plan: &Plan,
    heap_error: Option<anyhow::Error>,
    exporter: Option<Exporter>,
) -> Result<ExitCode> {
    // On stderr, as perf stat and strace -c write theirs: stdout is the target's.
    eprint!("{}", summary::render(&run, plan.top));
    let saved = plan.output.as_deref().map(|output| save(&run, output));
    let held = match &plan.output {
        Some(output) => output.display().to_string(),
        None => "the exported run".to_string(),
    };
    if let Some(Ok(())) = saved {
        eprintln!("run file: {held}");
    }
    let secs = run.meta.duration_ns() as f64 / 1e9;
    let meta = run.meta.clone();
    // Exported whether or not the file could be written.
    if let Some(x) = exporter {
        x.send(run);
        report_export(x);
    }
    saved.transpose()?;
    // The run is saved; what could not be attached to it is still an error.
    if let Some(e) = heap_error {
        let hint = crate::fail::hint_for(&e).unwrap_or_default();
        return Err(hinted(
            format!("{e:#}; {held} holds the run without it"),
            hint,
        ));
    }
    exit_policy(&meta, plan, secs, &held)
}

/// The end of a continuous recording: the last window delivered like the others, then what
/// became of them all.
fn finish_windows(
    run: Run,
    windows: Windows,
    plan: &Plan,
    evicted: Option<switchyard_loader::Evicted>,
) -> Result<ExitCode> {
    let meta = run.meta.clone();
    let secs = meta.end_wall_ns.saturating_sub(windows.first_wall_ns) as f64 / 1e9;
    let (count, delivered) = windows.finish(run);
    let windows = if count == 1 { "window" } else { "windows" };
    let held = match &plan.output {
        Some(dir) => {
            eprintln!(
                "switchyard: {count} {windows} over {secs:.1} s; {} written to {}",
                delivered.written,
                dir.display()
            );
            format!("{} ({} written)", dir.display(), delivered.written)
        }
        None => {
            eprintln!("switchyard: {count} {windows} over {secs:.1} s");
            "the exported windows".to_string()
        }
    };
    if let Some(e) = evicted.filter(|e| e.idle_keys + e.stacks + e.threads > 0) {
        eprintln!(
            "maps kept bounded: {} idle stack entries, {} stacks and {} exited threads evicted",
            e.idle_keys, e.stacks, e.threads
        );
    }
    for u in &delivered.unsaved {
        eprintln!("warning: a window was not written: {u}");
    }
    if let Some(x) = delivered.exporter {
        report_export(x);
    }
    let policy = exit_policy(&meta, plan, secs, &held);
    // Windows that went to the fallback folder: the recording's data is whole, but not where
    // it was asked to be.
    match (&delivered.fallback, &plan.output) {
        (Some(f), Some(dir)) => Err(hinted(
            format!(
                "{} of {count} windows could not be written to {} ({}); they were saved to {}",
                f.count,
                dir.display(),
                f.why,
                f.dir.display()
            ),
            "free space or restore the folder, then move the saved windows where they belong",
        )),
        _ => policy,
    }
}

/// Waits a little for the senders to deliver what is queued, then says what each sink got
/// and lost. A loss is a warning, never an exit status: the recording itself succeeded.
fn report_export(exporter: Exporter) {
    let stats = exporter.finish(EXPORT_FLUSH);
    for line in stats.lines() {
        eprintln!("export: {line}");
    }
    if stats.lost() > 0 {
        eprintln!(
            "warning: {} of {} runs were not delivered to every sink; the run files hold them",
            stats.lost(),
            stats.offered()
        );
    }
}

/// Writes the run file; should that fail (a full disk), the run goes to a fallback file
/// rather than being lost.
fn save(run: &Run, output: &std::path::Path) -> Result<()> {
    // The path was checked before the recording.
    let Err(e) = run.save(output) else {
        return Ok(());
    };
    let fallback = std::env::temp_dir().join(format!(
        "switchyard-{}-{}.json",
        run.meta.pid, run.meta.start_wall_ns
    ));
    let saved = format!(
        "writing {} ({e}), then {}",
        output.display(),
        fallback.display()
    );
    run.save(&fallback).context(saved)?;
    Err(hinted(
        format!(
            "cannot write {}: {e}; the run was saved to {}",
            output.display(),
            fallback.display()
        ),
        "free space or fix the permissions, then move the saved run where it belongs",
    ))
}

/// An end the user did not ask for is an error (exit 2) that says what holds the run.
fn exit_policy(meta: &Meta, plan: &Plan, secs: f64, held: &str) -> Result<ExitCode> {
    match meta.end {
        EndReason::Interrupted { signal }
            if plan.duration.is_some() || meta.mode == TargetMode::Spawn =>
        {
            Err(hinted(
                format!(
                    "interrupted by {} after {secs:.2} s; {held} holds what was collected",
                    signal_name(signal),
                ),
                "let the recording end by itself (target exit or --duration) for a complete run",
            ))
        }
        EndReason::TargetExited { .. }
            if meta.mode == TargetMode::Pid && plan.duration.is_some() =>
        {
            Err(hinted(
                format!(
                    "target pid {} exited {secs:.2} s into the recording; {held} holds what was collected",
                    meta.pid,
                ),
                "record a process that outlives --duration, or drop --duration to record until it exits",
            ))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// A driver result file, waited for up to 5 s (the driver may still be writing it).
fn read_workload(path: &std::path::Path, start_mono: u64) -> Result<Workload> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !path.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = DriverResult::read(path)
        .with_context(|| format!("reading the workload result {}", path.display()))?;
    Ok(r.to_workload(start_mono))
}
