//! The OTLP exporter configured the way OpenTelemetry's SDKs and agents are: by the
//! `OTEL_EXPORTER_OTLP_*` variables, the profiles signal's own (`OTEL_EXPORTER_OTLP_PROFILES_*`)
//! over the generic ones, and a flag over both; the resource by `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES`.
//!
//! Everything is read and checked here, before a recording starts: a malformed header list, an
//! unknown protocol or a certificate file that cannot be read is refused with the variable's
//! name, never found out at the first window.

use std::{path::PathBuf, time::Duration};

use crate::{Otlp, Protocol, Tls, otlp::HTTP_PATH};

/// A setting refused: the flag or variable, what is wrong with it (never its value, which may
/// hold a secret), and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// `--otlp`, `OTEL_EXPORTER_OTLP_HEADERS`, …
    pub setting: String,
    pub problem: String,
    pub hint: String,
}

impl Refused {
    fn new(setting: &str, problem: impl Into<String>, hint: impl Into<String>) -> Refused {
        Refused {
            setting: setting.to_string(),
            problem: problem.into(),
            hint: hint.into(),
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.setting, self.problem)
    }
}

/// What the command line says; each is over its variables.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// `--otlp URL`.
    pub endpoint: Option<String>,
    /// `--otlp-protocol`.
    pub protocol: Option<Protocol>,
    /// `--otlp-header KEY=VALUE`, each.
    pub headers: Vec<String>,
}

/// The environment, as a lookup (the process's own, or a test's).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The default limit of one export, as the SDKs have it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

const PREFIX: &str = "OTEL_EXPORTER_OTLP_";
const SIGNAL: &str = "OTEL_EXPORTER_OTLP_PROFILES_";

