//! Shared helpers for the CLI's integration tests.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::{
    collections::{HashMap, HashSet},
    io::Read as _,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::OnceLock,
};

pub fn switchyard() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))
}

/// The demo target binary, brought up to date on first use (it lives in another package of
/// the workspace, so `cargo test -p switchyard` alone would not rebuild it).
pub fn demo() -> PathBuf {
    static DEMO: OnceLock<PathBuf> = OnceLock::new();
    DEMO.get_or_init(|| {
        let bin_dir = switchyard()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let demo = bin_dir.join("switchyard-demo");
        if !demo.exists() {
            let profile_release = bin_dir.ends_with("release");
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "-p", "switchyard-demo"]);
            if profile_release {
                cmd.arg("--release");
            }
            let status = cmd
                .status()
                .expect("running cargo build -p switchyard-demo");
            assert!(status.success(), "cargo build -p switchyard-demo failed");
        }
        assert!(demo.exists(), "{} missing after build", demo.display());
        demo
    })
    .clone()
}

/// A binary of another workspace package, brought up to date on first use.
pub fn workspace_bin(package: &str, name: &str) -> PathBuf {
    let bin_dir = switchyard()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "-p", package, "--bins"]);
    if bin_dir.ends_with("release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("running cargo build");
    assert!(status.success(), "cargo build -p {package} failed");
    let bin = bin_dir.join(name);
    assert!(bin.exists(), "{} missing after build", bin.display());
    bin
}

/// True when privileged tests can run. Without privileges they skip with a printed reason;
/// under CI=true a skip is a failure, so a silent skip can never pass.
#[track_caller]
pub fn privileged(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        return true;
    }
    let reason = format!("skipping {test}: needs root for eBPF (run `sudo -E just test`)");
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{reason}; CI=true turns a skip into a failure");
    }
    eprintln!("{reason}");
    false
}

pub fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a temp dir");
    dir
}

pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts exit code 2 and a one-line error with a hint containing `needle`.
#[track_caller]
pub fn assert_user_error(out: &Output, needle: &str) {
    let (stdout, stderr) = text(out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected exit 2\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let error_lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(error_lines.len(), 1, "expected one error line:\n{stderr}");
    assert!(
        error_lines[0].contains(needle),
        "error line lacks `{needle}`:\n{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.starts_with("hint: ")),
        "no hint:\n{stderr}"
    );
}

pub fn load_run(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// The windows a continuous recording (`record --every`) wrote to `dir`, in order.
pub fn load_windows(dir: &Path) -> Vec<serde_json::Value> {
    let mut found: Vec<(u64, serde_json::Value)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let n = name
                .strip_prefix("run-")?
                .strip_suffix(".json")?
                .parse()
                .ok()?;
            Some((n, load_run(&dir.join(name))))
        })
        .collect();
    found.sort_by_key(|(n, _)| *n);
    found.into_iter().map(|(_, r)| r).collect()
}

/// The count of one syscall in a run file (0 when absent).
pub fn syscall_count(run: &serde_json::Value, name: &str) -> u64 {
    run["syscalls"]
        .as_array()
        .expect("syscalls array")
        .iter()
        .find(|s| s["name"] == name)
        .map_or(0, |s| s["count"].as_u64().unwrap_or(0))
}

pub fn sum_threads(run: &serde_json::Value, field: &str) -> u64 {
    run["threads"]
        .as_array()
        .expect("threads array")
        .iter()
        .map(|t| t[field].as_u64().unwrap_or(0))
        .sum()
}

