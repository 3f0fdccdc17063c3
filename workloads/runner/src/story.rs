//! The measured stories: the broker's builds at two contention levels and two message sizes,
//! the relay's at two room counts and two room sizes; each as a set of runs under
//! `reports/<workload>/<config>/<build>-<repeat>/`, comparison pages beside them, and a table of
//! medians (the one in the story's README).
//!
//! The tables take every figure from [`switchyard_model::metrics`] and every median from
//! [`switchyard_compare::spread`], so they say what `switchyard compare` and the budgets say.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

use switchyard_model::{
    Frame, Profile, Profiles, Run,
    metrics::{self, Metric},
    units::{Unit, bytes, grouped, ns_f},
};

use crate::{
    chart::{Chart, Legend, Panel, Series, build_colour},
    fail::Failure,
};

/// One configuration of a story: its directory name and its load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub dir: String,
    /// `NAME=VALUE` knobs of the workload.
    pub knobs: Vec<String>,
    /// What is printed as each run starts.
    pub title: String,
    /// The builds run in this configuration, when not all the story's.
    pub builds: Option<&'static [&'static str]>,
}

/// A story: a workload, its configurations, the builds run in each (in this order, per
/// repeat), and the comparisons written beside them (baseline, other).
#[derive(Debug, Clone)]
pub struct Story {
    pub workload: &'static str,
    pub root: &'static str,
    pub configs: Vec<Config>,
    pub builds: &'static [&'static str],
    pub comparisons: &'static [(&'static str, &'static str)],
}

/// spin, mutex and abs at low contention (producers = cores) and high (4 × cores), for 2 B and
/// 1 KiB messages; mutex is the baseline of both comparisons.
pub fn broker(cores: usize) -> Story {
    let mut configs = Vec::new();
    for (contention, producers) in [("low", cores), ("high", 4 * cores)] {
        for size in [2, 1024] {
            configs.push(Config {
                dir: format!("{contention}-{size}B"),
                knobs: vec![format!("producers={producers}"), format!("size={size}")],
                title: format!("{contention} contention ({producers} producers), {size} B"),
                builds: None,
            });
        }
    }
    Story {
        workload: "spinlock-broker",
        root: "reports/spinlock-broker",
        configs,
        builds: &["spin", "mutex", "abs"],
        comparisons: &[("mutex", "spin"), ("mutex", "abs")],
    }
}

/// The spin counts RocketMQ's article sweeps with its fixed-k lock.
pub const SWEEP_K: [u32; 4] = [10, 100, 1_000, 10_000];

pub const SWEEP_ROOT: &str = "reports/spinlock-broker/sweep";

/// The flush the sweep runs with: every message forced to disk before its ack, as the
/// article's synchronous flush (`SYNC_FLUSH`) acks a message only once it is on disk.
pub const SYNC_FLUSH: &str = "flush=every:1";

/// The fixed-k lock at each of [`SWEEP_K`], next to mutex and abs, under high contention
/// (4 × cores producers) with 1 KiB messages and a synchronous flush: `sync` holds mutex and
/// abs, `sync-kNNNNN` the fixed lock at k = NNNNN.
pub fn broker_sweep(cores: usize) -> Story {
    let load = |extra: Option<String>| {
        let mut knobs = vec![
            format!("producers={}", 4 * cores),
            "size=1024".to_string(),
            SYNC_FLUSH.to_string(),
        ];
        knobs.extend(extra);
        knobs
    };
    let mut configs = vec![Config {
        dir: "sync".into(),
        knobs: load(None),
        title: format!("{} producers, 1 KiB, synchronous flush", 4 * cores),
        builds: Some(&["mutex", "abs"]),
    }];
    for k in SWEEP_K {
        configs.push(Config {
            dir: format!("sync-k{k:05}"),
            knobs: load(Some(format!("k={k}"))),
            title: format!("{} producers, 1 KiB, synchronous flush, k = {k}", 4 * cores),
            builds: Some(&["fixed"]),
        });
    }
    Story {
        workload: "spinlock-broker",
        root: SWEEP_ROOT,
        configs,
        builds: &["mutex", "abs", "fixed"],
        comparisons: &[],
    }
}

pub const FALLBACK_ROOT: &str = "reports/spinlock-broker/fallback";

/// abs under a load that makes it fall back and then drops: 8 producers with the synchronous
/// flush (an fdatasync under the lock per message) for 3 s, then one sending a message every
/// 50 ms or so (below the rate at which abs switched: spinning has collapsed by then).
pub fn broker_fallback() -> Story {
    Story {
        workload: "spinlock-broker",
        root: FALLBACK_ROOT,
        configs: vec![Config {
            dir: "sync-8-then-1".into(),
            knobs: vec![
                "producers=8".into(),
                "size=1024".into(),
                SYNC_FLUSH.into(),
                "drop-at=3s".into(),
                "drop-to=1".into(),
                "drop-think=50ms".into(),
            ],
            title: "8 producers, then 1 every 50 ms from 3 s on; 1 KiB, synchronous flush".into(),
            builds: None,
        }],
        builds: &["abs"],
        comparisons: &[],
    }
}

/// threads, mmsg and lite at 10 and 20 rooms of 4 and 9 speakers: threads against mmsg (what
/// batching does), and mmsg against lite (a small batch, one bundle per destination).
pub fn relay() -> Story {
    let mut configs = Vec::new();
    for rooms in [10, 20] {
        for speakers in [4, 9] {
            configs.push(Config {
                dir: format!("{rooms}r-{speakers}s"),
                knobs: vec![format!("speakers={speakers}"), format!("rooms={rooms}")],
                title: format!("{rooms} rooms x {speakers} speakers"),
                builds: None,
            });
        }
    }
    Story {
        workload: "mmsg-relay",
        root: "reports/mmsg-relay",
        configs,
        builds: RELAY_BUILDS,
        comparisons: &[("threads", "mmsg"), ("mmsg", "lite")],
    }
}

/// The relay's builds, in the order of the table and of the chart's colours.
const RELAY_BUILDS: &[&str] = &["threads", "mmsg", "lite"];

/// node-gzip, rust-gzip and rust-zstd at one request a second, the six models in turn:
/// the runtime's part (node-gzip → rust-gzip) and the codec's (rust-gzip → rust-zstd).
pub fn assets() -> Story {
    Story {
        workload: "asset-server",
        root: ASSETS_ROOT,
        configs: vec![Config {
            dir: "1rps".into(),
            knobs: vec!["rate=1".into()],
            title: "1 request/s, six models of 5-40 MiB in turn".into(),
            builds: None,
        }],
        builds: &["node-gzip", "rust-gzip", "rust-zstd"],
        comparisons: &[
            ("node-gzip", "rust-zstd"),
            ("node-gzip", "rust-gzip"),
            ("rust-gzip", "rust-zstd"),
        ],
    }
}