/// A variable that is set and not blank, with its name.
fn var(env: Env, name: &str) -> Option<(String, String)> {
    env(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .map(|v| (name.to_string(), v))
}

/// The profiles signal's variable `…_PROFILES_{suffix}`, else the generic `…_{suffix}`.
fn signal_var(env: Env, suffix: &str) -> Option<(String, String)> {
    var(env, &format!("{SIGNAL}{suffix}")).or_else(|| var(env, &format!("{PREFIX}{suffix}")))
}

/// The OTLP sink the flags and the environment describe, or `None` when neither names an
/// endpoint.
pub fn otlp(flags: &Flags, env: Env) -> Result<Option<Otlp>, Refused> {
    let endpoint = match (&flags.endpoint, var(env, &format!("{SIGNAL}ENDPOINT"))) {
        (Some(url), _) => Some(("--otlp".to_string(), url.clone(), Whole::Base)),
        (None, Some((name, url))) => Some((name, url, Whole::AsIs)),
        (None, None) => var(env, &format!("{PREFIX}ENDPOINT")).map(|(n, u)| (n, u, Whole::Base)),
    };
    let Some((from, url, whole)) = endpoint else {
        if flags.protocol.is_some() {
            return Err(Refused::new(
                "--otlp-protocol",
                "given without an endpoint",
                "add --otlp URL or set OTEL_EXPORTER_OTLP_ENDPOINT",
            ));
        }
        if !flags.headers.is_empty() {
            return Err(Refused::new(
                "--otlp-header",
                "given without an endpoint",
                "add --otlp URL or set OTEL_EXPORTER_OTLP_ENDPOINT",
            ));
        }
        return Ok(None);
    };
    let env_protocol = signal_var(env, "PROTOCOL")
        .map(|(name, v)| protocol(&name, &v))
        .transpose()?;
    // The SDKs' switch for a gRPC endpoint written without a scheme: plaintext when true.
    let insecure = signal_word(
        env,
        "INSECURE",
        &[("true", true), ("false", false)],
        |v| format!("`{v}` is neither true nor false"),
        "set it to true (gRPC without TLS) or false",
    )?
    .unwrap_or(false);
    let url = Endpoint::parse(&from, &url, insecure)?;
    if url.schemeless
        && (flags.protocol == Some(Protocol::Http)
            || flags.protocol.is_none() && env_protocol == Some(Protocol::Http))
    {
        return Err(Refused::new(
            &from,
            "an http/protobuf endpoint needs its scheme",
            "write http:// or https:// before the host (only gRPC takes host:port alone)",
        ));
    }
    // A flag over the variables; the URL's own word (grpc://) over a variable; the port's
    // convention (4317 is gRPC's) only when nothing says.
    let protocol = flags
        .protocol
        .or(url.grpc_scheme.then_some(Protocol::Grpc))
        .or(env_protocol)
        .unwrap_or(if url.port == 4317 {
            Protocol::Grpc
        } else {
            Protocol::Http
        });
    let path = match (protocol, whole) {
        (Protocol::Grpc, _) => String::new(),
        (Protocol::Http, Whole::AsIs) if !url.path.is_empty() => url.path.clone(),
        (Protocol::Http, Whole::AsIs) => "/".to_string(),
        (Protocol::Http, Whole::Base) => {
            if !url.path.is_empty() && from == "--otlp" {
                return Err(Refused::new(
                    &from,
                    format!("give the endpoint without a path (`{}`)", url.path),
                    "the signal's path (/v1development/profiles) is added; for a full URL set OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT",
                ));
            }
            format!("{}{HTTP_PATH}", url.path.trim_end_matches('/'))
        }
    };
    let mut headers = Vec::new();
    for name in [format!("{PREFIX}HEADERS"), format!("{SIGNAL}HEADERS")] {
        if let Some((name, list)) = var(env, &name) {
            for (k, v) in header_list(&name, &list)? {
                set_header(&mut headers, k, v);
            }
        }
    }
    for h in &flags.headers {
        let (k, v) = header(
            "--otlp-header",
            h,
            "give --otlp-header KEY=VALUE, e.g. --otlp-header authorization=Bearer%20TOKEN",
        )?;
        set_header(&mut headers, k, v);
    }
    let timeout = signal_var(env, "TIMEOUT")
        .map(|(name, v)| timeout(&name, &v))
        .transpose()?
        .unwrap_or(DEFAULT_TIMEOUT);
    let gzip = signal_word(
        env,
        "COMPRESSION",
        &[("gzip", true), ("none", false)],
        |v| format!("unknown compression `{v}`"),
        "use gzip or none",
    )?
    .unwrap_or(false);
    let tls = if url.tls { Some(tls(env)?) } else { None };
    Ok(Some(Otlp {
        base: format!(
            "{}://{}:{}",
            if url.tls { "https" } else { "http" },
            url.host,
            url.port
        ),
        path,
        protocol,
        headers,
        timeout,
        gzip,
        tls,
        from,
        resource: resource(env)?,
    }))
}

/// The signal's variable `…_{suffix}` (see [`signal_var`]) read as one of `words`, matched
/// without regard to case; any other value is refused by the variable's name.
fn signal_word<T: Copy>(
    env: Env,
    suffix: &str,
    words: &[(&str, T)],
    problem: impl Fn(&str) -> String,
    hint: &str,
) -> Result<Option<T>, Refused> {
    let Some((name, v)) = signal_var(env, suffix) else {
        return Ok(None);
    };
    words
        .iter()
        .find(|(w, _)| v.eq_ignore_ascii_case(w))
        .map(|(_, t)| Some(*t))
        .ok_or_else(|| Refused::new(&name, problem(&v), hint))
}

/// How an endpoint's URL is taken: a base the signal's path goes below, or a whole URL
/// (`OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT`, used as it is).
#[derive(Clone, Copy)]
enum Whole {
    Base,
    AsIs,
}

/// An endpoint URL's parts.
struct Endpoint {
    tls: bool,
    grpc_scheme: bool,
    /// Written `host:port`, as the SDKs take a gRPC endpoint (TLS unless `…_INSECURE`).
    schemeless: bool,
    /// As a URL writes it: an IPv6 address in brackets.
    host: String,
    port: u16,
    /// Empty, or the path with its leading `/`.
    path: String,
}

impl Endpoint {
    fn parse(from: &str, url: &str, insecure: bool) -> Result<Endpoint, Refused> {
        // The URL is never echoed: it may hold a credential.
        let hint = "give a URL such as https://collector:4318, http://127.0.0.1:4318 or grpc://127.0.0.1:4317";
        // host:port alone is a gRPC endpoint, over TLS unless OTEL_EXPORTER_OTLP_INSECURE;
        // with a path it is a URL whose scheme is mistyped.
        let (scheme, rest) = match url.split_once("://") {
            Some(split) => split,
            None if url.contains('/') => {
                return Err(Refused::new(from, "not a URL (no scheme://)", hint));
            }
            None => ("", url),
        };
        let (tls, grpc_scheme, default_port) = match scheme.to_ascii_lowercase().as_str() {
            "" => (!insecure, true, 4317),
            "http" => (false, false, 80),
            "https" => (true, false, 443),
            "grpc" => (false, true, 4317),
            other => {
                return Err(Refused::new(
                    from,
                    format!("unknown scheme `{other}`"),
                    "use http, https or grpc (gRPC without TLS)",
                ));
            }
        };
        let parsed = reqwest::Url::parse(&format!("http://{rest}"))
            .map_err(|e| Refused::new(from, format!("not a URL ({e})"), hint))?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(Refused::new(
                from,
                "the URL holds credentials",
                "give them as a header instead: OTEL_EXPORTER_OTLP_HEADERS=authorization=Basic%20…",
            ));
        }
        let host = parsed
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| Refused::new(from, "the URL has no host", hint))?;
        let port = parsed.port().unwrap_or(default_port);
        let path = match parsed.path() {
            "/" => String::new(),
            p => p.to_string(),
        };
        Ok(Endpoint {
            tls,
            grpc_scheme,
            schemeless: scheme.is_empty(),
            host: crate::host_for_url(host),
            port,
            path,
        })
    }
}

