//! Golden tests: every run in `tests/data/<case>.json` is rendered, and each output compared
//! line by line with `tests/data/results/<case>.<output>`. `SWITCHYARD_BLESS=1` rewrites the
//! expected files instead.
//!
//! Outputs per case:
//! - `<case>.<profile>.folded`: the four folded profiles;
//! - `<case>.html`: the HTML, with each flame graph document, the inline CSS and the script
//!   replaced by placeholders (the graphs are inferno's; their escaping is checked in
//!   `report.rs`);
//! - `<case>.tables.txt`: a text rendering of the HTML's headings, table rows and notes;
//! - `<case>.<profile>.pprof.txt`: a dump of the on-CPU and off-CPU pprof profiles.

use std::{
    fs,
    io::Read,
    path::{Path, PathBuf},
};

use pprof::protos::{Message, Profile};
use switchyard_golden::Golden;
use switchyard_model::Run;
use switchyard_report::{ProfileKind, chrome_trace, folded, html, pprof};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn cases() -> Vec<(String, Run)> {
    let mut cases = Vec::new();
    let mut entries: Vec<PathBuf> = fs::read_dir(data_dir())
        .expect("tests/data exists")
        .map(|e| e.expect("readable tests/data entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("UTF-8 case name")
            .to_string();
        let run = Run::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        cases.push((name, run));
    }
    assert!(
        cases.len() >= 3,
        "expected at least three cases in tests/data"
    );
    cases
}

/// Compares `actual` with `tests/data/results/<file>`, or rewrites it when blessing.
#[track_caller]
fn check(file: &str, actual: &str) {
    Golden::new(
        data_dir().join("results"),
        "cargo test -p switchyard-report --test golden",
    )
    .check(file, actual);
}

/// Replaces the contents of every `<tag>…</tag>` block (tag alone on its line) by `placeholder`.
fn replace_block(html: &str, tag: &str, placeholder: &str) -> String {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = String::new();
    let mut inside = false;
    for line in html.lines() {
        if inside {
            if line == close {
                inside = false;
                out.push_str(placeholder);
                out.push('\n');
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if line == open {
            inside = true;
        }
    }
    out
}

/// The HTML with each `srcdoc="…"` value (an escaped flame graph document) replaced by a note
/// of how many frames it draws, and the inline CSS and script replaced by their file names.
fn html_structure(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(i) = rest.find("srcdoc=\"") {
        let start = i + "srcdoc=\"".len();
        let len = rest[start..].find('"').expect("srcdoc value is closed");
        let doc = &rest[start..start + len];
        assert!(!doc.contains('<'), "srcdoc must be attribute-escaped");
        // inferno writes one `fg:w` (the frame's width in samples) per drawn frame.
        let frames = doc.matches(" fg:w=").count();
        out.push_str(&rest[..start]);
        out.push_str(&format!("[flame graph document, {frames} frames]"));
        rest = &rest[start + len..];
    }
    out.push_str(rest);
    let out = replace_block(&out, "style", "/* src/report.css */");
    replace_block(&out, "script", "/* src/sort.js */")
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Headings, table rows (cells joined by ` | `), list items, notes and chart captions of the
/// report, one per line: a text rendering of what a reader sees.
fn text_rendering(structure: &str) -> String {
    let mut out = String::new();
    for line in structure.lines() {
        let text = if line.starts_with("<h1") {
            format!("# {}", strip_tags(line))
        } else if line.starts_with("<h2") {
            format!("\n## {}", strip_tags(line))
        } else if line.starts_with("<h3") {
            format!("### {}", strip_tags(line))
        } else if line.starts_with("<tr") || line.starts_with("<thead><tr") {
            let cells: Vec<String> = line
                .replace("</td>", "\u{1f}")
                .replace("</th>", "\u{1f}")
                .split('\u{1f}')
                .map(|c| strip_tags(c).trim().to_string())
                .filter(|c| !c.is_empty())
                .collect();
            cells.join(" | ")
        } else if line.starts_with("<li") {
            format!("- {}", strip_tags(line))
        } else if line.starts_with("<p class=\"none\"") || line.starts_with("<p class=\"empty\"") {
            format!("({})", strip_tags(line))
        } else if line.starts_with("<p class=\"note\"")
            || line.starts_with("<p class=\"cmd\"")
            || line.starts_with("<p class=\"f-idle\"")
        {
            strip_tags(line)
        } else if line.starts_with("<p class=\"f-") {
            // A finding's culprit, evidence and time, under its item.
            format!("  {}", strip_tags(&line.replace("<br>", " / ")))
        } else if line.starts_with("<input type=\"checkbox\"") {
            format!("[x] {}", strip_tags(line))
        } else if line.starts_with("<figcaption") {
            format!("chart: {}", strip_tags(line))
        } else if line.starts_with("<div class=\"card\"") {
            let parts: Vec<String> = line.split("</div>").map(strip_tags).collect();
            format!("card: {}", parts.join(" / ").trim_end_matches(" / "))
        } else if line.starts_with("<div class=\"a-row\"") {
            // A bar of a span's mean parts: what its label says, and which instances.
            let label = line
                .split("aria-label=\"")
                .nth(1)
                .and_then(|l| l.split('"').next())
                .unwrap_or_default();
            let about = line
                .split("<span class=\"a-about\">")
                .nth(1)
                .unwrap_or_default();
            format!("bar: {} ({})", strip_tags(label), strip_tags(about))
        } else if line.starts_with("<div class=\"flame\"") {
            "[flame graph]".to_string()
        } else {
            continue;
        };
        out.push_str(&text);
        out.push('\n');
    }
    out
}

fn pprof_dump(run: &Run, kind: ProfileKind) -> String {
    let gz = pprof(run, kind).expect("pprof encodes");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut bytes)
        .expect("valid gzip");
    let p = Profile::decode(bytes.as_slice()).expect("valid profile.proto");
    let s = |i: i64| p.string_table[i as usize].as_str();
    let mut out = String::new();
    let types: Vec<String> = p
        .sample_type
        .iter()
        .map(|t| format!("{}/{}", s(t.ty), s(t.unit)))
        .collect();
    out.push_str(&format!("sample types: {}\n", types.join(", ")));
    if let Some(t) = &p.period_type {
        out.push_str(&format!("period: {} {}/{}\n", p.period, s(t.ty), s(t.unit)));
    }
    out.push_str(&format!(
        "time: {} ns, duration: {} ns\n",
        p.time_nanos, p.duration_nanos
    ));
    for c in &p.comment {
        out.push_str(&format!("comment: {}\n", s(*c)));
    }
    for m in &p.mapping {
        out.push_str(&format!(
            "mapping {}: {} functions={} filenames={} lines={} inline={}\n",
            m.id,
            s(m.filename),
            m.has_functions,
            m.has_filenames,
            m.has_line_numbers,
            m.has_inline_frames
        ));
    }
    let function = |id: u64| {
        p.function
            .iter()
            .find(|f| f.id == id)
            .expect("line refers to a function")
    };
    for l in &p.location {
        let lines: Vec<String> = l
            .line
            .iter()
            .map(|line| {
                let f = function(line.function_id);
                format!("{} {}:{}", s(f.name), s(f.filename), line.line)
            })
            .collect();
        out.push_str(&format!(
            "location {} (mapping {}): {}\n",
            l.id,
            l.mapping_id,
            lines.join(" | ")
        ));
    }
    for sample in &p.sample {
        let labels: Vec<String> = sample
            .label
            .iter()
            .map(|l| {
                if l.str != 0 {
                    format!("{}={}", s(l.key), s(l.str))
                } else {
                    format!("{}={}", s(l.key), l.num)
                }
            })
            .collect();
        let ids: Vec<String> = sample.location_id.iter().map(u64::to_string).collect();
        out.push_str(&format!(
            "sample {:?} at [{}] {}\n",
            sample.value,
            ids.join(" "),
            labels.join(" ")
        ));
    }
    out
}

#[test]
fn golden_outputs() {
    for (name, run) in cases() {
        for kind in ProfileKind::ALL.into_iter().filter(|k| k.present(&run)) {
            let text = folded(&run, kind).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            check(&format!("{name}.{}.folded", kind.name()), &text);
        }
        let page = html(&run).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let structure = html_structure(&page);
        check(&format!("{name}.html"), &structure);
        check(&format!("{name}.tables.txt"), &text_rendering(&structure));
        for kind in [ProfileKind::OnCpu, ProfileKind::OffCpu] {
            check(
                &format!("{name}.{}.pprof.txt", kind.name()),
                &pprof_dump(&run, kind),
            );
        }
        if let Some(trace) = chrome_trace(&run) {
            let v: serde_json::Value = serde_json::from_str(&trace).expect("the trace is JSON");
            check(
                &format!("{name}.trace.json"),
                &serde_json::to_string_pretty(&v).unwrap(),
            );
        }
    }
}

#[test]
fn outputs_are_deterministic() {
    for (name, run) in cases() {
        assert_eq!(html(&run).unwrap(), html(&run).unwrap(), "{name}: html");
        for kind in ProfileKind::ALL {
            assert_eq!(
                pprof(&run, kind).unwrap(),
                pprof(&run, kind).unwrap(),
                "{name}: {kind:?} pprof"
            );
        }
    }
}

/// A thread pool's flame graph can be read as one tower: the page adds a view with the
/// threads of one role merged (`producer-*`) under a fold, and only when that merges any.
#[test]
fn a_thread_pool_gets_a_merged_view() {
    let (_, run) = cases().into_iter().find(|(n, _)| n == "basic").unwrap();
    let html = switchyard_report::html(&run).unwrap();
    assert!(
        !html.contains("flame-oncpu-roles"),
        "nothing to merge in the basic run"
    );
    let mut pool = run.clone();
    for (i, s) in pool.profiles.oncpu.stacks.iter_mut().enumerate() {
        s.comm = format!("producer-{i}");
    }
    let html = switchyard_report::html(&pool).unwrap();
    let merged = html
        .split("id=\"flame-oncpu-roles\"")
        .nth(1)
        .expect("a merged on-CPU view")
        .split("</iframe>")
        .next()
        .unwrap();
    assert!(
        merged.contains("producer-*"),
        "the merged view has no producer-* root"
    );
    let folded = switchyard_report::folded_threads(
        &pool,
        ProfileKind::OnCpu,
        switchyard_report::Threads::ByRole,
    )
    .unwrap();
    assert!(
        folded.lines().all(|l| l.starts_with("producer-*;")),
        "{folded}"
    );
}

/// pprof keeps full Rust names: a function's system name is left empty, so `go tool pprof`
/// does not demangle the name again and strip its `<Type as Trait>` part. Every profile has a
/// pprof export.
#[test]
fn pprof_keeps_full_names_for_every_profile() {
    let (_, mut run) = cases().into_iter().find(|(n, _)| n == "basic").unwrap();
    let f = run.profiles.oncpu.stacks[0].frames[0] as usize;
    run.profiles.frames[f].name = "<std::fs::File as std::io::Write>::write".into();
    for kind in ProfileKind::ALL {
        let p = switchyard_report::pprof_profile(&run, kind).unwrap();
        assert!(p.function.iter().all(|f| f.system_name == 0), "{kind:?}");
    }
    let p = switchyard_report::pprof_profile(&run, ProfileKind::OnCpu).unwrap();
    assert!(
        p.function
            .iter()
            .any(|f| p.string_table[f.name as usize] == "<std::fs::File as std::io::Write>::write")
    );
}

/// The `<section id="…">` of a page, up to its closing tag, as one string.
fn section_of<'a>(page: &'a str, id: &str) -> Option<&'a str> {
    let start = page.find(&format!("<section id=\"{id}\">"))?;
    let len = page[start..].find("</section>\n")? + "</section>\n".len();
    Some(&page[start..start + len])
}

/// The run of `tests/data/spans/slow-requests.json`: one span measured one by one, 1,000
/// instances of which two slow ones (a lock its releaser held while it slept, a CPU another
/// thread held) and four typical ones were kept whole.
fn slow_requests_run() -> Run {
    let path = data_dir().join("spans/slow-requests.json");
    Run::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
}

/// The "Slow requests" section: the percentile bands' anatomy, the slow group's findings,
/// the slowest instances with their strips, and the typical ones; compared with
/// `results/slow-requests.section.html` and its text rendering.
#[test]
fn slow_requests_section() {
    let page = html(&slow_requests_run()).unwrap();
    let section = section_of(&page, "slow-requests").expect("a slow-requests section");
    check("slow-requests.section.html", section);
    check("slow-requests.section.txt", &text_rendering(section));
}

/// A run with spans opens with the section, before the findings, and the navigation bar
/// lists it first.
#[test]
fn slow_requests_open_the_report() {
    let page = html(&slow_requests_run()).unwrap();
    let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("no {s}"));
    assert!(at("<section id=\"slow-requests\">") < at("<section id=\"findings\">"));
    assert!(at("<section id=\"findings\">") < at("<section id=\"summary\">"));
    assert!(
        page.contains(
            "<a href=\"#slow-requests\">Slow requests</a>\n<a href=\"#findings\">Why it waited</a>\n"
        ),
        "the navigation bar lists the section first"
    );
}
