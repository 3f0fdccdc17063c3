//! Behaviour of the renderers beyond the golden files: escaping of everything the target
//! controls, empty profiles, the pprof encoding (read back, and by `go tool pprof` when Go is
//! installed) and errors on inconsistent runs.

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::Command,
};

use pprof::protos::{Message, Profile};
use switchyard_model::{Frame, FrameKind, Run, Stack};
use switchyard_report::{Error, ProfileKind, flamegraph, folded, html, pprof};

fn data(case: &str) -> Run {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{case}.json"));
    Run::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
}

/// A run with no stacks; tests add frames and stacks to it.
fn bare_run() -> Run {
    Run::from_json(
        r#"{
          "format": "switchyard-run", "schema_version": 1,
          "meta": {
            "tool_version": "0.1.0", "command": ["./hot"], "mode": "spawn", "pid": 7,
            "follow_children": true, "children": [], "host": "h", "kernel": "6.18",
            "start_wall_ns": 1000000000, "end_wall_ns": 2000000000,
            "start_mono_ns": 5000000000, "end_mono_ns": 6000000000,
            "end": {"kind": "duration"}, "collector": "ebpf"
          },
          "missing": [], "counters": [], "syscalls": [], "threads": [], "drops": []
        }"#,
        "bare run",
    )
    .expect("the bare run parses")
}

fn frame(
    name: &str,
    module: &str,
    kind: FrameKind,
    file: Option<&str>,
    line: Option<u32>,
) -> Frame {
    Frame {
        name: name.into(),
        module: module.into(),
        file: file.map(String::from),
        line,
        kind,
        inlined: false,
        addr: 0,
    }
}

fn stack(comm: &str, label: &str, frames: &[u32], value: u64) -> Stack {
    Stack {
        tgid: 7,
        tid: 7,
        comm: comm.into(),
        label: label.into(),
        frames: frames.to_vec(),
        value,
        ..Stack::default()
    }
}

/// A synthetic CPU-bound program: `main → crunch → hot_loop` takes 90% of the samples,
/// `main → write → (kernel) ksys_write` the rest; off-CPU time sits in `wait_for_work`.
fn synthetic_run() -> Run {
    let mut run = bare_run();
    let p = &mut run.profiles;
    p.frames = vec![
        frame("main", "hot", FrameKind::User, Some("src/main.rs"), Some(3)), // 0
        frame(
            "crunch",
            "hot",
            FrameKind::User,
            Some("src/main.rs"),
            Some(20),
        ), // 1
        frame(
            "hot_loop",
            "hot",
            FrameKind::User,
            Some("src/hot.rs"),
            Some(41),
        ), // 2
        frame("__libc_write", "libc.so.6", FrameKind::User, None, None),     // 3
        frame("ksys_write", "kernel", FrameKind::Kernel, None, None),        // 4
        frame(
            "wait_for_work",
            "hot",
            FrameKind::User,
            Some("src/main.rs"),
            Some(30),
        ), // 5
        frame("schedule", "kernel", FrameKind::Kernel, None, None),          // 6
    ];
    p.stats.oncpu_hz = 99;
    p.oncpu.unit = "samples".into();
    p.oncpu.stacks = vec![
        stack("hot", "", &[0, 1, 2], 900),
        stack("hot", "", &[0, 3, 4], 100),
    ];
    p.offcpu.unit = "ns".into();
    p.offcpu.stacks = vec![stack("hot", "S", &[0, 5, 6], 4_000_000)];
    run
}

fn decode(gz: &[u8]) -> Profile {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut bytes)
        .expect("pprof output is gzip");
    Profile::decode(bytes.as_slice()).expect("pprof output is a profile.proto message")
}

