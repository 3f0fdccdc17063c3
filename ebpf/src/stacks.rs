//! Stack ids and the stack-keyed maps. Kernel stacks are walked by the kernel
//! (`bpf_get_stack`, `bpf_get_task_stack`), user stacks by [`crate::unwind`]; both are kept
//! by hash, and user space reads the ids' frames once at the end and symbolises them.

use aya_ebpf::{EbpfContext, macros::map, maps::HashMap};
use switchyard_common::{KERNEL_STACK_ID, MAX_STACK_KEYS, UserStack, drops, unwind};

use crate::shared::drop_event;
pub use crate::unwind::user_stack;

/// Kernel stacks, by id (see `KERNEL_STACK_ID`); sized by the loader (`--stack-map-size`).
#[map]
static KERNEL_STACKS: HashMap<i32, UserStack> = HashMap::with_max_entries(1, 0);

/// The kernel stack of `task`, which is about to run again after being off CPU: where it
/// entered the scheduler, without the tracing frames a walk from the switch itself starts
/// with.
#[inline(always)]
pub fn blocked_kernel_stack(task: *mut core::ffi::c_void) -> i32 {
    crate::unwind::task_kernel_stack(
        task,
        &KERNEL_STACKS,
        unwind::SLOT_TRACEPOINT,
        KERNEL_STACK_ID,
    )
}

/// Set by the loader before load: 1 to take stacks.
#[unsafe(no_mangle)]
static STACKS_ON: u8 = 0;

#[inline(always)]
pub fn stacks_on() -> bool {
    // SAFETY: a read-only global the loader rewrites before load.
    unsafe { core::ptr::read_volatile(&STACKS_ON) != 0 }
}

/// The user and kernel stack ids of the current task; -1 where a stack was not recorded.
/// `slot` is the program kind's scratch slot (`unwind::SLOT_*`).
///
/// With `count_missing`, a stack that could not be walked is counted in DROPS. Callers where
/// an absent stack is normal pass false: a cpu-clock sample taken in user mode has no kernel
/// stack, and a waker may be a kernel thread or an interrupt with no user stack. Collisions
/// are always counted.
#[inline(always)]
pub fn stack_ids<C: EbpfContext>(ctx: &C, slot: u32, count_missing: bool) -> (i32, i32) {
    let user = user_stack(ctx, slot, count_missing);
    let kernel = crate::unwind::current_kernel_stack(
        ctx,
        &KERNEL_STACKS,
        slot,
        KERNEL_STACK_ID,
        count_missing,
    );
    (user, kernel)
}

/// Adds `value` to `map[key]`, creating the entry; counts a full map as a drop.
#[inline(always)]
pub fn add<K>(map: &HashMap<K, u64>, key: &K, value: u64) {
    if let Some(v) = map.get_ptr_mut(key) {
        // SAFETY: a live map value; concurrent adds on two CPUs may race, and the atomic
        // add keeps them exact.
        unsafe { atomic_add(v, value) };
    } else if map.insert(key, value, 0).is_err() {
        // Another CPU may have inserted it first: add to that entry.
        match map.get_ptr_mut(key) {
            // SAFETY: as above.
            Some(v) => unsafe {
                atomic_add(v, value);
            },
            None => drop_event(drops::STACK_KEYS_FULL),
        }
    }
}

/// `*dst += value` as one atomic instruction (BPF XADD).
#[inline(always)]
pub unsafe fn atomic_add(dst: *mut u64, value: u64) {
    // SAFETY: the caller passes a live map value.
    unsafe {
        core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
            dst, value,
        )
    };
}

/// Map size of every stack-keyed map.
pub const KEYS: u32 = MAX_STACK_KEYS;
