//! Finding a CPython interpreter in a process, with no flag in the target: an object it maps
//! (the executable, or `libpython3.X.so`) that defines `_PyRuntime`, the version from its
//! `Py_Version`, and the layout of that version's structures.
//!
//! The layouts are CPython's own structure offsets on x86-64, checked against Debian 12's
//! `/usr/bin/python3.11` (3.11.2, a static, non-PIE build stripped to `.dynsym`) and pyenv's
//! 3.11.7 and 3.12.1 (shared libpython).

use std::{collections::HashMap, path::Path};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};
use switchyard_common::{
    PyProc,
    python::{ENTRY_FLAG, ENTRY_SHIM},
};
use switchyard_model::raw::MapsLine;

/// An object that holds an interpreter: where `_PyRuntime` is (a link-time address) and its
/// version's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interpreter {
    pub minor: u16,
    /// `_PyRuntime`'s address in the object, before relocation.
    pub runtime: u64,
    /// The lowest loadable segment's address (the load bias is its mapping's start minus
    /// this, for a position-independent object; 0 and unused for a fixed one).
    pub first_vaddr: u64,
    pub relocatable: bool,
}

/// The structure offsets of CPython 3.`minor`, or `None` for a version without a table.
pub fn layout(minor: u16) -> Option<PyProc> {
    let common = PyProc {
        interp_head: 0,
        tstate_next: 8,
        unicode_state: 32,
        bytes_size: 16,
        bytes_data: 32,
        code_filename: 112,
        code_qualname: 128,
        code_linetable: 136,
        version_minor: minor,
        ..PyProc::default()
    };
    match minor {
        11 => Some(PyProc {
            interp_threads_head: 16,
            tstate_native_tid: 160,
            tstate_frame: 56,
            cframe_frame: 8,
            frame_code: 32,
            frame_previous: 48,
            frame_instr: 56,
            frame_entry: 68,
            code_firstlineno: 72,
            code_adaptive: 184,
            unicode_ascii_data: 48,
            entry_mode: ENTRY_FLAG,
            ..common
        }),
        12 => Some(PyProc {
            interp_threads_head: 72,
            tstate_native_tid: 144,
            tstate_frame: 56,
            cframe_frame: 0,
            frame_code: 0,
            frame_previous: 8,
            frame_instr: 56,
            frame_entry: 70,
            code_firstlineno: 68,
            code_adaptive: 192,
            unicode_ascii_data: 40,
            entry_mode: ENTRY_SHIM,
            ..common
        }),
        _ => None,
    }
}

/// `_PyRuntime.interpreters.head`'s offset (3.11 and 3.12).
const INTERPRETERS_HEAD: u64 = 40;

/// Reads `path` and says whether it holds an interpreter this walker knows.
pub fn inspect(path: &Path) -> Option<Interpreter> {
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    if file.architecture() != object::Architecture::X86_64 {
        return None;
    }
    let symbol = |name: &str| {
        file.dynamic_symbols()
            .chain(file.symbols())
            .find(|s| s.name() == Ok(name))
    };
    let runtime = symbol("_PyRuntime")?.address();
    // `Py_Version` (3.11+): PY_VERSION_HEX, 0xMMmmppXX.
    let version = symbol("Py_Version")?;
    let section = file.section_by_index(version.section_index()?).ok()?;
    let bytes = section.data().ok()?;
    let at = usize::try_from(version.address().checked_sub(section.address())?).ok()?;
    let hex = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
    let (major, minor) = (hex >> 24, (hex >> 16) & 0xff);
    if major != 3 {
        return None;
    }
    let first_vaddr = file.segments().map(|s| s.address()).min().unwrap_or(0);
    Some(Interpreter {
        minor: minor as u16,
        runtime,
        first_vaddr,
        relocatable: file.kind() == object::ObjectKind::Dynamic,
    })
}

/// Python processes found so far, and what each mapped object turned out to be.
#[derive(Default)]
pub struct Finder {
    objects: HashMap<String, Option<Interpreter>>,
    /// The procs registered, by tgid.
    pub procs: HashMap<u32, PyProc>,
}

impl Finder {
    /// The interpreter of a process from the text of its maps, with `_PyRuntime`'s address
    /// in the process; `None` when it maps none (or one of a version without a layout).
    pub fn find(&mut self, maps_text: &str) -> Option<PyProc> {
        let mut lowest: HashMap<&str, u64> = HashMap::new();
        for line in maps_text.lines().filter_map(MapsLine::parse) {
            if line.path.starts_with('/') && line.offset == 0 {
                lowest.entry(line.path).or_insert(line.start);
            }
        }
        for (path, start) in lowest {
            let found = *self
                .objects
                .entry(path.to_string())
                .or_insert_with(|| candidate(path).then(|| inspect(Path::new(path))).flatten());
            let Some(i) = found else { continue };
            let mut proc = layout(i.minor)?;
            let bias = if i.relocatable {
                start.wrapping_sub(i.first_vaddr & !0xfff)
            } else {
                0
            };
            proc.interp_head = i.runtime.wrapping_add(bias) + INTERPRETERS_HEAD;
            return Some(proc);
        }
        None
    }
}

/// Objects worth opening: an executable or library whose name says Python (every other
/// mapped library would be read in full for nothing).
fn candidate(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("python") || name.starts_with("libpython")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_versions_have_a_layout() {
        assert!(layout(11).is_some() && layout(12).is_some());
        assert!(layout(10).is_none() && layout(13).is_none());
        assert_eq!(layout(11).unwrap().entry_mode, ENTRY_FLAG);
        assert_eq!(layout(12).unwrap().entry_mode, ENTRY_SHIM);
    }

    #[test]
    fn names_that_are_not_python_are_not_opened() {
        assert!(candidate("/usr/bin/python3.11"));
        assert!(candidate("/opt/py/lib/libpython3.12.so.1.0"));
        assert!(!candidate("/usr/lib/x86_64-linux-gnu/libc.so.6"));
    }

    /// Debian's interpreter, when this host has it.
    #[test]
    fn debian_python_3_11_is_found() {
        let path = Path::new("/usr/bin/python3.11");
        if !path.exists() {
            eprintln!("skipping: no /usr/bin/python3.11");
            return;
        }
        let i = inspect(path).expect("an interpreter");
        assert_eq!(i.minor, 11);
        assert!(!i.relocatable && i.runtime > 0);
        let maps = format!(
            "00400000-00420000 r--p 00000000 fe:01 123 {}\n",
            path.display()
        );
        let p = Finder::default().find(&maps).expect("found in maps");
        assert_eq!(p.interp_head, i.runtime + 40);
    }
}
