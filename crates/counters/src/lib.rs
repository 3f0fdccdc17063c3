//! perf counters for a target (perf-event crate): task-clock, context-switches,
//! cpu-migrations, minor/major page faults, and cycles/instructions where the host has them.
//!
//! A counter the host does not support is reported as "not supported", never as 0.
//!
//! Counters are opened per existing thread with `inherit`, as `perf stat -p` does, so threads
//! started after attach are counted too. Counts of inherited threads are folded into their
//! parent's counter when they exit; threads still running when the recording stops contribute
//! only through their own counter (existing threads) — the same limit `perf stat` has.

use std::{fs, io};

use perf_event::{
    Builder, Counter,
    events::{Event, Hardware, Software},
};
use switchyard_model::{COUNTER_NAMES, Counter as CounterRow};

fn event(name: &str) -> Event {
    match name {
        "task-clock" => Software::TASK_CLOCK.into(),
        "context-switches" => Software::CONTEXT_SWITCHES.into(),
        "cpu-migrations" => Software::CPU_MIGRATIONS.into(),
        "minor-faults" => Software::PAGE_FAULTS_MIN.into(),
        "major-faults" => Software::PAGE_FAULTS_MAJ.into(),
        "cycles" => Hardware::CPU_CYCLES.into(),
        _ => Hardware::INSTRUCTIONS.into(),
    }
}

/// How the counters attach.
#[derive(Clone, Copy, Debug)]
pub enum Scope {
    /// A live process: one counter per existing thread, each inherited by new threads.
    Pid(u32),
    /// A spawned child stopped before exec: one inherited counter, enabled at exec, so the
    /// counts are the command's own and not the launcher's.
    SpawnedBeforeExec(u32),
}

struct Slot {
    name: &'static str,
    counters: Vec<Counter>,
    /// Why the counter could not be opened.
    error: Option<String>,
    /// Opened without kernel-mode counting (not permitted).
    user_only: bool,
}

pub struct Counters {
    slots: Vec<Slot>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the threads of pid {pid}")]
    Threads {
        pid: u32,
        #[source]
        source: io::Error,
    },
}

/// The thread ids of a process, from /proc/<pid>/task.
pub fn threads(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

fn describe(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            "not supported".to_string()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "not permitted (perf_event_paranoid, or run as root)".to_string()
        }
        _ => format!("unavailable: {err}"),
    }
}

impl Counters {
    /// Opens and enables every counter it can; those it cannot are kept with the reason.
    pub fn open(scope: Scope) -> Result<Counters, Error> {
        let (tids, before_exec) = match scope {
            Scope::Pid(pid) => (
                threads(pid).map_err(|source| Error::Threads { pid, source })?,
                false,
            ),
            Scope::SpawnedBeforeExec(pid) => (vec![pid], true),
        };
        let mut slots = Vec::new();
        for name in COUNTER_NAMES {
            let mut slot = Slot {
                name,
                counters: Vec::new(),
                error: None,
                user_only: false,
            };
            // Count kernel mode too, as perf stat does (a context switch happens in the
            // kernel); without the privilege for that, fall back to user mode and say so.
            let mut user_only = false;
            for &tid in &tids {
                let build = |exclude_kernel: bool| {
                    let mut b = Builder::new()
                        .kind(event(name))
                        .observe_pid(tid as libc::pid_t)
                        .any_cpu();
                    b.inherit(true);
                    b.exclude_kernel(exclude_kernel);
                    if before_exec {
                        b.enabled(false);
                        b.enable_on_exec(true);
                    }
                    b.build()
                };
                let built = match build(user_only) {
                    Err(e)
                        if !user_only
                            && matches!(
                                e.raw_os_error(),
                                Some(libc::EACCES) | Some(libc::EPERM)
                            ) =>
                    {
                        user_only = true;
                        build(true)
                    }
                    other => other,
                };
                match built {
                    Ok(mut c) => {
                        if !before_exec && let Err(e) = c.enable() {
                            slot.error = Some(describe(&e));
                            break;
                        }
                        slot.counters.push(c);
                    }
                    // A thread that exited since we listed it is not an error.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => {
                        slot.error = Some(describe(&e));
                        slot.counters.clear();
                        break;
                    }
                }
            }
            slot.user_only = user_only;
            // Switches and migrations happen in kernel mode: user-mode-only counts are always 0,
            // which would read as a measurement. Report them as missing instead.
            if user_only && matches!(name, "context-switches" | "cpu-migrations") {
                slot.counters.clear();
                slot.error = Some(
                    "needs kernel-mode counting (perf_event_paranoid <= 1, or CAP_PERFMON)"
                        .to_string(),
                );
            }
            slots.push(slot);
        }
        Ok(Counters { slots })
    }

    /// Reads every counter, scaling for multiplexing as perf does.
    pub fn read(&mut self) -> Vec<CounterRow> {
        self.slots
            .iter_mut()
            .map(|slot| {
                if let Some(e) = &slot.error {
                    return CounterRow {
                        name: slot.name.to_string(),
                        value: None,
                        note: Some(e.clone()),
                    };
                }
                let mut total: u64 = 0;
                let mut scaled = false;
                let mut failure = None;
                for c in &mut slot.counters {
                    match c.read_count_and_time() {
                        Ok(ct) => {
                            if ct.time_running > 0 && ct.time_running < ct.time_enabled {
                                scaled = true;
                                total += (ct.count as u128 * ct.time_enabled as u128
                                    / ct.time_running as u128)
                                    as u64;
                            } else {
                                total += ct.count;
                            }
                        }
                        Err(e) => failure = Some(describe(&e)),
                    }
                }
                match failure {
                    Some(note) => CounterRow {
                        name: slot.name.to_string(),
                        value: None,
                        note: Some(note),
                    },
                    None => CounterRow {
                        name: slot.name.to_string(),
                        value: Some(total),
                        note: match (scaled, slot.user_only) {
                            (true, _) => Some("scaled (multiplexed)".to_string()),
                            (false, true) => {
                                Some("user mode only (kernel mode not permitted)".to_string())
                            }
                            (false, false) => None,
                        },
                    },
                }
            })
            .collect()
    }
}
