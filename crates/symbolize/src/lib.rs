//! Turns the kernel side's stack ids into symbolised stacks, once, at the end of a recording.
//!
//! User addresses are resolved through snapshots of the targets' memory maps taken while they
//! ran ([`Maps`]), so symbolisation works after the target has exited: each address becomes a
//! (file, file offset) pair and blazesym reads the ELF symbols and DWARF (with inlined frames)
//! of that file. Kernel addresses go through kallsyms. Addresses nothing covers become
//! `[unknown]` frames and are counted, not hidden.
//!
//! An address in a file whose symbols do not cover it (a static function of a binary stripped
//! to `.dynsym`, with no detached debug file under /usr/lib/debug) is named `[module+offset]`,
//! the module being the name the process was started by (see [`Maps::module`]).

mod maps;
mod perfmap;
mod python;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
};

use blazesym::symbolize::{
    Input, Sym, Symbolized,
    source::{Elf, Kernel, Source},
};
pub use maps::{Mapping, Maps, parse as parse_maps};
pub use perfmap::JVM_INTERPRETER;
pub use switchyard_model::raw::{Raw, RawSample, RawWaker};
use switchyard_model::{
    Binary, Frame, FrameKind, Label, Profile, Profiles, Stack, StackQuality, is_thread_start,
};

pub use blazesym::symbolize::Symbolizer;

/// The module of a JIT-compiled BPF program's frames.
pub const BPF_MODULE: &str = "[bpf]";

/// Interns frames and resolves addresses, caching per (file, offset) and kernel address.
struct Resolver<'a> {
    maps: &'a Maps,
    frames: Vec<Frame>,
    index: HashMap<Frame, u32>,
    /// (tgid, address) → frame indices, root first (inlined frames expanded).
    user_cache: HashMap<(u32, u64), Vec<u32>>,
    kernel_cache: HashMap<u64, Vec<u32>>,
    /// User stacks were walked by CFI, not frame pointers.
    cfi: bool,
    /// The binaries named, by module, with the first mapping seen.
    binaries: BTreeMap<String, Binary>,
}

impl<'a> Resolver<'a> {
    fn new(maps: &'a Maps, cfi: bool) -> Self {
        Resolver {
            maps,
            cfi,
            frames: Vec::new(),
            index: HashMap::new(),
            user_cache: HashMap::new(),
            kernel_cache: HashMap::new(),
            binaries: BTreeMap::new(),
        }
    }

    fn intern(&mut self, frame: Frame) -> u32 {
        if let Some(&i) = self.index.get(&frame) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.index.insert(frame.clone(), i);
        self.frames.push(frame);
        i
    }

    fn pseudo(&mut self, name: &str) -> u32 {
        self.intern(Frame {
            name: name.to_string(),
            module: String::new(),
            file: None,
            line: None,
            kind: FrameKind::Unknown,
            inlined: false,
            addr: 0,
        })
    }

    /// Resolves every user address of `raw` in one batch per file, and every kernel address
    /// in one batch, filling the caches.
    fn prefetch(&mut self, symbolizer: &Symbolizer, raw: &Raw) {
        let pending = self.pending(raw);
        for (path, items) in &pending.user {
            self.resolve_file(symbolizer, path, items);
        }
        self.resolve_jit(&pending.unmapped);
        self.resolve_kernel(symbolizer, &pending.kernel);
    }

    /// Every address of `raw`'s stacks (its samples' and their wakers'), each once, sorted by
    /// how it is resolved; switchyard's own programs are named on the way.
    fn pending(&mut self, raw: &Raw) -> Pending {
        let mut pending = Pending::default();
        for s in raw.samples() {
            let mut stacks = vec![
                (s.tgid, s.user_stack, false),
                (s.tgid, s.kernel_stack, true),
            ];
            if let Some(w) = &s.waker {
                stacks.push((w.tgid, w.user_stack, false));
                stacks.push((w.tgid, w.kernel_stack, true));
            }
            for (tgid, id, is_kernel) in stacks {
                if is_kernel {
                    let Some(ips) = raw.stacks.get(&id) else {
                        continue;
                    };
                    for ip in call_sites(ips) {
                        self.add_kernel(&mut pending, ip);
                    }
                } else {
                    let Some(ips) = raw.user_stacks.get(&id) else {
                        continue;
                    };
                    for ip in call_sites(self.walkable(raw, tgid, id, python::split(ips).0)) {
                        pending.add_user(self.maps, tgid, ip);
                    }
                }
            }
        }
        pending
    }

