//! What a thread waited on, read from the stack it waited in: the kernel frames say which
//! wait (futex, block I/O, socket, timer, page fault), the user frames say what for (a
//! mutex, a condvar, an event loop) and where (the innermost function of the program's own).
//!
//! **The idle rule.** A wait is idle when the thread was waiting for work to arrive, not for
//! a resource its work needs:
//! - an event-wait call: `epoll_wait`, `poll`, `select` (and their `p` forms), `accept`;
//! - a park: a condition variable (`pthread_cond_*wait`, Rust's `Condvar`), a thread park,
//!   a channel receive, joining a thread, or the Go scheduler looking for work or putting a
//!   thread to sleep (`runtime.findRunnable`, `runtime.stopm`, `runtime.notesleep`), and its
//!   monitor (`runtime.sysmon`).
//!
//! A socket read or write that blocks is a network wait, a mutex is a lock, whatever woke
//! them. The rule needs stacks; without them no wait is called idle.

use serde::{Deserialize, Serialize};
use switchyard_model::{Frame, FrameKind, Label};

/// Why a thread was not running, or that it was.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Runnable, waiting for a CPU: preempted, or woken and not yet run.
    Cpu,
    /// A lock: a futex wait on a mutex (pthread, Rust std, Go runtime), or kernel lock
    /// contention.
    Lock,
    /// Block-device I/O (uninterruptible sleep in the I/O path: fsync, reads that miss).
    Io,
    /// A socket read, write or connect that blocked.
    Net,
    /// A timer: nanosleep, clock_nanosleep.
    Sleep,
    /// A page fault that slept (file-backed, swap, or a page lock).
    Fault,
    /// The Go garbage collector: assists and stop-the-world pauses.
    Gc,
    /// A pipe, or waiting for a child process.
    Ipc,
    /// Blocked, for a reason the stack does not tell (or without a stack).
    #[default]
    Blocked,
    /// Running on a CPU.
    Oncpu,
    /// Waiting for work (see the idle rule above).
    Idle,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Lock => "lock",
            Kind::Io => "io",
            Kind::Net => "net",
            Kind::Sleep => "sleep",
            Kind::Fault => "fault",
            Kind::Gc => "gc",
            Kind::Ipc => "ipc",
            Kind::Blocked => "blocked",
            Kind::Oncpu => "oncpu",
            Kind::Idle => "idle",
        }
    }

    /// The wait in a few words, as a sentence's object: "waited for a CPU".
    pub fn verb(self) -> &'static str {
        match self {
            Kind::Cpu => "waited for a CPU",
            Kind::Lock => "waited for a lock",
            Kind::Io => "waited on block I/O",
            Kind::Net => "waited on the network",
            Kind::Sleep => "slept on a timer",
            Kind::Fault => "waited on page faults",
            Kind::Gc => "waited on the Go GC",
            Kind::Ipc => "waited on a pipe or child",
            Kind::Blocked => "was blocked",
            Kind::Oncpu => "ran on CPU",
            Kind::Idle => "was idle, waiting for work,",
        }
    }

    /// A wait: every kind but running.
    pub fn is_wait(self) -> bool {
        self != Kind::Oncpu
    }
}

