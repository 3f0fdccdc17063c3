//! `switchyard explain RUN.json [--json] [--top N]`: why the run waited, and who made it wait —
//! the ranked findings, in plain words or as the JSON contract (docs/explain.md).
//!
//! The text escapes the target's names (`switchyard_model::term`); the JSON keeps them as
//! recorded, escaped by JSON's own rules.

use std::{io::Write as _, path::PathBuf, process::ExitCode};

use switchyard_findings::Explanation;
use switchyard_model::{Run, term::escape};

/// Findings of the request path the text shows when `--top` is not given.
const TOP: usize = 10;

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// The run file `switchyard record` wrote.
    #[arg(value_name = "RUN.json")]
    run: PathBuf,
    /// Print the findings as JSON (schema_version 1; see docs/explain.md).
    #[arg(long)]
    json: bool,
    /// Findings of the request path to print, 1 or more (idle waits follow, in one line of the
    /// text). Default: 10 in the text, all of them in the JSON.
    #[arg(long, value_name = "N", value_parser = parse_top)]
    top: Option<usize>,
}

/// A number of findings, 1 or more: `--top 0` would print nothing, and is more likely a
/// mistake than a wish.
fn parse_top(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err(format!(
            "--top 0 would show no finding; give 1 or more (the text shows {TOP} without it)"
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a number of findings")),
    }
}

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let run = Run::load(&args.run).map_err(crate::fail::run_file_error)?;
    let ex = switchyard_findings::explain(&run);
    let top = args.top;
    let mut out = std::io::stdout().lock();
    if args.json {
        let ex = match top {
            Some(n) => first(ex, n),
            None => ex,
        };
        serde_json::to_writer_pretty(&mut out, &ex)?;
        writeln!(out)?;
    } else {
        let top = top.unwrap_or(TOP);
        write!(out, "{}", ex.render(top))?;
        if !ex.findings.is_empty() {
            writeln!(out, "\nevidence:")?;
            for (i, f) in ex.busy().take(top).enumerate() {
                writeln!(out, "  {}. {}", i + 1, escape(&f.evidence))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The findings the text shows for `--top n`: the first `n` of the request path, in rank
/// order, then every idle one (the text sums them in one line).
fn first(mut ex: Explanation, n: usize) -> Explanation {
    let mut busy = 0;
    ex.findings.retain(|f| {
        if f.kind == switchyard_findings::Kind::Idle {
            return true;
        }
        busy += 1;
        busy <= n
    });
    ex
}
