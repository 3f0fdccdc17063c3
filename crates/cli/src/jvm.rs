//! Java targets: HotSpot names its JIT-compiled code for profilers only when asked. A target
//! (or followed child) that maps `libjvm.so` is asked with `jcmd <pid> Compiler.perfmap`, which
//! writes `/tmp/perf-<pid>.map`: at the end of the recording and at every window cut while it
//! lives, and periodically in between, since a target that exits on its own can no longer be
//! asked at its end. Each map is copied into [`Maps`] as soon as it is written, then removed
//! when it did not exist before (a map the user's own JVM flags wrote stays).
//!
//! jcmd runs on a thread of its own, one call at a time, so the recording's loop never waits
//! for it except at a cut and at the end. A jcmd that fails (the process gone, attach refused)
//! is a warning, once per process; the recording goes on and its other frames are unchanged.

use std::{
    collections::HashMap,
    path::PathBuf,
    process::{Command, Stdio},
    sync::mpsc::{self, Receiver, RecvTimeoutError, Sender},
    time::{Duration, Instant},
};

use switchyard_symbolize::Maps;

use crate::collect::Collection;

/// How often a running JVM is asked for its map. jcmd is a JVM itself (about 0.2 s of CPU and
/// 0.3-0.6 s of wall time per call on a small host), so one call every 2 s costs under a tenth
/// of one core, CPU a busy target on a 2-core host would otherwise get. What it can miss is
/// code compiled in the last 2 s of a target that exits on its own; HotSpot compiles most of a
/// program's hot code in its first seconds, and again after a phase change.
const PERIOD: Duration = Duration::from_secs(2);

/// The first call, once a JVM is seen: by then it has compiled its start-up's hot code, and a
/// short-lived program is asked at least once.
const FIRST: Duration = Duration::from_secs(1);

/// How long one jcmd may take before it is given up (a JVM that does not answer attach).
const JCMD_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the followed processes are checked for a JVM.
const SCAN: Duration = Duration::from_millis(250);

/// A map dumped, or why not.
struct Dumped {
    tgid: u32,
    /// The map's path through `/proc/<tgid>/root`, as the process names it.
    path: PathBuf,
    /// It was there before jcmd ran: the user's, not ours to remove.
    existed: bool,
    result: Result<(), String>,
}

#[derive(Default)]
struct Jvm {
    /// When it is asked next.
    next: Option<Instant>,
    /// A call is under way on the worker.
    pending: bool,
    warned: bool,
}

/// The JVMs among the followed processes, and the thread that asks them for their maps.
pub struct Jvms {
    /// Off without stacks: the maps only name stack frames.
    enabled: bool,
    jvms: HashMap<u32, Jvm>,
    last_scan: Option<Instant>,
    worker: Option<(Sender<u32>, Receiver<Dumped>)>,
}

impl Jvms {
    pub fn new(enabled: bool) -> Jvms {
        Jvms {
            enabled,
            jvms: HashMap::new(),
            last_scan: None,
            worker: None,
        }
    }

    /// One poll of the recording's loop: new JVMs found, maps dumped since copied, and the
    /// JVMs whose turn it is asked again. Never waits for jcmd.
    pub fn tick(&mut self, pid: u32, collection: &Collection, maps: &mut Maps) {
        if !self.enabled {
            return;
        }
        if self.last_scan.is_none_or(|t| t.elapsed() >= SCAN) {
            self.last_scan = Some(Instant::now());
            self.scan(pid, collection, maps);
        }
        while let Some(d) = self.worker.as_ref().and_then(|(_, rx)| rx.try_recv().ok()) {
            self.copied(d, maps);
        }
        let now = Instant::now();
        let due: Vec<u32> = self
            .jvms
            .iter()
            .filter(|(_, j)| !j.pending && j.next.is_some_and(|t| now >= t))
            .map(|(&tgid, _)| tgid)
            .collect();
        for tgid in due {
            self.ask(tgid);
        }
    }

    /// Every live JVM's map dumped and copied now (a window's cut, the recording's end): waits
    /// for jcmd, at most [`JCMD_TIMEOUT`] per process.
    pub fn dump_now(&mut self, pid: u32, collection: &Collection, maps: &mut Maps) {
        if !self.enabled {
            return;
        }
        self.scan(pid, collection, maps);
        let mut tgids: Vec<u32> = self.jvms.keys().copied().collect();
        tgids.sort_unstable();
        for tgid in tgids {
            // A call under way may have started before what is to be named was compiled.
            self.wait(tgid, maps);
            if alive(tgid) {
                self.ask(tgid);
                self.wait(tgid, maps);
            }
        }
    }

