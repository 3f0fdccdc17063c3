//! The `Run`: everything one recording collected, as a plain, versioned, serde value.
//!
//! Reports, comparisons and gates are pure functions of `Run`s, so they are tested from files
//! without privileges. Times are nanoseconds; histograms are log2 buckets of nanoseconds.

pub mod driver;
pub mod duration;
pub mod heap;
mod hist;
pub mod metrics;
pub mod outfile;
pub mod raw;
pub mod redact;
mod stacks;
pub mod term;
mod timeline;
pub mod units;

use std::{collections::BTreeMap, fs, io, path::Path};

use serde::{Deserialize, Serialize};

pub use heap::Heap;
pub use hist::Log2Hist;
pub use stacks::{
    Binary, Frame, FrameKind, Label, Profile, Profiles, Stack, StackQuality, StackStats,
    UnwindTables, is_thread_start,
};
pub use timeline::{ThreadState, Timeline, TimelineThread};

/// Bumped on any change a reader of an older file could misread.
pub const SCHEMA_VERSION: u32 = 1;
/// The `format` field every run file carries, so a stray JSON file is recognised as such.
pub const FORMAT: &str = "switchyard-run";

/// The perf counters a run carries, in report order (names as `perf stat` spells them).
pub const COUNTER_NAMES: [&str; 7] = [
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "minor-faults",
    "major-faults",
    "cycles",
    "instructions",
];

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Run {
    pub format: String,
    pub schema_version: u32,
    pub meta: Meta,
    /// Figures this run does not carry, each with the reason (e.g. degraded mode).
    pub missing: Vec<Missing>,
    /// perf counters, in a fixed order; `value: None` when the host does not support one.
    pub counters: Vec<Counter>,
    /// Per syscall number, sorted by number; only syscalls seen at least once.
    pub syscalls: Vec<SyscallRow>,
    /// Per thread, sorted by (tgid, tid).
    pub threads: Vec<ThreadRow>,
    /// Events the kernel side could not record.
    pub drops: Vec<DropRow>,
    /// Symbolised stacks (absent when recorded with --no-stacks).
    #[serde(default)]
    pub profiles: Profiles,
    /// Operations the workload completed during the run (from a driver), for per-op figures.
    #[serde(default)]
    pub operations: Option<u64>,
    /// Lock waits: futex waits, kernel lock contention, uprobe spans.
    #[serde(default)]
    pub locks: Locks,
    /// What the workload's driver measured during the run (`record --workload-result`).
    #[serde(default)]
    pub workload: Option<Workload>,
    /// Go runtime GC events (`record --go-gc`).
    #[serde(default)]
    pub gc: Option<GoGc>,
    /// Peak resident set size of the target, KiB (wait4 for a spawned target, VmHWM from /proc
    /// for a live one, read as the recording ends).
    #[serde(default)]
    pub max_rss_kb: Option<u64>,
    /// What a dhat-instrumented target allocated (`record --heap-profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<Heap>,
    /// Timestamped events (`record --timeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// Who held the CPU while a target thread waited for one: by waiter, holder and CPU,
    /// sorted by time, descending.
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "cpu_holders")]
    pub runqueue_holders: Vec<RunqueueHolder>,
    /// The target's cgroup CPU quota and its throttling during the recording (cgroup v2
    /// `cpu.max` and `cpu.stat`), where the target has a cgroup with a controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupCpu>,
    /// The OpenTelemetry spans the target's threads named in their thread context (OTEP
    /// 4947), each with its anatomy, when the target publishes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otel_spans: Option<OtelSpans>,
}

/// What the target's OpenTelemetry thread context (OTEP 4947) gave: each span a thread served,
/// its time on CPU, blocked and waiting for a CPU, from the switches of its threads (no probe
/// per request), and what reading the records found.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OtelSpans {
    /// Where the context was found: the binary and the thread-pointer offset of its
    /// `otel_thread_ctx_v1`.
    pub source: String,
    /// By first seen.
    pub spans: Vec<OtelSpan>,
    /// Records read and valid, at switch-outs and samples.
    pub read: u64,
    /// Records whose `valid` was 0: detached, or being written.
    pub not_valid: u64,
    /// Records refused: `valid` neither 0 nor 1, or larger than 640 bytes.
    pub refused: u64,
    /// Pointers that could not be read: wild, or unmapped.
    pub unreadable: u64,
    /// Spans not kept, the kernel's table being full.
    pub table_full: u64,
}

/// One OpenTelemetry span's anatomy.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OtelSpan {
    /// W3C hex.
    pub trace_id: String,
    pub span_id: String,
    /// The thread that last served it.
    pub tid: u32,
    /// On CPU between two switch-outs that both saw it: exact.
    pub oncpu_ns: u64,
    /// On CPU in intervals during which the thread's span changed, begun with this one:
    /// whose that time was, the samples tell.
    pub changed_ns: u64,
    pub blocked_ns: u64,
    pub runqueue_ns: u64,
    /// On-CPU samples taken while it was the thread's span.
    pub samples: u64,
    pub switches: u64,
    /// First and last seen, CLOCK_MONOTONIC ns.
    pub first_ns: u64,
    pub last_ns: u64,
}

/// A task that ran on a CPU while a target thread waited for it: the task the waiter took
/// the CPU from when it finally ran (`prev` of that switch).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunqueueHolder {
    /// The waiting thread.
    pub tgid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// The task that held the CPU: its thread id, process id and name (0 and "swapper" for
    /// the idle task).
    pub holder_tgid: u32,
    pub holder_tid: u32,
    pub holder_comm: String,
    /// Its nice value (static priority − 120; realtime tasks show their priority too).
    pub holder_nice: i32,
    /// Waits this task ended by giving up the CPU, and their total time, ns.
    pub count: u64,
    pub ns: u64,
}

/// The target's cgroup CPU controller over the recording.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CgroupCpu {
    /// The cgroup's path under /sys/fs/cgroup.
    pub path: String,
    /// `cpu.max`: the quota and period, µs (`None`: no quota, "max").
    pub quota_us: Option<u64>,
    pub period_us: u64,
    /// `cpu.stat` differences between start and end: periods with a quota, periods throttled,
    /// and time throttled.
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_ns: u64,
}

