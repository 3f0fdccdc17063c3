//! Loss detection per (sender, receiver) pair, from sequence numbers.
//!
//! The rules the driver follows:
//!
//! - A speaker's voice packets carry sequence numbers 1, 2, 3, …; a packet whose `sendto`
//!   failed does not use one (it is counted as a send error instead).
//! - For each pair, `expected` is the number of packets the sender sent, and `received` the
//!   number of distinct sequence numbers that reached the receiver before the end of the drain
//!   (the driver waits after its last send until everything expected has arrived, or the
//!   drain period passes). `lost = expected − received`: exact, whatever the order of
//!   arrival, and including packets lost at the tail (after the last one that arrived).
//! - Along the way, `gaps` counts sequence numbers skipped over when a higher one arrived (loss
//!   seen during the run), `late` those that then arrived after all (reordering) and
//!   `duplicates` repeated arrivals, which are not counted twice.
//! - Duplicates are recognised within a window of [`WINDOW`] sequence numbers behind the
//!   highest seen; an arrival further behind is `stale`: counted as received, unchecked.

/// How far behind the highest sequence number a duplicate is still recognised.
pub const WINDOW: u64 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;

/// What one arrival was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Higher than every sequence number before it.
    InOrder,
    /// Below the highest, not seen before: it fills a gap.
    Late,
    /// Seen before.
    Duplicate,
    /// More than [`WINDOW`] behind the highest: counted, not checked for a duplicate.
    Stale,
    /// Sequence number 0, which voice packets never carry.
    Invalid,
}

impl Arrival {
    /// Whether the arrival counts as a packet received.
    pub fn is_new(self) -> bool {
        matches!(self, Arrival::InOrder | Arrival::Late | Arrival::Stale)
    }
}

/// Loss figures of one pair, or summed over many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loss {
    pub expected: u64,
    pub received: u64,
    pub lost: u64,
    pub gaps: u64,
    pub late: u64,
    pub duplicates: u64,
    pub stale: u64,
}

impl Loss {
    pub fn add(&mut self, other: &Loss) {
        self.expected += other.expected;
        self.received += other.received;
        self.lost += other.lost;
        self.gaps += other.gaps;
        self.late += other.late;
        self.duplicates += other.duplicates;
        self.stale += other.stale;
    }

    /// `lost / expected`, 0 when nothing was expected.
    pub fn ratio(&self) -> f64 {
        if self.expected == 0 {
            0.0
        } else {
            self.lost as f64 / self.expected as f64
        }
    }
}

/// The arrivals of one sender's sequence numbers at one receiver.
#[derive(Clone, Debug, Default)]
pub struct SeqTracker {
    /// Bit `seq % WINDOW` is set when `seq` (within the window) arrived; allocated on the
    /// first arrival, so pairs that never hear from each other cost nothing.
    ring: Vec<u64>,
    highest: u64,
    received: u64,
    gaps: u64,
    late: u64,
    duplicates: u64,
    stale: u64,
}

fn slot(seq: u64) -> (usize, u64) {
    let i = seq % WINDOW;
    ((i / 64) as usize, 1u64 << (i % 64))
}

impl SeqTracker {
    pub fn record(&mut self, seq: u64) -> Arrival {
        if seq == 0 {
            return Arrival::Invalid;
        }
        if self.ring.is_empty() {
            self.ring = vec![0; WORDS];
        }
        if seq > self.highest {
            // The slots of the sequence numbers entering the window held those leaving it.
            let advance = seq - self.highest;
            if advance >= WINDOW {
                self.ring.fill(0);
            } else {
                for s in self.highest + 1..seq {
                    let (w, bit) = slot(s);
                    self.ring[w] &= !bit;
                }
            }
            let (w, bit) = slot(seq);
            self.ring[w] |= bit;
            self.gaps += advance - 1;
            self.highest = seq;
            self.received += 1;
            return Arrival::InOrder;
        }
        if self.highest - seq >= WINDOW {
            self.stale += 1;
            self.received += 1;
            return Arrival::Stale;
        }
        let (w, bit) = slot(seq);
        if self.ring[w] & bit != 0 {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.ring[w] |= bit;
        self.late += 1;
        self.received += 1;
        Arrival::Late
    }

    /// The highest sequence number seen (0 before any).
    pub fn highest(&self) -> u64 {
        self.highest
    }

    /// The pair's figures, given that the sender sent sequence numbers `1..=sent`.
    pub fn loss(&self, sent: u64) -> Loss {
        let received = self.received.min(sent);
        Loss {
            expected: sent,
            received,
            lost: sent - received,
            gaps: self.gaps,
            late: self.late,
            duplicates: self.duplicates,
            stale: self.stale,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(seqs: impl IntoIterator<Item = u64>) -> SeqTracker {
        let mut t = SeqTracker::default();
        for s in seqs {
            t.record(s);
        }
        t
    }

    #[test]
    fn in_order_is_no_loss() {
        let t = track(1..=100);
        assert_eq!(
            t.loss(100),
            Loss {
                expected: 100,
                received: 100,
                ..Loss::default()
            }
        );
        assert_eq!(t.highest(), 100);
    }

    #[test]
    fn gaps_tail_and_head_are_lost() {
        // 1 and 2 never arrive (head), 5 and 6 skipped (gap), 9 and 10 never sent on (tail).
        let t = track([3, 4, 7, 8]);
        let l = t.loss(10);
        assert_eq!((l.expected, l.received, l.lost), (10, 4, 6));
        assert_eq!(l.gaps, 4, "1, 2, 5 and 6 were skipped over");
        assert_eq!(l.late, 0);
        assert!((l.ratio() - 0.6).abs() < 1e-12);
    }

    #[test]
    fn late_arrivals_fill_gaps_and_duplicates_count_once() {
        let mut t = SeqTracker::default();
        assert_eq!(t.record(1), Arrival::InOrder);
        assert_eq!(t.record(3), Arrival::InOrder);
        assert_eq!(t.record(2), Arrival::Late);
        assert_eq!(t.record(2), Arrival::Duplicate);
        assert_eq!(t.record(3), Arrival::Duplicate);
        assert_eq!(t.record(0), Arrival::Invalid);
        let l = t.loss(3);
        assert_eq!(
            (l.received, l.lost, l.gaps, l.late, l.duplicates),
            (3, 0, 1, 1, 2)
        );
    }

    #[test]
    fn the_window_slides() {
        let mut t = SeqTracker::default();
        assert_eq!(t.record(1), Arrival::InOrder);
        assert_eq!(t.record(WINDOW + 1), Arrival::InOrder);
        // 1 shares its slot with WINDOW + 1, and is now out of the window.
        assert_eq!(t.record(1), Arrival::Stale);
        // 2 is within the window and was never seen: its slot was cleared by the advance.
        assert_eq!(t.record(2), Arrival::Late);
        assert_eq!(t.record(2), Arrival::Duplicate);
        // A jump of more than a window clears it all.
        assert_eq!(t.record(5 * WINDOW), Arrival::InOrder);
        assert_eq!(t.record(5 * WINDOW - 1), Arrival::Late);
        let l = t.loss(5 * WINDOW);
        assert_eq!(l.stale, 1);
        assert_eq!(l.received, 6);
    }

    #[test]
    fn sums_add_up() {
        let mut total = Loss::default();
        total.add(&track(1..=10).loss(10));
        total.add(&track([1, 2, 4]).loss(5));
        assert_eq!((total.expected, total.received, total.lost), (15, 13, 2));
        assert_eq!(Loss::default().ratio(), 0.0);
    }
}
