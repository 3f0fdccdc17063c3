//! The file a workload driver writes: one run's operations, throughput and latency. The
//! harness writes it; `switchyard record --workload-result` reads it into the run's
//! [`Workload`].
//!
//! ```json
//! {
//!   "format": "switchyard-driver-result",
//!   "schema_version": 1,
//!   "workload": "spinlock-broker",
//!   "build": "abs",
//!   "parameters": { "producers": 8, "size": 1024, "duration_ms": 5000 },
//!   "operations": 1234567,
//!   "errors": 0,
//!   "duration_ns": 5000123456,
//!   "throughput_per_s": 246907.0,
//!   "latency_ns": { "p50": 0, "p90": 0, "p99": 0, "p99_9": 0, "p99_99": 0, "max": 0 },
//!   "histogram": "HISTFAAAA…",
//!   "window_ms": 100,
//!   "windows": [ { "start_ms": 0, "operations": 24000, "p99_ns": 0, "max_ns": 0 } ]
//! }
//! ```
//!
//! `histogram` is the whole-run latency histogram (nanoseconds, 3 significant digits) in
//! hdrhistogram's V2 deflate serialisation, base64-encoded; the harness decodes it to merge
//! runs or compute other percentiles. Readers refuse another `format` and a newer
//! `schema_version`; fields added later in version 1 are ignored.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::{Workload, WorkloadWindow};

/// The value of the `format` field.
pub const FORMAT: &str = "switchyard-driver-result";
/// The schema this crate writes and the newest it reads.
pub const SCHEMA_VERSION: u32 = 1;

/// What went wrong writing, reading or decoding a driver result.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    #[error("failed to write driver result `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read driver result `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("driver result `{}` is not valid at line {line}, column {column}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("`{}` is not a driver result (format `{found}`, expected `{FORMAT}`)", path.display())]
    Format { path: PathBuf, found: String },
    #[error(
        "driver result `{}` has schema version {found}; this build reads up to {SCHEMA_VERSION} (a newer switchyard wrote it)",
        path.display()
    )]
    Version { path: PathBuf, found: u32 },
    #[error("driver result histogram cannot be encoded: {0}")]
    Encode(String),
    #[error("driver result histogram cannot be decoded: {0}")]
    Decode(String),
}

/// The summary percentiles of a latency histogram, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub max: u64,
}

/// One driver run. See the module documentation for the JSON form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriverResult {
    pub format: String,
    pub schema_version: u32,
    /// The workload's name, e.g. `spinlock-broker`.
    pub workload: String,
    /// The build (variant) that served the run, e.g. `spin`, `mutex`, `abs`.
    pub build: String,
    /// The driver's parameters, free-form (producers, message size, bound, …).
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// Operations completed (each one recorded in the histogram).
    pub operations: u64,
    /// Operations that failed; they are not in the histogram.
    pub errors: u64,
    /// Wall time from the start of the load to the last completion.
    pub duration_ns: u64,
    pub throughput_per_s: f64,
    pub latency_ns: Percentiles,
    /// hdrhistogram V2 deflate serialisation, base64.
    pub histogram: String,
    pub window_ms: u64,
    pub windows: Vec<WorkloadWindow>,
    /// When the load started, CLOCK_MONOTONIC ns (the clock of switchyard's event timestamps),
    /// so the windows can be laid over a recording's timeline. 0 when unknown.
    #[serde(default)]
    pub start_mono_ns: u64,
}

/// Only the fields that say what a file is, read before the rest so a wrong or newer file gets
/// the right error rather than "missing field".
#[derive(Deserialize)]
struct Header {
    format: String,
    schema_version: u32,
}

