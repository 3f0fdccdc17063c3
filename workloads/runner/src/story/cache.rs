//! The read-state cache's stories: Go's GC under GOGC 50, 100 and 400 and its own forced GC,
//! the cache's size, and Go against Rust.

use super::*;

/// The Go read-state cache at GOGC 50, 100 and 400, the GC forced every 4 s (the runtime's
/// 2-minute forced cycle, brought forward): the article found that tuning GOGC did nothing.
pub fn gogc() -> Story {
    Story {
        workload: "read-state-cache",
        root: GOGC_ROOT,
        name: "story-gogc",
        about: "the Go read-state cache at GOGC 50, 100 and 400",
        repeats: 5,
        seconds: 20,
        table: |_, g| Ok(gogc_table(g)),
        chart: Some(|_, g| gogc_chart(g)),
        keeps_oncpu: false,
        untraced: true,
        lead: Some(gogc_lead),
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
        name: "story-forced-gc",
        about: "the Go read-state cache long enough for the runtime's own forced GC",
        repeats: 1,
        seconds: 260,
        table: |_, g| Ok(forced_gc_table(g)),
        chart: Some(|_, g| forced_gc_chart(g)),
        keeps_oncpu: false,
        untraced: true,
        lead: None,
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
        name: "story-cache-size",
        about: "both read-state cache builds at 2,000,000, 500,000 and 100,000 entries",
        repeats: 5,
        seconds: 20,
        table: |_, g| Ok(cache_size_table(g)),
        chart: Some(|_, g| cache_size_chart(g)),
        keeps_oncpu: false,
        untraced: true,
        lead: Some(cache_size_lead),
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
        name: "story-go-rust",
        about: "the read-state cache in Go against Rust, 2,000,000 entries",
        repeats: 5,
        seconds: 20,
        table: |_, g| Ok(go_rust_table(g)),
        chart: Some(|_, g| go_rust_chart(g)),
        keeps_oncpu: false,
        untraced: true,
        lead: Some(go_rust_lead),
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

/// A GOGC configuration's value, from its directory (`gogc-050` → `50`): a server flag, not
/// one of the driver's parameters.
fn gogc_of(g: &Group) -> &str {
    g.config
        .strip_prefix("gogc-")
        .map_or("?", |v| v.trim_start_matches('0'))
}

/// The GOGC table: per GOGC, the latency tail, the GC's cycles, pauses and assists, CPU per
/// request and the peak RSS, ranged over the runs, with P99 and CPU against GOGC 100's.
pub fn gogc_table(groups: &[Group]) -> String {
    let base = find(groups, GOGC_BASE, "go");
    gc_table(groups, "GOGC", |g| gogc_of(g).to_string(), base, "vs 100")
}

/// The GOGC every other is judged against: the runtime's default.
const GOGC_BASE: &str = "gogc-100";

/// The GOGC story's lead: P99, P99.9 and CPU per request at GOGC 50 and 400
/// against 100, and the collector's cycles at each.
pub fn gogc_lead(groups: &[Group]) -> String {
    let ms = |v: f64| format!("{:.2}", v / 1e3);
    let mut out = String::new();
    let Some(base) = find(groups, GOGC_BASE, "go") else {
        return out;
    };
    for (title, name, write) in [
        ("P99 ms", "latency.p99", &ms as &dyn Fn(f64) -> String),
        ("P99.9 ms", "latency.p99_9", &ms),
        ("CPU µs per request", "cpu.per_op", &|v: f64| {
            format!("{v:.1}")
        }),
    ] {
        let lines: Vec<String> = groups
            .iter()
            .filter(|g| g.config != GOGC_BASE)
            .map(|g| {
                format!(
                    "GOGC {} {} against {}, {}",
                    gogc_of(g),
                    g.ranged(name, write),
                    base.ranged(name, write),
                    g.against(base, name)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "- **GOGC 50 and 400 against 100, {title}:** {}.",
            lines.join("; ")
        );
    }
    let cycles: Vec<String> = groups
        .iter()
        .map(|g| {
            format!(
                "{} at GOGC {}",
                gc_ranged(g, |g| g.cycles as f64, 1.0, 0),
                gogc_of(g)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "- **GC cycles in a recorded run of 20 s with a GC forced every 4 s:** {}.",
        cycles.join(", ")
    );
    out
}

/// The forced-GC run's table: as the GOGC one, by configuration.
pub fn forced_gc_table(groups: &[Group]) -> String {
    gc_table(groups, "configuration", |g| g.config.clone(), None, "")
}

/// A GC story's table, its first column `first` with `label`'s value; with a `base` group,
/// P99 and CPU per request against its, in columns headed `against`.
fn gc_table(
    groups: &[Group],
    first: &str,
    label: impl Fn(&Group) -> String,
    base: Option<&Group>,
    against: &str,
) -> String {
    let mut head = vec![first, "runs", "P50 µs", "P99 ms"];
    if base.is_some() {
        head.push(against);
    }
    head.extend([
        "P99.9 ms",
        "max ms",
        "GC cycles",
        "STW pauses",
        "longest pause ms",
        "mark assists",
        "worst window P99 ms",
        "CPU µs/req",
    ]);
    if base.is_some() {
        head.push(against);
    }
    head.push("peak RSS MiB");
    let mut out = header(&head);
    let ms = |v: f64| format!("{:.2}", v / 1e3);
    for g in groups {
        let vs = |name: &str| match base {
            Some(b) if b.config == g.config => " – |".to_string(),
            Some(b) => format!(" {} |", g.against(b, name)),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |{} {} | {} | {} | {} |{} {} |",
            label(g),
            runs_text(g),
            g.ranged("latency.p50", |v| format!("{v:.0}")),
            g.ranged("latency.p99", ms),
            vs("latency.p99"),
            g.ranged("latency.p99_9", ms),
            g.ranged("latency.max", ms),
            gc_cells(g),
            g.ranged("cpu.per_op", |v| format!("{v:.1}")),
            vs("cpu.per_op"),
            g.ranged("memory.max_rss", |v| format!("{v:.0}")),
        );
    }
    out.push_str(&sources(
        groups,
        &["P50", "P99", "P99.9", "max", "CPU µs/req", "peak RSS"],
    ));
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
pub(super) fn hit_ratio(run: &Run) -> Option<f64> {
    let p = &run.workload.as_ref()?.parameters;
    let count = |name: &str| p.get(name)?.parse::<f64>().ok();
    let measured = count("server_requests")? - count("server_capacity")?;
    let hits = count("server_hits")?;
    (measured > 0.0).then(|| 100.0 * hits / measured)
}

/// A GC figure `f` of a group's recorded runs, divided by `scale`, with `digits` decimals:
/// the median [min–max]; "–" for a build without a collector.
fn gc_ranged(
    g: &Group,
    f: fn(&switchyard_model::GoGc) -> f64,
    scale: f64,
    digits: usize,
) -> String {
    let values = g.per_run(|run| run.gc.as_ref().map(f));
    ranged_values(&values, |v| format!("{:.digits$}", v / scale))
}

/// A GC table's cells from its recorded runs: cycles, stop-the-world pauses, the longest
/// pause (ms), mark assists and the worst window's P99 (ms), each ranged, joined as table
/// cells.
fn gc_cells(g: &Group) -> String {
    let worst = g.per_run(worst_window);
    [
        gc_ranged(g, |g| g.cycles as f64, 1.0, 0),
        gc_ranged(g, |g| g.pauses as f64, 1.0, 0),
        gc_ranged(g, |g| g.pause_max_ns as f64, 1e6, 2),
        gc_ranged(g, |g| g.mark_assists as f64, 1.0, 0),
        ranged_values(&worst, |v| format!("{:.2}", v / 1e6)),
    ]
    .join(" | ")
}

/// The largest P99 of a run's 100 ms windows, ns.
fn worst_window(run: &Run) -> Option<f64> {
    let w = run.workload.as_ref()?;
    w.windows.iter().map(|w| w.p99_ns).max().map(|v| v as f64)
}

/// The cache-size table: per capacity and build, the hit ratio, the GC's cycles and longest
/// pause, the latency tail (P99 against the same build's at 2,000,000 entries), CPU per
/// request and the peak RSS, ranged over the runs.
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
        "vs 2,000,000",
        "P99.99 ms",
        "max ms",
        "CPU µs/req",
        "peak RSS MiB",
    ];
    let mut out = header(&head);
    let ms = |v: f64| format!("{:.2}", v / 1e3);
    for g in groups {
        let hits = g.per_run(hit_ratio);
        let worst = g.per_run(worst_window);
        let vs = match find(groups, CACHE_SIZE_BASE, g.build) {
            Some(b) if b.config != g.config => g.against(b, "latency.p99"),
            _ => "–".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            grouped(capacity_of(g), 0),
            g.build,
            runs_text(g),
            ranged_values(&hits, |v| format!("{v:.1}")),
            gc_ranged(g, |g| g.cycles as f64, 1.0, 0),
            gc_ranged(g, |g| g.pause_max_ns as f64, 1e6, 2),
            ranged_values(&worst, |v| format!("{:.2}", v / 1e6)),
            g.ranged("latency.p99", ms),
            vs,
            g.ranged("latency.p99_99", ms),
            g.ranged("latency.max", ms),
            g.ranged("cpu.per_op", |v| format!("{v:.1}")),
            g.ranged("memory.max_rss", |v| format!("{v:.0}")),
        );
    }
    out.push_str(&sources(
        groups,
        &["P99", "P99.99", "max", "CPU µs/req", "peak RSS"],
    ));
    out
}

/// The capacity the smaller caches are judged against: the one Go against Rust uses.
const CACHE_SIZE_BASE: &str = "capacity-2000000";

/// The cache-size story's lead: per build, P99 at 500,000 and 100,000 entries against
/// 2,000,000, with the hit ratios; and Go against Rust at each size.
pub fn cache_size_lead(groups: &[Group]) -> String {
    let ms = |v: f64| format!("{:.2}", v / 1e3);
    let mut out = String::new();
    let smaller = [
        ("capacity-0500000", "500,000"),
        ("capacity-0100000", "100,000"),
    ];
    for build in ["go", "rust"] {
        let Some(base) = find(groups, CACHE_SIZE_BASE, build) else {
            continue;
        };
        let lines: Vec<String> = smaller
            .iter()
            .filter_map(|(config, title)| {
                let g = find(groups, config, build)?;
                Some(format!(
                    "{title} entries {} against {}, {}",
                    g.ranged("latency.p99", ms),
                    base.ranged("latency.p99", ms),
                    g.against(base, "latency.p99")
                ))
            })
            .collect();
        let _ = writeln!(
            out,
            "- **{build}, smaller caches against 2,000,000 entries, P99 ms:** {}.",
            lines.join("; ")
        );
    }
    let configs = [
        ("capacity-2000000", "2,000,000 entries"),
        ("capacity-0500000", "500,000"),
        ("capacity-0100000", "100,000"),
    ];
    for (title, name, write) in [
        ("P99 ms", "latency.p99", &ms as &dyn Fn(f64) -> String),
        ("P99.99 ms", "latency.p99_99", &ms),
    ] {
        let _ = writeln!(
            out,
            "- **rust against go, {title}:** {}.",
            each_against(groups, &configs, ("rust", "go"), name, write).join("; ")
        );
    }
    let hits: Vec<String> = configs
        .iter()
        .filter_map(|(config, title)| {
            let g = find(groups, config, "go")?;
            let v = g.per_run(hit_ratio);
            Some(format!(
                "{title} {}%",
                ranged_values(&v, |v| format!("{v:.1}"))
            ))
        })
        .collect();
    let _ = writeln!(out, "- **Hit ratio (go):** {}.", hits.join(", "));
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
        "vs go",
        "P99.9 ms",
        "P99.99 ms",
        "max ms",
        "GC cycles",
        "STW pauses",
        "longest pause ms",
        "mark assists",
        "worst window P99 ms",
        "CPU µs/req",
        "vs go",
        "switches/req",
        "syscalls/req",
        "off-CPU %",
        "peak RSS MiB",
        "vs go",
    ];
    let mut out = header(&head);
    let ms = |v: f64| format!("{:.2}", v / 1e3);
    for g in groups {
        let base = find(groups, &g.config, "go").filter(|b| b.build != g.build);
        let against = |name: &str| base.map_or_else(|| "–".into(), |b| g.against(b, name));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            g.build,
            runs_text(g),
            g.ranged("latency.p50", |v| format!("{v:.0}")),
            g.ranged("latency.p99", ms),
            against("latency.p99"),
            g.ranged("latency.p99_9", ms),
            g.ranged("latency.p99_99", ms),
            g.ranged("latency.max", ms),
            gc_cells(g),
            g.ranged("cpu.per_op", |v| format!("{v:.1}")),
            against("cpu.per_op"),
            g.ranged("switches.total.per_op", |v| format!("{v:.2}")),
            g.ranged("syscalls.total.per_op", |v| format!("{v:.2}")),
            g.ranged("offcpu.share", |v| format!("{v:.1}")),
            g.ranged("memory.max_rss", |v| format!("{v:.0}")),
            against("memory.max_rss"),
        );
    }
    out.push_str(&sources(groups, &["latency", "CPU µs/req", "peak RSS"]));
    out
}

/// The Go-against-Rust story's lead: Rust's latency, CPU and memory against Go's, each ranged
/// and judged, and Go's collector from its recorded runs.
pub fn go_rust_lead(groups: &[Group]) -> String {
    let config = [("capacity-2000000", "2,000,000 entries")];
    let ms = |v: f64| format!("{:.2}", v / 1e3);
    let line = |name: &str, write: &dyn Fn(f64) -> String| {
        each_against(groups, &config, ("rust", "go"), name, write).join("; ")
    };
    let mut out = String::new();
    for (title, name) in [
        ("rust against go, P99 ms", "latency.p99"),
        ("rust against go, P99.9 ms", "latency.p99_9"),
    ] {
        let _ = writeln!(out, "- **{title}:** {}.", line(name, &ms));
    }
    let _ = writeln!(
        out,
        "- **rust against go, CPU µs per request:** {}.",
        line("cpu.per_op", &|v| format!("{v:.1}"))
    );
    let _ = writeln!(
        out,
        "- **rust against go, peak RSS MiB:** {}.",
        line("memory.max_rss", &|v| format!("{v:.0}"))
    );
    if let Some(go) = find(groups, "capacity-2000000", "go") {
        let gc = |f: fn(&switchyard_model::GoGc) -> f64| go.per_run(|run| run.gc.as_ref().map(f));
        let _ = writeln!(
            out,
            "- **Go's collector, recorded:** {} cycles a run, its longest stop-the-world pause {} ms, {} mark assists.",
            ranged_values(&gc(|g| g.cycles as f64), |v| format!("{v:.0}")),
            ranged_values(&gc(|g| g.pause_max_ns as f64), |v| format!(
                "{:.2}",
                v / 1e6
            )),
            ranged_values(&gc(|g| g.mark_assists as f64), |v| grouped(v, 0)),
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
