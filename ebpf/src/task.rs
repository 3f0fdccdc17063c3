//! A task's ids, read at the kernel's own offsets: shared by the recording's object and the
//! floor's.

/// Byte offsets of `pid` and `tgid` in the kernel's `struct task_struct`, set by the loader
/// before load (from the kernel's BTF).
#[unsafe(no_mangle)]
pub static TASK_PID_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static TASK_TGID_OFFSET: u32 = 0;

/// A task's (pid, tgid), `task` being one of a tracepoint's own task pointers.
#[inline(always)]
pub fn task_ids(task: *mut core::ffi::c_void) -> (u32, u32) {
    // SAFETY: the tracepoint's task pointers are trusted by the verifier; the offsets are the
    // loader's, from the kernel's BTF, and the verifier checks each load.
    unsafe {
        let base = task as *const u8;
        (
            *(base.add(core::ptr::read_volatile(&TASK_PID_OFFSET) as usize) as *const u32),
            *(base.add(core::ptr::read_volatile(&TASK_TGID_OFFSET) as usize) as *const u32),
        )
    }
}
