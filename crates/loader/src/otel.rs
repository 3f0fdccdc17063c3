//! OpenTelemetry thread context (OTEP 4947), the user side: where a binary's
//! `otel_thread_ctx_v1` lives from the thread pointer, and the kernel's span table read into
//! the run.

use std::collections::HashMap as StdHashMap;

use aya::maps::{HashMap, MapData, PerCpuArray};
use object::{Object as _, ObjectSymbol as _, SymbolKind};
use switchyard_common::{OtelSampleKey, OtelSpan, maps, otel};
use switchyard_model::raw::{Raw, RawSample};

use crate::{Error, error::map_err};

/// The TLS symbol the OTEP names.
pub const SYMBOL: &str = "otel_thread_ctx_v1";

/// Where a process's `otel_thread_ctx_v1` is, for each thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsPlace {
    /// At this offset from the thread pointer: the executable's own TLS, or a library's in
    /// the static TLS block (loaded with the program), the same offset in every thread.
    Static(i64),
    /// At `offset` in the TLS block of module `module`, found through the thread's dynamic
    /// thread vector (DTV): a library opened later (dlopen), whose block each thread
    /// allocates when it first touches it.
    Dynamic { module: u64, offset: u64 },
}

/// x86-64 dynamic relocations that say where a TLS variable is (elf.h).
const R_X86_64_DTPMOD64: u32 = 16;
const R_X86_64_TPOFF64: u32 = 18;
const R_X86_64_TLSDESC: u32 = 36;

/// Where `otel_thread_ctx_v1` is from a thread's pointer (x86-64's `fs` base) in a program
/// whose executable is `path`: `Ok(None)` when it defines none. The executable's TLS block
/// sits just below the thread pointer (TLS variant II), its size rounded up to its alignment,
/// so the variable is at `value - round_up(memsz, align)`, whatever model its code uses
/// (local-exec, initial-exec, or TLSDESC relaxed in an executable). A symbol defined in a
/// shared library is found in a running process only ([`thread_context_of`]).
pub fn thread_context(path: &std::path::Path) -> Result<Option<i64>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = object::File::parse(&*data).map_err(|e| format!("{}: {e}", path.display()))?;
    let symbols = file.dynamic_symbols().chain(file.symbols());
    let Some(symbol) = defined_variable(symbols, path)? else {
        return Ok(None);
    };
    let (memsz, align) = tls_segment(&data)
        .ok_or_else(|| format!("{} defines {SYMBOL} but has no TLS segment", path.display()))?;
    let align = align.max(1);
    let block = memsz.div_ceil(align) * align;
    Ok(Some(symbol.address() as i64 - block as i64))
}

/// `otel_thread_ctx_v1` among `symbols` when `path` defines it: an 8-byte TLS variable, or
/// an error saying what it is instead.
fn defined_variable<'d>(
    mut symbols: impl Iterator<Item = object::Symbol<'d, 'd>>,
    path: &std::path::Path,
) -> Result<Option<object::Symbol<'d, 'd>>, String> {
    let Some(symbol) = symbols.find(|s| s.name() == Ok(SYMBOL) && !s.is_undefined()) else {
        return Ok(None);
    };
    if symbol.kind() != SymbolKind::Tls {
        return Err(format!(
            "{SYMBOL} in {} is not a TLS variable",
            path.display()
        ));
    }
    if symbol.size() != 8 {
        return Err(format!(
            "{SYMBOL} in {} is {} bytes, not a pointer's 8",
            path.display(),
            symbol.size()
        ));
    }
    Ok(Some(symbol))
}

/// Where `otel_thread_ctx_v1` is in an executable read from `path` and known as `name`, and
/// the line saying so: [`thread_context`], placed.
pub fn executable_context(
    path: &std::path::Path,
    name: &std::path::Path,
) -> Result<Option<(TlsPlace, String)>, String> {
    Ok(thread_context(path)?.map(|offset| {
        (
            TlsPlace::Static(offset),
            format!("{SYMBOL} in {} (thread pointer {offset:+})", name.display()),
        )
    }))
}

