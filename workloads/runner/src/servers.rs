//! `bench-servers`: how much slower real servers get while they are recorded. Debian's
//! redis-server (GET and SET from 50 `redis-benchmark` clients), nginx (a 4 KiB static file
//! over keep-alive from `wrk -t2 -c50`) and the spin-lock broker (the catalogue's, as
//! `bench-broker` runs it), each untraced, recorded by switchyard three ways, sampled by
//! `perf record` and counted by bpftrace. Every tool attaches to the server's pid before the
//! load starts and is stopped with SIGINT after it. Each run starts a fresh server on loopback
//! (unpinned), so no run inherits another's keys or connections.

use std::{
    fs,
    io::Write as _,
    net::{TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use switchyard_model::{
    metrics::spread,
    units::{counted, grouped},
};

use crate::{
    Failure, Interrupts, Plan, Tools,
    attach::{self, Tool},
    bench::{self, Table},
    overhead, runner,
};

/// A server and the load that drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    RedisGet,
    RedisSet,
    Nginx,
    Broker,
}

impl Server {
    pub const ALL: [Server; 4] = [
        Server::RedisGet,
        Server::RedisSet,
        Server::Nginx,
        Server::Broker,
    ];

    /// What the table's heading says the server is and how it was driven.
    pub fn title(self) -> &'static str {
        match self {
            Server::RedisGet => {
                "redis-server, GET: redis-benchmark -c 50 -t get (the pid recorded: redis-server's)"
            }
            Server::RedisSet => {
                "redis-server, SET: redis-benchmark -c 50 -t set (the pid recorded: redis-server's)"
            }
            Server::Nginx => {
                "nginx, a 4 KiB static file over keep-alive: wrk -t2 -c50 (master_process on, \
                 worker_processes 1; the pid recorded: the worker's, which serves every request)"
            }
            Server::Broker => {
                "spin-lock broker (abs, its default load, as bench-broker runs it; the pid \
                 recorded: the broker's)"
            }
        }
    }

    /// A short name, for progress lines and run directories.
    pub fn name(self) -> &'static str {
        match self {
            Server::RedisGet => "redis-get",
            Server::RedisSet => "redis-set",
            Server::Nginx => "nginx",
            Server::Broker => "spinlock-broker",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Server::Broker => "ops/s",
            _ => "requests/s",
        }
    }
}

/// One way the server runs: untraced, or with a tool attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub label: String,
    pub tool: Option<Tool>,
}

/// bpftrace's comparable work: count the server's syscalls and its switches (off the CPU) by
/// thread.
pub const BPFTRACE_COUNT: &str = "tracepoint:raw_syscalls:sys_enter /pid == $PID/ { @s[tid] = count(); } \
tracepoint:sched:sched_switch /pid == $PID/ { @w[tid] = count(); }";

/// The floor's row: the project's own empty programs on sys_enter and sys_exit, host-wide.
pub const FLOOR_LABEL: &str = "floor: empty raw tracepoints sys_enter + sys_exit";

/// Untraced first (every ratio's anchor), then switchyard's defaults, `--no-stacks`,
/// `--syscall-latency 16` (every call counted, one in ~16 timed), `--syscalls none`, the floor (what any tracer of every syscall pays here before its
/// programs do anything), perf sampling stacks at 99 Hz, and bpftrace counting.
pub fn conditions(switchyard: &Path, perf_data: &Path) -> Vec<Condition> {
    let record = |flags: &[&str]| {
        Some(Tool::Record {
            switchyard: switchyard.to_path_buf(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        })
    };
    vec![
        Condition {
            label: "untraced".into(),
            tool: None,
        },
        Condition {
            label: "switchyard record --pid (defaults)".into(),
            tool: record(&[]),
        },
        Condition {
            label: "switchyard record --pid --no-stacks".into(),
            tool: record(&["--no-stacks"]),
        },
        Condition {
            label: "switchyard record --pid --syscall-latency 16".into(),
            tool: record(&["--syscall-latency", "16"]),
        },
        Condition {
            label: "switchyard record --pid --syscalls none".into(),
            tool: record(&["--syscalls", "none"]),
        },
        Condition {
            label: FLOOR_LABEL.into(),
            tool: Some(Tool::Floor {
                switchyard: switchyard.to_path_buf(),
                kind: "syscalls".into(),
            }),
        },
        Condition {
            label: "perf record -g -F 99 -p".into(),
            tool: Some(Tool::Perf {
                args: ["record", "-g", "-F", "99", "-o"]
                    .iter()
                    .map(|s| s.to_string())
                    .chain([perf_data.to_string_lossy().into_owned()])
                    .collect(),
            }),
        },
        Condition {
            label: "bpftrace: count syscalls and switches".into(),
            tool: Some(Tool::Bpftrace {
                script: BPFTRACE_COUNT.into(),
            }),
        },
    ]
}

/// What the tables' ratio means, printed under them.
pub const NOTE: &str = "of untraced: each repeat's throughput over the untraced throughput of \
the same repeat; the median of those ratios, and their min–max over the repeats. Every tool \
attached to the pid before the load started and was stopped (SIGINT) after it. The floor is `switchyard floor syscalls`: empty programs on the two syscall tracepoints, which every task on the host then runs at every syscall (the server and its load generator alike); no tool that counts every syscall through them can cost less.";

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Requests (or operations) per second.
    pub throughput: f64,
    /// bpftrace's counts over the load, per second: (syscalls, switches).
    pub counted: Option<(f64, f64)>,
}

