//! Finding a CPython interpreter in a process, with no flag in the target: an object it maps
//! (the executable, or `libpython3.X.so`) that defines `_PyRuntime`, the version from its
//! `Py_Version`, and the layout of that version's structures.
//!
//! For 3.11 and 3.12 the layouts are CPython's own structure offsets on x86-64, checked
//! against Debian 12's `/usr/bin/python3.11` (3.11.2, a static, non-PIE build stripped to
//! `.dynsym`) and pyenv's 3.11.7 and 3.12.1 (shared libpython). 3.13 publishes them itself:
//! `_PyRuntime` starts with `_Py_DebugOffsets`, read from the object's initialised data (its
//! layout is 3.13's; a later version's is not guessed at).
//!
//! The recorder's loader asks [`candidate`] of each object a process maps, [`inspect`]s those
//! that may hold an interpreter, and places the one found with [`Interpreter::in_process`].

use std::path::Path;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};
use switchyard_common::{
    PyProc,
    python::{ENTRY_FLAG, ENTRY_SHIM, NO_CFRAME},
};

/// An object that holds an interpreter: where `_PyRuntime` is (a link-time address) and its
/// version's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interpreter {
    pub minor: u16,
    /// The version's layout, `interp_head` holding `interpreters.head`'s offset in
    /// `_PyRuntime`.
    pub layout: PyProc,
    /// `_PyRuntime`'s address in the object, before relocation.
    pub runtime: u64,
    /// The lowest loadable segment's address (the load bias is its mapping's start minus
    /// this, for a position-independent object; 0 and unused for a fixed one).
    pub first_vaddr: u64,
    pub relocatable: bool,
    /// The main interpreter's GIL, when the version's place for it is known.
    pub gil: Option<Gil>,
}

/// Where the main interpreter's GIL (`struct _gil_runtime_state`: its mutex, its condition
/// variables) lies in `_PyRuntime`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gil {
    /// Its offset in `_PyRuntime`.
    pub offset: u64,
    /// `sizeof(struct _gil_runtime_state)`.
    pub len: u64,
    /// Its place, named.
    pub symbol: &'static str,
}

