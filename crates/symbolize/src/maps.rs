//! Snapshots of `/proc/<pid>/maps`, kept while the targets run, so addresses can be mapped to
//! (file, file offset) after they exit.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

use switchyard_model::raw::MapsLine;

/// One executable, file-backed mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    pub path: PathBuf,
}

/// Every executable mapping seen per process; the newest snapshot is searched first. With
/// them, each process's perf map (JIT code, `/tmp/perf-<pid>.map` in its own mount and pid
/// namespace), copied while it lives.
#[derive(Clone, Debug, Default)]
pub struct Maps {
    by_tgid: HashMap<u32, Vec<Vec<Mapping>>>,
    perf_maps: HashMap<u32, PerfMapCopy>,
    /// The JIT-compiled BPF programs' symbols (`bpf_prog_<tag>_<name>`), by start address,
    /// read from /proc/kallsyms while the probes were loaded.
    bpf_symbols: Vec<(u64, String)>,
    /// Per process, its executable's path as its maps show it and the name the process knows
    /// it by, where the two differ (see [`exe_name`]).
    exe_names: HashMap<u32, (PathBuf, String)>,
}

/// The most a BPF program's JIT image is taken to span past its symbol when no other
/// program's symbol follows it.
const BPF_IMAGE_MAX: u64 = 64 * 1024;

/// The complete lines of a process's perf map read so far. A runtime that writes its map as
/// it goes only appends; one dumped on request (the JVM's `jcmd <pid> Compiler.perfmap`) is
/// written whole each time, so a new file, or one marked rewritten, is read again from its
/// start and only the lines not yet copied are kept.
#[derive(Clone, Debug, Default)]
struct PerfMapCopy {
    /// Its path through `/proc/<tgid>/root`, named by the pid the process sees itself as.
    path: Option<PathBuf>,
    text: String,
    /// The file read from (device, inode), and how far into it.
    file: (u64, u64),
    read: u64,
    /// Hashes of the lines in `text`, so a file read again adds only what is new.
    lines: std::collections::HashSet<u64>,
}

impl Maps {
    /// Reads `/proc/<tgid>/maps` and keeps it when it differs from the last snapshot; returns
    /// the text read (`None`: the process has gone, and its earlier snapshots stay in place),
    /// for others that follow the same maps.
    pub fn refresh(&mut self, tgid: u32) -> Option<String> {
        let text = fs::read_to_string(format!("/proc/{tgid}/maps")).ok()?;
        self.copy_perf_map(tgid);
        self.name_exe(tgid);
        let maps = parse(&text);
        if !maps.is_empty() {
            let list = self.by_tgid.entry(tgid).or_default();
            if list.last() != Some(&maps) {
                list.push(maps);
            }
        }
        Some(text)
    }

    /// Notes the name process `tgid` knows its executable by, when it differs from the file's
    /// own: read again only when the process executed another file.
    fn name_exe(&mut self, tgid: u32) {
        let Ok(exe) = fs::read_link(format!("/proc/{tgid}/exe")) else {
            return;
        };
        if self.exe_names.get(&tgid).is_some_and(|(p, _)| *p == exe) {
            return;
        }
        match exe_name(tgid, &exe) {
            Some(name) => self.exe_names.insert(tgid, (exe, name)),
            None => self.exe_names.remove(&tgid),
        };
    }

