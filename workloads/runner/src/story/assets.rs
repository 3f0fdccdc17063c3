//! The asset server's stories: each build's CPU per request and where it goes (1 request/s),
//! and the builds with 2, 4 and 8 downloads in flight.

use super::*;

/// node-gzip, rust-gzip and rust-zstd at one request a second, the six models in turn:
/// the runtime's part (node-gzip → rust-gzip) and the codec's (rust-gzip → rust-zstd).
pub fn assets() -> Story {
    Story {
        workload: "asset-server",
        root: ASSETS_ROOT,
        name: "compare-assets",
        about: "the asset server's builds at 1 request/s: CPU per request and where it goes",
        repeats: 5,
        seconds: 12,
        table: |_, g| Ok(asset_table(g)),
        chart: None,
        keeps_oncpu: true,
        untraced: true,
        lead: Some(asset_lead),
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
        name: "story-assets-concurrency",
        about: "the asset server's builds with 2, 4 and 8 downloads in flight, 150 requests a run (the seconds only bound a driver given none)",
        repeats: 5,
        seconds: 600,
        table: |_, g| Ok(asset_concurrency_table(g)),
        chart: Some(|_, g| asset_concurrency_chart(g)),
        keeps_oncpu: false,
        untraced: true,
        lead: Some(asset_concurrency_lead),
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
            "| {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
            g.build,
            runs_text(g),
            g.ranged("cpu.per_op", |v| format!("{:.0}", v / 1000.0)),
            if served > 0.0 { cpu_ms / served } else { 0.0 },
            share(0),
            share(1),
            share(2),
            share(3),
            g.figure("syscalls.total.per_op"),
            bytes(if writes > 0.0 { wire / writes } else { 0.0 }.round() as u64),
            g.figure("switches.total.per_op"),
            ranged_values(&g.per_run(|run| number(run, "mean_latency_ns")), ns_f),
            // Under 100 requests a run, P99 is its maximum: not given as a percentile.
            if g.figure("operations") < 100.0 {
                "–".to_string()
            } else {
                Unit::Micros.human(g.figure("latency.p99"))
            },
            g.ranged("latency.max", |v| Unit::Micros.human(v)),
            bytes(wire.round() as u64),
            g.ranged("memory.max_rss", |v| Unit::MiB.human(v)),
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
    out.push_str(&sources(
        groups,
        &["CPU ms/req", "CPU ms/MiB", "P99", "max", "peak RSS"],
    ));
    out
}

/// The asset story's lead: rust-zstd's CPU per request against node-gzip's, split into the
/// runtime's part and the codec's, its longest response and its peak memory; each ranged and
/// judged by compare's rule.
pub fn asset_lead(groups: &[Group]) -> String {
    let config = [("1rps", "1 request/s")];
    let ms = |v: f64| format!("{:.0}", v / 1e3);
    let mib = |v: f64| format!("{v:.0}");
    lead_lines(
        groups,
        &config,
        &[
            (
                "rust-zstd against node-gzip, CPU ms per request",
                ("rust-zstd", "node-gzip"),
                "cpu.per_op",
                &ms as &dyn Fn(f64) -> String,
            ),
            (
                "the runtime: rust-gzip against node-gzip, CPU ms per request",
                ("rust-gzip", "node-gzip"),
                "cpu.per_op",
                &ms,
            ),
            (
                "the codec: rust-zstd against rust-gzip, CPU ms per request",
                ("rust-zstd", "rust-gzip"),
                "cpu.per_op",
                &ms,
            ),
            (
                "rust-zstd against node-gzip, the longest response, ms",
                ("rust-zstd", "node-gzip"),
                "latency.max",
                &ms,
            ),
            (
                "rust-zstd against node-gzip, peak RSS MiB",
                ("rust-zstd", "node-gzip"),
                "memory.max_rss",
                &mib,
            ),
        ],
    )
}

const MIB: f64 = 1024.0 * 1024.0;

/// An asset build's colour in a chart ([`build_colour`]).
fn asset_colour(build: &str) -> usize {
    build_colour(build).unwrap_or(6)
}

/// The concurrency story's table: per level of concurrency and build, the responses served,
/// responses/s, the server's CPU (per request, and in cores' worth), the latency's mean, P50,
/// P99 and maximum, and peak memory; a figure the untraced runs give is ranged over them.
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
        "peak RSS MiB",
    ];
    let ms = |v: f64| grouped(v / 1e3, 0);
    let mut out = header(&head);
    for g in groups {
        let mean = g.median(|run, _| {
            let w = run.workload.as_ref()?;
            w.parameters.get("mean_latency_ns")?.parse::<f64>().ok()
        });
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {} | {} | {:.0} | {} | {} | {} | {} | {} |",
            g.parameter("concurrency").unwrap_or("?"),
            g.build,
            runs_text(g),
            g.figure("operations"),
            g.ranged("throughput", |v| format!("{v:.2}")),
            g.ranged("cpu.per_op", |v| format!("{:.0}", v / 1e3)),
            g.figure("cpu.utilisation"),
            grouped(mean / 1e6, 0),
            g.ranged("latency.p50", ms),
            g.ranged("latency.p99", ms),
            g.ranged("latency.max", ms),
            g.ranged("memory.max_rss", |v| format!("{v:.0}")),
        );
    }
    out.push_str(&sources(
        groups,
        &["responses/s", "CPU ms/req", "P50", "P99", "max", "peak RSS"],
    ));
    out
}

