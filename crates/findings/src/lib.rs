//! Why a run waited, and who made it wait: one pure function of a [`Run`] turns its figures
//! into ranked findings, each with its seconds, threads, culprit and evidence. The summary,
//! the report page, compare's "what changed", gate's failures and `switchyard explain` all
//! read this one list; none of them computes a cause or writes its sentence.
//!
//! Where each figure comes from:
//! - **waiting for a CPU**: the thread rows (exact: preempted or woken → switch-in), and who
//!   held the CPU from `runqueue_holders` (the task each waiter took the CPU from);
//! - **every other wait**: the off-CPU profile, each stack read by [`classify`] (the kernel
//!   frames say which wait, the user frames what for and where); a thread's blocked time no
//!   walked stack covers is "blocked" with no cause;
//! - **the GIL**: a futex wait whose user stack waited (in the futex profile) on a word inside
//!   the interpreter's GIL, placed by the recorder from `_PyRuntime` and the version's layout
//!   (`run.locks.runtime_locks`), read by [`Reader`]; a fighter's wait for a CPU another
//!   fighter held is the GIL's too;
//! - **a lock's holder**: the thread that woke the waiters (the wakeup profile's waker: the
//!   thread that released the lock), and what that thread did while they waited: the held
//!   profile, joined in the kernel at each wakeup (the part of the waker's last interval off
//!   CPU within the wait, and its running since); a run without it, by its heaviest stack;
//! - **a CPU's holder**: where it ran (its on-CPU samples and the stacks it was preempted at);
//! - **on CPU**: the thread rows' on-CPU time, and the on-CPU profile's hottest site; the Go
//!   GC's work and its mark assists are split off by their samples, and every running
//!   finding's share is of the process's CPU time.
//!
//! Limits: a lock's holder's doing is read over its last interval off CPU and its running
//! since, within each wait (an earlier interval inside a long wait is not seen); a lock
//! handed between many threads names the one that released it most. Runtimes whose
//! mutexes keep no owner (Rust std, Go) are named the same way, by their releaser.

pub mod classify;
mod compare;
mod gate;
mod otel;
pub mod tail;

use std::collections::{BTreeMap, BTreeSet, btree_map::Entry};

use serde::{Deserialize, Serialize};
use switchyard_model::{
    Frame, Label, Run, RunqueueHolder, Stack, ThreadRow,
    term::escape,
    units::{ns, percent},
};

pub use classify::{Kind, Reading, classify};
pub use compare::{Change, Changes, changes};
pub use gate::behind;
pub use switchyard_runtimes::go::reason_kind as go_reason_kind;

/// Bumped when a field of the JSON changes meaning or goes away (fields may be added).
/// 2: `spans`, the slow requests' anatomy.
pub const SCHEMA_VERSION: u32 = 2;

/// Findings smaller than this share of their threads' time are left out, as are those under
/// a millisecond.
const MIN_SHARE: f64 = 0.02;
const MIN_NS: f64 = 1e6;

/// The answer for one run: `switchyard explain --json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Explanation {
    pub schema_version: u32,
    /// The recording's length, s.
    pub duration_s: f64,
    /// Operations the workload completed, when known (`null` when not: the contract lists
    /// every field, docs/explain.md).
    #[serde(default)]
    pub operations: Option<u64>,
    /// Each span's slowest 1% against its typical instances (`record --span`); `[]` without
    /// spans. Led with: a request's tail is what its users feel.
    #[serde(default)]
    pub spans: Vec<tail::SpanTail>,
    /// Ranked: the request path's findings by seconds, then idle ones by seconds.
    pub findings: Vec<Finding>,
    /// Throttling by the target's cgroup CPU quota, in a sentence, when it happened (`null`
    /// when not).
    #[serde(default)]
    pub throttled: Option<String>,
    /// What the answer could not use, in sentences (no stacks, no holders, …); `[]` when
    /// nothing was missing.
    #[serde(default)]
    pub limits: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    pub kind: Kind,
    /// Thread time in this finding, s.
    pub seconds: f64,
    /// A wait's: of its threads' time (on CPU + off CPU over the recording), the threads
    /// that waited so. Running (on CPU, the Go GC's work, its pauses): of the process's CPU
    /// time.
    pub share: f64,
    /// Thread names, and their ids in the same order.
    pub threads: Vec<String>,
    pub tids: Vec<u32>,
    /// The program's own innermost function the threads waited (or ran) in.
    pub site: String,
    /// Who made them wait: the CPU's holder, the lock's holder. For a wait with no other
    /// party (I/O, a sleep, idle), `None`.
    pub culprit: Option<Culprit>,
    /// Where the figure comes from: which profile, which stack.
    pub evidence: String,
    /// The finding in one plain sentence.
    pub summary: String,
    /// A lock's address (futex word), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The static or global variable that is the lock, when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// After this wait's wakeups, the threads then waited this long for a CPU, s (counted in
    /// the threads' "runqueue" finding, not in `seconds`): the wait's whole cost is the sum.
    #[serde(default, skip_serializing_if = "is_zero", alias = "then_cpu_s")]
    pub then_runqueue_s: f64,
    /// When it happened, from the timeline (runs recorded with `--timeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// `share` is of the process's CPU time (running, the Go GC's work and pauses), not of
    /// the threads' time.
    #[serde(default, skip_serializing_if = "is_false")]
    pub of_process_cpu: bool,
}

fn is_false(v: &bool) -> bool {
    !*v
}

impl Finding {
    /// What `share` is a share of, for a sentence: "of the process's CPU", "of their time".
    pub fn share_of(&self) -> &'static str {
        if self.of_process_cpu {
            "of the process's CPU"
        } else if self.threads.len() == 1 {
            "of its time"
        } else {
            "of their time"
        }
    }
}

/// When a finding's intervals fell, s from the recording's start.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct When {
    pub first_s: f64,
    pub last_s: f64,
    /// Timeline intervals (or samples, on CPU) that make it up.
    pub intervals: u64,
}

impl When {
    /// The tail a finding's sentence carries: " [12 intervals from 0.50 s to 2.25 s]".
    pub fn tail(&self) -> String {
        format!(
            " [{} intervals from {:.2} s to {:.2} s]",
            self.intervals, self.first_s, self.last_s
        )
    }
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Culprit {
    pub thread: String,
    pub tid: u32,
    /// The culprit's process: the target's command name, or "pid N" for another process.
    pub process: String,
    pub pid: u32,
    /// True when the culprit is a thread of the recorded process (or a followed child).
    pub same_process: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// What it was doing: "running", "sleeping", "waiting for a CPU", "in I/O", …
    pub doing: String,
    /// Its frames while doing it, innermost first (user frames; empty when not sampled).
    pub frames: Vec<String>,
}

/// One stack's time, read.
struct Piece<'a> {
    tid: u32,
    reading: Reading,
    ns: f64,
    stack: &'a Stack,
}

/// Blocked time spent waiting for work, ns: the off-CPU stacks [`classify`] reads as idle.
/// The summary and the page leave it out of the off-CPU headline, and the page's flame graphs
/// hide those stacks, by this one reading.
pub fn idle_offcpu_ns(run: &Run) -> u64 {
    let reader = Reader::new(run);
    run.profiles
        .offcpu
        .stacks
        .iter()
        .filter(|s| reader.read(s).kind == Kind::Idle)
        .map(|s| s.value)
        .sum()
}

/// Reads a run's stacks as [`classify`] does, and knows the runtime locks' waits: a futex
/// wait whose user stack waited on a word inside a runtime's lock (CPython's GIL, placed by
/// the recorder from `_PyRuntime` and the version's layout) is a wait for that lock, though a
/// stripped interpreter names no `take_gil` and its stack reads as a condition variable.
pub struct Reader<'a> {
    run: &'a Run,
    /// (tgid, user frames) → (ns on a runtime lock's words, ns on any word), from the futex
    /// profile.
    futex: BTreeMap<(u32, Vec<u32>), (u64, u64)>,
}