/// Kernel frames, innermost checks first, each with the kind it means.
const KERNEL: &[(&str, Kind)] = &[
    // Page faults first: a fault can sleep on a page lock or on I/O.
    ("exc_page_fault", Kind::Fault),
    ("do_user_addr_fault", Kind::Fault),
    ("handle_mm_fault", Kind::Fault),
    // Event waits: the epoll/poll/select wait (its timeout is an hrtimer too).
    ("do_epoll_wait", Kind::Idle),
    ("ep_poll", Kind::Idle),
    ("do_sys_poll", Kind::Idle),
    ("do_select", Kind::Idle),
    ("core_sys_select", Kind::Idle),
    ("inet_csk_accept", Kind::Idle),
    ("unix_accept", Kind::Idle),
    // Kernel locks.
    ("__mutex_lock", Kind::Lock),
    ("rwsem_down_read_slowpath", Kind::Lock),
    ("rwsem_down_write_slowpath", Kind::Lock),
    ("rt_mutex_slowlock", Kind::Lock),
    ("percpu_rwsem_wait", Kind::Lock),
    // Sockets.
    ("sk_wait_data", Kind::Net),
    ("sk_stream_wait_memory", Kind::Net),
    ("sk_stream_wait_connect", Kind::Net),
    ("inet_wait_for_connect", Kind::Net),
    ("__skb_wait_for_more_packets", Kind::Net),
    ("__skb_recv_datagram", Kind::Net),
    ("sock_alloc_send_pskb", Kind::Net),
    ("unix_stream_read_generic", Kind::Net),
    ("unix_dgram_recvmsg", Kind::Net),
    ("__skb_recv_udp", Kind::Net),
    ("udp_recvmsg", Kind::Net),
    ("tcp_recvmsg", Kind::Net),
    ("tcp_sendmsg", Kind::Net),
    ("sock_recvmsg", Kind::Net),
    ("sock_sendmsg", Kind::Net),
    // Block I/O.
    ("io_schedule", Kind::Io),
    ("jbd2_log_wait_commit", Kind::Io),
    ("file_write_and_wait_range", Kind::Io),
    ("blkdev_issue_flush", Kind::Io),
    ("submit_bio_wait", Kind::Io),
    ("folio_wait_bit", Kind::Io),
    ("folio_wait_bit_common", Kind::Io),
    ("wait_on_page_bit", Kind::Io),
    ("vfs_fsync_range", Kind::Io),
    ("do_fsync", Kind::Io),
    // Pipes and children.
    ("pipe_read", Kind::Ipc),
    ("pipe_write", Kind::Ipc),
    // Their names since Linux 6.15.
    ("anon_pipe_read", Kind::Ipc),
    ("anon_pipe_write", Kind::Ipc),
    ("fifo_pipe_read", Kind::Ipc),
    ("fifo_pipe_write", Kind::Ipc),
    ("wait_for_partner", Kind::Ipc),
    ("do_wait", Kind::Ipc),
    // Timers.
    ("do_nanosleep", Kind::Sleep),
    ("hrtimer_nanosleep", Kind::Sleep),
    ("common_nsleep", Kind::Sleep),
    // Futexes: what for is in the user frames.
    ("futex_wait", Kind::Lock),
    ("futex_do_wait", Kind::Lock),
    ("__futex_wait", Kind::Lock),
    ("futex_wait_queue", Kind::Lock),
    ("futex_lock_pi", Kind::Lock),
];

/// User frames (by prefix) that make a futex wait idle: parks, condvars, channel receives and
/// the Go scheduler's sleep.
const PARKS: &[&str] = &[
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "__pthread_cond_wait",
    "___pthread_cond_wait",
    "___pthread_cond_timedwait",
    "__pthread_cond_timedwait",
    "std::sys::sync::condvar::",
    "std::sync::condvar::",
    "std::sync::poison::condvar::",
    "std::thread::park",
    "std::sys::pal::unix::thread_parking",
    "std::sync::mpmc::",
    "std::sync::mpsc::",
    "crossbeam_channel::",
    "parking_lot::condvar::",
    "tokio::runtime::park",
    "runtime.notesleep",
    "runtime.stopm",
    "runtime.mPark",
    "runtime.netpollblock",
    // Joining a thread: waiting for it to end, not for anything it holds.
    "std::thread::join_handle::",
    "std::thread::JoinInner",
    "std::thread::lifecycle::JoinInner",
    "pthread_join",
    "__pthread_clockjoin",
    // Python's own: a condition, an event, a queue, a join (frames `function (file:line)`).
    "Condition.wait (",
    "Event.wait (",
    "Queue.get (",
    "SimpleQueue.get (",
    "Thread.join (",
    "Thread._wait_for_tstate_lock (",
    "Barrier.wait (",
];

