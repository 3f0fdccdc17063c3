//! The floor's object (`switchyard floor`): empty programs on the recording's attach points,
//! and the two ways of finding a thread's entry at a switch, measured apart. A recording loads
//! only its own object, so none of this, and none of its maps, is ever created by one.
#![no_std]
#![no_main]

mod floor;
mod task;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // SAFETY: the verifier rejects any program that could reach a panic.
    unsafe { core::hint::unreachable_unchecked() }
}

// bpf_task_storage_get is GPL-only.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
