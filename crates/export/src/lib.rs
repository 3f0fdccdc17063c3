//! Runs sent on to where a fleet keeps its profiles: OTLP profiles to an OpenTelemetry
//! Collector (HTTP or gRPC), pprof to Pyroscope's push API.
//!
//! Sending never holds the recording up: each sink has its own thread and a bounded queue.
//! [`Exporter::send`] only enqueues, and a full queue drops the run and counts it. A run that
//! fails to go out is retried with backoff (connection refused, 429, 5xx) until it is
//! delivered, gives up on a refusal that a retry cannot mend (4xx), or the recording ends and
//! the last flush runs out of time. Every run that does not arrive is counted, with the last
//! reason, in [`Stats`].

mod otlp;
pub mod process_context;
mod pyroscope;
pub mod settings;
mod sink;
mod tls;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

pub use otlp::{Protocol, encode as otlp_request, encode_with as otlp_request_with};
pub use pyroscope::{ingest_name, pprof_bodies};

/// One request to make: a body and where it goes.
pub struct Body {
    /// The URL's path and query (HTTP sinks).
    pub path: String,
    pub bytes: Vec<u8>,
    pub content_type: &'static str,
}
use switchyard_model::Run;

/// An OpenTelemetry Collector's OTLP endpoint, and how to reach it ([`settings`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Otlp {
    /// `http://host:port` or `https://host:port`, without a path.
    pub base: String,
    /// Where OTLP/HTTP requests go below the base (`/v1development/profiles`, or the path of
    /// `OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT`); empty for gRPC.
    pub path: String,
    pub protocol: Protocol,
    /// Sent with every request (gRPC: as metadata).
    pub headers: Vec<(String, String)>,
    /// One attempt's limit.
    pub timeout: Duration,
    /// Bodies gzip-compressed.
    pub gzip: bool,
    /// Set for an https endpoint.
    pub tls: Option<Tls>,
    /// What named the endpoint: `--otlp` or the variable.
    pub from: String,
    /// Resource attributes from the environment (`OTEL_RESOURCE_ATTRIBUTES`,
    /// `OTEL_SERVICE_NAME`), over those the run gives, below the flags.
    pub resource: Vec<(String, String)>,
}

/// Header values are left out: they hold the credentials.
impl std::fmt::Debug for Otlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Otlp")
            .field("base", &self.base)
            .field("path", &self.path)
            .field("protocol", &self.protocol)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .field("gzip", &self.gzip)
            .field("tls", &self.tls.is_some())
            .field("from", &self.from)
            .field("resource", &self.resource)
            .finish()
    }
}

/// TLS to an https endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tls {
    /// PEM: the certificates to trust instead of the system's roots.
    pub ca: Option<Vec<u8>>,
    /// PEM: the client's certificate and its key, for mutual TLS.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

impl Otlp {
    /// `http://HOST:PORT`, `https://HOST:PORT` or `grpc://HOST:PORT`, as `--otlp` takes it with
    /// no variables: the protocol is gRPC for a `grpc://` URL or port 4317 unless `protocol`
    /// says otherwise, else HTTP.
    pub fn parse(url: &str, protocol: Option<Protocol>) -> Result<Otlp, String> {
        let flags = settings::Flags {
            endpoint: Some(url.to_string()),
            protocol,
            headers: Vec::new(),
        };
        match settings::otlp(&flags, &|_| None) {
            Ok(Some(o)) => Ok(o),
            Ok(None) => Err("no endpoint".into()),
            Err(r) => Err(r.problem),
        }
    }

    /// Where a window goes, for the summary: `https://host:4318/v1development/profiles (http,
    /// from OTEL_EXPORTER_OTLP_ENDPOINT)`.
    pub fn describe(&self) -> String {
        let mut s = format!("{}{} ({}", self.base, self.path, self.protocol.name());
        if self.gzip {
            s += ", gzip";
        }
        if let Some(t) = &self.tls {
            s += if t.client.is_some() {
                ", mutual TLS"
            } else {
                ", TLS"
            };
            if t.ca.is_some() {
                s += " with its own CA";
            }
        }
        if !self.headers.is_empty() {
            let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
            s += &format!(", headers {}", names.join(" "));
        }
        if self.from != "--otlp" {
            s += &format!(", from {}", self.from);
        }
        s + ")"
    }
}

/// A Pyroscope server's base URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pyroscope {
    pub base: String,
}

impl Pyroscope {
    pub fn parse(url: &str) -> Result<Pyroscope, String> {
        let u = reqwest::Url::parse(url).map_err(|e| e.to_string())?;
        if u.scheme() != "http" {
            return Err(format!(
                "`{}` URLs are not supported (http only)",
                u.scheme()
            ));
        }
        let host = u.host_str().ok_or("no host")?;
        let port = u.port().unwrap_or(80);
        Ok(Pyroscope {
            base: format!(
                "http://{}:{port}{}",
                host_for_url(host),
                u.path().trim_end_matches('/')
            ),
        })
    }
}

