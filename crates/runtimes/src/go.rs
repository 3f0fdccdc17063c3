//! Go: goroutine and scheduler stacks, the scheduler's parks and its search for work, the
//! garbage collector's waits and work, and the standard library; where a Go function's body
//! starts ([`prologue`]), the names of its wait reasons ([`reasons`]) and whether a binary carries the Go runtime ([`has_gc_runtime`]).

use std::path::Path;

use crate::{Frames, Kind, Runtime};

pub mod prologue;
pub mod reasons;

pub struct Go;

impl Runtime for Go {
    fn name(&self) -> &'static str {
        "go"
    }

    fn frames(&self) -> &'static Frames {
        &FRAMES
    }
}

/// True when `binary`'s symbol table has the Go runtime's GC entry point, which the GC probes
/// attach to (a stripped Go binary has none, and gets no GC probes).
pub fn has_gc_runtime(binary: &Path) -> bool {
    use object::{Object, ObjectSymbol};
    let Ok(data) = std::fs::read(binary) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*data) else {
        return false;
    };
    let start = switchyard_common::gc::SYMBOLS[switchyard_common::gc::START as usize].1;
    file.symbols().any(|s| s.name() == Ok(start))
}

/// The collector's background mark worker: the site of its own work on CPU.
pub const MARK_WORKER: &str = "runtime.gcBgMarkWorker";

/// Whether `name` is the runtime's own (`runtime.…`, `internal/…`): a walk that stopped there
/// names no site of the program's.
pub fn is_runtime(name: &str) -> bool {
    name.starts_with("runtime.") || name.starts_with("internal/")
}

/// The kind of a Go wait reason (`runtime.waitReasonStrings`' names): sync's locks, the
/// network poller, channels, timers, the GC's own waits.
pub fn reason_kind(reason: &str) -> Kind {
    let r = reason.to_ascii_lowercase();
    // "semacquire" alone is the runtime's own semaphores (a GC's start, stopping the world)
    // as much as a program's: left as blocked.
    if r.contains("mutex") || r.starts_with("sync.") {
        Kind::Lock
    } else if r.contains("io wait") {
        Kind::Net
    } else if r.contains("chan") || r.contains("select") {
        Kind::Ipc
    } else if r.contains("sleep") {
        Kind::Sleep
    } else if r.contains("gc") || r.contains("preempted") || r.contains("garbage") {
        Kind::Gc
    } else {
        Kind::Blocked
    }
}

/// Whether `name` roots a goroutine's or a scheduler's stack: only Go's threads have one.
pub fn is_thread_root(name: &str) -> bool {
    FRAMES.thread_roots.contains(&name)
}

const FRAMES: Frames = Frames {
    thread_roots: &[
        "runtime.goexit",
        "runtime.goexit.abi0",
        "runtime.rt0_go",
        "runtime.rt0_go.abi0",
        "runtime.mstart",
        "runtime.mstart.abi0",
        // A scheduler stack (g0) starts where a goroutine's stack switched to it.
        "runtime.mcall",
        "runtime.systemstack",
        "runtime.systemstack.abi0",
        "runtime.morestack",
        "runtime.morestack.abi0",
    ],
    parks: &[
        "runtime.notesleep",
        "runtime.stopm",
        "runtime.mPark",
        "runtime.netpollblock",
    ],
    // The scheduler finding no work, and its background monitor.
    idle_loops: &[
        "runtime.findRunnable",
        "runtime.findrunnable",
        "runtime.stopm",
        "runtime.sysmon",
        "runtime.runqgrab",
        "runtime.notesleep",
    ],
    gc_waits: &[
        "runtime.gcAssistAlloc",
        "runtime.gcParkAssist",
        "runtime.stopTheWorld",
        "runtime.gcStart",
        "runtime.gcMarkDone",
        MARK_WORKER,
        "runtime.forEachP",
    ],
    // Mark workers (dedicated, fractional, idle), assists, sweeping.
    gc_work: &[
        MARK_WORKER,
        "runtime.gcAssistAlloc",
        "runtime.gcDrain",
        "runtime.bgsweep",
        "runtime.markroot",
    ],
    gc_assists: &["runtime.gcAssistAlloc"],
    allocating: &["runtime.mallocgc"],
    // The runtime and the standard library: the program's own functions are main.… and its
    // packages'.
    library_prefixes: &[
        "runtime.",
        "syscall.",
        "internal/",
        "net.",
        "net/",
        "bufio.",
        "io.",
        "os.",
        "sync.",
        "fmt.",
        "time.",
        "bytes.",
        "strings.",
        "strconv.",
        "encoding/",
        "crypto/",
        "compress/",
        "context.",
        "reflect.",
        "sort.",
    ],
    ..Frames::NONE
};
