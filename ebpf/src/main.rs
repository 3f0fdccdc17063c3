//! Kernel side of switchyard: count, time and aggregate in maps; user space does the rest.
//!
//! One module per concern. Every program is a thin wrapper around a `try_` function, and every
//! event that cannot be recorded is counted in `DROPS` so the user sees it.
#![no_std]
#![no_main]
// BPF has no compare-and-swap: `atomic_xadd` is the one atomic read-modify-write it offers.
#![feature(core_intrinsics)]
#![allow(
    internal_features,
    reason = "atomic_xadd is the only atomic add that lowers to BPF XADD"
)]
#![allow(
    clippy::needless_borrows_for_generic_args,
    reason = "map keys and values go by reference so they are not copied again on the 512-byte BPF stack"
)]

mod follow;
mod gc;
mod goroutines;
mod inflight;
mod locks;
mod object;
mod oncpu;
mod otelctx;
mod python;
mod sampling;
mod sched;
mod shared;
mod spans;
mod stacks;
mod syscalls;
mod task;
mod threads;
mod timeline;
mod unwind;
mod wakeup;
