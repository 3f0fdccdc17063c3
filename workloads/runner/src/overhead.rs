//! What recording costs a workload: its throughput while `switchyard record` (default
//! settings: stacks on, no uprobe spans, none of the build's own record flags) follows it, as a
//! fraction of its untraced throughput, measured side by side in one run, for one or more
//! switchyard binaries (a before and an after).
//!
//! Each run starts a fresh server (filled by its prefill when the workload has one); a recorded
//! run attaches `switchyard record --pid` to it and waits for `--ready-fd` to say the probes
//! are attached before the driver starts, and ends the recording with SIGINT once the driver is
//! done. Throughput is the driver's operations per second, from its result file. The runs are
//! interleaved and compared as [`crate::bench`] does for every bench: once per repeat in a
//! rotated order, each repeat against its own untraced run.
//!
//! Throughput shows the cost where the driver sends as fast as the server answers (the
//! broker's producers); a driver at a fixed rate (the relay's speakers, the cache's requests)
//! keeps its rate while the server keeps up, and the cost goes to latency and CPU instead.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::ExitStatus,
};

use switchyard_harness::DriverResult;
use switchyard_model::{
    Run,
    metrics::spread,
    units::{counted, grouped, significant, thousands},
};

use crate::{
    attach::Tool,
    bench::{self, Table},
    fail::{Failure, error_chain},
    interrupt::Interrupts,
    plan::Plan,
    runner::{self, Tools},
};

/// One configuration: untraced, or recorded by a switchyard binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configuration {
    /// As the table names it.
    pub label: String,
    /// The `switchyard` that records; `None`: untraced.
    pub switchyard: Option<PathBuf>,
}

/// Untraced first, then one recorded configuration per binary, labelled by its path as given.
pub fn configurations(switchyards: &[PathBuf]) -> Vec<Configuration> {
    let mut all = vec![Configuration {
        label: "untraced".into(),
        switchyard: None,
    }];
    all.extend(switchyards.iter().map(|s| Configuration {
        label: format!("recorded by {}", s.display()),
        switchyard: Some(s.clone()),
    }));
    all
}

pub use crate::bench::order;

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Operations per second, as the driver's result says.
    pub throughput: f64,
    /// Context switches of the server the recording counted, per second of load; `None`
    /// untraced.
    pub switches_per_s: Option<f64>,
}

/// One run of `config` under `plan`'s load; every process's output goes into `out` (a
/// directory of its own for each run). The server and the recorder are stopped before it
/// returns, on failure too.
pub fn measure(
    plan: &Plan,
    tools: &Tools,
    config: &Configuration,
    out: &Path,
    interrupts: &Interrupts,
) -> Result<Sample, Failure> {
    let run_file = out.join("run.json");
    let tool = config.switchyard.as_ref().map(|switchyard| Tool::Record {
        switchyard: switchyard.clone(),
        flags: Vec::new(),
    });
    let (result, recorded) = run_attached(plan, tools, tool.as_ref(), out, interrupts)?;
    if let Some(status) = recorded
        && !status.success()
        && !interrupts.raised()
    {
        return Err(runner::record_failed(status, &out.join("record.err")));
    }
    let switches_per_s = match config.switchyard {
        None => None,
        Some(_) => {
            let run = Run::load(&run_file).map_err(|e| {
                Failure::new(error_chain(&e))
                    .hint("switchyard's own output is in record.err beside it")
            })?;
            let secs = result.duration_ns as f64 / 1e9;
            (secs > 0.0).then(|| (run.voluntary() + run.involuntary()) as f64 / secs)
        }
    };
    Ok(Sample {
        throughput: result.throughput_per_s,
        switches_per_s,
    })
}

/// One run of `plan`'s server (filled by its prefill when it has one) with `tool` attached to
/// its pid from before the load starts until after it ends (`None`: untraced): the driver's
/// result and, when a tool ran, its exit status. Every process's output goes into `out`; the
/// server and the tool are stopped before it returns, on failure too. `bench-broker` and
/// `bench-servers` both run the broker through it.
pub(crate) fn run_attached(
    plan: &Plan,
    tools: &Tools,
    tool: Option<&Tool>,
    out: &Path,
    interrupts: &Interrupts,
) -> Result<(DriverResult, Option<ExitStatus>), Failure> {
    run_server(plan, tools, tool, out, interrupts, false)
        .map(|(result, status, _)| (result, status))
}

/// What a server used while its driver ran, from the kernel's own accounts of it (`/proc`),
/// which cost it nothing: the figures of a run no tool follows.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerUse {
    /// CPU time, user and system, of all its threads (those that ended too) from the load's
    /// start to its end, ns; to the clock tick (10 ms).
    pub cpu_ns: u64,
    /// Its peak resident memory (VmHWM) when the load ended, bytes: since it started, so a
    /// prefill's peak counts.
    pub peak_rss_bytes: u64,
}