impl<'a> Reader<'a> {
    pub fn new(run: &'a Run) -> Reader<'a> {
        let mut futex: BTreeMap<(u32, Vec<u32>), (u64, u64)> = BTreeMap::new();
        if !run.locks.runtime_locks.is_empty() {
            for s in &run.profiles.futex.stacks {
                let e = futex
                    .entry((s.tgid, user_frames(run, &s.frames)))
                    .or_default();
                if run.locks.runtime_lock(s.tgid, s.label.as_str()).is_some() {
                    e.0 += s.value;
                }
                e.1 += s.value;
            }
        }
        Reader { run, futex }
    }

    /// One stack of the run, read.
    pub fn read(&self, s: &Stack) -> Reading {
        self.read_as(s.tgid, &s.label, &s.frames)
    }

    /// A stack of process `tgid` in state `label` with `frames` (indices into the run's
    /// frames, root first), read.
    pub fn read_as(&self, tgid: u32, label: &Label, frames: &[u32]) -> Reading {
        let mut r = classify(label, &self::frames(self.run, frames));
        // A futex wait (a lock, or a condition variable's park) on the runtime's lock.
        if matches!(r.kind, Kind::Lock | Kind::Idle)
            && r.because != classify::GIL_WAIT
            && !self.futex.is_empty()
            && let Some(&(on, all)) = self.futex.get(&(tgid, user_frames(self.run, frames)))
            && on * 2 > all
        {
            r.kind = Kind::Lock;
            r.because = classify::GIL_WAIT.into();
        }
        r
    }
}

/// The run-queue time of threads fighting for the GIL that another fighter held the CPU for,
/// by waiter, ns. A fighter preempted by (or woken behind) the thread that runs Python could
/// not have run Python before taking the GIL back: that wait is the GIL's, not the CPU's
/// (more CPUs would not end it). Fighters: the threads with GIL waits in the off-CPU profile.
fn behind_gil(run: &Run, reader: &Reader) -> (BTreeSet<u32>, BTreeMap<u32, f64>) {
    let fighters: BTreeSet<u32> = run
        .profiles
        .offcpu
        .stacks
        .iter()
        .filter(|s| !s.label.waits_for_cpu())
        .filter(|s| reader.read(s).because == classify::GIL_WAIT)
        .map(|s| s.tid)
        .collect();
    let mut held: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for h in &run.runqueue_holders {
        let e = held.entry(h.tid).or_default();
        if fighters.contains(&h.tid) && h.holder_tid != h.tid && fighters.contains(&h.holder_tid) {
            e.0 += h.ns;
        }
        e.1 += h.ns;
    }
    let behind = run
        .threads
        .iter()
        .filter_map(|t| {
            let &(by, all) = held.get(&t.tid)?;
            (by > 0).then(|| (t.tid, t.runqueue_ns as f64 * by as f64 / all as f64))
        })
        .collect();
    (fighters, behind)
}

/// The user frames of a stack (the frames before its kernel ones), as indices.
fn user_frames(run: &Run, indices: &[u32]) -> Vec<u32> {
    indices
        .iter()
        .copied()
        .filter(|&i| {
            run.profiles
                .frames
                .get(i as usize)
                .is_some_and(|f| f.kind != switchyard_model::FrameKind::Kernel)
        })
        .collect()
}

/// The run's frames at `indices` (a stack's, a timeline stack's), root first.
pub fn frames<'a>(run: &'a Run, indices: &[u32]) -> Vec<&'a Frame> {
    indices
        .iter()
        .filter_map(|&i| run.profiles.frames.get(i as usize))
        .collect()
}

fn frames_of<'a>(run: &'a Run, s: &Stack) -> Vec<&'a Frame> {
    frames(run, &s.frames)
}

/// A thread name with its numbers taken out, so a pool's threads group: "producer-3" →
/// "producer-#".
fn pattern(name: &str) -> String {
    let mut out = String::new();
    let mut digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !digits {
                out.push('#');
            }
            digits = true;
        } else {
            out.push(c);
            digits = false;
        }
    }
    out
}

/// Threads named as a list: "worker", "producer-1, producer-2", "producer-1 … producer-8 (8
/// threads)", "worker (2 threads)" for two of one name.
pub fn thread_list(names: &[String]) -> String {
    if names.len() > 1 && names.iter().all(|n| *n == names[0]) {
        return format!("{} ({} threads)", names[0], names.len());
    }
    match names.len() {
        0 => "no thread".into(),
        1..=3 => names.join(", "),
        n => format!("{} … {} ({n} threads)", names[0], names[n - 1]),
    }
}

struct Ctx<'a> {
    run: &'a Run,
    reader: Reader<'a>,
    /// Waits for a CPU that were the GIL's, by waiter: the part of a GIL fighter's run-queue
    /// time the CPU was held by another fighter (see [`behind_gil`]), ns.
    behind_gil: BTreeMap<u32, f64>,
    /// The threads with GIL waits.
    gil_fighters: BTreeSet<u32>,
    comm: BTreeMap<u32, &'a str>,
    total: BTreeMap<u32, u64>,
    targets: BTreeSet<u32>,
    process: String,
}

impl<'a> Ctx<'a> {
    fn new(run: &'a Run) -> Ctx<'a> {
        let comm = run
            .threads
            .iter()
            .map(|t| (t.tid, t.comm.as_str()))
            .collect();
        let total = run
            .threads
            .iter()
            .map(|t| (t.tid, t.oncpu_ns + t.offcpu_ns()))
            .collect();
        let mut targets: BTreeSet<u32> = run.meta.children.iter().copied().collect();
        targets.insert(run.meta.pid);
        targets.extend(run.threads.iter().map(|t| t.tgid));
        let process = run
            .meta
            .command
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
            .unwrap_or_default();
        let reader = Reader::new(run);
        let (gil_fighters, behind_gil) = behind_gil(run, &reader);
        Ctx {
            run,
            reader,
            behind_gil,
            gil_fighters,
            comm,
            total,
            targets,
            process,
        }
    }

    fn name(&self, tid: u32) -> String {
        self.comm
            .get(&tid)
            .map_or_else(|| format!("tid {tid}"), |c| c.to_string())
    }

    fn threads_time(&self, tids: &BTreeSet<u32>) -> f64 {
        tids.iter()
            .map(|t| self.total.get(t).copied().unwrap_or(0))
            .sum::<u64>() as f64
    }

    fn process_of(&self, tgid: u32) -> (String, bool) {
        if self.targets.contains(&tgid) {
            (self.process.clone(), true)
        } else if tgid == 0 {
            ("the idle task".into(), false)
        } else {
            (format!("pid {tgid}"), false)
        }
    }

    /// Thread `tid` of the run as a culprit, doing `doing` in `frames` (innermost first).
    fn thread_culprit(&self, tid: u32, doing: String, frames: Vec<String>) -> Culprit {
        let tgid = self
            .run
            .threads
            .iter()
            .find(|t| t.tid == tid)
            .map_or(0, |t| t.tgid);
        let (process, same_process) = self.process_of(tgid);
        Culprit {
            thread: self.name(tid),
            tid,
            process,
            pid: tgid,
            same_process,
            nice: None,
            cpu: None,
            doing,
            frames,
        }
    }

    /// Thread `tid`'s on-CPU samples as (site, user frames innermost first, ns): its exact
    /// on-CPU time shared by its samples.
    fn oncpu_sites(&self, tid: u32) -> Vec<(String, Vec<String>, f64)> {
        let p = &self.run.profiles;
        let mine = || p.oncpu.stacks.iter().filter(move |s| s.tid == tid);
        let samples: u64 = mine().map(|s| s.value).sum();
        if p.stats.oncpu_hz == 0 || samples == 0 {
            return Vec::new();
        }
        let on_ns = self
            .run
            .threads
            .iter()
            .find(|t| t.tid == tid)
            .map_or(0.0, |t| t.oncpu_ns as f64);
        mine()
            .map(|s| {
                let frames = frames_of(self.run, s);
                let ns = on_ns * s.value as f64 / samples as f64;
                (classify::site(&frames), classify::user_names(&frames), ns)
            })
            .collect()
    }

    /// Where thread `tid` ran: its hottest on-CPU site, from its on-CPU samples and the
    /// stacks it was preempted at (running until then). What a thread did while it held a
    /// CPU, never its waits. (running in SITE, frames innermost first)
    fn running(&self, tid: u32) -> Option<(String, Vec<String>)> {
        let p = &self.run.profiles;
        let mut by_site: BTreeMap<String, (f64, Vec<String>)> = BTreeMap::new();
        for (site, frames, ns) in self.oncpu_sites(tid) {
            by_site.entry(site).or_insert((0.0, frames)).0 += ns;
        }
        // Preempted there: it was running at that site until the switch.
        for s in p
            .offcpu
            .stacks
            .iter()
            .filter(|s| s.tid == tid && s.label == Label::Preempted)
        {
            let frames = frames_of(self.run, s);
            let e = by_site
                .entry(classify::site(&frames))
                .or_insert((0.0, classify::user_names(&frames)));
            e.0 += s.value as f64;
        }
        by_site
            .into_iter()
            .filter(|(site, _)| !site.is_empty())
            .max_by(|a, b| a.1.0.total_cmp(&b.1.0))
            .map(|(site, (_, frames))| (format!("running in {site}"), frames))
    }

    /// What thread `tid` of the run did with most of its time: its heaviest off-CPU stack
    /// (by state and site) or on-CPU site. (doing, frames innermost first, share of its time)
    fn doing(&self, tid: u32) -> Option<(String, Vec<String>, f64)> {
        let p = &self.run.profiles;
        let total = *self.total.get(&tid)? as f64;
        if total <= 0.0 {
            return None;
        }
        let mut best: Option<(f64, String, Vec<String>)> = None;
        let mut by_site: BTreeMap<(String, String), (f64, Vec<String>)> = BTreeMap::new();
        for s in p.offcpu.stacks.iter().filter(|s| s.tid == tid) {
            let frames = frames_of(self.run, s);
            let r = self.reader.read(s);
            let doing = doing_words(r.kind).to_string();
            let e = by_site
                .entry((doing, r.site))
                .or_insert((0.0, classify::user_names(&frames)));
            e.0 += s.value as f64;
        }
        for (site, frames, ns) in self.oncpu_sites(tid) {
            by_site
                .entry(("running".into(), site))
                .or_insert((0.0, frames))
                .0 += ns;
        }
        for ((doing, site), (v, frames)) in by_site {
            if best.as_ref().is_none_or(|b| v > b.0) {
                let doing = if site.is_empty() {
                    doing
                } else {
                    format!("{doing} in {site}")
                };
                best = Some((v, doing, frames));
            }
        }
        best.map(|(v, doing, frames)| (doing, frames, (v / total).min(1.0)))
    }
}

/// A finding being built: its threads and time, by key.
#[derive(Default)]
struct Group {
    ns: f64,
    /// Waits for a CPU after this wait's wakeups.
    then_cpu: f64,
    tids: BTreeMap<u32, f64>,
    because: BTreeMap<String, f64>,
    /// Culprit candidates: tid → ns.
    culprits: BTreeMap<u32, f64>,
}

impl Group {
    fn add(&mut self, tid: u32, ns: f64, because: &str) {
        self.ns += ns;
        *self.tids.entry(tid).or_default() += ns;
        *self.because.entry(because.to_string()).or_default() += ns;
    }
}

/// The findings of `run`, ranked.
pub fn explain(run: &Run) -> Explanation {
    // OpenTelemetry spans read from the thread context have their tail explained as a span
    // measured one by one does.
    let with_otel = otel::as_span(run);
    let run = with_otel.as_ref().unwrap_or(run);
    let cx = Ctx::new(run);
    let mut out = Explanation {
        schema_version: SCHEMA_VERSION,
        duration_s: run.meta.duration_ns() as f64 / 1e9,
        operations: run.operations,
        ..Default::default()
    };
    let mut findings = Vec::new();
    findings.extend(runqueue_findings(&cx, &mut out.limits));
    findings.extend(wait_findings(&cx, &mut out.limits));
    findings.extend(oncpu_findings(&cx));
    findings.extend(gc_pauses(&cx));
    // The Go GC's work is kept whatever its share of mostly idle threads' time: it is CPU the
    // requests did not get.
    findings.retain(|f| f.seconds * 1e9 >= MIN_NS && (f.share >= MIN_SHARE || f.kind == Kind::Gc));
    if let Some(t) = &run.timeline {
        for f in &mut findings {
            f.when = when(&cx, t, f);
            if let Some(w) = &f.when {
                f.summary += &w.tail();
            }
        }
    }
    findings.sort_by(|a, b| {
        (a.kind == Kind::Idle)
            .cmp(&(b.kind == Kind::Idle))
            .then(b.seconds.total_cmp(&a.seconds))
            .then(a.site.cmp(&b.site))
    });
    gil_holders_after_the_gil(&mut findings);
    out.findings = findings;
    out.spans = tail::tails(&cx);
    if let Some(c) = &run.cgroup
        && c.throttled_periods > 0
    {
        out.throttled = Some(format!(
            "the target's cgroup ({}) was throttled by its CPU quota in {} of {} periods, {} in all",
            c.path,
            c.throttled_periods,
            c.periods,
            ns(c.throttled_ns)
        ));
    }
    out
}

/// Threads fighting for the GIL run in turns: their running is what held the GIL while the
/// others waited, the GIL finding's culprit, not a cause of its own. Their on-CPU finding
/// ranks right after the GIL's (two fighters run about as long as they wait, and the first
/// line must say why they waited).
fn gil_holders_after_the_gil(findings: &mut Vec<Finding>) {
    let is_gil = |f: &Finding| f.kind == Kind::Lock && f.summary.contains("waited for the GIL");
    let Some(gil) = findings.iter().position(is_gil) else {
        return;
    };
    let fighters: BTreeSet<u32> = findings[gil].tids.iter().copied().collect();
    let mut i = 0;
    let mut at = gil;
    while i < at {
        let f = &findings[i];
        if f.kind == Kind::Oncpu
            && !f.tids.is_empty()
            && f.tids.iter().all(|t| fighters.contains(t))
        {
            let f = findings.remove(i);
            at -= 1;
            findings.insert(at + 1, f);
        } else {
            i += 1;
        }
    }
}

/// Waiting for a CPU: one finding per waiting pool and the pool that held the CPU.
fn runqueue_findings(cx: &Ctx, limits: &mut Vec<String>) -> Vec<Finding> {
    let run = cx.run;
    if run.runqueue_holders.is_empty() && run.threads.iter().any(|t| t.runqueue_ns > 0) {
        limits
            .push("who held the CPU is not in this run (recorded before holders were kept)".into());
    }
    let waits = runqueue_wait_groups(cx);
    waits
        .groups
        .values()
        .map(|g| runqueue_finding(cx, g, &waits.holders))
        .collect()
}

/// The threads' waits for a CPU, grouped, and the tasks that held the CPU.
struct RunqueueWaits<'a> {
    /// By the waiter's pool and its main holder's pool; a group's culprits are its holders'
    /// shares of its waits.
    groups: BTreeMap<(String, String), Group>,
    /// Each holder's heaviest row.
    holders: BTreeMap<u32, &'a RunqueueHolder>,
}

