//! The floor: empty programs on the attach points the recording uses, for `switchyard floor`.
//! They read nothing and write nothing, so what they add to a syscall or a context switch is
//! the least any tracer with these attach points can cost: the kernel's dispatch alone.
//! Never attached by a recording.

use aya_ebpf::{
    macros::{btf_tracepoint, raw_tracepoint},
    programs::{BtfTracePointContext, RawTracePointContext},
};

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
