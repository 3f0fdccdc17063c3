//! pprof profiles (`profile.proto`, gzip'd), as `go tool pprof` and most profile viewers read
//! them.
//!
//! One location per sampled address (a frame and the frames inlined into it there, as lines),
//! one function per distinct name and file, one mapping per module, with the binary's full
//! path, where the target mapped it and its build ID, so `go tool pprof -disasm` works. A
//! sample's locations run leaf first, as the format wants; the thread name, tid, pid and the
//! stack's label (thread state, syscall, waker) are sample labels. An off-CPU stack's `state`
//! is S, D, R (preempted), I, … as the kernel reports it, or W: the wait for a CPU after the
//! wakeup that ended a sleep (the folded stacks' `[R after wakeup]`).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    io::Write as _,
};

use ::pprof::protos::{
    Function, Label, Line, Location, Mapping, Message, Profile, Sample, ValueType,
};
use flate2::{Compression, write::GzEncoder};
use switchyard_model::{Frame, Run};

use crate::{Error, ProfileKind, sentences::command_line};

/// The gzip'd, encoded pprof profile of one profile of the run.
pub fn pprof(run: &Run, kind: ProfileKind) -> Result<Vec<u8>, Error> {
    let bytes = pprof_profile(run, kind)?.encode_to_vec();
    let compress = |source| Error::Compress {
        profile: kind.name(),
        source,
    };
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&bytes).map_err(compress)?;
    gz.finish().map_err(compress)
}