/// node-gzip, rust-gzip and rust-zstd with 2, 4 and 8 downloads always in flight (closed
/// loop), [`ASSET_REQUESTS`] a run: the latency of the same concurrent clients on each build.
pub fn assets_concurrency() -> Story {
    Story {
        workload: "asset-server",
        root: ASSET_CONCURRENCY_ROOT,
        configs: ASSET_CONCURRENCY
            .iter()
            .map(|n| Config {
                dir: format!("c{n:02}"),
                knobs: vec![
                    format!("concurrency={n}"),
                    format!("requests={ASSET_REQUESTS}"),
                ],
                title: format!("{n} downloads in flight, {ASSET_REQUESTS} requests"),
                builds: None,
            })
            .collect(),
        builds: &["node-gzip", "rust-gzip", "rust-zstd"],
        comparisons: &[],
    }
}

pub const ASSETS_ROOT: &str = "reports/asset-server";
pub const ASSET_CONCURRENCY_ROOT: &str = "reports/asset-server/concurrency";
const ASSET_CONCURRENCY: [u32; 3] = [2, 4, 8];
/// Requests a run of the concurrency story: enough that P99 is not the maximum.
const ASSET_REQUESTS: u32 = 150;

/// The Go read-state cache at GOGC 50, 100 and 400, the GC forced every 4 s (the runtime's
/// 2-minute forced cycle, brought forward): the article found that tuning GOGC did nothing.
pub fn gogc() -> Story {
    Story {
        workload: "read-state-cache",
        root: GOGC_ROOT,
        configs: GOGC_VALUES
            .iter()
            .map(|v| Config {
                dir: format!("gogc-{v:03}"),
                knobs: vec![
                    format!("gogc={v}"),
                    "gc-interval=4s".into(),
                    "capacity=2000000".into(),
                    "rate=20000".into(),
                ],
                title: format!("GOGC={v}, a GC forced every 4 s"),
                builds: None,
            })
            .collect(),
        builds: &["go"],
        comparisons: &[],
    }
}

pub const GOGC_ROOT: &str = "reports/read-state-cache/gogc";

/// The Go build with the runtime's defaults for long enough that its own forced GC (every 2
/// minutes) comes: the article's actual cadence, which the 4-s interval brings forward.
pub fn forced_gc() -> Story {
    Story {
        workload: "read-state-cache",
        root: FORCED_ROOT,
        configs: vec![Config {
            dir: "runtime-defaults".into(),
            knobs: vec![
                "gc-interval=0s".into(),
                "gogc=100".into(),
                "capacity=2000000".into(),
                "rate=20000".into(),
            ],
            title: "Go defaults: only the runtime's own forced GC".into(),
            builds: None,
        }],
        builds: &["go"],
        comparisons: &[],
    }
}

pub const FORCED_ROOT: &str = "reports/read-state-cache/forced-gc";

/// Both builds with 2,000,000, 500,000 and 100,000 entries, a miss answered after 1 ms (a
/// database read) and the Go GC forced every 4 s: the article's smaller caches, fewer spikes
/// but more misses going to the database.
pub fn cache_size() -> Story {
    Story {
        workload: "read-state-cache",
        root: CACHE_SIZE_ROOT,
        configs: CACHE_SIZES
            .iter()
            .map(|c| Config {
                dir: format!("capacity-{c:07}"),
                knobs: vec![
                    format!("capacity={c}"),
                    "miss-latency=1ms".into(),
                    "gc-interval=4s".into(),
                    "gogc=100".into(),
                    "rate=20000".into(),
                ],
                title: format!(
                    "{} entries, a miss answered after 1 ms",
                    grouped(*c as f64, 0)
                ),
                builds: None,
            })
            .collect(),
        builds: &["go", "rust"],
        comparisons: &[],
    }
}

pub const CACHE_SIZE_ROOT: &str = "reports/read-state-cache/cache-size";
const CACHE_SIZES: [u64; 3] = [100_000, 500_000, 2_000_000];

/// Go against Rust with 2,000,000 entries at 20,000 requests/s, the Go GC forced every 4 s:
/// the story's first table, with its runs kept.
pub fn go_rust() -> Story {
    Story {
        workload: "read-state-cache",
        root: GO_RUST_ROOT,
        configs: vec![Config {
            dir: "capacity-2000000".into(),
            knobs: vec![
                "capacity=2000000".into(),
                "gc-interval=4s".into(),
                "gogc=100".into(),
                "rate=20000".into(),
            ],
            title: "2,000,000 entries, 20,000 requests/s, a Go GC forced every 4 s".into(),
            builds: None,
        }],
        builds: &["go", "rust"],
        comparisons: &[("go", "rust")],
    }
}

pub const GO_RUST_ROOT: &str = "reports/read-state-cache/go-vs-rust";
const GOGC_VALUES: [u32; 3] = [50, 100, 400];

/// The part of a run a story keeps in the repository: everything but the stacks and the
/// timeline (a few tens of KiB where `run.json` is megabytes). Tables are computed from it.
pub const SLIM: &str = "run.slim.json";

/// The counts of a server's summary line (`server.out`) a story keeps with its run, as
/// `server_<name>` parameters: the read-state cache's hits (its driver cannot see them).
const SERVER_COUNTS: [&str; 3] = ["capacity", "requests", "hits"];

/// Writes `dir/run.slim.json` from `dir/run.json`, with the server's counts
/// ([`with_server_counts`]); with `oncpu`, keeping the on-CPU stacks (and only their frames),
/// which the asset table's shares are computed from.
pub fn slim(dir: &Path, oncpu: bool) -> Result<(), Failure> {
    let path = dir.join("run.json");
    let mut run = Run::load(&path).map_err(|e| Failure::new(error_chain(&e)))?;
    let whole = std::mem::take(&mut run.profiles);
    if oncpu {
        run.profiles.oncpu = only_oncpu(&whole, &mut run.profiles.frames);
        run.profiles.stats = whole.stats;
    }
    run.timeline = None;
    with_server_counts(&mut run, dir);
    run.save(&dir.join(SLIM))
        .map_err(|e| Failure::new(format!("writing {}: {e}", dir.join(SLIM).display())))
}

/// Adds the counts of [`SERVER_COUNTS`] from the server's summary in `dir/server.out`, where
/// there is one, to the run's driver parameters.
fn with_server_counts(run: &mut Run, dir: &Path) {
    let summary = fs::read_to_string(dir.join("server.out")).unwrap_or_default();
    let summary = summary
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    if let (Some(summary), Some(w)) = (summary, run.workload.as_mut()) {
        for name in SERVER_COUNTS {
            if let Some(v) = summary.get(name).and_then(serde_json::Value::as_u64) {
                w.parameters.insert(format!("server_{name}"), v.to_string());
            }
        }
    }
}

/// `profiles`' on-CPU stacks with their frames renumbered into `frames`, which gets only the
/// frames they use, in the order first used.
fn only_oncpu(profiles: &Profiles, frames: &mut Vec<Frame>) -> Profile {
    let mut index: BTreeMap<u32, u32> = BTreeMap::new();
    let mut oncpu = profiles.oncpu.clone();
    for stack in &mut oncpu.stacks {
        for f in &mut stack.frames {
            *f = *index.entry(*f).or_insert_with(|| {
                frames.push(
                    profiles
                        .frames
                        .get(*f as usize)
                        .cloned()
                        .unwrap_or_default(),
                );
                (frames.len() - 1) as u32
            });
        }
    }
    oncpu
}

