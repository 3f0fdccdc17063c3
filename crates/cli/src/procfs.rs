//! What /proc tells about a target: existence, kernel threads, command line, per-thread
//! switch counts (the degraded mode's source, and a cross-check of the kernel side).

use std::{collections::BTreeMap, time::Duration};

use procfs::process::{Process, Task};

fn process(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

pub fn exists(pid: u32) -> bool {
    process(pid).is_some()
}

/// The process's executable and language runtime, as far as they can be told from outside:
/// Go from the build information Go links into every binary, CPython and Node from the
/// executable's name, a JVM from the `release` file beside its `libjvm.so`.
pub fn process_info(pid: u32) -> switchyard_model::ProcessInfo {
    let mut info = switchyard_model::ProcessInfo::default();
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return info;
    };
    info.executable = exe
        .to_string_lossy()
        .trim_end_matches(" (deleted)")
        .to_string();
    let name = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(v) = go_version(&exe) {
        (info.runtime, info.runtime_version) = ("go".into(), v);
    } else if let Some(v) = name.strip_prefix("python").filter(|v| {
        v.starts_with(|c: char| c.is_ascii_digit())
            && v.chars().all(|c| c.is_ascii_digit() || c == '.')
    }) {
        (info.runtime, info.runtime_version) = ("cpython".into(), v.to_string());
    } else if name == "node" || name == "nodejs" {
        info.runtime = "nodejs".into();
    } else if let Some(v) = jvm_version(pid) {
        (info.runtime, info.runtime_version) = ("java".into(), v);
    }
    info
}

/// The Go version a binary was built with: Go writes a build-information blob that starts
/// `\xff Go buildinf:` (16-byte aligned); from Go 1.18 its flags byte says the version string
/// follows the 32-byte header inline, length-prefixed.
fn go_version(exe: &std::path::Path) -> Option<String> {
    let data = std::fs::read(exe).ok()?;
    let file = object::File::parse(&*data).ok()?;
    use object::{Object as _, ObjectSection as _};
    let section = file.section_by_name(".go.buildinfo")?;
    let b = section.data().ok()?;
    if b.len() < 33 || !b.starts_with(b"\xff Go buildinf:") || b[15] & 2 == 0 {
        return None;
    }
    let len = usize::from(*b.get(32)?);
    let v = std::str::from_utf8(b.get(33..33 + len)?).ok()?;
    v.starts_with("go").then(|| v.to_string())
}

/// A JVM's version from the `release` file of the Java home its `libjvm.so` is in.
fn jvm_version(pid: u32) -> Option<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let jvm = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libjvm.so"))?;
    let home = std::path::Path::new(jvm).ancestors().nth(3)?;
    let release = std::fs::read_to_string(home.join("release")).ok()?;
    release
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))
        .map(|v| v.trim_matches('"').to_string())
}

/// The process name (`comm`).
pub fn comm(pid: u32) -> Option<String> {
    Some(process(pid)?.stat().ok()?.comm)
}

pub fn is_kernel_thread(pid: u32) -> bool {
    process(pid)
        .and_then(|p| p.stat().ok())
        .and_then(|s| s.flags().ok())
        .is_some_and(|f| f.contains(procfs::process::StatFlags::PF_KTHREAD))
}

/// A process that has exited but whose parent has not reaped it: its main thread is a zombie
/// (or dead) and no other thread of it still runs. Nothing of it is left to record. (A main
/// thread that ended with `pthread_exit` is a zombie too, while the other threads run on.)
pub fn is_zombie(pid: u32) -> bool {
    let gone = |state: char| matches!(state, 'Z' | 'X' | 'x');
    let Some(p) = process(pid) else { return false };
    if !p.stat().is_ok_and(|s| gone(s.state)) {
        return false;
    }
    p.tasks().is_ok_and(|tasks| {
        tasks
            .flatten()
            .all(|t| t.stat().map_or(true, |s| gone(s.state)))
    })
}

/// The process a task id belongs to (its thread group), when it exists.
pub fn tgid(tid: u32) -> Option<u32> {
    u32::try_from(process(tid)?.status().ok()?.tgid).ok()
}

