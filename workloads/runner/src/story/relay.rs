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
        repeats: 2,
        seconds: 3,
        table: |_, g| Ok(relay_table(g)),
        chart: Some(|_, g| relay_chart(g)),
        keeps_oncpu: false,
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
        "voice relay: switches, CPU and syscalls per packet against speakers per room, one point per run",
        "speakers per room",
        RELAY_CHART_ROWS[0].1,
    );
    chart.grid = (RELAY_CHART_ROWS.len(), rooms.len().max(1));
    chart.size = (760, 760);
    chart.x_range = Some((0.0, 10.0));
    chart.legend = Legend::LowerLeft;
    chart.svg(&panels)
}

/// One series a build: `figure` in each of its runs at `rooms` rooms, against the run's
/// speakers per room.
fn relay_series(groups: &[Group], rooms: &str, figure: &str) -> Vec<Series> {
    let point = |run: &Run, figures: &BTreeMap<String, Metric>| -> Option<(f64, f64)> {
        let speakers: f64 = run
            .workload
            .as_ref()?
            .parameters
            .get("speakers_per_room")?
            .parse()
            .ok()?;
        Some((speakers, metrics::lookup(run, figures, figure)?.value))
    };
    RELAY_BUILDS
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
                .filter(|g| g.build == *build && g.parameter("rooms") == Some(rooms))
            {
                s.points.extend(dots(g, build, colour, point).points);
            }
            s
        })
        .collect()
}
