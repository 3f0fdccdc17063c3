//! Native code: the C library, its thread library and the loader. Every program's threads
//! start here, and every blocking call goes through one of its wrappers.

use crate::{Frames, Runtime};

pub struct Native;

impl Runtime for Native {
    fn name(&self) -> &'static str {
        "native"
    }

    fn frames(&self) -> &'static Frames {
        &FRAMES
    }
}

const FRAMES: Frames = Frames {
    thread_roots: &[
        "_start",
        "main",
        "__libc_start_main",
        "__libc_start_call_main",
        "start_thread",
        "clone",
        "clone3",
        "__clone",
        "__clone3",
        "__GI___clone",
        "__GI___clone3",
        "__clone_internal",
    ],
    parks: &[
        "pthread_cond_wait",
        "pthread_cond_timedwait",
        "__pthread_cond_wait",
        "___pthread_cond_wait",
        "___pthread_cond_timedwait",
        "__pthread_cond_timedwait",
        // Joining a thread: waiting for it to end, not for anything it holds.
        "pthread_join",
        "__pthread_clockjoin",
    ],
    library_modules: &["libc.so", "libpthread", "ld-linux", "[vdso]", "libstdc++"],
    library_prefixes: &[
        "__",
        "_start",
        "pthread_",
        "___pthread",
        "start_thread",
        "clone",
    ],
    // libc's wrappers, as a frame-pointer or CFI walk names them.
    library_names: &[
        "futex",
        "epoll_wait",
        "poll",
        "ppoll",
        "select",
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        "sleep",
        "fsync",
        "fdatasync",
        "recv",
        "recvfrom",
        "recvmsg",
        "recvmmsg",
        "send",
        "sendto",
        "sendmsg",
        "sendmmsg",
        "accept",
        "accept4",
        "read",
        "write",
        "readv",
        "writev",
        "syscall",
        "main",
    ],
    // glibc's `recvfrom` and `recvmmsg` (its `recv` passes no address: a connected socket's).
    any_sender_receives: &["recvfrom", "__libc_recvfrom", "recvmmsg", "__recvmmsg"],
    wrapping: &[
        "nanosleep",
        "clock_nanosleep",
        "usleep",
        "futex",
        "epoll_wait",
        "fsync",
        "syscall",
    ],
    ..Frames::NONE
};