/// The GIL's place for CPython 3.`minor` on x86-64 (measured with `offsetof` against each
/// version's internal headers, and by gdb in pyenv's 3.11.7, 3.12.1 and 3.13.0; Debian's
/// 3.11.2 waits on `_PyRuntime+0x1b0` and `+0x1b4`, the condition variable's two futex words
/// at 32 + 40 bytes into it). 3.11 keeps it in `_PyRuntime.ceval.gil`; 3.12 and 3.13 in each
/// interpreter (`interp->ceval.gil` points to `interp->_gil`), the main one inside
/// `_PyRuntime._main_interpreter`.
pub fn gil(minor: u16) -> Option<Gil> {
    let (offset, symbol) = match minor {
        11 => (360, "_PyRuntime.ceval.gil"),
        12 => (77_432, "_PyRuntime._main_interpreter._gil"),
        13 => (96_104, "_PyRuntime._main_interpreter._gil"),
        _ => return None,
    };
    Some(Gil {
        offset,
        len: 208,
        symbol,
    })
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

/// The words of 3.13's `_Py_DebugOffsets` this walk reads, by index (each a u64): the cookie
/// is word 0, the version word 1.
mod debug_offsets {
    pub const COOKIE: &[u8; 8] = b"xdebugpy";
    pub const VERSION: usize = 1;
    pub const INTERPRETERS_HEAD: usize = 5;
    pub const INTERP_THREADS_HEAD: usize = 9;
    pub const FREE_THREADED: usize = 2;
    pub const INTERP_GIL: usize = 15;
    pub const TSTATE_SIZE: usize = 19;
    pub const TSTATE_NEXT: usize = 21;
    pub const TSTATE_CURRENT_FRAME: usize = 23;
    pub const TSTATE_NATIVE_TID: usize = 25;
    pub const FRAME_SIZE: usize = 28;
    pub const FRAME_PREVIOUS: usize = 29;
    pub const FRAME_EXECUTABLE: usize = 30;
    pub const FRAME_INSTR_PTR: usize = 31;
    pub const FRAME_OWNER: usize = 33;
    pub const CODE_SIZE: usize = 34;
    pub const CODE_FILENAME: usize = 35;
    pub const CODE_QUALNAME: usize = 37;
    pub const CODE_LINETABLE: usize = 38;
    pub const CODE_FIRSTLINENO: usize = 39;
    pub const CODE_ADAPTIVE: usize = 43;
    pub const BYTES_OB_SIZE: usize = 65;
    pub const BYTES_OB_SVAL: usize = 66;
    pub const UNICODE_STATE: usize = 68;
    pub const UNICODE_ASCII_SIZE: usize = 70;
    pub const WORDS: usize = 73;
}

/// 3.13's layout from the `_Py_DebugOffsets` at the start of `_PyRuntime`'s initial bytes;
/// `None` unless the cookie, the version and every offset check out.
pub fn from_debug_offsets(bytes: &[u8], minor: u16) -> Option<PyProc> {
    use debug_offsets::*;
    if minor != 13 || bytes.get(..8)? != COOKIE {
        return None;
    }
    let w = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    if w(WORDS - 1).is_none() || (w(VERSION)? >> 16) != 0x030d {
        return None;
    }
    // An offset inside its structure, as u16.
    let within = |i: usize, size: usize| -> Option<u16> {
        let v = w(i)?;
        (v < w(size)?).then(|| u16::try_from(v).ok()).flatten()
    };
    let small = |i: usize| -> Option<u16> { u16::try_from(w(i)?).ok() };
    Some(PyProc {
        interp_head: w(INTERPRETERS_HEAD)?,
        interp_threads_head: small(INTERP_THREADS_HEAD)?,
        tstate_next: within(TSTATE_NEXT, TSTATE_SIZE)?,
        tstate_native_tid: within(TSTATE_NATIVE_TID, TSTATE_SIZE)?,
        tstate_frame: within(TSTATE_CURRENT_FRAME, TSTATE_SIZE)?,
        cframe_frame: NO_CFRAME,
        frame_code: within(FRAME_EXECUTABLE, FRAME_SIZE)?,
        frame_previous: within(FRAME_PREVIOUS, FRAME_SIZE)?,
        frame_instr: within(FRAME_INSTR_PTR, FRAME_SIZE)?,
        frame_entry: within(FRAME_OWNER, FRAME_SIZE)?,
        code_qualname: within(CODE_QUALNAME, CODE_SIZE)?,
        code_filename: within(CODE_FILENAME, CODE_SIZE)?,
        code_firstlineno: within(CODE_FIRSTLINENO, CODE_SIZE)?,
        code_linetable: within(CODE_LINETABLE, CODE_SIZE)?,
        code_adaptive: small(CODE_ADAPTIVE)?,
        unicode_state: small(UNICODE_STATE)?,
        unicode_ascii_data: small(UNICODE_ASCII_SIZE)?,
        bytes_size: small(BYTES_OB_SIZE)?,
        bytes_data: small(BYTES_OB_SVAL)?,
        entry_mode: ENTRY_SHIM,
        instr_is_next: 0,
        version_minor: minor,
    })
}

/// 3.13's GIL, where its `_Py_DebugOffsets` agree with the table: a build with the GIL, and
/// `PyInterpreterState._gil` where 3.13.0 has it.
fn gil_of_debug_offsets(bytes: &[u8]) -> Option<Gil> {
    let w = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    (bytes.get(..8)? == debug_offsets::COOKIE
        && w(debug_offsets::FREE_THREADED)? == 0
        && w(debug_offsets::INTERP_GIL)? == 7752)
        .then(|| gil(13))
        .flatten()
}

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
    let runtime_symbol = symbol("_PyRuntime")?;
    let runtime = runtime_symbol.address();
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
    let minor = minor as u16;
    let (layout, gil) = match layout(minor) {
        Some(mut l) => {
            l.interp_head = INTERPRETERS_HEAD;
            (l, gil(minor))
        }
        None => {
            let section = file
                .section_by_index(runtime_symbol.section_index()?)
                .ok()?;
            let at = usize::try_from(runtime.checked_sub(section.address())?).ok()?;
            let bytes = section.data().ok()?.get(at..)?;
            (
                from_debug_offsets(bytes, minor)?,
                gil_of_debug_offsets(bytes),
            )
        }
    };
    Some(Interpreter {
        minor,
        layout,
        runtime,
        first_vaddr,
        relocatable: file.kind() == object::ObjectKind::Dynamic,
        gil,
    })
}

