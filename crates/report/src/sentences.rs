//! The report's composite lines (stack quality, unwind tables, futex waits, off-CPU sampling),
//! the sentences the terminal summary and the page share, and the shared formatters of [`switchyard_model::units`], re-exported so the report's modules and
//! the CLI name one path.

use std::collections::BTreeMap;

use switchyard_model::metrics::{self, Metric};

pub use switchyard_model::units::{
    bytes, command_line, counted, kib_as_mib, ns, ns_compact, ns_f, ns_short, percent,
    percent_whole, rate, significant, thousands, utc,
};

/// A run's named figures, `metrics::extract(run)`.
pub type Figures = BTreeMap<String, Metric>;

/// The stack-quality line: how user stacks were walked and, per profile, the share whose user
/// stack reaches the thread's start. `None` for runs that carry no quality figures.
pub fn stack_quality(stats: &switchyard_model::StackStats) -> Option<String> {
    if stats.quality.is_empty() {
        return None;
    }
    let shares: Vec<String> = stats
        .quality
        .iter()
        .map(|q| {
            let name = match q.profile.as_str() {
                "oncpu" => "on-CPU",
                "offcpu" => "off-CPU",
                "wakeup" => "wakeups",
                "syscalls" => "syscalls",
                "futex" => "futex waits",
                other => other,
            };
            format!("{name} {}", percent(q.percent() / 100.0))
        })
        .collect();
    Some(format!(
        "user stacks by {}; complete to the thread's start: {}",
        stats.unwind_label(),
        shares.join(", ")
    ))
}

/// What the unwind tables held and cost: "7 objects (1 without CFI), 153,201 rows, 1.2 MiB of
/// 32.0 MiB, built in 85.0 ms".
pub fn unwind_tables(t: &switchyard_model::UnwindTables) -> String {
    let mut s = format!(
        "{} objects ({} without CFI), {} rows, {} of {}, built in {}",
        thousands(t.objects),
        thousands(t.objects_without_cfi),
        thousands(t.rows),
        bytes(t.bytes),
        bytes(t.capacity_bytes),
        ns(t.build_us.saturating_mul(1000))
    );
    if t.objects_not_loaded > 0 {
        s += &format!(
            "; {} did not fit (raise --unwind-rows)",
            thousands(t.objects_not_loaded)
        );
    }
    s
}

/// The futex waits in one sentence, as the summary and the page give it: "1,234 futex waits,
/// 56.0 ms in all (average 45.4 µs, longest 2.1 ms); 3 timed out, 10 did not block (the word
/// had changed)".
pub fn futex_waits(w: &switchyard_model::WaitSummary) -> String {
    format!(
        "{}, {} in all (average {}, longest {}); {} timed out, {} did not block \
         (the word had changed)",
        counted(w.count, "futex wait"),
        ns(w.total_ns),
        ns(w.total_ns.checked_div(w.count).unwrap_or(0)),
        ns(w.max_ns),
        thousands(w.timeouts),
        thousands(w.eagain)
    )
}

/// How off-CPU stacks were sampled, in one sentence; `None` when every block was walked.
pub fn offcpu_sampling(stats: &switchyard_model::StackStats) -> Option<String> {
    if stats.offcpu_period_ns == 0 || stats.offcpu_intervals == 0 {
        return None;
    }
    Some(format!(
        "off-CPU stacks are sampled: every block of {} or more was walked, a shorter one with \
         probability (its length ÷ {}), its time weighted by the inverse so the times stay \
         unbiased ({} of {} blocks walked, {}; --offcpu-period 0 walks all)",
        ns(stats.offcpu_period_ns),
        ns(stats.offcpu_period_ns),
        thousands(stats.offcpu_walked),
        thousands(stats.offcpu_intervals),
        percent(stats.offcpu_walked as f64 / stats.offcpu_intervals as f64),
    ))
}

