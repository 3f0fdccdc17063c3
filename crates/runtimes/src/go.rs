//! Go: goroutine and scheduler stacks, the scheduler's parks and its search for work, the
//! garbage collector's waits and work, and the standard library.

use crate::{Frames, Runtime};

pub struct Go;

impl Runtime for Go {
    fn name(&self) -> &'static str {
        "go"
    }

    fn frames(&self) -> &'static Frames {
        &FRAMES
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
        "runtime.gcBgMarkWorker",
        "runtime.forEachP",
    ],
    // Mark workers (dedicated, fractional, idle), assists, sweeping.
    gc_work: &[
        "runtime.gcBgMarkWorker",
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