/// Requests per second from `redis-benchmark --csv` (`"GET","29629.63",…`) or `-q`
/// (`SET: 51282.05 requests per second, p50=…`, after its progress lines).
pub fn redis_rps(output: &str) -> Option<f64> {
    let mut found = None;
    for line in output.split(['\n', '\r']) {
        let line = line.trim();
        if let Some(at) = line.find(" requests per second") {
            let number = line[..at].rsplit([' ', ':']).next()?;
            found = number.parse().ok().or(found);
        } else if line.starts_with('"') && !line.starts_with("\"test\"") {
            let field = line.split(',').nth(1)?.trim_matches('"');
            found = field.parse().ok().or(found);
        }
    }
    found
}

/// Requests per second from wrk's summary (`Requests/sec:  39399.57`).
pub fn wrk_rps(output: &str) -> Option<f64> {
    output.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Requests/sec:")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Every server's table: per condition, the median throughput and the median of each repeat's
/// throughput over that repeat's untraced one, with the min–max over the repeats. `rows[0]`
/// is untraced.
pub fn table(unit: &str, rows: &[(String, Vec<Sample>)]) -> String {
    let (repeats, rows) = bench::against_first(rows, |s| s.throughput);
    let mut t = Table::new(&[
        "condition",
        "throughput (median)",
        &format!(
            "of untraced, median (min–max over {})",
            counted(repeats as u64, "repeat")
        ),
    ]);
    for row in rows {
        t.row(vec![
            row.label.to_string(),
            format!("{} {unit}", grouped(row.throughput.median, 0)),
            bench::ratio_cell(row.of_first),
        ]);
    }
    t.render()
}

/// What bpftrace counted, as a line under the table (`None` without bpftrace runs).
pub fn counted_line(rows: &[(String, Vec<Sample>)]) -> Option<String> {
    let counts: Vec<(f64, f64)> = rows
        .iter()
        .flat_map(|(_, s)| s.iter().filter_map(|s| s.counted))
        .collect();
    let syscalls = spread(&counts.iter().map(|c| c.0).collect::<Vec<_>>())?;
    let switches = spread(&counts.iter().map(|c| c.1).collect::<Vec<_>>())?;
    Some(format!(
        "the recorded pid under this load (bpftrace's count, median): {} syscalls/s, {} \
         context switches/s",
        grouped(syscalls.median, 0),
        grouped(switches.median, 0)
    ))
}

/// What the bench needs besides the conditions.
pub struct Setup<'a> {
    pub tools: &'a Tools,
    /// The broker's plan (its default load, SECONDS long).
    pub broker: &'a Plan,
    pub seconds: u64,
    /// redis-benchmark's request count per run, per server (GET, SET): calibrated so that an
    /// untraced run lasts about SECONDS.
    pub redis_requests: (u64, u64),
    pub interrupts: &'a Interrupts,
}

/// A server process of ours: stopped (SIGTERM, then SIGKILL) when dropped.
struct Daemon {
    child: Child,
    /// The pid to record (nginx: its worker).
    pid: u32,
    port: u16,
    /// nginx's prefix directory.
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        attach::signal(self.child.id(), libc::SIGTERM);
        let _ = switchyard_harness::wait_or_kill(&mut self.child, Duration::from_secs(10));
    }
}

