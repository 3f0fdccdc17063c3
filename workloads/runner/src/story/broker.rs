//! The spin-lock broker's stories: its lock builds at two contention levels and two message
//! sizes, the fixed-k sweep, and abs falling back to its mutex and returning.

use super::*;

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
        name: "compare-broker",
        about: "the spin-lock broker's lock builds at low and high contention, 2 B and 1 KiB messages",
        repeats: 5,
        seconds: 3,
        table: |_, g| Ok(broker_table(g)),
        chart: Some(|_, g| broker_chart(g)),
        keeps_oncpu: false,
        untraced: true,
        lead: Some(broker_lead),
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
        name: "story-broker-sweep",
        about: "the broker's fixed-k lock at k = 10 to 10000 next to mutex and abs",
        repeats: 5,
        seconds: 4,
        table: |_, g| Ok(sweep_table(g)),
        chart: Some(|_, g| sweep_chart(g)),
        keeps_oncpu: false,
        untraced: true,
        lead: None,
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
        name: "story-broker-fallback",
        about: "abs falling back to its mutex under a synchronous flush, and returning",
        repeats: 1,
        seconds: 6,
        table: |root, g| Ok(fallback_table(&fallback_runs(root, g)?)),
        chart: Some(|root, g| fallback_chart(&fallback_runs(root, g)?)),
        keeps_oncpu: false,
        untraced: false,
        lead: None,
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

/// The broker table: per configuration and build, medians and each run's range of
/// throughput, CPU, switches, futex waits and lock-acquire time per message, and the P99.99
/// latency; beside throughput, CPU and P99.99, the change from the mutex in that
/// configuration with compare's verdict. Throughput, CPU and latency come from the untraced
/// runs where the story has them (a line under the table says which).
pub fn broker_table(groups: &[Group]) -> String {
    let head = [
        "contention",
        "producers",
        "size B",
        "build",
        "runs",
        "msgs/s",
        "vs mutex",
        "CPU µs/msg",
        "vs mutex",
        "switches/msg",
        "futex waits/msg",
        "acquire µs/msg",
        "P99.99 µs",
        "vs mutex",
    ];
    let mut out = header(&head);
    for g in groups {
        let contention = g.config.split('-').next().unwrap_or_default();
        let base = groups
            .iter()
            .find(|b| b.config == g.config && b.build == "mutex");
        let against = |name: &str| match base {
            Some(b) if b.build != g.build => g.against(b, name),
            _ => "–".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            contention,
            g.parameter("producers").unwrap_or("?"),
            g.parameter("size").unwrap_or("?"),
            g.build,
            runs_text(g),
            g.ranged("throughput", |v| grouped(v, 0)),
            against("throughput"),
            g.ranged("cpu.per_op", |v| format!("{v:.2}")),
            against("cpu.per_op"),
            g.ranged("switches.total.per_op", |v| format!("{v:.3}")),
            g.ranged("futex.waits.per_op", |v| format!("{v:.4}")),
            g.ranged("span.acquire.time.per_op", |v| format!("{v:.3}")),
            g.ranged("latency.p99_99", |v| grouped(v, 0)),
            against("latency.p99_99"),
        );
    }
    out.push_str(&sources(groups, &["msgs/s", "CPU µs/msg", "P99.99"]));
    out
}

/// The broker story's configurations as its lead names them, in its order.
const BROKER_CONFIGS: [(&str, &str); 4] = [
    ("high-1024B", "8 producers, 1 KiB"),
    ("high-2B", "8 producers, 2 B"),
    ("low-1024B", "2 producers, 1 KiB"),
    ("low-2B", "2 producers, 2 B"),
];