/// Garbage collection of a Go target, from entry-only uprobes on its runtime.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GoGc {
    pub binary: String,
    /// Every runtime function tried, and whether this binary has it (Go versions differ).
    pub symbols: Vec<GcSymbol>,
    /// Completed GC cycles (entries of runtime.gcMarkTermination): matches `GODEBUG=gctrace=1`.
    pub cycles: u64,
    /// Requests to start a cycle (runtime.gcStart; several goroutines may ask for one cycle).
    pub starts: u64,
    /// Stop-the-world pauses (GC's and others', e.g. ReadMemStats), from stop to restart.
    pub pauses: u64,
    pub pause_total_ns: u64,
    pub pause_max_ns: u64,
    pub mark_assists: u64,
    pub mark_done: u64,
    /// Cycle ends and pauses on the recording's clock (ns since `meta.start_mono_ns`).
    pub timeline: Vec<GcMark>,
    /// Events whose timestamps were lost (ring buffer full); the counts above are exact.
    pub events_lost: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GcSymbol {
    pub symbol: String,
    pub found: bool,
}

/// A point or span on the GC timeline.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GcMark {
    /// "cycle" (mark termination) or "pause" (stop-the-world).
    pub kind: String,
    pub at_ns: u64,
    /// Pauses: how long the world was stopped.
    pub duration_ns: u64,
}

/// A workload driver's view of the run: operations and their latency.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Workload {
    pub name: String,
    pub build: String,
    /// The driver's parameters (producers, message size, …), as text.
    pub parameters: std::collections::BTreeMap<String, String>,
    pub operations: u64,
    pub errors: u64,
    pub duration_ns: u64,
    pub throughput_per_s: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub p99_99_ns: u64,
    pub max_ns: u64,
    /// Per-window series.
    #[serde(with = "window_rows")]
    pub windows: Vec<WorkloadWindow>,
    /// Where the driver's window 0 starts on the recording's clock (ns since
    /// `meta.start_mono_ns`), when the driver said when it started.
    #[serde(default)]
    pub start_offset_ns: Option<u64>,
}

/// One window of a driver's series: named fields in the driver's result file; a row
/// `[start_ms, operations, p99_ns, max_ns]` in the run file, its form since its first version.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkloadWindow {
    /// From the driver's start, ms.
    pub start_ms: u64,
    /// Operations completed in the window.
    pub operations: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// The run file's form of the window series: one 4-number row per window.
mod window_rows {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::WorkloadWindow;

    type Row = (u64, u64, u64, u64);

    pub fn serialize<S: Serializer>(w: &[WorkloadWindow], s: S) -> Result<S::Ok, S::Error> {
        let rows: Vec<Row> = w
            .iter()
            .map(|w| (w.start_ms, w.operations, w.p99_ns, w.max_ns))
            .collect();
        rows.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<WorkloadWindow>, D::Error> {
        let rows = Vec::<Row>::deserialize(d)?;
        Ok(rows
            .into_iter()
            .map(|(start_ms, operations, p99_ns, max_ns)| WorkloadWindow {
                start_ms,
                operations,
                p99_ns,
                max_ns,
            })
            .collect())
    }
}

/// Waits summarised: count, time, a log2 histogram of ns.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WaitSummary {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Futex: waits that timed out (ETIMEDOUT); contention: lock not taken.
    pub timeouts: u64,
    /// Futex: waits that did not block because the word had changed (EAGAIN).
    pub eagain: u64,
    pub hist: Log2Hist,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Locks {
    /// Every futex wait of the targets (FUTEX_WAIT, WAIT_BITSET, LOCK_PI, futex_wait(v)).
    pub futex: WaitSummary,
    /// Futex words by total wait time, descending.
    pub futex_top: Vec<FutexRow>,
    /// Kernel lock contention (lock:contention_begin/end); `None` where the tracepoints are
    /// missing.
    pub contention: Option<WaitSummary>,
    /// `--uprobe-span` functions: entry-to-return time.
    pub spans: Vec<SpanRow>,
    /// Locks a runtime keeps at a known place in each process (CPython's GIL), found from its
    /// symbols and its version's layout: a futex wait on a word inside one is a wait for it,
    /// whatever its stack names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_locks: Vec<RuntimeLock>,
}

/// A lock of a runtime, at a known place in a process.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RuntimeLock {
    pub tgid: u32,
    /// What it is, as a sentence's object: "the GIL".
    pub name: String,
    /// Where it is: `_PyRuntime.ceval.gil` (3.11), `_PyRuntime._main_interpreter._gil`.
    pub symbol: String,
    /// The structure's first byte in the process, and its size: every futex word of the lock
    /// (its mutex, its condition variables) lies inside.
    pub start: u64,
    pub len: u64,
}

