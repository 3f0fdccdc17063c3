//! A run's timeline as a Chrome trace (the JSON Trace Event Format), which Perfetto
//! (ui.perfetto.dev), chrome://tracing and the DevTools Performance panel open.
//!
//! - Each thread gets its state slices (`Running`, `Runnable`, `Sleeping: readv`, …) as
//!   complete events on its own track, as `perf sched timehist` lists them. A sleep is
//!   `Sleeping` up to its wakeup, then `Runnable` until it runs (`perf sched timehist`'s "sch
//!   delay"); a `Runnable` slice's `runnable_after` argument says `wakeup` or `preemption`.
//! - Slow syscalls and futex waits, which may span several state slices, are async slices
//!   (their own tracks in the process), so nothing breaks the nesting of the state track.
//! - Wakeups are instant events on the woken thread, with the waker in their arguments.
//! - Go GC cycles and stop-the-world pauses are async slices of the process.
//!
//! Timestamps are µs from the recording's start, with ns precision.

use serde_json::{Value, json};
use switchyard_model::{Run, ThreadState, syscall_name};

/// The trace, or `None` for a run recorded without `--timeline`.
pub fn chrome_trace(run: &Run) -> Option<String> {
    let tl = run.timeline.as_ref()?;
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut events: Vec<Value> = Vec::new();
    let pids: std::collections::BTreeSet<u32> = tl.threads.iter().map(|t| t.tgid).collect();
    for pid in &pids {
        let name = if *pid == run.meta.pid {
            run.meta.command.first().cloned().unwrap_or_default()
        } else {
            format!("child {pid}")
        };
        events.push(
            json!({"name": "process_name", "ph": "M", "pid": pid, "tid": pid,
                           "args": {"name": name}}),
        );
    }
    let mut pid_of = std::collections::HashMap::new();
    for (i, t) in tl.threads.iter().enumerate() {
        pid_of.insert(t.tid, t.tgid);
        events.push(
            json!({"name": "thread_name", "ph": "M", "pid": t.tgid, "tid": t.tid,
                           "args": {"name": format!("{} {}", t.comm, t.tid)}}),
        );
        events.push(
            json!({"name": "thread_sort_index", "ph": "M", "pid": t.tgid, "tid": t.tid,
                           "args": {"sort_index": i}}),
        );
        let mut before = None;
        for &(start, dur, state, syscall) in &t.slices {
            let state = ThreadState::from_u8(state);
            let name = slice_name(state, syscall);
            let mut event = json!({"name": name, "cat": "sched", "ph": "X", "ts": us(start),
                                   "dur": us(dur), "pid": t.tgid, "tid": t.tid});
            // What made a thread runnable: the slice before says.
            let after = match (state, before) {
                (ThreadState::Runnable, Some(ThreadState::Running)) => Some("preemption"),
                (
                    ThreadState::Runnable,
                    Some(ThreadState::Sleeping | ThreadState::Uninterruptible | ThreadState::Other),
                ) => Some("wakeup"),
                _ => None,
            };
            if let Some(after) = after {
                event["args"] = json!({ "runnable_after": after });
            }
            events.push(event);
            before = Some(state);
        }
    }
    let pid = |tid: u32| pid_of.get(&tid).copied().unwrap_or(run.meta.pid);
    let mut id = 0u64;
    let mut span = |events: &mut Vec<Value>, cat: &str, name: &str, tid: u32, at, dur, args| {
        id += 1;
        let p = pid(tid);
        events.push(
            json!({"name": name, "cat": cat, "ph": "b", "id": id, "ts": us(at),
                           "pid": p, "tid": tid, "args": args}),
        );
        events.push(
            json!({"name": name, "cat": cat, "ph": "e", "id": id, "ts": us(at + dur),
                           "pid": p, "tid": tid}),
        );
    };
    for &(at, dur, tid, nr, ret) in &tl.syscalls {
        let args = json!({"tid": tid, "ret": ret, "dur_ns": dur});
        span(
            &mut events,
            "syscall",
            &syscall_name(nr),
            tid,
            at,
            dur,
            args,
        );
    }
    for &(at, dur, tid) in &tl.futex {
        let args = json!({"tid": tid, "dur_ns": dur});
        span(&mut events, "futex", "futex wait", tid, at, dur, args);
    }
    if let Some(gc) = &run.gc {
        for m in &gc.timeline {
            let name = if m.kind == "pause" {
                "GC stop-the-world"
            } else {
                "GC cycle end"
            };
            let args = json!({"kind": m.kind});
            span(
                &mut events,
                "gc",
                name,
                run.meta.pid,
                m.at_ns,
                m.duration_ns,
                args,
            );
        }
    }
    for &(at, wakee, waker, waker_pid) in &tl.wakeups {
        events.push(
            json!({"name": "wakeup", "cat": "sched", "ph": "i", "s": "t", "ts": us(at),
                           "pid": pid(wakee), "tid": wakee,
                           "args": {"waker_tid": waker, "waker_pid": waker_pid}}),
        );
    }
    let doc = json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": format!("switchyard {}", run.meta.tool_version),
            "command": crate::sentences::command_line(&run.meta.command),
            "start_wall_ns": run.meta.start_wall_ns,
            "events_lost": tl.lost,
        },
    });
    serde_json::to_string(&doc).ok()
}

/// A state slice's name: the state, and the syscall an off-CPU thread waits in.
pub fn slice_name(state: ThreadState, syscall: u32) -> String {
    if state != ThreadState::Running && syscall > 0 {
        format!("{}: {}", state.label(), syscall_name(syscall - 1))
    } else {
        state.label().to_string()
    }
}