#[test]
fn pprof_has_string_table_functions_locations_lines_and_period() {
    let run = synthetic_run();
    let p = decode(&pprof(&run, ProfileKind::OnCpu).unwrap());
    let s = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(p.string_table[0], "", "string 0 must be empty");
    let types: Vec<(&str, &str)> = p.sample_type.iter().map(|t| (s(t.ty), s(t.unit))).collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(p.period, 1_000_000_000 / 99);
    assert_eq!(p.duration_nanos, 1_000_000_000);
    assert_eq!(
        p.location.len(),
        5,
        "one location per frame the profile uses"
    );
    assert_eq!(
        s(p.mapping[0].filename),
        "hot",
        "the target's binary is the main mapping"
    );

    // The hot sample: leaf first, with its source line.
    let hot = p
        .sample
        .iter()
        .find(|x| x.value[0] == 900)
        .expect("the hot sample");
    assert_eq!(hot.value, [900, 900 * p.period]);
    let leaf = p
        .location
        .iter()
        .find(|l| l.id == hot.location_id[0])
        .unwrap();
    let function = p
        .function
        .iter()
        .find(|f| f.id == leaf.line[0].function_id)
        .unwrap();
    assert_eq!(s(function.name), "hot_loop");
    assert_eq!(s(function.filename), "src/hot.rs");
    assert_eq!(leaf.line[0].line, 41);
    assert_eq!(hot.location_id.len(), 3);

    let off = decode(&pprof(&run, ProfileKind::OffCpu).unwrap());
    let s = |i: i64| off.string_table[i as usize].as_str();
    let types: Vec<(&str, &str)> = off
        .sample_type
        .iter()
        .map(|t| (s(t.ty), s(t.unit)))
        .collect();
    assert_eq!(types, [("off_cpu", "nanoseconds")]);
    assert_eq!(off.sample[0].value, [4_000_000]);
    let state = off.sample[0]
        .label
        .iter()
        .find(|l| s(l.key) == "state")
        .expect("a state label");
    assert_eq!(s(state.str), "S");
}

