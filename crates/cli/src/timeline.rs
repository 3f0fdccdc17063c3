//! The timeline (`record --timeline`): the kernel side's event stream, into per-thread state
//! slices and time-stamped rows. Pure, so it is tested from fixtures.

use std::collections::{BTreeMap, HashMap};

use switchyard_loader::{PREEMPT_FLAG, TimelineEvent, WOKEN_FLAG, event_kind as kind};
use switchyard_model::{ThreadState, Timeline, TimelineThread, raw::RawSample};

/// A thread's state as the events so far tell it.
#[derive(Clone, Copy, PartialEq)]
enum Now {
    /// No event yet.
    Unseen,
    Running,
    Off(ThreadState, u32),
}

/// The timeline of `events` (any order) in the window `[start, end]` (CLOCK_MONOTONIC ns),
/// and the distinct stacks its samples refer to, to symbolise into `Timeline::stacks` in the
/// order given.
///
/// A voluntary off-CPU interval is two slices, as the kernel side splits its time: sleeping
/// (or uninterruptible, …) from the switch-out to the first wakeup, then `Runnable`, waiting
/// for a CPU, from the wakeup to the switch-in. A preempted interval is `Runnable` throughout.
pub fn build(
    events: &[TimelineEvent],
    start: u64,
    end: u64,
    comms: &HashMap<u32, String>,
    lost: u64,
    syscall_ns: u64,
) -> (Timeline, Vec<RawSample>) {
    let mut events: Vec<&TimelineEvent> = events
        .iter()
        .filter(|e| e.ts >= start && e.ts <= end)
        .collect();
    events.sort_by_key(|e| e.ts);
    let rel = |ts: u64| ts - start;
    let mut tl = Timeline {
        syscall_ns,
        lost,
        ..Default::default()
    };
    let mut threads = Threads {
        start,
        comms,
        threads: BTreeMap::new(),
        tgids: HashMap::new(),
        woken: HashMap::new(),
    };
    let mut stacks: HashMap<(u32, i32, i32), u32> = HashMap::new();
    let mut keys: Vec<RawSample> = Vec::new();
    let mut stack = |tgid: u32, user: u32, kernel: u32| -> u32 {
        let key = (tgid, user as i32, kernel as i32);
        *stacks.entry(key).or_insert_with(|| {
            keys.push(RawSample {
                tgid,
                user_stack: key.1,
                kernel_stack: key.2,
                ..Default::default()
            });
            keys.len() as u32 - 1
        })
    };
    for e in &events {
        match e.kind {
            kind::SWITCH_OUT | kind::SWITCH_IN => threads.switch(e),
            kind::WAKEUP => {
                tl.wakeups.push((rel(e.ts), e.tid, e.a, e.b));
                threads.wakeup(e);
            }
            kind::SYSCALL => tl
                .syscalls
                .push((rel(e.ts), e.value, e.tid, e.a, e.b as i32 as i64)),
            kind::FUTEX => tl.futex.push((rel(e.ts), e.value, e.tid)),
            kind::ONCPU => tl.samples.push((rel(e.ts), e.tid, stack(e.c, e.a, e.b))),
            kind::OFFCPU => {
                let tgid = threads.tgids.get(&e.tid).copied().unwrap_or(0);
                // The part after a wakeup waits for a CPU, whatever the thread slept in.
                let state = if e.c & WOKEN_FLAG != 0 {
                    ThreadState::Runnable
                } else {
                    ThreadState::from_switch(e.c, PREEMPT_FLAG)
                };
                tl.offcpu.push((
                    rel(e.ts),
                    e.tid,
                    stack(tgid, e.a, e.b),
                    e.value,
                    state as u8,
                ));
            }
            _ => {}
        }
    }
    threads.finish(end, &mut tl);
    (tl, keys)
}