/// Gathers the threads' waits for a CPU into groups, each wait shared by the tasks that held
/// the CPU during it.
fn runqueue_wait_groups<'a>(cx: &Ctx<'a>) -> RunqueueWaits<'a> {
    let run = cx.run;
    // Per waiter: its holders' shares.
    let mut holders: BTreeMap<u32, Vec<&RunqueueHolder>> = BTreeMap::new();
    for h in &run.runqueue_holders {
        holders.entry(h.tid).or_default().push(h);
    }
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    let mut holder_rows: BTreeMap<u32, &RunqueueHolder> = BTreeMap::new();
    for t in run.threads.iter().filter(|t| t.runqueue_ns > 0) {
        let mut hs = holders.get(&t.tid).cloned().unwrap_or_default();
        // Behind the GIL's holder: the GIL finding's, not this one's.
        let behind = cx.behind_gil.get(&t.tid).copied().unwrap_or(0.0);
        if behind > 0.0 {
            hs.retain(|h| !cx.gil_fighters.contains(&h.holder_tid) || h.holder_tid == t.tid);
        }
        let wait = t.runqueue_ns as f64 - behind;
        if wait < 1.0 {
            continue;
        }
        let held: u64 = hs.iter().map(|h| h.ns).sum();
        // The time each holder ended, scaled to the thread's exact wait.
        let top = hs.iter().max_by_key(|h| h.ns);
        let key = match top {
            Some(h) => (pattern(&t.comm), pattern(&h.holder_comm)),
            None => (pattern(&t.comm), String::new()),
        };
        let g = groups.entry(key).or_default();
        let because = if t.runqueue_after_wakeup_ns * 2 >= t.runqueue_ns {
            "woken, not yet run"
        } else {
            "preempted"
        };
        g.add(t.tid, wait, because);
        for h in hs {
            let share = if held > 0 {
                h.ns as f64 / held as f64
            } else {
                0.0
            };
            *g.culprits.entry(h.holder_tid).or_default() += share * wait;
            let e = holder_rows.entry(h.holder_tid).or_insert(h);
            if h.ns > e.ns {
                *e = h;
            }
        }
    }
    RunqueueWaits {
        groups,
        holders: holder_rows,
    }
}

/// The pool of threads that held the CPU most in a group's waits, named by its busiest thread.
struct HolderPool {
    culprit: Culprit,
    /// The pool's share of the group's wait.
    held: f64,
    /// Threads in the pool.
    threads: usize,
    /// The pool's processes.
    pids: BTreeSet<u32>,
}

/// One finding of waiting for a CPU: a group of waiters and the pool that held the CPU.
fn runqueue_finding(cx: &Ctx, g: &Group, holder_rows: &BTreeMap<u32, &RunqueueHolder>) -> Finding {
    let tids: BTreeSet<u32> = g.tids.keys().copied().collect();
    let names: Vec<String> = tids.iter().map(|&t| cx.name(t)).collect();
    let total = cx.threads_time(&tids);
    let share = if total > 0.0 { g.ns / total } else { 0.0 };
    let pool = holder_pool(cx, g, holder_rows);
    let (summary, evidence) = runqueue_sentences(g, &names, share, pool.as_ref());
    Finding {
        kind: Kind::Runqueue,
        seconds: g.ns / 1e9,
        share,
        threads: names,
        tids: tids.into_iter().collect(),
        site: String::new(),
        culprit: pool.map(|p| p.culprit),
        evidence,
        summary,
        address: None,
        symbol: None,
        then_runqueue_s: 0.0,
        when: None,
        of_process_cpu: false,
    }
}