/// The runs of one build in one configuration, with their figures.
pub struct Group {
    /// The configuration's directory name.
    pub config: String,
    pub build: &'static str,
    pub runs: Vec<(Run, BTreeMap<String, Metric>)>,
}

/// Every `<config>/<build>-*/run.json` under `root`, configurations in name order and builds
/// in the order given; a build with no runs in a configuration is left out.
pub fn load(root: &Path, builds: &[&'static str]) -> Result<Vec<Group>, Failure> {
    let mut configs: Vec<PathBuf> = read_dir(root)?.into_iter().filter(|p| p.is_dir()).collect();
    configs.sort();
    let mut groups = Vec::new();
    for cfg in configs {
        let entries = read_dir(&cfg)?;
        for &build in builds {
            let prefix = format!("{build}-");
            let mut files: Vec<PathBuf> = entries
                .iter()
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
                })
                // The whole run where it is here, else the part a story commits.
                .map(|p| match p.join("run.json") {
                    whole if whole.is_file() => whole,
                    _ => p.join(SLIM),
                })
                .filter(|p| p.is_file())
                .collect();
            if files.is_empty() {
                continue;
            }
            files.sort();
            let mut runs = Vec::new();
            for f in files {
                let mut run = Run::load(&f).map_err(|e| {
                    Failure::new(error_chain(&e))
                        .hint("record it again with this build (the story's `just` recipe)")
                })?;
                // A whole run.json has not had them added; a slim one has them already.
                if let Some(dir) = f.parent() {
                    with_server_counts(&mut run, dir);
                }
                let figures = metrics::extract(&run);
                runs.push((run, figures));
            }
            groups.push(Group {
                config: file_name(&cfg),
                build,
                runs,
            });
        }
    }
    Ok(groups)
}

impl Group {
    /// The median over the runs of a figure each run computes with `f` (0 when none has it).
    fn median(&self, f: impl Fn(&Run, &BTreeMap<String, Metric>) -> Option<f64>) -> f64 {
        let values: Vec<f64> = self.runs.iter().filter_map(|(r, m)| f(r, m)).collect();
        switchyard_compare::spread(&values).map_or(0.0, |s| s.median)
    }

    /// The median of the named figure.
    fn figure(&self, name: &str) -> f64 {
        self.median(|run, figures| metrics::lookup(run, figures, name).map(|m| m.value))
    }

    /// The median over the runs of a driver parameter, a number (0 when no run has it).
    fn parameter_median(&self, name: &str) -> f64 {
        self.median(|run, _| number(run, name))
    }

    /// A driver parameter of the first run.
    fn parameter(&self, name: &str) -> Option<&str> {
        self.runs
            .first()
            .and_then(|(r, _)| r.workload.as_ref())
            .and_then(|w| w.parameters.get(name))
            .map(String::as_str)
    }
}

/// A numeric driver parameter of `run`.
fn number(run: &Run, name: &str) -> Option<f64> {
    run.workload.as_ref()?.parameters.get(name)?.parse().ok()
}

/// The broker table: per configuration and build, medians of throughput, CPU, switches,
/// futex waits and lock-acquire time per message, and the P99.99 latency.
pub fn broker_table(groups: &[Group]) -> String {
    let head = [
        "contention",
        "producers",
        "size B",
        "build",
        "runs",
        "msgs/s",
        "CPU µs/msg",
        "switches/msg",
        "futex waits/msg",
        "acquire µs/msg",
        "P99.99 µs",
    ];
    let mut out = header(&head);
    for g in groups {
        let contention = g.config.split('-').next().unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.3} | {:.4} | {:.3} | {} |",
            contention,
            g.parameter("producers").unwrap_or("?"),
            g.parameter("size").unwrap_or("?"),
            g.build,
            g.runs.len(),
            grouped(g.figure("throughput"), 0),
            g.figure("cpu.per_op"),
            g.figure("switches.total.per_op"),
            g.figure("futex.waits.per_op"),
            g.figure("span.acquire.time.per_op"),
            grouped(g.figure("latency.p99_99"), 0),
        );
    }
    out
}

/// The k of a sweep configuration, from its directory (`sync-k00100` → 100).
fn sweep_k(g: &Group) -> Option<u32> {
    g.config.strip_prefix("sync-k")?.parse().ok()
}

/// A sweep group's name: the build, or `k=N` for the fixed lock.
fn sweep_label(g: &Group) -> String {
    match sweep_k(g) {
        Some(k) => format!("k={k}"),
        None => g.build.to_string(),
    }
}

/// The sweep table: per build (and per k of the fixed lock), medians of throughput, CPU,
/// switches, futex waits and acquire time per message, and the P99 and P99.99 latency.
pub fn sweep_table(groups: &[Group]) -> String {
    let head = [
        "build",
        "k",
        "runs",
        "msgs/s",
        "CPU µs/msg",
        "switches/msg",
        "futex waits/msg",
        "acquire µs/msg",
        "P99 µs",
        "P99.99 µs",
    ];
    let mut out = header(&head);
    for g in groups {
        let k = match (g.build, sweep_k(g)) {
            (_, Some(k)) => grouped(f64::from(k), 0),
            ("abs", None) => "adaptive".into(),
            _ => "–".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} | {:.3} | {:.4} | {:.1} | {} | {} |",
            g.build,
            k,
            g.runs.len(),
            grouped(g.figure("throughput"), 0),
            g.figure("cpu.per_op"),
            g.figure("switches.total.per_op"),
            g.figure("futex.waits.per_op"),
            g.figure("span.acquire.time.per_op"),
            grouped(g.figure("latency.p99"), 0),
            grouped(g.figure("latency.p99_99"), 0),
        );
    }
    out
}

/// The sweep chart, SVG, drawn as the article draws it: CPU per message against the send
/// rate, and P99.99 against throughput; one point per run, a colour per build and k.
pub fn sweep_chart(groups: &[Group]) -> Result<String, Failure> {
    let rate = |run: &Run, figures: &BTreeMap<String, Metric>| {
        metrics::lookup(run, figures, "throughput").map(|m| m.value / 1e3)
    };
    let of = |name: &'static str, scale: f64| {
        move |run: &Run, figures: &BTreeMap<String, Metric>| {
            let y = metrics::lookup(run, figures, name)?.value / scale;
            Some((rate(run, figures)?, y))
        }
    };
    let panel = |caption: &str, y_desc: &str, name: &'static str, scale: f64| Panel {
        caption: caption.into(),
        series: groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                // The builds in their own colours; each k in the palette's others.
                let colour = build_colour(&sweep_label(g)).unwrap_or(3 + i % 4);
                dots(g, &sweep_label(g), colour, of(name, scale))
            })
            .collect(),
        marks: Vec::new(),
        y_desc: Some(y_desc.into()),
    };
    let panels = [
        panel(
            "CPU per message against send rate",
            "CPU µs/msg",
            "cpu.per_op",
            1.0,
        ),
        panel(
            "P99.99 against throughput",
            "P99.99 ms",
            "latency.p99_99",
            1e3,
        ),
    ];
    let mut chart = Chart::new(
        "spin-lock broker, synchronous flush: fixed k against mutex and abs, one point per run",
        "thousand msgs/s",
        "",
    );
    chart.grid = (1, 2);
    chart.size = (860, 360);
    chart.legend = Legend::UpperRight;
    chart.y_label_area = 52;
    // The send rates span 0.2 to 3 thousand a second.
    chart.x_log = true;
    chart.svg(&panels)
}

