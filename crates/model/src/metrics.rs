//! Named figures of a run, the vocabulary shared by the summary, the page, comparisons and
//! budgets.
//!
//! Every figure is defined once, in [`FIGURES`]: its stable dotted name or pattern
//! (`switches.voluntary[.per_s|.per_op]`, `syscalls.<name>.avg_us`), its unit, the direction
//! that counts as better, what it measures and whether the terminal summary leads with it.
//! [`extract`] only computes values; each name it produces takes its unit and direction from
//! its one definition, and [`NAMES`], [`unit_label`] and [`is_known`] are read off the table.
//! Per-second figures divide by the recording's duration; per-operation figures exist only
//! when the run carries an operation count.
//!
//! A new figure is a line in [`FIGURES`] and a value in [`extract`]; the summary's figures,
//! the page's table of figures, comparisons and budgets show it from there.

use std::collections::BTreeMap;

use crate::{Run, units::Unit};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// Informational (duration, operation count).
    Neither,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub value: f64,
    pub unit: Unit,
    pub better: Better,
}

/// The definition of a figure, or of a family of figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Figure {
    /// The name, or a pattern of names: `<name>` stands for a syscall as the run names it,
    /// `<label>` for a span's label (no dots), `<counter>` for a perf counter that counts
    /// events; a trailing `[.per_s|.per_op]` adds the count's rates.
    pub pattern: &'static str,
    /// The figure's unit; a count's rates are per second and per operation.
    pub unit: Unit,
    pub better: Better,
    /// A short noun for sentences: "context switches".
    pub label: &'static str,
    /// What it measures, in one line.
    pub about: &'static str,
    /// The terminal summary leads with it (per operation, when the run has operations).
    pub headline: bool,
    /// The area it belongs to: comparisons group their rows by it.
    pub area: Area,
    /// Its place among its area's figures, first at 1; figures sharing a place (a
    /// syscall's count and its average call) go by what fills their placeholder, then in
    /// [`FIGURES`]' order.
    pub rank: u8,
    /// The findings that make it up, which a failed budget names as its cause.
    pub explained_by: Explains,
}

/// The area a figure belongs to; comparisons group their rows by it, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Area {
    Work,
    Cpu,
    Switches,
    Syscalls,
    Locks,
    Gc,
    Memory,
    /// A name no figure defines (a newer run file's).
    Other,
}

impl Area {
    /// The area of figure `name`; [`Area::Other`] for a name no figure defines.
    pub fn of(name: &str) -> Area {
        definition(name).map_or(Area::Other, |(f, _)| f.area)
    }

    pub fn title(self) -> &'static str {
        match self {
            Area::Work => "Throughput and latency",
            Area::Cpu => "CPU",
            Area::Switches => "Context switches and off-CPU time",
            Area::Syscalls => "Syscalls",
            Area::Locks => "Lock waits",
            Area::Gc => "Garbage collection",
            Area::Memory => "Memory",
            Area::Other => "Other",
        }
    }
}

/// Which of the explanation's findings make up a figure. The findings say which of their kinds
/// each of these is; a figure says only what it is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Explains {
    /// Nothing the findings measure: counts of work, memory, a span's calls.
    Nothing,
    /// A request's time: every wait, and time on CPU.
    Requests,
    /// Every switch: the waits that blocked and the waits for a CPU.
    Switches,
    /// The waits that blocked: locks, I/O, the network, sleeps, faults, GC, IPC, idle.
    Blocking,
    /// Waiting for a CPU.
    WaitsForCpu,
    /// Lock waits.
    Locks,
    /// Time on CPU.
    OnCpu,
    /// The garbage collector.
    Gc,
    /// A span's calls one by one: the causes of its slow calls against its typical ones.
    SpanCalls,
}

/// The rates a count family adds to its base name.
const RATES: &str = "[.per_s|.per_op]";

/// Which form of a figure a name is: the figure itself, or one of a count's rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Form {
    Base,
    PerSecond,
    PerOp,
}

/// time(2) is spelled like `syscalls.time`, the time inside all syscalls; its own count is
/// not a named figure (on x86-64 it is a vDSO call and all but never a syscall).
const SYSCALL_NAMED_LIKE_A_FIGURE: &str = "time";

/// task-clock counts nanoseconds, not events: it has a definition of its own
/// (`perf.task-clock`, in ms), and `<counter>` stands for the other counters.
const TIME_COUNTER: &str = "task-clock";

/// The counters with a definition of their own: task-clock for its unit, the others for their
/// area. `<counter>` stands for the rest, which count CPU work.
const SPELLED_OUT_COUNTERS: [&str; 5] = [
    TIME_COUNTER,
    "context-switches",
    "cpu-migrations",
    "major-faults",
    "minor-faults",
];

impl Figure {
    /// The pattern without its rates, and whether it has them.
    fn base(&self) -> (&'static str, bool) {
        match self.pattern.strip_suffix(RATES) {
            Some(b) => (b, true),
            None => (self.pattern, false),
        }
    }

    /// Which form of this figure `name` is, if it is one.
    pub fn matches(&self, name: &str) -> Option<Form> {
        let (base, rates) = self.base();
        let forms: &[(&str, Form)] = if rates {
            &[
                ("", Form::Base),
                (".per_s", Form::PerSecond),
                (".per_op", Form::PerOp),
            ]
        } else {
            &[("", Form::Base)]
        };
        forms.iter().find_map(|&(suffix, form)| {
            let stem = name.strip_suffix(suffix)?;
            base_matches(base, stem).then_some(form)
        })
    }

    /// What fills this figure's placeholder in `name`, its `form`: `read` in
    /// `syscalls.read.per_op`; empty for a figure without one.
    fn fill(&self, name: &str, form: Form) -> String {
        let (base, _) = self.base();
        let stem = match form {
            Form::Base => name,
            Form::PerSecond => name.strip_suffix(".per_s").unwrap_or(name),
            Form::PerOp => name.strip_suffix(".per_op").unwrap_or(name),
        };
        let Some((head, rest)) = base.split_once('<') else {
            return String::new();
        };
        let tail = rest.split_once('>').map_or("", |(_, t)| t);
        stem.strip_prefix(head)
            .and_then(|v| v.strip_suffix(tail))
            .unwrap_or_default()
            .to_string()
    }

