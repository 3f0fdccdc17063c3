//! Collect: the probes (or, without eBPF privileges and with --degraded, /proc samples) while
//! the target runs, and what they hold once detached.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    time::Duration,
};

use anyhow::{Context as _, Result};
use switchyard_loader::{GcEvent, Probes, TimelineEvent};
use switchyard_symbolize::Maps;

use crate::{
    assemble::Source,
    fail::{PRIVILEGE_HINT, hinted},
    plan::Plan,
    procfs::{self, ThreadSample},
};

/// What collects the figures while the target runs.
pub enum Collection {
    Ebpf {
        probes: Box<Probes>,
        gc_events: Vec<GcEvent>,
        timeline: Vec<TimelineEvent>,
        /// Loading an unwind table failed once already (warned about).
        unwind_warned: bool,
        /// Placing a child's span probes failed once already (warned about).
        span_warned: bool,
    },
    /// /proc samples: the first seen and the last seen figures of every thread.
    Degraded {
        first: BTreeMap<u32, ThreadSample>,
        last: BTreeMap<u32, ThreadSample>,
        why: String,
    },
}

impl Collection {
    /// Recording from /proc and perf counters, without eBPF.
    pub fn is_degraded(&self) -> bool {
        matches!(self, Collection::Degraded { .. })
    }

    /// Loads and attaches the probes, in a thread of their own so that an ending signal
    /// (Ctrl-C) is acted on at once: the process then exits, and the kernel detaches what was
    /// attached as it closes the programs' descriptors.
    pub fn attach(plan: &Plan, pid: u32, signal: &AtomicUsize) -> Result<Collection> {
        let config = plan.probe_config(pid);
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("attach".into())
            .spawn(move || {
                let _ = tx.send(Probes::attach(&config));
            })
            .context("starting the thread that attaches the probes")?;
        let attached = loop {
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(attached) => break attached,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let sig = signal.load(Ordering::Relaxed);
                    if sig != 0 {
                        return Err(hinted(
                            format!(
                                "interrupted by {} while the probes were attaching; nothing was recorded",
                                switchyard_model::signal_name(sig as i32)
                            ),
                            "`switchyard record -v` shows where attaching spends its time",
                        ));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    anyhow::bail!("the thread attaching the probes ended without a word")
                }
            }
        };
        match attached {
            Ok(p) => Ok(Collection::Ebpf {
                probes: Box::new(p),
                gc_events: Vec::new(),
                timeline: Vec::new(),
                unwind_warned: false,
                span_warned: false,
            }),
            Err(e) if e.is_permission() && plan.degraded => {
                say!(
                    "warning: eBPF unavailable ({e}); degraded mode: switches from /proc and perf software counters only"
                );
                let first = procfs::threads(pid);
                Ok(Collection::Degraded {
                    last: first.clone(),
                    first,
                    why: format!("eBPF not permitted: {e}"),
                })
            }
            Err(e) => {
                let perm = e.is_permission();
                let err = anyhow::Error::new(e).context("attaching the probes");
                Err(if perm {
                    hinted(format!("{err:#}"), PRIVILEGE_HINT)
                } else {
                    err
                })
            }
        }
    }

    /// Where attaching the probes spent its time, step by step (none in degraded mode).
    pub fn attach_steps(&self) -> &[(String, Duration)] {
        match self {
            Collection::Ebpf { probes, .. } => probes.attach_steps(),
            Collection::Degraded { .. } => &[],
        }
    }

    /// Starts the recording's clock (the kernel side times nothing before it); returns the
    /// start, CLOCK_MONOTONIC ns.
    pub fn start(&mut self, pid: u32) -> Result<u64> {
        match self {
            Collection::Ebpf { probes, .. } => probes.start(pid).context("starting the recording"),
            Collection::Degraded { .. } => Ok(crate::clock::monotonic_ns()),
        }
    }

    /// Stops the recording's clock; returns the end, CLOCK_MONOTONIC ns.
    pub fn stop(&mut self) -> Result<u64> {
        match self {
            Collection::Ebpf { probes, .. } => probes.stop().context("stopping the recording"),
            Collection::Degraded { .. } => Ok(crate::clock::monotonic_ns()),
        }
    }

    /// One poll: GC events drained, followed processes' maps and tables refreshed when due,
    /// /proc sampled in degraded mode.
    pub fn tick(&mut self, pid: u32, maps: &mut Maps, maps_due: bool, follow_due: bool) {
        let followed = match self {
            Collection::Ebpf {
                probes,
                gc_events,
                timeline,
                span_warned,
                ..
            } => {
                probes.drain_gc_events(gc_events);
                probes.drain_timeline(timeline);
                if let Err(e) = probes.poll_spans()
                    && !std::mem::replace(span_warned, true)
                {
                    say!("warning: span instances: {e}");
                }
                let followed = if maps_due || follow_due {
                    probes.followed()
                } else {
                    Vec::new()
                };
                // Span probes are placed per process: a child the target forked gets its own.
                if follow_due {
                    for &tgid in &followed {
                        if let Err(e) = probes.follow_spans(tgid)
                            && !std::mem::replace(span_warned, true)
                        {
                            say!("warning: spans in child process {tgid}: {e}");
                        }
                    }
                }
                if maps_due { followed } else { Vec::new() }
            }
            Collection::Degraded { last, .. } => {
                last.extend(procfs::threads(pid));
                Vec::new()
            }
        };
        for tgid in followed {
            self.refresh(maps, tgid);
        }
    }

    /// The processes followed so far (the target and its children; none in degraded mode).
    pub fn followed(&self) -> Vec<u32> {
        match self {
            Collection::Ebpf { probes, .. } => probes.followed(),
            Collection::Degraded { .. } => Vec::new(),
        }
    }

    /// Snapshots a followed process's memory maps (for symbols) and loads the unwind tables
    /// of what it mapped since, from one read of its maps; warns once when loading fails
    /// (those stacks fall back to frame pointers).
    pub fn refresh(&mut self, maps: &mut Maps, tgid: u32) {
        if let Collection::Ebpf {
            probes,
            unwind_warned,
            ..
        } = self
        {
            let text = maps.refresh(tgid);
            if let Err(e) = probes.refresh_unwind(tgid, text.as_deref())
                && !std::mem::replace(unwind_warned, true)
            {
                say!(
                    "warning: loading unwind tables: {e}; those stacks fall back to frame pointers"
                );
            }
        }
    }

    /// Cuts a window of a continuous recording (`--every`): what the probes counted since the
    /// last cut, the GC events up to the cut, and the cut (CLOCK_MONOTONIC ns). The probes
    /// stay attached.
    pub fn cut(&mut self, pid: u32) -> Result<(Source, Vec<GcEvent>, u64)> {
        match self {
            Collection::Ebpf {
                probes, gc_events, ..
            } => {
                let (collected, at) = probes.cut(pid).context("reading the probes' maps")?;
                // Events up to the cut are in the ring by now (CPUs add them out of order);
                // later ones wait for the next window.
                probes.drain_gc_events(gc_events);
                let (mut window, mut later): (Vec<_>, Vec<_>) =
                    gc_events.drain(..).partition(|e| e.mono_ns <= at);
                hold_open_pause(&mut window, &mut later);
                *gc_events = later;
                Ok((Source::Ebpf(Box::new(collected)), window, at))
            }
            Collection::Degraded { .. } => Err(hinted(
                "a degraded recording cannot be cut into windows",
                "record with eBPF (as root) to use --every",
            )),
        }
    }

    /// What eviction removed from the kernel's maps over a continuous recording.
    pub fn evicted(&self) -> Option<switchyard_loader::Evicted> {
        match self {
            Collection::Ebpf { probes, .. } => Some(probes.evicted()),
            Collection::Degraded { .. } => None,
        }
    }

    /// Detaches and reads what was collected.
    pub fn finish(self, pid: u32) -> Result<(Source, Vec<GcEvent>, Vec<TimelineEvent>)> {
        Ok(match self {
            Collection::Ebpf {
                mut probes,
                mut gc_events,
                mut timeline,
                ..
            } => {
                probes.drain_gc_events(&mut gc_events);
                probes.drain_timeline(&mut timeline);
                let collected = probes.finish(pid).context("reading the probes' maps")?;
                (Source::Ebpf(Box::new(collected)), gc_events, timeline)
            }
            Collection::Degraded { first, last, why } => (
                Source::Degraded {
                    first,
                    last,
                    why,
                    totals: None,
                },
                Vec::new(),
                Vec::new(),
            ),
        })
    }
}

