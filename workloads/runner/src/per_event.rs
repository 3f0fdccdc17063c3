//! `bench-overhead`: what switchyard adds per syscall of the traced process (a `getppid` loop
//! pinned to one CPU), per context switch (a pipe ping-pong pinned to one CPU), per syscall of
//! a process no one traces while another is recorded (syscall tracepoints are host-wide), and
//! per on-CPU sample (a loop DEPTH calls deep), side by side in one run with bpftrace (and
//! `perf trace`) doing comparable work, and with the true floor: `switchyard floor`, the
//! project's own empty programs on the attach points the recording uses.
//!
//! Every row's figure is what the measured loop says of itself (`ns_per_call`,
//! `ns_per_round_trip`, `elapsed_ns`), interleaved and repeated as [`crate::bench`] does. A
//! row's ratio to an anchor is its added cost over the anchor's added cost (each over the
//! untraced run of the same repeat), the median of the repeats' ratios with their min–max.
//!
//! The stack rows compare the two ways user stacks are walked: frame pointers (the kernel's
//! walker, `--unwind fp`) and call-frame information (`--unwind cfi`, the default), next to
//! bpftrace taking the same stacks (frame pointers).
//!
//! The span rows (what `--span` costs per instance of the function) are in [`spans`], and
//! what its programs cost in the kernel, beside bpftrace's, in [`programs`].

pub mod programs;
pub mod spans;
pub mod start;

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use switchyard_model::{metrics::spread, units::grouped};

use crate::{
    Failure, Interrupts,
    attach::Tool,
    bench::{self, Table},
    runner,
};

/// The knobs, as flags or as the environment variables the shell script read.
#[derive(Debug, Clone, clap::Args)]
pub struct Knobs {
    /// getppid calls per run.
    #[arg(long, env = "CALLS", default_value_t = 5_000_000)]
    pub calls: u64,
    /// Ping-pong round trips per run.
    #[arg(long, env = "ROUNDS", default_value_t = 200_000)]
    pub rounds: u64,
    /// Runs of each configuration, interleaved; the median is reported.
    #[arg(long, env = "REPEATS", default_value_t = 5)]
    pub repeats: u32,
    /// Iterations of the sampled loop per run.
    #[arg(long, env = "ITERS", default_value_t = 3_000_000_000)]
    pub iters: u64,
    /// How many calls deep the sampled loop runs.
    #[arg(long, env = "DEPTH", default_value_t = 24)]
    pub depth: u64,
    /// Sampling frequency (switchyard --freq, bpftrace profile:hz).
    #[arg(long, env = "HZ", default_value_t = 2999)]
    pub hz: u64,
    /// The CPU every measured loop is pinned to.
    #[arg(long, env = "CPU", default_value_t = 1)]
    pub cpu: usize,
    /// The switchyard binary measured.
    #[arg(long, env = "SY", default_value = "target/release/switchyard")]
    pub switchyard: PathBuf,
    /// The measured loops.
    #[arg(long, env = "DEMO", default_value = "target/release/switchyard-demo")]
    pub demo: PathBuf,
    /// The interpreter of the Python rows (Debian's, as a user's service would run).
    #[arg(long, env = "PYTHON", default_value = "/usr/bin/python3.11")]
    pub python: PathBuf,
    /// The Python loops.
    #[arg(
        long,
        env = "PY_SCRIPT",
        default_value = "workloads/demo/python/bench.py"
    )]
    pub py_script: PathBuf,
    /// Ping-pong round trips of the Python ping-pong.
    #[arg(long, env = "PY_ROUNDS", default_value_t = 100_000)]
    pub py_rounds: u64,
    /// Iterations of the Python sampled loop.
    #[arg(long, env = "PY_ITERS", default_value_t = 30_000_000)]
    pub py_iters: u64,
    /// Timed calls of each span loop per run (after half a second of untimed ones), at each
    /// rate.
    #[arg(long, env = "SPAN_CALLS", default_value_t = 5_000)]
    pub span_calls: u64,
    /// The rates the span loops call their function at, calls a second.
    #[arg(long, env = "SPAN_RATES", value_delimiter = ',', default_values_t = [10_000, 100_000])]
    pub span_rates: Vec<u64>,
    /// Where the span loops are built (from workloads/runner/span-loops) at each run.
    #[arg(long, env = "SPAN_DIR", default_value = "target/release/span-loops")]
    pub span_dir: PathBuf,
    /// The Go toolchain that builds the Go span loop.
    #[arg(long, env = "GO", default_value = "/usr/local/go/bin/go")]
    pub go: PathBuf,
    /// Only these tables (all when none is named): to measure one change more closely, with
    /// more repeats, in the time the whole bench takes.
    #[arg(long, env = "SECTIONS", value_enum, value_delimiter = ',')]
    pub sections: Vec<Section>,
}

/// The tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Section {
    Syscall,
    Switch,
    HostWide,
    Sample,
    /// A Python target's switches, with and without its Python frames walked.
    PySwitch,
    /// A Python target's on-CPU samples, the same.
    PySample,
    /// What a span costs per instance of its function (C and Go), next to bpftrace.
    Span,
    /// How long a short recording takes, start to exit, next to perf record.
    Start,
}

