//! User stacks walked in the kernel side, by call-frame information where an object has it and
//! by frame pointers where it has none (JIT code, Go).
//!
//! User space compiles each mapped object's `.eh_frame` / `.debug_frame` into compact rows
//! (`UnwindRow`: the CFA as rsp or rbp plus an offset, where the caller's rbp was saved) and
//! lists every process's code mappings in `MAPPINGS` (where, in `PROC_MAPS`). A walk starts from the task's user
//! registers, finds the mapping of each pc and its row by binary search, and steps to the
//! caller: return address at CFA-8, caller's rsp = CFA. One frame per `bpf_loop` iteration, so
//! the verifier checks one step, not a hundred.
//!
//! A finished stack is hashed and kept once in `USER_STACKS`; the aggregation maps key on its
//! id as they key on kernel stack ids. A walk that ends early counts its reason in DROPS.

use core::ffi::c_void;

use aya_ebpf::{
    EbpfContext,
    bindings::{BPF_F_MMAPABLE, BPF_NOEXIST},
    helpers::{
        bpf_probe_read_kernel, bpf_probe_read_user,
        generated::{
            self as raw, bpf_get_current_task_btf, bpf_get_stack, bpf_get_task_stack, bpf_loop,
            bpf_task_pt_regs,
        },
    },
    macros::map,
    maps::{Array, HashMap, PerCpuArray},
};
use switchyard_common::{
    MAX_TARGETS, UnwindMapping, UnwindProc, UnwindRow, UserStack, drops,
    unwind::{
        CFA_MASK, CFA_NONE, CFA_PLT, CFA_RBP, CFA_RSP, CFA_SCALED, COMPLETE, END,
        MAPPING_SEARCH_STEPS, MAX_FRAMES, MAX_MAPPINGS, MAX_PROCS, MAX_RETURN_INSTANCES, MODE_FP,
        NO_TABLE, RBP_SAVED, RETPROBE_FIELDS, ROW_SEARCH_STEPS, RP_MM_XOL_AREA, RP_RI_NEXT,
        RP_RI_ORIG_RET_VADDR, RP_RI_STACK, RP_TASK_MM, RP_TASK_UTASK, RP_UTASK_RETURN_INSTANCES,
        RP_XOL_VADDR, SLOTS, TABLE_FULL,
    },
};

use crate::shared::{drop_event, is_target, mix};

/// Sized by the loader (`--stack-map-size`).
#[map]
static USER_STACKS: HashMap<i32, UserStack> = HashMap::with_max_entries(1, 0);

#[map]
static UNWIND_SCRATCH: PerCpuArray<UserStack> = PerCpuArray::with_max_entries(SLOTS, 0);

/// Sized by the loader (`--unwind-rows`); user space writes the rows through a memory
/// mapping, not one syscall per row.
#[map]
static UNWIND_ROWS: Array<UnwindRow> = Array::with_max_entries(1, BPF_F_MMAPABLE);

#[map]
static PROC_MAPS: HashMap<u32, UnwindProc> = HashMap::with_max_entries(MAX_TARGETS, 0);

/// Searched by key, not by index into a value: the verifier then need not track the search
/// bounds precisely, and one step verifies as one state.
#[map]
static MAPPINGS: Array<UnwindMapping> = Array::with_max_entries(2 * MAX_PROCS * MAX_MAPPINGS, 0);

/// Bumped by user space whenever a process's mapping list changes: cached rules of an older
/// generation are not used.
#[map]
static UNWIND_GENERATION: Array<u32> = Array::with_max_entries(1, 0);

/// The rules of recently walked pcs, per CPU and per program kind (a perf event may interrupt
/// a raw tracepoint's walk, and must not write into its entries), direct-mapped by pc: a
/// server's stacks repeat, and a hit costs one lookup instead of two binary searches.
#[map]
static RULE_CACHE: PerCpuArray<CachedRule> =
    PerCpuArray::with_max_entries(RULE_CACHE_SIZE * SLOTS, 0);

const RULE_CACHE_SIZE: u32 = 4096;

#[repr(C)]
#[derive(Clone, Copy)]
struct CachedRule {
    pc: u64,
    tgid: u32,
    /// The generation it was found in, plus one (0: empty).
    generation: u32,
    row: UnwindRow,
    /// `FramePointer(reason)` when `is_row` is 0.
    reason: u32,
    is_row: u32,
}

