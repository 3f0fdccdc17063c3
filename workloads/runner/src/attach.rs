//! Tools attached to a running process for a bench: `switchyard record --pid`, `switchyard
//! floor`, `perf record -p`, `perf trace -p` and bpftrace. Each is started, waited for until it
//! is attached (switchyard's `--ready-fd` line; a line bpftrace prints from a probe once its
//! probes run; perf's events open, then a second), and stopped with SIGINT, as Ctrl-C would,
//! once the load is over.

use std::{
    fs,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use switchyard_harness::{ServerProcess, wait_or_kill};

use crate::{fail::Failure, runner};

/// How long a tool has to attach.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a tool has to write its output and exit after SIGINT.
const EXIT_TIMEOUT: Duration = Duration::from_secs(180);

/// What attaches, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tool {
    /// `SWITCHYARD record --pid PID FLAGS… --ready-fd 3 -o OUT/run.json`.
    Record {
        switchyard: PathBuf,
        flags: Vec<String>,
    },
    /// `SWITCHYARD floor KIND --ready-fd 3`: the project's empty programs; host-wide, the pid
    /// is not used.
    Floor { switchyard: PathBuf, kind: String },
    /// `perf ARGS… -p PID` (`record -g -F 99 … -o OUT/perf.data`, `trace -s … -o OUT/perf.out`).
    Perf { args: Vec<String> },
    /// `bpftrace -e SCRIPT`, `$PID` in the script replaced by the pid.
    Bpftrace { script: String },
}

/// An attached tool, until [`Attached::stop`].
pub struct Attached {
    process: Process,
    /// Its files' name in OUT: `record.err`, `record.out`, `bpftrace.out` …
    stem: &'static str,
}

enum Process {
    Ready(ServerProcess),
    Child(Child),
}

impl Attached {
    pub fn pid(&self) -> u32 {
        match &self.process {
            Process::Ready(p) => p.pid(),
            Process::Child(c) => c.id(),
        }
    }

    /// SIGINT, then waits for it to write its output and exit (its stdout into OUT/STEM.out);
    /// its exit status.
    pub fn stop(self, out: &Path) -> Result<ExitStatus, Failure> {
        match self.process {
            Process::Ready(p) => {
                let _ = p.interrupt();
                runner::finish(p, &out.join(format!("{}.out", self.stem)), EXIT_TIMEOUT)
            }
            Process::Child(mut c) => {
                signal(c.id(), libc::SIGINT);
                match wait_or_kill(&mut c, EXIT_TIMEOUT) {
                    Ok(Some(status)) => Ok(status),
                    _ => {
                        // Killed already when it outlived the wait; not when waiting failed.
                        let _ = c.kill();
                        let _ = c.wait();
                        Err(Failure::new(format!(
                            "a tool (pid {}) did not exit within {} s of SIGINT",
                            c.id(),
                            EXIT_TIMEOUT.as_secs()
                        )))
                    }
                }
            }
        }
    }
}

/// SIGINT or another signal to a child of ours not yet reaped.
pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) on a child of this process that has not been waited for, so its pid
        // cannot have been reused; no memory is involved.
        unsafe { libc::kill(pid, sig) };
    }
}

