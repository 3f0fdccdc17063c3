//! Loads the kernel-side programs, attaches them to the target, and reads the maps back as
//! model rows. The only crate that touches aya.

mod btf;
mod kinds;
pub mod tracefs;
mod unwind;
mod window;

use std::collections::BTreeMap;

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, PerCpuArray, PerCpuHashMap, ProgramArray, RingBuf},
    programs::{
        PerfEvent, RawTracePoint, TracePoint, UProbe,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
pub use kinds::{DropKind, GcEvent, GcKind};
pub use switchyard_common::{TimelineEvent, timeline as event_kind};

/// The bit `sched_switch` states carry for a preempted task.
pub const PREEMPT_FLAG: u32 = switchyard_common::tp::PREEMPT_FLAG as u32;
/// The bit an off-CPU state carries for the wait for a CPU after a wakeup.
pub const WOKEN_FLAG: u32 = switchyard_common::tp::WOKEN_FLAG as u32;
use switchyard_common::{
    CpuHolderKey, CpuHolderStats, ErrnoKey, FutexKey, FutexStats, GcEvent as RawGcEvent,
    HIST_BUCKETS, MAX_SPANS, OffCpuKey, OnCpuKey, SyscallStackKey, SyscallStats, ThreadStats,
    UserStack, WaitStats, WakeupKey, gc, globals, maps, programs, tp,
};
use switchyard_model::raw::{Raw, RawSample, RawWaker};
use switchyard_model::{
    CpuHolder, DropRow, ErrnoCount, FutexRow, Locks, Log2Hist, SpanRow, SyscallRow, ThreadRow,
    WaitSummary, errno_name, syscall_name,
};
pub use unwind::UnwindStats;
pub use window::Evicted;
use window::{Cumulative, Seen, ThreadTimes, Windows};

/// Bytes of one row of the kernel's unwind table.
pub const UNWIND_ROW_BYTES: u64 = std::mem::size_of::<switchyard_common::UnwindRow>() as u64;

/// True when a thread's last switch-out was its exit (state dead or zombie): it is gone, not
/// off CPU.
fn exited(t: &ThreadStats) -> bool {
    t.state as i64 & (tp::STATE_DEAD | tp::STATE_ZOMBIE) != 0
}

/// The error of map `name`, for `map_err`.
pub(crate) fn map_err(name: &'static str) -> impl Fn(aya::maps::MapError) -> Error + Copy {
    move |source| Error::Map { name, source }
}

/// bpf_map_update_elem's flag: insert only where the key has no entry.
const BPF_NOEXIST: u64 = 1;

/// The kernel-side object, built by build.rs (empty when the build was skipped).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/switchyard-probes"));

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the probes were not built into this binary (AYA_BUILD_SKIP was set)")]
    NotBuilt,
    #[error(transparent)]
    Tracefs(#[from] tracefs::Error),
    #[error("loading the probes")]
    Load(#[source] Box<aya::EbpfError>),
    #[error("program `{0}` is missing from the object")]
    MissingProgram(&'static str),
    #[error("map `{0}` is missing from the object")]
    MissingMap(&'static str),
    #[error("mapping `{name}` into memory")]
    Mmap {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the kernel verifier rejected program `{name}` ({errno})")]
    Verifier {
        name: &'static str,
        errno: std::io::Error,
        log: String,
    },
    #[error("loading program `{name}`")]
    Program {
        name: &'static str,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("{0} has none of the Go runtime's GC functions (not a Go binary, or stripped)")]
    NotGo(String),
    #[error("at most {MAX_SPANS} --uprobe-span functions, got {0}")]
    TooManySpans(usize),
    #[error("attaching a uprobe to `{symbol}` in {binary}")]
    Uprobe {
        symbol: String,
        binary: String,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("listing online CPUs")]
    Cpus(#[source] std::io::Error),
    #[error("kernel BTF: {0}")]
    Btf(String),
    #[error("reading map `{name}`")]
    Map {
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
}

impl Error {
    /// The last `lines` lines of the verifier log, when the kernel rejected a program.
    pub fn verifier_log_tail(&self, lines: usize) -> Option<String> {
        let Error::Verifier { name, log, .. } = self else {
            return None;
        };
        let all: Vec<&str> = log.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        Some(format!(
            "verifier log of `{name}` (last {} lines):\n{}",
            tail.len(),
            tail.join("\n")
        ))
    }

    /// True when the underlying cause is a missing privilege (EPERM/EACCES).
    pub fn is_permission(&self) -> bool {
        // The verifier also answers EACCES; that is a rejected program, not a privilege.
        if matches!(self, Error::Verifier { .. }) {
            return false;
        }
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cur {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
            {
                return true;
            }
            let text = e.to_string();
            if text.contains("Operation not permitted") || text.contains("Permission denied") {
                return true;
            }
            cur = e.source();
        }
        false
    }
}

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
    /// Stream timestamped events (`--timeline`).
    pub timeline: Option<TimelineConfig>,
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
}

#[derive(Clone, Debug)]
pub struct StackConfig {
    /// On-CPU sampling frequency, Hz (0: no on-CPU sampling).
    pub oncpu_hz: u64,
    /// Off-CPU intervals shorter than this are not recorded by stack.
    pub min_block_ns: u64,
    /// Take the user stack of one syscall in this many (0: none).
    pub syscall_every: u64,
    pub stack_map_size: u32,
    /// Off-CPU stacks are sampled: an interval of this long or longer is always walked, a
    /// shorter one in proportion to its length, its time weighted to stay unbiased (0: every
    /// interval is walked).
    pub offcpu_period_ns: u64,
    /// How user stacks are walked.
    pub unwind: Unwind,
    /// Rows of the unwind table array (CFI only), shared by every object.
    pub unwind_rows: u32,
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
    /// Entries of each stack map (`--stack-map-size`).
    stack_map_size: u32,
    /// A continuous recording's values at the last cut ([`Probes::cut`]).
    windows: Option<Windows>,
    /// What eviction removed so far.
    evicted: Evicted,
}

/// What the kernel side collected.
#[derive(Debug, Default)]
pub struct Collected {
    pub syscalls: Vec<SyscallRow>,
    pub threads: Vec<ThreadRow>,
    /// Who held the CPU while a target thread waited for one.
    pub cpu_holders: Vec<CpuHolder>,
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
}

impl Probes {
    /// Loads the programs with the target set and attaches them. Events start counting when
    /// this returns.
    pub fn attach(config: &Config) -> Result<Probes, Error> {
        if OBJECT.is_empty() {
            return Err(Error::NotBuilt);
        }
        tracefs::check_layout()?;
        let follow = u8::from(config.follow_children);
        let slots = inflight_slots();
        let mask = slots - 1;
        let stacks_on = u8::from(config.stacks.is_some());
        let (min_block, every, map_size, period) =
            config.stacks.as_ref().map_or((0, 0, 1, 0), |s| {
                (
                    s.min_block_ns,
                    s.syscall_every,
                    s.stack_map_size.max(1),
                    s.offcpu_period_ns,
                )
            });
        let task = btf::TaskOffsets::from_kernel()?;
        let filter_on = u8::from(matches!(config.syscalls, Syscalls::Only(_)));
        let cfi = config
            .stacks
            .as_ref()
            .filter(|s| s.unwind == Unwind::Cfi)
            .map(|s| s.unwind_rows.max(1));
        let unwind_mode = if cfi.is_some() {
            switchyard_common::unwind::MODE_CFI
        } else {
            switchyard_common::unwind::MODE_FP
        };
        let timeline_on = u8::from(config.timeline.is_some());
        let (timeline_bytes, timeline_syscall_ns) = config
            .timeline
            .map_or((4096, 0), |t| (t.buffer_bytes.max(4096), t.syscall_ns));
        let mut ebpf = EbpfLoader::new()
            .override_global(globals::TARGET_TGID, &config.tgid, true)
            .override_global(globals::FOLLOW_CHILDREN, &follow, true)
            .override_global(globals::INFLIGHT_MASK, &mask, true)
            .override_global(globals::STACKS_ON, &stacks_on, true)
            .override_global(globals::MIN_BLOCK_NS, &min_block, true)
            .override_global(globals::SYSCALL_STACK_EVERY, &every, true)
            .override_global(globals::UNWIND_MODE, &unwind_mode, true)
            .override_global(globals::OFFCPU_PERIOD_NS, &period, true)
            .override_global(globals::TASK_PID_OFFSET, &task.pid, true)
            .override_global(globals::TASK_TGID_OFFSET, &task.tgid, true)
            .override_global(globals::TASK_PRIO_OFFSET, &task.static_prio, true)
            .override_global(globals::SYSCALL_FILTER_ON, &filter_on, true)
            .override_global(globals::TIMELINE_ON, &timeline_on, true)
            .override_global(globals::TIMELINE_SYSCALL_NS, &timeline_syscall_ns, true)
            .map_max_entries(maps::TIMELINE, timeline_bytes)
            .map_max_entries(maps::INFLIGHT, slots)
            .map_max_entries(maps::LOCK_INFLIGHT, slots)
            .map_max_entries(maps::SPAN_INFLIGHT, slots * MAX_SPANS)
            .map_max_entries(maps::USER_STACKS, map_size)
            .map_max_entries(maps::KERNEL_STACKS, map_size)
            // One page's worth when unused: the array is mmap-able, so page-sized at least.
            .map_max_entries(maps::UNWIND_ROWS, cfi.unwrap_or(512))
            .load(OBJECT)
            .map_err(|e| Error::Load(Box::new(e)))?;

        if let Syscalls::Only(numbers) = &config.syscalls {
            let map = ebpf
                .map_mut(maps::SYSCALL_FILTER)
                .ok_or(Error::MissingMap(maps::SYSCALL_FILTER))?;
            let mut filter: Array<&mut MapData, u8> =
                Array::try_from(map).map_err(map_err(maps::SYSCALL_FILTER))?;
            for &nr in numbers {
                filter
                    .set(nr, 1, 0)
                    .map_err(map_err(maps::SYSCALL_FILTER))?;
            }
        }

        // The target is in TARGETS too, so followed children and the target look alike.
        {
            let map = ebpf
                .map_mut(maps::TARGETS)
                .ok_or(Error::MissingMap(maps::TARGETS))?;
            let mut targets: HashMap<&mut MapData, u32, u8> =
                HashMap::try_from(map).map_err(map_err(maps::TARGETS))?;
            targets
                .insert(config.tgid, 1, 0)
                .map_err(map_err(maps::TARGETS))?;
        }

        // The target's tables before the first stack is walked.
        let tables = match cfi {
            Some(rows) => {
                let mut t = unwind::Tables::new(&ebpf, rows)?;
                if !config.before_exec {
                    let text = std::fs::read_to_string(format!("/proc/{}/maps", config.tgid)).ok();
                    t.refresh(&mut ebpf, config.tgid, text.as_deref())?;
                }
                Some(t)
            }
            None => None,
        };

        // Follow first, then the scheduler, then syscalls: a child forked while attaching is
        // not missed, and no syscall exit is seen before its entry program is in place.
        attach_tracepoint(&mut ebpf, programs::TASK_NEWTASK, "task", "task_newtask")?;
        attach_switch(&mut ebpf)?;
        if config.syscalls != Syscalls::None {
            if config.stacks.is_some() {
                load_sys_exit_jumps(&mut ebpf)?;
            }
            attach_raw(&mut ebpf, programs::SYS_ENTER, "sys_enter")?;
            attach_raw(&mut ebpf, programs::SYS_EXIT, "sys_exit")?;
        }
        if config.stacks.is_some() || config.timeline.is_some() {
            attach_tracepoint(&mut ebpf, programs::SCHED_WAKEUP, "sched", "sched_wakeup")?;
        }
        if let Some(s) = &config.stacks
            && s.oncpu_hz > 0
        {
            attach_oncpu(&mut ebpf, s.oncpu_hz)?;
        }
        // Kernels without CONFIG_LOCKDEP-free contention tracepoints simply lack them.
        let contention = tracefs::find()
            .is_some_and(|root| root.join("events/lock/contention_begin").is_dir())
            && attach_tracepoint(
                &mut ebpf,
                programs::CONTENTION_BEGIN,
                "lock",
                "contention_begin",
            )
            .and_then(|()| {
                attach_tracepoint(
                    &mut ebpf,
                    programs::CONTENTION_END,
                    "lock",
                    "contention_end",
                )
            })
            .is_ok();
        if config.spans.len() > MAX_SPANS as usize {
            return Err(Error::TooManySpans(config.spans.len()));
        }
        if !config.spans.is_empty() {
            attach_spans(&mut ebpf, &config.spans)?;
        }
        let (gc_symbols, gc_events) = match &config.go_gc {
            Some(binary) => {
                let symbols = attach_go_gc(&mut ebpf, binary)?;
                let map = ebpf
                    .take_map(maps::GC_EVENTS)
                    .ok_or(Error::MissingMap(maps::GC_EVENTS))?;
                let ring = RingBuf::try_from(map).map_err(map_err(maps::GC_EVENTS))?;
                (Some(symbols), Some(ring))
            }
            None => (None, None),
        };
        let timeline = match config.timeline {
            Some(_) => {
                let map = ebpf
                    .take_map(maps::TIMELINE)
                    .ok_or(Error::MissingMap(maps::TIMELINE))?;
                Some(RingBuf::try_from(map).map_err(map_err(maps::TIMELINE))?)
            }
            None => None,
        };
        Ok(Probes {
            ebpf,
            spans: config.spans.clone(),
            contention,
            gc_symbols,
            gc_events,
            timeline,
            tables,
            stopped: None,
            stack_map_size: map_size,
            windows: None,
            evicted: Evicted::default(),
        })
    }

    /// Loads the unwind tables of a followed process that started, exec'd or mapped new code
    /// since the last call, from the text of its `/proc/<pid>/maps` (`None`: it has gone).
    /// Call it often: until then its stacks fall back to frame pointers.
    pub fn refresh_unwind(&mut self, pid: u32, maps_text: Option<&str>) -> Result<(), Error> {
        match &mut self.tables {
            Some(t) => t.refresh(&mut self.ebpf, pid, maps_text),
            None => Ok(()),
        }
    }

    /// Moves the Go GC events recorded so far into `out` (call it often: the ring is finite).
    pub fn drain_gc_events(&mut self, out: &mut Vec<GcEvent>) {
        if let Some(ring) = &mut self.gc_events {
            while let Some(item) = ring.next() {
                if item.len() >= std::mem::size_of::<RawGcEvent>() {
                    // SAFETY: the kernel side writes whole GcEvents; read unaligned.
                    let e = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const RawGcEvent) };
                    if let Some(kind) = GcKind::from_index(e.kind) {
                        out.push(GcEvent {
                            mono_ns: e.ts,
                            kind,
                            tid: e.tid,
                        });
                    }
                }
            }
        }
    }

    /// Moves the timeline events streamed so far into `out` (call it often: the ring is
    /// finite; a full one loses events, counted as `DropKind::TimelineFull`).
    pub fn drain_timeline(&mut self, out: &mut Vec<TimelineEvent>) {
        if let Some(ring) = &mut self.timeline {
            while let Some(item) = ring.next() {
                if item.len() >= std::mem::size_of::<TimelineEvent>() {
                    // SAFETY: the kernel side writes whole TimelineEvents; read unaligned.
                    out.push(unsafe {
                        std::ptr::read_unaligned(item.as_ptr() as *const TimelineEvent)
                    });
                }
            }
        }
    }

    /// Starts the recording's clock: gives every existing thread of `tgid` its (zeroed)
    /// entry, so that on-CPU time is counted from this moment for threads already running,
    /// then publishes the start to the kernel side, which times nothing before it. Returns
    /// the start (CLOCK_MONOTONIC ns, the clock of every kernel-side timestamp).
    pub fn start(&mut self, tgid: u32) -> Result<u64, Error> {
        {
            let map = self
                .ebpf
                .map_mut(maps::THREADS)
                .ok_or(Error::MissingMap(maps::THREADS))?;
            let mut threads: HashMap<&mut MapData, u32, ThreadStats> =
                HashMap::try_from(map).map_err(map_err(maps::THREADS))?;
            let tasks = procfs::process::Process::new(tgid as i32)
                .and_then(|p| p.tasks())
                .into_iter()
                .flatten()
                .flatten();
            for task in tasks {
                // SAFETY: ThreadStats is plain integers (aya::Pod); all-zero is a valid value.
                let mut zero: ThreadStats = unsafe { std::mem::zeroed() };
                zero.tgid = tgid;
                // Runnable now (R): until it runs, it waits on a run queue, not blocked.
                let runnable = task.stat().is_ok_and(|st| st.state == 'R');
                zero.last_out_involuntary = u32::from(runnable);
                // Asleep: inside a syscall, almost always, so its user stack is the one it
                // has when that syscall returns.
                zero.in_syscall = u32::from(!runnable);
                // Off CPU since before the start (1: any time before it): its first switch
                // must be a switch-in, and one the kernel does not report is then seen.
                zero.last_out = u64::from(!runnable);
                zero.user_stack = -1;
                zero.kernel_stack = -1;
                // BPF_NOEXIST: a thread that already switched keeps what it counted.
                let _ = threads.insert(task.tid as u32, zero, BPF_NOEXIST);
            }
        }
        // CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
        let start = switchyard_model::driver::monotonic_ns();
        self.set_start(start)?;
        Ok(start)
    }

    /// Stops the recording's clock: the kernel side counts and times nothing from here on
    /// (detaching takes a second or more, while a live target goes on), and the
    /// intervals in progress (threads on or off CPU now) are closed at this moment when the
    /// maps are read. Returns the end, CLOCK_MONOTONIC ns.
    pub fn stop(&mut self) -> Result<u64, Error> {
        // u64::MAX: every timestamp is before the start again.
        self.set_start(u64::MAX)?;
        let end = switchyard_model::driver::monotonic_ns();
        self.stopped = Some(end);
        Ok(end)
    }

    fn set_start(&mut self, start: u64) -> Result<(), Error> {
        let err = map_err(maps::START);
        let map = self
            .ebpf
            .map_mut(maps::START)
            .ok_or(Error::MissingMap(maps::START))?;
        let mut array: Array<&mut MapData, u64> = Array::try_from(map).map_err(err)?;
        array.set(0, start, 0).map_err(err)
    }

    /// The processes followed so far (the target and its children).
    pub fn followed(&self) -> Vec<u32> {
        let Some(map) = self.ebpf.map(maps::TARGETS) else {
            return Vec::new();
        };
        let Ok(targets) = HashMap::<&MapData, u32, u8>::try_from(map) else {
            return Vec::new();
        };
        targets.keys().filter_map(Result::ok).collect()
    }

    /// Detaches every program and reads the maps (counting stopped at [`Probes::stop`]).
    pub fn finish(mut self, target: u32) -> Result<Collected, Error> {
        for name in [
            programs::GO_GC,
            programs::SPAN_ENTER,
            programs::SPAN_EXIT,
            programs::CONTENTION_BEGIN,
            programs::CONTENTION_END,
            programs::ONCPU,
            programs::SYS_ENTER,
            programs::SYS_EXIT,
            programs::SCHED_WAKEUP,
            programs::SCHED_SWITCH,
            programs::TASK_NEWTASK,
        ] {
            if let Some(p) = self.ebpf.program_mut(name) {
                // Unloading detaches the links; errors here only mean it was not attached.
                let _ = match p {
                    aya::programs::Program::TracePoint(p) => p.unload(),
                    aya::programs::Program::RawTracePoint(p) => p.unload(),
                    aya::programs::Program::BtfTracePoint(p) => p.unload(),
                    aya::programs::Program::PerfEvent(p) => p.unload(),
                    aya::programs::Program::UProbe(p) => p.unload(),
                    _ => Ok(()),
                };
            }
        }
        self.read(target, self.stopped)
    }

    /// Cuts a window of a continuous recording (`record --every`): what the maps added since
    /// the last cut (or the start), with the intervals in progress counted up to now. The
    /// programs stay attached and keep counting. Returns the window and its end
    /// (CLOCK_MONOTONIC ns). Once a recording is cut, [`Probes::finish`] reads its last
    /// window.
    pub fn cut(&mut self, target: u32) -> Result<(Collected, u64), Error> {
        self.windows.get_or_insert_with(Windows::default);
        let at = switchyard_model::driver::monotonic_ns();
        let collected = self.read(target, Some(at))?;
        self.evict();
        Ok((collected, at))
    }

    /// What eviction removed from the kernel's maps so far (continuous recordings).
    pub fn evicted(&self) -> Evicted {
        self.evicted
    }

    /// Every map, read; the intervals in progress are closed at `end`.
    fn read(&mut self, target: u32, end: Option<u64>) -> Result<Collected, Error> {
        let mut collected = self.collect(target, end)?;
        collected.raw = self.collect_stacks()?;
        collected.unwind = self.tables.as_ref().map(|t| t.stats().clone());
        collected.locks = self.collect_locks(&mut collected.raw)?;
        self.collect_stack_frames(&mut collected.raw)?;
        collected.gc = self.collect_gc()?;
        Ok(collected)
    }

    fn collect_gc(&mut self) -> Result<Option<GcCollected>, Error> {
        let Some(symbols) = &self.gc_symbols else {
            return Ok(None);
        };
        let name = maps::GC_COUNTS;
        let map = self.ebpf.map(name).ok_or(Error::MissingMap(name))?;
        let arr: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map).map_err(map_err(name))?;
        let mut counts = BTreeMap::new();
        for kind in GcKind::ALL {
            let per_cpu = arr.get(&kind.index(), 0).map_err(map_err(name))?;
            let now: u64 = per_cpu.iter().sum();
            let seen = self.windows.as_mut().map(|w| &mut w.gc);
            counts.insert(kind, added(seen, kind.index(), now));
        }
        Ok(Some(GcCollected {
            symbols: symbols.clone(),
            counts,
        }))
    }

    /// Bounds a continuous recording's maps: stack-keyed entries idle for a whole window go at
    /// every cut (so a cut reads what is active, not all that ever was), the stacks no kept
    /// entry refers to once a stack map is half full, and exited threads' entries once their
    /// last window was read. An entry made anew counts from zero. A program that looked an
    /// entry up just before it went loses that one addition: a window boundary's worth of one
    /// idle key, counted nowhere else.
    fn evict(&mut self) {
        let Some(w) = self.windows.as_mut() else {
            return;
        };
        let ebpf = &mut self.ebpf;
        let mut idle = 0;
        idle += evict_idle(ebpf, maps::ONCPU, &mut w.oncpu);
        idle += evict_idle(ebpf, maps::OFFCPU, &mut w.offcpu);
        idle += evict_idle(ebpf, maps::WAKEUPS, &mut w.wakeups);
        idle += evict_idle(ebpf, maps::SYSCALL_STACKS, &mut w.syscall_stacks);
        idle += evict_idle(ebpf, maps::FUTEXES, &mut w.futexes);
        idle += evict_idle(ebpf, maps::CPU_HOLDERS, &mut w.cpu_holders);
        // Maps of small fixed keys (syscall numbers, drop kinds, errnos) never need it.
        w.clear_idle();
        self.evicted.idle_keys += idle;
        let (user, kernel) = w.referenced_stacks();
        let half_stacks = (self.stack_map_size / 2) as usize;
        // Every stack a sample refers to is read into the caches at its window's cut, so
        // their sizes tell how full the maps are without walking them.
        let cached = [w.user_frames.len(), w.kernel_frames.len()];
        for ((name, kept), cached) in [(maps::USER_STACKS, &user), (maps::KERNEL_STACKS, &kernel)]
            .into_iter()
            .zip(cached)
        {
            if cached <= half_stacks {
                continue;
            }
            let Some(map) = ebpf.map_mut(name) else {
                continue;
            };
            let Ok(mut stacks) = HashMap::<&mut MapData, i32, UserStack>::try_from(map) else {
                continue;
            };
            let ids: Vec<i32> = stacks.keys().filter_map(Result::ok).collect();
            if ids.len() <= half_stacks {
                continue;
            }
            for id in ids.into_iter().filter(|id| !kept.contains(id)) {
                if stacks.remove(&id).is_ok() {
                    w.user_frames.remove(&id);
                    w.kernel_frames.remove(&id);
                    self.evicted.stacks += 1;
                }
            }
        }
        if let Some(map) = ebpf.map_mut(maps::THREADS)
            && let Ok(mut threads) = HashMap::<&mut MapData, u32, ThreadStats>::try_from(map)
        {
            for tid in std::mem::take(&mut w.exited) {
                if threads.remove(&tid).is_ok() {
                    w.threads.forget(&tid);
                    self.evicted.threads += 1;
                }
            }
        }
    }

    fn wait_summary(&mut self, name: &'static str, index: u32) -> Result<WaitSummary, Error> {
        let err = map_err(name);
        let map = self.ebpf.map(name).ok_or(Error::MissingMap(name))?;
        let arr: PerCpuArray<&MapData, WaitStats> = PerCpuArray::try_from(map).map_err(err)?;
        let values = arr.get(&index, 0).map_err(err)?;
        let mut sum = WaitStats {
            count: 0,
            total_ns: 0,
            max_ns: 0,
            timeouts: 0,
            eagain: 0,
            hist: [0; HIST_BUCKETS],
        };
        for v in values.iter() {
            sum.count += v.count;
            sum.total_ns += v.total_ns;
            sum.max_ns = sum.max_ns.max(v.max_ns);
            sum.timeouts += v.timeouts;
            sum.eagain += v.eagain;
            for (a, b) in sum.hist.iter_mut().zip(v.hist.iter()) {
                *a += b;
            }
        }
        let v = added(
            self.windows.as_mut().map(|w| &mut w.waits),
            (name, index),
            sum,
        );
        Ok(WaitSummary {
            count: v.count,
            total_ns: v.total_ns,
            max_ns: v.max_ns,
            timeouts: v.timeouts,
            eagain: v.eagain,
            hist: Log2Hist::from_buckets(&v.hist),
        })
    }

    /// Futex waits, kernel lock contention and spans; futex stacks go into `raw.futex`.
    fn collect_locks(&mut self, raw: &mut Raw) -> Result<Locks, Error> {
        let mut locks = Locks {
            futex: self.wait_summary(maps::FUTEX_WAITS, 0)?,
            contention: if self.contention {
                Some(self.wait_summary(maps::LOCK_CONTENTION, 0)?)
            } else {
                None
            },
            ..Default::default()
        };
        let err = map_err(maps::FUTEXES);
        let futexes: HashMap<&MapData, FutexKey, FutexStats> = HashMap::try_from(
            self.ebpf
                .map(maps::FUTEXES)
                .ok_or(Error::MissingMap(maps::FUTEXES))?,
        )
        .map_err(err)?;
        let mut by_addr: BTreeMap<(u32, u64), (u64, u64)> = BTreeMap::new();
        for item in futexes.iter() {
            let (k, v) = item.map_err(err)?;
            let v = added(self.windows.as_mut().map(|w| &mut w.futexes), k, v);
            if v.is_zero() {
                continue;
            }
            let e = by_addr.entry((k.tgid, k.uaddr)).or_default();
            e.0 += v.count;
            e.1 += v.total_ns;
            raw.futex.push(RawSample {
                tgid: k.tgid,
                tid: k.tgid,
                user_stack: k.user_stack,
                kernel_stack: -1,
                label: format!("{:#x}", k.uaddr),
                value: v.total_ns,
                waker: None,
            });
        }
        locks.futex_top = by_addr
            .into_iter()
            .map(|((tgid, uaddr), (count, total_ns))| FutexRow {
                tgid,
                uaddr: format!("{uaddr:#x}"),
                symbol: None,
                count,
                total_ns,
            })
            .collect();
        locks
            .futex_top
            .sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(b.count.cmp(&a.count)));
        for (i, span) in self.spans.clone().into_iter().enumerate() {
            locks.spans.push(SpanRow {
                stats: self.wait_summary(maps::SPANS, i as u32)?,
                label: span.label,
                symbol: span.symbol,
                binary: span.binary.display().to_string(),
            });
        }
        Ok(locks)
    }

    fn collect_stacks(&mut self) -> Result<Raw, Error> {
        let map = |name: &'static str| self.ebpf.map(name).ok_or(Error::MissingMap(name));
        let mut raw = Raw::default();

        let oncpu: HashMap<&MapData, OnCpuKey, u64> =
            HashMap::try_from(map(maps::ONCPU)?).map_err(map_err(maps::ONCPU))?;
        for item in oncpu.iter() {
            let (k, v) = item.map_err(map_err(maps::ONCPU))?;
            let v = added(self.windows.as_mut().map(|w| &mut w.oncpu), k, v);
            if v == 0 {
                continue;
            }
            raw.oncpu.push(RawSample {
                tgid: k.tgid,
                tid: k.tid,
                user_stack: k.user_stack,
                kernel_stack: k.kernel_stack,
                value: v,
                ..Default::default()
            });
        }
        let offcpu: HashMap<&MapData, OffCpuKey, u64> =
            HashMap::try_from(map(maps::OFFCPU)?).map_err(map_err(maps::OFFCPU))?;
        for item in offcpu.iter() {
            let (k, v) = item.map_err(map_err(maps::OFFCPU))?;
            let v = added(self.windows.as_mut().map(|w| &mut w.offcpu), k, v);
            if v == 0 {
                continue;
            }
            raw.offcpu.push(RawSample {
                tgid: k.tgid,
                tid: k.tid,
                user_stack: k.user_stack,
                kernel_stack: k.kernel_stack,
                label: state_label(k.state, tp::PREEMPT_FLAG as u32),
                value: v,
                waker: None,
            });
        }
        let wakeups: HashMap<&MapData, WakeupKey, u64> =
            HashMap::try_from(map(maps::WAKEUPS)?).map_err(map_err(maps::WAKEUPS))?;
        for item in wakeups.iter() {
            let (k, v) = item.map_err(map_err(maps::WAKEUPS))?;
            let v = added(self.windows.as_mut().map(|w| &mut w.wakeups), k, v);
            if v == 0 {
                continue;
            }
            raw.wakeup.push(RawSample {
                tgid: k.tgid,
                tid: k.tid,
                user_stack: k.user_stack,
                kernel_stack: k.kernel_stack,
                label: String::new(),
                value: v,
                waker: Some(RawWaker {
                    tgid: k.waker_tgid,
                    tid: k.waker_tid,
                    comm: comm_string(k.waker_comm),
                    user_stack: k.waker_user_stack,
                    kernel_stack: k.waker_kernel_stack,
                }),
            });
        }
        let sys: HashMap<&MapData, SyscallStackKey, u64> =
            HashMap::try_from(map(maps::SYSCALL_STACKS)?).map_err(map_err(maps::SYSCALL_STACKS))?;
        for item in sys.iter() {
            let (k, v) = item.map_err(map_err(maps::SYSCALL_STACKS))?;
            let v = added(self.windows.as_mut().map(|w| &mut w.syscall_stacks), k, v);
            if v == 0 {
                continue;
            }
            raw.syscalls.push(RawSample {
                tgid: k.tgid,
                tid: k.tid,
                user_stack: k.user_stack,
                kernel_stack: -1,
                label: syscall_name(k.nr),
                value: v,
                waker: None,
            });
        }

        Ok(raw)
    }

    /// The frames of the stacks: every stack the maps hold, for a recording read once; for a
    /// window, only those its samples refer to, each read from the kernel once and then kept
    /// (a stack id is a hash of its frames, written once: it never changes while it exists).
    fn collect_stack_frames(&mut self, raw: &mut Raw) -> Result<(), Error> {
        let map = |name: &'static str| self.ebpf.map(name).ok_or(Error::MissingMap(name));
        if let Some(w) = self.windows.as_mut() {
            let (user_ids, kernel_ids) = raw.referenced();
            let kernel: HashMap<&MapData, i32, UserStack> =
                HashMap::try_from(map(maps::KERNEL_STACKS)?)
                    .map_err(map_err(maps::KERNEL_STACKS))?;
            for id in kernel_ids.into_iter().filter(|&id| id >= 0) {
                if !w.kernel_frames.contains_key(&id)
                    && let Ok(s) = kernel.get(&id, 0)
                {
                    w.kernel_frames.insert(id, stack_frames(&s).0);
                }
                if let Some(f) = w.kernel_frames.get(&id) {
                    raw.stacks.insert(id, f.clone());
                }
            }
            let user: HashMap<&MapData, i32, UserStack> =
                HashMap::try_from(map(maps::USER_STACKS)?).map_err(map_err(maps::USER_STACKS))?;
            for id in user_ids.into_iter().filter(|&id| id >= 0) {
                if !w.user_frames.contains_key(&id)
                    && let Ok(s) = user.get(&id, 0)
                {
                    w.user_frames.insert(id, stack_frames(&s));
                }
                if let Some((f, complete)) = w.user_frames.get(&id) {
                    raw.user_stacks.insert(id, f.clone());
                    if *complete {
                        raw.complete_user_stacks.insert(id);
                    }
                }
            }
            return Ok(());
        }
        let kernel: HashMap<&MapData, i32, UserStack> =
            HashMap::try_from(map(maps::KERNEL_STACKS)?).map_err(map_err(maps::KERNEL_STACKS))?;
        for item in kernel.iter() {
            let (id, s) = item.map_err(map_err(maps::KERNEL_STACKS))?;
            raw.stacks.insert(id, stack_frames(&s).0);
        }
        let user: HashMap<&MapData, i32, UserStack> =
            HashMap::try_from(map(maps::USER_STACKS)?).map_err(map_err(maps::USER_STACKS))?;
        for item in user.iter() {
            let (id, s) = item.map_err(map_err(maps::USER_STACKS))?;
            let (frames, complete) = stack_frames(&s);
            raw.user_stacks.insert(id, frames);
            if complete {
                raw.complete_user_stacks.insert(id);
            }
        }
        Ok(())
    }

    fn collect(&mut self, target: u32, end: Option<u64>) -> Result<Collected, Error> {
        let map = |name: &'static str| self.ebpf.map(name).ok_or(Error::MissingMap(name));

        // Errnos first, so each syscall row can carry its own.
        let errnos_map: PerCpuHashMap<&MapData, ErrnoKey, u64> =
            PerCpuHashMap::try_from(map(maps::ERRNOS)?).map_err(map_err(maps::ERRNOS))?;
        let mut errnos: BTreeMap<u32, Vec<ErrnoCount>> = BTreeMap::new();
        for item in errnos_map.iter() {
            let (key, values) = item.map_err(map_err(maps::ERRNOS))?;
            let count = added(
                self.windows.as_mut().map(|w| &mut w.errnos),
                key,
                values.iter().sum(),
            );
            if count == 0 {
                continue;
            }
            errnos.entry(key.nr).or_default().push(ErrnoCount {
                errno: key.errno,
                name: errno_name(key.errno),
                count,
            });
        }

        let stats: PerCpuArray<&MapData, SyscallStats> =
            PerCpuArray::try_from(map(maps::SYSCALLS)?).map_err(map_err(maps::SYSCALLS))?;
        let mut syscalls = Vec::new();
        for (nr, item) in stats.iter().enumerate() {
            let values = item.map_err(map_err(maps::SYSCALLS))?;
            let mut sum = SyscallStats {
                count: 0,
                errors: 0,
                total_ns: 0,
                max_ns: 0,
                hist: [0; HIST_BUCKETS],
            };
            for v in values.iter() {
                sum.count += v.count;
                sum.errors += v.errors;
                sum.total_ns += v.total_ns;
                sum.max_ns = sum.max_ns.max(v.max_ns);
                for (a, b) in sum.hist.iter_mut().zip(v.hist.iter()) {
                    *a += b;
                }
            }
            let nr = nr as u32;
            let sum = added(self.windows.as_mut().map(|w| &mut w.syscalls), nr, sum);
            if sum.count == 0 {
                continue;
            }
            let mut errs = errnos.remove(&nr).unwrap_or_default();
            errs.sort_by(|a, b| b.count.cmp(&a.count).then(a.errno.cmp(&b.errno)));
            syscalls.push(SyscallRow {
                nr,
                name: syscall_name(nr),
                count: sum.count,
                errors: sum.errors,
                errnos: errs,
                total_ns: sum.total_ns,
                max_ns: sum.max_ns,
                latency: Log2Hist::from_buckets(&sum.hist),
            });
        }

        let threads_map: HashMap<&MapData, u32, ThreadStats> =
            HashMap::try_from(map(maps::THREADS)?).map_err(map_err(maps::THREADS))?;
        let mut threads = Vec::new();
        for item in threads_map.iter() {
            let (tid, t) = item.map_err(map_err(maps::THREADS))?;
            // Entries made at the start or at a thread's creation, for a thread that never
            // switched: nothing was counted.
            if t.voluntary + t.involuntary == 0 {
                continue;
            }
            // The interval in progress at the stop: on CPU since its last switch-in, or off
            // since its last switch-out.
            let (mut oncpu, mut blocked, mut runqueue) = (t.oncpu_ns, t.blocked_ns, t.runqueue_ns);
            let mut woken_wait = t.woken_wait_ns;
            if let Some(end) = end {
                if t.last_in > t.last_out {
                    oncpu += end.saturating_sub(t.last_in);
                } else if t.last_out_involuntary != 0 {
                    runqueue += end.saturating_sub(t.last_out);
                } else if !exited(&t) {
                    // Woken and not yet run: blocked up to the wakeup, waiting since.
                    let woke = t.wakeup_at.clamp(t.last_out, end.max(t.last_out));
                    let woke = if t.wakeup_at == 0 { end } else { woke };
                    blocked += woke.saturating_sub(t.last_out);
                    runqueue += end.saturating_sub(woke);
                    woken_wait += end.saturating_sub(woke);
                }
            }
            let times = ThreadTimes {
                voluntary: t.voluntary,
                involuntary: t.involuntary,
                oncpu_ns: oncpu,
                blocked_ns: blocked,
                runqueue_ns: runqueue,
                woken_wait_ns: woken_wait,
                offcpu_hist: t.offcpu_hist,
                delay_hist: t.delay_hist,
            };
            let times = match self.windows.as_mut() {
                Some(w) => {
                    if exited(&t) {
                        w.exited.push(tid);
                    }
                    w.threads.take(tid, times)
                }
                None => times,
            };
            if times.is_zero() {
                continue;
            }
            threads.push(ThreadRow {
                tid,
                tgid: t.tgid,
                // A live thread's name now: the kernel side reads it only now and then.
                comm: std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", t.tgid))
                    .map(|c| c.trim_end().to_string())
                    .unwrap_or_else(|_| comm_string(t.comm)),
                voluntary: times.voluntary,
                involuntary: times.involuntary,
                oncpu_ns: times.oncpu_ns,
                blocked_ns: times.blocked_ns,
                runqueue_ns: times.runqueue_ns,
                woken_wait_ns: times.woken_wait_ns,
                offcpu: Log2Hist::from_buckets(&times.offcpu_hist),
                sched_delay: Log2Hist::from_buckets(&times.delay_hist),
            });
        }
        threads.sort_by_key(|t| (t.tgid, t.tid));

        let holders_map: HashMap<&MapData, CpuHolderKey, CpuHolderStats> =
            HashMap::try_from(map(maps::CPU_HOLDERS)?).map_err(map_err(maps::CPU_HOLDERS))?;
        let mut cpu_holders = Vec::new();
        for item in holders_map.iter() {
            let (k, v) = item.map_err(map_err(maps::CPU_HOLDERS))?;
            let v = added(self.windows.as_mut().map(|w| &mut w.cpu_holders), k, v);
            if v.count == 0 {
                continue;
            }
            cpu_holders.push(CpuHolder {
                tgid: k.tgid,
                tid: k.tid,
                cpu: k.cpu,
                holder_tgid: k.holder_tgid,
                holder_tid: k.holder_tid,
                holder_comm: comm_string(v.comm),
                holder_nice: v.prio as i32 - 120,
                count: v.count,
                ns: v.ns,
            });
        }
        cpu_holders.sort_by(|a, b| {
            b.ns.cmp(&a.ns)
                .then((a.tid, a.holder_tid, a.cpu).cmp(&(b.tid, b.holder_tid, b.cpu)))
        });

        let drops_map: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(map(maps::DROPS)?).map_err(map_err(maps::DROPS))?;
        let mut drop_rows = Vec::new();
        let mut drop_counts = BTreeMap::new();
        for (i, item) in drops_map.iter().enumerate() {
            let count = added(
                self.windows.as_mut().map(|w| &mut w.drops),
                i as u32,
                item.map_err(map_err(maps::DROPS))?.iter().sum(),
            );
            if count > 0 {
                let kind = DropKind::from_index(i as u32);
                if let Some(kind) = kind {
                    drop_counts.insert(kind, count);
                }
                // Not a loss: the run's metadata says how many switches were inferred.
                if matches!(
                    kind,
                    Some(DropKind::SwitchInMissed | DropKind::SwitchOutMissed)
                ) {
                    continue;
                }
                drop_rows.push(DropRow {
                    reason: kind.map_or("unknown", DropKind::reason).to_string(),
                    count,
                });
            }
        }

        let sampling: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(map(maps::SAMPLING)?).map_err(map_err(maps::SAMPLING))?;
        let mut per = |i: u32| -> Result<u64, Error> {
            let now = sampling
                .get(&i, 0)
                .map_err(map_err(maps::SAMPLING))?
                .iter()
                .sum();
            Ok(added(
                self.windows.as_mut().map(|w| &mut w.sampling),
                i,
                now,
            ))
        };
        let offcpu_sampling = (
            per(switchyard_common::sampling::INTERVALS)?,
            per(switchyard_common::sampling::WALKED)?,
        );

        let targets: HashMap<&MapData, u32, u8> =
            HashMap::try_from(map(maps::TARGETS)?).map_err(map_err(maps::TARGETS))?;
        let mut children: Vec<u32> = targets
            .keys()
            .filter_map(Result::ok)
            .filter(|&t| t != target)
            .collect();
        children.sort_unstable();

        Ok(Collected {
            syscalls,
            threads,
            cpu_holders,
            drops: drop_rows,
            drop_counts,
            children,
            raw: Raw::default(),
            locks: Locks::default(),
            gc: None,
            unwind: None,
            offcpu_sampling,
        })
    }
}

/// A stack entry's frames, and whether the walk reached the outermost frame (user stacks
/// carry `unwind::COMPLETE` in their length; kernel stacks never have it set).
fn stack_frames(s: &UserStack) -> (Vec<u64>, bool) {
    let complete = s.len & switchyard_common::unwind::COMPLETE != 0;
    let len = ((s.len & !switchyard_common::unwind::COMPLETE) as usize).min(s.frames.len());
    (s.frames[..len].to_vec(), complete)
}

/// What `key` added since the last cut of a continuous recording (`seen`), or all of `now`
/// in a recording that is read once.
fn added<K: std::hash::Hash + Eq + Copy, V: Cumulative>(
    seen: Option<&mut Seen<K, V>>,
    key: K,
    now: V,
) -> V {
    match seen {
        Some(s) => s.take(key, now),
        None => now,
    }
}

/// Removes the keys of map `name` that were idle in the window just read; returns how many
/// went.
fn evict_idle<K: aya::Pod + std::hash::Hash + Eq, V: aya::Pod + Cumulative>(
    ebpf: &mut Ebpf,
    name: &'static str,
    seen: &mut Seen<K, V>,
) -> u64 {
    let idle = seen.take_idle();
    if idle.is_empty() {
        return 0;
    }
    let Some(map) = ebpf.map_mut(name) else {
        return 0;
    };
    let Ok(mut entries) = HashMap::<&mut MapData, K, V>::try_from(map) else {
        return 0;
    };
    let mut removed = 0;
    for key in idle {
        if entries.remove(&key).is_ok() {
            seen.forget(&key);
            removed += 1;
        }
    }
    removed
}

/// A load failure with a verifier log becomes `Verifier`, so its log is shown once, apart.
/// The program `name` of the object as its kind `P` (not loaded yet).
fn program<'a, P>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut P, Error>
where
    &'a mut P: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or(Error::MissingProgram(name))?
        .try_into()
        .map_err(program_error(name))
}

fn program_error(name: &'static str) -> impl FnOnce(aya::programs::ProgramError) -> Error {
    move |source| Error::Program {
        name,
        source: Box::new(source),
    }
}

fn load_error(name: &'static str, source: aya::programs::ProgramError) -> Error {
    match source {
        aya::programs::ProgramError::LoadError {
            io_error,
            verifier_log,
        } if !verifier_log.to_string().trim().is_empty() => Error::Verifier {
            name,
            errno: io_error,
            log: verifier_log.to_string(),
        },
        source => Error::Program {
            name,
            source: Box::new(source),
        },
    }
}

/// A task name kept as two native-endian words.
fn comm_string(words: [u64; 2]) -> String {
    let mut comm = [0u8; 16];
    comm[..8].copy_from_slice(&words[0].to_ne_bytes());
    comm[8..].copy_from_slice(&words[1].to_ne_bytes());
    let len = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..len]).into_owned()
}

