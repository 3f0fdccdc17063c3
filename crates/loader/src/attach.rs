//! Loading the kernel-side object with the target's settings, and attaching its programs.

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, ProgramArray, RingBuf},
    programs::{
        PerfEvent, RawTracePoint, TracePoint, UProbe,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
};
use switchyard_common::{MAX_SPANS, gc, globals, go_sched, maps, otel, programs};

use crate::{
    Config, Error, Evicted, Probes, Span, Syscalls, Unwind, btf,
    error::{load_error, loaded, map_err, program, program_error},
    tracefs, unwind,
};

/// The kernel-side object, built by build.rs (empty when the build was skipped).
pub(crate) static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/switchyard-probes"));

impl Probes {
    /// Loads the programs with the target set and attaches them. Events start counting when
    /// this returns.
    pub fn attach(config: &Config) -> Result<Probes, Error> {
        if OBJECT.is_empty() {
            return Err(Error::NotBuilt);
        }
        let mut steps = Steps::start();
        tracefs::check_layout()?;
        let task = btf::TaskOffsets::from_kernel()?;
        steps.lap("kernel layout (tracefs, BTF offsets)");
        let settings = Settings::new(config, task);
        let otel_on = settings.otel_on();
        let mut ebpf = settings.load()?;
        steps.lap("maps created, programs read");

        fill_filters(&mut ebpf, config)?;
        let tables = target_tables(&mut ebpf, config, settings.cfi)?;
        steps.lap("unwind tables of the target");

        let btf = aya::Btf::from_sys_fs().map_err(|e| Error::Btf(e.to_string()))?;
        let verified = verify(&mut ebpf, &wanted(config, otel_on), &btf)?;
        steps.verified(verified);
        let contention = attach_kernel_programs(&mut ebpf, config, &btf, otel_on, &mut steps)?;
        if config.spans.len() > MAX_SPANS as usize {
            return Err(Error::TooManySpans(config.spans.len()));
        }
        let mut span_placements = Vec::new();
        let mut trap_costs = None;
        let span_events = if config.spans.is_empty() {
            None
        } else {
            span_placements = attach_spans(&mut ebpf, &config.spans, config.tgid)?;
            steps.lap("span probes verified, attached");
            // Not being able to time them costs the figure, not the recording.
            trap_costs = crate::probecost::measure(&mut ebpf).ok();
            steps.lap("span probes' breakpoints timed");
            Some(take_ring(&mut ebpf, maps::SPAN_EVENTS)?)
        };
        let (gc_symbols, gc_events) = match &config.go_gc {
            Some(binary) => {
                let symbols = attach_go_gc(&mut ebpf, binary)?;
                (Some(symbols), Some(take_ring(&mut ebpf, maps::GC_EVENTS)?))
            }
            None => (None, None),
        };
        if config.go_gc.is_some() {
            steps.lap("Go GC probes verified, attached");
        }
        let timeline = match config.timeline {
            Some(_) => Some(take_ring(&mut ebpf, maps::TIMELINE)?),
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
            started: 0,
            bounds: Default::default(),
            stacks_on: config.stacks.is_some(),
            stack_map_size: settings.map_size,
            windows: None,
            evicted: Evicted::default(),
            attach_steps: steps.done,
            program_stats: None,
            program_covered: None,
            span_events,
            trap_costs,
            span_placements,
            span_kept: config.spans.iter().map(|_| Default::default()).collect(),
            span_last: config.spans.iter().map(|_| Default::default()).collect(),
            span_control: config.spans.iter().map(|_| (0, 1)).collect(),
            span_floor: config.spans.iter().map(|_| 0).collect(),
            span_reasons: config
                .spans
                .iter()
                .map(|s| {
                    std::sync::Arc::new(if s.go {
                        switchyard_runtimes::go::reasons::wait_reasons(&s.binary)
                    } else {
                        Vec::new()
                    })
                })
                .collect(),
            span_polled: None,
            span_ring_lost: 0,
            span_procs: std::collections::BTreeSet::from([config.tgid]),
            otel: otel_on
                .then(|| config.thread_context.as_ref().map(|(_, s)| s.clone()))
                .flatten(),
            otel_stats: Default::default(),
            python: config
                .stacks
                .as_ref()
                .is_some_and(|s| s.python_frames)
                .then(Default::default),
        })
    }
}

