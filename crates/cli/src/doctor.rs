//! `switchyard doctor`: what this host can and cannot do, why, and the fix.

use std::{fs, path::Path, process::ExitCode};

use anyhow::Result;

use switchyard_counters::{Counters, Scope};
use switchyard_loader::{Probes, tracefs};

use crate::{fail::out, plan::Plan};

struct Check {
    name: String,
    ok: bool,
    /// Required for a full recording (else informational).
    required: bool,
    detail: String,
    fix: Option<String>,
}

fn cap_effective() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

fn read_sysctl(path: &str) -> Option<i64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

pub fn run() -> Result<ExitCode> {
    let privileges = privileges();
    let privileged = privileges.ok;
    let mut checks = vec![privileges, kernel(), btf()];
    checks.extend(tracefs_checks(privileged));
    checks.extend(sysctl_checks(privileged));
    checks.extend(probe_checks());
    checks.extend(counter_checks());
    report(&checks)
}

/// Whether this process holds the capabilities the probes need.
fn privileges() -> Check {
    let caps = cap_effective();
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let euid = nix::unistd::geteuid();
    let privileged = has(CAP_BPF) && has(CAP_PERFMON) && has(CAP_SYS_ADMIN);
    Check {
        name: "privileges".into(),
        ok: privileged,
        required: true,
        detail: format!(
            "euid {euid}; CAP_BPF {}, CAP_PERFMON {}, CAP_SYS_ADMIN {}",
            yes(has(CAP_BPF)),
            yes(has(CAP_PERFMON)),
            yes(has(CAP_SYS_ADMIN))
        ),
        fix: (!privileged).then(|| {
            "run as root, or `setcap cap_bpf,cap_perfmon,cap_sys_admin+ep $(which switchyard)`; \
             without them `record --degraded` still works"
                .into()
        }),
    }
}

/// The running kernel's release, for the record.
fn kernel() -> Check {
    let kernel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    Check {
        name: "kernel".into(),
        ok: true,
        required: false,
        detail: kernel,
        fix: None,
    }
}

/// Whether the kernel publishes its BTF type information.
fn btf() -> Check {
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    Check {
        name: "BTF".into(),
        ok: btf,
        required: false,
        detail: if btf {
            "/sys/kernel/btf/vmlinux present".into()
        } else {
            "no /sys/kernel/btf/vmlinux (needed by later probes, not by record)".into()
        },
        fix: (!btf).then(|| "use a kernel built with CONFIG_DEBUG_INFO_BTF=y".into()),
    }
}

/// Whether tracefs is mounted and readable (mounting it when `privileged`), and then whether
/// the tracepoints' record layouts match this build.
fn tracefs_checks(privileged: bool) -> Vec<Check> {
    let tfs = match tracefs::find() {
        Some(p) => Ok(format!("mounted at {}", p.display())),
        None if privileged => tracefs::ensure()
            .map(|p| format!("was not mounted; mounted it at {}", p.display()))
            .map_err(|e| format!("{e:#}")),
        None => match tracefs::mount_point() {
            Some(p) => Err(format!(
                "mounted at {}, but not readable by this user",
                p.display()
            )),
            None => Err("not mounted".to_string()),
        },
    };
    let tracefs_fix = if tracefs::mount_point().is_some() {
        "run as root: tracefs is root-only (0700) by default"
    } else {
        "mount -t tracefs nodev /sys/kernel/tracing (as root)"
    };
    let mut checks = vec![Check {
        name: "tracefs".into(),
        ok: tfs.is_ok(),
        required: true,
        detail: tfs.clone().unwrap_or_else(|e| e),
        fix: tfs.is_err().then(|| tracefs_fix.into()),
    }];
    if tfs.is_ok() {
        let layout = tracefs::check_layout();
        checks.push(Check {
            name: "tracepoint layouts".into(),
            ok: layout.is_ok(),
            required: true,
            detail: match &layout {
                Ok(()) => "sched_switch and task_newtask match this build".into(),
                Err(e) => format!("{e}"),
            },
            fix: layout.is_err().then(|| {
                "this kernel's record layout differs; please report it with the kernel version"
                    .into()
            }),
        });
    }
    checks
}