/// Set by the loader before load: `unwind::MODE_FP` or `MODE_CFI`.
#[unsafe(no_mangle)]
static UNWIND_MODE: u8 = 0;

/// Set by the loader when spans are recorded: a span's return probe replaces the return
/// address of the function it times with the kernel's trampoline, and the walk puts the
/// original back. 0 otherwise: nothing is read.
#[unsafe(no_mangle)]
static RETURN_PROBES_ON: u8 = 0;

/// Byte offsets of the kernel fields read to do so, indexed by `unwind::RP_*`, from the running
/// kernel's BTF.
#[unsafe(no_mangle)]
static RETPROBE_OFFSETS: [u32; RETPROBE_FIELDS] = [0; RETPROBE_FIELDS];

const BPF_F_USER_STACK: u64 = 1 << 8;
/// `struct pt_regs` offsets on x86-64.
const REGS_BP: usize = 32;
const REGS_IP: usize = 128;
const REGS_SP: usize = 152;
const INT3: u8 = 0xcc;
/// User addresses are below this (47-bit user space).
const USER_TOP: u64 = 1 << 47;
/// `Walk::reason` while no drop reason applies.
const NO_REASON: u32 = u32::MAX;

/// The state of one walk, on the calling program's stack; `step` moves it one frame up.
#[repr(C)]
struct Walk {
    pc: u64,
    sp: u64,
    bp: u64,
    hash: u64,
    tgid: u32,
    /// Frames recorded so far.
    depth: u32,
    slot: u32,
    /// A `drops::UNWIND_*` reason when the walk ended early.
    reason: u32,
    /// `UNWIND_GENERATION` when the walk started.
    generation: u32,
    /// 1 when the byte before the first pc is an int3.
    after_int3: u32,
    /// 1 once the frame-pointer chain has crossed to a stack below (see
    /// `frame_pointer_step`).
    crossed: u32,
    /// The address of the return probes' trampoline in this process when the task has return
    /// addresses replaced by it; 0 otherwise.
    trampoline: u64,
    /// The next of the task's pending return instances (a kernel address) to match against a
    /// replaced return address; newer ones belong to frames already walked.
    return_instance: u64,
    /// Where `pc` was read from, when it is a return address; for the first frame, where a
    /// return address just popped was (the stack pointer less 8).
    pc_slot: u64,
}

/// Where the caller of a pc is found.
enum Rule {
    /// A CFI row.
    Row(UnwindRow),
    /// Frame pointers; if they fail, the walk ends early for this reason (`NO_REASON`: the
    /// object keeps no CFI and frame pointers are its only unwind info).
    FramePointer(u32),
}

/// The id in `USER_STACKS` of the current task's user stack; -1 when none was taken.
///
/// `slot` is the caller's scratch slot (`unwind::SLOT_*`, by program kind). With
/// `count_missing`, a task with no user registers (a kernel thread) is counted in DROPS.
#[inline(always)]
pub fn user_stack<C: EbpfContext>(ctx: &C, slot: u32, count_missing: bool) -> i32 {
    // SAFETY: a read-only global the loader rewrites before load.
    if unsafe { core::ptr::read_volatile(&UNWIND_MODE) } == MODE_FP {
        return frame_pointer_stack(ctx, slot, count_missing);
    }
    // SAFETY: the current task and its saved user registers; reads that fail read as 0.
    let (ip, sp, bp) = unsafe {
        let task = bpf_get_current_task_btf();
        let regs = bpf_task_pt_regs(task) as *const u8;
        (
            bpf_probe_read_kernel(regs.add(REGS_IP) as *const u64).unwrap_or(0),
            bpf_probe_read_kernel(regs.add(REGS_SP) as *const u64).unwrap_or(0),
            bpf_probe_read_kernel(regs.add(REGS_BP) as *const u64).unwrap_or(0),
        )
    };
    if ip == 0 || ip >= USER_TOP {
        if count_missing {
            drop_event(drops::USER_STACK_MISSING);
        }
        return -1;
    }
    // SAFETY: a read of the task's own code; a fault reads as "not a breakpoint".
    let after_int3 = matches!(
        unsafe { bpf_probe_read_user((ip - 1) as *const u8) },
        Ok(INT3)
    ) && !pushed_rbp(sp, bp);
    let mut walk = Walk {
        pc: ip,
        sp,
        bp,
        hash: 0,
        tgid: ctx.tgid(),
        depth: 0,
        slot,
        reason: NO_REASON,
        generation: UNWIND_GENERATION.get(0).copied().unwrap_or(0),
        after_int3: after_int3 as u32,
        crossed: 0,
        trampoline: 0,
        return_instance: 0,
        // An unknown number to the verifier, as every later value: a 0 here would make it tell
        // the first frame's walk state from the others'.
        pc_slot: sp.wrapping_sub(8),
    };
    pending_returns(&mut walk);
    // At the trampoline's first instruction the probed function has just returned to it:
    // the caller is where the probe found it.
    restore_return(&mut walk);
    // SAFETY: `step` is a static callback and `walk` lives on this stack for the whole loop.
    unsafe {
        bpf_loop(
            MAX_FRAMES as u32 + 1,
            step as *mut c_void,
            &mut walk as *mut Walk as *mut c_void,
            0,
        )
    };
    if walk.reason != NO_REASON {
        drop_event(walk.reason);
    }
    let complete = if walk.reason == NO_REASON {
        COMPLETE
    } else {
        0
    };
    let (depth, hash) = with_python(slot, walk.depth, walk.hash);
    keep(slot, depth as u64 | complete, hash)
}

