//! Why the slowest were slow: each span's slowest 1% against its typical instances.
//!
//! A span's instances kept whole ([`switchyard_model::SpanAnatomy`]) each split their
//! duration into time on CPU, waits for a CPU by the task that held it, and blocked time by
//! stack and waker. The slow group is every kept instance at least as slow as the P99 (from
//! the histogram of every instance); the typical group, the uniform sample of the others.
//! Each cause (kind, site, culprit) is measured over both, and ranked by how much of the slow
//! group's excess (its mean duration less the typical one's) it explains.
//!
//! What-if: the P99 recomputed over every instance's duration, with the slow group's taken
//! less that cause's time. An estimate: a wait removed can move time to another, and the
//! typical instances keep theirs.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use switchyard_model::{Label, SpanAnatomy, SpanInstance, SpanRow, term::escape, units::ns};

use crate::{Ctx, Culprit, Finding, Kind, classify, frames};

/// The slow group: the instances from this quantile up.
pub const SLOW_QUANTILE: f64 = 0.99;
/// Causes that explain less than this share of the slow group's excess are left out.
const MIN_EXCESS_SHARE: f64 = 0.02;

/// One span's tail, explained (`explain --json`'s `spans`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SpanTail {
    pub name: String,
    /// Instances that returned in the recording.
    pub count: u64,
    pub percentiles_ns: Percentiles,
    pub slow: TailGroup,
    pub typical: TailGroup,
    /// What the figures leave out (instances open at the bounds, lost, nested), in sentences.
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TailGroup {
    /// The slow group: instances at least this long (the P99); the typical group: below it.
    pub threshold_ns: u64,
    /// Instances in the group (kept whole).
    pub count: u64,
    /// Their time, s.
    pub seconds: f64,
    /// Ranked: the slow group's by the excess each explains; the typical group's by seconds.
    pub findings: Vec<TailFinding>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TailFinding {
    #[serde(flatten)]
    pub finding: Finding,
    /// The P99 with this cause's time taken out of each slow instance, ns (an estimate).
    pub what_if_p99_ns: u64,
    /// Of the slow group's excess over the typical one (mean duration), the part this cause
    /// explains (slow group only; 0 in the typical group).
    pub excess_share: f64,
}

/// The sites of a Go span's time in GC assists, runnable in the Go scheduler, blocked in a
/// system call on its thread, and parked with a reason not kept.
const GO_ASSIST: &str = "GC assist";
const GO_SCHEDULER: &str = "the Go scheduler";
const GO_SYSCALL: &str = "a system call";
const GO_PARKED: &str = "the Go runtime";
/// A Go span's parked time: the site is this and the wait reason ("parked: IO wait").
const GO_PARK: &str = "parked: ";

/// A cause: its kind, the program's site, and who caused it (a CPU's holder, a lock's
/// releaser; 0: nobody known).
type Key = (Kind, String, u32);

/// One instance's time by cause.
fn causes(cx: &Ctx, i: &SpanInstance, canon: &BTreeMap<u32, u32>) -> BTreeMap<Key, u64> {
    let mut out: BTreeMap<Key, u64> = BTreeMap::new();
    if i.go {
        go_causes(i, &mut out);
        return out;
    }
    let mut cpu_named = 0;
    for c in &i.cpu {
        let holder = canon.get(&c.tid).copied().unwrap_or(c.tid);
        *out.entry((Kind::Runqueue, String::new(), holder))
            .or_default() += c.ns;
        cpu_named += c.ns;
    }
    let cpu_rest = i.runqueue_ns.saturating_sub(cpu_named);
    if cpu_rest > 0 {
        *out.entry((Kind::Runqueue, String::new(), 0)).or_default() += cpu_rest;
    }
    let mut blocked_named = 0;
    for w in &i.blocked {
        let r = read(cx, i.tgid, &w.state, w.stack);
        let culprit = match r.kind {
            Kind::Lock | Kind::Ipc | Kind::Blocked | Kind::Idle => w.waker_tid,
            _ => 0,
        };
        let culprit = if culprit == i.tid { 0 } else { culprit };
        *out.entry((r.kind, r.site, culprit)).or_default() += w.ns;
        blocked_named += w.ns;
    }
    let blocked_rest = i.blocked_ns.saturating_sub(blocked_named);
    if blocked_rest > 0 {
        *out.entry((Kind::Blocked, String::new(), 0)).or_default() += blocked_rest;
    }
    // One key for running in both groups: each group's hot site is named in its finding.
    if i.oncpu_ns > 0 {
        *out.entry((Kind::Oncpu, String::new(), 0)).or_default() += i.oncpu_ns;
    }
    out
}

/// The CPU holders of `instances`, each to the first of its name in its process: threads of
/// one pool ("worker", "connection-0" of a load driver) are one cause, not one each.
fn holders_by_name(instances: &[SpanInstance]) -> BTreeMap<u32, u32> {
    let mut first: BTreeMap<(u32, &str), u32> = BTreeMap::new();
    for c in instances.iter().flat_map(|i| &i.cpu) {
        if !c.comm.is_empty() {
            let e = first.entry((c.tgid, c.comm.as_str())).or_insert(c.tid);
            *e = (*e).min(c.tid);
        }
    }
    instances
        .iter()
        .flat_map(|i| &i.cpu)
        .filter_map(|c| Some((c.tid, *first.get(&(c.tgid, c.comm.as_str()))?)))
        .collect()
}

/// A Go instance's time by cause: on its threads (on CPU, of it in GC assists; waiting for a
/// CPU; blocked in a system call) and on none (runnable in the Go scheduler; parked by wait
/// reason). Its goroutine moves between threads, so neither its kernel waits nor its
/// samples are split by stack. Stop-the-world and mark phases overlap these parts (a stopped
/// goroutine waits runnable): they are told in the notes, not added.
fn go_causes(i: &SpanInstance, out: &mut BTreeMap<Key, u64>) {
    let g = i.go_time.clone().unwrap_or_default();
    let mut add = |kind: Kind, site: &str, ns: u64| {
        if ns > 0 {
            *out.entry((kind, site.to_string(), 0)).or_default() += ns;
        }
    };
    let assist = g.assist_ns.min(i.oncpu_ns);
    add(Kind::Gc, GO_ASSIST, assist);
    add(Kind::Oncpu, "", i.oncpu_ns - assist);
    add(Kind::Runqueue, "", i.runqueue_ns);
    add(Kind::Blocked, GO_SYSCALL, i.blocked_ns);
    add(Kind::Runqueue, GO_SCHEDULER, g.sched_ns);
    for p in &g.parked {
        add(
            switchyard_runtimes::go::reason_kind(&p.reason),
            &format!("{GO_PARK}{}", p.reason),
            p.ns,
        );
    }
    add(Kind::Blocked, GO_PARKED, g.other_parked_ns);
}

/// A Go finding of parked time, given where `group` parked for its reason (the program's
/// frame with the most of that time): "parked: sync.Mutex.Lock in main.handle".
fn go_park_detail(cx: &Ctx, group: &[&SpanInstance], key: &Key, f: &mut Finding) {
    let Some(reason) = key.1.strip_prefix(GO_PARK) else {
        return;
    };
    let mut at: BTreeMap<String, u64> = BTreeMap::new();
    // Who made them ready, by where the waker was: ns, a thread, its frames.
    let mut wakers: BTreeMap<String, (u64, u32, Vec<String>)> = BTreeMap::new();
    for g in group.iter().filter_map(|i| i.go_time.as_ref()) {
        for p in g.parked.iter().filter(|p| p.reason == reason) {
            let parked_at = stack_frames(cx, p.stack);
            if !parked_at.is_empty() {
                *at.entry(classify::site(&parked_at)).or_default() += p.ns;
            }
            let woke_at = stack_frames(cx, p.waker_stack);
            if !woke_at.is_empty() {
                let e = wakers.entry(classify::site(&woke_at)).or_insert((
                    0,
                    p.waker_tid,
                    classify::user_names(&woke_at),
                ));
                e.0 += p.ns;
            }
        }
    }
    if let Some((site, _)) = at.into_iter().max_by_key(|(_, ns)| *ns)
        && !site.is_empty()
    {
        f.site = format!("{GO_PARK}{reason} in {site}");
    }
    // A goroutine is made ready on the system stack; the walk from there crosses to the
    // waking goroutine's frames, so the site is where that goroutine released it.
    if let Some((site, (_, tid, frames))) = wakers.into_iter().max_by_key(|(_, (ns, ..))| *ns) {
        let doing = if site.is_empty() || switchyard_runtimes::go::is_runtime(&site) {
            GO_RUNTIME_WAKER.to_string()
        } else {
            format!("{GO_WAKER}{site}")
        };
        f.culprit = Some(cx.thread_culprit(tid, doing, frames));
    }
}

/// A Go park's culprit's `doing`: a goroutine, where it made the parked one ready.
const GO_WAKER: &str = "a goroutine in ";
/// … or the runtime itself (a timer, the scheduler, the network poller).
const GO_RUNTIME_WAKER: &str = "the Go runtime";

fn read(cx: &Ctx, tgid: u32, state: &Label, stack: Option<u32>) -> classify::Reading {
    let frames = stack
        .and_then(|s| cx.run.profiles.span_stacks.get(s as usize))
        .map(Vec::as_slice)
        .unwrap_or_default();
    cx.reader.read_as(tgid, state, frames)
}

fn stack_frames<'a>(cx: &Ctx<'a>, stack: Option<u32>) -> Vec<&'a switchyard_model::Frame> {
    stack
        .and_then(|s| cx.run.profiles.span_stacks.get(s as usize))
        .map(|f| frames(cx.run, f))
        .unwrap_or_default()
}

