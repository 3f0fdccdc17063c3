//! Go GC events of an unmodified Go binary: entry-only uprobes on runtime functions (a return
//! probe would crash Go, which moves goroutine stacks). The cookie is the event kind; every
//! event is counted per CPU and streamed with its timestamp through a ring buffer.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, generated::bpf_get_attach_cookie},
    macros::{map, uprobe},
    maps::{PerCpuArray, RingBuf},
    programs::ProbeContext,
};
use switchyard_common::{GcEvent, drops, gc};

use crate::shared::{RING_NO_WAKEUP, drop_event, is_target, recording};

#[map]
static GC_EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

#[map]
static GC_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(gc::KINDS, 0);

#[uprobe]
pub fn go_gc(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) || !recording() {
        return 0;
    }
    // SAFETY: the cookie the loader attached with: the event kind.
    let kind = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) } as u32;
    if kind >= gc::KINDS {
        return 0;
    }
    if let Some(c) = GC_COUNTS.get_ptr_mut(kind) {
        // SAFETY: a per-CPU slot.
        unsafe { *c += 1 };
    }
    let event = GcEvent {
        ts: unsafe { bpf_ktime_get_ns() },
        kind,
        tid: pid_tgid as u32,
    };
    if GC_EVENTS.output::<GcEvent>(&event, RING_NO_WAKEUP).is_err() {
        drop_event(drops::GC_EVENTS_FULL);
    }
    0
}
