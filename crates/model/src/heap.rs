//! Heap profiles: what a dhat-instrumented target allocated (`record --heap-profile`), read
//! from the JSON file dhat writes at exit (`dhatFileVersion` 2, the format dh_view reads).

use serde::{Deserialize, Serialize};

/// A run's heap figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Heap {
    /// The profile file read.
    pub source: String,
    /// The command dhat saw.
    pub command: String,
    /// Allocations (blocks) and bytes allocated over the target's life.
    pub allocations: u64,
    pub bytes: u64,
    /// At the heap's peak (dhat's t-gmax): bytes and blocks live.
    pub peak_bytes: u64,
    pub peak_blocks: u64,
    /// Still live when the profile was written.
    pub end_bytes: u64,
    pub end_blocks: u64,
}

/// One allocation site: its stack (root first) and what it allocated.
#[derive(Clone, Debug, PartialEq)]
pub struct HeapSite {
    pub frames: Vec<DhatFrame>,
    pub allocations: u64,
    pub bytes: u64,
}

/// A frame of dhat's frame table: `0x55d0c7c9b1a3: crate::f (src/x.rs:120:9)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DhatFrame {
    pub addr: u64,
    pub name: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// A dhat file that cannot be read as one.
#[derive(Debug, thiserror::Error)]
pub enum HeapError {
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not a dhat heap profile (no dhatFileVersion 2 with mode rust-heap or heap)")]
    NotDhat,
    #[error("a program point refers to frame {0}, beyond the frame table")]
    BadFrame(usize),
}

#[derive(Deserialize)]
struct File {
    #[serde(rename = "dhatFileVersion")]
    version: Option<u32>,
    mode: Option<String>,
    #[serde(default)]
    cmd: String,
    #[serde(default)]
    pps: Vec<ProgramPoint>,
    #[serde(default)]
    ftbl: Vec<String>,
}

#[derive(Deserialize)]
struct ProgramPoint {
    tb: u64,
    tbk: u64,
    #[serde(default)]
    gb: u64,
    #[serde(default)]
    gbk: u64,
    #[serde(default)]
    eb: u64,
    #[serde(default)]
    ebk: u64,
    /// Frame-table indices, the allocation point first.
    fs: Vec<usize>,
}

impl Heap {
    /// The figures and the allocation sites of a dhat heap profile's text.
    pub fn from_dhat(text: &str, source: &str) -> Result<(Heap, Vec<HeapSite>), HeapError> {
        let f: File = serde_json::from_str(text)?;
        if f.version != Some(2) || !matches!(f.mode.as_deref(), Some("rust-heap" | "heap")) {
            return Err(HeapError::NotDhat);
        }
        let frames: Vec<DhatFrame> = f.ftbl.iter().map(|s| parse_frame(s)).collect();
        let mut heap = Heap {
            source: source.to_string(),
            command: f.cmd,
            ..Default::default()
        };
        let mut sites = Vec::with_capacity(f.pps.len());
        for pp in &f.pps {
            heap.allocations += pp.tbk;
            heap.bytes += pp.tb;
            heap.peak_bytes += pp.gb;
            heap.peak_blocks += pp.gbk;
            heap.end_bytes += pp.eb;
            heap.end_blocks += pp.ebk;
            let mut stack = Vec::with_capacity(pp.fs.len());
            for &i in pp.fs.iter().rev() {
                let frame = frames.get(i).ok_or(HeapError::BadFrame(i))?;
                // dhat's own root, and the allocator's frames above the caller's code, say
                // nothing of where the program allocated.
                if i == 0 && frame.name == "[root]" {
                    continue;
                }
                stack.push(frame.clone());
            }
            // The allocator's own frames at the leaf (dhat's, the `__rust_alloc` shims) are
            // the same for every site.
            while stack
                .last()
                .is_some_and(|f| switchyard_runtimes::is_allocator(&f.name))
            {
                stack.pop();
            }
            sites.push(HeapSite {
                frames: stack,
                allocations: pp.tbk,
                bytes: pp.tb,
            });
        }
        Ok((heap, sites))
    }
}