/// The broker story's lead: what a reader takes away, a line each, every figure a median with
/// its runs' range and every change with compare's verdict. Computed from the runs, so
/// `just check-stories` holds the README to it.
pub fn broker_lead(groups: &[Group]) -> String {
    let each = |build: &str, name: &str, write: &dyn Fn(f64) -> String| {
        each_against(groups, &BROKER_CONFIGS, (build, "mutex"), name, write)
    };
    let rate = |v: f64| grouped(v, 0);
    let us = |v: f64| format!("{v:.2}");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "- **abs against the mutex, msgs/s:** {}.",
        each("abs", "throughput", &rate).join("; ")
    );
    let _ = writeln!(
        out,
        "- **abs against the mutex, CPU µs per message:** {}.",
        each("abs", "cpu.per_op", &us).join("; ")
    );
    let spin: Vec<String> = each("spin", "latency.p99_99", &rate)
        .into_iter()
        .take(2)
        .collect();
    let _ = writeln!(
        out,
        "- **spin against the mutex under high contention, P99.99 µs:** {}.",
        spin.join("; ")
    );
    // Who waits on a futex, run by run, over every configuration.
    let runs = |build: &str, name: &str| -> Vec<f64> {
        groups
            .iter()
            .filter(|g| g.build == build)
            .flat_map(|g| g.recorded(name))
            .collect()
    };
    let waited = |build: &str| {
        let counts = runs(build, "futex.waits");
        let most = counts.iter().copied().fold(0.0, f64::max);
        (
            counts.iter().filter(|&&c| c > 0.0).count(),
            counts.len(),
            grouped(most, 0),
        )
    };
    let mutex = ranged_values(&runs("mutex", "futex.waits.per_op"), |v| format!("{v:.4}"));
    let (mw, mn, _) = waited("mutex");
    let (aw, an, amost) = waited("abs");
    let (sw, sn, smost) = waited("spin");
    let ops = ranged_values(&runs("abs", "operations"), |v| grouped(v, 0));
    let _ = writeln!(
        out,
        "- **Futex waits, recorded:** the mutex waited in {mw} of its {mn} runs, {mutex} a \
         message; abs in {aw} of {an}, at most {amost} waits in a run of {ops} messages; spin \
         in {sw} of {sn}, at most {smost}."
    );
    // What the recorder did to the comparison: abs against the mutex, recorded and untraced.
    let bent: Vec<String> = BROKER_CONFIGS
        .iter()
        .filter_map(|(config, title)| {
            let (g, base) = (find(groups, config, "abs")?, find(groups, config, "mutex")?);
            if g.untraced.is_empty() || base.untraced.is_empty() {
                return None;
            }
            let change = |a: &[f64], b: &[f64]| {
                let (a, b) = (
                    switchyard_compare::spread(a)?.median,
                    switchyard_compare::spread(b)?.median,
                );
                (a != 0.0).then(|| switchyard_model::units::percent_change((b - a) / a * 100.0))
            };
            Some(format!(
                "{title} {} recorded, {} untraced",
                change(&base.recorded("throughput"), &g.recorded("throughput"))?,
                change(&base.values("throughput"), &g.values("throughput"))?
            ))
        })
        .collect();
    if !bent.is_empty() {
        let _ = writeln!(
            out,
            "- **abs's change in msgs/s from the mutex's, recorded and untraced:** {}. The lines \
             above are from the untraced runs.",
            bent.join("; ")
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
        "vs mutex",
        "CPU µs/msg",
        "vs mutex",
        "switches/msg",
        "futex waits/msg",
        "acquire µs/msg",
        "P99 µs",
        "P99.99 µs",
        "vs mutex",
    ];
    let mut out = header(&head);
    for g in groups {
        let k = match (g.build, sweep_k(g)) {
            (_, Some(k)) => grouped(f64::from(k), 0),
            ("abs", None) => "adaptive".into(),
            _ => "–".into(),
        };
        let base =
            find(groups, "sync", "mutex").filter(|b| b.build != g.build || b.config != g.config);
        let against = |name: &str| base.map_or_else(|| "–".into(), |b| g.against(b, name));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            g.build,
            k,
            runs_text(g),
            g.ranged("throughput", |v| grouped(v, 0)),
            against("throughput"),
            g.ranged("cpu.per_op", |v| format!("{v:.1}")),
            against("cpu.per_op"),
            g.ranged("switches.total.per_op", |v| format!("{v:.3}")),
            g.ranged("futex.waits.per_op", |v| format!("{v:.4}")),
            g.ranged("span.acquire.time.per_op", |v| format!("{v:.1}")),
            g.ranged("latency.p99", |v| grouped(v, 0)),
            g.ranged("latency.p99_99", |v| grouped(v, 0)),
            against("latency.p99_99"),
        );
    }
    out.push_str(&sources(groups, &["msgs/s", "CPU µs/msg", "P99", "P99.99"]));
    out
}

