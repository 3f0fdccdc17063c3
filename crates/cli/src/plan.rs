//! `switchyard record`'s flags, checked once into a [`Plan`]: everything that can be refused is
//! refused here ([`crate::preflight`] checks them against the host), before a command is
//! forked or a probe attached.

use std::{
    fs::File,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Result;
use switchyard_loader::{Config, Span, StackConfig, Syscalls, TimelineConfig, Unwind};
use switchyard_model::TargetMode;

use crate::{
    args::{RecordArgs, UnwindArg},
    fail::hinted,
    preflight::{
        check_freq, check_output, check_pid, check_windows_dir, export_config, take_ready_fd,
    },
    spawn,
};

/// What to record, validated.
pub struct Plan {
    pub target: PlannedTarget,
    pub follow_children: bool,
    pub stacks: Option<StackConfig>,
    pub spans: Vec<Span>,
    /// The Go binary whose runtime is probed (`--go-gc`).
    pub go_gc: Option<PathBuf>,
    pub syscalls: Syscalls,
    /// How syscalls are timed (`--syscall-latency`, `--syscall-budget`).
    pub syscall_timing: switchyard_model::SyscallTiming,
    /// `--timeline`.
    pub timeline: Option<TimelineConfig>,
    /// `--ready-fd`, owned.
    pub ready: Option<File>,
    pub degraded: bool,
    /// `--perf-counters`.
    pub perf_counters: bool,
    pub duration: Option<Duration>,
    pub workload_result: Option<PathBuf>,
    /// `--ops N` or `--ops-file FILE`: the operations, when no driver result gives them.
    pub ops: Option<Ops>,
    /// `--heap-profile`.
    pub heap: Option<crate::heap::HeapPlan>,
    /// The run file; with --every, the windows' folder. `None`: export only.
    pub output: Option<PathBuf>,
    pub top: usize,
    /// `--every`: the windows' length.
    pub every: Option<Duration>,
    /// Where runs are exported, if anywhere.
    pub export: Option<switchyard_export::Config>,
    /// `service`, `build` and `workload`, as given.
    pub labels: std::collections::BTreeMap<String, String>,
    /// How secrets in the target's command line are redacted, as the run states it.
    pub redaction: switchyard_model::Redaction,
    /// `--redact PATTERN`, each.
    pub redact_patterns: Vec<regex::Regex>,
    /// The target's OpenTelemetry thread context: its TLS offset, and where it was found.
    pub thread_context: Option<(switchyard_loader::otel::TlsPlace, String)>,
}

/// Where the run's operation count comes from, without a driver's result.
pub enum Ops {
    /// `--ops N`.
    Count(u64),
    /// `--ops-file FILE`, read when the recording ends.
    File(PathBuf),
}

pub enum PlannedTarget {
    Pid(u32),
    /// A command, its program found in PATH; `hold` keeps it from exec until its libraries are
    /// mapped (CFI stacks need their tables from the first sample).
    Spawn {
        argv: Vec<String>,
        program: PathBuf,
        hold: bool,
    },
}

impl PlannedTarget {
    pub fn mode(&self) -> TargetMode {
        match self {
            PlannedTarget::Pid(_) => TargetMode::Pid,
            PlannedTarget::Spawn { .. } => TargetMode::Spawn,
        }
    }

    /// The target `--pid` or the command after `--` names, exactly one of them; a command's
    /// program is found in PATH.
    fn from_args(args: &mut RecordArgs) -> Result<PlannedTarget> {
        let cfi = args.unwind == UnwindArg::Cfi;
        match (args.pid, args.command.is_empty()) {
            (Some(pid), true) => Ok(PlannedTarget::Pid(check_pid(pid)?)),
            (None, false) => Ok(PlannedTarget::Spawn {
                program: spawn::resolve(&args.command[0])?,
                argv: std::mem::take(&mut args.command),
                hold: !args.no_stacks && cfi,
            }),
            _ => Err(hinted(
                "nothing to record",
                "give a running process with --pid N, or a command after --: `switchyard record -- ./server --port 9000`",
            )),
        }
    }

    /// The target's executable: the spawned program, or a live process's /proc/<pid>/exe
    /// (`hint` says what to do when it cannot be read).
    fn exe(&self, hint: &str) -> Result<PathBuf> {
        match self {
            PlannedTarget::Spawn { program, .. } => Ok(program.clone()),
            PlannedTarget::Pid(pid) => {
                std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| {
                    hinted(
                        format!("cannot read the executable of pid {pid}: {e}"),
                        hint,
                    )
                })
            }
        }
    }
}

