//! Windows exported. To a real OpenTelemetry Collector (built from Go modules by
//! scripts/otelcol.sh: the OTLP receiver and the file exporter): what it received, read back
//! from its file, must match the run files sample for sample; a Collector killed mid-stream
//! and restarted costs retries or counted losses, never a silent drop, and never the
//! recording. To Pyroscope's push API (a stand-in endpoint here, Pyroscope's server cannot be
//! had): each push's query names the service and labels, and its body is a profile that
//! `go tool pprof` reads. Needs root (eBPF) and Go (the Collector's first build, pprof).

mod common;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    io::Read as _,
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::*;
use serde_json::Value;

/// The Collector's binary, built (or found in the cache) by the project's recipe; `None`, with
/// the reason printed, where it cannot be built (under CI=true that is a failure).
fn collector_binary(test: &str) -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/otelcol.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .expect("running bash");
    if out.status.success() {
        return Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    }
    let reason = format!(
        "skipping {test}: the Collector could not be built: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{reason}; CI=true turns a skip into a failure");
    }
    eprintln!("{reason}");
    None
}

/// A port free now, below the kernel's range for outgoing connections (32768 up): a port the
/// kernel handed out (port 0) can be taken by any connection between this check and the
/// Collector's bind, and was ("address already in use").
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 1_000) as u16 * 10;
    for _ in 0..12_000 {
        let port = 20_000 + (base - 20_000 + NEXT.fetch_add(1, Ordering::Relaxed)) % 12_000;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 20000-31999");
}

/// A Collector on 127.0.0.1, writing what it receives to `out`; killed when dropped.
struct Collector {
    child: Reaped,
}

impl Collector {
    fn start(bin: &Path, http: u16, grpc: u16, out: &Path, log: &Path) -> Collector {
        Collector::start_with(bin, "config.yaml", &[], http, grpc, out, log)
    }

