//! Symbolised stacks: on-CPU samples, off-CPU time, wakeups and syscall origins.
//!
//! Frames are interned in one table per run; a stack lists frame indices from the root
//! (outermost caller) to the leaf. Kernel frames sit above the user frames, as the kernel
//! runs on behalf of the user code that called into it.

use serde::{Deserialize, Serialize};

/// What a stack's thread was doing, as the stack is counted: a state off CPU as the kernel
/// reports it at the switch-out, or, in the profiles keyed by something else, that thing's
/// name. Written in run files as the kernel's letters ("S", "D", "R", "W", …), "running", a
/// name, or empty, as it always was.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Label {
    /// None: an on-CPU sample, or a wakeup, whose profile says what it is.
    #[default]
    Empty,
    /// Sleeping, interruptibly (S).
    Sleeping,
    /// Sleeping uninterruptibly (D): I/O, or a kernel lock.
    Uninterruptible,
    /// Waiting for a CPU after it was preempted (R).
    Preempted,
    /// Waiting for a CPU after a wakeup (W).
    Woken,
    /// Stopped (T).
    Stopped,
    /// Stopped by a tracer (t).
    Traced,
    /// An idle kernel wait (I).
    Idle,
    /// A waker that was on CPU all through the wait it ended.
    Running,
    /// A syscall's name, a futex word's address, or a state with no name here ("state
    /// 0x…"). Made from text, a state's letter is always its own variant.
    Name(String),
}

impl Label {
    pub fn as_str(&self) -> &str {
        match self {
            Label::Empty => "",
            Label::Sleeping => "S",
            Label::Uninterruptible => "D",
            Label::Preempted => "R",
            Label::Woken => "W",
            Label::Stopped => "T",
            Label::Traced => "t",
            Label::Idle => "I",
            Label::Running => "running",
            Label::Name(n) => n,
        }
    }

    /// Waiting for a CPU: runnable, after a preemption or a wakeup.
    pub fn waits_for_cpu(&self) -> bool {
        *self == Label::Preempted || *self == Label::Woken
    }

    pub fn is_empty(&self) -> bool {
        *self == Label::Empty
    }
}

/// The labels with a text of their own, each read back through [`Label::as_str`].
const NAMED: [Label; 9] = [
    Label::Empty,
    Label::Sleeping,
    Label::Uninterruptible,
    Label::Preempted,
    Label::Woken,
    Label::Stopped,
    Label::Traced,
    Label::Idle,
    Label::Running,
];

impl From<&str> for Label {
    fn from(s: &str) -> Label {
        NAMED
            .iter()
            .find(|l| l.as_str() == s)
            .cloned()
            .unwrap_or_else(|| Label::Name(s.to_string()))
    }
}

impl From<String> for Label {
    fn from(s: String) -> Label {
        match Label::from(s.as_str()) {
            Label::Name(_) => Label::Name(s),
            l => l,
        }
    }
}

impl From<Label> for String {
    fn from(l: Label) -> String {
        match l {
            Label::Name(n) => n,
            l => l.as_str().to_string(),
        }
    }
}