    /// Adds the followed processes that map libjvm.so and are not known yet.
    fn scan(&mut self, pid: u32, collection: &Collection, maps: &Maps) {
        let mut tgids = collection.followed();
        tgids.push(pid);
        for tgid in tgids {
            if !self.jvms.contains_key(&tgid) && is_jvm(maps, tgid) {
                self.jvms.insert(
                    tgid,
                    Jvm {
                        next: Some(Instant::now() + FIRST),
                        ..Jvm::default()
                    },
                );
            }
        }
    }

    /// Hands `tgid` to the worker, started on first use.
    fn ask(&mut self, tgid: u32) {
        let Some(jvm) = self.jvms.get_mut(&tgid) else {
            return;
        };
        if self.worker.is_none() {
            let (tx, requests) = mpsc::channel::<u32>();
            let (done, rx) = mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name("switchyard-jcmd".into())
                .spawn(move || {
                    for tgid in requests {
                        if done.send(dump(tgid)).is_err() {
                            break;
                        }
                    }
                });
            if let Err(e) = spawned {
                say!("warning: cannot start the JVM map thread: {e}; Java frames stay unnamed");
                self.enabled = false;
                return;
            }
            self.worker = Some((tx, rx));
        }
        if let Some((tx, _)) = &self.worker
            && tx.send(tgid).is_ok()
        {
            jvm.pending = true;
        }
    }

    /// Waits for the call under way for `tgid`, if any, copying what comes back.
    fn wait(&mut self, tgid: u32, maps: &mut Maps) {
        let deadline = Instant::now() + JCMD_TIMEOUT + Duration::from_secs(1);
        while self.jvms.get(&tgid).is_some_and(|j| j.pending) {
            let Some((_, rx)) = &self.worker else { return };
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(d) => self.copied(d, maps),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// A call has returned: the map copied (then removed when it is ours), or a warning.
    fn copied(&mut self, d: Dumped, maps: &mut Maps) {
        let Some(jvm) = self.jvms.get_mut(&d.tgid) else {
            return;
        };
        jvm.pending = false;
        jvm.next = Some(Instant::now() + PERIOD);
        match d.result {
            Ok(()) => {
                maps.reread_perf_map(d.tgid);
                if !d.existed {
                    let _ = std::fs::remove_file(&d.path);
                }
            }
            Err(why) => {
                let gone = !alive(d.tgid);
                if gone {
                    // Nothing more to ask; what was copied stays.
                    jvm.next = None;
                } else if !std::mem::replace(&mut jvm.warned, true) {
                    say!(
                        "warning: jcmd {} Compiler.perfmap: {why}; Java methods compiled since \
                         stay [unknown] (the rest of the recording is unaffected)",
                        d.tgid
                    );
                }
            }
        }
    }
}

/// True when process `tgid`'s code includes HotSpot.
fn is_jvm(maps: &Maps, tgid: u32) -> bool {
    maps.mappings(tgid)
        .any(|m| switchyard_runtimes::jvm::is_hotspot(&m.path))
}

/// True while process `tgid` runs (not yet exited, not a zombie).
fn alive(tgid: u32) -> bool {
    std::fs::read_link(format!("/proc/{tgid}/exe")).is_ok()
}

/// The pid process `tgid` sees itself as (its pid namespace's), which names its perf map.
fn ns_tgid(tgid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{tgid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NStgid:"))?;
    line.split_whitespace().last().map(str::to_string)
}

/// Runs `jcmd <tgid> Compiler.perfmap`, on the worker thread.
fn dump(tgid: u32) -> Dumped {
    let path = PathBuf::from(format!(
        "/proc/{tgid}/root/tmp/perf-{}.map",
        ns_tgid(tgid).unwrap_or_else(|| tgid.to_string())
    ));
    let existed = path.exists();
    let result = jcmd(tgid);
    Dumped {
        tgid,
        path,
        existed,
        result,
    }
}

fn jcmd(tgid: u32) -> Result<(), String> {
    let mut child = Command::new("jcmd")
        .args([&tgid.to_string(), "Compiler.perfmap"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run jcmd ({e}), which comes with a JDK"))?;
    let deadline = Instant::now() + JCMD_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer in {} s", JCMD_TIMEOUT.as_secs()));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if status.success() {
        return Ok(());
    }
    // jcmd prints a Java stack trace; its first line that names an exception says why.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let why = text
        .lines()
        .find(|l| l.contains("Exception") || l.contains("Error"))
        .or_else(|| text.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("failed")
        .trim()
        .to_string();
    Err(format!("{why} ({status})"))
}