/// Where `otel_thread_ctx_v1` is in running process `pid`, and a line saying where it was
/// found and how: its executable's own ([`thread_context`]), or a loaded library's, placed
/// by reading the slot the dynamic loader filled for the library's own code. That slot
/// depends on the access model the library was built with:
/// - initial-exec: a GOT slot holds the variable's offset from the thread pointer;
/// - TLS descriptors (`-mtls-dialect=gnu2`): the descriptor's argument is that offset for a
///   library in the static TLS block, or points to the (module, offset) pair of one opened
///   later;
/// - general- and local-dynamic: a GOT slot holds the library's module id, and the
///   variable is at its symbol's value in that module's block.
///
/// `Ok(None)` when nothing loaded defines it.
pub fn thread_context_of(pid: u32) -> Result<Option<(TlsPlace, String)>, String> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map_err(|e| format!("the executable of pid {pid}: {e}"))?;
    // Read through /proc: the target's own file, whatever its mount namespace, deleted or
    // replaced since it started.
    let own = std::path::PathBuf::from(format!("/proc/{pid}/exe"));
    if let Some(found) = executable_context(&own, &exe)? {
        return Ok(Some(found));
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("the mappings of pid {pid}: {e}"))?;
    // Each file mapped with code (data files and devices are not libraries): where its
    // start was mapped, in the order the loader mapped them.
    let mut code = std::collections::HashSet::new();
    let mut starts: Vec<(&str, u64)> = Vec::new();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(range), Some(perms), Some(offset), Some(path)) =
            (f.first(), f.get(1), f.get(2), f.get(5))
        else {
            continue;
        };
        if !path.starts_with('/') || f.len() > 6 {
            continue;
        }
        if perms.contains('x') {
            code.insert(*path);
        }
        let start = range
            .split('-')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok());
        if let (Some(start), true) = (start, *offset == "00000000")
            && !starts.iter().any(|(p, _)| p == path)
        {
            starts.push((path, start));
        }
    }
    // A library that cannot be read or placed is said if nothing else defines the variable.
    let mut failed = None;
    for (path, start) in starts {
        let path = std::path::Path::new(path);
        if !code.contains(path.to_str().unwrap_or_default()) || path == exe {
            continue;
        }
        // Through the target's root, as for the executable.
        let inside = format!("/proc/{pid}/root{}", path.display());
        let Ok(mut file) = std::fs::File::open(&inside) else {
            continue;
        };
        let mut magic = [0u8; 4];
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        if !regular
            || std::io::Read::read_exact(&mut file, &mut magic).is_err()
            || magic != *b"\x7fELF"
        {
            continue;
        }
        // SAFETY: a read-only private mapping of a library the target has mapped as code,
        // parsed at once; the parser checks what it reads against the file's own sizes.
        let Ok(data) = (unsafe { memmap2::Mmap::map(&file) }) else {
            continue;
        };
        match library_context(pid, path, &data, start) {
            Ok(Some(found)) => return Ok(Some(found)),
            Ok(None) => {}
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// `otel_thread_ctx_v1` as library `path` (`data`), mapped at `start` in `pid`, defines it.
fn library_context(
    pid: u32,
    path: &std::path::Path,
    data: &[u8],
    start: u64,
) -> Result<Option<(TlsPlace, String)>, String> {
    use object::{RelocationFlags, RelocationTarget};
    let Ok(file) = object::File::parse(data) else {
        return Ok(None);
    };
    // A library's variable is in its dynamic symbols: other modules reach it by name.
    let Some(symbol) = defined_variable(file.dynamic_symbols(), path)? else {
        return Ok(None);
    };
    let name = path.display();
    // The load bias: where the segment at file offset 0 went, less its address in the file.
    let first = file
        .segments()
        .map(|s| object::ObjectSegment::address(&s))
        .min()
        .unwrap_or(0);
    let bias = start.wrapping_sub(first & !0xfff);
    let ours = symbol.index();
    // A library that binds the variable to itself (protected visibility, -Bsymbolic) names
    // no symbol in its relocation, and adds the variable's offset instead.
    let is_ours = |target: Option<object::SymbolIndex>, addend: i64| {
        target == Some(ours) || (target.is_none() && addend as u64 == symbol.address())
    };
    let tls_size = tls_segment(data).map_or(0, |(memsz, _)| memsz);
    let mut module_slot = None;
    let mut desc_slot = None;
    for (at, r) in file.dynamic_relocations().into_iter().flatten() {
        let RelocationFlags::Elf { r_type } = r.flags() else {
            continue;
        };
        let target = match r.target() {
            RelocationTarget::Symbol(i) => Some(i),
            _ => None,
        };
        let slot = bias.wrapping_add(at);
        match r_type {
            // initial-exec: the offset from the thread pointer, as the loader placed it.
            R_X86_64_TPOFF64 if is_ours(target, r.addend()) => {
                let offset = read_word(pid, slot)? as i64;
                return Ok(Some((
                    TlsPlace::Static(offset),
                    format!("{SYMBOL} in {name} (initial-exec, thread pointer {offset:+})"),
                )));
            }
            // The module's id: its own (no symbol) or the variable's.
            R_X86_64_DTPMOD64 if target.is_none() || target == Some(ours) => {
                module_slot.get_or_insert(slot);
            }
            R_X86_64_TLSDESC if is_ours(target, r.addend()) => {
                desc_slot.get_or_insert(slot);
            }
            _ => {}
        }
    }
    if let Some(slot) = desc_slot {
        // [resolver, argument]: a static offset, or the address of (module, offset).
        let arg = read_word(pid, slot + 8)?;
        let as_offset = arg as i64;
        if (-(1 << 32)..0).contains(&as_offset) {
            return Ok(Some((
                TlsPlace::Static(as_offset),
                format!("{SYMBOL} in {name} (TLS descriptor, thread pointer {as_offset:+})"),
            )));
        }
        let module = read_word(pid, arg)?;
        let offset = read_word(pid, arg + 8)?;
        // A descriptor resolved lazily (older loaders, without BIND_NOW) points at its
        // relocation until first used: not a (module, offset) pair yet.
        if module == 0 || module > 1 << 20 || offset >= tls_size {
            return Err(format!(
                "{SYMBOL} in {name}: its TLS descriptor is not resolved yet (module {module}, offset {offset:#x})"
            ));
        }
        return Ok(Some((
            TlsPlace::Dynamic { module, offset },
            format!("{SYMBOL} in {name} (TLS descriptor, module {module} at {offset:#x})"),
        )));
    }
    if let Some(slot) = module_slot {
        let module = read_word(pid, slot)?;
        if module == 0 {
            return Err(format!(
                "{SYMBOL} in {name}: its module id is not filled in yet"
            ));
        }
        let offset = symbol.address();
        return Ok(Some((
            TlsPlace::Dynamic { module, offset },
            format!("{SYMBOL} in {name} (general-dynamic, module {module} at {offset:#x})"),
        )));
    }
    Err(format!(
        "{SYMBOL} in {name}: no relocation its code reaches it through"
    ))
}

/// One 8-byte word of `pid`'s memory.
fn read_word(pid: u32, at: u64) -> Result<u64, String> {
    use std::os::unix::fs::FileExt as _;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem"))
        .map_err(|e| format!("the memory of pid {pid}: {e}"))?;
    let mut b = [0u8; 8];
    mem.read_exact_at(&mut b, at)
        .map_err(|e| format!("the memory of pid {pid} at {at:#x}: {e}"))?;
    Ok(u64::from_le_bytes(b))
}

/// The PT_TLS program header's memory size and alignment (64-bit little-endian ELF).
fn tls_segment(data: &[u8]) -> Option<(u64, u64)> {
    use object::{
        elf::{FileHeader64, PT_TLS},
        read::elf::{FileHeader as _, ProgramHeader as _},
    };
    let header = FileHeader64::<object::LittleEndian>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    header
        .program_headers(endian, data)
        .ok()?
        .iter()
        .find(|p| p.p_type(endian) == PT_TLS)
        .map(|p| (p.p_memsz(endian), p.p_align(endian)))
}

/// The on-CPU samples and off-CPU time the kernel kept by span, moved in `raw` from the
/// samples with no span to samples of the same stacks carrying their trace and span ids
/// (`spans`, read at the same time, give the trace ids). With `take`, the entries are
/// removed as read (a window's).
pub fn link_samples(
    ebpf: &mut aya::Ebpf,
    take: bool,
    spans: &switchyard_model::OtelSpans,
    raw: &mut Raw,
) -> Result<(), Error> {
    let entries: Vec<(OtelSampleKey, u64)> = entries(ebpf, maps::OTEL_SAMPLES, take)?;
    let traces: StdHashMap<&str, &str> = spans
        .spans
        .iter()
        .map(|s| (s.span_id.as_str(), s.trace_id.as_str()))
        .collect();
    // The samples counted without a span, by what identifies one: (on CPU, thread, stacks,
    // label) → index. Linked samples are pushed after them, so the indexes hold.
    type Plain = (bool, u32, i32, i32, switchyard_model::Label);
    let index = |oncpu: bool, list: &[RawSample]| -> Vec<(Plain, usize)> {
        list.iter()
            .enumerate()
            .filter(|(_, s)| s.span_id.is_empty())
            .map(|(i, s)| {
                let key = (oncpu, s.tid, s.user_stack, s.kernel_stack, s.label.clone());
                (key, i)
            })
            .collect()
    };
    let plain: StdHashMap<Plain, usize> = index(true, &raw.oncpu)
        .into_iter()
        .chain(index(false, &raw.offcpu))
        .collect();
    for (k, v) in entries {
        let span_id = hex(&k.span_id);
        let Some(trace_id) = traces.get(span_id.as_str()) else {
            continue;
        };
        let oncpu = k.state == otel::ONCPU;
        let label = if oncpu {
            switchyard_model::Label::Empty
        } else {
            crate::convert::state_label(k.state, switchyard_common::tp::PREEMPT_FLAG as u32)
        };
        let samples = if oncpu {
            &mut raw.oncpu
        } else {
            &mut raw.offcpu
        };
        // The same sample, counted without its span: what is linked leaves it.
        let key = (oncpu, k.tid, k.user_stack, k.kernel_stack, label);
        let Some(plain) = plain.get(&key).and_then(|&i| samples.get_mut(i)) else {
            continue;
        };
        let v = v.min(plain.value);
        if v == 0 {
            continue;
        }
        plain.value -= v;
        let linked = RawSample {
            value: v,
            trace_id: trace_id.to_string(),
            span_id,
            ..plain.clone()
        };
        samples.push(linked);
    }
    raw.oncpu.retain(|s| s.value > 0);
    raw.offcpu.retain(|s| s.value > 0);
    Ok(())
}

/// Every entry of hash map `name`; with `take`, removed as read.
fn entries<K: aya::Pod, V: aya::Pod>(
    ebpf: &mut aya::Ebpf,
    name: &'static str,
    take: bool,
) -> Result<Vec<(K, V)>, Error> {
    let map = ebpf.map_mut(name).ok_or(Error::MissingMap(name))?;
    let mut table: HashMap<&mut MapData, K, V> = HashMap::try_from(map).map_err(map_err(name))?;
    let entries: Vec<(K, V)> = table.iter().filter_map(Result::ok).collect();
    if take {
        for (k, _) in &entries {
            let _ = table.remove(k);
        }
    }
    Ok(entries)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The spans the kernel kept, and what it counted reading records; with `take`, the spans
/// are removed as read (a window's), so the next reading counts anew.
pub fn read(
    ebpf: &mut aya::Ebpf,
    source: &str,
    take: bool,
    last_stats: &mut [u64; otel::STATS as usize],
) -> Result<switchyard_model::OtelSpans, Error> {
    let entries: Vec<([u8; 8], OtelSpan)> = entries(ebpf, maps::OTEL_SPANS, take)?;
    let mut spans: Vec<switchyard_model::OtelSpan> = entries
        .into_iter()
        .map(|(id, s)| switchyard_model::OtelSpan {
            trace_id: hex(&s.trace_id),
            span_id: hex(&id),
            tid: s.tid,
            oncpu_ns: s.oncpu_ns,
            changed_ns: s.changed_ns,
            blocked_ns: s.blocked_ns,
            runqueue_ns: s.runqueue_ns,
            samples: s.samples,
            switches: s.switches,
            first_ns: s.first_ns,
            last_ns: s.last_ns,
        })
        .collect();
    spans.sort_by(|a, b| (a.first_ns, &a.span_id).cmp(&(b.first_ns, &b.span_id)));
    let name = maps::OTEL_STATS;
    let map = ebpf.map(name).ok_or(Error::MissingMap(name))?;
    let stats: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map).map_err(map_err(name))?;
    let mut now = [0u64; otel::STATS as usize];
    for (i, slot) in now.iter_mut().enumerate() {
        *slot = stats
            .get(&(i as u32), 0)
            .map_err(map_err(name))?
            .iter()
            .sum();
    }
    // The counts since the last reading.
    let last = *last_stats;
    if take {
        *last_stats = now;
    }
    let at = |i: u32| now[i as usize].saturating_sub(last[i as usize]);
    Ok(switchyard_model::OtelSpans {
        source: source.to_string(),
        spans,
        read: at(otel::READ),
        not_valid: at(otel::NOT_VALID),
        refused: at(otel::REFUSED),
        unreadable: at(otel::UNREADABLE),
        table_full: at(otel::TABLE_FULL),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo (`requests --otel-thread-ctx`) publishes one, through the harness's writer.
    #[test]
    fn the_demos_thread_context_is_found() {
        let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/debug/switchyard-demo");
        if !demo.exists() {
            eprintln!("skipping: build the demo first (cargo build --bins)");
            return;
        }
        let offset = thread_context(&demo).unwrap().expect("otel_thread_ctx_v1");
        // Below the thread pointer, inside the executable's TLS block.
        assert!(offset < 0, "{offset}");
        assert_eq!(
            thread_context(std::path::Path::new("/bin/true")).unwrap(),
            None
        );
    }
}