/// The sweep chart, SVG, drawn as the article draws it: CPU per message against the send
/// rate, and P99.99 against throughput; one point per run, a colour per build and k.
pub fn sweep_chart(groups: &[Group]) -> Result<String, Failure> {
    let untraced = groups.iter().any(|g| !g.untraced.is_empty());
    let panel = |caption: &str, y_desc: &str, name: &'static str, scale: f64| Panel {
        caption: caption.into(),
        series: groups
            .iter()
            .enumerate()
            .map(|(i, g)| Series {
                label: sweep_label(g),
                // The builds in their own colours; each k in the palette's others.
                colour: build_colour(&sweep_label(g)).unwrap_or(3 + i % 4),
                points: g
                    .points("throughput", name)
                    .into_iter()
                    .map(|(rate, y)| (rate / 1e3, y / scale))
                    .collect(),
                line: false,
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
    let title = if untraced {
        "spin-lock broker, synchronous flush: fixed k against mutex and abs, one point per untraced run"
    } else {
        "spin-lock broker, synchronous flush: fixed k against mutex and abs, one point per run"
    };
    let mut chart = Chart::new(title, "thousand msgs/s", "");
    chart.grid = (1, 2);
    chart.size = (860, 360);
    chart.legend = Legend::LowerLeft;
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
    /// Mutex mode returns to spinning under this share of the rate at the switch.
    pub return_ratio: f64,
}

/// abs's `return_ratio` by default: what a summary written before it carried the ratio ran
/// with.
const DEFAULT_RETURN_RATIO: f64 = 0.8;

/// The return ratio in a broker summary line, or the default for a summary without one.
fn return_ratio(summary: &str) -> f64 {
    serde_json::from_str::<serde_json::Value>(summary)
        .ok()
        .and_then(|v| v["lock_stats"]["abs"]["return_ratio"].as_f64())
        .unwrap_or(DEFAULT_RETURN_RATIO)
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
                return_ratio: return_ratio(summary),
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
/// with each of the lock's mode switches marked, and, while the lock is in mutex mode, the
/// rate under which it returns to spinning.
pub fn fallback_chart(runs: &[LockedRun]) -> Result<String, Failure> {
    let panels: Vec<Panel> = runs
        .iter()
        .filter_map(|r| {
            let w = r.run.workload.as_ref()?;
            let offset = w.start_offset_ns.unwrap_or(0) as f64 / 1e9;
            let points: Vec<(f64, f64)> = w
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
            let end = points.last().map_or(0.0, |p| p.0);
            let mut series = vec![Series {
                label: String::new(),
                colour: build_colour(&w.build).unwrap_or(6),
                points,
                line: true,
            }];
            series.extend(return_thresholds(&r.steps, r.return_ratio, end));
            Some(Panel {
                caption: r.name.clone(),
                series,
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
        "abs, sync flush, 8 producers then 1: msgs/s per window; dashed: a mode switch; black: the return threshold",
        "s since the recording began",
        "thousand msgs/s",
    );
    chart.grid = (panels.len().max(1), 1);
    chart.size = (760, 60 + 220 * panels.len() as u32);
    chart.legend = Legend::None;
    chart.svg(&panels)
}

/// A black level line for each stay in mutex mode, from its switch to the switch back (or
/// `end`): `ratio` of the rate at the switch, in thousand msgs/s.
fn return_thresholds(steps: &[LockStep], ratio: f64, end: f64) -> Vec<Series> {
    let mut out = Vec::new();
    for (i, to_mutex) in steps.iter().enumerate() {
        if to_mutex.step != "to_mutex" {
            continue;
        }
        let until = steps[i + 1..]
            .iter()
            .find(|s| s.step == "to_spin")
            .map_or(end, |s| s.at_s);
        let level = ratio * to_mutex.rate_at_switch / 1e3;
        out.push(Series {
            label: String::new(),
            colour: 6,
            points: vec![(to_mutex.at_s, level), (until, level)],
            line: true,
        });
    }
    out
}

/// The broker chart, SVG: CPU per message against throughput, one point per run, a panel per
/// configuration (contention and message size), the builds told apart by colour.
pub fn broker_chart(groups: &[Group]) -> Result<String, Failure> {
    let mut configs: Vec<&str> = groups.iter().map(|g| g.config.as_str()).collect();
    configs.dedup();
    let colour = |build: &str| build_colour(build).unwrap_or(6);
    // The untraced runs where the story has them: the figures the recorder's probes bend.
    let untraced = groups.iter().any(|g| !g.untraced.is_empty());
    let series = |g: &Group| Series {
        label: g.build.into(),
        colour: colour(g.build),
        points: g
            .points("throughput", "cpu.per_op")
            .into_iter()
            .map(|(rate, cpu)| (rate / 1e3, cpu))
            .collect(),
        line: false,
    };
    let panels: Vec<Panel> = configs
        .iter()
        .map(|config| Panel {
            caption: config.to_string(),
            series: groups
                .iter()
                .filter(|g| g.config == *config)
                .map(series)
                .collect(),
            marks: Vec::new(),
            y_desc: None,
        })
        .collect();
    let title = if untraced {
        "spin-lock broker: CPU per message against throughput, one point per untraced run"
    } else {
        "spin-lock broker: CPU per message against throughput, one point per run"
    };
    let mut chart = Chart::new(title, "thousand msgs/s", "CPU µs/msg");
    chart.grid = (2, 2);
    chart.size = (760, 560);
    chart.svg(&panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stay_in_mutex_mode_draws_its_return_threshold() {
        let summary = r#"{"lock_stats":{"abs":{"return_ratio":0.5,"steps":[
            {"at_ns":1500000000,"step":"to_mutex","k":10000,"rate":157.0,"rate_at_switch":157.0},
            {"at_ns":4000000000,"step":"to_spin","k":1000,"rate":19.0,"rate_at_switch":157.0},
            {"at_ns":5000000000,"step":"to_mutex","k":10000,"rate":300.0,"rate_at_switch":300.0}]}}}"#;
        let steps = lock_steps(summary, 1_000_000_000).unwrap();
        let lines = return_thresholds(&steps, return_ratio(summary), 6.0);
        let points: Vec<_> = lines.iter().map(|s| s.points.clone()).collect();
        assert_eq!(
            points,
            [
                vec![(0.5, 0.0785), (3.0, 0.0785)],
                vec![(4.0, 0.15), (6.0, 0.15)]
            ]
        );
        // A summary from before it carried the ratio ran with the default.
        assert_eq!(return_ratio(r#"{"lock_stats":{"abs":{}}}"#), 0.8);
    }
}
