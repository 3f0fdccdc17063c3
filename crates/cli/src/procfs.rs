//! What /proc tells about a target: existence, kernel threads, command line, per-thread
//! switch counts (the degraded mode's source, and a cross-check of the kernel side).

use std::{collections::BTreeMap, fs, time::Duration};

/// PF_KTHREAD in /proc/<pid>/stat's flags field.
const PF_KTHREAD: u64 = 0x0020_0000;

pub fn exists(pid: u32) -> bool {
    fs::metadata(format!("/proc/{pid}")).is_ok()
}

/// The process name (`comm`).
pub fn comm(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string())
}

pub fn is_kernel_thread(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // Fields after the parenthesised comm (which may itself contain spaces and parens).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return false;
    };
    // rest: " state ppid pgrp session tty_nr tpgid flags …" → flags is the 7th field.
    rest.split_whitespace()
        .nth(6)
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_KTHREAD != 0)
}

/// The command line, split on NULs.
pub fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Peak resident set size of a live process (VmHWM), KiB.
pub fn max_rss_kb(pid: u32) -> Option<u64> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
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
    let mut out = BTreeMap::new();
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let base = entry.path();
        let Ok(status) = fs::read_to_string(base.join("status")) else {
            continue;
        };
        let field = |name: &str| -> Option<&str> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        let num = |name: &str| field(name).and_then(|v| v.parse().ok()).unwrap_or(0);
        let sched = fs::read_to_string(base.join("schedstat")).unwrap_or_default();
        let mut sched = sched
            .split_whitespace()
            .map(|v| v.parse::<u64>().unwrap_or(0));
        out.insert(
            tid,
            ThreadSample {
                tgid: pid,
                comm: field("Name:").unwrap_or("").to_string(),
                voluntary: num("voluntary_ctxt_switches:"),
                involuntary: num("nonvoluntary_ctxt_switches:"),
                oncpu_ns: sched.next().unwrap_or(0),
                runqueue_ns: sched.next().unwrap_or(0),
            },
        );
    }
    out
}

/// A pidfd for the target, to wait for its exit without polling /proc.
pub struct PidFd(Option<std::os::fd::OwnedFd>);

impl PidFd {
    pub fn open(pid: u32) -> PidFd {
        // SAFETY: pidfd_open(pid, 0) returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
        if fd < 0 {
            return PidFd(None);
        }
        // SAFETY: a fresh descriptor we own.
        PidFd(Some(unsafe {
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32)
        }))
    }

    /// Sleeps up to `timeout`, waking early when the process exits.
    pub fn wait(&self, timeout: Duration) {
        if self.0.is_none() {
            std::thread::sleep(timeout);
        } else {
            self.poll(timeout.as_millis() as libc::c_int);
        }
    }

    pub fn exited(&self) -> bool {
        self.poll(0)
    }

    /// True when the pidfd is readable (the process has exited) within `timeout_ms`.
    fn poll(&self, timeout_ms: libc::c_int) -> bool {
        let Some(fd) = &self.0 else { return false };
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
    fn kthreadd_is_a_kernel_thread() {
        // pid 2 is kthreadd on Linux, unless this runs in a pid namespace without it.
        if comm(2).as_deref() == Some("kthreadd") {
            assert!(is_kernel_thread(2));
        }
    }
}