/// Every live descendant of `pid` (children, their children, …), found through each
/// process's parent in /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = all
        .flatten()
        .filter_map(|p| {
            let stat = p.stat().ok()?;
            Some((
                u32::try_from(stat.pid).ok()?,
                u32::try_from(stat.ppid).ok()?,
            ))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// The command line, split on NULs.
pub fn cmdline(pid: u32) -> Vec<String> {
    process(pid)
        .and_then(|p| p.cmdline().ok())
        .unwrap_or_default()
}

/// Peak resident set size of a live process (VmHWM), KiB.
pub fn max_rss_kb(pid: u32) -> Option<u64> {
    process(pid)?.status().ok()?.vmhwm
}

/// One thread's figures from /proc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadSample {
    pub tgid: u32,
    pub comm: String,
    pub voluntary: u64,
    pub involuntary: u64,
    /// From schedstat: time on CPU and time waiting on a run queue, ns.
    pub oncpu_ns: u64,
    pub runqueue_ns: u64,
}

/// Every thread of `pid`, by tid. Threads that vanish while being read are skipped.
pub fn threads(pid: u32) -> BTreeMap<u32, ThreadSample> {
    let Some(tasks) = process(pid).and_then(|p| p.tasks().ok()) else {
        return BTreeMap::new();
    };
    tasks
        .flatten()
        .filter_map(|task| Some((task.tid as u32, sample(pid, &task)?)))
        .collect()
}

fn sample(tgid: u32, task: &Task) -> Option<ThreadSample> {
    let status = task.status().ok()?;
    let sched = task.schedstat().ok();
    Some(ThreadSample {
        tgid,
        comm: status.name,
        voluntary: status.voluntary_ctxt_switches.unwrap_or(0),
        involuntary: status.nonvoluntary_ctxt_switches.unwrap_or(0),
        oncpu_ns: sched.as_ref().map_or(0, |s| s.sum_exec_runtime),
        runqueue_ns: sched.as_ref().map_or(0, |s| s.run_delay),
    })
}

/// A pidfd for the target, to wait for its exit without polling /proc (which it falls back
/// to where pidfds are missing).
pub struct PidFd {
    fd: Option<std::os::fd::OwnedFd>,
    pid: u32,
}

impl PidFd {
    pub fn open(pid: u32) -> PidFd {
        // SAFETY: pidfd_open(pid, 0) returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
        let fd = (fd >= 0).then(|| {
            // SAFETY: a fresh descriptor we own.
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) }
        });
        PidFd { fd, pid }
    }

    /// Sleeps up to `timeout`, waking early when the process exits.
    pub fn wait(&self, timeout: Duration) {
        if self.fd.is_none() {
            std::thread::sleep(timeout);
        } else {
            self.poll(timeout.as_millis() as libc::c_int);
        }
    }

    pub fn exited(&self) -> bool {
        match self.fd {
            Some(_) => self.poll(0),
            // Gone, or a zombie nobody has reaped yet.
            None => std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).map_or(true, |s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            }),
        }
    }

    /// True when the pidfd is readable (the process has exited) within `timeout_ms`.
    fn poll(&self, timeout_ms: libc::c_int) -> bool {
        let Some(fd) = &self.fd else { return false };
        let mut p = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(fd),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout_ms) > 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process() {
        let me = std::process::id();
        assert!(exists(me));
        assert!(!is_kernel_thread(me));
        assert!(!cmdline(me).is_empty());
        let t = threads(me);
        assert!(t.contains_key(&me), "{t:?}");
    }

    #[test]
    fn an_exited_child_not_yet_reaped_is_a_zombie() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited, not reaped: waitid with WNOWAIT waits for the exit and leaves the zombie.
        let id = nix::sys::wait::Id::Pid(nix::unistd::Pid::from_raw(pid as i32));
        nix::sys::wait::waitid(
            id,
            nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
        )
        .unwrap();
        assert!(exists(pid) && is_zombie(pid));
        child.wait().unwrap();
        assert!(!is_zombie(pid));
        assert!(!is_zombie(std::process::id()));
    }

    #[test]
    fn kthreadd_is_a_kernel_thread() {
        // pid 2 is kthreadd on Linux, unless this runs in a pid namespace without it.
        if comm(2).as_deref() == Some("kthreadd") {
            assert!(is_kernel_thread(2));
        }
    }

    #[test]
    fn a_process_that_has_gone_has_exited_pidfd_or_not() {
        // A child that has exited and been reaped: its pid no longer exists.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let gone = PidFd::open(pid);
        assert!(gone.fd.is_none());
        assert!(gone.exited());
        let me = PidFd::open(std::process::id());
        assert!(!me.exited());
        let without_fd = PidFd {
            fd: None,
            pid: std::process::id(),
        };
        assert!(!without_fd.exited());
    }
}