/// How a row's measured loop runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wrap {
    /// On its own (a tool may be attached elsewhere meanwhile).
    Plain,
    /// Under `switchyard record FLAGS… -o RUN -- LOOP`.
    Record(Vec<String>),
    /// Under `bpftrace -e SCRIPT -c LOOP` (`cpid`: the loop's pid).
    Bpftrace(String),
    /// Under `perf stat -e EVENTS -- LOOP`: per-task counting events on the loop, inherited
    /// by its threads, and no program.
    PerfStat(String),
}

/// One row of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub section: Section,
    /// A key other rows name as their anchor.
    pub key: &'static str,
    pub label: String,
    pub wrap: Wrap,
    /// A tool attached for the run (host-wide: to the target; floors: host-wide).
    pub attached: Option<Tool>,
    /// The key of the row this one is divided by, and the name printed beside the ratio.
    pub anchor: Option<(&'static str, &'static str)>,
    /// Why it cannot run with this build or host (`needs --flag`), if it cannot.
    pub missing: Option<String>,
    /// A span row's loop (the section's loop otherwise).
    pub span: Option<spans::Loop>,
}

impl Row {
    /// The loop's words (after `taskset -c CPU`) and the field it reports.
    fn workload(&self, k: &Knobs) -> (Vec<String>, &'static str) {
        match self.span {
            Some(l) => l.workload(k),
            None => self.section.workload(k),
        }
    }
}

const BT_COUNT: &str = "tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @[args->id] = count(); }";
const BT_HIST: &str = "tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @s[tid] = nsecs; }
tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @h[args->id] = hist(nsecs - @s[tid]); @c[args->id] = count(); delete(@s[tid]); }";
const BT_EMPTY: &str = "tracepoint:raw_syscalls:sys_enter /pid == cpid/ { } tracepoint:raw_syscalls:sys_exit /pid == cpid/ { }";
const BT_SWITCH: &str =
    "tracepoint:sched:sched_switch /pid == cpid/ { @[tid, args->prev_state] = count(); }";
/// The stacks switchyard takes by default: kernel and user stack at switch-out, and the
/// waker's.
const BT_STACKS: &str =
    "tracepoint:sched:sched_switch /pid == cpid/ { @out[kstack, ustack] = count(); }
tracepoint:sched:sched_wakeup /pid == cpid/ { @waker[kstack, ustack] = count(); }";
/// What a process no one traces pays while bpftrace counts the target's syscalls.
const BT_TARGET: &str =
    "tracepoint:raw_syscalls:sys_enter /pid == $PID/ { @[args->id] = count(); }";
/// The same with an exit probe too, as switchyard has (latency needs both): the anchor.
const BT_TARGET_BOTH: &str = "tracepoint:raw_syscalls:sys_enter /pid == $PID/ { @s[tid] = nsecs; }
tracepoint:raw_syscalls:sys_exit /pid == $PID/ { @[args->id] = count(); }";

fn words(flags: &str) -> Vec<String> {
    flags.split_whitespace().map(str::to_string).collect()
}

/// The key of the row another is divided by, and the name printed beside the ratio.
type Anchor = Option<(&'static str, &'static str)>;

/// One section's rows, in table order.
struct SectionRows {
    section: Section,
    rows: Vec<Row>,
}

impl SectionRows {
    fn new(section: Section) -> Self {
        SectionRows {
            section,
            rows: Vec::new(),
        }
    }

    /// Adds a row: its loop run as `wrap`, with `attached` running meanwhile, divided by
    /// `anchor`.
    fn add(
        &mut self,
        key: &'static str,
        label: &str,
        wrap: Wrap,
        attached: Option<Tool>,
        anchor: Anchor,
    ) {
        self.rows.push(Row {
            section: self.section,
            key,
            label: label.to_string(),
            wrap,
            attached,
            anchor,
            missing: None,
            span: None,
        })
    }
}

/// The loop run under `switchyard record FLAGS…`.
fn record(flags: &str) -> Wrap {
    Wrap::Record(words(flags))
}

/// The loop run under `bpftrace -e SCRIPT`.
fn bt(script: &str) -> Wrap {
    Wrap::Bpftrace(script.to_string())
}

/// `switchyard floor KIND` attached host-wide.
fn floor_tool(switchyard: &Path, kind: &str) -> Option<Tool> {
    Some(Tool::Floor {
        switchyard: switchyard.to_path_buf(),
        kind: kind.into(),
    })
}

