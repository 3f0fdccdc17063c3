//! Types shared by the kernel-side programs (`ebpf/`) and the loader.
//!
//! Every struct here is `#[repr(C)]` with fixed-width fields only, so both sides agree on the
//! layout byte for byte; a `size_of` assertion sits next to each one. Map and global names are
//! constants so the loader's lookups cannot drift from the kernel side.
#![no_std]

/// Map names: the one list of them. The kernel side names each map by its static's
/// identifier (`#[map]` with no name string), so each identifier there is one of these; the
/// loader looks maps up by these constants, and its tests check the built object's maps
/// against [`maps::ALL`].
pub mod maps {
    /// `HashMap<u32 tgid, u8>`: processes followed (the target, and children forked after attach).
    pub const TARGETS: &str = "TARGETS";
    /// `Array<ThreadStats>` indexed by `tid & THREAD_MASK`: per-thread switch counts and
    /// on/off-CPU time. A slot is the thread's when its `tid` is the thread's and
    /// `THREAD_CLAIMS` names it; a thread whose slot another holds is in `THREAD_SPILL`.
    pub const THREADS: &str = "THREADS";
    /// `HashMap<u32 slot, u32 tid>`: who holds each claimed `THREADS` slot (what user space
    /// reads the array by; an insert with `BPF_NOEXIST` is the claim, atomic across CPUs).
    pub const THREAD_CLAIMS: &str = "THREAD_CLAIMS";
    /// `HashMap<u32 tid, ThreadStats>`: threads whose `THREADS` slot another thread holds.
    pub const THREAD_SPILL: &str = "THREAD_SPILL";
    /// `Array<u64>`, one entry: the recording's start (CLOCK_MONOTONIC ns), 0 before it.
    pub const START: &str = "START";
    /// `PerCpuArray<SyscallStats>` indexed by syscall number.
    pub const SYSCALLS: &str = "SYSCALLS";
    /// `PerCpuHashMap<ErrnoKey, u64>`: failed syscalls by (number, errno).
    pub const ERRNOS: &str = "ERRNOS";
    /// `Array<InFlight>` indexed by `tid & INFLIGHT_MASK`: the syscall each thread is inside.
    pub const INFLIGHT: &str = "INFLIGHT";
    /// `PerCpuArray<u64>` indexed by [`drops`] reasons.
    pub const DROPS: &str = "DROPS";
    /// `HashMap<OnCpuKey, u64>`: cpu-clock samples by stack.
    pub const ONCPU: &str = "ONCPU";
    /// `HashMap<OffCpuKey, u64>`: off-CPU ns by stack at switch-out and state.
    pub const OFFCPU: &str = "OFFCPU";
    /// `HashMap<WakeupKey, u64>`: off-CPU ns by sleeper stack and waker stack.
    pub const WAKEUPS: &str = "WAKEUPS";
    /// `RunqueueHolderKey -> RunqueueHolderStats`: who held the CPU while a target thread waited.
    pub const RUNQUEUE_HOLDERS: &str = "RUNQUEUE_HOLDERS";
    /// `HashMap<HeldKey, u64>`: what a waker of the targets did while the thread it woke
    /// waited, ns by its state and stacks.
    pub const HELD: &str = "HELD";
    /// `HashMap<SyscallStackKey, u64>`: sampled syscall entries by user stack.
    pub const SYSCALL_STACKS: &str = "SYSCALL_STACKS";
    /// `PerCpuArray<ThreadStats>` of one zeroed entry: the template for new threads (a
    /// ThreadStats does not fit on the 512-byte eBPF stack beside everything else).
    pub const ZERO_THREAD: &str = "ZERO_THREAD";
    /// `PerCpuArray` of one entry: where syscall-stack sampling stands on each CPU.
    pub const SYSCALL_TICK: &str = "SYSCALL_TICK";
    /// `HashMap<FutexKey, FutexStats>`: futex waits by address and user stack.
    pub const FUTEXES: &str = "FUTEXES";
    /// `PerCpuArray<WaitStats>` of one entry: every futex wait.
    pub const FUTEX_WAITS: &str = "FUTEX_WAITS";
    /// `PerCpuArray<WaitStats>` of one entry: kernel lock contention (lock:contention_*).
    pub const LOCK_CONTENTION: &str = "LOCK_CONTENTION";
    /// `Array<u64>` indexed by `tid & INFLIGHT_MASK`: contention start time.
    pub const LOCK_INFLIGHT: &str = "LOCK_INFLIGHT";
    /// `PerCpuArray<SpanHist>` indexed by span: every instance's duration.
    pub const SPAN_HIST: &str = "SPAN_HIST";
    /// `Array<u64>` of `SPAN_CTL_WORDS * MAX_SPANS`, written by user space while recording:
    /// per span (from `SPAN_CTL_WORDS * span`), the duration from which an instance is slow,
    /// one in how many instances is sent as a typical one (0: all), and the duration below
    /// which a slow one is only counted, not sent, as the table of the slowest kept is full
    /// of slower ones (0: every slow one is sent).
    pub const SPAN_CTL: &str = "SPAN_CTL";
    /// `HashMap<u64, SpanInstance>`: the Go span open on each goroutine, by its g and the span
    /// (in the top byte).
    pub const GO_SPANS: &str = "GO_SPANS";
    /// `PerCpuArray<SpanInstance>` of one entry: where a Go instance is built.
    pub const GO_SCRATCH: &str = "GO_SCRATCH";
    /// `HashMap<u64, GoTrack>`: each goroutine with a Go span open, by its g.
    pub const GO_TRACKS: &str = "GO_TRACKS";
    /// `RingBuf` of `SpanInstance`: the slow instances and a sample of the typical ones.
    pub const SPAN_EVENTS: &str = "SPAN_EVENTS";
    /// `RingBuf` of `GcEvent`: Go runtime GC events with their timestamps.
    pub const GC_EVENTS: &str = "GC_EVENTS";
    /// `HashMap<u32 tid, OtelThread>`: each target thread's OpenTelemetry thread context at
    /// its last switch-out, and its times then.
    pub const OTEL_THREADS: &str = "OTEL_THREADS";
    /// `HashMap<[u8; 8] span id, OtelSpan>`: each OpenTelemetry span seen in a thread's
    /// context, its anatomy so far.
    pub const OTEL_SPANS: &str = "OTEL_SPANS";
    /// `PerCpuArray<u64>` of `otel::STATS`: what reading thread contexts found.
    pub const OTEL_STATS: &str = "OTEL_STATS";
    /// `HashMap<OtelSampleKey, u64>`: on-CPU samples and off-CPU ns taken while a thread's
    /// context named a span, by span and stacks (a subset of `ONCPU` and `OFFCPU`).
    pub const OTEL_SAMPLES: &str = "OTEL_SAMPLES";
    /// `RingBuf` of `TimelineEvent` (`--timeline`): timestamped switches, wakeups, slow
    /// syscalls, futex waits and stack samples.
    pub const TIMELINE: &str = "TIMELINE";
    /// `PerCpuArray<u64>` indexed by `gc::*` kind: every GC event counted, even when the ring
    /// buffer is full.
    pub const GC_COUNTS: &str = "GC_COUNTS";
    /// `HashMap<i32, UserStack>`: user stacks walked by the kernel side, by id.
    pub const USER_STACKS: &str = "USER_STACKS";
    /// `HashMap<i32, UserStack>`: kernel stacks, by id: the current task's (`bpf_get_stack`)
    /// and blocked threads' (`bpf_get_task_stack` at switch-in); every id has
    /// [`crate::KERNEL_STACK_ID`] set, so they never clash with user stack ids.
    pub const KERNEL_STACKS: &str = "KERNEL_STACKS";
    /// `PerCpuArray<u64>` indexed by [`crate::sampling`]: off-CPU intervals considered and
    /// walked.
    pub const SAMPLING: &str = "SAMPLING";
    /// `ProgramArray`: `sched_switch_walk`, `sched_switch_finish`, tail-called in turn from
    /// `sched_switch` when a switch-out needs its user stack.
    pub const SWITCH_JUMP: &str = "SWITCH_JUMP";
    /// `ProgramArray`: `sys_exit_walk`, `sys_exit_finish`, the same from `sys_exit`.
    pub const SYSCALL_JUMP: &str = "SYSCALL_JUMP";
    /// `Array<u8>` indexed by syscall number: 1 where the syscall is recorded (`--syscalls`).
    pub const SYSCALL_FILTER: &str = "SYSCALL_FILTER";
    /// `PerCpuArray<UserStack>` indexed by [`crate::unwind::SLOTS`]: the stack being walked.
    pub const UNWIND_SCRATCH: &str = "UNWIND_SCRATCH";
    /// `Array<UnwindRow>`: the compact unwind tables of every loaded object, back to back.
    pub const UNWIND_ROWS: &str = "UNWIND_ROWS";
    /// `HashMap<u32 tgid, UnwindProc>`: where each followed process's mappings are listed.
    pub const PROC_MAPS: &str = "PROC_MAPS";
    /// `Array<UnwindMapping>`: [`unwind::MAX_MAPPINGS`] slots per process, sorted by start.
    pub const MAPPINGS: &str = "MAPPINGS";
    /// `Array<u32>` of one entry: bumped whenever a mapping list changes (the kernel side
    /// caches rules per pc within one generation).
    pub const UNWIND_GENERATION: &str = "UNWIND_GENERATION";
    /// `Array<u64>` of one entry: how many child processes have been followed (until the
    /// first, the target filter needs no hash lookup).
    pub const FOLLOWED: &str = "FOLLOWED";
    /// `PerCpuArray` indexed by [`crate::unwind::SLOTS`]: recently walked pcs' rules.
    pub const RULE_CACHE: &str = "RULE_CACHE";
    /// `PerCpuArray<i32>` indexed by [`crate::unwind::SLOTS`]: a walked user stack's id,
    /// handed from a tail-called walk program to the next.
    pub const WALKED: &str = "WALKED";
    /// `PerCpuArray<u64>` of one entry: each CPU's last reported switch.
    pub const LAST_SWITCH: &str = "LAST_SWITCH";
    /// `PerCpuArray` of one entry: the switch-out being recorded, between tail calls.
    pub const SWITCH_OUT: &str = "SWITCH_OUT";
    /// `HashMap<u32 tgid, PyProc>`: Python processes, where their interpreter state is and
    /// its layout (see [`crate::python`]).
    pub const PY_PROCS: &str = "PY_PROCS";
    /// `LruHashMap<u32 tid, u64>`: each Python thread's `PyThreadState` address, once found.
    pub const PY_TSTATES: &str = "PY_TSTATES";
    /// `LruHashMap<PyCodeKey, PyCode>`: code objects' names, files and line tables, by address
    /// and generation there ([`crate::python::GEN_MASK`]), copied the first time a stack holds
    /// them (the process may be gone by the end).
    pub const PY_CODES: &str = "PY_CODES";
    /// `LruHashMap<PyCodeKey, PyGen>`: which code object an address held when last seen, and
    /// its generation there (kernel side only).
    pub const PY_GENS: &str = "PY_GENS";
    /// `PerCpuArray<PyCode>` indexed by [`crate::unwind::SLOTS`]: a code object being copied.
    pub const PY_SCRATCH: &str = "PY_SCRATCH";
    /// `PerCpuArray<[u64; 10]>` indexed by [`crate::unwind::SLOTS`]: a frame being read.
    pub const PY_FRAME: &str = "PY_FRAME";

