//! What each runtime's frames mean, one module per runtime: the kernel, native code (libc and
//! pthreads), Rust's standard library and its crates, Go, CPython, Node's libuv and the JVM
//! (HotSpot).
//!
//! A module owns its runtime's frame rules, as data in one [`Frames`]: the frames that park a
//! thread, that take an interpreter lock back, that are its collector, its scheduler looking
//! for work, its allocator, its libraries, and a thread's outermost frame. [`Runtime`] sits in
//! front of them all, and the readers here ([`is_park`], [`gc_wait`], …) ask every runtime of
//! [`RUNTIMES`] in its declared order. The findings classify a stack with these readers and
//! nothing else knows a frame's name.
//!
//! Adding a runtime is one module here with its `Frames`, one line in [`RUNTIMES`], its corpus
//! of real stacks (`crates/findings/tests/corpus/`) and, when its frames need a walker of their
//! own, the kernel side's (`ebpf/`).

use serde::{Deserialize, Serialize};

pub mod go;
pub mod jvm;
pub mod kernel;
pub mod native;
pub mod node;
pub mod python;
pub mod rust;

/// Why a thread was not running, or that it was.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Runnable, waiting for a CPU in its run queue: preempted, or woken and not yet run.
    /// Written `runqueue`; run files and findings from before the name read `cpu` as it.
    #[serde(alias = "cpu")]
    Runqueue,
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
    /// Waiting for work: an event wait, a park, a scheduler looking for work.
    Idle,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Runqueue => "runqueue",
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
            Kind::Runqueue => "waited for a CPU",
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

    /// The kind named `name` ([`Kind::name`]).
    pub fn named(name: &str) -> Option<Kind> {
        ALL_KINDS.into_iter().find(|k| k.name() == name)
    }
}

/// Every kind, in the order it is declared.
pub const ALL_KINDS: [Kind; 11] = [
    Kind::Runqueue,
    Kind::Lock,
    Kind::Io,
    Kind::Net,
    Kind::Sleep,
    Kind::Fault,
    Kind::Gc,
    Kind::Ipc,
    Kind::Blocked,
    Kind::Oncpu,
    Kind::Idle,
];

/// A runtime's frame rules. Names are matched as the symboliser writes them (demangled, Go's
/// `pkg.Func`, Python's `function (file:line)`); "by prefix" lists match a name's start.
#[derive(Clone, Copy, Debug)]
pub struct Frames {
    /// A thread's outermost frame when its stack was walked to its start (exact names).
    pub thread_roots: &'static [&'static str],
    /// User frames (by prefix) that make a futex wait idle: a condition variable, a park, a
    /// channel receive, a join.
    pub parks: &'static [&'static str],
    /// User frames (by prefix) that make a futex wait a lock wait, though a park's frames are
    /// under them (a JVM monitor parks its contenders on a condition variable).
    pub lock_waits: &'static [&'static str],
    /// User frames (by prefix) of a scheduler looking for work: idle whatever the wait.
    pub idle_loops: &'static [&'static str],
    /// User frames (by prefix) that make a wait the collector's, whatever the kernel says.
    pub gc_waits: &'static [&'static str],
    /// User frames (by prefix) of the collector's own work on CPU.
    pub gc_work: &'static [&'static str],
    /// User frames (by prefix) of an allocating thread made to help the collector.
    pub gc_assists: &'static [&'static str],
    /// User frames (by prefix) of an allocation on the collected heap.
    pub allocating: &'static [&'static str],
    /// User frames (by prefix) of a thread taking an interpreter lock back: its futex wait is
    /// for that lock, whatever condition variable implements it.
    pub interpreter_lock: &'static [&'static str],
    /// Frames of heap allocator plumbing a heap profile's sites skip (by prefix).
    pub allocator: &'static [&'static str],
    /// Frames (by prefix) of the runtime or its libraries, never a program's own site.
    pub library_prefixes: &'static [&'static str],
    /// Modules (by part of the file name) whose frames are all library frames.
    pub library_modules: &'static [&'static str],
    /// Whole names of library frames: the wrappers of syscalls, as a walk names them.
    pub library_names: &'static [&'static str],
    /// Last path segments (by prefix) of a program's own wrapper named like a call it wraps
    /// (`demo::nanosleep`): not the program's site.
    pub wrapping: &'static [&'static str],
    /// Kernel frames, each with the wait it means; a name matches itself and its compiler
    /// clones (`name.isra.0`).
    pub kernel_waits: &'static [(&'static str, Kind)],
    /// Syscalls by name, for stacks recorded without kernel frames, each with its wait.
    pub syscall_waits: &'static [(&'static str, Kind)],
    /// Frames of the recorder's own uprobe machinery (exact names).
    pub probe_frames: &'static [&'static str],
    /// Kernel frames of a datagram socket's receive (a match as in `kernel_waits`).
    pub datagram_receives: &'static [&'static str],
    /// User frames (by prefix of the name's last `::` segment) of a receive that takes the
    /// next datagram from whichever sender comes and says who sent it (`recvfrom`, Rust's
    /// `UdpSocket::recv_from`): blocked on a datagram socket, a server waiting for its next
    /// request. A client that knows its peer connects and calls `recv`.
    pub any_sender_receives: &'static [&'static str],
}