    /// With the named configuration of crates/export/otelcol and more of its variables.
    fn start_with(
        bin: &Path,
        config: &str,
        vars: &[(&str, &Path)],
        http: u16,
        grpc: u16,
        out: &Path,
        log: &Path,
    ) -> Collector {
        let config = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../export/otelcol")
            .join(config);
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new(bin)
            .arg("--config")
            .arg(config)
            .arg("--feature-gates=+service.profilesSupport")
            .env("OTELCOL_HTTP_ENDPOINT", format!("127.0.0.1:{http}"))
            .env("OTELCOL_GRPC_ENDPOINT", format!("127.0.0.1:{grpc}"))
            .env("OTELCOL_OUT", out)
            .env("OTELCOL_TRACES_OUT", out.with_extension("traces.jsonl"))
            .envs(vars.iter().map(|(k, v)| (k, v.as_os_str())))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting the Collector");
        let c = Collector {
            child: Reaped(child),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while [http, grpc]
            .iter()
            .any(|p| TcpStream::connect(("127.0.0.1", *p)).is_err())
        {
            assert!(
                Instant::now() < deadline,
                "the Collector did not listen within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }

    fn kill(mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
    }
}

/// One profile as the Collector wrote it, its references resolved.
#[derive(Debug, Default)]
struct Received {
    resource: BTreeMap<String, String>,
    /// Profile attributes (build, workload, window).
    attributes: BTreeMap<String, String>,
    /// sample type → total of the samples' values.
    totals: BTreeMap<String, u64>,
    /// sample type → every function name in its stacks.
    functions: BTreeMap<String, HashSet<String>>,
    /// Every sample attribute key → values seen.
    sample_attributes: BTreeMap<String, BTreeSet<String>>,
}

fn num(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        v => v.as_u64().unwrap_or(0),
    }
}

/// The requests a Collector wrote (one OTLP/JSON document a line), one entry per window.
fn received(out: &Path) -> Vec<Received> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    let mut found = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let req: Value = serde_json::from_str(line).expect("a JSON line from the file exporter");
        let dict = &req["dictionary"];
        let strings: Vec<&str> = dict["stringTable"]
            .as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap_or("")).collect())
            .unwrap_or_default();
        let s = |i: &Value| strings[num(i) as usize].to_string();
        let value = |v: &Value| -> String {
            if let Some(x) = v.get("stringValue") {
                x.as_str().unwrap_or("").to_string()
            } else if let Some(i) = v.get("stringValueStrindex") {
                s(i)
            } else if let Some(i) = v.get("intValue") {
                num(i).to_string()
            } else {
                String::new()
            }
        };
        let kv = |a: &Value| -> (String, String) {
            let key = match a.get("key") {
                Some(k) => k.as_str().unwrap_or("").to_string(),
                None => s(&a["keyStrindex"]),
            };
            (key, value(&a["value"]))
        };
        let table = |name: &str| dict[name].as_array().cloned().unwrap_or_default();
        let (attrs, stacks, locations, functions) = (
            table("attributeTable"),
            table("stackTable"),
            table("locationTable"),
            table("functionTable"),
        );
        for rp in req["resourceProfiles"].as_array().unwrap() {
            let resource: BTreeMap<String, String> = rp["resource"]["attributes"]
                .as_array()
                .map(|a| a.iter().map(kv).collect())
                .unwrap_or_default();
            for sp in rp["scopeProfiles"].as_array().unwrap() {
                let mut r = Received {
                    resource: resource.clone(),
                    ..Default::default()
                };
                for p in sp["profiles"].as_array().unwrap() {
                    let kind = s(&p["sampleType"]["typeStrindex"]);
                    for i in p["attributeIndices"].as_array().into_iter().flatten() {
                        let (k, v) = kv(&attrs[num(i) as usize]);
                        r.attributes.insert(k, v);
                    }
                    let mut total = 0;
                    let mut names = HashSet::new();
                    for sample in p["samples"].as_array().into_iter().flatten() {
                        total += sample["values"].as_array().map_or(0, |v| num(&v[0]));
                        for i in sample["attributeIndices"].as_array().into_iter().flatten() {
                            let (k, v) = kv(&attrs[num(i) as usize]);
                            r.sample_attributes.entry(k).or_default().insert(v);
                        }
                        let stack = &stacks[num(&sample["stackIndex"]) as usize];
                        for l in stack["locationIndices"].as_array().into_iter().flatten() {
                            let loc = &locations[num(l) as usize];
                            for line in loc["lines"].as_array().into_iter().flatten() {
                                let f = &functions[num(&line["functionIndex"]) as usize];
                                names.insert(s(&f["nameStrindex"]));
                            }
                        }
                    }
                    r.totals.insert(kind.clone(), total);
                    r.functions.insert(kind, names);
                }
                found.push(r);
            }
        }
    }
    found
}

/// Waits until the Collector's file holds `n` windows (it flushes every 100 ms).
fn received_at_least(out: &Path, n: usize) -> Vec<Received> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = received(out);
        if r.len() >= n || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn profile_total(run: &Value, profile: &str) -> u64 {
    run["profiles"][profile]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["value"].as_u64().unwrap())
        .sum()
}

/// `otlp …: D of O delivered …, R retries[, L dropped …]` from the summary: (D, O, R, lost).
fn export_line(stderr: &str) -> (u64, u64, u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("export: otlp"))
        .unwrap_or_else(|| panic!("no export line:\n{stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = |w: &str| -> u64 {
        let i = words
            .iter()
            .position(|x| x.trim_end_matches(',') == w)
            .unwrap_or_else(|| panic!("`{w}` not in `{line}`"));
        words[i - 1].parse().unwrap()
    };
    let of = words.iter().position(|w| *w == "of").expect("`of`");
    let delivered: u64 = words[of - 1].parse().unwrap();
    let offered: u64 = words[of + 1].parse().unwrap();
    let lost = ["dropped", "refused", "unsent", "not"]
        .iter()
        .filter_map(|w| {
            words
                .iter()
                .position(|x| x.trim_end_matches([',', ';']) == *w)
                .map(|i| words[i - 1].parse::<u64>().unwrap_or(0))
        })
        .sum();
    (delivered, offered, at("retries"), lost)
}

