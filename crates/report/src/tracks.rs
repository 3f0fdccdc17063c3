//! The report's timeline section (`record --timeline`): per-thread state tracks, drawn by
//! `tracks.js` from data embedded in the page, and flame graphs of a selected time range.

use std::{collections::BTreeMap, fmt::Write as _};

use serde_json::json;
use switchyard_model::{Run, ThreadState, Timeline, syscall_name};

use crate::{folded::frame_name, sentences::ns};

const SCRIPT: &str = include_str!("tracks.js");

/// Slices per page at most: beyond it, slices narrower than 1/20,000 of the run are drawn one
/// per such step, in the state that took most of it (a pixel of a wide screen is 1/2,000).
const MAX_SLICES: usize = 400_000;
/// Timestamped samples and off-CPU intervals per page at most (the earliest are kept).
const MAX_SAMPLES: usize = 400_000;

/// The section, or `None` for a run without a timeline.
pub fn section(run: &Run) -> Option<String> {
    let tl = run.timeline.as_ref()?;
    let end = run.meta.duration_ns();
    let (data, merged, idle) = data(run, tl, end);
    let mut out = String::new();
    let _ = writeln!(out, "<section id=\"timeline\">\n<h2>Timeline</h2>");
    let switches: u64 = tl.threads.iter().map(|t| t.switches).sum();
    let _ = writeln!(
        out,
        "<p>Every switch of {} threads ({} switches), {} wakeups, {} syscalls of {} or more, {} \
         futex waits, {} on-CPU samples and {} walked off-CPU intervals, on the recording's clock. \
         Drag across the tracks to select a time range: the flame graphs below then hold only \
         what happened inside it. <code>trace.json</code> beside this page opens in \
         <a href=\"https://ui.perfetto.dev\">Perfetto</a> or chrome://tracing.</p>",
        tl.threads.len(),
        switches,
        tl.wakeups.len(),
        tl.syscalls.len(),
        ns(tl.syscall_ns),
        tl.futex.len(),
        tl.samples.len(),
        tl.offcpu.len(),
    );
    if tl.lost > 0 {
        let _ = writeln!(
            out,
            "<p class=\"warn\">{} events did not fit the ring buffer and are missing here \
             (raise <code>--timeline-buffer</code>); the figures above the timeline count them.</p>",
            tl.lost
        );
    }
    if merged > 0 {
        let _ = writeln!(
            out,
            "<p class=\"note\">To keep this page small, {merged} slices shorter than {} are \
             drawn one per step of that length, in the state that held the thread for most of \
             it; <code>trace.json</code> has every slice.</p>",
            ns(end / 20_000)
        );
    }
    out.push_str("<div class=\"tl-legend\">");
    for (i, state) in STATES.iter().enumerate() {
        let _ = write!(
            out,
            "<span><i class=\"tl-s{i}\"></i>{}</span>",
            state.label()
        );
    }
    out.push_str(
        "</div>\n<p class=\"note\">A sleep is Sleeping (or Uninterruptible sleep) up to the \
         wakeup that ends it, then Runnable, waiting for a CPU, until it runs (scheduler delay); \
         a preempted thread is Runnable until it runs again.</p>\n<div class=\"tl-controls\"><button id=\"timeline-zoom\" type=\"button\">Zoom to \
         selection</button> <button id=\"timeline-reset\" type=\"button\">Whole run</button> ",
    );
    if idle {
        // As in the off-CPU flame graph: idle waits are left out until asked for.
        out.push_str(
            "<label class=\"idle-label\"><input type=\"checkbox\" id=\"timeline-idle\"> \
             show idle waits</label> ",
        );
    }
    out.push_str(
        "<span id=\"timeline-info\"></span></div>\n<canvas id=\"timeline-canvas\"></canvas>\n\
         <div id=\"timeline-flame-oncpu\" class=\"tl-flamebox\"></div>\n\
         <div id=\"timeline-flame-offcpu\" class=\"tl-flamebox\"></div>\n",
    );
    let _ = writeln!(
        out,
        "<script type=\"application/json\" id=\"timeline-data\">{}</script>\n<script>\n{SCRIPT}</script>\n</section>",
        data.replace("</", "<\\/")
    );
    Some(out)
}

/// Slices inside one resolution step of a thread's track.
struct Bucket {
    start: u64,
    /// The start of its first slice and the end of its last.
    first: u64,
    end: u64,
    /// Time and last syscall by state.
    time: [u64; 6],
    syscall: [u32; 6],
    slices: usize,
}

impl Bucket {
    /// Draws the step as one slice in its main state; returns how many slices it merged.
    fn flush(self, flat: &mut Vec<u64>) -> usize {
        let state = (0..6)
            .max_by_key(|&s| (self.time[s], usize::MAX - s))
            .unwrap_or(0);
        flat.extend([
            self.first,
            self.end - self.first,
            state as u64,
            u64::from(self.syscall[state]),
        ]);
        self.slices - 1
    }
}

const STATES: [ThreadState; 6] = [
    ThreadState::Running,
    ThreadState::Runnable,
    ThreadState::Sleeping,
    ThreadState::Uninterruptible,
    ThreadState::Other,
    ThreadState::Unknown,
];