/// Entry-only probes on the Go runtime's GC functions; the cookie is the event kind. A symbol
/// the binary lacks (another Go version) is reported, not an error; none at all is.
fn attach_go_gc(ebpf: &mut Ebpf, binary: &std::path::Path) -> Result<Vec<(String, bool)>, Error> {
    let name = programs::GO_GC;
    let program: &mut UProbe = program(ebpf, name)?;
    program.load().map_err(|source| load_error(name, source))?;
    let mut found = Vec::new();
    for (kind, symbol) in gc::SYMBOLS {
        let ok = program
            .attach(
                UProbeAttachPoint {
                    location: UProbeAttachLocation::Symbol(symbol),
                    cookie: Some(u64::from(kind)),
                },
                binary,
                UProbeScope::AllProcesses,
            )
            .is_ok();
        found.push((symbol.to_string(), ok));
    }
    if !found.iter().any(|(_, ok)| *ok) {
        return Err(Error::NotGo(binary.display().to_string()));
    }
    Ok(found)
}

/// Entry and return probes on every span's symbol; the cookie is the span's index.
fn attach_spans(ebpf: &mut Ebpf, spans: &[Span]) -> Result<(), Error> {
    for name in [programs::SPAN_ENTER, programs::SPAN_EXIT] {
        let program: &mut UProbe = program(ebpf, name)?;
        program.load().map_err(|source| load_error(name, source))?;
        for (i, span) in spans.iter().enumerate() {
            program
                .attach(
                    UProbeAttachPoint {
                        location: UProbeAttachLocation::Symbol(&span.symbol),
                        cookie: Some(i as u64),
                    },
                    &span.binary,
                    UProbeScope::AllProcesses,
                )
                .map_err(|source| Error::Uprobe {
                    symbol: span.symbol.clone(),
                    binary: span.binary.display().to_string(),
                    source: Box::new(source),
                })?;
        }
    }
    Ok(())
}

