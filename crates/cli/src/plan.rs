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
    /// `--syscall-latency`.
    pub syscall_latency: u32,
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
    /// Secrets in the target's command line are redacted (no `--no-redact`).
    pub redact: bool,
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
}

impl Plan {
    pub fn new(mut args: RecordArgs) -> Result<Plan> {
        let export = export_config(&args)?;
        let output = match (args.export_only, args.every, args.output.take()) {
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
        };
        if args.timeline && args.syscall_latency != 1 {
            return Err(hinted(
                format!(
                    "--syscall-latency {} cannot be combined with --timeline: the timeline shows every syscall slower than --timeline-syscalls, and only a timed call has a length",
                    args.syscall_latency
                ),
                "drop --syscall-latency to time every call, or record without --timeline",
            ));
        }
        if args.every.is_some() {
            // What a window cannot hold yet.
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
        }
        if !args.no_stacks {
            check_freq(args.freq)?;
        }
        let ready = args.ready_fd.map(take_ready_fd).transpose()?;
        let cfi = args.unwind == UnwindArg::Cfi;
        let target = match (args.pid, args.command.is_empty()) {
            (Some(pid), true) => PlannedTarget::Pid(check_pid(pid)?),
            (None, false) => PlannedTarget::Spawn {
                program: spawn::resolve(&args.command[0])?,
                argv: std::mem::take(&mut args.command),
                hold: !args.no_stacks && cfi,
            },
            _ => {
                return Err(hinted(
                    "nothing to record",
                    "give a running process with --pid N, or a command after --: `switchyard record -- ./server --port 9000`",
                ));
            }
        };
        // The target's executable: the spawned program, or a live process's /proc/<pid>/exe.
        let exe = |hint: &str| -> Result<PathBuf> {
            match &target {
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
        };
        let spans = args
            .uprobe_spans
            .iter()
            .map(|spec| {
                span(spec, || {
                    exe("give the binary explicitly: --uprobe-span SYMBOL@/path/to/binary")
                })
            })
            .collect::<Result<_>>()?;
        let go_gc = if args.go_gc {
            Some(exe(
                "record as root, or spawn the program under switchyard",
            )?)
        } else if args.no_go_gc {
            None
        } else {
            // A Go program's GC is recorded without asking, as far as its symbols allow.
            exe("").ok().filter(|p| has_go_runtime(p)).inspect(|p| {
                say!(
                    "switchyard: {} is a Go program: recording its GC (--no-go-gc to skip)",
                    p.display()
                )
            })
        };
        let heap = args
            .heap_profile
            .take()
            .map(crate::heap::HeapPlan::new)
            .transpose()?;
        let checked = Checked {
            target,
            spans,
            go_gc,
            ready,
            heap,
            output,
            export,
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
        };
        Plan::from_args(RecordArgs::default(), checked)
    }

    /// The plan of checked flags; the rest is taken as given.
    fn from_args(args: RecordArgs, checked: Checked) -> Plan {
        let Checked {
            target,
            spans,
            go_gc,
            ready,
            heap,
            output,
            export,
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
            syscall_latency: args.syscall_latency,
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
            redact: !args.no_redact,
        }
    }

    /// The target's command line as the run keeps it: its secrets redacted, unless
    /// `--no-redact` ([`switchyard_model::redact`]).
    pub fn recorded_command(&self, argv: &[String]) -> Vec<String> {
        if self.redact {
            switchyard_model::redact::command(argv)
        } else {
            argv.to_vec()
        }
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
            syscall_latency: self.syscall_latency,
            timeline: self.timeline,
        }
    }
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
    // the GC scans it): the program dies with "unknown caller pc". Go code gets spans once
    // they enter past the stack check and return at the RET instructions; until then, refused
    // here, before anything is forked or attached. A C library a Go program loads is not Go
    // code: its functions run on the thread's own stack, which Go neither moves nor walks.
    if has_go_runtime(&binary) {
        return Err(hinted(
            format!(
                "`--uprobe-span {spec}`: {} is a Go binary, and a return probe on `{symbol}` would crash it (Go walks and copies goroutine stacks by their return addresses, and the probe replaces one)",
                binary.display()
            ),
            "record without --uprobe-span: a Go program's GC and stacks are recorded without it; spans on a C library it loads are allowed (SYMBOL@/path/to/lib.so)",
        ));
    }
    Ok(Span {
        label: label.unwrap_or_else(|| symbol.clone()),
        symbol,
        binary,
    })
}

/// True when `binary`'s symbol table has the Go runtime's GC entry point, which the GC probes
/// attach to (a stripped Go binary has none, and gets no GC probes).
pub fn has_go_runtime(binary: &Path) -> bool {
    use object::{Object, ObjectSymbol};
    let Ok(data) = std::fs::read(binary) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*data) else {
        return false;
    };
    let start = switchyard_loader::GcKind::Start.symbol();
    file.symbols().any(|s| s.name() == Ok(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_take_a_label_a_symbol_and_a_binary() {
        let s = span("acquire=lock_acquire@/bin/sh", || unreachable!()).unwrap();
        assert_eq!(
            (s.label.as_str(), s.symbol.as_str(), s.binary.as_path()),
            ("acquire", "lock_acquire", Path::new("/bin/sh"))
        );
        let s = span("lock_acquire", || Ok(PathBuf::from("/bin/sh"))).unwrap();
        assert_eq!(
            (s.label.as_str(), s.symbol.as_str()),
            ("lock_acquire", "lock_acquire")
        );
        let e = span("x=@/bin/sh", || unreachable!()).unwrap_err();
        assert!(e.to_string().contains("names no symbol"), "{e}");
        let e = span("f@/nonexistent/lib.so", || unreachable!()).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }
}
