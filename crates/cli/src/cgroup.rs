//! The target's CPU controller: its quota, and how often the quota throttled it during the
//! recording (cgroup v2 `cpu.max`/`cpu.stat`, or v1 `cpu.cfs_quota_us`/`cpu.stat`). A
//! throttled target waits for a CPU that is free: a cause of its own.

use std::{fs, path::PathBuf};

use switchyard_model::CgroupCpu;

/// A reading of the controller at one moment.
#[derive(Clone, Debug)]
pub struct Reading {
    path: String,
    dir: PathBuf,
    v2: bool,
    quota_us: Option<u64>,
    period_us: u64,
    periods: u64,
    throttled_periods: u64,
    throttled_ns: u64,
}

/// The controller of process `pid` now, or `None` where it has none readable.
pub fn read(pid: u32) -> Option<Reading> {
    let groups = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    // v1: "N:cpu,cpuacct:/path" (or "N:cpu:/path"); v2: "0::/path".
    let v1 = groups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "cpu")
            .then(|| path.to_string())
    });
    if let Some(path) = v1 {
        let dir = ["/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"]
            .iter()
            .map(|root| PathBuf::from(format!("{root}{path}")))
            .find(|d| d.join("cpu.stat").exists())?;
        return reading(path, dir, false);
    }
    let path = groups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .to_string();
    let dir = PathBuf::from(format!("/sys/fs/cgroup{path}"));
    reading(path, dir, true)
}

fn reading(path: String, dir: PathBuf, v2: bool) -> Option<Reading> {
    let stat = fs::read_to_string(dir.join("cpu.stat")).ok()?;
    let field = |name: &str| {
        stat.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
    };
    let (quota_us, period_us, throttled_ns) = if v2 {
        let max = fs::read_to_string(dir.join("cpu.max")).unwrap_or_default();
        let mut it = max.split_whitespace();
        let quota = it.next().and_then(|q| q.parse().ok());
        let period = it.next().and_then(|p| p.parse().ok()).unwrap_or(100_000);
        (quota, period, field("throttled_usec") * 1000)
    } else {
        let num = |f: &str| {
            fs::read_to_string(dir.join(f))
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
        };
        let quota = num("cpu.cfs_quota_us").filter(|&q| q > 0).map(|q| q as u64);
        let period = num("cpu.cfs_period_us").map_or(100_000, |p| p.max(0) as u64);
        (quota, period, field("throttled_time"))
    };
    Some(Reading {
        path,
        dir,
        v2,
        quota_us,
        period_us,
        periods: field("nr_periods"),
        throttled_periods: field("nr_throttled"),
        throttled_ns,
    })
}

impl Reading {
    /// The controller over the recording: this reading at its start, read again now.
    pub fn since_start(&self) -> CgroupCpu {
        let now = reading(self.path.clone(), self.dir.clone(), self.v2).unwrap_or(self.clone());
        CgroupCpu {
            path: self.path.clone(),
            quota_us: now.quota_us,
            period_us: now.period_us,
            periods: now.periods.saturating_sub(self.periods),
            throttled_periods: now.throttled_periods.saturating_sub(self.throttled_periods),
            throttled_ns: now.throttled_ns.saturating_sub(self.throttled_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_readable_controller_or_none() {
        // Every host has one form or the other; where there is one, its differences from
        // itself are zero.
        if let Some(r) = read(std::process::id()) {
            let c = r.since_start();
            assert!(c.path.starts_with('/'), "{c:?}");
            assert!(c.period_us > 0, "{c:?}");
        }
    }
}
