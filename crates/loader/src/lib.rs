//! Loads the kernel-side programs, attaches them to the target, and reads the maps back as
//! model rows. The only crate that touches aya.
//!
//! By concern: [`attach`](Probes::attach) loads and attaches (`attach.rs`), `probes.rs` runs
//! the recording once attached, `read.rs` reads the kernel's maps into plain values and
//! `convert.rs` turns those into model rows (pure, tested from fixtures); `window.rs` keeps a
//! continuous recording's windows apart. This file holds the crate's public types.

mod attach;
mod bounds;
mod btf;
mod convert;
mod error;
mod floor;
mod kinds;
pub mod otel;
mod placement;
mod probecost;
mod probes;
mod progstats;
mod python;
mod read;
mod spans;
mod threads;
pub mod tracefs;
mod unwind;
mod window;

use std::collections::BTreeMap;

use aya::{
    Ebpf,
    maps::{MapData, RingBuf},
};
pub use convert::state_label;
pub use error::Error;
pub use floor::{Floor, FloorKind};
pub use kinds::{DropKind, GcEvent, GcKind};
pub use switchyard_common::{TimelineEvent, timeline as event_kind};
use switchyard_model::raw::Raw;
use switchyard_model::{DropRow, Locks, RunqueueHolder, SyscallRow, ThreadRow};
pub use unwind::UnwindStats;
pub use window::Evicted;
use window::LastCut;

/// The bit `sched_switch` states carry for a preempted task.
pub const PREEMPT_FLAG: u32 = switchyard_common::tp::PREEMPT_FLAG as u32;
/// The bit an off-CPU state carries for the wait for a CPU after a wakeup.
pub const WOKEN_FLAG: u32 = switchyard_common::tp::WOKEN_FLAG as u32;

/// Bytes of one row of the kernel's unwind table.
pub const UNWIND_ROW_BYTES: u64 = std::mem::size_of::<switchyard_common::UnwindRow>() as u64;

#[derive(Clone, Debug)]
pub struct Config {
    /// The target's tgid.
    pub tgid: u32,
    /// The target has not exec'd yet (spawn mode): its tables load once it has, not now.
    pub before_exec: bool,
    /// Follow child processes forked after attach.
    pub follow_children: bool,
    /// Stacks to take; `None` for counts only.
    pub stacks: Option<StackConfig>,
    /// Functions to time from entry to return (uprobe + uretprobe), at most `MAX_SPANS`.
    pub spans: Vec<Span>,
    /// A Go binary whose runtime GC events to record (entry-only uprobes).
    pub go_gc: Option<std::path::PathBuf>,
    /// Which syscalls to record.
    pub syscalls: Syscalls,
    /// Time one recorded syscall in about this many per thread (1: every one; 0: none); under
    /// a budget, one in this many beyond it.
    pub syscall_latency: u32,
    /// Timed calls a second each thread gets, every one, before its calls are drawn one in
    /// `syscall_latency` (0: no budget).
    pub syscall_budget: u32,
    /// Stream timestamped events (`--timeline`).
    pub timeline: Option<TimelineConfig>,
    /// The target's OpenTelemetry thread context: where its `otel_thread_ctx_v1` is from the
    /// thread pointer, and the binary it was found in ([`otel::thread_context`]).
    pub thread_context: Option<(otel::TlsPlace, String)>,
}

/// The timeline's ring buffer and what goes into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimelineConfig {
    /// The ring buffer's size in bytes: a power of two, at least a page.
    pub buffer_bytes: u32,
    /// Syscalls at least this long are streamed (futex waits always are).
    pub syscall_ns: u64,
}

/// Which syscalls are recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Syscalls {
    /// Every syscall.
    #[default]
    All,
    /// These numbers only. The syscall tracepoints are still enabled, so every task on the
    /// host still takes the kernel's syscall slow path.
    Only(Vec<u32>),
    /// None: no syscall tracepoint is enabled at all, and the rest of the host pays nothing.
    None,
}

/// What the Go GC probes found and counted.
#[derive(Clone, Debug, Default)]
pub struct GcCollected {
    /// Every runtime symbol tried, and whether it could be probed.
    pub symbols: Vec<(String, bool)>,
    /// Events per kind, exact (kinds never seen are absent).
    pub counts: BTreeMap<GcKind, u64>,
}

impl GcCollected {
    /// How many `kind` events the probes counted.
    pub fn count(&self, kind: GcKind) -> u64 {
        self.counts.get(&kind).copied().unwrap_or(0)
    }
}

/// A function to time: its symbol in a binary.
#[derive(Clone, Debug)]
pub struct Span {
    /// The name its figures go by.
    pub label: String,
    pub symbol: String,
    pub binary: std::path::PathBuf,
    /// Go code: keyed by goroutine, entered past the stack check, returned from at each RET.
    pub go: bool,
}

