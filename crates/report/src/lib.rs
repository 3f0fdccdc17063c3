//! Renderers of runs: folded stacks, pprof profiles, flame graphs and one self-contained HTML
//! report.
//!
//! Every renderer is a pure function of a [`Run`]: it never prints, exits or reads the clock,
//! so the same run always gives the same bytes (golden tests rely on it).

mod chart;
mod escape;
mod flame;
mod folded;
mod html;
mod idle;
mod pprof;
pub mod sentences;
mod slow;
mod timeline;
mod trace;
mod tracks;
mod why;

use switchyard_model::{Profile, Profiles, Run};

pub use escape::html as escape_html;
pub use flame::{flamegraph, flamegraph_threads};
pub use folded::{Threads, folded, folded_threads, role, sanitize_frame};
pub use html::{document, embed_flamegraph, folded_view, html, merges_threads};
pub use idle::without_idle;
pub use pprof::{pprof, pprof_profile};
pub use trace::chrome_trace;

/// One of the four stack profiles of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProfileKind {
    /// perf cpu-clock samples; value: samples.
    OnCpu,
    /// Time off CPU by the stack at switch-out; value: ns.
    OffCpu,
    /// Off-CPU time by the sleeper's and the waker's stacks; value: ns.
    Wakeup,
    /// User stacks at syscall entry; value: calls.
    Syscalls,
    /// Futex wait time by user stack at the wait; value: ns.
    Futex,
    /// Heap allocations by allocation site (dhat); value: allocations.
    Heap,
}

impl ProfileKind {
    pub const ALL: [ProfileKind; 6] = [
        ProfileKind::OnCpu,
        ProfileKind::OffCpu,
        ProfileKind::Wakeup,
        ProfileKind::Syscalls,
        ProfileKind::Futex,
        ProfileKind::Heap,
    ];

    /// Whether a run can have this profile: the heap only with a heap profile attached.
    pub fn present(self, run: &Run) -> bool {
        self != ProfileKind::Heap || run.heap.is_some()
    }

    /// Short name, used for file names and HTML ids: "oncpu", "offcpu", "wakeup", "syscalls".
    pub fn name(self) -> &'static str {
        match self {
            ProfileKind::OnCpu => "oncpu",
            ProfileKind::OffCpu => "offcpu",
            ProfileKind::Wakeup => "wakeup",
            ProfileKind::Syscalls => "syscalls",
            ProfileKind::Futex => "futex",
            ProfileKind::Heap => "heap",
        }
    }

    /// Human title: "On-CPU", "Off-CPU", "Wakeup", "Syscall stacks".
    pub fn title(self) -> &'static str {
        match self {
            ProfileKind::OnCpu => "On-CPU",
            ProfileKind::OffCpu => "Off-CPU",
            ProfileKind::Wakeup => "Wakeup",
            ProfileKind::Syscalls => "Syscall stacks",
            ProfileKind::Futex => "Futex wait",
            ProfileKind::Heap => "Heap allocations",
        }
    }

    /// The profile of this kind in a run's profiles.
    pub fn of(self, profiles: &Profiles) -> &Profile {
        match self {
            ProfileKind::OnCpu => &profiles.oncpu,
            ProfileKind::OffCpu => &profiles.offcpu,
            ProfileKind::Wakeup => &profiles.wakeup,
            ProfileKind::Syscalls => &profiles.syscalls,
            ProfileKind::Futex => &profiles.futex,
            ProfileKind::Heap => &profiles.heap,
        }
    }

    /// The unit of the values, from the run or, when the run leaves it empty, the default.
    pub fn unit(self, run: &Run) -> &str {
        let unit = self.of(&run.profiles).unit.as_str();
        if !unit.is_empty() {
            return unit;
        }
        match self {
            ProfileKind::OnCpu => "samples",
            ProfileKind::OffCpu | ProfileKind::Wakeup | ProfileKind::Futex => "ns",
            ProfileKind::Syscalls => "calls",
            ProfileKind::Heap => "allocations",
        }
    }
}

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{profile} stack {stack} refers to frame {index}, but the run has only {frames} frames"
    )]
    FrameOutOfRange {
        profile: &'static str,
        stack: usize,
        index: u32,
        frames: usize,
    },
    #[error("rendering the {profile} flame graph")]
    FlameGraph {
        profile: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("compressing the {profile} pprof profile")]
    Compress {
        profile: &'static str,
        #[source]
        source: std::io::Error,
    },
}
