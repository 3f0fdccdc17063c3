//! `bench-overhead`'s span section: what `switchyard record --span FN` costs per instance of
//! FN, next to bpftrace timing the same function with a uprobe and a uretprobe, and next to
//! the traps alone (bpftrace's empty uprobe and uretprobe on it).
//!
//! The loops (`workloads/runner/span-loops`) call one function at a set rate, pacing
//! themselves by spinning on the clock between calls, and time each call on its own: their
//! figure is the mean time of a call, from just before it to just after it returned, which is
//! where a span's probes run. They call it for half a second before timing any call, so that
//! what is timed is a span in its steady state: until its first instances set the threshold
//! of the slow ones, every instance crosses to user space. The native loop has two functions that do the same work: one
//! starts with `push %rbp`, which the kernel emulates at a uprobe, the other with
//! `mov 0x0(%rip),%rax`, which it single-steps, with nothing it emulates before its return.
//! The Go loop calls `main.work`, whose span is probed past its stack check and at its `RET`.
//! Both are built at each run, the C one with gcc and the Go one with GO, into SPAN_DIR.
//!
//! Each loop and rate is a group of rows with its own untraced run. The span's row is
//! measured against the same recording without the span (`--no-stacks --syscalls none`, and
//! for Go `--no-go-gc`), so its added cost is the span's alone.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use switchyard_model::{metrics::spread, units::grouped};

use super::{Knobs, Row, Section, Wrap};
use crate::bench::{self, Table};

const C_SOURCE: &str = include_str!("../../span-loops/loop.c");
const GO_SOURCE: &str = include_str!("../../span-loops/main.go");
/// The binaries' names in SPAN_DIR.
const C_LOOP: &str = "span-loop";
const GO_LOOP: &str = "span-loop-go";

/// Where a loop's function starts, and so where its span's entry probe lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `push %rbp` first: the kernel emulates it.
    Push,
    /// `mov 0x0(%rip),%rax` first, and nothing emulated before the return: single-stepped.
    Load,
    /// Go's `main.work`: past its stack check, `push %rbp`; its return at its `RET`.
    Go,
}

/// One loop of the section: the function's kind and the calls a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loop {
    pub entry: Entry,
    pub rate: u64,
}

impl Loop {
    /// The loop's binary in SPAN_DIR.
    pub(super) fn binary(self, k: &Knobs) -> PathBuf {
        match self.entry {
            Entry::Push | Entry::Load => k.span_dir.join(C_LOOP),
            Entry::Go => k.span_dir.join(GO_LOOP),
        }
    }

    /// The function it calls.
    pub(super) fn symbol(self) -> &'static str {
        match self.entry {
            Entry::Push => "work_push",
            Entry::Load => "work_load",
            Entry::Go => "main.work",
        }
    }

    /// The loop's words (after `taskset -c CPU`) and the field it reports.
    pub fn workload(self, k: &Knobs) -> (Vec<String>, &'static str) {
        let mut w = vec![self.binary(k).to_string_lossy().into_owned()];
        match self.entry {
            Entry::Push => w.push("push".into()),
            Entry::Load => w.push("load".into()),
            Entry::Go => {}
        }
        w.push(self.rate.to_string());
        w.push(k.span_calls.to_string());
        (w, "ns_per_call")
    }

    /// How its rows' labels start.
    pub(super) fn name(self) -> String {
        let first = match self.entry {
            Entry::Push => "C, `push %rbp` first",
            Entry::Load => "C, `mov 0x0(%rip),%rax` first",
            Entry::Go => "Go `main.work`",
        };
        format!("{first}, {}/s", grouped(self.rate as f64, 0))
    }
}

