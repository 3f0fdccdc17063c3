//! CPython frames, read from the interpreter's own structures and appended to a user stack
//! after its native frames (see `switchyard_common::python` for the encoding).
//!
//! User space finds `_PyRuntime` in a Python process and the layout of its version, and lists
//! the process in `PY_PROCS`. Here the current thread's `PyThreadState` is found by its native
//! thread id (searched once along the interpreter's thread list, then cached by tid and
//! checked on each use), and its frame chain is walked from the innermost frame: one frame per
//! `bpf_loop` iteration, as for native frames. A code object is copied into `PY_CODES` the
//! first time a stack holds it, so a run can be named after the process is gone. The
//! interpreter frees code objects (a class body once its class is made, a module's body once
//! it is imported, code compiled at run time) and puts others at their addresses, so each
//! address has a generation (`PY_GENS`), moved on when the code object there is no longer the
//! one last seen, and a copy per generation.

use core::ffi::c_void;

use aya_ebpf::{
    bindings::{BPF_ANY, BPF_NOEXIST},
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_user, bpf_probe_read_user_buf,
        bpf_probe_read_user_str_bytes, generated::bpf_loop,
    },
    macros::map,
    maps::{HashMap, LruHashMap, PerCpuArray},
};
use switchyard_common::{
    PyCode, PyCodeKey, PyProc, UserStack,
    python::{
        ASCII, CODE_MASK, ENTRY, ENTRY_SHIM, FRAME_OWNED_BY_CSTACK, GEN_MASK, LASTI_MAX,
        LASTI_SHIFT, MAX_FRAMES as MAX_PY_FRAMES, MAX_THREADS, NO_CFRAME, TAG,
    },
    unwind::{MAX_FRAMES, SLOTS},
};

use crate::shared::mix;

#[map]
static PY_PROCS: HashMap<u32, PyProc> = HashMap::with_max_entries(64, 0);

#[map]
static PY_TSTATES: LruHashMap<u32, u64> = LruHashMap::with_max_entries(16384, 0);

/// Keyed by the code object's address with its generation in the low bits.
#[map]
static PY_CODES: LruHashMap<PyCodeKey, PyCode> = LruHashMap::with_max_entries(8192, 0);

/// Which code object an address held when last seen, and its generation there.
#[repr(C)]
#[derive(Clone, Copy)]
struct PyGen {
    /// The code object's file and qualified name (their `str` objects' addresses), mixed.
    ident: u64,
    generation: u64,
}

/// Keyed by the code object's address.
#[map]
static PY_GENS: LruHashMap<PyCodeKey, PyGen> = LruHashMap::with_max_entries(8192, 0);

/// One per program kind, like the unwind scratch: a perf event may interrupt a tracepoint.
#[map]
static PY_SCRATCH: PerCpuArray<PyCode> = PerCpuArray::with_max_entries(SLOTS, 0);

/// The frame being read, per program kind.
#[map]
static PY_FRAME: PerCpuArray<[u64; FRAME_WORDS]> = PerCpuArray::with_max_entries(SLOTS, 0);

/// The state of one frame walk, on the calling program's stack.
#[repr(C)]
struct PyWalk {
    proc: PyProc,
    tgid: u32,
    /// The frame to record next (0: the chain ended).
    frame: u64,
    hash: u64,
    stack: *mut UserStack,
    /// Frames in the stack so far (native and Python).
    depth: u32,
    slot: u32,
    /// Where the last Python frame was put (`u32::MAX`: none yet).
    last: u32,
}

