//! The stories' charts: panels of points or lines on shared axes, drawn to SVG by plotters with
//! its text kept as text (no font files). A story computes its [`Panel`]s from its runs and
//! says how to lay them out in a [`Chart`]; this module does the drawing, the same way for
//! every story.

use plotters::prelude::*;

use crate::fail::Failure;

/// The colours series are told apart by, in order of [`Series::colour`].
const PALETTE: [RGBColor; 6] = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];

/// One set of points in a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Shown in the panel's legend; empty for none.
    pub label: String,
    /// Index into the palette: red, blue, green, magenta, cyan, black.
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
        }
    }

    /// The SVG of `panels`, laid out row by row in the grid.
    pub fn svg(&self, panels: &[Panel]) -> Result<String, Failure> {
        let all = || {
            panels
                .iter()
                .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().copied()))
        };
        let (x_lo, x_hi) = self
            .x_range
            .unwrap_or_else(|| (0.0, all().map(|p| p.0).fold(1.0, f64::max) * 1.1));
        let (y_lo, y_hi) = self
            .y_range
            .unwrap_or_else(|| (0.0, all().map(|p| p.1).fold(1.0, f64::max) * 1.1));
        let draw = |e: &dyn std::fmt::Display| Failure::new(format!("drawing the chart: {e}"));
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, self.size).into_drawing_area();
            root.fill(&WHITE).map_err(|e| draw(&e))?;
            let root = root
                .titled(&self.title, ("sans-serif", 16))
                .map_err(|e| draw(&e))?;
            for (panel, area) in panels.iter().zip(root.split_evenly(self.grid)) {
                let (y_lo, y_hi, y_desc) = match &panel.y_desc {
                    Some(desc) => {
                        let top = panel
                            .series
                            .iter()
                            .flat_map(|s| s.points.iter().map(|p| p.1))
                            .fold(1.0, f64::max);
                        (0.0, top * 1.1, desc.as_str())
                    }
                    None => (y_lo, y_hi, self.y_desc.as_str()),
                };
                let mut chart = ChartBuilder::on(&area)
                    .caption(&panel.caption, ("sans-serif", 14))
                    .margin(8)
                    .x_label_area_size(28)
                    .y_label_area_size(self.y_label_area)
                    .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
                    .map_err(|e| draw(&e))?;
                chart
                    .configure_mesh()
                    .x_desc(&self.x_desc)
                    .y_desc(y_desc)
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
                        chart.draw_series(LineSeries::new(
                            s.points.iter().copied(),
                            c.stroke_width(1),
                        ))
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
                    Legend::None => continue,
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
                    .map_err(|e| draw(&e))?;
            }
            root.present().map_err(|e| draw(&e))?;
        }
        Ok(svg)
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
}