impl DriverResult {
    /// Writes the result as pretty JSON, whole or not at all ([`crate::outfile::write`]), so
    /// a reader never sees half a result.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), ResultError> {
        let path = path.as_ref();
        let err = |source| ResultError::Write {
            path: path.to_owned(),
            source,
        };
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| err(e.into()))?;
        text.push(b'\n');
        crate::outfile::write(path, &text).map_err(err)
    }

    /// Reads a result written by [`DriverResult::write`] (or any writer of schema version 1).
    pub fn read(path: impl AsRef<Path>) -> Result<Self, ResultError> {
        let path = path.as_ref();
        let text = fs::read_to_string(path).map_err(|source| ResultError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text, path)
    }

    /// Parses a result from text; `path` only names the source in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, ResultError> {
        let json = |source: serde_json::Error| ResultError::Json {
            path: path.to_owned(),
            line: source.line(),
            column: source.column(),
            source,
        };
        let header: Header = serde_json::from_str(text).map_err(json)?;
        if header.format != FORMAT {
            return Err(ResultError::Format {
                path: path.to_owned(),
                found: header.format,
            });
        }
        if header.schema_version > SCHEMA_VERSION || header.schema_version == 0 {
            return Err(ResultError::Version {
                path: path.to_owned(),
                found: header.schema_version,
            });
        }
        serde_json::from_str(text).map_err(json)
    }

    /// The run file's view of this result. `start_mono_ns` is when the recording started
    /// (CLOCK_MONOTONIC), so the driver's windows land on the recording's timeline.
    pub fn to_workload(&self, start_mono_ns: u64) -> Workload {
        let l = &self.latency_ns;
        Workload {
            name: self.workload.clone(),
            build: self.build.clone(),
            // Text as the driver wrote it: strings unquoted, numbers and the rest as JSON.
            parameters: self
                .parameters
                .iter()
                .map(|(k, v)| {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (k.clone(), text)
                })
                .collect(),
            operations: self.operations,
            errors: self.errors,
            duration_ns: self.duration_ns,
            throughput_per_s: self.throughput_per_s,
            p50_ns: l.p50,
            p90_ns: l.p90,
            p99_ns: l.p99,
            p99_9_ns: l.p99_9,
            p99_99_ns: l.p99_99,
            max_ns: l.max,
            windows: self.windows.clone(),
            start_offset_ns: (self.start_mono_ns > 0)
                .then(|| self.start_mono_ns.saturating_sub(start_mono_ns)),
        }
    }
}

/// CLOCK_MONOTONIC now, in ns: what `Instant` counts in on Linux, and the clock of run files'
/// event timestamps, so a driver's windows can be laid over a recording's events.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-parameter.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_result_reads() {
        // docs/driver-result.md shows a result for drivers switchyard did not write: it must
        // read as it is shown.
        let doc = include_str!("../../../docs/driver-result.md");
        let json = doc
            .split("```json\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("a json block in docs/driver-result.md");
        let r = DriverResult::from_json(json, Path::new("docs/driver-result.md"))
            .unwrap_or_else(|e| panic!("{e}: {json}"));
        assert_eq!((r.operations, r.workload.as_str()), (200_000, "redis"));
        assert_eq!(r.to_workload(0).p99_ns, 900_000);
    }

    fn sample() -> DriverResult {
        DriverResult {
            format: FORMAT.into(),
            schema_version: SCHEMA_VERSION,
            workload: "spinlock-broker".into(),
            build: "abs".into(),
            parameters: BTreeMap::from([
                ("producers".to_owned(), serde_json::json!(2)),
                ("lock".to_owned(), serde_json::json!("abs")),
            ]),
            operations: 2_000,
            errors: 3,
            duration_ns: 150_000_000,
            throughput_per_s: 2_000.0 / 0.15,
            latency_ns: Percentiles {
                p50: 1,
                p90: 2,
                p99: 3,
                p99_9: 4,
                p99_99: 5,
                max: 6,
            },
            histogram: String::new(),
            window_ms: 100,
            windows: vec![WorkloadWindow {
                start_ms: 100,
                operations: 7,
                p99_ns: 8,
                max_ns: 9,
            }],
            start_mono_ns: 5_000,
        }
    }

    #[test]
    fn windows_are_named_fields_in_the_driver_file() {
        let text = serde_json::to_string(&sample()).unwrap();
        assert!(
            text.contains(r#""windows":[{"start_ms":100,"operations":7,"p99_ns":8,"max_ns":9}]"#),
            "{text}"
        );
        assert_eq!(
            DriverResult::from_json(&text, Path::new("r.json")).unwrap(),
            sample()
        );
    }

    #[test]
    fn becomes_the_run_files_workload() {
        let w = sample().to_workload(1_000);
        assert_eq!(
            (w.name.as_str(), w.build.as_str()),
            ("spinlock-broker", "abs")
        );
        assert_eq!(w.parameters["producers"], "2");
        assert_eq!(w.parameters["lock"], "abs");
        assert_eq!((w.p50_ns, w.p99_99_ns, w.max_ns), (1, 5, 6));
        assert_eq!(w.windows, sample().windows);
        assert_eq!(w.start_offset_ns, Some(4_000));
        let unknown = DriverResult {
            start_mono_ns: 0,
            ..sample()
        };
        assert_eq!(unknown.to_workload(1_000).start_offset_ns, None);
    }
}
