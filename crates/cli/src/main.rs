//! switchyard: context switches, syscalls and the waits behind them, for one process.
//!
//! The binary is deliberately not a library: it parses flags into one validated config,
//! runs a subcommand, and is the only place that prints and picks exit codes
//! (0 ok, 1 a budget failed, 2 usage or environment error).

mod assemble;
mod cgroup;
mod collect;
mod compare;
mod doctor;
mod explain;
mod fail;
mod gate;
mod heap;
mod plan;
mod procfs;
mod progress;
mod record;
mod report;
mod spawn;
mod summary;
mod timeline;
mod windows;

use std::{io, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use switchyard_loader::Syscalls;

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
}

#[derive(clap::Args, Debug)]
struct RecordArgs {
    /// Attach to this running process (all its threads).
    #[arg(short, long, conflicts_with = "command")]
    pid: Option<u32>,
    /// Stop after this long (e.g. 10s, 500ms, 2m); default: until the target exits or Ctrl-C.
    #[arg(short, long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Where to write the run file (default: run.json); with --every, the folder of the
    /// windows' run files (default: windows).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Cut the recording into windows this long (e.g. 10s, 1m), each a complete run with its
    /// own start and end (counts, histograms, stacks, GC events), written as run-<n>.json in
    /// the -o folder and/or exported. Nothing is lost or counted twice between windows, and
    /// memory stays bounded however long it runs.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    every: Option<Duration>,
    /// Write no run files, only export them (needs --otlp or --pyroscope).
    #[arg(long)]
    export_only: bool,
    /// Send the run (each window, with --every) to an OpenTelemetry Collector as OTLP
    /// profiles: http://HOST:4318 for OTLP/HTTP, http://HOST:4317 or grpc://HOST:4317 for
    /// gRPC. Sending never blocks the recording: a bounded queue, retries with backoff, and
    /// every window not delivered is counted in the summary.
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    /// The OTLP transport (default: grpc for port 4317 or a grpc:// URL, else http).
    #[arg(long, value_enum, value_name = "PROTOCOL")]
    otlp_protocol: Option<OtlpProtocolArg>,
    /// Push the run (each window) to Pyroscope as pprof: the server's URL
    /// (POST /ingest?name=SERVICE{build=…,workload=…}&format=pprof).
    #[arg(long, value_name = "URL")]
    pyroscope: Option<String>,
    /// Windows waiting to be sent to each sink, at most; one more is dropped and counted.
    #[arg(long, default_value_t = 64, value_name = "N")]
    export_queue: usize,
    /// service.name of what is exported (default: the target's program name).
    #[arg(long, value_name = "NAME")]
    service: Option<String>,
    /// Which of the service's processes or hosts this is: service.instance.id of what is
    /// exported (a fleet's windows told apart).
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// The build this run records, carried in the run file and exported as an attribute.
    #[arg(long, value_name = "NAME")]
    build: Option<String>,
    /// The workload this run records, carried and exported likewise.
    #[arg(long, value_name = "NAME")]
    workload: Option<String>,
    /// Do not follow child processes the target forks after attach.
    #[arg(long)]
    no_follow_children: bool,
    /// Without eBPF privileges, record what /proc and perf software counters give instead of
    /// failing.
    #[arg(long)]
    degraded: bool,
    /// Also count with perf software counters (task-clock, context-switches, cpu-migrations,
    /// page faults), as `perf stat` would, beside the eBPF figures. Off by default: a per-task
    /// perf counter costs the target about as much per context switch as all of switchyard's
    /// switch probes (see `just bench-overhead`). Always on in degraded mode, its only source.
    #[arg(long)]
    perf_counters: bool,
    /// Do not collect stacks (on-CPU, off-CPU, wakeup, syscall): counts only, lowest overhead.
    #[arg(long)]
    no_stacks: bool,
    /// On-CPU sampling frequency of the target's threads, Hz.
    #[arg(long, default_value_t = 99, value_name = "HZ")]
    freq: u64,
    /// Record off-CPU stacks only for blocks at least this long (e.g. 1us, 100us, 1ms).
    #[arg(long, default_value = "1us", value_parser = parse_duration)]
    min_block: Duration,
    /// Off-CPU stacks are sampled: a block this long or longer always gets its stacks, a
    /// shorter one with probability (its length ÷ this), its time weighted by the inverse so
    /// the flame graphs stay unbiased. 0 walks the stacks of every block (the most exact and
    /// the most costly on a switch-heavy target).
    #[arg(long, default_value = "100us", value_name = "DURATION", value_parser = parse_period)]
    offcpu_period: Duration,
    /// Which syscalls to record: `all`, `none`, or names (`read,write,futex`). Syscall
    /// tracepoints are host-wide: while any syscall is recorded, every task on the host takes
    /// the kernel's slower syscall path (see `just bench-overhead`); `none` spares it.
    #[arg(long, default_value = "all", value_name = "all|none|NAME,...", value_parser = parse_syscalls)]
    syscalls: Syscalls,
    /// Take the user stack of one syscall in N (1: every syscall; 0: none).
    #[arg(long, default_value_t = 16, value_name = "N")]
    syscall_stacks: u64,
    /// Entries in the kernel's stack maps; raise it when the run warns of collisions.
    #[arg(long, default_value_t = 16384, value_name = "N", value_parser = parse_stack_map_size)]
    stack_map_size: u32,
    /// How user stacks are walked: `cfi` (each object's .eh_frame/.debug_frame, frame
    /// pointers where a pc has none, e.g. JIT code) or `fp` (frame pointers only).
    #[arg(long, value_enum, default_value_t = UnwindArg::Cfi)]
    unwind: UnwindArg,
    /// Rows of the kernel's unwind table, shared by every object of the targets (8 bytes
    /// each; the default, 16 MiB, holds Node.js with room to spare); raise it when the run
    /// warns that a table did not fit.
    #[arg(long, default_value_t = 2 << 20, value_name = "N")]
    unwind_rows: u32,
    /// Time a function from entry to return (uprobe + uretprobe), e.g. a spin-lock acquire:
    /// SYMBOL in the target's executable, or SYMBOL@/path/to/binary-or-library; LABEL= names
    /// its figures (span.LABEL). Repeatable (at most 8). Not for Go binaries: return probes
    /// crash Go programs.
    #[arg(long = "uprobe-span", value_name = "[LABEL=]SYMBOL[@BINARY]")]
    uprobe_spans: Vec<String>,
    /// Record the Go runtime's GC cycles, stop-the-world pauses and mark assists of a Go
    /// target (entry-only uprobes on the unmodified binary).
    /// Go targets get this without asking: it is on when the executable has the Go runtime's
    /// symbols.
    #[arg(long, conflicts_with = "no_go_gc")]
    go_gc: bool,
    /// Do not record a Go target's GC.
    #[arg(long)]
    no_go_gc: bool,
    /// Also record a timeline: every switch of the target's threads with its state, the
    /// wakeups that ended them, syscalls slower than --timeline-syscalls, futex waits,
    /// timestamped stack samples and GC phases. The report draws per-thread state tracks whose
    /// time range re-filters the flame graphs; `switchyard report` writes trace.json for
    /// Perfetto or chrome://tracing.
    #[arg(long)]
    timeline: bool,
    /// The timeline's ring buffer (a power of two, 4K to 1G); events that do not fit before
    /// they are read (every 10 ms) are lost and counted.
    #[arg(long, default_value = "64M", value_name = "SIZE", value_parser = parse_ring_size)]
    timeline_buffer: u32,
    /// Syscalls at least this long go on the timeline.
    #[arg(long, default_value = "100us", value_name = "DURATION", value_parser = parse_period)]
    timeline_syscalls: Duration,
    /// The heap profile a dhat-instrumented target writes as it exits (dhat-heap.json in its
    /// working directory by default): read once the recording ends and attached to the run:
    /// allocations and bytes, per operation with a driver's result, the peak heap, and the
    /// allocation sites as a flame graph. A file that is not rewritten during the recording
    /// is an error (exit 2; the run is saved without it).
    #[arg(long, value_name = "FILE")]
    heap_profile: Option<PathBuf>,
    /// A workload driver's result file (switchyard-driver-result JSON) to attach to the run:
    /// operations for per-operation figures, and the latency the driver measured. Read when
    /// the recording ends (waiting up to 5 s for the driver to write it).
    #[arg(long, value_name = "FILE")]
    workload_result: Option<PathBuf>,
    /// Once the probes are attached and the target runs, write `recording <pid>` and a newline
    /// to this inherited file descriptor and close it: a start handshake for harnesses (the
    /// descriptor reaching end of file without that line means the recording never started).
    #[arg(long, value_name = "FD")]
    ready_fd: Option<i32>,
    /// Rows in each top-syscalls table of the summary.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// The command to spawn, with its arguments (after --).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum OtlpProtocolArg {
    Http,
    Grpc,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum UnwindArg {
    Cfi,
    Fp,
}

/// Entries of a stack map: at least 64, or nearly every stack would be lost to collisions.
fn parse_stack_map_size(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of entries"))?;
    if n < 64 {
        return Err(format!(
            "{n} entries cannot hold a recording's stacks (at least 64; the default is 16384)"
        ));
    }
    Ok(n)
}

/// A ring buffer size in bytes, from `4K`, `64M` or `1G` (binary units): a power of two from
/// 4 KiB (a page) to 1 GiB.
fn parse_ring_size(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 4K, 64M, 1G)"))?;
    let bytes = n << shift;
    if !(4096..=1 << 30).contains(&bytes) || !bytes.is_power_of_two() {
        return Err(format!(
            "`{s}`: the ring buffer must be a power of two from 4K to 1G"
        ));
    }
    Ok(bytes as u32)
}

