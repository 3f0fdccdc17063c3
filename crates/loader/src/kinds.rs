//! The kernel side's numeric kinds, decoded where they are read: why something was lost or
//! cut (the `DROPS` array), and which Go runtime function a GC probe saw.

use switchyard_common::{drops, gc};

/// Why the kernel side lost or cut something; counted per kind in the run's drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropKind {
    InflightFull,
    ThreadsFull,
    SyscallNumber,
    ErrnosFull,
    TargetsFull,
    StackCollision,
    UserStackMissing,
    KernelStackMissing,
    StackKeysFull,
    GcEventsFull,
    UnwindNoCfi,
    UnwindTableFull,
    UnwindDepth,
    UnwindUnreadable,
    SwitchInMissed,
    SwitchOutMissed,
    TimelineFull,
    SpanEventsFull,
}

impl DropKind {
    const ALL: [DropKind; 18] = [
        DropKind::InflightFull,
        DropKind::ThreadsFull,
        DropKind::SyscallNumber,
        DropKind::ErrnosFull,
        DropKind::TargetsFull,
        DropKind::StackCollision,
        DropKind::UserStackMissing,
        DropKind::KernelStackMissing,
        DropKind::StackKeysFull,
        DropKind::GcEventsFull,
        DropKind::UnwindNoCfi,
        DropKind::UnwindTableFull,
        DropKind::UnwindDepth,
        DropKind::UnwindUnreadable,
        DropKind::SwitchInMissed,
        DropKind::SwitchOutMissed,
        DropKind::TimelineFull,
        DropKind::SpanEventsFull,
    ];

    /// The kind at `index` of the kernel's `DROPS` array.
    pub fn from_index(index: u32) -> Option<DropKind> {
        DropKind::ALL.into_iter().find(|k| k.index() == index)
    }

    /// Its index in the kernel's `DROPS` array.
    pub fn index(self) -> u32 {
        match self {
            DropKind::InflightFull => drops::INFLIGHT_FULL,
            DropKind::ThreadsFull => drops::THREADS_FULL,
            DropKind::SyscallNumber => drops::SYSCALL_NR,
            DropKind::ErrnosFull => drops::ERRNOS_FULL,
            DropKind::TargetsFull => drops::TARGETS_FULL,
            DropKind::StackCollision => drops::STACK_COLLISION,
            DropKind::UserStackMissing => drops::USER_STACK_MISSING,
            DropKind::KernelStackMissing => drops::KERNEL_STACK_MISSING,
            DropKind::StackKeysFull => drops::STACK_KEYS_FULL,
            DropKind::GcEventsFull => drops::GC_EVENTS_FULL,
            DropKind::UnwindNoCfi => drops::UNWIND_NO_CFI,
            DropKind::UnwindTableFull => drops::UNWIND_TABLE_FULL,
            DropKind::UnwindDepth => drops::UNWIND_DEPTH,
            DropKind::UnwindUnreadable => drops::UNWIND_UNREADABLE,
            DropKind::SwitchInMissed => drops::SWITCH_IN_MISSED,
            DropKind::SwitchOutMissed => drops::SWITCH_OUT_MISSED,
            DropKind::TimelineFull => drops::TIMELINE_FULL,
            DropKind::SpanEventsFull => drops::SPAN_EVENTS_FULL,
        }
    }

    /// What was lost, as the run file and the summary say it.
    pub fn reason(self) -> &'static str {
        drops::NAMES[self.index() as usize]
    }
}

/// The Go runtime function a GC probe fired on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GcKind {
    /// `runtime.gcStart`: a goroutine asks for a cycle (several may, for one cycle).
    Start,
    /// `runtime.gcMarkTermination`: once per completed cycle.
    MarkTermination,
    /// `runtime.stopTheWorldWithSema`.
    StopTheWorld,
    /// `runtime.startTheWorldWithSema`.
    StartTheWorld,
    /// `runtime.gcMarkDone`: a worker thinks marking is done.
    MarkDone,
    /// `runtime.gcAssistAlloc`: an allocating goroutine is drafted into marking.
    MarkAssist,
}

impl GcKind {
    pub const ALL: [GcKind; gc::KINDS as usize] = [
        GcKind::Start,
        GcKind::MarkTermination,
        GcKind::StopTheWorld,
        GcKind::StartTheWorld,
        GcKind::MarkDone,
        GcKind::MarkAssist,
    ];

    /// The kind the kernel side numbered `index` (`switchyard_common::gc`).
    pub fn from_index(index: u32) -> Option<GcKind> {
        GcKind::ALL.into_iter().find(|k| k.index() == index)
    }

    /// The runtime function its probe attaches to.
    pub fn symbol(self) -> &'static str {
        gc::SYMBOLS[self.index() as usize].1
    }

    pub fn index(self) -> u32 {
        match self {
            GcKind::Start => gc::START,
            GcKind::MarkTermination => gc::MARK_TERMINATION,
            GcKind::StopTheWorld => gc::STOP_THE_WORLD,
            GcKind::StartTheWorld => gc::START_THE_WORLD,
            GcKind::MarkDone => gc::MARK_DONE,
            GcKind::MarkAssist => gc::MARK_ASSIST,
        }
    }
}

/// One Go runtime GC event, with its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcEvent {
    /// CLOCK_MONOTONIC ns.
    pub mono_ns: u64,
    pub kind: GcKind,
    pub tid: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_index_decodes_to_its_kind_and_back() {
        for i in 0..drops::COUNT {
            if let Some(k) = DropKind::from_index(i) {
                assert_eq!(k.index(), i);
                assert_eq!(k.reason(), drops::NAMES[i as usize]);
            }
        }
        assert_eq!(DropKind::ALL.len(), drops::COUNT as usize);
        assert_eq!(DropKind::from_index(drops::COUNT), None);
        for i in 0..gc::KINDS {
            assert_eq!(GcKind::from_index(i).map(GcKind::index), Some(i));
            assert_eq!(gc::SYMBOLS[i as usize].0, i);
        }
        assert_eq!(GcKind::from_index(gc::KINDS), None);
    }
}
