//! `switchyard report RUN.json [-o DIR]`: the HTML report, folded stacks and pprof profiles of
//! a run file.

use std::{
    fs, io,
    io::Write as _,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context as _;
use switchyard_model::Run;
use switchyard_report::ProfileKind;

use crate::fail::hinted;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The run file `switchyard record` wrote.
    #[arg(value_name = "RUN.json")]
    run: PathBuf,
    /// Directory to write the report into (created when missing); default: the run file's
    /// directory.
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
}

const WRITABLE_HINT: &str = "write the report elsewhere with `-o DIR`";

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let run = Run::load(&args.run).map_err(crate::fail::run_file_error)?;
    let dir = match &args.output {
        Some(dir) => dir.clone(),
        None => match args.run.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        },
    };
    fs::create_dir_all(&dir)
        .map_err(|e| hinted(format!("creating {}: {e}", dir.display()), WRITABLE_HINT))?;

    let mut written = Vec::new();
    let html = switchyard_report::html(&run).context("rendering the HTML report")?;
    written.push(write(&dir, "index.html", html.as_bytes())?);
    for kind in ProfileKind::ALL.into_iter().filter(|k| k.present(&run)) {
        let folded = switchyard_report::folded(&run, kind)
            .with_context(|| format!("folding the {} stacks", kind.name()))?;
        written.push(write(
            &dir,
            &format!("{}.folded", kind.name()),
            folded.as_bytes(),
        )?);
    }
    // Every profile as pprof too: a wakeup's waker stack is a label-free tail of its sample.
    for kind in ProfileKind::ALL.into_iter().filter(|k| k.present(&run)) {
        let profile = switchyard_report::pprof(&run, kind)
            .with_context(|| format!("encoding the {} pprof profile", kind.name()))?;
        written.push(write(&dir, &format!("{}.pb.gz", kind.name()), &profile)?);
    }
    // The timeline, for Perfetto and chrome://tracing.
    if let Some(trace) = switchyard_report::chrome_trace(&run) {
        written.push(write(&dir, "trace.json", trace.as_bytes())?);
    }

    // Errors here are a closed stdout: main turns a broken pipe into exit 0.
    let mut out = io::stdout().lock();
    for path in written {
        writeln!(out, "{}", path.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    // A link planted in the folder is replaced, never followed.
    switchyard_model::outfile::write(&path, bytes)
        .map_err(|e| hinted(format!("writing {}: {e}", path.display()), WRITABLE_HINT))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fail::hint_for;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "switchyard-report-test-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn corrupt_run_file_names_file_line_and_column_with_a_hint() {
        let dir = temp_dir("corrupt");
        let path = dir.join("run.json");
        fs::write(&path, "{\n  \"format\": \"switchyard-run\",\n  oops\n").unwrap();
        let err = run(ReportArgs {
            run: path.clone(),
            output: None,
        })
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(!msg.contains('\n'), "one line: {msg}");
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains("line 3, column 3"),
            "{msg}"
        );
        assert!(hint_for(&err).unwrap().contains("switchyard record"));
        assert!(!dir.join("index.html").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_every_output_next_to_the_run_file_or_into_dir() {
        let dir = temp_dir("outputs");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/data/basic.json");
        let run_file = dir.join("run.json");
        fs::copy(&source, &run_file).unwrap();
        let names = [
            "index.html",
            "oncpu.folded",
            "offcpu.folded",
            "wakeup.folded",
            "syscalls.folded",
            "oncpu.pb.gz",
            "offcpu.pb.gz",
            "wakeup.pb.gz",
            "syscalls.pb.gz",
            "futex.pb.gz",
        ];

        let code = run(ReportArgs {
            run: run_file.clone(),
            output: None,
        })
        .unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        for name in names {
            let len = fs::metadata(dir.join(name)).unwrap().len();
            assert!(len > 0, "{name} is empty");
        }

        let out = dir.join("nested/report");
        run(ReportArgs {
            run: run_file,
            output: Some(out.clone()),
        })
        .unwrap();
        for name in names {
            assert_eq!(
                fs::read(out.join(name)).unwrap(),
                fs::read(dir.join(name)).unwrap(),
                "{name} differs between two reports of one run"
            );
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_run_file_has_a_hint() {
        let dir = temp_dir("missing");
        let err = run(ReportArgs {
            run: dir.join("nope.json"),
            output: None,
        })
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("nope.json"), "{msg}");
        assert!(hint_for(&err).unwrap().contains("check the path"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