/// What the configuration sets in the kernel-side object as it loads: its globals, and its
/// maps' sizes.
struct Settings {
    tgid: u32,
    follow: u8,
    /// `struct task_struct`'s layout on this kernel.
    task: btf::TaskOffsets,
    /// INFLIGHT's entries, a power of two.
    slots: u32,
    /// THREADS' entries, a power of two.
    thread_slots: u32,
    stacks_on: u8,
    min_block: u64,
    every: u64,
    /// Entries of each stack map.
    map_size: u32,
    period: u64,
    stack_gap_ns: u64,
    time_every: u64,
    time_budget: u64,
    filter_on: u8,
    /// Rows of the unwind table, when stacks are walked by CFI.
    cfi: Option<u32>,
    unwind_mode: u8,
    timeline_on: u8,
    timeline_bytes: u32,
    timeline_syscall_ns: u64,
    span_bytes: u32,
    return_probes_on: u8,
    retprobe_offsets: [u32; switchyard_common::unwind::RETPROBE_FIELDS],
    span_count: u32,
    otel_tls_offset: i64,
    otel_tls_module: u64,
}

impl Settings {
    /// The settings `config` asks for, on a kernel whose task layout is `task`.
    fn new(config: &Config, task: btf::TaskOffsets) -> Settings {
        let slots = inflight_slots();
        let (min_block, every, map_size, period) =
            config.stacks.as_ref().map_or((0, 0, 1, 0), |s| {
                (
                    s.min_block_ns,
                    s.syscall_every,
                    s.stack_map_size.max(1),
                    s.offcpu_period_ns,
                )
            });
        // Every syscall, when every one was asked for.
        let stack_gap_ns: u64 = config
            .stacks
            .as_ref()
            .filter(|s| s.syscall_every > 1 && s.syscall_stacks_per_s > 0)
            .map_or(0, |s| 1_000_000_000 / s.syscall_stacks_per_s);
        let cfi = config
            .stacks
            .as_ref()
            .filter(|s| s.unwind == Unwind::Cfi)
            .map(|s| s.unwind_rows.max(1));
        let (timeline_bytes, timeline_syscall_ns) = config
            .timeline
            .map_or((4096, 0), |t| (t.buffer_bytes.max(4096), t.syscall_ns));
        // Return probes replace return addresses on the stacks walked inside a span; the
        // walker puts them back where the kernel's layout is known (else they stay replaced).
        let retprobe_offsets = if config.spans.is_empty() {
            None
        } else {
            btf::retprobe_offsets().ok()
        };
        // Thread context is read only where the kernel's task layout gives the thread pointer.
        let (otel_tls_offset, otel_tls_module): (i64, u64) = match &config.thread_context {
            Some((place, _)) if task.fsbase != 0 => match *place {
                crate::otel::TlsPlace::Static(offset) => (offset, 0),
                crate::otel::TlsPlace::Dynamic { module, offset } => (offset as i64, module),
            },
            _ => (0, 0),
        };
        Settings {
            tgid: config.tgid,
            follow: u8::from(config.follow_children),
            task,
            slots,
            thread_slots: thread_slots(slots),
            stacks_on: u8::from(config.stacks.is_some()),
            min_block,
            every,
            map_size,
            period,
            stack_gap_ns,
            time_every: u64::from(config.syscall_latency),
            // The kernel side's budget is per period.
            time_budget: (u64::from(config.syscall_budget)
                * switchyard_common::SYSCALL_BUDGET_PERIOD_NS)
                .div_ceil(1_000_000_000),
            filter_on: u8::from(matches!(config.syscalls, Syscalls::Only(_))),
            cfi,
            unwind_mode: if cfi.is_some() {
                switchyard_common::unwind::MODE_CFI
            } else {
                switchyard_common::unwind::MODE_FP
            },
            timeline_on: u8::from(config.timeline.is_some()),
            timeline_bytes,
            timeline_syscall_ns,
            // Room for about 7,500 instances between two polls (a tick apart).
            span_bytes: if config.spans.is_empty() {
                4096
            } else {
                4 << 20
            },
            return_probes_on: u8::from(retprobe_offsets.is_some()),
            retprobe_offsets: retprobe_offsets.unwrap_or_default(),
            span_count: config.spans.len() as u32,
            otel_tls_offset,
            otel_tls_module,
        }
    }

