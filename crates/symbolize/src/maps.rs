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

/// Every executable mapping seen per process; the newest snapshot is searched first.
#[derive(Clone, Debug, Default)]
pub struct Maps {
    by_tgid: HashMap<u32, Vec<Vec<Mapping>>>,
}

impl Maps {
    /// Reads `/proc/<tgid>/maps` and keeps it when it differs from the last snapshot; returns
    /// the text read (`None`: the process has gone, and its earlier snapshots stay in place),
    /// for others that follow the same maps.
    pub fn refresh(&mut self, tgid: u32) -> Option<String> {
        let text = fs::read_to_string(format!("/proc/{tgid}/maps")).ok()?;
        let maps = parse(&text);
        if !maps.is_empty() {
            let list = self.by_tgid.entry(tgid).or_default();
            if list.last() != Some(&maps) {
                list.push(maps);
            }
        }
        Some(text)
    }

    /// Adds a snapshot directly (tests, or maps read elsewhere).
    pub fn insert(&mut self, tgid: u32, maps: Vec<Mapping>) {
        self.by_tgid.entry(tgid).or_default().push(maps);
    }

    /// The file and file offset of `addr` in process `tgid`.
    pub fn find(&self, tgid: u32, addr: u64) -> Option<(&Path, u64)> {
        let list = self.by_tgid.get(&tgid)?;
        list.iter().rev().find_map(|snap| {
            snap.iter()
                .find(|m| m.start <= addr && addr < m.end)
                .map(|m| (m.path.as_path(), addr - m.start + m.offset))
        })
    }

    /// True when a snapshot of process `tgid` was taken.
    pub fn has(&self, tgid: u32) -> bool {
        self.by_tgid.contains_key(&tgid)
    }

    pub fn processes(&self) -> usize {
        self.by_tgid.len()
    }
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
}