/// The concurrency story's lead: at each level of downloads in flight, rust-zstd's P99, its
/// longest response and its throughput against node-gzip's, the runtime's part of the tail
/// (rust-gzip against node-gzip), and the peak memory, each ranged and judged.
pub fn asset_concurrency_lead(groups: &[Group]) -> String {
    let levels: Vec<(String, String)> = ASSET_CONCURRENCY
        .iter()
        .map(|n| (format!("c{n:02}"), format!("{n} in flight")))
        .collect();
    let configs: Vec<(&str, &str)> = levels
        .iter()
        .map(|(dir, title)| (dir.as_str(), title.as_str()))
        .collect();
    let ms = |v: f64| grouped(v / 1e3, 0);
    let per_s = |v: f64| format!("{v:.2}");
    let mib = |v: f64| format!("{v:.0}");
    lead_lines(
        groups,
        &configs,
        &[
            (
                "rust-zstd against node-gzip, P99 ms",
                ("rust-zstd", "node-gzip"),
                "latency.p99",
                &ms as &dyn Fn(f64) -> String,
            ),
            (
                "rust-zstd against node-gzip, the longest response, ms",
                ("rust-zstd", "node-gzip"),
                "latency.max",
                &ms,
            ),
            (
                "rust-zstd against node-gzip, responses/s",
                ("rust-zstd", "node-gzip"),
                "throughput",
                &per_s,
            ),
            (
                "the runtime: rust-gzip against node-gzip, P99 ms",
                ("rust-gzip", "node-gzip"),
                "latency.p99",
                &ms,
            ),
            (
                "rust-zstd against node-gzip, peak RSS MiB",
                ("rust-zstd", "node-gzip"),
                "memory.max_rss",
                &mib,
            ),
        ],
    )
}

/// The concurrency story's chart, SVG: P50, P99 and maximum latency against downloads in
/// flight, a panel each; per build (a colour each) a dot per run and a line through the
/// medians.
pub fn asset_concurrency_chart(groups: &[Group]) -> Result<String, Failure> {
    let builds = assets_concurrency().builds;
    let panels: Vec<Panel> = [
        ("P50", "latency.p50", 1e6, None),
        ("P99", "latency.p99", 1e6, None),
        ("max", "latency.max", 1e6, None),
        ("peak RSS", "memory.max_rss", 1.0, Some("peak RSS MiB")),
    ]
    .iter()
    .map(|&(caption, figure, scale, y_desc)| {
        let mut series = Vec::new();
        for &build in builds {
            let of_build: Vec<(f64, &Group)> = groups
                .iter()
                .filter(|g| g.build == build)
                .filter_map(|g| Some((g.parameter("concurrency")?.parse::<f64>().ok()?, g)))
                .collect();
            let runs = Series {
                label: build.into(),
                colour: asset_colour(build),
                points: of_build
                    .iter()
                    .flat_map(|&(x, g)| g.values(figure).into_iter().map(move |v| (x, v / scale)))
                    .collect(),
                line: false,
            };
            let medians = of_build
                .iter()
                .map(|&(x, g)| (x, g.figure(figure) / scale))
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
            y_desc: y_desc.map(str::to_string),
        }
    })
    .collect();
    let title = if groups.iter().any(|g| !g.untraced.is_empty()) {
        "asset server: latency and peak memory against downloads in flight; a dot per untraced run, a line through the medians"
    } else {
        "asset server: latency and peak memory against downloads in flight; a dot per run, a line through the medians"
    };
    let mut chart = Chart::new(title, "downloads in flight", "latency s");
    chart.grid = (1, panels.len());
    chart.size = (1100, 360);
    let most = ASSET_CONCURRENCY.iter().copied().max().unwrap_or(1);
    chart.x_range = Some((0.0, f64::from(most) + 1.0));
    chart.legend = Legend::LowerRight;
    chart.svg(&panels)
}
