//! `switchyard gate`: budgets on runs, for CI. Exit 0 when every budget holds, 1 when one
//! fails, 2 for a bad budget or run file.

use std::{fs, path::PathBuf, process::ExitCode};

use anyhow::{Context as _, Result};
use switchyard_compare::identity::Identity;
use switchyard_model::{Run, metrics};

use crate::{
    compare::{Mismatch, runtime_note, same_workload},
    fail::{hinted, out},
};

#[derive(clap::Args, Debug)]
pub struct GateArgs {
    /// The budget file (TOML, `[[budget]]` tables: metric, max, min, regression, and optional
    /// workload and build to match).
    #[arg(long, value_name = "FILE", required_unless_present = "list")]
    budgets: Option<PathBuf>,
    /// The run regressions are measured against.
    #[arg(long, value_name = "RUN")]
    baseline: Option<PathBuf>,
    /// Also write the verdicts as markdown (e.g. "$GITHUB_STEP_SUMMARY").
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Also write the verdicts as JUnit XML.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// List the figure names a budget can use, and exit.
    #[arg(long)]
    list: bool,
    /// Judge the runs of each workload build together, on the median of each figure over
    /// them (repeats of a noisy figure, as `compare` takes them).
    #[arg(long)]
    median: bool,
    /// Measure regressions against a --baseline of another workload (or, where one names
    /// none, of another program), which is refused otherwise: a warning instead of an error.
    #[arg(long)]
    allow_mismatch: bool,
    /// Run files to check.
    #[arg(value_name = "RUN", required_unless_present = "list")]
    runs: Vec<PathBuf>,
}

fn load(path: &std::path::Path) -> Result<Run> {
    Run::load(path).map_err(crate::fail::run_file_error)
}

/// The runs grouped by workload build (in order of first appearance), each group labelled by
/// its first run and its size.
fn repeats(runs: &[(String, Run)]) -> Vec<(String, Vec<&Run>)> {
    /// (workload, build), when the run names them.
    type Build = Option<(String, String)>;
    let key =
        |r: &Run| -> Build { Some((r.workload_name()?.to_string(), r.build_name()?.to_string())) };
    let mut groups: Vec<(Build, String, Vec<&Run>)> = Vec::new();
    for (label, run) in runs {
        match groups.iter_mut().find(|g| g.0.is_some() && g.0 == key(run)) {
            Some(g) => g.2.push(run),
            None => groups.push((key(run), label.clone(), vec![run])),
        }
    }
    groups
        .into_iter()
        .map(|(_, label, runs)| match runs.len() {
            1 => (label, runs),
            n => (format!("{label} (median of {n})"), runs),
        })
        .collect()
}

pub fn run(args: GateArgs) -> Result<ExitCode> {
    if args.list {
        let mut text = String::from(
            "figures a budget can name (<…> is a syscall name, a span label or a perf counter),\n\
             with the unit of the number a budget gives:\n",
        );
        let width = metrics::NAMES
            .iter()
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0);
        for n in metrics::NAMES {
            text.push_str(&format!("  {n:<width$}  {}\n", metrics::unit_label(n)));
        }
        out(text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = args.budgets.as_ref().context("--budgets is required")?;
    let shown = path.display().to_string();
    let src = fs::read_to_string(path).map_err(|e| {
        hinted(
            format!("cannot read budget file `{shown}`: {e}"),
            "check the path given to --budgets",
        )
    })?;
    let budgets = switchyard_gate::parse(&src, &shown).map_err(|e| {
        hinted(
            e.to_string(),
            "fix the budget where the error points: `switchyard gate --list` gives the figure names and their units; a budget sets max, min (0 or more) and/or regression (percent)",
        )
    })?;
    let runs: Vec<(String, Run)> = crate::runs::expand(&args.runs)?
        .iter()
        .map(|p| Ok((p.display().to_string(), load(p)?)))
        .collect::<Result<_>>()?;
    let baseline = args.baseline.as_deref().map(load).transpose()?;
    // A regression is measured against the baseline: without one, or against another
    // workload's, the budget cannot be checked, and that is the command's fault, not the run's.
    let regressions = |run: &Run| {
        budgets
            .iter()
            .find(|b| b.regression.is_some() && b.applies(run))
    };
    match (&baseline, &args.baseline) {
        (Some(base), Some(base_path)) => {
            let base_label = format!("the baseline {}", base_path.display());
            let base_id = Identity::of(base);
            let mut noted = false;
            for (label, run) in runs.iter().filter(|(_, r)| regressions(r).is_some()) {
                let id = Identity::of(run);
                same_workload(
                    (&base_label, &base_id),
                    (label, &id),
                    args.allow_mismatch,
                    &Mismatch {
                        what: ", so a regression against it would mean nothing",
                        hint: "give --baseline a run of the same workload (name it on both with `record --workload NAME` when no driver does); --allow-mismatch checks against it anyway",
                    },
                )?;
                if !noted && id.runtime != base_id.runtime {
                    runtime_note((&base_label, &base_id), (label, &id));
                    noted = true;
                }
            }
        }
        _ => {
            if let Some((label, b)) = runs
                .iter()
                .find_map(|(label, r)| Some((label, regressions(r)?)))
            {
                return Err(hinted(
                    format!(
                        "budget `{}` ({shown}:{}) sets regression = {}, measured against a baseline run, and no --baseline was given (it applies to {label})",
                        b.name(),
                        b.line,
                        b.regression.unwrap_or_default()
                    ),
                    "pass --baseline RUN, the run to measure against (e.g. the main branch's run.json), or drop `regression` from the budget",
                ));
            }
        }
    }
    let checks = if args.median {
        switchyard_gate::check_repeats(&budgets, &repeats(&runs), baseline.as_ref())
    } else {
        switchyard_gate::check(&budgets, &runs, baseline.as_ref())
    };
    if checks.is_empty() {
        return Err(hinted(
            format!("no budget in {shown} applies to the given runs"),
            "budgets match runs by `workload` and `build` (from the run's workload result); drop them to match every run",
        ));
    }
    out(switchyard_gate::text(&checks))?;
    if let Some(p) = &args.markdown {
        switchyard_model::outfile::write(p, switchyard_gate::markdown(&checks).as_bytes())
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.junit {
        switchyard_model::outfile::write(p, switchyard_gate::junit(&checks).as_bytes())
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(if checks.iter().all(|c| c.passed()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
