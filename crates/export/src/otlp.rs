//! A run as an OTLP profiles request (opentelemetry-proto's generated types, profiles
//! v1development): one resource (the host, the service, the kernel, the process), one scope
//! (switchyard), and two profiles that share one dictionary: on-CPU samples
//! (`samples`/`count`, a period of `cpu`/`nanoseconds`) and off-CPU time
//! (`off_cpu`/`nanoseconds`). Each sample carries its thread id and name and the process id;
//! off-CPU samples also carry what the thread waited in. The run's build, workload and window
//! are profile attributes.

use std::collections::HashMap;

use opentelemetry_proto::tonic::{
    collector::profiles::v1development::{
        ExportProfilesServiceRequest, profiles_service_client::ProfilesServiceClient,
    },
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    profiles::v1development::{
        Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary,
        ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
    },
    resource::v1::Resource,
};
use switchyard_model::{FrameKind, Run};

/// Where OTLP/HTTP takes profiles, below the endpoint.
pub const HTTP_PATH: &str = "/v1development/profiles";

/// The OTLP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP, protobuf bodies (port 4318 by convention).
    Http,
    /// OTLP/gRPC (port 4317 by convention).
    Grpc,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Grpc => "grpc",
        }
    }
}

/// The gRPC client, kept connected between windows.
pub type GrpcClient = ProfilesServiceClient<tonic::transport::Channel>;

/// The service a run is exported as: `--service`, else the program's name: the first word
/// of its command line (a server that rewrites its title, `redis-server *:6379` or `nginx:
/// worker process`, keeps its name there), its directory and a trailing colon left out.
pub fn service_name(run: &Run) -> String {
    if let Some(s) = run.meta.labels.get("service") {
        return s.clone();
    }
    run.meta
        .command
        .first()
        .and_then(|c| c.split_whitespace().next())
        .map(|c| {
            c.rsplit('/')
                .next()
                .unwrap_or(c)
                .trim_end_matches(':')
                .to_string()
        })
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "switchyard".into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_rewritten_process_title_keeps_the_programs_name() {
        let mut run = switchyard_model::Run::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../report/tests/data/basic.json"),
        )
        .unwrap();
        for (command, service) in [
            (vec!["redis-server *:16379"], "redis-server"),
            (vec!["nginx: worker process"], "nginx"),
            (vec!["/usr/bin/python3.11", "app.py"], "python3.11"),
            (vec!["postgres: checkpointer "], "postgres"),
            (vec![""], "switchyard"),
        ] {
            run.meta.command = command.into_iter().map(String::from).collect();
            assert_eq!(super::service_name(&run), service);
        }
    }
}

/// The run's build and workload: as given to `record`, else as its driver named them.
pub fn build_and_workload(run: &Run) -> (Option<String>, Option<String>) {
    (
        run.build_name().map(str::to_string),
        run.workload_name().map(str::to_string),
    )
}

/// The dictionary being built: every table starts with its zero value, as the format wants.
struct Dictionary {
    d: ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<(i32, i32), i32>,
    mappings: HashMap<String, i32>,
    /// By the run's frame index.
    locations: HashMap<u32, i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(String, String), i32>,
    links: HashMap<(Vec<u8>, Vec<u8>), i32>,
}