/// Appends the current thread's Python frames to `stack` (which holds `depth` frames); returns
/// the new depth and hash. A thread that runs no Python code (or a process that is not
/// Python) adds nothing.
#[inline(always)]
pub fn append(stack: *mut UserStack, slot: u32, depth: u32, hash: u64) -> (u32, u64) {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: a map value, copied out.
    let Some(proc) = (unsafe { PY_PROCS.get(&((pid_tgid >> 32) as u32)) }).copied() else {
        return (depth, hash);
    };
    let tid = pid_tgid as u32;
    let Some(tstate) = thread_state(&proc, tid) else {
        return (depth, hash);
    };
    let Some(mut frame) = read(tstate + proc.tstate_frame as u64) else {
        return (depth, hash);
    };
    if proc.cframe_frame != NO_CFRAME {
        frame = read(frame + proc.cframe_frame as u64).unwrap_or(0);
    }
    let mut walk = PyWalk {
        proc,
        frame,
        hash,
        stack,
        depth,
        slot,
        tgid: (pid_tgid >> 32) as u32,
        last: u32::MAX,
    };
    // SAFETY: `py_step` is a static callback and `walk` lives on this stack for the loop.
    unsafe {
        bpf_loop(
            MAX_PY_FRAMES,
            py_step as *mut c_void,
            &mut walk as *mut PyWalk as *mut c_void,
            0,
        )
    };
    (walk.depth, walk.hash)
}

/// The `PyThreadState` of thread `tid`: the cached one if it still belongs to `tid`, else the
/// one the interpreter's thread list holds for it.
#[inline(always)]
fn thread_state(proc: &PyProc, tid: u32) -> Option<u64> {
    let native = proc.tstate_native_tid as u64;
    // SAFETY: a map value, copied out.
    if let Some(ts) = unsafe { PY_TSTATES.get(&tid) }.copied()
        && read(ts + native) == Some(tid as u64)
    {
        return Some(ts);
    }
    let interp = read(proc.interp_head)?;
    let mut ts = read(interp + proc.interp_threads_head as u64)?;
    for _ in 0..MAX_THREADS {
        if ts == 0 {
            return None;
        }
        if read(ts + native) == Some(tid as u64) {
            let _ = PY_TSTATES.insert(&tid, &ts, 0);
            return Some(ts);
        }
        ts = read(ts + proc.tstate_next as u64)?;
    }
    None
}

#[inline(never)]
extern "C" fn py_step(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: bpf_loop passes back the PyWalk given to it, on the caller's stack.
    let w = unsafe { &mut *(ctx as *mut PyWalk) };
    if step(w) { 0 } else { 1 }
}

/// Records `w.frame` (unless it is 3.12's C-stack shim) and moves to the previous frame.
/// Returns false to stop.
#[inline(always)]
fn step(w: &mut PyWalk) -> bool {
    let f = w.frame;
    if f == 0 {
        return false;
    }
    let p = &w.proc;
    // The frame's fields in one read where its first words are readable, else one by one.
    // Read into a map value, not the stack: the fields are picked at offsets the verifier
    // knows only as bounded, and it wants stack reads aligned.
    let words = match PY_FRAME.get_ptr_mut(w.slot) {
        // SAFETY: the per-CPU scratch of this program kind; a fault reads nothing.
        Some(buf) => unsafe {
            bpf_probe_read_user_buf(f as *const u8, &mut *(buf as *mut [u8; FRAME_WORDS * 8]))
                .ok()
                .map(|()| &*buf)
        },
        None => None,
    };
    let field = |off: u16| match words {
        Some(words) => word_at(words, off),
        None => read(f + off as u64),
    };
    let entry: u8 = match words {
        Some(words) => byte_at(words, p.frame_entry),
        None => read_u8(f + p.frame_entry as u64),
    };
    let Some(previous) = field(p.frame_previous) else {
        return false;
    };
    w.frame = previous;
    let d = w.depth as usize;
    if p.entry_mode == ENTRY_SHIM && entry == FRAME_OWNED_BY_CSTACK {
        // The frame before it (inner) was the outermost of its eval call.
        let i = w.last as usize;
        if i < MAX_FRAMES {
            // SAFETY: the caller's scratch stack; `i` is in bounds.
            unsafe {
                let slot = &mut (*w.stack).frames[i];
                if *slot & ENTRY == 0 {
                    w.hash = mix(w.hash, ENTRY);
                    *slot |= ENTRY;
                }
            }
        }
        return true;
    }
    if d >= MAX_FRAMES {
        return false;
    }
    let Some(code) = field(p.frame_code) else {
        return false;
    };
    if code == 0 {
        return true;
    }
    let instr = field(p.frame_instr).unwrap_or(0);
    let first = code + p.code_adaptive as u64;
    let lasti = if instr > first {
        ((instr - first) / 2).min(LASTI_MAX)
    } else {
        0
    };
    let is_entry = p.entry_mode != ENTRY_SHIM && entry != 0;
    let (generation, fresh) = generation(p, w.tgid, code);
    let key = PyCodeKey {
        code: code | generation,
        tgid: w.tgid,
        _pad: 0,
    };
    let word =
        TAG | if is_entry { ENTRY } else { 0 } | lasti << LASTI_SHIFT | (key.code & CODE_MASK);
    // SAFETY: the caller's scratch stack; `d` is below MAX_FRAMES.
    unsafe { (*w.stack).frames[d] = word };
    w.last = d as u32;
    w.depth += 1;
    w.hash = mix(w.hash, word);
    keep_code(p, code, &key, w.slot, fresh);
    true
}

