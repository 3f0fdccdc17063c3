//! Where a Go function's body starts, past its stack-growth check.
//!
//! A Go function begins by comparing the stack pointer with the goroutine's stack guard; when
//! the stack is too small it calls `runtime.morestack`, which copies the stack and jumps back
//! to the function's *first* instruction. A probe on the entry therefore fires twice for one
//! call whenever the stack grows there, and a GC cycle is counted twice. A probe placed after
//! the check's branch fires once per call: the re-run entry passes the check the second time.

use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol};

/// The stack check of amd64 Go code, from the function's first byte:
///
/// ```text
///   [LEAQ -framesize(SP), R12]    4c 8d 64 24 d8  |  4c 8d a4 24 d32
///   CMPQ SP|R12, guard(R14)       49 3b 66 d8     |  4d 3b 66 d8
///   JBE  morestack                76 r8           |  0f 86 r32
/// ```
///
/// Returns the offset of the first instruction after the branch, or `None` when the code does
/// not start so (a `NOSPLIT` function has no check, and its entry is the place to probe).
pub fn past_stack_check(code: &[u8]) -> Option<u64> {
    let mut at = 0usize;
    // The frame-size form, for frames bigger than the guard's slack.
    match code {
        [0x4c, 0x8d, 0x64, 0x24, _, ..] => at += 5,
        [0x4c, 0x8d, 0xa4, 0x24, _, _, _, _, ..] => at += 8,
        _ => {}
    }
    let compared = if at == 0 { 0x49 } else { 0x4d };
    match code.get(at..at + 4)? {
        [rex, 0x3b, 0x66, _] if *rex == compared => at += 4,
        _ => return None,
    }
    match code.get(at..)? {
        [0x76, _, ..] => at += 2,
        [0x0f, 0x86, _, _, _, _, ..] => at += 6,
        _ => return None,
    }
    Some(at as u64)
}

/// For each of `symbols`, the offset past its stack check in `binary` (0 when it has none, or
/// when the binary is not amd64). A symbol the binary lacks is left out.
pub fn probe_offsets(binary: &Path, symbols: &[&str]) -> std::collections::HashMap<String, u64> {
    let mut out = std::collections::HashMap::new();
    let Ok(data) = std::fs::read(binary) else {
        return out;
    };
    let Ok(file) = object::File::parse(&*data) else {
        return out;
    };
    let amd64 = file.architecture() == object::Architecture::X86_64;
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        if !symbols.contains(&name) {
            continue;
        }
        let offset = amd64
            .then(|| code_of(&file, &sym))
            .flatten()
            .and_then(past_stack_check)
            .unwrap_or(0);
        out.insert(name.to_string(), offset);
    }
    out
}

/// The first bytes of `sym`'s code, enough to hold a stack check.
fn code_of<'d>(file: &object::File<'d>, sym: &object::Symbol<'d, '_>) -> Option<&'d [u8]> {
    let section = file.section_by_index(sym.section_index()?).ok()?;
    let data = section.data().ok()?;
    let start = usize::try_from(sym.address().checked_sub(section.address())?).ok()?;
    let len = (sym.size() as usize).clamp(1, 32);
    data.get(start..(start + len).min(data.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The first bytes of runtime functions in a go1.26 amd64 binary (`go tool objdump`).
    #[test]
    fn the_check_is_skipped_in_each_of_its_forms() {
        // runtime.startTheWorldWithSema: CMPQ SP, 0x10(R14); JBE rel32; PUSHQ BP.
        let small = [
            0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0x6a, 0x02, 0x00, 0x00, 0x55,
        ];
        assert_eq!(past_stack_check(&small), Some(10));
        // runtime.gcMarkDone: LEAQ -0x18(SP), R12; CMPQ R12, 0x10(R14); JBE rel32.
        let framed = [
            0x4c, 0x8d, 0x64, 0x24, 0xe8, 0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0xa6, 0x03, 0x00,
            0x00, 0x55,
        ];
        assert_eq!(past_stack_check(&framed), Some(15));
        // runtime.gcMarkTermination: LEAQ 0xfffffe40(SP), R12; CMPQ R12, 0x10(R14); JBE.
        let big = [
            0x4c, 0x8d, 0xa4, 0x24, 0x40, 0xfe, 0xff, 0xff, 0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86,
            0x0d, 0x0f, 0x00, 0x00, 0x55,
        ];
        assert_eq!(past_stack_check(&big), Some(18));
        // A short branch.
        assert_eq!(
            past_stack_check(&[0x49, 0x3b, 0x66, 0x10, 0x76, 0x20]),
            Some(6)
        );
    }

    #[test]
    fn code_without_the_check_is_probed_at_its_entry() {
        // PUSHQ BP; MOVQ SP, BP (a NOSPLIT function, or C).
        assert_eq!(past_stack_check(&[0x55, 0x48, 0x89, 0xe5]), None);
        // The LEAQ form compares R12, not SP: a mismatch is not a check.
        let wrong = [
            0x4c, 0x8d, 0x64, 0x24, 0xe8, 0x49, 0x3b, 0x66, 0x10, 0x76, 0x20,
        ];
        assert_eq!(past_stack_check(&wrong), None);
        // Cut short.
        assert_eq!(past_stack_check(&[0x49, 0x3b, 0x66]), None);
        assert_eq!(
            past_stack_check(&[0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0x00]),
            None
        );
    }
}