/// What [`Plan::new`] found out by checking the flags against the host: the target, its
/// executable's symbols, files and descriptors, the sinks.
struct Checked {
    target: PlannedTarget,
    spans: Vec<Span>,
    go_gc: Option<PathBuf>,
    ready: Option<File>,
    heap: Option<crate::heap::HeapPlan>,
    output: Option<PathBuf>,
    export: Option<switchyard_export::Config>,
    redact_patterns: Vec<regex::Regex>,
    thread_context: Option<(switchyard_loader::otel::TlsPlace, String)>,
}

impl Plan {
    /// Checks `record`'s flags against each other and against the host, refusing what cannot
    /// be recorded.
    pub fn new(mut args: RecordArgs) -> Result<Plan> {
        let export = export_config(&args)?;
        let redact_patterns = redact_patterns(&args.redact)?;
        let output = output(&mut args)?;
        check_timeline_timing(&args)?;
        check_every(&args)?;
        if !args.no_stacks {
            check_freq(args.freq)?;
        }
        let ready = args.ready_fd.map(take_ready_fd).transpose()?;
        let target = PlannedTarget::from_args(&mut args)?;
        let spans = args
            .uprobe_spans
            .iter()
            .map(|spec| {
                span(spec, || {
                    target.exe("give the binary explicitly: --uprobe-span SYMBOL@/path/to/binary")
                })
            })
            .collect::<Result<_>>()?;
        let go_gc = go_gc(&args, &target)?;
        let thread_context = thread_context(&target);
        let heap = args
            .heap_profile
            .take()
            .map(crate::heap::HeapPlan::new)
            .transpose()?;
        let checked = Checked {
            thread_context,
            target,
            spans,
            go_gc,
            ready,
            heap,
            output,
            export,
            redact_patterns,
        };
        Ok(Plan::from_args(args, checked))
    }

    /// `record --pid PID` with every other flag at its default, unchecked (no spans, no Go
    /// GC, nothing written or exported): `doctor` tries the very probes `record` attaches.
    pub fn defaults(pid: u32) -> Plan {
        let checked = Checked {
            target: PlannedTarget::Pid(pid),
            spans: Vec::new(),
            go_gc: None,
            ready: None,
            heap: None,
            output: None,
            export: None,
            redact_patterns: Vec::new(),
            thread_context: None,
        };
        Plan::from_args(RecordArgs::default(), checked)
    }