/// Compared, hashed and ordered as written: one label however it was made, and anything sorted
/// by label keeps the order it had as text.
impl PartialEq for Label {
    fn eq(&self, other: &Label) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Label {}

impl std::hash::Hash for Label {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Ord for Label {
    fn cmp(&self, other: &Label) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Label {
    fn partial_cmp(&self, other: &Label) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    /// What the thread that woke a target thread did while it waited: the woken thread's
    /// id, and the waker's (`waker_tid`, `waker_frames`) state (label: S, D, R…, or
    /// `running`: the waker ran, its stack at the wakeup being in `wakeup`) and stacks of
    /// the part of its own interval off CPU within the wait; value: ns. Only wakers that
    /// are themselves targets.
    #[serde(default, skip_serializing_if = "Profile::is_empty")]
    pub held: Profile,
    /// User stacks at syscall entry (every call, or one in `syscall_sample_every`); value: calls
    /// (already multiplied back by the sampling rate).
    pub syscalls: Profile,
    /// Futex wait time by user stack at the wait; label: the futex word's address; value: ns.
    #[serde(default)]
    pub futex: Profile,
    /// Heap allocations by allocation site (`record --heap-profile`, from dhat); value:
    /// allocations.
    #[serde(default, skip_serializing_if = "Profile::is_empty")]
    pub heap: Profile,
    /// Recording settings and what was lost.
    pub stats: StackStats,
    /// The binaries of the user frames, with their mappings and build IDs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binaries: Vec<Binary>,
    /// The stacks of `Raw::timeline`, in its order (the run file keeps them in its timeline).
    #[serde(skip)]
    pub timeline_stacks: Vec<Vec<u32>>,
    /// The stacks span instances refer to (`SpanWait::stack`, …), in `Raw::span_stacks`'
    /// order: frame indices, root first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub span_stacks: Vec<Vec<u32>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Profile {
    /// "samples", "ns" or "calls".
    pub unit: String,
    /// Sorted by value, descending, then by frames.
    pub stacks: Vec<Stack>,
}

impl Profile {
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

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
    /// What the thread was doing: its state off CPU, or the syscall, span or futex word the
    /// profile is keyed by; empty for on-CPU samples and wakeups.
    pub label: Label,
    /// Frame indices, root first.
    pub frames: Vec<u32>,
    /// For wakeups: the waker's frames, root first, and its thread name.
    pub waker_frames: Vec<u32>,
    pub waker_comm: String,
    /// For wakeups: the waker's thread id (0: an interrupt, or a run from before it was kept).
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub waker_tid: u32,
    pub value: u64,
    /// The OpenTelemetry trace and span the thread served (its thread context, OTEP 4947),
    /// W3C hex; empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub span_id: String,
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
    /// The address it was sampled at, as the process (or kernel) saw it: the leaf's own, a
    /// caller's call site (return address − 1); an inlined frame has its outer frame's. 0 when
    /// not known (pseudo frames, runs from before addresses were kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub addr: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero32(n: &u32) -> bool {
    *n == 0
}

/// A binary the user frames are in, and where the target mapped its code (pprof's mapping).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Binary {
    /// The frames' `module`: the file name.
    pub module: String,
    /// The full path the process mapped.
    pub path: String,
    /// The executable mapping: start, end (exclusive) and the file offset of start.
    pub start: u64,
    pub limit: u64,
    pub offset: u64,
    /// The GNU build ID, hex; empty when the file has none.
    pub build_id: String,
}

#[derive(
    Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    #[default]
    User,
    Kernel,
    /// JIT-compiled code named by the process's perf map (`node --perf-basic-prof`, …).
    Jit,
    /// An address no symbol covers; counted in `StackStats::unknown_frames`.
    Unknown,
    /// A CPython frame, read from the interpreter's frame chain: `function (file:line)`.
    Python,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StackStats {
    /// On-CPU sampling frequency, Hz (0 when off).
    pub oncpu_hz: u64,
    /// Off-CPU intervals shorter than this were not recorded by stack, ns.
    pub min_block_ns: u64,
    /// One syscall in this many had its stack taken (0: syscall stacks off), or in more
    /// where `syscall_stacks_per_s` held them back.
    pub syscall_sample_every: u64,
    /// At most this many syscall stacks a second on each CPU (0: no limit, or a run from
    /// before the limit): each stack's count is the calls it stood for.
    #[serde(default)]
    pub syscall_stacks_per_s: u64,
    /// Off-CPU stacks were sampled with this period, ns: an interval this long or longer was
    /// always walked, a shorter one with probability (its length ÷ period), its time weighted
    /// by the inverse (0: every interval walked; also runs from before sampling).
    #[serde(default)]
    pub offcpu_period_ns: u64,
    /// Off-CPU intervals long enough for a stack, and how many of them were walked.
    #[serde(default)]
    pub offcpu_intervals: u64,
    #[serde(default)]
    pub offcpu_walked: u64,
    /// Stacks lost because the stack map was full or two stacks hashed alike.
    pub collisions: u64,
    /// Stacks that could not be taken at all (no user registers: a kernel thread).
    pub missing_user: u64,
    pub missing_kernel: u64,
    /// Frames no symbol covers.
    pub unknown_frames: u64,
    pub stack_map_size: u32,
    /// How user stacks were walked: "cfi" (call-frame information, frame pointers where a pc
    /// has none) or "fp" (frame pointers only). Empty in runs from before the choice existed
    /// (they walked frame pointers).
    #[serde(default)]
    pub unwind: String,
    /// The unwind tables loaded for the run (CFI only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<UnwindTables>,
    /// Per profile, how much of it has a user stack that reaches the thread's start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quality: Vec<StackQuality>,
}

impl StackStats {
    /// The walk method as a user reads it.
    pub fn unwind_label(&self) -> &str {
        match self.unwind.as_str() {
            "cfi" => "CFI (.eh_frame), frame pointers where none",
            _ => "frame pointers",
        }
    }
}

/// What the unwind tables held and cost.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnwindTables {
    /// Objects (executables and libraries) whose tables were built.
    pub objects: u64,
    /// Of those, objects with no CFI (frame pointers are walked there).
    pub objects_without_cfi: u64,
    /// Objects whose table did not fit.
    pub objects_not_loaded: u64,
    pub rows: u64,
    pub capacity_rows: u64,
    /// Bytes of kernel memory the rows take, and the table map's size.
    pub bytes: u64,
    pub capacity_bytes: u64,
    /// Time spent reading objects and building their tables, µs.
    pub build_us: u64,
    /// Objects that could not be read: "path: error".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

/// How much of one profile's weight has a complete user stack: one whose outermost frame is
/// a thread's start (`_start`, `main`, `start_thread`, `clone3`, Go's `runtime.goexit`, …).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StackQuality {
    /// "oncpu", "offcpu", "wakeup", "syscalls" or "futex".
    pub profile: String,
    pub complete: u64,
    pub total: u64,
}

impl StackQuality {
    /// Percent complete (100 for an empty profile).
    pub fn percent(&self) -> f64 {
        if self.total == 0 {
            100.0
        } else {
            self.complete as f64 * 100.0 / self.total as f64
        }
    }
}

/// True for the outermost frame of a thread whose user stack was walked to its start (each
/// runtime names its own: `switchyard_runtimes`).
pub fn is_thread_start(name: &str) -> bool {
    switchyard_runtimes::is_thread_root(name)
}

#[cfg(test)]
mod tests {
    use super::Label;

