//! The measured stories: the broker's builds at two contention levels and two message sizes,
//! the relay's at two room counts and two room sizes; each as a set of runs under
//! `reports/<workload>/<config>/<build>-<repeat>/`, comparison pages beside them, and a table of
//! medians (the one in the story's README).
//!
//! The tables take every figure from [`switchyard_model::metrics`] and every median from
//! [`switchyard_compare::spread`], so they say what `switchyard compare` and the budgets say.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

use switchyard_model::{
    Frame, Profile, Profiles, Run,
    metrics::{self, Metric},
    units::{Unit, bytes, grouped, ns_f},
};

use crate::{
    chart::{Chart, Legend, Panel, Series, build_colour},
    fail::Failure,
};

pub(crate) use crate::fail::error_chain;

mod assets;
mod broker;
mod cache;
mod relay;
mod untraced;

pub use assets::*;
pub use broker::*;
pub use cache::*;
pub use relay::*;
pub use untraced::*;

/// A table or chart of a story, from its runs under a root, loaded into groups.
pub type Render = fn(&Path, &[Group]) -> Result<String, Failure>;

/// Every story, in the order `switchyard-workload --help` lists them; the broker's sized to
/// `cores`.
pub fn all(cores: usize) -> Vec<Story> {
    vec![
        broker(cores),
        broker_sweep(cores),
        broker_fallback(),
        relay(),
        assets(),
        assets_concurrency(),
        gogc(),
        forced_gc(),
        cache_size(),
        go_rust(),
    ]
}

/// The story recorded by command `name`.
pub fn named(name: &str, cores: usize) -> Option<Story> {
    all(cores).into_iter().find(|s| s.name == name)
}

/// One configuration of a story: its directory name and its load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub dir: String,
    /// `NAME=VALUE` knobs of the workload.
    pub knobs: Vec<String>,
    /// What is printed as each run starts.
    pub title: String,
    /// The builds run in this configuration, when not all the story's.
    pub builds: Option<&'static [&'static str]>,
}

/// A story: a workload, its configurations, the builds run in each (in this order, per
/// repeat), and the comparisons written beside them (baseline, other).
#[derive(Debug, Clone)]
pub struct Story {
    pub workload: &'static str,
    pub root: &'static str,
    /// The command that records it (`switchyard-workload compare-broker`, and the `just`
    /// recipe of the same name).
    pub name: &'static str,
    /// What it shows, in a line.
    pub about: &'static str,
    /// Runs of each build in each configuration, and seconds of load in each, by default.
    pub repeats: u32,
    pub seconds: u64,
    /// Its table of medians (`table.md`), from the runs under a root.
    pub table: Render,
    /// Its chart (`chart.svg`), when it has one.
    pub chart: Option<Render>,
    /// Its run files keep their on-CPU stacks when slimmed (its table reads them).
    pub keeps_oncpu: bool,
    /// Each recorded run has an untraced twin, run next to it ([`untraced`]): the story's
    /// throughput, latency, CPU and memory come from those. A story told by one recording's
    /// timeline has none.
    pub untraced: bool,
    /// Its lead, the lines a reader takes away, computed from the runs; its README holds
    /// them as they are.
    pub lead: Option<fn(&[Group]) -> String>,
    pub configs: Vec<Config>,
    pub builds: &'static [&'static str],
    pub comparisons: &'static [(&'static str, &'static str)],
}

/// The part of a run a story keeps in the repository: everything but the stacks, the
/// timeline and the spans' instances (a few tens of KiB where `run.json` is megabytes). Tables are computed from it.
pub const SLIM: &str = "run.slim.json";

/// The counts of a server's summary line (`server.out`) a story keeps with its run, as
/// `server_<name>` parameters: the read-state cache's hits (its driver cannot see them).
const SERVER_COUNTS: [&str; 3] = ["capacity", "requests", "hits"];