/// Appends the thread's Python frames, if its process is Python, to the stack in `slot`.
#[inline(always)]
fn with_python(slot: u32, depth: u32, hash: u64) -> (u32, u64) {
    let depth = python_frames(slot, depth, hash) as u32;
    match UNWIND_SCRATCH.get_ptr(slot) {
        // SAFETY: the per-CPU scratch value, where `python_frames` left the hash.
        Some(buf) => (depth, unsafe { (*buf).hash }),
        None => (depth, hash),
    }
}

/// [`with_python`]'s work: the new depth, with the new hash left in the scratch value's `hash`.
/// A global function, verified once for any arguments rather than on every path of every
/// program that walks a stack (see [`unwind_rule`]).
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn python_frames(slot: u32, depth: u32, hash: u64) -> u64 {
    let Some(buf) = UNWIND_SCRATCH.get_ptr_mut(slot) else {
        return depth as u64;
    };
    let (depth, hash) = crate::python::append(buf, slot, depth, hash);
    // SAFETY: the per-CPU scratch value; `keep_in` sets the hash again before the stack is kept.
    unsafe { (*buf).hash = hash };
    depth as u64
}

/// True when the top of the user stack holds rbp: the probed instruction was a `push %rbp`
/// the kernel has already emulated (the thread is on its way back from the breakpoint), which
/// leaves ip past the int3 as well. A return address is never the frame pointer's value.
#[inline(always)]
fn pushed_rbp(sp: u64, bp: u64) -> bool {
    // SAFETY: a read of the task's own stack; a fault reads as "not pushed".
    matches!(unsafe { bpf_probe_read_user(sp as *const u64) }, Ok(top) if top == bp)
}

/// Frame pointers only, walked by the kernel's own user-stack walker. That walker puts back
/// the return addresses a span's return probe replaced itself (since Linux 6.11, newest return
/// instance first, one per trampoline address met); on older kernels they stay replaced here.
#[inline(always)]
fn frame_pointer_stack<C: EbpfContext>(ctx: &C, slot: u32, count_missing: bool) -> i32 {
    let Some(buf) = UNWIND_SCRATCH.get_ptr_mut(slot) else {
        return -1;
    };
    // SAFETY: a per-CPU scratch value owned by this program kind on this CPU.
    let n = unsafe {
        bpf_get_stack(
            ctx.as_ptr(),
            (*buf).frames.as_mut_ptr() as *mut c_void,
            (MAX_FRAMES * 8) as u32,
            BPF_F_USER_STACK,
        )
    };
    if n <= 0 {
        if count_missing {
            drop_event(drops::USER_STACK_MISSING);
        }
        return -1;
    }
    let len = (n as u64 / 8) as u32;
    // SAFETY: as above.
    let hash = hash_frames(unsafe { &*buf }, len);
    let (len, hash) = with_python(slot, len, hash);
    keep(slot, len as u64, hash)
}

