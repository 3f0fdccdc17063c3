//! The file a workload driver writes: one run's operations, throughput and latency.
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
//! hdrhistogram's V2 deflate serialisation, base64-encoded: read it back with
//! [`DriverResult::latency`] to merge runs or compute other percentiles. Readers refuse another
//! `format` and a newer `schema_version`; fields added later in version 1 are ignored.

use std::{
    collections::BTreeMap,
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize};

use crate::{
    recorder::{LatencyRecorder, Percentiles, Recorder},
    window::Window,
};

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
    pub windows: Vec<Window>,
    /// When the load started, CLOCK_MONOTONIC ns (the clock of switchyard's event timestamps),
    /// so the windows can be laid over a recording's timeline. 0 when unknown.
    #[serde(default)]
    pub start_mono_ns: u64,
}

/// CLOCK_MONOTONIC now, in ns: what `Instant` counts in on Linux, and the clock of switchyard's
/// run files, so a driver's windows can be laid over a recording's events.
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

/// Only the fields that say what a file is, read before the rest so a wrong or newer file gets
/// the right error rather than "missing field".
#[derive(Deserialize)]
struct Header {
    format: String,
    schema_version: u32,
}

impl DriverResult {
    /// Builds a result from the merged recorder of a run.
    pub fn new(
        workload: impl Into<String>,
        build: impl Into<String>,
        parameters: BTreeMap<String, serde_json::Value>,
        recorder: &Recorder,
        errors: u64,
        duration: Duration,
    ) -> Result<Self, ResultError> {
        let latency = recorder.latency();
        let duration_ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let operations = latency.count();
        let throughput_per_s = if duration_ns == 0 {
            0.0
        } else {
            operations as f64 / duration.as_secs_f64()
        };
        Ok(Self {
            format: FORMAT.to_owned(),
            schema_version: SCHEMA_VERSION,
            workload: workload.into(),
            build: build.into(),
            parameters,
            operations,
            errors,
            duration_ns,
            throughput_per_s,
            latency_ns: latency.percentiles(),
            histogram: latency.to_base64().map_err(ResultError::Encode)?,
            window_ms: recorder.windows().width_ms(),
            windows: recorder.windows().summary(),
            // The result is built as the load ends: its start is `duration` ago.
            start_mono_ns: monotonic_ns().saturating_sub(duration_ns),
        })
    }

    /// The whole-run histogram, decoded (it can be merged with other runs').
    pub fn latency(&self) -> Result<LatencyRecorder, ResultError> {
        LatencyRecorder::from_base64(&self.histogram).map_err(ResultError::Decode)
    }

