//! `switchyard record`: attach, wait for the end (target exit, --duration, Ctrl-C/SIGTERM),
//! collect, write run.json, print the summary.

use std::{
    collections::BTreeMap,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result};
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use switchyard_counters::{Counters, Scope};
use switchyard_loader::{Config, Probes, Span, StackConfig, Unwind};
use switchyard_model::{
    Collector, EndReason, Meta, Run, TargetMode, Workload,
    driver::{DriverResult, monotonic_ns},
};
use switchyard_symbolize::Maps;

use crate::{
    RecordArgs,
    assemble::{DEGRADED_TICK_MS, Recording, Source, assemble},
    fail::{PRIVILEGE_HINT, hinted, out},
    procfs::{self, ThreadSample},
    progress::Progress,
    spawn, summary,
};

/// How often the loop checks for the end (and samples /proc in degraded mode).
const TICK: Duration = Duration::from_millis(DEGRADED_TICK_MS);

enum Target {
    Pid(u32),
    Spawn(spawn::Stopped),
}

enum Collection {
    Ebpf(Box<Probes>),
    /// /proc samples: the first seen and the last seen figures of every thread.
    Degraded {
        first: BTreeMap<u32, ThreadSample>,
        last: BTreeMap<u32, ThreadSample>,
        why: String,
    },
}

pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let ready = args.ready_fd.map(ReadyFd::take).transpose()?;
    let target = match (args.pid, args.command.is_empty()) {
        (Some(pid), true) => Target::Pid(check_pid(pid)?),
        // Held from exec until its libraries are mapped, so their unwind tables are in place
        // for the first stacks (only when CFI stacks are taken).
        (None, false) => Target::Spawn(spawn::fork_stopped(
            &args.command,
            !args.no_stacks && args.unwind == crate::UnwindArg::Cfi,
        )?),
        _ => {
            return Err(hinted(
                "nothing to record",
                "give a running process with --pid N, or a command after --: `switchyard record -- ./server --port 9000`",
            ));
        }
    };
    let (pid, mode) = match &target {
        Target::Pid(p) => (*p, TargetMode::Pid),
        Target::Spawn(s) => (s.pid, TargetMode::Spawn),
    };

    // Signals first, so a Ctrl-C while the probes load still ends cleanly.
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)
            .context("installing signal handlers")?;
    }

    let follow = !args.no_follow_children;
    let stacks = (!args.no_stacks).then_some(StackConfig {
        oncpu_hz: args.freq,
        min_block_ns: args.min_block.as_nanos() as u64,
        syscall_every: args.syscall_stacks,
        stack_map_size: args.stack_map_size,
        unwind: match args.unwind {
            crate::UnwindArg::Cfi => Unwind::Cfi,
            crate::UnwindArg::Fp => Unwind::FramePointers,
        },
        unwind_rows: args.unwind_rows,
    });
    let spans = match spans(&args, &target) {
        Ok(s) => s,
        Err(e) => {
            if let Target::Spawn(s) = target {
                s.cancel();
            }
            return Err(e);
        }
    };
    let go_gc = if args.go_gc {
        match target_binary(&args, &target) {
            Ok(b) => Some(b),
            Err(e) => {
                if let Target::Spawn(s) = target {
                    s.cancel();
                }
                return Err(e);
            }
        }
    } else {
        None
    };
    let collection = match Probes::attach(&Config {
        tgid: pid,
        before_exec: mode == TargetMode::Spawn,
        follow_children: follow,
        stacks: stacks.clone(),
        spans,
        go_gc: go_gc.clone(),
    }) {
        Ok(p) => Collection::Ebpf(Box::new(p)),
        Err(e) if e.is_permission() && args.degraded => {
            eprintln!(
                "warning: eBPF unavailable ({e}); degraded mode: switches from /proc and perf software counters only"
            );
            let first = procfs::threads(pid);
            Collection::Degraded {
                last: first.clone(),
                first,
                why: format!("eBPF not permitted: {e}"),
            }
        }
        Err(e) => {
            if let Target::Spawn(s) = target {
                s.cancel();
            }
            let perm = e.is_permission();
            let err = anyhow::Error::new(e).context("attaching the probes");
            return Err(if perm {
                hinted(format!("{err:#}"), PRIVILEGE_HINT)
            } else {
                err
            });
        }
    };

    let counters = Counters::open(match mode {
        TargetMode::Pid => Scope::Pid(pid),
        TargetMode::Spawn => Scope::SpawnedBeforeExec(pid),
    });
    let mut counters = match counters {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("warning: perf counters unavailable: {e:#}");
            None
        }
    };

    let start_wall = SystemTime::now();
    let start_mono = monotonic_ns();
    let started = Instant::now();
    let mut collection = collection;
    // Memory maps of the targets, so stacks symbolise after they exit: at a spawned child's
    // exec, every tick for the first second (the dynamic loader maps libraries early), then
    // every 100 ms.
    let mut maps = Maps::default();
    // A spawned child that ended while held (before its loader was done).
    let mut exited_early = None;
    let mut unwind_warned = false;
    let command = match target {
        Target::Spawn(s) => {
            exited_early = s.go(|| {
                if let Collection::Ebpf(p) = &mut collection {
                    refresh_unwind(p, &mut maps, pid, &mut unwind_warned);
                }
            })?;
            args.command.clone()
        }
        Target::Pid(p) => procfs::cmdline(p),
    };
    eprintln!(
        "switchyard: recording pid {pid} ({}){}; Ctrl-C to stop",
        procfs::comm(pid).unwrap_or_else(|| "?".into()),
        args.duration
            .map(|d| format!(" for {:.1} s", d.as_secs_f64()))
            .unwrap_or_default()
    );

    if let Some(r) = ready {
        r.announce(pid);
    }
    let mut progress = Progress::start(args.duration);
    let pidfd = PidFd::open(pid);
    let mut reaped: Option<spawn::Exit> = None;
    let mut last_maps = Instant::now();
    let mut gc_events = Vec::new();
    let end = loop {
        if let Collection::Ebpf(p) = &mut collection {
            p.drain_gc_events(&mut gc_events);
        }
        if stacks.is_some()
            && (started.elapsed() < Duration::from_secs(1)
                || last_maps.elapsed() >= Duration::from_millis(100))
        {
            last_maps = Instant::now();
            match &mut collection {
                Collection::Ebpf(p) => {
                    // New processes, exec and dlopen: their maps for symbols and their unwind
                    // tables, as soon as seen.
                    for tgid in p.followed() {
                        refresh_unwind(p, &mut maps, tgid, &mut unwind_warned);
                    }
                }
                Collection::Degraded { .. } => {}
            }
        }
        if let Collection::Degraded { last, .. } = &mut collection {
            for (tid, s) in procfs::threads(pid) {
                last.insert(tid, s);
            }
        }
        let sig = signal.load(Ordering::Relaxed);
        if sig != 0 {
            break EndReason::Interrupted { signal: sig as i32 };
        }
        match mode {
            TargetMode::Spawn => {
                if let Some(exit) = exited_early.take().or_else(|| spawn::try_reap(pid)) {
                    reaped = Some(exit);
                    break EndReason::TargetExited {
                        code: exit.code,
                        signal: exit.signal,
                    };
                }
            }
            TargetMode::Pid => {
                if pidfd.exited() {
                    break EndReason::TargetExited {
                        code: None,
                        signal: None,
                    };
                }
            }
        }
        if args.duration.is_some_and(|d| started.elapsed() >= d) {
            break EndReason::Duration;
        }
        progress.tick(started.elapsed(), counters.as_mut());
        pidfd.wait(TICK);
    };
    progress.finish();
    let end_mono = monotonic_ns();
    // A live target's peak RSS while it still exists; a spawned one's comes from wait4.
    let live_rss = procfs::max_rss_kb(pid);
    let end_wall = SystemTime::now();

    // Stop counting before touching the target.
    let mut source = match collection {
        Collection::Ebpf(mut p) => {
            p.drain_gc_events(&mut gc_events);
            Source::Ebpf(Box::new(p.finish(pid).context("reading the probes' maps")?))
        }
        Collection::Degraded { first, last, why } => Source::Degraded {
            first,
            last,
            why,
            totals: None,
        },
    };
    if mode == TargetMode::Spawn && !matches!(end, EndReason::TargetExited { .. }) {
        // Like timeout(1): the command ends with the recording.
        let sig = match end {
            EndReason::Interrupted { signal } => {
                Signal::try_from(signal).unwrap_or(Signal::SIGTERM)
            }
            _ => Signal::SIGTERM,
        };
        reaped = stop_child(pid, sig);
    }
    let counter_rows = counters.as_mut().map(Counters::read);
    // A spawned target's exact switch totals (wait4), known once it has been reaped.
    if let Source::Degraded { totals, .. } = &mut source {
        *totals = reaped.and_then(|e| e.switches);
    }
    // The driver writes its result as the load ends, about when the target exits.
    let workload = match &args.workload_result {
        Some(path) => match read_workload(path, start_mono) {
            Ok(w) => Some(w),
            Err(e) => {
                eprintln!("warning: {e:#}; the run has no per-operation figures");
                None
            }
        },
        None => None,
    };
    let run = assemble(Recording {
        meta: Meta {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            command,
            mode,
            pid,
            follow_children: follow,
            children: Vec::new(),
            host: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kernel: nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            start_wall_ns: unix_ns(start_wall),
            end_wall_ns: unix_ns(end_wall),
            start_mono_ns: start_mono,
            end_mono_ns: end_mono,
            end,
            collector: Collector::Ebpf,
        },
        source,
        counters: counter_rows,
        stacks,
        maps,
        go_gc: go_gc.map(|binary| (binary, gc_events)),
        workload,
        max_rss_kb: reaped.and_then(|e| e.max_rss_kb).or(live_rss),
    });
    finish(run, &args)
}

