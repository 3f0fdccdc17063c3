//! One profiled workload run: the server under `switchyard record` (spawned, or attached once
//! the server is filled), its driver on loopback, then the report.
//!
//! Writes into OUT: `run.json`, the driver's `result.json`, the report (`index.html` …),
//! `record.err` and `record.out` (switchyard's stderr and stdout, which in spawn mode carries
//! the server's), `driver.out`, and in attach mode `server.err`, `server.out` and
//! `prefill.out`.

use std::{
    collections::BTreeMap,
    fs::{self, File},
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
    time::Duration,
};

use switchyard_harness::{LaunchError, ServerProcess};

use crate::{
    catalogue::Attach,
    fail::Failure,
    interrupt::Interrupts,
    plan::{Plan, fill_words},
};

/// How long a server has to print its ready line (under switchyard: after the probes load).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `switchyard record --pid` has to attach.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long switchyard has, once the load is over, to write the run (symbolising included).
pub(crate) const RECORD_EXIT_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a server has to exit after SIGTERM.
const SERVER_EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the built binaries are (`target/release`).
#[derive(Debug, Clone)]
pub struct Tools {
    pub bin: PathBuf,
    /// Serve Rust builds from their `dhat` feature's binaries and attach their heap profiles
    /// (`--heap`).
    pub heap: bool,
}

impl Tools {
    pub fn new(bin: impl Into<PathBuf>) -> Tools {
        Tools {
            bin: bin.into(),
            heap: false,
        }
    }

    /// With `--heap`, a Rust build's server comes from its `dhat` feature's build, made here
    /// (once; cargo keeps it up to date) under `target/dhat`, beside the normal binaries it must
    /// not replace. `None`: not asked for, or not a Rust build.
    fn dhat_server(&self, plan: &Plan) -> Result<Option<Tools>, Failure> {
        let Some(package) = plan.build.package.filter(|_| self.heap) else {
            return Ok(None);
        };
        // target/release → the workspace.
        let workspace = self
            .bin
            .parent()
            .and_then(Path::parent)
            .ok_or_else(|| Failure::new("cannot find the workspace above the binaries"))?;
        let target = workspace.join("target/dhat");
        eprintln!("    building {package} with its dhat feature (heap profile)");
        let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args([
                "build",
                "--release",
                "--quiet",
                "--features",
                "dhat",
                "-p",
                package,
            ])
            .arg("--target-dir")
            .arg(&target)
            .current_dir(workspace)
            .status()
            .map_err(|e| Failure::io("running cargo build", e))?;
        if !status.success() {
            return Err(Failure::new(format!(
                "building {package} with --features dhat failed ({status})"
            )));
        }
        Ok(Some(Tools {
            bin: target.join("release"),
            heap: true,
        }))
    }

    /// The directory this program runs from: `just build` puts every binary there.
    pub fn beside_current_exe() -> Tools {
        let bin = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("target/release"));
        Tools { bin, heap: false }
    }

    pub fn switchyard(&self) -> PathBuf {
        self.bin.join("switchyard")
    }

    /// A command from a filled template: its first word is a program in the bin directory.
    pub fn command(&self, words: &[String]) -> Command {
        let mut c = Command::new(self.bin.join(&words[0]));
        c.args(&words[1..]);
        c
    }
}

/// How a run ended when switchyard wrote its run file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Ended by Ctrl-C (or SIGTERM): the run holds what was collected.
    pub interrupted: bool,
}

