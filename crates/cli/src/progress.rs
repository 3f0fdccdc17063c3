//! The live line `record` shows on a terminal: elapsed time (against `--duration` when given)
//! and the target's context switches and CPU time so far, from the perf counters that are
//! open anyway. Nothing is drawn when stderr is not a terminal (CI logs, pipes), nor when the
//! target writes to the same terminal (a spawned command): a redraw clears the lines it
//! drew, and the target's output would be among them.

use std::{
    io::IsTerminal,
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use switchyard_counters::Counters;
use switchyard_model::{term::escape, units};

/// How often the figures are read and the line redrawn.
const EVERY: Duration = Duration::from_millis(250);

pub struct Progress {
    bar: Option<ProgressBar>,
    last: Option<Instant>,
}

impl Progress {
    pub fn start(duration: Option<Duration>, target_shares_terminal: bool) -> Progress {
        if target_shares_terminal || !std::io::stderr().is_terminal() {
            return Progress {
                bar: None,
                last: None,
            };
        }
        let bar = match duration {
            Some(d) => {
                let bar = ProgressBar::with_draw_target(
                    Some(d.as_millis() as u64),
                    ProgressDrawTarget::stderr_with_hz(4),
                );
                bar.set_style(
                    ProgressStyle::with_template(
                        "{spinner} recording [{bar:20}] {elapsed}/{prefix}  {wide_msg}",
                    )
                    .expect("a valid template")
                    .progress_chars("=> "),
                );
                bar.set_prefix(units::seconds_short(d.as_secs_f64()));
                bar
            }
            None => {
                let bar =
                    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
                bar.set_style(
                    ProgressStyle::with_template("{spinner} recording {elapsed}  {wide_msg}")
                        .expect("a valid template"),
                );
                bar
            }
        };
        Progress {
            bar: Some(bar),
            last: None,
        }
    }

    /// Redraws at most every 250 ms with `elapsed` and the counters' figures so far.
    pub fn tick(&mut self, elapsed: Duration, counters: Option<&mut Counters>) {
        let Some(bar) = &self.bar else { return };
        if self.last.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        if bar.length().is_some() {
            bar.set_position(elapsed.as_millis() as u64);
        } else {
            bar.tick();
        }
        let mut parts = Vec::new();
        if let Some(c) = counters {
            let rows = c.read();
            let value = |name: &str| rows.iter().find(|r| r.name == name).and_then(|r| r.value);
            if let Some(n) = value("context-switches") {
                parts.push(format!("{} switches", units::thousands(n)));
            }
            if let Some(ns) = value("task-clock") {
                parts.push(format!("{} on CPU", units::ns(ns)));
            }
        }
        // Figures only today; escaped all the same, so that a name added to the line later
        // (a thread's, the target's) cannot act on the terminal it redraws.
        bar.set_message(escape(&parts.join(" · ")).into_owned());
    }

    /// Clears the line before the summary is printed.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