/// The hottest on-CPU site of a group of instances, from their samples.
fn hot_site(cx: &Ctx, group: &[&SpanInstance]) -> (String, Vec<String>) {
    let mut by: BTreeMap<String, (u64, Vec<String>)> = BTreeMap::new();
    for i in group {
        for s in &i.samples {
            let f = stack_frames(cx, s.stack);
            let e = by
                .entry(classify::site(&f))
                .or_insert((0, classify::user_names(&f)));
            e.0 += s.samples as u64;
        }
    }
    by.into_iter()
        .filter(|(site, _)| !site.is_empty())
        .max_by_key(|(_, (n, _))| *n)
        .map(|(site, (_, frames))| (site, frames))
        .unwrap_or_default()
}

/// Every instance's duration from the histogram, as (value, count), with the slow group's
/// taken from the instances themselves (`slow`), each less what `less` says.
fn p99_without(a: &SpanAnatomy, slow: impl Iterator<Item = (u64, u64)>) -> u64 {
    let mut values: BTreeMap<u64, i64> = a.hist.iter().map(|&(v, n)| (v, n as i64)).collect();
    let bucket_of = |d: u64| {
        a.hist
            .iter()
            .rev()
            .find(|(low, _)| *low <= d)
            .map_or(0, |(low, _)| *low)
    };
    for (duration, less) in slow {
        *values.entry(bucket_of(duration)).or_default() -= 1;
        *values.entry(duration.saturating_sub(less)).or_default() += 1;
    }
    let total: i64 = values.values().filter(|n| **n > 0).sum();
    let above = ((total as f64) * (1.0 - SLOW_QUANTILE) - 1e-6)
        .ceil()
        .max(1.0) as i64;
    let mut seen = 0;
    for (v, n) in values.iter().rev() {
        seen += (*n).max(0);
        if seen >= above {
            return *v;
        }
    }
    0
}