/// The section's rows: per loop (each entry kind at each of SPAN_RATES), untraced, recorded
/// without and with the span, and for native code bpftrace's histogram and empty probes.
pub fn rows(k: &Knobs) -> Vec<Row> {
    let mut all = Vec::new();
    for entry in [Entry::Push, Entry::Load, Entry::Go] {
        for &rate in &k.span_rates {
            let l = Loop { entry, rate };
            let name = l.name();
            let mut row = |key: &'static str, label: String, wrap: Wrap| {
                all.push(Row {
                    section: Section::Span,
                    key,
                    label: format!("{name}: {label}"),
                    wrap,
                    attached: None,
                    anchor: None,
                    missing: None,
                    span: Some(l),
                })
            };
            let flags = if entry == Entry::Go {
                "--no-stacks --syscalls none --no-go-gc"
            } else {
                "--no-stacks --syscalls none"
            };
            let words = |s: &str| s.split_whitespace().map(str::to_string).collect();
            row("untraced", "untraced".into(), Wrap::Plain);
            row(
                "record",
                format!("switchyard {flags}"),
                Wrap::Record(words(flags)),
            );
            let symbol = l.symbol();
            let mut span: Vec<String> = words(flags);
            span.push("--span".into());
            span.push(format!("{symbol}@{}", l.binary(k).display()));
            row(
                "span",
                format!("+ --span {symbol} (added: over the row above)"),
                Wrap::Record(span),
            );
            if entry == Entry::Go {
                continue;
            }
            let probe = format!("{}:{symbol}", l.binary(k).display());
            row(
                "bpftrace-hist",
                "bpftrace: uprobe + uretprobe, histogram".into(),
                Wrap::Bpftrace(format!(
                    "uprobe:{probe} {{ @s[tid] = nsecs; }} uretprobe:{probe} /@s[tid]/ {{ @h = \
                     hist(nsecs - @s[tid]); delete(@s[tid]); }}"
                )),
            );
            row(
                "bpftrace-empty",
                "bpftrace: empty uprobe + uretprobe (the traps)".into(),
                Wrap::Bpftrace(format!("uprobe:{probe} {{ }} uretprobe:{probe} {{ }}")),
            );
        }
    }
    all
}

/// Why the loops could not be built, if they could not: the native one, the Go one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Built {
    pub native: Option<String>,
    pub go: Option<String>,
}

/// Builds the loops into SPAN_DIR: the C one with gcc -O2, the Go one with GO
/// (GOTOOLCHAIN=local).
pub fn build(k: &Knobs) -> Built {
    let dir = &k.span_dir;
    let go_src = dir.join("go");
    if let Err(e) = fs::create_dir_all(&go_src) {
        let why = format!("{} ({e})", dir.display());
        return Built {
            native: Some(why.clone()),
            go: Some(why),
        };
    }
    let native = write_and_run(&dir.join("loop.c"), C_SOURCE, "gcc", {
        let mut c = Command::new("gcc");
        c.arg("-O2")
            .arg("-o")
            .arg(dir.join(C_LOOP))
            .arg(dir.join("loop.c"));
        c
    });
    let go = if k.go.is_file() {
        let _ = fs::write(go_src.join("go.mod"), "module spanloop\n\ngo 1.21\n");
        write_and_run(&go_src.join("main.go"), GO_SOURCE, "go build", {
            let mut c = Command::new(&k.go);
            c.args(["build", "-o"])
                .arg(dir.join(GO_LOOP))
                .arg(".")
                .current_dir(&go_src)
                .env("GOTOOLCHAIN", "local");
            c
        })
    } else {
        Some(format!("Go (GO={})", k.go.display()))
    };
    Built { native, go }
}

/// Writes `source` to `file`, then runs `c`; why it failed, if it did.
fn write_and_run(file: &Path, source: &str, what: &str, mut c: Command) -> Option<String> {
    if let Err(e) = fs::write(file, source) {
        return Some(format!("{} ({e})", file.display()));
    }
    match c.output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().last().unwrap_or("").trim();
            Some(format!("{what} to succeed: {last}"))
        }
        Err(e) => Some(format!("{what} ({e})")),
    }
}

/// Marks the rows whose loop did not build as missing it.
pub fn mark_unbuilt(rows: &mut [Row], built: &Built) {
    for r in rows.iter_mut().filter(|r| r.missing.is_none()) {
        let why = match r.span.map(|l| l.entry) {
            Some(Entry::Push | Entry::Load) => &built.native,
            Some(Entry::Go) => &built.go,
            None => continue,
        };
        r.missing.clone_from(why);
    }
}

/// The section's table from its rows and their samples (per row, one figure per repeat in
/// repeat order), group by group (each loop's rows follow its untraced one).
pub fn table(rows: &[(&Row, &[f64])]) -> String {
    let mut t = head();
    let mut start = 0;
    while start < rows.len() {
        let group = rows[start].0.span;
        let end = rows[start..]
            .iter()
            .position(|(r, _)| r.span != group)
            .map_or(rows.len(), |n| start + n);
        group_rows(&mut t, &rows[start..end]);
        start = end;
    }
    t.render()
}

