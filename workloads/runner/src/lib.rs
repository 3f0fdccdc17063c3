//! switchyard's workloads as one catalogue, and the runner that profiles them.
//!
//! - [`catalogue`]: every workload, its builds, its load's knobs and defaults, the uprobe
//!   spans and record flags of each build, how switchyard attaches (spawned, or after the
//!   server is filled), and the prefill and driver commands.
//! - [`plan`]: a request (workload, build, `NAME=VALUE` knobs, seconds) validated into a
//!   [`plan::Plan`] before anything starts.
//! - [`runner`]: one run, started, made ready and stopped through `switchyard-harness`
//!   (`ServerProcess` and its ready line; `switchyard record --ready-fd` for attaching).
//! - [`recipes`]: what the `just` recipes run: profile, compare, the stories, the overhead.
//! - [`bench`]: how the benches interleave their runs, take medians and ratios, and print.
//! - [`attach`]: the tools a bench attaches to a running pid (switchyard, perf, bpftrace).
//! - [`servers`]: `bench-servers`, what recording costs redis, nginx and the broker.
//! - [`per_event`]: `bench-overhead`, what recording adds per syscall, switch and sample.
//! - [`spans`]: `bench-overhead`'s span section, what a span costs per instance.
//! - [`overhead`]: what recording costs a workload's throughput, untraced against recorded.
//! - [`story`]: the story tables, from run files through `metrics` and `compare`.
//! - [`chart`]: the stories' charts, panels of points or lines drawn to SVG.
//!
//! The crates under `crates/` never depend on this one.

pub mod attach;
pub mod bench;
pub mod catalogue;
pub mod chart;
pub mod fail;
pub mod interrupt;
pub mod overhead;
pub mod per_event;
pub mod plan;
pub mod prerequisites;
pub mod recipes;
pub mod runner;
pub mod servers;
pub mod story;

pub use fail::Failure;
pub use interrupt::Interrupts;
pub use plan::{Plan, PlanError, Request};
pub use runner::{Outcome, Tools};
