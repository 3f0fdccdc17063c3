//! read-state-cache: a per-user/per-channel "read state" service, an LRU of counters written
//! behind to an embedded store, served in two builds with one wire protocol and one
//! behaviour: this crate's tokio server (`rust`) and the Go server in `go/` (`go`), whose
//! garbage collector has to scan the whole cache.
//!
//! - [`protocol`]: length-prefixed binary requests (ack, mention, get) and responses;
//! - [`store`]: the append-only log both servers read and write (same format);
//! - [`cache`]: the sharded LRU with write-behind on eviction and in flush passes;
//! - [`server`]: the listener, a task per connection, the flusher, the exit summary.
//!
//! The `read-state-cache` binary is the Rust server; `read-state-cache-driver` is the load
//! generator for either server, which writes a `switchyard-harness` driver result.

pub mod cache;
pub mod protocol;
pub mod server;
pub mod store;

/// The workload's name in driver results.
pub const WORKLOAD: &str = "read-state-cache";