    /// The unit of `form` of this figure.
    pub fn unit_of(&self, form: Form) -> Unit {
        match form {
            Form::Base => self.unit,
            Form::PerSecond => Unit::PerSecond,
            Form::PerOp => Unit::PerOp,
        }
    }

    /// The unit a budget's number is in, as `gate --list` gives it: "µs", or
    /// "count; .per_s: 1/s; .per_op: 1/op" for a count with its rates.
    pub fn unit_label(&self) -> String {
        let unit = self.unit.suffix();
        if self.base().1 {
            format!("{unit}; .per_s: 1/s; .per_op: 1/op")
        } else {
            unit.to_string()
        }
    }

    /// The name of this figure's per-operation form, for a figure with one: `cpu.per_op`,
    /// `syscalls.total.per_op`.
    pub fn per_op_name(&self) -> Option<String> {
        let (base, rates) = self.base();
        if base.contains('<') {
            return None;
        }
        if rates {
            Some(format!("{base}.per_op"))
        } else {
            base.ends_with(".per_op").then(|| base.to_string())
        }
    }
}

/// Whether `name` is `base` with its placeholder (if any) filled in.
fn base_matches(base: &str, name: &str) -> bool {
    let Some((head, rest)) = base.split_once('<') else {
        return base == name;
    };
    let Some((kind, tail)) = rest.split_once('>') else {
        return false;
    };
    let Some(value) = name.strip_prefix(head).and_then(|v| v.strip_suffix(tail)) else {
        return false;
    };
    if value.is_empty() || value.contains('.') {
        return false;
    }
    match kind {
        "name" => names_a_syscall(value),
        "label" => true,
        "counter" => {
            !SPELLED_OUT_COUNTERS.contains(&value) && crate::COUNTER_NAMES.contains(&value)
        }
        _ => false,
    }
}