/// Keeps the walked stack in `slot` (`len` frames, and the COMPLETE flag) in `USER_STACKS`
/// and returns its id.
#[inline(always)]
fn keep(slot: u32, len: u64, hash: u64) -> i32 {
    keep_in(&USER_STACKS, slot, len, hash, 0)
}

/// Keeps the stack in scratch `slot` in `map`, once per distinct stack, under an id made of
/// its hash's low bits (30 of them when `id_bit` is set, 31 otherwise) with `id_bit` set.
/// A different stack already under that id is a collision, counted.
#[inline(always)]
pub fn keep_in(map: &HashMap<i32, UserStack>, slot: u32, len: u64, hash: u64, id_bit: i32) -> i32 {
    let mask = if id_bit != 0 { id_bit - 1 } else { 0x7fff_ffff };
    let id = ((hash ^ (hash >> 32)) as i32 & mask) | id_bit;
    if let Some(v) = map.get_ptr(&id) {
        // SAFETY: a live map value, only read.
        return if unsafe { (*v).hash } == hash {
            id
        } else {
            drop_event(drops::STACK_COLLISION);
            -1
        };
    }
    let Some(buf) = UNWIND_SCRATCH.get_ptr_mut(slot) else {
        return -1;
    };
    // SAFETY: the per-CPU scratch value.
    let buf = unsafe { &mut *buf };
    buf.hash = hash;
    buf.len = len;
    if map.insert(&id, &*buf, BPF_NOEXIST as u64).is_ok() {
        return id;
    }
    // Another CPU may have kept the same stack first.
    match map.get_ptr(&id) {
        // SAFETY: as above.
        Some(v) if unsafe { (*v).hash } == hash => id,
        _ => {
            drop_event(drops::STACK_COLLISION);
            -1
        }
    }
}

/// The kernel stack of `task`, a thread that is not running (`bpf_get_task_stack`: it starts
/// where the thread called into the scheduler), kept in `map`; -1 when it could not be walked.
#[inline(always)]
pub fn task_kernel_stack(
    task: *mut c_void,
    map: &HashMap<i32, UserStack>,
    slot: u32,
    id_bit: i32,
) -> i32 {
    let Some(buf) = UNWIND_SCRATCH.get_ptr_mut(slot) else {
        return -1;
    };
    // SAFETY: a per-CPU scratch value owned by this program kind on this CPU; `task` is a
    // trusted task pointer from the tracepoint's arguments.
    let n = unsafe {
        bpf_get_task_stack(
            task as *mut _,
            (*buf).frames.as_mut_ptr() as *mut c_void,
            (MAX_FRAMES * 8) as u32,
            0,
        )
    };
    keep_kernel_stack(map, slot, buf, n, id_bit, true)
}

/// The current task's kernel stack at this program (`bpf_get_stack`), kept in `map`; -1 when
/// there is none (a sample in user mode) or it could not be walked, counted with
/// `count_missing`.
///
/// Kept by a 64-bit hash of its frames, not in a `BPF_MAP_TYPE_STACK_TRACE`: that map puts a
/// stack in the bucket its hash picks, with no second choice, so two of a few hundred
/// distinct stacks already share a bucket in a map of 16k and one of them is lost.
#[inline(always)]
pub fn current_kernel_stack<C: EbpfContext>(
    ctx: &C,
    map: &HashMap<i32, UserStack>,
    slot: u32,
    id_bit: i32,
    count_missing: bool,
) -> i32 {
    let Some(buf) = UNWIND_SCRATCH.get_ptr_mut(slot) else {
        return -1;
    };
    // SAFETY: as above; the context is the program's own.
    let n = unsafe {
        bpf_get_stack(
            ctx.as_ptr(),
            (*buf).frames.as_mut_ptr() as *mut c_void,
            (MAX_FRAMES * 8) as u32,
            0,
        )
    };
    keep_kernel_stack(map, slot, buf, n, id_bit, count_missing)
}