    /// The module name of a frame in `path` of process `tgid`: the file's name, or for the
    /// process's executable the name it was started by (`redis-server`, a link to
    /// `redis-check-rdb`).
    pub fn module(&self, tgid: u32, path: &Path) -> String {
        match self.exe_names.get(&tgid) {
            Some((exe, name)) if exe == path => name.clone(),
            _ => path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// Reads what process `tgid` added to its perf map since the last call, whole lines
    /// only; a process that exits or a namespace that hides the file leaves what was read.
    fn copy_perf_map(&mut self, tgid: u32) {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let copy = self.perf_maps.entry(tgid).or_default();
        if copy.path.is_none() {
            // The last NStgid is the pid inside the process's own pid namespace.
            let Some(ns_tgid) = fs::read_to_string(format!("/proc/{tgid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("NStgid:"))
                        .and_then(|v| v.split_whitespace().last().map(str::to_string))
                })
            else {
                return;
            };
            copy.path = Some(PathBuf::from(format!(
                "/proc/{tgid}/root/tmp/perf-{ns_tgid}.map"
            )));
        }
        let Some(path) = &copy.path else { return };
        let Ok(mut file) = fs::File::open(path) else {
            return;
        };
        let Ok(meta) = file.metadata() else { return };
        let id = {
            use std::os::unix::fs::MetadataExt as _;
            (meta.dev(), meta.ino())
        };
        if id != copy.file || meta.len() < copy.read {
            (copy.file, copy.read) = (id, 0);
        }
        // Read on from the end of the last whole line read, which must still end a line there:
        // otherwise the file was written anew and is read from its start.
        let mut new = Vec::new();
        let from = copy.read.saturating_sub(1);
        if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut new).is_err() {
            return;
        }
        if copy.read > 0 {
            if new.first() == Some(&b'\n') {
                new.remove(0);
            } else {
                copy.read = 0;
                new.clear();
                if file.seek(SeekFrom::Start(0)).is_err() || file.read_to_end(&mut new).is_err() {
                    return;
                }
            }
        }
        // A line still being written waits for the next read.
        let whole = new.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        copy.read += whole as u64;
        for line in String::from_utf8_lossy(&new[..whole]).split_inclusive('\n') {
            use std::hash::{BuildHasher as _, BuildHasherDefault, DefaultHasher};
            let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(line);
            if copy.lines.insert(hash) {
                copy.text.push_str(line);
            }
        }
    }

    /// Copies process `tgid`'s perf map again from its start, now: the runtime rewrote it
    /// whole (a JVM asked to dump its map), so what was read of it before says nothing of
    /// where its new lines are.
    pub fn reread_perf_map(&mut self, tgid: u32) {
        if let Some(copy) = self.perf_maps.get_mut(&tgid) {
            copy.read = 0;
        }
        self.copy_perf_map(tgid);
    }

    /// The perf map text copied from process `tgid` while it ran, when it had one.
    pub fn perf_map(&self, tgid: u32) -> Option<&str> {
        self.perf_maps
            .get(&tgid)
            .map(|c| c.text.as_str())
            .filter(|t| !t.is_empty())
    }

    /// Reads the loaded BPF programs' symbols from /proc/kallsyms (`[bpf]` lines); they
    /// leave it when the programs are unloaded, so this runs while the probes are in place.
    pub fn snapshot_bpf_symbols(&mut self) {
        let Ok(text) = fs::read_to_string("/proc/kallsyms") else {
            return;
        };
        self.bpf_symbols = parse_bpf_symbols(&text);
    }

    /// The BPF program whose JIT image holds kernel address `addr`, as perf names it.
    pub fn bpf_program(&self, addr: u64) -> Option<&str> {
        let i = self
            .bpf_symbols
            .partition_point(|(start, _)| *start <= addr);
        let (start, name) = self.bpf_symbols.get(i.checked_sub(1)?)?;
        let end = self
            .bpf_symbols
            .get(i)
            .map_or(start + BPF_IMAGE_MAX, |(next, _)| *next);
        (addr < end && addr - start < BPF_IMAGE_MAX).then_some(name.as_str())
    }

    /// Adds a snapshot directly (tests, or maps read elsewhere).
    pub fn insert(&mut self, tgid: u32, maps: Vec<Mapping>) {
        self.by_tgid.entry(tgid).or_default().push(maps);
    }

    /// The file and file offset of `addr` in process `tgid`.
    pub fn find(&self, tgid: u32, addr: u64) -> Option<(&Path, u64)> {
        self.mapping(tgid, addr)
            .map(|m| (m.path.as_path(), addr - m.start + m.offset))
    }

    /// The executable mapping of process `tgid` that holds `addr`, newest snapshot first.
    pub fn mapping(&self, tgid: u32, addr: u64) -> Option<&Mapping> {
        let list = self.by_tgid.get(&tgid)?;
        list.iter()
            .rev()
            .find_map(|snap| snap.iter().find(|m| m.start <= addr && addr < m.end))
    }

    /// The executable mappings of process `tgid` in its newest snapshot.
    pub fn mappings(&self, tgid: u32) -> impl Iterator<Item = &Mapping> {
        self.by_tgid
            .get(&tgid)
            .and_then(|l| l.last())
            .into_iter()
            .flatten()
    }

    /// True when a snapshot of process `tgid` was taken.
    pub fn has(&self, tgid: u32) -> bool {
        self.by_tgid.contains_key(&tgid)
    }

    pub fn processes(&self) -> usize {
        self.by_tgid.len()
    }
}

/// The name process `tgid` knows its executable `exe` by, when it is not `exe`'s own file
/// name: the kernel resolves a symbolic link before it maps a file, so a program started as
/// `redis-server`, a link to `redis-check-rdb`, maps (and its `/proc/<pid>/exe` names) the
/// latter. The candidates are the program name of its command line (a hard link's name, or a
/// link's) and its `comm`, which the kernel set from the name it was executed by; one counts
/// only when it names the very file mapped (same device and inode), found as given or beside
/// `exe`, in the process's own root.
fn exe_name(tgid: u32, exe: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let own = exe.file_name()?.to_str()?;
    let id = |p: &Path| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let mapped = id(Path::new(&format!("/proc/{tgid}/exe")))?;
    let cmdline = fs::read(format!("/proc/{tgid}/cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    let argv0 = String::from_utf8_lossy(argv0);
    let comm = fs::read_to_string(format!("/proc/{tgid}/comm")).unwrap_or_default();
    let root = PathBuf::from(format!("/proc/{tgid}/root"));
    let cwd = PathBuf::from(format!("/proc/{tgid}/cwd"));
    // A server that rewrites its title (`redis-server *:6379`) keeps the name first.
    let first = argv0.split_whitespace().next().unwrap_or_default();
    [argv0.as_ref(), first, comm.trim_end_matches('\n')]
        .into_iter()
        .filter(|c| !c.is_empty())
        .find_map(|c| {
            let given = Path::new(c);
            let name = given.file_name()?.to_str()?;
            if name == own {
                return None;
            }
            let places = [
                if given.is_absolute() {
                    Some(root.join(given.strip_prefix("/").ok()?))
                } else if c.contains('/') {
                    Some(cwd.join(given))
                } else {
                    None
                },
                exe.parent()
                    .and_then(|d| d.strip_prefix("/").ok())
                    .map(|d| root.join(d).join(name)),
            ];
            places
                .into_iter()
                .flatten()
                .any(|p| id(&p) == Some(mapped))
                .then(|| name.to_string())
        })
}

/// Parses the executable, file-backed lines of a maps file.
pub fn parse(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(MapsLine::parse)
        .filter(|m| m.perms.contains('x') && !m.path.ends_with(" (deleted)"))
        .map(|m| Mapping {
            start: m.start,
            end: m.end,
            offset: m.offset,
            path: PathBuf::from(m.path),
        })
        // Files, and the kernel's code pages a stack may pass through: the uprobe return
        // trampoline and the vDSO (named, not symbolised).
        .filter(|m| crate::is_file(&m.path) || crate::is_special(&m.path))
        .collect()
}

/// The `[bpf]` program symbols of a kallsyms text, sorted by address.
pub fn parse_bpf_symbols(text: &str) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = text
        .lines()
        .filter(|l| l.ends_with("[bpf]"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let name = f.nth(1)?;
            (addr != 0 && name.starts_with("bpf_prog_")).then(|| (addr, name.to_string()))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_executable_file_mappings_only() {
        let text = "\
55d0c0000000-55d0c0001000 r--p 00000000 fd:01 123 /usr/bin/demo
55d0c0001000-55d0c0005000 r-xp 00001000 fd:01 123 /usr/bin/demo
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 [heap]
7f1000000000-7f1000100000 r-xp 00028000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
";
        let m = parse(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].path, PathBuf::from("/usr/bin/demo"));
        assert_eq!(m[2].path, PathBuf::from("[vdso]"));
        let mut maps = Maps::default();
        maps.insert(7, m);
        let (path, off) = maps.find(7, 0x55d0c0001010).unwrap();
        assert_eq!(path, Path::new("/usr/bin/demo"));
        assert_eq!(off, 0x1010);
        assert_eq!(maps.find(7, 0x7f1000000010).unwrap().1, 0x28010);
        assert_eq!(maps.find(7, 0x7ffd00000010).unwrap().0, Path::new("[vdso]"));
        assert!(maps.find(7, 0x7f0000000010).is_none());
        assert!(maps.find(8, 0x55d0c0001010).is_none());
    }

    #[test]
    fn own_maps_resolve() {
        let mut maps = Maps::default();
        let me = std::process::id();
        maps.refresh(me);
        let f = own_maps_resolve as fn() as usize as u64;
        let (path, _) = maps.find(me, f).expect("own code is mapped");
        assert_eq!(
            path.file_name(),
            std::env::current_exe().unwrap().file_name()
        );
    }

    #[test]
    fn a_perf_map_written_whole_again_is_copied_again() {
        let me = std::process::id();
        let path = format!("/tmp/perf-{me}.map");
        let mut maps = Maps::default();
        fs::write(&path, "0x10 0x10 a\n0x20 0x10 b\n").unwrap();
        maps.refresh(me);
        // Rewritten in place, longer: a read on from where the last stopped would start
        // mid-line.
        fs::write(
            &path,
            "0x08 0x08 z\n0x10 0x10 a\n0x20 0x10 b\n0x30 0x10 c\n",
        )
        .unwrap();
        maps.reread_perf_map(me);
        // Replaced by a new file, shorter.
        fs::remove_file(&path).unwrap();
        fs::write(&path, "0x40 0x10 d\n").unwrap();
        maps.refresh(me);
        fs::remove_file(&path).unwrap();
        assert_eq!(
            maps.perf_map(me),
            Some("0x10 0x10 a\n0x20 0x10 b\n0x08 0x08 z\n0x30 0x10 c\n0x40 0x10 d\n")
        );
    }

    #[test]
    fn bpf_programs_are_found_by_address() {
        let maps = Maps {
            bpf_symbols: parse_bpf_symbols(
                "ffffffffc0025b98 t bpf_prog_5a1c1781ca9c2e38_task_newtask\t[bpf]\n\
             ffffffff81211188 t bpf_prog_realloc.cold\n\
             ffffffffc0025e90 t bpf_prog_873da464baec4c3d_sched_switch_walk\t[bpf]\n",
            ),
            ..Maps::default()
        };
        assert_eq!(
            maps.bpf_program(0xffffffffc0025b98 + 8),
            Some("bpf_prog_5a1c1781ca9c2e38_task_newtask")
        );
        assert_eq!(
            maps.bpf_program(0xffffffffc0025e90 + 0x100),
            Some("bpf_prog_873da464baec4c3d_sched_switch_walk")
        );
        assert_eq!(maps.bpf_program(0xffffffffc0025b90), None);
        assert_eq!(maps.bpf_program(0xffffffffc0025e90 + BPF_IMAGE_MAX), None);
        assert_eq!(maps.bpf_program(0xffffffff81211190), None);
    }
}
