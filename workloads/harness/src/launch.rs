//! Starting a workload server as a child process and waiting for its ready line: what tests
//! and launchers do before they point a driver at it. A process that announces readiness on an
//! inherited descriptor instead (`switchyard record --ready-fd`) is started and stopped the same
//! way.

use std::{
    fs::File,
    io::{self, BufRead as _, BufReader, Read as _},
    net::{Ipv4Addr, SocketAddr},
    os::{
        fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd},
        unix::process::CommandExt as _,
    },
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc,
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use crate::ready::{ReadyError, read_ready};

/// Why a server could not be started, stopped or waited for.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("failed to start `{program}`")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` exited ({status}) before it was ready")]
    ExitedEarly { program: String, status: ExitStatus },
    #[error("`{program}` did not print `ready <port>`")]
    NotReady {
        program: String,
        #[source]
        source: ReadyError,
    },
    #[error("`{program}` was not ready within {timeout:?}")]
    ReadyTimeout { program: String, timeout: Duration },
    #[error("`{program}` closed its ready descriptor without a line")]
    ReadyFdClosed { program: String },
    #[error("failed to read `{program}`'s ready descriptor")]
    ReadyFd {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("`{program}` (pid {pid}) did not exit within {timeout:?}; it was killed")]
    ExitTimeout {
        program: String,
        pid: u32,
        timeout: Duration,
    },
    #[error("failed to signal or wait for `{program}`")]
    Wait {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// How a server ended, with what it printed on stdout after its ready line.
#[derive(Debug)]
pub struct ServerExit {
    pub status: ExitStatus,
    pub stdout_lines: Vec<String>,
}

/// A running server that has announced its port. Dropping it kills the server if it is still
/// running.
#[derive(Debug)]
pub struct ServerProcess {
    program: String,
    child: Child,
    port: u16,
    rest: Option<JoinHandle<Vec<String>>>,
}

impl ServerProcess {
    /// Spawns `command` with stdout piped (stdin null, stderr inherited) and waits up to
    /// `timeout` for its ready line.
    pub fn spawn(mut command: Command, timeout: Duration) -> Result<Self, LaunchError> {
        let program = command.get_program().to_string_lossy().into_owned();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|source| LaunchError::Spawn {
                program: program.clone(),
                source,
            })?;
        let Some(stdout) = child.stdout.take() else {
            unreachable!("stdout was piped")
        };
        let (tx, rx) = mpsc::channel();
        let rest = thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut lines = Vec::new();
            let ready = read_ready(&mut reader, |l| lines.push(l.to_owned()));
            let ok = ready.is_ok();
            let _ = tx.send(ready);
            if ok {
                lines.clear();
                lines.extend(reader.lines().map_while(Result::ok));
            }
            lines
        });
        let mut server = Self {
            program: program.clone(),
            child,
            port: 0,
            rest: Some(rest),
        };
        match rx.recv_timeout(timeout) {
            Ok(Ok(port)) => {
                server.port = port;
                Ok(server)
            }
            Ok(Err(source)) => {
                // Output ended: most likely the server exited; say how.
                let deadline = Instant::now() + Duration::from_secs(1);
                while Instant::now() < deadline {
                    if let Ok(Some(status)) = server.child.try_wait() {
                        return Err(LaunchError::ExitedEarly { program, status });
                    }
                    thread::sleep(Duration::from_millis(10));
                }
                Err(LaunchError::NotReady { program, source })
            }
            Err(_) => Err(LaunchError::ReadyTimeout { program, timeout }),
        }
    }

    /// Spawns `command` with the write end of a pipe as its descriptor `fd` (and stdout piped,
    /// stdin null, stderr as the caller set it), and waits up to `timeout` for the one line it
    /// writes there once it is ready (`switchyard record --ready-fd 3` writes `recording <pid>`).
    /// The descriptor reaching end of file first means the process failed to get ready; it is
    /// then waited for, briefly, so its error output is complete. Its stdout is kept for
    /// [`Self::wait`]; [`Self::port`] is 0.
    pub fn spawn_with_ready_fd(
        mut command: Command,
        fd: RawFd,
        timeout: Duration,
    ) -> Result<(Self, String), LaunchError> {
        let program = command.get_program().to_string_lossy().into_owned();
        let io_err = |source| LaunchError::Spawn {
            program: program.clone(),
            source,
        };
        let (read, write) = pipe_cloexec().map_err(io_err)?;
        let write_fd = write.as_raw_fd();
        // SAFETY: the closure runs in the forked child before exec and only calls dup2 and
        // fcntl, which are async-signal-safe; it touches no memory of the parent.
        unsafe {
            command.pre_exec(move || {
                if write_fd == fd {
                    // Already in place: only the close-on-exec flag has to go.
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                } else if libc::dup2(write_fd, fd) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(io_err)?;
        // Only the child may hold the write end, or end of file would never come.
        drop(write);
        let Some(stdout) = child.stdout.take() else {
            unreachable!("stdout was piped")
        };
        let rest = thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        });
        let mut process = Self {
            program: program.clone(),
            child,
            port: 0,
            rest: Some(rest),
        };
        match read_line_within(read, timeout) {
            Ok(Some(line)) => Ok((process, line)),
            Ok(None) => {
                // Failed before it was ready: let it finish writing why.
                let deadline = Instant::now() + Duration::from_secs(5);
                while Instant::now() < deadline {
                    if let Ok(Some(_)) = process.child.try_wait() {
                        break;
                    }
                    thread::sleep(Duration::from_millis(10));
                }
                Err(LaunchError::ReadyFdClosed { program })
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                Err(LaunchError::ReadyTimeout { program, timeout })
            }
            Err(source) => Err(LaunchError::ReadyFd { program, source }),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM (the server's clean shutdown).
    pub fn terminate(&self) -> Result<(), LaunchError> {
        self.signal(libc::SIGTERM)
    }

    /// Sends SIGINT, as Ctrl-C would (`switchyard record` ends its recording cleanly on it).
    pub fn interrupt(&self) -> Result<(), LaunchError> {
        self.signal(libc::SIGINT)
    }

    fn signal(&self, signal: libc::c_int) -> Result<(), LaunchError> {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap_or(libc::pid_t::MAX);
        // SAFETY: kill(2) with a pid we spawned and have not reaped (an exited child stays a
        // zombie until `wait`, so the pid cannot have been reused); no memory is involved.
        if unsafe { libc::kill(pid, signal) } == 0 {
            Ok(())
        } else {
            Err(LaunchError::Wait {
                program: self.program.clone(),
                source: std::io::Error::last_os_error(),
            })
        }
    }

    /// Waits up to `timeout` for the server to exit by itself (or after [`Self::terminate`]);
    /// past that it is killed and this is an error.
    pub fn wait(mut self, timeout: Duration) -> Result<ServerExit, LaunchError> {
        let status = match wait_or_kill(&mut self.child, timeout) {
            Ok(Some(status)) => status,
            Ok(None) => {
                return Err(LaunchError::ExitTimeout {
                    program: self.program.clone(),
                    pid: self.child.id(),
                    timeout,
                });
            }
            Err(source) => {
                return Err(LaunchError::Wait {
                    program: self.program.clone(),
                    source,
                });
            }
        };
        let stdout_lines = self
            .rest
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        Ok(ServerExit {
            status,
            stdout_lines,
        })
    }
}

/// Waits up to `timeout` for `child` to exit; past that it is killed and reaped, and the
/// answer is `None`. Every "signal, give it a while, then kill" of the harness and the runner
/// ends through here.
pub fn wait_or_kill(child: &mut Child, timeout: Duration) -> io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait()? {
            Some(status) => return Ok(Some(status)),
            None if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(None);
            }
        }
    }
}

