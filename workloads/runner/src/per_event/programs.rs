//! `bench-overhead`'s span programs: what a span's own BPF programs cost per instance, as the
//! kernel counts it (`BPF_ENABLE_STATS`: each program's run time and runs), beside bpftrace's
//! programs on the same function at the same time.
//!
//! The span table above measures a call as the loop sees it, traps included; on these
//! machines a run's traps vary by more than a span's whole bookkeeping, so "beyond the traps"
//! there spreads over hundreds of ns. Here every tool is attached to one loop together, so
//! each program runs on the same calls under the same load, and each is timed alone:
//! - switchyard's span (its entry and return programs);
//! - bpftrace timing the function into a histogram (`@s[tid] = nsecs` … `hist(…)`);
//! - bpftrace reading the clock and the thread id and nothing else: the timing floor, what
//!   any tool timing the function pays beyond the traps;
//! - bpftrace's empty uprobe and uretprobe: the traps' share of a program's run (the
//!   statistics' own clock reads fall inside it).
//!
//! A row's figure is its programs' run time per instance (the sum over its programs of run
//! time over runs) between two readings SECONDS apart, after every tool has attached.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use aya::{
    programs::loaded_programs,
    sys::{Stats, enable_stats},
};

use super::{
    Knobs,
    spans::{Entry, Loop, minus, ns_cell},
};
use crate::{Failure, bench::Table, runner};

/// How long the programs are read over, once every tool has attached.
const SECONDS: f64 = 2.0;
/// How long a tool may take to attach.
const ATTACH: Duration = Duration::from_secs(30);

/// One tool attached to the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Span,
    Histogram,
    Floor,
    Empty,
}

impl Tool {
    fn label(self, l: Loop) -> String {
        match self {
            Tool::Span => format!("switchyard --span {}", l.symbol()),
            Tool::Histogram => "bpftrace: uprobe + uretprobe, histogram".into(),
            Tool::Floor => "bpftrace: the clock and the thread id (the timing floor)".into(),
            Tool::Empty => "bpftrace: empty uprobe + uretprobe (the traps)".into(),
        }
    }

    /// bpftrace's script on `probe` (BINARY:FUNCTION).
    fn script(self, probe: &str) -> Option<String> {
        match self {
            Tool::Span => None,
            Tool::Histogram => Some(format!(
                "uprobe:{probe} {{ @s[tid] = nsecs; }} uretprobe:{probe} /@s[tid]/ {{ @h = \
                 hist(nsecs - @s[tid]); delete(@s[tid]); }}"
            )),
            // Never true: both values are read, and nothing is written.
            Tool::Floor => Some(format!(
                "uprobe:{probe} {{ if (nsecs == tid) {{ @x = 1; }} }} uretprobe:{probe} {{ if \
                 (nsecs == tid) {{ @y = 1; }} }}"
            )),
            Tool::Empty => Some(format!("uprobe:{probe} {{ }} uretprobe:{probe} {{ }}")),
        }
    }
}

/// The tools of one loop: bpftrace's need a return probe, which Go code cannot have.
fn tools(l: Loop) -> &'static [Tool] {
    match l.entry {
        Entry::Go => &[Tool::Span],
        Entry::Push | Entry::Load => &[Tool::Span, Tool::Histogram, Tool::Floor, Tool::Empty],
    }
}

/// A child killed (and reaped) when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every loaded program's (run time ns, runs), by id.
fn programs() -> BTreeMap<u32, (String, u64, u64)> {
    loaded_programs()
        .flatten()
        .map(|p| {
            let name = p.name_as_str().unwrap_or("").to_string();
            (
                p.id(),
                (name, p.run_time().as_nanos() as u64, p.run_count()),
            )
        })
        .collect()
}