impl Frames {
    /// Every name and prefix these rules hold, module names aside.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        let lists = [
            self.thread_roots,
            self.parks,
            self.lock_waits,
            self.idle_loops,
            self.gc_waits,
            self.gc_work,
            self.gc_assists,
            self.allocating,
            self.interpreter_lock,
            self.allocator,
            self.library_prefixes,
            self.library_names,
            self.wrapping,
            self.probe_frames,
            self.datagram_receives,
            self.any_sender_receives,
        ];
        let kinds = [self.kernel_waits, self.syscall_waits];
        lists
            .into_iter()
            .flatten()
            .copied()
            .chain(kinds.into_iter().flatten().map(|(name, _)| *name))
    }

    /// No rules: the start of every runtime's `Frames`.
    pub const NONE: Frames = Frames {
        thread_roots: &[],
        parks: &[],
        lock_waits: &[],
        idle_loops: &[],
        gc_waits: &[],
        gc_work: &[],
        gc_assists: &[],
        allocating: &[],
        interpreter_lock: &[],
        allocator: &[],
        library_prefixes: &[],
        library_modules: &[],
        library_names: &[],
        wrapping: &[],
        kernel_waits: &[],
        syscall_waits: &[],
        probe_frames: &[],
        datagram_receives: &[],
        any_sender_receives: &[],
    };
}

/// A runtime: its name and its frame rules.
pub trait Runtime: Sync {
    /// Its name, as the corpus files and docs spell it: "go".
    fn name(&self) -> &'static str;
    /// Its frame rules.
    fn frames(&self) -> &'static Frames;
}

/// Every runtime, in the order their rules are asked.
pub const RUNTIMES: &[&dyn Runtime] = &[
    &kernel::Kernel,
    &native::Native,
    &rust::Rust,
    &go::Go,
    &python::Python,
    &node::Node,
    &jvm::Jvm,
];

/// The entries of every runtime's list `pick` chooses, in [`RUNTIMES`]' order.
fn all<T: Copy + 'static>(pick: fn(&Frames) -> &'static [T]) -> impl Iterator<Item = T> {
    RUNTIMES
        .iter()
        .flat_map(move |r| pick(r.frames()).iter().copied())
}

fn any_prefix(pick: fn(&Frames) -> &'static [&'static str], name: &str) -> bool {
    all(pick).any(|p| name.starts_with(p))
}

/// Whether `name` is a thread's outermost frame.
pub fn is_thread_root(name: &str) -> bool {
    all(|f| f.thread_roots).any(|r| r == name)
}

/// Whether user frame `name` parks its thread.
pub fn is_park(name: &str) -> bool {
    any_prefix(|f| f.parks, name)
}

/// Whether user frame `name` makes a futex wait a lock wait.
pub fn is_lock_wait(name: &str) -> bool {
    any_prefix(|f| f.lock_waits, name)
}