/// The headline figures per operation, in one phrase, as the summary and the page give them:
/// "3.00 syscalls, 0.500 futex waits, 1.20 context switches, 12.3 µs CPU". `None` without
/// an operation count.
pub fn per_operation(figures: &Figures) -> Option<String> {
    let parts: Vec<String> = metrics::headline_per_op(figures)
        .into_iter()
        .map(|(f, m)| format!("{} {}", m.unit.human(m.value), f.label))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The heap per operation from dhat's counts, "1.50/op, 312 B/op"; `None` when the figures
/// have none.
pub fn heap_per_operation(figures: &Figures) -> Option<String> {
    let allocs = figures.get("heap.allocs.per_op")?;
    let bytes = figures.get("heap.bytes.per_op")?;
    Some(format!(
        "{}/op, {}/op",
        allocs.unit.human(allocs.value),
        bytes.unit.human(bytes.value)
    ))
}

/// Where the threads' time went, in one sentence, as the summary and the page give it:
/// "67.2% of thread time off CPU (blocked 1.2 s of which 1.0 s idle (waiting for work);
/// waiting for a CPU 30.0 ms of which 12.0 ms after a wakeup; on CPU 600.0 ms)".
pub struct OffCpu {
    pub share: f64,
    pub blocked_ns: u64,
    /// Of the blocked time, idle waits (waiting for work).
    pub idle_ns: u64,
    pub runqueue_ns: u64,
    /// Of the waits for a CPU, the part after wakeups; `None` when the run does not tell.
    pub woken_ns: Option<u64>,
    pub oncpu_ns: u64,
}

impl OffCpu {
    /// The thread times of `run` (idle waits are the caller's reading).
    pub fn of(run: &switchyard_model::Run, share: f64, idle_ns: u64) -> OffCpu {
        let delays = run.threads.iter().any(|t| t.runqueue_waits.count() > 0);
        let t = run.totals();
        OffCpu {
            share,
            blocked_ns: t.blocked_ns,
            idle_ns,
            runqueue_ns: t.runqueue_ns,
            woken_ns: (delays || t.runqueue_after_wakeup_ns > 0)
                .then_some(t.runqueue_after_wakeup_ns),
            oncpu_ns: t.oncpu_ns,
        }
    }

    pub fn sentence(&self) -> String {
        let idle = if self.idle_ns > 0 {
            format!(" of which {} idle (waiting for work)", ns(self.idle_ns))
        } else {
            String::new()
        };
        let woken = self.woken_ns.map_or_else(String::new, |w| {
            format!(" of which {} after a wakeup", ns(w))
        });
        format!(
            "{} of thread time (blocked {}{idle}, waiting for a CPU {}{woken}, on CPU {})",
            percent(self.share),
            ns(self.blocked_ns),
            ns(self.runqueue_ns),
            ns(self.oncpu_ns)
        )
    }
}

/// Go's garbage collector in one sentence, as the summary and the page give it: "12 GC
/// cycles, 24 stop-the-world pauses (3.1 ms in all, longest 400.0 µs), 8 mark assists".
pub fn go_gc(g: &switchyard_model::GoGc) -> String {
    format!(
        "{} GC cycles, {} stop-the-world pauses ({} in all, longest {}), {} mark assists",
        thousands(g.cycles),
        thousands(g.pauses),
        ns(g.pause_total_ns),
        ns(g.pause_max_ns),
        thousands(g.mark_assists)
    )
}

/// A span's calls in one phrase: "1,234 calls, 56.0 ms from entry to return in all (average
/// 45.4 µs, longest 2.1 ms)".
pub fn span_calls(s: &switchyard_model::WaitSummary) -> String {
    format!(
        "{}, {} from entry to return in all (average {}, longest {})",
        counted(s.count, "call"),
        ns(s.total_ns),
        ns(s.total_ns.checked_div(s.count).unwrap_or(0)),
        ns(s.max_ns)
    )
}

/// Kernel lock contention in one phrase: "12 waits, 3.4 ms in all".
pub fn kernel_lock_waits(c: &switchyard_model::WaitSummary) -> String {
    format!("{}, {} in all", counted(c.count, "wait"), ns(c.total_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_quality_and_tables_read_plainly() {
        use switchyard_model::{StackQuality, StackStats, UnwindTables};
        assert_eq!(stack_quality(&StackStats::default()), None);
        let stats = StackStats {
            unwind: "cfi".into(),
            quality: vec![
                StackQuality {
                    profile: "oncpu".into(),
                    complete: 95,
                    total: 100,
                },
                StackQuality {
                    profile: "offcpu".into(),
                    complete: 2_000,
                    total: 2_000,
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            stack_quality(&stats).unwrap(),
            "user stacks by CFI (.eh_frame), frame pointers where none; complete to the \
             thread's start: on-CPU 95.0%, off-CPU 100.0%"
        );
        let t = UnwindTables {
            objects: 7,
            objects_without_cfi: 1,
            objects_not_loaded: 2,
            rows: 153_201,
            capacity_rows: 4 << 20,
            bytes: 153_201 * 8,
            capacity_bytes: 32 << 20,
            build_us: 85_000,
            failures: Vec::new(),
        };
        assert_eq!(
            unwind_tables(&t),
            "7 objects (1 without CFI), 153,201 rows, 1.2 MiB of 32.0 MiB, built in 85.0 ms; \
             2 did not fit (raise --unwind-rows)"
        );
    }
}