/// User frames (by prefix) of a CPython thread taking the GIL back: its futex wait is for
/// the interpreter lock, whatever condition variable implements it, and the thread that
/// released it is the one that held it.
const GIL: &[&str] = &[
    "take_gil",
    "PyEval_RestoreThread",
    "PyEval_AcquireThread",
    "PyEval_AcquireLock",
    "PyGILState_Ensure",
    // 3.13: attaching a thread state is taking the GIL.
    "_PyThreadState_Attach",
];

/// What a futex wait under way from the start to the stop is read as: a thread parked.
pub const PARKED: &str = "a futex wait never woken in the recording";

/// What a wait for the GIL is read as being for.
pub const GIL_WAIT: &str = "the GIL";

/// Whether a stack is a CPython thread taking the GIL back.
pub fn takes_gil(frames: &[&Frame]) -> bool {
    frames
        .iter()
        .any(|f| f.kind != FrameKind::Kernel && GIL.iter().any(|g| f.name.starts_with(g)))
}

/// User frames of the Go garbage collector.
const GC: &[&str] = &[
    "runtime.gcAssistAlloc",
    "runtime.gcParkAssist",
    "runtime.stopTheWorld",
    "runtime.gcStart",
    "runtime.gcMarkDone",
    "runtime.gcBgMarkWorker",
    "runtime.forEachP",
];

/// User frames of the Go scheduler finding no work, and of its background monitor.
const GO_SCHEDULER: &[&str] = &[
    "runtime.findRunnable",
    "runtime.findrunnable",
    "runtime.stopm",
    "runtime.sysmon",
    "runtime.runqgrab",
    "runtime.notesleep",
];

/// User frames of the Go GC's own work on CPU: mark workers, assists, sweeping.
const GC_WORK: &[&str] = &[
    "runtime.gcBgMarkWorker",
    "runtime.gcAssistAlloc",
    "runtime.gcDrain",
    "runtime.bgsweep",
    "runtime.markroot",
];

/// Whether a stack is in the recorder's own uprobe machinery (the single-step trap of a probed
/// instruction, the return trampoline).
pub fn in_probe(frames: &[&Frame]) -> bool {
    const PROBE: &[&str] = &[
        "[uprobes]",
        "asm_exc_debug",
        "exc_debug_user",
        "asm_exc_int3",
        "uprobe_notify_resume",
        "arch_uprobe_post_xol",
        "uprobe_handle_trampoline",
        "__do_sys_uretprobe",
    ];
    frames.iter().any(|f| PROBE.contains(&f.name.as_str()))
}

/// Whether an on-CPU stack is the Go GC at work.
pub fn in_gc(frames: &[&Frame]) -> bool {
    gc_work(frames).is_some()
}

/// Whose work the Go GC's on-CPU time is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcWork {
    /// The collector's own: mark workers (dedicated, fractional, idle) and sweeping.
    Collector,
    /// A mark assist: an allocating goroutine made to mark before its allocation goes on.
    Assist,
}

/// Whether an on-CPU stack is the Go GC at work, and whose work: an assist (under
/// `runtime.gcAssistAlloc`) or the collector's own.
pub fn gc_work(frames: &[&Frame]) -> Option<GcWork> {
    let user = || frames.iter().filter(|f| f.kind != FrameKind::Kernel);
    if user().any(|f| f.name.starts_with("runtime.gcAssistAlloc")) {
        return Some(GcWork::Assist);
    }
    user()
        .any(|f| GC_WORK.iter().any(|g| f.name.starts_with(g)))
        .then_some(GcWork::Collector)
}

/// Whether an on-CPU stack is allocating on Go's heap (under `runtime.mallocgc`).
pub fn allocating(frames: &[&Frame]) -> bool {
    frames
        .iter()
        .any(|f| f.kind != FrameKind::Kernel && f.name.starts_with("runtime.mallocgc"))
}