    /// The plan of checked flags; the rest is taken as given.
    fn from_args(args: RecordArgs, checked: Checked) -> Plan {
        let timing = syscall_timing(&args);
        let Checked {
            target,
            spans,
            go_gc,
            ready,
            heap,
            output,
            export,
            redact_patterns,
            thread_context,
        } = checked;
        let cfi = args.unwind == UnwindArg::Cfi;
        let stacks = (!args.no_stacks).then_some(StackConfig {
            oncpu_hz: args.freq,
            min_block_ns: args.min_block.as_nanos() as u64,
            syscall_every: args.syscall_stacks,
            syscall_stacks_per_s: args.syscall_stack_rate,
            stack_map_size: args.stack_map_size,
            offcpu_period_ns: args.offcpu_period.as_nanos() as u64,
            unwind: if cfi {
                Unwind::Cfi
            } else {
                Unwind::FramePointers
            },
            unwind_rows: args.unwind_rows,
            python_frames: !args.no_python_frames,
        });
        Plan {
            target,
            follow_children: !args.no_follow_children,
            stacks,
            spans,
            go_gc,
            syscalls: args.syscalls,
            syscall_timing: timing,
            timeline: args.timeline.then_some(TimelineConfig {
                buffer_bytes: args.timeline_buffer,
                syscall_ns: args.timeline_syscalls.as_nanos() as u64,
            }),
            ready,
            degraded: args.degraded,
            perf_counters: args.perf_counters,
            duration: args.duration,
            workload_result: args.workload_result,
            ops: match (args.ops, args.ops_file) {
                (Some(n), _) => Some(Ops::Count(n)),
                (None, Some(path)) => Some(Ops::File(path)),
                (None, None) => None,
            },
            heap,
            output,
            top: args.top,
            every: args.every,
            export,
            labels: [
                ("service", args.service),
                ("instance", args.instance),
                ("build", args.build),
                ("workload", args.workload),
            ]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), v?)))
            .collect(),
            redaction: switchyard_model::Redaction {
                off: args.no_redact,
                added_rules: redact_patterns.len() as u32,
            },
            redact_patterns,
            thread_context,
        }
    }

    /// The target's command line as the run keeps it: its secrets redacted, unless
    /// `--no-redact` ([`switchyard_model::redact`]).
    pub fn recorded_command(&self, argv: &[String]) -> Vec<String> {
        if self.redaction.off {
            return argv.to_vec();
        }
        let mut words = switchyard_model::redact::command(argv);
        for w in &mut words {
            for p in &self.redact_patterns {
                *w = redact_matches(p, w);
            }
        }
        words
    }

    /// What the loader is asked to attach to `tgid`, the target (for a command, forked and
    /// waiting before exec).
    pub fn probe_config(&self, tgid: u32) -> Config {
        Config {
            tgid,
            before_exec: self.target.mode() == TargetMode::Spawn,
            follow_children: self.follow_children,
            stacks: self.stacks.clone(),
            spans: self.spans.clone(),
            go_gc: self.go_gc.clone(),
            syscalls: self.syscalls.clone(),
            syscall_latency: self.syscall_timing.every,
            syscall_budget: self.syscall_timing.budget_per_s,
            timeline: self.timeline,
            thread_context: self.thread_context.clone(),
        }
    }
}

/// `--redact PATTERN`, each compiled.
fn redact_patterns(patterns: &[String]) -> Result<Vec<regex::Regex>> {
    patterns
        .iter()
        .map(|p| {
            regex::Regex::new(p).map_err(|e| {
                hinted(
                    format!(
                        "--redact: not a regular expression ({})",
                        e.to_string().lines().last().unwrap_or("").trim()
                    ),
                    "give a regular expression, e.g. --redact 'sk-[A-Za-z0-9]+' or --redact 'session=(\\w+)'",
                )
            })
        })
        .collect()
}

/// Where the run is written, checked: `-o`, else `run.json`, or with `--every` the windows'
/// folder (`windows`); nowhere with `--export-only`, which `-o` contradicts.
fn output(args: &mut RecordArgs) -> Result<Option<PathBuf>> {
    Ok(match (args.export_only, args.every, args.output.take()) {
        (true, _, Some(path)) => {
            return Err(hinted(
                format!(
                    "--export-only writes no run file, but -o {} names one",
                    path.display()
                ),
                "drop -o, or drop --export-only to keep the run files too",
            ));
        }
        (true, _, None) => None,
        (false, Some(_), path) => {
            Some(check_windows_dir(path.unwrap_or_else(|| "windows".into()))?)
        }
        (false, None, path) => {
            let path = path.unwrap_or_else(|| "run.json".into());
            check_output(&path)?;
            Some(path)
        }
    })
}

