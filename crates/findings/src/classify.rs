//! What a thread waited on, read from the stack it waited in: the kernel frames say which
//! wait (futex, block I/O, socket, timer, page fault), the user frames say what for (a
//! mutex, a condvar, an event loop) and where (the innermost function of the program's own).
//!
//! **The idle rule.** A wait is idle when the thread was waiting for work to arrive, not for
//! a resource its work needs:
//! - an event-wait call: `epoll_wait`, `poll`, `select` (and their `p` forms), `accept`;
//! - a datagram server's receive: blocked on a datagram socket (UDP, unix) in a receive that
//!   takes the next datagram from any sender and says who sent it (`recvfrom`, `recvmmsg`,
//!   Rust's `UdpSocket::recv_from`). A client that knows its peer connects and calls `recv`;
//!   its wait for a reply stays a network wait;
//! - a park: a condition variable (`pthread_cond_*wait`, Rust's `Condvar`), a thread park,
//!   a channel receive, joining a thread, or the Go scheduler looking for work or putting a
//!   thread to sleep (`runtime.findRunnable`, `runtime.stopm`, `runtime.notesleep`), and its
//!   monitor (`runtime.sysmon`).
//!
//! Any other socket read or write that blocks is a network wait, a mutex is a lock, whatever
//! woke them. The rule needs stacks; without them no wait is called idle.

use switchyard_model::{Frame, FrameKind, Label};
use switchyard_runtimes as runtimes;

pub use switchyard_runtimes::Kind;

/// What a futex wait under way from the start to the stop is read as: a thread parked.
pub const PARKED: &str = "a futex wait never woken in the recording";

/// What a wait for the GIL is read as being for.
pub const GIL_WAIT: &str = "the GIL";

/// Whether a stack is a CPython thread taking the GIL back.
pub fn takes_gil(frames: &[&Frame]) -> bool {
    frames
        .iter()
        .any(|f| f.kind != FrameKind::Kernel && runtimes::takes_interpreter_lock(&f.name))
}

/// Whether a stack is in the recorder's own uprobe machinery (the single-step trap of a probed
/// instruction, the return trampoline).
pub fn in_probe(frames: &[&Frame]) -> bool {
    frames.iter().any(|f| runtimes::is_probe_frame(&f.name))
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
    if user().any(|f| runtimes::is_gc_assist(&f.name)) {
        return Some(GcWork::Assist);
    }
    user()
        .any(|f| runtimes::is_gc_work(&f.name))
        .then_some(GcWork::Collector)
}

/// Whether an on-CPU stack is allocating on Go's heap (under `runtime.mallocgc`).
pub fn allocating(frames: &[&Frame]) -> bool {
    frames
        .iter()
        .any(|f| f.kind != FrameKind::Kernel && runtimes::is_allocating(&f.name))
}

