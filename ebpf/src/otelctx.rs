//! OpenTelemetry thread context (OTEP 4947): the span each target thread serves, read from its
//! TLS variable `otel_thread_ctx_v1` (a pointer to a record: trace id, span id, `valid`, trace
//! flags, attributes' size) when the thread is stopped: at its switch-outs and on-CPU samples.
//!
//! A thread's context cannot change while it is off CPU, so the span read at a switch-out owns
//! the interval off CPU that follows (blocked, then waiting for a CPU: the thread's own totals,
//! which the switch program keeps), and the time on CPU up to the next switch-out when that
//! one reads the same span. When it reads another, the span changed while the thread ran: that
//! time is charged as `changed_ns` to the span it began with, and the samples tell whose it
//! was. No probe per request: an instrumented program's requests get their anatomy from the
//! switches alone.
//!
//! A record that lies is counted and never followed further: a pointer that cannot be read,
//! `valid` other than 0 or 1, a size past 640 bytes.

use core::ffi::c_void;

use aya_ebpf::{
    helpers::{bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_user},
    macros::{btf_tracepoint, map},
    maps::{HashMap, PerCpuArray},
    programs::BtfTracePointContext,
};
use switchyard_common::{OffCpuKey, OtelSampleKey, OtelSpan, OtelThread, otel};

use crate::{
    shared::{is_target, start_ns},
    stacks::{KEYS, add},
    task::task_ids,
    threads::thread,
};

#[map]
static OTEL_THREADS: HashMap<u32, OtelThread> = HashMap::with_max_entries(otel::MAX_THREADS, 0);

#[map]
static OTEL_SPANS: HashMap<[u8; 8], OtelSpan> = HashMap::with_max_entries(otel::MAX_SPANS, 0);

#[map]
static OTEL_STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(otel::STATS, 0);

#[map]
static OTEL_SAMPLES: HashMap<OtelSampleKey, u64> = HashMap::with_max_entries(KEYS, 0);

#[unsafe(no_mangle)]
static OTEL_TLS_OFFSET: i64 = 0;
/// 0: `OTEL_TLS_OFFSET` is from the thread pointer; else the module whose TLS block holds
/// the variable, at `OTEL_TLS_OFFSET` in it.
#[unsafe(no_mangle)]
static OTEL_TLS_MODULE: u64 = 0;
#[unsafe(no_mangle)]
static TASK_FSBASE_OFFSET: u32 = 0;

fn tls_offset() -> i64 {
    // SAFETY: a read-only global the loader rewrites before load.
    unsafe { core::ptr::read_volatile(&OTEL_TLS_OFFSET) }
}

fn tls_module() -> u64 {
    // SAFETY: a read-only global the loader rewrites before load.
    unsafe { core::ptr::read_volatile(&OTEL_TLS_MODULE) }
}

/// Whether the target publishes a thread context the loader found.
fn on() -> bool {
    tls_offset() != 0 || tls_module() != 0
}

/// The address of `otel_thread_ctx_v1` in the thread whose thread pointer is `fsbase`:
/// static TLS at a fixed offset from it, or dynamic TLS through the thread's DTV (glibc,
/// x86-64: the TCB's second word is the DTV, 16-byte entries: entry -1 holds its length,
/// entry 0 its generation, entry m module m's block address, all ones while not allocated).
/// `None` for a thread that has not allocated the module's block.
#[inline(always)]
fn slot(fsbase: u64) -> Option<u64> {
    let module = tls_module();
    if module == 0 {
        return Some(fsbase.wrapping_add(tls_offset() as u64));
    }
    // SAFETY: reads of the stopped thread's memory, which the helper checks.
    let dtv = unsafe { bpf_probe_read_user((fsbase + 8) as *const u64) }.ok()?;
    if dtv == 0 {
        return None;
    }
    let len = unsafe { bpf_probe_read_user(dtv.wrapping_sub(16) as *const u64) }.ok()?;
    if module > len {
        return None;
    }
    let block = unsafe { bpf_probe_read_user(dtv.wrapping_add(16 * module) as *const u64) }.ok()?;
    if block == 0 || block == u64::MAX {
        return None;
    }
    Some(block.wrapping_add(tls_offset() as u64))
}