/// Every thread's slices so far, and what the events have told of each.
struct Threads<'a> {
    start: u64,
    comms: &'a HashMap<u32, String>,
    /// By (tgid, tid): the thread, its state now, and since when.
    threads: BTreeMap<(u32, u32), (TimelineThread, Now, u64)>,
    tgids: HashMap<u32, u32>,
    /// Wakeups of threads with no switch yet (off CPU since before the start), by tid: the
    /// first switch-in then ends a wait for a CPU that began there.
    woken: HashMap<u32, u64>,
}

impl Threads<'_> {
    /// A switch out or in: the slice it ends, and the state it starts.
    fn switch(&mut self, e: &TimelineEvent) {
        let (start, comms) = (self.start, self.comms);
        let rel = |ts: u64| ts - start;
        self.tgids.insert(e.tid, e.c);
        let woke = self.woken.remove(&e.tid);
        let (t, now, since) = self.threads.entry((e.c, e.tid)).or_insert_with(|| {
            (
                TimelineThread {
                    tgid: e.c,
                    tid: e.tid,
                    comm: comms.get(&e.tid).cloned().unwrap_or_default(),
                    ..Default::default()
                },
                Now::Unseen,
                start,
            )
        });
        // What the thread did since the last event: an interval the events left
        // unsaid (a switch the kernel did not report) keeps the last state known.
        // A switch-in while running: the switch-out before it was not reported (the
        // kernel does not report every switch). The kernel side takes the thread to
        // have left at once and counts no switch; the running slice goes on.
        if *now == Now::Running && e.kind == kind::SWITCH_IN {
            return;
        }
        let (state, syscall) = match (*now, e.kind) {
            (Now::Running, _) => (ThreadState::Running, 0),
            (Now::Off(s, nr), _) => (s, nr),
            (Now::Unseen, kind::SWITCH_OUT) => (ThreadState::Running, 0),
            (Now::Unseen, _) => (ThreadState::Unknown, 0),
        };
        // Off CPU since before the start and woken since: runnable from the wakeup.
        if state == ThreadState::Unknown
            && let Some(woke) = woke
            && e.ts > woke
        {
            t.slices
                .push((rel(woke), e.ts - woke, ThreadState::Runnable as u8, 0));
        }
        // Off CPU since before its first event (or created since): nothing to draw.
        if state != ThreadState::Unknown && (e.ts > *since || state == ThreadState::Running) {
            t.slices
                .push((rel(*since), e.ts - *since, state as u8, syscall));
        }
        // A switch-out while off CPU: its switch-in was not reported. The thread ran
        // in between, when is not known: its running slice is drawn at the switch-out,
        // with no length, so every switch still ends a running slice.
        if e.kind == kind::SWITCH_OUT && matches!(*now, Now::Off(..)) {
            t.slices.push((rel(e.ts), 0, ThreadState::Running as u8, 0));
        }
        *since = e.ts;
        *now = if e.kind == kind::SWITCH_OUT {
            t.switches += 1;
            Now::Off(ThreadState::from_switch(e.a, PREEMPT_FLAG), e.b)
        } else {
            Now::Running
        };
    }

    /// The first wakeup of a wait ends its blocked part: the thread is runnable from here,
    /// waiting for a CPU, still inside the syscall it slept in. Later wakeups, and wakeups of
    /// a running or preempted thread, change nothing.
    fn wakeup(&mut self, e: &TimelineEvent) {
        let start = self.start;
        let thread = self
            .tgids
            .get(&e.tid)
            .and_then(|&tgid| self.threads.get_mut(&(tgid, e.tid)));
        match thread {
            Some((t, now, since)) => {
                if let Now::Off(state, nr) = *now
                    && state != ThreadState::Runnable
                {
                    if e.ts > *since {
                        t.slices
                            .push((*since - start, e.ts - *since, state as u8, nr));
                    }
                    *since = e.ts;
                    *now = Now::Off(ThreadState::Runnable, nr);
                }
            }
            None => {
                self.woken.entry(e.tid).or_insert(e.ts);
            }
        }
    }

    /// Each thread's last slice, to the end of the window, into the timeline.
    fn finish(self, end: u64, tl: &mut Timeline) {
        let start = self.start;
        for (_, (mut t, now, since)) in self.threads {
            let (state, syscall) = match now {
                Now::Running => (ThreadState::Running, 0),
                Now::Off(s, nr) => (s, nr),
                Now::Unseen => continue,
            };
            if end > since {
                t.slices
                    .push((since - start, end - since, state as u8, syscall));
            }
            tl.threads.push(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, k: u32, tid: u32, a: u32, b: u32) -> TimelineEvent {
        TimelineEvent {
            ts,
            kind: k,
            tid,
            a,
            b,
            c: 7,
            ..Default::default()
        }
    }

    #[test]
    fn switches_become_gap_free_slices_with_their_wait() {
        // Thread 8 runs from before the start, blocks in read (nr 0) at 110, runs at 150,
        // is preempted at 170 and runs again at 180, until the end at 200.
        let events = [
            ev(110, kind::SWITCH_OUT, 8, 1, 1),
            ev(150, kind::SWITCH_IN, 8, 0, 0),
            ev(170, kind::SWITCH_OUT, 8, 0x100, 0),
            ev(180, kind::SWITCH_IN, 8, 0, 0),
            ev(90, kind::SWITCH_IN, 9, 0, 0), // before the start: left out
        ];
        let comms = HashMap::from([(8, "ping".to_string())]);
        let (tl, _) = build(&events, 100, 200, &comms, 0, 0);
        assert_eq!(tl.threads.len(), 1);
        let t = &tl.threads[0];
        assert_eq!((t.tid, t.comm.as_str(), t.switches), (8, "ping", 2));
        let running = ThreadState::Running as u8;
        assert_eq!(
            t.slices,
            vec![
                (0, 10, running, 0),
                (10, 40, ThreadState::Sleeping as u8, 1),
                (50, 20, running, 0),
                (70, 10, ThreadState::Runnable as u8, 0),
                (80, 20, running, 0),
            ]
        );
        let covered: u64 = t.slices.iter().map(|s| s.1).sum();
        assert_eq!(covered, 100);
    }

    #[test]
    fn a_sleep_is_sleeping_up_to_its_wakeup_then_runnable() {
        // Thread 8 sleeps in clock_nanosleep (nr 230) at 100, is woken at 150 (and again at
        // 160: only the first wakeup counts) and runs at 400. It is preempted at 420 (the
        // wakeup at 430 of a runnable thread changes nothing), runs at 450, is woken while
        // running at 460, sleeps at 470 and is woken at 480, still waiting at the end, 500.
        // Thread 9, off CPU since before the start, is woken at 200 and runs at 260.
        let events = [
            ev(100, kind::SWITCH_OUT, 8, 1, 231),
            ev(150, kind::WAKEUP, 8, 9, 7),
            ev(160, kind::WAKEUP, 8, 10, 7),
            ev(400, kind::SWITCH_IN, 8, 0, 0),
            ev(420, kind::SWITCH_OUT, 8, 0x100, 0),
            ev(430, kind::WAKEUP, 8, 9, 7),
            ev(450, kind::SWITCH_IN, 8, 0, 0),
            ev(460, kind::WAKEUP, 8, 9, 7),
            ev(470, kind::SWITCH_OUT, 8, 2, 0),
            ev(480, kind::WAKEUP, 8, 9, 7),
            ev(200, kind::WAKEUP, 9, 8, 7),
            ev(260, kind::SWITCH_IN, 9, 0, 0),
        ];
        let (tl, _) = build(&events, 0, 500, &HashMap::new(), 0, 0);
        let (run, sleep, runnable, disk) = (
            ThreadState::Running as u8,
            ThreadState::Sleeping as u8,
            ThreadState::Runnable as u8,
            ThreadState::Uninterruptible as u8,
        );
        assert_eq!(tl.threads.len(), 2);
        let t = &tl.threads[0];
        assert_eq!((t.tid, t.switches), (8, 3));
        assert_eq!(
            t.slices,
            vec![
                (0, 100, run, 0),
                (100, 50, sleep, 231),
                (150, 250, runnable, 231),
                (400, 20, run, 0),
                (420, 30, runnable, 0),
                (450, 20, run, 0),
                (470, 10, disk, 0),
                (480, 20, runnable, 0),
            ]
        );
        let t = &tl.threads[1];
        assert_eq!(t.tid, 9);
        assert_eq!(t.slices, vec![(200, 60, runnable, 0), (260, 240, run, 0)]);
        // Every wakeup is still listed.
        assert_eq!(tl.wakeups.len(), 6);
    }

    #[test]
    fn the_part_of_a_wait_after_its_wakeup_is_runnable_in_the_off_cpu_rows() {
        let mut sleep = ev(400, kind::OFFCPU, 8, 3, 5);
        sleep.c = 1;
        sleep.value = 50;
        let mut woken = ev(400, kind::OFFCPU, 8, 3, 5);
        woken.c = 1 | WOKEN_FLAG;
        woken.value = 250;
        let mut preempted = ev(450, kind::OFFCPU, 8, 3, 5);
        preempted.c = PREEMPT_FLAG;
        preempted.value = 30;
        let (tl, _) = build(&[sleep, woken, preempted], 0, 500, &HashMap::new(), 0, 0);
        let states: Vec<(u64, u8)> = tl.offcpu.iter().map(|o| (o.3, o.4)).collect();
        assert_eq!(
            states,
            vec![
                (50, ThreadState::Sleeping as u8),
                (250, ThreadState::Runnable as u8),
                (30, ThreadState::Runnable as u8),
            ]
        );
    }

    #[test]
    fn unreported_switches_keep_one_running_slice_per_switch() {
        // Out at 110, out again at 150 (the switch-in between was not reported), in at 160,
        // in again at 170 (the switch-out between was not reported), out at 180.
        let events = [
            ev(110, kind::SWITCH_OUT, 8, 1, 0),
            ev(150, kind::SWITCH_OUT, 8, 1, 0),
            ev(160, kind::SWITCH_IN, 8, 0, 0),
            ev(170, kind::SWITCH_IN, 8, 0, 0),
            ev(180, kind::SWITCH_OUT, 8, 0x100, 0),
        ];
        let (tl, _) = build(&events, 100, 200, &HashMap::new(), 0, 0);
        let t = &tl.threads[0];
        assert_eq!(t.switches, 3);
        let (run, sleep, runnable) = (
            ThreadState::Running as u8,
            ThreadState::Sleeping as u8,
            ThreadState::Runnable as u8,
        );
        assert_eq!(
            t.slices,
            vec![
                (0, 10, run, 0),
                (10, 40, sleep, 0),
                (50, 0, run, 0),
                (50, 10, sleep, 0),
                (60, 20, run, 0),
                (80, 20, runnable, 0),
            ]
        );
        let running = t.slices.iter().filter(|s| s.2 == run).count();
        assert_eq!(
            running as u64, t.switches,
            "every switch ends a running slice"
        );
    }

    #[test]
    fn samples_share_one_stack_row_per_distinct_stack() {
        let events = [
            ev(120, kind::ONCPU, 8, 3, 5),
            ev(130, kind::ONCPU, 8, 3, 5),
            ev(140, kind::ONCPU, 8, 4, 5),
        ];
        let (tl, keys) = build(&events, 100, 200, &HashMap::new(), 2, 0);
        assert_eq!(tl.samples, vec![(20, 8, 0), (30, 8, 0), (40, 8, 1)]);
        assert_eq!(keys.len(), 2);
        assert_eq!((keys[1].tgid, keys[1].user_stack), (7, 4));
        assert_eq!(tl.lost, 2);
    }
}