/// Syscall names, for stacks recorded without kernel frames (label), by kind.
const SYSCALLS: &[(&str, Kind)] = &[
    ("epoll_wait", Kind::Idle),
    ("epoll_pwait", Kind::Idle),
    ("epoll_pwait2", Kind::Idle),
    ("poll", Kind::Idle),
    ("ppoll", Kind::Idle),
    ("select", Kind::Idle),
    ("pselect6", Kind::Idle),
    ("accept", Kind::Idle),
    ("accept4", Kind::Idle),
    ("nanosleep", Kind::Sleep),
    ("clock_nanosleep", Kind::Sleep),
    ("fsync", Kind::Io),
    ("fdatasync", Kind::Io),
    ("sync_file_range", Kind::Io),
    ("recvfrom", Kind::Net),
    ("recvmsg", Kind::Net),
    ("recvmmsg", Kind::Net),
    ("sendto", Kind::Net),
    ("sendmsg", Kind::Net),
    ("sendmmsg", Kind::Net),
    ("connect", Kind::Net),
    ("futex", Kind::Lock),
];

/// Frames of libraries and runtimes, never a program's own site.
fn is_library(f: &Frame) -> bool {
    const MODULES: &[&str] = &["libc.so", "libpthread", "ld-linux", "[vdso]", "libstdc++"];
    const PREFIXES: &[&str] = &[
        "std::",
        "core::",
        "alloc::",
        "<std::",
        "<core::",
        "<alloc::",
        "__",
        "_start",
        "pthread_",
        "___pthread",
        "start_thread",
        "clone",
        "runtime.",
        "syscall.",
        "internal/",
        "tokio::",
        "<tokio::",
        "crossbeam",
        "parking_lot",
        "<parking_lot",
        "libc::",
        // Go's standard library: the program's own functions are main.… and its packages'.
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
    ];
    // libc's wrappers, as a frame-pointer or CFI walk names them.
    const WRAPPERS: &[&str] = &[
        "futex",
        "epoll_wait",
        "poll",
        "ppoll",
        "select",
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        "sleep",
        "fsync",
        "fdatasync",
        "recv",
        "recvfrom",
        "recvmsg",
        "recvmmsg",
        "send",
        "sendto",
        "sendmsg",
        "sendmmsg",
        "accept",
        "accept4",
        "read",
        "write",
        "readv",
        "writev",
        "syscall",
        "main",
    ];
    // A primitive's method inlined from core: `<u64>::wrapping_mul`, `<[T]>::iter`.
    let primitive = f.name.starts_with('<')
        && f.name[1..]
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .next()
            .is_some_and(|t| {
                t.is_empty()
                    || matches!(
                        t,
                        "u8" | "u16"
                            | "u32"
                            | "u64"
                            | "u128"
                            | "usize"
                            | "i8"
                            | "i16"
                            | "i32"
                            | "i64"
                            | "i128"
                            | "isize"
                            | "f32"
                            | "f64"
                            | "bool"
                            | "char"
                            | "str"
                    )
            });
    // A program's own wrapper named like the call it wraps (`demo::nanosleep`).
    let last = f.name.rsplit("::").next().unwrap_or(&f.name);
    const WRAPPING: &[&str] = &[
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        "futex",
        "epoll_wait",
        "fsync",
        "syscall",
    ];
    MODULES.iter().any(|m| f.module.contains(m))
        || PREFIXES.iter().any(|n| f.name.starts_with(n))
        || WRAPPERS.contains(&f.name.as_str())
        || WRAPPERS.contains(&last)
        || WRAPPING.iter().any(|w| last.starts_with(w))
        || primitive
        || f.kind == FrameKind::Unknown
}

/// What one stack of a profile says: the kind of wait, the frame that said so, and the site
/// (the innermost function of the program's own; else the innermost user frame).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading {
    pub kind: Kind,
    /// The frame (or syscall, or state) the kind was read from.
    pub because: String,
    pub site: String,
}