/// Writes `dir/run.slim.json` from `dir/run.json`, with the server's counts
/// ([`with_server_counts`]); with `oncpu`, keeping the on-CPU stacks (and only their frames),
/// which the asset table's shares are computed from.
pub fn slim(dir: &Path, oncpu: bool) -> Result<(), Failure> {
    let path = dir.join("run.json");
    let mut run = Run::load(&path).map_err(|e| Failure::new(error_chain(&e)))?;
    let whole = std::mem::take(&mut run.profiles);
    if oncpu {
        run.profiles.oncpu = only_oncpu(&whole, &mut run.profiles.frames);
        run.profiles.stats = whole.stats;
    }
    run.timeline = None;
    // A span's slowest and typical instances, whole: megabytes a run. The tables read its
    // histogram; the anatomy of the slowest requests is read from the whole run.
    for span in &mut run.locks.spans {
        if let Some(anatomy) = span.anatomy.as_mut() {
            anatomy.instances.clear();
        }
    }
    with_server_counts(&mut run, dir);
    run.save(&dir.join(SLIM))
        .map_err(|e| Failure::new(format!("writing {}: {e}", dir.join(SLIM).display())))
}

/// Adds the counts of [`SERVER_COUNTS`] from the server's summary in `dir/server.out`, where
/// there is one, to the run's driver parameters.
fn with_server_counts(run: &mut Run, dir: &Path) {
    let summary = fs::read_to_string(dir.join("server.out")).unwrap_or_default();
    let summary = summary
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    if let (Some(summary), Some(w)) = (summary, run.workload.as_mut()) {
        for name in SERVER_COUNTS {
            if let Some(v) = summary.get(name).and_then(serde_json::Value::as_u64) {
                w.parameters.insert(format!("server_{name}"), v.to_string());
            }
        }
    }
}

/// `profiles`' on-CPU stacks with their frames renumbered into `frames`, which gets only the
/// frames they use, in the order first used.
fn only_oncpu(profiles: &Profiles, frames: &mut Vec<Frame>) -> Profile {
    let mut index: BTreeMap<u32, u32> = BTreeMap::new();
    let mut oncpu = profiles.oncpu.clone();
    for stack in &mut oncpu.stacks {
        for f in &mut stack.frames {
            *f = *index.entry(*f).or_insert_with(|| {
                frames.push(
                    profiles
                        .frames
                        .get(*f as usize)
                        .cloned()
                        .unwrap_or_default(),
                );
                (frames.len() - 1) as u32
            });
        }
    }
    oncpu
}

/// The runs of one build in one configuration, with their figures.
pub struct Group {
    /// The configuration's directory name.
    pub config: String,
    pub build: &'static str,
    pub runs: Vec<(Run, BTreeMap<String, Metric>)>,
    /// Its untraced runs, interleaved with the recorded ones; none in a story recorded
    /// without them.
    pub untraced: Vec<Untraced>,
}

/// Every `<config>/<build>-*/run.json` under `root`, configurations in name order and builds
/// in the order given; a build with no runs in a configuration is left out.
pub fn load(root: &Path, builds: &[&'static str]) -> Result<Vec<Group>, Failure> {
    let mut configs: Vec<PathBuf> = read_dir(root)?.into_iter().filter(|p| p.is_dir()).collect();
    configs.sort();
    let mut groups = Vec::new();
    for cfg in configs {
        let entries = read_dir(&cfg)?;
        for &build in builds {
            let prefix = format!("{build}-");
            let mut files: Vec<PathBuf> = entries
                .iter()
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
                })
                // The whole run where it is here, else the part a story commits.
                .map(|p| match p.join("run.json") {
                    whole if whole.is_file() => whole,
                    _ => p.join(SLIM),
                })
                .filter(|p| p.is_file())
                .collect();
            if files.is_empty() {
                continue;
            }
            files.sort();
            let mut runs = Vec::new();
            for f in files {
                let mut run = Run::load(&f).map_err(|e| {
                    Failure::new(error_chain(&e))
                        .hint("record it again with this build (the story's `just` recipe)")
                })?;
                // A whole run.json has not had them added; a slim one has them already.
                if let Some(dir) = f.parent() {
                    with_server_counts(&mut run, dir);
                }
                let figures = metrics::extract(&run);
                runs.push((run, figures));
            }
            groups.push(Group {
                config: file_name(&cfg),
                build,
                runs,
                untraced: load_untraced(&cfg, build)?,
            });
        }
    }
    Ok(groups)
}

