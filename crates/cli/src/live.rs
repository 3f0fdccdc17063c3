//! A recording under way: the target started (a command forked, or a live process found), the
//! probes attached and the clock running; then polled until it ends (target exit, --duration,
//! Ctrl-C or SIGTERM), cutting the windows due on the way (`--every`).

use std::{
    io::Write as _,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context as _, Result};
use nix::sys::signal::Signal;
use switchyard_counters::{Counters, Scope};
use switchyard_model::{Collector, EndReason, Meta, TargetMode, units};
use switchyard_symbolize::Maps;

use crate::{
    assemble::{DEGRADED_TICK_MS, Recording, assemble},
    cgroup,
    clock::unix_ns,
    collect::Collection,
    jvm::Jvms,
    plan::{Plan, PlannedTarget},
    procfs::{self, PidFd},
    progress::Progress,
    spawn,
    windows::Windows,
};

/// How often the loop checks for the end (and samples /proc in degraded mode).
const TICK: Duration = Duration::from_millis(DEGRADED_TICK_MS);

/// The signals that end a recording as Ctrl-C does, the run file written: SIGINT, SIGTERM,
/// SIGQUIT, SIGHUP (an SSH session that drops) and SIGPIPE (a reader of our output gone).
pub const ENDING_SIGNALS: [i32; 5] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGQUIT,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGPIPE,
];

/// Blocks SIGPIPE in the calling thread: a write of its to a pipe with no reader fails with
/// EPIPE, and the signal stays pending on the thread instead of ending the recording.
fn block_sigpipe() {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(Signal::SIGPIPE);
    let _ = set.thread_block();
}

/// The ending signals, caught: the latest one's number once one came, else 0.
pub fn catch_signals() -> Result<Arc<AtomicUsize>> {
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in ENDING_SIGNALS {
        signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize)
            .context("installing signal handlers")?;
    }
    Ok(signal)
}

/// `record -v`: where the start of a recording spent its time, said before it begins.
struct StartSteps {
    lines: Option<Vec<String>>,
    since: Instant,
    began: Instant,
}

impl StartSteps {
    fn new(verbose: bool) -> StartSteps {
        let now = Instant::now();
        StartSteps {
            lines: verbose.then(Vec::new),
            since: now,
            began: now,
        }
    }

    fn lap(&mut self, step: &str, what: &str) {
        let now = Instant::now();
        if let Some(lines) = &mut self.lines {
            lines.push(format!("{step:>9} {:>9}  {what}", ms(now - self.since)));
        }
        self.since = now;
    }

    /// The probes' own steps, which together took the time since the last lap.
    fn attach(&mut self, probes: &[(String, Duration)]) {
        let now = Instant::now();
        if let Some(lines) = &mut self.lines {
            lines.push(format!("{:>9} {:>9}", "attach", ms(now - self.since)));
            for (what, took) in probes {
                lines.push(format!("{:>9} {:>9}    {what}", "", ms(*took)));
            }
        }
        self.since = now;
    }