/// One adaptation step of the broker's abs lock that changed K or the mode, from its exit
/// summary (`lock_stats.abs.steps`), its time on the recording's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct LockStep {
    /// Seconds since the recording began.
    pub at_s: f64,
    /// `grew`, `shrank`, `to_mutex` or `to_spin`.
    pub step: String,
    /// K after the step.
    pub k: u64,
    /// The window's acquisitions per second.
    pub rate: f64,
    /// The rate at the last switch to the mutex.
    pub rate_at_switch: f64,
}

/// A run with the steps its lock logged.
pub struct LockedRun {
    pub name: String,
    pub run: Run,
    pub steps: Vec<LockStep>,
}

/// The steps in a broker summary line (`summary`, JSON), timed from `start_mono_ns`.
pub fn lock_steps(summary: &str, start_mono_ns: u64) -> Result<Vec<LockStep>, String> {
    let v: serde_json::Value = serde_json::from_str(summary).map_err(|e| e.to_string())?;
    let steps = v["lock_stats"]["abs"]["steps"]
        .as_array()
        .ok_or("no lock_stats.abs.steps: not an abs or fixed broker's summary")?;
    steps
        .iter()
        .map(|s| {
            let num = |k: &str| s[k].as_f64().ok_or(format!("step without {k}: {s}"));
            Ok(LockStep {
                at_s: (num("at_ns")? - start_mono_ns as f64) / 1e9,
                step: s["step"].as_str().unwrap_or("?").to_string(),
                k: num("k")? as u64,
                rate: num("rate")?,
                rate_at_switch: num("rate_at_switch")?,
            })
        })
        .collect()
}

/// The fallback story's runs with their lock's steps, from each run's `record.out` (the
/// server's stdout under switchyard, ending with its summary line); the runs are
/// `<build>-1`, `<build>-2`, … in each configuration.
pub fn fallback_runs(root: &Path, groups: &[Group]) -> Result<Vec<LockedRun>, Failure> {
    let mut out = Vec::new();
    for g in groups {
        for (i, (run, _)) in g.runs.iter().enumerate() {
            let name = format!("{}/{}-{}", g.config, g.build, i + 1);
            let path = root.join(&name).join("record.out");
            let text = fs::read_to_string(&path)
                .map_err(|e| Failure::io(format!("reading {}", path.display()), e))?;
            let summary = text.lines().last().unwrap_or_default();
            let steps = lock_steps(summary, run.meta.start_mono_ns)
                .map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
            out.push(LockedRun {
                name,
                run: run.clone(),
                steps,
            });
        }
    }
    Ok(out)
}

/// The fallback table: each run's switches between spin and mutex mode (when, K, the
/// window's rate and the rate at the switch), then how often K grew and shrank.
pub fn fallback_table(runs: &[LockedRun]) -> String {
    let head = [
        "run",
        "s",
        "switch",
        "K after",
        "window msgs/s",
        "rate at switch msgs/s",
    ];
    let mut out = header(&head);
    for r in runs {
        for s in r.steps.iter().filter(|s| s.step.starts_with("to_")) {
            let _ = writeln!(
                out,
                "| {} | {:.2} | {} | {} | {} | {} |",
                r.name,
                s.at_s,
                s.step.replace('_', " "),
                grouped(s.k as f64, 0),
                grouped(s.rate, 0),
                grouped(s.rate_at_switch, 0),
            );
        }
    }
    for r in runs {
        let count = |kind: &str| r.steps.iter().filter(|s| s.step == kind).count();
        let _ = writeln!(
            out,
            "\n{}: K grew {} and shrank {} times; {} switches.",
            r.name,
            count("grew"),
            count("shrank"),
            r.steps.iter().filter(|s| s.step.starts_with("to_")).count(),
        );
    }
    out
}

/// The fallback chart, SVG: per run, the driver's throughput per window over the recording,
/// with each of the lock's mode switches marked.
pub fn fallback_chart(runs: &[LockedRun]) -> Result<String, Failure> {
    let panels: Vec<Panel> = runs
        .iter()
        .filter_map(|r| {
            let w = r.run.workload.as_ref()?;
            let offset = w.start_offset_ns.unwrap_or(0) as f64 / 1e9;
            let points = w
                .windows
                .windows(2)
                .filter(|p| p[1].start_ms > p[0].start_ms)
                .map(|p| {
                    let secs = (p[1].start_ms - p[0].start_ms) as f64 / 1e3;
                    (
                        offset + p[0].start_ms as f64 / 1e3,
                        p[0].operations as f64 / secs / 1e3,
                    )
                })
                .collect();
            Some(Panel {
                caption: r.name.clone(),
                series: vec![Series {
                    label: String::new(),
                    colour: build_colour(&w.build).unwrap_or(6),
                    points,
                    line: true,
                }],
                marks: r
                    .steps
                    .iter()
                    .filter(|s| s.step.starts_with("to_"))
                    .map(|s| s.at_s)
                    .collect(),
                y_desc: None,
            })
        })
        .collect();
    let mut chart = Chart::new(
        "abs, synchronous flush, 8 producers then 1 every 50 ms: msgs/s per window; dashed: a mode switch",
        "s since the recording began",
        "thousand msgs/s",
    );
    chart.grid = (panels.len().max(1), 1);
    chart.size = (760, 60 + 220 * panels.len() as u32);
    chart.legend = Legend::None;
    chart.svg(&panels)
}

/// The socket syscalls of the relay's designs.
const SOCKET: [&str; 6] = [
    "recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg",
];

