//! `switchyard explain RUN.json [--json]`: why the run waited, and who made it wait — the
//! ranked findings, in plain words or as the JSON contract (docs/explain.md).

use std::{io::Write as _, path::PathBuf, process::ExitCode};

use switchyard_model::Run;

#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    /// The run file `switchyard record` wrote.
    #[arg(value_name = "RUN.json")]
    run: PathBuf,
    /// Print the findings as JSON (schema_version 1; see docs/explain.md).
    #[arg(long)]
    json: bool,
    /// Findings of the request path to print (idle waits follow in one line).
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,
}

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let run = Run::load(&args.run).map_err(crate::fail::run_file_error)?;
    let ex = switchyard_findings::explain(&run);
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &ex)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", ex.render(args.top))?;
        if args.top > 0 && !ex.findings.is_empty() {
            writeln!(out, "\nevidence:")?;
            for (i, f) in ex.busy().take(args.top).enumerate() {
                writeln!(out, "  {}. {}", i + 1, f.evidence)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
