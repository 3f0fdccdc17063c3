//! OpenTelemetry spans (thread context, OTEP 4947) explained as a span measured one by one:
//! each span id an instance, its anatomy from what the kernel side counted by span id.
//!
//! What is known of a span, and how well: its time off CPU, blocked and waiting for a CPU,
//! exactly (the context is read at every switch-out, and owns the interval that follows); its
//! time on CPU only between two switch-outs that both saw it (the stretch before its first
//! switch-out and after its last are another span's, or none's); its blocked time by stack
//! and state from the off-CPU time linked to it; its on-CPU samples. So an instance's
//! duration here is the time seen, and its slowest 1% are the spans that waited longest.

use std::collections::HashMap;

use switchyard_model::{Run, SpanAnatomy, SpanInstance, SpanRow, SpanSample, SpanWait, Stack};

/// The name the spans' tail goes by.
pub const NAME: &str = "OpenTelemetry spans";

/// `run` with its OpenTelemetry spans added as one more span measured one by one (and their
/// stacks to `span_stacks`); `None` when it has none.
pub(crate) fn as_span(run: &Run) -> Option<Run> {
    let o = run.otel_spans.as_ref()?;
    if o.spans.is_empty() {
        return None;
    }
    let mut out = run.clone();
    let stacks = &mut out.profiles.span_stacks;
    let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut stack_of = |frames: &[u32]| -> u32 {
        *index.entry(frames.to_vec()).or_insert_with(|| {
            stacks.push(frames.to_vec());
            (stacks.len() - 1) as u32
        })
    };
    // Each span's linked stacks: blocked (any state but the waits for a CPU, after a
    // preemption or a wakeup) and on-CPU samples.
    let mut blocked: HashMap<&str, Vec<&Stack>> = HashMap::new();
    for s in &run.profiles.offcpu.stacks {
        if !s.span_id.is_empty() && !s.label.waits_for_cpu() {
            blocked.entry(&s.span_id).or_default().push(s);
        }
    }
    let mut samples: HashMap<&str, Vec<&Stack>> = HashMap::new();
    for s in &run.profiles.oncpu.stacks {
        if !s.span_id.is_empty() {
            samples.entry(&s.span_id).or_default().push(s);
        }
    }
    let tgid_of: HashMap<u32, u32> = run.threads.iter().map(|t| (t.tid, t.tgid)).collect();
    let mut instances = Vec::new();
    for s in &o.spans {
        let duration_ns = s.blocked_ns + s.runqueue_ns + s.oncpu_ns;
        if duration_ns == 0 {
            continue;
        }
        // Scaled to the span's blocked time: the stacks of a sampled walk carry weights, the
        // span's own count is exact.
        let linked = blocked.get(s.span_id.as_str()).map_or(&[][..], |v| v);
        let linked_ns: u64 = linked.iter().map(|w| w.value).sum();
        let waits: Vec<SpanWait> = linked
            .iter()
            .map(|w| SpanWait {
                ns: (w.value as u128 * s.blocked_ns as u128 / linked_ns.max(1) as u128) as u64,
                count: 1,
                state: w.label.clone(),
                stack: Some(stack_of(&w.frames)),
                ..Default::default()
            })
            .filter(|w| w.ns > 0)
            .collect();
        let named: u64 = waits.iter().map(|w| w.ns).sum();
        instances.push(SpanInstance {
            tgid: tgid_of.get(&s.tid).copied().unwrap_or(run.meta.pid),
            tid: s.tid,
            start_ns: s.first_ns.saturating_sub(run.meta.start_mono_ns),
            duration_ns,
            oncpu_ns: s.oncpu_ns,
            blocked_ns: s.blocked_ns,
            runqueue_ns: s.runqueue_ns,
            other_blocked_ns: s.blocked_ns.saturating_sub(named),
            blocked: waits,
            other_cpu_ns: s.runqueue_ns,
            samples: samples
                .get(s.span_id.as_str())
                .map_or(&[][..], |v| v)
                .iter()
                .map(|x| SpanSample {
                    samples: x.value as u32,
                    stack: Some(stack_of(&x.frames)),
                })
                .collect(),
            ..Default::default()
        });
    }
    if instances.is_empty() {
        return None;
    }
    // Every duration its own bucket: exact.
    let mut hist: Vec<(u64, u64)> = Vec::new();
    let mut durations: Vec<u64> = instances.iter().map(|i| i.duration_ns).collect();
    durations.sort_unstable();
    for d in durations {
        match hist.last_mut() {
            Some((v, n)) if *v == d => *n += 1,
            _ => hist.push((d, 1)),
        }
    }
    let count = instances.len() as u64;
    let threshold_ns = switchyard_model::quantile_low(count, hist.iter().rev().copied(), 0.99);
    for i in &mut instances {
        i.slow = i.duration_ns >= threshold_ns;
    }
    let anatomy = SpanAnatomy {
        count,
        total_ns: instances.iter().map(|i| i.duration_ns).sum(),
        hist,
        threshold_ns,
        typical_every: 1,
        instances,
        ..Default::default()
    };
    out.locks.spans.push(SpanRow {
        label: NAME.into(),
        symbol: "otel_thread_ctx_v1".into(),
        binary: o.source.clone(),
        anatomy: Some(anatomy),
        ..Default::default()
    });
    Some(out)
}
