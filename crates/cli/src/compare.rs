//! `switchyard compare`: two builds side by side (terminal table + HTML with differential
//! flame graphs).

use std::{fs, path::PathBuf, process::ExitCode};

use anyhow::{Context as _, Result};
use switchyard_compare::identity::{Identity, mismatch};
use switchyard_model::Run;

use crate::fail::{hinted, out};

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Baseline and candidate run files (one each); or use --a/--b for repeats.
    #[arg(value_name = "RUN", num_args = 0..=2)]
    runs: Vec<PathBuf>,
    /// Baseline run files (repeats of build A).
    #[arg(long = "a", num_args = 1.., value_name = "RUN", conflicts_with = "runs")]
    a: Vec<PathBuf>,
    /// Candidate run files (repeats of build B).
    #[arg(long = "b", num_args = 1.., value_name = "RUN", conflicts_with = "runs")]
    b: Vec<PathBuf>,
    /// Name of the baseline side (default: its run file's name, or its directory's for a
    /// run.json; A for repeats).
    #[arg(long)]
    a_label: Option<String>,
    /// Name of the candidate side (default: as for --a-label; B for repeats).
    #[arg(long)]
    b_label: Option<String>,
    /// Write the HTML comparison (index.html and differential folded stacks) here.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Show every figure (all syscalls and perf counters), not only the headline ones.
    #[arg(long)]
    all: bool,
    /// Compare runs of different workloads (or, where a side names none, of different
    /// programs), which is refused otherwise: a warning instead of an error.
    #[arg(long)]
    allow_mismatch: bool,
}

/// The run files `paths` give (a folder gives its windows), and their runs.
fn load(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<Run>)> {
    let files = crate::runs::expand(paths)?;
    let runs = files
        .iter()
        .map(|p| Run::load(p).map_err(crate::fail::run_file_error))
        .collect::<Result<_>>()?;
    Ok((files, runs))
}

/// The sides' names: as given, else what names a lone run file (its stem, or its directory's
/// name for a `run.json`), else A and B (repeats, or two sides that would read alike).
fn labels(args: &CompareArgs, a: &[PathBuf], b: &[PathBuf]) -> (String, String) {
    let named = |paths: &[PathBuf]| -> Option<String> {
        let [path] = paths else { return None };
        let stem = path.file_stem()?.to_str()?;
        if stem != "run" {
            return Some(stem.to_string());
        }
        Some(path.parent()?.file_name()?.to_str()?.to_string())
    };
    let (na, nb) = match (named(a), named(b)) {
        (Some(x), Some(y)) if x != y => (x, y),
        _ => ("A".to_string(), "B".to_string()),
    };
    (
        args.a_label.clone().unwrap_or(na),
        args.b_label.clone().unwrap_or(nb),
    )
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    let (a_paths, b_paths) = match (args.runs.as_slice(), args.a.is_empty(), args.b.is_empty()) {
        ([a, b], true, true) => (vec![a.clone()], vec![b.clone()]),
        ([], false, false) => (args.a.clone(), args.b.clone()),
        _ => {
            return Err(hinted(
                "compare needs two sides",
                "give two run files (`switchyard compare a.json b.json`) or repeats (`--a a1.json a2.json --b b1.json b2.json`)",
            ));
        }
    };
    let (a_files, a) = load(&a_paths)?;
    let (b_files, b) = load(&b_paths)?;
    // Every run against the first: builds of one workload.
    let ids: Vec<(String, Identity)> = a_files
        .iter()
        .chain(&b_files)
        .map(|p| p.display().to_string())
        .zip(a.iter().chain(&b).map(Identity::of))
        .collect();
    if let Some(((first, reference), rest)) = ids.split_first() {
        for (other, id) in rest {
            same_workload(
                (first, reference),
                (other, id),
                args.allow_mismatch,
                &Mismatch {
                    what: "",
                    hint: "compare builds of one workload (name it on both with `record --workload NAME` when no driver does); --allow-mismatch compares them anyway",
                },
            )?;
        }
    }
    let (a_label, b_label) = labels(&args, &a_paths, &b_paths);
    if let (Some((_, ia)), Some((_, ib))) = (ids.first(), ids.get(a.len())) {
        runtime_note((&a_label, ia), (&b_label, ib));
    }
    let cmp = switchyard_compare::compare(&a_label, &a, &b_label, &b);
    out(switchyard_compare::render_text(&cmp, args.all))?;
    // Which few findings explain the difference.
    out(format!("\n{}", cmp.changed.render(5)))?;
    if let Some(dir) = &args.output {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let page = switchyard_compare::html(&cmp, &a, &b, args.all)
            .context("rendering the HTML comparison")?;
        let index = dir.join("index.html");
        switchyard_model::outfile::write(&index, page.as_bytes())
            .with_context(|| format!("writing {}", index.display()))?;
        for (kind, text) in switchyard_compare::diff_folded(&a, &b)? {
            let path = dir.join(format!("{kind}.diff.folded"));
            switchyard_model::outfile::write(&path, text.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        out(format!("comparison: {}\n", index.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How [`same_workload`] words a refusal: `what` ends the error's sentence, `hint` is the hint.
pub struct Mismatch {
    pub what: &'static str,
    pub hint: &'static str,
}

/// Runs of different workloads (or, where one names none, of different programs) are refused
/// (exit 2), or with `allow` said on stderr and let through. See
/// [`switchyard_compare::identity`] for the rule.
pub fn same_workload(
    (a_label, a): (&str, &Identity),
    (b_label, b): (&str, &Identity),
    allow: bool,
    words: &Mismatch,
) -> Result<()> {
    let Some(why) = mismatch(a, b) else {
        return Ok(());
    };
    let sentence = format!(
        "{a_label} and {b_label} are {why}: {} against {}{}",
        a.describe(),
        b.describe(),
        words.what
    );
    if !allow {
        return Err(hinted(sentence, words.hint));
    }
    say!("warning: {sentence}; going on, as --allow-mismatch asks");
    Ok(())
}

/// Says on stderr when two runs' runtimes differ: builds of one workload may (a Go and a Rust
/// build), but the figures of a runtime (GC) are then on one side only.
pub fn runtime_note((a_label, a): (&str, &Identity), (b_label, b): (&str, &Identity)) {
    if a.runtime != b.runtime {
        say!(
            "note: {a_label} runs {} and {b_label} {}: figures of a runtime (Go's GC, Python's frames) are on one side only",
            a.runtime_name(),
            b.runtime_name()
        );
    }
}