fn protocol(name: &str, v: &str) -> Result<Protocol, Refused> {
    match v {
        "grpc" => Ok(Protocol::Grpc),
        "http/protobuf" => Ok(Protocol::Http),
        "http/json" => Err(Refused::new(
            name,
            "http/json is not supported",
            "use http/protobuf or grpc",
        )),
        other => Err(Refused::new(
            name,
            format!("unknown protocol `{other}`"),
            "use grpc or http/protobuf",
        )),
    }
}

fn timeout(name: &str, v: &str) -> Result<Duration, Refused> {
    match v.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(Refused::new(
            name,
            format!("`{v}` is not a timeout"),
            "give whole milliseconds above 0, e.g. 10000",
        )),
    }
}

/// Replaces a header of the same name (names are case-insensitive), or adds it.
fn set_header(headers: &mut Vec<(String, String)>, key: String, value: String) {
    match headers
        .iter_mut()
        .find(|(k, _)| k.eq_ignore_ascii_case(&key))
    {
        Some(h) => *h = (key, value),
        None => headers.push((key, value)),
    }
}

/// `key1=value1,key2=value2` (the W3C Baggage form the specification gives: values
/// percent-encoded, blanks around each part ignored).
pub fn header_list(name: &str, list: &str) -> Result<Vec<(String, String)>, Refused> {
    let hint =
        format!("set {name}=key1=value1,key2=value2, values percent-encoded (a space is %20)");
    list.split(',')
        .enumerate()
        .filter(|(_, e)| !e.trim().is_empty())
        .map(|(i, e)| {
            header(name, e, &hint).map_err(|mut r| {
                r.problem = format!("entry {}: {}", i + 1, r.problem);
                r
            })
        })
        .collect()
}

/// One `key=value` header: a valid HTTP header name, a value with no control characters once
/// decoded.
fn header(name: &str, entry: &str, hint: &str) -> Result<(String, String), Refused> {
    let (k, v) = entry
        .split_once('=')
        .ok_or_else(|| Refused::new(name, "not key=value", hint))?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    {
        return Err(Refused::new(
            name,
            "the key is not a header name (letters, digits and -_. only)",
            hint,
        ));
    }
    let v = percent_decode(v.trim()).ok_or_else(|| {
        Refused::new(
            name,
            format!("the value of `{k}` is not percent-encoded UTF-8"),
            hint,
        )
    })?;
    if v.chars().any(|c| c.is_control()) {
        return Err(Refused::new(
            name,
            format!("the value of `{k}` holds a control character"),
            hint,
        ));
    }
    Ok((k.to_string(), v))
}

