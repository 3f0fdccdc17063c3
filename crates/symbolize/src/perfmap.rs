//! JIT symbols from a process's perf map, `/tmp/perf-<pid>.map`, which JIT runtimes write for
//! profilers (`node --perf-basic-prof`, the JVM with perf-map-agent, LuaJIT, …): one line per
//! code object, `START SIZE name` with START and SIZE in hex without `0x`. It is copied while
//! the process lives ([`crate::Maps`], through `/proc/<pid>/root`, so a private /tmp or a
//! container's pid is no obstacle, and a file deleted at exit is no loss); a process that
//! was never seen alive is looked up in /tmp when the run is symbolised.
//!
//! HotSpot's map (`jcmd <pid> Compiler.perfmap`, `0x`-prefixed hex) lists, besides compiled
//! methods, the code cache's stubs and the template interpreter as one block named
//! `Interpreter`: frames there are named [`JVM_INTERPRETER`]. Which method an interpreted frame
//! runs is in the frame itself, not in the map, so it stays unnamed.
//!
//! blazesym reads perf maps only for a live process it is pointed at (its `Process` source,
//! which also wants the process's own memory maps); the run is symbolised after the target
//! exits, from switchyard's own map snapshots, so the few lines of parsing live here.

use std::path::PathBuf;

/// The name of frames in the JVM's template interpreter.
pub const JVM_INTERPRETER: &str = "[jvm interpreter]";

/// One process's JIT code objects.
#[derive(Debug, Default)]
pub struct PerfMap {
    /// (start, end, name), sorted by start; among overlapping entries the later line (newer
    /// code at a reused address) sorts last.
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    /// The perf map of process `tgid`, if it wrote one.
    pub fn load(tgid: u32) -> Option<PerfMap> {
        let candidates = [
            PathBuf::from(format!("/tmp/perf-{tgid}.map")),
            PathBuf::from(format!("/proc/{tgid}/root/tmp/perf-{tgid}.map")),
        ];
        candidates
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .map(|text| PerfMap::parse(&text))
    }

    /// Parses the text of a perf map; malformed lines are skipped.
    pub fn parse(text: &str) -> PerfMap {
        let mut entries: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut f = line.splitn(3, ' ');
                let start = f.next()?;
                let hotspot = start.starts_with("0x");
                let start = u64::from_str_radix(start.trim_start_matches("0x"), 16).ok()?;
                let size = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
                let name = match f.next()?.trim() {
                    "Interpreter" if hotspot => JVM_INTERPRETER,
                    name => name,
                };
                (size > 0 && !name.is_empty())
                    .then(|| (start, start.saturating_add(size), name.to_string()))
            })
            .collect();
        // Stable: equal starts keep file order, so the newer entry comes last.
        entries.sort_by_key(|e| e.0);
        PerfMap { entries }
    }

    /// The name of the code object covering `addr`.
    pub fn find(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        self.entries[..i]
            .iter()
            .rev()
            .take(8)
            .find(|e| addr < e.1)
            .map(|e| e.2.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_code_object_of_an_address() {
        let map = PerfMap::parse(
            "7fdc86fc6180 180 JS:*fib /tmp/x.js:1:13\n\
             7fdc86fc6400 40 Builtin:ArgumentsAdaptorTrampoline\n\
             garbage line\n\
             7fdc86fc6180 100 JS:~fib /tmp/x.js:1:13\n",
        );
        assert_eq!(map.find(0x7fdc86fc6181), Some("JS:~fib /tmp/x.js:1:13"));
        assert_eq!(map.find(0x7fdc86fc62f0), Some("JS:*fib /tmp/x.js:1:13"));
        assert_eq!(
            map.find(0x7fdc86fc6410),
            Some("Builtin:ArgumentsAdaptorTrampoline")
        );
        assert_eq!(map.find(0x7fdc86fc6440), None);
        assert_eq!(map.find(0x1000), None);
        assert_eq!(PerfMap::parse("").find(0x7fdc86fc6181), None);
    }

    #[test]
    fn reads_hotspot_maps_and_labels_its_interpreter() {
        let map = PerfMap::parse(
            "0x00007fcf98938c00 0x0000000000007530 StubRoutines (1)\n\
             0x00007fcf98940b80 0x0000000000017de0 Interpreter\n\
             0x00007fcf98ec7620 0x0000000000000338 long HotLoop.spin(long, int)\n",
        );
        assert_eq!(
            map.find(0x7fcf98ec7700),
            Some("long HotLoop.spin(long, int)")
        );
        assert_eq!(map.find(0x7fcf98940b80 + 0x100), Some(JVM_INTERPRETER));
        assert_eq!(map.find(0x7fcf98938c10), Some("StubRoutines (1)"));
        // Only HotSpot's map (0x-prefixed) names its interpreter so.
        assert_eq!(
            PerfMap::parse("1000 100 Interpreter\n").find(0x1010),
            Some("Interpreter")
        );
    }
}