/// Whether `value` is a syscall as runs name them (`read`, `syscall_451` for one the name
/// table lacks), other than time(2).
fn names_a_syscall(value: &str) -> bool {
    value != SYSCALL_NAMED_LIKE_A_FIGURE
        && (crate::syscall_nr(value).is_some()
            || value
                .strip_prefix("syscall_")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
}

const fn figure(
    pattern: &'static str,
    unit: Unit,
    better: Better,
    label: &'static str,
    about: &'static str,
) -> Figure {
    Figure {
        pattern,
        unit,
        better,
        label,
        about,
        headline: false,
        area: Area::Other,
        rank: u8::MAX,
        explained_by: Explains::Nothing,
    }
}

impl Figure {
    /// This figure in `area`, at `rank` among its figures, made up of what `explained_by` names.
    const fn place(self, area: Area, rank: u8, explained_by: Explains) -> Figure {
        Figure {
            area,
            rank,
            explained_by,
            ..self
        }
    }
}

/// A figure the terminal summary leads with.
const fn headline(f: Figure) -> Figure {
    Figure {
        headline: true,
        ..f
    }
}

use Better::{Higher, Lower, Neither};
use Unit::{BytesPerOp, Count, MiB, Micros, MicrosPerOp, Millis, PerSecond, Percent, Seconds};

/// Every figure a run can have, each defined once; in the order `gate --list` and the page
/// show them.
pub const FIGURES: &[Figure] = &[
    figure(
        "duration",
        Seconds,
        Neither,
        "recorded",
        "how long the recording lasted",
    )
    .place(Area::Work, 4, Explains::Nothing),
    figure(
        "operations",
        Count,
        Neither,
        "operations",
        "operations the workload completed (its driver's count, or --operations)",
    )
    .place(Area::Work, 3, Explains::Nothing),
    figure(
        "throughput",
        PerSecond,
        Higher,
        "throughput",
        "operations per second, by the driver's own clock when it reported one",
    )
    .place(Area::Work, 1, Explains::Requests),
    figure(
        "latency.p50",
        Micros,
        Lower,
        "P50 latency",
        "the driver's median operation latency",
    )
    .place(Area::Work, 2, Explains::Requests),
    figure(
        "latency.p90",
        Micros,
        Lower,
        "P90 latency",
        "the driver's 90th percentile latency",
    )
    .place(Area::Work, 2, Explains::Requests),
    figure(
        "latency.p99",
        Micros,
        Lower,
        "P99 latency",
        "the driver's 99th percentile latency",
    )
    .place(Area::Work, 2, Explains::Requests),
    figure(
        "latency.p99_9",
        Micros,
        Lower,
        "P99.9 latency",
        "the driver's 99.9th percentile latency",
    )
    .place(Area::Work, 2, Explains::Requests),
    figure(
        "latency.p99_99",
        Micros,
        Lower,
        "P99.99 latency",
        "the driver's 99.99th percentile latency",
    )
    .place(Area::Work, 2, Explains::Requests),
    figure(
        "latency.max",
        Micros,
        Lower,
        "longest latency",
        "the driver's slowest operation",
    )
    .place(Area::Work, 2, Explains::Requests),
    figure(
        "workload.errors",
        Count,
        Lower,
        "workload errors",
        "operations the driver counted as failed",
    )
    .place(Area::Work, 5, Explains::Nothing),
    headline(figure(
        "syscalls.total[.per_s|.per_op]",
        Count,
        Lower,
        "syscalls",
        "syscalls the target made, counted at exit",
    ))
    .place(Area::Syscalls, 1, Explains::Blocking),
    figure(
        "syscalls.errors[.per_s|.per_op]",
        Count,
        Lower,
        "failed syscalls",
        "syscalls that returned an error",
    )
    .place(Area::Syscalls, 2, Explains::Blocking),
    figure(
        "syscalls.time",
        Millis,
        Lower,
        "time inside syscalls",
        "time inside syscalls, entry to exit, over all threads",
    )
    .place(Area::Syscalls, 3, Explains::Blocking),
    figure(
        "syscalls.<name>[.per_s|.per_op]",
        Count,
        Lower,
        "calls",
        "calls of one syscall",
    )
    .place(Area::Syscalls, 4, Explains::Blocking),
    figure(
        "syscalls.<name>.avg_us",
        Micros,
        Lower,
        "average call",
        "the average time of one call of the syscall, entry to exit",
    )
    .place(Area::Syscalls, 4, Explains::Blocking),
    figure(
        "offcpu.blocked",
        Millis,
        Lower,
        "blocked",
        "thread time blocked: off CPU from a voluntary switch to the wakeup that ended it",
    )
    .place(Area::Switches, 5, Explains::Blocking),
    figure(
        "offcpu.share",
        Percent,
        Lower,
        "off-CPU share",
        "the share of thread time off CPU, blocked or waiting for a CPU",
    )
    .place(Area::Switches, 4, Explains::Blocking),
    figure(
        "runqueue.wait",
        Millis,
        Lower,
        "waiting for a CPU",
        "thread time runnable but not running",
    )
    .place(Area::Switches, 6, Explains::WaitsForCpu),
    figure(
        "runqueue.wait.per_op",
        MicrosPerOp,
        Lower,
        "waiting for a CPU",
        "thread time runnable but not running, per operation",
    )
    .place(Area::Switches, 6, Explains::WaitsForCpu),
    figure(
        "runqueue.after_wakeup",
        Millis,
        Lower,
        "scheduler delay",
        "of the waits for a CPU, the part after wakeups",
    )
    .place(Area::Switches, 7, Explains::WaitsForCpu),
    headline(figure(
        "futex.waits[.per_s|.per_op]",
        Count,
        Lower,
        "futex waits",
        "futex waits of the target's threads",
    ))
    .place(Area::Locks, 1, Explains::Locks),
    figure(
        "futex.wait_time",
        Millis,
        Lower,
        "futex wait time",
        "time threads spent in futex waits",
    )
    .place(Area::Locks, 2, Explains::Locks),
    figure(
        "futex.wait_time.per_op",
        MicrosPerOp,
        Lower,
        "futex wait time",
        "time threads spent in futex waits, per operation",
    )
    .place(Area::Locks, 2, Explains::Locks),
    figure(
        "futex.wait_max",
        Millis,
        Lower,
        "longest futex wait",
        "the longest futex wait",
    )
    .place(Area::Locks, 3, Explains::Locks),
    figure(
        "kernel_locks.contended[.per_s|.per_op]",
        Count,
        Lower,
        "kernel lock waits",
        "waits on contended kernel locks (lock:contention_begin)",
    )
    .place(Area::Locks, 4, Explains::Locks),
    figure(
        "kernel_locks.wait_time",
        Millis,
        Lower,
        "kernel lock wait time",
        "time waiting on contended kernel locks",
    )
    .place(Area::Locks, 5, Explains::Locks),
    figure(
        "span.<label>[.per_s|.per_op]",
        Count,
        Neither,
        "span calls",
        "calls of a --uprobe-span function",
    )
    .place(Area::Locks, 6, Explains::Nothing),
    figure(
        "span.<label>.time",
        Millis,
        Lower,
        "span time",
        "time from entry to return of a --uprobe-span function, over all calls",
    )
    .place(Area::Locks, 6, Explains::Nothing),
    figure(
        "span.<label>.time.per_op",
        MicrosPerOp,
        Lower,
        "span time",
        "time from entry to return of a --uprobe-span function, per operation",
    )
    .place(Area::Locks, 6, Explains::Nothing),
    figure(
        "span.<label>.p50",
        Micros,
        Lower,
        "span P50",
        "the median time from entry to return of a --uprobe-span function, of its calls one by one",
    )
    .place(Area::Locks, 6, Explains::SpanCalls),
    figure(
        "span.<label>.p90",
        Micros,
        Lower,
        "span P90",
        "the 90th percentile time from entry to return of a --uprobe-span function",
    )
    .place(Area::Locks, 6, Explains::SpanCalls),
    figure(
        "span.<label>.p99",
        Micros,
        Lower,
        "span P99",
        "the 99th percentile time from entry to return of a --uprobe-span function",
    )
    .place(Area::Locks, 6, Explains::SpanCalls),
    figure(
        "span.<label>.p99_9",
        Micros,
        Lower,
        "span P99.9",
        "the 99.9th percentile time from entry to return of a --uprobe-span function",
    )
    .place(Area::Locks, 6, Explains::SpanCalls),
    figure(
        "span.<label>.max",
        Micros,
        Lower,
        "longest span",
        "the longest time from entry to return of a --uprobe-span function",
    )
    .place(Area::Locks, 6, Explains::SpanCalls),
    figure(
        "switches.voluntary[.per_s|.per_op]",
        Count,
        Lower,
        "voluntary switches",
        "context switches where the thread blocked (I/O, a lock, a sleep)",
    )
    .place(Area::Switches, 2, Explains::Blocking),
    figure(
        "switches.involuntary[.per_s|.per_op]",
        Count,
        Lower,
        "involuntary switches",
        "context switches where the thread was preempted while still runnable",
    )
    .place(Area::Switches, 3, Explains::WaitsForCpu),
    headline(figure(
        "switches.total[.per_s|.per_op]",
        Count,
        Lower,
        "context switches",
        "context switches of the target's threads, voluntary and involuntary",
    ))
    .place(Area::Switches, 1, Explains::Switches),
    figure(
        "cpu.time",
        Millis,
        Lower,
        "CPU time",
        "CPU time of the target (task-clock when counted, else its threads' time on CPU)",
    )
    .place(Area::Cpu, 2, Explains::OnCpu),
    headline(figure(
        "cpu.per_op",
        MicrosPerOp,
        Lower,
        "CPU",
        "CPU time per operation",
    ))
    .place(Area::Cpu, 1, Explains::OnCpu),
    figure(
        "cpu.utilisation",
        Percent,
        Lower,
        "CPU utilisation",
        "CPU time over the recording's length; 100% is one CPU busy",
    )
    .place(Area::Cpu, 3, Explains::OnCpu),
    figure(
        "perf.task-clock",
        Millis,
        Lower,
        "task-clock",
        "the task-clock perf counter: CPU time of the target",
    )
    .place(Area::Cpu, 4, Explains::OnCpu),
    figure(
        "perf.<counter>",
        Count,
        Lower,
        "perf counter",
        "a perf counter of the target that counts CPU work (cycles, instructions)",
    )
    .place(Area::Cpu, 5, Explains::Nothing),
    figure(
        "perf.context-switches",
        Count,
        Lower,
        "context switches (perf)",
        "the context-switches perf counter of the target",
    )
    .place(Area::Switches, 8, Explains::Nothing),
    figure(
        "perf.cpu-migrations",
        Count,
        Lower,
        "CPU migrations",
        "the cpu-migrations perf counter: moves of the target's threads between CPUs",
    )
    .place(Area::Switches, 9, Explains::Nothing),
    figure(
        "perf.major-faults",
        Count,
        Lower,
        "major faults",
        "the major-faults perf counter: page faults that read from disk",
    )
    .place(Area::Memory, 5, Explains::Nothing),
    figure(
        "perf.minor-faults",
        Count,
        Lower,
        "minor faults",
        "the minor-faults perf counter: page faults served from memory",
    )
    .place(Area::Memory, 6, Explains::Nothing),
    figure(
        "memory.max_rss",
        MiB,
        Lower,
        "peak RSS",
        "the target's peak resident memory",
    )
    .place(Area::Memory, 3, Explains::Nothing),
    figure(
        "gc.cycles[.per_s|.per_op]",
        Count,
        Lower,
        "GC cycles",
        "Go garbage collection cycles",
    )
    .place(Area::Gc, 1, Explains::Gc),
    figure(
        "gc.pauses",
        Count,
        Lower,
        "GC pauses",
        "Go stop-the-world pauses",
    )
    .place(Area::Gc, 2, Explains::Gc),
    figure(
        "gc.pause_total",
        Millis,
        Lower,
        "GC pause time",
        "time in Go stop-the-world pauses",
    )
    .place(Area::Gc, 3, Explains::Gc),
    figure(
        "gc.pause_max",
        Millis,
        Lower,
        "longest GC pause",
        "the longest Go stop-the-world pause",
    )
    .place(Area::Gc, 4, Explains::Gc),
    figure(
        "gc.mark_assists[.per_s|.per_op]",
        Count,
        Lower,
        "GC mark assists",
        "Go mark assists: goroutines made to help the collector",
    )
    .place(Area::Gc, 5, Explains::Gc),
    figure(
        "heap.allocs[.per_s|.per_op]",
        Count,
        Lower,
        "heap allocations",
        "heap allocations counted by dhat",
    )
    .place(Area::Memory, 1, Explains::Nothing),
    figure(
        "heap.bytes",
        MiB,
        Lower,
        "heap allocated",
        "bytes allocated on the heap, counted by dhat",
    )
    .place(Area::Memory, 2, Explains::Nothing),
    figure(
        "heap.bytes.per_op",
        BytesPerOp,
        Lower,
        "heap bytes",
        "bytes allocated on the heap per operation, counted by dhat",
    )
    .place(Area::Memory, 2, Explains::Nothing),
    figure(
        "heap.peak",
        MiB,
        Lower,
        "heap peak",
        "the most bytes live on the heap at once, counted by dhat",
    )
    .place(Area::Memory, 4, Explains::Nothing),
];

// Every figure has its place.
const _: () = {
    let mut i = 0;
    while i < FIGURES.len() {
        assert!(!matches!(FIGURES[i].area, Area::Other) && FIGURES[i].rank < u8::MAX);
        i += 1;
    }
};

/// Where figure `name` stands among all figures, for tables: its area, its rank there, what
/// fills its placeholder (a syscall's or a span's name), its definition's place in [`FIGURES`]
/// and its form. A name no figure defines goes last, in [`Area::Other`].
pub fn placing(name: &str) -> (Area, u8, String, usize, Form) {
    let Some((figure, form)) = definition(name) else {
        return (
            Area::Other,
            u8::MAX,
            name.to_string(),
            usize::MAX,
            Form::Base,
        );
    };
    let index = FIGURES
        .iter()
        .position(|f| f == figure)
        .unwrap_or(usize::MAX);
    (
        figure.area,
        figure.rank,
        figure.fill(name, form),
        index,
        form,
    )
}

/// Figure names with a fixed spelling; `<…>` parts stand for a syscall name, a span label or a
/// perf counter, and `[.per_s|.per_op]` for the rates of a count. [`FIGURES`]' patterns.
pub const NAMES: [&str; FIGURES.len()] = {
    let mut names = [""; FIGURES.len()];
    let mut i = 0;
    while i < FIGURES.len() {
        names[i] = FIGURES[i].pattern;
        i += 1;
    }
    names
};

/// The definitions `name` is a form of: exactly one for every name a run can have.
pub fn definitions(name: &str) -> Vec<(&'static Figure, Form)> {
    definitions_in(FIGURES, name)
}

fn definitions_in<'a>(table: &'a [Figure], name: &str) -> Vec<(&'a Figure, Form)> {
    table
        .iter()
        .filter_map(|f| f.matches(name).map(|form| (f, form)))
        .collect()
}