impl Locks {
    /// The runtime lock of process `tgid` whose structure holds futex word `uaddr` (0x…).
    pub fn runtime_lock(&self, tgid: u32, uaddr: &str) -> Option<&RuntimeLock> {
        let addr = u64::from_str_radix(uaddr.trim_start_matches("0x"), 16).ok()?;
        self.runtime_locks
            .iter()
            .find(|l| l.tgid == tgid && l.start <= addr && addr < l.start + l.len)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FutexRow {
    pub tgid: u32,
    /// The futex word's address, as 0x… (0 for futex_waitv).
    pub uaddr: String,
    /// The static or global variable that holds it (`DEMO_LOCK`, `TABLE+0x40`), when it is
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    pub count: u64,
    pub total_ns: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SpanRow {
    /// The name figures use (`span.<label>`): given as LABEL=SYMBOL, else the symbol.
    #[serde(default)]
    pub label: String,
    pub symbol: String,
    pub binary: String,
    pub stats: WaitSummary,
    /// Every instance's duration, and the slowest and a sample of the typical instances
    /// whole (absent in runs recorded before spans were measured one by one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anatomy: Option<SpanAnatomy>,
}

/// A span measured one by one: the duration of every instance, and the anatomy of the
/// slowest ones and of a uniform sample of the others.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SpanAnatomy {
    /// Instances that returned in the recording.
    pub count: u64,
    pub total_ns: u64,
    /// Every instance's duration: (the bucket's lowest ns, instances), ascending; a bucket is
    /// at most 1/64 of its value wide.
    pub hist: Vec<(u64, u64)>,
    /// Returns of instances entered before the recording started (not counted).
    pub open_at_start: u64,
    /// Entries inside an instance open on the same thread (nested or recursive: the
    /// outermost is the instance).
    pub nested: u64,
    /// Instances still open at the stop, on a live thread.
    pub open_at_stop: u64,
    /// Instances whose thread exited inside them: they never returned.
    pub never_returned: u64,
    /// Go instances whose return was not seen (a later call on the goroutine began at their
    /// stack depth or above): dropped, not timed.
    #[serde(default)]
    pub missed: u64,
    /// Slow instances the table of kept ones had no room for (sent and dropped, or counted
    /// and not sent once it was full of slower ones), and those the ring buffer lost (their
    /// durations are in `hist`).
    pub dropped: u64,
    /// At least this slow, an instance was sent whole: the threshold in force at the end.
    pub threshold_ns: u64,
    /// One in this many instances was sent whole as a typical one, for contrast (at the end).
    pub typical_every: u64,
    /// The instances kept whole: the slowest, then the sample of typical ones.
    pub instances: Vec<SpanInstance>,
}

/// Quantile `q` of `count` durations in buckets given slowest first as (bucket's lowest
/// value, count): the lowest value of the bucket at which ceil(count × (1 − q)) durations lie
/// at or above (at least one); 0 when there are none. Spans' percentiles are read so, in the
/// kernel's thresholds as in every figure.
pub fn quantile_low(count: u64, slowest_first: impl Iterator<Item = (u64, u64)>, q: f64) -> u64 {
    if count == 0 {
        return 0;
    }
    // Less a millionth: 1 − 0.99 is not exactly 0.01 in binary.
    let above = ((count as f64) * (1.0 - q) - 1e-6).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (v, n) in slowest_first {
        seen += n;
        if seen >= above {
            return v;
        }
    }
    0
}

impl SpanAnatomy {
    /// Quantile `q` of the instances, from the histogram of every duration: the lowest value
    /// of the bucket at which ceil(count × (1 − q)) instances lie at or above (at least one);
    /// 0 when none returned. The figures, the summary and explain all read percentiles so.
    pub fn at_quantile(&self, q: f64) -> u64 {
        quantile_low(self.count, self.hist.iter().rev().copied(), q)
    }

    /// The slowest instance: the longest kept whole, or the top bucket's lowest value when
    /// that is longer.
    pub fn max_ns(&self) -> u64 {
        let kept = self.instances.iter().map(|i| i.duration_ns).max();
        kept.unwrap_or(0).max(self.hist.last().map_or(0, |h| h.0))
    }
}

/// One span instance, whole. Times in ns; stacks are indices into `Profiles::span_stacks`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SpanInstance {
    pub tgid: u32,
    pub tid: u32,
    /// From the recording's start.
    pub start_ns: u64,
    pub duration_ns: u64,
    pub oncpu_ns: u64,
    pub blocked_ns: u64,
    pub runqueue_ns: u64,
    /// Sent because it was slow (else: a sampled typical one).
    pub slow: bool,
    /// Blocked time by stack and waker, largest first.
    pub blocked: Vec<SpanWait>,
    /// Blocked time beyond the parts kept.
    #[serde(default)]
    pub other_blocked_ns: u64,
    /// Waits for a CPU by the task that held it, largest first.
    pub cpu: Vec<SpanCpuWait>,
    #[serde(default)]
    pub other_cpu_ns: u64,
    /// On-CPU samples taken inside it, by stack.
    pub samples: Vec<SpanSample>,
    /// A Go span's instance: keyed by its goroutine, which may move between threads. Its
    /// `oncpu_ns`, `blocked_ns` and `runqueue_ns` are its threads' while it ran on them (not
    /// split by stack or holder); its time on no thread is in `go_time`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub go: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_time: Option<GoTime>,
    /// The thread it returned on, when not the one it began on.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub end_tid: u32,
    /// Go: the part of it during a GC mark phase (from a cycle's start to its mark
    /// termination), and during a stop-the-world pause.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub gc_mark_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub gc_stw_ns: u64,
}

/// A Go span instance's goroutine on no thread, and its GC assists.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GoTime {
    /// Runnable, waiting in the Go scheduler for a thread (a P), ns.
    pub sched_ns: u64,
    /// Parked, by wait reason (Go's names: "sync.Mutex.Lock", "IO wait", …), largest first.
    pub parked: Vec<GoParked>,
    /// Parked with reasons beyond those kept.
    #[serde(default)]
    pub other_parked_ns: u64,
    /// In GC assists on CPU, ns: part of the instance's `oncpu_ns`.
    pub assist_ns: u64,
    /// In GC assists waiting for a CPU, ns: part of its `runqueue_ns` (the runtime's own
    /// assist time, `/cpu/classes/gc/mark/assist:cpu-seconds`, is both).
    #[serde(default)]
    pub assist_runqueue_ns: u64,
}

