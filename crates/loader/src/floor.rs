//! The floor: empty programs on the recording's attach points (`switchyard floor`), so a
//! benchmark can measure what the attach points cost before any program does anything; and
//! the same switch floor with one clock read, or with a thread's entry found one way or
//! another, to measure what each costs a switch. They are an object of their own, which a
//! recording never loads.

use aya::sys::{Stats, enable_stats};
use aya::{
    Ebpf, EbpfLoader,
    programs::{BtfTracePoint, RawTracePoint},
};
use switchyard_common::{globals, programs};
use switchyard_model::ProgramTimes;

use crate::{
    Error,
    btf::TaskOffsets,
    error::program,
    error::{load_error, program_error},
    progstats::{self, Covered},
};

/// The floor's object, built by build.rs (empty when the build was skipped).
pub(crate) static FLOOR_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/switchyard-floor"));

/// Which attach points the floor takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorKind {
    /// Raw tracepoints on `sys_enter` and `sys_exit`, as the recording's syscall programs.
    Syscalls,
    /// A BTF tracepoint on `sched_switch`, as the recording's switch program.
    Switch,
    /// The switch floor reading the exact clock once and keeping it per CPU, as the
    /// recording's switch program does at every switch.
    SwitchClock,
    /// The switch floor finding both threads' entries in an array by tid, as the recording
    /// does, and counting the switch there.
    SwitchArray,
    /// The same, the entries in task storage (`BPF_MAP_TYPE_TASK_STORAGE`).
    SwitchTaskStorage,
}

/// Empty programs, attached; dropping it detaches them.
pub struct Floor {
    ebpf: Ebpf,
    /// Held while the programs' run-time statistics are kept ([`Floor::keep_program_times`]).
    stats: Option<std::os::fd::OwnedFd>,
}

impl Floor {
    /// Loads the floor's object and attaches only the programs of `kind`. Its small maps are
    /// created whatever the kind: the clock floor's per-CPU slot, the array lookup's array,
    /// and a task storage map that holds nothing until a program stores in it.
    pub fn attach(kind: FloorKind) -> Result<Floor, Error> {
        if FLOOR_OBJECT.is_empty() {
            return Err(Error::NotBuilt);
        }
        // The lookup floors read a task's tid where the recording does.
        let task = TaskOffsets::from_kernel()?;
        let mut ebpf = EbpfLoader::new()
            // The lookup floor's task storage map: aya creates it, and has no type to read it by.
            .allow_unsupported_maps()
            .override_global(globals::TASK_PID_OFFSET, &task.pid, true)
            .override_global(globals::TASK_TGID_OFFSET, &task.tgid, true)
            .load(FLOOR_OBJECT)
            .map_err(|e| Error::Load(Box::new(e)))?;
        match kind {
            FloorKind::Syscalls => {
                for (name, event) in [
                    (programs::FLOOR_SYS_ENTER, "sys_enter"),
                    (programs::FLOOR_SYS_EXIT, "sys_exit"),
                ] {
                    let p: &mut RawTracePoint = program(&mut ebpf, name)?;
                    p.load().map_err(|e| load_error(name, e))?;
                    p.attach(event).map_err(program_error(name))?;
                }
            }
            FloorKind::Switch
            | FloorKind::SwitchClock
            | FloorKind::SwitchArray
            | FloorKind::SwitchTaskStorage => {
                let btf = aya::Btf::from_sys_fs().map_err(|e| Error::Btf(e.to_string()))?;
                let name = match kind {
                    FloorKind::SwitchClock => programs::FLOOR_SWITCH_CLOCK,
                    FloorKind::SwitchArray => programs::FLOOR_SWITCH_ARRAY,
                    FloorKind::SwitchTaskStorage => programs::FLOOR_SWITCH_TASK_STORAGE,
                    _ => programs::FLOOR_SCHED_SWITCH,
                };
                let p: &mut BtfTracePoint = program(&mut ebpf, name)?;
                p.load("sched_switch", &btf)
                    .map_err(|e| load_error(name, e))?;
                p.attach().map_err(program_error(name))?;
            }
        }
        Ok(Floor { ebpf, stats: None })
    }

    /// Turns the kernel's run-time statistics on until the floor is dropped, so that
    /// [`Floor::program_times`] can say what each run cost. They add two clock reads to every
    /// run of every program on the host: for a measurement, not for a floor left running.
    pub fn keep_program_times(&mut self) -> Result<(), Error> {
        self.stats = Some(enable_stats(Stats::RunTime).map_err(Error::Stats)?);
        Ok(())
    }

    /// Each attached program's runs and their time since [`Floor::keep_program_times`].
    pub fn program_times(&self) -> ProgramTimes {
        progstats::read(&self.ebpf, Covered(1.0))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use switchyard_common::maps;

    use super::*;
    use crate::attach::tests::{map_names, parsed};

    #[test]
    fn the_floor_object_has_exactly_its_programs_and_maps() {
        let Some(object) = parsed(FLOOR_OBJECT) else {
            return;
        };
        let found: BTreeSet<&str> = object.programs.keys().map(String::as_str).collect();
        assert_eq!(found, programs::FLOOR_ALL.iter().copied().collect());
        assert_eq!(
            map_names(&object),
            maps::FLOOR_ALL.iter().copied().collect()
        );
    }
}