    /// Whether the target's OpenTelemetry thread context is read.
    fn otel_on(&self) -> bool {
        self.otel_tls_offset != 0 || self.otel_tls_module != 0
    }

    /// Creates the object's maps and reads its programs, with these settings.
    fn load(&self) -> Result<Ebpf, Error> {
        let mask = self.slots - 1;
        let thread_mask = self.thread_slots - 1;
        let task = &self.task;
        let otel_on = self.otel_on();
        EbpfLoader::new()
            .override_global(globals::TARGET_TGID, &self.tgid, true)
            .override_global(globals::FOLLOW_CHILDREN, &self.follow, true)
            .override_global(globals::INFLIGHT_MASK, &mask, true)
            .override_global(globals::THREAD_MASK, &thread_mask, true)
            .override_global(globals::STACKS_ON, &self.stacks_on, true)
            .override_global(globals::MIN_BLOCK_NS, &self.min_block, true)
            .override_global(globals::SYSCALL_STACK_EVERY, &self.every, true)
            .override_global(globals::SYSCALL_STACK_GAP_NS, &self.stack_gap_ns, true)
            .override_global(globals::SYSCALL_TIME_EVERY, &self.time_every, true)
            .override_global(globals::SYSCALL_TIME_BUDGET, &self.time_budget, true)
            .override_global(globals::UNWIND_MODE, &self.unwind_mode, true)
            .override_global(globals::OFFCPU_PERIOD_NS, &self.period, true)
            .override_global(globals::TASK_PID_OFFSET, &task.pid, true)
            .override_global(globals::TASK_TGID_OFFSET, &task.tgid, true)
            .override_global(globals::TASK_PRIO_OFFSET, &task.static_prio, true)
            .override_global(globals::SYSCALL_FILTER_ON, &self.filter_on, true)
            .override_global(globals::TIMELINE_ON, &self.timeline_on, true)
            .override_global(
                globals::TIMELINE_SYSCALL_NS,
                &self.timeline_syscall_ns,
                true,
            )
            .override_global(globals::RETURN_PROBES_ON, &self.return_probes_on, true)
            .override_global(globals::RETPROBE_OFFSETS, &self.retprobe_offsets, true)
            .override_global(globals::SPAN_COUNT, &self.span_count, true)
            .override_global(globals::OTEL_TLS_OFFSET, &self.otel_tls_offset, true)
            .override_global(globals::OTEL_TLS_MODULE, &self.otel_tls_module, true)
            .override_global(globals::TASK_FSBASE_OFFSET, &task.fsbase, true)
            .map_max_entries(maps::TIMELINE, self.timeline_bytes)
            // Thread context's tables take kernel memory only where it is read.
            .map_max_entries(maps::OTEL_SPANS, if otel_on { otel::MAX_SPANS } else { 1 })
            .map_max_entries(
                maps::OTEL_THREADS,
                if otel_on { otel::MAX_THREADS } else { 1 },
            )
            .map_max_entries(maps::OTEL_SAMPLES, if otel_on { self.map_size } else { 1 })
            .map_max_entries(maps::SPAN_EVENTS, self.span_bytes)
            .map_max_entries(maps::INFLIGHT, self.slots)
            .map_max_entries(maps::THREADS, self.thread_slots)
            .map_max_entries(maps::THREAD_CLAIMS, self.thread_slots)
            .map_max_entries(maps::LOCK_INFLIGHT, self.slots)
            .map_max_entries(maps::USER_STACKS, self.map_size)
            .map_max_entries(maps::KERNEL_STACKS, self.map_size)
            // One page's worth when unused: the array is mmap-able, so page-sized at least.
            .map_max_entries(maps::UNWIND_ROWS, self.cfi.unwrap_or(512))
            .load(OBJECT)
            .map_err(|e| Error::Load(Box::new(e)))
    }
}