/// `%XX` escapes decoded; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The TLS settings of an https endpoint: the CA to trust (else the system's roots), and the
/// client's certificate and key for mutual TLS. Each file is read and checked now.
fn tls(env: Env) -> Result<Tls, Refused> {
    let pem =
        |suffix: &str, what: &str, tag: &str| -> Result<Option<(PathBuf, Vec<u8>)>, Refused> {
            let Some((name, path)) = signal_var(env, suffix) else {
                return Ok(None);
            };
            let bytes = std::fs::read(&path).map_err(|e| {
                Refused::new(
                    &name,
                    format!("cannot read `{path}`: {e}"),
                    format!("give the path of a PEM file holding {what}"),
                )
            })?;
            let text = String::from_utf8_lossy(&bytes);
            if !text.contains("-----BEGIN ") || !text.contains(tag) {
                return Err(Refused::new(
                    &name,
                    format!("`{path}` holds no PEM {what}"),
                    format!("give the path of a PEM file holding {what}"),
                ));
            }
            Ok(Some((PathBuf::from(path), bytes)))
        };
    let ca = pem("CERTIFICATE", "a certificate", "CERTIFICATE-----")?;
    let cert = pem("CLIENT_CERTIFICATE", "a certificate", "CERTIFICATE-----")?;
    let key = pem("CLIENT_KEY", "a private key", "PRIVATE KEY-----")?;
    let client = match (cert, key) {
        (Some(c), Some(k)) => Some((c.1, k.1)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(Refused::new(
                &format!("{PREFIX}CLIENT_CERTIFICATE"),
                "a client certificate without its key",
                format!("set {PREFIX}CLIENT_KEY too, for mutual TLS"),
            ));
        }
        (None, Some(_)) => {
            return Err(Refused::new(
                &format!("{PREFIX}CLIENT_KEY"),
                "a client key without its certificate",
                format!("set {PREFIX}CLIENT_CERTIFICATE too, for mutual TLS"),
            ));
        }
    };
    let tls = Tls {
        ca: ca.map(|c| c.1),
        client,
    };
    // Built once now, so a file rustls cannot use is refused before the recording.
    crate::tls::client_config(&tls).map_err(|e| {
        let name = if e.starts_with("the CA") || tls.client.is_none() {
            format!("{PREFIX}CERTIFICATE")
        } else {
            format!("{PREFIX}CLIENT_CERTIFICATE")
        };
        Refused::new(
            &name,
            e,
            "give PEM files: the CA's certificate, the client's certificate and its key",
        )
    })?;
    Ok(tls)
}

/// The resource the environment gives: `OTEL_RESOURCE_ATTRIBUTES` (`key=value,…`,
/// percent-encoded), and `OTEL_SERVICE_NAME` over its `service.name`.
pub fn resource(env: Env) -> Result<Vec<(String, String)>, Refused> {
    let mut attributes = Vec::new();
    if let Some((name, list)) = var(env, "OTEL_RESOURCE_ATTRIBUTES") {
        let hint =
            format!("set {name}=key1=value1,key2=value2, values percent-encoded (a comma is %2C)");
        for (i, entry) in list.split(',').enumerate() {
            if entry.trim().is_empty() {
                continue;
            }
            let at =
                |problem: String| Refused::new(&name, format!("entry {}: {problem}", i + 1), &hint);
            let (k, v) = entry
                .split_once('=')
                .ok_or_else(|| at("not key=value".into()))?;
            let k = k.trim();
            if k.is_empty() {
                return Err(at("no key".into()));
            }
            let v = percent_decode(v.trim())
                .ok_or_else(|| at(format!("the value of `{k}` is not percent-encoded UTF-8")))?;
            set_attribute(&mut attributes, k.to_string(), v);
        }
    }
    if let Some((_, service)) = var(env, "OTEL_SERVICE_NAME") {
        set_attribute(&mut attributes, "service.name".into(), service);
    }
    Ok(attributes)
}

fn set_attribute(attributes: &mut Vec<(String, String)>, key: String, value: String) {
    match attributes.iter_mut().find(|(k, _)| *k == key) {
        Some(a) => a.1 = value,
        None => attributes.push((key, value)),
    }
}

#[cfg(test)]
mod tests;
