//! CPython frames: named from the code objects the kernel side copied, and put where they
//! ran, in place of the `_PyEval_EvalFrameDefault` call that ran them.
//!
//! A user stack holds its native frames (leaf first) and then the thread's Python frames
//! (innermost first), tagged (`switchyard_common::python`). One eval call runs several Python
//! frames (3.11+ calls Python from Python without recursing in C); the outermost frame of each
//! call carries `ENTRY`. So the innermost group of Python frames belongs to the innermost eval
//! frame, the next group to the next one out, and so on.

use switchyard_common::python::{CODE_MASK, ENTRY, LASTI_MAX, LASTI_SHIFT, TAG};
use switchyard_model::raw::PythonCode;

/// The native part of a user stack, and its Python frames.
pub fn split(ips: &[u64]) -> (&[u64], &[u64]) {
    let n = ips.iter().position(|ip| ip & TAG != 0).unwrap_or(ips.len());
    ips.split_at(n)
}

/// A Python frame word's code (its address, with its generation there in the low bits:
/// `python::GEN_MASK`), instruction index, and whether it is an entry frame.
pub fn decode(word: u64) -> (u64, u32, bool) {
    (
        word & CODE_MASK,
        ((word >> LASTI_SHIFT) & LASTI_MAX) as u32,
        word & ENTRY != 0,
    )
}

/// The eval function whose frames Python frames replace.
pub const EVAL_FRAME: &str = "_PyEval_EvalFrameDefault";

