//! Compact unwind tables from an ELF object's call-frame information, for the kernel side's
//! user-stack walker.
//!
//! gimli evaluates every FDE of `.eh_frame` (or `.debug_frame` when an object has no
//! `.eh_frame`, as some stripped-down or embedded builds) into its table rows; each row keeps only what an x86-64 walk
//! needs: how the CFA is found (rsp or rbp plus an offset, or the PLT expression), whether the
//! return address is undefined (the outermost frame), and where the caller's rbp was saved.
//! The return address is always at CFA-8 on x86-64. Rows that cannot be expressed so become
//! gaps, where the walker falls back to frame pointers.

use std::{borrow::Cow, path::Path};

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EhFrame, EndianSlice, LittleEndian, RegisterRule,
    UnwindContext, UnwindSection, X86_64,
};
use object::{Object as _, ObjectSection as _, ObjectSegment as _};
use switchyard_common::{
    UnwindRow,
    unwind::{CFA_NONE, CFA_PLT, CFA_RBP, CFA_RSP, CFA_SCALED, END, RBP_SAVED},
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading `{path}`")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` is not an ELF object this build can read")]
    Parse {
        path: String,
        #[source]
        source: object::Error,
    },
    #[error("`{path}`: malformed call-frame information")]
    Cfi {
        path: String,
        #[source]
        source: gimli::Error,
    },
    #[error("`{path}`: code spans more than 4 GiB, beyond the table's 32-bit pcs")]
    TooLarge { path: String },
}

/// Where an object's CFI came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    EhFrame,
    DebugFrame,
    /// A Go binary: frame pointers are walked in it, as the Go runtime's own tracer walks
    /// them. Its `.debug_frame` leaves out the runtime's stack switches (systemstack, mcall,
    /// morestack), so CFI walks stop there.
    Go,
    /// No CFI at all: frame pointers are walked in this object.
    None,
}

/// One object's rows, sorted by pc, and what is needed to place it in a process.
#[derive(Clone, Debug)]
pub struct Table {
    /// Row pcs are virtual addresses minus `base`.
    pub base: u64,
    pub rows: Vec<UnwindRow>,
    pub source: Source,
    /// Executable loadable segments: (file offset, virtual address, file size).
    segments: Vec<(u64, u64, u64)>,
}

impl Table {
    /// Reads and compiles the table of the ELF file at `path`.
    pub fn from_path(path: &Path) -> Result<Table, Error> {
        let data = std::fs::read(path).map_err(|source| Error::Read {
            path: path.display().to_string(),
            source,
        })?;
        Table::from_bytes(&data, &path.display().to_string())
    }

    /// Compiles the table of an ELF image; `name` is used in errors.
    pub fn from_bytes(data: &[u8], name: &str) -> Result<Table, Error> {
        let file = object::File::parse(data).map_err(|source| Error::Parse {
            path: name.to_string(),
            source,
        })?;
        // Executable segments only: the walker only asks about pcs in code mappings.
        let segments = file
            .segments()
            .filter(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0))
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, s.address(), size)
            })
            .collect();
        let cfi_err = |source| Error::Cfi {
            path: name.to_string(),
            source,
        };
        let mut raw = Vec::new();
        let is_go = file.section_by_name(".go.buildinfo").is_some()
            || file.section_by_name(".gopclntab").is_some();
        let source = if is_go {
            Source::Go
        } else if let Some(sec) = file.section_by_name(".eh_frame")
            && sec.size() > 0
        {
            let bytes = section_bytes(&sec, name)?;
            let mut bases = BaseAddresses::default().set_eh_frame(sec.address());
            if let Some(text) = file.section_by_name(".text") {
                bases = bases.set_text(text.address());
            }
            if let Some(hdr) = file.section_by_name(".eh_frame_hdr") {
                bases = bases.set_eh_frame_hdr(hdr.address());
            }
            if let Some(got) = file.section_by_name(".got") {
                bases = bases.set_got(got.address());
            }
            let mut eh = EhFrame::new(&bytes, LittleEndian);
            eh.set_address_size(8);
            collect(&eh, &bases, &mut raw).map_err(cfi_err)?;
            Source::EhFrame
        } else if let Some(sec) = file.section_by_name(".debug_frame")
            && sec.size() > 0
        {
            let bytes = section_bytes(&sec, name)?;
            let mut df = DebugFrame::new(&bytes, LittleEndian);
            df.set_address_size(8);
            collect(&df, &BaseAddresses::default(), &mut raw).map_err(cfi_err)?;
            Source::DebugFrame
        } else {
            Source::None
        };
        let base = raw.iter().map(|r| r.0).min().unwrap_or(0);
        let top = raw.iter().map(|r| r.0).max().unwrap_or(0);
        if top - base > u32::MAX as u64 {
            return Err(Error::TooLarge {
                path: name.to_string(),
            });
        }
        Ok(Table {
            base,
            rows: compact(raw, base),
            source,
            segments,
        })
    }

    /// The bias of a mapping of this object at `start` from file offset `offset`: a pc there
    /// minus the bias is the pc in this table's rows. `None` when no loadable segment covers
    /// the offset.
    pub fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        // A mapping starts at the page below its segment's file offset.
        let &(seg_offset, vaddr, _) = self
            .segments
            .iter()
            .find(|&&(o, _, size)| o & !0xfff <= offset && offset < o + size.max(1))?;
        let mapped_vaddr = vaddr.wrapping_add(offset.wrapping_sub(seg_offset));
        Some(start.wrapping_sub(mapped_vaddr).wrapping_add(self.base))
    }

    /// Bytes the rows take in the kernel's table.
    pub fn bytes(&self) -> usize {
        self.rows.len() * std::mem::size_of::<UnwindRow>()
    }
}