/// Records `plan` into `out`, then writes the report. On failure the servers are stopped and
/// what was written stays in `out` (`run.json` among it when switchyard got that far).
pub fn run(
    plan: &Plan,
    tools: &Tools,
    out: &Path,
    interrupts: &Interrupts,
) -> Result<Outcome, Failure> {
    let w = plan.workload;
    eprintln!(
        "    {} ({}): {}, {} s",
        w.name,
        plan.build.name,
        plan.load_line(),
        plan.seconds
    );
    fs::create_dir_all(out).map_err(|e| Failure::io(format!("creating {}", out.display()), e))?;
    for stale in ["result.json", "run.json"] {
        let _ = fs::remove_file(out.join(stale));
    }
    let scratch =
        tempfile::tempdir().map_err(|e| Failure::io("creating a scratch directory", e))?;
    let result = out.join("result.json");
    let values = |addr: &str| {
        plan.values(
            addr,
            &result.to_string_lossy(),
            &scratch.path().to_string_lossy(),
        )
    };

    if let Some(setup) = w.setup {
        let words = fill_words(setup, &values(""));
        run_step(
            tools,
            &words,
            &out.join("setup.out"),
            &format!("setting up the {}", w.name),
        )?;
    }
    let mut record = tools.command(&["switchyard".into(), "record".into()]);
    record.args(plan.build.record_flags);
    for span in plan.build.spans {
        record.arg("--uprobe-span").arg(span.arg());
    }
    record
        .arg("--workload-result")
        .arg(&result)
        .arg("-o")
        .arg(out.join("run.json"));
    // The server's heap profile, written as it exits, attached to the run.
    let dhat = tools.dhat_server(plan)?;
    let heap_file = out.join("dhat-heap.json");
    if dhat.is_some() {
        let _ = fs::remove_file(&heap_file);
        record.arg("--heap-profile").arg(&heap_file);
        record.env("DHAT_HEAP_FILE", &heap_file);
    }
    let server_tools = dhat.as_ref().unwrap_or(tools);

    let status = match w.attach {
        Attach::Spawn => {
            let server_words = fill_words(plan.build.server, &values(""));
            record
                .arg("--")
                .arg(server_tools.bin.join(&server_words[0]))
                .args(&server_words[1..]);
            record.stderr(create(&out.join("record.err"))?);
            let recorder = ServerProcess::spawn(record, READY_TIMEOUT)
                .map_err(|e| not_ready(plan, &e, &out.join("record.err")))?;
            let forwarding = interrupts.forward_to(recorder.pid());
            let addr = recorder.addr().to_string();
            let driven = drive(plan, tools, &values(&addr), out);
            if let Err(failure) = driven
                && !interrupts.raised()
            {
                let _ = recorder.interrupt();
                let _ = finish(recorder, &out.join("record.out"), RECORD_EXIT_TIMEOUT);
                return Err(failure);
            }
            // The server exits once the driver has gone, and the recording with it.
            let status = finish(recorder, &out.join("record.out"), RECORD_EXIT_TIMEOUT);
            drop(forwarding);
            status?
        }
        Attach::AfterPrefill => {
            let server = start_filled(
                plan,
                server_tools,
                out,
                &values,
                dhat.as_ref().map(|_| heap_file.as_path()),
            )?;
            let addr = server.addr().to_string();
            let recorder = match attach(record, &server, plan, out) {
                Ok(recorder) => recorder,
                Err(failure) => {
                    stop_server(server, &out.join("server.out"));
                    return Err(failure);
                }
            };
            let forwarding = interrupts.forward_to(recorder.pid());
            if let Err(failure) = drive(plan, tools, &values(&addr), out)
                && !interrupts.raised()
            {
                let _ = recorder.interrupt();
                let _ = finish(recorder, &out.join("record.out"), RECORD_EXIT_TIMEOUT);
                stop_server(server, &out.join("server.out"));
                return Err(failure);
            }
            // A live process is recorded until Ctrl-C; then the server is stopped. A heap
            // profile is written as the server exits, while switchyard waits for it.
            let _ = recorder.interrupt();
            let server = if server_tools.heap {
                stop_server(server, &out.join("server.out"));
                None
            } else {
                Some(server)
            };
            let status = finish(recorder, &out.join("record.out"), RECORD_EXIT_TIMEOUT);
            drop(forwarding);
            if let Some(server) = server {
                stop_server(server, &out.join("server.out"));
            }
            status?
        }
    };
    let interrupted = interrupts.raised();
    // Ctrl-C makes switchyard exit 2 after writing the run: that run is still reported.
    let kept = interrupted && out.join("run.json").exists();
    if !status.success() && !kept {
        return Err(record_failed(status, &out.join("record.err")));
    }
    report(tools, out)?;
    Ok(Outcome { interrupted })
}