/// The relay table: per configuration and build, medians of packets/s, datagrams the speakers
/// received per packet (S, an ack and S − 1 forwards, unless the relay bundles them), syscalls
/// (all, and socket ones), switches and CPU per packet, P50 and P99 latency, and the forwards
/// lost over all runs. A packet is a voice frame a speaker sent.
pub fn relay_table(groups: &[Group]) -> String {
    let head = [
        "rooms",
        "speakers",
        "build",
        "runs",
        "packets/s",
        "datagrams out/pkt",
        "syscalls/pkt",
        "socket syscalls/pkt",
        "switches/pkt",
        "CPU µs/pkt",
        "P50 µs",
        "P99 µs",
        // Not a median: forwards lost in any run are worth seeing.
        "lost (sum of runs)",
    ];
    let mut out = header(&head);
    for g in groups {
        // Counted per packet as the other per-operation figures are: the sum of the counts
        // over the operations (a syscall the run never made counts 0).
        let socket = g.median(|run, figures| {
            let ops = metrics::lookup(run, figures, "operations")?.value;
            let count: f64 = SOCKET
                .iter()
                .filter_map(|s| metrics::lookup(run, figures, &format!("syscalls.{s}")))
                .map(|m| m.value)
                .sum();
            (ops > 0.0).then(|| count / ops)
        });
        // Runs from before the driver counted datagrams have none: "–".
        let datagrams = g.median(|run, _| {
            let sent = number(run, "packets_sent")?;
            (sent > 0.0).then_some(number(run, "datagrams_received")? / sent)
        });
        let datagrams = if g
            .runs
            .iter()
            .any(|(r, _)| number(r, "datagrams_received").is_some())
        {
            format!("{datagrams:.2}")
        } else {
            "–".into()
        };
        let lost: u64 = g
            .runs
            .iter()
            .filter_map(|(r, _)| r.workload.as_ref())
            .filter_map(|w| w.parameters.get("forwards_lost"))
            .filter_map(|v| v.parse::<u64>().ok())
            .sum();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.3} | {:.3} | {:.1} | {} | {} | {} |",
            g.parameter("rooms").unwrap_or("None"),
            g.parameter("speakers_per_room").unwrap_or("None"),
            g.build,
            g.runs.len(),
            grouped(g.figure("throughput"), 0),
            datagrams,
            g.figure("syscalls.total.per_op"),
            socket,
            g.figure("switches.total.per_op"),
            g.figure("cpu.per_op"),
            grouped(g.figure("latency.p50"), 0),
            grouped(g.figure("latency.p99"), 0),
            lost,
        );
    }
    out
}

/// On-CPU samples whose stack has a frame of each part of the asset server's work, by the
/// frame names that mark it (inclusive: a sample is in every part it has a frame of).
const ASSET_PARTS: [(&str, &[&str]); 4] = [
    (
        "compression",
        &[
            "deflate",
            "ZSTD_",
            "zstd::",
            "compress_block",
            "longest_match",
            "crc32",
        ],
    ),
    (
        "encryption",
        &["aes", "Aes", "gcm", "ghash", "polyval", "Cipher", "EVP_"],
    ),
    (
        "JSON",
        &[
            "serde_json",
            "JsonParser",
            "JSON",
            "json_parse",
            "v8::internal::JsonParser",
        ],
    ),
    ("JS", &["_[j]"]),
];

/// The share (%) of a run's on-CPU samples with a frame of each of [`ASSET_PARTS`].
fn asset_shares(run: &Run) -> [f64; 4] {
    let frames = &run.profiles.frames;
    let mut parts = [0u64; 4];
    let mut total = 0u64;
    for s in &run.profiles.oncpu.stacks {
        total += s.value;
        for (i, (_, marks)) in ASSET_PARTS.iter().enumerate() {
            let hit = s.frames.iter().any(|&f| {
                frames.get(f as usize).is_some_and(|fr| {
                    let name = if fr.kind == switchyard_model::FrameKind::Jit {
                        format!("{}_[j]", fr.name)
                    } else {
                        fr.name.clone()
                    };
                    marks.iter().any(|m| name.contains(m))
                })
            });
            if hit {
                parts[i] += s.value;
            }
        }
    }
    parts.map(|p| {
        if total == 0 {
            0.0
        } else {
            100.0 * p as f64 / total as f64
        }
    })
}

/// The asset server's table: per build, medians of CPU per request and per MiB served, the
/// on-CPU share of each part of the work, syscalls and bytes per write, switches, latency,
/// bytes per response, peak RSS and (dhat builds) allocations; then the story's
/// decomposition into runtime and codec.
pub fn asset_table(groups: &[Group]) -> String {
    let head = [
        "build",
        "runs",
        "CPU ms/req",
        "CPU ms/MiB",
        "compression %",
        "encryption %",
        "JSON %",
        "JS %",
        "syscalls/req",
        "bytes/write",
        "switches/req",
        "mean",
        "P99",
        "max",
        "bytes/response",
        "peak RSS",
        "allocs/req",
        "alloc/req",
    ];
    let mut out = header(&head);
    let param = |g: &Group, name: &str| g.parameter_median(name);
    let mut cpu = BTreeMap::new();
    for g in groups {
        let served = param(g, "model_bytes_per_response") / MIB;
        let wire = param(g, "wire_bytes_per_response");
        let cpu_ms = g.figure("cpu.per_op") / 1000.0;
        cpu.insert(g.build, (cpu_ms, served));
        let share = |i: usize| g.median(|run, _| Some(asset_shares(run)[i]));
        let writes = g.median(|run, figures| {
            let ops = metrics::lookup(run, figures, "operations")?.value;
            let n: f64 = ["write", "writev", "sendto", "sendmsg"]
                .iter()
                .filter_map(|s| metrics::lookup(run, figures, &format!("syscalls.{s}")))
                .map(|m| m.value)
                .sum();
            (ops > 0.0).then(|| n / ops)
        });
        // dhat's figures, in their units; "–" for a build without dhat.
        let heap = |name: &str, unit: Unit| {
            if g.runs.iter().any(|(r, _)| r.heap.is_some()) {
                unit.human(g.figure(name))
            } else {
                "–".into()
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
            g.build,
            g.runs.len(),
            cpu_ms,
            if served > 0.0 { cpu_ms / served } else { 0.0 },
            share(0),
            share(1),
            share(2),
            share(3),
            g.figure("syscalls.total.per_op"),
            bytes(if writes > 0.0 { wire / writes } else { 0.0 }.round() as u64),
            g.figure("switches.total.per_op"),
            ns_f(param(g, "mean_latency_ns")),
            // Under 100 requests a run, P99 is its maximum: not given as a percentile.
            if g.figure("operations") < 100.0 {
                "–".to_string()
            } else {
                Unit::Micros.human(g.figure("latency.p99"))
            },
            Unit::Micros.human(g.figure("latency.max")),
            bytes(wire.round() as u64),
            Unit::MiB.human(g.figure("memory.max_rss")),
            heap("heap.allocs.per_op", Unit::PerOp),
            heap("heap.bytes.per_op", Unit::BytesPerOp),
        );
    }
    if let (Some(node), Some(gzip), Some(zstd)) = (
        cpu.get("node-gzip"),
        cpu.get("rust-gzip"),
        cpu.get("rust-zstd"),
    ) {
        let _ = writeln!(
            out,
            "\nCPU per request: node-gzip → rust-zstd {:.1}× less; the runtime (node-gzip → rust-gzip) {:.2}×, the codec (rust-gzip → rust-zstd) {:.2}×.",
            node.0 / zstd.0,
            node.0 / gzip.0,
            gzip.0 / zstd.0
        );
    }
    out
}

const MIB: f64 = 1024.0 * 1024.0;

/// An asset build's colour in a chart ([`build_colour`]).
fn asset_colour(build: &str) -> usize {
    build_colour(build).unwrap_or(6)
}

/// The concurrency story's table: per level of concurrency and build, medians of the
/// responses served, responses/s, the server's CPU (per request, and in cores' worth), and the
/// latency's mean, P50, P99 and maximum.
pub fn asset_concurrency_table(groups: &[Group]) -> String {
    let head = [
        "in flight",
        "build",
        "runs",
        "responses",
        "responses/s",
        "CPU ms/req",
        "server CPU %",
        "mean ms",
        "P50 ms",
        "P99 ms",
        "max ms",
    ];
    let mut out = header(&head);
    for g in groups {
        let mean = g.median(|run, _| {
            let w = run.workload.as_ref()?;
            w.parameters.get("mean_latency_ns")?.parse::<f64>().ok()
        });
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.2} | {:.0} | {:.0} | {} | {} | {} | {} |",
            g.parameter("concurrency").unwrap_or("?"),
            g.build,
            g.runs.len(),
            g.figure("operations"),
            g.figure("throughput"),
            g.figure("cpu.per_op") / 1e3,
            g.figure("cpu.utilisation"),
            grouped(mean / 1e6, 0),
            grouped(g.figure("latency.p50") / 1e3, 0),
            grouped(g.figure("latency.p99") / 1e3, 0),
            grouped(g.figure("latency.max") / 1e3, 0),
        );
    }
    out
}

