//! Flame graphs drawn by inferno, and their embedding in the HTML report.

use inferno::flamegraph::{
    self, Options,
    color::{BackgroundColor, BasicPalette, MultiPalette, Palette},
};
use switchyard_model::{Run, Stack};

use crate::{Error, ProfileKind, folded, folded::Threads};

/// The width inferno draws at, px; the report scales the graph to its column.
pub(crate) const IMAGE_WIDTH: u32 = 1200;

/// The flame graph of one profile as an SVG document (inferno's, with its search and zoom
/// script), or `None` when the profile has no samples.
///
/// Colours are fixed per profile and chosen from each frame's name, never at random, so the
/// same run always gives the same SVG. On-CPU uses the "java" palette, which tells the
/// annotations apart: kernel frames (`_[k]`) orange, JIT (`_[j]`) green, inlined (`_[i]`) aqua, `::` paths
/// (Rust, C++) yellow, plain C red; off-CPU is blue, wakeups aqua, syscall stacks purple.
pub fn flamegraph(run: &Run, kind: ProfileKind) -> Result<Option<String>, Error> {
    flamegraph_threads(run, kind, Threads::Each)
}

/// [`flamegraph`], with the threads drawn as `threads` says.
pub fn flamegraph_threads(
    run: &Run,
    kind: ProfileKind,
    threads: Threads,
) -> Result<Option<String>, Error> {
    flamegraph_where(run, kind, threads, &|_| true)
}

/// [`flamegraph_threads`] of the stacks `keep` accepts only.
pub(crate) fn flamegraph_where(
    run: &Run,
    kind: ProfileKind,
    threads: Threads,
    keep: &dyn Fn(&Stack) -> bool,
) -> Result<Option<String>, Error> {
    let lines = folded::merged_where(run, kind, threads, keep)?;
    if lines.is_empty() {
        return Ok(None);
    }
    let text: Vec<String> = lines.iter().map(|(s, v)| format!("{s} {v}")).collect();
    let mut opt = Options::default();
    let (title, colors, background) = match kind {
        ProfileKind::OnCpu => (
            "On-CPU flame graph",
            Palette::Multi(MultiPalette::Java),
            BackgroundColor::Grey,
        ),
        ProfileKind::OffCpu => (
            "Off-CPU flame graph",
            Palette::Basic(BasicPalette::Blue),
            BackgroundColor::Grey,
        ),
        ProfileKind::Wakeup => (
            "Wakeup flame graph (sleeper below --, waker above)",
            Palette::Basic(BasicPalette::Aqua),
            BackgroundColor::Grey,
        ),
        ProfileKind::Futex => (
            "Futex wait flame graph",
            Palette::Basic(BasicPalette::Orange),
            BackgroundColor::Grey,
        ),
        ProfileKind::Heap => (
            "Heap allocations by site (dhat)",
            Palette::Basic(BasicPalette::Green),
            BackgroundColor::Grey,
        ),
        ProfileKind::Syscalls => (
            "Syscall flame graph",
            Palette::Basic(BasicPalette::Purple),
            BackgroundColor::Grey,
        ),
    };
    opt.title = title.into();
    opt.colors = colors;
    opt.bgcolors = Some(background);
    opt.deterministic = true;
    opt.count_name = kind.unit(run).to_string();
    opt.name_type = "Function:".into();
    // A fixed drawing width, scaled to the page by the viewBox: inferno's fluid mode sizes the
    // graph from the SVG's width attribute, which an SVG parsed as HTML (srcdoc) does not give.
    opt.image_width = Some(IMAGE_WIDTH as usize);
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut opt, text.iter().map(String::as_str), &mut svg).map_err(
        |source| Error::FlameGraph {
            profile: kind.name(),
            source,
        },
    )?;
    // inferno writes UTF-8 (its input is UTF-8 and it escapes with quick-xml).
    Ok(Some(String::from_utf8_lossy(&svg).into_owned()))
}

/// Wraps an inferno SVG into a small HTML document for an `<iframe srcdoc>`: each graph gets its
/// own document, so the scripts and ids of several graphs cannot clash.
///
/// The XML prolog, DOCTYPE and leading comments are dropped (the SVG is parsed as HTML, where
/// `<svg onload>` still runs inferno's `init`). inferno keeps its zoom and search state in the
/// address bar with `history.replaceState`, which an `about:srcdoc` document may not do; the
/// shim turns that refusal into a no-op instead of an uncaught error on every click. Once
/// loaded, `unzoom()` lays the labels out as inferno's fluid mode does (the root frame's
/// "all" label is only written by the script).
pub(crate) fn srcdoc(svg: &str) -> String {
    let mut body = svg.find("<svg").map_or(svg, |i| &svg[i..]);
    // Drop the comments right after the opening tag (inferno's credits and notes).
    let mut head = String::new();
    if let Some(end) = body.find('>') {
        head.push_str(&body[..=end]);
        body = &body[end + 1..];
        loop {
            let trimmed = body.trim_start();
            match trimmed
                .strip_prefix("<!--")
                .and_then(|rest| rest.find("-->").map(|e| &rest[e + 3..]))
            {
                Some(rest) => body = rest,
                None => break,
            }
        }
    }
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">\
         <style>html,body{{margin:0;padding:0;background:#fff;overflow:hidden}}svg{{display:block;width:100%;height:auto}}</style>\
         <script>(function(){{var r=history.replaceState;\
         history.replaceState=function(){{try{{return r.apply(history,arguments)}}catch(e){{}}}};\
         addEventListener(\"load\",function(){{unzoom()}})}})();</script>\
         </head><body>{head}{body}</body></html>"
    )
}

/// The height the SVG asks for, in pixels (inferno writes `height="N"` on the root).
pub(crate) fn svg_height(svg: &str) -> Option<u32> {
    let root = &svg[svg.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let start = root.find(" height=\"")? + " height=\"".len();
    let len = root[start..].find('"')?;
    root[start..start + len].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVG: &str = "<?xml version=\"1.0\" standalone=\"no\"?><!DOCTYPE svg PUBLIC \"x\" \"y\">\
        <svg version=\"1.1\" width=\"1200\" height=\"342\" onload=\"init(evt)\"><!--credits--><!--NOTES: -->\
        <defs/></svg>";

    #[test]
    fn wraps_svg_for_srcdoc() {
        let doc = srcdoc(SVG);
        assert!(doc.starts_with("<!DOCTYPE html>"), "{doc}");
        assert!(!doc.contains("<?xml") && !doc.contains("credits") && !doc.contains("NOTES"));
        assert!(doc.contains("<svg version=\"1.1\" width=\"1200\" height=\"342\" onload=\"init(evt)\"><defs/></svg>"), "{doc}");
        assert_eq!(svg_height(SVG), Some(342));
        assert_eq!(svg_height("<svg width=\"1\">"), None);
    }
}