/// An interpreter found in a process's maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Its layout, with `_PyRuntime.interpreters.head`'s address in the process.
    pub proc: PyProc,
    /// Its GIL's first byte in the process, and its place.
    pub gil: Option<(u64, Gil)>,
}

impl Interpreter {
    /// This interpreter in a process that maps its object's first page at `start`: the layout
    /// with `_PyRuntime.interpreters.head`'s address there, and the GIL's.
    pub fn in_process(&self, start: u64) -> Found {
        let mut proc = self.layout;
        let bias = if self.relocatable {
            start.wrapping_sub(self.first_vaddr & !0xfff)
        } else {
            0
        };
        let runtime = self.runtime.wrapping_add(bias);
        proc.interp_head = runtime + self.layout.interp_head;
        Found {
            proc,
            gil: self.gil.map(|g| (runtime + g.offset, g)),
        }
    }
}

/// Objects worth opening: an executable or library whose name says Python (every other
/// mapped library would be read in full for nothing).
pub fn candidate(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("python") || name.starts_with("libpython")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_versions_have_a_layout() {
        assert!(layout(11).is_some() && layout(12).is_some());
        assert!(
            layout(10).is_none() && layout(13).is_none(),
            "3.13 reads its own"
        );
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
        let p = i.in_process(0x400000);
        assert_eq!(p.proc.interp_head, i.runtime + 40);
        // Debian's 3.11.2 waits for its GIL on `_PyRuntime+0x1b0` and `+0x1b4`.
        let (start, gil) = p.gil.expect("a GIL");
        assert_eq!(start, i.runtime + 0x168);
        assert!(start + gil.len > i.runtime + 0x1b4);
    }

    /// pyenv's 3.13, when this host has one: its layout comes from `_Py_DebugOffsets`, and
    /// matches the offsets measured in a running 3.13.0.
    #[test]
    fn python_3_13_publishes_its_offsets() {
        let Some(lib) = std::fs::read_dir("/root/.pyenv/versions")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("lib/libpython3.13.so.1.0"))
            .find(|p| p.exists())
        else {
            eprintln!("skipping: no pyenv 3.13 here");
            return;
        };
        let i = inspect(&lib).expect("an interpreter");
        let l = i.layout;
        assert_eq!(i.minor, 13);
        assert_eq!(
            (
                l.interp_head,
                l.tstate_frame,
                l.tstate_native_tid,
                l.cframe_frame
            ),
            (632, 72, 160, NO_CFRAME)
        );
        assert_eq!(
            (l.frame_code, l.frame_previous, l.frame_instr, l.frame_entry),
            (0, 8, 56, 70)
        );
        assert_eq!(
            (
                l.code_qualname,
                l.code_filename,
                l.code_firstlineno,
                l.code_adaptive
            ),
            (128, 112, 68, 200)
        );
        assert_eq!((l.unicode_ascii_data, l.bytes_data), (40, 32));
        // Its GIL: `_Py_DebugOffsets` agree that `PyInterpreterState._gil` is where 3.13.0
        // has it.
        assert_eq!(i.gil.map(|g| g.offset), Some(96_104));
    }

    #[test]
    fn debug_offsets_are_read_only_when_they_check_out() {
        let mut bytes = vec![0u8; 8 * debug_offsets::WORDS];
        assert_eq!(from_debug_offsets(&bytes, 13), None);
        bytes[..8].copy_from_slice(debug_offsets::COOKIE);
        // Version 3.14: a layout not known.
        bytes[8..16].copy_from_slice(&0x030e_00f0u64.to_le_bytes());
        assert_eq!(from_debug_offsets(&bytes, 13), None);
        // 3.13 with every offset 0 and every size 0: offsets outside their structures.
        bytes[8..16].copy_from_slice(&0x030d_00f0u64.to_le_bytes());
        assert_eq!(from_debug_offsets(&bytes, 13), None);
        assert_eq!(from_debug_offsets(&bytes[..64], 13), None);
    }
}