/// Waits until `child` has programs among those not in `before` that ran: those named
/// `names` (all of them), or at least two when `names` is empty. Their ids.
fn attached(
    child: &mut Child,
    before: &BTreeSet<u32>,
    names: &[&str],
    what: &str,
    err: &Path,
) -> Result<Vec<u32>, Failure> {
    let start = Instant::now();
    loop {
        let mut ids = Vec::new();
        let mut seen = BTreeSet::new();
        for (id, (name, _, runs)) in programs() {
            if before.contains(&id) || runs == 0 {
                continue;
            }
            if names.is_empty() || names.contains(&name.as_str()) {
                ids.push(id);
                seen.insert(name);
            }
        }
        let done = if names.is_empty() {
            ids.len() >= 2
        } else {
            names.iter().all(|n| seen.contains(*n))
        };
        if done {
            return Ok(ids);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(
                Failure::new(format!("{what} ended before it attached ({status})")).tail(err, 20),
            );
        }
        if start.elapsed() > ATTACH {
            return Err(Failure::new(format!(
                "{what} had no programs running after {} s",
                ATTACH.as_secs()
            ))
            .tail(err, 20));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// One repeat on loop `l`: per tool of [`tools`], its programs' ns per instance.
fn once(k: &Knobs, l: Loop, dir: &Path) -> Result<Vec<f64>, Failure> {
    fs::create_dir_all(dir).map_err(|e| Failure::io(format!("creating {}", dir.display()), e))?;
    let (mut words, _) = l.workload(k);
    // Calls enough for the attaches and the reading; it is killed when done.
    if let Some(calls) = words.last_mut() {
        *calls = (l.rate * 120).to_string();
    }
    let mut c = Command::new(super::taskset());
    c.args(["-c", &k.cpu.to_string()]).args(&words);
    let target = Killed(
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| Failure::io(format!("starting {}", words[0]), e))?,
    );
    let pid = target.0.id().to_string();
    let binary = l.binary(k).display().to_string();
    let probe = format!("{binary}:{}", l.symbol());
    let mut attached_tools = Vec::new();
    for &tool in tools(l) {
        let before: BTreeSet<u32> = programs().into_keys().collect();
        let err = dir.join(format!("{tool:?}.err"));
        let (mut c, names, what): (Command, &[&str], String) = match tool.script(&probe) {
            Some(script) => {
                let mut c = Command::new("bpftrace");
                c.args(["-p", &pid, "-e", &script]);
                (c, &[], format!("bpftrace ({script})"))
            }
            None => {
                let mut c = Command::new(&k.switchyard);
                c.args(["record", "--pid", &pid, "--no-stacks", "--syscalls", "none"]);
                if l.entry == Entry::Go {
                    c.arg("--no-go-gc");
                }
                c.args(["--span", &format!("{}@{binary}", l.symbol()), "-o"])
                    .arg(dir.join("run.json"));
                let names: &[&str] = match l.entry {
                    Entry::Go => &["span_enter_go", "span_exit_go"],
                    Entry::Push | Entry::Load => &["span_enter", "span_exit"],
                };
                (c, names, "switchyard record --span".to_string())
            }
        };
        let mut child = Killed(
            c.stdin(Stdio::null())
                .stdout(runner::create(&dir.join(format!("{tool:?}.out")))?)
                .stderr(runner::create(&err)?)
                .spawn()
                .map_err(|e| Failure::io(format!("starting {what}"), e))?,
        );
        let ids = attached(&mut child.0, &before, names, &what, &err)?;
        attached_tools.push((child, ids));
    }
    let first = programs();
    thread::sleep(Duration::from_secs_f64(SECONDS));
    let last = programs();
    let per_instance = attached_tools
        .iter()
        .map(|(_, ids)| {
            ids.iter()
                .filter_map(|id| {
                    let (_, t0, n0) = first.get(id)?;
                    let (_, t1, n1) = last.get(id)?;
                    let runs = n1.saturating_sub(*n0);
                    (runs > 0).then(|| t1.saturating_sub(*t0) as f64 / runs as f64)
                })
                .sum()
        })
        .collect();
    // Each tool stops as Ctrl-C stops it (switchyard writes its run), then the loop.
    for (child, _) in attached_tools.iter_mut().rev() {
        // SAFETY: a signal to a child this process started and has not reaped.
        unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
        let start = Instant::now();
        while matches!(child.0.try_wait(), Ok(None)) && start.elapsed() < ATTACH {
            thread::sleep(Duration::from_millis(50));
        }
    }
    drop(target);
    Ok(per_instance)
}

/// Measures every loop of `loops` REPEATS times with the kernel's statistics on, and returns
/// the section's tables and note, or why it could not.
pub fn run(
    k: &Knobs,
    loops: &[Loop],
    dir: &Path,
    progress: impl Fn(&str),
) -> Result<String, Failure> {
    let _stats = enable_stats(Stats::RunTime).map_err(|e| {
        Failure::new(format!(
            "the kernel's BPF statistics could not be enabled ({e})"
        ))
        .hint("run as root, on a kernel of 5.8 or later")
    })?;
    let mut out = String::new();
    for &l in loops {
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); tools(l).len()];
        for r in 0..k.repeats {
            progress(&format!(
                "repeat {} of {}: the span programs, {}",
                r + 1,
                k.repeats,
                l.name()
            ));
            let got = once(k, l, &dir.join(format!("programs-{}-{r}", l.rate)))?;
            for (s, v) in samples.iter_mut().zip(got) {
                s.push(v);
            }
        }
        out.push_str(&format!("{}\n\n{}\n", l.name(), table(l, &samples)));
    }
    out.push_str(NOTE);
    Ok(out)
}