    /// `Array<FloorEntry>` and a task storage map of the same entries: the two lookup floors'
    /// (`switchyard floor switch-array`, `switch-task-storage`), in the floor's own object.
    pub const FLOOR_THREADS: &str = "FLOOR_THREADS";
    pub const FLOOR_TASKS: &str = "FLOOR_TASKS";
    /// `PerCpuArray<u64>` of one entry: each CPU's last switch, the clock floor's
    /// (`switchyard floor switch-clock`).
    pub const FLOOR_LAST_SWITCH: &str = "FLOOR_LAST_SWITCH";
    /// Every map of the floor's object.
    pub const FLOOR_ALL: &[&str] = &[FLOOR_THREADS, FLOOR_TASKS, FLOOR_LAST_SWITCH];

    /// Every map of the recording's object, each once.
    pub const ALL: &[&str] = &[
        OTEL_THREADS,
        OTEL_SPANS,
        OTEL_STATS,
        OTEL_SAMPLES,
        TARGETS,
        THREADS,
        THREAD_CLAIMS,
        THREAD_SPILL,
        START,
        SYSCALLS,
        ERRNOS,
        INFLIGHT,
        DROPS,
        ONCPU,
        OFFCPU,
        WAKEUPS,
        RUNQUEUE_HOLDERS,
        HELD,
        SYSCALL_STACKS,
        ZERO_THREAD,
        SYSCALL_TICK,
        FUTEXES,
        FUTEX_WAITS,
        LOCK_CONTENTION,
        LOCK_INFLIGHT,
        SPAN_HIST,
        SPAN_CTL,
        SPAN_EVENTS,
        GO_SPANS,
        GO_SCRATCH,
        GO_TRACKS,
        GC_EVENTS,
        TIMELINE,
        GC_COUNTS,
        USER_STACKS,
        KERNEL_STACKS,
        SAMPLING,
        SWITCH_JUMP,
        SYSCALL_JUMP,
        SYSCALL_FILTER,
        UNWIND_SCRATCH,
        UNWIND_ROWS,
        PROC_MAPS,
        MAPPINGS,
        UNWIND_GENERATION,
        FOLLOWED,
        RULE_CACHE,
        WALKED,
        LAST_SWITCH,
        SWITCH_OUT,
        PY_PROCS,
        PY_TSTATES,
        PY_CODES,
        PY_GENS,
        PY_SCRATCH,
        PY_FRAME,
    ];
}

/// Read-only globals the loader sets before load (`EbpfLoader::override_global`).
pub mod globals {
    /// `u32`: the target's tgid (fast path of the target filter).
    pub const TARGET_TGID: &str = "TARGET_TGID";
    /// `u8`: 1 to follow child processes forked after attach.
    pub const FOLLOW_CHILDREN: &str = "FOLLOW_CHILDREN";
    /// `u32`: `INFLIGHT`'s size minus one.
    pub const INFLIGHT_MASK: &str = "INFLIGHT_MASK";
    /// `u32`: `THREADS`' size minus one.
    pub const THREAD_MASK: &str = "THREAD_MASK";
    /// `u8`: 1 to take off-CPU, wakeup and syscall stacks.
    pub const STACKS_ON: &str = "STACKS_ON";
    /// `u64`: off-CPU intervals shorter than this are not recorded by stack.
    pub const MIN_BLOCK_NS: &str = "MIN_BLOCK_NS";
    /// `u64`: take the user stack of one syscall in this many (0: none).
    pub const SYSCALL_STACK_EVERY: &str = "SYSCALL_STACK_EVERY";
    /// `u64`: the least time between two syscall stacks on one CPU, ns (0: no limit).
    pub const SYSCALL_STACK_GAP_NS: &str = "SYSCALL_STACK_GAP_NS";
    /// `u64`: time one syscall in about this many per thread (1: every one; 0: none).
    pub const SYSCALL_TIME_EVERY: &str = "SYSCALL_TIME_EVERY";
    /// `u64`: timed calls each thread gets in a [`crate::SYSCALL_BUDGET_PERIOD_NS`] period
    /// before its calls are drawn (0: no budget).
    pub const SYSCALL_TIME_BUDGET: &str = "SYSCALL_TIME_BUDGET";
    /// `u8`: how user stacks are walked, one of [`crate::unwind::MODE_FP`] or `MODE_CFI`.
    pub const UNWIND_MODE: &str = "UNWIND_MODE";
    /// `u64`: the off-CPU sampling period, ns (0: stacks for every interval).
    pub const OFFCPU_PERIOD_NS: &str = "OFFCPU_PERIOD_NS";
    /// `u32`: byte offsets of `pid` and `tgid` in the kernel's `struct task_struct` (from its
    /// BTF).
    pub const TASK_PID_OFFSET: &str = "TASK_PID_OFFSET";
    pub const TASK_TGID_OFFSET: &str = "TASK_TGID_OFFSET";
    /// `u32`: byte offset of `static_prio` in `struct task_struct`.
    pub const TASK_PRIO_OFFSET: &str = "TASK_PRIO_OFFSET";
    /// `u8`: 1 when only the syscalls marked in `SYSCALL_FILTER` are recorded.
    pub const SYSCALL_FILTER_ON: &str = "SYSCALL_FILTER_ON";
    /// `u8`: 1 to stream timeline events (`--timeline`).
    pub const TIMELINE_ON: &str = "TIMELINE_ON";
    /// `u64`: syscalls at least this long go on the timeline.
    pub const TIMELINE_SYSCALL_NS: &str = "TIMELINE_SYSCALL_NS";
    /// `u8`: 1 when spans are recorded: their return probes replace return addresses on the
    /// stacks walked, and the walker puts the original ones back.
    pub const RETURN_PROBES_ON: &str = "RETURN_PROBES_ON";
    /// `u32`: how many spans are recorded (with one, its probes need not read their cookie).
    pub const SPAN_COUNT: &str = "SPAN_COUNT";
    /// `[u32; unwind::RETPROBE_FIELDS]`: byte offsets of the kernel fields that lead from the
    /// current task to its pending return probes (indexed by `unwind::RP_*`), from its BTF.
    pub const RETPROBE_OFFSETS: &str = "RETPROBE_OFFSETS";
    /// `i64`: where the target's `otel_thread_ctx_v1` is from its thread pointer (static
    /// TLS; negative on x86-64), or in its module's block (`OTEL_TLS_MODULE`); 0 with no
    /// module: the target publishes no thread context.
    pub const OTEL_TLS_OFFSET: &str = "OTEL_TLS_OFFSET";
    /// `u64`: 0 when `OTEL_TLS_OFFSET` is from the thread pointer; else the module id whose
    /// TLS block (found through the thread's DTV) holds the variable at `OTEL_TLS_OFFSET`.
    pub const OTEL_TLS_MODULE: &str = "OTEL_TLS_MODULE";
    /// `u32`: byte offset of `thread.fsbase` in `struct task_struct`.
    pub const TASK_FSBASE_OFFSET: &str = "TASK_FSBASE_OFFSET";
}