/// Keeps the `n` bytes of frames a kernel-stack helper wrote into scratch `slot`.
#[inline(always)]
fn keep_kernel_stack(
    map: &HashMap<i32, UserStack>,
    slot: u32,
    buf: *mut UserStack,
    n: i64,
    id_bit: i32,
    count_missing: bool,
) -> i32 {
    if n <= 0 {
        if count_missing {
            drop_event(drops::KERNEL_STACK_MISSING);
        }
        return -1;
    }
    let len = (n as u64 / 8) as u32;
    // SAFETY: the per-CPU scratch value the helper just wrote.
    let hash = hash_frames(unsafe { &*buf }, len);
    keep_in(map, slot, len as u64, hash, id_bit)
}

/// The hash of the first `len` frames of `stack`.
#[inline(always)]
fn hash_frames(stack: &UserStack, len: u32) -> u64 {
    let mut hash = 0u64;
    for i in 0..MAX_FRAMES {
        if i as u32 >= len {
            break;
        }
        hash = mix(hash, stack.frames[i]);
    }
    hash
}

/// One `bpf_loop` iteration: records the current frame and moves to its caller. Returns 1 to
/// stop.
#[inline(never)]
extern "C" fn step(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes back the Walk given to it, on the caller's stack.
    let w = unsafe { &mut *(ctx as *mut Walk) };
    if step_walk(w, index) { 0 } else { 1 }
}

/// `index` is the loop's iteration, which is the frame's depth: the verifier knows it only as
/// a bounded number, so every iteration verifies alike.
#[inline(always)]
fn step_walk(w: &mut Walk, index: u64) -> bool {
    let d = index as usize;
    if d >= MAX_FRAMES {
        w.reason = drops::UNWIND_DEPTH;
        return false;
    }
    // A caller's pc is a return address: the call itself is the byte before it (a call may be
    // a function's last instruction).
    let mut rule = cached_rule(
        w.slot,
        w.tgid,
        w.generation,
        if d == 0 { w.pc } else { w.pc - 1 },
    );
    if d == 0 && w.after_int3 != 0 {
        // In a uprobe's breakpoint trap the probed instruction has not run, but ip is already
        // past the int3: walk from the probed address, or the entry's CFA is off by a push.
        // Only where CFI covers that address: the int3 filler between functions has none.
        if let Rule::Row(row) = cached_rule(w.slot, w.tgid, w.generation, w.pc - 1) {
            w.pc -= 1;
            rule = Rule::Row(row);
        }
    }
    let Some(buf) = UNWIND_SCRATCH.get_ptr_mut(w.slot) else {
        return false;
    };
    // SAFETY: the per-CPU scratch value; `d` is below MAX_FRAMES.
    unsafe { (*buf).frames[d] = w.pc };
    w.depth = d as u32 + 1;
    w.hash = mix(w.hash, w.pc);
    let next = match rule {
        Rule::Row(row) => cfi_step(w, &row),
        Rule::FramePointer(reason) => frame_pointer_step(w, reason),
    };
    match next {
        Some(true) => {
            restore_return(w);
            true
        }
        Some(false) => false,
        None => {
            if w.reason == NO_REASON {
                w.reason = drops::UNWIND_UNREADABLE;
            }
            false
        }
    }
}

/// Steps by a CFI row. `Some(false)`: the outermost frame; `None`: a read failed.
#[inline(always)]
fn cfi_step(w: &mut Walk, row: &UnwindRow) -> Option<bool> {
    if row.kind & END != 0 {
        return Some(false);
    }
    let base = match row.kind & CFA_MASK {
        CFA_RSP => w.sp,
        CFA_RBP => w.bp,
        // A PLT row keeps the expression's threshold in `rbp_offset`.
        CFA_PLT => {
            w.sp + if w.pc & 15 >= row.rbp_offset as u64 {
                8
            } else {
                0
            }
        }
        _ => return None,
    };
    let offset = if row.kind & CFA_SCALED != 0 {
        row.cfa_offset as i64 * 8
    } else {
        row.cfa_offset as i64
    };
    let cfa = base.wrapping_add(offset as u64);
    // SAFETY: a read of the task's own stack; a fault returns an error.
    let ra = unsafe { bpf_probe_read_user((cfa - 8) as *const u64) }.ok()?;
    w.pc_slot = cfa - 8;
    if row.kind & RBP_SAVED != 0 {
        let at = cfa.wrapping_add((row.rbp_offset as i64 * 8) as u64);
        // SAFETY: a read of the task's own stack; a fault returns an error.
        w.bp = unsafe { bpf_probe_read_user(at as *const u64) }.ok()?;
    }
    // The stack grows down: a caller's frame is always above its callee's.
    if cfa <= w.sp {
        return None;
    }
    w.sp = cfa;
    w.pc = ra;
    // 0 marks the outermost frame in some runtimes; a kernel address is no return address.
    if ra >= USER_TOP {
        return None;
    }
    Some(ra != 0)
}

