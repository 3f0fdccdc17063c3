//! Pyroscope's push API: `POST /ingest?name=SERVICE{labels}&from=UNIX&until=UNIX&format=pprof`
//! with a gzip'd pprof profile as the body, one request per profile (on-CPU, off-CPU); the
//! profile's own sample types tell them apart.

use switchyard_model::Run;
use switchyard_report::{ProfileKind, pprof};

use crate::{
    Body,
    otlp::{build_and_workload, service_name},
};

/// The profiles pushed, by kind.
const KINDS: [ProfileKind; 2] = [ProfileKind::OnCpu, ProfileKind::OffCpu];

/// `service{build=…,workload=…,host=…}` as Pyroscope's `name` parameter takes it: label
/// values with only the characters its parser allows.
pub fn ingest_name(run: &Run) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-/".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let (build, workload) = build_and_workload(run);
    let labels: Vec<String> = [
        ("build", build),
        ("workload", workload),
        (
            "host",
            Some(run.meta.host.clone()).filter(|h| !h.is_empty()),
        ),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some(format!("{k}={}", clean(&v?))))
    .collect();
    format!("{}{{{}}}", clean(&service_name(run)), labels.join(","))
}

/// Each profile's gzip'd pprof, as `(kind, bytes)`.
pub fn pprof_bodies(run: &Run) -> Result<Vec<(&'static str, Vec<u8>)>, String> {
    KINDS
        .iter()
        .filter(|k| !k.of(&run.profiles).is_empty())
        .map(|&k| {
            pprof(run, k)
                .map(|b| (k.name(), b))
                .map_err(|e| e.to_string())
        })
        .collect()
}

pub(crate) fn bodies(run: &Run) -> Result<Vec<Body>, String> {
    let name = ingest_name(run);
    let from = run.meta.start_wall_ns / 1_000_000_000;
    let until = run.meta.end_wall_ns.div_ceil(1_000_000_000).max(from + 1);
    let query_name: String = name
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    Ok(pprof_bodies(run)?
        .into_iter()
        .map(|(_, bytes)| Body {
            path: format!("/ingest?name={query_name}&from={from}&until={until}&format=pprof"),
            bytes,
            content_type: "application/octet-stream",
        })
        .collect())
}