/// The CPU time the kernel has charged process `pid` with, all its threads (`/proc/PID/stat`'s
/// utime and stime), ns.
fn cpu_ns(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow its last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15; the state (field 3) is fields[0].
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the C library.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    Some(ticks * 1_000_000_000 / hz)
}

/// Process `pid`'s peak resident set (`/proc/PID/status`'s VmHWM), bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

/// Reads a process's CPU time and peak memory every [`Watch::EVERY`] until stopped, keeping
/// the last reading: a server that exits as its driver ends (the relay's) is gone by the time
/// the driver returns, and its last reading is within a tick of the load's end.
struct Watch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Option<(u64, u64)>>,
    pid: u32,
}

impl Watch {
    const EVERY: std::time::Duration = std::time::Duration::from_millis(20);

    fn start(pid: u32) -> Watch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut last = None;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let (Some(cpu), Some(peak)) = (cpu_ns(pid), peak_rss(pid)) {
                    last = Some((cpu, peak));
                }
                std::thread::sleep(Self::EVERY);
            }
            last
        });
        Watch { stop, thread, pid }
    }

    /// The server's CPU time and peak memory: read now if it is still there, else the last
    /// reading.
    fn stop(self) -> Option<(u64, u64)> {
        let now = cpu_ns(self.pid).zip(peak_rss(self.pid));
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let last = self.thread.join().ok().flatten();
        now.or(last)
    }
}

/// [`run_attached`], with what the server used over the load ([`ServerUse`]).
pub(crate) fn run_measured(
    plan: &Plan,
    tools: &Tools,
    tool: Option<&Tool>,
    out: &Path,
    interrupts: &Interrupts,
) -> Result<(DriverResult, Option<ExitStatus>, ServerUse), Failure> {
    let (result, status, used) = run_server(plan, tools, tool, out, interrupts, true)?;
    let used = used.ok_or_else(|| {
        Failure::new(format!(
            "the {} server was gone before its driver ended",
            plan.workload.name
        ))
        .hint("its error output is in server.err beside the run")
        .tail(&out.join("server.err"), 5)
    })?;
    Ok((result, status, used))
}

/// The run of [`run_attached`]; with `watch`, what the server used over the load, read from
/// `/proc` as it ran (`None` when it could not be read). Without, nothing polls the server:
/// the overhead benches compare runs that differ only by the tool.
fn run_server(
    plan: &Plan,
    tools: &Tools,
    tool: Option<&Tool>,
    out: &Path,
    interrupts: &Interrupts,
    watch: bool,
) -> Result<(DriverResult, Option<ExitStatus>, Option<ServerUse>), Failure> {
    fs::create_dir_all(out).map_err(|e| Failure::io(format!("creating {}", out.display()), e))?;
    let scratch =
        tempfile::tempdir().map_err(|e| Failure::io("creating a scratch directory", e))?;
    let result = out.join("result.json");
    let values = |addr: &str| {
        plan.values(
            addr,
            &result.to_string_lossy(),
            &scratch.path().to_string_lossy(),
        )
    };
    let server = runner::start_filled(plan, tools, out, &values, None)?;
    let addr = server.addr().to_string();
    let attached = match tool.map(|t| t.attach(server.pid(), out)).transpose() {
        Ok(attached) => attached,
        Err(failure) => {
            runner::stop_server(server, &out.join("server.out"));
            return Err(failure);
        }
    };
    let forwarding = attached.as_ref().map(|t| interrupts.forward_to(t.pid()));
    let pid = server.pid();
    let cpu_before = watch.then(|| cpu_ns(pid)).flatten();
    let watch = watch.then(|| Watch::start(pid));
    let driven = runner::drive(plan, tools, &values(&addr), out);
    let used = match (cpu_before, watch.and_then(Watch::stop)) {
        (Some(before), Some((after, peak_rss_bytes))) => Some(ServerUse {
            cpu_ns: after.saturating_sub(before),
            peak_rss_bytes,
        }),
        _ => None,
    };
    let stopped = attached.map(|t| t.stop(out));
    drop(forwarding);
    runner::stop_server(server, &out.join("server.out"));
    driven?;
    let status = stopped.transpose()?;
    let result = DriverResult::read(&result).map_err(|e| {
        Failure::new(error_chain(&e)).hint("the driver's output is in driver.out beside it")
    })?;
    if result.errors > 0 {
        eprintln!(
            "warning: {} operations of the {} driver failed; see {}",
            thousands(result.errors),
            plan.workload.name,
            out.join("driver.out").display()
        );
    }
    Ok((result, status, used))
}

/// What the table's columns mean, printed under it.
pub const NOTE: &str = "of untraced: each repeat's throughput over the same repeat's untraced one, \
median (min–max)\ncontext switches/s: the server's, as the recording counted them, per second \
of load";