/// Steps by the frame pointer; `reason` is the drop reason if that fails (`NO_REASON` where
/// frame pointers are all there is).
#[inline(always)]
fn frame_pointer_step(w: &mut Walk, reason: u32) -> Option<bool> {
    if w.bp == 0 {
        // The outermost frame: the x86-64 ABI has it clear rbp (the kernel starts a process
        // with rbp 0, glibc's and Go's thread starts clear it; ld.so's _start has no CFI and
        // relies on it), so the chain ends here, complete.
        return Some(false);
    }
    // SAFETY: reads of the task's own stack; a fault returns an error.
    let (next_bp, ra) = unsafe {
        (
            bpf_probe_read_user(w.bp as *const u64),
            bpf_probe_read_user((w.bp + 8) as *const u64),
        )
    };
    // Where frame pointers are the object's only unwind info (Go, JIT code), a chain that
    // leads nowhere is how it ends, as for the kernel's own walker: not a loss.
    let (Ok(next_bp), Ok(ra)) = (next_bp, ra) else {
        w.reason = reason;
        return Some(false);
    };
    if w.bp < w.sp {
        // A caller's frame below its callee's: a loop, or another stack. Go's systemstack
        // runs a function on the thread's own stack (g0) with rbp still the goroutine's frame
        // pointer, so a Go chain crosses once to the goroutine's stack, wherever it lies; it
        // then grows upwards again. Only where frame pointers are all there is.
        if reason != NO_REASON || w.crossed != 0 {
            w.reason = reason;
            return Some(false);
        }
        w.crossed = 1;
    }
    w.pc_slot = w.bp + 8;
    w.sp = w.bp + 16;
    w.bp = next_bp;
    w.pc = ra;
    if ra == 0 || ra >= USER_TOP {
        w.reason = reason;
        return Some(false);
    }
    Some(true)
}

/// A kernel-side byte offset, from `RETPROBE_OFFSETS`.
#[inline(always)]
fn retprobe_offset(field: usize) -> u64 {
    // SAFETY: a read-only global the loader rewrites before load; `field` is a constant index.
    unsafe { core::ptr::read_volatile(&RETPROBE_OFFSETS[field]) as u64 }
}

/// The kernel word at `base + offset(field)`; 0 when it cannot be read (the helper clears its
/// destination then).
///
/// Not branching on the helper's result keeps the word an unknown number to the verifier on
/// every path: a 0 it knows on one path and not on another would make it verify the walk
/// once for each.
#[inline(always)]
fn kernel_word(base: u64, field: usize) -> u64 {
    let mut word = 0u64;
    // SAFETY: a read of kernel memory into a local; a fault leaves it 0.
    unsafe {
        raw::bpf_probe_read_kernel(
            &mut word as *mut u64 as *mut c_void,
            8,
            base.wrapping_add(retprobe_offset(field)) as *const c_void,
        )
    };
    word
}

/// True when spans are recorded. The verifier knows the value (a read-only global), and drops
/// what it guards when it is 0.
#[inline(always)]
fn return_probes_on() -> bool {
    // SAFETY: a read-only global the loader rewrites before load.
    unsafe { core::ptr::read_volatile(&RETURN_PROBES_ON) != 0 }
}

/// Sets the walk's trampoline address and newest return instance: where return probes may
/// have replaced return addresses on the current task's stack (spans are recorded, and the
/// task is inside a probed function). Both stay 0 where not: a read through a null pointer
/// (no `utask`, no pending instance, no trampoline area yet) reads 0.
#[inline(always)]
fn pending_returns(w: &mut Walk) {
    if !return_probes_on() {
        return;
    }
    // SAFETY: the current task, as an address only read through bpf_probe_read_kernel.
    let task = unsafe { raw::bpf_get_current_task() };
    let utask = kernel_word(task, RP_TASK_UTASK);
    w.return_instance = kernel_word(utask, RP_UTASK_RETURN_INSTANCES);
    let area = kernel_word(kernel_word(task, RP_TASK_MM), RP_MM_XOL_AREA);
    w.trampoline = kernel_word(area, RP_XOL_VADDR);
}