/// The label a span goes by.
pub fn span_name(s: &SpanRow) -> &str {
    if s.label.is_empty() {
        &s.symbol
    } else {
        &s.label
    }
}

/// Every span with instances measured one by one, its tail explained.
pub(crate) fn tails(cx: &Ctx) -> Vec<SpanTail> {
    cx.run
        .locks
        .spans
        .iter()
        .filter_map(|s| Some((s, s.anatomy.as_ref()?)))
        .filter(|(_, a)| a.count > 0)
        .map(|(s, a)| tail(cx, span_name(s), a))
        .collect()
}

/// One span's tail: its slowest 1% against its typical instances, each group's causes ranked.
fn tail(cx: &Ctx, name: &str, a: &SpanAnatomy) -> SpanTail {
    let p99 = a.at_quantile(0.99);
    let percentiles = Percentiles {
        p50: a.at_quantile(0.5),
        p90: a.at_quantile(0.9),
        p99,
        p999: a.at_quantile(0.999),
        max: a.max_ns(),
    };
    let (slow, typical) = slow_and_typical(a, p99);
    let notes = notes(name, a, &slow, &typical);
    // Each instance's causes, read once: the sums and every what-if use them.
    let canon = holders_by_name(&a.instances);
    let slow = Instances::new(cx, slow, &canon);
    let typical = Instances::new(cx, typical, &canon);
    let slow_findings = slow_findings(cx, name, a, &percentiles, &slow, &typical);
    let typical_findings = typical_findings(cx, name, p99, &typical);
    SpanTail {
        name: name.to_string(),
        count: a.count,
        percentiles_ns: percentiles,
        slow: TailGroup {
            threshold_ns: p99,
            count: slow.all.len() as u64,
            seconds: slow.total as f64 / 1e9,
            findings: slow_findings,
        },
        typical: TailGroup {
            threshold_ns: p99,
            count: typical.all.len() as u64,
            seconds: typical.total as f64 / 1e9,
            findings: typical_findings,
        },
        notes,
    }
}