    #[test]
    fn a_label_reads_back_as_it_was_written() {
        for (text, label) in [
            ("", Label::Empty),
            ("S", Label::Sleeping),
            ("D", Label::Uninterruptible),
            ("R", Label::Preempted),
            ("W", Label::Woken),
            ("T", Label::Stopped),
            ("t", Label::Traced),
            ("I", Label::Idle),
            ("running", Label::Running),
            ("futex", Label::Name("futex".into())),
            ("0x7f0012", Label::Name("0x7f0012".into())),
            ("state 0x100", Label::Name("state 0x100".into())),
        ] {
            assert_eq!(Label::from(text), label, "{text:?}");
            assert_eq!(String::from(label.clone()), text);
            let json = serde_json::to_string(&label).unwrap();
            assert_eq!(json, format!("{text:?}"));
            assert_eq!(serde_json::from_str::<Label>(&json).unwrap(), label);
        }
        assert!(Label::Preempted.waits_for_cpu() && Label::Woken.waits_for_cpu());
        assert!(!Label::Sleeping.waits_for_cpu() && !Label::Name("R ".into()).waits_for_cpu());
        assert!(Label::Name("R".into()).waits_for_cpu());
        // Made by hand or read, a name is one label.
        assert_eq!(Label::Name("S".into()), Label::Sleeping);
        assert!(Label::Name("D".into()) < Label::Preempted);
    }
}