    /// Adds the kernel address `ip` to `pending`, once; one in switchyard's own programs is
    /// named here, as perf names them.
    fn add_kernel(&mut self, pending: &mut Pending, ip: u64) {
        if !pending.seen_kernel.insert(ip) {
            return;
        }
        match self.maps.bpf_program(ip) {
            Some(name) => {
                let f = self.intern(Frame {
                    name: name.to_string(),
                    module: BPF_MODULE.into(),
                    file: None,
                    line: None,
                    kind: FrameKind::Kernel,
                    inlined: false,
                    addr: ip,
                });
                self.kernel_cache.insert(ip, vec![f]);
            }
            None => pending.kernel.push(ip),
        }
    }

    /// Names the addresses `items` (tgid, address, file offset) of the file `path` in one
    /// batch: by its symbols, else as `[module+offset]`.
    fn resolve_file(&mut self, symbolizer: &Symbolizer, path: &Path, items: &[(u32, u64, u64)]) {
        if is_special(path) {
            // `[uprobes]` (a return probe's trampoline stands in for a return address)
            // and `[vdso]`: named for what they are.
            let f = self.pseudo(&path.to_string_lossy());
            for &(tgid, ip, _) in items {
                self.user_cache.insert((tgid, ip), vec![f]);
            }
            return;
        }
        let offsets: Vec<u64> = items.iter().map(|&(_, _, o)| o).collect();
        if let Some(&(tgid, ip, _)) = items.first() {
            self.add_binary(path, tgid, ip);
        }
        let mut elf = Elf::new(path);
        elf.debug_syms = true;
        let results = symbolizer
            .symbolize(&Source::Elf(elf), Input::FileOffset(&offsets))
            .unwrap_or_default();
        for (i, &(tgid, ip, offset)) in items.iter().enumerate() {
            // Named per process: one file may be one program's `redis-server` and another's
            // `redis-check-rdb`.
            let module = self.maps.module(tgid, path);
            let frames = match results.get(i) {
                Some(Symbolized::Sym(sym)) => self.symbol_frames(sym, &module, ip),
                _ => {
                    vec![self.intern(Frame {
                        name: format!("[{module}+{offset:#x}]"),
                        module: module.clone(),
                        file: None,
                        line: None,
                        kind: FrameKind::Unknown,
                        inlined: false,
                        addr: ip,
                    })]
                }
            };
            self.user_cache.insert((tgid, ip), frames);
        }
    }

    /// Notes the binary `path` under its module, as process `tgid` mapped it at `ip`, unless
    /// a binary of that module was noted already.
    fn add_binary(&mut self, path: &Path, tgid: u32, ip: u64) {
        let Some(m) = self.maps.mapping(tgid, ip) else {
            return;
        };
        let module = self.maps.module(tgid, path);
        self.binaries
            .entry(module.clone())
            .or_insert_with(|| Binary {
                module: module.clone(),
                path: path.display().to_string(),
                start: m.start,
                limit: m.end,
                offset: m.offset,
                build_id: build_id(path).unwrap_or_default(),
            });
    }

    /// The frames of a symbol found at `ip` in `module`: the function, then the functions
    /// inlined into it.
    fn symbol_frames(&mut self, sym: &Sym<'_>, module: &str, ip: u64) -> Vec<u32> {
        let (file, line) = code(sym.code_info.as_deref());
        let mut out = vec![Frame {
            name: sym.name.to_string(),
            module: module.to_string(),
            file,
            line,
            kind: FrameKind::User,
            inlined: false,
            addr: ip,
        }];
        for f in sym.inlined.iter() {
            let (file, line) = code(f.code_info.as_ref());
            out.push(Frame {
                name: f.name.to_string(),
                module: module.to_string(),
                file,
                line,
                kind: FrameKind::User,
                inlined: true,
                addr: ip,
            });
        }
        out.into_iter().map(|f| self.intern(f)).collect()
    }