/// How many instances the slowest 1% holds: ceil(count / 100), at least one.
fn slowest_count(a: &SpanAnatomy) -> u64 {
    a.count.div_ceil(100).max(1)
}

/// The span's slowest 1% and its typical instances, of those kept whole.
fn slow_and_typical(a: &SpanAnatomy, p99: u64) -> (Vec<&SpanInstance>, Vec<&SpanInstance>) {
    // The slowest 1%: exactly ceil(count / 100) instances (at least one), the slowest kept
    // whole from the P99 up. The P99 is a bucket's lowest value, and instances in its bucket
    // below the true P99 would join the group by that alone.
    let mut slow: Vec<&SpanInstance> = a
        .instances
        .iter()
        .filter(|i| i.slow && i.duration_ns >= p99)
        .collect();
    slow.sort_by_key(|i| std::cmp::Reverse(i.duration_ns));
    slow.truncate(slowest_count(a) as usize);
    let typical: Vec<&SpanInstance> = a
        .instances
        .iter()
        .filter(|i| !i.slow && i.duration_ns < p99)
        .collect();
    (slow, typical)
}

/// What a span's figures leave out (instances lost, open at the bounds, nested), in sentences.
fn notes(
    name: &str,
    a: &SpanAnatomy,
    slow: &[&SpanInstance],
    typical: &[&SpanInstance],
) -> Vec<String> {
    let expected = slowest_count(a);
    let mut notes = Vec::new();
    if (slow.len() as u64) < expected {
        notes.push(format!(
            "{} of the {expected} instances of the slowest 1% were kept whole ({} lost or not sent)",
            slow.len(),
            expected - slow.len() as u64
        ));
    }
    if a.open_at_start > 0 {
        notes.push(format!(
            "{} instances entered before the recording started were not counted",
            a.open_at_start
        ));
    }
    if a.open_at_stop > 0 {
        notes.push(format!(
            "{} instances were still open at the stop (not counted)",
            a.open_at_stop
        ));
    }
    if a.never_returned > 0 {
        notes.push(format!(
            "{} instances never returned: their thread exited inside them",
            a.never_returned
        ));
    }
    if a.missed > 0 {
        notes.push(format!(
            "{} instances' returns were not seen (a later call on their goroutine began at their depth or above): not timed",
            a.missed
        ));
    }
    if a.nested > 0 {
        notes.push(format!(
            "{} nested or recursive calls were inside an instance (the outermost counts)",
            a.nested
        ));
    }
    if a.dropped > 0 {
        notes.push(format!(
            "{} slow instances were not kept whole (the table of the slowest was full of slower ones, or the ring buffer was: until the first threshold, 100 ms in, every instance is sent)",
            a.dropped
        ));
    }
    if name == crate::otel::NAME {
        notes.push(
            "OpenTelemetry spans are read from the thread context at switches, with no probe per request: each one's time off CPU, blocked and waiting for a CPU, is exact; its time on CPU only between two switches inside it, so they are ranked by the time seen, and a span that never switched is not seen".into(),
        );
    }
    if slow.iter().chain(typical).any(|i| i.go) {
        notes.extend(go_notes(slow, typical));
    }
    notes
}