impl Dictionary {
    fn new() -> Dictionary {
        Dictionary {
            d: ProfilesDictionary {
                mapping_table: vec![Mapping::default()],
                location_table: vec![Location::default()],
                function_table: vec![Function::default()],
                link_table: vec![Default::default()],
                string_table: vec![String::new()],
                attribute_table: vec![KeyValueAndUnit::default()],
                stack_table: vec![Stack::default()],
            },
            strings: HashMap::from([(String::new(), 0)]),
            functions: HashMap::new(),
            mappings: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
            attributes: HashMap::new(),
            links: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    /// The link to an OpenTelemetry span (W3C hex ids); 0, the empty link, for none.
    fn link(&mut self, trace_id: &str, span_id: &str) -> i32 {
        let bytes = |h: &str| -> Vec<u8> {
            (0..h.len() / 2)
                .filter_map(|i| u8::from_str_radix(h.get(2 * i..2 * i + 2)?, 16).ok())
                .collect()
        };
        let (trace_id, span_id) = (bytes(trace_id), bytes(span_id));
        if trace_id.len() != 16 || span_id.len() != 8 {
            return 0;
        }
        let key = (trace_id.clone(), span_id.clone());
        if let Some(&i) = self.links.get(&key) {
            return i;
        }
        let i = self.d.link_table.len() as i32;
        self.d.link_table.push(Link { trace_id, span_id });
        self.links.insert(key, i);
        i
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> ValueType {
        ValueType {
            type_strindex: self.string(kind),
            unit_strindex: self.string(unit),
        }
    }

    fn attribute(&mut self, key: &str, value: Value) -> i32 {
        let id = (key.to_string(), value.id());
        if let Some(&i) = self.attributes.get(&id) {
            return i;
        }
        let i = self.d.attribute_table.len() as i32;
        let key_strindex = self.string(key);
        self.d.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(value.any()),
            unit_strindex: 0,
        });
        self.attributes.insert(id, i);
        i
    }

    /// The mapping of a module: its binary's address range, path and build ID.
    fn mapping(&mut self, run: &Run, module: &str, kind: FrameKind) -> i32 {
        if let Some(&i) = self.mappings.get(module) {
            return i;
        }
        let binary = run.profiles.binaries.iter().find(|b| b.module == module);
        let filename = match (kind, binary) {
            (FrameKind::Kernel, _) => "[kernel.kallsyms]".to_string(),
            (_, Some(b)) => b.path.clone(),
            (_, None) => module.to_string(),
        };
        let mut m = Mapping {
            filename_strindex: self.string(&filename),
            ..Default::default()
        };
        if let Some(b) = binary {
            m.memory_start = b.start;
            m.memory_limit = b.limit;
            m.file_offset = b.offset;
            if !b.build_id.is_empty() {
                m.attribute_indices = vec![self.attribute(
                    "process.executable.build_id.gnu",
                    Value::Str(b.build_id.clone()),
                )];
            }
        }
        let i = self.d.mapping_table.len() as i32;
        self.d.mapping_table.push(m);
        self.mappings.insert(module.to_string(), i);
        i
    }

    /// One location per frame of the run's frame table: its address, its mapping, its
    /// function and line.
    fn location(&mut self, run: &Run, frame: u32) -> i32 {
        if let Some(&i) = self.locations.get(&frame) {
            return i;
        }
        let f = &run.profiles.frames[frame as usize];
        let name = self.string(&f.name);
        let file = f.file.as_deref().map_or(0, |p| self.string(p));
        let function_index = match self.functions.get(&(name, file)) {
            Some(&i) => i,
            None => {
                let i = self.d.function_table.len() as i32;
                self.d.function_table.push(Function {
                    name_strindex: name,
                    system_name_strindex: name,
                    filename_strindex: file,
                    start_line: 0,
                });
                self.functions.insert((name, file), i);
                i
            }
        };
        let frame_type = match f.kind {
            FrameKind::Kernel => "kernel",
            _ => "native",
        };
        let location = Location {
            mapping_index: self.mapping(run, &f.module, f.kind),
            address: f.addr,
            lines: vec![Line {
                function_index,
                line: f.line.map_or(0, i64::from),
                column: 0,
            }],
            attribute_indices: vec![
                self.attribute("profile.frame.type", Value::Str(frame_type.into())),
            ],
        };
        let i = self.d.location_table.len() as i32;
        self.d.location_table.push(location);
        self.locations.insert(frame, i);
        i
    }

    /// A stack of the run (frame indices, root first), leaf first as the format wants.
    fn stack(&mut self, run: &Run, frames: &[u32]) -> i32 {
        let locations: Vec<i32> = frames
            .iter()
            .rev()
            .map(|&f| self.location(run, f))
            .collect();
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = self.d.stack_table.len() as i32;
        self.d.stack_table.push(Stack {
            location_indices: locations.clone(),
        });
        self.stacks.insert(locations, i);
        i
    }
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(String),
    Int(i64),
}

impl Value {
    fn id(&self) -> String {
        match self {
            Value::Str(s) => format!("s:{s}"),
            Value::Int(i) => format!("i:{i}"),
        }
    }