    fn say(&self) {
        if let Some(lines) = &self.lines {
            say!(
                "switchyard: started in {} (excluding flag checks):",
                ms(self.began.elapsed())
            );
            for l in lines {
                say!("  {l}");
            }
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// A started recording and what it reads from.
pub struct Live<'p> {
    pub plan: &'p Plan,
    pub pid: u32,
    pub collection: Collection,
    /// The perf counters, when asked for (and in degraded mode, their only source).
    pub counters: Option<Counters>,
    pidfd: PidFd,
    /// Memory maps of the targets, so stacks symbolise after they exit.
    pub maps: Maps,
    /// The JVMs among the targets, asked for their JIT code's names (perf maps) into `maps`.
    pub jvms: Jvms,
    /// A spawned command, stopped when the recording ends, however it ends.
    pub child: Option<spawn::Child>,
    command: Vec<String>,
    /// The target's executable and runtime, read once it runs; its published OpenTelemetry
    /// context, read again at every window (a program publishes it once it has started).
    process: std::sync::Mutex<switchyard_model::ProcessInfo>,
    pub start_wall: SystemTime,
    /// CLOCK_MONOTONIC ns.
    pub start_mono: u64,
    started: Instant,
    /// The target's CPU quota and throttling, read again at every window and at the end.
    pub cgroup_start: Option<cgroup::Reading>,
}

impl<'p> Live<'p> {
    /// Starts the target and the recording, and says so (on stderr, and on `--ready-fd`). An
    /// ending signal while the probes attach ends it at once; with `verbose`, says where the
    /// start spent its time.
    pub fn start(plan: &'p mut Plan, signal: &AtomicUsize, verbose: bool) -> Result<Live<'p>> {
        let ready = plan.ready.take();
        let plan: &'p Plan = plan;
        let mut steps = StartSteps::new(verbose);
        // A spawned command waits before exec until the probes are attached; dropped on an
        // error, it is abandoned before it runs.
        let (pid, stopped) = match &plan.target {
            PlannedTarget::Pid(pid) => (*pid, None),
            PlannedTarget::Spawn {
                argv,
                program,
                hold,
            } => {
                let s = spawn::fork_stopped(argv, program, *hold)?;
                (s.pid, Some(s))
            }
        };
        steps.lap("target", "found or forked");
        let mut collection = Collection::attach(plan, pid, signal)?;
        steps.attach(collection.attach_steps());
        // Degraded mode has no other source of CPU time and switches.
        let counters = (plan.perf_counters || collection.is_degraded())
            .then(|| {
                Counters::open(match plan.target.mode() {
                    TargetMode::Pid => Scope::Pid(pid),
                    TargetMode::Spawn => Scope::SpawnedBeforeExec(pid),
                })
                .map_err(|e| say!("warning: perf counters unavailable: {e:#}"))
                .ok()
            })
            .flatten();

        // Before the start is announced (`--ready-fd`): a target that exits right after must
        // still be seen to exit.
        let pidfd = PidFd::open(pid);
        // A live target that exited while the probes attached: there is nothing to record.
        if plan.target.mode() == TargetMode::Pid && (!procfs::exists(pid) || procfs::is_zombie(pid))
        {
            return Err(crate::fail::hinted(
                format!("pid {pid} exited while the probes were attaching; nothing was recorded"),
                "record a process that keeps running, or record the command itself: switchyard record -- CMD",
            ));
        }
        steps.lap("counters", "opened");
        let start_wall = SystemTime::now();
        let start_mono = collection.start(pid)?;
        let started = Instant::now();
        let mut maps = Maps::default();
        // From here on, a spawned child is stopped when the recording ends, however it ends.
        let (child, command) = match (stopped, &plan.target) {
            (Some(s), PlannedTarget::Spawn { argv, .. }) => {
                let child = s.go(|| collection.refresh(&mut maps, pid))?;
                (Some(child), plan.recorded_command(argv))
            }
            _ => (None, plan.recorded_command(&procfs::cmdline(pid))),
        };
        let process = std::sync::Mutex::new(procfs::process_info(pid));
        steps.lap("start", "clock started, command released");
        steps.say();
        say!(
            "switchyard: recording pid {pid} ({}){}; Ctrl-C to stop",
            switchyard_model::term::escape(&procfs::comm(pid).unwrap_or_else(|| "?".into())),
            plan.duration
                .map(|d| format!(" for {}", units::seconds(d.as_secs_f64())))
                .unwrap_or_default()
        );
        if let Some(mut ready) = ready {
            // A reader that has gone away is not an error of the recording, nor the end of
            // it: written from a thread that blocks SIGPIPE, so that one raised by this write
            // dies with the thread.
            std::thread::scope(|s| {
                s.spawn(|| {
                    block_sigpipe();
                    let _ = writeln!(ready, "recording {pid}");
                });
            });
        }
        Ok(Live {
            plan,
            pid,
            collection,
            counters,
            pidfd,
            maps,
            jvms: Jvms::new(plan.stacks.is_some()),
            child,
            command,
            process,
            start_wall,
            start_mono,
            started,
            cgroup_start: cgroup::read(pid),
        })
    }

    /// Every window's and the run's metadata, but for when each starts and ends and how.
    pub fn meta(
        &self,
        start_wall: SystemTime,
        end_wall: SystemTime,
        start_mono: u64,
        end_mono: u64,
        end: EndReason,
    ) -> Meta {
        Meta {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            command: self.command.clone(),
            mode: self.plan.target.mode(),
            pid: self.pid,
            follow_children: self.plan.follow_children,
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
            unreported_switches: 0,
            window: None,
            labels: self.plan.labels.clone(),
            process: self.process_info(),
            redaction: self.plan.redaction.clone(),
            syscall_timing: Some(self.plan.syscall_timing),
            probe_costs: None,
            program_times: None,
        }
    }

    /// The target as far as it is known now: its published context read again, kept from the
    /// last read once the target has gone.
    fn process_info(&self) -> switchyard_model::ProcessInfo {
        let mut p = self.process.lock().unwrap_or_else(|e| e.into_inner());
        if p.executable.is_empty() {
            let again = procfs::process_info(self.pid);
            if !again.executable.is_empty() {
                *p = switchyard_model::ProcessInfo {
                    published: std::mem::take(&mut p.published),
                    ..again
                };
            }
        }
        match crate::otelctx::read(self.pid) {
            Ok(Some(published)) => {
                p.published = published.into_iter().collect();
                p.published_error = None;
            }
            Ok(None) => {}
            Err(e) => p.published_error = Some(e),
        }
        p.clone()
    }

    /// Polls until the recording ends, cutting the windows due; returns how it ended.
    pub fn poll(
        &mut self,
        mut windows: Option<&mut Windows>,
        signal: &AtomicUsize,
    ) -> Result<EndReason> {
        // A spawned command writes to this terminal too, and a redrawn line would erase what
        // it wrote last: the line is only drawn for a target whose output goes elsewhere;
        // windows say their own line as they are cut.
        let shares_terminal = self.child.is_some() || windows.is_some();
        let mut progress = Progress::start(self.plan.duration, shares_terminal);
        let mut last_maps = Instant::now();
        let mut last_context = Instant::now();
        let end = loop {
            // New processes, exec and dlopen: their maps for symbols and their unwind tables,
            // as soon as seen: every tick in the first second (the dynamic loader maps
            // libraries early), then every 100 ms.
            // Children get their span probes on the same cadence.
            let due = self.started.elapsed() < Duration::from_secs(1)
                || last_maps.elapsed() >= Duration::from_millis(100);
            if due {
                last_maps = Instant::now();
            }
            let maps_due = due && self.plan.stacks.is_some();
            let follow_due = due && !self.plan.spans.is_empty();
            self.collection
                .tick(self.pid, &mut self.maps, maps_due, follow_due);
            self.jvms.tick(self.pid, &self.collection, &mut self.maps);
            // A published OpenTelemetry context, looked for every second: a program
            // publishes it once it has started, and it is gone from /proc when it exits.
            if last_context.elapsed() >= Duration::from_secs(1) {
                last_context = Instant::now();
                self.process_info();
            }
            // A window due as the duration runs out is the last one, read at the end: cutting
            // it here would leave a last window of a few milliseconds.
            let over = self
                .plan
                .duration
                .is_some_and(|d| self.started.elapsed() >= d);
            if let Some(w) = windows.as_deref_mut().filter(|w| !over && w.due()) {
                self.cut(w)?;
            }
            let sig = signal.load(Ordering::Relaxed);
            if sig != 0 {
                break EndReason::Interrupted { signal: sig as i32 };
            }
            let exited = match &mut self.child {
                Some(c) => c.exited(),
                None => self.pidfd.exited().then_some(spawn::Exit::default()),
            };
            if let Some(e) = exited {
                break EndReason::TargetExited {
                    code: e.code,
                    signal: e.signal,
                };
            }
            if over {
                break EndReason::Duration;
            }
            progress.tick(self.started.elapsed(), self.counters.as_mut());
            self.pidfd.wait(TICK);
        };
        progress.finish();
        Ok(end)
    }

    /// Cuts the window in progress: read from the probes now, made into a run by the windows'
    /// worker.
    fn cut(&mut self, w: &mut Windows) -> Result<()> {
        let (source, gc_events, at) = self.collection.cut(self.pid)?;
        let end_wall = SystemTime::now();
        let counter_rows = w.counters(self.counters.as_mut().map(Counters::read));
        let window_meta = self.meta(w.start_wall, end_wall, w.start_mono, at, EndReason::Window);
        let (stacks, go_gc) = (self.plan.stacks.clone(), self.plan.go_gc.clone());
        // The window's JIT code named before its maps are taken.
        self.jvms
            .dump_now(self.pid, &self.collection, &mut self.maps);
        let (window_maps, max_rss_kb) = (self.maps.clone(), procfs::max_rss_kb(self.pid));
        let cgroup = self.cgroup_start.as_ref().map(cgroup::Reading::since_start);
        self.cgroup_start = cgroup::read(self.pid).or(self.cgroup_start.take());
        w.cut(
            move |symbolizer| {
                assemble(Recording {
                    meta: window_meta,
                    source,
                    counters: counter_rows,
                    stacks,
                    maps: &window_maps,
                    go_gc: go_gc.map(|binary| (binary, gc_events)),
                    workload: None,
                    max_rss_kb,
                    timeline: None,
                    cgroup,
                    symbolizer: Some(symbolizer),
                })
            },
            at,
            end_wall,
        );
        Ok(())
    }
}