#[test]
fn windows_reach_a_real_collector_sample_for_sample() {
    if !privileged("windows_reach_a_real_collector_sample_for_sample") {
        return;
    }
    let Some(bin) = collector_binary("windows_reach_a_real_collector_sample_for_sample") else {
        return;
    };
    let dir = tempdir("otlp-http");
    let (http, grpc) = (free_port(), free_port());
    let out = dir.join("received.jsonl");
    let _collector = Collector::start(&bin, http, grpc, &out, &dir.join("otelcol.log"));
    let windows = dir.join("w");
    let record = Command::new(switchyard())
        .args(["record", "--every", "1s", "--otlp"])
        .arg(format!("http://127.0.0.1:{http}"))
        .args([
            "--service",
            "demo-svc",
            "--build",
            "b1",
            "--workload",
            "stacks",
            "-o",
        ])
        .arg(&windows)
        .arg("--")
        .arg(demo())
        .args(["stacks", "--seconds", "2"])
        .output()
        .unwrap();
    let stderr = text(&record).1;
    assert!(record.status.success(), "{stderr}");
    let runs = load_windows(&windows);
    assert!(runs.len() >= 2, "{} windows:\n{stderr}", runs.len());
    let (delivered, offered, _, lost) = export_line(&stderr);
    assert_eq!(
        (delivered, offered, lost),
        (runs.len() as u64, runs.len() as u64, 0),
        "{stderr}"
    );

    // The Collector accepts a request without samples and writes nothing of it: the last
    // window, cut as the target exits, may have none.
    let with_samples = |r: &Value| profile_total(r, "oncpu") + profile_total(r, "offcpu") > 0;
    let expected = runs.iter().filter(|r| with_samples(r)).count();
    assert!(expected >= 2, "{expected} windows with samples:\n{stderr}");
    let got = received_at_least(&out, expected);
    assert_eq!(
        got.len(),
        expected,
        "the Collector wrote {} windows",
        got.len()
    );
    let hostname = runs[0]["meta"]["host"].as_str().unwrap().to_string();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    for (i, run) in runs.iter().enumerate().filter(|(_, r)| with_samples(r)) {
        let index = (i + 1).to_string();
        let r = got
            .iter()
            .find(|r| r.attributes.get("switchyard.window") == Some(&index))
            .unwrap_or_else(|| panic!("window {index} did not arrive: {got:#?}"));
        // Totals per window and sample type, exactly as the run file has them.
        assert_eq!(
            r.totals["samples"],
            profile_total(run, "oncpu"),
            "window {index} on-CPU"
        );
        assert_eq!(
            r.totals["off_cpu"],
            profile_total(run, "offcpu"),
            "window {index} off-CPU"
        );
        // The attributes: resource, profile and sample.
        assert_eq!(r.resource["service.name"], "demo-svc");
        assert_eq!(r.resource["host.name"], hostname);
        assert_eq!(r.resource["os.version"], kernel.trim());
        assert_eq!(r.resource["process.pid"], run["meta"]["pid"].to_string());
        assert_eq!(r.attributes["switchyard.build"], "b1");
        assert_eq!(r.attributes["switchyard.workload"], "stacks");
        if r.totals["samples"] > 0 {
            let tids: BTreeSet<String> = run["threads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["tid"].to_string())
                .collect();
            for tid in &r.sample_attributes["thread.id"] {
                assert!(
                    tids.contains(tid),
                    "window {index}: thread {tid} is not the run's"
                );
            }
            assert!(r.sample_attributes["process.pid"].contains(&run["meta"]["pid"].to_string()));
        }
    }
    // The first window is a full second of the hot thread: its function leads on-CPU, and the
    // thread and the blocking function are named.
    let first = got
        .iter()
        .find(|r| r.attributes.get("switchyard.window").map(String::as_str) == Some("1"))
        .unwrap();
    assert!(first.totals["samples"] >= 20, "{:?}", first.totals);
    assert!(
        first.functions["samples"]
            .iter()
            .any(|f| f.ends_with("hot_spin")),
        "no hot_spin on-CPU: {:?}",
        first.functions["samples"]
    );
    assert!(first.sample_attributes["thread.name"].contains("hot"));
    assert!(
        first.functions["off_cpu"]
            .iter()
            .any(|f| f.ends_with("block_on_pipe")),
        "no block_on_pipe off-CPU"
    );
}

#[test]
fn a_collector_killed_mid_stream_costs_retries_not_windows() {
    if !privileged("a_collector_killed_mid_stream_costs_retries_not_windows") {
        return;
    }
    let Some(bin) = collector_binary("a_collector_killed_mid_stream_costs_retries_not_windows")
    else {
        return;
    };
    let dir = tempdir("otlp-restart");
    let (http, grpc) = (free_port(), free_port());
    let (out1, out2) = (dir.join("before.jsonl"), dir.join("after.jsonl"));
    let collector = Collector::start(&bin, http, grpc, &out1, &dir.join("otelcol-1.log"));
    let windows = dir.join("w");
    let mut record = Reaped(
        Command::new(switchyard())
            .args(["record", "--every", "500ms", "--otlp"])
            .arg(format!("grpc://127.0.0.1:{grpc}"))
            .arg("-o")
            .arg(&windows)
            .arg("--")
            .arg(demo())
            .args(["stacks", "--seconds", "8"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // switchyard's lines as they come: one per window cut.
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr_pipe = record.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead as _;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr_pipe)
            .lines()
            .map_while(Result::ok)
        {
            all += &line;
            all.push('\n');
            let _ = lines_tx.send(line);
        }
        all
    });
    let window_lines = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = 0;
        while seen < n && Instant::now() < deadline {
            if let Ok(l) = lines.recv_timeout(Duration::from_millis(100))
                && l.starts_with("window ")
            {
                seen += 1;
            }
        }
        assert_eq!(seen, n, "switchyard cut {seen} windows, not {n}");
    };
    // Windows arrive; then the Collector dies while two more are cut, and comes back.
    assert!(
        !received_at_least(&out1, 2).is_empty(),
        "nothing arrived before the kill"
    );
    while lines.try_recv().is_ok() {}
    collector.kill();
    window_lines(2);
    let _collector = Collector::start(&bin, http, grpc, &out2, &dir.join("otelcol-2.log"));
    let status = record.0.wait().unwrap();
    let stderr = reader.join().unwrap();
    // The recording went on and ended as asked, every window written.
    assert!(status.success(), "{stderr}");
    let runs = load_windows(&windows);
    assert!(runs.len() >= 4, "{} windows:\n{stderr}", runs.len());
    let (delivered, offered, retries, lost) = export_line(&stderr);
    assert_eq!(offered, runs.len() as u64, "{stderr}");
    assert!(
        retries > 0,
        "no retry while the Collector was down:\n{stderr}"
    );
    assert_eq!(
        delivered + lost,
        offered,
        "a window neither delivered nor counted lost:\n{stderr}"
    );

    // What the two Collectors received: every window delivered is there (a window whose
    // answer was lost with the Collector may arrive twice: delivery is at least once).
    let mut arrived = BTreeSet::new();
    for out in [&out1, &out2] {
        for r in received_at_least(out, 1) {
            arrived.insert(r.attributes["switchyard.window"].parse::<u64>().unwrap());
        }
    }
    // A window without samples is accepted and not written by the Collector.
    let empty = runs
        .iter()
        .filter(|r| profile_total(r, "oncpu") + profile_total(r, "offcpu") == 0)
        .count() as u64;
    assert!(
        arrived.len() as u64 + empty >= delivered,
        "{delivered} delivered but {} arrived: {arrived:?}\n{stderr}",
        arrived.len()
    );
    assert!(
        arrived.len() as u64 + lost + empty >= offered,
        "windows neither received nor counted lost: {arrived:?}\n{stderr}"
    );
}