/// A pipe whose both ends are closed on exec (a child gets the write end only through dup2).
fn pipe_cloexec() -> io::Result<(File, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The first line written to `pipe`, without its newline: `None` at end of file before a
/// newline, a `TimedOut` error when nothing complete came within `timeout`.
fn read_line_within(mut pipe: File, timeout: Duration) -> io::Result<Option<String>> {
    let deadline = Instant::now() + timeout;
    let mut line = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: poll(2) on one pollfd we own, for at most `ms` milliseconds.
        match unsafe { libc::poll(&mut pfd, 1, ms) } {
            0 => return Err(io::ErrorKind::TimedOut.into()),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            _ => {}
        }
        let n = match pipe.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(None);
        }
        line.extend_from_slice(&buf[..n]);
        if let Some(end) = line.iter().position(|b| *b == b'\n') {
            line.truncate(end);
            return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn reads_the_port_and_what_follows() {
        let server = ServerProcess::spawn(
            sh("echo starting; echo ready 4321; echo '{\"done\":true}'"),
            Duration::from_secs(10),
        )
        .expect("ready");
        assert_eq!(server.port(), 4321);
        assert_eq!(server.addr().to_string(), "127.0.0.1:4321");
        let exit = server.wait(Duration::from_secs(10)).expect("exit");
        assert!(exit.status.success());
        assert_eq!(exit.stdout_lines, ["{\"done\":true}"]);
    }

    #[test]
    fn terminate_stops_a_server() {
        let server =
            ServerProcess::spawn(sh("echo ready 1; exec sleep 30"), Duration::from_secs(10))
                .expect("ready");
        server.terminate().expect("SIGTERM");
        let exit = server.wait(Duration::from_secs(10)).expect("exit");
        assert!(!exit.status.success());
    }

    #[test]
    fn a_server_that_exits_first_is_an_error() {
        let err = ServerProcess::spawn(sh("echo nope; exit 3"), Duration::from_secs(10))
            .expect_err("never ready");
        assert!(
            matches!(err, LaunchError::ExitedEarly { ref status, .. } if status.code() == Some(3)),
            "{err:?}"
        );
    }

    #[test]
    fn a_ready_fd_line_is_read_and_stdout_kept() {
        // Only the child's descriptor 3 is the pipe: the line written there comes back, and
        // stdout is collected apart from it.
        let (process, line) = ServerProcess::spawn_with_ready_fd(
            sh("echo out; echo \"recording $$\" >&3; exec 3>&-; echo more"),
            3,
            Duration::from_secs(10),
        )
        .expect("ready");
        assert_eq!(line, format!("recording {}", process.pid()));
        let exit = process.wait(Duration::from_secs(10)).expect("exit");
        assert!(exit.status.success());
        assert_eq!(exit.stdout_lines, ["out", "more"]);
    }

    #[test]
    fn a_ready_fd_closed_without_a_line_is_an_error() {
        let mut command = sh("echo 'error: no probes' >&2; exit 2");
        command.stderr(Stdio::null());
        let err = ServerProcess::spawn_with_ready_fd(command, 3, Duration::from_secs(10))
            .expect_err("never ready");
        assert!(matches!(err, LaunchError::ReadyFdClosed { .. }), "{err:?}");
    }

    #[test]
    fn a_ready_fd_nobody_writes_times_out() {
        let err =
            ServerProcess::spawn_with_ready_fd(sh("exec sleep 30"), 3, Duration::from_millis(200))
                .expect_err("never ready");
        assert!(matches!(err, LaunchError::ReadyTimeout { .. }), "{err:?}");
    }

    #[test]
    fn interrupt_sends_sigint() {
        let server = ServerProcess::spawn(
            sh("trap 'echo interrupted; exit 0' INT; echo ready 1; while :; do sleep 0.05; done"),
            Duration::from_secs(10),
        )
        .expect("ready");
        server.interrupt().expect("SIGINT");
        let exit = server.wait(Duration::from_secs(10)).expect("exit");
        assert!(exit.status.success());
        assert_eq!(exit.stdout_lines, ["interrupted"]);
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let err = ServerProcess::spawn(Command::new("/nonexistent/server"), Duration::from_secs(1))
            .expect_err("missing");
        assert!(matches!(err, LaunchError::Spawn { .. }));
        assert!(err.to_string().contains("/nonexistent/server"));
    }
}