/// The generation of the code object at `code`, and whether it is new there (first seen, or
/// another code object than the one last seen at that address). A code object is told from
/// another by its file and qualified name: one compiled anew from the same source at the same
/// address keeps the generation, and is named alike.
#[inline(always)]
fn generation(p: &PyProc, tgid: u32, code: u64) -> (u64, bool) {
    let (file, name) = (p.code_filename as u64, p.code_qualname as u64);
    let (low, high) = (file.min(name), file.max(name));
    // Both pointers in one read where they are near (3.11 to 3.13: 16 bytes apart).
    let mut near = [0u64; 4];
    // SAFETY: a read of the target's memory into a local; a fault reads nothing.
    let ident = if high - low <= 24
        && unsafe { bpf_probe_read_user_buf((code + low) as *const u8, as_bytes(&mut near)) }
            .is_ok()
    {
        mix(
            near[((file - low) / 8) as usize & 3],
            near[((name - low) / 8) as usize & 3],
        )
    } else {
        mix(
            read(code + file).unwrap_or(0),
            read(code + name).unwrap_or(0),
        )
    };
    let key = PyCodeKey {
        code,
        tgid,
        _pad: 0,
    };
    // SAFETY: a map value, copied out.
    let generation = match unsafe { PY_GENS.get(&key) }.copied() {
        Some(g) if g.ident == ident => return (g.generation, false),
        Some(g) => (g.generation + 1) & GEN_MASK,
        None => 0,
    };
    let _ = PY_GENS.insert(&key, &PyGen { ident, generation }, 0);
    (generation, true)
}