/// Frames of libraries and runtimes, never a program's own site.
fn is_library(f: &Frame) -> bool {
    runtimes::is_library(&f.name, &f.module) || f.kind == FrameKind::Unknown
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
            Kind::Runqueue,
            if *label == Label::Preempted {
                "preempted"
            } else {
                "woken, not yet run"
            },
        );
    }
    if let Some(f) = user.iter().find(|f| runtimes::is_gc_wait(&f.name)) {
        return reading(Kind::Gc, &f.name);
    }
    // The Go scheduler looking for work, and its monitor: idle whatever the wait (a futex,
    // a usleep, the netpoller's epoll).
    if let Some(f) = user.iter().find(|f| runtimes::is_idle_loop(&f.name)) {
        return reading(Kind::Idle, &f.name);
    }
    // Kernel frames, innermost first: the first that says anything decides.
    let kernel_hit = frames
        .iter()
        .rev()
        .filter(|f| f.kind == FrameKind::Kernel)
        .find_map(|f| runtimes::kernel_wait(&f.name));
    let park = user.iter().rev().find(|f| runtimes::is_park(&f.name));
    let lock_wait = user.iter().rev().find(|f| runtimes::is_lock_wait(&f.name));
    match kernel_hit {
        Some((Kind::Lock, name)) if name.contains("futex") => {
            if takes_gil(frames) {
                return reading(Kind::Lock, GIL_WAIT);
            }
            if let Some(f) = lock_wait {
                return reading(Kind::Lock, &f.name);
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
        Some((Kind::Net, name)) => {
            // A datagram server blocked for whichever sender comes next: waiting for work.
            // Its peer-less receive says so: a client that knows its peer connects.
            let datagram = frames
                .iter()
                .any(|f| f.kind == FrameKind::Kernel && runtimes::is_datagram_receive(&f.name));
            return match user
                .iter()
                .rev()
                .find(|f| runtimes::receives_from_any_sender(&f.name))
            {
                Some(f) if datagram => reading(Kind::Idle, &f.name),
                _ => reading(Kind::Net, name),
            };
        }
        Some((kind, name)) => return reading(kind, name),
        None => {}
    }
    if let Some(f) = lock_wait {
        return reading(Kind::Lock, &f.name);
    }
    if let Some(kind) = runtimes::syscall_wait(label.as_str()) {
        if kind == Kind::Lock
            && let Some(p) = park
        {
            return reading(Kind::Idle, &p.name);
        }
        return reading(kind, label.as_str());
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
    f.file.as_deref().is_some_and(runtimes::python::is_stdlib)
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
                let kind = if n.ends_with(')') && (n.contains(".py:") || n.contains("(<frozen ")) {
                    FrameKind::Python
                } else {
                    FrameKind::User
                };
                let mut f = frame(n, kind);
                if n.contains("(threading.py:") {
                    f.file = Some("/usr/lib/python3.11/threading.py".into());
                }
                // `name (/path/file.py:N)` and `name (<frozen module>:N)` carry their file.
                if let Some(file) = n
                    .strip_suffix(')')
                    .and_then(|n| n.rsplit_once(" ("))
                    .and_then(|(_, at)| at.rsplit_once(':'))
                    .map(|(file, _)| file)
                    .filter(|file| file.starts_with('/') || file.starts_with("<frozen "))
                {
                    f.file = Some(file.into());
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
        // A datagram server's receive from any sender is idle; a connected client's is not,
        // nor a stream socket's receive-from.
        let udp = [
            "__sys_recvfrom",
            "udp_recvmsg",
            "__skb_recv_udp",
            "__skb_wait_for_more_packets",
            "schedule_timeout",
        ];
        assert_eq!(
            k(
                "S",
                &[
                    "main",
                    "relay::receive",
                    "<std::net::udp::UdpSocket>::recv_from",
                    "recvfrom"
                ],
                &udp
            ),
            Kind::Idle
        );
        assert_eq!(
            k("S", &["main", "serve", "__libc_recvfrom"], &udp),
            Kind::Idle
        );
        assert_eq!(k("S", &["main", "ask", "recv"], &udp), Kind::Net);
        assert_eq!(
            k(
                "S",
                &["main", "ask", "recvfrom"],
                &["__sys_recvfrom", "tcp_recvmsg", "sk_wait_data", "schedule"]
            ),
            Kind::Net
        );
        // Without kernel frames no socket is known to be a datagram one.
        assert_eq!(
            k("recvfrom", &["main", "serve", "recvfrom"], &[]),
            Kind::Net
        );
        assert_eq!(k("W", &["main", "nap"], &["do_nanosleep"]), Kind::Runqueue);
        assert_eq!(
            k(
                "S",
                &["main", "xfer", "syscall"],
                &["do_readv", "vfs_readv", "anon_pipe_read"]
            ),
            Kind::Ipc
        );
        assert_eq!(k("R", &["main", "spin"], &[]), Kind::Runqueue);
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

    /// `python -m http.server`: every Python frame is the standard library's, the modules
    /// frozen into the interpreter that run `-m` among them, so the site is the innermost.
    #[test]
    fn a_stdlib_only_python_stack_is_placed_at_its_innermost_frame_not_at_runpy() {
        let r = read(
            "S",
            &[
                "_run_module_as_main (<frozen runpy>:198)",
                "_run_code (<frozen runpy>:88)",
                "<module> (/usr/lib/python3.11/http/server.py:1314)",
                "test (/usr/lib/python3.11/http/server.py:1271)",
                "BaseServer.serve_forever (/usr/lib/python3.11/socketserver.py:233)",
                "select_poll_poll",
                "__poll",
            ],
            &["do_sys_poll", "schedule_hrtimeout_range"],
        );
        assert_eq!(
            r.site,
            "BaseServer.serve_forever (/usr/lib/python3.11/socketserver.py:233)"
        );
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
