//! The mmsg relay's story: per-packet threads against batched sends, at two room counts and
//! two room sizes.

use super::*;

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
        name: "compare-relay",
        about: "the mmsg relay's threads, mmsg and lite builds at two room counts and sizes",
        repeats: 5,
        seconds: 3,
        table: |_, g| Ok(relay_table(g)),
        chart: Some(|_, g| relay_chart(g)),
        keeps_oncpu: false,
        untraced: true,
        lead: Some(relay_lead),
        configs,
        builds: RELAY_BUILDS,
        comparisons: &[("threads", "mmsg"), ("mmsg", "lite")],
    }
}

/// The relay's builds, in the order of the table and of the chart's colours.
const RELAY_BUILDS: &[&str] = &["threads", "mmsg", "lite"];

/// The socket syscalls of the relay's designs.
const SOCKET: [&str; 6] = [
    "recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg",
];

/// The relay table: per configuration and build, medians [and the runs' ranges] of
/// packets/s, datagrams the speakers received per packet (S, an ack and S − 1 forwards,
/// unless the relay bundles them), syscalls (all, and socket ones), switches and CPU per
/// packet, P50 and P99 latency, and the forwards lost over all runs; CPU and P99 against the
/// threads build with compare's verdict. A packet is a voice frame a speaker sent. Packets/s,
/// CPU and latency come from the untraced runs where the story has them.
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
        "vs threads",
        "P50 µs",
        "P99 µs",
        "vs threads",
        // Not a median: forwards lost in any run are worth seeing.
        "lost (sum of runs)",
    ];
    let mut out = header(&head);
    for g in groups {
        // Counted per packet as the other per-operation figures are: the sum of the counts
        // over the operations (a syscall the run never made counts 0).
        let socket: Vec<f64> = g
            .runs
            .iter()
            .filter_map(|(run, figures)| {
                let ops = metrics::lookup(run, figures, "operations")?.value;
                let count: f64 = SOCKET
                    .iter()
                    .filter_map(|s| metrics::lookup(run, figures, &format!("syscalls.{s}")))
                    .map(|m| m.value)
                    .sum();
                (ops > 0.0).then(|| count / ops)
            })
            .collect();
        // Runs from before the driver counted datagrams have none: "–".
        let datagrams = g.per_run(|run| {
            let sent = number(run, "packets_sent")?;
            (sent > 0.0).then_some(number(run, "datagrams_received")? / sent)
        });
        let lost: u64 = g
            .runs
            .iter()
            .filter_map(|(r, _)| r.workload.as_ref())
            .filter_map(|w| w.parameters.get("forwards_lost"))
            .filter_map(|v| v.parse::<u64>().ok())
            .sum();
        let base = find(groups, &g.config, "threads").filter(|b| b.build != g.build);
        let against = |name: &str| base.map_or_else(|| "–".into(), |b| g.against(b, name));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            g.parameter("rooms").unwrap_or("None"),
            g.parameter("speakers_per_room").unwrap_or("None"),
            g.build,
            runs_text(g),
            g.ranged("throughput", |v| grouped(v, 0)),
            ranged_values(&datagrams, |v| format!("{v:.2}")),
            g.ranged("syscalls.total.per_op", |v| format!("{v:.2}")),
            ranged_values(&socket, |v| format!("{v:.3}")),
            g.ranged("switches.total.per_op", |v| format!("{v:.3}")),
            g.ranged("cpu.per_op", |v| format!("{v:.1}")),
            against("cpu.per_op"),
            g.ranged("latency.p50", |v| grouped(v, 0)),
            g.ranged("latency.p99", |v| grouped(v, 0)),
            against("latency.p99"),
            lost,
        );
    }
    out.push_str(&sources(groups, &["packets/s", "CPU µs/pkt", "P50", "P99"]));
    out
}

/// The relay story's configurations as its lead names them, in its order.
const RELAY_CONFIGS: [(&str, &str); 4] = [
    ("10r-4s", "10 rooms × 4"),
    ("10r-9s", "10 × 9"),
    ("20r-4s", "20 × 4"),
    ("20r-9s", "20 × 9"),
];