    /// Names anonymous code: JIT-compiled functions by the process's perf map, the rest
    /// `[unknown]`.
    fn resolve_jit(&mut self, unmapped: &[(u32, u64)]) {
        let mut jit: HashMap<u32, Option<perfmap::PerfMap>> = HashMap::new();
        for &(tgid, ip) in unmapped {
            let name = jit
                .entry(tgid)
                .or_insert_with(|| match self.maps.perf_map(tgid) {
                    Some(text) => Some(perfmap::PerfMap::parse(text)),
                    None => perfmap::PerfMap::load(tgid),
                })
                .as_ref()
                .and_then(|m| m.find(ip))
                .map(str::to_string);
            let f = match name {
                Some(name) => self.intern(Frame {
                    name,
                    module: "[jit]".into(),
                    file: None,
                    line: None,
                    kind: FrameKind::Jit,
                    inlined: false,
                    addr: ip,
                }),
                None => self.pseudo("[unknown]"),
            };
            self.user_cache.insert((tgid, ip), vec![f]);
        }
    }

    /// Names the kernel addresses `kernel` in one batch, through kallsyms.
    fn resolve_kernel(&mut self, symbolizer: &Symbolizer, kernel: &[u64]) {
        if kernel.is_empty() {
            return;
        }
        let src = Source::Kernel(Kernel::default());
        let results = symbolizer
            .symbolize(&src, Input::AbsAddr(kernel))
            .unwrap_or_default();
        for (i, &ip) in kernel.iter().enumerate() {
            let frames = match results.get(i) {
                Some(Symbolized::Sym(sym)) => vec![self.intern(Frame {
                    name: sym.name.to_string(),
                    module: "kernel".into(),
                    file: None,
                    line: None,
                    kind: FrameKind::Kernel,
                    inlined: false,
                    addr: ip,
                })],
                _ => {
                    vec![self.intern(Frame {
                        name: "[unknown]".into(),
                        module: "kernel".into(),
                        file: None,
                        line: None,
                        kind: FrameKind::Unknown,
                        inlined: false,
                        addr: 0,
                    })]
                }
            };
            self.kernel_cache.insert(ip, frames);
        }
    }

    /// The part of a user stack (leaf first) that a frame-pointer walk can vouch for: it ends
    /// before the first address outside the process's code. Code without frame pointers
    /// (glibc's thread start, for one) lets the walk run on into stack data, and everything
    /// past that point is noise, not callers.
    ///
    /// A CFI walk that reached the outermost frame vouches for all of it, frames in anonymous
    /// code included (JIT, the uprobe trampoline). One that ended early may have fallen back
    /// to frame pointers in code without them, and one of a process whose maps were never
    /// seen (a waker outside the targets) cannot be named anyway: both are cut as above.
    fn walkable<'s>(&self, raw: &Raw, tgid: u32, id: i32, ips: &'s [u64]) -> &'s [u64] {
        if self.cfi && raw.complete_user_stacks.contains(&id) && self.maps.has(tgid) {
            return ips;
        }
        match ips
            .iter()
            .skip(1)
            .position(|&ip| self.maps.find(tgid, ip.saturating_sub(1)).is_none())
        {
            Some(i) => &ips[..i + 1],
            None => ips,
        }
    }

    /// The frame of a Python frame word of process `tgid`.
    fn python_frame(&mut self, raw: &Raw, tgid: u32, word: u64) -> u32 {
        let (code, lasti, _) = python::decode(word);
        let info = raw.python_codes.get(&(tgid, code));
        let (name, file, line) = python::label(info, lasti);
        self.intern(Frame {
            name,
            module: "[python]".into(),
            file,
            line,
            kind: if info.is_some() {
                FrameKind::Python
            } else {
                FrameKind::Unknown
            },
            inlined: false,
            addr: code,
        })
    }

    /// Frames of one task's user + kernel stacks, root first (user, then kernel).
    fn stack(&mut self, raw: &Raw, tgid: u32, user: i32, kernel: i32) -> Vec<u32> {
        let mut out = Vec::new();
        match raw.user_stacks.get(&user) {
            Some(ips) => {
                let (native, py) = python::split(ips);
                let sites: Vec<u64> = call_sites(self.walkable(raw, tgid, user, native)).collect();
                for ip in sites.iter().rev() {
                    if let Some(f) = self.user_cache.get(&(tgid, *ip)) {
                        out.extend_from_slice(f);
                    }
                }
                if !py.is_empty() {
                    let py: Vec<(u32, bool)> = py
                        .iter()
                        .map(|&word| (self.python_frame(raw, tgid, word), python::decode(word).2))
                        .collect();
                    out = python::merge(&out, &py, |f| {
                        let f = &self.frames[f as usize];
                        !f.inlined && f.name == python::EVAL_FRAME
                    });
                }
            }
            None if user == switchyard_model::raw::USER_STACK_OPEN_AT_STOP => {
                out.push(self.pseudo(switchyard_model::raw::OPEN_AT_STOP_FRAME))
            }
            None => out.push(self.pseudo("[user stack lost]")),
        }
        if let Some(ips) = raw.stacks.get(&kernel) {
            let sites: Vec<u64> = call_sites(ips).collect();
            for ip in sites.iter().rev() {
                if let Some(f) = self.kernel_cache.get(ip) {
                    out.extend_from_slice(f);
                }
            }
        }
        out
    }
}

