//! The JVM (HotSpot): a contended `synchronized` monitor, its service threads' waits, and the
//! VM's own frames, which are never a program's site (Java frames are named by the JVM's perf
//! map); and which mapped object is HotSpot ([`is_hotspot`]).

use std::path::Path;

use crate::{Frames, Runtime};

pub struct Jvm;

impl Runtime for Jvm {
    fn name(&self) -> &'static str {
        "jvm"
    }

    fn frames(&self) -> &'static Frames {
        &FRAMES
    }
}

/// True when `object`, a file a process maps, is HotSpot's `libjvm.so` (java, or any launcher
/// that embeds the JVM).
pub fn is_hotspot(object: &Path) -> bool {
    object.file_name().is_some_and(|n| n == "libjvm.so")
}

const FRAMES: Frames = Frames {
    // A monitor's contenders park on a condition variable (os::PlatformEvent::park): a lock.
    lock_waits: &["ObjectMonitor::EnterI", "ObjectMonitor::ReenterI"],
    // The signal dispatcher waits on a semaphore for the next signal.
    parks: &["os::signal_wait"],
    // The attach listener waits for the next attach request (jcmd, an agent).
    idle_loops: &["LinuxAttachListener::dequeue", "AttachListener::dequeue"],
    library_modules: &["libjvm.so", "libjli.so"],
    // The VM's frames on a monitor's path, for stacks whose modules are not known.
    library_prefixes: &[
        "ObjectMonitor::",
        "ObjectSynchronizer::",
        "SharedRuntime::",
        "_complete_monitor_locking_Java",
        "os::PlatformEvent::",
        "os::PlatformMonitor::",
    ],
    ..Frames::NONE
};
