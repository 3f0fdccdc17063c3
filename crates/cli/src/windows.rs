//! A continuous recording's windows (`record --every`): when to cut the next and what becomes of
//! each (a `run-<n>.json` in a folder, an export). [`crate::runs`] reads a folder of them back.

use std::{
    io,
    path::PathBuf,
    time::{Duration, Instant, SystemTime},
};

use anyhow::Result;
use switchyard_export::Exporter;
use switchyard_model::{Counter, Run, Window, units};
use switchyard_symbolize::Symbolizer;

/// A window cut and still to be made into a run (assembled and symbolised with the worker's
/// symbolizer, which keeps what it parsed from one window to the next).
type Job = Box<dyn FnOnce(&Symbolizer) -> Run + Send>;

/// What became of the windows, once all were delivered.
pub struct Delivered {
    pub written: u64,
    /// Windows that could not be written where asked (a full disk, a removed folder) and were
    /// saved to the fallback folder instead: never a reason to stop recording.
    pub fallback: Option<Fallback>,
    /// Windows that could be written nowhere.
    pub unsaved: Vec<String>,
    pub exporter: Option<Exporter>,
}

/// Where windows go that cannot be written to the folder asked for: a folder of their own
/// under the temporary directory, named after the target and the recording's start.
pub struct Fallback {
    pub dir: PathBuf,
    pub count: u64,
    /// Why the first could not be written where asked.
    pub why: String,
}

/// The cutting of a continuous recording. Windows are cut on time in the recording's loop;
/// a worker thread makes each into a run, writes and exports it, in order, so symbolising
/// one window never delays the cut of the next.
pub struct Windows {
    every: Duration,
    /// When the next window is cut.
    due: Instant,
    /// The window being recorded (1 for the first).
    index: u64,
    /// Where it started: CLOCK_MONOTONIC ns and wall clock.
    pub start_mono: u64,
    pub start_wall: SystemTime,
    /// When the first window started, Unix ns.
    pub first_wall_ns: u64,
    /// The perf counters' totals at the last cut.
    counters: Option<Vec<Counter>>,
    tx: std::sync::mpsc::SyncSender<Job>,
    worker: std::thread::JoinHandle<Delivered>,
}

impl Windows {
    pub fn new(
        every: Duration,
        dir: Option<PathBuf>,
        exporter: Option<Exporter>,
        start_mono: u64,
        start_wall: SystemTime,
    ) -> Result<Self> {
        // Two windows may wait; a third cut waits for the worker (it cannot keep up, and
        // memory stays bounded).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(2);
        let worker = std::thread::Builder::new()
            .name("switchyard-windows".into())
            .spawn(move || deliver(rx, dir, exporter))?;
        Ok(Windows {
            every,
            due: Instant::now() + every,
            index: 1,
            start_mono,
            start_wall,
            first_wall_ns: crate::clock::unix_ns(start_wall),
            counters: None,
            tx,
            worker,
        })
    }

    /// Whether the window in progress is due to be cut.
    pub fn due(&self) -> bool {
        Instant::now() >= self.due
    }

    /// The perf counters' figures of the window ending now, from their running totals.
    pub fn counters(&mut self, totals: Option<Vec<Counter>>) -> Option<Vec<Counter>> {
        let totals = totals?;
        let window = totals
            .iter()
            .map(|c| {
                let prev = self
                    .counters
                    .as_ref()
                    .and_then(|p| p.iter().find(|p| p.name == c.name))
                    .and_then(|p| p.value);
                Counter {
                    value: c.value.map(|v| v.saturating_sub(prev.unwrap_or(0))),
                    ..c.clone()
                }
            })
            .collect();
        self.counters = Some(totals);
        Some(window)
    }