/// OpenTelemetry thread context (OTEP 4947): a thread's TLS variable `otel_thread_ctx_v1`
/// points to a record of the trace and span it serves, read at its switch-outs and on-CPU
/// samples, so each span's anatomy is kept without a probe per request.
pub mod otel {
    /// The record's fixed part: trace id (16), span id (8), valid (1), trace flags (1),
    /// attributes' size (2).
    pub const RECORD_HEADER: usize = 28;
    /// The largest record read (the attributes beyond the header at most this minus it).
    pub const RECORD_MAX: usize = 640;
    /// `OTEL_STATS` indexes: records read and valid; records with `valid` 0 (detached, or
    /// being written); records refused (`valid` neither 0 nor 1, or a size past
    /// `RECORD_MAX`); pointers that could not be read (wild, or unmapped); spans not kept,
    /// the table being full.
    pub const READ: u32 = 0;
    pub const NOT_VALID: u32 = 1;
    pub const REFUSED: u32 = 2;
    pub const UNREADABLE: u32 = 3;
    pub const TABLE_FULL: u32 = 4;
    pub const STATS: u32 = 5;
    /// Spans kept at most (`OTEL_SPANS`), and threads followed (`OTEL_THREADS`).
    pub const MAX_SPANS: u32 = 65536;
    /// `OtelSampleKey::state` of an on-CPU sample (no off-CPU state has it).
    pub const ONCPU: u32 = u32::MAX;
    pub const MAX_THREADS: u32 = 16384;
}

/// A thread's OpenTelemetry context at its last switch-out (zero ids: none), and its times
/// then: what its next switch-out charges to that span.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OtelThread {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// The thread's blocked and waiting-for-a-CPU totals (`ThreadStats`) then.
    pub blocked_ns: u64,
    pub runqueue_ns: u64,
    /// When (CLOCK_MONOTONIC ns).
    pub out_ns: u64,
}

/// The key of `OTEL_SAMPLES`: a span, and the stacks and thread of an on-CPU sample
/// (`state` = `otel::ONCPU`) or of an off-CPU interval (its `OffCpuKey::state`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OtelSampleKey {
    pub span_id: [u8; 8],
    pub tgid: u32,
    pub tid: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    pub state: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<OtelSampleKey>() == 32);

/// One OpenTelemetry span's anatomy, from the switches and samples of the threads whose
/// context named it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OtelSpan {
    pub trace_id: [u8; 16],
    /// On CPU between two switch-outs that both saw this span: exact.
    pub oncpu_ns: u64,
    /// On CPU between a switch-out that saw this span and one that saw another (the span
    /// changed while the thread ran): whose it was is told by the samples.
    pub changed_ns: u64,
    pub blocked_ns: u64,
    pub runqueue_ns: u64,
    /// On-CPU samples taken while this span was the thread's.
    pub samples: u64,
    /// Switch-outs that saw it.
    pub switches: u64,
    /// The first and last time it was seen (switch-out or sample), CLOCK_MONOTONIC ns.
    pub first_ns: u64,
    pub last_ns: u64,
    /// The thread that last served it.
    pub tid: u32,
    pub _pad: u32,
}

/// Kernel stack ids (`KERNEL_STACKS`) have this bit set.
pub const KERNEL_STACK_ID: i32 = 1 << 30;

/// Off-CPU stack sampling. An interval is walked with probability `p` and its time weighted by
/// `1/p`: the expected weight of every interval is its length, whatever decides `p`.
pub mod sampling {
    /// `SAMPLING` index: off-CPU intervals long enough for a stack (`--min-block`).
    pub const INTERVALS: u32 = 0;
    /// `SAMPLING` index: intervals whose stacks were taken.
    pub const WALKED: u32 = 1;
    pub const COUNT: u32 = 2;
    /// Probabilities are fixed point: this many units make 1.
    pub const ONE: u64 = 1 << 16;
}

/// Program names (the function names in `ebpf/src`).
pub mod programs {
    pub const SCHED_SWITCH: &str = "sched_switch";
    /// OpenTelemetry thread context, on sched_switch beside the switch program.
    pub const OTEL_SWITCH: &str = "otel_switch";
    /// Reached by tail calls (`SWITCH_JUMP`, `SYSCALL_JUMP`), never attached.
    pub const SCHED_SWITCH_WALK: &str = "sched_switch_walk";
    pub const SCHED_SWITCH_FINISH: &str = "sched_switch_finish";
    pub const SYS_EXIT_WALK: &str = "sys_exit_walk";
    pub const SYS_EXIT_FINISH: &str = "sys_exit_finish";
    pub const TASK_NEWTASK: &str = "task_newtask";
    pub const SYS_ENTER: &str = "sys_enter";
    pub const SYS_EXIT: &str = "sys_exit";
    pub const SCHED_WAKEUP: &str = "sched_wakeup";
    pub const ONCPU: &str = "oncpu";
    pub const CONTENTION_BEGIN: &str = "contention_begin";
    pub const CONTENTION_END: &str = "contention_end";
    pub const SPAN_ENTER: &str = "span_enter";
    pub const GO_GC: &str = "go_gc";
    pub const SPAN_EXIT: &str = "span_exit";
    /// Go spans: an entry past the stack check, and a plain uprobe on each `RET`.
    pub const SPAN_ENTER_GO: &str = "span_enter_go";
    pub const SPAN_EXIT_GO: &str = "span_exit_go";
    pub const GO_SCHED: &str = "go_sched";
    /// `runtime.ready`, apart: it walks the waker's stack.
    pub const GO_READY: &str = "go_ready";
    /// Empty programs on the same attach points, in the floor's own object (`switchyard floor`).
    pub const FLOOR_SYS_ENTER: &str = "floor_sys_enter";
    pub const FLOOR_SYS_EXIT: &str = "floor_sys_exit";
    pub const FLOOR_SCHED_SWITCH: &str = "floor_sched_switch";
    /// The switch floor reading the clock once, kept per CPU.
    pub const FLOOR_SWITCH_CLOCK: &str = "floor_switch_clock";
    /// The switch floor finding both threads' entries, in an array by tid or in task storage.
    pub const FLOOR_SWITCH_ARRAY: &str = "floor_switch_array";
    pub const FLOOR_SWITCH_TASK_STORAGE: &str = "floor_switch_task_storage";
    /// Every program of the floor's object.
    pub const FLOOR_ALL: &[&str] = &[
        FLOOR_SYS_ENTER,
        FLOOR_SYS_EXIT,
        FLOOR_SCHED_SWITCH,
        FLOOR_SWITCH_CLOCK,
        FLOOR_SWITCH_ARRAY,
        FLOOR_SWITCH_TASK_STORAGE,
    ];
}

/// Indexes of the `DROPS` array: every event the kernel side could not record.
pub mod drops {
    /// Two threads whose tids share an `INFLIGHT` slot were in syscalls at once (only when
    /// pid_max exceeds the array): a syscall's latency (and count) was lost.
    pub const INFLIGHT_FULL: u32 = 0;
    /// `THREAD_SPILL` was full (its slot in `THREADS` held by another): a thread's switches
    /// were lost.
    pub const THREADS_FULL: u32 = 1;
    /// A syscall number at or above `MAX_SYSCALLS`.
    pub const SYSCALL_NR: u32 = 2;
    /// `ERRNOS` was full: an error was counted but its errno lost.
    pub const ERRNOS_FULL: u32 = 3;
    /// `TARGETS` was full: a forked child process is not followed.
    pub const TARGETS_FULL: u32 = 4;
    /// A stack was lost: the stack map was full or two stacks hashed alike.
    pub const STACK_COLLISION: u32 = 5;
    /// A user stack could not be taken at all (no user registers: a kernel thread).
    pub const USER_STACK_MISSING: u32 = 6;
    /// A kernel stack could not be walked.
    pub const KERNEL_STACK_MISSING: u32 = 7;
    /// A stack-keyed map was full: an off-CPU, wakeup, on-CPU or syscall stack was lost.
    pub const STACK_KEYS_FULL: u32 = 8;
    /// The GC event ring buffer was full: an event's timestamp was lost (it is still counted).
    pub const GC_EVENTS_FULL: u32 = 9;
    /// A user stack ended early at a pc with no call-frame information, where the
    /// frame-pointer fallback found no frame either.
    pub const UNWIND_NO_CFI: u32 = 10;
    /// A user stack ended early in an object whose unwind table did not fit the table map.
    pub const UNWIND_TABLE_FULL: u32 = 11;
    /// A user stack was cut at the depth limit ([`crate::unwind::MAX_FRAMES`]).
    pub const UNWIND_DEPTH: u32 = 12;
    /// A user stack ended early: a return address or saved register could not be read.
    pub const UNWIND_UNREADABLE: u32 = 13;
    /// A thread switched out with no switch-in reported since its last switch-out: the
    /// kernel does not report every switch. It is taken to have come back at its CPU's last
    /// reported switch.
    pub const SWITCH_IN_MISSED: u32 = 14;
    /// A thread switched in with no switch-out reported since its last switch-in: it is
    /// taken to have left the CPU at once, runnable.
    pub const SWITCH_OUT_MISSED: u32 = 15;
    /// The timeline ring buffer was full: an event of `--timeline` was lost (the aggregate
    /// figures still count it).
    pub const TIMELINE_FULL: u32 = 16;
    /// The span instance ring buffer was full: a slow or sampled instance's anatomy was lost
    /// (its duration is still in the span's histogram).
    pub const SPAN_EVENTS_FULL: u32 = 17;
    pub const COUNT: u32 = 18;
    /// Human names, indexed like the array.
    pub const NAMES: [&str; COUNT as usize] = [
        "syscalls lost (in-flight slot shared by two threads; pid_max above the array size)",
        "threads lost (thread spill map full)",
        "syscalls with a number out of range",
        "errnos lost (errno map full)",
        "child processes not followed (target map full)",
        "stacks lost to stack map collisions (raise --stack-map-size)",
        "user stacks missing (no user registers)",
        "kernel stacks missing",
        "stack samples lost (stack-keyed map full)",
        "Go GC event timestamps lost (ring buffer full; counts are exact)",
        "user stacks cut short: no unwind info for a pc, and no frame pointer",
        "user stacks cut short: the object's unwind table did not fit (raise --unwind-rows)",
        "user stacks cut short at the depth limit",
        "user stacks cut short: unreadable stack memory",
        "switch-ins the kernel did not report (timed from the CPU's last reported switch)",
        "switch-outs the kernel did not report (timed as runnable from the switch-in)",
        "timeline events lost (ring buffer full; raise --timeline-buffer)",
        "span instances lost (ring buffer full; their durations are still counted)",
    ];
}

