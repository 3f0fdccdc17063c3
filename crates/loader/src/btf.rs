//! Offsets of the kernel structure fields the programs read directly, from the running
//! kernel's BTF (`/sys/kernel/btf/vmlinux`).

use btf_rs::{Backend, Btf, Type};
use switchyard_common::unwind;

use crate::Error;

const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// The kernel's BTF, mapped rather than parsed whole: two fields are looked up, and parsing
/// every type first costs ~100 ms at each start (2 ms mapped). Parsed where it cannot be
/// mapped.
fn vmlinux() -> Result<Btf, Error> {
    Btf::from_file_with_backend(VMLINUX, Backend::Mmap)
        .or_else(|_| Btf::from_file(VMLINUX))
        .map_err(|e| Error::Btf(format!("reading {VMLINUX}: {e}")))
}

/// Byte offsets in `struct task_struct`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskOffsets {
    pub pid: u32,
    pub tgid: u32,
    pub static_prio: u32,
    /// `thread.fsbase`: the user thread pointer on x86-64 (0 where the kernel has none).
    pub fsbase: u32,
}

impl TaskOffsets {
    pub fn from_kernel() -> Result<TaskOffsets, Error> {
        let btf = vmlinux()?;
        Ok(TaskOffsets {
            pid: member_offset(&btf, "task_struct", "pid")?,
            tgid: member_offset(&btf, "task_struct", "tgid")?,
            static_prio: member_offset(&btf, "task_struct", "static_prio")?,
            fsbase: member_offset(&btf, "task_struct", "thread")
                .and_then(|t| Ok(t + member_offset(&btf, "thread_struct", "fsbase")?))
                .unwrap_or(0),
        })
    }
}

/// Byte offsets of the kernel fields that lead from the current task to the return addresses
/// its pending return probes replaced, indexed by `unwind::RP_*`: what the stack walker reads to
/// put them back.
pub fn retprobe_offsets() -> Result<[u32; unwind::RETPROBE_FIELDS], Error> {
    let btf = vmlinux()?;
    let mut o = [0; unwind::RETPROBE_FIELDS];
    o[unwind::RP_TASK_UTASK] = member_offset(&btf, "task_struct", "utask")?;
    o[unwind::RP_TASK_MM] = member_offset(&btf, "task_struct", "mm")?;
    o[unwind::RP_MM_XOL_AREA] = member_offset(&btf, "mm_struct", "uprobes_state")?
        + member_offset(&btf, "uprobes_state", "xol_area")?;
    o[unwind::RP_XOL_VADDR] = member_offset(&btf, "xol_area", "vaddr")?;
    o[unwind::RP_UTASK_RETURN_INSTANCES] = member_offset(&btf, "uprobe_task", "return_instances")?;
    o[unwind::RP_RI_STACK] = member_offset(&btf, "return_instance", "stack")?;
    o[unwind::RP_RI_ORIG_RET_VADDR] = member_offset(&btf, "return_instance", "orig_ret_vaddr")?;
    o[unwind::RP_RI_NEXT] = member_offset(&btf, "return_instance", "next")?;
    Ok(o)
}

/// The byte offset of `field` in `struct name`, looking through anonymous members (a
/// randomised layout groups fields in anonymous structs).
fn member_offset(btf: &Btf, name: &str, field: &str) -> Result<u32, Error> {
    let types = btf
        .resolve_types_by_name(name)
        .map_err(|e| Error::Btf(format!("struct {name}: {e}")))?;
    for t in types {
        if let Type::Struct(s) = t
            && let Some(bits) = find(btf, &s, field, 0)
        {
            if bits % 8 != 0 {
                return Err(Error::Btf(format!("{name}.{field} is a bit field")));
            }
            return Ok(bits / 8);
        }
    }
    Err(Error::Btf(format!("no field {field} in struct {name}")))
}

fn find(btf: &Btf, s: &btf_rs::Struct, field: &str, base_bits: u32) -> Option<u32> {
    for m in &s.members {
        let bits = base_bits + m.bit_offset();
        match btf.resolve_name(m) {
            Ok(n) if n == field => return Some(bits),
            Ok(n) if !n.is_empty() => continue,
            _ => {}
        }
        // Anonymous: a struct or union to look inside.
        if let Ok(Type::Struct(inner) | Type::Union(inner)) = btf.resolve_chained_type(m)
            && let Some(found) = find(btf, &inner, field, bits)
        {
            return Some(found);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_struct_offsets_come_from_the_running_kernel() {
        if !std::path::Path::new(VMLINUX).exists() {
            eprintln!("skipped: {VMLINUX} is absent (a kernel without BTF)");
            return;
        }
        let o = TaskOffsets::from_kernel().expect("offsets");
        // tgid follows pid (both pid_t) in every kernel since 2.6.
        assert_eq!(o.tgid, o.pid + 4);
        assert!(o.pid > 0 && o.pid < 16384, "{o:?}");
    }

    #[test]
    fn return_probe_offsets_come_from_the_running_kernel() {
        if !std::path::Path::new(VMLINUX).exists() {
            eprintln!("skipped: {VMLINUX} is absent (a kernel without BTF)");
            return;
        }
        let o = retprobe_offsets().expect("offsets");
        // stack, orig_ret_vaddr: two unsigned longs in a row, since 3.5.
        assert_eq!(
            o[unwind::RP_RI_ORIG_RET_VADDR],
            o[unwind::RP_RI_STACK] + 8,
            "{o:?}"
        );
        assert!(
            o[unwind::RP_RI_NEXT] > o[unwind::RP_RI_ORIG_RET_VADDR],
            "{o:?}"
        );
    }

    #[test]
    fn a_missing_field_is_an_error_naming_it() {
        if !std::path::Path::new(VMLINUX).exists() {
            eprintln!("skipped: {VMLINUX} is absent (a kernel without BTF)");
            return;
        }
        let btf = vmlinux().expect("btf");
        let e = member_offset(&btf, "task_struct", "no_such_field").unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel BTF: no field no_such_field in struct task_struct"
        );
    }
}