impl Group {
    /// The median over the runs of a figure each run computes with `f` (0 when none has it).
    fn median(&self, f: impl Fn(&Run, &BTreeMap<String, Metric>) -> Option<f64>) -> f64 {
        let values: Vec<f64> = self.runs.iter().filter_map(|(r, m)| f(r, m)).collect();
        switchyard_compare::spread(&values).map_or(0.0, |s| s.median)
    }

    /// A figure each recorded run computes with `f`, one value a run that has it.
    pub(crate) fn per_run(&self, f: impl Fn(&Run) -> Option<f64>) -> Vec<f64> {
        self.runs.iter().filter_map(|(run, _)| f(run)).collect()
    }

    /// The named figure of each run, one value a run: from the untraced runs for a figure
    /// the recorder's probes bend ([`UNTRACED_FIGURES`]) where the story has them, else from
    /// the recorded runs.
    pub fn values(&self, name: &str) -> Vec<f64> {
        if self.is_untraced(name) {
            return self
                .untraced
                .iter()
                .filter_map(|u| u.figure(name))
                .collect();
        }
        self.recorded(name)
    }

    /// The named figure of each recorded run, whatever the untraced runs say: what the
    /// recorder saw.
    pub fn recorded(&self, name: &str) -> Vec<f64> {
        self.runs
            .iter()
            .filter_map(|(run, figures)| metrics::lookup(run, figures, name).map(|m| m.value))
            .collect()
    }

    /// The figures `x` and `y` of each run as a point: the untraced runs' where both come
    /// from them ([`Group::values`]), else the recorded runs'.
    pub fn points(&self, x: &str, y: &str) -> Vec<(f64, f64)> {
        if self.is_untraced(x) && self.is_untraced(y) {
            return self
                .untraced
                .iter()
                .filter_map(|u| Some((u.figure(x)?, u.figure(y)?)))
                .collect();
        }
        self.runs
            .iter()
            .filter_map(|(run, m)| {
                Some((
                    metrics::lookup(run, m, x)?.value,
                    metrics::lookup(run, m, y)?.value,
                ))
            })
            .collect()
    }

    /// Whether the named figure comes from the untraced runs.
    pub fn is_untraced(&self, name: &str) -> bool {
        !self.untraced.is_empty() && UNTRACED_FIGURES.contains(&name)
    }

    /// The median of the named figure ([`Group::values`]; 0 when no run has it).
    fn figure(&self, name: &str) -> f64 {
        switchyard_compare::spread(&self.values(name)).map_or(0.0, |s| s.median)
    }

    /// The named figure as a table shows it: the median, then the runs' range in brackets
    /// when there is more than one (`57,589 [53,204–60,112]`), each written by `write`.
    fn ranged(&self, name: &str, write: impl Fn(f64) -> String) -> String {
        ranged_values(&self.values(name), write)
    }

    /// The named figure of this group against the `base` group's, by compare's own rule
    /// ([`switchyard_compare::judge_figure`]): the change and its verdict with the rank test's
    /// p (`+59% (p=0.008)`), `no difference shown (p=0.31)`, or with too few runs a side, `~`
    /// and the runs needed.
    fn against(&self, base: &Group, name: &str) -> String {
        verdict_of(name, &base.values(name), &self.values(name))
    }

    /// The median over the runs of a driver parameter, a number (0 when no run has it).
    fn parameter_median(&self, name: &str) -> f64 {
        self.median(|run, _| number(run, name))
    }

    /// A driver parameter of the first run.
    fn parameter(&self, name: &str) -> Option<&str> {
        self.runs
            .first()
            .and_then(|(r, _)| r.workload.as_ref())
            .and_then(|w| w.parameters.get(name))
            .map(String::as_str)
    }
}