/// The pprof profile of one profile of the run, before encoding.
pub fn pprof_profile(run: &Run, kind: ProfileKind) -> Result<Profile, Error> {
    let mut b = Builder::default();
    b.string(""); // index 0 is the empty string, by the format's rule
    let profiles = &run.profiles;
    let frames = &profiles.frames;
    let stacks = &kind.of(profiles).stacks;

    // Sample types and the sampling period.
    let hz = profiles.stats.oncpu_hz;
    let (sample_type, period_type, period) = match kind {
        ProfileKind::OnCpu if hz > 0 => {
            let cpu = b.value_type("cpu", "nanoseconds");
            (
                vec![b.value_type("samples", "count"), cpu.clone()],
                Some(cpu),
                (1_000_000_000 / hz) as i64,
            )
        }
        ProfileKind::OnCpu => (vec![b.value_type("samples", "count")], None, 0),
        ProfileKind::OffCpu => {
            let t = b.value_type("off_cpu", "nanoseconds");
            (vec![t.clone()], Some(t), 1)
        }
        ProfileKind::Wakeup => {
            let t = b.value_type("wakeup", "nanoseconds");
            (vec![t.clone()], Some(t), 1)
        }
        ProfileKind::Futex => {
            let t = b.value_type("futex_wait", "nanoseconds"); // not a frame name
            (vec![t.clone()], Some(t), 1)
        }
        ProfileKind::Heap => {
            let t = b.value_type("alloc_objects", "count");
            (vec![t.clone()], Some(t), 1)
        }
        ProfileKind::Syscalls => {
            let t = b.value_type("calls", "count");
            let every = profiles.stats.syscall_sample_every.max(1);
            (
                vec![t.clone()],
                Some(t),
                i64::try_from(every).unwrap_or(i64::MAX),
            )
        }
    };
    let scale_cpu = kind == ProfileKind::OnCpu && hz > 0;

    // Every frame a stack of this profile refers to, checked, in frame-table order.
    let mut used = BTreeSet::new();
    for (i, stack) in stacks.iter().enumerate() {
        for &index in &stack.frames {
            if index as usize >= frames.len() {
                return Err(Error::FrameOutOfRange {
                    profile: kind.name(),
                    stack: i,
                    index,
                    frames: frames.len(),
                });
            }
            used.insert(index);
        }
    }

    // Mappings: one per module; the target's own binary first (pprof takes the first mapping
    // for the main binary), the kernel last, the others in name order.
    let mut modules: BTreeMap<&str, Vec<&Frame>> = BTreeMap::new();
    for &index in &used {
        let frame = &frames[index as usize];
        modules
            .entry(frame.module.as_str())
            .or_default()
            .push(frame);
    }
    let main_binary = run
        .meta
        .command
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
        .unwrap_or_default();
    let mut ordered: Vec<(&str, &Vec<&Frame>)> = modules
        .iter()
        .filter(|(m, _)| !m.is_empty())
        .map(|(m, f)| (*m, f))
        .collect();
    ordered.sort_by_key(|(m, _)| (*m != main_binary, *m == "kernel"));
    let mut mapping_ids: HashMap<&str, u64> = HashMap::new();
    let mut mappings = Vec::new();
    for (module, in_module) in ordered {
        let id = mappings.len() as u64 + 1;
        mapping_ids.insert(module, id);
        let name = if module == "kernel" {
            "[kernel.kallsyms]"
        } else {
            module
        };
        // Where the target mapped the binary, its full path and build ID: what
        // `go tool pprof -disasm` needs to find the code of an address.
        let binary = profiles.binaries.iter().find(|x| x.module == module);
        mappings.push(Mapping {
            id,
            memory_start: binary.map_or(0, |x| x.start),
            memory_limit: binary.map_or(0, |x| x.limit),
            file_offset: binary.map_or(0, |x| x.offset),
            build_id: binary.map_or(0, |x| b.string(&x.build_id)),
            filename: b.string(binary.map_or(name, |x| x.path.as_str())),
            // Symbolised already: pprof must not look for symbols (it still reads the binary
            // for -disasm).
            has_functions: true,
            has_filenames: in_module.iter().any(|f| f.file.is_some()),
            has_line_numbers: in_module.iter().any(|f| f.line.is_some()),
            has_inline_frames: in_module.iter().any(|f| f.inlined),
        });
    }

    // Functions (per name and file) and locations (per address).
    let mut function_ids: HashMap<(String, Option<String>), u64> = HashMap::new();
    let mut functions = Vec::new();
    let mut function_of = |b: &mut Builder, frame: &'_ Frame| -> u64 {
        let key = (frame.name.clone(), frame.file.clone());
        if let Some(&id) = function_ids.get(&key) {
            return id;
        }
        let id = functions.len() as u64 + 1;
        let name = b.string(&frame.name);
        functions.push(Function {
            id,
            name,
            // Names are demangled already. A system name equal to the name would make pprof
            // demangle it again, and its fallback strips every `<…>` and `(…)`: four Rust
            // `<T as std::io::Write>::write` impls would all read `::write`.
            system_name: 0,
            filename: frame.file.as_deref().map_or(0, |f| b.string(f)),
            start_line: 0,
        });
        function_ids.insert(key, id);
        id
    };
    // One location per address: a frame and the frames inlined into it at that address
    // (consecutive in a stack, outer first), as lines, innermost first.
    let mut location_ids: HashMap<Vec<u32>, u64> = HashMap::new();
    let mut locations = Vec::new();
    let mut stack_locations = |b: &mut Builder, stack: &[u32]| -> Vec<u64> {
        let mut groups: Vec<Vec<u32>> = Vec::new();
        for &index in stack {
            let frame = &frames[index as usize];
            match groups.last_mut() {
                Some(g)
                    if frame.inlined
                        && frame.addr != 0
                        && frames[g[0] as usize].addr == frame.addr =>
                {
                    g.push(index)
                }
                _ => groups.push(vec![index]),
            }
        }
        groups
            .into_iter()
            .rev()
            .map(|group| {
                if let Some(&id) = location_ids.get(&group) {
                    return id;
                }
                let outer = &frames[group[0] as usize];
                let line = group
                    .iter()
                    .rev()
                    .map(|&i| {
                        let f = &frames[i as usize];
                        Line {
                            function_id: function_of(b, f),
                            line: f.line.map_or(0, i64::from),
                        }
                    })
                    .collect();
                let id = locations.len() as u64 + 1;
                locations.push(Location {
                    id,
                    mapping_id: mapping_ids.get(outer.module.as_str()).copied().unwrap_or(0),
                    address: outer.addr,
                    line,
                    is_folded: false,
                });
                location_ids.insert(group, id);
                id
            })
            .collect()
    };

    // Samples, in the run's order.
    let (thread, tid, pid) = (b.string("thread"), b.string("tid"), b.string("pid"));
    let label_key = match kind {
        ProfileKind::OnCpu => b.string("label"),
        ProfileKind::OffCpu => b.string("state"),
        ProfileKind::Wakeup => b.string("state"),
        ProfileKind::Syscalls => b.string("syscall"),
        ProfileKind::Futex => b.string("futex"),
        ProfileKind::Heap => b.string("site"),
    };
    let waker = b.string("waker");
    let mut samples = Vec::new();
    for stack in stacks.iter().filter(|s| s.value > 0) {
        let value = i64::try_from(stack.value).unwrap_or(i64::MAX);
        let mut labels = vec![
            Label {
                key: thread,
                str: b.string(&stack.comm),
                ..Label::default()
            },
            Label {
                key: tid,
                num: i64::from(stack.tid),
                ..Label::default()
            },
            Label {
                key: pid,
                num: i64::from(stack.tgid),
                ..Label::default()
            },
        ];
        if !stack.label.is_empty() {
            labels.push(Label {
                key: label_key,
                str: b.string(stack.label.as_str()),
                ..Label::default()
            });
        }
        // OpenTelemetry's trace and span, as the profiles a tracer links to its traces
        // carry them (trace_id, span_id: W3C hex).
        if !stack.span_id.is_empty() {
            for (key, value) in [("trace_id", &stack.trace_id), ("span_id", &stack.span_id)] {
                labels.push(Label {
                    key: b.string(key),
                    str: b.string(value),
                    ..Label::default()
                });
            }
        }
        if kind == ProfileKind::Wakeup && !stack.waker_comm.is_empty() {
            labels.push(Label {
                key: waker,
                str: b.string(&stack.waker_comm),
                ..Label::default()
            });
        }
        samples.push(Sample {
            location_id: stack_locations(&mut b, &stack.frames),
            value: if scale_cpu {
                vec![value, value.saturating_mul(period)]
            } else {
                vec![value]
            },
            label: labels,
        });
    }

    let comment = vec![b.string(&format!(
        "switchyard {}: {}",
        kind.name(),
        command_line(&run.meta.command)
    ))];
    let default_sample_type = sample_type.last().map_or(0, |t| t.ty);
    Ok(Profile {
        sample_type,
        sample: samples,
        mapping: mappings,
        location: locations,
        function: functions,
        string_table: b.strings,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: i64::try_from(run.meta.start_wall_ns).unwrap_or(0),
        duration_nanos: i64::try_from(run.meta.duration_ns()).unwrap_or(i64::MAX),
        period_type,
        period,
        comment,
        default_sample_type,
    })
}

/// The profile's string table, interned.
#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    index: HashMap<String, i64>,
}

impl Builder {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> ValueType {
        ValueType {
            ty: self.string(ty),
            unit: self.string(unit),
        }
    }
}