/// Writes whom and what the kernel side records into its maps: the syscalls asked for (when
/// not all), and the target.
fn fill_filters(ebpf: &mut Ebpf, config: &Config) -> Result<(), Error> {
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
    let map = ebpf
        .map_mut(maps::TARGETS)
        .ok_or(Error::MissingMap(maps::TARGETS))?;
    let mut targets: HashMap<&mut MapData, u32, u8> =
        HashMap::try_from(map).map_err(map_err(maps::TARGETS))?;
    targets
        .insert(config.tgid, 1, 0)
        .map_err(map_err(maps::TARGETS))
}

/// The target's unwind tables (of at most `cfi` rows, when stacks are walked by CFI), filled
/// before the first stack is walked; a command not yet started has none to fill yet.
fn target_tables(
    ebpf: &mut Ebpf,
    config: &Config,
    cfi: Option<u32>,
) -> Result<Option<unwind::Tables>, Error> {
    let Some(rows) = cfi else {
        return Ok(None);
    };
    let mut t = unwind::Tables::new(ebpf, rows)?;
    if !config.before_exec {
        let text = std::fs::read_to_string(format!("/proc/{}/maps", config.tgid)).ok();
        t.refresh(ebpf, config.tgid, text.as_deref())?;
    }
    Ok(Some(t))
}

/// Every program the configuration attaches, with the BTF tracepoint it is typed against; the
/// longest to verify first (sys_enter's, then the wakeup's, as -v measures them), so that the
/// last to finish is a short one.
fn wanted(config: &Config, otel_on: bool) -> Vec<(&'static str, Option<&'static str>)> {
    let syscalls = config.syscalls != Syscalls::None;
    let stacks = config.stacks.is_some();
    [
        (syscalls, programs::SYS_ENTER, None),
        (
            stacks || config.timeline.is_some(),
            programs::SCHED_WAKEUP,
            Some("sched_waking"),
        ),
        (syscalls && stacks, programs::SYS_EXIT_WALK, None),
        (true, programs::SCHED_SWITCH_WALK, Some("sched_switch")),
        (
            config.stacks.as_ref().is_some_and(|s| s.oncpu_hz > 0),
            programs::ONCPU,
            None,
        ),
        (true, programs::SCHED_SWITCH, Some("sched_switch")),
        (true, programs::SCHED_SWITCH_FINISH, Some("sched_switch")),
        (otel_on, programs::OTEL_SWITCH, Some("sched_switch")),
        (syscalls && stacks, programs::SYS_EXIT_FINISH, None),
        (syscalls, programs::SYS_EXIT, None),
        (true, programs::TASK_NEWTASK, None),
    ]
    .into_iter()
    .filter(|(on, ..)| *on)
    .map(|(_, name, event)| (name, event))
    .collect()
}

/// Attaches the kernel's programs the configuration asks for, in order: the scheduler's, the
/// syscalls', the wakeup's, the on-CPU sampler, then lock contention's. Returns whether lock
/// contention's attached (a kernel may lack its tracepoints).
fn attach_kernel_programs(
    ebpf: &mut Ebpf,
    config: &Config,
    btf: &aya::Btf,
    otel_on: bool,
    steps: &mut Steps,
) -> Result<bool, Error> {
    // Follow first, then the scheduler, then syscalls: a child forked while attaching is
    // not missed, and no syscall exit is seen before its entry program is in place.
    attach_tracepoint(ebpf, programs::TASK_NEWTASK, "task", "task_newtask")?;
    attach_switch(ebpf, btf)?;
    // After the switch program, so it runs after it at every switch (a tracepoint runs
    // its programs in the order they were attached): an earlier interval's off-CPU time
    // that the switch program counts at this switch-out still finds the span of the
    // switch-out that began it, not this one's.
    if otel_on {
        attach_btf(ebpf, programs::OTEL_SWITCH, "sched_switch", btf)?;
    }
    steps.lap("task and switch programs attached");
    if config.syscalls != Syscalls::None {
        if config.stacks.is_some() {
            load_sys_exit_jumps(ebpf)?;
        }
        attach_raw(ebpf, programs::SYS_ENTER, "sys_enter")?;
        attach_raw(ebpf, programs::SYS_EXIT, "sys_exit")?;
        steps.lap("syscall programs attached");
    }
    if config.stacks.is_some() || config.timeline.is_some() {
        attach_btf(ebpf, programs::SCHED_WAKEUP, "sched_waking", btf)?;
        steps.lap("wakeup program attached");
    }
    if let Some(s) = &config.stacks
        && s.oncpu_hz > 0
    {
        attach_oncpu(ebpf, s.oncpu_hz)?;
        steps.lap("on-CPU sampler attached");
    }
    // Kernels without CONFIG_LOCKDEP-free contention tracepoints simply lack them.
    let contention = tracefs::find()
        .is_some_and(|root| root.join("events/lock/contention_begin").is_dir())
        && attach_btf(ebpf, programs::CONTENTION_BEGIN, "contention_begin", btf)
            .and_then(|()| attach_btf(ebpf, programs::CONTENTION_END, "contention_end", btf))
            .is_ok();
    steps.lap("lock contention programs verified, attached");
    Ok(contention)
}