impl GoTime {
    pub fn parked_ns(&self) -> u64 {
        self.parked.iter().map(|p| p.ns).sum::<u64>() + self.other_parked_ns
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GoParked {
    pub reason: String,
    pub count: u32,
    pub ns: u64,
    /// Of the first park with this reason: where the goroutine parked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<u32>,
    /// Of the longest park with this reason whose end was seen: the thread that made the
    /// goroutine ready, and its stack there (the waking goroutine's frames; the runtime's
    /// own where the scheduler, a timer or the network poller did).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub waker_tid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker_stack: Option<u32>,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SpanWait {
    pub ns: u64,
    /// Intervals off CPU.
    pub count: u32,
    /// The state it blocked in.
    pub state: Label,
    /// Its stack (user and kernel), `None` when not walked.
    pub stack: Option<u32>,
    /// The thread that woke it (0: unknown, or not a wakeup the probes saw).
    pub waker_tgid: u32,
    pub waker_tid: u32,
    pub waker_stack: Option<u32>,
    /// The waker's own time off CPU within these waits, its state and user stack then: what
    /// a lock's holder did while it held it.
    pub held_ns: u64,
    pub held_state: Label,
    pub held_stack: Option<u32>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SpanCpuWait {
    pub ns: u64,
    pub tgid: u32,
    pub tid: u32,
    pub comm: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SpanSample {
    pub samples: u32,
    pub stack: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub tool_version: String,
    /// The command line that was spawned, or the target's /proc cmdline in pid mode.
    pub command: Vec<String>,
    pub mode: TargetMode,
    pub pid: u32,
    pub follow_children: bool,
    /// Child processes followed (tgids), in order of appearance.
    pub children: Vec<u32>,
    pub host: String,
    pub kernel: String,
    /// Unix time, ns.
    pub start_wall_ns: u64,
    pub end_wall_ns: u64,
    /// CLOCK_MONOTONIC, ns (the clock of the kernel-side timestamps).
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    pub end: EndReason,
    /// "ebpf" when the kernel side ran; "degraded" for /proc and perf software counters only.
    pub collector: Collector,
    /// Switches the kernel did not report (a target's thread ran, or left a CPU, with no
    /// event): each was timed from the nearest reported switch, so a thread's times still
    /// add up to its life. Nothing was lost.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreported_switches: u64,
    /// This run is one window of a continuous recording (`record --every`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// Names the run carries and exports as attributes: `service`, `instance`, `build`,
    /// `workload` (`record --service/--instance/--build/--workload`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// What is known of the target process beyond its command line.
    #[serde(default, skip_serializing_if = "ProcessInfo::is_empty")]
    pub process: ProcessInfo,
    /// How the command line was redacted, when not by the default rules alone.
    #[serde(default, skip_serializing_if = "Redaction::is_default")]
    pub redaction: Redaction,
    /// How syscalls were timed; `None` in runs from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_timing: Option<SyscallTiming>,
    /// What the recorder's own uprobes cost the target (spans' probes); `None` without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_costs: Option<ProbeCosts>,
    /// The recorder's BPF programs' own run time, sampled; `None` where it was not measured
    /// (another collector, a continuous recording's windows, runs from before it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_times: Option<ProgramTimes>,
}

/// The recorder's BPF programs' own run time. The kernel counts a program's runs and their
/// time only while its run-time statistics are on (`BPF_ENABLE_STATS`), which adds two clock
/// reads to every run of every program; so the recorder turns them on for a tenth of the
/// recording, 100 ms at a random point of each second, and the counts are scaled by the share
/// of the recording they covered. A host that keeps them on (`kernel.bpf_stats_enabled`)
/// covers all of it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProgramTimes {
    /// The share of the recording the statistics were on, 0 to 1.
    pub covered: f64,
    /// Each program that ran while they were on, the longest first.
    pub programs: Vec<ProgramTime>,
}

/// One BPF program's runs and their time while the statistics were on.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProgramTime {
    pub name: String,
    pub runs: u64,
    pub run_ns: u64,
}

impl ProgramTimes {
    /// The programs' time over the whole recording, ns: what was counted, scaled by the share
    /// it covered.
    pub fn total_ns(&self) -> f64 {
        self.scaled(self.programs.iter().map(|p| p.run_ns).sum())
    }

    /// A count taken while the statistics were on, scaled to the whole recording.
    pub fn scaled(&self, counted: u64) -> f64 {
        if self.covered > 0.0 {
            counted as f64 / self.covered
        } else {
            0.0
        }
    }
}

/// What a breakpoint costs on this host, measured as the recording started: switchyard
/// places a span's entry probe (and the return probe with it) on functions of its own whose
/// first instruction the kernel emulates, or single-steps out of line, and times calls to
/// them, less the same calls unprobed. ns a call.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TrapCosts {
    /// An entry probe on an instruction the kernel emulates (`push %rbp`).
    pub emulated_ns: f64,
    /// An entry probe on one it single-steps (a 5-byte `nop`).
    pub stepped_ns: f64,
    /// Entry and return probes sharing an emulated instruction's breakpoint.
    pub emulated_with_return_ns: f64,
    /// Entry and return probes sharing a single-stepped instruction's breakpoint.
    pub stepped_with_return_ns: f64,
    /// A plain probe on a `RET`: a Go span's way out (Go code gets no return probe). `None`
    /// in runs recorded before it was timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ret_ns: Option<f64>,
    /// Calls timed for each, in 10 batches (the fastest counts).
    pub calls: u32,
}

/// One span's probes and what they cost the target.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProbeCost {
    /// The span's label.
    pub span: String,
    pub symbol: String,
    /// The entry probe's instruction is one the kernel emulates.
    pub emulated: bool,
    /// The return probe shares the entry's breakpoint (one trap on the way in).
    pub shared_return: bool,
    /// A Go span: its entry past the stack check, and a plain probe on each `RET`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub go: bool,
    /// Calls that hit the probes in the recording.
    pub calls: u64,
    /// What each call paid in traps, ns: from [`TrapCosts`] by the probes' kind; `None`
    /// where no measured kind matches (a Go span's, in a run from before `RET`s were timed).
    pub ns_per_call: Option<f64>,
}

/// The recorder's probes in a run: the host's trap costs and each span's probes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProbeCosts {
    pub traps: TrapCosts,
    pub probes: Vec<ProbeCost>,
}

impl ProbeCost {
    /// The probes' whole cost over the recording, ns.
    pub fn total_ns(&self) -> Option<f64> {
        self.ns_per_call.map(|c| c * self.calls as f64)
    }
}