fn section_bytes<'d>(sec: &object::Section<'d, '_>, name: &str) -> Result<Cow<'d, [u8]>, Error> {
    sec.uncompressed_data().map_err(|source| Error::Parse {
        path: name.to_string(),
        source,
    })
}

/// (virtual address, row) pairs: every row of every FDE, and a gap row at each FDE's end.
type RawRows = Vec<(u64, UnwindRow)>;

fn collect<'d, S>(section: &S, bases: &BaseAddresses, out: &mut RawRows) -> gimli::Result<()>
where
    S: UnwindSection<EndianSlice<'d, LittleEndian>>,
{
    let mut ctx = Box::new(UnwindContext::new());
    let mut entries = section.entries(bases);
    while let Some(entry) = entries.next()? {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        // An FDE that does not parse (e.g. a CIE pointer out of range) is skipped, not fatal.
        let Ok(fde) = partial.parse(S::cie_from_offset) else {
            continue;
        };
        if fde.len() == 0 {
            continue;
        }
        let mut table = match fde.rows(section, bases, &mut ctx) {
            Ok(t) => t,
            Err(_) => continue,
        };
        loop {
            match table.next_row() {
                Ok(Some(row)) => out.push((row.start_address(), compile_row(row, section))),
                Ok(None) => break,
                Err(_) => break,
            }
        }
        out.push((fde.end_address(), UnwindRow::default()));
    }
    Ok(())
}