/// The addresses of a recording's stacks still to be resolved, each once, by how they are.
#[derive(Default)]
struct Pending {
    /// By file: (tgid, address, file offset).
    user: BTreeMap<PathBuf, Vec<(u32, u64, u64)>>,
    /// User addresses no file maps: (tgid, address).
    unmapped: Vec<(u32, u64)>,
    /// Kernel addresses outside switchyard's own programs.
    kernel: Vec<u64>,
    seen_user: HashSet<(u32, u64)>,
    seen_kernel: HashSet<u64>,
}

impl Pending {
    /// Adds the user address `ip` of process `tgid` to its file's, or to the unmapped, once.
    fn add_user(&mut self, maps: &Maps, tgid: u32, ip: u64) {
        if !self.seen_user.insert((tgid, ip)) {
            return;
        }
        match maps.find(tgid, ip) {
            Some((path, offset)) => self
                .user
                .entry(path.to_path_buf())
                .or_default()
                .push((tgid, ip, offset)),
            // A return address into the uprobe trampoline is the first byte of its page: the
            // call site (one byte before) is outside it.
            None => match maps.find(tgid, ip + 1) {
                Some((path, offset)) if is_special(path) => self
                    .user
                    .entry(path.to_path_buf())
                    .or_default()
                    .push((tgid, ip, offset)),
                _ => self.unmapped.push((tgid, ip)),
            },
        }
    }
}

/// The addresses to symbolise for a stack, leaf first: the leaf's own address, and for every
/// caller its return address minus one, so the call instruction (not the one after it, which
/// may belong to another line or inlined function) is what gets named.
fn call_sites(ips: &[u64]) -> impl Iterator<Item = u64> + '_ {
    ips.iter()
        .enumerate()
        .map(|(i, &ip)| if i == 0 { ip } else { ip.saturating_sub(1) })
}

fn code(info: Option<&blazesym::symbolize::CodeInfo<'_>>) -> (Option<String>, Option<u32>) {
    match info {
        Some(c) => (Some(c.to_path().display().to_string()), c.line),
        None => (None, None),
    }
}

/// A symbolizer as [`symbolize_with`] wants it: code info, inlined functions, demangled names.
/// It keeps every file it parsed; a continuous recording's windows share one.
pub fn symbolizer() -> Symbolizer {
    Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        .build()
}

/// Symbolises every stack of `raw`. `comms` names threads by tid (from the thread table).
pub fn symbolize(raw: &Raw, maps: &Maps, comms: &HashMap<u32, String>) -> Profiles {
    symbolize_with(&symbolizer(), raw, maps, comms)
}

