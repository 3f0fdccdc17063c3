//! A shutdown flag raised by SIGINT or SIGTERM, polled by servers and drivers.

use std::{
    io,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

/// Raised once; every clone sees it.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    flag: Arc<AtomicBool>,
}

impl Shutdown {
    /// A flag no signal raises (tests, or a caller with its own signal handling).
    pub fn new() -> Self {
        Self::default()
    }

    /// A flag raised by the first SIGINT or SIGTERM. A second one, while the process is
    /// still winding down, ends it at once (exit code 130 for SIGINT, 143 for SIGTERM), so a
    /// stuck shutdown can always be interrupted.
    pub fn install() -> io::Result<Self> {
        let shutdown = Self::new();
        for (signal, code) in [
            (signal_hook::consts::SIGINT, 130),
            (signal_hook::consts::SIGTERM, 143),
        ] {
            // Order matters: the conditional exit sees the flag before this signal sets it.
            signal_hook::flag::register_conditional_shutdown(
                signal,
                code,
                Arc::clone(&shutdown.flag),
            )?;
            signal_hook::flag::register(signal, Arc::clone(&shutdown.flag))?;
        }
        Ok(shutdown)
    }

    pub fn requested(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    pub fn request(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let a = Shutdown::new();
        let b = a.clone();
        assert!(!b.requested());
        a.request();
        assert!(b.requested());
    }
}
