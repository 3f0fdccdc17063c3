//! Idle waits: off-CPU and wakeup stacks that [`switchyard_findings::classify`] reads as a
//! thread waiting for work to arrive, not for something its work needs. The report's flame
//! graphs of those profiles leave them out by default and show them one click away; the folded
//! files and pprof profiles keep every stack.

use switchyard_findings::Kind;
use switchyard_model::{Run, Stack};

use crate::ProfileKind;

/// The rule, in one sentence, for the page.
pub(crate) const RULE: &str = "An idle wait is a thread waiting for work to arrive: an event \
     wait (<code>epoll_wait</code>, <code>poll</code>, <code>select</code>, <code>accept</code>), \
     a datagram server's receive from any sender (<code>recvfrom</code> on a UDP socket), \
     or a park (a condition variable, a thread park or join, a channel receive, the Go \
     scheduler's sleep); a lock, I/O, another socket read or a sleep is never idle \
     (<code>switchyard explain</code> says more).";

/// Whether the flame graph of `kind` hides idle waits.
pub(crate) fn hides_idle(kind: ProfileKind) -> bool {
    matches!(kind, ProfileKind::OffCpu | ProfileKind::Wakeup)
}

/// Whether `stack` (an off-CPU or wakeup stack: the sleeper's frames) is an idle wait.
pub(crate) fn is_idle(run: &Run, stack: &Stack) -> bool {
    // Read as explain reads it: a park on the GIL's condition variable is the GIL, not idle.
    switchyard_findings::Reader::new(run).read(stack).kind == Kind::Idle
}

/// The time of `kind`'s idle stacks, ns; 0 for a profile whose graph shows them all.
pub(crate) fn idle_ns(run: &Run, kind: ProfileKind) -> u64 {
    if !hides_idle(kind) {
        return 0;
    }
    if kind == ProfileKind::OffCpu {
        return switchyard_findings::idle_offcpu_ns(run);
    }
    kind.of(&run.profiles)
        .stacks
        .iter()
        .filter(|s| is_idle(run, s))
        .map(|s| s.value)
        .sum()
}

/// `run` without its idle waits in the off-CPU and wakeup profiles, and their time, ns: what a
/// comparison's differential graphs draw by default.
pub fn without_idle(run: &Run) -> (Run, u64) {
    let mut out = run.clone();
    let mut idle = 0;
    for kind in [ProfileKind::OffCpu, ProfileKind::Wakeup] {
        let keep: Vec<Stack> = kind
            .of(&run.profiles)
            .stacks
            .iter()
            .filter(|s| {
                let i = is_idle(run, s);
                if i && kind == ProfileKind::OffCpu {
                    idle += s.value;
                }
                !i
            })
            .cloned()
            .collect();
        match kind {
            ProfileKind::OffCpu => out.profiles.offcpu.stacks = keep,
            _ => out.profiles.wakeup.stacks = keep,
        }
    }
    (out, idle)
}