/// [`symbolize`] with a symbolizer that outlives the call (its parsed files are reused).
pub fn symbolize_with(
    symbolizer: &Symbolizer,
    raw: &Raw,
    maps: &Maps,
    comms: &HashMap<u32, String>,
) -> Profiles {
    let mut r = Resolver::new(maps, raw.stats.unwind == "cfi");
    r.prefetch(symbolizer, raw);
    let mut quality = Vec::new();
    let mut build = |samples: &[RawSample], name: &str, unit: &str| -> Profile {
        // How much of the profile's user stacks reach the thread's start: the kernel side's
        // walk reached the outermost frame, or (frame-pointer walks, which cannot tell) the
        // outermost frame is one that starts a thread (`main`, `_start`, `clone3`, …).
        let mut q = StackQuality {
            profile: name.to_string(),
            complete: 0,
            total: 0,
        };
        let mut stacks: Vec<Stack> = samples
            .iter()
            .map(|s| {
                let frames = r.stack(raw, s.tgid, s.user_stack, s.kernel_stack);
                q.total += s.value;
                if (raw.complete_user_stacks.contains(&s.user_stack)
                    || frames.first().is_some_and(|&f| {
                        let f = &r.frames[f as usize];
                        f.kind == FrameKind::User && is_thread_start(&f.name)
                    }))
                    // A user frame nothing names hides where the stack came from.
                    && !frames.iter().any(|&f| {
                        let f = &r.frames[f as usize];
                        f.name == "[unknown]" && f.module != "kernel"
                    })
                {
                    q.complete += s.value;
                }
                let waker_tid = s.waker.as_ref().map_or(0, |w| w.tid);
                let (waker_frames, waker_comm, waker_tid) = match &s.waker {
                    Some(w) => {
                        let kernel = r.stack(raw, w.tgid, -1, w.kernel_stack);
                        if kernel
                            .iter()
                            .any(|&f| is_interrupt_entry(&r.frames[f as usize].name))
                        {
                            // The waker task was only interrupted; the interrupt woke us.
                            let kernel = kernel
                                .into_iter()
                                .filter(|&f| r.frames[f as usize].kind != FrameKind::Unknown)
                                .collect();
                            (kernel, "[interrupt]".to_string(), 0)
                        } else {
                            (
                                r.stack(raw, w.tgid, w.user_stack, w.kernel_stack),
                                w.comm.clone(),
                                waker_tid,
                            )
                        }
                    }
                    None => (Vec::new(), String::new(), 0),
                };
                Stack {
                    tgid: s.tgid,
                    tid: s.tid,
                    comm: comms
                        .get(&s.tid)
                        .cloned()
                        .unwrap_or_else(|| format!("[tid {}]", s.tid)),
                    label: s.label.clone(),
                    frames,
                    waker_frames,
                    waker_comm,
                    waker_tid,
                    value: s.value,
                    trace_id: s.trace_id.clone(),
                    span_id: s.span_id.clone(),
                }
            })
            .collect();
        merge_and_sort(&mut stacks);
        if !samples.is_empty() {
            quality.push(q);
        }
        Profile {
            unit: unit.to_string(),
            stacks,
        }
    };
    let oncpu = build(&raw.oncpu, "oncpu", "samples");
    let offcpu = build(&raw.offcpu, "offcpu", "ns");
    let wakeup = build(&raw.wakeup, "wakeup", "ns");
    let syscalls = build(&raw.syscalls, "syscalls", "calls");
    let futex = build(&raw.futex, "futex", "ns");
    let held = build(&raw.held, "held", "ns");
    // Read by explain, not shown as a profile: no completeness line of its own.
    quality.retain(|q| q.profile != "held");
    let mut stats = raw.stats.clone();
    // What the user sees: unknown frames across the stacks shown, not addresses looked up.
    let unknown = |f: &u32| {
        let f = &r.frames[*f as usize];
        f.kind == FrameKind::Unknown && !f.name.ends_with("stack lost]")
    };
    stats.unknown_frames = [&oncpu, &offcpu, &wakeup, &syscalls, &futex]
        .iter()
        .flat_map(|p| &p.stacks)
        .map(|s| {
            s.frames
                .iter()
                .chain(&s.waker_frames)
                .filter(|f| unknown(f))
                .count() as u64
        })
        .sum();
    stats.quality = quality;
    let timeline_stacks = raw
        .timeline
        .iter()
        .map(|s| r.stack(raw, s.tgid, s.user_stack, s.kernel_stack))
        .collect();
    let span_stacks = raw
        .span_stacks
        .iter()
        .map(|s| r.stack(raw, s.tgid, s.user_stack, s.kernel_stack))
        .collect();
    Profiles {
        timeline_stacks,
        span_stacks,
        heap: Profile::default(),
        frames: r.frames,
        oncpu,
        offcpu,
        wakeup,
        held,
        syscalls,
        futex,
        stats,
        binaries: r.binaries.into_values().collect(),
    }
}