fn free_port() -> Result<u16, Failure> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Failure::io("finding a free loopback port", e))
}

/// Waits until something accepts on `port` while `child` runs.
fn await_port(child: &mut Child, port: u16, what: &str, log: &Path) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(
                Failure::new(format!("{what} exited ({status}) before listening")).tail(log, 10),
            );
        }
        if Instant::now() > deadline {
            return Err(
                Failure::new(format!("{what} did not listen on port {port} within 20 s"))
                    .tail(log, 10),
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn spawn_logged(command: Command, log: &Path, what: &str) -> Result<Child, Failure> {
    runner::logged(command, log)?
        .spawn()
        .map_err(|e| Failure::io(format!("starting {what}"), e).hint(INSTALL_HINT))
}

const INSTALL_HINT: &str = "apt-get install redis-server redis-tools nginx-light wrk";

fn start_redis(out: &Path) -> Result<Daemon, Failure> {
    let port = free_port()?;
    let log = out.join("server.out");
    let mut c = Command::new("redis-server");
    c.args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"]);
    let mut child = spawn_logged(c, &log, "redis-server")?;
    if let Err(f) = await_port(&mut child, port, "redis-server", &log) {
        drop(Daemon {
            pid: child.id(),
            child,
            port,
            _dir: None,
        });
        return Err(f);
    }
    Ok(Daemon {
        pid: child.id(),
        child,
        port,
        _dir: None,
    })
}

/// nginx's configuration: one worker serving ROOT on loopback, no access log.
pub fn nginx_conf(root: &Path, port: u16) -> String {
    let root = root.display();
    format!(
        "daemon off;\nmaster_process on;\nworker_processes 1;\npid {root}/nginx.pid;\n\
         error_log {root}/error.log;\nevents {{ worker_connections 1024; }}\nhttp {{\n  \
         access_log off;\n  keepalive_requests 1000000;\n  server {{\n    listen 127.0.0.1:{port};\n    \
         root {root};\n  }}\n}}\n"
    )
}

fn start_nginx(out: &Path) -> Result<Daemon, Failure> {
    let dir = tempfile::Builder::new()
        .prefix("switchyard-nginx-")
        .tempdir()
        .map_err(|e| Failure::io("creating nginx's directory", e))?;
    let port = free_port()?;
    let file: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    let conf = dir.path().join("nginx.conf");
    fs::write(dir.path().join("4k.bin"), file)
        .and_then(|()| fs::write(&conf, nginx_conf(dir.path(), port)))
        .map_err(|e| Failure::io("writing nginx's files", e))?;
    let log = out.join("server.out");
    let mut c = Command::new("nginx");
    c.arg("-c").arg(&conf).arg("-p").arg(dir.path());
    c.arg("-e").arg(dir.path().join("error.log"));
    let mut child = spawn_logged(c, &log, "nginx")?;
    let master = child.id();
    let listening = await_port(&mut child, port, "nginx", &log);
    let mut daemon = Daemon {
        child,
        pid: 0,
        port,
        _dir: Some(dir),
    };
    listening?;
    let deadline = Instant::now() + Duration::from_secs(10);
    daemon.pid = loop {
        let children = fs::read_to_string(format!("/proc/{master}/task/{master}/children"))
            .unwrap_or_default();
        if let Some(worker) = children.split_whitespace().find_map(|p| p.parse().ok()) {
            break worker;
        }
        if Instant::now() > deadline {
            return Err(Failure::new("nginx started no worker process").tail(&log, 10));
        }
        thread::sleep(Duration::from_millis(20));
    };
    Ok(daemon)
}

/// Runs `command` to its end, its output in `log`; its output when it succeeded.
fn run_load(mut command: Command, log: &Path, what: &str) -> Result<String, Failure> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Failure::io(format!("running {what}"), e).hint(INSTALL_HINT))?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let _ = fs::File::create(log).and_then(|mut f| f.write_all(text.as_bytes()));
    if !output.status.success() {
        return Err(Failure::new(format!(
            "{what} failed ({}); see {}",
            output.status,
            log.display()
        ))
        .tail(log, 5));
    }
    Ok(text)
}