/// Unwinding user stacks in the kernel side from compact unwind tables built from each
/// object's `.eh_frame` / `.debug_frame` (x86-64: only the CFA, the return address at CFA-8
/// and the caller's rbp are tracked, which is all a walk needs).
pub mod unwind {
    /// `UNWIND_MODE`: frame pointers only (the kernel's own walker).
    pub const MODE_FP: u8 = 0;
    /// `UNWIND_MODE`: call-frame information, frame pointers where a pc has none.
    pub const MODE_CFI: u8 = 1;
    /// Frames kept per user stack.
    pub const MAX_FRAMES: usize = 126;
    /// Code mappings kept per process.
    pub const MAX_MAPPINGS: u32 = 256;
    /// Processes with unwind tables at once (more fall back to frame pointers); `MAPPINGS`
    /// holds two slots for each.
    pub const MAX_PROCS: u32 = 64;
    /// Binary-search steps over one process's mappings.
    pub const MAPPING_SEARCH_STEPS: u32 = 9;
    /// Scratch slots, one per kind of program context that may interrupt another on a CPU
    /// (tracepoints, raw tracepoints, perf events, uprobes).
    pub const SLOTS: u32 = 4;
    pub const SLOT_TRACEPOINT: u32 = 0;
    pub const SLOT_RAW_TRACEPOINT: u32 = 1;
    pub const SLOT_PERF_EVENT: u32 = 2;
    /// The Go scheduler's uprobes (where a goroutine parks).
    pub const SLOT_UPROBE: u32 = 3;
    /// Binary-search steps over one object's rows (tables up to 2^24 rows).
    pub const ROW_SEARCH_STEPS: u32 = 24;

    /// `UnwindRow::kind`, bits 0-1: how the CFA is computed.
    pub const CFA_MASK: u8 = 0b11;
    /// No CFI covers this pc (a gap between functions).
    pub const CFA_NONE: u8 = 0;
    /// CFA = rsp + offset.
    pub const CFA_RSP: u8 = 1;
    /// CFA = rbp + offset.
    pub const CFA_RBP: u8 = 2;
    /// A PLT entry's expression: CFA = rsp + offset + (8 if (pc & 15) >= 11).
    pub const CFA_PLT: u8 = 3;
    /// The return address is undefined: the outermost frame (`_start`, a thread's start).
    pub const END: u8 = 1 << 2;
    /// The caller's rbp was saved at CFA + `rbp_offset` * 8.
    pub const RBP_SAVED: u8 = 1 << 3;
    /// `cfa_offset` is in units of 8 bytes (a frame larger than 32 KiB).
    pub const CFA_SCALED: u8 = 1 << 4;
    /// `UnwindMapping::first_row` of an object whose table did not fit.
    pub const TABLE_FULL: u32 = u32::MAX;
    /// `UnwindMapping::first_row` of an object whose table could not be built (unreadable,
    /// not ELF, malformed CFI).
    pub const NO_TABLE: u32 = u32::MAX - 1;
    /// `UserStack::len` flag: the walk reached the outermost frame (an undefined return
    /// address, or the end of a frame-pointer chain where those are the only unwind info).
    pub const COMPLETE: u64 = 1 << 63;

    /// `RETPROBE_OFFSETS` indices. A return probe replaces the return address with the
    /// address of the kernel's trampoline (`task_struct.mm->uprobes_state.xol_area->vaddr`)
    /// and keeps the original in a `struct return_instance` (`task_struct.utask->
    /// return_instances`, newest first, linked by `next`; `stack` is the address of the
    /// replaced slot).
    pub const RP_TASK_UTASK: usize = 0;
    pub const RP_TASK_MM: usize = 1;
    /// `mm_struct.uprobes_state.xol_area`.
    pub const RP_MM_XOL_AREA: usize = 2;
    pub const RP_XOL_VADDR: usize = 3;
    pub const RP_UTASK_RETURN_INSTANCES: usize = 4;
    pub const RP_RI_STACK: usize = 5;
    pub const RP_RI_ORIG_RET_VADDR: usize = 6;
    pub const RP_RI_NEXT: usize = 7;
    pub const RETPROBE_FIELDS: usize = 8;
    /// Return instances looked through for one replaced return address.
    pub const MAX_RETURN_INSTANCES: u32 = 8;
}

/// One row of a compact unwind table: from `pc` (relative to the mapping's `bias`) up to the
/// next row's pc, how to find the caller.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct UnwindRow {
    pub pc: u32,
    pub cfa_offset: i16,
    /// In units of 8 bytes.
    pub rbp_offset: i8,
    /// `unwind::CFA_*` | `END` | `RBP_SAVED` | `CFA_SCALED`.
    pub kind: u8,
}
const _: () = assert!(core::mem::size_of::<UnwindRow>() == 8);

/// One executable mapping of a process: `[start, end)`, its table's rows
/// `[first_row, first_row + rows)` in `UNWIND_ROWS`, and the bias that turns a pc into a row pc.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct UnwindMapping {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    /// `unwind::TABLE_FULL` or `NO_TABLE` when the object's table is not loaded.
    pub first_row: u32,
    /// 0: the object has no CFI (Go, JIT stubs): frame pointers are walked there.
    pub rows: u32,
}
const _: () = assert!(core::mem::size_of::<UnwindMapping>() == 32);

/// Where a process's mappings sit in `MAPPINGS`: `[slot * MAX_MAPPINGS, + count)`. Each process
/// has two slots; user space writes the idle one and then points here at it, so a walk never
/// reads a list being rewritten.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct UnwindProc {
    pub slot: u32,
    pub count: u32,
}
const _: () = assert!(core::mem::size_of::<UnwindProc>() == 8);

/// CPython frames in user stacks: after a stack's native frames (leaf first) come the
/// Python frames of the thread (innermost first), each one word:
/// `TAG | ENTRY? | lasti << LASTI_SHIFT | code address`.
pub mod python {
    /// Marks a Python frame (native return addresses are user addresses, below 2^47).
    pub const TAG: u64 = 1 << 63;
    /// The outermost Python frame run by one `_PyEval_EvalFrameDefault` call.
    pub const ENTRY: u64 = 1 << 62;
    /// The index of the frame's current instruction (code units), capped at `LASTI_MAX`.
    pub const LASTI_SHIFT: u32 = 47;
    pub const LASTI_MAX: u64 = (1 << 15) - 1;
    pub const CODE_MASK: u64 = (1 << 47) - 1;
    /// The code field's low bits: the generation of the code object at that address. Code
    /// objects are 8-byte aligned, so these bits of the address are free; an interpreter that
    /// frees a code object and puts another at its address gives the next generation, and
    /// `PY_CODES` a copy of each, so a stack names the code object it held, not the first
    /// one seen there.
    pub const GEN_MASK: u64 = 7;
    /// Python frames kept per stack, at most (fewer when the native frames leave less room).
    pub const MAX_FRAMES: u32 = 64;
    /// Threads of one interpreter searched for the current one.
    pub const MAX_THREADS: u32 = 64;
    /// Bytes kept of a code object's qualified name, file name and line table.
    pub const NAME_LEN: usize = 64;
    pub const FILE_LEN: usize = 128;
    pub const LINETABLE_LEN: usize = 1024;
    /// `PyProc::entry_mode`: 3.11 marks an entry frame with a byte (`is_entry`).
    pub const ENTRY_FLAG: u8 = 0;
    /// `PyProc::entry_mode`: 3.12+ push a shim frame owned by the C stack below the entry
    /// frame (`owner == FRAME_OWNED_BY_CSTACK`).
    pub const ENTRY_SHIM: u8 = 1;
    pub const FRAME_OWNED_BY_CSTACK: u8 = 3;
    /// `PyProc::cframe_frame` when the thread state points at the frame itself (3.13+).
    pub const NO_CFRAME: u16 = u16::MAX;
    /// `PyCode::name_kind` and `file_kind`: the string was ASCII and is kept; otherwise it
    /// was not read (0).
    pub const ASCII: u8 = 1;
}

/// Where one Python process's interpreter state lives, and the layout of its version's
/// structures (offsets in bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PyProc {
    /// The address of `_PyRuntime.interpreters.head`.
    pub interp_head: u64,
    pub interp_threads_head: u16,
    pub tstate_next: u16,
    pub tstate_native_tid: u16,
    /// `PyThreadState.cframe` (3.11, 3.12) or `.current_frame` (3.13+).
    pub tstate_frame: u16,
    /// `_PyCFrame.current_frame`, or [`python::NO_CFRAME`].
    pub cframe_frame: u16,
    pub frame_code: u16,
    pub frame_previous: u16,
    pub frame_instr: u16,
    /// `is_entry` (3.11) or `owner` (3.12+), by `entry_mode`.
    pub frame_entry: u16,
    pub code_qualname: u16,
    pub code_filename: u16,
    pub code_firstlineno: u16,
    pub code_linetable: u16,
    pub code_adaptive: u16,
    pub unicode_state: u16,
    pub unicode_ascii_data: u16,
    pub bytes_size: u16,
    pub bytes_data: u16,
    pub entry_mode: u8,
    /// 3.12+: `prev_instr`/`instr_ptr` is the instruction being run (3.13's points past it).
    pub instr_is_next: u8,
    pub version_minor: u16,
}
const _: () = assert!(core::mem::size_of::<PyProc>() == 48);

