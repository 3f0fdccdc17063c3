//! The report's composite lines (stack quality, unwind tables, futex waits, off-CPU sampling),
//! the sentences the terminal summary and the page share, and the shared formatters of [`switchyard_model::units`], re-exported so the report's modules and
//! the CLI name one path.

pub use switchyard_model::units::{
    bytes, command_line, counted, kib_as_mib, ns, ns_f, ns_short, percent, rate, significant,
    thousands, utc,
};

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
            format!("{name} {:.1}%", q.percent())
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
        "{} futex waits, {} in all (average {}, longest {}); {} timed out, {} did not block \
         (the word had changed)",
        thousands(w.count),
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
         unbiased ({} of {} blocks walked, {:.1}%; --offcpu-period 0 walks all)",
        ns(stats.offcpu_period_ns),
        ns(stats.offcpu_period_ns),
        thousands(stats.offcpu_walked),
        thousands(stats.offcpu_intervals),
        100.0 * stats.offcpu_walked as f64 / stats.offcpu_intervals as f64,
    ))
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