/// The GNU build ID of an ELF file, hex.
fn build_id(path: &Path) -> Option<String> {
    use object::Object as _;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

/// Stacks that symbolise alike (e.g. two ids differing only in an unknown frame) merge; then
/// sorted by value, descending, then by thread and frames, for deterministic output.
fn merge_and_sort(stacks: &mut Vec<Stack>) {
    /// (tgid, tid, comm, label, frames, waker frames, waker comm, waker tid, trace and span)
    type Key = (
        u32,
        u32,
        String,
        Label,
        Vec<u32>,
        Vec<u32>,
        String,
        u32,
        (String, String),
    );
    let mut merged: BTreeMap<Key, u64> = BTreeMap::new();
    for s in stacks.drain(..) {
        *merged
            .entry((
                s.tgid,
                s.tid,
                s.comm,
                s.label,
                s.frames,
                s.waker_frames,
                s.waker_comm,
                s.waker_tid,
                (s.trace_id, s.span_id),
            ))
            .or_default() += s.value;
    }
    stacks.extend(merged.into_iter().map(
        |((tgid, tid, comm, label, frames, waker_frames, waker_comm, waker_tid, span), value)| {
            Stack {
                tgid,
                tid,
                comm,
                label,
                frames,
                waker_frames,
                waker_comm,
                waker_tid,
                value,
                trace_id: span.0,
                span_id: span.1,
            }
        },
    ));
    stacks.sort_by_key(|s| std::cmp::Reverse(s.value));
}

/// Kernel functions that only appear on a stack running in interrupt context.
fn is_interrupt_entry(name: &str) -> bool {
    name.starts_with("asm_sysvec_")
        || name.starts_with("asm_common_interrupt")
        || name.starts_with("__sysvec_")
        || name.starts_with("sysvec_")
        || name == "handle_softirqs"
        || name == "__do_softirq"
        || name == "irq_exit_rcu"
        || name == "hrtimer_interrupt"
}

/// True for the kernel's code pages a user stack may pass through, named by their path.
pub(crate) fn is_special(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|p| p == switchyard_runtimes::kernel::UPROBES || p == "[vdso]")
}

/// True for a path blazesym can open (not `[vdso]`, `[heap]`, anonymous, or deleted).
pub(crate) fn is_file(path: &Path) -> bool {
    path.is_absolute()
}

/// The data symbol (a static or global variable: `STT_OBJECT`) that holds address `addr` of
/// process `tgid`, such as a static mutex a futex wait names, with its offset when it is not
/// the symbol's start ("LOCK", "TABLE+0x40"). Found through the executable mappings seen: each
/// file's load bias comes from its code segment, and the same bias places its data.
pub fn data_symbol(maps: &Maps, tgid: u32, addr: u64) -> Option<String> {
    use object::{Object as _, ObjectSegment as _, ObjectSymbol as _, SymbolKind};
    let mut tried = std::collections::HashSet::new();
    for m in maps.mappings(tgid) {
        if !is_file(&m.path) || !tried.insert(m.path.clone()) {
            continue;
        }
        let Ok(data) = std::fs::read(&m.path) else {
            continue;
        };
        let Ok(file) = object::File::parse(&*data) else {
            continue;
        };
        // The load segment holding the mapping's file offset gives the bias (a mapping starts
        // at its segment's page).
        const PAGE: u64 = 0xfff;
        let executable = |s: &object::Segment| matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0);
        let Some(bias) = file.segments().filter(executable).find_map(|s| {
            let (off, size) = s.file_range();
            let (page_off, page_vaddr) = (off & !PAGE, s.address() & !PAGE);
            (page_off <= m.offset && m.offset < off + size)
                .then(|| m.start.wrapping_sub(m.offset - page_off + page_vaddr))
        }) else {
            continue;
        };
        let vaddr = addr.wrapping_sub(bias);
        let found = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Data && s.size() > 0)
            .find(|s| s.address() <= vaddr && vaddr < s.address() + s.size());
        if let Some(s) = found
            && let Ok(name) = s.name()
        {
            let name = format!("{:#}", rustc_demangle::demangle(name));
            return Some(match vaddr - s.address() {
                0 => name,
                off => format!("{name}+{off:#x}"),
            });
        }
    }
    None
}

#[cfg(test)]
mod data_symbol_tests {
    use super::*;

    #[unsafe(no_mangle)]
    static SWITCHYARD_TEST_LOCK: [u64; 8] = [7; 8];