/// The ring buffer `name`, taken out of the object to be read.
fn take_ring(ebpf: &mut Ebpf, name: &'static str) -> Result<RingBuf<MapData>, Error> {
    let map = ebpf.take_map(name).ok_or(Error::MissingMap(name))?;
    RingBuf::try_from(map).map_err(map_err(name))
}

/// Processes given span probes, at most: a fork-heavy target's children beyond it go without.
const MAX_SPAN_PROCS: usize = 4096;

impl Probes {
    /// The span probes of a process the recording follows (a child of the target), placed
    /// once; the target's were placed as the probes attached. A process that has gone since
    /// is not an error.
    pub fn follow_spans(&mut self, tgid: u32) -> Result<(), Error> {
        if self.spans.is_empty()
            || self.span_procs.len() >= MAX_SPAN_PROCS
            || !self.span_procs.insert(tgid)
        {
            return Ok(());
        }
        match attach_spans(&mut self.ebpf, &self.spans, tgid) {
            Err(_) if !std::path::Path::new(&format!("/proc/{tgid}")).exists() => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

/// Where attaching spent its time: each step's name and length, in order.
struct Steps {
    done: Vec<(String, std::time::Duration)>,
    since: std::time::Instant,
}

impl Steps {
    fn start() -> Steps {
        Steps {
            done: Vec::new(),
            since: std::time::Instant::now(),
        }
    }

    /// Ends the step under way, begun at the last lap (or at the start).
    fn lap(&mut self, name: impl Into<String>) {
        let now = std::time::Instant::now();
        self.done.push((name.into(), now - self.since));
        self.since = now;
    }

    /// Ends the step that verified the programs, with the longest of `verified` (longest
    /// first) under it.
    fn verified(&mut self, verified: Vec<(&'static str, std::time::Duration)>) {
        let at_once = match verify_threads(verified.len()) {
            1 => "one at a time".to_string(),
            n => format!("{n} at once"),
        };
        self.lap(format!(
            "{} programs verified by the kernel, {at_once}; the longest:",
            verified.len(),
        ));
        for (name, took) in verified.into_iter().take(4) {
            self.done.push((format!("  {name}"), took));
        }
    }
}

/// Loads the programs `wanted` (name, and the BTF tracepoint it is typed against), each
/// verified by the kernel, on every CPU at once: the verifier is most of the time attaching
/// takes, one program is verified by one thread, and a privileged load takes no global lock.
/// The programs are attached later, in order, by the functions below.
fn verify(
    ebpf: &mut Ebpf,
    wanted: &[(&'static str, Option<&'static str>)],
    btf: &aya::Btf,
) -> Result<Vec<(&'static str, std::time::Duration)>, Error> {
    use aya::programs::Program;
    let mut jobs: Vec<(usize, &'static str, Option<&'static str>, &mut Program)> = ebpf
        .programs_mut()
        .filter_map(|(name, p)| {
            let order = wanted.iter().position(|(w, _)| *w == name)?;
            let (name, event) = wanted[order];
            Some((order, name, event, p))
        })
        .collect();
    // In the order asked for (the object's own order is a hash map's).
    jobs.sort_by_key(|j| j.0);
    let threads = verify_threads(jobs.len());
    let queue = std::sync::Mutex::new(jobs.into_iter());
    let next = || queue.lock().unwrap_or_else(|e| e.into_inner()).next();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> Result<Vec<_>, Error> {
                    let mut took = Vec::new();
                    while let Some((_, name, event, program)) = next() {
                        let began = std::time::Instant::now();
                        let result = match (program, event) {
                            (Program::BtfTracePoint(p), Some(event)) => p.load(event, btf),
                            (Program::TracePoint(p), _) => p.load(),
                            (Program::RawTracePoint(p), _) => p.load(),
                            (Program::PerfEvent(p), _) => p.load(),
                            (Program::UProbe(p), _) => p.load(),
                            // Left to the function that attaches it.
                            _ => Ok(()),
                        };
                        loaded(name, result)?;
                        took.push((name, began.elapsed()));
                    }
                    Ok(took)
                })
            })
            .collect();
        let mut took = Vec::new();
        for w in workers {
            took.extend(w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?);
        }
        took.sort_by_key(|&(_, t)| std::cmp::Reverse(t));
        Ok(took)
    })
}