/// The one definition of `name`, with the form it is.
pub fn definition(name: &str) -> Option<(&'static Figure, Form)> {
    match definitions(name)[..] {
        [one] => Some(one),
        _ => None,
    }
}

/// Names a pattern may spell, its placeholders filled with likely values (some of which the
/// placeholder refuses: task-clock is no `<counter>`).
fn examples(pattern: &str) -> Vec<String> {
    let (base, rates) = match pattern.strip_suffix(RATES) {
        Some(b) => (b, true),
        None => (pattern, false),
    };
    let bases: Vec<String> = match base.split_once('<') {
        None => vec![base.to_string()],
        Some((head, rest)) => {
            let (kind, tail) = rest.split_once('>').unwrap_or((rest, ""));
            let values: Vec<&str> = match kind {
                "name" => vec!["read", "getppid", "futex", "syscall_451"],
                "label" => vec![
                    "acquire", "time", "per_op", "avg_us", "total", "p50", "p99_9", "max",
                ],
                "counter" => crate::COUNTER_NAMES.to_vec(),
                _ => vec![kind],
            };
            values
                .into_iter()
                .map(|v| format!("{head}{v}{tail}"))
                .collect()
        }
    };
    let suffixes: &[&str] = if rates {
        &["", ".per_s", ".per_op"]
    } else {
        &[""]
    };
    bases
        .iter()
        .flat_map(|b| suffixes.iter().map(move |s| format!("{b}{s}")))
        .collect()
}