/// No event of the counting programs was lost (stack drops belong to the stack programs and
/// are tested with them).
#[track_caller]
pub fn assert_no_counting_drops(run: &serde_json::Value) {
    let lost: Vec<&serde_json::Value> = run["drops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| !d["reason"].as_str().unwrap_or("").contains("stack"))
        .collect();
    assert!(lost.is_empty(), "drops: {}", run["drops"]);
}

pub fn counter(run: &serde_json::Value, name: &str) -> Option<u64> {
    run["counters"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)?["value"]
        .as_u64()
}

/// |a - b| within 1% of b, or within 5.
#[track_caller]
pub fn assert_close(what: &str, got: u64, want: u64) {
    let tol = (want / 100).max(5);
    assert!(
        got.abs_diff(want) <= tol,
        "{what}: got {got}, want {want} ± {tol}"
    );
}

/// A child process killed and reaped when dropped, so a failing test leaves nothing running
/// (a leftover would also hold the test's output open).
pub struct Reaped(pub std::process::Child);

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The recording's window, ns.
pub fn window_ns(run: &serde_json::Value) -> f64 {
    let meta = &run["meta"];
    (meta["end_mono_ns"].as_u64().unwrap() - meta["start_mono_ns"].as_u64().unwrap()) as f64
}

/// A thread row's on-CPU + run-queue + blocked time, ns: its life in the window.
pub fn lifetime_ns(thread: &serde_json::Value) -> f64 {
    ["oncpu_ns", "runqueue_ns", "blocked_ns"]
        .iter()
        .map(|f| thread[*f].as_u64().unwrap_or(0) as f64)
        .sum()
}

/// Starts `switchyard record ARGS` with a `--ready-fd` pipe and waits for its handshake; when
/// none comes, fails with what switchyard printed.
#[track_caller]
pub fn record_ready(args: &[&str]) -> Child {
    let mut fds = [0; 2];
    // SAFETY: a two-int out array; the write end is made inheritable below.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let [r, w] = fds;
    let mut cmd = Command::new(switchyard());
    cmd.args(["record", "--ready-fd", "3"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: dup2 is async-signal-safe; fd 3 is the write end, without close-on-exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            if libc::dup2(w, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    // SAFETY: our write end; the child has its own copy.
    unsafe { libc::close(w) };
    // SAFETY: the read end, owned from here.
    let mut ready = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(r) };
    let mut line = String::new();
    ready.read_to_string(&mut line).unwrap();
    if !line.starts_with("recording ") {
        let (code, stderr) = wait_output(child);
        panic!(
            "no handshake from `switchyard record {}` (exit {code:?}): {line:?}\n{stderr}",
            args.join(" ")
        );
    }
    child
}

/// A recording's exit code and stderr, once it ends.
pub fn wait_output(child: Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Inclusive value per frame name of the stacks of `profile` that `keep` selects (a frame
/// counts once per stack; with `waker`, the waker's frames of a wakeup stack), and the total
/// value of those stacks.
pub fn inclusive_frames(
    run: &serde_json::Value,
    profile: &str,
    waker: bool,
    keep: impl Fn(&serde_json::Value) -> bool,
) -> (HashMap<String, u64>, u64) {
    let frames = run["profiles"]["frames"].as_array().unwrap();
    let mut times = HashMap::new();
    let mut total = 0;
    for s in run["profiles"][profile]["stacks"].as_array().unwrap() {
        if !keep(s) {
            continue;
        }
        let value = s["value"].as_u64().unwrap();
        total += value;
        let ids = if waker {
            &s["waker_frames"]
        } else {
            &s["frames"]
        };
        let names: HashSet<&str> = ids
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                frames[i.as_u64().unwrap() as usize]["name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        for n in names {
            *times.entry(n.to_string()).or_default() += value;
        }
    }
    (times, total)
}

/// Records `command` (spawned) with `flags` into `dir/run.json`, asserts the recording
/// succeeded, and returns the run and switchyard's stderr (its summary).
pub fn record_spawned(
    dir: &Path,
    flags: &[&str],
    command: &[&std::ffi::OsStr],
) -> (serde_json::Value, String) {
    let run_path = dir.join("run.json");
    let out = Command::new(switchyard())
        .arg("record")
        .args(flags)
        .arg("-o")
        .arg(&run_path)
        .arg("--")
        .args(command)
        .output()
        .expect("running switchyard");
    let stderr = text(&out).1;
    assert!(out.status.success(), "{stderr}");
    (load_run(&run_path), stderr)
}

/// The demo with `args`, as a command line for [`record_spawned`].
pub fn demo_command(args: &[&str]) -> Vec<std::ffi::OsString> {
    std::iter::once(demo().into_os_string())
        .chain(args.iter().map(Into::into))
        .collect()
}

/// A skip, printed; a failure under CI=true, so a missing tool cannot pass silently.
#[track_caller]
pub fn skip(reason: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{reason}; CI=true turns a skip into a failure");
    }
    eprintln!("skipping: {reason}");
}

/// `go`, from PATH or where the toolchain is installed here.
pub fn go_tool() -> PathBuf {
    let installed = Path::new("/usr/local/go/bin/go");
    let on_path = Command::new("go").arg("version").output();
    if on_path.is_ok_and(|o| o.status.success()) || !installed.exists() {
        PathBuf::from("go")
    } else {
        installed.to_path_buf()
    }
}

/// Builds the Go program `source` in `dir/NAME-src` (beside what is there already) as
/// `dir/NAME`, or skips.
pub fn go_build(dir: &Path, name: &str, source: &str) -> Option<PathBuf> {
    let src = dir.join(format!("{name}-src"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("main.go"), source).unwrap();
    std::fs::write(src.join("go.mod"), format!("module {name}\n\ngo 1.21\n")).unwrap();
    let out = dir.join(name);
    match Command::new(go_tool())
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .env("GOTOOLCHAIN", "local")
        .output()
    {
        Ok(o) if o.status.success() => Some(out),
        other => {
            skip(&format!("cannot build the Go program {name}: {other:?}"));
            None
        }
    }
}

/// `switchyard explain --json RUN`, parsed (schema version 2).
pub fn explain_run_json(run: &Path) -> serde_json::Value {
    let ex = Command::new(switchyard())
        .args(["explain", "--json"])
        .arg(run)
        .output()
        .expect("running switchyard explain");
    let (json, err) = text(&ex);
    assert!(ex.status.success(), "{err}");
    let ex: serde_json::Value = serde_json::from_str(&json).expect("explain --json is JSON");
    assert_eq!(ex["schema_version"], 2);
    ex
}

/// The first line of `stdout` that is a JSON object with `key`: a target's own account.
pub fn json_line_with(stdout: &str, key: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get(key).is_some())
        .unwrap_or_else(|| panic!("no JSON line with {key:?} in:\n{stdout}"))
}

/// The slow group's share of one kind, summed over its findings (a kind can have several:
/// a CPU held by the burster, and by others).
pub fn tail_share(span: &serde_json::Value, kind: &str) -> f64 {
    span["slow"]["findings"]
        .as_array()
        .expect("slow findings")
        .iter()
        .filter(|f| f["kind"] == kind)
        .map(|f| f["share"].as_f64().unwrap())
        .sum()
}
