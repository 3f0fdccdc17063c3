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
    chart::{Chart, Legend, Panel, Series},
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

/// threads and mmsg at 10 and 20 rooms of 4 and 9 speakers.
pub fn relay() -> Story {
    let mut configs = Vec::new();
    for rooms in [10, 20] {
        for speakers in [4, 9] {
            configs.push(Config {
                dir: format!("{rooms}r-{speakers}s"),
                knobs: vec![format!("speakers={speakers}"), format!("rooms={rooms}")],
                title: format!("{rooms} rooms x {speakers} speakers"),
            });
        }
    }
    Story {
        workload: "mmsg-relay",
        root: "reports/mmsg-relay",
        configs,
        builds: &["threads", "mmsg"],
        comparisons: &[("threads", "mmsg")],
    }
}

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
        }],
        builds: &["go"],
        comparisons: &[],
    }
}

pub const FORCED_ROOT: &str = "reports/read-state-cache/forced-gc";
const GOGC_VALUES: [u32; 3] = [50, 100, 400];

/// The part of a run a story keeps in the repository: everything but the stacks and the
/// timeline (a few tens of KiB where `run.json` is megabytes). Tables are computed from it.
pub const SLIM: &str = "run.slim.json";

/// Writes `dir/run.slim.json` from `dir/run.json`; with `oncpu`, keeping the on-CPU stacks
/// (and only their frames), which the asset table's shares are computed from.
pub fn slim(dir: &Path, oncpu: bool) -> Result<(), Failure> {
    let path = dir.join("run.json");
    let mut run = Run::load(&path).map_err(|e| Failure::new(error_chain(&e)))?;
    let whole = std::mem::take(&mut run.profiles);
    if oncpu {
        run.profiles.oncpu = only_oncpu(&whole, &mut run.profiles.frames);
        run.profiles.stats = whole.stats;
    }
    run.timeline = None;
    run.save(&dir.join(SLIM))
        .map_err(|e| Failure::new(format!("writing {}: {e}", dir.join(SLIM).display())))
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
                let run = Run::load(&f).map_err(|e| {
                    Failure::new(error_chain(&e))
                        .hint("record it again with this build (the story's `just` recipe)")
                })?;
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

    /// A driver parameter of the first run.
    fn parameter(&self, name: &str) -> Option<&str> {
        self.runs
            .first()
            .and_then(|(r, _)| r.workload.as_ref())
            .and_then(|w| w.parameters.get(name))
            .map(String::as_str)
    }
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

/// The socket syscalls of the relay's two designs.
const SOCKET: [&str; 6] = [
    "recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg",
];

/// The relay table: per configuration and build, medians of packets/s, syscalls (all, and
/// socket ones), switches and CPU per packet, P50 and P99 latency, and the forwards lost over
/// all runs.
pub fn relay_table(groups: &[Group]) -> String {
    let head = [
        "rooms",
        "speakers",
        "build",
        "runs",
        "packets/s",
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
        let lost: u64 = g
            .runs
            .iter()
            .filter_map(|(r, _)| r.workload.as_ref())
            .filter_map(|w| w.parameters.get("forwards_lost"))
            .filter_map(|v| v.parse::<u64>().ok())
            .sum();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2} | {:.3} | {:.3} | {:.1} | {} | {} | {} |",
            g.parameter("rooms").unwrap_or("None"),
            g.parameter("speakers_per_room").unwrap_or("None"),
            g.build,
            g.runs.len(),
            grouped(g.figure("throughput"), 0),
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
    let param = |g: &Group, name: &str| {
        g.median(|run, _| {
            run.workload
                .as_ref()
                .and_then(|w| w.parameters.get(name))
                .and_then(|v| v.parse::<f64>().ok())
        })
    };
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

/// The asset builds' colours in a chart: red, blue, green.
fn asset_colour(build: &str) -> usize {
    match build {
        "node-gzip" => 0,
        "rust-gzip" => 1,
        _ => 2,
    }
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
    chart.legend = Legend::UpperLeft;
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
        let worst = g.median(|run, _| {
            let w = run.workload.as_ref()?;
            w.windows.iter().map(|w| w.p99_ns).max().map(|v| v as f64)
        });
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
    gc_chart(groups, |g| format!("GOGC={}", gogc_of(g)))
}

/// The forced-GC run's chart: as the GOGC one, a panel per configuration.
pub fn forced_gc_chart(groups: &[Group]) -> Result<String, Failure> {
    gc_chart(groups, |g| g.config.clone())
}

/// A GC story's chart, a panel per group titled by `title`.
fn gc_chart(groups: &[Group], title: impl Fn(&Group) -> String) -> Result<String, Failure> {
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
            Some(Panel {
                caption: title(g),
                series: vec![Series {
                    label: String::new(),
                    colour: 0,
                    points,
                    line: true,
                }],
                marks,
            })
        })
        .collect();
    let all = || panels.iter().flat_map(|p| p.series[0].points.iter());
    let mut chart = Chart::new(
        "read-state cache (Go): P99 per 100 ms window; dashed: a GC cycle ends",
        "s since the recording began",
        "P99 ms",
    );
    chart.grid = (panels.len().max(1), 1);
    chart.size = (760, 40 + 170 * panels.len() as u32);
    chart.x_range = Some((0.0, all().map(|p| p.0).fold(1.0, f64::max)));
    chart.y_range = Some((0.0, all().map(|p| p.1).fold(1.0, f64::max) * 1.1));
    chart.legend = Legend::None;
    chart.y_label_area = 48;
    chart.svg(&panels)
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
    let colour = |build: &str| match build {
        "spin" => 0,
        "mutex" => 1,
        _ => 2,
    };
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
/// run, a panel per room count, the builds told apart by colour.
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
            series: ["threads", "mmsg"]
                .iter()
                .enumerate()
                .map(|(colour, build)| {
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
        for story in [broker(2), relay(), assets(), assets_concurrency()] {
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
    }
}
