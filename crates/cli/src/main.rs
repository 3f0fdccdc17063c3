//! switchyard: context switches, syscalls and the waits behind them, for one process.
//!
//! The binary is deliberately not a library: it parses flags into one validated config,
//! runs a subcommand, and is the only place that prints and picks exit codes
//! (0 ok, 1 a budget failed, 2 usage or environment error).

/// `eprintln!`, but the line (newline included) goes out in one `write`: a spawned target
/// shares stderr, and its lines (a Go program's `gctrace`, say) must not land inside ours.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut line = format!($($arg)*);
        line.push('\n');
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }};
}

mod args;
mod assemble;
mod cgroup;
mod clock;
mod collect;
mod compare;
mod doctor;
mod explain;
mod fail;
mod finish;
mod floor;
mod gate;
mod heap;
mod jvm;
mod live;
mod otelctx;
mod plan;
mod preflight;
mod procfs;
mod progress;
#[cfg(test)]
mod reach;
mod record;
mod report;
mod runs;
mod spawn;
mod summary;
mod timeline;
mod windows;

use std::{io, process::ExitCode};

use args::RecordArgs;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "switchyard",
    version,
    about,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Record a live process (--pid) or a command (after --) and write run.json.
    Record(Box<RecordArgs>),
    /// Show what this host can and cannot do, why, and the fix.
    Doctor,
    /// Write the HTML report, folded stacks and pprof profiles of a run file.
    Report(report::ReportArgs),
    /// Compare two builds: every figure side by side, differential flame graphs.
    Compare(compare::CompareArgs),
    /// Check runs against budgets: exit 1 when one fails (markdown and JUnit for CI).
    Gate(gate::GateArgs),
    /// Why a run waited, and who made it wait: ranked findings (--json for scripts).
    Explain(explain::ExplainArgs),
    /// Attach empty programs to the attach points `record` uses, until Ctrl-C: what they add
    /// is the least any tracer with these attach points can cost (a benchmark's floor).
    Floor(floor::FloorArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Record(args) => record::run(*args),
        Command::Doctor => doctor::run(),
        Command::Report(args) => report::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Gate(args) => gate::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Floor(args) => floor::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // A closed stdout (`switchyard … | head`) is not an error.
            if let Some(io) = err.downcast_ref::<io::Error>()
                && io.kind() == io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            say!("error: {err:#}");
            if let Some(hint) = fail::hint_for(&err) {
                say!("hint: {hint}");
            }
            if let Some(log) = fail::verifier_log(&err) {
                say!("{log}");
            }
            ExitCode::from(2)
        }
    }
}