/// Per syscall of the traced `getppid` loop: switchyard's modes, bpftrace's and the floor,
/// each over the floor.
fn syscall_rows(sy: &Path) -> Vec<Row> {
    let mut t = SectionRows::new(Section::Syscall);
    let floor_anchor = Some(("bpftrace-empty", ""));
    t.add("untraced", "untraced", Wrap::Plain, None, None);
    t.add(
        "switchyard",
        "switchyard --no-stacks (counts, errnos, latency by budget: every call up to 2,000/s a thread, 1 in 16 beyond)",
        record("--no-stacks"),
        None,
        floor_anchor,
    );
    t.add(
        "switchyard-stacks",
        "switchyard (+ stacks: 1 syscall in 16 up to 1,000/s a CPU, 99 Hz)",
        record(""),
        None,
        floor_anchor,
    );
    for (key, label, flags) in [
        (
            "switchyard-exact",
            "switchyard --no-stacks --syscall-latency 1 (every call timed)",
            "--no-stacks --syscall-latency 1",
        ),
        (
            "switchyard-sampled",
            "switchyard --no-stacks --syscall-latency 16 (counts, errnos; 1 call in 16 timed)",
            "--no-stacks --syscall-latency 16",
        ),
        (
            "switchyard-sampled-stacks",
            "switchyard --syscall-latency 16 (+ stacks)",
            "--syscall-latency 16",
        ),
        (
            "switchyard-untimed",
            "switchyard --no-stacks --syscall-latency 0 (counts, errnos)",
            "--no-stacks --syscall-latency 0",
        ),
    ] {
        t.add(key, label, record(flags), None, floor_anchor);
    }
    t.add(
        "bpftrace-empty",
        "bpftrace: empty enter+exit probes (floor)",
        bt(BT_EMPTY),
        None,
        floor_anchor,
    );
    t.add(
        "bpftrace-count",
        "bpftrace: count by syscall",
        bt(BT_COUNT),
        None,
        floor_anchor,
    );
    t.add(
        "bpftrace-hist",
        "bpftrace: count + latency histogram",
        bt(BT_HIST),
        None,
        floor_anchor,
    );
    t.add(
        "floor",
        "floor: empty raw tracepoints sys_enter + sys_exit",
        Wrap::Plain,
        floor_tool(sy, "syscalls"),
        floor_anchor,
    );
    t.rows
}

/// Per context switch of the pipe ping-pong: switchyard with and without stacks, bpftrace
/// counting and taking the same stacks, and the floor.
fn switch_rows(sy: &Path) -> Vec<Row> {
    let mut t = SectionRows::new(Section::Switch);
    let count = Some(("bpftrace-count", "count"));
    let stacks = Some(("bpftrace-stacks", "stacks"));
    t.add("untraced", "untraced", Wrap::Plain, None, None);
    for (flags, anchor) in [
        ("--no-stacks --syscalls none", count),
        ("--syscalls none", stacks),
        ("--syscalls none --offcpu-period 0", stacks),
        ("--unwind fp --syscalls none --offcpu-period 0", stacks),
    ] {
        t.add(
            "sy",
            &format!("switchyard {flags}"),
            record(flags),
            None,
            anchor,
        );
    }
    t.add(
        "sy",
        "switchyard (defaults: + syscalls)",
        record(""),
        None,
        stacks,
    );
    t.add(
        "bpftrace-count",
        "bpftrace: count switches by thread/state",
        bt(BT_SWITCH),
        None,
        count,
    );
    t.add(
        "bpftrace-stacks",
        "bpftrace: the same stacks (switch-out, waker)",
        bt(BT_STACKS),
        None,
        stacks,
    );
    t.add(
        "floor",
        "floor: empty tp_btf sched_switch",
        Wrap::Plain,
        floor_tool(sy, "switch"),
        None,
    );
    t.add(
        "floor-clock",
        "floor + one exact clock read (what timing a switch cannot go without)",
        Wrap::Plain,
        floor_tool(sy, "switch-clock"),
        count,
    );
    t.add(
        "per-task",
        "a per-task perf event the loop never hits (perf stat -e sched:sched_process_exec): what per-task attach costs a switch",
        Wrap::PerfStat("sched:sched_process_exec".into()),
        None,
        count,
    );
    t.rows
}

/// Host-wide, per syscall of a loop no one traces while a tool records another process:
/// switchyard `--pid`, bpftrace, perf trace and the floor (what any program on these
/// tracepoints costs that loop, before it can turn it away), each over bpftrace's enter and
/// exit probes.
fn host_wide_rows(sy: &Path) -> Vec<Row> {
    let mut t = SectionRows::new(Section::HostWide);
    let both = Some(("bpftrace-both", ""));
    let attached_record = |flags: &str| {
        Some(Tool::Record {
            switchyard: sy.to_path_buf(),
            flags: words(flags),
        })
    };
    t.add("base", "nothing recording (base)", Wrap::Plain, None, None);
    for flags in [
        "--no-stacks",
        "--no-stacks --syscalls read,write",
        "--no-stacks --syscalls none",
        "",
    ] {
        let label = if flags.is_empty() {
            "switchyard --pid T (defaults)".to_string()
        } else {
            format!("switchyard --pid T {flags}")
        };
        t.add("sy", &label, Wrap::Plain, attached_record(flags), both);
    }
    let bpftrace = |script: &str| {
        Some(Tool::Bpftrace {
            script: script.into(),
        })
    };
    t.add(
        "bpftrace-both",
        "bpftrace: sys_enter + sys_exit /pid == T/",
        Wrap::Plain,
        bpftrace(BT_TARGET_BOTH),
        both,
    );
    t.add(
        "bpftrace",
        "bpftrace: sys_enter /pid == T/ only, count",
        Wrap::Plain,
        bpftrace(BT_TARGET),
        both,
    );
    t.add(
        "perf-trace",
        "perf trace -s -p T",
        Wrap::Plain,
        Some(Tool::Perf {
            args: words("trace -s -o /dev/null"),
        }),
        both,
    );
    t.add(
        "floor",
        "floor: empty raw tracepoints sys_enter + sys_exit (no filter)",
        Wrap::Plain,
        floor_tool(sy, "syscalls"),
        both,
    );
    t.rows
}