/// Each way `table` defines a figure twice: a pattern listed twice, or a name one pattern
/// spells that another pattern also matches. Empty for a sound table.
pub fn double_definitions(table: &[Figure]) -> Vec<String> {
    let mut doubles = Vec::new();
    for (i, f) in table.iter().enumerate() {
        if table[..i].iter().any(|g| g.pattern == f.pattern) {
            doubles.push(format!("`{}` is listed twice", f.pattern));
        }
        for name in examples(f.pattern) {
            if f.matches(&name).is_none() {
                continue;
            }
            let others: Vec<&str> = definitions_in(table, &name)
                .iter()
                .map(|(g, _)| g.pattern)
                .filter(|p| *p != f.pattern)
                .collect();
            if !others.is_empty() {
                doubles.push(format!(
                    "`{name}` is both `{}` and `{}`",
                    f.pattern,
                    others.join("`, `")
                ));
            }
        }
    }
    doubles
}

/// A figure's value under `name`, with the unit and direction of its definition. A name with
/// no one definition is a mistake of [`extract`]'s, caught by the tests over recorded runs;
/// left out in a release build.
fn put(m: &mut BTreeMap<String, Metric>, name: impl Into<String>, value: f64) {
    let name = name.into();
    let defs = definitions(&name);
    let [(figure, form)] = defs[..] else {
        debug_assert!(
            false,
            "`{name}` matches {} figure definitions, not one",
            defs.len()
        );
        return;
    };
    m.insert(
        name,
        Metric {
            value,
            unit: figure.unit_of(form),
            better: figure.better,
        },
    );
}

