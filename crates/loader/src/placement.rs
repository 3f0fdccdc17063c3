//! Where a span's probes go in its function's code.
//!
//! **The entry.** A uprobe on an instruction the kernel cannot emulate is single-stepped out
//! of line: a second trap, about ten times the probe's own cost on these machines. Any
//! instruction of the function's entry block (from its first byte to the first branch, or the
//! first place a branch lands) runs exactly once per call, so the probe goes on the first one
//! the kernel emulates (x86-64: `push` of a register, the one-byte `nop`, and relative `call`,
//! `jmp` and `jcc`). Then a span costs the trap it needs, and two builds of one program whose
//! functions start with different instructions pay alike. A Go function's entry is past its
//! stack check (see `switchyard_runtimes::go::prologue`), which `runtime.morestack` re-runs.
//!
//! **The returns of Go code.** A return probe replaces the return address on the stack with
//! the kernel's trampoline, and Go walks and copies goroutine stacks by their return
//! addresses: the program dies. A Go function's returns are probed where they happen: a plain
//! uprobe on each of its `RET` instructions.

use std::path::Path;

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// Where to probe one function, as offsets from its symbol.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The entry probe's offset.
    pub entry: u64,
    /// Native code: the return probe's offset. The entry's when nothing before it moves the
    /// stack pointer (the return address is still on top there): both probes then share one
    /// breakpoint, one trap. Else 0.
    pub ret_probe: u64,
    /// The entry probe's instruction is one the kernel emulates (no single-step).
    pub emulated: bool,
    /// Go code only: the offsets of its `RET` instructions (a return probe on each).
    pub returns: Vec<u64>,
}

/// The kernel emulates this instruction at a uprobe (arch/x86/kernel/uprobes.c): pushes of
/// a register and relative branches and calls; everything else is single-stepped.
fn emulated(i: &Instruction, bytes: &[u8]) -> bool {
    match i.mnemonic() {
        Mnemonic::Push => {
            // `push %reg` (50+r, or 41 50+r for r8–r15), not a push of memory or an immediate.
            matches!(bytes, [0x50..=0x57, ..] | [0x41, 0x50..=0x57, ..])
        }
        Mnemonic::Nop => bytes.first() == Some(&0x90) && i.len() == 1,
        Mnemonic::Call | Mnemonic::Jmp => {
            matches!(bytes, [0xe8, ..] | [0xe9, ..] | [0xeb, ..])
        }
        _ => i.flow_control() == FlowControl::ConditionalBranch && i.is_jcc_short_or_near(),
    }
}

/// Decodes the function at `addr` of `size` bytes (`code`), returns (offset, instruction).
fn decode(code: &[u8], addr: u64) -> Vec<(u64, Instruction)> {
    let mut d = Decoder::with_ip(64, code, addr, DecoderOptions::NONE);
    let mut out = Vec::new();
    while d.can_decode() {
        let i = d.decode();
        if i.is_invalid() {
            break;
        }
        out.push((i.ip() - addr, i));
    }
    out
}

/// True when `i` writes the stack pointer (a push, a call, `sub $n,%rsp`, …).
fn moves_sp(i: &Instruction) -> bool {
    use iced_x86::{InstructionInfoFactory, OpAccess, Register};
    if i.stack_pointer_increment() != 0 {
        return true;
    }
    let mut info = InstructionInfoFactory::new();
    info.info(i).used_registers().iter().any(|r| {
        matches!(r.register(), Register::RSP | Register::ESP | Register::SP)
            && !matches!(
                r.access(),
                OpAccess::Read | OpAccess::CondRead | OpAccess::None
            )
    })
}

/// The offset where the return probe can share the entry's breakpoint: the entry's, when no
/// instruction before it moves the stack pointer; else 0.
pub fn return_probe(code: &[u8], addr: u64, entry: u64) -> u64 {
    let moved = decode(code, addr)
        .iter()
        .take_while(|(off, _)| *off < entry)
        .any(|(_, i)| moves_sp(i));
    if moved { 0 } else { entry }
}

/// The entry block's first emulated instruction (0 when it has none).
pub fn entry(code: &[u8], addr: u64) -> (u64, bool) {
    let insns = decode(code, addr);
    // Where branches inside the function land: the entry block ends before any of them.
    let end = addr + code.len() as u64;
    let targets: std::collections::BTreeSet<u64> = insns
        .iter()
        .filter(|(_, i)| {
            matches!(
                i.flow_control(),
                FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch
            )
        })
        .map(|(_, i)| i.near_branch_target())
        .filter(|t| *t > addr && *t < end)
        .map(|t| t - addr)
        .collect();
    for (off, i) in &insns {
        if *off != 0 && targets.contains(off) {
            break;
        }
        let at = *off as usize;
        if emulated(i, &code[at..]) {
            return (*off, true);
        }
        match i.flow_control() {
            FlowControl::Next | FlowControl::Call => {}
            _ => break,
        }
    }
    (0, false)
}