/// `PY_CODES`' key: code addresses are per process.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PyCodeKey {
    pub code: u64,
    pub tgid: u32,
    pub _pad: u32,
}

/// A code object as the kernel side copies it: NUL-padded names and its line table.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PyCode {
    pub firstlineno: u32,
    /// Bytes of `linetable` that are the code's (the rest is padding or was not read).
    pub linetable_len: u32,
    pub name_kind: u8,
    pub file_kind: u8,
    pub _pad: [u8; 6],
    pub name: [u8; python::NAME_LEN],
    pub file: [u8; python::FILE_LEN],
    pub linetable: [u8; python::LINETABLE_LEN],
}
const _: () = assert!(
    core::mem::size_of::<PyCode>()
        == 16 + python::NAME_LEN + python::FILE_LEN + python::LINETABLE_LEN
);

/// A user stack as the kernel side keeps it: return addresses, leaf first.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UserStack {
    /// The full 64-bit hash of the frames (the id is its low 31 bits): tells a collision.
    pub hash: u64,
    /// Frames, with [`unwind::COMPLETE`] set when the walk reached the outermost frame.
    pub len: u64,
    pub frames: [u64; unwind::MAX_FRAMES],
}
const _: () = assert!(core::mem::size_of::<UserStack>() == 16 + 8 * unwind::MAX_FRAMES);

/// Map sizes.
pub const MAX_STACK_KEYS: u32 = 65536;
pub const MAX_TARGETS: u32 = 1024;
pub const MAX_THREADS: u32 = 16384;
pub const MAX_SYSCALLS: u32 = 512;
/// `exit` and `exit_group` (x86_64): they never return, so they are counted at entry and
/// never timed.
pub const NR_EXIT: u32 = 60;
pub const NR_EXIT_GROUP: u32 = 231;
pub const MAX_ERRNOS: u32 = 4096;
/// `INFLIGHT` covers pid_max up to this many slots (24 bytes each).
pub const MAX_INFLIGHT: u32 = 1 << 20;
/// `THREADS` covers pid_max up to this many slots (944 bytes each: 29.5 MiB at most); beyond,
/// threads whose slots clash spill into `THREAD_SPILL`.
pub const MAX_THREAD_SLOTS: u32 = 1 << 15;

/// Log2 histogram buckets: bucket `i` holds values in `[2^i, 2^(i+1))` nanoseconds (bucket 0
/// also holds 0); the last bucket is open-ended (2^39 ns ≈ 9 minutes).
pub const HIST_BUCKETS: usize = 40;

/// Bucket index for a value, as both sides compute it.
#[inline(always)]
pub fn log2_bucket(v: u64) -> usize {
    // Branch-light integer log2 the verifier accepts (no loops).
    let mut v = v;
    let mut r = 0usize;
    if v >= 1 << 32 {
        v >>= 32;
        r += 32;
    }
    if v >= 1 << 16 {
        v >>= 16;
        r += 16;
    }
    if v >= 1 << 8 {
        v >>= 8;
        r += 8;
    }
    if v >= 1 << 4 {
        v >>= 4;
        r += 4;
    }
    if v >= 1 << 2 {
        v >>= 2;
        r += 2;
    }
    if v >= 1 << 1 {
        r += 1;
    }
    if r >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        r
    }
}

/// Adds one duration to a count, a total, a maximum and a log2 histogram (the kernel side's
/// syscall and wait statistics share this update). The duration stands for `weight` of its
/// kind in the total and the histogram (1 but for a sampled syscall: 1 over its chance of
/// being timed); the count counts it once.
#[inline(always)]
pub fn add_timing(
    count: &mut u64,
    total_ns: &mut u64,
    max_ns: &mut u64,
    hist: &mut [u64; HIST_BUCKETS],
    ns: u64,
    weight: u64,
) {
    *count += 1;
    *total_ns += ns * weight;
    if ns > *max_ns {
        *max_ns = ns;
    }
    let b = log2_bucket(ns);
    if b < HIST_BUCKETS {
        hist[b] += weight;
    }
}

/// A thread's syscall-timing budget period, ns: its budget of timed calls is given afresh
/// each period.
pub const SYSCALL_BUDGET_PERIOD_NS: u64 = 100_000_000;

/// Per syscall number: aggregated in a per-CPU array, summed in user space.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SyscallStats {
    /// Every call (exact).
    pub count: u64,
    pub errors: u64,
    /// The calls that were timed: all of `count` unless timing is sampled. The maximum is
    /// theirs.
    pub timed: u64,
    /// The timed calls' weights summed: each stands for 1 over the chance it had of being
    /// timed, so this estimates `count`. The total and the histogram are weighted alike.
    pub weighted: u64,
    /// Of `timed`, the calls timed by a draw, beyond their thread's budget.
    pub drawn: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    pub hist: [u64; HIST_BUCKETS],
}
const _: () = assert!(core::mem::size_of::<SyscallStats>() == 56 + 8 * HIST_BUCKETS);

impl SyscallStats {
    /// Nothing counted yet: where sums over CPUs start.
    pub const ZERO: SyscallStats = SyscallStats {
        count: 0,
        errors: 0,
        timed: 0,
        weighted: 0,
        drawn: 0,
        total_ns: 0,
        max_ns: 0,
        hist: [0; HIST_BUCKETS],
    };

    /// One timed call's duration, of `weight` (1 over its chance of being timed), into the
    /// weighted total and histogram and the maximum (not into `count`).
    #[inline(always)]
    pub fn time(&mut self, ns: u64, weight: u64) {
        add_timing(
            &mut self.timed,
            &mut self.total_ns,
            &mut self.max_ns,
            &mut self.hist,
            ns,
            weight,
        );
        self.weighted += weight;
        if weight > 1 {
            self.drawn += 1;
        }
    }
}

/// The syscall a thread is inside, keyed by tid.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    /// `bpf_get_current_pid_tgid()` at entry, so a reused tid cannot match a stale entry.
    pub pid_tgid: u64,
    /// Entry time (CLOCK_MONOTONIC ns); [`InFlight::UNTIMED`] for a call not timed; 0 once
    /// the exit has been accounted.
    pub ts: u64,
    pub nr: u64,
    /// For futex waits: the futex word's address, and the user stack id at entry.
    pub uaddr: u64,
    pub user_stack: i32,
    /// 1 when this syscall is a futex wait.
    pub futex_wait: u32,
    /// 1 when the thread's off-CPU stacks wait for its user stack at this syscall's exit.
    pub offcpu_pending: u32,
    /// The thread's syscalls left until the next one is timed (`--syscall-latency N`, N > 1).
    pub untimed_left: u32,
    /// The weight of the call in flight, if timed: 1 over the chance it had of being timed.
    pub weight: u32,
    /// Timed calls the thread has left in its budget period (see `SYSCALL_TIME_BUDGET`).
    pub budget_left: u32,
    /// When the thread's budget period began (CLOCK_MONOTONIC ns).
    pub budget_from: u64,
    /// The tick (jiffies) of the thread's last look at its budget period.
    pub budget_tick: u64,
}
const _: () = assert!(core::mem::size_of::<InFlight>() == 72);

impl InFlight {
    /// `ts` of a syscall in flight that is counted but not timed.
    pub const UNTIMED: u64 = 1;
}

/// Futex waits by address and user stack.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FutexKey {
    pub tgid: u32,
    pub user_stack: i32,
    pub uaddr: u64,
}
const _: () = assert!(core::mem::size_of::<FutexKey>() == 16);

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FutexStats {
    pub count: u64,
    pub total_ns: u64,
}
const _: () = assert!(core::mem::size_of::<FutexStats>() == 16);

/// A log2 histogram with its count and total, for futex waits, kernel lock contention and
/// each uprobe span.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WaitStats {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Futex waits: returned ETIMEDOUT; contention: lock not taken (ret != 0).
    pub timeouts: u64,
    /// Futex waits: returned EAGAIN (the word had changed: no wait).
    pub eagain: u64,
    pub hist: [u64; HIST_BUCKETS],
}
const _: () = assert!(core::mem::size_of::<WaitStats>() == 40 + 8 * HIST_BUCKETS);

impl WaitStats {
    /// Nothing counted yet: where sums over CPUs start.
    pub const ZERO: WaitStats = WaitStats {
        count: 0,
        total_ns: 0,
        max_ns: 0,
        timeouts: 0,
        eagain: 0,
        hist: [0; HIST_BUCKETS],
    };
}

/// `add(ns)` on the statistics that time something: one duration into count, total, maximum
/// and histogram.
macro_rules! timed {
    ($($t:ty),*) => {$(
        impl $t {
            #[inline(always)]
            pub fn add(&mut self, ns: u64) {
                add_timing(
                    &mut self.count,
                    &mut self.total_ns,
                    &mut self.max_ns,
                    &mut self.hist,
                    ns,
                    1,
                );
            }
        }
    )*};
}
timed!(WaitStats);