/// One request a stand-in Pyroscope received: its request line and body.
struct Push {
    target: String,
    body: Vec<u8>,
}

/// A stand-in for Pyroscope's ingest endpoint on 127.0.0.1: answers 200 to every request and
/// keeps it, until `expected` have come or 30 s pass.
fn pyroscope_standin(listener: TcpListener, expected: usize) -> std::thread::JoinHandle<Vec<Push>> {
    use std::io::{BufRead as _, BufReader, Write as _};
    listener.set_nonblocking(false).unwrap();
    std::thread::spawn(move || {
        let mut pushes = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while pushes.len() < expected && Instant::now() < deadline {
            let Ok((stream, _)) = listener.accept() else {
                break;
            };
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut reader = BufReader::new(stream);
            loop {
                let mut request = String::new();
                if reader.read_line(&mut request).unwrap_or(0) == 0 {
                    break;
                }
                let mut length = 0usize;
                loop {
                    let mut header = String::new();
                    reader.read_line(&mut header).unwrap();
                    let h = header.trim();
                    if h.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':')
                        && k.eq_ignore_ascii_case("content-length")
                    {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                reader
                    .get_mut()
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    .unwrap();
                let target = request.split_whitespace().nth(1).unwrap_or("").to_string();
                pushes.push(Push { target, body });
                if pushes.len() >= expected {
                    break;
                }
            }
        }
        pushes
    })
}

fn go() -> Option<PathBuf> {
    ["go", "/usr/local/go/bin/go"]
        .iter()
        .map(PathBuf::from)
        .find(|g| {
            Command::new(g)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[test]
fn pyroscope_pushes_are_profiles_go_tool_pprof_reads() {
    if !privileged("pyroscope_pushes_are_profiles_go_tool_pprof_reads") {
        return;
    }
    let Some(go) = go() else {
        let reason =
            "skipping pyroscope_pushes_are_profiles_go_tool_pprof_reads: no go (for go tool pprof)";
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!("{reason}; CI=true turns a skip into a failure");
        }
        eprintln!("{reason}");
        return;
    };
    let dir = tempdir("pyroscope");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // One window of two profiles (on-CPU and off-CPU), --every absent: the whole run at its end.
    let server = pyroscope_standin(listener, 2);
    let record = Command::new(switchyard())
        .args(["record", "--pyroscope"])
        .arg(format!("http://127.0.0.1:{port}"))
        .args(["--service", "demo-svc", "--build", "b1", "-o"])
        .arg(dir.join("run.json"))
        .arg("--")
        .arg(demo())
        .args(["stacks", "--seconds", "1"])
        .output()
        .unwrap();
    let stderr = text(&record).1;
    assert!(record.status.success(), "{stderr}");
    assert!(stderr.contains("1 of 1 delivered"), "{stderr}");
    let pushes = server.join().unwrap();
    assert_eq!(pushes.len(), 2, "{stderr}");
    let run = load_run(&dir.join("run.json"));
    let host = run["meta"]["host"].as_str().unwrap();
    let (start, end) = (
        run["meta"]["start_wall_ns"].as_u64().unwrap() / 1_000_000_000,
        run["meta"]["end_wall_ns"]
            .as_u64()
            .unwrap()
            .div_ceil(1_000_000_000),
    );
    let mut tops = Vec::new();
    for (i, push) in pushes.iter().enumerate() {
        let name = format!("demo-svc%7Bbuild%3Db1%2Chost%3D{host}%7D");
        assert_eq!(
            push.target,
            format!("/ingest?name={name}&from={start}&until={end}&format=pprof"),
        );
        let file = dir.join(format!("push-{i}.pb.gz"));
        std::fs::write(&file, &push.body).unwrap();
        let top = Command::new(&go)
            .args(["tool", "pprof", "-top", "-nodecount=200"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(top.status.success(), "go tool pprof: {}", text(&top).1);
        tops.push(text(&top).0);
    }
    // The on-CPU push leads with the hot function; the off-CPU push has the blocking one.
    assert!(
        tops.iter()
            .any(|t| t.contains("Type: cpu") && t.contains("hot_spin")),
        "{tops:?}"
    );
    assert!(
        tops.iter()
            .any(|t| t.contains("Type: off_cpu") && t.contains("block_on_pipe")),
        "{tops:?}"
    );
}

/// The files of a TLS Collector and of its clients, made here: a CA, the server's certificate
/// from it (for 127.0.0.1 and localhost), the same server expired, and a CA that signed none
/// of them.
struct Pki {
    ca: PathBuf,
    other_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    expired_cert: PathBuf,
}

fn pki(dir: &Path) -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, date_time_ymd,
    };
    let ca_params = |name: &str| {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p
    };
    let ca =
        CertifiedIssuer::self_signed(ca_params("test CA"), KeyPair::generate().unwrap()).unwrap();
    let other = CertifiedIssuer::self_signed(ca_params("another CA"), KeyPair::generate().unwrap())
        .unwrap();
    let key = KeyPair::generate().unwrap();
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let server = CertificateParams::new(names.clone())
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let mut old = CertificateParams::new(names).unwrap();
    old.not_before = date_time_ymd(2020, 1, 1);
    old.not_after = date_time_ymd(2021, 1, 1);
    let expired = old.signed_by(&key, &ca).unwrap();
    let write = |name: &str, pem: String| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p
    };
    Pki {
        ca: write("ca.pem", ca.pem()),
        other_ca: write("other-ca.pem", other.pem()),
        cert: write("server.pem", server.pem()),
        key: write("server.key", key.serialize_pem()),
        expired_cert: write("expired.pem", expired.pem()),
    }
}

/// `switchyard record --every 1s` of the demo, exporting as the environment `vars` alone
/// configures it: its stderr, and its windows.
fn record_by_environment(dir: &Path, name: &str, vars: &[(&str, String)]) -> (String, Vec<Value>) {
    let windows = dir.join(name);
    let record = Command::new(switchyard())
        .args(["record", "--every", "1s", "-o"])
        .arg(&windows)
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .arg("--")
        .arg(demo())
        .args(["stacks", "--seconds", "2"])
        .output()
        .unwrap();
    let stderr = text(&record).1;
    assert!(record.status.success(), "{name}: {stderr}");
    (stderr, load_windows(&windows))
}

#[test]
fn tls_and_a_bearer_token_configured_by_the_environment_alone() {
    let test = "tls_and_a_bearer_token_configured_by_the_environment_alone";
    if !privileged(test) {
        return;
    }
    let Some(bin) = collector_binary(test) else {
        return;
    };
    let dir = tempdir("otlp-tls");
    let pki = pki(&dir);
    let token = dir.join("token");
    std::fs::write(&token, "s3cr3t-t0ken").unwrap();
    let start = |cert: &Path, name: &str| {
        let (http, grpc) = (free_port(), free_port());
        let out = dir.join(format!("{name}.jsonl"));
        let c = Collector::start_with(
            &bin,
            "config-tls.yaml",
            &[
                ("OTELCOL_CERT", cert),
                ("OTELCOL_KEY", &pki.key),
                ("OTELCOL_TOKEN_FILE", &token),
            ],
            http,
            grpc,
            &out,
            &dir.join(format!("{name}.log")),
        );
        (c, http, grpc, out)
    };
    let (_collector, http, grpc, out) = start(&pki.cert, "good");
    let base = |protocol: &str, port: u16| {
        vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("https://localhost:{port}"),
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_string()),
            (
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
                pki.ca.display().to_string(),
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20s3cr3t-t0ken".to_string(),
            ),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip".to_string()),
            ("OTEL_SERVICE_NAME", "tls-svc".to_string()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment.name=ci,db.password=hunter2".to_string(),
            ),
        ]
    };

    // Both transports deliver every window, and the Collector writes each.
    let mut expected = 0;
    for (protocol, port) in [("http/protobuf", http), ("grpc", grpc)] {
        let (stderr, runs) = record_by_environment(
            &dir,
            protocol.replace('/', "-").as_str(),
            &base(protocol, port),
        );
        let (delivered, offered, _, lost) = export_line(&stderr);
        assert_eq!(
            (delivered, offered, lost),
            (runs.len() as u64, runs.len() as u64, 0),
            "{protocol}: {stderr}"
        );
        assert!(
            stderr.contains("from OTEL_EXPORTER_OTLP_ENDPOINT") && !stderr.contains("s3cr3t"),
            "{stderr}"
        );
        expected += runs
            .iter()
            .filter(|r| profile_total(r, "oncpu") + profile_total(r, "offcpu") > 0)
            .count();
    }
    let got = received_at_least(&out, expected);
    assert_eq!(got.len(), expected);
    let r = &got[0].resource;
    for (k, v) in [
        ("service.name", "tls-svc"),
        ("deployment.environment.name", "ci"),
        ("db.password", "[redacted]"),
        ("host.arch", "amd64"),
        ("os.type", "linux"),
        ("process.executable.name", "switchyard-demo"),
    ] {
        assert_eq!(r.get(k).map(String::as_str), Some(v), "{k} in {r:?}");
    }
    assert!(
        r["process.executable.path"].ends_with("/switchyard-demo"),
        "{r:?}"
    );
    assert_eq!(r["service.instance.id"].len(), 36, "{r:?}");

    // Refused, each in one line; the windows stay on disk, every one counted lost.
    let (_expired, expired_http, _, _) = start(&pki.expired_cert, "expired");
    let wrong_token = {
        let mut v = base("http/protobuf", http);
        v[3].1 = "authorization=Bearer%20wrong".into();
        v
    };
    let bad_ca = {
        let mut v = base("grpc", grpc);
        v[2].1 = pki.other_ca.display().to_string();
        v
    };
    let expired = base("http/protobuf", expired_http);
    for (name, vars, says) in [
        ("wrong-token", wrong_token, "401"),
        ("bad-ca", bad_ca, "invalid peer certificate: UnknownIssuer"),
        (
            "expired",
            expired,
            "invalid peer certificate: certificate expired",
        ),
    ] {
        let (stderr, runs) = record_by_environment(&dir, name, &vars);
        assert!(!runs.is_empty(), "{name}: no windows kept");
        let (delivered, offered, retries, lost) = export_line(&stderr);
        assert_eq!(
            (delivered, offered, lost),
            (0, runs.len() as u64, runs.len() as u64),
            "{name}: {stderr}"
        );
        assert_eq!(retries, 0, "{name}: a refusal is not retried: {stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with("export: otlp"))
            .unwrap();
        assert!(line.contains(says), "{name}: {line}");
    }
    assert_eq!(received(&out).len(), expected, "nothing more arrived");
}

/// A test's Collector (config.yaml) on free ports, its folder, its HTTP port and its file.
struct Plain {
    dir: PathBuf,
    http: u16,
    out: PathBuf,
    _collector: Collector,
}

/// `None`, said, where the test cannot run: without root, or without a Collector.
fn plain_collector(test: &str, folder: &str) -> Option<Plain> {
    if !privileged(test) {
        return None;
    }
    let bin = collector_binary(test)?;
    let dir = tempdir(folder);
    let (http, grpc) = (free_port(), free_port());
    let out = dir.join("received.jsonl");
    let c = Collector::start(&bin, http, grpc, &out, &dir.join("otelcol.log"));
    Some(Plain {
        dir,
        http,
        out,
        _collector: c,
    })
}

/// A target that publishes its OpenTelemetry process context (OTEP 4719; the demo is a
/// reference writer) gives the run its resource: over the recorder's environment, below its
/// flags, and said in the summary. One that publishes a context this reader cannot take is
/// named, and the run goes on.
#[test]
fn a_published_process_context_is_the_runs_resource() {
    let Some(Plain {
        dir,
        http,
        out,
        _collector,
    }) = plain_collector(
        "a_published_process_context_is_the_runs_resource",
        "otel-ctx",
    )
    else {
        return;
    };
    let record = |name: &str, extra: &[&str]| {
        let run = dir.join(format!("{name}.json"));
        let o = Command::new(switchyard())
            .args(["record", "-o"])
            .arg(&run)
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{http}"),
            )
            .env("OTEL_SERVICE_NAME", "from-env")
            .env(
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment.name=env,team=core",
            )
            .arg("--")
            .arg(demo())
            .args(["stacks", "--seconds", "3", "--publish-after-ms", "300"])
            .args(extra)
            .output()
            .unwrap();
        let stderr = text(&o).1;
        assert!(o.status.success(), "{stderr}");
        (load_run(&run), stderr)
    };
    let (run, stderr) = record(
        "published",
        &[
            "--otel-context",
            "service.name=ctx-svc,deployment.environment.name=staging,service.version=1.4,other=x",
        ],
    );
    assert!(
        stderr.contains("process context (OpenTelemetry, published by the target): deployment.environment.name=staging, service.name=ctx-svc, service.version=1.4; the run's resource takes them"),
        "{stderr}"
    );
    assert_eq!(
        run["meta"]["process"]["published"]["service.name"],
        "ctx-svc"
    );
    let got = received_at_least(&out, 1);
    let r = &got[0].resource;
    for (k, v) in [
        ("service.name", "ctx-svc"),
        ("deployment.environment.name", "staging"),
        ("service.version", "1.4"),
        ("team", "core"),
    ] {
        assert_eq!(r.get(k).map(String::as_str), Some(v), "{k} in {r:?}");
    }
    assert!(
        !r.contains_key("other"),
        "only service.* and deployment.* are taken: {r:?}"
    );

    let (run, stderr) = record(
        "bad-version",
        &[
            "--otel-context",
            "service.name=ctx-svc",
            "--otel-context-version",
            "9",
        ],
    );
    assert!(
        stderr.contains("process context: the target publishes one, but it could not be read: version 9 (this reader knows 1 and 2)"),
        "{stderr}"
    );
    assert!(
        run["meta"]["process"]["published"].is_null(),
        "{}",
        run["meta"]
    );
}

