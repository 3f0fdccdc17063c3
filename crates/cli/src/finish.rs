//! The end of `switchyard record`: the summary printed, the run file (or the windows) saved,
//! what was exported told, and the exit status, which says when an end the user did not ask
//! for left the run short.

use std::{path::Path, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result};
use switchyard_export::Exporter;
use switchyard_model::{EndReason, Meta, Run, TargetMode, outfile, signal_name, units};

use crate::{
    fail::{hint_for, hinted},
    plan::Plan,
    summary,
    windows::Windows,
};

/// How long the senders may still take, once the recording has ended, for what is queued.
const EXPORT_FLUSH: Duration = Duration::from_secs(10);

/// The exit policy: the run file and the summary are written however the recording ended;
/// an end the user did not ask for is an error (exit 2) that says what the file holds.
pub fn single(
    run: Run,
    plan: &Plan,
    heap_error: Option<anyhow::Error>,
    exporter: Option<Exporter>,
) -> Result<ExitCode> {
    // On stderr, as perf stat and strace -c write theirs: stdout is the target's. A closed
    // stderr loses the summary, never the run file.
    {
        use std::io::Write as _;
        let _ = std::io::stderr()
            .lock()
            .write_all(summary::render(&run, plan.top).as_bytes());
    }
    let saved = plan.output.as_deref().map(|output| save(&run, output));
    let held = match &plan.output {
        Some(output) => output.display().to_string(),
        None => "the exported run".to_string(),
    };
    if let Some(Ok(())) = saved {
        say!("run file: {held}");
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
        let hint = hint_for(&e).unwrap_or_default();
        return Err(hinted(
            format!("{e:#}; {held} holds the run without it"),
            hint,
        ));
    }
    exit_policy(&meta, plan, secs, &held)
}

/// The end of a continuous recording: the last window delivered like the others, then what
/// became of them all.
pub fn windows(
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
            say!(
                "switchyard: {count} {windows} over {}; {} written to {}",
                units::seconds(secs),
                delivered.written,
                dir.display()
            );
            format!("{} ({} written)", dir.display(), delivered.written)
        }
        None => {
            say!(
                "switchyard: {count} {windows} over {}",
                units::seconds(secs)
            );
            "the exported windows".to_string()
        }
    };
    if let Some(e) = evicted.filter(|e| e.idle_keys + e.stacks + e.threads > 0) {
        say!(
            "maps kept bounded: {} idle stack entries, {} stacks and {} exited threads evicted",
            e.idle_keys,
            e.stacks,
            e.threads
        );
    }
    for u in &delivered.unsaved {
        say!("warning: a window was not written: {u}");
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
        say!("export: {line}");
    }
    if stats.lost() > 0 {
        say!(
            "warning: {} of {} runs were not delivered to every sink; the run files hold them",
            stats.lost(),
            stats.offered()
        );
    }
}

/// Writes the run file; should that fail (a full disk), the run goes to a fallback file in a
/// fresh private folder rather than being lost.
fn save(run: &Run, output: &Path) -> Result<()> {
    // The path was checked before the recording.
    let Err(e) = run.save(output) else {
        return Ok(());
    };
    let fallback = outfile::private_dir(&format!("switchyard-{}-", run.meta.pid))
        .map(|dir| dir.join("run.json"))
        .with_context(|| format!("writing {} ({e}), then a folder for it", output.display()))?;
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
