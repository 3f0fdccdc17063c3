//! The stories' charts: panels of points or lines on shared axes, drawn to SVG by plotters with
//! its text kept as text (no font files). A story computes its [`Panel`]s from its runs and
//! says how to lay them out in a [`Chart`]; this module does the drawing, the same way for
//! every story.

use plotters::{
    coord::{
        Shift,
        ranged1d::{AsRangedCoord, ValueFormatter},
    },
    prelude::*,
};

use crate::fail::Failure;

/// The colours series are told apart by, in order of [`Series::colour`]: Okabe and Ito's
/// eight, which readers with any common colour-vision deficiency still tell apart. Yellow,
/// faint on white, comes last.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),   // 0 blue
    RGBColor(213, 94, 0),    // 1 vermillion
    RGBColor(0, 158, 115),   // 2 bluish green
    RGBColor(230, 159, 0),   // 3 orange
    RGBColor(86, 180, 233),  // 4 sky blue
    RGBColor(204, 121, 167), // 5 reddish purple
    RGBColor(0, 0, 0),       // 6 black
    RGBColor(240, 228, 66),  // 7 yellow
];

/// The colour of a workload build in every chart of the project, so that a build keeps its
/// colour from one story and chart to the next, and no two builds of one workload share one:
/// the broker's mutex, spin and abs and the relay's mmsg, threads and lite are blue,
/// vermillion and bluish green; the cache's Go sky blue and Rust orange; the asset server's
/// Node reddish purple, Rust with gzip orange and with zstd blue. `None` for a name that is
/// no build.
pub fn build_colour(build: &str) -> Option<usize> {
    Some(match build {
        "mutex" | "mmsg" | "rust-zstd" => 0,
        "spin" | "threads" => 1,
        "abs" | "lite" => 2,
        "rust" | "rust-gzip" => 3,
        "go" => 4,
        "node-gzip" => 5,
        _ => return None,
    })
}

/// One set of points in a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Shown in the panel's legend; empty for none.
    pub label: String,
    /// Index into the palette: blue, vermillion, bluish green, orange, sky blue, reddish
    /// purple, black, yellow; a build's is [`build_colour`].
    pub colour: usize,
    pub points: Vec<(f64, f64)>,
    /// Joined by a line (in the given order) rather than drawn as dots.
    pub line: bool,
}

/// One panel: a caption, its series, and x positions marked by dashed vertical lines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Panel {
    pub caption: String,
    pub series: Vec<Series>,
    pub marks: Vec<f64>,
    /// Its own y axis, described so, from 0 to its largest y (10% over), for a panel whose
    /// quantity differs from the others'; `None`: the chart's shared one.
    pub y_desc: Option<String>,
}

/// Where a panel's legend sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Legend {
    None,
    MiddleRight,
    UpperLeft,
    UpperRight,
    LowerLeft,
    LowerRight,
}

/// The whole figure: a title, the axes every panel shares, and the grid of panels.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    /// Rows and columns of panels.
    pub grid: (usize, usize),
    /// Width and height in pixels.
    pub size: (u32, u32),
    /// The x axis; `None`: from 0 to the largest x, 10% over.
    pub x_range: Option<(f64, f64)>,
    /// The y axis; `None`: from 0 to the largest y, 10% over.
    pub y_range: Option<(f64, f64)>,
    pub legend: Legend,
    /// Left margin for the y labels, in pixels.
    pub y_label_area: u32,
    /// The x axis may go to a log scale as the y axes do (see [`Chart::svg`]); not for time.
    pub x_log: bool,
}

impl Chart {
    /// A chart with the usual sizes: 760 pixels wide, one row of `panels` 320 high.
    pub fn new(title: impl Into<String>, x_desc: &str, y_desc: &str) -> Self {
        Self {
            title: title.into(),
            x_desc: x_desc.into(),
            y_desc: y_desc.into(),
            grid: (1, 1),
            size: (760, 320),
            x_range: None,
            y_range: None,
            legend: Legend::MiddleRight,
            y_label_area: 44,
            x_log: false,
        }
    }