fn host_for_url(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// Where runs go.
#[derive(Clone, Debug)]
pub struct Config {
    pub otlp: Option<Otlp>,
    pub pyroscope: Option<Pyroscope>,
    /// Runs waiting per sink, at most.
    pub queue: usize,
}

/// What one sink did with the runs offered to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// e.g. `otlp http://127.0.0.1:4318 (grpc)`.
    pub name: String,
    pub offered: u64,
    pub delivered: u64,
    /// Bytes of the delivered requests' bodies (encoded, before transport framing).
    pub bytes: u64,
    /// Attempts that failed and were tried again.
    pub retries: u64,
    /// Runs dropped because the queue was full.
    pub dropped_full: u64,
    /// Runs the sink refused (a 4xx: retrying cannot help).
    pub refused: u64,
    /// Runs still unsent when the recording ended and the last flush ran out of time.
    pub unsent: u64,
    /// Runs that could not be encoded.
    pub unencodable: u64,
    /// The last failure, as the sink or the network said it.
    pub last_error: Option<String>,
}

impl SinkStats {
    pub fn lost(&self) -> u64 {
        self.dropped_full + self.refused + self.unsent + self.unencodable
    }

    /// Runs neither delivered nor lost: queued or being tried.
    pub fn pending(&self) -> u64 {
        self.offered.saturating_sub(self.delivered + self.lost())
    }
}

/// Every sink's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub sinks: Vec<SinkStats>,
}

impl Stats {
    /// Runs some sink did not get.
    pub fn lost(&self) -> u64 {
        self.sinks.iter().map(SinkStats::lost).max().unwrap_or(0)
    }

    pub fn offered(&self) -> u64 {
        self.sinks.iter().map(|s| s.offered).max().unwrap_or(0)
    }

    /// A few words for a window's line: `otlp 3 sent, 1 pending, 0 lost`.
    pub fn brief(&self) -> String {
        self.sinks
            .iter()
            .map(|s| {
                let kind = s.name.split(' ').next().unwrap_or("");
                format!(
                    "{kind} {} sent, {} pending, {} lost",
                    s.delivered,
                    s.pending(),
                    s.lost()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// One line per sink for the summary.
    pub fn lines(&self) -> Vec<String> {
        self.sinks
            .iter()
            .map(|s| {
                let mut line = format!("{}: {} of {} delivered", s.name, s.delivered, s.offered);
                if let Some(avg) = s.bytes.checked_div(s.delivered) {
                    line += &format!(" ({avg} bytes a run on average)");
                }
                line += &format!(", {} retries", s.retries);
                let lost = [
                    (s.dropped_full, "dropped (queue full)"),
                    (s.refused, "refused"),
                    (s.unsent, "unsent at exit"),
                    (s.unencodable, "not encodable"),
                ];
                for (n, what) in lost {
                    if n > 0 {
                        line += &format!(", {n} {what}");
                    }
                }
                if s.lost() > 0
                    && let Some(e) = &s.last_error
                {
                    line += &format!("; last error: {e}");
                }
                line
            })
            .collect()
    }
}

/// The sinks' threads and queues.
pub struct Exporter {
    sinks: Vec<sink::Sink>,
}

impl Exporter {
    /// Starts one sender thread per configured sink.
    pub fn start(config: Config) -> Exporter {
        let mut sinks = Vec::new();
        let queue = config.queue.max(1);
        if let Some(o) = config.otlp {
            sinks.push(sink::Sink::start(sink::Target::Otlp(o), queue));
        }
        if let Some(p) = config.pyroscope {
            sinks.push(sink::Sink::start(sink::Target::Pyroscope(p), queue));
        }
        Exporter { sinks }
    }

    /// Hands a run to every sink; never blocks (a full queue drops it, counted).
    pub fn send(&self, run: Run) {
        let run = Arc::new(run);
        for s in &self.sinks {
            s.offer(Arc::clone(&run));
        }
    }

    pub fn stats(&self) -> Stats {
        Stats {
            sinks: self.sinks.iter().map(|s| s.stats()).collect(),
        }
    }

    /// Lets the sinks deliver what is queued for up to `within`, then stops them: what is
    /// still unsent is counted as lost.
    pub fn finish(self, within: Duration) -> Stats {
        let deadline = Instant::now() + within;
        let sinks: Vec<SinkStats> = self.sinks.into_iter().map(|s| s.finish(deadline)).collect();
        Stats { sinks }
    }
}

/// Shared between a sink's thread and the recording.
type Shared = Arc<Mutex<SinkStats>>;