/// A Go span's notes: its time on threads is not split, and how much of each group the GC's
/// mark phases and stop-the-world pauses overlapped.
fn go_notes(slow: &[&SpanInstance], typical: &[&SpanInstance]) -> Vec<String> {
    let mut notes = vec![
        "a Go span's goroutine moves between threads: its time on them is not split by stack or by the task that held the CPU; its time on none is split by the Go scheduler's states (runnable, parked by wait reason)".to_string(),
    ];
    let overlap = |g: &[&SpanInstance], part: fn(&SpanInstance) -> u64| {
        let all: u64 = g.iter().map(|i| i.duration_ns).sum();
        let within: u64 = g.iter().map(|i| part(i)).sum();
        let hit = g.iter().filter(|i| part(i) > 0).count();
        (within as f64 / all.max(1) as f64, hit, g.len())
    };
    for (what, part) in [
        (
            "GC mark phases",
            (|i: &SpanInstance| i.gc_mark_ns) as fn(&SpanInstance) -> u64,
        ),
        ("stop-the-world pauses", |i: &SpanInstance| i.gc_stw_ns),
    ] {
        let (s_share, s_hit, s_n) = overlap(slow, part);
        let (t_share, t_hit, t_n) = overlap(typical, part);
        notes.push(format!(
            "{what}: {s_hit} of the {s_n} slowest instances overlapped one ({} of their time), against {t_hit} of {t_n} typical ones ({} of theirs)",
            switchyard_model::units::percent(s_share),
            switchyard_model::units::percent(t_share)
        ));
    }
    notes
}

/// A group of a span's instances (its slowest 1%, or its typical ones) and their time by
/// cause.
struct Instances<'a> {
    all: Vec<&'a SpanInstance>,
    /// Each instance's time by cause, in `all`'s order.
    causes: Vec<BTreeMap<Key, u64>>,
    /// The group's time by cause, ns.
    by: BTreeMap<Key, u64>,
    /// The group's whole time, ns.
    total: u64,
    /// Its hottest on-CPU site and that site's frames.
    hot: (String, Vec<String>),
}