/// The pool that held the CPU most in `g`'s waits. Holders pool by program: whether they are
/// the target's, and the name without numbers (a driver's connection-1 … connection-4 are one
/// culprit, and so are two `busy` processes); the pool's busiest thread names it, its pids go
/// in the evidence.
fn holder_pool(
    cx: &Ctx,
    g: &Group,
    holder_rows: &BTreeMap<u32, &RunqueueHolder>,
) -> Option<HolderPool> {
    // (held, busiest tid, its held, threads, pids)
    type Pool = (f64, u32, f64, usize, BTreeSet<u32>);
    let mut pools: BTreeMap<(bool, String), Pool> = BTreeMap::new();
    for (&tid, &held) in &g.culprits {
        let Some(h) = holder_rows.get(&tid) else {
            continue;
        };
        let ours = cx.targets.contains(&h.holder_tgid);
        let e = pools.entry((ours, pattern(&h.holder_comm))).or_insert((
            0.0,
            tid,
            0.0,
            0,
            BTreeSet::new(),
        ));
        e.0 += held;
        e.3 += 1;
        e.4.insert(h.holder_tgid);
        if held > e.2 {
            (e.1, e.2) = (tid, held);
        }
    }
    let (held, tid, _, threads, pids) = pools.into_values().max_by(|a, b| a.0.total_cmp(&b.0))?;
    let h = holder_rows.get(&tid)?;
    let (process, same) = cx.process_of(h.holder_tgid);
    let process = match pids.len() {
        0 | 1 => process,
        n if same => format!("{process} ({n} processes)"),
        n => format!("{n} processes"),
    };
    // It held the CPU, so it ran: where, never what it waited on at other times.
    let (doing, frames) = if same {
        cx.running(tid)
            .unwrap_or_else(|| ("running".into(), vec![]))
    } else {
        ("running".into(), vec![])
    };
    Some(HolderPool {
        culprit: Culprit {
            thread: h.holder_comm.clone(),
            tid,
            process,
            pid: h.holder_tgid,
            same_process: same,
            nice: Some(h.holder_nice),
            cpu: Some(h.cpu),
            doing,
            frames,
        },
        held: held / g.ns.max(1.0),
        threads,
        pids,
    })
}

/// A wait for a CPU in words: its summary and its evidence.
fn runqueue_sentences(
    g: &Group,
    names: &[String],
    share: f64,
    pool: Option<&HolderPool>,
) -> (String, String) {
    let preempted = g.because.get("preempted").copied().unwrap_or(0.0);
    let woken = g.ns - preempted;
    let mut summary = format!(
        "{} waited {} ({} of {} time) for a CPU",
        thread_list(names),
        ns(g.ns as u64),
        percent(share),
        if names.len() == 1 { "its" } else { "their" },
    );
    let mut evidence = format!(
        "thread rows: {} after a wakeup (scheduler delay), {} after a preemption",
        ns(woken as u64),
        ns(preempted as u64)
    );
    let Some(pool) = pool else {
        return (summary, evidence);
    };
    let (c, held) = (&pool.culprit, pool.held);
    let on_cpu = c
        .cpu
        .map_or(String::new(), |n| format!(" (CPU {n} mostly)"));
    if c.pid == 0 {
        // The idle task "held" it: the CPU was idle, and the wait was its wakeup (the IPI,
        // the way out of idle), not a task in the way.
        summary += &format!(
            "{on_cpu}, {} of it on an idle CPU waking up ({}): wake-up latency, no task held it",
            percent(held),
            c.thread,
        );
        evidence += &format!(
            "; holders: the task each wait took the CPU from (runqueue_holders), the idle task for {}",
            percent(held)
        );
        return (summary, evidence);
    }
    summary += &format!(
        "{on_cpu}, held by {}{} ({}{}{}){}",
        c.thread,
        if pool.threads > 1 {
            format!(" and {} more threads like it", pool.threads - 1)
        } else {
            String::new()
        },
        match (c.same_process, pool.pids.len()) {
            (true, 0 | 1) => "this process".to_string(),
            (true, n) => format!("{n} of the target's processes"),
            (false, 0 | 1) => format!("another process, {}", c.process),
            (false, n) => format!("{n} other processes"),
        },
        c.nice.map_or(String::new(), |n| format!(", nice {n}")),
        if held < 0.95 {
            format!(", {} of the wait", percent(held))
        } else {
            String::new()
        },
        match c.doing.strip_prefix("running in ") {
            Some(site) if c.same_process => format!(" in {site}"),
            _ => String::new(),
        }
    );
    evidence += &format!(
        "; holders: the task each wait took the CPU from (runqueue_holders), {} held it for {}",
        c.thread,
        percent(held)
    );
    if pool.pids.len() > 1 {
        let list: Vec<String> = pool.pids.iter().map(u32::to_string).collect();
        evidence += &format!(", in pids {}", list.join(", "));
    }
    if c.same_process && !c.frames.is_empty() {
        evidence += &format!(
            "; {} was {} (its on-CPU samples and the stacks it was preempted at)",
            c.thread, c.doing
        );
    }
    (summary, evidence)
}

/// Every other wait, from the off-CPU profile; a lock's holder from the wakeup profile.
fn wait_findings(cx: &Ctx, limits: &mut Vec<String>) -> Vec<Finding> {
    let wakeups = Wakeups::of(cx);
    let mut waits = group_waits(cx, &wakeups);
    waits.join_behind_gil(cx);
    let mut out: Vec<Finding> = waits
        .groups
        .iter()
        .map(|(key, g)| wait_finding(cx, &wakeups, &waits, key, g))
        .collect();
    out.extend(unstacked_findings(cx, &waits.stacked, limits));
    out
}

/// The releasers of a wait: (waker tid, name) → ns.
type Releasers = BTreeMap<(u32, String), f64>;

/// Who ended the lock waits, from the wakeup profile.
struct Wakeups {
    /// (waiter tid, site) → its releasers.
    releasers: BTreeMap<(u32, String), Releasers>,
    /// Each releaser's heaviest waking stack: (weight, user frames innermost first, site).
    stacks: BTreeMap<u32, (f64, Vec<String>, String)>,
}

impl Wakeups {
    /// Reads the wakeup profile's lock waits: who released each, and from which stack.
    fn of(cx: &Ctx) -> Wakeups {
        let run = cx.run;
        let mut releasers: BTreeMap<(u32, String), Releasers> = BTreeMap::new();
        let mut stacks: BTreeMap<u32, (f64, Vec<String>, String)> = BTreeMap::new();
        for s in &run.profiles.wakeup.stacks {
            let r = cx.reader.read(s);
            if r.kind != Kind::Lock {
                continue;
            }
            // An interrupt's wakeup names no thread.
            let tid = waker_tid(run, s);
            if tid == 0 {
                continue;
            }
            let v = s.value as f64;
            *releasers
                .entry((s.tid, r.site))
                .or_default()
                .entry((tid, s.waker_comm.clone()))
                .or_default() += v;
            // The releaser's heaviest waking stack.
            let read = || {
                let f = frames(run, &s.waker_frames);
                (v, classify::user_names(&f), classify::site(&f))
            };
            match stacks.entry(tid) {
                Entry::Vacant(e) => {
                    e.insert(read());
                }
                Entry::Occupied(mut e) if v > e.get().0 => {
                    e.insert(read());
                }
                Entry::Occupied(_) => {}
            }
        }
        Wakeups { releasers, stacks }
    }
}

/// A group of waits: their kind, site, and the pools of their threads and of their releasers
/// ("worker-#|compactor").
type WaitKey = (Kind, String, String);

/// The off-CPU profile's waits (all but those for a CPU), grouped.
struct Waits<'a> {
    groups: BTreeMap<WaitKey, Group>,
    /// Each group's heaviest stack, its evidence: (ns, stack).
    evidence: BTreeMap<WaitKey, (f64, &'a Stack)>,
    /// Each thread's blocked time its stacks cover, ns.
    stacked: BTreeMap<u32, f64>,
    /// Each group's time runnable behind the GIL's holder, ns (see [`Waits::join_behind_gil`]).
    behind: BTreeMap<WaitKey, f64>,
}

/// Reads the off-CPU profile's waits and groups them: a lock's waits by their releaser's pool
/// too, each with its wait for a CPU after the wakeups.
fn group_waits<'a>(cx: &Ctx<'a>, wakeups: &Wakeups) -> Waits<'a> {
    let p = &cx.run.profiles;
    let pieces: Vec<Piece> = p
        .offcpu
        .stacks
        .iter()
        .filter(|s| !s.label.waits_for_cpu())
        .map(|s| Piece {
            tid: s.tid,
            reading: cx.reader.read(s),
            ns: s.value as f64,
            stack: s,
        })
        .collect();
    // The wait for a CPU after each wakeup, by what the thread had waited on.
    let mut then_cpu: BTreeMap<(u32, Kind, String), f64> = BTreeMap::new();
    for s in p.offcpu.stacks.iter().filter(|s| s.label == Label::Woken) {
        let r = cx.reader.read_as(s.tgid, &Label::Sleeping, &s.frames);
        *then_cpu.entry((s.tid, r.kind, r.site)).or_default() += s.value as f64;
    }
    let mut waits = Waits {
        groups: BTreeMap::new(),
        evidence: BTreeMap::new(),
        stacked: BTreeMap::new(),
        behind: BTreeMap::new(),
    };
    for piece in &pieces {
        let name = cx.name(piece.tid);
        let releasers = wakeups
            .releasers
            .get(&(piece.tid, piece.reading.site.clone()));
        // A lock's waits group by their releaser's pool too.
        let releaser = if piece.reading.kind == Kind::Lock {
            releasers
                .and_then(|w| w.iter().max_by(|a, b| a.1.total_cmp(b.1)))
                .map_or(String::new(), |((_, comm), _)| pattern(comm))
        } else {
            String::new()
        };
        let key = (
            piece.reading.kind,
            piece.reading.site.clone(),
            format!("{}|{releaser}", pattern(&name)),
        );
        let g = waits.groups.entry(key.clone()).or_default();
        g.add(piece.tid, piece.ns, &piece.reading.because);
        g.then_cpu += then_cpu
            .remove(&(piece.tid, piece.reading.kind, piece.reading.site.clone()))
            .unwrap_or(0.0);
        for ((wtid, _), v) in releasers.into_iter().flatten() {
            *g.culprits.entry(*wtid).or_default() += v;
        }
        let e = waits.evidence.entry(key).or_insert((0.0, piece.stack));
        if piece.ns > e.0 {
            *e = (piece.ns, piece.stack);
        }
        *waits.stacked.entry(piece.tid).or_default() += piece.ns;
    }
    waits
}

