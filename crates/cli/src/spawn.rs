//! Spawning a command with the probes attached *before* it execs, so its first syscalls
//! (the dynamic loader's brk/mmap/openat) are counted.
//!
//! `std::process::Command::spawn` returns only after exec, too late; so: fork, let the child
//! wait on a pipe, attach to its pid, then let it exec. An exec failure comes back through a
//! close-on-exec pipe as an errno.
//!
//! With `hold`, the child is also held (ptrace) from exec until the dynamic loader has mapped
//! its libraries: the recorder loads their unwind tables then, so the first stacks of the
//! program are walked by CFI too (a thread that blocks once, early, for the whole run would
//! otherwise keep a stack taken before its libraries had tables).

use std::{
    ffi::CString,
    os::{fd::AsRawFd, unix::fs::PermissionsExt},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use nix::{
    fcntl::OFlag,
    sys::{
        signal::{Signal, kill},
        wait::waitpid,
    },
    unistd::{ForkResult, Pid, fork, pipe2, read, write},
};

use crate::fail::hinted;

/// A forked child waiting for `go` before it execs. Dropped without `go`, the child is
/// abandoned before it execs (it exits with status 127) and reaped.
pub struct Stopped {
    pub pid: u32,
    go: Option<std::os::fd::OwnedFd>,
    exec_err: std::os::fd::OwnedFd,
    program: String,
    hold: bool,
}

/// A spawned command after exec. Dropped before it has been reaped (an error ended the
/// recording early), it is stopped like at the end of a recording: SIGTERM, then SIGKILL.
pub struct Child {
    pub pid: u32,
    exit: Option<Exit>,
}

/// Finds `program` the way execvp will, so "not found" is reported before anything starts.
pub fn resolve(program: &str) -> Result<PathBuf> {
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        if executable(&p) {
            return Ok(p);
        }
        let why = if p.exists() {
            "is not an executable file"
        } else {
            "does not exist"
        };
        return Err(hinted(
            format!("command `{program}` {why}"),
            "check the path, or that the file is executable",
        ));
    }
    which::which(program).map_err(|_| {
        hinted(
            format!("command `{program}` not found in PATH"),
            "check the spelling, or give the command's path",
        )
    })
}

/// Forks; the child waits for [`Stopped::go`] and then execs `argv` (traced by the parent
/// until its loader is done, with `hold`).
/// `program` is `argv[0]` as [`resolve`] found it.
pub fn fork_stopped(argv: &[String], program: &Path, hold: bool) -> Result<Stopped> {
    let c_path = CString::new(program.as_os_str().as_encoded_bytes())
        .context("command path contains a NUL byte")?;
    let c_argv: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("an argument contains a NUL byte")?;

    let (go_r, go_w) = pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;
    let (err_r, err_w) = pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;

    // SAFETY: the child only calls async-signal-safe functions (read, execv, write, _exit)
    // on memory prepared before the fork.
    match unsafe { fork() }.context("fork")? {
        ForkResult::Child => {
            drop(go_w);
            drop(err_r);
            // The Rust runtime ignores SIGPIPE, and an ignored signal survives exec: give the
            // command the default, as a shell would.
            // SAFETY: signal(2) is async-signal-safe.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
            let mut b = [0u8; 1];
            // The parent closes its end without writing to cancel: exit quietly then.
            if !matches!(read(go_r.as_raw_fd(), &mut b), Ok(1)) {
                // SAFETY: leave without unwinding or running atexit handlers.
                unsafe { libc::_exit(127) };
            }
            if hold {
                // SAFETY: ptrace(2) is async-signal-safe; a failure only means no hold.
                unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
            }
            let _ = nix::unistd::execv(&c_path, &c_argv);
            let errno = nix::errno::Errno::last_raw().to_ne_bytes();
            let _ = write(&err_w, &errno);
            // SAFETY: as above.
            unsafe { libc::_exit(127) };
        }
        ForkResult::Parent { child } => {
            drop(go_r);
            drop(err_w);
            Ok(Stopped {
                pid: child.as_raw() as u32,
                go: Some(go_w),
                exec_err: err_r,
                program: argv[0].clone(),
                hold,
            })
        }
    }
}

impl Stopped {
    /// Lets the child exec; returns once exec has succeeded or reports why it failed. With
    /// `hold`, `loaded` runs once the dynamic loader has mapped the program's libraries, while
    /// the child waits (the child may have ended by then).
    pub fn go(mut self, loaded: impl FnMut()) -> Result<Child> {
        let go = self.go.take().expect("go runs once");
        write(&go, b"g").context("starting the command")?;
        drop(go);
        let mut buf = [0u8; 4];
        let exit = match read(self.exec_err.as_raw_fd(), &mut buf) {
            Ok(4) => {
                let _ = waitpid(Pid::from_raw(self.pid as i32), None);
                let err = std::io::Error::from_raw_os_error(i32::from_ne_bytes(buf));
                return Err(hinted(
                    format!("cannot execute `{}`: {err}", self.program),
                    "check that the file is a program for this machine and that you may run it",
                ));
            }
            _ if self.hold => hold_until_loaded(self.pid, loaded),
            _ => None,
        };
        Ok(Child {
            pid: self.pid,
            exit,
        })
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(go) = self.go.take() {
            drop(go);
            let _ = waitpid(Pid::from_raw(self.pid as i32), None);
        }
    }
}

impl Child {
    /// Its exit, once it has exited (without blocking).
    pub fn exited(&mut self) -> Option<Exit> {
        if self.exit.is_none() {
            self.exit = try_reap(self.pid);
        }
        self.exit
    }

