//! The runner's orchestration without privileges: the catalogue's programs replaced by small
//! shell scripts in a bin directory of their own (`--bin-dir`), each told by an environment
//! variable how to behave. What is checked is what the runner does with them: the files it
//! writes, the handshakes it waits for, its errors, hints and exit codes, and Ctrl-C.

use std::{
    fs,
    os::unix::{fs::PermissionsExt as _, process::CommandExt as _},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

const SWITCHYARD: &str = r#"#!/bin/sh
cmd=$1; shift
case $cmd in
report)
  while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
  : > "$out/index.html"
  exit 0 ;;
record) ;;
*) exit 9 ;;
esac
pid=; out=
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift ;;
    --pid) pid=$2; shift ;;
    --) shift; break ;;
  esac
  shift
done
if [ -z "$pid" ]; then
  "$@"
  echo "switchyard: fake summary"
  echo '{"fake": true}' > "$out"
  exit 0
fi
if [ "$FAKE_ATTACH" = fail ]; then
  echo "error: loading program sched_switch: permission denied" >&2
  exit 2
fi
stop() {
  if [ -n "$FAKE_RUN" ]; then cp "$FAKE_RUN" "$out"; else echo '{"fake": true}' > "$out"; fi
  [ -z "$FAKE_LOG" ] || echo "$0 stopped" >> "$FAKE_LOG"
  echo "switchyard: interrupted"
  exit 0
}
trap stop INT
[ -z "$FAKE_LOG" ] || echo "$0 attached" >> "$FAKE_LOG"
echo "recording $pid" >&3
exec 3>&-
while :; do sleep 0.05; done
"#;

const BROKER: &str = r#"#!/bin/sh
if [ "$FAKE_SERVER" = unready ]; then echo "error: address in use" >&2; exit 3; fi
echo "ready 4321"
sleep 0.3
"#;

const CACHE: &str = r#"#!/bin/sh
trap 'exit 0' TERM INT
echo "ready 4322"
while :; do sleep 0.05; done
"#;

const DRIVER: &str = r#"#!/bin/sh
out=; prefill=
for a in "$@"; do
  [ "$prev" = --out ] && out=$a
  [ "$a" = --prefill-only ] && prefill=1
  prev=$a
done
if [ -n "$prefill" ]; then
  if [ "$FAKE_PREFILL" = fail ]; then echo "prefill: the server answered status 2" >&2; exit 2; fi
  exit 0
fi
if [ "$FAKE_DRIVER" = fail ]; then echo "driver: error: failed to connect to 127.0.0.1:1" >&2; exit 2; fi
[ -z "$FAKE_LOG" ] || echo "driver" >> "$FAKE_LOG"
if [ -n "$FAKE_THROUGHPUT" ]; then
  cat > "$out" <<EOF
{"format": "switchyard-driver-result", "schema_version": 1, "workload": "spinlock-broker",
 "build": "abs", "parameters": {}, "operations": 2000, "errors": 0, "duration_ns": 2000000000,
 "throughput_per_s": $FAKE_THROUGHPUT, "histogram": "", "window_ms": 100, "windows": [],
 "latency_ns": {"p50": 1, "p90": 1, "p99": 1, "p99_9": 1, "p99_99": 1, "max": 1}}
EOF
  exit 0
fi
if [ "$FAKE_DRIVER" = slow ]; then
  trap 'echo "{}" > "$out"; exit 0' INT
  : > "$(dirname "$out")/driver.started"
  sleep 30
fi
echo "{}" > "$out"
echo "driver: 100 operations"
"#;

struct Fakes {
    dir: tempfile::TempDir,
}

impl Fakes {
    fn new() -> Fakes {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).unwrap();
        for (name, text) in [
            ("switchyard", SWITCHYARD),
            ("spinlock-broker", BROKER),
            ("spinlock-broker-driver", DRIVER),
            ("read-state-cache", CACHE),
            ("read-state-cache-driver", DRIVER),
        ] {
            let p = bin.join(name);
            fs::write(&p, text).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        }
        Fakes { dir }
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    fn runner(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_switchyard-workload"));
        c.arg("--bin-dir")
            .arg(self.dir.path().join("bin"))
            .args(args);
        for key in ["AS_BUILD", "GC_INTERVAL", "CAPACITY", "RATE"] {
            c.env_remove(key);
        }
        c.envs(env.iter().copied());
        c
    }