/// The on-CPU sampler: cpu-clock at `hz` on every online CPU, all processes (the program
/// filters the target), as `perf record -F hz -a` would.
fn attach_oncpu(ebpf: &mut Ebpf, hz: u64) -> Result<(), Error> {
    let name = programs::ONCPU;
    let program: &mut PerfEvent = program(ebpf, name)?;
    program.load().map_err(|source| load_error(name, source))?;
    let cpus = aya::util::online_cpus().map_err(|(_, e)| Error::Cpus(e))?;
    for cpu in cpus {
        program
            .attach(
                PerfEventConfig::Software(SoftwareEvent::CpuClock),
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Frequency(hz),
                false,
            )
            .map_err(program_error(name))?;
    }
    Ok(())
}

/// INFLIGHT's size: pid_max rounded up to a power of two (one exact slot per tid), capped.
fn inflight_slots() -> u32 {
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(switchyard_common::MAX_INFLIGHT);
    pid_max
        .clamp(1024, switchyard_common::MAX_INFLIGHT)
        .next_power_of_two()
}

fn attach_tracepoint(
    ebpf: &mut Ebpf,
    name: &'static str,
    category: &str,
    event: &str,
) -> Result<(), Error> {
    let program: &mut TracePoint = program(ebpf, name)?;
    program.load().map_err(|source| load_error(name, source))?;
    program
        .attach(category, event)
        .map_err(program_error(name))?;
    Ok(())
}