/// Per on-CPU sample of the deep loop at `hz`: switchyard walking frame pointers and CFI,
/// bpftrace taking the same stacks.
fn sample_rows(hz: u64) -> Vec<Row> {
    let mut t = SectionRows::new(Section::Sample);
    let bt_stacks = Some(("bpftrace-stacks", ""));
    t.add("untraced", "untraced", Wrap::Plain, None, None);
    t.add(
        "switchyard-fp",
        "switchyard --unwind fp (kernel + user stack)",
        record(&format!("--freq {hz} --unwind fp")),
        None,
        bt_stacks,
    );
    t.add(
        "switchyard-cfi",
        "switchyard (kernel + user stack, CFI)",
        record(&format!("--freq {hz}")),
        None,
        bt_stacks,
    );
    t.add(
        "bpftrace-stacks",
        "bpftrace: profile:hz with kstack, ustack",
        bt(&format!(
            "profile:hz:{hz} /pid == cpid/ {{ @[kstack, ustack] = count(); }}"
        )),
        None,
        bt_stacks,
    );
    t.rows
}

/// A Python target's switches and on-CPU samples (at `hz`), with its Python frames walked
/// over without them.
fn python_rows(hz: u64) -> Vec<Row> {
    let no_frames = Some(("py-no-frames", "no Python frames"));
    let mut switch = SectionRows::new(Section::PySwitch);
    switch.add("untraced", "untraced", Wrap::Plain, None, None);
    for (key, label, flags) in [
        (
            "py-no-frames",
            "switchyard --no-python-frames",
            "--syscalls none --offcpu-period 0 --no-python-frames",
        ),
        (
            "sy",
            "switchyard (Python frames)",
            "--syscalls none --offcpu-period 0",
        ),
    ] {
        let anchor = if key == "sy" { no_frames } else { None };
        switch.add(key, label, record(flags), None, anchor);
    }
    let mut sample = SectionRows::new(Section::PySample);
    sample.add("untraced", "untraced", Wrap::Plain, None, None);
    for (key, label, flags) in [
        (
            "py-no-frames",
            "switchyard --no-python-frames",
            format!("--freq {hz} --syscalls none --no-python-frames"),
        ),
        (
            "sy",
            "switchyard (Python frames)",
            format!("--freq {hz} --syscalls none"),
        ),
    ] {
        let anchor = if key == "sy" { no_frames } else { None };
        sample.add(key, label, record(&flags), None, anchor);
    }
    switch.rows.extend(sample.rows);
    switch.rows
}

/// Every row, in table order. `record_help` is `switchyard record --help`'s text (a row whose
/// flag it lacks is kept, marked missing); `floor` whether `switchyard floor` exists; `perf`
/// whether perf does.
pub fn rows(knobs: &Knobs, record_help: &str, floor: bool, perf: bool) -> Vec<Row> {
    let sy = &knobs.switchyard;
    let mut all = syscall_rows(sy);
    all.extend(switch_rows(sy));
    all.extend(host_wide_rows(sy));
    all.extend(sample_rows(knobs.hz));
    all.extend(python_rows(knobs.hz));
    all.extend(spans::rows(knobs));

    for r in &mut all {
        r.missing = missing(r, record_help, floor, perf);
        if matches!(r.section, Section::PySwitch | Section::PySample) && !knobs.python.is_file() {
            r.missing = Some(format!("{} (PYTHON=…)", knobs.python.display()));
        }
    }
    all
}

/// Why `row` cannot run here: the first `--flag` `switchyard record` lacks, or the tool.
fn missing(row: &Row, record_help: &str, floor: bool, perf: bool) -> Option<String> {
    let flags: Vec<String> = match (&row.wrap, &row.attached) {
        (Wrap::Record(f), _) => f.clone(),
        (_, Some(Tool::Record { flags, .. })) => {
            let mut f = flags.clone();
            f.push("--ready-fd".into());
            f
        }
        (_, Some(Tool::Floor { .. })) if !floor => {
            return Some("`switchyard floor`".into());
        }
        (_, Some(Tool::Perf { .. })) | (Wrap::PerfStat(_), _) if !perf => {
            return Some("perf".into());
        }
        _ => Vec::new(),
    };
    flags
        .into_iter()
        .filter(|f| f.starts_with("--"))
        .find(|f| !knows_flag(record_help, f))
}

/// Whether `help` (a `--help` text) lists `flag`.
pub fn knows_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let before = help[..at].chars().next_back();
        let after = help[at + flag.len()..].chars().next();
        before.is_none_or(char::is_whitespace)
            && after.is_none_or(|c| c.is_whitespace() || c == '=' || c == ',')
    })
}

