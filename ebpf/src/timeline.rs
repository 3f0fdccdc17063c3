//! The timeline (`--timeline`): timestamped events streamed through one ring buffer, beside
//! the aggregates (which count every event whether or not it fits). A full ring loses the
//! event and counts the loss.

use aya_ebpf::{helpers::bpf_get_smp_processor_id, macros::map, maps::RingBuf};
use switchyard_common::{TimelineEvent, drops};

use crate::shared::{RING_NO_WAKEUP, drop_event};

/// Set by the loader before load: 1 to stream.
#[unsafe(no_mangle)]
static TIMELINE_ON: u8 = 0;

/// Set by the loader before load: syscalls at least this long are streamed.
#[unsafe(no_mangle)]
static TIMELINE_SYSCALL_NS: u64 = 0;

/// Sized by the loader (`--timeline-buffer`); one page when the timeline is off.
#[map]
static TIMELINE: RingBuf = RingBuf::with_byte_size(4096, 0);

#[inline(always)]
pub fn on() -> bool {
    // SAFETY: a read-only global the loader rewrites before load.
    unsafe { core::ptr::read_volatile(&TIMELINE_ON) != 0 }
}

#[inline(always)]
pub fn syscall_threshold() -> u64 {
    // SAFETY: as above.
    unsafe { core::ptr::read_volatile(&TIMELINE_SYSCALL_NS) }
}

/// Streams one event (the caller checked `on()`).
#[inline(always)]
pub fn emit(kind: u32, ts: u64, value: u64, tid: u32, a: u32, b: u32, c: u32) {
    let event = TimelineEvent {
        ts,
        value,
        tid,
        kind,
        a,
        b,
        c,
        // SAFETY: a helper with no arguments.
        cpu: unsafe { bpf_get_smp_processor_id() },
    };
    if TIMELINE
        .output::<TimelineEvent>(&event, RING_NO_WAKEUP)
        .is_err()
    {
        drop_event(drops::TIMELINE_FULL);
    }
}
