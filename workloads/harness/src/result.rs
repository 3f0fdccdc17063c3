//! Building a driver result from a run's recorders, and reading its histogram back. The file
//! format itself ([`DriverResult`]) lives in `switchyard_model::driver`, where the recorder
//! reads it too.

use std::{collections::BTreeMap, time::Duration};

pub use switchyard_model::driver::{
    DriverResult, FORMAT, ResultError, SCHEMA_VERSION, monotonic_ns,
};

use crate::recorder::{LatencyRecorder, Recorder};

/// What a driver does with a [`DriverResult`] beyond the file: build it from its recorders
/// and decode its histogram.
pub trait Measured: Sized {
    /// Builds a result from the merged recorder of a run.
    fn new(
        workload: impl Into<String>,
        build: impl Into<String>,
        parameters: BTreeMap<String, serde_json::Value>,
        recorder: &Recorder,
        errors: u64,
        duration: Duration,
    ) -> Result<Self, ResultError>;

    /// The whole-run histogram, decoded (it can be merged with other runs').
    fn latency(&self) -> Result<LatencyRecorder, ResultError>;
}

impl Measured for DriverResult {
    fn new(
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

    fn latency(&self) -> Result<LatencyRecorder, ResultError> {
        LatencyRecorder::from_base64(&self.histogram).map_err(ResultError::Decode)
    }
}

#[cfg(test)]
mod tests {
    use std::{fs, path::Path, time::Instant};

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