    #[test]
    fn a_static_is_named_by_its_address_in_this_process() {
        let pid = std::process::id();
        let mut maps = Maps::default();
        maps.refresh(pid).expect("reading /proc/self/maps");
        let base = std::hint::black_box(&SWITCHYARD_TEST_LOCK) as *const _ as u64;
        assert_eq!(
            data_symbol(&maps, pid, base).as_deref(),
            Some("SWITCHYARD_TEST_LOCK")
        );
        assert_eq!(
            data_symbol(&maps, pid, base + 16).as_deref(),
            Some("SWITCHYARD_TEST_LOCK+0x10")
        );
        assert_eq!(data_symbol(&maps, pid, 8), None);
    }
}

#[cfg(test)]
mod exe_name_tests {
    use std::{io::BufRead as _, os::unix::process::CommandExt as _, process::Command};

    use super::*;

    /// A program with an exported function (in `.dynsym`) and a static one (no symbol once
    /// stripped), printing both addresses and waiting, as Debian's redis is built.
    const PROGRAM: &str = r#"
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline)) static int hidden(int x) { return x * 3 + 1; }
__attribute__((noinline)) int visible(int x) { return hidden(x) + 2; }
int main(void) {
    printf("%lx %lx\n", (unsigned long)hidden, (unsigned long)visible);
    fflush(stdout);
    pause();
    return visible(1);
}
"#;

    /// Starts `dir/name` as `name` (found on PATH), reads the two addresses it prints,
    /// snapshots its maps and symbolises one stack at each.
    #[track_caller]
    fn record(dir: &Path, name: &str) -> (Frame, Frame) {
        let mut child = Command::new(dir.join(name))
            .arg0(name)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("reading the addresses");
        let mut maps = Maps::default();
        maps.refresh(child.id()).expect("the program's maps");
        let _ = child.kill();
        let _ = child.wait();
        let ips: Vec<u64> = line
            .split_whitespace()
            .map(|a| u64::from_str_radix(a, 16).expect("a hex address"))
            .collect();
        let sample = |id| RawSample {
            tgid: child.id(),
            tid: child.id(),
            user_stack: id,
            kernel_stack: -1,
            value: 1,
            ..RawSample::default()
        };
        let raw = Raw {
            user_stacks: HashMap::from([(1, vec![ips[0]]), (2, vec![ips[1]])]),
            oncpu: vec![sample(1), sample(2)],
            ..Raw::default()
        };
        let p = symbolize(&raw, &maps, &HashMap::new());
        let frame = |ip: u64| {
            p.oncpu
                .stacks
                .iter()
                .flat_map(|s| &s.frames)
                .map(|&f| p.frames[f as usize].clone())
                .find(|f| f.addr == ip)
                .unwrap_or_else(|| panic!("no frame at {ip:#x}: {:?}", p.frames))
        };
        (frame(ips[0]), frame(ips[1]))
    }

    #[test]
    fn a_program_started_through_a_link_is_named_as_started() {
        let dir = std::env::temp_dir().join(format!(
            "switchyard-symbolize-exe-name-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a temp dir");
        std::fs::write(dir.join("program.c"), PROGRAM).expect("writing program.c");
        // Linked with -s: the static function keeps no symbol, the exported one stays in
        // .dynsym (-rdynamic).
        let out = Command::new("cc")
            .args(["-O1", "-rdynamic", "-s", "-o"])
            .arg(dir.join("check-tool"))
            .arg(dir.join("program.c"))
            .output()
            .expect("running cc (the Rust toolchain's linker)");
        assert!(
            out.status.success(),
            "cc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Debian's redis-server: a symbolic link the kernel resolves, so the maps name the
        // other file.
        std::os::unix::fs::symlink("check-tool", dir.join("server")).expect("a symlink");
        // A hard link: the maps name it as executed.
        std::fs::hard_link(dir.join("check-tool"), dir.join("hard")).expect("a hard link");

        for name in ["server", "hard"] {
            let (hidden, visible) = record(&dir, name);
            assert_eq!(visible.name, "visible", "{name}: {visible:?}");
            assert_eq!(visible.module, name, "{name}: {visible:?}");
            assert_eq!(hidden.module, name, "{name}: {hidden:?}");
            assert!(
                hidden.name.starts_with(&format!("[{name}+0x")),
                "{name}: {hidden:?}"
            );
        }
        // Started by the file's own name, it keeps it.
        let (hidden, _) = record(&dir, "check-tool");
        assert!(hidden.name.starts_with("[check-tool+0x"), "{hidden:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