    #[track_caller]
    fn run(&self, workload: &str, build: &str, env: &[(&str, &str)]) -> Output {
        let out = self.out();
        self.runner(
            &[
                "run",
                workload,
                build,
                out.to_str().unwrap(),
                "--seconds",
                "1",
            ],
            env,
        )
        .output()
        .unwrap()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn has_files(dir: &Path, names: &[&str]) {
    for n in names {
        assert!(
            dir.join(n).exists(),
            "{} was not written",
            dir.join(n).display()
        );
    }
}

#[test]
fn a_spawned_run_writes_its_files() {
    let f = Fakes::new();
    let o = f.run("spinlock-broker", "spin", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("spinlock-broker (spin): "),
        "the load line: {}",
        stderr(&o)
    );
    has_files(
        &f.out(),
        &[
            "run.json",
            "result.json",
            "index.html",
            "record.err",
            "record.out",
            "driver.out",
        ],
    );
    let record_out = fs::read_to_string(f.out().join("record.out")).unwrap();
    assert!(
        record_out.contains("switchyard: fake summary"),
        "{record_out}"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        f.out().to_str().unwrap()
    );
}

#[test]
fn an_attached_run_waits_for_the_recording_handshake() {
    let f = Fakes::new();
    let o = f.run("read-state-cache", "rust", &[("CAPACITY", "1000")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("1000 read states"), "{}", stderr(&o));
    has_files(
        &f.out(),
        &[
            "run.json",
            "result.json",
            "index.html",
            "record.err",
            "record.out",
            "driver.out",
            "server.err",
            "prefill.out",
        ],
    );
    let record_out = fs::read_to_string(f.out().join("record.out")).unwrap();
    assert!(
        record_out.contains("switchyard: interrupted"),
        "ended by SIGINT: {record_out}"
    );
}

#[test]
fn a_server_that_never_becomes_ready() {
    let f = Fakes::new();
    let o = f.run("spinlock-broker", "abs", &[("FAKE_SERVER", "unready")]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("error: spinlock-broker did not become ready: "),
        "{e}"
    );
    assert!(e.contains("record.err"), "{e}");
    assert!(e.contains("\nhint: "), "{e}");
    assert!(
        e.contains("error: address in use"),
        "the server's own error is quoted: {e}"
    );
}

#[test]
fn a_failing_driver() {
    let f = Fakes::new();
    let o = f.run("spinlock-broker", "mutex", &[("FAKE_DRIVER", "fail")]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("error: the spinlock-broker driver failed"),
        "{e}"
    );
    assert!(
        e.contains("hint: it ran: spinlock-broker-driver --addr 127.0.0.1:4321 --producers"),
        "{e}"
    );
    assert!(e.contains("failed to connect"), "{e}");
}

#[test]
fn a_failing_prefill() {
    let f = Fakes::new();
    let o = f.run("read-state-cache", "rust", &[("FAKE_PREFILL", "fail")]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("error: filling the read-state-cache failed"),
        "{e}"
    );
    assert!(
        e.contains("hint: it ran: read-state-cache-driver --addr 127.0.0.1:4322"),
        "{e}"
    );
    assert!(e.contains("answered status 2"), "{e}");
}

#[test]
fn switchyard_failing_to_attach() {
    let f = Fakes::new();
    let o = f.run("read-state-cache", "rust", &[("FAKE_ATTACH", "fail")]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("error: switchyard record could not attach to read-state-cache (pid "),
        "{e}"
    );
    assert!(
        e.contains("closed its ready descriptor without a line"),
        "{e}"
    );
    assert!(e.contains("hint: `switchyard doctor`"), "{e}");
    assert!(
        e.contains("permission denied"),
        "switchyard's error is quoted: {e}"
    );
}

#[test]
fn unknown_workload_and_build() {
    let f = Fakes::new();
    let o = f.run("kafka", "abs", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: unknown workload 'kafka'\nhint: one of: spinlock-broker, mmsg-relay, read-state-cache, asset-server\n"
    );
    let o = f.run("spinlock-broker", "ticket", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: spinlock-broker has no build 'ticket'\nhint: one of: spin, mutex, abs, fixed\n"
    );
    assert!(!f.out().exists(), "refused before anything was written");
}

#[test]
fn ctrl_c_keeps_the_run_and_reports_it() {
    let f = Fakes::new();
    let out = f.out();
    let child = f
        .runner(
            &["run", "read-state-cache", "rust", out.to_str().unwrap()],
            &[("FAKE_DRIVER", "slow")],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, as a shell gives a foreground job: Ctrl-C reaches every
        // process in it.
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.join("driver.started").exists() {
        assert!(Instant::now() < deadline, "the driver never started");
        thread::sleep(Duration::from_millis(20));
    }
    let pgid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on the process group the test just created.
    assert_eq!(unsafe { libc::kill(-pgid, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    has_files(&out, &["run.json", "result.json", "index.html"]);
}

#[test]
fn overhead_records_each_binary_from_before_the_load_to_after_it() {
    let f = Fakes::new();
    let bin = f.dir.path().join("bin");
    let before = f.dir.path().join("before");
    fs::create_dir(&before).unwrap();
    fs::copy(bin.join("switchyard"), before.join("switchyard")).unwrap();
    let (before, after) = (before.join("switchyard"), bin.join("switchyard"));
    let log = f.dir.path().join("log");
    let run = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/story/spinlock-broker/low-2B/abs-1/run.json");
    let o = f
        .runner(
            &[
                "overhead",
                "--repeats",
                "2",
                "--seconds",
                "1",
                "--switchyard",
                before.to_str().unwrap(),
                "--switchyard",
                after.to_str().unwrap(),
            ],
            &[
                ("FAKE_LOG", log.to_str().unwrap()),
                ("FAKE_RUN", run.to_str().unwrap()),
                ("FAKE_THROUGHPUT", "1000.0"),
            ],
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let (b, a) = (before.display(), after.display());
    let recorded = |by: &dyn std::fmt::Display| {
        [
            format!("{by} attached"),
            "driver".to_string(),
            format!("{by} stopped"),
        ]
    };
    // Repeat 1: untraced, before, after; repeat 2 starts one further on.
    let mut expected = vec!["driver".to_string()];
    expected.extend(recorded(&b));
    expected.extend(recorded(&a));
    expected.extend(recorded(&b));
    expected.extend(recorded(&a));
    expected.push("driver".into());
    let seen = fs::read_to_string(&log).unwrap();
    assert_eq!(seen.lines().collect::<Vec<_>>(), expected);
    // 133,732 switches in the run file over the driver's 2 s of load.
    let table = String::from_utf8_lossy(&o.stdout);
    for row in [
        "| untraced | 1,000 ops/s | 1.00 | 1,000–1,000 ops/s | – |".to_string(),
        format!(
            "| recorded by {b} | 1,000 ops/s | 1.00 | 1,000–1,000 ops/s; 1.00–1.00 of untraced | 66,866 |"
        ),
        format!(
            "| recorded by {a} | 1,000 ops/s | 1.00 | 1,000–1,000 ops/s; 1.00–1.00 of untraced | 66,866 |"
        ),
    ] {
        assert!(table.contains(&row), "no row `{row}` in:\n{table}");
    }
}

/// A story run where it cannot finish stops before its first run, with one line that says
/// what is missing and exit code 2: without root; without Go, or with too old a Go, for the
/// cache's Go build; without Node, or with too old a Node, for the asset server's.
#[test]
fn a_story_says_what_the_host_lacks_before_its_first_run() {
    let dir = tempfile::tempdir().unwrap();
    // An empty bin directory: were the checks passed, the story would stop at its plans.
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let runner = env!("CARGO_BIN_EXE_switchyard-workload");
    let story = |wrap: &[&str], story: &str, path: &str| -> Output {
        let mut c = match wrap {
            [] => Command::new(runner),
            [first, rest @ ..] => {
                let mut c = Command::new(first);
                c.args(rest).arg(runner);
                c
            }
        };
        c.arg("--bin-dir")
            .arg(&bin)
            .arg(story)
            .current_dir(dir.path())
            .env("PATH", path)
            .env_remove("REPEATS");
        c.output().unwrap()
    };
    let one_error = |o: &Output, want: &str| {
        let err = stderr(o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(want),
            "{err}"
        );
        assert!(
            err.lines().nth(1).unwrap_or_default().starts_with("hint: "),
            "{err}"
        );
        assert!(!dir.path().join("reports").exists(), "a run started: {err}");
    };
    let system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    // Not root: as nobody when the test is root, else as the test's own user.
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let nobody: &[&str] = if root {
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
        ]
    } else {
        &[]
    };
    let o = story(nobody, "story-go-rust", system);
    one_error(&o, "BPF programs need root; this is uid");
    if !root {
        assert!(
            std::env::var("CI").is_err(),
            "under CI the Go and Node checks must run: they need root"
        );
        eprintln!("skipped the Go and Node checks: they need root, and this is not");
        return;
    }
    // Fakes of the tools, old.
    let fakes = dir.path().join("fakes");
    fs::create_dir(&fakes).unwrap();
    for (name, says) in [
        ("go", "go version go1.19.8 linux/amd64"),
        ("node", "v18.19.0"),
    ] {
        let p = fakes.join(name);
        fs::write(&p, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let old = format!("{}:{system}", fakes.display());
    // /usr/local/go/bin is not on this PATH: no Go at all.
    one_error(&story(&[], "story-go-rust", system), "no `go` is on PATH");
    one_error(
        &story(&[], "story-go-rust", &old),
        "needs Go 1.24 or later, and `go` on PATH is 1.19",
    );
    one_error(
        &story(&[], "compare-assets", &old),
        "needs Node 20 or later, and `node` on PATH is 18",
    );
    // A story with neither build needs neither.
    let o = story(&[], "compare-broker", &old);
    assert_eq!(o.status.code(), Some(2));
    assert!(!stderr(&o).contains("on PATH"), "{}", stderr(&o));
}
