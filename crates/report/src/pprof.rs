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
use switchyard_model::{Frame, Profiles, Run, Stack};

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
    let (sample_type, period_type, period) = sample_types(&mut b, kind, profiles);
    let used = used_frames(kind, stacks, frames)?;
    let (mappings, mapping_ids) = mappings(&mut b, run, &used);
    let mut locations = Locations::new(frames, mapping_ids);
    let cpu_period = (kind == ProfileKind::OnCpu && profiles.stats.oncpu_hz > 0).then_some(period);
    let samples = samples(&mut b, &mut locations, kind, stacks, cpu_period);
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
        location: locations.locations,
        function: locations.functions,
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

/// The profile's sample types, its period's type and its sampling period.
fn sample_types(
    b: &mut Builder,
    kind: ProfileKind,
    profiles: &Profiles,
) -> (Vec<ValueType>, Option<ValueType>, i64) {
    let hz = profiles.stats.oncpu_hz;
    match kind {
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
    }
}

/// Every frame a stack of this profile refers to, checked, in frame-table order.
fn used_frames(
    kind: ProfileKind,
    stacks: &[Stack],
    frames: &[Frame],
) -> Result<BTreeSet<u32>, Error> {
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
    Ok(used)
}

/// The mappings, one per module of the `used` frames, and each module's mapping id: the
/// target's own binary first (pprof takes the first mapping for the main binary), the kernel
/// last, the others in name order.
fn mappings<'a>(
    b: &mut Builder,
    run: &'a Run,
    used: &BTreeSet<u32>,
) -> (Vec<Mapping>, HashMap<&'a str, u64>) {
    let profiles = &run.profiles;
    let mut modules: BTreeMap<&str, Vec<&Frame>> = BTreeMap::new();
    for &index in used {
        let frame = &profiles.frames[index as usize];
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
    (mappings, mapping_ids)
}

/// The profile's functions (one per name and file) and locations (one per address), each
/// made when a sample's stack first needs it.
struct Locations<'a> {
    frames: &'a [Frame],
    mapping_ids: HashMap<&'a str, u64>,
    function_ids: HashMap<(String, Option<String>), u64>,
    functions: Vec<Function>,
    location_ids: HashMap<Vec<u32>, u64>,
    locations: Vec<Location>,
}

impl<'a> Locations<'a> {
    fn new(frames: &'a [Frame], mapping_ids: HashMap<&'a str, u64>) -> Locations<'a> {
        Locations {
            frames,
            mapping_ids,
            function_ids: HashMap::new(),
            functions: Vec::new(),
            location_ids: HashMap::new(),
            locations: Vec::new(),
        }
    }

    /// The id of `frame`'s function (its name and file).
    fn function_of(&mut self, b: &mut Builder, frame: &Frame) -> u64 {
        let key = (frame.name.clone(), frame.file.clone());
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name = b.string(&frame.name);
        self.functions.push(Function {
            id,
            name,
            // Names are demangled already. A system name equal to the name would make pprof
            // demangle it again, and its fallback strips every `<…>` and `(…)`: four Rust
            // `<T as std::io::Write>::write` impls would all read `::write`.
            system_name: 0,
            filename: frame.file.as_deref().map_or(0, |f| b.string(f)),
            start_line: 0,
        });
        self.function_ids.insert(key, id);
        id
    }

    /// The locations of a stack (frame indices, root first), leaf first, as the format wants:
    /// one per address, a frame and the frames inlined into it at that address (consecutive
    /// in a stack, outer first).
    fn of_stack(&mut self, b: &mut Builder, stack: &[u32]) -> Vec<u64> {
        let frames = self.frames;
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
            .map(|group| self.location(b, group))
            .collect()
    }

    /// The id of the location of one address: `group`'s frames (outer first) as lines,
    /// innermost first.
    fn location(&mut self, b: &mut Builder, group: Vec<u32>) -> u64 {
        if let Some(&id) = self.location_ids.get(&group) {
            return id;
        }
        let frames = self.frames;
        let outer = &frames[group[0] as usize];
        let line = group
            .iter()
            .rev()
            .map(|&i| {
                let f = &frames[i as usize];
                Line {
                    function_id: self.function_of(b, f),
                    line: f.line.map_or(0, i64::from),
                }
            })
            .collect();
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            mapping_id: self
                .mapping_ids
                .get(outer.module.as_str())
                .copied()
                .unwrap_or(0),
            address: outer.addr,
            line,
            is_folded: false,
        });
        self.location_ids.insert(group, id);
        id
    }
}

/// The samples, in the run's order: each stack's value (and, on CPU, its time: the value by
/// `cpu_period`), its locations and its labels.
fn samples(
    b: &mut Builder,
    locations: &mut Locations,
    kind: ProfileKind,
    stacks: &[Stack],
    cpu_period: Option<i64>,
) -> Vec<Sample> {
    let keys = LabelKeys::new(b, kind);
    stacks
        .iter()
        .filter(|s| s.value > 0)
        .map(|stack| {
            let value = i64::try_from(stack.value).unwrap_or(i64::MAX);
            let label = keys.labels(b, kind, stack);
            Sample {
                location_id: locations.of_stack(b, &stack.frames),
                value: match cpu_period {
                    Some(period) => vec![value, value.saturating_mul(period)],
                    None => vec![value],
                },
                label,
            }
        })
        .collect()
}

/// The keys of a sample's labels, in the string table.
struct LabelKeys {
    thread: i64,
    tid: i64,
    pid: i64,
    /// The stack's label: its thread state, syscall, futex, … by the profile.
    label: i64,
    waker: i64,
}

impl LabelKeys {
    fn new(b: &mut Builder, kind: ProfileKind) -> LabelKeys {
        let (thread, tid, pid) = (b.string("thread"), b.string("tid"), b.string("pid"));
        let label = match kind {
            ProfileKind::OnCpu => b.string("label"),
            ProfileKind::OffCpu => b.string("state"),
            ProfileKind::Wakeup => b.string("state"),
            ProfileKind::Syscalls => b.string("syscall"),
            ProfileKind::Futex => b.string("futex"),
            ProfileKind::Heap => b.string("site"),
        };
        let waker = b.string("waker");
        LabelKeys {
            thread,
            tid,
            pid,
            label,
            waker,
        }
    }

    /// A stack's labels: its thread name, tid and pid, its label, its OpenTelemetry trace and
    /// span, and (wakeups) its waker.
    fn labels(&self, b: &mut Builder, kind: ProfileKind, stack: &Stack) -> Vec<Label> {
        let mut labels = vec![
            Label {
                key: self.thread,
                str: b.string(&stack.comm),
                ..Label::default()
            },
            Label {
                key: self.tid,
                num: i64::from(stack.tid),
                ..Label::default()
            },
            Label {
                key: self.pid,
                num: i64::from(stack.tgid),
                ..Label::default()
            },
        ];
        if !stack.label.is_empty() {
            labels.push(Label {
                key: self.label,
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
                key: self.waker,
                str: b.string(&stack.waker_comm),
                ..Label::default()
            });
        }
        labels
    }
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