/// The section's header.
pub fn head() -> Table {
    Table::new(&[
        "configuration",
        "ns/call",
        "added ns",
        "× base",
        "÷ bpftrace histogram",
        "beyond the traps, ns",
    ])
}

/// Each repeat's `a - b`.
pub(super) fn minus(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

/// A figure in ns with its min–max over the repeats.
pub(super) fn ns_cell(v: &[f64]) -> String {
    match spread(v) {
        None => "–".into(),
        Some(s) if s.n == 1 => grouped(s.median, 0),
        Some(s) => format!(
            "{} ({}–{})",
            grouped(s.median, 0),
            grouped(s.min, 0),
            grouped(s.max, 0)
        ),
    }
}

/// One loop's rows: the first is its untraced run.
fn group_rows(t: &mut Table, rows: &[(&Row, &[f64])]) {
    let find = |key: &str| {
        rows.iter()
            .find(|(r, s)| r.key == key && r.missing.is_none() && !s.is_empty())
            .map(|(_, s)| *s)
    };
    let Some(base) = find("untraced") else {
        for (row, _) in rows {
            let why = row.missing.as_deref().unwrap_or("its untraced run");
            t.missing_row(&row.label, why);
        }
        return;
    };
    let over_base = |key: &str| find(key).map(|s| minus(s, base));
    let hist = over_base("bpftrace-hist");
    let traps = over_base("bpftrace-empty");
    let go = rows[0].0.span.is_some_and(|l| l.entry == Entry::Go);
    for (row, samples) in rows {
        if let Some(why) = &row.missing {
            t.missing_row(&row.label, why);
            continue;
        }
        let Some(median) = spread(samples) else {
            continue;
        };
        // The span's own cost is over the same recording without it.
        let added = match (row.key, find("record")) {
            ("span", Some(record)) => minus(samples, record),
            _ => minus(samples, base),
        };
        let times = bench::ratio_cell(bench::ratio_spread(&bench::ratios(samples, base)));
        let of_hist = match (row.key, &hist) {
            ("span", _) if go => "none: bpftrace has no safe return probe on Go code".into(),
            ("span" | "bpftrace-hist" | "bpftrace-empty", Some(h)) => {
                bench::ratio_cell(bench::ratio_spread(&bench::ratios(&added, h)))
            }
            _ => String::new(),
        };
        let beyond = match (row.key, &traps) {
            ("span" | "bpftrace-hist", Some(e)) => ns_cell(&minus(&added, e)),
            _ => String::new(),
        };
        t.row(vec![
            row.label.clone(),
            grouped(median.median, 1),
            spread(&added).map_or("–".into(), |s| grouped(s.median, 1)),
            times,
            of_hist,
            beyond,
        ]);
    }
}

/// What the section measured, printed under its table.
pub const NOTE: &str = "each group: a loop pinned to one CPU calling one function at the rate \
named, paced by spinning on the clock, each call timed on its own (ns/call: the mean, clock \
reads included). The span's row is recorded with the same flags as the row above it, and its \
added ns are over that row: the span's own cost per instance. ÷ bpftrace histogram: added ns over \
what bpftrace's uprobe + uretprobe timing the function into a histogram adds, repeat by repeat \
(goal: ≤ 1.0); beyond the traps: added ns less what bpftrace's empty uprobe + uretprobe on the \
same function add, the bookkeeping a span does beyond the two traps (goal: ≤ 200 ns). \
`push %rbp` is emulated at a uprobe; `mov 0x0(%rip),%rax` is single-stepped, a second trap. A \
Go function's span is a probe past its stack check and one on its RET, never a uretprobe: one \
makes Go die (unknown caller pc), so bpftrace, which has no other return probe, has no row.";

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs() -> Knobs {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct K {
            #[command(flatten)]
            k: Knobs,
        }
        K::parse_from(["k", "--span-dir", "/s", "--span-rates", "10000"]).k
    }

    #[test]
    fn each_loop_has_its_untraced_recorded_span_and_bpftrace_rows() {
        let rows = rows(&knobs());
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "C, `push %rbp` first, 10,000/s: untraced",
                "C, `push %rbp` first, 10,000/s: switchyard --no-stacks --syscalls none",
                "C, `push %rbp` first, 10,000/s: + --span work_push (added: over the row above)",
                "C, `push %rbp` first, 10,000/s: bpftrace: uprobe + uretprobe, histogram",
                "C, `push %rbp` first, 10,000/s: bpftrace: empty uprobe + uretprobe (the traps)",
                "C, `mov 0x0(%rip),%rax` first, 10,000/s: untraced",
                "C, `mov 0x0(%rip),%rax` first, 10,000/s: switchyard --no-stacks --syscalls none",
                "C, `mov 0x0(%rip),%rax` first, 10,000/s: + --span work_load (added: over the row above)",
                "C, `mov 0x0(%rip),%rax` first, 10,000/s: bpftrace: uprobe + uretprobe, histogram",
                "C, `mov 0x0(%rip),%rax` first, 10,000/s: bpftrace: empty uprobe + uretprobe (the traps)",
                "Go `main.work`, 10,000/s: untraced",
                "Go `main.work`, 10,000/s: switchyard --no-stacks --syscalls none --no-go-gc",
                "Go `main.work`, 10,000/s: + --span main.work (added: over the row above)",
            ]
        );
        assert_eq!(
            rows[2].wrap,
            Wrap::Record(
                [
                    "--no-stacks",
                    "--syscalls",
                    "none",
                    "--span",
                    "work_push@/s/span-loop"
                ]
                .map(String::from)
                .to_vec()
            )
        );
        assert_eq!(
            rows[4].wrap,
            Wrap::Bpftrace(
                "uprobe:/s/span-loop:work_push { } uretprobe:/s/span-loop:work_push { }".into()
            )
        );
        assert_eq!(
            rows[10].span.unwrap().workload(&knobs()).0,
            ["/s/span-loop-go", "10000", "5000"]
        );
    }

    #[test]
    fn the_span_is_over_its_recording_and_the_traps_over_untraced() {
        let rows = rows(&knobs());
        // untraced, record, span, bpftrace histogram, bpftrace empty: two repeats.
        let data: [&[f64]; 5] = [
            &[50.0, 60.0],
            &[55.0, 60.0],
            &[1_455.0, 1_660.0],
            &[2_050.0, 2_060.0],
            &[1_250.0, 1_360.0],
        ];
        let mut pairs: Vec<(&Row, &[f64])> = rows[..5].iter().zip(data).collect();
        let go = [&rows[10], &rows[11], &rows[12]];
        let go_data: [&[f64]; 3] = [&[70.0], &[70.0], &[2_070.0]];
        pairs.extend(go.into_iter().zip(go_data));
        assert_eq!(
            table(&pairs),
            "| configuration | ns/call | added ns | × base | ÷ bpftrace histogram | beyond the traps, ns |\n\
             |---|---|---|---|---|---|\n\
             | C, `push %rbp` first, 10,000/s: untraced | 55.0 | 0.0 | 1.00 (1.00–1.00) |  |  |\n\
             | C, `push %rbp` first, 10,000/s: switchyard --no-stacks --syscalls none | 57.5 | 2.5 | 1.05 (1.00–1.10) |  |  |\n\
             | C, `push %rbp` first, 10,000/s: + --span work_push (added: over the row above) | 1,557.5 | 1,500.0 | 28.4 (27.7–29.1) | 0.750 (0.700–0.800) | 250 (200–300) |\n\
             | C, `push %rbp` first, 10,000/s: bpftrace: uprobe + uretprobe, histogram | 2,055.0 | 2,000.0 | 37.7 (34.3–41.0) | 1.00 (1.00–1.00) | 750 (700–800) |\n\
             | C, `push %rbp` first, 10,000/s: bpftrace: empty uprobe + uretprobe (the traps) | 1,305.0 | 1,250.0 | 23.8 (22.7–25.0) | 0.625 (0.600–0.650) |  |\n\
             | Go `main.work`, 10,000/s: untraced | 70.0 | 0.0 | 1.00 |  |  |\n\
             | Go `main.work`, 10,000/s: switchyard --no-stacks --syscalls none --no-go-gc | 70.0 | 0.0 | 1.00 |  |  |\n\
             | Go `main.work`, 10,000/s: + --span main.work (added: over the row above) | 2,070.0 | 2,000.0 | 29.6 | none: bpftrace has no safe return probe on Go code |  |\n"
        );
    }
}
