//! Rust: the standard library, the crates that park threads (channels, parking_lot, tokio),
//! and the allocator plumbing a heap profile skips.

use crate::{Frames, Runtime};

pub struct Rust;

impl Runtime for Rust {
    fn name(&self) -> &'static str {
        "rust"
    }

    fn frames(&self) -> &'static Frames {
        &FRAMES
    }
}

const FRAMES: Frames = Frames {
    parks: &[
        "std::sys::sync::condvar::",
        "std::sync::condvar::",
        "std::sync::poison::condvar::",
        "std::thread::park",
        "std::sys::pal::unix::thread_parking",
        "std::sync::mpmc::",
        "std::sync::mpsc::",
        "crossbeam_channel::",
        "parking_lot::condvar::",
        "tokio::runtime::park",
        // Joining a thread: waiting for it to end, not for anything it holds.
        "std::thread::join_handle::",
        "std::thread::JoinInner",
        "std::thread::lifecycle::JoinInner",
    ],
    allocator: &["<dhat::Alloc as ", "__rustc::__rust_", "__rust_", "__rdl_"],
    library_prefixes: &[
        "std::",
        "core::",
        "alloc::",
        "<std::",
        "<core::",
        "<alloc::",
        "tokio::",
        "<tokio::",
        "crossbeam",
        "parking_lot",
        "<parking_lot",
        "libc::",
    ],
    // `UdpSocket::recv_from`, and std's socket under it (`recv_from_with_flags`).
    any_sender_receives: &["recv_from"],
    ..Frames::NONE
};

/// Whether `name` is a primitive's method inlined from core: `<u64>::wrapping_mul`,
/// `<[T]>::iter`.
pub fn is_primitive_method(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('<') else {
        return false;
    };
    rest.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .next()
        .is_some_and(|t| {
            t.is_empty()
                || matches!(
                    t,
                    "u8" | "u16"
                        | "u32"
                        | "u64"
                        | "u128"
                        | "usize"
                        | "i8"
                        | "i16"
                        | "i32"
                        | "i64"
                        | "i128"
                        | "isize"
                        | "f32"
                        | "f64"
                        | "bool"
                        | "char"
                        | "str"
                )
        })
}