/// `sched_switch` as a BTF tracepoint, with the programs it tail-calls for user-stack walks
/// loaded into `SWITCH_JUMP` first.
fn attach_switch(ebpf: &mut Ebpf) -> Result<(), Error> {
    let btf = aya::Btf::from_sys_fs().map_err(|e| Error::Btf(e.to_string()))?;
    for (index, name) in [programs::SCHED_SWITCH_WALK, programs::SCHED_SWITCH_FINISH]
        .into_iter()
        .enumerate()
    {
        let p: &mut aya::programs::BtfTracePoint = program(ebpf, name)?;
        p.load("sched_switch", &btf)
            .map_err(|e| load_error(name, e))?;
        set_jump(ebpf, maps::SWITCH_JUMP, index as u32, name)?;
    }
    let name = programs::SCHED_SWITCH;
    let switch: &mut aya::programs::BtfTracePoint = program(ebpf, name)?;
    switch
        .load("sched_switch", &btf)
        .map_err(|e| load_error(name, e))?;
    switch.attach().map_err(program_error(name))?;
    Ok(())
}

/// `sys_exit`'s tail-called programs, into `SYSCALL_JUMP`.
fn load_sys_exit_jumps(ebpf: &mut Ebpf) -> Result<(), Error> {
    for (index, name) in [programs::SYS_EXIT_WALK, programs::SYS_EXIT_FINISH]
        .into_iter()
        .enumerate()
    {
        let p: &mut RawTracePoint = program(ebpf, name)?;
        p.load().map_err(|e| load_error(name, e))?;
        set_jump(ebpf, maps::SYSCALL_JUMP, index as u32, name)?;
    }
    Ok(())
}

