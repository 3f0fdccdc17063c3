//! The tail's "what changed": two small runs of one span, B's slowest calls slower and made
//! so by another cause.

use switchyard_compare::{CauseChange, compare, html, render_text, tail_changes};
use switchyard_findings::Kind;
use switchyard_model::{
    Frame, FrameKind, Run, SpanAnatomy, SpanCpuWait, SpanInstance, SpanRow, SpanWait,
};

/// A run of 3 s: a worker (101) serving, a hog (102) and a compactor (103).
fn base() -> Run {
    let text = r#"{"format":"switchyard-run","schema_version":1,
      "meta":{"tool_version":"0","command":["demo"],"mode":"spawn","pid":100,
        "follow_children":true,"children":[],"host":"h","kernel":"6.18",
        "start_wall_ns":0,"end_wall_ns":3000000000,"start_mono_ns":0,
        "end_mono_ns":3000000000,"end":{"kind":"duration"},"collector":"ebpf"},
      "missing":[],"counters":[],"syscalls":[],"drops":[],
      "threads":[
        {"tid":101,"tgid":100,"comm":"worker","voluntary":1000,"involuntary":600,
         "oncpu_ns":60000000,"blocked_ns":40000000,"runqueue_ns":29000000,
         "offcpu":{"buckets":[]}},
        {"tid":102,"tgid":100,"comm":"hog","voluntary":0,"involuntary":600,
         "oncpu_ns":2990000000,"blocked_ns":0,"runqueue_ns":10000000,
         "offcpu":{"buckets":[]}},
        {"tid":103,"tgid":100,"comm":"compactor","voluntary":10,"involuntary":0,
         "oncpu_ns":1000000,"blocked_ns":2999000000,"runqueue_ns":0,
         "offcpu":{"buckets":[]}}]}"#;
    let mut run = Run::from_json(text, "run.json").unwrap();
    // One stack: a wait for a mutex in demo::lock_table.
    for (name, module, kind) in [
        ("demo::lock_table", "demo", FrameKind::User),
        ("syscall", "libc.so.6", FrameKind::User),
        ("futex_wait", "kernel", FrameKind::Kernel),
    ] {
        run.profiles.frames.push(Frame {
            name: name.into(),
            module: module.into(),
            kind,
            ..Default::default()
        });
    }
    run.profiles.span_stacks.push(vec![0, 1, 2]);
    run
}

/// Of a slow call's time: waiting for a CPU the hog held, for the lock the compactor
/// released, on a CPU, ns.
struct Slow {
    hog: u64,
    lock: u64,
    oncpu: u64,
}

/// `base` with a span `handle` of 200 calls: 198 of 100 µs (three kept, 95 µs of each on a
/// CPU) and two slow ones made of `slow`.
fn run(slow: Slow) -> Run {
    let duration = slow.hog + slow.lock + slow.oncpu;
    let slow = |start_ns| SpanInstance {
        tgid: 100,
        tid: 101,
        start_ns,
        duration_ns: duration,
        oncpu_ns: slow.oncpu,
        blocked_ns: slow.lock,
        runqueue_ns: slow.hog,
        slow: true,
        blocked: vec![SpanWait {
            ns: slow.lock,
            count: 1,
            state: "S".into(),
            stack: Some(0),
            waker_tgid: 100,
            waker_tid: 103,
            ..Default::default()
        }],
        cpu: vec![SpanCpuWait {
            ns: slow.hog,
            tgid: 100,
            tid: 102,
            comm: "hog".into(),
        }],
        ..Default::default()
    };
    let typical = |start_ns| SpanInstance {
        tgid: 100,
        tid: 101,
        start_ns,
        duration_ns: 100_000,
        oncpu_ns: 95_000,
        runqueue_ns: 5_000,
        ..Default::default()
    };
    let mut run = base();
    run.locks.spans.push(SpanRow {
        label: "handle".into(),
        symbol: "handle".into(),
        anatomy: Some(SpanAnatomy {
            count: 200,
            total_ns: 198 * 100_000 + 2 * duration,
            hist: vec![(100_000, 198), (duration, 2)],
            instances: vec![
                slow(1_000_000),
                slow(2_000_000),
                typical(3_000_000),
                typical(4_000_000),
                typical(5_000_000),
            ],
            ..Default::default()
        }),
        ..Default::default()
    });
    run
}