/// One loop's table from its tools' samples (per tool, one figure per repeat).
fn table(l: Loop, samples: &[Vec<f64>]) -> String {
    let mut t = Table::new(&[
        "programs",
        "ns per instance",
        "beyond the traps",
        "beyond the timing floor",
    ]);
    let of = |tool: Tool| {
        tools(l)
            .iter()
            .position(|t| *t == tool)
            .and_then(|i| samples.get(i))
    };
    for (tool, s) in tools(l).iter().zip(samples) {
        let beyond = |anchor: Tool| match of(anchor) {
            Some(a) if *tool != anchor && *tool != Tool::Empty => ns_cell(&minus(s, a)),
            _ => String::new(),
        };
        t.row(vec![
            tool.label(l),
            ns_cell(s),
            beyond(Tool::Empty),
            if *tool == Tool::Floor {
                String::new()
            } else {
                beyond(Tool::Floor)
            },
        ]);
    }
    t.render()
}

const NOTE: &str = "each table: the tools attached to one loop together, each program timed by \
the kernel (BPF_ENABLE_STATS) over the same calls; ns per instance: a tool's entry and return \
programs' run time per run, summed; beyond the traps: less bpftrace's empty programs, which \
hold the statistics' own clock reads and nothing else (goal for the span: ≤ 200 ns); beyond \
the timing floor: less bpftrace's programs that read the clock and the thread id and nothing \
else, what any tool timing the function pays. A Go span has no bpftrace rows: bpftrace has no \
return probe Go code survives.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_is_over_the_empty_programs_and_the_floor_repeat_by_repeat() {
        let l = Loop {
            entry: Entry::Push,
            rate: 10_000,
        };
        let samples = vec![
            vec![400.0, 360.0],
            vec![900.0, 800.0],
            vec![240.0, 230.0],
            vec![110.0, 100.0],
        ];
        assert_eq!(
            table(l, &samples),
            "| programs | ns per instance | beyond the traps | beyond the timing floor |\n\
             |---|---|---|---|\n\
             | switchyard --span work_push | 380 (360–400) | 275 (260–290) | 145 (130–160) |\n\
             | bpftrace: uprobe + uretprobe, histogram | 850 (800–900) | 745 (700–790) | 615 (570–660) |\n\
             | bpftrace: the clock and the thread id (the timing floor) | 235 (230–240) | 130 (130–130) |  |\n\
             | bpftrace: empty uprobe + uretprobe (the traps) | 105 (100–110) |  |  |\n"
        );
        let go = Loop {
            entry: Entry::Go,
            rate: 10_000,
        };
        assert_eq!(
            table(go, &[vec![500.0]]),
            "| programs | ns per instance | beyond the traps | beyond the timing floor |\n\
             |---|---|---|---|\n\
             | switchyard --span main.work | 500 |  |  |\n"
        );
    }
}