/// Puts the loaded program `name` at `index` of the program array `map`.
fn set_jump(
    ebpf: &mut Ebpf,
    map: &'static str,
    index: u32,
    name: &'static str,
) -> Result<(), Error> {
    let fd = {
        let p: &mut aya::programs::Program =
            ebpf.program_mut(name).ok_or(Error::MissingProgram(name))?;
        p.fd()
            .map_err(program_error(name))?
            .try_clone()
            .map_err(|e| Error::Program {
                name,
                source: Box::new(aya::programs::ProgramError::IOError(e)),
            })?
    };
    let array = ebpf.map_mut(map).ok_or(Error::MissingMap(map))?;
    let mut jump: ProgramArray<&mut MapData> =
        ProgramArray::try_from(array).map_err(map_err(map))?;
    jump.set(index, &fd, 0).map_err(map_err(map))
}

fn attach_raw(ebpf: &mut Ebpf, name: &'static str, event: &str) -> Result<(), Error> {
    let program: &mut RawTracePoint = program(ebpf, name)?;
    program.load().map_err(|source| load_error(name, source))?;
    program.attach(event).map_err(program_error(name))?;
    Ok(())
}

/// The label of an off-CPU state as the kernel reports `prev_state`; "W" for the wait for a
/// CPU after a wakeup (runnable, woken: scheduler delay).
pub fn state_label(state: u32, preempt_flag: u32) -> String {
    if state & tp::WOKEN_FLAG as u32 != 0 {
        return "W".into();
    }
    if state == 0 || state & preempt_flag != 0 {
        return "R".into();
    }
    match state {
        1 => "S".into(),
        2 => "D".into(),
        4 => "T".into(),
        8 => "t".into(),
        0x80 => "I".into(),
        s => format!("state {s:#x}"),
    }
}