/// Refuses `--timeline` with a flag that leaves calls untimed: the timeline needs every one.
fn check_timeline_timing(args: &RecordArgs) -> Result<()> {
    // A flag that leaves calls untimed: (the flag, as given).
    let sampled = match (args.syscall_latency, args.syscall_budget) {
        (Some(n), _) if n != 1 => Some(("--syscall-latency", n)),
        (_, Some(b)) if b > 0 => Some(("--syscall-budget", b)),
        _ => None,
    };
    if args.timeline
        && let Some((flag, value)) = sampled
    {
        return Err(hinted(
            format!(
                "{flag} {value} cannot be combined with --timeline: the timeline shows every syscall slower than --timeline-syscalls, and only a timed call has a length"
            ),
            format!("drop {flag} to time every call, or record without --timeline"),
        ));
    }
    Ok(())
}

/// Refuses `--every` with a flag a window cannot hold yet.
fn check_every(args: &RecordArgs) -> Result<()> {
    if args.every.is_none() {
        return Ok(());
    }
    for (given, flag, why) in [
        (
            args.timeline,
            "--timeline",
            "its events are one stream for the whole run",
        ),
        (
            args.heap_profile.is_some(),
            "--heap-profile",
            "dhat writes one profile as the target exits",
        ),
        (
            args.workload_result.is_some(),
            "--workload-result",
            "a driver writes one result for the whole run",
        ),
        (
            args.ops.is_some(),
            "--ops",
            "the count is for the whole run, not a window",
        ),
        (
            args.ops_file.is_some(),
            "--ops-file",
            "the count is for the whole run, not a window",
        ),
        (
            args.degraded,
            "--degraded",
            "windows are cut from the kernel side's maps",
        ),
    ] {
        if given {
            return Err(hinted(
                format!("--every cannot be combined with {flag}: {why}"),
                format!("record without --every to use {flag}, or drop {flag}"),
            ));
        }
    }
    Ok(())
}

/// The Go binary whose GC is recorded: the target's executable with `--go-gc`, and without
/// it a Go program's unless `--no-go-gc`.
fn go_gc(args: &RecordArgs, target: &PlannedTarget) -> Result<Option<PathBuf>> {
    if args.go_gc {
        return Ok(Some(
            target.exe("record as root, or spawn the program under switchyard")?,
        ));
    }
    if args.no_go_gc {
        return Ok(None);
    }
    // A Go program's GC is recorded without asking, as far as its symbols allow.
    Ok(target
        .exe("")
        .ok()
        .filter(|p| switchyard_runtimes::go::has_gc_runtime(p))
        .inspect(|p| {
            say!(
                "switchyard: {} is a Go program: recording its GC (--no-go-gc to skip)",
                p.display()
            )
        }))
}

/// An OpenTelemetry thread context the program publishes (OTEP 4947), read at every switch:
/// its executable defines one, or, in a running process, a library it loaded does. A program
/// spawned here has loaded no library yet.
fn thread_context(target: &PlannedTarget) -> Option<(switchyard_loader::otel::TlsPlace, String)> {
    let found = match target {
        PlannedTarget::Pid(pid) => switchyard_loader::otel::thread_context_of(*pid),
        PlannedTarget::Spawn { .. } => target
            .exe("")
            .map_err(|e| e.to_string())
            .and_then(|p| switchyard_loader::otel::executable_context(&p, &p)),
    };
    // Said in the summary, with what it found: a binary may define the variable and never
    // point it anywhere.
    found.unwrap_or_else(|e| {
        say!("switchyard: warning: its thread context cannot be read: {e}");
        None
    })
}

/// What a timed call is drawn from beyond its thread's budget, by default.
pub const BEYOND_BUDGET: u32 = 16;
/// Timed calls a second each thread gets by default before its calls are drawn.
pub const DEFAULT_BUDGET: u32 = 2_000;

/// How syscalls are timed: by budget unless `--syscall-latency` says otherwise, or
/// `--timeline` needs every call.
fn syscall_timing(args: &RecordArgs) -> switchyard_model::SyscallTiming {
    let every = args
        .syscall_latency
        .unwrap_or(if args.timeline { 1 } else { BEYOND_BUDGET });
    let budget = match (args.syscall_latency, args.syscall_budget) {
        _ if every <= 1 => 0,
        (_, Some(b)) => b,
        (None, None) => DEFAULT_BUDGET,
        (Some(_), None) => 0,
    };
    switchyard_model::SyscallTiming {
        every,
        budget_per_s: budget,
    }
}