impl<'a> Instances<'a> {
    /// Reads each instance's causes (CPU holders to their pools, `canon`) and sums them.
    fn new(cx: &Ctx, all: Vec<&'a SpanInstance>, canon: &BTreeMap<u32, u32>) -> Instances<'a> {
        let causes: Vec<BTreeMap<Key, u64>> = all.iter().map(|i| causes(cx, i, canon)).collect();
        let mut by: BTreeMap<Key, u64> = BTreeMap::new();
        for c in &causes {
            for (k, v) in c {
                *by.entry(k.clone()).or_default() += v;
            }
        }
        Instances {
            total: all.iter().map(|i| i.duration_ns).sum(),
            hot: hot_site(cx, &all),
            all,
            causes,
            by,
        }
    }

    /// The group's time in cause `key`, ns.
    fn in_cause(&self, key: &Key) -> u64 {
        self.by.get(key).copied().unwrap_or(0)
    }

    /// `ns` per instance of the group.
    fn mean(&self, ns: u64) -> f64 {
        if self.all.is_empty() {
            0.0
        } else {
            ns as f64 / self.all.len() as f64
        }
    }
}

/// The slowest 1%'s causes that explain enough of their excess over the typical instances,
/// each with the P99 without it; ranked by the excess each explains.
fn slow_findings(
    cx: &Ctx,
    name: &str,
    a: &SpanAnatomy,
    percentiles: &Percentiles,
    slow: &Instances,
    typical: &Instances,
) -> Vec<TailFinding> {
    let p99 = percentiles.p99;
    let excess = slow.mean(slow.total) - typical.mean(typical.total);
    let head = format!(
        "the slowest 1% of {} (P99 {}, against P50 {})",
        escape(name),
        ns(p99),
        ns(percentiles.p50)
    );
    let mut findings: Vec<TailFinding> = Vec::new();
    for (key, &v) in &slow.by {
        let delta = slow.mean(v) - typical.mean(typical.in_cause(key));
        let excess_share = if excess > 0.0 { delta / excess } else { 0.0 };
        if excess_share < MIN_EXCESS_SHARE {
            continue;
        }
        let share = v as f64 / slow.total.max(1) as f64;
        let typical_share = typical.in_cause(key) as f64 / typical.total.max(1) as f64;
        // Taking time out never lengthens the P99 (the instances kept whole are exact, the
        // histogram's at their buckets' lowest: never above it).
        let what_if = p99_without(
            a,
            slow.all
                .iter()
                .zip(&slow.causes)
                .map(|(i, c)| (i.duration_ns, c.get(key).copied().unwrap_or(0))),
        )
        .min(p99);
        let mut f = finding(cx, key, v, share, &slow.all, &slow.hot);
        go_park_detail(cx, &slow.all, key, &mut f);
        let mut sentence = format!(
            "{head} spent {} of their time {}",
            switchyard_model::units::percent(share),
            what(key, &f)
        );
        sentence += &format!(
            " (the typical ones: {}); it explains {} of their excess over the typical ones",
            switchyard_model::units::percent(typical_share),
            switchyard_model::units::percent(excess_share.min(1.0))
        );
        sentence += &format!(
            ". Without it, P99 would be about {} (an estimate: removing one wait can move time to another)",
            ns(what_if)
        );
        f.summary = sentence;
        f.evidence = format!(
            "span {}: {} slowest instances kept whole against {} typical ones sampled",
            escape(name),
            slow.all.len(),
            typical.all.len()
        );
        findings.push(TailFinding {
            finding: f,
            what_if_p99_ns: what_if,
            excess_share,
        });
    }
    findings.sort_by(|a, b| b.excess_share.total_cmp(&a.excess_share));
    findings
}

/// The typical instances' causes of 2% of their time or more, ranked by seconds.
fn typical_findings(cx: &Ctx, name: &str, p99: u64, typical: &Instances) -> Vec<TailFinding> {
    let mut findings: Vec<TailFinding> = typical
        .by
        .iter()
        .filter(|(_, v)| **v as f64 >= typical.total as f64 * 0.02)
        .map(|(key, &v)| {
            let share = v as f64 / typical.total.max(1) as f64;
            let mut f = finding(cx, key, v, share, &typical.all, &typical.hot);
            go_park_detail(cx, &typical.all, key, &mut f);
            f.summary = format!(
                "the typical instances of {} spent {} of their time {}",
                escape(name),
                switchyard_model::units::percent(share),
                what(key, &f)
            );
            f.evidence = format!(
                "span {}: {} typical instances sampled",
                escape(name),
                typical.all.len()
            );
            TailFinding {
                finding: f,
                what_if_p99_ns: p99,
                excess_share: 0.0,
            }
        })
        .collect();
    findings.sort_by(|a, b| b.finding.seconds.total_cmp(&a.finding.seconds));
    findings
}

/// The finding for one cause over a group: its threads, site and culprit.
fn finding(
    cx: &Ctx,
    key: &Key,
    v: u64,
    share: f64,
    group: &[&SpanInstance],
    hot: &(String, Vec<String>),
) -> Finding {
    let (kind, site, culprit_tid) = key;
    let site = if *kind == Kind::Oncpu { &hot.0 } else { site };
    let tids: BTreeSet<u32> = group.iter().map(|i| i.tid).collect();
    let culprit = match kind {
        Kind::Runqueue if *culprit_tid != 0 => Some(cpu_holder(cx, group, *culprit_tid)),
        Kind::Oncpu => None,
        _ if *culprit_tid != 0 => Some(releaser(cx, group, key)),
        _ => None,
    };
    Finding {
        kind: *kind,
        seconds: v as f64 / 1e9,
        share,
        threads: tids.iter().map(|t| cx.name(*t)).collect(),
        tids: tids.into_iter().collect(),
        site: site.clone(),
        culprit,
        ..Default::default()
    }
}

/// The task that held the CPU: named as the kernel saw it, placed by its process.
fn cpu_holder(cx: &Ctx, group: &[&SpanInstance], tid: u32) -> Culprit {
    let c = group
        .iter()
        .flat_map(|i| &i.cpu)
        .find(|c| c.tid == tid)
        .cloned()
        .unwrap_or_default();
    let (process, same_process) = cx.process_of(c.tgid);
    let (doing, frames) = if same_process {
        cx.running(tid)
            .unwrap_or_else(|| ("running".into(), Vec::new()))
    } else {
        ("running".into(), Vec::new())
    };
    Culprit {
        thread: if c.comm.is_empty() {
            cx.name(tid)
        } else {
            c.comm
        },
        tid,
        process,
        pid: c.tgid,
        same_process,
        nice: None,
        cpu: None,
        doing,
        frames,
    }
}

/// The thread that woke the waits of cause `key`, and what it did while they waited: its own
/// time off CPU within them (the held part), else where it was when it woke them.
fn releaser(cx: &Ctx, group: &[&SpanInstance], key: &Key) -> Culprit {
    let (kind, site, tid) = key;
    // What the releaser did, by (doing, site): ns, frames.
    let mut held: BTreeMap<(String, String), (u64, Vec<String>)> = BTreeMap::new();
    let mut waits = 0;
    for i in group {
        for w in i.blocked.iter().filter(|w| w.waker_tid == *tid) {
            let r = read(cx, i.tgid, &w.state, w.stack);
            if r.kind != *kind || r.site != *site {
                continue;
            }
            waits += w.ns;
            if w.held_ns > 0 {
                let f = stack_frames(cx, w.held_stack);
                let doing = match &w.held_state {
                    Label::Uninterruptible => "in I/O",
                    l if l.waits_for_cpu() => "waiting for a CPU",
                    _ => "sleeping",
                };
                let e = held
                    .entry((doing.into(), classify::site(&f)))
                    .or_insert((0, classify::user_names(&f)));
                e.0 += w.held_ns;
            }
            let f = stack_frames(cx, w.waker_stack);
            let running = w.ns.saturating_sub(w.held_ns);
            if running > 0 && !f.is_empty() {
                let e = held
                    .entry(("running".into(), classify::site(&f)))
                    .or_insert((0, classify::user_names(&f)));
                e.0 += running;
            }
        }
    }
    let best = held.into_iter().max_by_key(|(_, (n, _))| *n);
    let (doing, frames) = match best {
        Some(((doing, site), (n, frames))) if n * 4 >= waits => {
            let doing = if site.is_empty() {
                doing
            } else {
                format!("{doing} in {site}")
            };
            (doing, frames)
        }
        _ => ("running".into(), Vec::new()),
    };
    cx.thread_culprit(*tid, doing, frames)
}

/// The cause in words, for a sentence: "waiting for a lock in lock_table, released by
/// compactor, which was sleeping in compact_table holding it".
fn what(key: &Key, f: &Finding) -> String {
    let kind = key.0;
    let site = &f.site;
    let at = if site.is_empty() {
        String::new()
    } else {
        format!(" in {}", escape(site))
    };
    let base = match kind {
        Kind::Gc if site == GO_ASSIST => "assisting the Go GC (marking, on CPU)".to_string(),
        Kind::Runqueue if site == GO_SCHEDULER => {
            "runnable, waiting in the Go scheduler for a thread".to_string()
        }
        Kind::Blocked if site == GO_SYSCALL => "blocked in a system call".to_string(),
        _ if site == GO_PARKED => "parked by the Go runtime".to_string(),
        _ if site.starts_with(GO_PARK) => format!(
            "parked by the Go runtime ({})",
            escape(&site[GO_PARK.len()..])
        ),
        Kind::Runqueue => "waiting for a CPU".to_string(),
        Kind::Oncpu => format!("running{at}"),
        Kind::Lock => format!("waiting for a lock{at}"),
        Kind::Io => format!("in block I/O{at}"),
        Kind::Net => format!("waiting on the network{at}"),
        Kind::Sleep => format!("sleeping on a timer{at}"),
        Kind::Fault => format!("in page faults{at}"),
        Kind::Ipc => format!("waiting on a pipe or child{at}"),
        Kind::Gc => format!("waiting on the Go GC{at}"),
        Kind::Idle => format!("waiting for work{at}"),
        Kind::Blocked => format!("blocked{at}"),
    };
    match &f.culprit {
        Some(c) if kind == Kind::Runqueue => format!(
            "{base} held by {} ({}{})",
            escape(&c.thread),
            if c.same_process {
                "a thread of the target"
            } else {
                "another process"
            },
            if c.doing.is_empty() || c.doing == "running" {
                String::new()
            } else {
                format!(", {}", escape(&c.doing))
            }
        ),
        Some(c) if site.starts_with(GO_PARK) => format!(
            "{base}, made ready by {} (thread {})",
            escape(&c.doing),
            escape(&c.thread)
        ),
        Some(c) if kind == Kind::Lock => format!(
            "{base}, released by {}, which was {} holding it",
            escape(&c.thread),
            escape(&c.doing)
        ),
        Some(c) => format!("{base}, woken by {}", escape(&c.thread)),
        None => base,
    }
}
