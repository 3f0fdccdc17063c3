//! spinlock-broker: a message broker whose send path appends to a commit log under one lock,
//! to compare a spin lock, a futex mutex and an adaptive backoff spin lock (the `spin`,
//! `mutex` and `abs` builds, chosen at run time with `--lock`).
//!
//! - [`locks`]: the three locks, with unmangled take/release symbols for uprobes;
//! - [`commit_log`]: segment files, the offset index, the flush policy;
//! - [`protocol`]: length-prefixed messages and offset acks;
//! - [`server`]: the listener, a thread per producer, the exit summary.
//!
//! The `spinlock-broker` binary is the server (the profiled target); `spinlock-broker-driver`
//! is the load generator, which writes a `switchyard-harness` driver result.

pub mod commit_log;
pub mod locks;
pub mod protocol;
pub mod server;

/// The workload's name in driver results.
pub const WORKLOAD: &str = "spinlock-broker";