impl Waits<'_> {
    /// Joins each GIL fighter's wait for a CPU behind the GIL's holder to its heaviest GIL
    /// wait.
    fn join_behind_gil(&mut self, cx: &Ctx) {
        for (&tid, &ns) in &cx.behind_gil {
            let gil = self
                .groups
                .iter_mut()
                .filter(|(_, g)| g.because.contains_key(classify::GIL_WAIT))
                .filter_map(|(k, g)| Some((k, g.tids.get(&tid).copied()?, g)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((key, _, g)) = gil {
                g.add(tid, ns, classify::GIL_WAIT);
                g.then_cpu = (g.then_cpu - ns).max(0.0);
                *self.behind.entry(key.clone()).or_default() += ns;
            }
        }
    }
}

/// One finding of a group of waits: for a lock's, its address and the thread that held it.
fn wait_finding(cx: &Ctx, wakeups: &Wakeups, waits: &Waits, key: &WaitKey, g: &Group) -> Finding {
    let run = cx.run;
    let behind = waits.behind.get(key).copied().unwrap_or(0.0);
    let (kind, site, _) = key;
    let tids: BTreeSet<u32> = g.tids.keys().copied().collect();
    let total = cx.threads_time(&tids);
    let because = g
        .because
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(b, _)| b.clone())
        .unwrap_or_default();
    let gil = because == classify::GIL_WAIT;
    let (address, culprit) = if *kind == Kind::Lock {
        (
            lock_address(run, &tids, site, gil),
            lock_culprit(cx, wakeups, g, &tids, gil),
        )
    } else {
        (None, None)
    };
    let stack = waits.evidence.get(key).map(|(_, s)| *s);
    let mut f = Finding {
        kind: *kind,
        seconds: g.ns / 1e9,
        share: if total > 0.0 { g.ns / total } else { 0.0 },
        threads: tids.iter().map(|&t| cx.name(t)).collect(),
        tids: tids.iter().copied().collect(),
        site: site.clone(),
        evidence: wait_evidence(run, wakeups, stack, culprit.as_ref(), behind),
        culprit,
        summary: String::new(),
        symbol: address.as_deref().and_then(|a| lock_symbol(run, &tids, a)),
        address,
        then_runqueue_s: g.then_cpu / 1e9,
        when: None,
        of_process_cpu: false,
    };
    f.summary = wait_summary(&f, g, &because, behind);
    f
}

/// The thread that held the lock `tids` waited for: of those that released them, the one that
/// woke them most (the GIL's: the one that ran longest within the waits).
fn lock_culprit(
    cx: &Ctx,
    wakeups: &Wakeups,
    g: &Group,
    tids: &BTreeSet<u32>,
    gil: bool,
) -> Option<Culprit> {
    // The GIL is handed on by whoever takes it last (a thread back from a sleep takes it, runs
    // a moment and releases it to the waiter): its holder is the releaser that ran longest
    // within the waits, not the one that woke them most.
    let holder = if gil {
        ran_within(cx.run, tids, &g.culprits)
    } else {
        None
    };
    holder
        .or_else(|| {
            g.culprits
                .iter()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(&tid, _)| tid)
        })
        .map(|tid| lock_holder(cx, tid, tids, &wakeups.stacks))
}

/// The lock at futex word `address` by name: a runtime's lock by its place in the runtime
/// ("_PyRuntime.ceval.gil+0x48"), another static by its symbol.
fn lock_symbol(run: &Run, tids: &BTreeSet<u32>, address: &str) -> Option<String> {
    let tgid = |t: &u32| run.threads.iter().find(|th| th.tid == *t).map(|th| th.tgid);
    let runtime = tids.iter().filter_map(tgid).find_map(|p| {
        let l = run.locks.runtime_lock(p, address)?;
        let addr = u64::from_str_radix(address.trim_start_matches("0x"), 16).ok()?;
        Some(format!("{}+{:#x}", l.symbol, addr - l.start))
    });
    runtime.or_else(|| {
        run.locks
            .futex_top
            .iter()
            .find(|f| f.uaddr == address)
            .and_then(|f| f.symbol.clone())
    })
}

/// A wait finding's sentence, from its figures: the wait, its lock, what followed it and who
/// released it.
fn wait_summary(f: &Finding, g: &Group, because: &str, behind: f64) -> String {
    let verb = if f.kind == Kind::Lock && because == classify::GIL_WAIT {
        "waited for the GIL"
    } else {
        f.kind.verb()
    };
    let mut summary = format!(
        "{} {} {} ({} of {} time)",
        thread_list(&f.threads),
        verb,
        ns(g.ns as u64),
        percent(f.share),
        if f.threads.len() == 1 { "its" } else { "their" },
    );
    if !f.site.is_empty() {
        summary += &format!(" in {}", f.site);
    }
    match (&f.address, &f.symbol) {
        (Some(a), Some(sym)) => summary += &format!(" (futex {sym} at {a})"),
        (Some(a), None) => summary += &format!(" (futex {a})"),
        _ => {}
    }
    if behind >= MIN_NS {
        summary += &format!(
            ", {} of it runnable behind the thread that held it",
            ns(behind as u64)
        );
    }
    if g.then_cpu >= 0.1 * g.ns && g.then_cpu >= MIN_NS {
        summary += &format!(", then {} waiting for a CPU", ns(g.then_cpu as u64));
    }
    if let Some(c) = &f.culprit {
        // Threads fighting over one lock share a name: the holder is told by its id.
        let holder = if f.threads.contains(&c.thread) {
            format!("{} (tid {})", c.thread, c.tid)
        } else {
            c.thread.clone()
        };
        summary += &format!(", released by {holder}; it was {}", c.doing);
    } else if f.kind != Kind::Blocked {
        summary += &format!(" ({because})");
    }
    summary
}

/// Where a wait finding's figure comes from: its heaviest stack, where its holder released
/// it, and its time behind the GIL's holder.
fn wait_evidence(
    run: &Run,
    wakeups: &Wakeups,
    stack: Option<&Stack>,
    culprit: Option<&Culprit>,
    behind: f64,
) -> String {
    let chain = stack.map(|s| chain(run, s)).unwrap_or_default();
    let label = stack.map_or("", |s| s.label.as_str());
    // Where the holder released them: its stack at the wakeup.
    let released = culprit
        .and_then(|c| Some((c, wakeups.stacks.get(&c.tid)?)))
        .filter(|(_, (_, _, site))| !site.is_empty())
        .map_or(String::new(), |(c, (_, _, site))| {
            format!("; {} released them in {site} (its wakeup stack)", c.thread)
        });
    let behind = if behind > 0.0 {
        format!(
            "; thread rows and runqueue_holders: {} waiting for a CPU another thread fighting for the GIL held",
            ns(behind as u64)
        )
    } else {
        String::new()
    };
    format!("off-CPU profile, [{label}] {chain}{released}{behind}")
}

/// Blocked time no walked stack covers (stacks off, or waits too short to walk): a finding for
/// each thread with enough of it.
fn unstacked_findings(
    cx: &Ctx,
    stacked: &BTreeMap<u32, f64>,
    limits: &mut Vec<String>,
) -> Vec<Finding> {
    let run = cx.run;
    let p = &run.profiles;
    let stacks_on = p.stats.oncpu_hz > 0 || !p.offcpu.stacks.is_empty();
    if !stacks_on {
        limits.push(
            "recorded without stacks: waits other than for a CPU have no cause, only their time"
                .into(),
        );
    }
    let mut out = Vec::new();
    for t in &run.threads {
        let covered = stacked.get(&t.tid).copied().unwrap_or(0.0);
        let rest = t.blocked_ns as f64 - covered;
        let total = (t.oncpu_ns + t.offcpu_ns()) as f64;
        if total <= 0.0 || rest / total < 0.05 {
            continue;
        }
        // One wait that outlasted the recording: the thread never ran, so it had no work
        // (its stack is taken when a wait ends, and this one did not).
        if covered == 0.0 && t.voluntary + t.involuntary <= 2 && rest / total > 0.95 {
            out.push(parked_finding(t, rest, total));
        } else {
            out.push(unstacked_finding(run, t, rest, total, stacks_on));
        }
    }
    out
}

/// A finding of one thread's `rest` ns of its `total`, with nothing but its kind yet.
fn one_thread(kind: Kind, t: &ThreadRow, rest: f64, total: f64) -> Finding {
    Finding {
        kind,
        seconds: rest / 1e9,
        share: rest / total,
        threads: vec![t.comm.clone()],
        tids: vec![t.tid],
        ..Finding::default()
    }
}