/// A count with its per-second and (when known) per-operation rates.
fn rates(m: &mut BTreeMap<String, Metric>, name: &str, count: f64, secs: f64, ops: Option<f64>) {
    put(m, name, count);
    if secs > 0.0 {
        put(m, format!("{name}.per_s"), count / secs);
    }
    if let Some(ops) = ops.filter(|o| *o > 0.0) {
        put(m, format!("{name}.per_op"), count / ops);
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// A span's label as a figure name spells it: dots (a symbol's `.cold`, `.part.0`) become
/// underscores, so the name has one reading.
fn span_label(s: &crate::SpanRow) -> String {
    let label = if s.label.is_empty() {
        &s.symbol
    } else {
        &s.label
    };
    label.replace('.', "_")
}

/// The percentiles of a span's calls that figures name (`span.<label>.p99`), each with its
/// quantile; `max` is the longest call.
pub const SPAN_PERCENTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99_9", 0.999),
    ("max", 1.0),
];

/// A span percentile's label and percentile, as [`SPAN_PERCENTILES`] names it:
/// `span.handle_request.p99` → `("handle_request", "p99")`.
pub fn span_percentile(name: &str) -> Option<(&str, &'static str)> {
    let rest = name.strip_prefix("span.")?;
    let (label, which) = rest.split_once('.')?;
    let (which, _) = SPAN_PERCENTILES.iter().find(|(p, _)| *p == which)?;
    (!label.is_empty()).then_some((label, *which))
}

/// A span's percentiles in [`SPAN_PERCENTILES`]' order, ns; the longest is the longest call
/// kept whole, or the top bucket's lowest value when that is longer. `None` when no call
/// returned.
pub fn span_percentiles(a: &crate::SpanAnatomy) -> Option<[u64; 5]> {
    if a.count == 0 {
        return None;
    }
    let max = a.max_ns();
    Some(SPAN_PERCENTILES.map(|(_, q)| if q >= 1.0 { max } else { a.at_quantile(q) }))
}

/// Every named figure of `run`.
pub fn extract(run: &Run) -> BTreeMap<String, Metric> {
    let mut m = BTreeMap::new();
    let secs = run.meta.duration_ns() as f64 / 1e9;
    let totals = run.totals();
    let ops = run.operations.map(|o| o as f64);
    let per_op = ops.filter(|o| *o > 0.0);
    let scale = Scale { secs, ops, per_op };
    work_figures(&mut m, run, &scale);
    if run.meta.collector == crate::Collector::Ebpf {
        syscall_figures(&mut m, run, &totals, &scale);
        offcpu_figures(&mut m, &totals, &scale);
        lock_figures(&mut m, &run.locks, &scale);
    }
    memory_figures(&mut m, run, &scale);
    switch_and_cpu_figures(&mut m, run, &totals, &scale);
    m
}

/// What a run's counts are divided by: its seconds, and its operations (all of them, and
/// those a per-operation figure may divide by: more than none).
struct Scale {
    secs: f64,
    ops: Option<f64>,
    per_op: Option<f64>,
}

/// The driver's figures: the work done, its rate and its latencies.
fn work_figures(m: &mut BTreeMap<String, Metric>, run: &Run, scale: &Scale) {
    let Scale { secs, ops, .. } = *scale;
    put(m, "duration", secs);
    if let Some(ops) = ops {
        put(m, "operations", ops);
        match &run.workload {
            // The driver's own clock covers exactly the load.
            Some(w) => put(m, "throughput", w.throughput_per_s),
            None if secs > 0.0 => put(m, "throughput", ops / secs),
            None => {}
        }
    }
    if let Some(w) = &run.workload {
        for (name, v) in [
            ("latency.p50", w.p50_ns),
            ("latency.p90", w.p90_ns),
            ("latency.p99", w.p99_ns),
            ("latency.p99_9", w.p99_9_ns),
            ("latency.p99_99", w.p99_99_ns),
            ("latency.max", w.max_ns),
        ] {
            put(m, name, v as f64 / 1e3);
        }
        put(m, "workload.errors", w.errors as f64);
    }
}

/// The syscalls' counts, errors and time, over all and by name.
fn syscall_figures(
    m: &mut BTreeMap<String, Metric>,
    run: &Run,
    totals: &crate::Totals,
    scale: &Scale,
) {
    let Scale { secs, ops, .. } = *scale;
    rates(m, "syscalls.total", totals.syscalls as f64, secs, ops);
    rates(
        m,
        "syscalls.errors",
        totals.syscall_errors as f64,
        secs,
        ops,
    );
    // Recorded with `--syscall-latency 0`, no call was timed (but futex waits): the time
    // inside syscalls is unknown, not a small number.
    if run.syscalls_timed() {
        put(m, "syscalls.time", totals.syscall_ns as f64 / 1e6);
    }
    // A name no kernel gives (a hand-made run file) has no figure; nor has time(2).
    for s in run.syscalls.iter().filter(|s| names_a_syscall(&s.name)) {
        rates(
            m,
            &format!("syscalls.{}", s.name),
            s.count as f64,
            secs,
            ops,
        );
        if s.count > 0 && !s.untimed() {
            put(
                m,
                format!("syscalls.{}.avg_us", s.name),
                s.total_ns as f64 / s.count as f64 / 1e3,
            );
        }
    }
}

/// Off-CPU time: blocked, its share, and the waits for a CPU.
fn offcpu_figures(m: &mut BTreeMap<String, Metric>, totals: &crate::Totals, scale: &Scale) {
    let runq = totals.runqueue_ns;
    put(m, "offcpu.blocked", totals.blocked_ns as f64 / 1e6);
    if let Some(share) = totals.offcpu_share() {
        put(m, "offcpu.share", share * 100.0);
    }
    put(m, "runqueue.wait", runq as f64 / 1e6);
    // Of the wait for a CPU, the part after wakeups: scheduler delay.
    put(
        m,
        "runqueue.after_wakeup",
        totals.runqueue_after_wakeup_ns as f64 / 1e6,
    );
    if let Some(ops) = scale.per_op {
        put(m, "runqueue.wait.per_op", runq as f64 / 1e3 / ops);
    }
}

/// Futex waits, kernel lock contention and the spans' calls, times and percentiles.
fn lock_figures(m: &mut BTreeMap<String, Metric>, l: &crate::Locks, scale: &Scale) {
    let Scale { secs, ops, per_op } = *scale;
    rates(m, "futex.waits", l.futex.count as f64, secs, ops);
    put(m, "futex.wait_time", l.futex.total_ns as f64 / 1e6);
    if let Some(ops) = per_op {
        put(
            m,
            "futex.wait_time.per_op",
            l.futex.total_ns as f64 / 1e3 / ops,
        );
    }
    put(m, "futex.wait_max", l.futex.max_ns as f64 / 1e6);
    if let Some(c) = &l.contention {
        rates(m, "kernel_locks.contended", c.count as f64, secs, ops);
        put(m, "kernel_locks.wait_time", c.total_ns as f64 / 1e6);
    }
    for s in &l.spans {
        let name = format!("span.{}", span_label(s));
        rates(m, &name, s.stats.count as f64, secs, ops);
        put(m, format!("{name}.time"), s.stats.total_ns as f64 / 1e6);
        if let Some(ops) = per_op {
            put(
                m,
                format!("{name}.time.per_op"),
                s.stats.total_ns as f64 / 1e3 / ops,
            );
        }
        if let Some(ps) = s.anatomy.as_ref().and_then(span_percentiles) {
            for ((which, _), v) in SPAN_PERCENTILES.iter().zip(ps) {
                put(m, format!("{name}.{which}"), v as f64 / 1e3);
            }
        }
    }
}

/// Memory: the peak RSS, the heap profile's counts, and Go's GC.
fn memory_figures(m: &mut BTreeMap<String, Metric>, run: &Run, scale: &Scale) {
    let Scale { secs, ops, per_op } = *scale;
    if let Some(kb) = run.max_rss_kb {
        put(m, "memory.max_rss", kb as f64 / 1024.0);
    }
    if let Some(h) = &run.heap {
        rates(m, "heap.allocs", h.allocations as f64, secs, ops);
        put(m, "heap.bytes", h.bytes as f64 / MIB);
        if let Some(ops) = per_op {
            put(m, "heap.bytes.per_op", h.bytes as f64 / ops);
        }
        put(m, "heap.peak", h.peak_bytes as f64 / MIB);
    }
    if let Some(g) = &run.gc {
        rates(m, "gc.cycles", g.cycles as f64, secs, ops);
        put(m, "gc.pauses", g.pauses as f64);
        put(m, "gc.pause_total", g.pause_total_ns as f64 / 1e6);
        put(m, "gc.pause_max", g.pause_max_ns as f64 / 1e6);
        rates(m, "gc.mark_assists", g.mark_assists as f64, secs, ops);
    }
}

/// Context switches, CPU time and the perf counters.
fn switch_and_cpu_figures(
    m: &mut BTreeMap<String, Metric>,
    run: &Run,
    totals: &crate::Totals,
    scale: &Scale,
) {
    let Scale { secs, ops, per_op } = *scale;
    let vol = totals.voluntary as f64;
    let invol = totals.involuntary as f64;
    rates(m, "switches.voluntary", vol, secs, ops);
    rates(m, "switches.involuntary", invol, secs, ops);
    rates(m, "switches.total", vol + invol, secs, ops);

    let cpu_ns = run.counter(TIME_COUNTER).unwrap_or(totals.oncpu_ns) as f64;
    put(m, "cpu.time", cpu_ns / 1e6);
    if let Some(ops) = per_op {
        put(m, "cpu.per_op", cpu_ns / 1e3 / ops);
    }
    if secs > 0.0 {
        put(m, "cpu.utilisation", cpu_ns / 1e9 / secs * 100.0);
    }
    for c in &run.counters {
        let Some(v) = c.value else { continue };
        if c.name == TIME_COUNTER {
            put(m, "perf.task-clock", v as f64 / 1e6);
        } else if crate::COUNTER_NAMES.contains(&c.name.as_str()) {
            // A counter the recorder does not count (an older or hand-made run file) has
            // no figure.
            put(m, format!("perf.{}", c.name), v as f64);
        }
    }
}

/// The figure `name` of `run` (`figures` is `extract(run)`). A syscall the run never made is a
/// figure of 0, not a missing one, when the kernel side saw every syscall; per-operation
/// figures still need an operation count.
pub fn lookup(run: &Run, figures: &BTreeMap<String, Metric>, name: &str) -> Option<Metric> {
    if let Some(m) = figures.get(name) {
        return Some(m.clone());
    }
    let counted = run.meta.collector == crate::Collector::Ebpf;
    let per_op_ok = !name.ends_with(".per_op") || run.operations.is_some_and(|o| o > 0);
    let (figure, form) = definition(name)?;
    (counted && per_op_ok && name.starts_with("syscalls.")).then_some(Metric {
        value: 0.0,
        unit: figure.unit_of(form),
        better: figure.better,
    })
}

/// The unit a budget's number is in, for a [`NAMES`] entry: "µs", "count; .per_s: 1/s; .per_op:
/// 1/op" for a count with its rates. A figure's own name gives its own unit.
pub fn unit_label(pattern: &str) -> String {
    if let Some(f) = FIGURES.iter().find(|f| f.pattern == pattern) {
        return f.unit_label();
    }
    definition(pattern).map_or_else(String::new, |(f, form)| f.unit_of(form).suffix().into())
}

/// Whether `name` is a figure some run can have (for validating budgets).
pub fn is_known(name: &str) -> bool {
    definition(name).is_some()
}

/// The headline figures `figures` has, in [`FIGURES`]' order: each in its per-operation form
/// when the run has one, as (definition, value).
pub fn headline_per_op(figures: &BTreeMap<String, Metric>) -> Vec<(&'static Figure, &Metric)> {
    FIGURES
        .iter()
        .filter(|f| f.headline)
        .filter_map(|f| Some((f, figures.get(&f.per_op_name()?)?)))
        .collect()
}

/// A figure over repeated runs: its median, range and how many runs had it.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Runs that had the figure.
    pub n: usize,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        })
    }
}