    /// Hands the window ending at `end_mono` / `end_wall` to the worker, which makes it with
    /// `make`; the next window starts there.
    pub fn cut(
        &mut self,
        make: impl FnOnce(&Symbolizer) -> Run + Send + 'static,
        end_mono: u64,
        end_wall: SystemTime,
    ) {
        let window = Window {
            index: self.index,
            every_ns: self.every.as_nanos() as u64,
            recording_start_wall_ns: self.first_wall_ns,
        };
        // A worker that has gone (it panicked) loses the window; the summary counts them.
        let _ = self.tx.send(Box::new(move |symbolizer: &Symbolizer| {
            let mut run = make(symbolizer);
            run.meta.window = Some(window);
            run
        }));
        self.index += 1;
        self.start_mono = end_mono;
        self.start_wall = end_wall;
        self.due += self.every;
        // A cut that ran late does not make the next window short.
        let now = Instant::now();
        if self.due < now {
            self.due = now + self.every;
        }
    }

    /// Delivers the last window and waits for the worker; returns the count of windows and
    /// what became of them.
    pub fn finish(mut self, last: Run) -> (u64, Delivered) {
        let (end_mono, end_wall) = (last.meta.end_mono_ns, self.start_wall);
        self.cut(move |_| last, end_mono, end_wall);
        let Windows {
            index, tx, worker, ..
        } = self;
        drop(tx);
        let delivered = worker.join().unwrap_or_else(|_| Delivered {
            written: 0,
            fallback: None,
            unsaved: vec!["the window writer failed".into()],
            exporter: None,
        });
        (index - 1, delivered)
    }
}

/// The worker: each window made into a run, written, exported and told in one line.
fn deliver(
    rx: std::sync::mpsc::Receiver<Job>,
    dir: Option<PathBuf>,
    exporter: Option<Exporter>,
) -> Delivered {
    let mut done = Delivered {
        written: 0,
        fallback: None,
        unsaved: Vec::new(),
        exporter,
    };
    let symbolizer = switchyard_symbolize::symbolizer();
    for job in rx {
        let run = job(&symbolizer);
        let index = run.meta.window.map_or(0, |w| w.index);
        let mut line = format!(
            "window {index}: {}, {} switches, {} syscalls, {} on-CPU samples",
            units::ns_compact(run.meta.duration_ns()),
            run.voluntary() + run.involuntary(),
            run.syscall_total(),
            run.profiles.oncpu.total(),
        );
        if let Some(dir) = &dir {
            let path = dir.join(format!("run-{index}.json"));
            match run.save(&path) {
                Ok(()) => {
                    done.written += 1;
                    line += &format!(" → {}", path.display());
                }
                Err(e) => match save_fallback(&run, index, &mut done.fallback, &e) {
                    Ok(saved) => {
                        line += &format!(" (not written: {e}) → {}", saved.display());
                    }
                    Err(e2) => {
                        line += &format!(" (not written: {e}; nor to {e2})");
                        done.unsaved.push(format!("{}: {e}", path.display()));
                    }
                },
            }
        }
        if let Some(x) = &done.exporter {
            x.send(run);
            line += &format!("; {}", x.stats().brief());
        }
        say!("{line}");
    }
    done
}

/// Saves a window that could not be written where asked in the fallback folder; returns its
/// path, or what stood in the way.
fn save_fallback(
    run: &Run,
    index: u64,
    fallback: &mut Option<Fallback>,
    why: &io::Error,
) -> Result<PathBuf, String> {
    if fallback.is_none() {
        let prefix = format!("switchyard-{}-windows-", run.meta.pid);
        let dir = switchyard_model::outfile::private_dir(&prefix)
            .map_err(|e| format!("a folder under {}: {e}", std::env::temp_dir().display()))?;
        *fallback = Some(Fallback {
            dir,
            count: 0,
            why: why.to_string(),
        });
    }
    let Some(f) = fallback.as_mut() else {
        unreachable!("the fallback folder was just made")
    };
    let path = f.dir.join(format!("run-{index}.json"));
    run.save(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.count += 1;
    Ok(path)
}