/// Threads that verify `jobs` programs: one a CPU, at most one a program.
/// SWITCHYARD_VERIFY_THREADS=1 verifies one program after another, as attaching did before:
/// a benchmark's anchor for what verifying them at once saves.
fn verify_threads(jobs: usize) -> usize {
    std::env::var("SWITCHYARD_VERIFY_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .min(jobs)
        .max(1)
}

/// Entry-only probes on the Go runtime's GC functions, placed past each one's stack check so
/// that a call which grows its stack counts once; the cookie is the event kind. A symbol the
/// binary lacks (another Go version) is reported, not an error; none at all is.
fn attach_go_gc(ebpf: &mut Ebpf, binary: &std::path::Path) -> Result<Vec<(String, bool)>, Error> {
    let name = programs::GO_GC;
    let program: &mut UProbe = program(ebpf, name)?;
    program.load().map_err(|source| load_error(name, source))?;
    let symbols: Vec<&str> = gc::SYMBOLS.iter().map(|(_, s)| *s).collect();
    let offsets = switchyard_runtimes::go::prologue::probe_offsets(binary, &symbols);
    let mut found = Vec::new();
    for (kind, symbol) in gc::SYMBOLS {
        let offset = offsets.get(symbol).copied().unwrap_or(0);
        let ok = program
            .attach(
                UProbeAttachPoint {
                    location: UProbeAttachLocation::SymbolOffset(symbol, offset),
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

/// Entry and return probes on every span's symbol, in the process `tgid` only; the cookie is
/// the span's index. Returns where each span's probes went. A probe attached to every process would place a return probe in every
/// program on the host that runs the function: its return address replaced, which an
/// exception unwinding through it cannot survive, and a trap per call for processes nobody
/// records.
fn attach_spans(
    ebpf: &mut Ebpf,
    spans: &[Span],
    tgid: u32,
) -> Result<Vec<Option<crate::placement::Placement>>, Error> {
    let Some(pid) = std::num::NonZeroU32::new(tgid) else {
        return Ok(Vec::new());
    };
    let mut placements = Vec::new();
    let scope = UProbeScope::OneProcess(pid);
    let attach = |ebpf: &mut Ebpf,
                  name: &'static str,
                  i: usize,
                  span: &Span,
                  at: UProbeAttachLocation|
     -> Result<(), Error> {
        let program: &mut UProbe = program(ebpf, name)?;
        loaded(name, program.load())?;
        program
            .attach(
                UProbeAttachPoint {
                    location: at,
                    cookie: Some(i as u64),
                },
                &span.binary,
                scope,
            )
            .map(|_| ())
            .map_err(|source| Error::Uprobe {
                symbol: span.symbol.clone(),
                binary: span.binary.display().to_string(),
                source: Box::new(source),
            })
    };
    for (i, span) in spans.iter().enumerate() {
        let placed = crate::placement::place(&span.binary, &span.symbol, span.go);
        placements.push(placed.clone());
        let entry = placed.as_ref().map_or(0, |p| p.entry);
        let symbol = span.symbol.as_str();
        if span.go {
            // Never a return probe on Go code: a plain probe on each of its RETs.
            let returns = placed.map(|p| p.returns).unwrap_or_default();
            if returns.is_empty() {
                return Err(Error::NoReturns {
                    symbol: span.symbol.clone(),
                    binary: span.binary.display().to_string(),
                });
            }
            // The returns first: an instance entered is then always seen to return.
            for off in returns {
                let at = UProbeAttachLocation::SymbolOffset(symbol, off);
                attach(ebpf, programs::SPAN_EXIT_GO, i, span, at)?;
            }
            let at = UProbeAttachLocation::SymbolOffset(symbol, entry);
            attach(ebpf, programs::SPAN_ENTER_GO, i, span, at)?;
        } else {
            // On the entry's instruction when the return address is still on top there: one
            // breakpoint for both.
            let ret = placed.as_ref().map_or(0, |p| p.ret_probe);
            let at = UProbeAttachLocation::SymbolOffset(symbol, ret);
            attach(ebpf, programs::SPAN_EXIT, i, span, at)?;
            let at = UProbeAttachLocation::SymbolOffset(symbol, entry);
            attach(ebpf, programs::SPAN_ENTER, i, span, at)?;
        }
    }
    if let Some(span) = spans.iter().find(|s| s.go) {
        attach_go_sched(ebpf, &span.binary, scope)?;
    }
    Ok(placements)
}

/// The Go scheduler's probes that follow a goroutine with a span open from thread to thread
/// (`go_sched`, and `go_ready` for `runtime.ready`): entry probes past each function's stack
/// check, and the GC assist's body and `RET`s. A symbol another Go version lacks is left out;
/// the scheduler's own are required.
fn attach_go_sched(
    ebpf: &mut Ebpf,
    binary: &std::path::Path,
    scope: UProbeScope,
) -> Result<(), Error> {
    let symbols: Vec<&str> = go_sched::SYMBOLS.iter().map(|(_, s)| *s).collect();
    let offsets = switchyard_runtimes::go::prologue::probe_offsets(binary, &symbols);
    let mut at: Vec<(u32, &str, u64)> = go_sched::SYMBOLS
        .iter()
        .filter_map(|&(kind, symbol)| Some((kind, symbol, *offsets.get(symbol)?)))
        .collect();
    for required in ["runtime.execute", "runtime.gopark", "runtime.ready"] {
        if !at.iter().any(|(_, s, _)| *s == required) {
            return Err(Error::GoScheduler {
                symbol: required.to_string(),
                binary: binary.display().to_string(),
            });
        }
    }
    if let Some(p) = crate::placement::place(binary, go_sched::ASSIST, true) {
        // The returns first, as a span's.
        at.extend(
            p.returns
                .iter()
                .map(|&off| (go_sched::ASSIST_RETURN, go_sched::ASSIST, off)),
        );
        at.push((go_sched::ASSIST_ENTRY, go_sched::ASSIST, p.entry));
    }
    for name in [programs::GO_SCHED, programs::GO_READY] {
        let program: &mut UProbe = program(ebpf, name)?;
        loaded(name, program.load())?;
        let mine = at
            .iter()
            .filter(|(kind, ..)| (*kind == go_sched::READY) == (name == programs::GO_READY));
        for &(kind, symbol, offset) in mine {
            program
                .attach(
                    UProbeAttachPoint {
                        location: UProbeAttachLocation::SymbolOffset(symbol, offset),
                        cookie: Some(u64::from(kind)),
                    },
                    binary,
                    scope,
                )
                .map_err(|source| Error::Uprobe {
                    symbol: symbol.to_string(),
                    binary: binary.display().to_string(),
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
    loaded(name, program.load())?;
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

/// THREADS' size: INFLIGHT's, capped at `MAX_THREAD_SLOTS`. `SWITCHYARD_THREAD_SLOTS` (a power
/// of two) makes it smaller, so that tests can take the path of a host whose pid_max is
/// beyond the cap, where threads whose slots clash spill into a hash.
fn thread_slots(inflight: u32) -> u32 {
    let cap = std::env::var("SWITCHYARD_THREAD_SLOTS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|n| n.is_power_of_two())
        .unwrap_or(switchyard_common::MAX_THREAD_SLOTS);
    inflight.min(cap).min(switchyard_common::MAX_THREAD_SLOTS)
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
    loaded(name, program.load())?;
    program
        .attach(category, event)
        .map_err(program_error(name))?;
    Ok(())
}

/// The BTF tracepoint program `name` on the kernel's tracepoint `event`.
fn attach_btf(
    ebpf: &mut Ebpf,
    name: &'static str,
    event: &str,
    btf: &aya::Btf,
) -> Result<(), Error> {
    let p: &mut aya::programs::BtfTracePoint = program(ebpf, name)?;
    loaded(name, p.load(event, btf))?;
    p.attach().map_err(program_error(name))?;
    Ok(())
}

/// `sched_switch` as a BTF tracepoint, with the programs it tail-calls for user-stack walks
/// loaded into `SWITCH_JUMP` first.
fn attach_switch(ebpf: &mut Ebpf, btf: &aya::Btf) -> Result<(), Error> {
    for (index, name) in [programs::SCHED_SWITCH_WALK, programs::SCHED_SWITCH_FINISH]
        .into_iter()
        .enumerate()
    {
        let p: &mut aya::programs::BtfTracePoint = program(ebpf, name)?;
        loaded(name, p.load("sched_switch", btf))?;
        set_jump(ebpf, maps::SWITCH_JUMP, index as u32, name)?;
    }
    attach_btf(ebpf, programs::SCHED_SWITCH, "sched_switch", btf)
}

/// `sys_exit`'s tail-called programs, into `SYSCALL_JUMP`.
fn load_sys_exit_jumps(ebpf: &mut Ebpf) -> Result<(), Error> {
    for (index, name) in [programs::SYS_EXIT_WALK, programs::SYS_EXIT_FINISH]
        .into_iter()
        .enumerate()
    {
        let p: &mut RawTracePoint = program(ebpf, name)?;
        loaded(name, p.load())?;
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
    loaded(name, program.load())?;
    program.attach(event).map_err(program_error(name))?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The recording's object, parsed (see [`parsed`]).
    fn object() -> Option<aya_obj::Object> {
        parsed(OBJECT)
    }

    /// An object's maps by name. `.rodata`, `.bss` and `.data` hold the globals: sections, not
    /// maps of ours.
    pub(crate) fn map_names(object: &aya_obj::Object) -> BTreeSet<&str> {
        object
            .maps
            .keys()
            .map(String::as_str)
            .filter(|name| !name.starts_with('.'))
            .collect()
    }

    /// An embedded object, parsed; `None` (with the reason printed) when build.rs skipped the
    /// kernel side, which CI must not.
    pub(crate) fn parsed(object: &[u8]) -> Option<aya_obj::Object> {
        if object.is_empty() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "the probes were not built (AYA_BUILD_SKIP): CI must check the real object"
            );
            println!("skipped: the probes were not built into this binary (AYA_BUILD_SKIP)");
            return None;
        }
        Some(aya_obj::Object::parse(object).expect("the embedded object parses"))
    }

    #[test]
    fn the_object_has_exactly_the_maps_common_names() {
        let Some(object) = object() else { return };
        let found = map_names(&object);
        let named: BTreeSet<&str> = maps::ALL.iter().copied().collect();
        assert_eq!(
            named.len(),
            maps::ALL.len(),
            "a map is named twice in maps::ALL"
        );
        assert_eq!(found, named);
    }

    #[test]
    fn the_object_has_exactly_the_programs_common_names() {
        let Some(object) = object() else { return };
        let found: BTreeSet<&str> = object.programs.keys().map(String::as_str).collect();
        let named: BTreeSet<&str> = [
            programs::SCHED_SWITCH,
            programs::SCHED_SWITCH_WALK,
            programs::SCHED_SWITCH_FINISH,
            programs::SYS_EXIT_WALK,
            programs::SYS_EXIT_FINISH,
            programs::TASK_NEWTASK,
            programs::SYS_ENTER,
            programs::SYS_EXIT,
            programs::SCHED_WAKEUP,
            programs::ONCPU,
            programs::CONTENTION_BEGIN,
            programs::CONTENTION_END,
            programs::SPAN_ENTER,
            programs::GO_GC,
            programs::SPAN_EXIT,
            programs::SPAN_ENTER_GO,
            programs::SPAN_EXIT_GO,
            programs::GO_SCHED,
            programs::GO_READY,
            programs::OTEL_SWITCH,
        ]
        .into_iter()
        .collect();
        assert_eq!(found, named);
    }
}