/// Compiles one gimli row; what the walker cannot follow becomes a gap.
fn compile_row<'d, S>(row: &gimli::UnwindTableRow<usize>, section: &S) -> UnwindRow
where
    S: UnwindSection<EndianSlice<'d, LittleEndian>>,
{
    let mut out = UnwindRow::default();
    if let Some(RegisterRule::Undefined) = row.register(X86_64::RA) {
        out.kind = END;
        return out;
    }
    let (kind, offset) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RSP => {
            (CFA_RSP, *offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if *register == X86_64::RBP => {
            (CFA_RBP, *offset)
        }
        CfaRule::Expression(expr) => match expr.get(section).ok().and_then(|e| plt(e.0.slice())) {
            Some((offset, threshold)) => {
                out.kind = CFA_PLT;
                out.cfa_offset = offset as i16;
                out.rbp_offset = threshold as i8;
                return out;
            }
            None => return out,
        },
        _ => return out,
    };
    if let Ok(o) = i16::try_from(offset) {
        out.cfa_offset = o;
        out.kind = kind;
    } else if offset % 8 == 0
        && let Ok(o) = i16::try_from(offset / 8)
    {
        out.cfa_offset = o;
        out.kind = kind | CFA_SCALED;
    } else {
        return UnwindRow::default();
    }
    match row.register(X86_64::RBP) {
        None | Some(RegisterRule::SameValue) => {}
        Some(RegisterRule::Offset(o)) if o % 8 == 0 && i8::try_from(o / 8).is_ok() => {
            out.kind |= RBP_SAVED;
            out.rbp_offset = (o / 8) as i8;
        }
        // rbp restored some other way: the CFA is still right, but an rbp-based CFA in a
        // caller would be wrong; keep the row only when this frame's CFA does not need rbp.
        Some(_) => {
            if kind == CFA_RBP {
                return UnwindRow::default();
            }
        }
    }
    out
}

/// The PLT entries' CFA expression, `rsp + N + ((rip & 15) >= T) << 3`, as (N, T): the
/// bytes `breg7 N, breg16 0, lit15, and, litT, ge, lit3, shl, plus` (N a one-byte SLEB).
fn plt(expr: &[u8]) -> Option<(i64, u8)> {
    use gimli::constants::{
        DW_OP_and, DW_OP_breg7, DW_OP_breg16, DW_OP_ge, DW_OP_lit0, DW_OP_lit3, DW_OP_lit15,
        DW_OP_plus, DW_OP_shl,
    };
    let &[breg7, n, breg16, 0, lit15, and, lit_t, ge, lit3, shl, plus] = expr else {
        return None;
    };
    let expected = [
        (breg7, DW_OP_breg7),
        (breg16, DW_OP_breg16),
        (lit15, DW_OP_lit15),
        (and, DW_OP_and),
        (ge, DW_OP_ge),
        (lit3, DW_OP_lit3),
        (shl, DW_OP_shl),
        (plus, DW_OP_plus),
    ];
    if n >= 0x40 || expected.iter().any(|(byte, op)| *byte != op.0) {
        return None;
    }
    let t = lit_t.checked_sub(DW_OP_lit0.0).filter(|t| *t < 16)?;
    Some((n as i64, t))
}

/// Sorts rows by pc, lets a real row win over a gap at the same pc (the next function starts
/// where the last ended), and drops rows that repeat the one before.
fn compact(mut raw: RawRows, base: u64) -> Vec<UnwindRow> {
    // Gaps (kind 0 with no END) sort before real rows at the same pc; keep the last per pc.
    raw.sort_by_key(|(pc, row)| (*pc, is_real(row)));
    let mut by_pc: Vec<UnwindRow> = Vec::with_capacity(raw.len());
    for (pc, mut row) in raw {
        row.pc = (pc - base) as u32;
        match by_pc.last_mut() {
            Some(last) if last.pc == row.pc => *last = row,
            _ => by_pc.push(row),
        }
    }
    let mut out: Vec<UnwindRow> = Vec::with_capacity(by_pc.len());
    for row in by_pc {
        if !out.last().is_some_and(|last| same_rule(last, &row)) {
            out.push(row);
        }
    }
    // A leading gap says nothing the walker does not already assume.
    while out.first().is_some_and(|r| !is_real(r)) {
        out.remove(0);
    }
    out
}

fn is_real(row: &UnwindRow) -> bool {
    row.kind & 0b11 != CFA_NONE || row.kind & END != 0
}

fn same_rule(a: &UnwindRow, b: &UnwindRow) -> bool {
    (a.kind, a.cfa_offset, a.rbp_offset) == (b.kind, b.cfa_offset, b.rbp_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row that covers `vaddr` in `table`.
    fn row_at(table: &Table, vaddr: u64) -> UnwindRow {
        let rel = (vaddr - table.base) as u32;
        let i = table.rows.partition_point(|r| r.pc <= rel);
        assert!(i > 0, "no row at {vaddr:#x}");
        table.rows[i - 1]
    }

    #[test]
    fn plt_expression_is_recognised() {
        // As GNU ld emits for .plt: rsp + 8 + ((rip & 15) >= 11) << 3
        let expr = [0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
        assert_eq!(plt(&expr), Some((8, 11)));
        assert_eq!(plt(&expr[..10]), None);
    }

    #[test]
    fn rows_are_sorted_and_compact() {
        let exe = std::env::current_exe().unwrap();
        let table = Table::from_path(&exe).unwrap();
        assert_eq!(table.source, Source::EhFrame);
        assert!(table.rows.len() > 1000, "{} rows", table.rows.len());
        for w in table.rows.windows(2) {
            assert!(w[0].pc < w[1].pc, "unsorted: {:?}", w);
            assert!(!same_rule(&w[0], &w[1]), "repeated: {:?}", w);
        }
    }

    #[inline(never)]
    fn known_function(x: u64) -> u64 {
        std::hint::black_box(x).wrapping_mul(3)
    }

    #[test]
    fn a_known_function_enters_with_cfa_at_rsp_plus_8() {
        let exe = std::env::current_exe().unwrap();
        let table = Table::from_path(&exe).unwrap();
        // This test binary is position-independent: map its own address back to a vaddr
        // through /proc/self/maps.
        let addr = known_function as *const () as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (start, offset) = maps
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let range = f.next()?;
                let _perms = f.next()?;
                let offset = u64::from_str_radix(f.next()?, 16).ok()?;
                let (a, b) = range.split_once('-')?;
                let (a, b) = (
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                );
                (a <= addr && addr < b).then_some((a, offset))
            })
            .unwrap();
        let bias = table.bias(start, offset).unwrap();
        let rel = addr - bias;
        // At the entry the return address was just pushed: CFA = rsp + 8, rbp untouched.
        let row = row_at(&table, rel + table.base);
        assert_eq!((row.kind, row.cfa_offset), (CFA_RSP, 8), "{row:?}");
        assert_eq!(known_function(2), 6);
    }

    #[test]
    fn go_binaries_walk_frame_pointers() {
        // The project's Go cache server, when it has been built (`just build`).
        let go =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/read-state-cache-go");
        if !go.exists() {
            eprintln!("skipping: {} not built", go.display());
            return;
        }
        let table = Table::from_path(&go).unwrap();
        assert_eq!((table.source, table.rows.len()), (Source::Go, 0));
    }

    #[test]
    fn not_an_elf_is_a_clear_error() {
        let err = Table::from_bytes(b"not an elf file at all", "junk.bin").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`junk.bin` is not an ELF object this build can read"
        );
    }
}