    /// The SVG of `panels`, laid out row by row in the grid. A y axis whose range is not
    /// given, and whose points all lie above 0 and span more than [`LOG_SPAN`]×, is drawn on
    /// a log scale (its description says so): on a linear one the small values flatten into
    /// a line against the large. So is the x axis, when [`Chart::x_log`] allows.
    pub fn svg(&self, panels: &[Panel]) -> Result<String, Failure> {
        let all = || {
            panels
                .iter()
                .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().copied()))
        };
        let x = match self.x_range {
            Some((lo, hi)) => Axis::linear(lo, hi),
            None if self.x_log => Axis::of(all().map(|p| p.0)),
            None => Axis::linear(0.0, all().map(|p| p.0).fold(1.0, f64::max) * 1.1),
        };
        // The shared y axis is the panels' that have no axis of their own.
        let shared = || {
            panels
                .iter()
                .filter(|p| p.y_desc.is_none())
                .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().copied()))
        };
        let y = match self.y_range {
            Some((lo, hi)) => Axis::linear(lo, hi),
            None => Axis::of(shared().map(|p| p.1)),
        };
        let draw = |e: &dyn std::fmt::Display| Failure::new(format!("drawing the chart: {e}"));
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, self.size).into_drawing_area();
            root.fill(&WHITE).map_err(|e| draw(&e))?;
            let root = root
                .titled(&self.title, ("sans-serif", 16))
                .map_err(|e| draw(&e))?;
            for (panel, area) in panels.iter().zip(root.split_evenly(self.grid)) {
                let (y, y_desc) = match &panel.y_desc {
                    Some(desc) => (
                        Axis::of(
                            panel
                                .series
                                .iter()
                                .flat_map(|s| s.points.iter().map(|p| p.1)),
                        ),
                        desc.as_str(),
                    ),
                    None => (y, self.y_desc.as_str()),
                };
                let x_desc = x.desc(&self.x_desc);
                let y_desc = y.desc(y_desc);
                let (xr, yr) = (x.lo..x.hi, y.lo..y.hi);
                let (xl, yl) = (x.log, y.log);
                match (xl, yl) {
                    (false, false) => {
                        self.panel(&area, panel, (xr, xl), (yr, yl), &x_desc, &y_desc)
                    }
                    (false, true) => self.panel(
                        &area,
                        panel,
                        (xr, xl),
                        (yr.log_scale(), yl),
                        &x_desc,
                        &y_desc,
                    ),
                    (true, false) => self.panel(
                        &area,
                        panel,
                        (xr.log_scale(), xl),
                        (yr, yl),
                        &x_desc,
                        &y_desc,
                    ),
                    (true, true) => self.panel(
                        &area,
                        panel,
                        (xr.log_scale(), xl),
                        (yr.log_scale(), yl),
                        &x_desc,
                        &y_desc,
                    ),
                }?;
            }
            root.present().map_err(|e| draw(&e))?;
        }
        Ok(svg)
    }

    /// One panel in `area`, on axes `x` and `y` (linear or log).
    #[allow(clippy::too_many_arguments)]
    fn panel<X, Y>(
        &self,
        area: &DrawingArea<SVGBackend<'_>, Shift>,
        panel: &Panel,
        (x, x_log): (X, bool),
        (y, y_log): (Y, bool),
        x_desc: &str,
        y_desc: &str,
    ) -> Result<(), Failure>
    where
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let draw = |e: &dyn std::fmt::Display| Failure::new(format!("drawing the chart: {e}"));
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.caption, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(self.y_label_area)
            .build_cartesian_2d(x, y)
            .map_err(|e| draw(&e))?;
        let (y_lo, y_hi) = {
            let r = chart.y_range();
            (r.start, r.end)
        };
        // A log axis labels 1, 2 and 5 of each power of ten: its other ticks crowd together
        // at the top of each decade.
        let x_label = |v: &f64| match x_log {
            true => log_tick(*v),
            false => <X::CoordDescType as ValueFormatter<f64>>::format(v),
        };
        let y_label = |v: &f64| match y_log {
            true => log_tick(*v),
            false => <Y::CoordDescType as ValueFormatter<f64>>::format(v),
        };
        // Enough ticks on a log axis for plotters to draw each decade's 2 to 9.
        let ticks = |log: bool| if log { 40 } else { 10 };
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_labels(ticks(x_log))
            .y_labels(ticks(y_log))
            // Between a log axis's own ticks, finer lines crowd into dark bands.
            .max_light_lines(if x_log || y_log { 0 } else { 10 })
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .draw()
            .map_err(|e| draw(&e))?;
        for &x in &panel.marks {
            chart
                .draw_series(DashedLineSeries::new(
                    [(x, y_lo), (x, y_hi)],
                    4,
                    4,
                    BLACK.mix(0.4).stroke_width(1),
                ))
                .map_err(|e| draw(&e))?;
        }
        for s in &panel.series {
            let c = PALETTE[s.colour % PALETTE.len()];
            let drawn = if s.line {
                chart.draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(1)))
            } else {
                chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled())))
            }
            .map_err(|e| draw(&e))?;
            if !s.label.is_empty() {
                drawn
                    .label(s.label.as_str())
                    .legend(move |(x, y)| Circle::new((x, y), 4, c.filled()));
            }
        }
        let position = match self.legend {
            Legend::None => return Ok(()),
            Legend::MiddleRight => SeriesLabelPosition::MiddleRight,
            Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
            Legend::UpperRight => SeriesLabelPosition::UpperRight,
            Legend::LowerLeft => SeriesLabelPosition::LowerLeft,
            Legend::LowerRight => SeriesLabelPosition::LowerRight,
        };
        chart
            .configure_series_labels()
            .position(position)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(|e| draw(&e))
    }
}