/// Copies code object `code` into `PY_CODES` as `key`: always when it is `fresh` at its
/// address (a copy of an earlier generation may hold the key), else unless it is there.
#[inline(always)]
fn keep_code(p: &PyProc, code: u64, key: &PyCodeKey, slot: u32, fresh: bool) {
    // SAFETY: only checks presence.
    if !fresh && unsafe { PY_CODES.get(key) }.is_some() {
        return;
    }
    let Some(c) = PY_SCRATCH.get_ptr_mut(slot) else {
        return;
    };
    // SAFETY: the per-CPU scratch value of this program kind.
    let c = unsafe { &mut *c };
    c.firstlineno = read_u32(code + p.code_firstlineno as u64);
    c.name_kind = string(p, read(code + p.code_qualname as u64), &mut c.name);
    c.file_kind = string(p, read(code + p.code_filename as u64), &mut c.file);
    c.linetable_len = 0;
    if let Some(table) = read(code + p.code_linetable as u64) {
        let size = read(table + p.bytes_size as u64).unwrap_or(0);
        let data = (table + p.bytes_data as u64) as *const u8;
        // SAFETY: reads of the target's memory; a fault reads nothing. A read running off
        // the end of a mapping fails whole: shorter ones follow, for a short table there.
        c.linetable_len = if size == 0 {
            0
        } else if unsafe { bpf_probe_read_user_buf(data, &mut c.linetable) }.is_ok() {
            size.min(c.linetable.len() as u64) as u32
        } else if unsafe { bpf_probe_read_user_buf(data, &mut c.linetable[..256]) }.is_ok() {
            size.min(256) as u32
        } else if unsafe { bpf_probe_read_user_buf(data, &mut c.linetable[..64]) }.is_ok() {
            size.min(64) as u32
        } else {
            0
        };
    }
    let flags = if fresh { BPF_ANY } else { BPF_NOEXIST };
    let _ = PY_CODES.insert(key, c, flags as u64);
}

/// Copies a `str` object's text into `out` if it is ASCII; returns its kind
/// (`python::ASCII`, or 0 when not read).
#[inline(always)]
fn string(p: &PyProc, obj: Option<u64>, out: &mut [u8]) -> u8 {
    out[0] = 0;
    let Some(obj) = obj else { return 0 };
    // `state`: interned:2, kind:3, compact:1, ascii:1.
    let state = read_u32(obj + p.unicode_state as u64);
    if state & (1 << 6) == 0 || state & (1 << 5) == 0 {
        return 0;
    }
    let data = (obj + p.unicode_ascii_data as u64) as *const u8;
    // SAFETY: a read of the target's memory; a fault reads nothing.
    match unsafe { bpf_probe_read_user_str_bytes(data, out) } {
        Ok(_) => ASCII,
        Err(_) => 0,
    }
}

/// The words of a frame read at once: every field the walk reads lies in its first 80 bytes
/// (3.11's is_entry at 68 is the last).
const FRAME_WORDS: usize = 10;

/// The word at byte offset `off` of a frame read at once.
#[inline(always)]
fn word_at(words: &[u64; FRAME_WORDS], off: u16) -> Option<u64> {
    let off = off as usize;
    if off > FRAME_WORDS * 8 - 8 {
        return None;
    }
    // SAFETY: `off + 8` is within the frame's words.
    Some(unsafe { core::ptr::read_unaligned((words.as_ptr() as *const u8).add(off) as *const u64) })
}

/// The byte at offset `off` of a frame read at once (0 past its end).
#[inline(always)]
fn byte_at(words: &[u64; FRAME_WORDS], off: u16) -> u8 {
    let off = off as usize;
    if off >= FRAME_WORDS * 8 {
        return 0;
    }
    // SAFETY: `off` is within the frame's words.
    unsafe { *(words.as_ptr() as *const u8).add(off) }
}

/// Four words as the bytes a read fills.
#[inline(always)]
fn as_bytes(words: &mut [u64; 4]) -> &mut [u8; 32] {
    // SAFETY: 32 bytes of plain integers, viewed as bytes for as long as the borrow.
    unsafe { &mut *(words as *mut [u64; 4] as *mut [u8; 32]) }
}

#[inline(always)]
fn read(addr: u64) -> Option<u64> {
    // SAFETY: a read of the current task's memory; a fault is an error, not a crash.
    unsafe { bpf_probe_read_user(addr as *const u64) }.ok()
}

#[inline(always)]
fn read_u32(addr: u64) -> u32 {
    // SAFETY: as `read`.
    unsafe { bpf_probe_read_user(addr as *const u32) }.unwrap_or(0)
}

#[inline(always)]
fn read_u8(addr: u64) -> u8 {
    // SAFETY: as `read`.
    unsafe { bpf_probe_read_user(addr as *const u8) }.unwrap_or(0)
}
