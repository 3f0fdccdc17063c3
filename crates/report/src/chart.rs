//! Inline SVG bar charts of log2 histograms (bucket `i` counts values in `[2^i, 2^(i+1))` ns).

use std::fmt::Write as _;

use switchyard_model::Log2Hist;

use crate::sentences::{percent, thousands};

const WIDTH: f64 = 460.0;
const HEIGHT: f64 = 190.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 30.0;
/// Charts show at least this many buckets, so one busy bucket does not fill the width.
const MIN_BUCKETS: usize = 10;
/// Room an x-axis label needs, px.
const LABEL_WIDTH: f64 = 44.0;

/// The lower bound of bucket `i`, ns (bucket 0 also holds 0).
fn floor(i: usize) -> u64 {
    if i == 0 { 0 } else { 1u64 << i.min(63) }
}

/// A bucket edge, a power of two of ns: see [`crate::sentences::ns_compact`].
fn edge(v: u64) -> String {
    crate::sentences::ns_compact(v)
}

/// Bucket `i`'s lower edge as its axis label: "0" for the first.
pub(crate) fn bucket_floor(i: usize) -> String {
    if i == 0 { "0".into() } else { edge(floor(i)) }
}

/// Bucket `i`'s range: "1.02µs – 2.05µs".
pub(crate) fn bucket_range(i: usize) -> String {
    let lo = if i == 0 {
        "0".to_string()
    } else {
        edge(floor(i))
    };
    if i >= 63 {
        format!("≥ {lo}")
    } else {
        format!("{lo} – {}", edge(1u64 << (i + 1).min(63)))
    }
}

/// A bar chart of the histogram's non-empty range; `class` picks the bar colour in the page's
/// CSS and `noun` names what is counted ("calls", "intervals"). Empty histograms give `None`.
pub fn log2_chart(hist: &Log2Hist, class: &str, noun: &str, label: &str) -> Option<String> {
    let first = hist.buckets.iter().position(|&c| c > 0)?;
    let last = hist.buckets.iter().rposition(|&c| c > 0)?;
    let total = hist.count();
    let max = hist.buckets[first..=last].iter().copied().max()?;
    // Widen a narrow range to MIN_BUCKETS, to the right first (latency tails live there).
    let mut lo = first;
    let mut hi = last;
    while hi - lo + 1 < MIN_BUCKETS && (hi < 63 || lo > 0) {
        if hi < 63 {
            hi += 1;
        }
        if hi - lo + 1 < MIN_BUCKETS && lo > 0 {
            lo -= 1;
        }
    }
    let n = hi - lo + 1;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let step = plot_w / n as f64;
    let gap = (step * 0.15).min(3.0);
    let every = ((LABEL_WIDTH / step).ceil() as usize).max(1);

    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"chart {class}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         role=\"img\" aria-label=\"{label}\">",
        label = crate::escape::html(label),
    );
    // Grid lines and y labels at 0, the maximum, and a whole number near half of it.
    let mut marks = vec![0, max];
    if max >= 2 {
        marks.insert(1, max / 2);
    }
    for value in marks {
        let y = TOP + plot_h * (1.0 - value as f64 / max as f64);
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"ylabel\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            thousands(value)
        );
    }
    for i in lo..=hi {
        let count = hist.buckets.get(i).copied().unwrap_or(0);
        let x = LEFT + (i - lo) as f64 * step;
        if count > 0 {
            // At least one pixel, so a rare bucket is still seen.
            let h = (count as f64 / max as f64 * plot_h).max(1.0);
            let noun = if count == 1 {
                noun.strip_suffix('s').unwrap_or(noun)
            } else {
                noun
            };
            let _ = write!(
                s,
                "<rect class=\"bar\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\">\
                 <title>{}: {} {noun} ({})</title></rect>",
                x + gap / 2.0,
                TOP + plot_h - h,
                step - gap,
                bucket_range(i),
                thousands(count),
                percent(count as f64 / total as f64),
            );
        }
        if (i - lo) % every == 0 {
            let _ = write!(
                s,
                "<line class=\"tick\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
                 <text class=\"xlabel\" x=\"{x:.1}\" y=\"{:.1}\">{}</text>",
                TOP + plot_h,
                TOP + plot_h + 4.0,
                TOP + plot_h + 16.0,
                bucket_floor(i)
            );
        }
    }
    s.push_str("</svg>");
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_one_bar_per_non_empty_bucket() {
        let hist = Log2Hist::from_buckets(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 1]);
        let svg = log2_chart(&hist, "syscall", "calls", "read <latency>").unwrap();
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 2, "{svg}");
        assert!(svg.contains("1.02µs – 2.05µs: 3 calls (75.0%)"), "{svg}");
        assert!(svg.contains("4.10µs – 8.19µs: 1 call (25.0%)"), "{svg}");
        assert!(svg.contains("aria-label=\"read &lt;latency&gt;\""), "{svg}");
        assert!(log2_chart(&Log2Hist::default(), "syscall", "calls", "x").is_none());
    }

    #[test]
    fn bucket_edges_say_their_binary_value() {
        assert_eq!(edge(512), "512ns");
        assert_eq!(edge(1 << 10), "1.02µs");
        assert_eq!(edge(1 << 17), "131µs");
        assert_eq!(edge(1 << 20), "1.05ms");
        assert_eq!(edge(1 << 30), "1.07s");
        assert_eq!(bucket_range(10), "1.02µs – 2.05µs");
        assert_eq!(bucket_range(0), "0 – 2ns");
    }
}