/// Whether user frame `name` is a scheduler looking for work.
pub fn is_idle_loop(name: &str) -> bool {
    any_prefix(|f| f.idle_loops, name)
}

/// Whether user frame `name` makes a wait the collector's.
pub fn is_gc_wait(name: &str) -> bool {
    any_prefix(|f| f.gc_waits, name)
}

/// Whether user frame `name` is the collector's own work on CPU.
pub fn is_gc_work(name: &str) -> bool {
    any_prefix(|f| f.gc_work, name)
}

/// Whether user frame `name` is a mark assist.
pub fn is_gc_assist(name: &str) -> bool {
    any_prefix(|f| f.gc_assists, name)
}

/// Whether user frame `name` allocates on a collected heap.
pub fn is_allocating(name: &str) -> bool {
    any_prefix(|f| f.allocating, name)
}

/// Whether user frame `name` takes an interpreter lock back.
pub fn takes_interpreter_lock(name: &str) -> bool {
    any_prefix(|f| f.interpreter_lock, name)
}

/// Whether `name` is heap allocator plumbing.
pub fn is_allocator(name: &str) -> bool {
    any_prefix(|f| f.allocator, name)
}

/// Whether frame `name` in `module` is a runtime's or a library's, never a program's own
/// site.
pub fn is_library(name: &str, module: &str) -> bool {
    let last = name.rsplit("::").next().unwrap_or(name);
    all(|f| f.library_modules).any(|m| module.contains(m))
        || any_prefix(|f| f.library_prefixes, name)
        || all(|f| f.library_names).any(|n| n == name || n == last)
        || all(|f| f.wrapping).any(|w| last.starts_with(w))
        || rust::is_primitive_method(name)
}

/// The wait kernel frame `name` means, with the rule's name.
pub fn kernel_wait(name: &str) -> Option<(Kind, &'static str)> {
    all(|f| f.kernel_waits)
        .find_map(|(rule, kind)| is_kernel_frame(name, rule).then_some((kind, rule)))
}

/// Whether kernel frame `name` is `rule`'s function: itself, or a compiler clone of it
/// (`name.isra.0`).
fn is_kernel_frame(name: &str, rule: &str) -> bool {
    name == rule
        || name
            .strip_prefix(rule)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// Whether kernel frame `name` (or its compiler clone) is a datagram socket's receive.
pub fn is_datagram_receive(name: &str) -> bool {
    all(|f| f.datagram_receives).any(|rule| is_kernel_frame(name, rule))
}

/// Whether user frame `name` receives from any sender and says who sent it.
pub fn receives_from_any_sender(name: &str) -> bool {
    let last = name.rsplit("::").next().unwrap_or(name);
    all(|f| f.any_sender_receives).any(|p| last.starts_with(p))
}

/// The wait a blocked syscall named `name` means.
pub fn syscall_wait(name: &str) -> Option<Kind> {
    all(|f| f.syscall_waits).find_map(|(n, kind)| (n == name).then_some(kind))
}

/// Whether `name` is the recorder's own uprobe machinery.
pub fn is_probe_frame(name: &str) -> bool {
    all(|f| f.probe_frames).any(|p| p == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_back_by_name() {
        for k in ALL_KINDS {
            assert_eq!(Kind::named(k.name()), Some(k));
        }
        assert_eq!(Kind::named("waiting"), None);
    }

    #[test]
    fn a_kernel_frame_matches_its_clones_only() {
        assert_eq!(kernel_wait("futex_wait"), Some((Kind::Lock, "futex_wait")));
        assert_eq!(kernel_wait("ep_poll.isra.0"), Some((Kind::Idle, "ep_poll")));
        assert_eq!(kernel_wait("ep_pollx"), None);
    }

    #[test]
    fn every_runtime_has_a_name_and_rules() {
        let mut names: Vec<&str> = RUNTIMES.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), RUNTIMES.len());
        for r in RUNTIMES {
            let f = r.frames();
            let rules = f.thread_roots.len()
                + f.parks.len()
                + f.library_prefixes.len()
                + f.kernel_waits.len();
            assert!(rules > 0, "{} has no rules", r.name());
        }
    }
}