/// Go runtime GC events, entry-only uprobes (return probes crash Go: it moves stacks). The
/// uprobe's cookie is the kind.
pub mod gc {
    /// `runtime.gcStart`: a goroutine asks for a GC cycle (several may, for one cycle).
    pub const START: u32 = 0;
    /// `runtime.gcMarkTermination`: once per completed cycle.
    pub const MARK_TERMINATION: u32 = 1;
    /// `runtime.stopTheWorldWithSema`: the world stops.
    pub const STOP_THE_WORLD: u32 = 2;
    /// `runtime.startTheWorldWithSema`: the world restarts.
    pub const START_THE_WORLD: u32 = 3;
    /// `runtime.gcMarkDone`: a worker thinks marking is done.
    pub const MARK_DONE: u32 = 4;
    /// `runtime.gcAssistAlloc`: an allocating goroutine is drafted into marking.
    pub const MARK_ASSIST: u32 = 5;
    pub const KINDS: u32 = 6;
    /// (kind, symbol) in kind order.
    pub const SYMBOLS: [(u32, &str); KINDS as usize] = [
        (START, "runtime.gcStart"),
        (MARK_TERMINATION, "runtime.gcMarkTermination"),
        (STOP_THE_WORLD, "runtime.stopTheWorldWithSema"),
        (START_THE_WORLD, "runtime.startTheWorldWithSema"),
        (MARK_DONE, "runtime.gcMarkDone"),
        (MARK_ASSIST, "runtime.gcAssistAlloc"),
    ];
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GcEvent {
    /// CLOCK_MONOTONIC ns.
    pub ts: u64,
    pub kind: u32,
    pub tid: u32,
}
const _: () = assert!(core::mem::size_of::<GcEvent>() == 16);

/// One event of the timeline (`--timeline`); what `a`, `b` and `value` hold depends on `kind`
/// (see [`timeline`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimelineEvent {
    /// CLOCK_MONOTONIC ns.
    pub ts: u64,
    pub value: u64,
    pub tid: u32,
    pub kind: u32,
    pub a: u32,
    pub b: u32,
    pub c: u32,
    pub cpu: u32,
}
const _: () = assert!(core::mem::size_of::<TimelineEvent>() == 40);

/// Timeline event kinds, and what each carries.
pub mod timeline {
    /// `tid` left the CPU at `ts`: `a`, its state as `sched_switch` reports it (`tp::*`);
    /// `b`, the syscall it is inside plus one (0: none); `c`, its tgid.
    pub const SWITCH_OUT: u32 = 0;
    /// `tid` runs again at `ts`; `c`, its tgid.
    pub const SWITCH_IN: u32 = 1;
    /// `tid` was woken at `ts` by thread `a` of process `b`.
    pub const WAKEUP: u32 = 2;
    /// `tid` was inside syscall `a` from `ts` for `value` ns, returning `b` (as i32).
    pub const SYSCALL: u32 = 3;
    /// `tid` waited on a futex from `ts` for `value` ns.
    pub const FUTEX: u32 = 4;
    /// `tid` was sampled on CPU at `ts`: user stack `a`, kernel stack `b` (as i32 ids);
    /// `c`, its tgid.
    pub const ONCPU: u32 = 5;
    /// An off-CPU interval of `tid` ending about `ts`, walked with weight `value` ns: user
    /// stack `a`, kernel stack `b`, state `c` (as `SWITCH_OUT`'s `a`).
    pub const OFFCPU: u32 = 6;
    pub const KINDS: u32 = 7;
}

/// Uprobe spans: at most this many symbols per recording.
pub const MAX_SPANS: u32 = 8;
/// `SPAN_CTL`'s words per span: the slow threshold, the typical draw, the kept table's floor.
pub const SPAN_CTL_WORDS: u32 = 3;

/// A span's duration histogram: log-linear, [`SPAN_SUB_BITS`] bits below each power of two
/// (a bucket is at most 1/64 of its value wide), from 1 ns to 2^40 ns.
pub const SPAN_SUB_BITS: u32 = 6;
pub const SPAN_HIST_BUCKETS: usize = (HIST_BUCKETS - SPAN_SUB_BITS as usize + 1) * 64;

/// The span histogram's bucket for a duration of `v` ns, as both sides compute it.
#[inline(always)]
pub fn span_bucket(v: u64) -> usize {
    if v < 1 << (SPAN_SUB_BITS + 1) {
        return v as usize;
    }
    let e = log2_bucket(v) as u32;
    let shift = e - SPAN_SUB_BITS;
    let b = ((shift as u64) << SPAN_SUB_BITS) + (v >> shift);
    if b as usize >= SPAN_HIST_BUCKETS {
        SPAN_HIST_BUCKETS - 1
    } else {
        b as usize
    }
}

/// The smallest duration (ns) that falls in bucket `b` ([`span_bucket`]'s inverse).
pub fn span_bucket_low(b: usize) -> u64 {
    let sub = 1usize << SPAN_SUB_BITS;
    if b < 2 * sub {
        return b as u64;
    }
    let shift = (b / sub - 1) as u32;
    ((b % sub + sub) as u64) << shift
}

/// Every instance of one span, on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SpanHist {
    pub count: u64,
    pub total_ns: u64,
    /// The longest instance.
    pub max_ns: u64,
    /// Slow instances faster than every one kept, once the table of kept ones was full:
    /// counted here, not sent.
    pub passed_over: u64,
    /// Returns with no entry seen since the start (open when the recording started).
    pub open_at_start: u64,
    /// Entries while a span was open on the thread (nested or recursive): the outermost
    /// instance counts, these are only counted.
    pub nested: u64,
    /// Go instances whose return was never seen (a later call on the goroutine began at the
    /// same stack depth or above, or returned from above it): dropped, not timed.
    pub missed: u64,
    pub buckets: [u64; SPAN_HIST_BUCKETS],
}

impl SpanHist {
    /// The durations as the figures count every timed thing (count, total, longest and log2
    /// histogram), so that a span needs no second histogram in the kernel: each bucket lies
    /// within one power of two.
    pub fn wait_stats(&self) -> WaitStats {
        let mut w = WaitStats::ZERO;
        w.count = self.count;
        w.total_ns = self.total_ns;
        w.max_ns = self.max_ns;
        for (b, &n) in self.buckets.iter().enumerate() {
            if n != 0 {
                let log2 = log2_bucket(span_bucket_low(b));
                if let Some(slot) = w.hist.get_mut(log2) {
                    *slot += n;
                }
            }
        }
        w
    }
}

/// Blocked parts, CPU holders and on-CPU sites kept per span instance.
pub const SPAN_PARTS: usize = 6;
pub const SPAN_HOLDERS: usize = 2;
pub const SPAN_SITES: usize = 4;

/// Time a span instance was blocked with one kernel stack and one waker.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanPart {
    pub ns: u64,
    /// The intervals, and the part of them the waker (a target thread) was itself off CPU.
    pub count: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    /// `prev_state` as the switch program reports it.
    pub state: u32,
    pub waker_tgid: u32,
    pub waker_tid: u32,
    pub waker_user_stack: i32,
    pub waker_kernel_stack: i32,
    /// What the waker did while the span waited, as [`HeldKey`] has it: its own last
    /// interval off CPU within the wait (`held_ns`, its state and user stack).
    pub held_ns: u64,
    pub held_state: u32,
    pub held_user_stack: i32,
}
const _: () = assert!(core::mem::size_of::<SpanPart>() == 56);

/// Time a span instance waited for a CPU another task held.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanHolder {
    pub ns: u64,
    pub tgid: u32,
    pub tid: u32,
    pub comm: [u64; 2],
}
const _: () = assert!(core::mem::size_of::<SpanHolder>() == 32);

/// On-CPU samples of a span instance with one user stack.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpanSite {
    pub samples: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    pub _pad: u32,
}

/// `SpanInstance::flags`.
pub mod span_flags {
    /// At least as slow as the span's threshold when it returned.
    pub const SLOW: u32 = 1;
    /// A typical instance, sampled.
    pub const TYPICAL: u32 = 2;
    /// A Go span, keyed by its goroutine: its time on threads is theirs while it ran there,
    /// its time off them is in `go`.
    pub const GO: u32 = 8;
    /// Entered before the recording started: not counted.
    pub const OPEN_AT_START: u32 = 4;
}

/// One span instance: kept in its thread's entry while open (`index` is the span plus one
/// then), sent whole through `SPAN_EVENTS` when it returns slow or is sampled. Times in ns.
///
/// While open, `oncpu_ns`, `blocked_ns` and `runqueue_ns` hold the thread's own counters at
/// the entry; at the return they become the instance's parts.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SpanInstance {
    pub index: u32,
    pub flags: u32,
    pub tgid: u32,
    pub tid: u32,
    /// Entries since this instance's, not yet returned (nested or recursive).
    pub depth: u32,
    /// The part whose user stack is taken where its syscall returns, plus one (0: none).
    pub pending_part: u32,
    pub start: u64,
    pub end: u64,
    /// Go: the instance's stack depth at its entry, from the goroutine's stack top (stable
    /// when the stack is copied): its own return is at that depth, nested calls' deeper.
    pub depth_bytes: u64,
    pub oncpu_ns: u64,
    pub blocked_ns: u64,
    pub runqueue_ns: u64,
    /// Blocked time in parts that did not fit `parts`, and CPU waits beyond `holders`.
    pub other_blocked_ns: u64,
    pub other_held_ns: u64,
    pub samples: u32,
    /// The thread it returned on (a Go span's goroutine may move between threads).
    pub end_tid: u32,
    /// Slots in use while open: `parts` in bits 0-7, `holders` 8-15, `sites` 16-23. A slot
    /// past its count holds an earlier instance's data: the entry clears only this word (a
    /// few cache lines fewer per call), and the return clears the rest of an instance sent.
    pub used: u32,
    pub _pad: u32,
    pub parts: [SpanPart; SPAN_PARTS],
    pub holders: [SpanHolder; SPAN_HOLDERS],
    pub sites: [SpanSite; SPAN_SITES],
    /// Go: its goroutine's time on no thread, runnable (waiting in the Go scheduler) and
    /// parked by wait reason, and its GC assists' time on CPU (part of `oncpu_ns`). As the
    /// thread counters, they hold the goroutine's totals while open ([`GoTrack`]).
    pub go: GoTime,
}
const _: () = assert!(
    core::mem::size_of::<SpanInstance>()
        == 24
            + 8 * 8
            + 8
            + 8
            + 56 * SPAN_PARTS
            + 32 * SPAN_HOLDERS
            + 16 * SPAN_SITES
            + core::mem::size_of::<GoTime>()
);