/// Puts Python frames into a native stack. `native` is root first; `python` innermost first,
/// as (frame, is_entry). Each eval frame of `native` (found by `is_eval`) gives way to its
/// group of Python frames, root first. Groups beyond the eval frames seen (a native walk cut
/// short) go at the root; an eval frame without a group stays.
pub fn merge<F: Copy>(native: &[F], python: &[(F, bool)], is_eval: impl Fn(F) -> bool) -> Vec<F> {
    // Innermost group first.
    let mut groups: Vec<Vec<F>> = Vec::new();
    let mut current = Vec::new();
    for &(f, entry) in python {
        current.push(f);
        if entry {
            groups.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    let evals = native.iter().filter(|&&f| is_eval(f)).count();
    let mut out = Vec::with_capacity(native.len() + python.len());
    // Outer groups no eval frame of the walk holds.
    for g in groups.iter().skip(evals).rev() {
        out.extend(g.iter().rev());
    }
    let mut k = 0;
    for &f in native {
        if !is_eval(f) {
            out.push(f);
            continue;
        }
        // The k-th eval frame from the root runs group (evals - 1 - k).
        match groups.get(evals - 1 - k) {
            Some(g) => out.extend(g.iter().rev()),
            None => out.push(f),
        }
        k += 1;
    }
    out
}

/// The line of instruction `lasti` (in code units) from a code object's location table
/// (`co_linetable`, the format of 3.11 and later); `None` when the table does not cover it
/// (only its first bytes were copied) or the instruction has no line.
pub fn line(code: &PythonCode, lasti: u32) -> Option<u32> {
    let table = &code.linetable;
    let mut line = code.firstlineno as i64;
    let mut addr = 0u32;
    let mut i = 0;
    let varint = |i: &mut usize| -> Option<u64> {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let b = *table.get(*i)?;
            *i += 1;
            value |= u64::from(b & 63) << shift;
            shift += 6;
            if b & 64 == 0 {
                return Some(value);
            }
        }
    };
    let svarint = |i: &mut usize| -> Option<i64> {
        let v = varint(i)?;
        Some(if v & 1 != 0 {
            -((v >> 1) as i64)
        } else {
            (v >> 1) as i64
        })
    };
    while i < table.len() {
        let first = table[i];
        i += 1;
        if first & 0x80 == 0 {
            return None;
        }
        let kind = (first >> 3) & 15;
        let length = u32::from(first & 7) + 1;
        let has_line = match kind {
            // No location.
            15 => false,
            // Long form: line delta, end line delta, column, end column.
            14 => {
                line += svarint(&mut i)?;
                varint(&mut i)?;
                varint(&mut i)?;
                varint(&mut i)?;
                true
            }
            // No column.
            13 => {
                line += svarint(&mut i)?;
                true
            }
            // One-line forms: the line moves by 0-2, two column bytes.
            10..=12 => {
                line += i64::from(kind - 10);
                i += 2;
                true
            }
            // Short form: same line, one column byte.
            _ => {
                i += 1;
                true
            }
        };
        if lasti < addr + length {
            return (has_line && line > 0).then_some(line as u32);
        }
        addr += length;
    }
    None
}

/// The frame's label: `function (file:line)`, the file by its last component.
pub fn label(code: Option<&PythonCode>, lasti: u32) -> (String, Option<String>, Option<u32>) {
    let Some(code) = code else {
        return ("[python frame]".to_string(), None, None);
    };
    let name = code.name.as_deref().unwrap_or("[non-ASCII name]");
    // A line the copied part of the table does not reach is left out, not guessed.
    let line = line(code, lasti);
    let file = code.file.as_deref();
    let short = file.map_or("?", |f| f.rsplit('/').next().unwrap_or(f));
    let label = match line {
        Some(l) => format!("{name} ({short}:{l})"),
        None => format!("{name} ({short})"),
    };
    (label, file.map(str::to_string), line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_replace_their_eval_frames() {
        // Native, root first: main, eval#0, call, eval#1, sleep.
        let native = ["main", "E", "call", "E", "sleep"];
        // Python, innermost first: f, g (entry of the inner eval); h (entry of the outer).
        let python = [("f", false), ("g", true), ("h", true)];
        let out = merge(&native, &python, |f| f == "E");
        assert_eq!(out, ["main", "h", "call", "g", "f", "sleep"]);
    }

    #[test]
    fn groups_beyond_the_walk_go_at_the_root_and_lone_evals_stay() {
        let python = [("f", true), ("g", true), ("h", false)];
        assert_eq!(
            merge(&["E", "leaf"], &python, |f| f == "E"),
            ["h", "g", "f", "leaf"]
        );
        assert_eq!(
            merge(&["E", "x", "E"], &[("f", true)], |f| f == "E"),
            ["E", "x", "f"]
        );
    }

    #[test]
    fn words_split_and_decode() {
        let word = TAG | ENTRY | (7 << LASTI_SHIFT) | 0x7f00_1234_5678;
        let ips = [0x401000, 0x402000, word, TAG | 0x10];
        let (native, python) = split(&ips);
        assert_eq!(native, &[0x401000, 0x402000]);
        assert_eq!(python.len(), 2);
        assert_eq!(decode(word), (0x7f00_1234_5678, 7, true));
        assert_eq!(decode(TAG | 0x10), (0x10, 0, false));
    }

    /// A table CPython 3.11.2 wrote, for:
    ///
    /// ```python
    /// def f(x):          # line 1
    ///     y = x + 1      # line 2
    ///     if y > 3:      # line 3
    ///         return y   # line 4
    ///     return -y      # line 5
    /// ```
    ///
    /// with the line of each instruction as `dis` gives it.
    #[test]
    fn lines_come_from_the_location_table() {
        let code = PythonCode {
            name: Some("f".into()),
            file: Some("/tmp/t.py".into()),
            firstlineno: 1,
            linetable: LINETABLE_3_11.to_vec(),
        };
        for &(lasti, want) in LINES_3_11 {
            assert_eq!(line(&code, lasti), Some(want), "instruction {lasti}");
        }
        // Past the end: not covered.
        assert_eq!(line(&code, 10_000), None);
        let (label, file, l) = label(Some(&code), LINES_3_11[3].0);
        assert_eq!(label, format!("f (t.py:{})", LINES_3_11[3].1));
        assert_eq!(
            (file.as_deref(), l),
            (Some("/tmp/t.py"), Some(LINES_3_11[3].1))
        );
    }

    include!("python_table.rs");
}