/// `go tool pprof -top` reads the profile and names the hot function; skipped without Go.
#[test]
fn go_tool_pprof_reads_the_profile() {
    let go = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("go"))
            .find(|p| p.is_file())
    });
    let Some(go) = go else {
        eprintln!("skipping go_tool_pprof_reads_the_profile: `go` is not on PATH");
        return;
    };
    let dir = temp_dir("go-pprof");
    let run = synthetic_run();
    for (kind, hot) in [
        (ProfileKind::OnCpu, "hot_loop"),
        (ProfileKind::OffCpu, "schedule"),
    ] {
        let file = dir.join(format!("{}.pb.gz", kind.name()));
        std::fs::write(&file, pprof(&run, kind).unwrap()).unwrap();
        let out = Command::new(&go)
            .args(["tool", "pprof", "-top"])
            .arg(&file)
            // Never fetch another toolchain: use the installed one or fail.
            .env("GOTOOLCHAIN", "local")
            .output()
            .expect("go runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "go tool pprof failed:\n{stdout}\n{stderr}"
        );
        // The first row after the header is the function with the most flat time.
        let top = stdout
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat"))
            .nth(1)
            .unwrap_or_else(|| panic!("no rows in:\n{stdout}"));
        assert!(
            top.ends_with(hot),
            "{kind:?}: expected {hot} on top:\n{stdout}"
        );
        if kind == ProfileKind::OnCpu {
            assert!(top.contains("90.00%"), "{stdout}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Each `srcdoc="…"` value of the page, as written (attribute-escaped).
fn srcdocs(page: &str) -> Vec<&str> {
    page.split("srcdoc=\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').expect("closed srcdoc")])
        .collect()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[test]
fn target_strings_are_escaped_everywhere() {
    let run = data("escaping");
    let page = html(&run).unwrap();
    // The page's only script element is its own table sorter.
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert!(!page.contains("<img"), "a thread name became markup");
    assert!(
        !page.contains("<svg onload"),
        "a syscall name became markup"
    );
    assert!(!page.contains("<b>host"), "the host name became markup");
    assert!(
        !page.contains("<u>figure"),
        "a missing figure became markup"
    );
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the command line is shown"
    );
    assert!(
        page.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "the thread name is shown"
    );
    assert!(
        page.contains("&lt;img src=x onerror=alert(2)&gt;"),
        "the name of a task that held the CPU is shown"
    );
    // The findings name culprits (a CPU's holder, a lock's releaser) and their frames.
    let findings = &page[page.find("<section id=\"findings\">").unwrap()..];
    let findings = &findings[..findings.find("</section>").unwrap()];
    assert!(
        !page.contains("<i>holder"),
        "a culprit's name became markup"
    );
    assert!(
        findings.contains("Held the CPU: <b>&lt;img src=x onerror=alert(2)&gt;</b>"),
        "{findings}"
    );
    assert!(
        findings.contains("Released the lock: <b>&lt;i&gt;holder&lt;/i&gt;</b>"),
        "{findings}"
    );
    assert!(
        findings.contains("<code>&lt;script&gt;alert(&#39;frame&#39;)&lt;/script&gt;</code>"),
        "the culprit's frames are shown, escaped: {findings}"
    );

    let docs = srcdocs(&page);
    assert_eq!(docs.len(), 4, "four flame graphs");
    for doc in docs {
        assert!(
            !doc.contains('<') && !doc.contains('"'),
            "srcdoc is attribute-escaped"
        );
        let inner = unescape(doc);
        // Inside each graph: the history shim and inferno's own script, nothing else.
        assert_eq!(inner.matches("<script").count(), 2, "{inner}");
        assert!(
            !inner.contains("<img"),
            "a name became markup inside a graph"
        );
        assert!(
            !inner.contains("alert('frame')</script>"),
            "a frame name became markup"
        );
        assert!(
            inner.contains("&lt;script&gt;alert("),
            "the frame name is shown, escaped"
        );
    }
}

#[test]
fn folded_lines_survive_hostile_names() {
    let run = data("escaping");
    for kind in ProfileKind::ALL {
        for line in folded(&run, kind).unwrap().lines() {
            let (stack, value) = line.rsplit_once(' ').expect("stack and value");
            assert!(value.parse::<u64>().is_ok(), "{line}");
            assert!(
                stack
                    .rsplit_once(' ')
                    .is_none_or(|(_, t)| t.parse::<f64>().is_err()),
                "the leaf would read as a count: {line}"
            );
            assert!(
                stack.split(';').all(|f| !f.is_empty() && f.trim() == f),
                "{line}"
            );
        }
    }
    let oncpu = folded(&run, ProfileKind::OnCpu).unwrap();
    assert!(
        oncpu.contains(";evil:name with newline;trailing_42 3\n"),
        "{oncpu}"
    );
    assert!(
        oncpu.contains("drop_in_place<[u8: 8]>_[i];a & b \"quoted\"_[k] 2\n"),
        "{oncpu}"
    );
    let svg = flamegraph(&run, ProfileKind::OnCpu).unwrap().unwrap();
    assert!(svg.contains("&lt;script&gt;"), "inferno escapes the names");
}

#[test]
fn wakeup_stacks_fold_like_offwaketime() {
    let run = data("basic");
    let text = folded(&run, ProfileKind::Wakeup).unwrap();
    let first = text.lines().next().unwrap();
    let (stack, value) = first.rsplit_once(' ').unwrap();
    assert_eq!(value, "7900000");
    let frames: Vec<&str> = stack.split(';').collect();
    let sep = frames
        .iter()
        .position(|f| *f == "--")
        .expect("a -- separator");
    assert_eq!(&frames[..2], ["worker", "[S]"]);
    assert_eq!(
        frames[sep - 1],
        "__schedule_[k]",
        "the sleeper's leaf sits below --"
    );
    assert_eq!(
        frames[sep + 1],
        "try_to_wake_up_[k]",
        "the waker's leaf sits above --"
    );
    assert_eq!(frames.last(), Some(&"demo"), "the waker's name is on top");
}

#[test]
fn empty_profiles_say_no_samples() {
    let run = data("degraded");
    let page = html(&run).unwrap();
    // Every profile the run can have (the heap needs a heap profile).
    assert_eq!(
        page.matches("<p class=\"empty\">no samples</p>").count(),
        ProfileKind::ALL.iter().filter(|k| k.present(&run)).count()
    );
    assert_eq!(ProfileKind::ALL.len(), 6);
    assert!(!page.contains("<iframe"));
    assert!(page.contains("<section id=\"warnings\">"));
    for kind in ProfileKind::ALL {
        assert_eq!(folded(&data("degraded"), kind).unwrap(), "");
        assert!(flamegraph(&data("degraded"), kind).unwrap().is_none());
    }
    // A counter that could not be read is "unavailable" with the reason beside it, never 0.
    let counters = &page[page.find("<table class=\"data counters\">").unwrap()..];
    let row = counters
        .lines()
        .find(|l| l.contains("<td>context-switches</td>"))
        .unwrap();
    assert!(
        row.contains("unavailable")
            && row.contains("needs kernel-mode counting")
            && !row.contains(">0<"),
        "{row}"
    );
}

#[test]
fn no_warnings_reads_none() {
    let mut run = synthetic_run();
    run.profiles.stats = Default::default();
    let page = html(&run).unwrap();
    let section = &page[page.find("<section id=\"warnings\">").unwrap()..];
    assert!(section.contains("<p class=\"none\">none</p>"), "{section}");
}

#[test]
fn the_page_is_self_contained() {
    let page = html(&data("basic")).unwrap();
    for needle in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
        "<link",
        "src=\"//",
    ] {
        assert!(!page.contains(needle), "external reference `{needle}`");
    }
    assert!(
        !page.contains("&lt;!DOCTYPE svg"),
        "the SVG prolog is dropped"
    );
}

#[test]
fn frames_out_of_range_are_errors() {
    let mut run = synthetic_run();
    run.profiles
        .offcpu
        .stacks
        .push(stack("hot", "S", &[0, 99], 5));
    let err = folded(&run, ProfileKind::OffCpu).unwrap_err();
    assert!(
        matches!(
            err,
            Error::FrameOutOfRange {
                index: 99,
                stack: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "offcpu stack 1 refers to frame 99, but the run has only 7 frames"
    );
    assert!(pprof(&run, ProfileKind::OffCpu).is_err());
    assert!(html(&run).is_err());
    assert!(
        folded(&run, ProfileKind::OnCpu).is_ok(),
        "other profiles are unaffected"
    );
}

#[test]
fn identical_stacks_merge_and_lines_are_sorted() {
    let run = data("basic");
    let text = folded(&run, ProfileKind::OnCpu).unwrap();
    // Threads 101 and 102 share their name and stack: one line, summed.
    assert!(
        text.contains("worker;demo::worker_loop;[unknown] 15\n"),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
}

/// The `srcdoc` of the flame graph `<iframe id="{id}">`, unescaped.
fn graph(page: &str, id: &str) -> String {
    let at = page
        .find(&format!("<iframe id=\"{id}\""))
        .unwrap_or_else(|| panic!("no graph {id}"));
    unescape(srcdocs(&page[at..])[0])
}

/// The page leads with why the run waited; the off-CPU and wakeup flame graphs leave idle
/// waits (waiting for work) out, and a checkbox shows the graphs with them. The folded files
/// keep every stack.
#[test]
fn findings_lead_and_idle_waits_are_one_click_away() {
    let run = data("timeline");
    let page = html(&run).unwrap();
    let findings = page
        .find("<section id=\"findings\">")
        .expect("a findings section");
    let summary = page.find("<section id=\"summary\">").unwrap();
    assert!(findings < summary, "the findings come before the summary");
    assert!(
        page.find("<section").unwrap() == findings,
        "the findings are the first section"
    );
    assert!(page.find("href=\"#findings\"").unwrap() < page.find("href=\"#summary\"").unwrap());
    let section = &page[findings..summary];
    assert!(
        section.contains("<li class=\"finding k-lock\">"),
        "{section}"
    );
    assert!(
        section.contains("Released the lock: <b>demo</b>"),
        "{section}"
    );
    assert!(
        section.contains("Idle, not on the request path:</b> 5.07 s waiting for work in <code>demo::event_loop</code>"),
        "{section}"
    );
    assert!(
        !section.contains("k-idle"),
        "idle findings are not in the list: {section}"
    );

    for kind in ["offcpu", "wakeup"] {
        let start = page
            .find(&format!("<section id=\"flame-{kind}\">"))
            .unwrap();
        let sec = &page[start..start + page[start..].find("</section>").unwrap()];
        let toggle = format!(
            "<input type=\"checkbox\" class=\"idle-switch\" id=\"flame-{kind}-idle\">\
             <label class=\"idle-label\" for=\"flame-{kind}-idle\">show idle waits ("
        );
        assert!(sec.contains(&toggle), "{kind}: no toggle: {sec}");
        let (off, on) = (
            sec.find("<div class=\"idle-off\">").unwrap(),
            sec.find("<div class=\"idle-on\">").unwrap(),
        );
        let (busy_at, all_at) = (
            sec.find(&format!("id=\"flame-{kind}-graph\"")).unwrap(),
            sec.find(&format!("id=\"flame-{kind}-all-graph\"")).unwrap(),
        );
        assert!(
            off < busy_at && busy_at < on && on < all_at,
            "{kind}: {sec}"
        );
        let busy = graph(&page, &format!("flame-{kind}-graph"));
        let all = graph(&page, &format!("flame-{kind}-all-graph"));
        for idle in ["demo::event_loop", "ep_poll", "schedule_hrtimeout_range"] {
            assert!(!busy.contains(idle), "{kind}: {idle} in the default graph");
            assert!(all.contains(idle), "{kind}: {idle} missing with idle waits");
        }
        assert!(
            busy.contains("demo::take_lock") && all.contains("demo::take_lock"),
            "{kind}: the lock wait is in both graphs"
        );
    }
    // The headline leaves idle waits out too, and says how much they are.
    assert!(
        page.contains("<div class=\"k\">off-CPU, idle waits left out</div>"),
        "{page}"
    );
    // The timeline's off-CPU graph of a range leaves them out too: each interval says whether
    // it is idle, and a checkbox draws them.
    assert!(page.contains("<input type=\"checkbox\" id=\"timeline-idle\">"));
    assert!(
        page.contains("1999000000,103,3,1970000000,1]"),
        "the poller's epoll wait is marked idle"
    );
    assert!(
        page.contains("700000000,101,2,300000000,0,"),
        "the lock wait is not idle"
    );
    // The folded files keep every stack.
    for kind in [ProfileKind::OffCpu, ProfileKind::Wakeup] {
        let text = folded(&run, kind).unwrap();
        assert!(text.contains("demo::event_loop;epoll_wait"), "{text}");
    }

    // A run without idle waits: one graph per profile, no toggle.
    let page = html(&data("escaping")).unwrap();
    assert!(!page.contains("type=\"checkbox\""));
    assert!(!page.contains("-all-graph"));
}

/// `tests/data/spans/slow-requests.json`: one span whose instances were measured one by one.
fn slow_requests_run() -> Run {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/spans/slow-requests.json");
    Run::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
}

/// Without a span measured one by one (none, one without an anatomy, one whose anatomy saw no
/// instance), the page has no "Slow requests" section and no link to it.
#[test]
fn no_span_anatomy_no_slow_requests_section() {
    let mut runs: Vec<(String, Run)> = ["basic", "cfi", "degraded", "escaping", "timeline"]
        .into_iter()
        .map(|c| (c.to_string(), data(c)))
        .collect();
    let mut without = slow_requests_run();
    without.locks.spans[0].anatomy = None;
    runs.push(("no anatomy".into(), without));
    let mut empty = slow_requests_run();
    let a = empty.locks.spans[0].anatomy.as_mut().unwrap();
    a.count = 0;
    a.hist.clear();
    a.instances.clear();
    runs.push(("no instance".into(), empty));
    for (name, run) in runs {
        let page = html(&run).unwrap();
        assert!(
            !page.contains("slow-requests"),
            "{name}: a slow-requests section"
        );
        assert!(!page.contains("<h2>Slow requests</h2>"), "{name}");
    }
    assert!(
        html(&slow_requests_run())
            .unwrap()
            .contains("<section id=\"slow-requests\">")
    );
}

/// The span's name, the threads' names, the CPU holder's and the frames come from the target:
/// the section escapes them in text and in attributes.
#[test]
fn slow_requests_escape_the_target_names() {
    let mut run = slow_requests_run();
    run.locks.spans[0].label = "<img src=x onerror=alert(1)>".into();
    for t in &mut run.threads {
        t.comm = format!("<script>{}</script>", t.comm);
    }
    let a = run.locks.spans[0].anatomy.as_mut().unwrap();
    for c in a.instances.iter_mut().flat_map(|i| i.cpu.iter_mut()) {
        c.comm = format!("\"{}\" <b>", c.comm);
    }
    let f = run
        .profiles
        .frames
        .iter_mut()
        .find(|f| f.name == "demo::lock_table")
        .unwrap();
    f.name = "demo::lock_table<'a, \"x\">".into();
    let page = html(&run).unwrap();
    let start = page.find("<section id=\"slow-requests\">").unwrap();
    let end = start + page[start..].find("</section>").unwrap();
    let section = &page[start..end];
    for raw in ["<img", "<script", "<b>\"", "<'a", "\"x\""] {
        assert!(!section.contains(raw), "`{raw}` unescaped in {section}");
    }
    for escaped in [
        "&lt;img src=x onerror=alert(1)&gt;",
        "&lt;script&gt;worker&lt;/script&gt;",
        "&quot;burster&quot; &lt;b&gt;",
        "demo::lock_table&lt;&#39;a, &quot;x&quot;&gt;",
    ] {
        assert!(section.contains(escaped), "no `{escaped}` in {section}");
    }
}