/// The number after `"name":` in a loop's JSON line.
pub fn field(output: &str, name: &str) -> Option<f64> {
    let key = format!("\"{name}\":");
    let at = output.find(&key)? + key.len();
    // JSON allows a space after the colon (Python's json.dumps writes one).
    let digits: String = output[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    digits.parse().ok()
}

impl Section {
    /// The loop's words (after `taskset -c CPU`) and the field it reports.
    fn workload(self, k: &Knobs) -> (Vec<String>, &'static str) {
        let demo = k.demo.to_string_lossy().into_owned();
        let mut w = vec![demo];
        let field = match self {
            Section::Syscall | Section::HostWide => {
                w.extend(words(&format!("getppid-loop --count {}", k.calls)));
                "ns_per_call"
            }
            Section::Switch => {
                w.extend(words(&format!("pingpong --rounds {}", k.rounds)));
                "ns_per_round_trip"
            }
            Section::Sample => {
                w.extend(words(&format!(
                    "spin --iters {} --depth {}",
                    k.iters, k.depth
                )));
                "elapsed_ns"
            }
            Section::PySwitch | Section::PySample => {
                w = vec![
                    k.python.to_string_lossy().into_owned(),
                    k.py_script.to_string_lossy().into_owned(),
                ];
                if self == Section::PySwitch {
                    w.extend(words(&format!("pingpong {}", k.py_rounds)));
                    "ns_per_round_trip"
                } else {
                    w.extend(words(&format!("spin {} {}", k.py_iters, k.depth)));
                    "elapsed_ns"
                }
            }
            Section::Span | Section::Start => unreachable!("runs its own commands"),
        };
        (w, field)
    }

    /// What a figure is divided by to be per event (a round trip is two switches).
    fn per(self) -> f64 {
        if matches!(self, Section::Switch | Section::PySwitch) {
            2.0
        } else {
            1.0
        }
    }
}

/// One run of `row`: the loop's figure. Its tool (if any) is attached to `target` first and
/// stopped after; every process's output goes into `out`.
pub fn measure(row: &Row, knobs: &Knobs, target: u32, out: &Path) -> Result<f64, Failure> {
    fs::create_dir_all(out).map_err(|e| Failure::io(format!("creating {}", out.display()), e))?;
    let tool = match &row.attached {
        Some(t) => Some(t.attach(target, out)?),
        None => None,
    };
    let (mut loop_words, name) = row.workload(knobs);
    // A full path: bpftrace -c takes no bare program names.
    let mut pinned = vec![taskset(), "-c".into(), knobs.cpu.to_string()];
    pinned.append(&mut loop_words);
    let mut c = match &row.wrap {
        Wrap::Plain => {
            let mut c = Command::new(&pinned[0]);
            c.args(&pinned[1..]);
            c
        }
        Wrap::Record(flags) => {
            let mut c = Command::new(&knobs.switchyard);
            c.arg("record")
                .args(flags)
                .arg("-o")
                .arg(out.join("run.json"))
                .arg("--")
                .args(&pinned);
            c
        }
        Wrap::Bpftrace(script) => {
            let mut c = Command::new("bpftrace");
            c.arg("-e").arg(script).arg("-c").arg(pinned.join(" "));
            c
        }
        Wrap::PerfStat(events) => {
            let mut c = Command::new("perf");
            c.args(["stat", "-x,", "-o"])
                .arg(out.join("perf.stat"))
                .args(["-e", events, "--"])
                .args(&pinned);
            c
        }
    };
    let err = out.join("loop.err");
    let ran = c
        .stdin(Stdio::null())
        .stderr(runner::create(&err)?)
        .output()
        .map_err(|e| Failure::io(format!("running {}", c.get_program().to_string_lossy()), e));
    let stopped = tool.map(|t| t.stop(out));
    let ran = ran?;
    if let Some(stopped) = stopped {
        stopped?;
    }
    let stdout = String::from_utf8_lossy(&ran.stdout);
    let _ = fs::write(out.join("loop.out"), stdout.as_bytes());
    field(&stdout, name).ok_or_else(|| {
        Failure::new(format!("`{}` gave no figure ({})", row.label, ran.status))
            .hint(format!("its output is in {}", out.display()))
            .tail(&err, 20)
    })
}

/// taskset as found on PATH (as `command -v` finds it), or its Debian place.
fn taskset() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("taskset"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/usr/bin/taskset"))
        .to_string_lossy()
        .into_owned()
}

/// The host-wide section's target, T: a 100 ms nanosleep over and over on `cpu`; killed when
/// dropped.
pub struct Target(Child);

impl Target {
    pub fn start(knobs: &Knobs, cpu: usize) -> Result<Target, Failure> {
        Command::new(taskset())
            .args(["-c", &cpu.to_string()])
            .arg(&knobs.demo)
            .args(words(
                "known --getppid 0 --sleeps 1000000000 --sleep-us 100000 --pingpong 0",
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map(Target)
            .map_err(|e| Failure::io(format!("starting {}", knobs.demo.display()), e))
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Another CPU than `cpu` this process may run on, or `cpu` when there is none.
pub fn other_cpu(cpu: usize) -> usize {
    // SAFETY: sched_getaffinity fills the set it is given, of the size it is told.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return cpu;
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads the set within its size.
        .find(|&c| c != cpu && unsafe { libc::CPU_ISSET(c, &set) })
        .unwrap_or(cpu)
}

/// The header of a section's table, with a ratio column per anchor kind.
fn section_table(section: Section) -> Table {
    match section {
        Section::Sample => {
            Table::new(&["configuration", "ms", "ns/sample", "× base", "÷ bpftrace"])
        }
        Section::PySample => Table::new(&[
            "configuration",
            "ms",
            "ns/sample",
            "× base",
            "÷ no Python frames",
        ]),
        Section::PySwitch => Table::new(&[
            "configuration",
            "ns/switch",
            "added ns",
            "× base",
            "÷ anchor",
        ]),
        Section::Switch => Table::new(&[
            "configuration",
            "ns/switch",
            "added ns",
            "× base",
            "÷ anchor",
            "÷ floor (empty tp_btf)",
        ]),
        Section::Syscall => Table::new(&[
            "configuration",
            "ns/call",
            "added ns",
            "× base",
            "÷ anchor (bpftrace floor)",
            "÷ floor (empty raw tp)",
        ]),
        Section::Span => spans::head(),
        Section::Start => Table::new(&["command"]),
        Section::HostWide => Table::new(&[
            "configuration",
            "ns/call",
            "added ns",
            "× base",
            "÷ bpftrace",
        ]),
    }
}

/// A section's table from its rows and their samples (per row, one figure per repeat in
/// repeat order; the section's first row is its base). Rows that could not run say why.
pub fn table(section: Section, hz: u64, rows: &[(&Row, &[f64])]) -> String {
    if section == Section::Span {
        return spans::table(rows);
    }
    let mut t = section_table(section);
    let find = |key: &str| rows.iter().find(|(r, s)| r.key == key && !s.is_empty());
    let Some((_, base)) = rows.first() else {
        return t.render();
    };
    let per = section.per();
    let scaled = |v: &[f64]| v.iter().map(|x| x / per).collect::<Vec<f64>>();
    let base = scaled(base);
    for (row, samples) in rows {
        if let Some(why) = &row.missing {
            t.missing_row(&row.label, why);
            continue;
        }
        let v = scaled(samples);
        let Some(median) = spread(&v) else {
            continue;
        };
        let is_base = std::ptr::eq(*row, rows[0].0);
        let times = bench::ratio_cell(bench::ratio_spread(&bench::ratios(&v, &base)));
        if matches!(section, Section::Sample | Section::PySample) {
            // Added time over the samples taken in it (HZ per second of the traced run).
            let per_sample = |t: f64, b: f64| (t - b) / (hz as f64 * t / 1e9);
            let added: Vec<f64> = v
                .iter()
                .zip(&base)
                .map(|(t, b)| per_sample(*t, *b))
                .collect();
            let anchor = if section == Section::Sample {
                "bpftrace-stacks"
            } else {
                "py-no-frames"
            };
            let ratio = match (is_base || row.key == anchor, find(anchor)) {
                (false, Some((_, bt))) => {
                    let bt: Vec<f64> = bt
                        .iter()
                        .zip(&base)
                        .map(|(t, b)| per_sample(*t, *b))
                        .collect();
                    bench::ratio_cell(bench::ratio_spread(&bench::ratios(&added, &bt)))
                }
                _ => String::new(),
            };
            t.row(vec![
                row.label.clone(),
                grouped(median.median / 1e6, 1),
                spread(&added).map_or("–".into(), |s| grouped(s.median, 0)),
                times,
                ratio,
            ]);
            continue;
        }
        let added: Vec<f64> = v.iter().zip(&base).map(|(x, b)| x - b).collect();
        let against = |key: &str| -> String {
            match find(key) {
                Some((_, a)) if !is_base => {
                    let a = scaled(a);
                    bench::ratio_cell(bench::ratio_spread(&bench::added_ratios(&v, &a, &base)))
                }
                _ => String::new(),
            }
        };
        let mut cells = vec![
            row.label.clone(),
            grouped(median.median, 1),
            spread(&added).map_or("–".into(), |s| grouped(s.median, 1)),
            times,
        ];
        match row.anchor {
            Some((key, name)) if !name.is_empty() => {
                cells.push(format!("{} of {name}", against(key)))
            }
            Some((key, _)) => cells.push(against(key)),
            None => cells.push(String::new()),
        }
        match section {
            Section::Syscall | Section::Switch => cells.push(against("floor")),
            _ => {}
        }
        t.row(cells);
    }
    t.render()
}

/// What each section measured and its anchors mean, printed under its table.
pub fn note(section: Section) -> &'static str {
    match section {
        Section::Syscall => {
            "anchor: bpftrace's empty enter and exit probes (classic tracepoints: the record is \
filled before the program runs); floor: switchyard's own empty raw tracepoints on sys_enter and \
sys_exit (`switchyard floor syscalls`), what being called at every syscall costs at the least"
        }
        Section::Switch => {
            "anchors: count = bpftrace counting switches by thread and state; stacks = bpftrace \
taking the same stacks at every switch (kernel + user, at switch-out and at wakeup, frame \
pointers); floor: switchyard's own empty tp_btf sched_switch program (`switchyard floor \
switch`), and the same reading the exact clock once and keeping it per CPU (`switchyard floor \
switch-clock`), as switchyard's switch program does at every switch; bpftrace's count reads no \
clock. The per-task event counts an exec the loop never makes: its cost is the kernel switching \
the task's perf context out and in at each switch, which any per-task event, a syscall \
tracepoint's included, adds. --syscalls none attaches no syscall tracepoint, so those rows cost \
the switches alone; the defaults row also counts the ping-pong's readv/writev. --offcpu-period 0 takes the stacks at \
every block, as bpftrace does (the default samples them)."
        }
        Section::HostWide => {
            "anchor: bpftrace with an enter and an exit probe filtered on T, as switchyard \
attaches. Syscall tracepoints are host-wide: while one is enabled every task takes the kernel's \
slower syscall path, and each attached program runs and turns away the tasks it does not \
record; a list of syscalls filters inside the programs, so it pays the same. --syscalls none \
attaches none. The floor's programs turn nobody away: no program on these tracepoints can cost \
that process less. perf trace pays less because its per-task events run no program for other \
tasks; a BPF program on the same per-task event would run for every task, and a per-task perf \
event costs the traced task at every context switch."
        }
        Section::Sample => {
            "ns/sample: the added time over the samples taken in it (HZ per second of the run); \
÷ bpftrace: that per-sample cost over bpftrace's, repeat by repeat"
        }
        Section::PySwitch => {
            "a Python ping-pong (two threads, two pipes, one CPU) run by the PYTHON interpreter: \
every switch-out takes its stacks (--offcpu-period 0), native only (--no-python-frames) or with \
the thread's Python frames walked; ÷ anchor: the added cost with frames over the added cost \
without"
        }
        Section::PySample => {
            "a Python loop DEPTH calls deep run by the PYTHON interpreter, sampled at HZ: native \
stacks only (--no-python-frames) or with its Python frames; ÷ no Python frames: the per-sample \
cost with frames over the cost without, repeat by repeat"
        }
        Section::Span => spans::NOTE,
        Section::Start => {
            "wall ms: from the command to its exit; ÷ perf record: over perf record's doing the \
same, repeat by repeat; started in and verifying: what switchyard's -v says of its start"
        }
    }
}

/// Which of `rows` can run here (their indices).
pub fn runnable(rows: &[Row]) -> Vec<usize> {
    rows.iter()
        .enumerate()
        .filter(|(_, r)| r.missing.is_none())
        .map(|(i, _)| i)
        .collect()
}

/// Runs every runnable row REPEATS times, interleaved; per row, its figures in repeat order.
pub fn run_all(
    rows: &[Row],
    knobs: &Knobs,
    target: u32,
    dir: &Path,
    interrupts: &Interrupts,
    progress: impl Fn(&str),
) -> Result<(Vec<Vec<f64>>, bool), Failure> {
    let which = runnable(rows);
    let samples = bench::interleave(&which, knobs.repeats, interrupts, |i, r, &row| {
        progress(&format!(
            "repeat {} of {}: {}",
            r + 1,
            knobs.repeats,
            rows[row].label
        ));
        measure(
            &rows[row],
            knobs,
            target,
            &dir.join(format!("{}-{i}", r + 1)),
        )
    })?;
    let complete = samples.complete();
    let mut all = vec![Vec::new(); rows.len()];
    for (k, mut s) in which.into_iter().zip(samples.rows) {
        s.truncate(complete);
        all[k] = s;
    }
    Ok((all, samples.interrupted))
}

/// Whether `switchyard floor --help` succeeds.
pub fn has_floor(switchyard: &Path) -> bool {
    Command::new(switchyard)
        .args(["floor", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `switchyard record --help`'s text.
pub fn record_help(switchyard: &Path) -> Result<String, Failure> {
    let o = Command::new(switchyard)
        .args(["record", "--help"])
        .output()
        .map_err(|e| Failure::io(format!("running {}", switchyard.display()), e))?;
    if !o.status.success() {
        return Err(Failure::new(format!(
            "{} record --help failed",
            switchyard.display()
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs() -> Knobs {
        Knobs {
            calls: 10,
            rounds: 10,
            repeats: 2,
            iters: 10,
            depth: 4,
            hz: 1000,
            cpu: 1,
            switchyard: "sy".into(),
            demo: "demo".into(),
            python: "/usr/bin/python3.11".into(),
            py_script: "bench.py".into(),
            py_rounds: 100,
            py_iters: 1000,
            span_calls: 100,
            span_rates: vec![10_000],
            span_dir: "spans".into(),
            go: "go".into(),
            sections: Vec::new(),
        }
    }

    #[test]
    fn fields_of_the_loops_json() {
        // Python's json.dumps puts a space after the colon.
        assert_eq!(
            field("{\"ns_per_round_trip\": 5935.7}\n", "ns_per_round_trip"),
            Some(5935.7)
        );
        assert_eq!(
            field("{\"calls\":5000000,\"ns_per_call\":122.5}\n", "ns_per_call"),
            Some(122.5)
        );
        assert_eq!(
            field(
                "switchyard: summary\n{\"rounds\":2,\"ns_per_round_trip\":4581.0}",
                "ns_per_round_trip"
            ),
            Some(4581.0)
        );
        assert_eq!(
            field(
                "{\"iters\":3,\"depth\":24,\"elapsed_ns\":1473600000,\"x\":1}",
                "elapsed_ns"
            ),
            Some(1_473_600_000.0)
        );
        assert_eq!(field("nothing", "elapsed_ns"), None);
    }

    #[test]
    fn a_flag_is_known_only_as_a_whole_word() {
        let help = "      --no-stacks\n      --syscalls <LIST>\n      --offcpu-period=<N>\n";
        assert!(knows_flag(help, "--no-stacks"));
        assert!(knows_flag(help, "--syscalls"));
        assert!(knows_flag(help, "--offcpu-period"));
        assert!(!knows_flag(help, "--no"));
        assert!(!knows_flag(help, "--unwind"));
    }

    #[test]
    fn rows_a_build_cannot_run_say_what_they_need() {
        let help = "--no-stacks --syscalls --freq --ready-fd";
        let rows = rows(&knobs(), help, false, true);
        let need = |label: &str| {
            rows.iter()
                .find(|r| r.label == label)
                .and_then(|r| r.missing.clone())
        };
        assert_eq!(
            need("floor: empty raw tracepoints sys_enter + sys_exit").as_deref(),
            Some("`switchyard floor`")
        );
        assert_eq!(
            need("floor: empty tp_btf sched_switch").as_deref(),
            Some("`switchyard floor`")
        );
        assert_eq!(
            need("switchyard --syscalls none --offcpu-period 0").as_deref(),
            Some("--offcpu-period")
        );
        assert_eq!(
            need(
                "switchyard --no-stacks (counts, errnos, latency by budget: every call up to \
                 2,000/s a thread, 1 in 16 beyond)"
            ),
            None
        );
        assert!(
            rows.iter()
                .any(|r| r.label.starts_with("switchyard --no-stacks (counts"))
        );
        assert_eq!(
            need("switchyard --unwind fp (kernel + user stack)").as_deref(),
            Some("--unwind")
        );
        assert_eq!(need("perf trace -s -p T"), None);
    }

    #[test]
    fn ratios_are_added_cost_over_the_anchors_added_cost_per_repeat() {
        let rows = rows(&knobs(), "--no-stacks --syscall-latency", true, true);
        let syscall: Vec<&Row> = rows
            .iter()
            .filter(|r| r.section == Section::Syscall)
            .collect();
        // untraced, switchyard, switchyard-stacks, the four --syscall-latency rows,
        // bpftrace-empty, count, hist, floor.
        let data: [&[f64]; 11] = [
            &[100.0, 120.0],
            &[300.0, 320.0],
            &[400.0, 420.0],
            &[500.0, 520.0],
            &[250.0, 270.0],
            &[260.0, 280.0],
            &[240.0, 260.0],
            &[300.0, 370.0],
            &[310.0, 330.0],
            &[900.0, 920.0],
            &[200.0, 220.0],
        ];
        let pairs: Vec<(&Row, &[f64])> = syscall.iter().copied().zip(data).collect();
        let t = table(Section::Syscall, 1000, &pairs);
        assert_eq!(
            t,
            "| configuration | ns/call | added ns | × base | ÷ anchor (bpftrace floor) | ÷ floor (empty raw tp) |\n\
             |---|---|---|---|---|---|\n\
             | untraced | 110.0 | 0.0 | 1.00 (1.00–1.00) |  |  |\n\
             | switchyard --no-stacks (counts, errnos, latency by budget: every call up to 2,000/s a thread, 1 in 16 beyond) | 310.0 | 200.0 | 2.83 (2.67–3.00) | 0.900 (0.800–1.00) | 2.00 (2.00–2.00) |\n\
             | switchyard (+ stacks: 1 syscall in 16 up to 1,000/s a CPU, 99 Hz) | 410.0 | 300.0 | 3.75 (3.50–4.00) | 1.35 (1.20–1.50) | 3.00 (3.00–3.00) |\n\
             | switchyard --no-stacks --syscall-latency 1 (every call timed) | 510.0 | 400.0 | 4.67 (4.33–5.00) | 1.80 (1.60–2.00) | 4.00 (4.00–4.00) |\n\
             | switchyard --no-stacks --syscall-latency 16 (counts, errnos; 1 call in 16 timed) | 260.0 | 150.0 | 2.38 (2.25–2.50) | 0.675 (0.600–0.750) | 1.50 (1.50–1.50) |\n\
             | switchyard --syscall-latency 16 (+ stacks) | 270.0 | 160.0 | 2.47 (2.33–2.60) | 0.720 (0.640–0.800) | 1.60 (1.60–1.60) |\n\
             | switchyard --no-stacks --syscall-latency 0 (counts, errnos) | 250.0 | 140.0 | 2.28 (2.17–2.40) | 0.630 (0.560–0.700) | 1.40 (1.40–1.40) |\n\
             | bpftrace: empty enter+exit probes (floor) | 335.0 | 225.0 | 3.04 (3.00–3.08) | 1.00 (1.00–1.00) | 2.25 (2.00–2.50) |\n\
             | bpftrace: count by syscall | 320.0 | 210.0 | 2.92 (2.75–3.10) | 0.945 (0.840–1.05) | 2.10 (2.10–2.10) |\n\
             | bpftrace: count + latency histogram | 910.0 | 800.0 | 8.33 (7.67–9.00) | 3.60 (3.20–4.00) | 8.00 (8.00–8.00) |\n\
             | floor: empty raw tracepoints sys_enter + sys_exit | 210.0 | 100.0 | 1.92 (1.83–2.00) | 0.450 (0.400–0.500) | 1.00 (1.00–1.00) |\n"
        );
    }
}
