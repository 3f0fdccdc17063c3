//! CPython: the interpreter lock (GIL) and the standard library's parks, named as the
//! recorder writes Python frames (`function (file:line)`), and how an interpreter is found in
//! a process ([`detect`]).

use crate::{Frames, Runtime};

pub mod detect;

pub struct Python;

impl Runtime for Python {
    fn name(&self) -> &'static str {
        "python"
    }

    fn frames(&self) -> &'static Frames {
        &FRAMES
    }
}

const FRAMES: Frames = Frames {
    // A condition, an event, a queue, a join.
    parks: &[
        "Condition.wait (",
        "Event.wait (",
        "Queue.get (",
        "SimpleQueue.get (",
        "Thread.join (",
        "Thread._wait_for_tstate_lock (",
        "Barrier.wait (",
    ],
    // The interpreter's C functions that take the GIL back; the thread that released it is
    // the one that held it.
    interpreter_lock: &[
        "take_gil",
        "PyEval_RestoreThread",
        "PyEval_AcquireThread",
        "PyEval_AcquireLock",
        "PyGILState_Ensure",
        // 3.13: attaching a thread state is taking the GIL.
        "_PyThreadState_Attach",
        // A forced switch: the holder that was asked to drop the GIL waits in `drop_gil`
        // until a waiter has taken it (`FORCE_SWITCHING`), the other half of the same fight.
        "drop_gil",
    ],
    ..Frames::NONE
};

/// Whether a Python frame's `file` is the interpreter's standard library (not a package
/// installed beside it): a file under `lib/python3.X`, or a module frozen into the
/// interpreter (`<frozen runpy>`, which runs `python -m`, `<frozen importlib._bootstrap>`).
pub fn is_stdlib(file: &str) -> bool {
    (file.contains("/lib/python3") && !file.contains("-packages/")) || file.starts_with("<frozen ")
}