/// The kernel's BPF and perf settings (sysctls) that bear on recording.
fn sysctl_checks(privileged: bool) -> Vec<Check> {
    let mut checks = Vec::new();
    for (path, name, good, fix) in [
        (
            "/proc/sys/kernel/unprivileged_bpf_disabled",
            "unprivileged_bpf_disabled",
            "eBPF needs CAP_BPF (or root) either way",
            "",
        ),
        (
            "/proc/sys/kernel/perf_event_paranoid",
            "perf_event_paranoid",
            "perf counters of your own processes need a value ≤ 2 without CAP_PERFMON",
            "sysctl kernel.perf_event_paranoid=2",
        ),
        (
            "/proc/sys/kernel/bpf_stats_enabled",
            "bpf_stats_enabled",
            "when on, the kernel times every BPF program run, each ~50 ns more (the probes' \
             cost with them)",
            "sysctl kernel.bpf_stats_enabled=0",
        ),
    ] {
        let v = read_sysctl(path);
        let ok = match name {
            "perf_event_paranoid" => privileged || v.is_some_and(|v| v <= 2),
            "bpf_stats_enabled" => v.is_none_or(|v| v == 0),
            _ => true,
        };
        checks.push(Check {
            name: name.into(),
            ok,
            required: false,
            detail: format!(
                "{} — {good}",
                v.map_or("unknown".to_string(), |v| v.to_string())
            ),
            fix: (!ok && !fix.is_empty()).then(|| fix.into()),
        });
    }
    checks
}

/// The real test: loads and attaches every program `record` uses, against this process, and
/// builds its unwind tables.
fn probe_checks() -> Vec<Check> {
    let mut checks = Vec::new();
    let me = std::process::id();
    // With record's own defaults, so what passes here is what `record` attaches.
    let probes = Probes::attach(&Plan::defaults(me).probe_config(me));
    match probes {
        Ok(p) => {
            if let Ok(c) = p.finish(me)
                && let Some(u) = c.unwind
            {
                checks.push(Check {
                    name: "unwind tables".into(),
                    ok: u.objects_not_loaded == 0 && u.failures.is_empty(),
                    required: false,
                    detail: format!(
                        "CFI of this process: {} objects, {} rows ({} KiB), built in {:.1} ms",
                        u.objects,
                        u.rows,
                        u.rows * switchyard_loader::UNWIND_ROW_BYTES / 1024,
                        u.build.as_secs_f64() * 1000.0
                    ),
                    fix: None,
                });
            }
            checks.push(Check {
                name: "eBPF programs".into(),
                ok: true,
                required: true,
                detail: "BTF tracepoint (sched_switch, sched_waking), tracepoint (task_newtask), raw_tracepoint (sys_enter, sys_exit) and perf_event (cpu-clock sampling) load and attach".into(),
                fix: None,
            });
        }
        Err(e) => {
            let perm = e.is_permission();
            checks.push(Check {
                name: "eBPF programs".into(),
                ok: false,
                required: true,
                detail: format!("{:#}", anyhow::Error::new(e)),
                fix: Some(if perm {
                    crate::fail::PRIVILEGE_HINT.into()
                } else {
                    "see the error; `just setup && just build` rebuilds the probes".into()
                }),
            });
        }
    }
    checks
}

/// Whether each perf counter `record --perf-counters` reads opens on this process.
fn counter_checks() -> Vec<Check> {
    let mut checks = Vec::new();
    match Counters::open(Scope::Pid(std::process::id())) {
        Ok(mut c) => {
            for row in c.read() {
                let hardware = matches!(row.name.as_str(), "cycles" | "instructions");
                checks.push(Check {
                    name: format!("perf {}", row.name),
                    ok: row.value.is_some(),
                    required: false,
                    detail: match (&row.value, &row.note) {
                        (Some(_), _) => "works".into(),
                        (None, Some(n)) => n.clone(),
                        (None, None) => "unavailable".into(),
                    },
                    fix: (row.value.is_none()).then(|| {
                        if hardware {
                            "hardware counters are not exposed here (typical in VMs); reported as \"not supported\"".into()
                        } else {
                            "lower kernel.perf_event_paranoid or run as root".into()
                        }
                    }),
                });
            }
        }
        Err(e) => checks.push(Check {
            name: "perf counters".into(),
            ok: false,
            required: false,
            detail: format!("{e:#}"),
            fix: None,
        }),
    }
    checks
}

/// Prints every check, with its fix, and what `record` can do here; exits 2 when a required
/// check failed.
fn report(checks: &[Check]) -> Result<ExitCode> {
    let mut full = true;
    for c in checks {
        let mark = if c.ok {
            "ok  "
        } else if c.required {
            "FAIL"
        } else {
            "no  "
        };
        out(format!("{mark} {:<26} {}\n", c.name, c.detail))?;
        if let Some(fix) = &c.fix {
            out(format!("     {:<26} fix: {fix}\n", ""))?;
        }
        if c.required && !c.ok {
            full = false;
        }
    }
    if full {
        out("\nrecord: full (eBPF + perf counters)\n")?;
        Ok(ExitCode::SUCCESS)
    } else {
        out("
record: degraded only (`switchyard record --degraded`: /proc switches and perf software counters)
")?;
        Ok(ExitCode::from(2))
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