/// Wait reasons a goroutine's time parked is kept by; the rest is summed.
pub const GO_PARK_SLOTS: usize = 6;

/// Time a goroutine was parked with one wait reason (Go's `waitReason`, whose names the
/// binary's `runtime.waitReasonStrings` holds; [`go_sched::PREEMPTED`] for a goroutine
/// suspended by the GC to scan its stack).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GoPark {
    /// The reason plus one (0: a free slot).
    pub reason: u32,
    pub count: u32,
    pub ns: u64,
    /// Of the slot's first park: the goroutine's user stack where it parked (-1: not taken).
    pub user_stack: i32,
    /// Of the slot's longest park whose waker was seen: the thread that made the goroutine
    /// ready, and its user stack there (through `runtime.systemstack`, the waking
    /// goroutine's; -1: not taken).
    pub waker_tid: u32,
    pub waker_stack: i32,
    pub _pad: u32,
    pub longest_ns: u64,
}

/// A goroutine's (or a Go span instance's) time beyond its threads' counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GoTime {
    pub sched_ns: u64,
    /// In GC assists: on CPU, and waiting for a CPU (the runtime's own assist time is both).
    pub assist_ns: u64,
    pub assist_runqueue_ns: u64,
    pub other_parked_ns: u64,
    pub parked: [GoPark; GO_PARK_SLOTS],
}
const _: () = assert!(core::mem::size_of::<GoTime>() == 32 + 40 * GO_PARK_SLOTS);

/// A goroutine with a Go span open, followed from thread to thread (`GO_TRACKS`, by its g).
/// Its time on threads is the threads' counters (on CPU, blocked, waiting for a CPU) while it
/// ran there; off them, it is runnable (the Go scheduler) or parked.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GoTrack {
    /// Instances open on it.
    pub open: u32,
    /// The thread it runs on; 0 while off every thread.
    pub tid: u32,
    /// [`go_sched::ON`], [`go_sched::RUNNABLE`] or [`go_sched::PARKED`].
    pub state: u32,
    /// The reason of its last park, plus one.
    pub reason: u32,
    /// Its thread's counters (on CPU, blocked, waiting for a CPU) when it came on it.
    pub base: [u64; 3],
    /// Its time on threads before that.
    pub acc: [u64; 3],
    /// When it left its thread, or was made runnable after a park.
    pub off_at: u64,
    /// In a GC assist: its time on CPU at the assist's entry, plus one (0: not in one), and
    /// its time waiting for a CPU.
    pub assist_from: u64,
    pub assist_runqueue_from: u64,
    /// Of the park in progress: the user stack it parked at.
    pub park_stack: i32,
    pub _pad: u32,
    pub time: GoTime,
}

/// The Go scheduler's probes (`go_sched`'s cookie) and a goroutine's states in [`GoTrack`].
pub mod go_sched {
    /// `runtime.execute(gp)`: gp runs on this thread.
    pub const EXECUTE: u32 = 0;
    /// `runtime.gopark`: the running goroutine parks, its wait reason in the third argument.
    pub const PARK: u32 = 1;
    /// `runtime.goschedImpl(gp)`, `runtime.goyield_m(gp)`, `runtime.exitsyscallNoP(gp)`
    /// (`exitsyscall0` before Go 1.26): gp leaves its thread runnable (yielded, preempted, or
    /// back from a syscall with no P).
    pub const YIELD: u32 = 2;
    /// `runtime.preemptPark(gp)`: gp is suspended for the GC to scan its stack.
    pub const PREEMPT_PARK: u32 = 3;
    /// `runtime.ready(gp)`: a parked gp is made runnable.
    pub const READY: u32 = 4;
    /// `runtime.gcAssistAlloc`'s body and its `RET`s, on the assisting goroutine.
    pub const ASSIST_ENTRY: u32 = 5;
    pub const ASSIST_RETURN: u32 = 6;
    /// (cookie, symbol); the assist's are placed by the loader.
    pub const SYMBOLS: [(u32, &str); 8] = [
        (EXECUTE, "runtime.execute"),
        (PARK, "runtime.gopark"),
        (YIELD, "runtime.goschedImpl"),
        (YIELD, "runtime.goyield_m"),
        (YIELD, "runtime.exitsyscallNoP"),
        (YIELD, "runtime.exitsyscall0"),
        (PREEMPT_PARK, "runtime.preemptPark"),
        (READY, "runtime.ready"),
    ];
    pub const ASSIST: &str = "runtime.gcAssistAlloc";

    pub const ON: u32 = 0;
    pub const RUNNABLE: u32 = 1;
    pub const PARKED: u32 = 2;
    /// The reason [`PREEMPT_PARK`] parks with (Go's own are below 256).
    pub const PREEMPTED: u32 = 1000;
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrnoKey {
    pub nr: u32,
    pub errno: u32,
}
const _: () = assert!(core::mem::size_of::<ErrnoKey>() == 8);

/// Per thread: context switches and on/off-CPU time.
///
/// A switch is involuntary when the thread was preempted or still runnable (`prev_state` is 0
/// or carries the preempt flag), as the kernel's own `nivcsw` counts it; otherwise voluntary.
/// Off-CPU time after an involuntary switch is run-queue wait, after a voluntary one it is
/// blocked time; both go into the histogram.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThreadStats {
    /// The thread this entry is, 0 in a free `THREADS` slot.
    pub tid: u32,
    pub tgid: u32,
    /// 1 when the last switch-out was involuntary.
    pub last_out_involuntary: u32,
    /// The user stack id of the thread's last interval off CPU plus one, once walked (at
    /// its switch-out, or where its syscall returned); 0: none. What a waker was doing
    /// before it woke a thread ([`HeldKey`]).
    pub last_user_stack: u32,
    pub voluntary: u64,
    pub involuntary: u64,
    pub oncpu_ns: u64,
    pub blocked_ns: u64,
    pub runqueue_ns: u64,
    pub last_in: u64,
    pub last_out: u64,
    /// The thread's name, NUL-padded, as two little-endian words.
    pub comm: [u64; 2],
    pub offcpu_hist: [u64; HIST_BUCKETS],
    /// Stack ids at the last switch-out (negative: not taken or lost).
    pub user_stack: i32,
    pub kernel_stack: i32,
    /// `prev_state` at the last switch-out.
    pub state: u32,
    /// 1 when a waker was recorded since the last switch-out.
    pub waker_set: u32,
    pub waker_user_stack: i32,
    pub waker_kernel_stack: i32,
    pub waker_tgid: u32,
    pub waker_tid: u32,
    pub waker_comm: [u64; 2],
    /// Off-CPU stack sampling of the interval in progress (probabilities in
    /// [`sampling::ONE`] units; 0: not walked). `sample_p`: the off-CPU profile's, chosen at
    /// switch-out outside a syscall (at switch-in inside one, from the interval's length).
    /// `wake_p`: the wakeup profile's, chosen at the first wakeup (`wake_decided`).
    pub sample_p: u32,
    pub wake_p: u32,
    pub wake_decided: u32,
    /// 1 when the thread went off CPU inside a syscall the probes follow: its user stack is
    /// then taken where it runs again, at the syscall's exit or its next switch-out (the same
    /// user registers), not in the switch path.
    pub in_syscall: u32,
    /// 1 while an interval's stacks wait for that user stack (weights `pending_ns` and
    /// `pending_wake_ns`, the kernel stack in `kernel_stack`).
    pub pending: u32,
    /// The CPU the waker's stacks were walked on, how long that took, and when it began:
    /// time the probes themselves kept the sleeper from that CPU, left out of its weight.
    pub wake_cpu: u32,
    pub wake_walk_ns: u64,
    pub woken_at: u64,
    /// When the switch-out's own user-stack walk ended (0: none): the interval's weight
    /// counts from there, the walk being the probes' time.
    pub walked_at: u64,
    pub pending_ns: u64,
    pub pending_wake_ns: u64,
    /// Moving averages of the thread's off-CPU intervals outside and inside syscalls, ns:
    /// what a choice made before an interval's end expects its length to be.
    pub predicted_ns: u64,
    pub predicted_sys_ns: u64,
    /// When the first wakeup of the interval in progress came (0: none yet): the interval is
    /// blocked up to it and waits for a CPU after it.
    pub wakeup_at: u64,
    /// The part of `runqueue_ns` that followed a wakeup (scheduler delay).
    pub runqueue_after_wakeup_ns: u64,
    /// The waiting-for-a-CPU part of the interval whose stacks wait for a user stack.
    pub pending_delay_ns: u64,
    /// Each wait for a CPU (wakeup or preemption to switch-in), log2 ns.
    pub delay_hist: [u64; HIST_BUCKETS],
    /// The first task seen holding a CPU this thread waited for, and what it held: this
    /// thread's `RUNQUEUE_HOLDERS` row for that holder and CPU, kept here so that the commonest
    /// case (the same holder again) needs no hash lookup. Every other holder's row is in
    /// `RUNQUEUE_HOLDERS`; a row is in one place or the other for the thread's life. Unused while
    /// `held.count` is 0.
    pub held_by: RunqueueHolderKey,
    pub held: RunqueueHolderStats,
    /// `wakeup_at` of the last interval off CPU, kept past its switch-in (0: none seen, or
    /// preempted): where that interval's blocked part ended and its wait for a CPU began,
    /// should the thread wake another ([`HeldKey`]).
    pub last_wakeup_at: u64,
    /// What the waker of the interval in progress did while this thread waited, for a span
    /// open on it: its own off-CPU part within the wait, that interval's state and user stack
    /// (set at the wakeup, taken at the switch-in).
    pub wake_held_ns: u64,
    pub wake_held_state: u32,
    pub wake_held_user_stack: i32,
    /// The span instance open on this thread (`span.index` 0: none).
    pub span: SpanInstance,
}
const _: () = assert!(
    core::mem::size_of::<ThreadStats>()
        == 16
            + 7 * 8
            + 16
            + 8 * HIST_BUCKETS
            + 32
            + 16
            + 24
            + 56
            + 24
            + 8 * HIST_BUCKETS
            + 24
            + 40
            + 8
            + 16
            + core::mem::size_of::<SpanInstance>()
);