/// The concurrency story's chart, SVG: P50, P99 and maximum latency against downloads in
/// flight, a panel each; per build (a colour each) a dot per run and a line through the
/// medians.
pub fn asset_concurrency_chart(groups: &[Group]) -> Result<String, Failure> {
    let in_flight = |run: &Run| -> Option<f64> {
        run.workload
            .as_ref()?
            .parameters
            .get("concurrency")?
            .parse()
            .ok()
    };
    let builds = assets_concurrency().builds;
    let panels: Vec<Panel> = [
        ("P50", "latency.p50"),
        ("P99", "latency.p99"),
        ("max", "latency.max"),
    ]
    .iter()
    .map(|&(caption, figure)| {
        let point = |run: &Run, figures: &BTreeMap<String, Metric>| {
            let s = metrics::lookup(run, figures, figure)?.value / 1e6;
            Some((in_flight(run)?, s))
        };
        let mut series = Vec::new();
        for &build in builds {
            let of_build: Vec<&Group> = groups.iter().filter(|g| g.build == build).collect();
            let runs = Series {
                label: build.into(),
                colour: asset_colour(build),
                points: of_build
                    .iter()
                    .flat_map(|g| dots(g, build, 0, point).points)
                    .collect(),
                line: false,
            };
            let medians = of_build
                .iter()
                .filter_map(|g| {
                    let x = g.parameter("concurrency")?.parse::<f64>().ok()?;
                    Some((x, g.figure(figure) / 1e6))
                })
                .collect();
            series.push(runs);
            series.push(Series {
                label: String::new(),
                colour: asset_colour(build),
                points: medians,
                line: true,
            });
        }
        Panel {
            caption: caption.into(),
            series,
            marks: Vec::new(),
            ..Default::default()
        }
    })
    .collect();
    let mut chart = Chart::new(
        "asset server: latency against downloads in flight; a dot per run, a line through the medians",
        "downloads in flight",
        "latency s",
    );
    chart.grid = (1, panels.len());
    chart.size = (900, 360);
    let most = ASSET_CONCURRENCY.iter().copied().max().unwrap_or(1);
    chart.x_range = Some((0.0, f64::from(most) + 1.0));
    chart.legend = Legend::LowerRight;
    chart.svg(&panels)
}

/// `| a | b |` and `|---|---|`.
pub(crate) fn header(head: &[&str]) -> String {
    format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()))
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let entries = fs::read_dir(dir).map_err(|e| {
        Failure::io(format!("reading {}", dir.display()), e)
            .hint("record the story first (`just compare-broker` or `just compare-relay`)")
    })?;
    Ok(entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `message: cause: cause…`
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        s.push_str(&format!(": {c}"));
        source = c.source();
    }
    s
}

/// A GOGC configuration's value, from its directory (`gogc-050` → `50`): a server flag, not
/// one of the driver's parameters.
fn gogc_of(g: &Group) -> &str {
    g.config
        .strip_prefix("gogc-")
        .map_or("?", |v| v.trim_start_matches('0'))
}

/// The GOGC table: per GOGC, the latency tail, the GC's cycles, pauses and assists, CPU per
/// request and the peak RSS, medians over the runs.
pub fn gogc_table(groups: &[Group]) -> String {
    gc_table(groups, "GOGC", |g| gogc_of(g).to_string())
}

/// The forced-GC run's table: as the GOGC one, by configuration.
pub fn forced_gc_table(groups: &[Group]) -> String {
    gc_table(groups, "configuration", |g| g.config.clone())
}

/// A GC story's table, its first column `first` with `label`'s value.
fn gc_table(groups: &[Group], first: &str, label: impl Fn(&Group) -> String) -> String {
    let head = [
        first,
        "runs",
        "P50 µs",
        "P99 ms",
        "P99.9 ms",
        "max ms",
        "GC cycles",
        "STW pauses",
        "longest pause ms",
        "mark assists",
        "worst window P99 ms",
        "CPU µs/req",
        "peak RSS MiB",
    ];
    let mut out = header(&head);
    for g in groups {
        let gc = |f: fn(&switchyard_model::GoGc) -> f64| g.median(|run, _| run.gc.as_ref().map(f));
        let worst = g.median(|run, _| worst_window(run));
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.2} | {:.0} | {:.2} | {:.1} | {:.0} |",
            label(g),
            g.runs.len(),
            g.figure("latency.p50"),
            g.figure("latency.p99") / 1e3,
            g.figure("latency.p99_9") / 1e3,
            g.figure("latency.max") / 1e3,
            gc(|g| g.cycles as f64),
            gc(|g| g.pauses as f64),
            gc(|g| g.pause_max_ns as f64) / 1e6,
            gc(|g| g.mark_assists as f64),
            worst / 1e6,
            g.figure("cpu.per_op"),
            g.figure("memory.max_rss"),
        );
    }
    out
}

/// The GOGC chart, SVG: per GOGC (first run of each), the driver's P99 per 100 ms window over
/// the recording, with each GC cycle's end marked, one panel each on a shared scale.
pub fn gogc_chart(groups: &[Group]) -> Result<String, Failure> {
    gc_chart(groups, GO_CHART, |g| format!("GOGC={}", gogc_of(g)))
}

/// The forced-GC run's chart: as the GOGC one, a panel per configuration.
pub fn forced_gc_chart(groups: &[Group]) -> Result<String, Failure> {
    gc_chart(groups, GO_CHART, |g| g.config.clone())
}

const GO_CHART: &str = "read-state cache (Go): P99 per 100 ms window; dashed: a GC cycle ends";