fn redis_benchmark(port: u16, test: &str, requests: u64, log: &Path) -> Result<f64, Failure> {
    let mut c = Command::new("redis-benchmark");
    c.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-c", "50"])
        .args(["-n", &requests.to_string(), "-t", test, "--csv"]);
    let text = run_load(c, log, "redis-benchmark")?;
    redis_rps(&text).ok_or_else(|| {
        Failure::new(format!(
            "no requests per second in redis-benchmark's output ({})",
            log.display()
        ))
    })
}

/// Requests per second of an untraced redis run of `requests` requests (to size the runs).
pub fn calibrate_redis(test: &str, requests: u64, out: &Path) -> Result<f64, Failure> {
    fs::create_dir_all(out).map_err(|e| Failure::io(format!("creating {}", out.display()), e))?;
    let server = start_redis(out)?;
    redis_benchmark(server.port, test, requests, &out.join("load.out"))
}

/// One run of `server` under `condition`; every process's output goes into `out`. The server
/// and the tool are stopped before it returns, on failure too.
pub fn measure(
    server: Server,
    condition: &Condition,
    setup: &Setup<'_>,
    out: &Path,
) -> Result<Sample, Failure> {
    fs::create_dir_all(out).map_err(|e| Failure::io(format!("creating {}", out.display()), e))?;
    if server == Server::Broker {
        return measure_broker(condition, setup, out);
    }
    let daemon = match server {
        Server::Nginx => start_nginx(out)?,
        _ => start_redis(out)?,
    };
    let tool = match &condition.tool {
        Some(t) => Some(t.attach(daemon.pid, out)?),
        None => None,
    };
    let forwarding = tool.as_ref().map(|t| setup.interrupts.forward_to(t.pid()));
    let started = Instant::now();
    let load = out.join("load.out");
    let measured = match server {
        Server::RedisGet => redis_benchmark(daemon.port, "get", setup.redis_requests.0, &load),
        Server::RedisSet => redis_benchmark(daemon.port, "set", setup.redis_requests.1, &load),
        _ => {
            let mut c = Command::new("wrk");
            c.args(["-t2", "-c50", &format!("-d{}s", setup.seconds)])
                .arg(format!("http://127.0.0.1:{}/4k.bin", daemon.port));
            run_load(c, &load, "wrk").and_then(|text| {
                wrk_rps(&text).ok_or_else(|| {
                    Failure::new(format!(
                        "no Requests/sec in wrk's output ({})",
                        load.display()
                    ))
                })
            })
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let stopped = tool.map(|t| t.stop(out));
    drop(forwarding);
    drop(daemon);
    let throughput = measured?;
    let counted = finish_tool(condition, stopped, out, secs)?;
    Ok(Sample {
        throughput,
        counted,
    })
}

/// The tool's exit, checked: switchyard must succeed (or end by the user's Ctrl-C); perf and
/// bpftrace have written their output once they exit. bpftrace's counts per second of load.
fn finish_tool(
    condition: &Condition,
    stopped: Option<Result<std::process::ExitStatus, Failure>>,
    out: &Path,
    secs: f64,
) -> Result<Option<(f64, f64)>, Failure> {
    let Some(status) = stopped else {
        return Ok(None);
    };
    let status = status?;
    match &condition.tool {
        Some(Tool::Record { .. }) if !status.success() => {
            Err(runner::record_failed(status, &out.join("record.err")))
        }
        Some(Tool::Bpftrace { .. }) => {
            let text = fs::read_to_string(out.join("bpftrace.out")).unwrap_or_default();
            let maps = attach::bpftrace_maps(&text);
            Ok(Some((
                *maps.get("s").unwrap_or(&0) as f64 / secs,
                *maps.get("w").unwrap_or(&0) as f64 / secs,
            )))
        }
        _ => Ok(None),
    }
}

/// The broker as `bench-broker` runs it ([`overhead::run_attached`]): filled, the tool
/// attached, its driver, its result.
fn measure_broker(condition: &Condition, setup: &Setup<'_>, out: &Path) -> Result<Sample, Failure> {
    let (result, status) = overhead::run_attached(
        setup.broker,
        setup.tools,
        condition.tool.as_ref(),
        out,
        setup.interrupts,
    )?;
    let secs = result.duration_ns as f64 / 1e9;
    let counted = finish_tool(condition, status.map(Ok), out, secs.max(1e-9))?;
    Ok(Sample {
        throughput: result.throughput_per_s,
        counted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_benchmark_csv_and_quiet_output() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"GET\",\"29629.63\",\"1.237\",\"0.168\",\"0.623\",\"3.735\",\"7.127\",\"44.575\"\n";
        assert_eq!(redis_rps(csv), Some(29629.63));
        let quiet = " SET: rps=0.0 (overall: 0.0) avg_msec=-nan (overall: -nan)\r                                                          SET: rps=54348.0 (overall: 54131.5) avg_msec=0.618 (overall: 0.618)\r                                                                    SET: 51282.05 requests per second, p50=0.567 msec\n";
        assert_eq!(redis_rps(quiet), Some(51282.05));
        assert_eq!(
            redis_rps("Could not connect to Redis at 127.0.0.1:1\n"),
            None
        );
    }

    #[test]
    fn wrk_summary() {
        let out = "Running 2s test @ http://127.0.0.1:18080/4k.bin\n  2 threads and 50 connections\n  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency     2.01ms    3.01ms  47.97ms   89.56%\n    Req/Sec    19.98k    10.64k   38.41k    60.00%\n  79787 requests in 2.03s, 330.01MB read\nRequests/sec:  39399.57\nTransfer/sec:    162.96MB\n";
        assert_eq!(wrk_rps(out), Some(39399.57));
        assert_eq!(
            wrk_rps("unable to connect to 127.0.0.1:1 Connection refused\n"),
            None
        );
    }

    #[test]
    fn nginx_serves_the_directory_on_loopback_without_an_access_log() {
        let conf = nginx_conf(Path::new("/tmp/x"), 8123);
        for needle in [
            "daemon off;",
            "master_process on;",
            "worker_processes 1;",
            "listen 127.0.0.1:8123;",
            "access_log off;",
            "root /tmp/x;",
        ] {
            assert!(conf.contains(needle), "no `{needle}` in:\n{conf}");
        }
    }

    #[test]
    fn untraced_comes_first_and_every_tool_follows() {
        let c = conditions(Path::new("sy"), Path::new("/tmp/p.data"));
        assert_eq!(c[0].tool, None);
        assert_eq!(c.len(), 8);
        assert!(matches!(&c[5].tool, Some(Tool::Floor { kind, .. }) if kind == "syscalls"));
        assert!(
            matches!(&c[6].tool, Some(Tool::Perf { args }) if args.last().unwrap() == "/tmp/p.data")
        );
    }

    fn sample(throughput: f64, counted: Option<(f64, f64)>) -> Sample {
        Sample {
            throughput,
            counted,
        }
    }

    #[test]
    fn the_table_gives_each_repeat_against_its_own_untraced_run() {
        let rows = vec![
            (
                "untraced".to_string(),
                vec![
                    sample(100_000.0, None),
                    sample(80_000.0, None),
                    sample(90_000.0, None),
                ],
            ),
            (
                "switchyard record --pid (defaults)".to_string(),
                vec![
                    sample(90_000.0, None),
                    sample(60_000.0, None),
                    sample(81_000.0, None),
                ],
            ),
            (
                "bpftrace: count syscalls and switches".to_string(),
                vec![
                    sample(95_000.0, Some((200_000.0, 10_000.0))),
                    sample(76_000.0, Some((180_000.0, 9_000.0))),
                    sample(90_000.0, Some((190_000.0, 11_000.0))),
                ],
            ),
        ];
        assert_eq!(
            table("requests/s", &rows),
            "| condition | throughput (median) | of untraced, median (min–max over 3 repeats) |\n\
             |---|---|---|\n\
             | untraced | 90,000 requests/s | 1.00 (1.00–1.00) |\n\
             | switchyard record --pid (defaults) | 81,000 requests/s | 0.900 (0.750–0.900) |\n\
             | bpftrace: count syscalls and switches | 90,000 requests/s | 0.950 (0.950–1.00) |\n"
        );
        assert_eq!(
            counted_line(&rows).unwrap(),
            "the recorded pid under this load (bpftrace's count, median): 190,000 syscalls/s, \
             10,000 context switches/s"
        );
        assert_eq!(counted_line(&rows[..2]), None);
    }
}