/// A thread parked the whole recording, `rest` ns of its `total`: idle.
fn parked_finding(t: &ThreadRow, rest: f64, total: f64) -> Finding {
    Finding {
        evidence: "thread rows: one wait over the whole recording, never woken".into(),
        summary: format!(
            "{} was parked the whole recording ({}), never woken",
            t.comm,
            ns(rest as u64)
        ),
        ..one_thread(Kind::Idle, t, rest, total)
    }
}

/// A thread's blocked time no stack covers, `rest` ns of its `total`: blocked, cause unknown.
fn unstacked_finding(run: &Run, t: &ThreadRow, rest: f64, total: f64, stacks_on: bool) -> Finding {
    Finding {
        evidence: if stacks_on {
            format!(
                "thread rows: blocked time no off-CPU stack covers: {}",
                uncovered_why(run)
            )
        } else {
            "thread rows: blocked time (recorded without stacks)".into()
        },
        summary: format!(
            "{} was blocked {} ({} of its time) with no stack to say why",
            t.comm,
            ns(rest as u64),
            percent(rest / total)
        ),
        ..one_thread(Kind::Blocked, t, rest, total)
    }
}

/// Why blocked time can lack a stack in a run recorded with stacks. A wait open at the
/// recording's start or stop has one (walked where it ended, or read from /proc at the stop);
/// what is left are waits too short to walk, waits not drawn, and stacks lost.
fn uncovered_why(run: &Run) -> String {
    let st = &run.profiles.stats;
    let mut why = vec![format!(
        "waits under --min-block ({}) are not walked",
        ns(st.min_block_ns)
    )];
    if st.offcpu_intervals > st.offcpu_walked {
        why.push(format!(
            "{} of {} off-CPU intervals were not sampled (--offcpu-period {})",
            st.offcpu_intervals - st.offcpu_walked,
            st.offcpu_intervals,
            ns(st.offcpu_period_ns)
        ));
    }
    let lost = st.collisions + st.missing_kernel;
    if lost > 0 {
        why.push(format!("{lost} stacks were lost"));
    }
    if run.meta.window.is_some() {
        why.push("a window's waits still open at its end have no stack yet".into());
    }
    why.join("; ")
}

/// The waker's thread id: as recorded, or, in a run from before ids were kept, the thread of
/// that name.
fn waker_tid(run: &Run, s: &Stack) -> u32 {
    if s.waker_tid != 0 {
        return s.waker_tid;
    }
    run.threads
        .iter()
        .find(|t| t.comm == s.waker_comm && t.tgid == s.tgid)
        .map_or(0, |t| t.tid)
}

/// The holder of a lock: the thread that released it, and what it did with its time.
/// Of the threads that ended `waiters`' waits (`releasers`), the one that ran longest
/// within those waits (the held profile's `running` part), when any ran.
fn ran_within(run: &Run, waiters: &BTreeSet<u32>, releasers: &BTreeMap<u32, f64>) -> Option<u32> {
    let mut ran: BTreeMap<u32, u64> = BTreeMap::new();
    for s in &run.profiles.held.stacks {
        if s.label == Label::Running
            && waiters.contains(&s.tid)
            && releasers.contains_key(&s.waker_tid)
        {
            *ran.entry(s.waker_tid).or_default() += s.value;
        }
    }
    ran.into_iter()
        .filter(|(_, ns)| *ns > 0)
        .max_by_key(|(_, ns)| *ns)
        .map(|(tid, _)| tid)
}

fn lock_holder(
    cx: &Ctx,
    tid: u32,
    waiters: &BTreeSet<u32>,
    waker_stacks: &BTreeMap<u32, (f64, Vec<String>, String)>,
) -> Culprit {
    // Over the waits it ended when the run has them; else over the whole recording.
    let during = held_doing(cx, waiters, tid, waker_stacks);
    let (doing, frames) = match during.or_else(|| {
        cx.doing(tid)
            .map(|(d, f, share)| (format!("{d} for {} of its time", percent(share)), f))
    }) {
        Some(found) => found,
        None => (
            "releasing it".into(),
            waker_stacks
                .get(&tid)
                .map(|(_, f, _)| f.clone())
                .unwrap_or_default(),
        ),
    };
    cx.thread_culprit(tid, doing, frames)
}

/// What `holder` did while `waiters` waited for it to wake them, from the held profile: the
/// heaviest of its states and sites over those waits, and that part's share of them ("sleeping
/// in flush for 96.1% of the waits"). `None` for a run without it (a holder outside the
/// targets, stacks off, or a run from before it was kept).
fn held_doing(
    cx: &Ctx,
    waiters: &BTreeSet<u32>,
    holder: u32,
    waker_stacks: &BTreeMap<u32, (f64, Vec<String>, String)>,
) -> Option<(String, Vec<String>)> {
    let run = cx.run;
    let mut by: BTreeMap<(String, String), (f64, Vec<String>)> = BTreeMap::new();
    let mut total = 0.0;
    for s in run
        .profiles
        .held
        .stacks
        .iter()
        .filter(|s| s.waker_tid == holder && waiters.contains(&s.tid))
    {
        let v = s.value as f64;
        total += v;
        let (doing, site, names) = if s.label == Label::Running {
            // Its stack as it woke them: where it ran into the release (the heaviest waking
            // stack, when this one was not walked).
            let f = frames(run, &s.waker_frames);
            let site = classify::site(&f);
            if site.is_empty() || site.starts_with('[') {
                let (names, site) = waker_stacks
                    .get(&holder)
                    .map(|(_, f, site)| (f.clone(), site.clone()))
                    .unwrap_or_default();
                ("running".to_string(), site, names)
            } else {
                ("running".to_string(), site, classify::user_names(&f))
            }
        } else {
            // As its own stack would read (a wait on the GIL's word is the GIL).
            let r = cx.reader.read_as(s.tgid, &s.label, &s.waker_frames);
            let doing = match r.because == classify::GIL_WAIT {
                true => "waiting for the GIL",
                false => doing_words(r.kind),
            };
            let f = frames(run, &s.waker_frames);
            (doing.to_string(), r.site, classify::user_names(&f))
        };
        by.entry((doing, site)).or_insert((0.0, names)).0 += v;
    }
    let ((doing, site), (v, names)) = by.into_iter().max_by(|a, b| a.1.0.total_cmp(&b.1.0))?;
    let share = percent(v / total.max(1.0));
    Some(match site.is_empty() {
        true => (format!("{doing} for {share} of the waits"), names),
        false => (format!("{doing} in {site} for {share} of the waits"), names),
    })
}

/// What a thread was doing, in words, by the kind of its wait.
fn doing_words(kind: Kind) -> &'static str {
    match kind {
        Kind::Runqueue => "waiting for a CPU",
        Kind::Io => "in block I/O",
        Kind::Lock => "waiting for a lock",
        Kind::Net => "waiting on the network",
        Kind::Idle => "idle",
        _ => "sleeping",
    }
}

/// The futex word the threads waited on most at `site`, from the futex profile.
fn lock_address(run: &Run, tids: &BTreeSet<u32>, site: &str, gil: bool) -> Option<String> {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    let tgids: BTreeSet<u32> = run
        .threads
        .iter()
        .filter(|t| tids.contains(&t.tid))
        .map(|t| t.tgid)
        .collect();
    for s in &run.profiles.futex.stacks {
        if !tgids.contains(&s.tgid) {
            continue;
        }
        let frames = frames_of(run, s);
        // A GIL wait and a wait on the program's own lock may share a site.
        let on_gil = classify::takes_gil(&frames)
            || run.locks.runtime_lock(s.tgid, s.label.as_str()).is_some();
        if classify::site(&frames) == site && on_gil == gil {
            *by.entry(s.label.as_str()).or_default() += s.value;
        }
    }
    by.into_iter()
        .max_by_key(|(_, v)| *v)
        .map(|(a, _)| a.to_string())
}

/// A stack as evidence: the site and what it called down to the innermost kernel frame,
/// "flush_to_disk;fsync;…;jbd2_log_wait_commit".
fn chain(run: &Run, s: &Stack) -> String {
    let frames = frames_of(run, s);
    let site = classify::site(&frames);
    let from = frames.iter().rposition(|f| f.name == site).unwrap_or(0);
    let tail: Vec<&str> = frames[from..].iter().map(|f| f.name.as_str()).collect();
    if tail.len() <= 6 {
        tail.join(";")
    } else {
        format!(
            "{};{};…;{}",
            tail[0],
            tail[1],
            tail[tail.len() - 3..].join(";")
        )
    }
}

