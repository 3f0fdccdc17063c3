//! The timestamps carried in voice packets: CLOCK_MONOTONIC in nanoseconds. The driver's
//! senders and receivers run on one host, so a receiver subtracts a sender's stamp directly.

/// Now, on CLOCK_MONOTONIC, in nanoseconds (the clock `std::time::Instant` reads on Linux).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer. CLOCK_MONOTONIC
    // always exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_goes_back() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(1));
        let b = monotonic_ns();
        assert!(b > a, "{a} then {b}");
    }
}
