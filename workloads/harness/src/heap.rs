//! The servers' heap profile: built with their `dhat` feature, a server runs under dhat's
//! allocator and writes a heap profile of the whole run as it exits, to `$DHAT_HEAP_FILE`
//! (default: `dhat-heap.json` in the working directory).
//!
//! A global allocator must be declared in the binary itself, so this is two macros, both
//! conditional on the *calling* crate's `dhat` feature (which turns on this crate's):
//!
//! ```ignore
//! switchyard_harness::heap_allocator!();
//!
//! fn main() -> ExitCode {
//!     switchyard_harness::heap_profile!();
//!     …
//! }
//! ```

#[cfg(feature = "dhat")]
pub use dhat::Alloc;

/// Where the profile goes: `$DHAT_HEAP_FILE`, else `dhat-heap.json`.
#[cfg(feature = "dhat")]
pub fn file_name() -> std::ffi::OsString {
    std::env::var_os("DHAT_HEAP_FILE").unwrap_or_else(|| "dhat-heap.json".into())
}

/// Starts dhat's heap profiler, writing to `file` when the returned guard drops.
#[cfg(feature = "dhat")]
pub fn profiler(file: impl AsRef<std::path::Path>) -> dhat::Profiler {
    dhat::Profiler::builder().file_name(file.as_ref()).build()
}

/// Declares dhat's allocator as the binary's global allocator when the calling crate is
/// built with its `dhat` feature; nothing otherwise.
#[macro_export]
macro_rules! heap_allocator {
    () => {
        #[cfg(feature = "dhat")]
        #[global_allocator]
        static HEAP_PROFILED_ALLOC: $crate::heap::Alloc = $crate::heap::Alloc;
    };
}

/// In `main`, first: profiles the heap until `main` returns, when the calling crate is
/// built with its `dhat` feature (see [`heap_allocator!`]); nothing otherwise.
#[macro_export]
macro_rules! heap_profile {
    () => {
        #[cfg(feature = "dhat")]
        let _heap_profile = $crate::heap::profiler($crate::heap::file_name());
    };
}
