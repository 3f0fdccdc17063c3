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

/// Where `otel_thread_ctx_v1` is from a thread's pointer (x86-64's `fs` base) in a program
/// whose executable is `path`: `Ok(None)` when it defines none. The executable's TLS block
/// sits just below the thread pointer (TLS variant II), its size rounded up to its alignment,
/// so the variable is at `value - round_up(memsz, align)`, whatever model its code uses
/// (local-exec, initial-exec, or TLSDESC relaxed in an executable). A symbol defined in a
/// shared library is not found here: its block's place is the dynamic loader's choice.
pub fn thread_context(path: &std::path::Path) -> Result<Option<i64>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = object::File::parse(&*data).map_err(|e| format!("{}: {e}", path.display()))?;
    let symbol = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.name() == Ok(SYMBOL) && !s.is_undefined());
    let Some(symbol) = symbol else {
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
    let (memsz, align) = tls_segment(&data)
        .ok_or_else(|| format!("{} defines {SYMBOL} but has no TLS segment", path.display()))?;
    let align = align.max(1);
    let block = memsz.div_ceil(align) * align;
    Ok(Some(symbol.address() as i64 - block as i64))
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
    type Plain = (bool, u32, i32, i32, String);
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
            String::new()
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