/// Reads one stack: `label` is its state or syscall, `frames` root first.
pub fn classify(label: &Label, frames: &[&Frame]) -> Reading {
    let site = site(frames);
    let user: Vec<&&Frame> = frames
        .iter()
        .filter(|f| f.kind != FrameKind::Kernel)
        .collect();
    let reading = |kind: Kind, because: &str| Reading {
        kind,
        because: because.to_string(),
        site: site.clone(),
    };
    if label.waits_for_cpu() {
        return reading(
            Kind::Cpu,
            if *label == Label::Preempted {
                "preempted"
            } else {
                "woken, not yet run"
            },
        );
    }
    if let Some(f) = user
        .iter()
        .find(|f| GC.iter().any(|g| f.name.starts_with(g)))
    {
        return reading(Kind::Gc, &f.name);
    }
    // The Go scheduler looking for work, and its monitor: idle whatever the wait (a futex,
    // a usleep, the netpoller's epoll).
    if let Some(f) = user
        .iter()
        .find(|f| GO_SCHEDULER.iter().any(|g| f.name.starts_with(g)))
    {
        return reading(Kind::Idle, &f.name);
    }
    // Kernel frames, innermost first: the first that says anything decides.
    let kernel_hit = frames
        .iter()
        .rev()
        .filter(|f| f.kind == FrameKind::Kernel)
        .find_map(|f| {
            KERNEL
                .iter()
                .find(|(name, _)| f.name == *name || f.name.starts_with(&format!("{name}.")))
                .map(|(name, kind)| (*kind, *name))
        });
    let park = user
        .iter()
        .rev()
        .find(|f| PARKS.iter().any(|p| f.name.starts_with(p)));
    match kernel_hit {
        Some((Kind::Lock, name)) if name.contains("futex") => {
            if takes_gil(frames) {
                return reading(Kind::Lock, GIL_WAIT);
            }
            return match park {
                Some(p) => reading(Kind::Idle, &p.name),
                // A futex wait under way at both bounds, never woken in the recording (its user
                // stack is walked where a wait begins or ends, and it did neither): parked.
                None if user
                    .iter()
                    .all(|f| f.name == switchyard_model::raw::OPEN_AT_STOP_FRAME)
                    && !user.is_empty() =>
                {
                    reading(Kind::Idle, PARKED)
                }
                None => reading(Kind::Lock, name),
            };
        }
        Some((kind, name)) => return reading(kind, name),
        None => {}
    }
    if let Some((_, kind)) = SYSCALLS.iter().find(|(name, _)| *name == label.as_str()) {
        if *kind == Kind::Lock
            && let Some(p) = park
        {
            return reading(Kind::Idle, &p.name);
        }
        return reading(*kind, label.as_str());
    }
    if let Some(p) = park {
        return reading(Kind::Idle, &p.name);
    }
    if *label == Label::Uninterruptible {
        return reading(Kind::Io, "uninterruptible sleep");
    }
    reading(Kind::Blocked, label.as_str())
}

/// The innermost frame of the program's own (of an interpreted program, its innermost
/// Python frame), else the innermost user frame, else the innermost frame; empty for an
/// empty stack.
pub fn site(frames: &[&Frame]) -> String {
    let python = || frames.iter().rev().filter(|f| f.kind == FrameKind::Python);
    if let Some(f) = python()
        .find(|f| !python_stdlib(f))
        .or_else(|| python().next())
    {
        return f.name.clone();
    }
    // A lost user stack names no place: the innermost kernel frame does then.
    let user = || {
        frames
            .iter()
            .rev()
            .filter(|f| f.kind != FrameKind::Kernel && !f.name.ends_with("stack lost]"))
    };
    // A helper inlined into the program's function is that function's.
    let name = user()
        .find(|f| !is_library(f) && !f.inlined)
        .or_else(|| user().find(|f| !is_library(f)))
        .or_else(|| user().next())
        .or_else(|| frames.last())
        .map(|f| f.name.as_str())
        .unwrap_or_default();
    // A closure is its function's.
    let mut name = name;
    while let Some(outer) = name.strip_suffix("::{{closure}}") {
        name = outer;
    }
    name.to_string()
}