impl Tool {
    /// The name of its files in OUT (`record.err`, `bpftrace.out` …).
    pub fn stem(&self) -> &'static str {
        match self {
            Tool::Record { .. } => "record",
            Tool::Floor { .. } => "floor",
            Tool::Perf { .. } => "perf",
            Tool::Bpftrace { .. } => "bpftrace",
        }
    }

    /// A short name for errors.
    pub fn name(&self) -> &'static str {
        match self {
            Tool::Record { .. } => "switchyard record",
            Tool::Floor { .. } => "switchyard floor",
            Tool::Perf { .. } => "perf",
            Tool::Bpftrace { .. } => "bpftrace",
        }
    }

    /// Starts the tool on `pid` and returns once it is attached; its stderr goes to
    /// OUT/STEM.err, its output files into OUT.
    pub fn attach(&self, pid: u32, out: &Path) -> Result<Attached, Failure> {
        let stem = self.stem();
        let wrap = |process| Attached { process, stem };
        let err_path = out.join(format!("{stem}.err"));
        let err = runner::create(&err_path)?;
        let failed = |what: String| {
            Failure::new(format!(
                "{} did not attach to pid {pid}: {what}",
                self.name()
            ))
            .hint(format!("its error output is in {}", err_path.display()))
            .tail(&err_path, 10)
        };
        match self {
            Tool::Record { switchyard, flags } => {
                let mut c = Command::new(switchyard);
                c.arg("record")
                    .arg("--pid")
                    .arg(pid.to_string())
                    .args(flags)
                    .arg("--ready-fd")
                    .arg("3")
                    .arg("-o")
                    .arg(out.join("run.json"))
                    .stderr(err);
                ready_fd(c, &format!("recording {pid}"), failed).map(wrap)
            }
            Tool::Floor { switchyard, kind } => {
                let mut c = Command::new(switchyard);
                c.arg("floor")
                    .arg(kind)
                    .arg("--ready-fd")
                    .arg("3")
                    .stderr(err);
                ready_fd(c, &format!("floor {kind}"), failed).map(wrap)
            }
            Tool::Perf { args } => {
                let mut c = Command::new("perf");
                c.args(args)
                    .arg("-p")
                    .arg(pid.to_string())
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(err);
                let child = c
                    .spawn()
                    .map_err(|e| failed(format!("starting perf: {e}")))?;
                let child = wrap(Process::Child(child));
                // perf says nothing once attached: its events open, then it enables them.
                let deadline = Instant::now() + ATTACH_TIMEOUT;
                while perf_events(child.pid()) == 0 {
                    if Instant::now() > deadline || !alive(child.pid()) {
                        let _ = child.stop(out);
                        return Err(failed("its perf events never opened".into()));
                    }
                    thread::sleep(Duration::from_millis(50));
                }
                thread::sleep(Duration::from_secs(1));
                Ok(child)
            }
            Tool::Bpftrace { script } => {
                let script = format!("{} {READY_PROBE}", script.replace("$PID", &pid.to_string()));
                let mut c = Command::new("bpftrace");
                c.arg("-e")
                    .arg(script)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(err);
                let mut child = c
                    .spawn()
                    .map_err(|e| failed(format!("starting bpftrace: {e}")))?;
                let stdout = child.stdout.take().expect("stdout was piped");
                let (tx, rx) = mpsc::channel();
                let log = out.join(format!("{stem}.out"));
                // Its output (the maps, printed at exit) is copied to OUT/bpftrace.out.
                thread::spawn(move || {
                    let mut kept = String::new();
                    let mut told = false;
                    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                        if !told && line == "ready" {
                            told = true;
                            let _ = tx.send(());
                        }
                        kept.push_str(&line);
                        kept.push('\n');
                    }
                    let _ = fs::write(log, kept);
                });
                let child = wrap(Process::Child(child));
                if rx.recv_timeout(ATTACH_TIMEOUT).is_err() {
                    let _ = child.stop(out);
                    return Err(failed("it never printed its ready line".into()));
                }
                Ok(child)
            }
        }
    }
}

/// Declared last, so attached after the measured probes: its line says they are in. A 10 Hz
/// timer on one CPU, which costs a server nothing measurable.
const READY_PROBE: &str = r#"interval:ms:100 /@ready == 0/ { @ready = 1; printf("ready\n"); }"#;

fn ready_fd(
    command: Command,
    expected: &str,
    failed: impl Fn(String) -> Failure,
) -> Result<Process, Failure> {
    match ServerProcess::spawn_with_ready_fd(command, 3, ATTACH_TIMEOUT) {
        Ok((p, line)) if line == expected => Ok(Process::Ready(p)),
        Ok((p, line)) => {
            let _ = p.interrupt();
            let _ = p.wait(EXIT_TIMEOUT);
            Err(failed(format!("it announced `{line}`, not `{expected}`")))
        }
        Err(e) => Err(failed(e.to_string())),
    }
}

/// Perf event descriptors `pid` holds open.
fn perf_events(pid: u32) -> usize {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(Result::ok)
        .filter_map(|e| fs::read_link(e.path()).ok())
        .filter(|l| l.to_string_lossy() == "anon_inode:[perf_event]")
        .count()
}

/// Whether `pid` runs (a zombie does not).
pub(crate) fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Sums of each map in bpftrace's exit output (`@s[1234]: 56`, `@n: 7`), by map name (`s`,
/// `n`).
pub fn bpftrace_maps(output: &str) -> std::collections::BTreeMap<String, u64> {
    let mut maps = std::collections::BTreeMap::new();
    for line in output.lines() {
        let Some(rest) = line.trim().strip_prefix('@') else {
            continue;
        };
        let Some((key, value)) = rest.rsplit_once(": ") else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        let name = key.split('[').next().unwrap_or(key);
        *maps.entry(name.to_string()).or_insert(0) += value;
    }
    maps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpftrace_maps_are_summed_by_name() {
        // As bpftrace 0.17 prints its maps at exit (the attach line and a blank line first).
        let out = "Attaching 3 probes...\nready\n\n\n@ready: 1\n\n@s[412733]: 17\n@s[412730]: 251904\n\n@w[412733]: 3\n@w[412730]: 20015\n@h[1, 2]: 5\n";
        let maps = bpftrace_maps(out);
        assert_eq!(maps["s"], 251_921);
        assert_eq!(maps["w"], 20_018);
        assert_eq!(maps["ready"], 1);
        assert_eq!(maps["h"], 5);
        assert_eq!(maps.len(), 4);
    }
}