    /// Like timeout(1): sends `sig` to the command and every process it started (they would
    /// otherwise outlive the recording, holding its output open), waits up to a second, then
    /// SIGKILL. Returns the command's exit.
    pub fn stop(&mut self, sig: Signal) -> Option<Exit> {
        let pid = Pid::from_raw(self.pid as i32);
        if self.exited().is_some() {
            return self.exit;
        }
        // Found before the command is signalled: once it exits, they are reparented.
        let family = crate::procfs::descendants(self.pid);
        let signal_all = |sig: Signal| {
            for &p in &family {
                let _ = kill(Pid::from_raw(p as i32), sig);
            }
            let _ = kill(pid, sig);
        };
        signal_all(sig);
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.exited().is_none() {
            signal_all(Signal::SIGKILL);
            self.exit = Some(match wait4(self.pid, 0) {
                Wait::Changed(status, usage) => exit(status, &usage),
                Wait::Running | Wait::Gone => Exit::default(),
            });
        }
        // Those that ignored `sig` do not outlive the recording either.
        for &p in &family {
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
        }
        self.exit
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop(Signal::SIGTERM);
    }
}

/// How a spawned child ended, with its resource usage (all its threads, from wait4).
#[derive(Clone, Copy, Debug, Default)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// (voluntary, involuntary) context switches of every thread of the child.
    pub switches: Option<(u64, u64)>,
    /// Peak resident set size of the child, KiB.
    pub max_rss_kb: Option<u64>,
}

/// Follows a freshly exec'd child (stopped by the exec under PTRACE_TRACEME) from syscall to
/// syscall while they come from the dynamic loader; at the first one from anywhere else (its
/// libraries are mapped by then), runs `loaded` and lets it go. `loaded` also runs at the
/// exec stop, for the program's and the loader's own tables. Returns its exit if it ended
/// first. Anything unexpected lets it go at once: the hold is an improvement, never a
/// condition of the recording.
fn hold_until_loaded(pid: u32, mut loaded: impl FnMut()) -> Option<Exit> {
    use nix::sys::ptrace;
    let child = Pid::from_raw(pid as i32);
    // The exec stop.
    match wait_child(pid) {
        Waited::Stopped(_) => {}
        Waited::Exited(e) => return Some(e),
    }
    // The program and its loader are mapped: their tables serve the loader's own stacks.
    loaded();
    let _ = ptrace::setoptions(child, ptrace::Options::PTRACE_O_TRACESYSGOOD);
    let loader = match ptrace::getregs(child) {
        Ok(regs) => code_file(pid, regs.rip),
        Err(_) => None,
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    // A static program has no loader: its tables can load now.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut signal = None;
    if loader.is_some() && loader != exe {
        while Instant::now() < deadline {
            if ptrace::syscall(child, signal).is_err() {
                break;
            }
            signal = None;
            match wait_child(pid) {
                Waited::Exited(e) => return Some(e),
                // A syscall stop (SIGTRAP | 0x80): who made the call?
                Waited::Stopped(sig) if sig == libc::SIGTRAP | 0x80 => {
                    let here = ptrace::getregs(child)
                        .ok()
                        .and_then(|r| code_file(pid, r.rip));
                    if here != loader {
                        break;
                    }
                }
                // A signal for the child: pass it on.
                Waited::Stopped(sig) => {
                    signal = nix::sys::signal::Signal::try_from(sig).ok();
                }
            }
        }
    }
    loaded();
    let _ = ptrace::detach(child, signal);
    None
}

enum Waited {
    /// Stopped, with the stop signal (ptrace syscall stops: SIGTRAP | 0x80).
    Stopped(i32),
    Exited(Exit),
}

/// Waits for the traced child's next stop or its exit.
fn wait_child(pid: u32) -> Waited {
    match wait4(pid, libc::__WALL) {
        Wait::Changed(status, _) if libc::WIFSTOPPED(status) => {
            Waited::Stopped(libc::WSTOPSIG(status))
        }
        Wait::Changed(status, usage) => Waited::Exited(exit(status, &usage)),
        Wait::Running | Wait::Gone => Waited::Exited(Exit::default()),
    }
}

/// What wait4(2) said about a child.
enum Wait {
    /// WNOHANG, and nothing to report yet.
    Running,
    Changed(libc::c_int, libc::rusage),
    /// No such child (already reaped).
    Gone,
}

/// wait4(2) on `pid`, retried when a signal interrupts it.
fn wait4(pid: u32, flags: libc::c_int) -> Wait {
    loop {
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid out-parameter.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointers.
        let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, flags, &mut usage) };
        match rc {
            0 => return Wait::Running,
            r if r > 0 => return Wait::Changed(status, usage),
            _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
            _ => return Wait::Gone,
        }
    }
}

/// An exit as wait4 reports it.
fn exit(status: libc::c_int, usage: &libc::rusage) -> Exit {
    Exit {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        switches: Some((usage.ru_nvcsw as u64, usage.ru_nivcsw as u64)),
        max_rss_kb: Some(usage.ru_maxrss as u64),
    }
}

/// The file mapped at `addr` in process `pid`.
fn code_file(pid: u32, addr: u64) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    switchyard_symbolize::parse_maps(&maps)
        .into_iter()
        .find(|m| m.start <= addr && addr < m.end)
        .map(|m| m.path)
}

/// The exit of a spawned child, without blocking: `Some` once it has exited.
fn try_reap(pid: u32) -> Option<Exit> {
    match wait4(pid, libc::WNOHANG) {
        Wait::Running => None,
        Wait::Changed(status, usage) => Some(exit(status, &usage)),
        Wait::Gone => Some(Exit::default()),
    }
}