/// The project's one duration grammar (a number and a unit), refusing zero.
/// A duration, or `0` for none.
fn parse_period(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    switchyard_model::duration::parse_duration(s).map_err(|e| e.to_string())
}

/// `all`, `none`, or syscall names separated by commas.
fn parse_syscalls(s: &str) -> Result<Syscalls, String> {
    match s.trim() {
        "all" => return Ok(Syscalls::All),
        "none" => return Ok(Syscalls::None),
        "" => return Err("no syscalls named (all, none, or names such as read,write)".into()),
        _ => {}
    }
    let mut numbers = Vec::new();
    for name in s.split(',').map(str::trim) {
        let nr = switchyard_model::syscall_nr(name)
            .ok_or_else(|| format!("`{name}` is not an x86_64 syscall name (e.g. read, futex)"))?;
        if !numbers.contains(&nr) {
            numbers.push(nr);
        }
    }
    Ok(Syscalls::Only(numbers))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    switchyard_model::duration::parse_positive_duration(s).map_err(|e| e.to_string())
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
            eprintln!("error: {err:#}");
            if let Some(hint) = fail::hint_for(&err) {
                eprintln!("hint: {hint}");
            }
            if let Some(log) = fail::verifier_log(&err) {
                eprintln!("{log}");
            }
            ExitCode::from(2)
        }
    }
}