/// On CPU: one finding per pool of threads and its hottest site; the Go GC's own work (mark
/// workers and sweeping) and its mark assists, each a finding. Their share is of the process's
/// CPU time: an on-CPU cost is CPU the rest of the process did not get, whatever its threads
/// did with the rest of their time.
fn oncpu_findings(cx: &Ctx) -> Vec<Finding> {
    let run = cx.run;
    let process_cpu: f64 = run.threads.iter().map(|t| t.oncpu_ns as f64).sum();
    let samples = OncpuSamples::of(run);
    let time = OncpuTime::of(run, &samples);
    let culprit = samples.gc_culprit(cx);
    let mut gc_findings = Vec::new();
    if time.collector.ns > 0.0 {
        gc_findings.push(collector_finding(
            cx,
            &time.collector,
            &samples,
            &culprit,
            process_cpu,
        ));
    }
    if time.assists.ns > 0.0 {
        gc_findings.push(assists_finding(
            cx,
            &time.assists,
            &samples,
            &culprit,
            process_cpu,
        ));
    }
    time.groups
        .iter()
        .filter(|(_, g)| g.ns > 0.0)
        .map(|(key, g)| running_finding(cx, &time, key, g, process_cpu))
        .chain(gc_findings)
        .collect()
}

/// The on-CPU profile's samples, by thread.
struct OncpuSamples {
    /// Each thread's samples by site, the GC's work and the recorder's probes aside.
    sites: BTreeMap<u32, BTreeMap<String, u64>>,
    /// Each thread's samples: (the GC's own work, mark assists, all).
    gc: BTreeMap<u32, (u64, u64, u64)>,
    /// Samples allocating (under runtime.mallocgc, assists included), by (thread, site).
    allocating: BTreeMap<(u32, String), u64>,
}

impl OncpuSamples {
    /// Counts the run's on-CPU samples by thread: by site, by the GC's work, allocating.
    fn of(run: &Run) -> OncpuSamples {
        let mut sites: BTreeMap<u32, BTreeMap<String, u64>> = BTreeMap::new();
        let mut gc: BTreeMap<u32, (u64, u64, u64)> = BTreeMap::new();
        let mut allocating: BTreeMap<(u32, String), u64> = BTreeMap::new();
        for s in &run.profiles.oncpu.stacks {
            let frames = frames_of(run, s);
            let e = gc.entry(s.tid).or_default();
            e.2 += s.value;
            if classify::allocating(&frames) {
                *allocating
                    .entry((s.tid, classify::site(&frames)))
                    .or_default() += s.value;
            }
            match classify::gc_work(&frames) {
                Some(classify::GcWork::Assist) => {
                    e.1 += s.value;
                    continue;
                }
                Some(classify::GcWork::Collector) => {
                    e.0 += s.value;
                    continue;
                }
                None => {}
            }
            // The recorder's own uprobe traps say nothing of where the program was.
            if classify::in_probe(&frames) {
                continue;
            }
            let site = classify::site(&frames);
            *sites.entry(s.tid).or_default().entry(site).or_default() += s.value;
        }
        OncpuSamples {
            sites,
            gc,
            allocating,
        }
    }

    /// What made the GC work: the program's heaviest allocating site, and its busiest thread.
    fn gc_culprit(&self, cx: &Ctx) -> Option<Culprit> {
        let mut by_site: BTreeMap<&str, (u64, u32, u64)> = BTreeMap::new();
        for ((tid, site), &n) in &self.allocating {
            let e = by_site.entry(site.as_str()).or_default();
            e.0 += n;
            if n > e.2 {
                (e.1, e.2) = (*tid, n);
            }
        }
        by_site
            .into_iter()
            .filter(|(site, _)| !site.is_empty())
            .max_by_key(|(_, (n, _, _))| *n)
            .map(|(site, (_, tid, _))| {
                cx.thread_culprit(tid, format!("allocating in {site}"), vec![site.to_string()])
            })
    }

    /// The samples of `tids` that `pick` picks of (the GC's own work, mark assists, all), and
    /// all their samples.
    fn of_threads(&self, tids: &BTreeSet<u32>, pick: fn(&(u64, u64, u64)) -> u64) -> (u64, u64) {
        tids.iter().fold((0, 0), |(a, b), t| {
            let e = self.gc.get(t).copied().unwrap_or_default();
            (a + pick(&e), b + e.2)
        })
    }
}

/// The threads' exact on-CPU time, shared between the GC's work and the rest by samples.
struct OncpuTime {
    /// The Go GC's own work: its mark workers and sweeping.
    collector: Group,
    /// The Go GC's mark assists.
    assists: Group,
    /// The rest, by pool of threads and its hottest site.
    groups: BTreeMap<(String, String), Group>,
    /// Each group's samples: (in its site, all).
    share_of_site: BTreeMap<(String, String), (u64, u64)>,
}

impl OncpuTime {
    /// Groups each thread's on-CPU time by its pool and its hottest site, its GC work aside.
    fn of(run: &Run, samples: &OncpuSamples) -> OncpuTime {
        let mut time = OncpuTime {
            collector: Group::default(),
            assists: Group::default(),
            groups: BTreeMap::new(),
            share_of_site: BTreeMap::new(),
        };
        for t in run.threads.iter().filter(|t| t.oncpu_ns > 0) {
            let sites = samples.sites.get(&t.tid);
            let top = sites
                .and_then(|m| m.iter().max_by_key(|(_, v)| **v))
                .map(|(s, v)| (s.clone(), *v));
            let all: u64 = sites.map_or(0, |m| m.values().sum());
            let site = top.as_ref().map_or(String::new(), |(s, _)| s.clone());
            let key = (pattern(&t.comm), site);
            // The exact on-CPU time, shared between the GC and the rest by samples.
            let (own, assist, sampled) = samples.gc.get(&t.tid).copied().unwrap_or((0, 0, 0));
            let part = |n: u64| {
                if sampled > 0 {
                    t.oncpu_ns as f64 * n as f64 / sampled as f64
                } else {
                    0.0
                }
            };
            if own > 0 {
                time.collector.add(t.tid, part(own), "");
            }
            if assist > 0 {
                time.assists.add(t.tid, part(assist), "");
            }
            time.groups.entry(key.clone()).or_default().add(
                t.tid,
                t.oncpu_ns as f64 - part(own) - part(assist),
                "",
            );
            let e = time.share_of_site.entry(key).or_default();
            e.0 += top.map_or(0, |(_, v)| v);
            e.1 += all;
        }
        time
    }
}

/// `ns`'s share of the process's CPU time, `process_cpu`.
fn cpu_share(ns: f64, process_cpu: f64) -> f64 {
    if process_cpu > 0.0 {
        ns / process_cpu
    } else {
        0.0
    }
}

/// The tail of a GC finding's sentence naming what made the GC work: ", driven by …".
fn driven_by(c: &Option<Culprit>) -> String {
    c.as_ref().map_or(String::new(), |c| {
        format!(", driven by {} {}", c.thread, c.doing)
    })
}

/// The Go GC's own work (its mark workers and sweeping), `g`, as a finding.
fn collector_finding(
    cx: &Ctx,
    g: &Group,
    samples: &OncpuSamples,
    culprit: &Option<Culprit>,
    process_cpu: f64,
) -> Finding {
    let tids: BTreeSet<u32> = g.tids.keys().copied().collect();
    let names: Vec<String> = tids.iter().map(|&t| cx.name(t)).collect();
    let (n, all) = samples.of_threads(&tids, |e| e.0);
    let share = cpu_share(g.ns, process_cpu);
    Finding {
        kind: Kind::Gc,
        seconds: g.ns / 1e9,
        share,
        summary: format!(
            "the Go GC's mark workers and sweeping ran {} on CPU ({} of the process's CPU) on {}{}: CPU the requests did not get",
            ns(g.ns as u64),
            percent(share),
            thread_list(&names),
            driven_by(culprit),
        ),
        evidence: format!(
            "thread rows (on-CPU time); on-CPU profile: {n} of {all} samples of these threads under runtime.gcBgMarkWorker, gcDrain or bgsweep; process CPU {}",
            ns(process_cpu as u64)
        ),
        threads: names,
        tids: tids.into_iter().collect(),
        site: switchyard_runtimes::go::MARK_WORKER.into(),
        culprit: culprit.clone(),
        address: None,
        symbol: None,
        then_runqueue_s: 0.0,
        when: None,
        of_process_cpu: true,
    }
}

/// The Go GC's mark assists, `g`: the marking threads did as they allocated, as a finding.
fn assists_finding(
    cx: &Ctx,
    g: &Group,
    samples: &OncpuSamples,
    culprit: &Option<Culprit>,
    process_cpu: f64,
) -> Finding {
    let run = cx.run;
    let tids: BTreeSet<u32> = g.tids.keys().copied().collect();
    let names: Vec<String> = tids.iter().map(|&t| cx.name(t)).collect();
    let (n, all) = samples.of_threads(&tids, |e| e.1);
    let share = cpu_share(g.ns, process_cpu);
    let count = run
        .gc
        .as_ref()
        .filter(|g| g.mark_assists > 0)
        .map_or(String::new(), |g| {
            format!(" in {} mark assists", g.mark_assists)
        });
    // Where the assists were made: the program's site under them.
    let site = allocating_site(run, &tids);
    Finding {
        kind: Kind::Gc,
        seconds: g.ns / 1e9,
        share,
        summary: format!(
            "{} did the Go GC's marking as {} allocated: {} on CPU{count} ({} of the process's CPU){}",
            thread_list(&names),
            if names.len() == 1 { "it" } else { "they" },
            ns(g.ns as u64),
            percent(share),
            if site.is_empty() {
                String::new()
            } else {
                format!(", in {site}")
            },
        ),
        evidence: format!(
            "thread rows (on-CPU time); on-CPU profile: {n} of {all} samples of these threads under runtime.gcAssistAlloc; process CPU {}",
            ns(process_cpu as u64)
        ),
        threads: names,
        tids: tids.into_iter().collect(),
        site,
        culprit: culprit.clone(),
        address: None,
        symbol: None,
        then_runqueue_s: 0.0,
        when: None,
        of_process_cpu: true,
    }
}