#[derive(Clone, Debug)]
pub struct StackConfig {
    /// On-CPU sampling frequency, Hz (0: no on-CPU sampling).
    pub oncpu_hz: u64,
    /// Off-CPU intervals shorter than this are not recorded by stack.
    pub min_block_ns: u64,
    /// Take the user stack of one syscall in this many at the most (0: none).
    pub syscall_every: u64,
    /// At most this many syscall stacks a second on each CPU (0: no limit): under a faster
    /// syscall rate, one in more than `syscall_every` is taken, each weighted by the calls it
    /// stands for.
    pub syscall_stacks_per_s: u64,
    pub stack_map_size: u32,
    /// Off-CPU stacks are sampled: an interval of this long or longer is always walked, a
    /// shorter one in proportion to its length, its time weighted to stay unbiased (0: every
    /// interval is walked).
    pub offcpu_period_ns: u64,
    /// How user stacks are walked.
    pub unwind: Unwind,
    /// Rows of the unwind table array (CFI only), shared by every object.
    pub unwind_rows: u32,
    /// Walk the CPython frames of Python targets into their user stacks.
    pub python_frames: bool,
}

/// How user stacks are walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwind {
    /// Frame pointers only, by the kernel's own walker.
    FramePointers,
    /// Call-frame information from each object's `.eh_frame` / `.debug_frame`, and frame
    /// pointers where a pc has none.
    Cfi,
}

/// Loaded and attached probes. Dropping it detaches everything.
pub struct Probes {
    ebpf: Ebpf,
    spans: Vec<Span>,
    /// Kernel lock contention tracepoints attached (missing on some kernels).
    contention: bool,
    /// Go GC probes: symbols tried, and the event stream.
    gc_symbols: Option<Vec<(String, bool)>>,
    gc_events: Option<RingBuf<MapData>>,
    /// The timeline's event stream (`--timeline`).
    timeline: Option<RingBuf<MapData>>,
    /// Unwind tables (CFI only).
    tables: Option<unwind::Tables>,
    /// When the recording stopped ([`Probes::stop`]), CLOCK_MONOTONIC ns.
    stopped: Option<u64>,
    /// When it started ([`Probes::start`]), CLOCK_MONOTONIC ns (0: not yet).
    started: u64,
    /// The targets' threads as /proc showed them at the start and at the stop.
    bounds: bounds::Bounds,
    /// Stacks are recorded.
    stacks_on: bool,
    /// Entries of each stack map (`--stack-map-size`).
    stack_map_size: u32,
    /// A continuous recording's values at the last cut ([`Probes::cut`]).
    windows: Option<LastCut>,
    /// What eviction removed so far.
    evicted: Evicted,
    /// Python processes found among the targets (none looked for without stacks, or with
    /// `StackConfig::python_frames` off).
    python: Option<python::Finder>,
    /// The span instances sent whole (`--span`), and what is kept of them per span.
    /// Where the target's OpenTelemetry thread context was found, when it is read.
    otel: Option<String>,
    /// Its record counts at the last window's reading.
    otel_stats: [u64; switchyard_common::otel::STATS as usize],
    span_events: Option<RingBuf<MapData>>,
    span_kept: Vec<spans::Kept>,
    /// Each span's histogram at the last reading (a window's is what was added since).
    span_last: Vec<spans::Hist>,
    /// What the kernel side was last told per span: (threshold ns, one in N of all).
    span_control: Vec<(u64, u64)>,
    /// The floor last written to each span's `SPAN_CTL` ([`spans::Kept::floor`]).
    span_floor: Vec<u64>,
    /// Each Go span's binary's wait reasons (`switchyard_runtimes::go::reasons`).
    span_reasons: Vec<std::sync::Arc<Vec<String>>>,
    span_polled: Option<std::time::Instant>,
    /// Ring-buffer losses of span instances at the last reading.
    span_ring_lost: u64,
    /// What the span probes' breakpoints cost here, timed as they were attached, and where
    /// each span's were placed.
    trap_costs: Option<switchyard_model::TrapCosts>,
    span_placements: Vec<Option<placement::Placement>>,
    /// The processes whose span probes are placed ([`Probes::follow_spans`]).
    span_procs: std::collections::BTreeSet<u32>,
    /// Where attaching spent its time, step by step ([`Probes::attach_steps`]).
    attach_steps: Vec<(String, std::time::Duration)>,
    /// The programs' run-time statistics, turned on a tenth of the recording.
    program_stats: Option<progstats::Sampler>,
    /// The share of the recording they were on, once it stopped.
    program_covered: Option<progstats::Covered>,
}

/// What the kernel side collected.
#[derive(Debug, Default)]
pub struct Collected {
    pub syscalls: Vec<SyscallRow>,
    pub threads: Vec<ThreadRow>,
    /// Who held the CPU while a target thread waited for one.
    pub runqueue_holders: Vec<RunqueueHolder>,
    pub drops: Vec<DropRow>,
    /// The same drops by kind, for figures that count them.
    pub drop_counts: BTreeMap<DropKind, u64>,
    /// Child processes followed (tgids other than the target's), sorted.
    pub children: Vec<u32>,
    /// Stacks by id and the stack-keyed samples, to symbolise.
    pub raw: Raw,
    pub locks: Locks,
    pub gc: Option<GcCollected>,
    /// What the unwind tables held (CFI only).
    pub unwind: Option<UnwindStats>,
    /// Off-CPU intervals long enough for a stack, and how many were walked.
    pub offcpu_sampling: (u64, u64),
    /// The OpenTelemetry spans of the target's thread context, when it publishes one.
    pub otel: Option<switchyard_model::OtelSpans>,
    /// What the span probes cost the target, when spans are probed.
    pub probe_costs: Option<switchyard_model::ProbeCosts>,
    /// The BPF programs' own run time, sampled (a whole recording's, read at its end).
    pub program_times: Option<switchyard_model::ProgramTimes>,
}