/// A GC story's chart headed `heading`, a panel per group titled by `title`.
fn gc_chart(
    groups: &[Group],
    heading: &str,
    title: impl Fn(&Group) -> String,
) -> Result<String, Failure> {
    let panels: Vec<Panel> = groups
        .iter()
        .filter_map(|g| {
            let (run, _) = g.runs.first()?;
            let w = run.workload.as_ref()?;
            let offset = w.start_offset_ns.unwrap_or(0) as f64 / 1e9;
            let points = w
                .windows
                .iter()
                .map(|win| (offset + win.start_ms as f64 / 1e3, win.p99_ns as f64 / 1e6))
                .collect();
            let marks = run
                .gc
                .as_ref()
                .map(|gc| {
                    gc.timeline
                        .iter()
                        .filter(|m| m.kind == "cycle")
                        .map(|m| m.at_ns as f64 / 1e9)
                        .collect()
                })
                .unwrap_or_default();
            // One run is drawn: the panel says which when there are more.
            let caption = match g.runs.len() {
                1 => title(g),
                n => format!("{}: the first of its {n} runs by name", title(g)),
            };
            Some(Panel {
                caption,
                series: vec![Series {
                    label: String::new(),
                    colour: build_colour(&w.build).unwrap_or(6),
                    points,
                    line: true,
                }],
                marks,
                y_desc: None,
            })
        })
        .collect();
    let all = || panels.iter().flat_map(|p| p.series[0].points.iter());
    let mut chart = Chart::new(heading, "s since the recording began", "P99 ms");
    chart.grid = (panels.len().max(1), 1);
    chart.size = (760, 40 + 170 * panels.len() as u32);
    chart.x_range = Some((0.0, all().map(|p| p.0).fold(1.0, f64::max)));
    chart.y_range = Some((0.0, all().map(|p| p.1).fold(1.0, f64::max) * 1.1));
    chart.legend = Legend::None;
    chart.y_label_area = 48;
    chart.svg(&panels)
}

/// A cache-size configuration's capacity, from its directory (`capacity-0500000` → 500000).
fn capacity_of(g: &Group) -> f64 {
    g.config
        .strip_prefix("capacity-")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The share (%) of the measured requests that hit the cache: the server's hits over its
/// requests less the fill's (one miss per entry of the capacity), from the counts
/// [`slim`] keeps.
fn hit_ratio(run: &Run) -> Option<f64> {
    let p = &run.workload.as_ref()?.parameters;
    let count = |name: &str| p.get(name)?.parse::<f64>().ok();
    let measured = count("server_requests")? - count("server_capacity")?;
    let hits = count("server_hits")?;
    (measured > 0.0).then(|| 100.0 * hits / measured)
}

/// The median over a group's runs of a GC figure `f`, divided by `scale`, with `digits`
/// decimals; "–" for a build without a collector.
fn gc_figure(
    g: &Group,
    f: fn(&switchyard_model::GoGc) -> f64,
    scale: f64,
    digits: usize,
) -> String {
    if g.runs.iter().any(|(r, _)| r.gc.is_some()) {
        format!(
            "{:.digits$}",
            g.median(|run, _| run.gc.as_ref().map(f)) / scale
        )
    } else {
        "–".into()
    }
}

/// The largest P99 of a run's 100 ms windows, ns.
fn worst_window(run: &Run) -> Option<f64> {
    let w = run.workload.as_ref()?;
    w.windows.iter().map(|w| w.p99_ns).max().map(|v| v as f64)
}

/// The cache-size table: per capacity and build, medians of the hit ratio, the GC's cycles
/// and longest pause, the latency tail, CPU per request and the peak RSS.
pub fn cache_size_table(groups: &[Group]) -> String {
    let head = [
        "capacity",
        "build",
        "runs",
        "hit ratio %",
        "GC cycles",
        "longest pause ms",
        "worst window P99 ms",
        "P99 ms",
        "P99.99 ms",
        "max ms",
        "CPU µs/req",
        "peak RSS MiB",
    ];
    let mut out = header(&head);
    for g in groups {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.0} |",
            grouped(capacity_of(g), 0),
            g.build,
            g.runs.len(),
            g.median(|run, _| hit_ratio(run)),
            gc_figure(g, |g| g.cycles as f64, 1.0, 0),
            gc_figure(g, |g| g.pause_max_ns as f64, 1e6, 2),
            g.median(|run, _| worst_window(run)) / 1e6,
            g.figure("latency.p99") / 1e3,
            g.figure("latency.p99_99") / 1e3,
            g.figure("latency.max") / 1e3,
            g.figure("cpu.per_op"),
            g.figure("memory.max_rss"),
        );
    }
    out
}

/// The cache-size chart: a panel per capacity and build (first run), P99 per 100 ms window
/// with the Go build's GC cycle ends marked.
pub fn cache_size_chart(groups: &[Group]) -> Result<String, Failure> {
    gc_chart(
        groups,
        "read-state cache, a miss answered after 1 ms: P99 per 100 ms window; dashed: a GC cycle ends",
        |g| format!("{}, {} entries", g.build, grouped(capacity_of(g), 0)),
    )
}

/// The go/rust table: per build, medians of the latency percentiles, the GC's cycles,
/// pauses and assists, CPU, switches and syscalls per request, the off-CPU share and the
/// peak RSS; "–" where a build has no collector.
pub fn go_rust_table(groups: &[Group]) -> String {
    let head = [
        "build",
        "runs",
        "P50 µs",
        "P99 ms",
        "P99.9 ms",
        "P99.99 ms",
        "max ms",
        "GC cycles",
        "STW pauses",
        "longest pause ms",
        "mark assists",
        "worst window P99 ms",
        "CPU µs/req",
        "switches/req",
        "syscalls/req",
        "off-CPU %",
        "peak RSS MiB",
    ];
    let mut out = header(&head);
    for g in groups {
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} | {:.2} | {:.1} | {:.2} | {:.2} | {:.1} | {:.0} |",
            g.build,
            g.runs.len(),
            g.figure("latency.p50"),
            g.figure("latency.p99") / 1e3,
            g.figure("latency.p99_9") / 1e3,
            g.figure("latency.p99_99") / 1e3,
            g.figure("latency.max") / 1e3,
            gc_figure(g, |g| g.cycles as f64, 1.0, 0),
            gc_figure(g, |g| g.pauses as f64, 1.0, 0),
            gc_figure(g, |g| g.pause_max_ns as f64, 1e6, 2),
            gc_figure(g, |g| g.mark_assists as f64, 1.0, 0),
            g.median(|run, _| worst_window(run)) / 1e6,
            g.figure("cpu.per_op"),
            g.figure("switches.total.per_op"),
            g.figure("syscalls.total.per_op"),
            g.figure("offcpu.share"),
            g.figure("memory.max_rss"),
        );
    }
    out
}

/// The go/rust chart: a panel per build (its first run, which the panel names), P99 per
/// 100 ms window with the Go build's GC cycle ends marked.
pub fn go_rust_chart(groups: &[Group]) -> Result<String, Failure> {
    gc_chart(
        groups,
        "read-state cache, Go and Rust: P99 per 100 ms window; dashed: a GC cycle ends",
        |g| g.build.to_string(),
    )
}

/// A series of dots, one per run of `g` that `point` gives a point for.
fn dots(
    g: &Group,
    label: &str,
    colour: usize,
    point: impl Fn(&Run, &BTreeMap<String, Metric>) -> Option<(f64, f64)>,
) -> Series {
    Series {
        label: label.into(),
        colour,
        points: g.runs.iter().filter_map(|(r, m)| point(r, m)).collect(),
        line: false,
    }
}