/// The values a run's templates are filled from, given the server's address.
pub(crate) type Values<'a> = dyn Fn(&str) -> BTreeMap<&'static str, String> + 'a;

/// Starts the build's server on its own (stderr in OUT/server.err) and, when the workload has
/// a prefill, fills it (OUT/prefill.out). A failing prefill stops the server.
pub(crate) fn start_filled(
    plan: &Plan,
    tools: &Tools,
    out: &Path,
    values: &Values<'_>,
    heap_file: Option<&Path>,
) -> Result<ServerProcess, Failure> {
    let w = plan.workload;
    let mut server = tools.command(&fill_words(plan.build.server, &values("")));
    if let Some(file) = heap_file {
        server.env("DHAT_HEAP_FILE", file);
    }
    server.stderr(create(&out.join("server.err"))?);
    let server = ServerProcess::spawn(server, READY_TIMEOUT)
        .map_err(|e| not_ready(plan, &e, &out.join("server.err")))?;
    if let Some(prefill) = w.prefill {
        let words = fill_words(prefill, &values(&server.addr().to_string()));
        let log = out.join("prefill.out");
        if let Err(failure) = run_step(tools, &words, &log, &format!("filling the {}", w.name)) {
            stop_server(server, &out.join("server.out"));
            return Err(failure);
        }
    }
    Ok(server)
}

/// Runs a step of a run (`words`, its output in `log`); its failure says `what` failed, the
/// command and the log's last lines.
fn run_step(tools: &Tools, words: &[String], log: &Path, what: &str) -> Result<(), Failure> {
    let status = run_logged(tools.command(words), log)?;
    if status.success() {
        return Ok(());
    }
    Err(
        Failure::new(format!("{what} failed ({status}); see {}", log.display()))
            .hint(format!("it ran: {}", shown(words)))
            .tail(log, 3),
    )
}

/// Attaches `record` (a `switchyard record` command with its flags) to the running `server`
/// with `--pid` and `--ready-fd 3`, and returns once switchyard says its probes are attached
/// (stderr in OUT/record.err). On failure the recorder is gone; the server is the caller's.
pub(crate) fn attach(
    mut record: Command,
    server: &ServerProcess,
    plan: &Plan,
    out: &Path,
) -> Result<ServerProcess, Failure> {
    let pid = server.pid();
    record
        .arg("--pid")
        .arg(pid.to_string())
        .arg("--ready-fd")
        .arg("3");
    let record_err = out.join("record.err");
    record.stderr(create(&record_err)?);
    match ServerProcess::spawn_with_ready_fd(record, 3, ATTACH_TIMEOUT) {
        Ok((recorder, line)) if line == format!("recording {pid}") => Ok(recorder),
        Ok((recorder, line)) => {
            let _ = recorder.interrupt();
            let _ = finish(recorder, &out.join("record.out"), RECORD_EXIT_TIMEOUT);
            Err(Failure::new(format!(
                "switchyard record announced `{line}`, not `recording {pid}`"
            ))
            .hint("the switchyard binary does not match this runner: rebuild with `just build`"))
        }
        Err(e) => Err(Failure::new(format!(
            "switchyard record could not attach to {} (pid {pid}): {e}; see {}",
            plan.workload.name,
            record_err.display()
        ))
        .hint("`switchyard doctor` shows what this host can record")
        .tail(&record_err, usize::MAX)),
    }
}

