//! The floor: empty programs on the attach points the recording uses, for `switchyard floor`.
//! They read nothing and write nothing, so what they add to a syscall or a context switch is
//! the least any tracer with these attach points can cost: the kernel's dispatch alone.
//! They live in an object of their own, which a recording never loads.
//!
//! Three more on `sched_switch` measure what a switch program's parts cost: one exact clock
//! read kept per CPU (the recording's switch program reads one at every switch), and finding
//! a thread's entry one way or the other: in an array by tid (as the recording does) or in
//! task storage.

use core::ffi::c_void;

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_LOCAL_STORAGE_GET_F_CREATE, bpf_map_type, task_struct},
    helpers::{bpf_ktime_get_ns, generated::bpf_task_storage_get},
    macros::{btf_tracepoint, map, raw_tracepoint},
    maps::{Array, PerCpuArray},
    programs::{BtfTracePointContext, RawTracePointContext},
};

use crate::task::task_ids;

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn floor_sys_enter(_ctx: RawTracePointContext) -> i32 {
    0
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn floor_sys_exit(_ctx: RawTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "sched_switch")]
pub fn floor_sched_switch(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// Each CPU's last switch, as the clock floor keeps it.
#[map]
static FLOOR_LAST_SWITCH: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// The floor plus one exact clock read, kept per CPU: what the recording's switch program pays
/// at every switch before it looks at either thread, and what no exact timing of switches can
/// go without (a count alone, as bpftrace's, reads no clock).
#[btf_tracepoint(function = "sched_switch")]
pub fn floor_switch_clock(_ctx: BtfTracePointContext) -> i32 {
    // SAFETY: a helper with no arguments.
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(slot) = FLOOR_LAST_SWITCH.get_ptr_mut(0) {
        // SAFETY: the per-CPU slot; switches on one CPU do not run concurrently.
        unsafe { *slot = now };
    }
    0
}

/// Entries of a thread the two lookup floors below keep: its tid and its switches.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FloorEntry {
    tid: u32,
    _pad: u32,
    switches: u64,
}

/// Slots for [`floor_switch_array`], one per tid up to the kernel's default pid_max, as
/// `THREADS` has.
const FLOOR_SLOTS: u32 = 32_768;

#[map]
static FLOOR_THREADS: Array<FloorEntry> = Array::with_max_entries(FLOOR_SLOTS, 0);

/// The floor plus what the switch program pays today to find both threads' entries: an array
/// slot by `tid & mask`, its owner checked, and a count kept in it.
#[btf_tracepoint(function = "sched_switch")]
pub fn floor_switch_array(ctx: BtfTracePointContext) -> i32 {
    // sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next, ...)
    let prev: *mut c_void = ctx.arg(1);
    let next: *mut c_void = ctx.arg(2);
    for task in [prev, next] {
        let (tid, _) = task_ids(task);
        if let Some(e) = FLOOR_THREADS.get_ptr_mut(tid & (FLOOR_SLOTS - 1)) {
            // SAFETY: a live array value; racing CPUs only lose a count, and this is a floor.
            unsafe {
                if (*e).tid != tid {
                    (*e).tid = tid;
                    (*e).switches = 0;
                }
                (*e).switches += 1;
            }
        }
    }
    0
}

/// A task storage map (`BPF_MAP_TYPE_TASK_STORAGE`) declared by its BTF, as libbpf's
/// `SEC(".maps")` structs are: the released aya-ebpf has no type for it. Its fields are
/// never read; the loader reads their types.
#[repr(C)]
pub struct FloorTaskStorage {
    r#type: *const [i32; bpf_map_type::BPF_MAP_TYPE_TASK_STORAGE as usize],
    key: *const i32,
    value: *const FloorEntry,
    max_entries: *const [i32; 0],
    map_flags: *const [i32; BPF_F_NO_PREALLOC as usize],
}

// SAFETY: placeholder pointers the loader replaces with the map; never dereferenced.
unsafe impl Sync for FloorTaskStorage {}

#[unsafe(link_section = ".maps")]
#[unsafe(export_name = "FLOOR_TASKS")]
static FLOOR_TASKS: FloorTaskStorage = FloorTaskStorage {
    r#type: core::ptr::null(),
    key: core::ptr::null(),
    value: core::ptr::null(),
    max_entries: core::ptr::null(),
    map_flags: core::ptr::null(),
};

/// The floor plus the same two entries found in task storage: each task's own, created the
/// first time it is seen, freed with the task.
#[btf_tracepoint(function = "sched_switch")]
pub fn floor_switch_task_storage(ctx: BtfTracePointContext) -> i32 {
    let prev: *mut task_struct = ctx.arg(1);
    let next: *mut task_struct = ctx.arg(2);
    for task in [prev, next] {
        // SAFETY: the tracepoint's task pointers are trusted; the map is a task storage map.
        let e = unsafe {
            bpf_task_storage_get(
                core::ptr::from_ref(&FLOOR_TASKS).cast_mut().cast(),
                task,
                core::ptr::null_mut(),
                u64::from(BPF_LOCAL_STORAGE_GET_F_CREATE),
            )
        }
        .cast::<FloorEntry>();
        if !e.is_null() {
            // SAFETY: the task's own storage, zeroed when created.
            unsafe { (*e).switches += 1 };
        }
    }
    0
}