impl TrapCosts {
    /// What a call pays for a native span's probes: both on the entry's breakpoint; or, apart,
    /// the entry's and a return probe's on the function's first instruction, which the kernel
    /// single-steps (the entry moved past it because it cannot be emulated).
    pub fn per_call(&self, emulated: bool, shared_return: bool) -> f64 {
        match (shared_return, emulated) {
            (true, true) => self.emulated_with_return_ns,
            (true, false) => self.stepped_with_return_ns,
            (false, true) => self.emulated_ns + self.stepped_with_return_ns,
            (false, false) => self.stepped_ns + self.stepped_with_return_ns,
        }
    }

    /// What a call pays for a Go span's probes: its entry's breakpoint past the stack check,
    /// emulated or not, and the plain probe on the `RET` it leaves by.
    pub fn per_go_call(&self, emulated: bool) -> Option<f64> {
        let entry = if emulated {
            self.emulated_ns
        } else {
            self.stepped_ns
        };
        self.ret_ns.map(|ret| entry + ret)
    }
}

/// ", 9.9% of the target's time on CPU": `total` ns against the target's `oncpu` ns; empty
/// when it had none.
fn oncpu_share(total: f64, oncpu: u64) -> String {
    if oncpu > 0 {
        format!(
            ", {} of the target's time on CPU",
            units::percent(total / oncpu as f64)
        )
    } else {
        String::new()
    }
}

/// How syscalls were timed (`record --syscall-latency`, `--syscall-budget`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SyscallTiming {
    /// One call in this many timed (beyond the budget, where there is one); 1: every call,
    /// 0: none.
    pub every: u32,
    /// Timed calls a second each thread gets, every one, before its calls are drawn; 0: no
    /// budget.
    pub budget_per_s: u32,
}

/// The target process as the semantic conventions describe one: its executable and its
/// language runtime, where known.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessInfo {
    /// `/proc/PID/exe` at the start.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub executable: String,
    /// `go`, `cpython`, `java`, `nodejs`; empty when not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    /// `go1.26.8`, `3.11`, `17.0.13`; empty when not known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime_version: String,
    /// The `service.*` and `deployment.*` attributes of the OpenTelemetry process context the
    /// target published (OTEP 4719), which the run's resource takes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub published: BTreeMap<String, String>,
    /// Why a process context the target published could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_error: Option<String>,
}

impl ProcessInfo {
    pub fn is_empty(&self) -> bool {
        *self == ProcessInfo::default()
    }
}

/// Redaction beyond the default rules ([`redact`]): turned off (`record --no-redact`), or
/// rules added (`--redact PATTERN`; counted, since a pattern can itself name a secret).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Redaction {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub off: bool,
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub added_rules: u32,
}

impl Redaction {
    pub fn is_default(&self) -> bool {
        *self == Redaction::default()
    }

    /// What a reader of the run is told, when it is not the default.
    pub fn note(&self) -> Option<String> {
        if self.off {
            Some(
                "off (--no-redact): the command line is kept as it was, secrets and all, in this run and all made from it"
                    .into(),
            )
        } else if self.added_rules > 0 {
            Some(format!(
                "the default rules and {} added (--redact)",
                self.added_rules
            ))
        } else {
            None
        }
    }
}

