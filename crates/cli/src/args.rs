//! `switchyard record`'s flags as clap reads them, and their defaults: [`crate::plan`] turns
//! them into a plan, and `doctor` tries the probes with the same defaults.

use std::{path::PathBuf, time::Duration};

use clap::Parser as _;
use switchyard_loader::Syscalls;

#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// Attach to this running process (all its threads).
    #[arg(short, long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// Stop after this long (e.g. 10s, 500ms, 2m); default: until the target exits or Ctrl-C.
    #[arg(short, long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Where to write the run file (default: run.json); with --every, the folder of the
    /// windows' run files (default: windows).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Cut the recording into windows this long (e.g. 10s, 1m), each a complete run with its
    /// own start and end (counts, histograms, stacks, GC events), written as run-<n>.json in
    /// the -o folder and/or exported. Nothing is lost or counted twice between windows, and
    /// memory stays bounded however long it runs.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub every: Option<Duration>,
    /// Write no run files, only export them (needs --otlp or --pyroscope).
    #[arg(long)]
    pub export_only: bool,
    /// Send the run (each window, with --every) to an OpenTelemetry Collector as OTLP
    /// profiles: http://HOST:4318 for OTLP/HTTP, http://HOST:4317 or grpc://HOST:4317 for
    /// gRPC. Sending never blocks the recording: a bounded queue, retries with backoff, and
    /// every window not delivered is counted in the summary.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// The OTLP transport (default: OTEL_EXPORTER_OTLP_PROTOCOL; else grpc for port 4317 or
    /// a grpc:// URL, else http). Without --otlp, the exporter follows OpenTelemetry's
    /// variables: OTEL_EXPORTER_OTLP_ENDPOINT (or …_PROFILES_ENDPOINT, used as it is),
    /// …_HEADERS, …_PROTOCOL (grpc, http/protobuf), …_TIMEOUT (ms), …_COMPRESSION (gzip),
    /// …_CERTIFICATE, …_CLIENT_CERTIFICATE and …_CLIENT_KEY (TLS to an https endpoint),
    /// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; a flag wins over them.
    #[arg(long, value_enum, value_name = "PROTOCOL")]
    pub otlp_protocol: Option<OtlpProtocolArg>,
    /// A header sent with every OTLP request (e.g. authorization=Bearer%20TOKEN; the value
    /// percent-encoded); over OTEL_EXPORTER_OTLP_HEADERS for the same name. Repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    pub otlp_header: Vec<String>,
    /// Push the run (each window) to Pyroscope as pprof: the server's URL
    /// (POST /ingest?name=SERVICE{build=…,workload=…}&format=pprof).
    #[arg(long, value_name = "URL")]
    pub pyroscope: Option<String>,
    /// Windows waiting to be sent to each sink, at most; one more is dropped and counted.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub export_queue: usize,
    /// service.name of what is exported (default: the target's program name).
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Which of the service's processes or hosts this is: service.instance.id of what is
    /// exported (a fleet's windows told apart).
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
    /// The build this run records, carried in the run file and exported as an attribute.
    #[arg(long, value_name = "NAME")]
    pub build: Option<String>,
    /// The workload this run records, carried and exported likewise.
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
    /// Do not follow child processes the target forks after attach.
    #[arg(long)]
    pub no_follow_children: bool,
    /// Without eBPF privileges, record what /proc and perf software counters give instead of
    /// failing.
    #[arg(long)]
    pub degraded: bool,
    /// Also count with perf software counters (task-clock, context-switches, cpu-migrations,
    /// page faults), as `perf stat` would, beside the eBPF figures. Off by default: a per-task
    /// perf counter costs the target about as much per context switch as all of switchyard's
    /// switch probes (see `just bench-overhead`). Always on in degraded mode, its only source.
    #[arg(long)]
    pub perf_counters: bool,
    /// Do not collect stacks (on-CPU, off-CPU, wakeup, syscall): counts only, lowest overhead.
    #[arg(long)]
    pub no_stacks: bool,
    /// On-CPU sampling frequency of the target's threads, Hz (at least 1, at most the host's
    /// /proc/sys/kernel/perf_event_max_sample_rate).
    #[arg(long, default_value_t = 99, value_name = "HZ", value_parser = parse_freq)]
    pub freq: u64,
    /// Record off-CPU stacks only for blocks at least this long (e.g. 1us, 100us, 1ms).
    #[arg(long, default_value = "1us", value_parser = parse_duration)]
    pub min_block: Duration,
    /// Off-CPU stacks are sampled: a block this long or longer always gets its stacks, a
    /// shorter one with probability (its length ÷ this), its time weighted by the inverse so
    /// the flame graphs stay unbiased. 0 walks the stacks of every block (the most exact and
    /// the most costly on a switch-heavy target).
    #[arg(long, default_value = "100us", value_name = "DURATION", value_parser = parse_period)]
    pub offcpu_period: Duration,
    /// Which syscalls to record: `all`, `none`, or names (`read,write,futex`). Syscall
    /// tracepoints are host-wide: while any syscall is recorded, every task on the host takes
    /// the kernel's slower syscall path (see `just bench-overhead`); `none` spares it.
    #[arg(long, default_value = "all", value_name = "all|none|NAME,...", value_parser = parse_syscalls)]
    pub syscalls: Syscalls,
    /// Time one syscall in about N per thread (1: every call; 0: none). Every call is still
    /// counted, with its errno; only the latency figures come from the timed ones, the time
    /// in syscalls then estimated from their mean. Timing a call reads the clock at its entry
    /// and at its exit, most of what recording a syscall costs; `--syscall-latency 16` leaves
    /// a busy server close to what counting alone costs (see `just bench-overhead`). Futex
    /// waits are always timed, as lock waits are totals.
    ///
    /// Not given: timing by budget. Each thread's calls are all timed up to
    /// `--syscall-budget` a second, and one in 16 beyond it, drawn at random and weighted by
    /// 16: a rare slow call is timed exactly, a hot loop pays for counting. With `--timeline`,
    /// every call.
    #[arg(long, value_name = "N")]
    pub syscall_latency: Option<u32>,
    /// Timed calls a second each thread gets, every one, before its calls are drawn (one in
    /// 16, or one in `--syscall-latency N`); 0: no budget. Applies by default, and with
    /// `--syscall-latency N` only when given.
    #[arg(long, value_name = "PER_S")]
    pub syscall_budget: Option<u32>,
    /// Take the user stack of one syscall in N (1: every syscall; 0: none).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub syscall_stacks: u64,
    /// At most this many syscall stacks a second on each CPU (0: no limit; ignored with
    /// `--syscall-stacks 1`). Under a faster syscall rate one call in more than N has its stack
    /// taken, and each stack counts for the calls it stands for: the counts by stack stay
    /// unbiased, and a busy server pays for a bounded number of walks.
    #[arg(long, default_value_t = 1000, value_name = "PER_SECOND")]
    pub syscall_stack_rate: u64,
    /// Entries in the kernel's stack maps; raise it when the run warns of collisions.
    #[arg(long, default_value_t = 16384, value_name = "N", value_parser = parse_stack_map_size)]
    pub stack_map_size: u32,
    /// How user stacks are walked: `cfi` (each object's .eh_frame/.debug_frame, frame
    /// pointers where a pc has none, e.g. JIT code) or `fp` (frame pointers only).
    #[arg(long, value_enum, default_value_t = UnwindArg::Cfi)]
    pub unwind: UnwindArg,
    /// Rows of the kernel's unwind table, shared by every object of the targets (8 bytes
    /// each; the default, 16 MiB, holds Node.js with room to spare); raise it when the run
    /// warns that a table did not fit.
    #[arg(long, default_value_t = 2 << 20, value_name = "N", value_parser = parse_unwind_rows)]
    pub unwind_rows: u32,
    /// A span: one request, timed from a function's entry to its return (uprobe +
    /// uretprobe) on one thread, and measured one by one: every instance's duration goes into
    /// a histogram, and the slowest instances (and a sample of the typical ones) keep their
    /// anatomy: time on CPU, waiting for a CPU and who held it, blocked by stack and waker.
    /// SYMBOL in the target's executable, or SYMBOL@/path/to/binary-or-library; LABEL= names
    /// its figures (span.LABEL). Repeatable (at most 8). While the function runs, the return
    /// probe replaces its return address on the stack, in every process running the binary:
    /// a symbol in a Go binary is refused, since Go walks and copies goroutine stacks by their
    /// return addresses and would crash (a C library that a Go program loads can be timed);
    /// and a C++ exception or Rust panic unwinding through the function aborts the process.
    #[arg(
        long = "span",
        visible_alias = "uprobe-span",
        value_name = "[LABEL=]SYMBOL[@BINARY]"
    )]
    pub uprobe_spans: Vec<String>,
    /// Record the Go runtime's GC cycles, stop-the-world pauses and mark assists of a Go
    /// target (entry-only uprobes on the unmodified binary).
    /// Go targets get this without asking: it is on when the executable has the Go runtime's
    /// symbols.
    #[arg(long, conflicts_with = "no_go_gc")]
    pub go_gc: bool,
    /// Do not record a Go target's GC.
    #[arg(long)]
    pub no_go_gc: bool,
    /// Leave CPython frames out of a Python target's stacks (3.11 and 3.12 are recognised
    /// from the interpreter they run, with no flag in the target; their frames stand in
    /// place of the `_PyEval_EvalFrameDefault` call that runs them).
    #[arg(long)]
    pub no_python_frames: bool,
    /// Also record a timeline: every switch of the target's threads with its state, the
    /// wakeups that ended them, syscalls slower than --timeline-syscalls, futex waits,
    /// timestamped stack samples and GC phases. The report draws per-thread state tracks whose
    /// time range re-filters the flame graphs; `switchyard report` writes trace.json for
    /// Perfetto or chrome://tracing.
    #[arg(long)]
    pub timeline: bool,
    /// The timeline's ring buffer (a power of two, 4K to 1G); events that do not fit before
    /// they are read (every 10 ms) are lost and counted.
    #[arg(long, default_value = "64M", value_name = "SIZE", value_parser = parse_ring_size)]
    pub timeline_buffer: u32,
    /// Syscalls at least this long go on the timeline.
    #[arg(long, default_value = "100us", value_name = "DURATION", value_parser = parse_period)]
    pub timeline_syscalls: Duration,
    /// The heap profile a dhat-instrumented target writes as it exits (dhat-heap.json in its
    /// working directory by default): read once the recording ends and attached to the run:
    /// allocations and bytes, per operation with a driver's result, the peak heap, and the
    /// allocation sites as a flame graph. A file that is not rewritten during the recording
    /// is an error (exit 2; the run is saved without it).
    #[arg(long, value_name = "FILE")]
    pub heap_profile: Option<PathBuf>,
    /// A workload driver's result file (switchyard-driver-result JSON) to attach to the run:
    /// operations for per-operation figures, and the latency the driver measured. Read when
    /// the recording ends (waiting up to 5 s for the driver to write it).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["ops", "ops_file"])]
    pub workload_result: Option<PathBuf>,
    /// Operations the load completed during the recording (redis-benchmark's -n, wrk's
    /// requests), for per-operation figures when no driver writes a result file.
    #[arg(long, value_name = "N", value_parser = parse_ops, conflicts_with = "ops_file")]
    pub ops: Option<u64>,
    /// A file holding the number of operations the load completed (one whole number, blank
    /// lines and spaces around it allowed), read when the recording ends (waiting up to 5 s
    /// for it to appear): for a load whose count is known only at its end.
    #[arg(long, value_name = "FILE")]
    pub ops_file: Option<PathBuf>,
    /// Once the probes are attached and the target runs, write `recording <pid>` and a newline
    /// to this inherited file descriptor and close it: a start handshake for harnesses (the
    /// descriptor reaching end of file without that line means the recording never started).
    #[arg(long, value_name = "FD")]
    pub ready_fd: Option<i32>,
    /// Keep the target's command line in the run file as it is. By default, what looks like a
    /// secret in it (the value of a flag named like --password, --token or --api-key, a
    /// PASSWORD=… word, a URL's user:password@) is recorded as [redacted], since the line shows
    /// in every report, profile and export of the run.
    #[arg(long, conflicts_with = "redact")]
    pub no_redact: bool,
    /// Also redact what this regular expression matches in the target's command line (its
    /// first group only, when it has one: `--redact 'session=(\w+)'`). Repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub redact: Vec<String>,
    /// Rows in each top-syscalls table of the summary (at least 1).
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = parse_top)]
    pub top: usize,
    /// Say where the start of the recording spends its time (checking the flags, forking,
    /// each step of loading and attaching the probes), before it begins.
    #[arg(short, long)]
    pub verbose: bool,
    /// The command to spawn, with its arguments (after --).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpProtocolArg {
    Http,
    Grpc,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnwindArg {
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

/// A count that must be at least 1: `what` names it in the error, `zero` says what 0 would do.
fn parse_at_least_one<T: std::str::FromStr + PartialEq + From<u8>>(
    s: &str,
    what: &str,
    zero: &str,
) -> Result<T, String> {
    let n: T = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number of {what}"))?;
    if n == T::from(0) {
        return Err(format!("0 {what} {zero}"));
    }
    Ok(n)
}

/// On-CPU samples a second: at least 1 (the host's maximum is checked before recording, see
/// `preflight::check_freq`).
fn parse_freq(s: &str) -> Result<u64, String> {
    parse_at_least_one(
        s,
        "Hz",
        "takes no on-CPU sample (at least 1; the default is 99; --no-stacks records no stacks at all)",
    )
}

/// Rows of the kernel's unwind table: at least 1.
fn parse_unwind_rows(s: &str) -> Result<u32, String> {
    parse_at_least_one(
        s,
        "rows",
        "hold no unwind table (at least 1; the default is 2097152; --unwind fp needs none)",
    )
}

/// Rows of each top-syscalls table: at least 1.
fn parse_top(s: &str) -> Result<usize, String> {
    parse_at_least_one(
        s,
        "rows",
        "show an empty table (at least 1; the default is 10)",
    )
}

/// A number of operations, 1 or more: per-operation figures divide by it.
pub(crate) fn parse_ops(s: &str) -> Result<u64, String> {
    parse_at_least_one(s, "operations", "give no per-operation figure (at least 1)")
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

/// `switchyard record` with no flags: what every flag defaults to.
#[derive(clap::Parser)]
struct Defaults {
    #[command(flatten)]
    args: RecordArgs,
}

impl Default for RecordArgs {
    /// The defaults clap gives the flags, so nothing else repeats them.
    fn default() -> RecordArgs {
        Defaults::parse_from(["record"]).args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_flags_defaults() {
        let d = RecordArgs::default();
        assert_eq!(
            (d.stack_map_size, d.unwind_rows, d.freq),
            (16384, 2 << 20, 99)
        );
        assert_eq!(d.unwind, UnwindArg::Cfi);
        assert!(d.pid.is_none() && d.command.is_empty());
    }

    #[test]
    fn zero_is_refused_where_it_would_record_or_show_nothing() {
        let parse = |flags: &[&str]| {
            Defaults::try_parse_from(["record"].iter().chain(flags))
                .map(|d| d.args)
                .map_err(|e| e.to_string())
        };
        for (flag, needle) in [
            ("--freq", "0 Hz takes no on-CPU sample"),
            ("--unwind-rows", "0 rows hold no unwind table"),
            ("--top", "0 rows show an empty table"),
        ] {
            let e = parse(&[flag, "0"]).err().unwrap_or_default();
            assert!(e.contains(needle), "{flag} 0: {e}");
            let e = parse(&[flag, "lots"]).err().unwrap_or_default();
            assert!(e.contains("not a whole number"), "{flag} lots: {e}");
        }
        let d = parse(&["--freq", "1", "--unwind-rows", "1", "--top", "1"]).unwrap();
        assert_eq!((d.freq, d.unwind_rows, d.top), (1, 1, 1));
    }
}