/// The change of figure `name` from A's values to B's (one a run) and compare's verdict on it:
/// `+59.0% (p=0.008)`, `no difference shown (p=0.310)`, or with too few runs a side `~` and
/// the runs needed.
pub(crate) fn verdict_of(name: &str, a: &[f64], b: &[f64]) -> String {
    use switchyard_compare::{Verdict, judge_figure, p_text, runs_needed, verdict_word};
    let j = judge_figure(name, a, b);
    let change = j
        .delta_pct
        .map_or_else(|| "–".into(), switchyard_model::units::percent_change);
    match (j.verdict, j.p) {
        (Verdict::Better | Verdict::Worse, Some(p)) => format!("{change} ({})", p_text(p)),
        // Too few runs for any split to reach ALPHA: say so, or "no difference" reads as a
        // finding.
        (Verdict::NoDifference, Some(p)) if !switchyard_compare::can_show(a.len(), b.len()) => {
            format!(
                "no difference shown ({}; {} cannot show one)",
                p_text(p),
                switchyard_compare::runs_a_side(a.len() as u64, b.len() as u64)
            )
        }
        (Verdict::NoDifference, Some(p)) => format!("no difference shown ({})", p_text(p)),
        (Verdict::Same, _) => "same".into(),
        (Verdict::Withheld, _) => format!(
            "~ ({change}; a verdict needs {} runs a side)",
            runs_needed(name)
        ),
        (v, _) => format!("{change} {}", verdict_word(v)).trim().to_string(),
    }
}

/// The group of `build` in configuration `config`.
pub(crate) fn find<'a>(groups: &'a [Group], config: &str, build: &str) -> Option<&'a Group> {
    groups
        .iter()
        .find(|g| g.config == config && g.build == build)
}

/// The median [min–max] of `values`, each written by `write`; "–" for none.
pub(crate) fn ranged_values(values: &[f64], write: impl Fn(f64) -> String) -> String {
    match switchyard_compare::spread(values) {
        None => "–".into(),
        Some(s) if s.n > 1 => format!("{} [{}–{}]", write(s.median), write(s.min), write(s.max)),
        Some(s) => write(s.median),
    }
}

/// For each configuration of `configs` (its folder and its title), `build`'s figure `name`
/// against `base`'s, both ranged, and the change with compare's verdict: "TITLE: B [..]
/// against A [..], +5.0% (p=0.008)". A configuration lacking either build is left out.
pub(crate) fn each_against(
    groups: &[Group],
    configs: &[(&str, &str)],
    (build, base): (&str, &str),
    name: &str,
    write: &dyn Fn(f64) -> String,
) -> Vec<String> {
    configs
        .iter()
        .filter_map(|(config, title)| {
            let (g, b) = (find(groups, config, build)?, find(groups, config, base)?);
            Some(format!(
                "{title}: {} against {}, {}",
                g.ranged(name, write),
                b.ranged(name, write),
                g.against(b, name)
            ))
        })
        .collect()
}

/// One line of a lead: its title, the builds compared (build, base), the figure and how its
/// values read.
pub(crate) type LeadLine<'a> = (
    &'a str,
    (&'a str, &'a str),
    &'a str,
    &'a dyn Fn(f64) -> String,
);

/// A lead's lines, one per [`LeadLine`]: "- **TITLE:** " and each configuration's
/// [`each_against`], joined.
pub(crate) fn lead_lines(groups: &[Group], configs: &[(&str, &str)], lines: &[LeadLine]) -> String {
    let mut out = String::new();
    for (title, pair, name, write) in lines {
        let line = each_against(groups, configs, *pair, name, *write).join("; ");
        let _ = writeln!(out, "- **{title}:** {line}.");
    }
    out
}

/// A group's runs: "5", or with untraced runs "5 + 5 untraced".
pub(crate) fn runs_text(g: &Group) -> String {
    match g.untraced.len() {
        0 => g.runs.len().to_string(),
        n => format!("{} + {n} untraced", g.runs.len()),
    }
}