/// A stop-the-world still open at a window's cut is the next window's, where its restart is:
/// a pause is counted once, in the window it ends in, not lost between two.
fn hold_open_pause(window: &mut Vec<GcEvent>, later: &mut Vec<GcEvent>) {
    use switchyard_loader::GcKind;
    window.sort_by_key(|e| e.mono_ns);
    if let Some(i) = window.iter().rposition(|e| e.kind == GcKind::StopTheWorld)
        && !window[i..].iter().any(|e| e.kind == GcKind::StartTheWorld)
    {
        later.push(window.remove(i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_loader::GcKind;

    #[test]
    fn a_pause_open_at_the_cut_goes_to_the_next_window() {
        let e = |mono_ns, kind| GcEvent {
            mono_ns,
            kind,
            tid: 1,
        };
        let mut window = vec![
            e(30, GcKind::StopTheWorld),
            e(10, GcKind::StopTheWorld),
            e(20, GcKind::StartTheWorld),
            e(40, GcKind::MarkTermination),
        ];
        let mut later = vec![e(50, GcKind::StartTheWorld)];
        hold_open_pause(&mut window, &mut later);
        let kinds: Vec<_> = window.iter().map(|e| (e.mono_ns, e.kind)).collect();
        assert_eq!(
            kinds,
            [
                (10, GcKind::StopTheWorld),
                (20, GcKind::StartTheWorld),
                (40, GcKind::MarkTermination)
            ]
        );
        assert_eq!(later.len(), 2);
        // A closed pause stays.
        let mut window = vec![e(10, GcKind::StopTheWorld), e(20, GcKind::StartTheWorld)];
        hold_open_pause(&mut window, &mut later);
        assert_eq!(window.len(), 2);
    }
}