/// Snapshots a followed process's memory maps (for symbols) and loads the unwind tables of
/// what it mapped since the last call, from one read of its maps; warns once when loading
/// fails (those stacks fall back to frame pointers).
fn refresh_unwind(p: &mut Probes, maps: &mut Maps, tgid: u32, warned: &mut bool) {
    let text = maps.refresh(tgid);
    if let Err(e) = p.refresh_unwind(tgid, text.as_deref())
        && !std::mem::replace(warned, true)
    {
        eprintln!("warning: loading unwind tables: {e}; those stacks fall back to frame pointers");
    }
}

fn finish(run: Run, args: &RecordArgs) -> Result<ExitCode> {
    run.save(&args.output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    out(summary::render(&run, args.top))?;
    out(format!("run file: {}\n", args.output.display()))?;
    let secs = run.meta.duration_ns() as f64 / 1e9;
    match run.meta.end {
        EndReason::Interrupted { signal }
            if args.duration.is_some() || run.meta.mode == TargetMode::Spawn =>
        {
            Err(hinted(
                format!(
                    "interrupted by {} after {secs:.2} s; {} holds what was collected",
                    signal_name(signal),
                    args.output.display()
                ),
                "let the recording end by itself (target exit or --duration) for a complete run",
            ))
        }
        EndReason::TargetExited { .. }
            if run.meta.mode == TargetMode::Pid && args.duration.is_some() =>
        {
            Err(hinted(
                format!(
                    "target pid {} exited {secs:.2} s into the recording; {} holds what was collected",
                    run.meta.pid,
                    args.output.display()
                ),
                "record a process that outlives --duration, or drop --duration to record until it exits",
            ))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// A driver result file, waited for up to 5 s (the driver may still be writing it).
fn read_workload(path: &std::path::Path, start_mono: u64) -> Result<Workload> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !path.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = DriverResult::read(path)
        .with_context(|| format!("reading the workload result {}", path.display()))?;
    Ok(r.to_workload(start_mono))
}

/// The target's executable: the spawned command, or a live process's /proc/<pid>/exe.
fn target_binary(args: &RecordArgs, target: &Target) -> Result<std::path::PathBuf> {
    match target {
        Target::Spawn(_) => spawn::resolve(&args.command[0]),
        Target::Pid(pid) => std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| {
            hinted(
                format!("cannot read the executable of pid {pid}: {e}"),
                "record as root, or spawn the program under switchyard",
            )
        }),
    }
}

/// `--uprobe-span SYMBOL[@BINARY]`: the binary defaults to the target's executable.
fn spans(args: &RecordArgs, target: &Target) -> Result<Vec<Span>> {
    let exe = || -> Result<std::path::PathBuf> {
        match target {
            Target::Spawn(_) => spawn::resolve(&args.command[0]),
            Target::Pid(pid) => std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| {
                hinted(
                    format!("cannot read the executable of pid {pid}: {e}"),
                    "give the binary explicitly: --uprobe-span SYMBOL@/path/to/binary",
                )
            }),
        }
    };
    args.uprobe_spans
        .iter()
        .map(|spec| {
            let (label, rest) = match spec.split_once('=') {
                Some((l, r)) => (Some(l.to_string()), r),
                None => (None, spec.as_str()),
            };
            let (symbol, binary) = match rest.split_once('@') {
                Some((s, b)) => (s.to_string(), std::path::PathBuf::from(b)),
                None => (rest.to_string(), exe()?),
            };
            let label = label.unwrap_or_else(|| symbol.clone());
            if symbol.is_empty() {
                return Err(hinted(
                    format!("`--uprobe-span {spec}` names no symbol"),
                    "use --uprobe-span [LABEL=]SYMBOL[@/path/to/binary]",
                ));
            }
            if !binary.exists() {
                return Err(hinted(
                    format!(
                        "`--uprobe-span {spec}`: {} does not exist",
                        binary.display()
                    ),
                    "give the path of the binary or shared library that defines the symbol",
                ));
            }
            Ok(Span {
                label,
                symbol,
                binary,
            })
        })
        .collect()
}

fn check_pid(pid: u32) -> Result<u32> {
    if pid == 0 || !procfs::exists(pid) {
        return Err(hinted(
            format!("no process with pid {pid}"),
            format!("check it with `ps -p {pid}`; the process may have exited"),
        ));
    }
    if procfs::is_kernel_thread(pid) {
        return Err(hinted(
            format!(
                "pid {pid} ({}) is a kernel thread",
                procfs::comm(pid).unwrap_or_default()
            ),
            "switchyard records user-space processes; pick the pid of a program",
        ));
    }
    if pid == std::process::id() {
        return Err(hinted(
            "switchyard cannot record itself",
            "give the pid of another process",
        ));
    }
    Ok(pid)
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// Sends `sig` to a spawned child, waits up to a second, then SIGKILL; returns its status.
fn stop_child(pid: u32, sig: Signal) -> Option<spawn::Exit> {
    let p = Pid::from_raw(pid as i32);
    let _ = kill(p, sig);
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if let Some(s) = spawn::try_reap(pid) {
            return Some(s);
        }
        std::thread::sleep(TICK);
    }
    let _ = kill(p, Signal::SIGKILL);
    std::thread::sleep(TICK);
    spawn::try_reap(pid)
}

/// A pidfd for the target, to wait for its exit without polling /proc.
struct PidFd(Option<std::os::fd::OwnedFd>);

impl PidFd {
    fn open(pid: u32) -> PidFd {
        // SAFETY: pidfd_open(pid, 0) returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
        if fd < 0 {
            return PidFd(None);
        }
        // SAFETY: a fresh descriptor we own.
        PidFd(Some(unsafe {
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32)
        }))
    }

    /// Sleeps up to `timeout`, waking early when the process exits.
    fn wait(&self, timeout: Duration) {
        if self.0.is_none() {
            std::thread::sleep(timeout);
        } else {
            self.poll(timeout.as_millis() as libc::c_int);
        }
    }

    fn exited(&self) -> bool {
        self.poll(0)
    }

    /// True when the pidfd is readable (the process has exited) within `timeout_ms`.
    fn poll(&self, timeout_ms: libc::c_int) -> bool {
        let Some(fd) = &self.0 else { return false };
        let mut p = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(fd),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout_ms) > 0 }
    }
}

/// `--ready-fd`: the inherited descriptor the start handshake is written to.
struct ReadyFd(std::fs::File);

impl ReadyFd {
    /// Takes ownership of `fd`, refusing one that is not open, before anything is recorded.
    fn take(fd: i32) -> Result<ReadyFd> {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(hinted(
                format!("--ready-fd {fd} is not an open file descriptor"),
                "pass the write end of a pipe the caller keeps open, e.g. `3>pipe` with --ready-fd 3",
            ));
        }
        // SAFETY: an open descriptor handed to this process for its sole use.
        Ok(ReadyFd(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
    }

    /// Writes `recording <pid>` and closes the descriptor. A reader that has gone away is not
    /// an error of the recording.
    fn announce(mut self, pid: u32) {
        use std::io::Write as _;
        let _ = writeln!(self.0, "recording {pid}");
    }
}
