//! Starting a workload server as a child process and waiting for its ready line: what tests
//! and launchers do before they point a driver at it.

use std::{
    io::{BufRead as _, BufReader},
    net::{Ipv4Addr, SocketAddr},
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
        let pid = libc::pid_t::try_from(self.child.id()).unwrap_or(libc::pid_t::MAX);
        // SAFETY: kill(2) with a pid we spawned and have not reaped; no memory is involved.
        if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
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
        let deadline = Instant::now() + timeout;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
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
    fn a_missing_program_is_a_spawn_error() {
        let err = ServerProcess::spawn(Command::new("/nonexistent/server"), Duration::from_secs(1))
            .expect_err("missing");
        assert!(matches!(err, LaunchError::Spawn { .. }));
        assert!(err.to_string().contains("/nonexistent/server"));
    }
}
