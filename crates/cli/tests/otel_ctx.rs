//! OpenTelemetry thread context (OTEP 4947) against a target that times its own requests: the
//! demo's request loop publishes each request as a span of its own trace (the harness's
//! reference writer) and writes what each request measured of itself (its wall and CPU time
//! around the span, its lock wait and I/O, its wait for a CPU from schedstat). switchyard
//! reads the context at every switch-out and sample, with no probe per request, and must find
//! each slow request's time off CPU where the request found it. Needs root (eBPF).

mod common;

use std::{collections::HashMap, path::Path, process::Command};

use common::*;

/// What a request measured of itself, ns.
struct Own {
    /// Wall time less CPU time, around the span: its time off CPU, and any the hypervisor
    /// took from its CPU while it ran, which no switch shows.
    off_cpu: u64,
    lock_io: u64,
    cpu_wait: u64,
}

/// The time the hypervisor took from CPU `cpu` so far (`steal` in /proc/stat), ns: counted
/// in clock ticks, so a difference of two readings is within one tick of the time taken.
fn stolen_ns(cpu: usize) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .unwrap();
    let ticks: u64 = line.split_whitespace().nth(8).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1_000_000_000 / hz
}

#[test]
fn each_requests_time_off_cpu_is_found_by_its_span_id() {
    if !privileged("each_requests_time_off_cpu_is_found_by_its_span_id") {
        return;
    }
    let dir = tempdir("otel-ctx");
    let own_file = dir.join("requests.txt");
    let own_arg = own_file.display().to_string();
    let command = demo_command(&["requests", "--seconds", "4", "--otel-thread-ctx", &own_arg]);
    let command: Vec<&std::ffi::OsStr> = command.iter().map(|a| a.as_os_str()).collect();
    // Stacks on: the wakeup probe is what tells blocked from waiting for a CPU.
    // The worker runs on CPU 0: what the hypervisor took from it there is the most its
    // requests can have measured as off CPU with no switch to show for it.
    // Every block's stacks walked (`--offcpu-period 0`): the off-CPU time linked to spans by
    // stack is then exact, as their own is, and the two are compared for the linking alone
    // (sampling's own error is sampling.rs's to bound).
    let stolen_before = stolen_ns(0);
    let (run, stderr) = record_spawned(&dir, &["--offcpu-period", "0"], &command);
    let stolen = stolen_ns(0) - stolen_before;
    assert!(
        stderr.contains("OpenTelemetry spans (thread context, otel_thread_ctx_v1 in "),
        "{stderr}"
    );
    let own: HashMap<String, Own> = std::fs::read_to_string(&own_file)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap();
            (
                f[0].to_string(),
                Own {
                    off_cpu: n(1).saturating_sub(n(5)),
                    lock_io: n(2) + n(4),
                    cpu_wait: n(3),
                },
            )
        })
        .collect();
    assert!(own.len() > 1000, "{} requests", own.len());
    let o = &run["otel_spans"];
    assert_eq!(o["refused"], 0, "{o}");
    assert!(o["read"].as_u64().unwrap() > 0, "{o}");
    let spans: HashMap<String, &serde_json::Value> = o["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap().to_string(), s))
        .collect();
    let num = |s: &serde_json::Value, k: &str| s[k].as_u64().unwrap();

    // Every request that was off CPU a millisecond or more is there, with its own figures:
    // within 10% + 300 µs. More than the request measured is never right, bar a switch the
    // kernel did not report to the probes (another program ran on that CPU), which leaves
    // an interval to the span before it. Less is right only as far as the hypervisor took
    // the worker's CPU while it ran: all such shortfalls together are no more than the time
    // it took from CPU 0 in the run, and one tick.
    let slow: Vec<(&String, &Own)> = own.iter().filter(|(_, r)| r.off_cpu >= 1_000_000).collect();
    assert!(
        slow.len() >= 20,
        "{} requests waited 1 ms or more",
        slow.len()
    );
    let unreported = run["meta"]["unreported_switches"].as_u64().unwrap_or(0);
    let slack = |want: u64| want / 10 + 300_000;
    let (mut theirs, mut ours, mut blocked, mut lock_io) = (0u64, 0u64, 0u64, 0u64);
    let (mut over, mut short, mut shortfall) = (Vec::new(), Vec::new(), 0u64);
    for (id, r) in &slow {
        let s = spans.get(*id);
        let got = s.map_or(0, |s| num(s, "blocked_ns") + num(s, "runqueue_ns"));
        let line = || {
            format!(
                "span {id}: off CPU {got} ns, the request measured {} (lock+io {}, cpu wait {}); {}",
                r.off_cpu,
                r.lock_io,
                r.cpu_wait,
                s.map_or("not seen".to_string(), |s| format!(
                    "blocked {} ns, waiting {} ns, {} switches, on CPU {} ns, changed {} ns",
                    num(s, "blocked_ns"),
                    num(s, "runqueue_ns"),
                    num(s, "switches"),
                    num(s, "oncpu_ns"),
                    num(s, "changed_ns")
                ))
            )
        };
        if got > r.off_cpu + slack(r.off_cpu) {
            over.push(line());
            continue;
        }
        if got + slack(r.off_cpu) < r.off_cpu {
            shortfall += r.off_cpu - got;
            short.push(line());
            continue;
        }
        let s = s.unwrap();
        theirs += r.off_cpu;
        ours += got;
        blocked += num(s, "blocked_ns");
        lock_io += r.lock_io;
    }
    eprintln!(
        "{} slow requests: {} match (off CPU {:.1} ms by their span ids, {:.1} ms as they measured it; blocked {:.1} ms against their lock wait and I/O {:.1} ms); {} over, {unreported} switches unreported; {} short by {:.1} ms, the hypervisor took {:.1} ms of CPU 0",
        slow.len(),
        slow.len() - over.len() - short.len(),
        ours as f64 / 1e6,
        theirs as f64 / 1e6,
        blocked as f64 / 1e6,
        lock_io as f64 / 1e6,
        over.len(),
        short.len(),
        shortfall as f64 / 1e6,
        stolen as f64 / 1e6,
    );
    for l in over.iter().chain(&short) {
        eprintln!("  {l}");
    }
    assert!(over.len() as u64 <= unreported, "{}", over.join("\n"));
    // SAFETY: sysconf has no preconditions.
    let tick = 1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    assert!(
        shortfall <= stolen + tick,
        "{:.1} ms short, the hypervisor took {:.1} ms:\n{}",
        shortfall as f64 / 1e6,
        stolen as f64 / 1e6,
        short.join("\n")
    );
    assert!(
        (0.95..=1.05).contains(&(ours as f64 / theirs as f64)),
        "off CPU {ours} against {theirs}"
    );
    // The samples carry their span: every on-CPU sample taken inside one, and the time off
    // CPU each span owns (the off-CPU profile's weights, by stack).
    let linked = |profile: &str| -> Vec<&serde_json::Value> {
        run["profiles"][profile]["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["span_id"].is_string())
            .collect()
    };
    let (on, off) = (linked("oncpu"), linked("offcpu"));
    for s in on.iter().chain(&off) {
        let span = spans[s["span_id"].as_str().unwrap()];
        assert_eq!(s["trace_id"], span["trace_id"], "{s}");
    }
    let sum = |v: &[&serde_json::Value], k: &str| v.iter().map(|s| num(s, k)).sum::<u64>();
    let all: Vec<&serde_json::Value> = spans.values().copied().collect();
    assert_eq!(sum(&on, "value"), sum(&all, "samples"));
    let owned = sum(&all, "blocked_ns") + sum(&all, "runqueue_ns");
    let off_linked = sum(&off, "value");
    eprintln!(
        "linked: {} on-CPU samples; off CPU {:.1} ms by stack, {:.1} ms by span",
        sum(&on, "value"),
        off_linked as f64 / 1e6,
        owned as f64 / 1e6
    );
    assert!(
        off_linked.abs_diff(owned) <= owned / 20 + 1_000_000,
        "{off_linked} against {owned}"
    );

    // Blocked against waiting for a CPU is the wakeup's to tell, and a wakeup the probes
    // missed leaves the wait blocked: over all of them, within 10%.
    assert!(
        (0.90..=1.10).contains(&(blocked as f64 / lock_io as f64)),
        "blocked {blocked} against {lock_io}"
    );
}

/// A thread context published from a shared library: the library's own code reaches
/// `otel_thread_ctx_v1` through the TLS access model it was built with, so switchyard must
/// find the variable in a running process the way that model's relocations say. Four
/// builds of the same library (workloads/demo/otel-tls): initial-exec, general-dynamic and
/// TLS descriptors, linked with the program, and general-dynamic opened with dlopen (a
/// module whose block only the thread's DTV knows). Each request sleeps 3 ms inside its
/// span: every span seen whole is off CPU for that long, under the ids its request made.
#[test]
fn a_librarys_thread_context_is_found_in_every_access_model() {
    if !privileged("a_librarys_thread_context_is_found_in_every_access_model") {
        return;
    }
    if Command::new("gcc").arg("--version").output().is_err() {
        skip(
            "a_librarys_thread_context_is_found_in_every_access_model: no gcc to build the library",
        );
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/demo/otel-tls");
    let dir = tempdir("otel-tls");
    let gcc = |args: Vec<std::ffi::OsString>| {
        let out = Command::new("gcc").arg("-O1").args(&args).output().unwrap();
        assert!(out.status.success(), "gcc {args:?}: {}", text(&out).1);
    };
    for (variant, flags, dlopen, model) in [
        (
            "ie",
            &["-ftls-model=initial-exec"][..],
            false,
            "(initial-exec, thread pointer ",
        ),
        ("gd", &[][..], false, "(general-dynamic, module 1 "),
        (
            "desc",
            &["-mtls-dialect=gnu2"][..],
            false,
            "(TLS descriptor, thread pointer ",
        ),
        ("dl", &[][..], true, "(general-dynamic, module 2 "),
    ] {
        let d = dir.join(variant);
        std::fs::create_dir_all(&d).unwrap();
        let lib = d.join("libotelctx.so");
        let server = d.join("server");
        let mut args: Vec<std::ffi::OsString> = vec!["-fPIC".into(), "-shared".into()];
        args.extend(flags.iter().map(Into::into));
        args.extend([
            "-o".into(),
            lib.clone().into(),
            src.join("otelctx.c").into(),
        ]);
        gcc(args);
        let mut args: Vec<std::ffi::OsString> = vec![
            "-o".into(),
            server.clone().into(),
            src.join("server.c").into(),
        ];
        if !dlopen {
            args.extend([
                "-Wl,--no-as-needed".into(),
                format!("-L{}", d.display()).into(),
                "-lotelctx".into(),
                format!("-Wl,-rpath,{}", d.display()).into(),
            ]);
        }
        args.push("-lpthread".into());
        gcc(args);

        let mut cmd = Command::new(&server);
        cmd.arg("12");
        if dlopen {
            cmd.arg(&lib);
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the server");
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut ready,
        )
        .unwrap();
        assert!(ready.starts_with("ready "), "{ready:?}");
        let pid = child.id();
        let run_path = d.join("run.json");
        let out = Command::new(switchyard())
            .args(["record", "-p", &pid.to_string(), "-d", "2s", "-o"])
            .arg(&run_path)
            .output()
            .expect("running switchyard");
        let _ = child.kill();
        let _ = child.wait();
        let (_, stderr) = text(&out);
        assert!(out.status.success(), "{variant}: {stderr}");
        let found = format!("otel_thread_ctx_v1 in {} {model}", lib.display());
        assert!(
            stderr.contains(&found),
            "{variant}: want {found:?} in\n{stderr}"
        );
        let run = load_run(&run_path);
        let o = &run["otel_spans"];
        assert_eq!(o["refused"], 0, "{variant}: {o}");
        assert_eq!(o["unreadable"], 0, "{variant}: {o}");
        let spans = o["spans"].as_array().unwrap();
        // Two threads, a request every 4 ms, for 2 s.
        assert!(spans.len() >= 500, "{variant}: {} spans", spans.len());
        let mut whole = 0;
        for s in spans {
            // The ids the request made: span 0x80000000 | thread << 24 | n, in trace
            // (pid, thread << 32 | n).
            let span_id = u64::from_str_radix(s["span_id"].as_str().unwrap(), 16).unwrap();
            let (thread, n) = ((span_id >> 24) & 0x7f, span_id & 0xff_ffff);
            assert_eq!(span_id >> 31, 1, "{variant}: {s}");
            assert_eq!(
                s["trace_id"].as_str().unwrap(),
                format!("{:016x}{:016x}", pid, thread << 32 | n),
                "{variant}: {s}"
            );
            let off = s["blocked_ns"].as_u64().unwrap() + s["runqueue_ns"].as_u64().unwrap();
            whole += usize::from((3_000_000..=3_600_000).contains(&off));
        }
        eprintln!(
            "{variant}: {} spans, {whole} off CPU 3.0-3.6 ms; {}",
            spans.len(),
            found
        );
        // The spans cut by the recording's start and end, two a thread, are not whole.
        assert!(
            whole * 100 >= spans.len() * 95,
            "{variant}: {whole} of {} whole",
            spans.len()
        );
    }
}
