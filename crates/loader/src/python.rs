//! The Python processes of a recording: each process's maps are walked for an object that
//! holds an interpreter (the runtime's own detection, `switchyard_runtimes::python::detect`),
//! each object read once.

use std::{collections::HashMap, path::Path};

use switchyard_common::PyProc;
use switchyard_model::raw::MapsLine;
pub use switchyard_runtimes::python::detect::{Found, Gil, Interpreter};
use switchyard_runtimes::python::detect::{candidate, inspect};

/// Python processes found so far, and what each mapped object turned out to be.
#[derive(Default)]
pub struct Finder {
    objects: HashMap<String, Option<Interpreter>>,
    /// The procs registered, by tgid.
    pub procs: HashMap<u32, PyProc>,
    /// Their GILs, by tgid: (first byte in the process, the place's size and name). Kept
    /// after a process has gone: its waits are still in the recording.
    pub gils: HashMap<u32, (u64, Gil)>,
}

impl Finder {
    /// The interpreter of a process from the text of its maps, with `_PyRuntime`'s address
    /// in the process; `None` when it maps none (or one of a version without a layout).
    pub fn find(&mut self, maps_text: &str) -> Option<Found> {
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
            if let Some(i) = found {
                return Some(i.in_process(start));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's interpreter, when this host has it, found in a process's maps.
    #[test]
    fn debian_python_3_11_is_found_in_maps() {
        let path = Path::new("/usr/bin/python3.11");
        if !path.exists() {
            eprintln!("skipping: no /usr/bin/python3.11");
            return;
        }
        let i = inspect(path).expect("an interpreter");
        let maps = format!(
            "00400000-00420000 r--p 00000000 fe:01 123 {}\n",
            path.display()
        );
        let p = Finder::default().find(&maps).expect("found in maps");
        assert_eq!(p.proc.interp_head, i.runtime + 40);
        assert_eq!(p.gil.map(|(start, _)| start), Some(i.runtime + 0x168));
        assert_eq!(
            Finder::default().find("00400000-00420000 r--p 00000000 fe:01 1 /usr/lib/libc.so.6\n"),
            None
        );
    }
}