/// Where the walk's pc is a return probe's trampoline, puts back the return address it
/// replaced: the caller is where the probe found it. Done last in a step, so that the verifier
/// follows its two ways to the step's end only, not through the next frame's rule search.
#[inline(always)]
fn restore_return(w: &mut Walk) {
    if return_probes_on()
        && w.pc == w.trampoline
        && let Some(orig) = original_return(w)
    {
        w.pc = orig;
    }
}

/// The original return address of the return instance that replaced the one the walk read
/// from `pc_slot`, and the walk's next instance moved past it.
///
/// An instance keeps the stack pointer at the probed function's entry, which is where its
/// return address is: the one whose `stack` is `pc_slot`, among the next few in the list.
/// Where none is, the next one in order, as the kernel's own walker takes them (newest first,
/// one per trampoline met).
#[inline(always)]
fn original_return(w: &mut Walk) -> Option<u64> {
    if w.return_instance == 0 {
        return None;
    }
    let (mut instance, mut orig, mut next) = (w.return_instance, 0, 0);
    for _ in 0..MAX_RETURN_INSTANCES {
        if instance == 0 {
            break;
        }
        let after = kernel_word(instance, RP_RI_NEXT);
        if kernel_word(instance, RP_RI_STACK) == w.pc_slot {
            orig = kernel_word(instance, RP_RI_ORIG_RET_VADDR);
            next = after;
            break;
        }
        instance = after;
    }
    if orig == 0 {
        orig = kernel_word(w.return_instance, RP_RI_ORIG_RET_VADDR);
        next = kernel_word(w.return_instance, RP_RI_NEXT);
        if orig == 0 {
            return None;
        }
    }
    w.return_instance = next;
    Some(orig)
}

const SEARCH_MAPPINGS: u32 = 0;
const SEARCH_ROWS: u32 = 1;

/// A binary search over `[base, base + len)` of `MAPPINGS` (by start) or `UNWIND_ROWS` (by
/// pc), for the first entry above `key`.
#[repr(C)]
struct Search {
    key: u64,
    base: u32,
    lo: u32,
    hi: u32,
    which: u32,
}

/// The index (from `base`) of the first entry whose start is above `key`: 0 when none is at
/// or below it. One `bpf_loop` iteration per step, so the verifier checks one step whatever
/// the bounds; a plain loop makes it follow every path through every step.
#[inline(always)]
fn search(which: u32, base: u32, len: u32, key: u64, steps: u32) -> u32 {
    let mut s = Search {
        key,
        base,
        lo: 0,
        hi: len,
        which,
    };
    // SAFETY: `search_step` is a static callback and `s` lives on this stack for the loop.
    unsafe {
        bpf_loop(
            steps,
            search_step as *mut c_void,
            &mut s as *mut Search as *mut c_void,
            0,
        )
    };
    s.lo
}

#[inline(never)]
extern "C" fn search_step(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes back the Search given to it, on the caller's stack.
    let s = unsafe { &mut *(ctx as *mut Search) };
    if s.lo >= s.hi {
        return 1;
    }
    let mid = s.lo + (s.hi - s.lo) / 2;
    let start = if s.which == SEARCH_MAPPINGS {
        match MAPPINGS.get(s.base + mid) {
            Some(m) => m.start,
            None => return 1,
        }
    } else {
        match UNWIND_ROWS.get(s.base + mid) {
            Some(r) => r.pc as u64,
            None => return 1,
        }
    };
    if start <= s.key {
        s.lo = mid + 1;
    } else {
        s.hi = mid;
    }
    0
}