/// A pool of threads running, `g` (its key: the pool and its hottest site), as a finding.
fn running_finding(
    cx: &Ctx,
    time: &OncpuTime,
    key: &(String, String),
    g: &Group,
    process_cpu: f64,
) -> Finding {
    let tids: BTreeSet<u32> = g.tids.keys().copied().collect();
    let names: Vec<String> = tids.iter().map(|&t| cx.name(t)).collect();
    let share = cpu_share(g.ns, process_cpu);
    let (in_site, all) = time.share_of_site.get(key).copied().unwrap_or((0, 0));
    let site = key.1.clone();
    let mut summary = format!(
        "{} ran {} on CPU ({} of the process's CPU)",
        thread_list(&names),
        ns(g.ns as u64),
        percent(share),
    );
    let evidence = if all > 0 {
        summary += &format!(", {} of it in {site}", percent(in_site as f64 / all as f64));
        format!("thread rows (on-CPU time); on-CPU profile: {in_site} of {all} samples in {site}")
    } else {
        "thread rows (on-CPU time); no on-CPU samples".into()
    };
    Finding {
        kind: Kind::Oncpu,
        seconds: g.ns / 1e9,
        share,
        threads: names,
        tids: tids.into_iter().collect(),
        site,
        culprit: None,
        evidence,
        summary,
        address: None,
        symbol: None,
        then_runqueue_s: 0.0,
        when: None,
        of_process_cpu: true,
    }
}

/// The program's own site most of `tids`' mark assists were made from (the function whose
/// allocation assisted).
fn allocating_site(run: &Run, tids: &BTreeSet<u32>) -> String {
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    for s in run
        .profiles
        .oncpu
        .stacks
        .iter()
        .filter(|s| tids.contains(&s.tid))
    {
        let frames = frames_of(run, s);
        if classify::gc_work(&frames) == Some(classify::GcWork::Assist) {
            *by.entry(classify::site(&frames)).or_default() += s.value;
        }
    }
    by.into_iter()
        // A stack whose walk stopped inside the runtime names no site of the program's.
        .filter(|(s, _)| !s.is_empty() && !switchyard_runtimes::go::is_runtime(s))
        .max_by_key(|(_, v)| *v)
        .map(|(s, _)| s)
        .unwrap_or_default()
}

/// Go's stop-the-world pauses: every goroutine waits, whichever thread it is on. Their effect
/// is the CPU the process would have had: the pauses' time by the CPUs it kept busy on
/// average while the world ran (as gctrace counts a pause once per P).
fn gc_pauses(cx: &Ctx) -> Vec<Finding> {
    let Some(g) = &cx.run.gc else {
        return Vec::new();
    };
    if g.pauses == 0 {
        return Vec::new();
    }
    let run = cx.run;
    let duration = run.meta.duration_ns() as f64;
    let process_cpu: f64 = run.threads.iter().map(|t| t.oncpu_ns as f64).sum();
    let paused = g.pause_total_ns as f64;
    let running = (duration - paused).max(1.0);
    let busy = (process_cpu / running).max(1.0);
    let lost = paused * busy;
    let share = if process_cpu > 0.0 {
        lost / process_cpu
    } else {
        0.0
    };
    vec![Finding {
        kind: Kind::Gc,
        seconds: lost / 1e9,
        share,
        threads: vec!["every goroutine".into()],
        tids: vec![],
        site: "runtime.stopTheWorldWithSema".into(),
        culprit: None,
        evidence: format!(
            "Go runtime uprobes: {} stop-the-world pauses in {} GC cycles, {} in all; thread rows: the process kept {busy:.2} CPUs busy while the world ran",
            g.pauses,
            g.cycles,
            ns(g.pause_total_ns)
        ),
        summary: format!(
            "the Go runtime stopped the world {} times for {} in all (longest {}), over {} GC cycles: every goroutine stopped, about {} of CPU lost ({} of the process's CPU)",
            g.pauses,
            ns(g.pause_total_ns),
            ns(g.pause_max_ns),
            g.cycles,
            ns(lost as u64),
            percent(share),
        ),
        address: None,
        symbol: None,
        then_runqueue_s: 0.0,
        when: None,
        of_process_cpu: true,
    }]
}

/// When finding `f` happened: the timeline's intervals of its threads that read as it.
fn when(cx: &Ctx, t: &switchyard_model::Timeline, f: &Finding) -> Option<When> {
    let run = cx.run;
    use switchyard_model::ThreadState;
    let tids: BTreeSet<u32> = f.tids.iter().copied().collect();
    let mut times: Vec<u64> = Vec::new();
    match f.kind {
        Kind::Runqueue => {
            for th in t.threads.iter().filter(|th| tids.contains(&th.tid)) {
                times.extend(
                    th.slices
                        .iter()
                        .filter(|s| ThreadState::from_u8(s.2) == ThreadState::Runnable)
                        .map(|s| s.0),
                );
            }
        }
        Kind::Oncpu => times.extend(
            t.samples
                .iter()
                .filter(|s| tids.contains(&s.1))
                .map(|s| s.0),
        ),
        Kind::Gc => {
            let g = run.gc.as_ref()?;
            times.extend(
                g.timeline
                    .iter()
                    .filter(|m| m.kind == "pause")
                    .map(|m| m.at_ns),
            );
        }
        _ => {
            for &(at, tid, stack, _, state) in &t.offcpu {
                let Some(label) = ThreadState::from_u8(state).blocked_label() else {
                    continue;
                };
                if !tids.contains(&tid) {
                    continue;
                }
                let Some(indices) = t.stacks.get(stack as usize) else {
                    continue;
                };
                let tgid = run
                    .threads
                    .iter()
                    .find(|th| th.tid == tid)
                    .map_or(0, |th| th.tgid);
                let r = cx.reader.read_as(tgid, &label, indices);
                if r.kind == f.kind && r.site == f.site {
                    times.push(at);
                }
            }
        }
    }
    let first = *times.iter().min()?;
    let last = *times.iter().max()?;
    Some(When {
        first_s: first as f64 / 1e9,
        last_s: last as f64 / 1e9,
        intervals: times.len() as u64,
    })
}

impl Explanation {
    /// The request path's findings (everything but idle), ranked.
    pub fn busy(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.kind != Kind::Idle)
    }

    /// Idle waits: threads waiting for work.
    pub fn idle(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.kind == Kind::Idle)
    }

    /// The terminal's form: the top `top` findings of the request path, a line each, then
    /// idle in one line. Every sentence passes through [`escape`]: they carry the target's
    /// thread and function names, which must not act on the terminal (the JSON and the page
    /// escape them their own way).
    pub fn render(&self, top: usize) -> String {
        let mut out = String::new();
        for s in &self.spans {
            let p = &s.percentiles_ns;
            out.push_str(&format!(
                "slow requests: {} ({} instances; P50 {}, P90 {}, P99 {}, P99.9 {}, max {}):\n",
                escape(&s.name),
                s.count,
                ns(p.p50),
                ns(p.p90),
                ns(p.p99),
                ns(p.p999),
                ns(p.max)
            ));
            if s.slow.findings.is_empty() {
                out.push_str(&format!(
                    "  the slowest 1% ({} kept) differ from the typical ones ({} sampled) by no single cause\n",
                    s.slow.count, s.typical.count
                ));
            }
            for (i, f) in s.slow.findings.iter().take(top).enumerate() {
                out.push_str(&format!(
                    "  {}. [{}] {}\n",
                    i + 1,
                    f.finding.kind.name(),
                    escape(&f.finding.summary)
                ));
            }
            for note in &s.notes {
                out.push_str(&format!("  note: {}\n", escape(note)));
            }
        }
        if self.findings.is_empty() {
            out.push_str(
                "why it waited: nothing stands out (no wait over 1% of any thread's time)\n",
            );
        } else {
            out.push_str("why it waited (switchyard explain):\n");
        }
        for (i, f) in self.busy().take(top).enumerate() {
            out.push_str(&format!(
                "  {}. [{}] {}\n",
                i + 1,
                f.kind.name(),
                escape(&f.summary)
            ));
        }
        let idle: Vec<&Finding> = self.idle().collect();
        if !idle.is_empty() {
            let secs: f64 = idle.iter().map(|f| f.seconds).sum();
            let sites: BTreeSet<&str> = idle.iter().map(|f| f.site.as_str()).collect();
            let sites: Vec<_> = sites.into_iter().map(escape).collect();
            out.push_str(&format!(
                "  idle, not on the request path: {} waiting for work ({})\n",
                ns((secs * 1e9) as u64),
                sites.join(", ")
            ));
        }
        // The cgroup's path is the target's too.
        for note in self.throttled.iter().chain(&self.limits) {
            out.push_str(&format!("  note: {}\n", escape(note)));
        }
        out
    }
}

#[cfg(test)]
mod tests;