fn count(what: u32) {
    if let Some(c) = OTEL_STATS.get_ptr_mut(what) {
        // SAFETY: a per-CPU slot.
        unsafe { *c += 1 };
    }
}

/// The fixed part of a record, as read.
#[repr(C)]
#[derive(Clone, Copy)]
struct Record {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    valid: u8,
    trace_flags: u8,
    attrs_size: u16,
}

/// The trace and span ids in the context of the thread whose thread pointer is `fsbase`, as
/// the thread is stopped; `None` when it has none (no pointer, `valid` 0, zero ids) or the
/// record cannot be trusted (counted).
#[inline(always)]
fn read(fsbase: u64) -> Option<([u8; 16], [u8; 8])> {
    if fsbase == 0 {
        return None;
    }
    // A thread that has not allocated the module's block has published nothing, as a null
    // pointer has not.
    let slot = slot(fsbase)?;
    // SAFETY: a read of the stopped thread's memory, which the helper checks.
    let Ok(ptr) = (unsafe { bpf_probe_read_user(slot as *const u64) }) else {
        count(otel::UNREADABLE);
        return None;
    };
    if ptr == 0 {
        return None;
    }
    // SAFETY: as above; a wild pointer fails the read and is counted.
    let Ok(r) = (unsafe { bpf_probe_read_user(ptr as *const Record) }) else {
        count(otel::UNREADABLE);
        return None;
    };
    match r.valid {
        1 => {}
        0 => {
            count(otel::NOT_VALID);
            return None;
        }
        _ => {
            count(otel::REFUSED);
            return None;
        }
    }
    if otel::RECORD_HEADER + r.attrs_size as usize > otel::RECORD_MAX {
        count(otel::REFUSED);
        return None;
    }
    if r.span_id == [0; 8] {
        return None;
    }
    count(otel::READ);
    Some((r.trace_id, r.span_id))
}

/// Span `span_id`'s entry, made (first seen `now`) if it has none; `None` when the table is
/// full (counted).
#[inline(always)]
fn span(trace_id: &[u8; 16], span_id: &[u8; 8], now: u64, tid: u32) -> Option<*mut OtelSpan> {
    if let Some(s) = OTEL_SPANS.get_ptr_mut(span_id) {
        return Some(s);
    }
    let fresh = OtelSpan {
        trace_id: *trace_id,
        first_ns: now,
        last_ns: now,
        tid,
        ..Default::default()
    };
    if OTEL_SPANS.insert(span_id, &fresh, 0).is_err() {
        count(otel::TABLE_FULL);
        return None;
    }
    OTEL_SPANS.get_ptr_mut(span_id)
}

#[btf_tracepoint(function = "sched_switch")]
pub fn otel_switch(ctx: BtfTracePointContext) -> i32 {
    try_otel_switch(&ctx);
    0
}

