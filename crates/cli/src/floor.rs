//! `switchyard floor`: empty programs on the recording's attach points, attached until Ctrl-C.
//! What they add to a syscall or a context switch is the least any tracer with these attach
//! points can cost; a benchmark measures the recording against it (`just bench-overhead`).

use std::{io::Write as _, process::ExitCode};

use anyhow::{Context as _, Result};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use switchyard_loader::{Floor, FloorKind};

use crate::preflight::take_ready_fd;

#[derive(clap::Args, Debug)]
pub struct FloorArgs {
    /// Which attach points: `syscalls` (raw tracepoints sys_enter and sys_exit, as `record`
    /// uses) or `switch` (the BTF tracepoint sched_switch).
    #[arg(value_enum)]
    pub what: FloorWhat,
    /// Write `floor <what>` and a newline to this open descriptor once the programs are
    /// attached (for scripts: the write end of a pipe).
    #[arg(long, value_name = "FD")]
    pub ready_fd: Option<i32>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorWhat {
    Syscalls,
    Switch,
}

impl FloorWhat {
    fn name(self) -> &'static str {
        match self {
            FloorWhat::Syscalls => "syscalls",
            FloorWhat::Switch => "switch",
        }
    }

    fn kind(self) -> FloorKind {
        match self {
            FloorWhat::Syscalls => FloorKind::Syscalls,
            FloorWhat::Switch => FloorKind::Switch,
        }
    }

    fn attach_points(self) -> &'static str {
        match self {
            FloorWhat::Syscalls => "raw tracepoints sys_enter and sys_exit",
            FloorWhat::Switch => "BTF tracepoint sched_switch",
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
    let floor = Floor::attach(args.what.kind())?;
    say!(
        "switchyard: floor {}: empty programs on the {} attached; Ctrl-C to detach",
        args.what.name(),
        args.what.attach_points()
    );
    if let Some(mut ready) = ready {
        // A reader that has gone away is not an error of the floor.
        let _ = writeln!(ready, "floor {}", args.what.name());
    }
    // Sleeps until the signal: the floor itself takes no CPU while it is measured.
    signals.wait().context("waiting for SIGINT or SIGTERM")?;
    drop(floor);
    Ok(ExitCode::SUCCESS)
}