/// Who held a CPU while a target thread waited for it: the task the waiter took the CPU from.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunqueueHolderKey {
    pub tgid: u32,
    pub tid: u32,
    pub holder_tgid: u32,
    pub holder_tid: u32,
    pub cpu: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<RunqueueHolderKey>() == 24);

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RunqueueHolderStats {
    pub count: u64,
    pub ns: u64,
    /// The holder's name, NUL-padded, as two little-endian words.
    pub comm: [u64; 2],
    /// The holder's `static_prio` (nice + 120).
    pub prio: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<RunqueueHolderStats>() == 40);

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OnCpuKey {
    pub tgid: u32,
    pub tid: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
}
const _: () = assert!(core::mem::size_of::<OnCpuKey>() == 16);

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OffCpuKey {
    pub tgid: u32,
    pub tid: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    /// `prev_state` at switch-out (0 or with `tp::PREEMPT_FLAG`: waiting for a CPU).
    pub state: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<OffCpuKey>() == 24);

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WakeupKey {
    pub tgid: u32,
    pub tid: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    pub waker_user_stack: i32,
    pub waker_kernel_stack: i32,
    pub waker_tgid: u32,
    pub waker_tid: u32,
    pub waker_comm: [u64; 2],
}
const _: () = assert!(core::mem::size_of::<WakeupKey>() == 48);

/// What the thread that woke a target thread did while that thread waited: the part of its
/// last interval off CPU that overlaps the wait (by its state at that switch-out and the
/// interval's stacks), and the part it ran (`state` [`HELD_RUNNING`], by its stacks at the
/// wakeup when they were walked). Only wakers that are themselves targets.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeldKey {
    /// The woken thread's process and thread.
    pub tgid: u32,
    pub tid: u32,
    /// The waker.
    pub holder_tgid: u32,
    pub holder_tid: u32,
    /// `prev_state` of the waker's last switch-out as the switch program reports it, or
    /// [`HELD_RUNNING`].
    pub state: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<HeldKey>() == 32);

/// [`HeldKey::state`] of the time a waker ran before the wakeup.
pub const HELD_RUNNING: u32 = u32::MAX;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SyscallStackKey {
    pub tgid: u32,
    pub tid: u32,
    pub nr: u32,
    pub user_stack: i32,
}
const _: () = assert!(core::mem::size_of::<SyscallStackKey>() == 16);

/// Tracepoint record layouts this build reads with constant offsets (the verifier requires
/// constant context offsets). The loader checks them against tracefs before loading and
/// refuses to run on a kernel whose layout differs.
pub mod tp {
    /// `task/task_newtask`
    pub const NEWTASK_PID: usize = 8;
    pub const NEWTASK_CLONE_FLAGS: usize = 32;

    /// `(category, event, field, offset, size)` for the loader's check.
    pub const LAYOUT: [(&str, &str, &str, usize, usize); 2] = [
        ("task", "task_newtask", "pid", NEWTASK_PID, 4),
        (
            "task",
            "task_newtask",
            "clone_flags",
            NEWTASK_CLONE_FLAGS,
            8,
        ),
    ];

    /// `prev_state` bit the `sched_switch` trace event sets when the switch was a preemption
    /// (`TASK_REPORT_MAX`, printed as "R+"); the switch program reports states the same way.
    pub const PREEMPT_FLAG: i64 = 0x100;
    /// A state the switch program adds to an off-CPU stack's state for the part of a wait
    /// after its wakeup: runnable, waiting for a CPU (scheduler delay).
    pub const WOKEN_FLAG: i64 = 0x200;
    /// `prev_state` bits of a task that is exiting (EXIT_DEAD, EXIT_ZOMBIE).
    pub const STATE_DEAD: i64 = 0x10;
    pub const STATE_ZOMBIE: i64 = 0x20;
    /// `clone_flags` bit of a new thread (as opposed to a new process).
    pub const CLONE_THREAD: u64 = 0x0001_0000;
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` structs of integers with no padding holes that matter.
    unsafe impl aya::Pod for super::SyscallStats {}
    unsafe impl aya::Pod for super::InFlight {}
    unsafe impl aya::Pod for super::ErrnoKey {}
    unsafe impl aya::Pod for super::ThreadStats {}
    unsafe impl aya::Pod for super::OtelThread {}
    unsafe impl aya::Pod for super::OtelSpan {}
    unsafe impl aya::Pod for super::OtelSampleKey {}
    unsafe impl aya::Pod for super::OnCpuKey {}
    unsafe impl aya::Pod for super::OffCpuKey {}
    unsafe impl aya::Pod for super::WakeupKey {}
    unsafe impl aya::Pod for super::HeldKey {}
    unsafe impl aya::Pod for super::RunqueueHolderKey {}
    unsafe impl aya::Pod for super::RunqueueHolderStats {}
    unsafe impl aya::Pod for super::SyscallStackKey {}
    unsafe impl aya::Pod for super::FutexKey {}
    unsafe impl aya::Pod for super::FutexStats {}
    unsafe impl aya::Pod for super::WaitStats {}
    unsafe impl aya::Pod for super::SpanHist {}
    unsafe impl aya::Pod for super::SpanInstance {}
    unsafe impl aya::Pod for super::GcEvent {}
    unsafe impl aya::Pod for super::UnwindRow {}
    unsafe impl aya::Pod for super::UnwindMapping {}
    unsafe impl aya::Pod for super::UnwindProc {}
    unsafe impl aya::Pod for super::UserStack {}
    unsafe impl aya::Pod for super::PyProc {}
    unsafe impl aya::Pod for super::PyCode {}
    unsafe impl aya::Pod for super::PyCodeKey {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_buckets_are_contiguous_and_within_a_64th() {
        assert_eq!(span_bucket(0), 0);
        assert_eq!(span_bucket(127), 127);
        assert_eq!(span_bucket(128), 128);
        assert_eq!(span_bucket(u64::MAX), SPAN_HIST_BUCKETS - 1);
        let mut last = 0;
        extern crate std;
        let mut values: std::vec::Vec<u64> = (1..1u64 << 40).step_by(999_983).collect();
        values.extend([1 << 39, (1 << 40) - 1]);
        values.sort_unstable();
        for v in values {
            let b = span_bucket(v);
            assert!(b >= last, "{v}: bucket {b} below {last}");
            last = b;
            let low = span_bucket_low(b);
            assert!(
                low <= v && v - low <= v / 64,
                "{v} in bucket {b} from {low}"
            );
            assert_eq!(span_bucket(low), b);
        }
        for b in 1..SPAN_HIST_BUCKETS {
            assert!(span_bucket_low(b) > span_bucket_low(b - 1), "bucket {b}");
        }
    }

    #[test]
    fn a_span_histogram_gives_the_figures_log2_one() {
        let mut h = SpanHist {
            count: 0,
            total_ns: 0,
            max_ns: 0,
            passed_over: 0,
            open_at_start: 0,
            nested: 0,
            missed: 0,
            buckets: [0; SPAN_HIST_BUCKETS],
        };
        let mut w = WaitStats::ZERO;
        for v in [
            0,
            1,
            5,
            127,
            128,
            129,
            1_000,
            65_535,
            65_536,
            1 << 33,
            (1 << 34) - 1,
        ] {
            h.count += 1;
            h.total_ns += v;
            h.max_ns = h.max_ns.max(v);
            h.buckets[span_bucket(v)] += 1;
            w.add(v);
        }
        let got = h.wait_stats();
        assert_eq!(
            (got.count, got.total_ns, got.max_ns, got.hist),
            (w.count, w.total_ns, w.max_ns, w.hist)
        );
    }

    #[test]
    fn log2_buckets() {
        assert_eq!(log2_bucket(0), 0);
        assert_eq!(log2_bucket(1), 0);
        assert_eq!(log2_bucket(2), 1);
        assert_eq!(log2_bucket(3), 1);
        assert_eq!(log2_bucket(1023), 9);
        assert_eq!(log2_bucket(1024), 10);
        assert_eq!(log2_bucket(u64::MAX), HIST_BUCKETS - 1);
        for i in 0..HIST_BUCKETS as u32 {
            assert_eq!(log2_bucket(1u64 << i), i as usize);
        }
    }

    #[test]
    fn timings_add_up() {
        let mut s = WaitStats::ZERO;
        for ns in [3, 1000, 2] {
            s.add(ns);
        }
        assert_eq!((s.count, s.total_ns, s.max_ns), (3, 1005, 1000));
        assert_eq!((s.hist[1], s.hist[9]), (2, 1));
    }
}