    fn any(self) -> AnyValue {
        AnyValue {
            value: Some(match self {
                Value::Str(s) => any_value::Value::StringValue(s),
                Value::Int(i) => any_value::Value::IntValue(i),
            }),
        }
    }
}

fn key_value(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(value.any()),
        ..Default::default()
    }
}

/// FNV-1a of `text` from a seeded offset basis: the ids made here want no cryptography, only
/// to be stable and distinct.
fn fnv(text: &str, seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// A stable, non-zero 16-byte id for one profile of one run (its process, start and kind).
fn profile_id(run: &Run, kind: &str) -> Vec<u8> {
    let text = format!(
        "{}:{}:{}:{kind}",
        run.meta.host, run.meta.pid, run.meta.start_wall_ns
    );
    [
        (fnv(&text, 0) | 1).to_be_bytes(),
        (fnv(&text, 0x9e37_79b9) | 1).to_be_bytes(),
    ]
    .concat()
}

/// The OTLP request of one run.
pub fn encode(run: &Run) -> ExportProfilesServiceRequest {
    encode_with(run, &[])
}

/// The OTLP request of one run, its resource given `extra` attributes from the environment
/// (see [`resource`]).
pub fn encode_with(run: &Run, extra: &[(String, String)]) -> ExportProfilesServiceRequest {
    let mut d = Dictionary::new();
    let meta = &run.meta;
    let (build, workload) = build_and_workload(run);
    let mut profile_attributes = Vec::new();
    if let Some(b) = build {
        profile_attributes.push(d.attribute("switchyard.build", Value::Str(b)));
    }
    if let Some(w) = workload {
        profile_attributes.push(d.attribute("switchyard.workload", Value::Str(w)));
    }
    if let Some(w) = &meta.window {
        profile_attributes.push(d.attribute("switchyard.window", Value::Int(w.index as i64)));
    }
    let hz = run.profiles.stats.oncpu_hz;
    let kinds = [
        (
            "oncpu",
            &run.profiles.oncpu,
            d.value_type("samples", "count"),
            d.value_type("cpu", "nanoseconds"),
            1_000_000_000u64.checked_div(hz).unwrap_or(0) as i64,
        ),
        (
            "offcpu",
            &run.profiles.offcpu,
            d.value_type("off_cpu", "nanoseconds"),
            d.value_type("off_cpu", "nanoseconds"),
            1,
        ),
    ];
    let mut profiles = Vec::new();
    for (kind, profile, sample_type, period_type, period) in kinds {
        let samples = profile
            .stacks
            .iter()
            .filter(|s| s.value > 0)
            .map(|s| {
                let mut attribute_indices = vec![
                    d.attribute("thread.id", Value::Int(i64::from(s.tid))),
                    d.attribute("thread.name", Value::Str(s.comm.clone())),
                    d.attribute("process.pid", Value::Int(i64::from(s.tgid))),
                ];
                if !s.label.is_empty() {
                    attribute_indices.push(
                        d.attribute("switchyard.off_cpu.reason", Value::Str(s.label.to_string())),
                    );
                }
                Sample {
                    stack_index: d.stack(run, &s.frames),
                    attribute_indices,
                    // The OpenTelemetry span the thread served, from its thread context.
                    link_index: d.link(&s.trace_id, &s.span_id),
                    values: vec![i64::try_from(s.value).unwrap_or(i64::MAX)],
                    timestamps_unix_nano: Vec::new(),
                }
            })
            .collect();
        profiles.push(Profile {
            sample_type: Some(sample_type),
            samples,
            time_unix_nano: meta.start_wall_ns,
            duration_nano: meta.end_wall_ns.saturating_sub(meta.start_wall_ns),
            period_type: Some(period_type),
            period,
            profile_id: profile_id(run, kind),
            attribute_indices: profile_attributes.clone(),
            ..Default::default()
        });
    }
    let resource = Resource {
        attributes: resource(run, extra)
            .into_iter()
            .map(|(k, v)| key_value(&k, v))
            .collect(),
        ..Default::default()
    };
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(resource),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "switchyard".into(),
                    version: meta.tool_version.clone(),
                    ..Default::default()
                }),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(d.d),
    }
}

