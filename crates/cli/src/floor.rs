//! `switchyard floor`: empty programs on the recording's attach points, attached until Ctrl-C.
//! What they add to a syscall or a context switch is the least any tracer with these attach
//! points can cost; a benchmark measures the recording against it (`just bench-overhead`).
//! Three more kinds measure what a switch program's parts cost: one exact clock read, and
//! finding a thread's entry in an array by tid or in task storage (`just bench-thread-state`).

use std::{io::Write as _, process::ExitCode};

use anyhow::{Context as _, Result};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use switchyard_loader::{Floor, FloorKind};

use crate::preflight::take_ready_fd;

#[derive(clap::Args, Debug)]
pub struct FloorArgs {
    /// Which attach points: `syscalls` (raw tracepoints sys_enter and sys_exit, as `record`
    /// uses) or `switch` (the BTF tracepoint sched_switch); `switch-clock` is the switch floor
    /// reading the exact clock once, as `record` does at every switch; `switch-array` and
    /// `switch-task-storage` are the switch floor finding both threads' entries, in an array
    /// by tid (as `record` does) or in task storage.
    #[arg(value_enum)]
    pub what: FloorWhat,
    /// Keep the kernel's run-time statistics on while attached, and print each program's runs
    /// and mean time a run when detached. They cost every BPF program on the host two clock
    /// reads a run.
    #[arg(long)]
    pub program_time: bool,
    /// Write `floor <what>` and a newline to this open descriptor once the programs are
    /// attached (for scripts: the write end of a pipe).
    #[arg(long, value_name = "FD")]
    pub ready_fd: Option<i32>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorWhat {
    Syscalls,
    Switch,
    SwitchClock,
    SwitchArray,
    SwitchTaskStorage,
}

impl FloorWhat {
    fn name(self) -> &'static str {
        match self {
            FloorWhat::Syscalls => "syscalls",
            FloorWhat::Switch => "switch",
            FloorWhat::SwitchClock => "switch-clock",
            FloorWhat::SwitchArray => "switch-array",
            FloorWhat::SwitchTaskStorage => "switch-task-storage",
        }
    }

    fn kind(self) -> FloorKind {
        match self {
            FloorWhat::Syscalls => FloorKind::Syscalls,
            FloorWhat::Switch => FloorKind::Switch,
            FloorWhat::SwitchClock => FloorKind::SwitchClock,
            FloorWhat::SwitchArray => FloorKind::SwitchArray,
            FloorWhat::SwitchTaskStorage => FloorKind::SwitchTaskStorage,
        }
    }

    fn attach_points(self) -> &'static str {
        match self {
            FloorWhat::Syscalls => "empty programs on the raw tracepoints sys_enter and sys_exit",
            FloorWhat::Switch => "an empty program on the BTF tracepoint sched_switch",
            FloorWhat::SwitchClock => {
                "a program on sched_switch reading the exact clock once, kept per CPU"
            }
            FloorWhat::SwitchArray => {
                "a program on sched_switch finding both threads' entries in an array by tid"
            }
            FloorWhat::SwitchTaskStorage => {
                "a program on sched_switch finding both threads' entries in task storage"
            }
        }
    }
}

pub fn run(args: FloorArgs) -> Result<ExitCode> {
    let ready = args.ready_fd.map(take_ready_fd).transpose()?;
    // Blocked before anything is attached: a signal that comes meanwhile waits, and ends the
    // floor as soon as it is up, rather than killing the process with its programs attached.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&signals), None)
        .context("blocking SIGINT and SIGTERM")?;
    let mut floor = Floor::attach(args.what.kind())?;
    if args.program_time {
        floor.keep_program_times()?;
    }
    say!(
        "switchyard: floor {}: {} attached; Ctrl-C to detach",
        args.what.name(),
        args.what.attach_points()
    );
    if let Some(mut ready) = ready {
        // A reader that has gone away is not an error of the floor.
        let _ = writeln!(ready, "floor {}", args.what.name());
    }
    // Sleeps until the signal: the floor itself takes no CPU while it is measured.
    signals.wait().context("waiting for SIGINT or SIGTERM")?;
    if args.program_time {
        // One line a program that ran, for scripts: `program NAME: RUNS runs, NS ns a run`.
        for p in floor.program_times().programs {
            println!(
                "program {}: {} runs, {:.1} ns a run",
                p.name,
                p.runs,
                p.run_ns as f64 / p.runs.max(1) as f64
            );
        }
    }
    drop(floor);
    Ok(ExitCode::SUCCESS)
}