/// The broker chart, SVG: CPU per message against throughput, one point per run, a panel per
/// configuration (contention and message size), the builds told apart by colour.
pub fn broker_chart(groups: &[Group]) -> Result<String, Failure> {
    let mut configs: Vec<&str> = groups.iter().map(|g| g.config.as_str()).collect();
    configs.dedup();
    let point = |run: &Run, figures: &BTreeMap<String, Metric>| -> Option<(f64, f64)> {
        let rate = metrics::lookup(run, figures, "throughput")?.value;
        let cpu = metrics::lookup(run, figures, "cpu.per_op")?.value;
        Some((rate / 1e3, cpu))
    };
    let colour = |build: &str| build_colour(build).unwrap_or(6);
    let panels: Vec<Panel> = configs
        .iter()
        .map(|config| Panel {
            caption: config.to_string(),
            series: groups
                .iter()
                .filter(|g| g.config == *config)
                .map(|g| dots(g, g.build, colour(g.build), point))
                .collect(),
            marks: Vec::new(),
            y_desc: None,
        })
        .collect();
    let mut chart = Chart::new(
        "spin-lock broker: CPU per message against throughput, one point per run",
        "thousand msgs/s",
        "CPU µs/msg",
    );
    chart.grid = (2, 2);
    chart.size = (760, 560);
    chart.svg(&panels)
}

/// The relay chart, SVG: context switches per packet against speakers per room, one point per
/// run, a panel per room count, the builds told apart by colour ([`build_colour`]).
pub fn relay_chart(groups: &[Group]) -> Result<String, Failure> {
    let point = |run: &Run, figures: &BTreeMap<String, Metric>| -> Option<(f64, f64)> {
        let speakers: f64 = run
            .workload
            .as_ref()?
            .parameters
            .get("speakers_per_room")?
            .parse()
            .ok()?;
        let switches = metrics::lookup(run, figures, "switches.total.per_op")?.value;
        Some((speakers, switches))
    };
    let mut rooms: Vec<&str> = groups.iter().filter_map(|g| g.parameter("rooms")).collect();
    rooms.sort_by_key(|r| r.parse::<u32>().unwrap_or(0));
    rooms.dedup();
    let panels: Vec<Panel> = rooms
        .iter()
        .map(|r| Panel {
            caption: format!("{r} rooms"),
            series: RELAY_BUILDS
                .iter()
                .map(|build| {
                    let colour = build_colour(build).unwrap_or(6);
                    let mut s = Series {
                        label: build.to_string(),
                        colour,
                        points: Vec::new(),
                        line: false,
                    };
                    for g in groups
                        .iter()
                        .filter(|g| g.build == *build && g.parameter("rooms") == Some(*r))
                    {
                        s.points.extend(dots(g, build, colour, point).points);
                    }
                    s
                })
                .collect(),
            marks: Vec::new(),
            y_desc: None,
        })
        .collect();
    let mut chart = Chart::new(
        "voice relay: context switches per packet against speakers per room, one point per run",
        "speakers per room",
        "switches/packet",
    );
    chart.grid = (1, panels.len().max(1));
    chart.x_range = Some((0.0, 10.0));
    chart.legend = Legend::LowerLeft;
    chart.svg(&panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stories_name_known_builds_and_knobs() {
        for story in [
            broker(2),
            relay(),
            assets(),
            assets_concurrency(),
            gogc(),
            cache_size(),
            go_rust(),
        ] {
            let w = crate::catalogue::workload(story.workload).expect("in the catalogue");
            for b in story.builds {
                assert!(w.build(b).is_some(), "{} has no build {b}", w.name);
            }
            for c in &story.configs {
                for k in &c.knobs {
                    let name = k.split_once('=').expect("NAME=VALUE").0;
                    assert!(w.knob(name).is_some(), "{} has no knob {name}", w.name);
                }
            }
        }
        assert_eq!(broker(2).configs[3].knobs, ["producers=8", "size=1024"]);
        let dirs: Vec<_> = assets_concurrency()
            .configs
            .into_iter()
            .map(|c| c.dir)
            .collect();
        assert_eq!(
            dirs,
            ["c02", "c04", "c08"],
            "in name order, the order of the levels"
        );
        for story in [broker_sweep(2), broker_fallback()] {
            let w = crate::catalogue::workload(story.workload).expect("in the catalogue");
            for c in &story.configs {
                for b in c.builds.unwrap_or(story.builds) {
                    assert!(story.builds.contains(b), "{}: {b} is not loaded", c.dir);
                    let knobs = c.knobs.clone();
                    let req = crate::plan::Request {
                        workload: story.workload,
                        build: b,
                        knobs: &knobs,
                        ..Default::default()
                    };
                    assert!(crate::plan::Plan::new(&req, |_| None, 2).is_ok(), "{c:?}");
                }
            }
            assert!(w.build("fixed").is_some());
        }
        let sweep = broker_sweep(2);
        let dirs: Vec<&str> = sweep.configs.iter().map(|c| c.dir.as_str()).collect();
        assert_eq!(
            dirs,
            [
                "sync",
                "sync-k00010",
                "sync-k00100",
                "sync-k01000",
                "sync-k10000"
            ]
        );
        assert_eq!(
            sweep.configs[2].knobs,
            ["producers=8", "size=1024", "flush=every:1", "k=100"]
        );
    }

    #[test]
    fn lock_steps_are_read_from_the_summary_on_the_recordings_clock() {
        let summary = r#"{"lock_stats":{"abs":{"steps":[
            {"at_ns":3500000000,"step":"grew","k":2000,"rate":1500.0,"rate_at_switch":0.0},
            {"at_ns":4000000000,"step":"to_mutex","k":10000,"rate":1200.0,"rate_at_switch":1200.0}]}}}"#;
        let steps = lock_steps(summary, 1_000_000_000).unwrap();
        assert_eq!(
            steps,
            [
                LockStep {
                    at_s: 2.5,
                    step: "grew".into(),
                    k: 2_000,
                    rate: 1_500.0,
                    rate_at_switch: 0.0
                },
                LockStep {
                    at_s: 3.0,
                    step: "to_mutex".into(),
                    k: 10_000,
                    rate: 1_200.0,
                    rate_at_switch: 1_200.0
                },
            ]
        );
        assert!(lock_steps(r#"{"lock_stats":{"kind":"mutex"}}"#, 0).is_err());
        assert!(lock_steps("ready 4000", 0).is_err());
    }

    #[test]
    fn the_hit_ratio_leaves_the_fill_out() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../reports/read-state-cache/gogc/gogc-050/go-1")
            .join(SLIM);
        let mut run = Run::load(&path).expect("a committed run");
        // A run kept before the server's counts were: no ratio.
        assert_eq!(hit_ratio(&run), None);
        let p = &mut run.workload.as_mut().expect("a driver result").parameters;
        for (name, value) in [
            ("server_capacity", "100000"),
            ("server_requests", "1100000"),
            ("server_hits", "750000"),
        ] {
            p.insert(name.into(), value.into());
        }
        // 1,100,000 requests, 100,000 of them the fill's misses: 750,000 hits of 1,000,000.
        assert_eq!(hit_ratio(&run), Some(75.0));
    }
}