/// `switchyard record` ended with `status` other than success: its code, and its error output
/// quoted.
pub(crate) fn record_failed(status: ExitStatus, record_err: &Path) -> Failure {
    Failure::new(format!(
        "switchyard record exited {}; see {}",
        code_of(status),
        record_err.display()
    ))
    .hint("its error above says why; `switchyard doctor` shows what this host can record")
    .tail(record_err, usize::MAX)
    .code(u8::try_from(code_of(status)).unwrap_or(2))
}

/// `switchyard report OUT/run.json -o OUT`, quietly.
pub fn report(tools: &Tools, out: &Path) -> Result<(), Failure> {
    let status = Command::new(tools.switchyard())
        .arg("report")
        .arg(out.join("run.json"))
        .arg("-o")
        .arg(out)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| Failure::io(format!("running {}", tools.switchyard().display()), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "switchyard report failed ({status}) on {}",
            out.join("run.json").display()
        ))
        .hint("its error above says why"))
    }
}

/// Runs the driver against the server; its output goes to OUT/driver.out.
pub(crate) fn drive(
    plan: &Plan,
    tools: &Tools,
    values: &BTreeMap<&'static str, String>,
    out: &Path,
) -> Result<(), Failure> {
    let words = fill_words(plan.workload.driver, values);
    let log = out.join("driver.out");
    let status = run_logged(tools.command(&words), &log)?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "the {} driver failed ({status}); see {}",
            plan.workload.name,
            log.display()
        ))
        .hint(format!("it ran: {}", shown(&words)))
        .tail(&log, 3))
    }
}

/// `command` with no stdin and its stdout and stderr both in `log` (created anew).
pub(crate) fn logged(mut command: Command, log: &Path) -> Result<Command, Failure> {
    let file = create(log)?;
    let err = file
        .try_clone()
        .map_err(|e| Failure::io(format!("opening {}", log.display()), e))?;
    command.stdin(Stdio::null()).stdout(file).stderr(err);
    Ok(command)
}

/// Runs `command` to its end with stdout and stderr in `log`.
fn run_logged(command: Command, log: &Path) -> Result<ExitStatus, Failure> {
    let mut command = logged(command, log)?;
    command.status().map_err(|e| {
        Failure::io(
            format!("running {}", command.get_program().to_string_lossy()),
            e,
        )
        .hint("build the workloads first: `just build`")
    })
}

/// Waits for a process started through the harness and writes what it printed after its
/// ready line into `stdout`.
pub(crate) fn finish(
    process: ServerProcess,
    stdout: &Path,
    timeout: Duration,
) -> Result<ExitStatus, Failure> {
    match process.wait(timeout) {
        Ok(exit) => {
            let mut text = exit.stdout_lines.join("\n");
            if !text.is_empty() {
                text.push('\n');
            }
            fs::write(stdout, text)
                .map_err(|e| Failure::io(format!("writing {}", stdout.display()), e))?;
            Ok(exit.status)
        }
        Err(e) => Err(Failure::new(e.to_string())),
    }
}

/// SIGTERM, then waits; the server's output after its ready line goes to `stdout`.
pub(crate) fn stop_server(server: ServerProcess, stdout: &Path) {
    let _ = server.terminate();
    let _ = finish(server, stdout, SERVER_EXIT_TIMEOUT);
}

fn not_ready(plan: &Plan, e: &LaunchError, log: &Path) -> Failure {
    let hint = match e {
        LaunchError::Spawn { .. } => "build the workloads first: `just build`",
        _ => "the lines below (its error output) say why",
    };
    Failure::new(format!(
        "{} did not become ready: {e}; see {}",
        plan.workload.name,
        log.display()
    ))
    .hint(hint)
    .tail(log, 5)
}

pub(crate) fn create(path: &Path) -> Result<File, Failure> {
    File::create(path).map_err(|e| Failure::io(format!("creating {}", path.display()), e))
}

/// An exit status as a shell shows it: the code, or 128 + the signal.
pub fn code_of(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(2)
}

/// A command line as it could be typed again (quoted where a shell needs it).
fn shown(words: &[String]) -> String {
    switchyard_model::units::command_line(words)
}