/// A Python frame of the standard library (`…/lib/python3.X/…`, not an installed package).
fn python_stdlib(f: &Frame) -> bool {
    f.file
        .as_deref()
        .is_some_and(|p| p.contains("/lib/python3") && !p.contains("-packages/"))
}

/// The user frames of a stack from its site outward, innermost first, as names: what a
/// thread was doing, in the program's own words first.
pub fn user_names(frames: &[&Frame]) -> Vec<String> {
    let names: Vec<String> = frames
        .iter()
        .rev()
        .filter(|f| f.kind != FrameKind::Kernel)
        .map(|f| f.name.clone())
        .collect();
    let site = site(frames);
    match names
        .iter()
        .rposition(|n| *n == site || n.starts_with(&format!("{site}::{{{{closure")))
    {
        Some(i) => {
            let mut out = vec![site];
            out.extend(names[i + 1..].iter().cloned());
            out
        }
        None => names,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str, kind: FrameKind) -> Frame {
        Frame {
            name: name.into(),
            module: if kind == FrameKind::Kernel {
                "kernel".into()
            } else if name.starts_with("__") || name.starts_with("pthread") {
                "libc.so.6".into()
            } else {
                "demo".into()
            },
            kind,
            ..Default::default()
        }
    }

    fn read(label: &str, user: &[&str], kernel: &[&str]) -> Reading {
        let frames: Vec<Frame> = user
            .iter()
            .map(|n| {
                // `function (file:line)` is a Python frame.
                let kind = if n.ends_with(')') && n.contains(".py:") {
                    FrameKind::Python
                } else {
                    FrameKind::User
                };
                let mut f = frame(n, kind);
                if n.contains("(threading.py:") {
                    f.file = Some("/usr/lib/python3.11/threading.py".into());
                }
                f
            })
            .chain(kernel.iter().map(|n| frame(n, FrameKind::Kernel)))
            .collect();
        let refs: Vec<&Frame> = frames.iter().collect();
        classify(&Label::from(label), &refs)
    }

    #[test]
    fn each_wait_reads_as_its_kind() {
        let k = |label, user: &[&str], kernel: &[&str]| read(label, user, kernel).kind;
        assert_eq!(
            k(
                "S",
                &[
                    "main",
                    "wait_for_lock",
                    "___pthread_mutex_lock",
                    "__lll_lock_wait"
                ],
                &["__x64_sys_futex", "do_futex", "futex_wait", "schedule"]
            ),
            Kind::Lock
        );
        assert_eq!(
            k(
                "S",
                &["main", "worker", "___pthread_cond_wait"],
                &["do_futex", "futex_wait", "schedule"]
            ),
            Kind::Idle
        );
        assert_eq!(
            k(
                "D",
                &["main", "flush_to_disk", "fsync"],
                &[
                    "do_fsync",
                    "ext4_sync_file",
                    "jbd2_log_wait_commit",
                    "schedule"
                ]
            ),
            Kind::Io
        );
        assert_eq!(
            k(
                "S",
                &["main", "idle_wait", "epoll_wait"],
                &[
                    "do_epoll_wait",
                    "ep_poll",
                    "schedule_hrtimeout_range",
                    "schedule"
                ]
            ),
            Kind::Idle
        );
        assert_eq!(
            k(
                "S",
                &["main", "nap"],
                &["hrtimer_nanosleep", "do_nanosleep", "schedule"]
            ),
            Kind::Sleep
        );
        assert_eq!(
            k(
                "S",
                &["main", "serve"],
                &["tcp_recvmsg", "sk_wait_data", "schedule"]
            ),
            Kind::Net
        );
        assert_eq!(k("W", &["main", "nap"], &["do_nanosleep"]), Kind::Cpu);
        assert_eq!(
            k(
                "S",
                &["main", "xfer", "syscall"],
                &["do_readv", "vfs_readv", "anon_pipe_read"]
            ),
            Kind::Ipc
        );
        assert_eq!(k("R", &["main", "spin"], &[]), Kind::Cpu);
        assert_eq!(
            k(
                "S",
                &["runtime.mstart", "runtime.sysmon", "runtime.usleep"],
                &["do_nanosleep"]
            ),
            Kind::Idle
        );
        assert_eq!(k("S", &["main", "odd"], &["schedule"]), Kind::Blocked);
        assert_eq!(k("D", &["main", "odd"], &["schedule"]), Kind::Io);
        assert_eq!(
            k("S", &["main", "runtime.gcAssistAlloc"], &["futex_wait"]),
            Kind::Gc
        );
    }

    #[test]
    fn the_site_is_the_programs_own_innermost_function() {
        let r = read(
            "S",
            &[
                "main",
                "wait_for_lock",
                "___pthread_mutex_lock",
                "__lll_lock_wait",
            ],
            &["futex_wait"],
        );
        assert_eq!(r.site, "wait_for_lock");
        assert_eq!(r.because, "futex_wait");
    }

    /// A CPython thread: taking the GIL back is a lock wait, whatever condition variable
    /// implements it; a Python condition or event is a park; the site is its own code.
    #[test]
    fn python_waits_read_as_the_gil_or_a_park_at_the_script_s_site() {
        let futex = ["__x64_sys_futex", "do_futex", "futex_wait", "futex_do_wait"];
        let gil = read(
            "S",
            &[
                "Thread.run (threading.py:975)",
                "sleeper_loop (threads.py:29)",
                "nap (threads.py:24)",
                "time_sleep",
                "PyEval_RestoreThread",
                "take_gil",
                "___pthread_cond_timedwait64",
            ],
            &futex,
        );
        assert_eq!(
            (gil.kind, gil.because.as_str(), gil.site.as_str()),
            (Kind::Lock, GIL_WAIT, "nap (threads.py:24)")
        );
        // Debian's stripped build names no take_gil, but PyEval_RestoreThread is exported.
        let stripped = read(
            "S",
            &[
                "nap (threads.py:24)",
                "[python3.11+0x1d64bd]",
                "PyEval_RestoreThread",
                "[python3.11+0xf94ed]",
                "___pthread_cond_timedwait64",
            ],
            &futex,
        );
        assert_eq!(
            (stripped.kind, stripped.because.as_str()),
            (Kind::Lock, GIL_WAIT)
        );
        let event = read(
            "S",
            &[
                "wait_for_ping (threads.py:47)",
                "Event.wait (threading.py:622)",
                "Condition.wait (threading.py:324)",
                "PyThread_acquire_lock_timed",
                "__new_sem_wait_slow64",
            ],
            &futex,
        );
        // The site is the script's own frame, not the standard library's.
        assert_eq!(
            (event.kind, event.site.as_str()),
            (Kind::Idle, "wait_for_ping (threads.py:47)")
        );
    }

    #[test]
    fn a_wait_open_at_both_bounds_reads_by_its_kernel_stack() {
        use switchyard_model::raw::OPEN_AT_STOP_FRAME;
        // A futex wait from start to stop, never woken, its user stack never walked: parked.
        let parked = read(
            "S",
            &[OPEN_AT_STOP_FRAME],
            &["__x64_sys_futex", "do_futex", "futex_wait", "futex_do_wait"],
        );
        assert_eq!((parked.kind, parked.because.as_str()), (Kind::Idle, PARKED));
        // Its place is its innermost kernel frame, not the lost user stack.
        assert_eq!(parked.site, "futex_do_wait");
        let epoll = read(
            "S",
            &[OPEN_AT_STOP_FRAME],
            &["__x64_sys_epoll_wait", "do_epoll_wait"],
        );
        assert_eq!(
            (epoll.kind, epoll.site.as_str()),
            (Kind::Idle, "do_epoll_wait")
        );
        // A futex wait whose user stack is known is read by it, as any other.
        let lock = read(
            "S",
            &["main", "___pthread_mutex_lock", "__lll_lock_wait"],
            &["__x64_sys_futex", "futex_wait"],
        );
        assert_eq!(lock.kind, Kind::Lock);
    }
}