/// The relay story's lead: CPU per packet of mmsg and of lite against threads, their P99
/// against threads, and the syscalls per packet behind them, each ranged and judged.
pub fn relay_lead(groups: &[Group]) -> String {
    let us = |v: f64| format!("{v:.1}");
    let whole = |v: f64| grouped(v, 0);
    let calls = |v: f64| format!("{v:.2}");
    let lines = [
        (
            "mmsg against threads, CPU µs per packet",
            each_against(
                groups,
                &RELAY_CONFIGS,
                ("mmsg", "threads"),
                "cpu.per_op",
                &us,
            ),
        ),
        (
            "lite against threads, CPU µs per packet",
            each_against(
                groups,
                &RELAY_CONFIGS,
                ("lite", "threads"),
                "cpu.per_op",
                &us,
            ),
        ),
        (
            "mmsg against threads, P99 µs",
            each_against(
                groups,
                &RELAY_CONFIGS,
                ("mmsg", "threads"),
                "latency.p99",
                &whole,
            ),
        ),
        (
            "lite against threads, P99 µs",
            each_against(
                groups,
                &RELAY_CONFIGS,
                ("lite", "threads"),
                "latency.p99",
                &whole,
            ),
        ),
        (
            "Syscalls per packet, recorded, mmsg against threads",
            each_against(
                groups,
                &RELAY_CONFIGS,
                ("mmsg", "threads"),
                "syscalls.total.per_op",
                &calls,
            ),
        ),
    ];
    let mut out = String::new();
    for (title, items) in lines {
        let _ = writeln!(out, "- **{title}:** {}.", items.join("; "));
    }
    out
}

/// The figures the relay chart draws, a row of panels each: (figure, its row's axis).
const RELAY_CHART_ROWS: [(&str, &str); 3] = [
    ("switches.total.per_op", "switches/packet"),
    ("cpu.per_op", "CPU µs/packet"),
    ("syscalls.total.per_op", "syscalls/packet"),
];

/// The relay chart, SVG: context switches, CPU time and syscalls per packet against speakers
/// per room, one point per run, a row per figure and a column per room count, the builds told
/// apart by colour ([`build_colour`]).
pub fn relay_chart(groups: &[Group]) -> Result<String, Failure> {
    let mut rooms: Vec<&str> = groups.iter().filter_map(|g| g.parameter("rooms")).collect();
    rooms.sort_by_key(|r| r.parse::<u32>().unwrap_or(0));
    rooms.dedup();
    let panels: Vec<Panel> = RELAY_CHART_ROWS
        .iter()
        .enumerate()
        .flat_map(|(row, (figure, y_desc))| {
            rooms.iter().map(move |r| Panel {
                caption: format!("{r} rooms: {y_desc}"),
                series: relay_series(groups, r, figure),
                marks: Vec::new(),
                // The first row is drawn on the chart's own axis.
                y_desc: (row > 0).then(|| y_desc.to_string()),
            })
        })
        .collect();
    let mut chart = Chart::new(
        if groups.iter().any(|g| !g.untraced.is_empty()) {
            "voice relay: switches, CPU (untraced) and syscalls per packet against speakers per room, one point per run"
        } else {
            "voice relay: switches, CPU and syscalls per packet against speakers per room, one point per run"
        },
        "speakers per room",
        RELAY_CHART_ROWS[0].1,
    );
    chart.grid = (RELAY_CHART_ROWS.len(), rooms.len().max(1));
    chart.size = (760, 760);
    chart.x_range = Some((0.0, 10.0));
    chart.legend = Legend::LowerLeft;
    chart.svg(&panels)
}

/// One series a build: `figure` in each of its runs at `rooms` rooms (the untraced runs for
/// a figure they give, [`Group::values`]), against the configuration's speakers per room.
fn relay_series(groups: &[Group], rooms: &str, figure: &str) -> Vec<Series> {
    RELAY_BUILDS
        .iter()
        .map(|build| {
            let mut s = Series {
                label: build.to_string(),
                colour: build_colour(build).unwrap_or(6),
                points: Vec::new(),
                line: false,
            };
            for g in groups
                .iter()
                .filter(|g| g.build == *build && g.parameter("rooms") == Some(rooms))
            {
                let Some(speakers) = g
                    .parameter("speakers_per_room")
                    .and_then(|v| v.parse::<f64>().ok())
                else {
                    continue;
                };
                s.points
                    .extend(g.values(figure).into_iter().map(|v| (speakers, v)));
            }
            s
        })
        .collect()
}
