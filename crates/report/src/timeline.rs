//! The request-latency timeline: the driver's per-window P99 and max latency over the
//! recording's time, with Go GC cycles and stop-the-world pauses laid over it.

use std::fmt::Write as _;

use switchyard_model::{GoGc, Workload};

use crate::{escape::Esc, sentences::ns};

const W: f64 = 1100.0;
const H: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 40.0;

/// The timeline as an inline SVG, or `None` without a window series.
pub fn timeline(w: &Workload, gc: Option<&GoGc>) -> Option<String> {
    if w.windows.is_empty() {
        return None;
    }
    let offset = w.start_offset_ns.unwrap_or(0);
    let last = w.windows.last().map_or(0, |x| x.start_ms) * 1_000_000 + offset;
    let end_ns = gc
        .and_then(|g| g.timeline.last().map(|m| m.at_ns + m.duration_ns))
        .unwrap_or(0)
        .max(last)
        .max(1);
    let ymax = w.windows.iter().map(|x| x.max_ns).max().unwrap_or(1).max(1) as f64;
    let x = |t_ns: u64| LEFT + (t_ns as f64 / end_ns as f64) * (W - LEFT - RIGHT);
    let y = |v: u64| TOP + (1.0 - v as f64 / ymax) * (H - TOP - BOTTOM);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">",
        Esc("request latency per window, with GC")
    );
    // Axes: y at 0, half and max; x in seconds.
    for frac in [0.0, 0.5, 1.0] {
        let v = (ymax * frac) as u64;
        let yy = y(v);
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"11\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            Esc(&ns(v))
        );
    }
    let secs = end_ns as f64 / 1e9;
    let step = if secs > 60.0 {
        10.0
    } else if secs > 10.0 {
        5.0
    } else {
        1.0
    };
    let mut t = 0.0;
    while t <= secs {
        let xx = x((t * 1e9) as u64);
        let _ = writeln!(
            out,
            "<text x=\"{xx:.1}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\">{t:.0} s</text>",
            H - BOTTOM + 16.0
        );
        t += step;
    }
    // GC: pauses as shaded spans, cycles as lines.
    if let Some(g) = gc {
        for m in &g.timeline {
            let x0 = x(m.at_ns);
            if m.kind == "pause" {
                let wdt = (x(m.at_ns + m.duration_ns) - x0).max(1.5);
                let _ = writeln!(
                    out,
                    "<rect class=\"gc-pause\" x=\"{x0:.1}\" y=\"{TOP}\" width=\"{wdt:.1}\" height=\"{}\" fill=\"#f4a261\" fill-opacity=\"0.5\"><title>stop-the-world {}</title></rect>",
                    H - TOP - BOTTOM,
                    Esc(&ns(m.duration_ns))
                );
            } else {
                let _ = writeln!(
                    out,
                    "<line class=\"gc-cycle\" x1=\"{x0:.1}\" x2=\"{x0:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#e76f51\" stroke-dasharray=\"3,3\"><title>GC cycle ends</title></line>",
                    H - BOTTOM
                );
            }
        }
    }
    // The two series.
    for (max, colour, label) in [(true, "#264653", "max"), (false, "#2a9d8f", "P99")] {
        let pts: Vec<String> = w
            .windows
            .iter()
            .map(|win| {
                let v = if max { win.max_ns } else { win.p99_ns };
                format!("{:.1},{:.1}", x(win.start_ms * 1_000_000 + offset), y(v))
            })
            .collect();
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"><title>{label} per window</title></polyline>",
            pts.join(" ")
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"14\" font-size=\"12\" text-anchor=\"end\"><tspan fill=\"#264653\">— max</tspan>  <tspan fill=\"#2a9d8f\">— P99</tspan>{}</text>",
        W - RIGHT,
        if gc.is_some() {
            "  <tspan fill=\"#e76f51\">┆ GC cycle</tspan>  <tspan fill=\"#f4a261\">▮ stop-the-world</tspan>"
        } else {
            ""
        }
    );
    out.push_str("</svg>\n");
    Some(out)
}
