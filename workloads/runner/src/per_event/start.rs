//! `bench-overhead`'s start table: how long a short recording takes from the command to its
//! exit, in wall time, beside perf record doing the same thing:
//! - `switchyard record --pid P -d 1s` against `perf record -g -p P -- sleep 1`, P a process
//!   asleep throughout (nothing to record, so the figure is the tool's own);
//! - `switchyard record -- true` against `perf record -g -- true`.
//!
//! switchyard's rows also give what its `-v` breakdown says of the start: the whole of it, and
//! the programs' verification, its largest part.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Instant,
};

use switchyard_model::metrics::spread;

use super::Knobs;
use crate::{
    Failure, Interrupts,
    bench::{self, Table},
};

/// One measured command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    /// `record --pid P -d 1s`.
    SwitchyardPid,
    /// `perf record -g -p P -- sleep 1`.
    PerfPid,
    /// `record -- true`.
    SwitchyardTrue,
    /// `perf record -g -- true`.
    PerfTrue,
}

impl Job {
    const ALL: [Job; 4] = [
        Job::SwitchyardPid,
        Job::PerfPid,
        Job::SwitchyardTrue,
        Job::PerfTrue,
    ];

    fn label(self) -> &'static str {
        match self {
            Job::SwitchyardPid => "switchyard record --pid P -d 1s",
            Job::PerfPid => "perf record -g -p P -- sleep 1",
            Job::SwitchyardTrue => "switchyard record -- true",
            Job::PerfTrue => "perf record -g -- true",
        }
    }

    fn is_perf(self) -> bool {
        matches!(self, Job::PerfPid | Job::PerfTrue)
    }

    /// The perf row switchyard's row is divided by.
    fn anchor(self) -> Option<Job> {
        match self {
            Job::SwitchyardPid => Some(Job::PerfPid),
            Job::SwitchyardTrue => Some(Job::PerfTrue),
            _ => None,
        }
    }

    fn command(self, knobs: &Knobs, pid: u32, dir: &Path) -> Command {
        let run = dir.join("start.run");
        let data = dir.join("start.perf.data");
        let mut c;
        match self {
            Job::SwitchyardPid | Job::SwitchyardTrue => {
                c = Command::new(&knobs.switchyard);
                c.arg("record").arg("-v").arg("-o").arg(&run);
                if self == Job::SwitchyardPid {
                    c.args(["--pid", &pid.to_string(), "-d", "1s"]);
                } else {
                    c.args(["--", "true"]);
                }
            }
            Job::PerfPid | Job::PerfTrue => {
                c = Command::new("perf");
                c.args(["record", "-q", "-g", "-o"]).arg(&data);
                if self == Job::PerfPid {
                    c.args(["-p", &pid.to_string(), "--", "sleep", "1"]);
                } else {
                    c.args(["--", "true"]);
                }
            }
        }
        c.stdin(Stdio::null()).stdout(Stdio::null());
        c
    }
}

/// One run of a job: its wall time, and for switchyard what `-v` said of its start.
#[derive(Debug, Clone, Copy, Default)]
struct Took {
    wall_ms: f64,
    started_ms: Option<f64>,
    verified_ms: Option<f64>,
}

/// The figure `-v` gives on the line that contains `marker`: the first "N ms" on it.
fn ms_on_line(text: &str, marker: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains(marker))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "ms")?;
    words.get(at.checked_sub(1)?)?.parse().ok()
}

/// Measures every job `knobs.repeats` times, interleaved (perf's only where `perf` is on the
/// path); the table, or why it could not run.
pub fn run(
    knobs: &Knobs,
    perf: bool,
    dir: &Path,
    interrupts: &Interrupts,
    step: fn(&str),
) -> Result<String, Failure> {
    let jobs: Vec<Job> = Job::ALL
        .into_iter()
        .filter(|j| perf || !j.is_perf())
        .collect();
    let mut asleep = Command::new("sleep")
        .arg("3600")
        .spawn()
        .map_err(|e| Failure::io("starting `sleep 3600`, the process recorded by pid", e))?;
    let pid = asleep.id();
    step(&format!(
        "start: {} commands, {} repeats, interleaved",
        jobs.len(),
        knobs.repeats
    ));
    let measured = bench::interleave(&jobs, knobs.repeats, interrupts, |_, _, &job| {
        let began = Instant::now();
        let out = job
            .command(knobs, pid, dir)
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| Failure::io(format!("running `{}`", job.label()), e))?;
        let wall_ms = began.elapsed().as_secs_f64() * 1e3;
        if !out.status.success() {
            return Err(Failure::new(format!(
                "`{}` failed ({}): {}",
                job.label(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let err = String::from_utf8_lossy(&out.stderr);
        Ok(Took {
            wall_ms,
            started_ms: ms_on_line(&err, "started in"),
            verified_ms: ms_on_line(&err, "programs verified by the kernel"),
        })
    });
    let _ = asleep.kill();
    let _ = asleep.wait();
    let measured = measured?;
    // The median and the min–max, as a ratio's cell is written.
    let cell = |values: &[f64]| bench::ratio_cell(spread(values));
    let mut table = Table::new(&[
        "command",
        "wall ms",
        "÷ perf record",
        "started in, ms (-v)",
        "verifying, ms (-v)",
    ]);
    let n = measured.complete();
    let column = |job: Job, f: fn(&Took) -> Option<f64>| -> Vec<f64> {
        let i = jobs.iter().position(|j| *j == job);
        i.map(|i| measured.rows[i][..n].iter().filter_map(f).collect())
            .unwrap_or_default()
    };
    for &job in &jobs {
        let wall = column(job, |t| Some(t.wall_ms));
        let ratio = match job.anchor() {
            Some(anchor) if jobs.contains(&anchor) => bench::ratio_cell(bench::ratio_spread(
                &bench::ratios(&wall, &column(anchor, |t| Some(t.wall_ms))),
            )),
            _ => String::new(),
        };
        table.row(vec![
            job.label().to_string(),
            cell(&wall),
            ratio,
            cell(&column(job, |t| t.started_ms)),
            cell(&column(job, |t| t.verified_ms)),
        ]);
    }
    if !perf {
        table.missing_row("perf record", "perf on PATH");
    }
    Ok(table.render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_and_the_verification_are_read_from_the_breakdown() {
        let err = "switchyard: flags checked against the host in 0.8 ms\n\
                   switchyard: started in 509.1 ms (excluding flag checks):\n\
                   \x20    target    0.0 ms  found or forked\n\
                   \x20             393.0 ms    10 programs verified by the kernel, 2 at once; \
                   the longest:\n";
        assert_eq!(ms_on_line(err, "started in"), Some(509.1));
        assert_eq!(
            ms_on_line(err, "programs verified by the kernel"),
            Some(393.0)
        );
        assert_eq!(ms_on_line(err, "not there"), None);
    }
}