/// The offsets of the `RET` instructions of the function's code.
pub fn returns(code: &[u8], addr: u64) -> Vec<u64> {
    decode(code, addr)
        .into_iter()
        .filter(|(_, i)| i.flow_control() == FlowControl::Return)
        .map(|(off, _)| off)
        .collect()
}

/// Where to probe `symbol` of `binary`; `go`: the binary is Go code. `None` when the symbol or
/// its code cannot be read (the probe then goes on the symbol itself).
pub fn place(binary: &Path, symbol: &str, go: bool) -> Option<Placement> {
    let data = std::fs::read(binary).ok()?;
    let file = object::File::parse(&*data).ok()?;
    if file.architecture() != object::Architecture::X86_64 {
        return None;
    }
    let sym = file
        .symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.name() == Ok(symbol))?;
    let section = file.section_by_index(sym.section_index()?).ok()?;
    let bytes = section.data().ok()?;
    let start = sym.address().checked_sub(section.address())? as usize;
    let code = bytes.get(start..start.checked_add(sym.size() as usize)?)?;
    if code.is_empty() {
        return None;
    }
    if go {
        let entry = switchyard_runtimes::go::prologue::past_stack_check(code).unwrap_or(0);
        // Whether the kernel emulates the instruction the entry probe sits on (past the
        // stack check it is usually `push %rbp`): what the probe costs a call.
        let emulated = decode(&code[entry as usize..], sym.address() + entry)
            .first()
            .is_some_and(|(_, i)| emulated(i, &code[entry as usize..]));
        return Some(Placement {
            entry,
            ret_probe: 0,
            emulated,
            returns: returns(code, sym.address()),
        });
    }
    let (entry, emulated) = entry(code, sym.address());
    Some(Placement {
        entry,
        ret_probe: return_probe(code, sym.address(), entry),
        emulated,
        returns: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_goes_on_the_first_emulated_instruction_of_the_entry_block() {
        // push %rbp; mov %rsp,%rbp: the first instruction.
        assert_eq!(entry(&[0x55, 0x48, 0x89, 0xe5, 0xc3], 0x1000), (0, true));
        // endbr64; push %rbp: the push.
        assert_eq!(
            entry(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0xc3], 0x1000),
            (4, true)
        );
        // xor %eax,%eax; push %r15 (41 57).
        assert_eq!(entry(&[0x31, 0xc0, 0x41, 0x57, 0xc3], 0x1000), (2, true));
        // sub $8,%rsp; test %edi,%edi; je +1: the branch ends the block, and is emulated.
        assert_eq!(
            entry(
                &[0x48, 0x83, 0xec, 0x08, 0x85, 0xff, 0x74, 0x01, 0x90, 0xc3],
                0x1000
            ),
            (6, true)
        );
        // mov 0x0(%rip),%rax; ret: nothing emulated before the return.
        assert_eq!(
            entry(&[0x48, 0x8b, 0x05, 0, 0, 0, 0, 0xc3], 0x1000),
            (0, false)
        );
        // nopl 0(%rax) (a four-byte nop is single-stepped); push %rbx at a branch target: the
        // block ends there, before it, and a probe there would fire at every turn of the loop.
        assert_eq!(
            entry(
                &[0x0f, 0x1f, 0x40, 0x00, 0x53, 0x85, 0xc0, 0x75, 0xfb, 0xc3],
                0x1000
            ),
            (0, false)
        );
    }

    #[test]
    fn the_return_probe_shares_the_entrys_breakpoint_while_the_return_address_is_on_top() {
        // endbr64; push %rbp: nothing moved the stack before the push.
        let code = [0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0xc3];
        assert_eq!(return_probe(&code, 0x1000, 4), 4);
        // xor %eax,%eax; push %r15: likewise.
        assert_eq!(return_probe(&[0x31, 0xc0, 0x41, 0x57, 0xc3], 0x1000, 2), 2);
        // sub $8,%rsp; test; je: the return address is no longer on top at the branch.
        let code = [0x48, 0x83, 0xec, 0x08, 0x85, 0xff, 0x74, 0x01, 0x90, 0xc3];
        assert_eq!(return_probe(&code, 0x1000, 6), 0);
        // push %rbx; push %rbp: the second push's offset is not the return address's.
        assert_eq!(return_probe(&[0x53, 0x55, 0xc3], 0x1000, 1), 0);
    }

    #[test]
    fn a_functions_returns_are_its_ret_instructions_not_c3_bytes() {
        // mov $0xc3,%eax; ret; xor %eax,%eax; ret
        let code = [0xb8, 0xc3, 0, 0, 0, 0xc3, 0x31, 0xc0, 0xc3];
        assert_eq!(returns(&code, 0x4000), [5, 8]);
    }
}
