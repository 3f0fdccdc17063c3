//! The timestamps carried in voice packets: CLOCK_MONOTONIC in nanoseconds. The driver's
//! senders and receivers run on one host, so a receiver subtracts a sender's stamp directly.

/// Now, on CLOCK_MONOTONIC, in nanoseconds (the clock `std::time::Instant` reads on Linux, and
/// the clock of switchyard's run files).
pub use switchyard_harness::monotonic_ns;

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
