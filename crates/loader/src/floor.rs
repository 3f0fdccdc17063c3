//! The floor: the object's empty programs attached on their own (`switchyard floor`), so a
//! benchmark can measure what the attach points cost before any program does anything.

use aya::{
    Ebpf, EbpfLoader,
    programs::{BtfTracePoint, RawTracePoint},
};
use switchyard_common::{maps, programs};

use crate::{
    Error,
    attach::OBJECT,
    error::program,
    error::{load_error, program_error},
};

/// Which attach points the floor takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorKind {
    /// Raw tracepoints on `sys_enter` and `sys_exit`, as the recording's syscall programs.
    Syscalls,
    /// A BTF tracepoint on `sched_switch`, as the recording's switch program.
    Switch,
}

/// Empty programs, attached; dropping it detaches them.
pub struct Floor {
    _ebpf: Ebpf,
}

impl Floor {
    /// Loads the object and attaches only the empty programs of `kind`. Nothing else in the
    /// object is loaded (its maps are created, small, and never touched).
    pub fn attach(kind: FloorKind) -> Result<Floor, Error> {
        if OBJECT.is_empty() {
            return Err(Error::NotBuilt);
        }
        let mut ebpf = EbpfLoader::new()
            // The smallest sizes the maps can have: only the programs matter here.
            .map_max_entries(maps::USER_STACKS, 1)
            .map_max_entries(maps::KERNEL_STACKS, 1)
            .map_max_entries(maps::UNWIND_ROWS, 512)
            .load(OBJECT)
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
            FloorKind::Switch => {
                let btf = aya::Btf::from_sys_fs().map_err(|e| Error::Btf(e.to_string()))?;
                let name = programs::FLOOR_SCHED_SWITCH;
                let p: &mut BtfTracePoint = program(&mut ebpf, name)?;
                p.load("sched_switch", &btf)
                    .map_err(|e| load_error(name, e))?;
                p.attach().map_err(program_error(name))?;
            }
        }
        Ok(Floor { _ebpf: ebpf })
    }
}