/// The line under a table that says where its figures come from, when some are from the
/// untraced runs: those (`figures`, the columns' heads) and the rest from the recorded
/// runs; with the ranges and verdicts read. Empty for a story with no untraced runs.
pub(crate) fn sources(groups: &[Group], figures: &[&str]) -> String {
    if groups.iter().all(|g| g.untraced.is_empty()) {
        return String::new();
    }
    let whence = if groups.iter().all(|g| !g.untraced.is_empty()) {
        "come from the untraced runs, each run next to a recorded one"
    } else {
        "come from the untraced runs in the rows that count them, each run next to a recorded \
         one, and from the recorded runs in the others"
    };
    format!(
        "\n{} {whence}; every other figure from the recorded runs. A cell is the median [the runs' min–max]. A change is from \
         the baseline's median, with the rank test's p (Mann–Whitney U, as `switchyard \
         compare` judges): shown at p < 0.05, else \"no difference shown\".\n",
        join_and(figures),
    )
}

/// "a", "a and b", "a, b and c".
fn join_and(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A numeric driver parameter of `run`.
fn number(run: &Run, name: &str) -> Option<f64> {
    run.workload.as_ref()?.parameters.get(name)?.parse().ok()
}

/// `| a | b |` and `|---|---|`.
pub(crate) fn header(head: &[&str]) -> String {
    format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()))
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let entries = fs::read_dir(dir).map_err(|e| {
        Failure::io(format!("reading {}", dir.display()), e)
            .hint("record the story first (`just compare-broker` or `just compare-relay`)")
    })?;
    Ok(entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_story_judges_its_builds_by_compares_rule() {
        // Five runs a side, every B above every A: the smallest p for 5 against 5.
        let a = [100.0, 101.0, 102.0, 103.0, 104.0];
        let b = [110.0, 111.0, 112.0, 113.0, 114.0];
        assert_eq!(verdict_of("throughput", &a, &b), "+9.8% (p=0.008)");
        // Lower is better for CPU, and the verdict's sign is the change's.
        assert_eq!(verdict_of("cpu.per_op", &b, &a), "-8.9% (p=0.008)");
        // Three a side can never reach p < 0.05.
        assert_eq!(
            verdict_of("throughput", &a[..3], &b[..3]),
            "no difference shown (p=0.100; 3 runs a side cannot show one)"
        );
        // A tail figure needs 5 a side; 3 is too few to judge at all.
        assert_eq!(
            verdict_of("latency.p99_99", &a[..3], &b[..3]),
            "~ (+9.9%; a verdict needs 5 runs a side)"
        );
        // Interleaved ranks: no difference shown, with the p that says how far from one.
        let c = [100.0, 112.0, 102.0, 114.0, 104.0];
        assert!(
            verdict_of("throughput", &a, &c).starts_with("no difference shown (p="),
            "{}",
            verdict_of("throughput", &a, &c)
        );
        assert_eq!(ranged_values(&a, |v| format!("{v:.0}")), "102 [100–104]");
        assert_eq!(ranged_values(&a[..1], |v| format!("{v:.0}")), "100");
        assert_eq!(ranged_values(&[], |v| format!("{v:.0}")), "–");
    }

    #[test]
    fn each_story_has_one_name_and_a_recipe_of_that_name() {
        let justfile = include_str!("../../../../justfile");
        let stories = all(2);
        let mut names: Vec<&str> = stories.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), stories.len(), "{names:?}");
        for s in &stories {
            let recipe = format!("{{{{runner}}}} {} {{{{flags}}}}", s.name);
            assert!(
                justfile.contains(&recipe),
                "no `just {}` recipe: {recipe}",
                s.name
            );
            assert!(named(s.name, 2).is_some_and(|n| n.root == s.root));
        }
        assert!(named("compare-nothing", 2).is_none());
    }

    #[test]
    fn stories_name_known_builds_and_knobs() {
        for story in all(2) {
            let w = crate::catalogue::workload(story.workload).expect("in the catalogue");
            for b in story.builds {
                assert!(w.build(b).is_some(), "{} has no build {b}", w.name);
            }
            for c in &story.configs {
                for k in &c.knobs {
                    let name = k.split_once('=').expect("NAME=VALUE").0;
                    assert!(w.knob(name).is_some(), "{} has no knob {name}", w.name);
                }
            }
        }
        assert_eq!(broker(2).configs[3].knobs, ["producers=8", "size=1024"]);
        let dirs: Vec<_> = assets_concurrency()
            .configs
            .into_iter()
            .map(|c| c.dir)
            .collect();
        assert_eq!(
            dirs,
            ["c02", "c04", "c08"],
            "in name order, the order of the levels"
        );
        for story in [broker_sweep(2), broker_fallback()] {
            let w = crate::catalogue::workload(story.workload).expect("in the catalogue");
            for c in &story.configs {
                for b in c.builds.unwrap_or(story.builds) {
                    assert!(story.builds.contains(b), "{}: {b} is not loaded", c.dir);
                    let knobs = c.knobs.clone();
                    let req = crate::plan::Request {
                        workload: story.workload,
                        build: b,
                        knobs: &knobs,
                        ..Default::default()
                    };
                    assert!(crate::plan::Plan::new(&req, |_| None, 2).is_ok(), "{c:?}");
                }
            }
            assert!(w.build("fixed").is_some());
        }
        let sweep = broker_sweep(2);
        let dirs: Vec<&str> = sweep.configs.iter().map(|c| c.dir.as_str()).collect();
        assert_eq!(
            dirs,
            [
                "sync",
                "sync-k00010",
                "sync-k00100",
                "sync-k01000",
                "sync-k10000"
            ]
        );
        assert_eq!(
            sweep.configs[2].knobs,
            ["producers=8", "size=1024", "flush=every:1", "k=100"]
        );
    }

    #[test]
    fn lock_steps_are_read_from_the_summary_on_the_recordings_clock() {
        let summary = r#"{"lock_stats":{"abs":{"steps":[
            {"at_ns":3500000000,"step":"grew","k":2000,"rate":1500.0,"rate_at_switch":0.0},
            {"at_ns":4000000000,"step":"to_mutex","k":10000,"rate":1200.0,"rate_at_switch":1200.0}]}}}"#;
        let steps = lock_steps(summary, 1_000_000_000).unwrap();
        assert_eq!(
            steps,
            [
                LockStep {
                    at_s: 2.5,
                    step: "grew".into(),
                    k: 2_000,
                    rate: 1_500.0,
                    rate_at_switch: 0.0
                },
                LockStep {
                    at_s: 3.0,
                    step: "to_mutex".into(),
                    k: 10_000,
                    rate: 1_200.0,
                    rate_at_switch: 1_200.0
                },
            ]
        );
        assert!(lock_steps(r#"{"lock_stats":{"kind":"mutex"}}"#, 0).is_err());
        assert!(lock_steps("ready 4000", 0).is_err());
    }

    #[test]
    fn the_hit_ratio_leaves_the_fill_out() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../reports/read-state-cache/gogc/gogc-050/go-1")
            .join(SLIM);
        let mut run = Run::load(&path).expect("a committed run");
        let p = &mut run.workload.as_mut().expect("a driver result").parameters;
        // A run kept without the server's counts: no ratio.
        p.retain(|name, _| !name.starts_with("server_"));
        assert_eq!(cache::hit_ratio(&run), None);
        let p = &mut run.workload.as_mut().expect("a driver result").parameters;
        for (name, value) in [
            ("server_capacity", "100000"),
            ("server_requests", "1100000"),
            ("server_hits", "750000"),
        ] {
            p.insert(name.into(), value.into());
        }
        // 1,100,000 requests, 100,000 of them the fill's misses: 750,000 hits of 1,000,000.
        assert_eq!(cache::hit_ratio(&run), Some(75.0));
    }
}