/// The resource a run is exported with, in the semantic conventions' names: the service,
/// the host, the OS, the process and its runtime where known. `extra` (from
/// `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`) is over what the run gives, the
/// context the target published (OTEP 4719) is over `extra`, and the run's own `--service`
/// and `--instance` are over all. Values from the environment go
/// through the command line's redaction (`KEY=value` with a secret key), unless the run
/// was recorded with it off; what is switchyard's own is under `switchyard.`.
pub fn resource(run: &Run, extra: &[(String, String)]) -> Vec<(String, Value)> {
    let meta = &run.meta;
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut set = |k: &str, v: Value| match out.iter_mut().find(|(key, _)| key == k) {
        Some(slot) => slot.1 = v,
        None => out.push((k.to_string(), v)),
    };
    set("service.name", Value::Str(service_name(run)));
    set("service.instance.id", Value::Str(instance_id(run)));
    set("host.name", Value::Str(meta.host.clone()));
    set("host.arch", Value::Str(host_arch().into()));
    set("os.type", Value::Str("linux".into()));
    set("os.version", Value::Str(meta.kernel.clone()));
    set("process.pid", Value::Int(i64::from(meta.pid)));
    let exe = &meta.process.executable;
    let exe_name = match exe.rsplit('/').next().filter(|n| !n.is_empty()) {
        Some(n) => Some(n.to_string()),
        None => meta
            .command
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c).to_string()),
    };
    if let Some(n) = exe_name.filter(|n| !n.is_empty()) {
        set("process.executable.name", Value::Str(n));
    }
    if !exe.is_empty() {
        set("process.executable.path", Value::Str(exe.clone()));
    }
    set(
        "process.command_line",
        Value::Str(switchyard_model::units::command_line(&meta.command)),
    );
    if !meta.process.runtime.is_empty() {
        set(
            "process.runtime.name",
            Value::Str(meta.process.runtime.clone()),
        );
    }
    if !meta.process.runtime_version.is_empty() {
        set(
            "process.runtime.version",
            Value::Str(meta.process.runtime_version.clone()),
        );
    }
    if meta.redaction.off {
        set("switchyard.redaction", Value::Str("off".into()));
    }
    // What the target says of itself (its published context) is over the environment of
    // the recorder, which may serve many targets; a flag is over both.
    let published = &meta.process.published;
    let given: Vec<(&String, &String)> = extra
        .iter()
        .filter(|(k, _)| !published.contains_key(k))
        .map(|(k, v)| (k, v))
        .chain(published)
        .collect();
    for (k, v) in given {
        let flagged = |label: &str| meta.labels.contains_key(label);
        if (k == "service.name" && flagged("service"))
            || (k == "service.instance.id" && flagged("instance"))
        {
            continue;
        }
        let v = if meta.redaction.off {
            v.clone()
        } else {
            // As a `KEY=value` word of a command line: a secret key's value goes.
            let word = switchyard_model::redact::command(&[format!("{k}={v}")]);
            word[0]
                .split_once('=')
                .map_or_else(|| v.clone(), |(_, v)| v.to_string())
        };
        set(k, Value::Str(v));
    }
    out
}

