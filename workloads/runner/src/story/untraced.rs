//! A story's untraced runs: the same server and load with no tool attached, interleaved with
//! the recorded runs, so a build's throughput, latency, CPU and memory are its own and not
//! what the recorder's probes left of them. The recorded runs give the counts and the anatomy
//! (switches, futex waits, a span's time); the untraced ones every figure the probes would
//! bend. Each is kept as `<config>/untraced/<build>-<repeat>/untraced.json`.

use switchyard_harness::DriverResult;

use super::*;
use crate::{
    interrupt::Interrupts,
    overhead::{self, ServerUse},
    plan::Plan,
    runner::Tools,
};

/// The folder of a configuration that holds its untraced runs.
pub const UNTRACED: &str = "untraced";

/// The file an untraced run is kept as.
pub const UNTRACED_FILE: &str = "untraced.json";

const FORMAT: &str = "switchyard-untraced-run";

/// One untraced run: the driver's result and what the server used over the load.
#[derive(Debug, Clone, PartialEq)]
pub struct Untraced {
    pub result: DriverResult,
    pub server: ServerUse,
}

/// The figures an untraced run gives, named as a run file's are ([`metrics`]): the ones the
/// recorder's probes bend. A story table takes these from the untraced runs where it has them.
pub const UNTRACED_FIGURES: [&str; 9] = [
    "throughput",
    "latency.p50",
    "latency.p90",
    "latency.p99",
    "latency.p99_9",
    "latency.p99_99",
    "latency.max",
    "cpu.per_op",
    "memory.max_rss",
];

impl Untraced {
    /// The figure `name` ([`UNTRACED_FIGURES`]) in the unit a run file's figure of that name
    /// has: per second, µs, µs an operation, MiB.
    pub fn figure(&self, name: &str) -> Option<f64> {
        let r = &self.result;
        let l = &r.latency_ns;
        let us = |ns: u64| Some(ns as f64 / 1e3);
        match name {
            "throughput" => Some(r.throughput_per_s),
            "latency.p50" => us(l.p50),
            "latency.p90" => us(l.p90),
            "latency.p99" => us(l.p99),
            "latency.p99_9" => us(l.p99_9),
            "latency.p99_99" => us(l.p99_99),
            "latency.max" => us(l.max),
            "cpu.per_op" => {
                (r.operations > 0).then(|| self.server.cpu_ns as f64 / 1e3 / r.operations as f64)
            }
            "memory.max_rss" => Some(self.server.peak_rss_bytes as f64 / (1024.0 * 1024.0)),
            _ => None,
        }
    }

    fn to_json(&self) -> Result<String, Failure> {
        let result = serde_json::to_value(&self.result)
            .map_err(|e| Failure::new(format!("writing an untraced run: {e}")))?;
        let value = serde_json::json!({
            "format": FORMAT,
            "server_cpu_ns": self.server.cpu_ns,
            "server_peak_rss_bytes": self.server.peak_rss_bytes,
            "result": result,
        });
        serde_json::to_string_pretty(&value)
            .map_err(|e| Failure::new(format!("writing an untraced run: {e}")))
    }

    /// Reads an untraced run's file; an error names it and says what is wrong.
    pub fn load(path: &Path) -> Result<Untraced, Failure> {
        let bad = |why: String| {
            Failure::new(format!("{}: {why}", path.display()))
                .hint("record the story again (its `just` recipe) to write it anew")
        };
        let text = fs::read_to_string(path)
            .map_err(|e| Failure::io(format!("reading {}", path.display()), e))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(bad(format!("not an untraced run (format is not {FORMAT})")));
        }
        let number = |key: &str| {
            value
                .get(key)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| bad(format!("no {key}")))
        };
        let server = ServerUse {
            cpu_ns: number("server_cpu_ns")?,
            peak_rss_bytes: number("server_peak_rss_bytes")?,
        };
        let result = value
            .get("result")
            .cloned()
            .ok_or_else(|| bad("no driver result".into()))?;
        let result: DriverResult =
            serde_json::from_value(result).map_err(|e| bad(format!("its driver result: {e}")))?;
        Ok(Untraced { result, server })
    }
}

/// One untraced run of `plan` into `out`: the server filled and loaded as a recorded run is,
/// no tool attached; only [`UNTRACED_FILE`] is kept there (the processes' output goes to a
/// scratch folder, kept in its place when the run fails).
pub fn measure(
    plan: &Plan,
    tools: &Tools,
    out: &Path,
    interrupts: &Interrupts,
) -> Result<Untraced, Failure> {
    let scratch = out.join(".scratch");
    let (result, _, server) = overhead::run_measured(plan, tools, None, &scratch, interrupts)?;
    let run = Untraced { result, server };
    let file = out.join(UNTRACED_FILE);
    fs::write(&file, run.to_json()?)
        .map_err(|e| Failure::io(format!("writing {}", file.display()), e))?;
    fs::remove_dir_all(&scratch)
        .map_err(|e| Failure::io(format!("removing {}", scratch.display()), e))?;
    Ok(run)
}

/// The untraced runs of `build` in configuration folder `cfg`, in name order (none when the
/// story was recorded without them).
pub fn load_untraced(cfg: &Path, build: &str) -> Result<Vec<Untraced>, Failure> {
    let dir = cfg.join(UNTRACED);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let prefix = format!("{build}-");
    let mut files: Vec<PathBuf> = read_dir(&dir)?
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .map(|p| p.join(UNTRACED_FILE))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files.iter().map(|f| Untraced::load(f)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Untraced {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/untraced")
            .join(UNTRACED_FILE);
        Untraced::load(&path).expect("the test's untraced run")
    }

    #[test]
    fn an_untraced_run_reads_back_as_written_with_figures_in_a_runs_units() {
        let r = run();
        let text = r.to_json().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(UNTRACED_FILE);
        fs::write(&path, text).unwrap();
        assert_eq!(Untraced::load(&path).unwrap(), r);
        // The server's CPU over the driver's operations, in µs each.
        let ops = r.result.operations as f64;
        assert_eq!(
            r.figure("cpu.per_op"),
            Some(r.server.cpu_ns as f64 / 1e3 / ops)
        );
        assert_eq!(r.figure("throughput"), Some(r.result.throughput_per_s));
        assert_eq!(
            r.figure("latency.p99"),
            Some(r.result.latency_ns.p99 as f64 / 1e3)
        );
        assert_eq!(
            r.figure("memory.max_rss"),
            Some(r.server.peak_rss_bytes as f64 / 1048576.0)
        );
        assert_eq!(r.figure("switches.total.per_op"), None);
        for name in UNTRACED_FIGURES {
            assert!(r.figure(name).is_some(), "{name}");
            assert!(
                metrics::definition(name).is_some(),
                "{name} is no run figure"
            );
        }
    }

    #[test]
    fn a_file_that_is_not_an_untraced_run_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(UNTRACED_FILE);
        fs::write(&path, r#"{"format":"switchyard-run"}"#).unwrap();
        let e = Untraced::load(&path).unwrap_err().render();
        assert!(e.contains("not an untraced run"), "{e}");
        fs::write(&path, "{").unwrap();
        let e = Untraced::load(&path).unwrap_err().render();
        assert!(e.contains("not JSON"), "{e}");
    }
}
