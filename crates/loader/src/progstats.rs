//! The recorder's BPF programs' own run time, sampled.
//!
//! The kernel counts each program's runs and their time only while run-time statistics are
//! on (`BPF_ENABLE_STATS`, held by a file descriptor). That adds two clock reads to every run
//! of every program on the host: about 2% of the broker's CPU at its event rate, too much to
//! keep on. So a thread turns them on for [`SLICE`] at a random point of every [`PERIOD`] of
//! the recording, a tenth of it, and the counts are scaled by the share they covered. The
//! random point keeps a periodic workload (one request a second) from always falling inside
//! the slices, or outside them. A host that keeps the statistics on
//! (`kernel.bpf_stats_enabled = 1`) covers the whole recording, and nothing is turned on.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use aya::{
    Ebpf,
    sys::{Stats, enable_stats},
};
use switchyard_model::{ProgramTime, ProgramTimes};

/// How long the statistics are on each time.
pub const SLICE: Duration = Duration::from_millis(100);
/// One slice in each period.
pub const PERIOD: Duration = Duration::from_secs(1);
/// How often a sleeping sampler looks whether the recording has stopped.
const NAP: Duration = Duration::from_millis(20);

/// The statistics' sampler over one recording, from [`Sampler::start`] to [`Sampler::stop`]
/// (dropped without it, it stops its thread all the same).
pub struct Sampler {
    started: Instant,
    /// The thread turning the statistics on, and its stop flag; `None` where the host keeps
    /// them on and there is nothing to turn on.
    thread: Option<(Arc<AtomicBool>, JoinHandle<Duration>)>,
}

/// What the sampler covered: the share of the recording the statistics were on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Covered(pub f64);

impl Sampler {
    /// Starts sampling, or `None` where the statistics cannot be turned on (a kernel without
    /// `BPF_ENABLE_STATS`, a recorder without CAP_SYS_ADMIN): the run then has no programs'
    /// times, and says nothing of them.
    pub fn start() -> Option<Sampler> {
        let started = Instant::now();
        if host_keeps_stats_on() {
            return Some(Sampler {
                started,
                thread: None,
            });
        }
        // Once, to know it can be done before a thread is started to do it.
        drop(enable_stats(Stats::RunTime).ok()?);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("bpf-stats".into())
            .spawn(move || sample(&stopping, seed()))
            .ok()?;
        Some(Sampler {
            started,
            thread: Some((stop, thread)),
        })
    }

    /// Stops sampling: the share of the recording the statistics were on.
    pub fn stop(mut self) -> Covered {
        let whole = self.started.elapsed();
        // No thread: the host kept the statistics on throughout.
        let Some((stop, thread)) = self.thread.take() else {
            return Covered(1.0);
        };
        stop.store(true, Ordering::Relaxed);
        let on = thread.join().unwrap_or_default();
        Covered(if whole.is_zero() {
            0.0
        } else {
            (on.as_secs_f64() / whole.as_secs_f64()).min(1.0)
        })
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some((stop, _)) = &self.thread {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

/// Whether the host keeps BPF run-time statistics on for every program.
fn host_keeps_stats_on() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}

/// A seed for the slices' random points: the clock's nanoseconds and the thread's address.
fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ (&t as *const u64 as u64)) | 1
}

/// The next of a xorshift64 sequence.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Sleeps until `until` or until `stop` is raised; whether it was raised.
fn nap_until(until: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        std::thread::sleep((until - now).min(NAP));
    }
}

/// The sampler's thread: a slice at a random point of each period until `stop`; the time
/// the statistics were on.
fn sample(stop: &AtomicBool, mut rng: u64) -> Duration {
    let mut on = Duration::ZERO;
    let room = (PERIOD - SLICE).as_micros() as u64;
    let mut period = Instant::now();
    loop {
        let at = period + Duration::from_micros(next(&mut rng) % room);
        if nap_until(at, stop) {
            return on;
        }
        let Ok(fd) = enable_stats(Stats::RunTime) else {
            return on;
        };
        let from = Instant::now();
        let stopped = nap_until(from + SLICE, stop);
        drop(fd);
        on += from.elapsed();
        if stopped {
            return on;
        }
        period += PERIOD;
    }
}

/// Each program of `ebpf` that ran while the statistics were on, the longest first, with the
/// share of the recording they covered.
pub fn read(ebpf: &Ebpf, covered: Covered) -> ProgramTimes {
    let mut programs: Vec<ProgramTime> = ebpf
        .programs()
        .filter_map(|(name, p)| {
            let info = p.info().ok()?;
            (info.run_count() > 0).then(|| ProgramTime {
                name: name.to_string(),
                runs: info.run_count(),
                run_ns: info.run_time().as_nanos() as u64,
            })
        })
        .collect();
    programs.sort_by(|a, b| b.run_ns.cmp(&a.run_ns).then(a.name.cmp(&b.name)));
    ProgramTimes {
        covered: covered.0,
        programs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_fall_anywhere_in_their_period() {
        let mut rng = 0x9e37_79b9_7f4a_7c15;
        let room = (PERIOD - SLICE).as_micros() as u64;
        let points: Vec<u64> = (0..10_000).map(|_| next(&mut rng) % room).collect();
        // Each tenth of the room holds about a tenth of the points: no part of a second is
        // always, or never, sampled.
        for tenth in 0..10 {
            let n = points.iter().filter(|&&p| p * 10 / room == tenth).count();
            assert!((800..1200).contains(&n), "tenth {tenth}: {n} of 10,000");
        }
    }
}