/// `0x55d0c7c9b1a3: crate::f (src/x.rs:120:9)`, or a bare name (`[root]`).
fn parse_frame(s: &str) -> DhatFrame {
    let (addr, rest) = match s.split_once(": ") {
        Some((a, rest)) if a.starts_with("0x") => {
            (u64::from_str_radix(&a[2..], 16).unwrap_or(0), rest)
        }
        _ => (0, s),
    };
    // The location is the last parenthesised part, when it ends in `:line:col`.
    if let Some(open) = rest.rfind(" (")
        && rest.ends_with(')')
    {
        let loc = &rest[open + 2..rest.len() - 1];
        let mut parts = loc.rsplitn(3, ':');
        let (col, line, file) = (parts.next(), parts.next(), parts.next());
        if let (Some(_), Some(line), Some(file)) = (col, line, file)
            && let Ok(line) = line.parse()
        {
            return DhatFrame {
                addr,
                name: rest[..open].to_string(),
                file: Some(file.to_string()),
                line: Some(line),
            };
        }
    }
    DhatFrame {
        addr,
        name: rest.to_string(),
        file: None,
        line: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = r#"{"dhatFileVersion":2,"mode":"rust-heap","verb":"Allocated",
        "cmd":"./server","pid":1,"tg":5,"te":9,
        "pps":[{"tb":400,"tbk":4,"tl":1,"mb":200,"mbk":2,"gb":100,"gbk":1,"eb":0,"ebk":0,"fs":[5,4,1,2]},
               {"tb":50,"tbk":1,"tl":1,"mb":50,"mbk":1,"gb":50,"gbk":1,"eb":50,"ebk":1,"fs":[3]}],
        "ftbl":["[root]","0x10: alloc::vec::from_elem (src/vec/mod.rs:3651:5)",
                "0x20: server::handle (src/main.rs:71:29)","[root]x",
                "0x30: __rustc::__rust_alloc","0x40: <dhat::Alloc as core::alloc::global::GlobalAlloc>::alloc (src/lib.rs:1:1)"]}"#;

    #[test]
    fn sums_the_program_points_and_keeps_sites_root_first() {
        let (heap, sites) = Heap::from_dhat(PROFILE, "dhat-heap.json").unwrap();
        assert_eq!((heap.allocations, heap.bytes), (5, 450));
        assert_eq!((heap.peak_bytes, heap.peak_blocks), (150, 2));
        assert_eq!((heap.end_bytes, heap.end_blocks), (50, 1));
        assert_eq!(heap.command, "./server");
        let names: Vec<&str> = sites[0].frames.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["server::handle", "alloc::vec::from_elem"]);
        assert_eq!(sites[0].frames[0].file.as_deref(), Some("src/main.rs"));
        assert_eq!(sites[0].frames[0].line, Some(71));
        assert_eq!(sites[0].frames[0].addr, 0x20);
        assert_eq!(sites[1].frames[0].name, "[root]x");
    }

    #[test]
    fn other_json_is_refused_by_name() {
        for bad in [
            r#"{"format":"switchyard-run"}"#,
            r#"{"dhatFileVersion":2,"mode":"ad-hoc"}"#,
        ] {
            assert!(matches!(Heap::from_dhat(bad, "x"), Err(HeapError::NotDhat)));
        }
        assert!(matches!(Heap::from_dhat("{", "x"), Err(HeapError::Json(_))));
        let dangling = r#"{"dhatFileVersion":2,"mode":"rust-heap","pps":[{"tb":1,"tbk":1,"fs":[7]}],"ftbl":["[root]"]}"#;
        assert!(matches!(
            Heap::from_dhat(dangling, "x"),
            Err(HeapError::BadFrame(7))
        ));
    }
}
