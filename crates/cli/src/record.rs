//! `switchyard record`: plan, start ([`crate::live`]), poll until the end (target exit,
//! --duration, Ctrl-C or SIGTERM), collect and [`assemble`] the run, then [`crate::finish`]:
//! write it, print the summary and pick the exit status.

use std::{
    process::ExitCode,
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context as _, Result};
use nix::sys::signal::Signal;
use switchyard_counters::Counters;
use switchyard_export::Exporter;
use switchyard_loader::Evicted;
use switchyard_model::{EndReason, Run, Workload, driver::DriverResult};

use crate::{
    args::RecordArgs,
    assemble::{Recording, Source, assemble},
    cgroup, finish,
    live::{Live, catch_signals},
    plan::{Ops, Plan},
    procfs,
    windows::Windows,
};

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let began = Instant::now();
    let verbose = args.verbose;
    let mut plan = Plan::new(args)?;
    // The senders run beside the recording from the start; a sink that is down only costs
    // retries in their threads.
    let exporter = plan.export.clone().map(Exporter::start);
    // Signals first, so a Ctrl-C while the probes load still ends cleanly.
    let signal = catch_signals()?;
    if verbose {
        say!(
            "switchyard: flags checked against the host in {:.1} ms",
            began.elapsed().as_secs_f64() * 1e3
        );
    }
    let mut live = Live::start(&mut plan, &signal, verbose)?;
    // Windows take the exporter: they are delivered in order by their own thread.
    let (mut windows, exporter) = match live.plan.every {
        Some(every) => {
            let dir = live.plan.output.clone();
            let (mono, wall) = (live.start_mono, live.start_wall);
            (Some(Windows::new(every, dir, exporter, mono, wall)?), None)
        }
        None => (None, exporter),
    };
    let end = live.poll(windows.as_mut(), &signal)?;
    let ended = stop(live, end, windows.as_mut())?;
    match windows {
        Some(w) => finish::windows(ended.run, w, &plan, ended.evicted),
        None => finish::single(ended.run, &plan, ended.heap_error, exporter),
    }
}

/// What a recording left: its run, and what could not be attached to it.
struct Ended {
    run: Run,
    /// The heap profile (`--heap-profile`) that could not be read.
    heap_error: Option<anyhow::Error>,
    /// What eviction removed from the kernel's maps (eBPF only).
    evicted: Option<Evicted>,
}

/// Ends the recording: the counters and probes read, a spawned command stopped, a driver's
/// result and a heap profile read, and all of it assembled into the run (with `--every`, the
/// last window).
fn stop(mut live: Live, end: EndReason, windows: Option<&mut Windows>) -> Result<Ended> {
    let (plan, pid) = (live.plan, live.pid);
    // The counters' window ends with the recording's, before the probes are read and a
    // spawned command is stopped (which can take a second).
    let counter_rows = live.counters.as_mut().map(Counters::read);
    let (counter_rows, (first_wall, first_mono)) = match windows {
        Some(w) => (w.counters(counter_rows), (w.start_wall, w.start_mono)),
        None => (counter_rows, (live.start_wall, live.start_mono)),
    };
    let end_mono = live.collection.stop()?;
    // A JVM still running names its JIT code now, before it is stopped.
    live.jvms.dump_now(pid, &live.collection, &mut live.maps);
    let cgroup = live.cgroup_start.as_ref().map(cgroup::Reading::since_start);
    // A live target's peak RSS while it still exists; a spawned one's comes from wait4.
    let live_rss = procfs::max_rss_kb(pid);
    let end_wall = SystemTime::now();

    // The probes' own symbols leave /proc/kallsyms when they are unloaded.
    if plan.stacks.is_some() {
        live.maps.snapshot_bpf_symbols();
    }
    let meta = live.meta(first_wall, end_wall, first_mono, end_mono, end.clone());
    // Stop counting before touching the target.
    let evicted = live.collection.evicted();
    let (mut source, gc_events, timeline_events) = live.collection.finish(pid)?;
    // Like timeout(1): a spawned command ends with the recording.
    let exit = live.child.as_mut().and_then(|c| match end {
        // A hangup or an interrupt reaches the command as it would from the terminal; a
        // broken pipe is ours, not the command's.
        EndReason::Interrupted { signal } if signal != libc::SIGPIPE => {
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
        read_workload(path, live.start_mono)
            .map_err(|e| say!("warning: {e:#}; the run has no per-operation figures"))
            .ok()
    });
    // A dhat target writes its heap profile as it exits, about when the recording ends.
    let heap = plan.heap.as_ref().map(|h| h.read(Duration::from_secs(5)));
    let mut run = assemble(Recording {
        meta,
        source,
        counters: counter_rows,
        stacks: plan.stacks.clone(),
        maps: &live.maps,
        go_gc: plan.go_gc.clone().map(|binary| (binary, gc_events)),
        workload,
        max_rss_kb: exit.and_then(|e| e.max_rss_kb).or(live_rss),
        timeline: plan.timeline.map(|t| (timeline_events, t.syscall_ns)),
        cgroup,
        symbolizer: None,
    });
    // Without a driver's result, the count the user gave.
    if run.operations.is_none() {
        run.operations = match &plan.ops {
            Some(Ops::Count(n)) => Some(*n),
            Some(Ops::File(path)) => read_ops(path)
                .map_err(|e| say!("warning: {e:#}; the run has no per-operation figures"))
                .ok(),
            None => None,
        };
    }
    let heap_error = match heap {
        Some(Ok((mut h, sites))) => {
            // dhat keeps the command line as one string: its words, redacted like the run's.
            let words: Vec<String> = h.command.split(' ').map(String::from).collect();
            h.command = plan.recorded_command(&words).join(" ");
            crate::heap::attach(&mut run, h, sites);
            None
        }
        Some(Err(e)) => Some(e),
        None => None,
    };
    Ok(Ended {
        run,
        heap_error,
        evicted,
    })
}

/// The operation count in `path` (`--ops-file`), waited for up to 5 s (the load may still be
/// writing it): one whole number, 1 or more.
fn read_ops(path: &std::path::Path) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !path.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the operation count {}", path.display()))?;
    crate::args::parse_ops(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("reading the operation count {}", path.display()))
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