/// The page's data, as JSON, how many slices were merged, and whether any off-CPU interval
/// is an idle wait.
fn data(run: &Run, tl: &Timeline, end: u64) -> (String, usize, bool) {
    let total: usize = tl.threads.iter().map(|t| t.slices.len()).sum();
    let resolution = if total > MAX_SLICES { end / 20_000 } else { 0 };
    let mut merged = 0;
    let mut sys: BTreeMap<u32, String> = BTreeMap::new();
    let mut comm: BTreeMap<u32, String> = BTreeMap::new();
    let threads: Vec<_> = tl
        .threads
        .iter()
        .map(|t| {
            comm.insert(t.tid, t.comm.clone());
            let mut flat: Vec<u64> = Vec::with_capacity(t.slices.len() * 4);
            // Slices narrower than the resolution are drawn one per resolution step, in the
            // state that took most of the step.
            let mut bucket: Option<Bucket> = None;
            for &(start, dur, state, syscall) in &t.slices {
                if syscall > 0 {
                    sys.entry(syscall)
                        .or_insert_with(|| syscall_name(syscall - 1));
                }
                if dur >= resolution {
                    if let Some(b) = bucket.take() {
                        merged += b.flush(&mut flat);
                    }
                    flat.extend([start, dur, state as u64, syscall as u64]);
                    continue;
                }
                let step = start - start % resolution;
                if bucket.as_ref().is_some_and(|b| b.start != step)
                    && let Some(b) = bucket.take()
                {
                    merged += b.flush(&mut flat);
                }
                let b = bucket.get_or_insert(Bucket {
                    start: step,
                    first: start,
                    end: start,
                    time: [0; 6],
                    syscall: [0; 6],
                    slices: 0,
                });
                let s = (state as usize).min(5);
                b.time[s] += dur;
                b.syscall[s] = syscall;
                b.end = start + dur;
                b.slices += 1;
            }
            if let Some(b) = bucket.take() {
                merged += b.flush(&mut flat);
            }
            json!({"name": format!("{} {}", t.comm, t.tid), "tid": t.tid, "s": flat})
        })
        .collect();
    // The frames the stacks use, renumbered.
    let mut frames: Vec<String> = Vec::new();
    let mut index: BTreeMap<u32, u32> = BTreeMap::new();
    let stacks: Vec<Vec<u32>> = tl
        .stacks
        .iter()
        .map(|s| {
            s.iter()
                .map(|&f| {
                    *index.entry(f).or_insert_with(|| {
                        let name = run
                            .profiles
                            .frames
                            .get(f as usize)
                            .map_or_else(|| "[unknown]".to_string(), frame_name);
                        frames.push(name);
                        frames.len() as u32 - 1
                    })
                })
                .collect()
        })
        .collect();
    let on: Vec<u64> = tl
        .samples
        .iter()
        .take(MAX_SAMPLES)
        .flat_map(|&(at, tid, stack)| [at, tid as u64, stack as u64])
        .collect();
    // Each off-CPU interval, and 1 when it is an idle wait (by its stack, state and process,
    // read as explain reads it: a park on the GIL is not idle).
    let reader = switchyard_findings::Reader::new(run);
    let tgids: BTreeMap<u32, u32> = run.threads.iter().map(|t| (t.tid, t.tgid)).collect();
    let mut idle: BTreeMap<(u32, u32, u8), bool> = BTreeMap::new();
    let mut waits_for_work = |tid: u32, stack: u32, state: u8| {
        let tgid = tgids.get(&tid).copied().unwrap_or(0);
        *idle.entry((tgid, stack, state)).or_insert_with(|| {
            let Some(label) = ThreadState::from_u8(state).blocked_label() else {
                return false;
            };
            tl.stacks.get(stack as usize).is_some_and(|frames| {
                reader.read_as(tgid, &label, frames).kind == switchyard_findings::Kind::Idle
            })
        })
    };
    let off: Vec<u64> = tl
        .offcpu
        .iter()
        .take(MAX_SAMPLES)
        .flat_map(|&(at, tid, stack, w, state)| {
            [
                at,
                tid as u64,
                stack as u64,
                w,
                u64::from(waits_for_work(tid, stack, state)),
            ]
        })
        .collect();
    let any_idle = idle.values().any(|&i| i);
    let (gc, gc_kinds) = match &run.gc {
        Some(g) => (
            g.timeline
                .iter()
                .flat_map(|m| [m.at_ns, m.duration_ns.max(1), u64::from(m.kind == "pause")])
                .collect(),
            vec!["GC cycle end", "stop-the-world pause"],
        ),
        None => (Vec::new(), Vec::new()),
    };
    let doc = json!({
        "end": end,
        "states": STATES.iter().map(|s| s.label()).collect::<Vec<_>>(),
        "sys": sys,
        "comm": comm,
        "threads": threads,
        "frames": frames,
        "stacks": stacks,
        "on": on,
        "off": off,
        "gc": gc,
        "gcKinds": gc_kinds,
    });
    (doc.to_string(), merged, any_idle)
}