/// The table: per configuration, the median throughput, the median of each repeat's
/// throughput over that repeat's untraced one, the spread of both over the repeats, and the
/// median context switches per second of the recorded runs. `rows[0]` is the untraced
/// configuration; every row has one sample per repeat, in repeat order.
pub fn table(rows: &[(String, Vec<Sample>)]) -> String {
    let (repeats, rows) = bench::against_first(rows, |s| s.throughput);
    let mut out = Table::new(&[
        "configuration",
        "throughput (median)",
        "of untraced",
        &format!(
            "spread over {} (min–max)",
            counted(repeats as u64, "repeat")
        ),
        "context switches/s",
    ]);
    for (i, row) in rows.iter().enumerate() {
        let (t, Some(f)) = (&row.throughput, &row.of_first) else {
            continue;
        };
        let switches: Vec<f64> = row
            .samples
            .iter()
            .filter_map(|s| s.switches_per_s)
            .collect();
        let mut range = format!("{}–{} ops/s", grouped(t.min, 0), grouped(t.max, 0));
        if i > 0 {
            let _ = write!(
                range,
                "; {}–{} of untraced",
                significant(f.min),
                significant(f.max)
            );
        }
        let switches = spread(&switches).map_or_else(|| "–".into(), |s| grouped(s.median, 0));
        out.row(vec![
            row.label.to_string(),
            format!("{} ops/s", grouped(t.median, 0)),
            significant(f.median),
            range,
            switches,
        ]);
    }
    out.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(throughput: f64, switches_per_s: Option<f64>) -> Sample {
        Sample {
            throughput,
            switches_per_s,
        }
    }

    #[test]
    fn a_process_cpu_and_peak_memory_are_read_from_proc() {
        let me = std::process::id();
        let before = cpu_ns(me).expect("this process's CPU time");
        // Burn some CPU: the kernel charges it by the tick, so ask for well over one.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = cpu_ns(me).unwrap();
        assert!(after > before, "{before} → {after}");
        // VmHWM: at least the RSS it has now.
        let peak = peak_rss(me).expect("this process's peak RSS");
        assert!(peak > 1 << 20, "{peak}");
        assert_eq!(cpu_ns(u32::MAX), None);
        assert_eq!(peak_rss(u32::MAX), None);
    }

    #[test]
    fn every_configuration_leads_a_repeat_in_turn() {
        assert_eq!(order(3, 0), [0, 1, 2]);
        assert_eq!(order(3, 1), [1, 2, 0]);
        assert_eq!(order(3, 2), [2, 0, 1]);
        assert_eq!(order(3, 3), [0, 1, 2]);
        assert_eq!(order(1, 4), [0]);
    }

    #[test]
    fn untraced_comes_first_then_each_binary_as_given() {
        let c = configurations(&["/tmp/before".into(), "target/release/switchyard".into()]);
        let labels: Vec<&str> = c.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "untraced",
                "recorded by /tmp/before",
                "recorded by target/release/switchyard"
            ]
        );
        assert_eq!(c[0].switchyard, None);
        assert_eq!(c[2].switchyard, Some("target/release/switchyard".into()));
    }

    #[test]
    fn fractions_pair_each_repeat_with_its_untraced_run() {
        let rows = vec![
            (
                "untraced".to_string(),
                vec![sample(400_000.0, None), sample(300_000.0, None)],
            ),
            (
                "recorded by a".to_string(),
                vec![
                    sample(300_000.0, Some(120_000.0)),
                    sample(240_000.0, Some(100_000.0)),
                ],
            ),
        ];
        // Repeat 1: 0.75, repeat 2: 0.8; the ratio of the medians would say 0.771.
        assert_eq!(
            table(&rows),
            "| configuration | throughput (median) | of untraced | spread over 2 repeats (min–max) | context switches/s |\n\
             |---|---|---|---|---|\n\
             | untraced | 350,000 ops/s | 1.00 | 300,000–400,000 ops/s | – |\n\
             | recorded by a | 270,000 ops/s | 0.775 | 240,000–300,000 ops/s; 0.750–0.800 of untraced | 110,000 |\n"
        );
    }

    #[test]
    fn an_incomplete_repeat_is_left_out() {
        let rows = vec![
            (
                "untraced".to_string(),
                vec![sample(100.0, None), sample(90.0, None)],
            ),
            ("recorded by a".to_string(), vec![sample(50.0, Some(10.0))]),
        ];
        let t = table(&rows);
        assert!(t.contains("spread over 1 repeat (min–max)"), "{t}");
        assert!(t.contains("| untraced | 100 ops/s | 1.00 |"), "{t}");
        assert!(t.contains("| recorded by a | 50 ops/s | 0.500 |"), "{t}");
    }
}