#[inline(always)]
fn try_otel_switch(ctx: &BtfTracePointContext) {
    if !on() {
        return;
    }
    let start = start_ns();
    if start == 0 || start == u64::MAX {
        return;
    }
    let prev: *mut c_void = ctx.arg(1);
    let (tid, tgid) = task_ids(prev);
    if tid == 0 || !is_target(tgid) {
        return;
    }
    // SAFETY: the tracepoint's task pointer, trusted; the offset is the loader's, from BTF.
    let fsbase = unsafe {
        *((prev as *const u8).add(core::ptr::read_volatile(&TASK_FSBASE_OFFSET) as usize)
            as *const u64)
    };
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    let current = read(fsbase);
    let Some(t) = thread(tid) else {
        return;
    };
    // SAFETY: read only; the thread is switching out on this CPU.
    let (blocked, runqueue, last_in) = unsafe { ((*t).blocked_ns, (*t).runqueue_ns, (*t).last_in) };
    // SAFETY: copied at once; only this thread's switches write its entry.
    let before = unsafe { OTEL_THREADS.get(&tid) }.copied();
    if let Some(b) = before
        && b.span_id != [0; 8]
        && let Some(s) = span(&b.trace_id, &b.span_id, now, tid)
    {
        // SAFETY: a live hash-map value; entries are only added and counted into here and
        // by the sample program, and a lost increment between CPUs costs one interval.
        let s = unsafe { &mut *s };
        s.blocked_ns += blocked.saturating_sub(b.blocked_ns);
        s.runqueue_ns += runqueue.saturating_sub(b.runqueue_ns);
        // On CPU since it last came back, and not before its last switch-out.
        let on = now.saturating_sub(if last_in > b.out_ns {
            last_in
        } else {
            b.out_ns
        });
        if current.is_some_and(|c| c.1 == b.span_id) {
            s.oncpu_ns += on;
        } else {
            s.changed_ns += on;
        }
        s.switches += 1;
        s.last_ns = now;
        s.tid = tid;
    }
    let (trace_id, span_id) = current.unwrap_or(([0; 16], [0; 8]));
    if current.is_some() && before.is_none_or(|b| b.span_id != span_id) {
        // Seen for the first time at this switch-out: made, so its samples and its first
        // time count from here.
        let _ = span(&trace_id, &span_id, now, tid);
    }
    let after = OtelThread {
        trace_id,
        span_id,
        blocked_ns: blocked,
        runqueue_ns: runqueue,
        out_ns: now,
    };
    let _ = OTEL_THREADS.insert(&tid, &after, 0);
}

/// An on-CPU sample of target thread `tid` of `tgid` (the current task), with its stacks: a
/// sample of its span.
#[inline(always)]
pub fn sample(tgid: u32, tid: u32, user_stack: i32, kernel_stack: i32) {
    if !on() {
        return;
    }
    // SAFETY: a helper with no arguments; the task is read through bpf_probe_read_kernel.
    let task = unsafe { bpf_get_current_task() };
    let at = task + u64::from(unsafe { core::ptr::read_volatile(&TASK_FSBASE_OFFSET) });
    let Ok(fsbase) = (unsafe { bpf_probe_read_kernel(at as *const u64) }) else {
        return;
    };
    let Some((trace_id, span_id)) = read(fsbase) else {
        return;
    };
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(s) = span(&trace_id, &span_id, now, tid) {
        // SAFETY: as in `try_otel_switch`.
        let s = unsafe { &mut *s };
        s.samples += 1;
        s.last_ns = now;
    }
    let key = OtelSampleKey {
        span_id,
        tgid,
        tid,
        user_stack,
        kernel_stack,
        state: otel::ONCPU,
        _pad: 0,
    };
    add(&OTEL_SAMPLES, &key, 1);
}

/// `ns` of a thread's time off CPU by stacks and state (`k`), in the interval its last
/// switch-out began: the span its context named then, if any, gets them too. A function of
/// its own: its lookup is verified once, not at every place the switch program counts.
#[inline(never)]
pub fn offcpu(k: &OffCpuKey, ns: u64) {
    if !on() {
        return;
    }
    // SAFETY: copied at once.
    let Some(span_id) = (unsafe { OTEL_THREADS.get(&k.tid) }).map(|t| t.span_id) else {
        return;
    };
    if span_id == [0; 8] {
        return;
    }
    let key = OtelSampleKey {
        span_id,
        tgid: k.tgid,
        tid: k.tid,
        user_stack: k.user_stack,
        kernel_stack: k.kernel_stack,
        state: k.state,
        _pad: 0,
    };
    add(&OTEL_SAMPLES, &key, ns);
}
