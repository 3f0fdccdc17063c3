//! A recording's life once attached: its clock, the event streams, reading the maps (at the
//! end, or window by window) and bounding a continuous recording's maps.

use aya::{
    Ebpf,
    maps::{Array, HashMap, MapData, PerCpuArray},
};
use switchyard_common::{
    GcEvent as RawGcEvent, PyProc, SPAN_CTL_WORDS, SpanHist, SpanInstance, ThreadStats, UserStack,
    drops, maps, programs, span_flags,
};

use crate::{
    Collected, Error, Evicted, GcEvent, GcKind, Probes, TimelineEvent, convert,
    error::map_err,
    read, spans, threads,
    window::{Cumulative, LastCut, Seen},
};

impl Probes {
    /// What each span's probes cost the target over the rows `spans` read: the calls that
    /// hit them (instances, nested ones too) times what their kind of breakpoint costs here.
    fn probe_costs(
        &self,
        spans: &[switchyard_model::SpanRow],
    ) -> Option<switchyard_model::ProbeCosts> {
        let traps = self.trap_costs?;
        let probes = spans
            .iter()
            .zip(&self.spans)
            .zip(&self.span_placements)
            .map(|((row, span), placed)| {
                let emulated = placed.as_ref().is_some_and(|p| p.emulated);
                let shared_return = placed
                    .as_ref()
                    .is_some_and(|p| !span.go && p.ret_probe == p.entry);
                let nested = row.anatomy.as_ref().map_or(0, |a| a.nested);
                let ns_per_call = match (placed, span.go) {
                    (None, _) => None,
                    // A Go span leaves by a plain probe on one of its RETs.
                    (Some(_), true) => traps.per_go_call(emulated),
                    (Some(_), false) => Some(traps.per_call(emulated, shared_return)),
                };
                switchyard_model::ProbeCost {
                    span: row.label.clone(),
                    symbol: span.symbol.clone(),
                    emulated,
                    shared_return,
                    go: span.go,
                    calls: row.stats.count + nested,
                    ns_per_call,
                }
            })
            .collect();
        Some(switchyard_model::ProbeCosts { traps, probes })
    }

    /// Where attaching spent its time: each step's name and length, in order.
    pub fn attach_steps(&self) -> &[(String, std::time::Duration)] {
        &self.attach_steps
    }

    /// Loads the unwind tables of a followed process that started, exec'd or mapped new code
    /// since the last call, from the text of its `/proc/<pid>/maps` (`None`: it has gone).
    /// Call it often: until then its stacks fall back to frame pointers.
    pub fn refresh_unwind(&mut self, pid: u32, maps_text: Option<&str>) -> Result<(), Error> {
        self.refresh_python(pid, maps_text)?;
        match &mut self.tables {
            Some(t) => t.refresh(&mut self.ebpf, pid, maps_text),
            None => Ok(()),
        }
    }

    /// Lists `pid` for the kernel side's Python frame walk once it maps an interpreter (at
    /// exec, or when a program loads libpython), and forgets it when it has gone.
    fn refresh_python(&mut self, pid: u32, maps_text: Option<&str>) -> Result<(), Error> {
        let name = maps::PY_PROCS;
        let Some(finder) = self.python.as_mut() else {
            return Ok(());
        };
        let Some(text) = maps_text else {
            if finder.procs.remove(&pid).is_some() {
                let map = self.ebpf.map_mut(name).ok_or(Error::MissingMap(name))?;
                let mut procs: HashMap<&mut MapData, u32, PyProc> =
                    HashMap::try_from(map).map_err(map_err(name))?;
                let _ = procs.remove(&pid);
            }
            return Ok(());
        };
        let Some(found) = finder.find(text) else {
            return Ok(());
        };
        if let Some(gil) = found.gil {
            finder.gils.insert(pid, gil);
        }
        let proc = found.proc;
        if finder.procs.get(&pid) == Some(&proc) {
            return Ok(());
        }
        let map = self.ebpf.map_mut(name).ok_or(Error::MissingMap(name))?;
        let mut procs: HashMap<&mut MapData, u32, PyProc> =
            HashMap::try_from(map).map_err(map_err(name))?;
        procs.insert(pid, proc, 0).map_err(map_err(name))?;
        finder.procs.insert(pid, proc);
        Ok(())
    }