/// A log axis's tick label: only 1, 2 and 5 times a power of ten, the others left blank.
fn log_tick(v: f64) -> String {
    let decade = 10f64.powf(v.log10().floor());
    let lead = v / decade;
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (lead - m).abs() < 1e-6 * m)
    {
        let digits = if v < 1.0 {
            (-v.log10().floor()) as usize
        } else {
            0
        };
        format!("{v:.digits$}")
    } else {
        String::new()
    }
}

/// An axis wider than this many times its smallest point is drawn on a log scale.
pub const LOG_SPAN: f64 = 10.0;

/// One axis's range and scale.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn linear(lo: f64, hi: f64) -> Axis {
        Axis { lo, hi, log: false }
    }

    /// The axis for `values`: from 0 to the largest, 10% over; or on a log scale, from the
    /// power of ten at or below the smallest (where the ticks start) to a quarter over the
    /// largest, when every value is above 0 and the largest is over [`LOG_SPAN`] times the
    /// smallest.
    fn of(values: impl Iterator<Item = f64>) -> Axis {
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if lo > 0.0 && hi > lo * LOG_SPAN {
            return Axis {
                // Just under the power of ten, so that its tick is drawn whatever the rounding.
                lo: 10f64.powf(lo.log10().floor()) * 0.999,
                hi: hi * 1.25,
                log: true,
            };
        }
        Axis::linear(0.0, hi.max(1.0) * 1.1)
    }

    /// The axis's description, "(log scale)" after it when it is one.
    fn desc(&self, desc: &str) -> String {
        if self.log {
            format!("{desc} (log scale)")
        } else {
            desc.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_each_panel_with_its_caption_legend_and_marks() {
        let mut chart = Chart::new("a title", "x things", "y things");
        chart.grid = (1, 2);
        let panel = |caption: &str| Panel {
            caption: caption.into(),
            series: vec![
                Series {
                    label: "dots".into(),
                    colour: 0,
                    points: vec![(1.0, 2.0), (3.0, 4.0)],
                    line: false,
                },
                Series {
                    label: String::new(),
                    colour: 1,
                    points: vec![(0.0, 0.0), (4.0, 1.0)],
                    line: true,
                },
            ],
            marks: vec![2.0],
            y_desc: None,
        };
        let own = Panel {
            y_desc: Some("other things".into()),
            ..panel("right")
        };
        let svg = chart.svg(&[panel("left"), own]).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>')?.1.split_once("</text>"))
            .map(|(text, _)| text.trim())
            .collect();
        for text in [
            "a title",
            "left",
            "right",
            "x things",
            "y things",
            "other things",
        ] {
            assert!(texts.contains(&text), "no {text:?} in {texts:?}");
        }
        assert_eq!(
            texts.iter().filter(|t| **t == "dots").count(),
            2,
            "one legend entry per panel, none for the unlabelled line"
        );
        assert_eq!(
            svg.matches("<circle").count(),
            2 * (2 + 1),
            "two dots and a legend mark per panel"
        );
    }

    #[test]
    fn an_axis_spanning_over_ten_times_is_drawn_on_a_log_scale() {
        // The sweep's latencies: 160 to 5,500 µs.
        let a = Axis::of([160.0, 230.0, 5_500.0].into_iter());
        assert_eq!(
            a,
            Axis {
                lo: 99.9,
                hi: 6_875.0,
                log: true
            }
        );
        assert_eq!(a.desc("P99 µs"), "P99 µs (log scale)");
        // Ten times exactly, or a zero among them: linear from 0.
        assert_eq!(
            Axis::of([10.0, 100.0].into_iter()),
            Axis::linear(0.0, 110.00000000000001)
        );
        assert!(!Axis::of([0.0, 5_000.0].into_iter()).log);
        assert_eq!(Axis::of(std::iter::empty()), Axis::linear(0.0, 1.1));
        let mut chart = Chart::new("t", "x", "latency");
        chart.legend = Legend::None;
        let panel = Panel {
            caption: "p".into(),
            series: vec![Series {
                label: String::new(),
                colour: 0,
                points: vec![(1.0, 160.0), (2.0, 5_500.0)],
                line: false,
            }],
            ..Default::default()
        };
        let svg = chart.svg(&[panel]).unwrap();
        assert!(svg.contains("latency (log scale)"), "{svg}");
        assert!(!svg.contains("x (log scale)"), "{svg}");
    }

    #[test]
    fn each_build_keeps_one_colour_and_no_two_of_a_workload_share_one() {
        for builds in [
            ["mutex", "spin", "abs"].as_slice(),
            &["threads", "mmsg", "lite"],
            &["go", "rust"],
            &["node-gzip", "rust-gzip", "rust-zstd"],
        ] {
            let colours: std::collections::BTreeSet<usize> =
                builds.iter().map(|b| build_colour(b).unwrap()).collect();
            assert_eq!(colours.len(), builds.len(), "{builds:?}");
            // Never yellow, faint on white.
            assert!(!colours.contains(&7), "{builds:?}");
        }
        assert_eq!(build_colour("k=10"), None);
    }
}
