//! Symbolised stacks: on-CPU samples, off-CPU time, wakeups and syscall origins.
//!
//! Frames are interned in one table per run; a stack lists frame indices from the root
//! (outermost caller) to the leaf. Kernel frames sit above the user frames, as the kernel
//! runs on behalf of the user code that called into it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Profiles {
    /// Every distinct frame of every stack below.
    pub frames: Vec<Frame>,
    /// perf cpu-clock samples of the target's threads; value: samples.
    pub oncpu: Profile,
    /// Time off CPU from switch-out to switch-in, by the stack at switch-out; value: ns.
    pub offcpu: Profile,
    /// Off-CPU time of a target thread by who woke it: the sleeper's stack, then the waker's;
    /// value: ns.
    pub wakeup: Profile,
    /// User stacks at syscall entry (every call, or one in `syscall_sample_every`); value: calls
    /// (already multiplied back by the sampling rate).
    pub syscalls: Profile,
    /// Futex wait time by user stack at the wait; label: the futex word's address; value: ns.
    #[serde(default)]
    pub futex: Profile,
    /// Recording settings and what was lost.
    pub stats: StackStats,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Profile {
    /// "samples", "ns" or "calls".
    pub unit: String,
    /// Sorted by value, descending, then by frames.
    pub stacks: Vec<Stack>,
}

impl Profile {
    pub fn total(&self) -> u64 {
        self.stacks.iter().map(|s| s.value).sum()
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stack {
    pub tgid: u32,
    pub tid: u32,
    /// The thread's name.
    pub comm: String,
    /// What kind of wait or which syscall: "S" (sleeping), "D" (uninterruptible), "R"
    /// (preempted, waiting for a CPU), or a syscall name; empty for on-CPU samples.
    pub label: String,
    /// Frame indices, root first.
    pub frames: Vec<u32>,
    /// For wakeups: the waker's frames, root first, and its thread name.
    pub waker_frames: Vec<u32>,
    pub waker_comm: String,
    pub value: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// Demangled function name, or `[unknown]`/`[module+0xoffset]` when it has none.
    pub name: String,
    /// Binary or shared object the frame is in (file name only), or "kernel".
    pub module: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub kind: FrameKind,
    /// An inlined call, expanded from the frame that follows it in the stack.
    pub inlined: bool,
}

#[derive(
    Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    #[default]
    User,
    Kernel,
    /// An address no symbol covers; counted in `StackStats::unknown_frames`.
    Unknown,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StackStats {
    /// On-CPU sampling frequency, Hz (0 when off).
    pub oncpu_hz: u64,
    /// Off-CPU intervals shorter than this were not recorded by stack, ns.
    pub min_block_ns: u64,
    /// One syscall in this many had its stack taken (0: syscall stacks off).
    pub syscall_sample_every: u64,
    /// Stacks lost because the stack map was full or two stacks hashed alike.
    pub collisions: u64,
    /// Stacks that could not be walked (no user stack: a kernel thread, or no frame pointers).
    pub missing_user: u64,
    pub missing_kernel: u64,
    /// Frames no symbol covers.
    pub unknown_frames: u64,
    pub stack_map_size: u32,
}
