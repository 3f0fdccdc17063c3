//! Node.js: libuv's waits, as its threads make them (the event loop's epoll is the kernel's,
//! its thread pool's condition variable the C library's).

use crate::{Frames, Runtime};

pub struct Node;

impl Runtime for Node {
    fn name(&self) -> &'static str {
        "node"
    }

    fn frames(&self) -> &'static Frames {
        &FRAMES
    }
}

const FRAMES: Frames = Frames {
    // A semaphore wait: a thread waiting to be posted work or its start (the inspector's I/O
    // thread waits on one for the whole life of the process).
    parks: &["uv_sem_wait"],
    ..Frames::NONE
};