/// The median, min–max and count of `values` (`None` when empty), the one
/// statistic of repeats that comparisons, gates and story tables share.
pub fn spread(values: &[f64]) -> Option<Spread> {
    Spread::of(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_cover_what_extract_produces() {
        let mut run = with_span(crate::tests::sample_run());
        run.operations = Some(10);
        run.gc = Some(crate::GoGc {
            cycles: 3,
            pauses: 6,
            pause_total_ns: 600_000,
            pause_max_ns: 200_000,
            mark_assists: 40,
            ..Default::default()
        });
        let names = extract(&run);
        for family in [
            "gc.cycles",
            "gc.mark_assists",
            "switches.total",
            "futex.waits",
        ] {
            for rate in ["", ".per_s", ".per_op"] {
                let name = format!("{family}{rate}");
                assert!(names.contains_key(&name), "{name} is not produced");
            }
        }
        for name in names.keys() {
            assert!(is_known(name), "{name} is produced but not known");
        }
        for bad in [
            "switches.totl",
            "syscalls.nosuchcall",
            "perf.bogus",
            "syscalls.read.per_hour",
            "span.",
        ] {
            assert!(!is_known(bad), "{bad}");
        }
        assert!(is_known("syscalls.sendmmsg.per_op") && is_known("span.acquire.time.per_op"));
        // `gate --list` gives every produced figure the unit it is extracted in.
        for (name, metric) in &names {
            let pattern = NAMES
                .iter()
                .find(|p| {
                    let base = p.strip_suffix("[.per_s|.per_op]").unwrap_or(p);
                    let rest = if base.contains('<') {
                        // `syscalls.<name>…`: match on the prefix and the fixed tail.
                        let (head, tail) = base.split_once('<').unwrap();
                        let tail = tail.split_once('>').unwrap().1;
                        name.strip_prefix(head).and_then(|r| {
                            let after = r.split_once('.').map_or("", |(_, t)| t);
                            let after = if after.is_empty() {
                                String::new()
                            } else {
                                format!(".{after}")
                            };
                            after.strip_prefix(tail).map(str::to_string)
                        })
                    } else {
                        name.strip_prefix(base).map(str::to_string)
                    };
                    match rest.as_deref() {
                        Some("") => true,
                        Some(".per_s" | ".per_op") => p.ends_with("[.per_s|.per_op]"),
                        _ => false,
                    }
                })
                .unwrap_or_else(|| panic!("{name} matches no listed pattern"));
            let label = unit_label(pattern);
            let unit = metric.unit.suffix();
            let rate = [".per_s", ".per_op"].iter().find(|r| name.ends_with(*r));
            let listed = match (pattern.ends_with("[.per_s|.per_op]"), rate) {
                (true, Some(r)) => label.contains(&format!("{r}: {unit}")),
                // perf counters: a count, but task-clock's is a time.
                _ => {
                    label.starts_with(unit) || label.ends_with(&format!("{}: {unit})", &name[5..]))
                }
            };
            assert!(listed, "{name}: extracted in {unit}, listed as {label}");
        }
    }

    #[test]
    fn no_figure_is_defined_twice() {
        let doubles = double_definitions(FIGURES);
        assert!(doubles.is_empty(), "{}", doubles.join("\n"));
        for f in FIGURES {
            assert!(!f.about.is_empty() && !f.label.is_empty(), "{}", f.pattern);
        }
    }

    #[test]
    fn a_double_definition_is_caught() {
        let voluntary = FIGURES
            .iter()
            .find(|f| f.pattern == "switches.voluntary[.per_s|.per_op]")
            .unwrap();
        // The same pattern twice.
        let twice = [*voluntary, *voluntary];
        assert!(!double_definitions(&twice).is_empty());
        // A fixed name that a family's pattern also spells.
        let read = Figure {
            pattern: "syscalls.read.per_op",
            ..*voluntary
        };
        let family = *FIGURES
            .iter()
            .find(|f| f.pattern == "syscalls.<name>[.per_s|.per_op]")
            .unwrap();
        let doubles = double_definitions(&[family, read]);
        assert!(
            doubles.iter().any(|d| d.contains("syscalls.read.per_op")),
            "{doubles:?}"
        );
        // time(2) would be read as the time inside all syscalls.
        assert_eq!(definitions("syscalls.time").len(), 1);
        assert_eq!(definitions("syscalls.time")[0].0.unit, Unit::Millis);
    }

    #[test]
    fn names_and_units_are_read_off_the_table() {
        assert_eq!(NAMES.len(), FIGURES.len());
        assert_eq!(unit_label("perf.task-clock"), "ms");
        assert_eq!(unit_label("perf.<counter>"), "count");
        assert_eq!(unit_label("heap.bytes.per_op"), "B/op");
        assert_eq!(
            unit_label("gc.cycles[.per_s|.per_op]"),
            "count; .per_s: 1/s; .per_op: 1/op"
        );
        assert!(is_known("syscalls.syscall_451.per_s"));
        assert!(!is_known("perf.<cycles>") && !is_known("span.a.b"));
        let mut run = crate::tests::sample_run();
        run.operations = Some(10);
        let m = extract(&run);
        let heads: Vec<&str> = headline_per_op(&m).iter().map(|(f, _)| f.label).collect();
        assert_eq!(
            heads,
            ["syscalls", "futex waits", "context switches", "CPU"]
        );
    }

    /// A span `handle.request` of 1000 calls: 990 of 200 µs, 9 of 1 ms and 1 of 8 ms, the
    /// slowest kept whole at 8.3 ms.
    fn with_span(mut run: Run) -> Run {
        run.locks.spans.push(crate::SpanRow {
            label: "handle.request".into(),
            symbol: "handle_request".into(),
            stats: crate::WaitSummary {
                count: 1000,
                total_ns: 990 * 200_000 + 9 * 1_000_000 + 8_300_000,
                ..Default::default()
            },
            anatomy: Some(crate::SpanAnatomy {
                count: 1000,
                total_ns: 990 * 200_000 + 9 * 1_000_000 + 8_300_000,
                hist: vec![(200_000, 990), (999_424, 9), (8_257_536, 1)],
                instances: vec![crate::SpanInstance {
                    duration_ns: 8_300_000,
                    slow: true,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
        run
    }

    #[test]
    fn span_percentiles_come_from_the_histogram_of_every_call() {
        let run = with_span(crate::tests::sample_run());
        let m = extract(&run);
        let got: Vec<(&str, f64, &str)> = m
            .iter()
            .filter(|(n, _)| span_percentile(n).is_some())
            .map(|(n, x)| (n.as_str(), x.value, x.unit.suffix()))
            .collect();
        // P99: the 10 calls from the top are 8 ms and nine of 1 ms, so the 1 ms bucket's
        // lowest value; P99.9: the one call of 8 ms; the longest: the call kept whole.
        assert_eq!(
            got,
            [
                ("span.handle_request.max", 8300.0, "µs"),
                ("span.handle_request.p50", 200.0, "µs"),
                ("span.handle_request.p90", 200.0, "µs"),
                ("span.handle_request.p99", 999.424, "µs"),
                ("span.handle_request.p99_9", 8257.536, "µs"),
            ]
        );
        for (name, _, _) in &got {
            assert_eq!(definition(name).unwrap().0.better, Better::Lower, "{name}");
        }
        assert_eq!(
            span_percentile("span.handle_request.p99_9"),
            Some(("handle_request", "p99_9"))
        );
        assert_eq!(span_percentile("span.handle_request.time"), None);
        assert_eq!(span_percentile("latency.p99"), None);
        assert_eq!(unit_label("span.<label>.p99"), "µs");
        // With no call kept whole, the longest is the top bucket's lowest value.
        let mut run = run;
        let a = run.locks.spans[0].anatomy.as_mut().unwrap();
        a.instances.clear();
        assert_eq!(extract(&run)["span.handle_request.max"].value, 8257.536);
        // No call returned, or a span recorded before calls were measured one by one: no
        // percentiles, the span's other figures as before.
        for anatomy in [Some(crate::SpanAnatomy::default()), None] {
            run.locks.spans[0].anatomy = anatomy;
            let m = extract(&run);
            assert!(m.contains_key("span.handle_request.time"));
            assert!(!m.keys().any(|n| span_percentile(n).is_some()), "{m:?}");
        }
    }

    #[test]
    fn syscalls_never_made_are_zero() {
        let mut run = crate::tests::sample_run();
        let figures = extract(&run);
        assert_eq!(
            lookup(&run, &figures, "syscalls.sendto").unwrap().value,
            0.0
        );
        assert!(lookup(&run, &figures, "syscalls.sendto.per_op").is_none());
        assert!(lookup(&run, &figures, "syscalls.nosuchcall").is_none());
        run.operations = Some(10);
        let figures = extract(&run);
        let m = lookup(&run, &figures, "syscalls.sendto.per_op").unwrap();
        assert_eq!((m.value, m.unit.suffix()), (0.0, "1/op"));
        run.meta.collector = crate::Collector::Degraded;
        assert!(lookup(&run, &figures, "syscalls.sendto").is_none());
    }

    #[test]
    fn untimed_syscalls_have_no_time_figures() {
        let mut run = crate::tests::sample_run();
        // 1000 getppid calls, every one timed: 100 µs in all.
        assert_eq!(extract(&run)["syscalls.time"].value, 0.1);
        assert_eq!(extract(&run)["syscalls.getppid.avg_us"].value, 0.1);
        assert_eq!(run.syscall_timing(), None);
        // One in ten timed: the total is their mean times the count, as the reader wrote it.
        run.syscalls[0].timed = Some(100);
        let m = extract(&run);
        assert_eq!(m["syscalls.time"].value, 0.1);
        assert_eq!(m["syscalls.getppid"].value, 1000.0);
        assert!(
            run.syscall_timing()
                .unwrap()
                .contains("100 of 1,000 calls timed")
        );
        // None timed: counts stay, times go.
        run.syscalls[0].timed = Some(0);
        run.syscalls[0].total_ns = 0;
        let m = extract(&run);
        assert_eq!(m["syscalls.getppid"].value, 1000.0);
        assert!(!m.contains_key("syscalls.time"));
        assert!(!m.contains_key("syscalls.getppid.avg_us"));
        assert!(run.syscall_timing().unwrap().contains("not timed"));
    }

    #[test]
    fn per_op_only_with_operations() {
        let mut run = crate::tests::sample_run();
        let m = extract(&run);
        assert!(m.contains_key("switches.voluntary.per_s"));
        assert!(!m.contains_key("switches.voluntary.per_op"));
        run.operations = Some(10);
        let m = extract(&run);
        assert_eq!(
            m["switches.voluntary.per_op"].value,
            run.voluntary() as f64 / 10.0
        );
        assert_eq!(m["syscalls.getppid"].value, 1000.0);
        assert_eq!(m["syscalls.getppid.per_op"].value, 100.0);
        assert_eq!(m["throughput"].better, Better::Higher);
    }
}
