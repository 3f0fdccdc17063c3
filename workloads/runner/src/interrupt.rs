//! Ctrl-C while a run goes on: the runner keeps going so that what was recorded is written and
//! reported, and passes SIGINT on to the recorder.
//!
//! A Ctrl-C on a terminal reaches every process of the foreground group (the server, the
//! driver and switchyard each end cleanly on it); a SIGINT or SIGTERM sent to the runner alone
//! reaches only the runner, which forwards SIGINT to the `switchyard record` it runs. A second
//! SIGINT is harmless to switchyard (it ends on the first), which is why only the recorder is
//! forwarded to: a driver's second one would end it at once, without its result.

use std::{
    io,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
};

use signal_hook::{
    consts::{SIGINT, SIGTERM},
    iterator::Signals,
};

/// Raised by SIGINT or SIGTERM; holds the processes to forward SIGINT to.
#[derive(Clone, Debug, Default)]
pub struct Interrupts {
    raised: Arc<AtomicBool>,
    forward: Arc<Mutex<Vec<u32>>>,
}

/// Forwarding to one process, for as long as this lives.
pub struct Forwarding {
    interrupts: Interrupts,
    pid: u32,
}

impl Interrupts {
    /// Never raised by a signal (tests).
    pub fn none() -> Interrupts {
        Interrupts::default()
    }

    /// Handles SIGINT and SIGTERM from now on, in a thread of its own.
    pub fn install() -> io::Result<Interrupts> {
        let interrupts = Interrupts::default();
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        let shared = interrupts.clone();
        thread::spawn(move || {
            for _ in signals.forever() {
                shared.raised.store(true, Ordering::SeqCst);
                for pid in shared.pids() {
                    send_sigint(pid);
                }
            }
        });
        Ok(interrupts)
    }

    pub fn raised(&self) -> bool {
        self.raised.load(Ordering::SeqCst)
    }

    /// Forwards SIGINT to `pid` until the guard is dropped; if an interrupt came already, it
    /// is passed on at once.
    pub fn forward_to(&self, pid: u32) -> Forwarding {
        self.lock().push(pid);
        if self.raised() {
            send_sigint(pid);
        }
        Forwarding {
            interrupts: self.clone(),
            pid,
        }
    }

    fn pids(&self) -> Vec<u32> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.forward.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.interrupts.lock().retain(|p| *p != self.pid);
    }
}

fn send_sigint(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) on a child of the runner; its guard is dropped as soon as it has
        // been reaped (pids are not reused within that instant). No memory is involved.
        unsafe { libc::kill(pid, libc::SIGINT) };
    }
}