#[test]
fn a_slower_tail_says_which_causes_moved_it() {
    // A: 1 ms slow calls, 60% waiting for the hog's CPU, 30% for the lock. B: 2 ms, the lock
    // 75%, the hog 15%.
    let a = run(Slow {
        hog: 600_000,
        lock: 300_000,
        oncpu: 100_000,
    });
    let b = run(Slow {
        hog: 300_000,
        lock: 1_500_000,
        oncpu: 200_000,
    });
    let (a, b) = ([a], [b]);
    let tails = tail_changes(&a, &b);
    assert_eq!(tails.len(), 1);
    let t = &tails[0];
    assert_eq!(t.name, "handle");
    assert_eq!(
        (t.a.p50, t.a.p99, t.a.p999, t.a.max),
        (100_000, 1_000_000, 1_000_000, 1_000_000)
    );
    assert_eq!(
        (t.b.p50, t.b.p99, t.b.p999, t.b.max),
        (100_000, 2_000_000, 2_000_000, 2_000_000)
    );
    let lock = "waited for a lock in demo::lock_table, released by compactor";
    let hog = "waited for a CPU, held by hog";
    let cause = |kind, what: &str, a, b, delta| CauseChange {
        kind,
        what: what.into(),
        a,
        b,
        delta,
    };
    let close = |x: &CauseChange, y: &CauseChange| {
        let near = |p: Option<f64>, q: Option<f64>| match (p, q) {
            (Some(p), Some(q)) => (p - q).abs() < 1e-9,
            (p, q) => p == q,
        };
        x.kind == y.kind
            && x.what == y.what
            && near(x.a, y.a)
            && near(x.b, y.b)
            && (x.delta - y.delta).abs() < 1e-9
    };
    // In A, on a CPU the slow calls were as the typical ones (their excess is the waits'):
    // not among A's causes. In B, 100 µs more of it is.
    let want = [
        cause(Kind::Lock, lock, Some(0.3), Some(0.75), 0.45),
        cause(Kind::Runqueue, hog, Some(0.6), Some(0.15), -0.45),
        cause(Kind::Oncpu, "ran on CPU", None, Some(0.1), 0.1),
    ];
    assert!(
        t.causes.len() == want.len() && t.causes.iter().zip(&want).all(|(x, y)| close(x, y)),
        "{:#?}",
        t.causes
    );

    // The terminal: after the table, a paragraph per span.
    let c = compare("a", &a, "b", &b);
    assert_eq!(c.tails, tails);
    let text = render_text(&c, false);
    let tail = text
        .split_once("\nslow requests, what changed")
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("{text}"));
    let want = [
        " (each span's slowest 1%; medians over each side's runs):",
        "  handle: P50 100.0 µs → 100.0 µs, P99 1.0 ms → 2.0 ms (+100.0%),",
        "    P99.9 1.0 ms → 2.0 ms (+100.0%), max 1.0 ms → 2.0 ms (+100.0%)",
        "  causes of its slowest 1%, by share of their time, A → B (-: not among that side's):",
        "     30.0% →  75.0%  +45.0 points  [lock] waited for a lock in demo::lock_table, released by compactor",
        "     60.0% →  15.0%  -45.0 points  [runqueue] waited for a CPU, held by hog",
        "         - →  10.0%  +10.0 points  [oncpu] ran on CPU",
        "",
    ];
    assert_eq!(tail, want.join("\n"));
    // The table has the percentiles, in order, after the span's other figures.
    let rows: Vec<&str> = c
        .rows
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| n.starts_with("span."))
        .collect();
    assert_eq!(
        rows,
        [
            "span.handle",
            "span.handle.per_s",
            "span.handle.time",
            "span.handle.p50",
            "span.handle.p90",
            "span.handle.p99",
            "span.handle.p99_9",
            "span.handle.max",
        ]
    );
    assert!(
        switchyard_compare::headline(&c).contains("+100% handle P99"),
        "{}",
        switchyard_compare::headline(&c)
    );

    // The page: its own section, linked from the top.
    let page = html(&c, &a, &b, false).unwrap();
    assert!(page.contains("<a href=\"#tails\">Slow requests</a>\n<a href=\"#summary\">"));
    assert!(page.contains("<section id=\"tails\">\n<h2>Slow requests: what changed</h2>"));
    assert!(page.contains(
        "<tr><td>P99</td><td class=\"num\" data-v=\"1000000\">1.0 ms</td>\
         <td class=\"num\" data-v=\"2000000\">2.0 ms</td><td class=\"num\">+100.0%</td></tr>"
    ));
    assert!(page.contains(
        "<tr class=\"k-lock\"><td><span class=\"kind\">lock</span> waited for a lock in \
         demo::lock_table, released by compactor</td><td class=\"num\">30.0%</td>\
         <td class=\"num\">75.0%</td><td class=\"num\">+45.0 points</td></tr>"
    ));

    // A run against itself: no change, its causes by their share.
    let same = tail_changes(&b, &b);
    let got: Vec<(Kind, Option<f64>, String)> = same[0]
        .causes
        .iter()
        .map(|c| (c.kind, c.a, switchyard_compare::tails::points(c.delta)))
        .collect();
    assert_eq!(
        got,
        [
            (Kind::Lock, Some(0.75), "+0.0 points".to_string()),
            (Kind::Runqueue, Some(0.15), "+0.0 points".into()),
            (Kind::Oncpu, Some(0.1), "+0.0 points".into()),
        ]
    );
    assert_eq!(same[0].a, same[0].b);

    // A run without the span: nothing to compare, no section.
    let mut bare = a[0].clone();
    bare.locks.spans.clear();
    let c = compare("a", &a, "b", &[bare.clone()]);
    assert!(c.tails.is_empty());
    assert!(!render_text(&c, false).contains("slow requests"));
    assert!(
        !html(&c, &[bare.clone()], &[bare], false)
            .unwrap()
            .contains("id=\"tails\"")
    );
}