/// `--instance`, else one made from the host, the process and when its recording started:
/// the same for every window of one recording, a new one for the next. Shaped as a UUID
/// (version 8, the form for ids made by their own rule).
fn instance_id(run: &Run) -> String {
    if let Some(i) = run.meta.labels.get("instance") {
        return i.clone();
    }
    let meta = &run.meta;
    let start = meta
        .window
        .map_or(meta.start_wall_ns, |w| w.recording_start_wall_ns);
    let text = format!("{}:{}:{start}", meta.host, meta.pid);
    let mut b = [fnv(&text, 1).to_be_bytes(), fnv(&text, 2).to_be_bytes()].concat();
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// `host.arch` as the conventions name it.
fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "x86",
        "powerpc64" => "ppc64",
        "s390x" => "s390x",
        other => other,
    }
}

/// Sends an encoded request over gRPC, connecting first when there is no client. The error
/// says whether another try may succeed.
pub async fn send_grpc(
    o: &crate::Otlp,
    client: &mut Option<GrpcClient>,
    bytes: &[u8],
) -> Result<(), (bool, String)> {
    use prost::Message as _;
    let request =
        ExportProfilesServiceRequest::decode(bytes).map_err(|e| (false, e.to_string()))?;
    if client.is_none() {
        let mut endpoint = tonic::transport::Endpoint::from_shared(o.base.clone())
            .map_err(|e| (false, e.to_string()))?
            .connect_timeout(o.timeout)
            .timeout(o.timeout);
        if let Some(t) = &o.tls {
            endpoint = endpoint
                .tls_config(grpc_tls(t))
                .map_err(|e| (false, innermost(&e)))?;
        }
        let channel = endpoint.connect().await.map_err(|e| {
            let why = innermost(&e);
            (!crate::tls::is_refusal(&why), why)
        })?;
        let mut c = ProfilesServiceClient::new(channel);
        if o.gzip {
            // A gRPC server answers in the encoding it was sent.
            c = c
                .send_compressed(tonic::codec::CompressionEncoding::Gzip)
                .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
        }
        *client = Some(c);
    }
    let Some(c) = client.as_mut() else {
        return Err((true, "not connected".into()));
    };
    let mut request = tonic::Request::new(request);
    for (k, v) in &o.headers {
        // gRPC metadata keys are lower case; the settings checked both parts.
        let key = tonic::metadata::MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
            .map_err(|e| (false, format!("header `{k}`: {e}")))?;
        let value = tonic::metadata::MetadataValue::try_from(v.as_str())
            .map_err(|e| (false, format!("header `{k}`: {e}")))?;
        request.metadata_mut().insert(key, value);
    }
    let response = c.export(request).await.map_err(|status| {
        use tonic::Code::*;
        // OTLP's rule for gRPC: these codes are worth retrying.
        let retry = matches!(
            status.code(),
            Cancelled
                | DeadlineExceeded
                | Aborted
                | OutOfRange
                | Unavailable
                | DataLoss
                | ResourceExhausted
                | Unknown
        );
        (retry, format!("{:?}: {}", status.code(), status.message()))
    })?;
    match response.into_inner().partial_success {
        Some(p) if p.rejected_profiles > 0 => Err((
            false,
            format!(
                "{} profiles rejected: {}",
                p.rejected_profiles, p.error_message
            ),
        )),
        _ => Ok(()),
    }
}

/// The gRPC channel's TLS: the CA given, else the system's roots; the client's identity.
fn grpc_tls(t: &crate::Tls) -> tonic::transport::ClientTlsConfig {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let mut c = ClientTlsConfig::new();
    c = match &t.ca {
        Some(pem) => c.ca_certificate(Certificate::from_pem(pem)),
        None => c.with_native_roots(),
    };
    if let Some((cert, key)) = &t.client {
        c = c.identity(Identity::from_pem(cert, key));
    }
    c
}

fn innermost(e: &dyn std::error::Error) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