/// [`rule`], through the per-CPU cache.
#[inline(always)]
fn cached_rule(slot: u32, tgid: u32, generation: u32, pc: u64) -> Rule {
    let index =
        slot * RULE_CACHE_SIZE + (((pc ^ (pc >> 12) ^ tgid as u64) as u32) & (RULE_CACHE_SIZE - 1));
    let Some(e) = RULE_CACHE.get_ptr_mut(index) else {
        return rule(tgid, pc);
    };
    // SAFETY: this CPU's entry for this program kind; programs of one kind do not nest on a
    // CPU.
    let e = unsafe { &mut *e };
    if e.pc == pc && e.tgid == tgid && e.generation == generation.wrapping_add(1) {
        return if e.is_row != 0 {
            Rule::Row(e.row)
        } else {
            Rule::FramePointer(e.reason)
        };
    }
    let r = rule(tgid, pc);
    e.pc = pc;
    e.tgid = tgid;
    e.generation = generation.wrapping_add(1);
    match r {
        Rule::Row(row) => {
            e.row = row;
            e.is_row = 1;
        }
        Rule::FramePointer(reason) => {
            e.reason = reason;
            e.is_row = 0;
        }
    }
    r
}

/// How to find the caller of `pc` in process `tgid`: [`unwind_rule`]'s answer, decoded.
#[inline(always)]
fn rule(tgid: u32, pc: u64) -> Rule {
    let found = unwind_rule(tgid, pc);
    if found & BY_FRAME_POINTER != 0 {
        return Rule::FramePointer(found as u32);
    }
    match UNWIND_ROWS.get(found as u32) {
        Some(row) => Rule::Row(*row),
        None => Rule::FramePointer(drops::UNWIND_NO_CFI),
    }
}

/// Set in [`unwind_rule`]'s answer when frame pointers are the rule; the low 32 bits are then
/// the drop reason if they fail (`NO_REASON` for none).
const BY_FRAME_POINTER: u64 = 1 << 63;

/// The `UNWIND_ROWS` index of the row for `pc` in process `tgid`, or [`BY_FRAME_POINTER`] and
/// a reason.
///
/// A global function: the kernel verifies it once, for any arguments, and each call as a call
/// to it. Inlined, its two searches were verified again on every path of every program that
/// walks a stack, which was most of the time a recording took to start.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn unwind_rule(tgid: u32, pc: u64) -> u64 {
    let by_fp = |reason: u32| BY_FRAME_POINTER | reason as u64;
    let key = tgid;
    let Some(p) = PROC_MAPS.get_ptr(&key) else {
        // A process with no tables: a waker outside the targets (frame pointers are its
        // unwind info), or a target whose tables are not loaded yet (a loss if they fail).
        return by_fp(if is_target(tgid) {
            drops::UNWIND_NO_CFI
        } else {
            NO_REASON
        });
    };
    // SAFETY: a live map value, only read.
    let (slot, count) = unsafe { ((*p).slot, (*p).count) };
    if slot >= 2 * MAX_PROCS || count > MAX_MAPPINGS {
        return by_fp(drops::UNWIND_NO_CFI);
    }
    let first = slot * MAX_MAPPINGS;
    // The first mapping starting above pc.
    let lo = search(SEARCH_MAPPINGS, first, count, pc, MAPPING_SEARCH_STEPS);
    if lo == 0 {
        // Anonymous code (JIT): frame pointers are all there is.
        return by_fp(NO_REASON);
    }
    let Some(m) = MAPPINGS.get(first + lo - 1) else {
        return by_fp(NO_REASON);
    };
    if pc >= m.end {
        return by_fp(NO_REASON);
    }
    if m.first_row == TABLE_FULL {
        return by_fp(drops::UNWIND_TABLE_FULL);
    }
    if m.first_row == NO_TABLE {
        return by_fp(drops::UNWIND_NO_CFI);
    }
    if m.rows == 0 {
        return by_fp(NO_REASON);
    }
    let rel = pc.wrapping_sub(m.bias);
    if rel > u32::MAX as u64 {
        return by_fp(drops::UNWIND_NO_CFI);
    }
    let rel = rel as u32;
    let (first, rows) = (m.first_row, m.rows);
    // The first row starting above rel.
    let lo = search(SEARCH_ROWS, first, rows, rel as u64, ROW_SEARCH_STEPS);
    if lo == 0 {
        return by_fp(drops::UNWIND_NO_CFI);
    }
    let index = first + lo - 1;
    match UNWIND_ROWS.get(index) {
        Some(row) if row.kind & CFA_MASK != CFA_NONE || row.kind & END != 0 => index as u64,
        _ => by_fp(drops::UNWIND_NO_CFI),
    }
}