/// Where a window stands in its continuous recording.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Window {
    /// 1 for the first window.
    pub index: u64,
    /// The length asked for (`--every`), ns; the last window ends with the recording.
    pub every_ns: u64,
    /// When the recording's first window started, Unix time ns.
    pub recording_start_wall_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Meta {
    pub fn duration_ns(&self) -> u64 {
        self.end_mono_ns.saturating_sub(self.start_mono_ns)
    }
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TargetMode {
    Spawn,
    Pid,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Collector {
    Ebpf,
    Degraded,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EndReason {
    /// The target exited; `code` or `signal` as wait(2) reported it (unknown in pid mode).
    TargetExited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// `--duration` elapsed.
    Duration,
    /// A signal that ends a recording: Ctrl-C (SIGINT), SIGTERM, SIGQUIT, SIGHUP (a dropped
    /// terminal) or SIGPIPE (a reader of the output gone).
    Interrupted { signal: i32 },
    /// A window of a continuous recording was cut (`--every`); the recording went on.
    Window,
}

impl EndReason {
    /// How the recording ended, in a few words.
    pub fn describe(&self) -> String {
        match self {
            EndReason::TargetExited { code: Some(c), .. } => format!("target exited with code {c}"),
            EndReason::TargetExited {
                signal: Some(s), ..
            } => format!("target killed by {}", signal_name(*s)),
            EndReason::TargetExited { .. } => "target exited".into(),
            EndReason::Duration => "--duration elapsed".into(),
            EndReason::Interrupted { signal } => format!("interrupted by {}", signal_name(*signal)),
            EndReason::Window => "window cut (--every)".into(),
        }
    }
}

/// A signal's name (`SIGHUP`), or its number for one without a usual name here.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Missing {
    pub figure: String,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counter {
    /// perf's name: task-clock, context-switches, cpu-migrations, minor-faults, …
    pub name: String,
    pub value: Option<u64>,
    /// Why the value is missing ("not supported"), or how it was scaled.
    pub note: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SyscallRow {
    pub nr: u32,
    pub name: String,
    pub count: u64,
    pub errors: u64,
    /// Sorted by count, descending.
    pub errnos: Vec<ErrnoCount>,
    /// Time in the calls. Where `timed` says only some were timed, the timed calls' weighted
    /// mean times `count`: an estimate.
    pub total_ns: u64,
    /// The longest timed call.
    pub max_ns: u64,
    /// The timed calls' durations, each counted by its weight (1 over its chance of being
    /// timed) where timing was sampled.
    pub latency: Log2Hist,
    /// How many calls were timed, when not all of them were (timed by budget, or one in about
    /// N); `None`: every call was, and the figures above are exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed: Option<u64>,
    /// Of `timed`, how many were drawn (one in N) beyond their thread's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn: Option<u64>,
}

impl SyscallRow {
    /// No call of this syscall was timed (`--syscall-latency` left them all out): its time
    /// figures are unknown, not zero.
    pub fn untimed(&self) -> bool {
        self.timed == Some(0)
    }

    /// `shown`, one of this syscall's time figures as text, or a dash where none was timed.
    pub fn or_untimed(&self, shown: String) -> String {
        if self.untimed() { "—".into() } else { shown }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrnoCount {
    pub errno: u32,
    pub name: String,
    pub count: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ThreadRow {
    pub tid: u32,
    pub tgid: u32,
    pub comm: String,
    pub voluntary: u64,
    pub involuntary: u64,
    pub oncpu_ns: u64,
    /// Off CPU after a voluntary switch, up to the wakeup that ended the wait (sleeping,
    /// waiting on something).
    pub blocked_ns: u64,
    /// Runnable but off CPU, waiting for a CPU: from a preemption to the next switch-in, and
    /// from a wakeup to the switch-in that follows it (scheduler delay).
    pub runqueue_ns: u64,
    /// The part of `runqueue_ns` that followed a wakeup (the rest followed a preemption).
    #[serde(default, alias = "woken_wait_ns")]
    pub runqueue_after_wakeup_ns: u64,
    pub offcpu: Log2Hist,
    /// Each wait for a CPU, wakeup or preemption to switch-in (`runqlat -P`'s histogram).
    #[serde(default, alias = "sched_delay")]
    pub runqueue_waits: Log2Hist,
}

impl ThreadRow {
    pub fn offcpu_ns(&self) -> u64 {
        self.blocked_ns + self.runqueue_ns
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DropRow {
    pub reason: String,
    pub count: u64,
}

/// Why a run file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read run file `{path}`")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("`{path}` is not a valid run file (line {line}, column {column})")]
    Corrupt {
        path: String,
        line: usize,
        column: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("`{path}` is not a valid run file: it is not text")]
    NotText { path: String },
    #[error("`{path}` is not a valid run file (its format is `{found}`, not `{FORMAT}`)")]
    Format { path: String, found: String },
    #[error(
        "`{path}` is a run file of schema version {found}; this build reads version {SCHEMA_VERSION}"
    )]
    Version { path: String, found: u32 },
}

impl Run {
    /// Reads and validates a run file.
    pub fn load(path: &Path) -> Result<Run, LoadError> {
        let shown = path.display().to_string();
        let bytes = fs::read(path).map_err(|source| LoadError::Io {
            path: shown.clone(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| LoadError::NotText {
            path: shown.clone(),
        })?;
        Self::from_json(&text, &shown)
    }

    pub fn from_json(text: &str, shown: &str) -> Result<Run, LoadError> {
        // Check the version first, so a newer file gets a version error, not a field error.
        #[derive(Deserialize)]
        struct Head {
            format: String,
            schema_version: u32,
        }
        let corrupt = |source: serde_json::Error| LoadError::Corrupt {
            path: shown.to_string(),
            line: source.line(),
            column: source.column(),
            source,
        };
        let head: Head = serde_json::from_str(text).map_err(corrupt)?;
        if head.format != FORMAT {
            return Err(LoadError::Format {
                path: shown.to_string(),
                found: head.format,
            });
        }
        if head.schema_version != SCHEMA_VERSION {
            return Err(LoadError::Version {
                path: shown.to_string(),
                found: head.schema_version,
            });
        }
        serde_json::from_str(text).map_err(corrupt)
    }

    /// Writes the run whole or not at all, without harming what the path names (a device
    /// is written through, a link is never followed into a file): [`outfile::write`].
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(io::Error::other)?;
        outfile::write(path, (text + "\n").as_bytes())
    }

    /// The workload this run records: as `record --workload` named it, else as its driver did.
    pub fn workload_name(&self) -> Option<&str> {
        self.meta
            .labels
            .get("workload")
            .map(String::as_str)
            .or(self.workload.as_ref().map(|w| w.name.as_str()))
    }

    /// The build this run records: `record --build`, else its driver's.
    pub fn build_name(&self) -> Option<&str> {
        self.meta
            .labels
            .get("build")
            .map(String::as_str)
            .or(self.workload.as_ref().map(|w| w.build.as_str()))
    }

    /// The threads' and syscalls' figures summed, once for every reader.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for r in &self.threads {
            t.oncpu_ns += r.oncpu_ns;
            t.blocked_ns += r.blocked_ns;
            t.runqueue_ns += r.runqueue_ns;
            t.runqueue_after_wakeup_ns += r.runqueue_after_wakeup_ns;
            t.voluntary += r.voluntary;
            t.involuntary += r.involuntary;
        }
        for s in &self.syscalls {
            t.syscalls += s.count;
            t.syscall_errors += s.errors;
            t.syscall_ns += s.total_ns;
        }
        t
    }

    pub fn syscall_total(&self) -> u64 {
        self.totals().syscalls
    }

    /// Whether syscall times were taken at all: not when every row left out of timing has
    /// none timed (`record --syscall-latency 0`; futex waits are timed regardless).
    pub fn syscalls_timed(&self) -> bool {
        let mut sampled = self.syscalls.iter().filter_map(|s| s.timed).peekable();
        sampled.peek().is_none() || sampled.any(|t| t > 0)
    }

    /// What the recorder's own probes cost the target, for the summary and the page: the
    /// host's breakpoint costs as timed at the start, then a line per span's probes (calls,
    /// cost a call, the total and its share of the target's time on CPU). Empty without spans.
    pub fn probe_cost_lines(&self) -> Vec<String> {
        let Some(pc) = &self.meta.probe_costs else {
            return Vec::new();
        };
        let t = &pc.traps;
        let ret = t.ret_ns.map_or(String::new(), |r| {
            format!(", {} on a RET", units::ns_latency(r.round() as u64))
        });
        let mut lines = vec![format!(
            "the recorder's probes: a breakpoint here costs {} where the kernel emulates its \
             instruction, {} where it single-steps it ({} and {} with the return probe on it{ret}; \
             the fastest of 10 batches of {} calls, timed at the start)",
            units::ns_latency(t.emulated_ns.round() as u64),
            units::ns_latency(t.stepped_ns.round() as u64),
            units::ns_latency(t.emulated_with_return_ns.round() as u64),
            units::ns_latency(t.stepped_with_return_ns.round() as u64),
            units::thousands(u64::from(t.calls / 10)),
        )];
        let oncpu = self.totals().oncpu_ns;
        for p in &pc.probes {
            let kind = match (p.go, p.shared_return, p.emulated) {
                (true, _, true) => "Go: emulated entry past the stack check, a probe on each RET",
                (true, _, false) => {
                    "Go: single-stepped entry past the stack check, a probe on each RET"
                }
                (false, true, true) => "entry and return on one emulated breakpoint",
                (false, true, false) => "entry and return on one single-stepped breakpoint",
                (false, false, true) => "emulated entry, single-stepped return",
                (false, false, false) => "single-stepped entry and return",
            };
            let cost = match (p.ns_per_call, p.total_ns()) {
                (Some(each), Some(total)) => {
                    let share = oncpu_share(total, oncpu);
                    format!(
                        " × {} = {}{share}",
                        units::ns_latency(each.round() as u64),
                        units::ns(total.round() as u64)
                    )
                }
                _ => ": Go code's return probes, not timed in this run".to_string(),
            };
            lines.push(format!(
                "  {} ({}, {kind}): {} calls{cost}",
                p.span,
                p.symbol,
                units::thousands(p.calls)
            ));
        }
        lines
    }

    /// What the recorder's BPF programs ran for, for the summary and the page: their time
    /// over the recording against the target's time on CPU, then a line per program (its
    /// runs, their mean and their time). Empty where it was not measured.
    pub fn program_time_lines(&self) -> Vec<String> {
        let Some(pt) = &self.meta.program_times else {
            return Vec::new();
        };
        if pt.programs.is_empty() || pt.covered <= 0.0 {
            return Vec::new();
        }
        let total = pt.total_ns();
        let share = oncpu_share(total, self.totals().oncpu_ns);
        let how = if pt.covered >= 0.999 {
            "counted throughout (the host keeps BPF statistics on)".to_string()
        } else {
            format!(
                "counted for {} of the recording, 100 ms at a random point of each second, and \
                 scaled",
                units::percent(pt.covered)
            )
        };
        let mut lines = vec![format!(
            "the recorder's BPF programs ran {}{share}; host-wide programs run for every task, \
             so that is the most of it the target paid ({how})",
            units::ns(total.round() as u64)
        )];
        for p in &pt.programs {
            let each = p.run_ns.checked_div(p.runs).unwrap_or(0);
            lines.push(format!(
                "  {}: {} runs × {} = {}",
                p.name,
                units::thousands(pt.scaled(p.runs).round() as u64),
                units::ns_latency(each),
                units::ns(pt.scaled(p.run_ns).round() as u64)
            ));
        }
        lines
    }

    /// How the syscall latencies were taken, when not from every call: one line for the
    /// summary and the page, naming the syscalls whose timing was sampled. `None`: every call
    /// was timed, and the times are exact.
    pub fn syscall_timing(&self) -> Option<String> {
        let sampled: Vec<&SyscallRow> =
            self.syscalls.iter().filter(|s| s.timed.is_some()).collect();
        let (timed, of) = sampled.iter().fold((0u64, 0u64), |(t, c), s| {
            (t + s.timed.unwrap_or(0), c + s.count)
        });
        if of == 0 {
            return None;
        }
        if timed == 0 {
            return Some(
                "latency not timed (--syscall-latency 0): counts and errors only".to_string(),
            );
        }
        let how = match self.meta.syscall_timing {
            Some(t) if t.budget_per_s > 0 && t.every > 1 => format!(
                ", every call up to {} a second a thread (--syscall-budget), then one in {} drawn at random and weighted by {}",
                units::thousands(u64::from(t.budget_per_s)),
                t.every,
                t.every
            ),
            Some(t) if t.every > 1 => {
                format!(
                    ", one in about {} a thread (--syscall-latency {})",
                    t.every, t.every
                )
            }
            _ => " (--syscall-latency)".to_string(),
        };
        let mut drawn: Vec<&&SyscallRow> = sampled
            .iter()
            .filter(|s| s.drawn.unwrap_or(0) > 0)
            .collect();
        drawn.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
        let names: Vec<String> = drawn
            .iter()
            .take(5)
            .map(|s| {
                format!(
                    "{} ({} of {} timed)",
                    s.name,
                    units::thousands(s.timed.unwrap_or(0)),
                    units::thousands(s.count)
                )
            })
            .collect();
        let sampled_names = match (names.is_empty(), drawn.len() > names.len()) {
            (true, _) => String::new(),
            (false, false) => format!("; sampled: {}", names.join(", ")),
            (false, true) => format!(
                "; sampled: {} and {} more",
                names.join(", "),
                drawn.len() - names.len()
            ),
        };
        Some(format!(
            "latency from {} of {} calls timed{how}{sampled_names}: total time estimated from the timed calls' weighted mean, max and histograms of the timed calls only",
            units::thousands(timed),
            units::thousands(of)
        ))
    }

    pub fn voluntary(&self) -> u64 {
        self.totals().voluntary
    }

    pub fn involuntary(&self) -> u64 {
        self.totals().involuntary
    }

    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.value)
    }

    pub fn syscall(&self, name: &str) -> Option<&SyscallRow> {
        self.syscalls.iter().find(|s| s.name == name)
    }

    /// Off-CPU share of thread time: off / (on + off), over all threads; `None` without data.
    pub fn offcpu_share(&self) -> Option<f64> {
        self.totals().offcpu_share()
    }
}

/// A run's threads and syscalls summed ([`Run::totals`]): the summary, the page and the
/// figures read these, and sum nothing of their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub oncpu_ns: u64,
    pub blocked_ns: u64,
    /// Waiting for a CPU, after preemptions and wakeups.
    pub runqueue_ns: u64,
    /// Of `runqueue_ns`, the waits after a wakeup (scheduler delay).
    pub runqueue_after_wakeup_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub syscalls: u64,
    pub syscall_errors: u64,
    /// Time inside syscalls, as timed.
    pub syscall_ns: u64,
}

impl Totals {
    pub fn offcpu_ns(&self) -> u64 {
        self.blocked_ns + self.runqueue_ns
    }

    /// Off-CPU share of thread time: off / (on + off); `None` without data.
    pub fn offcpu_share(&self) -> Option<f64> {
        let (on, off) = (self.oncpu_ns, self.offcpu_ns());
        (on + off > 0).then(|| off as f64 / (on + off) as f64)
    }
}

/// The name of an x86_64 syscall number, or `syscall_<nr>`.
pub fn syscall_name(nr: u32) -> String {
    syscalls::x86_64::Sysno::new(nr as usize)
        .map(|s| s.name().to_string())
        .unwrap_or_else(|| format!("syscall_{nr}"))
}

/// The number of a syscall name, for lookups such as "getppid".
pub fn syscall_nr(name: &str) -> Option<u32> {
    name.parse::<syscalls::x86_64::Sysno>()
        .ok()
        .map(|s| s.id() as u32)
}

/// The symbolic name of an errno (`EAGAIN`), or `errno_<n>`.
pub fn errno_name(errno: u32) -> String {
    i32::try_from(errno)
        .ok()
        .and_then(|e| syscalls::Errno::new(e).name_and_description())
        .map_or_else(|| format!("errno_{errno}"), |(name, _)| name.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small, fixed run for unit tests.
    pub(crate) fn sample_run() -> Run {
        Run {
            format: FORMAT.into(),
            schema_version: SCHEMA_VERSION,
            meta: Meta {
                tool_version: "0.1.0".into(),
                command: vec!["demo".into()],
                mode: TargetMode::Spawn,
                pid: 100,
                follow_children: true,
                children: vec![],
                host: "host".into(),
                kernel: "6.18".into(),
                start_wall_ns: 0,
                end_wall_ns: 2_000_000_000,
                start_mono_ns: 1_000_000_000,
                end_mono_ns: 3_000_000_000,
                end: EndReason::TargetExited {
                    code: Some(0),
                    signal: None,
                },
                collector: Collector::Ebpf,
                unreported_switches: 0,
                window: None,
                labels: BTreeMap::new(),
                process: ProcessInfo::default(),
                redaction: Redaction::default(),
                syscall_timing: None,
                probe_costs: None,
                program_times: None,
            },
            missing: vec![],
            counters: vec![Counter {
                name: "task-clock".into(),
                value: Some(500_000_000),
                note: None,
            }],
            syscalls: vec![SyscallRow {
                nr: 110,
                name: "getppid".into(),
                count: 1000,
                errors: 0,
                errnos: vec![],
                total_ns: 100_000,
                max_ns: 1_000,
                latency: Log2Hist::from_buckets(&[0, 0, 0, 0, 0, 0, 1000]),
                timed: None,
                drawn: None,
            }],
            threads: vec![ThreadRow {
                tid: 100,
                tgid: 100,
                comm: "demo".into(),
                voluntary: 40,
                involuntary: 2,
                oncpu_ns: 500_000_000,
                blocked_ns: 1_500_000_000,
                runqueue_ns: 0,
                runqueue_after_wakeup_ns: 0,
                offcpu: Log2Hist::default(),
                runqueue_waits: Log2Hist::default(),
            }],
            drops: vec![],
            profiles: Profiles::default(),
            operations: None,
            locks: Locks::default(),
            workload: None,
            gc: None,
            max_rss_kb: None,
            heap: None,
            timeline: None,
            runqueue_holders: vec![],
            cgroup: None,
            otel_spans: None,
        }
    }

    #[test]
    fn names() {
        assert_eq!(syscall_name(0), "read");
        assert_eq!(syscall_name(110), "getppid");
        assert_eq!(syscall_name(231), "exit_group");
        assert_eq!(syscall_name(462), "mseal");
        assert_eq!(syscall_name(9999), "syscall_9999");
        assert_eq!(syscall_nr("getppid"), Some(110));
        assert_eq!(errno_name(11), "EAGAIN");
        assert_eq!(errno_name(2), "ENOENT");
    }

    #[test]
    fn the_programs_times_are_scaled_to_the_recording_and_set_against_its_cpu() {
        let mut run = sample_run();
        assert!(run.program_time_lines().is_empty());
        let oncpu = run.totals().oncpu_ns;
        // Counted over a tenth of the recording: 20,000 runs of 250 ns and 1,000 of 2 µs.
        run.meta.program_times = Some(ProgramTimes {
            covered: 0.1,
            programs: vec![
                ProgramTime {
                    name: "sched_switch".into(),
                    runs: 1_000,
                    run_ns: 2_000_000,
                },
                ProgramTime {
                    name: "sys_enter".into(),
                    runs: 20_000,
                    run_ns: 5_000_000,
                },
            ],
        });
        let lines = run.program_time_lines();
        let total = 70_000_000.0;
        assert_eq!(
            lines,
            [
                format!(
                    "the recorder's BPF programs ran 70.0 ms, {} of the target's time on CPU; \
                     host-wide programs run for every task, so that is the most of it the \
                     target paid (counted for 10.0% of the recording, 100 ms at a random point \
                     of each second, and scaled)",
                    units::percent(total / oncpu as f64)
                ),
                "  sched_switch: 10,000 runs × 2.0 µs = 20.0 ms".to_string(),
                "  sys_enter: 200,000 runs × 250 ns = 50.0 ms".to_string(),
            ]
        );
    }

    #[test]
    fn corrupt_file_names_line_and_column() {
        let err =
            Run::from_json("{\n  \"format\": \"switchyard-run\",\n  oops", "r.json").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("r.json") && msg.contains("line 3"), "{msg}");
    }

    #[test]
    fn wrong_format_and_version_are_named() {
        let err = Run::from_json(r#"{"format":"other","schema_version":1}"#, "x.json").unwrap_err();
        assert!(err.to_string().contains("not a valid run file"), "{err}");
        let err = Run::from_json(
            r#"{"format":"switchyard-run","schema_version":99}"#,
            "x.json",
        )
        .unwrap_err();
        assert!(err.to_string().contains("schema version 99"), "{err}");
    }
}