/// A profile joined to a trace: the demo's request loop publishes each request's span in its
/// thread context and exports those spans as OTLP traces to the Collector; switchyard,
/// configured by the environment, exports the recording's profiles to the same Collector. In
/// what the Collector wrote, the trace ids the profiles' samples link to are spans the
/// workload exported, and the spans that waited are among them.
#[test]
fn a_profile_sample_links_to_a_span_the_workload_exported() {
    let Some(Plain {
        dir,
        http,
        out,
        _collector,
    }) = plain_collector(
        "a_profile_sample_links_to_a_span_the_workload_exported",
        "otel-join",
    )
    else {
        return;
    };
    let own = dir.join("requests.txt");
    let record = Command::new(switchyard())
        .args(["record", "-o"])
        .arg(dir.join("run.json"))
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{http}"),
        )
        .env("OTEL_SERVICE_NAME", "switchyard-demo")
        .arg("--")
        .arg(demo())
        .args(["requests", "--seconds", "3", "--otel-thread-ctx"])
        .arg(&own)
        .args(["--otlp-traces", &format!("http://127.0.0.1:{http}")])
        .output()
        .unwrap();
    let stderr = text(&record).1;
    assert!(record.status.success(), "{stderr}");
    assert!(stderr.contains("1 of 1 delivered"), "{stderr}");

    // The trace ids of the spans the workload exported.
    let traces_file = out.with_extension("traces.jsonl");
    let deadline = Instant::now() + Duration::from_secs(15);
    let exported: HashSet<(String, String)> = loop {
        let spans: HashSet<(String, String)> = std::fs::read_to_string(&traces_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .flat_map(|r| {
                let mut ids = Vec::new();
                for rs in r["resourceSpans"].as_array().into_iter().flatten() {
                    for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                        for sp in ss["spans"].as_array().into_iter().flatten() {
                            ids.push((
                                sp["traceId"].as_str().unwrap_or("").to_string(),
                                sp["spanId"].as_str().unwrap_or("").to_string(),
                            ));
                        }
                    }
                }
                ids
            })
            .collect();
        if !spans.is_empty() || Instant::now() > deadline {
            break spans;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let requests = std::fs::read_to_string(&own).unwrap().lines().count();
    assert_eq!(exported.len(), requests, "every request's span exported");

    // The links of the profiles' samples, as the Collector wrote them (OTLP/JSON: ids in hex).
    let _ = received_at_least(&out, 1);
    let mut linked: HashMap<(String, String), u64> = HashMap::new();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        let req: Value = serde_json::from_str(line).unwrap();
        let links = req["dictionary"]["linkTable"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for rp in req["resourceProfiles"].as_array().unwrap() {
            for sp in rp["scopeProfiles"].as_array().unwrap() {
                for p in sp["profiles"].as_array().unwrap() {
                    for s in p["samples"].as_array().into_iter().flatten() {
                        let i = num(&s["linkIndex"]) as usize;
                        if i == 0 {
                            continue;
                        }
                        let l = &links[i];
                        let id = |k: &str| l[k].as_str().unwrap_or("").to_string();
                        *linked.entry((id("traceId"), id("spanId"))).or_default() += 1;
                    }
                }
            }
        }
    }
    assert!(linked.len() >= 20, "{} spans linked", linked.len());
    let joined = linked.keys().filter(|k| exported.contains(*k)).count();
    eprintln!(
        "{} spans exported as traces; profile samples link to {} spans, {joined} of them exported spans",
        exported.len(),
        linked.len()
    );
    assert_eq!(joined, linked.len(), "every link is to an exported span");
}