/// `word` with what `pattern` matches replaced by the redaction mark: the first group of each
/// match when the pattern has one, else the whole match.
fn redact_matches(pattern: &regex::Regex, word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut last = 0;
    for caps in pattern.captures_iter(word) {
        let Some(m) = caps.get(1).or_else(|| caps.get(0)) else {
            continue;
        };
        if m.start() < last || m.is_empty() {
            continue;
        }
        out.push_str(&word[last..m.start()]);
        out.push_str(switchyard_model::redact::REDACTED);
        last = m.end();
    }
    out.push_str(&word[last..]);
    out
}

/// `--uprobe-span [LABEL=]SYMBOL[@BINARY]`: the binary defaults to the target's executable.
fn span(spec: &str, exe: impl FnOnce() -> Result<PathBuf>) -> Result<Span> {
    let (label, rest) = match spec.split_once('=') {
        Some((l, r)) => (Some(l.to_string()), r),
        None => (None, spec),
    };
    let (symbol, binary) = match rest.split_once('@') {
        Some((s, b)) => (s.to_string(), PathBuf::from(b)),
        None => (rest.to_string(), exe()?),
    };
    if symbol.is_empty() {
        return Err(hinted(
            format!("`--uprobe-span {spec}` names no symbol"),
            "use --uprobe-span [LABEL=]SYMBOL[@/path/to/binary]",
        ));
    }
    if !Path::new(&binary).exists() {
        return Err(hinted(
            format!(
                "`--uprobe-span {spec}`: {} does not exist",
                binary.display()
            ),
            "give the path of the binary or shared library that defines the symbol",
        ));
    }
    // A return probe swaps the return address on the stack for the kernel's trampoline, and Go
    // walks a goroutine's stack by its return addresses when it copies it to grow it (and when
    // the GC scans it): the program would die with "unknown caller pc". Go code is never given
    // one: its span is entered past the stack check and returned from at each RET (plain
    // probes), keyed by the goroutine. A C library a Go program loads is not Go code.
    let go = switchyard_runtimes::go::has_gc_runtime(&binary);
    let symbol = span_symbol(spec, &binary, &symbol)?;
    let label = label.unwrap_or_else(|| short_name(&symbol));
    Ok(Span {
        label,
        symbol,
        binary,
        go,
    })
}

/// A symbol as people write it: a Rust symbol demangled without its hash (`demo::work`).
fn demangled(raw: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(raw))
}

/// The name a span goes by when not given one: the function's own name, not a mangled one.
fn short_name(raw: &str) -> String {
    let d = demangled(raw);
    d.rsplit("::").next().unwrap_or(&d).to_string()
}

