//! What every object of the kernel-side crate carries: the panic handler the verifier makes
//! unreachable, and the licence the kernel reads.

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // SAFETY: the verifier rejects any program that could reach a panic.
    unsafe { core::hint::unreachable_unchecked() }
}

// Helpers such as bpf_probe_read_kernel are GPL-only.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