    /// Moves the Go GC events recorded so far into `out` (call it often: the ring is finite).
    pub fn drain_gc_events(&mut self, out: &mut Vec<GcEvent>) {
        if let Some(ring) = &mut self.gc_events {
            while let Some(item) = ring.next() {
                if item.len() >= std::mem::size_of::<RawGcEvent>() {
                    // SAFETY: the kernel side writes whole GcEvents; read unaligned.
                    let e = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const RawGcEvent) };
                    if let Some(kind) = GcKind::from_index(e.kind) {
                        out.push(GcEvent {
                            mono_ns: e.ts,
                            kind,
                            tid: e.tid,
                        });
                    }
                }
            }
        }
    }

    /// Keeps the span instances sent so far, and every 100 ms tells the kernel side again
    /// which instances to send: those at least as slow as the P95 so far (and than the
    /// fastest kept, once the table of kept ones is full), and one in N of all (call it
    /// often: the ring is finite).
    pub fn poll_spans(&mut self) -> Result<(), Error> {
        let Some(ring) = &mut self.span_events else {
            return Ok(());
        };
        while let Some(item) = ring.next() {
            if item.len() >= std::mem::size_of::<SpanInstance>() {
                // SAFETY: the kernel side writes whole SpanInstances; read unaligned.
                let i = unsafe { std::ptr::read_unaligned(item.as_ptr() as *const SpanInstance) };
                // `index` is the span plus one (0 would be no span open).
                if let Some(k) = self.span_kept.get_mut((i.index as usize).wrapping_sub(1)) {
                    k.add(i);
                }
            }
        }
        if self.started == 0
            || self
                .span_polled
                .is_some_and(|t| t.elapsed() < std::time::Duration::from_millis(100))
        {
            return Ok(());
        }
        self.span_polled = Some(std::time::Instant::now());
        let elapsed =
            switchyard_model::driver::monotonic_ns().saturating_sub(self.started) as f64 / 1e9;
        let hists = self.span_hists()?;
        for (i, h) in hists.iter().enumerate() {
            let c = spans::control(h, elapsed);
            if self.span_control.get(i) != Some(&c) {
                self.set_span_ctl(i, 0, c.0)?;
                self.set_span_ctl(i, 1, c.1)?;
            }
            if let Some(slot) = self.span_control.get_mut(i) {
                *slot = c;
            }
            let floor = self.span_kept.get(i).map_or(0, spans::Kept::floor);
            if self.span_floor.get(i) != Some(&floor) {
                self.set_span_ctl(i, 2, floor)?;
            }
            if let Some(slot) = self.span_floor.get_mut(i) {
                *slot = floor;
            }
        }
        Ok(())
    }

    /// Word `word` of span `span`'s `SPAN_CTL` set to `value`.
    fn set_span_ctl(&mut self, span: usize, word: u32, value: u64) -> Result<(), Error> {
        let name = maps::SPAN_CTL;
        let map = self.ebpf.map_mut(name).ok_or(Error::MissingMap(name))?;
        let mut ctl: Array<&mut MapData, u64> = Array::try_from(map).map_err(map_err(name))?;
        ctl.set(SPAN_CTL_WORDS * span as u32 + word, value, 0)
            .map_err(map_err(name))
    }

    /// Every span's histogram so far, summed over CPUs.
    fn span_hists(&self) -> Result<Vec<spans::Hist>, Error> {
        let name = maps::SPAN_HIST;
        let map = self.ebpf.map(name).ok_or(Error::MissingMap(name))?;
        let array: PerCpuArray<&MapData, SpanHist> =
            PerCpuArray::try_from(map).map_err(map_err(name))?;
        (0..self.spans.len() as u32)
            .map(|i| {
                let values = array.get(&i, 0).map_err(map_err(name))?;
                Ok(spans::Hist::sum(&values))
            })
            .collect()
    }

    /// What each span measured since the last reading; `last`: the recording's last reading,
    /// when the instances still open are counted (by whether their thread lives).
    fn measured(
        &mut self,
        threads: &[(u32, ThreadStats)],
        last: bool,
    ) -> Result<Vec<spans::Measured>, Error> {
        if self.spans.is_empty() {
            return Ok(Vec::new());
        }
        self.poll_spans()?;
        let lost = self.span_lost();
        let hists = self.span_hists()?;
        let mut out = Vec::new();
        for (i, h) in hists.into_iter().enumerate() {
            let before = self.span_last.get(i).cloned().unwrap_or_default();
            let hist = h.since(&before);
            let passed_over = hist.passed_over;
            if let Some(slot) = self.span_last.get_mut(i) {
                *slot = h;
            }
            let (kept, dropped) = self
                .span_kept
                .get_mut(i)
                .map(spans::Kept::take)
                .unwrap_or_default();
            // The table is empty again: every slow instance is sent until it fills.
            if self.span_floor.get(i).is_some_and(|f| *f != 0) {
                self.set_span_ctl(i, 2, 0)?;
                self.span_floor[i] = 0;
            }
            let mut open = (0, 0);
            if last {
                for (tid, t) in threads {
                    if t.span.index as usize == i + 1
                        && t.span.flags & span_flags::OPEN_AT_START == 0
                    {
                        if self.bounds.end.contains_key(tid) {
                            open.0 += 1;
                        } else {
                            open.1 += 1;
                        }
                    }
                }
            }
            out.push(spans::Measured {
                hist,
                kept,
                // Ring losses are not told apart by span: each span is told all of them.
                dropped: dropped + lost + passed_over,
                control: self.span_control.get(i).copied().unwrap_or_default(),
                open,
                reasons: self.span_reasons.get(i).cloned().unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// Span instances the ring buffer lost since the last reading.
    fn span_lost(&mut self) -> u64 {
        let name = maps::DROPS;
        let Some(map) = self.ebpf.map(name) else {
            return 0;
        };
        let Ok(array) = PerCpuArray::<&MapData, u64>::try_from(map) else {
            return 0;
        };
        let now: u64 = array
            .get(&drops::SPAN_EVENTS_FULL, 0)
            .map(|v| v.iter().sum())
            .unwrap_or(0);
        now - std::mem::replace(&mut self.span_ring_lost, now).min(now)
    }

    /// Moves the timeline events streamed so far into `out` (call it often: the ring is
    /// finite; a full one loses events, counted as `DropKind::TimelineFull`).
    pub fn drain_timeline(&mut self, out: &mut Vec<TimelineEvent>) {
        if let Some(ring) = &mut self.timeline {
            while let Some(item) = ring.next() {
                if item.len() >= std::mem::size_of::<TimelineEvent>() {
                    // SAFETY: the kernel side writes whole TimelineEvents; read unaligned.
                    out.push(unsafe {
                        std::ptr::read_unaligned(item.as_ptr() as *const TimelineEvent)
                    });
                }
            }
        }
    }

    /// Starts the recording's clock: gives every existing thread of `tgid` its (zeroed)
    /// entry, so that on-CPU time is counted from this moment for threads already running,
    /// then publishes the start to the kernel side, which times nothing before it. Returns
    /// the start (CLOCK_MONOTONIC ns, the clock of every kernel-side timestamp).
    pub fn start(&mut self, tgid: u32) -> Result<u64, Error> {
        // Each thread's state and clocks now: what a thread that never switches did all
        // along, and the state of a wait already under way.
        self.bounds.start = crate::bounds::tasks(&[tgid], false);
        for (&tid, task) in &self.bounds.start {
            // SAFETY: ThreadStats is plain integers (aya::Pod); all-zero is a valid value.
            let mut zero: ThreadStats = unsafe { std::mem::zeroed() };
            zero.tgid = tgid;
            // Runnable now (R): until it runs, it waits on a run queue, not blocked.
            let runnable = task.state == 'R';
            zero.last_out_involuntary = u32::from(runnable);
            // Asleep: inside a syscall, almost always, so its user stack is the one it
            // has when that syscall returns.
            zero.in_syscall = u32::from(!runnable);
            // Off CPU since before the start (1: any time before it): its first switch
            // must be a switch-in, and one the kernel does not report is then seen.
            zero.last_out = u64::from(!runnable);
            // The state its first interval is recorded under, as a switch-out would have
            // reported it.
            zero.state = crate::bounds::report_state(task.state);
            zero.user_stack = -1;
            zero.kernel_stack = -1;
            // A thread that already has an entry keeps what it counted.
            threads::seed(&mut self.ebpf, tid, zero)?;
        }
        // CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
        let start = switchyard_model::driver::monotonic_ns();
        self.set_start(start)?;
        self.started = start;
        self.program_stats = crate::progstats::Sampler::start();
        Ok(start)
    }

    /// Stops the recording's clock: the kernel side counts and times nothing from here on
    /// (detaching takes a second or more, while a live target goes on), and the
    /// intervals in progress (threads on or off CPU now) are closed at this moment when the
    /// maps are read. Returns the end, CLOCK_MONOTONIC ns.
    pub fn stop(&mut self) -> Result<u64, Error> {
        // u64::MAX: every timestamp is before the start again.
        self.set_start(u64::MAX)?;
        let end = switchyard_model::driver::monotonic_ns();
        self.stopped = Some(end);
        self.program_covered = self
            .program_stats
            .take()
            .map(crate::progstats::Sampler::stop);
        // Each thread's state and place now: a wait still open has its kernel stack here.
        self.bounds.end = crate::bounds::tasks(&self.followed(), self.stacks_on);
        Ok(end)
    }

    fn set_start(&mut self, start: u64) -> Result<(), Error> {
        let err = map_err(maps::START);
        let map = self
            .ebpf
            .map_mut(maps::START)
            .ok_or(Error::MissingMap(maps::START))?;
        let mut array: Array<&mut MapData, u64> = Array::try_from(map).map_err(err)?;
        array.set(0, start, 0).map_err(err)
    }

    /// The processes followed so far (the target and its children).
    pub fn followed(&self) -> Vec<u32> {
        let Some(map) = self.ebpf.map(maps::TARGETS) else {
            return Vec::new();
        };
        let Ok(targets) = HashMap::<&MapData, u32, u8>::try_from(map) else {
            return Vec::new();
        };
        targets.keys().filter_map(Result::ok).collect()
    }

    /// Detaches every program and reads the maps (counting stopped at [`Probes::stop`]).
    pub fn finish(mut self, target: u32) -> Result<Collected, Error> {
        // The programs' run times, read while they are loaded: a whole recording's only (a
        // continuous recording's last window would be given the whole one's).
        let program_times = match (self.program_covered, &self.windows) {
            (Some(covered), None) => Some(crate::progstats::read(&self.ebpf, covered)),
            _ => None,
        };
        for name in [
            programs::GO_GC,
            programs::SPAN_ENTER,
            programs::SPAN_EXIT,
            programs::SPAN_ENTER_GO,
            programs::SPAN_EXIT_GO,
            programs::GO_SCHED,
            programs::GO_READY,
            programs::CONTENTION_BEGIN,
            programs::CONTENTION_END,
            programs::ONCPU,
            programs::SYS_ENTER,
            programs::SYS_EXIT,
            programs::SCHED_WAKEUP,
            programs::SCHED_SWITCH,
            programs::TASK_NEWTASK,
        ] {
            if let Some(p) = self.ebpf.program_mut(name) {
                // Unloading detaches the links; errors here only mean it was not attached.
                let _ = match p {
                    aya::programs::Program::TracePoint(p) => p.unload(),
                    aya::programs::Program::RawTracePoint(p) => p.unload(),
                    aya::programs::Program::BtfTracePoint(p) => p.unload(),
                    aya::programs::Program::PerfEvent(p) => p.unload(),
                    aya::programs::Program::UProbe(p) => p.unload(),
                    _ => Ok(()),
                };
            }
        }
        let mut collected = self.read(target, self.stopped)?;
        collected.program_times = program_times;
        Ok(collected)
    }

    /// Cuts a window of a continuous recording (`record --every`): what the maps added since
    /// the last cut (or the start), with the intervals in progress counted up to now. The
    /// programs stay attached and keep counting. Returns the window and its end
    /// (CLOCK_MONOTONIC ns). Once a recording is cut, [`Probes::finish`] reads its last
    /// window.
    pub fn cut(&mut self, target: u32) -> Result<(Collected, u64), Error> {
        self.windows.get_or_insert_with(LastCut::default);
        let at = switchyard_model::driver::monotonic_ns();
        let collected = self.read(target, Some(at))?;
        self.evict();
        Ok((collected, at))
    }

    /// What eviction removed from the kernel's maps so far (continuous recordings).
    pub fn evicted(&self) -> Evicted {
        self.evicted
    }

    /// Every map, read; the intervals in progress are closed at `end`.
    fn read(&mut self, target: u32, end: Option<u64>) -> Result<Collected, Error> {
        let reading = read::Reading {
            spans: self.spans.len(),
            contention: self.contention,
            gc: self.gc_symbols.is_some(),
        };
        let snapshot = read::snapshot(&self.ebpf, &reading)?;
        // The bounds close the intervals still open at the stop; a continuous recording's
        // windows end where nothing was read from /proc.
        let at_stop = self.windows.is_none() && end.is_some() && end == self.stopped;
        let final_read = end.is_some() && end == self.stopped;
        let measured = self.measured(&snapshot.threads, final_read)?;
        let input = convert::Input {
            target,
            start: self.started,
            end,
            bounds: at_stop.then_some(&self.bounds),
            stacks: self.stacks_on,
            spans: &self.spans,
            measured: &measured,
            gc_symbols: self.gc_symbols.as_deref(),
        };
        let mut collected = convert::collected(&snapshot, &input, self.windows.as_mut());
        collected.probe_costs = self.probe_costs(&collected.locks.spans);
        if let Some(source) = &self.otel {
            let take = self.windows.is_some();
            let spans = crate::otel::read(&mut self.ebpf, source, take, &mut self.otel_stats)?;
            crate::otel::link_samples(&mut self.ebpf, take, &spans, &mut collected.raw)?;
            collected.otel = Some(spans);
        }
        let wanted = self
            .windows
            .as_ref()
            .map(|w| convert::stacks_to_read(&collected.raw, w));
        let stacks = read::stacks(&self.ebpf, wanted)?;
        convert::stack_frames(&mut collected.raw, &stacks, self.windows.as_mut());
        if self.python.as_ref().is_some_and(|f| !f.procs.is_empty()) {
            collected.raw.python_codes = read::python_codes(&self.ebpf, &collected.raw)?;
        }
        if let Some(f) = &self.python {
            let mut gils: Vec<_> = f.gils.iter().collect();
            gils.sort_by_key(|(tgid, _)| **tgid);
            collected.locks.runtime_locks = gils
                .into_iter()
                .map(|(&tgid, &(start, gil))| switchyard_model::RuntimeLock {
                    tgid,
                    name: "the GIL".into(),
                    symbol: gil.symbol.into(),
                    start,
                    len: gil.len,
                })
                .collect();
        }
        collected.unwind = self.tables.as_ref().map(|t| t.stats().clone());
        Ok(collected)
    }

    /// Bounds a continuous recording's maps: stack-keyed entries idle for a whole window go at
    /// every cut (so a cut reads what is active, not all that ever was), the stacks no kept
    /// entry refers to once a stack map is half full, and exited threads' entries once their
    /// last window was read. An entry made anew counts from zero. A program that looked an
    /// entry up just before it went loses that one addition: a window boundary's worth of one
    /// idle key, counted nowhere else.
    fn evict(&mut self) {
        let Some(w) = self.windows.as_mut() else {
            return;
        };
        let ebpf = &mut self.ebpf;
        let mut idle = 0;
        idle += evict_idle(ebpf, maps::ONCPU, &mut w.oncpu);
        idle += evict_idle(ebpf, maps::OFFCPU, &mut w.offcpu);
        idle += evict_idle(ebpf, maps::WAKEUPS, &mut w.wakeups);
        idle += evict_idle(ebpf, maps::HELD, &mut w.held);
        idle += evict_idle(ebpf, maps::SYSCALL_STACKS, &mut w.syscall_stacks);
        idle += evict_idle(ebpf, maps::FUTEXES, &mut w.futexes);
        idle += evict_idle(ebpf, maps::RUNQUEUE_HOLDERS, &mut w.runqueue_holders);
        // Maps of small fixed keys (syscall numbers, drop kinds, errnos) never need it.
        w.clear_idle();
        self.evicted.idle_keys += idle;
        let (user, kernel) = w.referenced_stacks();
        let half_stacks = (self.stack_map_size / 2) as usize;
        // Every stack a sample refers to is read into the caches at its window's cut, so
        // their sizes tell how full the maps are without walking them.
        let cached = [w.user_frames.len(), w.kernel_frames.len()];
        for ((name, kept), cached) in [(maps::USER_STACKS, &user), (maps::KERNEL_STACKS, &kernel)]
            .into_iter()
            .zip(cached)
        {
            if cached <= half_stacks {
                continue;
            }
            let Some(map) = ebpf.map_mut(name) else {
                continue;
            };
            let Ok(mut stacks) = HashMap::<&mut MapData, i32, UserStack>::try_from(map) else {
                continue;
            };
            let ids: Vec<i32> = stacks.keys().filter_map(Result::ok).collect();
            if ids.len() <= half_stacks {
                continue;
            }
            for id in ids.into_iter().filter(|id| !kept.contains(id)) {
                if stacks.remove(&id).is_ok() {
                    w.user_frames.remove(&id);
                    w.kernel_frames.remove(&id);
                    self.evicted.stacks += 1;
                }
            }
        }
        for tid in std::mem::take(&mut w.exited) {
            if let Some(entry) = threads::release(ebpf, tid) {
                w.threads.forget(&tid);
                // The row of its first CPU holder went with its entry (its other rows are in
                // RUNQUEUE_HOLDERS, evicted when idle like any).
                if entry.held.count != 0 {
                    w.runqueue_holders.forget(&entry.held_by);
                }
                self.evicted.threads += 1;
            }
        }
    }
}

/// Removes the keys of map `name` that were idle in the window just read; returns how many
/// went.
fn evict_idle<K: aya::Pod + std::hash::Hash + Eq, V: aya::Pod + Cumulative>(
    ebpf: &mut Ebpf,
    name: &'static str,
    seen: &mut Seen<K, V>,
) -> u64 {
    let idle = seen.take_idle();
    if idle.is_empty() {
        return 0;
    }
    let Some(map) = ebpf.map_mut(name) else {
        return 0;
    };
    let Ok(mut entries) = HashMap::<&mut MapData, K, V>::try_from(map) else {
        return 0;
    };
    let mut removed = 0;
    for key in idle {
        if entries.remove(&key).is_ok() {
            seen.forget(&key);
            removed += 1;
        }
    }
    removed
}
