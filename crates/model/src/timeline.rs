//! The timeline of a run (`record --timeline`): every thread's states over time, wakeups,
//! slow syscalls, futex waits and timestamped stack samples. Times are ns since the
//! recording's start (`meta.start_mono_ns`). Rows are tuples, arrays in the run file, so a
//! long timeline stays compact.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Timeline {
    /// Syscalls at least this long are on the timeline (futex waits always are).
    pub syscall_ns: u64,
    /// Events lost to a full ring buffer; the aggregates still count them.
    pub lost: u64,
    /// Every target thread that switched, sorted by (tgid, tid).
    pub threads: Vec<TimelineThread>,
    /// `(at, wakee tid, waker tid, waker tgid)`: the wakeup that ended an off-CPU interval's
    /// blocked part (the thread is runnable from there).
    pub wakeups: Vec<(u64, u32, u32, u32)>,
    /// `(start, duration, tid, syscall number, return value)`.
    pub syscalls: Vec<(u64, u64, u32, u32, i64)>,
    /// `(start, duration, tid)`: futex waits.
    pub futex: Vec<(u64, u64, u32)>,
    /// `(at, tid, stack)`: on-CPU samples; `stack` indexes `stacks`.
    pub samples: Vec<(u64, u32, u32)>,
    /// `(at, tid, stack, weight ns, state)`: off-CPU intervals walked for the off-CPU
    /// profile, at their end, with the weight they add to it; `state` as [`ThreadState`]
    /// (`Runnable` for a preempted thread's wait, and for the wait after a wakeup).
    pub offcpu: Vec<(u64, u32, u32, u64, u8)>,
    /// The stacks of `samples` and `offcpu`: frame indices into `profiles.frames`, root first.
    pub stacks: Vec<Vec<u32>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TimelineThread {
    pub tgid: u32,
    pub tid: u32,
    pub comm: String,
    /// Switches out (each ends a `Running` slice): the aggregate's voluntary + involuntary.
    pub switches: u64,
    /// `(start, duration, state, syscall)`, in time order, gap-free from the first event;
    /// `state` as [`ThreadState`]; `syscall`, for an off-CPU slice, the syscall the thread
    /// waits in plus one (0: none). A voluntary off-CPU interval is two slices: sleeping (or
    /// uninterruptible, …) up to its first wakeup, then `Runnable` up to the switch-in.
    pub slices: Vec<(u64, u64, u8, u32)>,
}

/// What a thread is doing during a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ThreadState {
    Running = 0,
    /// Waiting for a CPU: preempted (or otherwise still runnable at the switch-out), or woken
    /// and not yet running (scheduler delay).
    Runnable = 1,
    /// Sleeping, interruptibly (S).
    Sleeping = 2,
    /// Uninterruptible (D).
    Uninterruptible = 3,
    /// Idle wait (I), stopped, traced, or exiting.
    Other = 4,
    /// Off CPU since before its first event, in a state not seen.
    Unknown = 5,
}

impl ThreadState {
    pub fn from_u8(v: u8) -> ThreadState {
        match v {
            0 => ThreadState::Running,
            1 => ThreadState::Runnable,
            2 => ThreadState::Sleeping,
            3 => ThreadState::Uninterruptible,
            4 => ThreadState::Other,
            _ => ThreadState::Unknown,
        }
    }

    /// As trace viewers name thread states.
    pub fn label(self) -> &'static str {
        match self {
            ThreadState::Running => "Running",
            ThreadState::Runnable => "Runnable",
            ThreadState::Sleeping => "Sleeping",
            ThreadState::Uninterruptible => "Uninterruptible sleep",
            ThreadState::Other => "Other",
            ThreadState::Unknown => "Off CPU",
        }
    }

    /// The label a blocked state has in the off-CPU profile; `None` for running and for the
    /// waits for a CPU, which no stack explains.
    pub fn blocked_label(self) -> Option<crate::Label> {
        match self {
            ThreadState::Sleeping => Some(crate::Label::Sleeping),
            ThreadState::Uninterruptible => Some(crate::Label::Uninterruptible),
            ThreadState::Other => Some(crate::Label::Idle),
            _ => None,
        }
    }

    /// From the state `sched_switch` reports at a switch-out (`preempt_flag` set: preempted).
    pub fn from_switch(state: u32, preempt_flag: u32) -> ThreadState {
        if state == 0 || state & preempt_flag != 0 {
            return ThreadState::Runnable;
        }
        match state {
            1 => ThreadState::Sleeping,
            2 => ThreadState::Uninterruptible,
            _ => ThreadState::Other,
        }
    }
}

impl Timeline {
    /// Events on the timeline, for the summary.
    pub fn events(&self) -> u64 {
        (self.threads.iter().map(|t| 2 * t.switches).sum::<u64>())
            + (self.wakeups.len() + self.syscalls.len() + self.futex.len()) as u64
            + (self.samples.len() + self.offcpu.len()) as u64
    }
}