    /// Writes the result as pretty JSON; the file is replaced atomically (written to
    /// `<path>.tmp`, then renamed), so a reader never sees half a result.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), ResultError> {
        let path = path.as_ref();
        let err = |source| ResultError::Write {
            path: path.to_owned(),
            source,
        };
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| err(e.into()))?;
        text.push(b'\n');
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut file = fs::File::create(&tmp).map_err(err)?;
        file.write_all(&text).map_err(err)?;
        drop(file);
        fs::rename(&tmp, path).map_err(err)
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
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn sample() -> DriverResult {
        let start = Instant::now();
        let mut a = Recorder::new(start, Duration::from_millis(100));
        let mut b = Recorder::new(start, Duration::from_millis(100));
        for i in 0..1_000u64 {
            a.record_ns(1_000 + i, start + Duration::from_micros(i * 150));
            b.record_ns(2_000 + i, start + Duration::from_micros(i * 150));
        }
        a.merge(&b).expect("merge");
        let parameters = BTreeMap::from([
            ("producers".to_owned(), serde_json::json!(2)),
            ("size".to_owned(), serde_json::json!(1024)),
        ]);
        DriverResult::new(
            "spinlock-broker",
            "abs",
            parameters,
            &a,
            3,
            Duration::from_millis(150),
        )
        .expect("result")
    }

    #[test]
    fn fields_follow_the_recorder() {
        let r = sample();
        assert_eq!(r.format, FORMAT);
        assert_eq!(r.schema_version, 1);
        assert_eq!(r.operations, 2_000);
        assert_eq!(r.errors, 3);
        assert_eq!(r.duration_ns, 150_000_000);
        assert!((r.throughput_per_s - 2_000.0 / 0.15).abs() < 1e-6);
        let p = r.latency_ns;
        assert!(p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.p99_9);
        assert!(p.p99_9 <= p.p99_99 && p.p99_99 <= p.max);
        assert_eq!(r.window_ms, 100);
        assert_eq!(r.windows.len(), 2);
        assert_eq!(r.windows.iter().map(|w| w.operations).sum::<u64>(), 2_000);
    }

    #[test]
    fn round_trip_through_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("result.json");
        let r = sample();
        r.write(&path).expect("write");
        assert!(!dir.path().join("result.json.tmp").exists());
        let back = DriverResult::read(&path).expect("read");
        assert_eq!(back, r);
        let hist = back.latency().expect("histogram");
        assert_eq!(hist.count(), r.operations);
        assert_eq!(hist.percentiles(), r.latency_ns);

        let text = fs::read_to_string(&path).expect("text");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        for key in [
            "format",
            "schema_version",
            "workload",
            "build",
            "parameters",
            "operations",
            "errors",
            "duration_ns",
            "throughput_per_s",
            "latency_ns",
            "histogram",
            "window_ms",
            "windows",
        ] {
            assert!(v.get(key).is_some(), "missing `{key}` in {text}");
        }
    }

    #[test]
    fn results_merge_through_their_histograms() {
        let r = sample();
        let mut merged = r.latency().expect("first");
        merged.merge(&r.latency().expect("second")).expect("merge");
        assert_eq!(merged.count(), 2 * r.operations);
        assert_eq!(merged.max(), r.latency_ns.max);
    }

    #[test]
    fn corrupt_json_names_file_line_and_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("broken.json");
        fs::write(
            &path,
            "{\n  \"format\": \"switchyard-driver-result\",\n  \"schema_version\": 1,,\n}\n",
        )
        .expect("write");
        let err = DriverResult::read(&path).expect_err("corrupt file must be refused");
        match &err {
            ResultError::Json { line, column, .. } => assert_eq!((*line, *column), (3, 23)),
            other => panic!("expected a JSON error, got {other:?}"),
        }
        let message = err.to_string();
        assert!(message.contains("broken.json"), "{message}");
        assert!(message.contains("line 3, column 23"), "{message}");
    }

    #[test]
    fn wrong_format_and_newer_version_are_refused() {
        let path = Path::new("x.json");
        let err = DriverResult::from_json(r#"{"format":"run","schema_version":1}"#, path)
            .expect_err("other format");
        assert!(matches!(err, ResultError::Format { ref found, .. } if found == "run"));
        let text = serde_json::to_string(&DriverResult {
            schema_version: 2,
            ..sample()
        })
        .expect("json");
        let err = DriverResult::from_json(&text, path).expect_err("newer version");
        assert!(matches!(err, ResultError::Version { found: 2, .. }));
    }

    #[test]
    fn missing_fields_are_reported_with_a_position() {
        let err = DriverResult::from_json(
            r#"{"format":"switchyard-driver-result","schema_version":1,"workload":"w"}"#,
            Path::new("short.json"),
        )
        .expect_err("incomplete");
        assert!(matches!(err, ResultError::Json { line: 1, .. }), "{err:?}");
    }

    #[test]
    fn a_missing_file_is_a_read_error() {
        let err = DriverResult::read("/nonexistent/result.json").expect_err("missing");
        assert!(matches!(err, ResultError::Read { .. }));
        assert!(err.to_string().contains("/nonexistent/result.json"));
    }
}
