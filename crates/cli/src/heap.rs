//! `record --heap-profile FILE`: the heap profile a dhat-instrumented target writes as it
//! exits, read once the recording ends and attached to the run: its figures, and its
//! allocation sites as the `heap` profile.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use anyhow::Result;
use switchyard_model::{
    Frame, FrameKind, Run, Stack,
    heap::{Heap, HeapSite},
};

use crate::fail::hinted;

/// The file to read and its modification time before the recording, so a profile left by an
/// earlier run is not taken for this one's.
pub struct HeapPlan {
    pub path: PathBuf,
    pub before: Option<SystemTime>,
}

const HINT: &str = "build the target with its `dhat` feature (a dhat::Profiler in main) and let \
                    it exit normally, or point --heap-profile at the file it writes";

impl HeapPlan {
    /// Checked before the recording: the file's directory must exist.
    pub fn new(path: PathBuf) -> Result<HeapPlan> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(hinted(
                format!(
                    "--heap-profile {}: the directory {} does not exist",
                    path.display(),
                    dir.display()
                ),
                "give a path in an existing directory, where the target writes its dhat profile",
            ));
        }
        let before = modified(&path);
        Ok(HeapPlan { path, before })
    }

    /// The profile, waited for up to `wait` (the target writes it as it exits): the figures
    /// and the allocation sites, or an error that says what is wrong with the file.
    pub fn read(&self, wait: Duration) -> Result<(Heap, Vec<HeapSite>)> {
        let deadline = Instant::now() + wait;
        let fresh = || modified(&self.path).is_some_and(|m| Some(m) != self.before);
        while !fresh() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let shown = self.path.display();
        if !fresh() {
            let what = if self.before.is_some() {
                "was not rewritten during the recording (it is an earlier run's)"
            } else {
                "was not written"
            };
            return Err(hinted(format!("heap profile {shown} {what}"), HINT));
        }
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| hinted(format!("reading the heap profile {shown}: {e}"), HINT))?;
        Heap::from_dhat(&text, &self.path.display().to_string()).map_err(|e| {
            hinted(
                format!("the heap profile {shown} cannot be read: {e}"),
                "give the JSON file dhat writes (dhat-heap.json by default)",
            )
        })
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Attaches a heap profile to `run`: its figures, and its sites as the `heap` profile, their
/// frames added to the run's frame table (one stack per site, root first, under the target's
/// name).
pub fn attach(run: &mut Run, heap: Heap, sites: Vec<HeapSite>) {
    let comm = run
        .meta
        .command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .map_or_else(
            || "target".to_string(),
            |c| c.to_string_lossy().into_owned(),
        );
    let mut index: std::collections::HashMap<Frame, u32> = run
        .profiles
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| (f.clone(), i as u32))
        .collect();
    let mut stacks = Vec::with_capacity(sites.len());
    for site in sites.into_iter().filter(|s| s.allocations > 0) {
        let mut frames = Vec::with_capacity(site.frames.len());
        let mut last_addr = None;
        for f in site.frames {
            // dhat repeats a call site's address for each function inlined there, outermost
            // first (root first): all but the first are inlined.
            let inlined = f.addr != 0 && last_addr == Some(f.addr);
            last_addr = Some(f.addr);
            let frame = Frame {
                name: f.name,
                module: String::new(),
                file: f.file,
                line: f.line,
                kind: FrameKind::User,
                inlined,
                addr: f.addr,
            };
            let next = run.profiles.frames.len() as u32;
            let i = *index.entry(frame.clone()).or_insert_with(|| {
                run.profiles.frames.push(frame);
                next
            });
            frames.push(i);
        }
        stacks.push(Stack {
            tgid: run.meta.pid,
            tid: run.meta.pid,
            comm: comm.clone(),
            frames,
            value: site.allocations,
            ..Default::default()
        });
    }
    stacks.sort_by(|a, b| b.value.cmp(&a.value).then(a.frames.cmp(&b.frames)));
    run.profiles.heap = switchyard_model::Profile {
        unit: "allocations".into(),
        stacks,
    };
    run.heap = Some(heap);
}