/// The symbol a span's probe is placed on, checked before anything is started: `symbol` as
/// the binary's symbol tables have it, or a Rust function's path as written (`work`,
/// `demo::work`), found by demangling. A function the tables do not have is refused,
/// saying why (a stripped binary, a function inlined into its callers, a misspelling) and
/// naming the closest functions that are there.
fn span_symbol(spec: &str, binary: &Path, symbol: &str) -> Result<String> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
    let read = || -> Option<Vec<u8>> { std::fs::read(binary).ok() };
    let Some(data) = read() else {
        // Unreadable here: the probe's attach says why.
        return Ok(symbol.to_string());
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Err(hinted(
            format!("`--span {spec}`: {} is not an ELF binary", binary.display()),
            "give the path of the executable or shared library that defines the function",
        ));
    };
    let functions: Vec<String> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect();
    if functions.iter().any(|f| f == symbol) {
        return Ok(symbol.to_string());
    }
    // A Rust path, or its last part: one function only.
    let suffix = format!("::{symbol}");
    let mut matches: Vec<&String> = functions
        .iter()
        .filter(|f| {
            let d = demangled(f);
            d == symbol || d.ends_with(&suffix)
        })
        .collect();
    matches.sort();
    matches.dedup();
    if matches.len() == 1 {
        return Ok(matches[0].clone());
    }
    if matches.len() > 1 {
        let names: Vec<String> = matches.iter().take(4).map(|m| demangled(m)).collect();
        return Err(hinted(
            format!(
                "`--span {spec}`: {} functions of {} are named `{symbol}`",
                matches.len(),
                binary.display()
            ),
            format!("name one by its path: {}", names.join(", ")),
        ));
    }
    let in_debug_info = file
        .section_by_name(".debug_str")
        .and_then(|s| s.uncompressed_data().ok())
        .is_some_and(|d| {
            let needle = [b"\0", symbol.as_bytes(), b"\0"].concat();
            d.windows(needle.len()).any(|w| w == needle.as_slice())
        });
    let stripped = file.section_by_name(".symtab").is_none();
    let why = if in_debug_info {
        "is named in its debug information but has no symbol: it was inlined into its callers"
            .to_string()
    } else if stripped {
        "is stripped (no symbol table), and its dynamic symbols do not have it".to_string()
    } else {
        "has no function of that name".to_string()
    };
    let closest = closest(symbol, &functions);
    let hint = if in_debug_info {
        "keep it out of line (#[inline(never)] in Rust, __attribute__((noinline)) in C) and rebuild"
            .to_string()
    } else if stripped && closest.is_empty() {
        "record a build with its symbol table (not stripped), or give the library that defines the function (SYMBOL@/path/to/lib.so)".to_string()
    } else if closest.is_empty() {
        "list its functions with `nm BINARY` (Rust needs #[no_mangle] or its path, e.g. crate::function)".to_string()
    } else {
        format!("the closest: {}", closest.join(", "))
    };
    Err(hinted(
        format!("`--span {spec}`: {} {why}", binary.display()),
        hint,
    ))
}

/// The functions whose names (demangled, or their last part) are closest to `wanted`, at
/// most three.
fn closest(wanted: &str, functions: &[String]) -> Vec<String> {
    let mut scored: Vec<(f64, String)> = functions
        .iter()
        .map(|f| {
            let d = demangled(f);
            let last = d.rsplit("::").next().unwrap_or(&d).to_string();
            let score = strsim::jaro_winkler(wanted, &last).max(strsim::jaro_winkler(wanted, &d));
            (score, d)
        })
        .filter(|(score, _)| *score >= 0.85)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, d)| d).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_take_a_label_a_symbol_and_a_binary() {
        // This test's own executable has a symbol table, and `main`.
        let exe = std::env::current_exe().unwrap();
        let s = span(&format!("entry=main@{}", exe.display()), || unreachable!()).unwrap();
        assert_eq!(
            (s.label.as_str(), s.symbol.as_str(), s.binary.as_path()),
            ("entry", "main", exe.as_path())
        );
        let s = span("main", || Ok(exe.clone())).unwrap();
        assert_eq!((s.label.as_str(), s.symbol.as_str()), ("main", "main"));
        let e = span("x=@/bin/sh", || unreachable!()).unwrap_err();
        assert!(e.to_string().contains("names no symbol"), "{e}");
        let e = span("f@/nonexistent/lib.so", || unreachable!()).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = span("mian", || Ok(exe.clone())).unwrap_err();
        assert!(
            e.to_string().contains("has no function of that name"),
            "{e}"
        );
    }

    #[test]
    fn a_rust_symbol_goes_by_its_function_name() {
        let raw = "_ZN15switchyard_demo5burst17hb6163c3d85a56706E";
        assert_eq!(demangled(raw), "switchyard_demo::burst");
        assert_eq!(short_name(raw), "burst");
        assert_eq!(short_name("handle_request"), "handle_request");
        let functions = vec![raw.to_string(), "handle_request".to_string()];
        assert_eq!(closest("handle_requst", &functions), ["handle_request"]);
        assert_eq!(closest("brust", &functions), ["switchyard_demo::burst"]);
        assert!(closest("zzz", &functions).is_empty());
    }
}
