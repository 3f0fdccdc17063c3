//! The per-thread entries as user space sees them: `THREADS` is an array the kernel side reaches
//! by `tid & THREAD_MASK` (an inlined lookup at every switch), `THREAD_CLAIMS` names the thread
//! in each claimed slot, and `THREAD_SPILL` holds the threads whose slot another held. These
//! three functions are the only user-space code that knows that layout.

use aya::{
    Ebpf,
    maps::{Array, HashMap, MapData},
};
use switchyard_common::{ThreadStats, maps};

use crate::{Error, error::map_err};

/// bpf_map_update_elem's flag: insert only where the key has no entry.
const BPF_NOEXIST: u64 = 1;

fn map_mut<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut aya::maps::Map, Error> {
    ebpf.map_mut(name).ok_or(Error::MissingMap(name))
}

/// `THREADS`' slot for `tid`.
fn slot_of(ebpf: &Ebpf, tid: u32) -> Result<u32, Error> {
    let map = ebpf
        .map(maps::THREADS)
        .ok_or(Error::MissingMap(maps::THREADS))?;
    let threads: Array<&MapData, ThreadStats> =
        Array::try_from(map).map_err(map_err(maps::THREADS))?;
    // The loader sizes it to a power of two.
    Ok(tid & (threads.len() - 1))
}

/// Gives thread `tid` the entry `entry` unless it has one already (one the kernel side made
/// for a thread created since the probes were attached keeps what it counted). The slot is
/// claimed as the kernel side claims it, so the two cannot both take it.
pub(crate) fn seed(ebpf: &mut Ebpf, tid: u32, mut entry: ThreadStats) -> Result<(), Error> {
    entry.tid = tid;
    let slot = slot_of(ebpf, tid)?;
    let claimed = {
        let mut claims: HashMap<&mut MapData, u32, u32> =
            HashMap::try_from(map_mut(ebpf, maps::THREAD_CLAIMS)?)
                .map_err(map_err(maps::THREAD_CLAIMS))?;
        if claims.insert(slot, tid, BPF_NOEXIST).is_ok() {
            true
        } else if claims.get(&slot, 0).ok() == Some(tid) {
            let mut threads: Array<&mut MapData, ThreadStats> =
                Array::try_from(map_mut(ebpf, maps::THREADS)?).map_err(map_err(maps::THREADS))?;
            if let Ok(mut made) = threads.get(&slot, 0)
                && adopt(&mut made, &entry)
            {
                threads.set(slot, made, 0).map_err(map_err(maps::THREADS))?;
            }
            return Ok(());
        } else {
            false
        }
    };
    if claimed {
        {
            let mut threads: Array<&mut MapData, ThreadStats> =
                Array::try_from(map_mut(ebpf, maps::THREADS)?).map_err(map_err(maps::THREADS))?;
            threads
                .set(slot, entry, 0)
                .map_err(map_err(maps::THREADS))?;
        }
        // A thread created just now may have been given a spilled entry by the kernel side
        // between the claim and the slot's tid being written: the slot is its entry now.
        if let Ok(map) = map_mut(ebpf, maps::THREAD_SPILL)
            && let Ok(mut spill) = HashMap::<&mut MapData, u32, ThreadStats>::try_from(map)
        {
            let _ = spill.remove(&tid);
        }
        return Ok(());
    }
    let mut spill: HashMap<&mut MapData, u32, ThreadStats> =
        HashMap::try_from(map_mut(ebpf, maps::THREAD_SPILL)?)
            .map_err(map_err(maps::THREAD_SPILL))?;
    // An entry there already is the kernel side's, for a thread that switched since.
    if spill.insert(tid, entry, BPF_NOEXIST).is_err()
        && let Ok(mut made) = spill.get(&tid, 0)
        && adopt(&mut made, &entry)
    {
        let _ = spill.insert(tid, made, 0);
    }
    Ok(())
}

/// An entry a probe made in its running thread before the start (a span's, the Go
/// scheduler's) takes the seed's process, state and clocks, and keeps the rest: its switches
/// are not seen until the start, so it knows nothing of them, and kept as made it would read
/// as a thread of no process, running since the start. True when it changed.
fn adopt(made: &mut ThreadStats, seed: &ThreadStats) -> bool {
    let switched =
        made.last_in != 0 || made.last_out != 0 || made.voluntary != 0 || made.involuntary != 0;
    if switched {
        return false;
    }
    made.tgid = seed.tgid;
    made.last_out = seed.last_out;
    made.last_out_involuntary = seed.last_out_involuntary;
    made.in_syscall = seed.in_syscall;
    made.state = seed.state;
    made.user_stack = seed.user_stack;
    made.kernel_stack = seed.kernel_stack;
    true
}

/// Every thread's entry, by tid.
pub(crate) fn read(ebpf: &Ebpf) -> Result<Vec<(u32, ThreadStats)>, Error> {
    let claims: HashMap<&MapData, u32, u32> = HashMap::try_from(
        ebpf.map(maps::THREAD_CLAIMS)
            .ok_or(Error::MissingMap(maps::THREAD_CLAIMS))?,
    )
    .map_err(map_err(maps::THREAD_CLAIMS))?;
    let threads: Array<&MapData, ThreadStats> = Array::try_from(
        ebpf.map(maps::THREADS)
            .ok_or(Error::MissingMap(maps::THREADS))?,
    )
    .map_err(map_err(maps::THREADS))?;
    let mut out: Vec<(u32, ThreadStats)> = Vec::new();
    for claim in claims.iter() {
        let (slot, tid) = claim.map_err(map_err(maps::THREAD_CLAIMS))?;
        let entry = threads.get(&slot, 0).map_err(map_err(maps::THREADS))?;
        // A slot claimed but not yet filled in (the kernel side writes the tid just after
        // its claim) has nothing counted yet.
        if entry.tid == tid {
            out.push((tid, entry));
        }
    }
    let spill: HashMap<&MapData, u32, ThreadStats> = HashMap::try_from(
        ebpf.map(maps::THREAD_SPILL)
            .ok_or(Error::MissingMap(maps::THREAD_SPILL))?,
    )
    .map_err(map_err(maps::THREAD_SPILL))?;
    // One entry a thread: a spilled one beside its slot is a copy the kernel side made in a
    // race with `seed`, never counted into.
    let slotted: std::collections::HashSet<u32> = out.iter().map(|(tid, _)| *tid).collect();
    for item in spill.iter() {
        let (tid, entry) = item.map_err(map_err(maps::THREAD_SPILL))?;
        if !slotted.contains(&tid) {
            out.push((tid, entry));
        }
    }
    Ok(out)
}

/// Frees the entry of thread `tid`, which has exited: a spilled one removed, a slot zeroed,
/// then unclaimed. Returns the entry it had, if any.
pub(crate) fn release(ebpf: &mut Ebpf, tid: u32) -> Option<ThreadStats> {
    let mut released = None;
    if let Ok(map) = map_mut(ebpf, maps::THREAD_SPILL)
        && let Ok(mut spill) = HashMap::<&mut MapData, u32, ThreadStats>::try_from(map)
        && let Ok(entry) = spill.get(&tid, 0)
        && spill.remove(&tid).is_ok()
    {
        released = Some(entry);
    }
    let slot = slot_of(ebpf, tid).ok()?;
    let held = map_mut(ebpf, maps::THREAD_CLAIMS)
        .ok()
        .and_then(|map| HashMap::<&mut MapData, u32, u32>::try_from(map).ok())
        .is_some_and(|claims| claims.get(&slot, 0).ok() == Some(tid));
    if !held {
        return released;
    }
    // Zeroed before the claim goes: a thread that claims the slot next finds it free of this
    // one's counts (and zeroes it again itself).
    // SAFETY: ThreadStats is plain integers (aya::Pod); all-zero is a valid value.
    let zero: ThreadStats = unsafe { std::mem::zeroed() };
    let mut threads = map_mut(ebpf, maps::THREADS)
        .ok()
        .and_then(|map| Array::<&mut MapData, ThreadStats>::try_from(map).ok())?;
    let entry = threads.get(&slot, 0).ok().filter(|e| e.tid == tid);
    threads.set(slot, zero, 0).ok()?;
    let unclaimed = map_mut(ebpf, maps::THREAD_CLAIMS)
        .ok()
        .and_then(|map| HashMap::<&mut MapData, u32, u32>::try_from(map).ok())
        .is_some_and(|mut claims| claims.remove(&slot).is_ok());
    if unclaimed {
        entry.or(released)
    } else {
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeroed() -> ThreadStats {
        // SAFETY: ThreadStats is plain integers (aya::Pod); all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    }

    #[test]
    fn an_entry_made_before_the_start_takes_the_seeds_state_and_keeps_its_span() {
        let mut seed = zeroed();
        (seed.tgid, seed.last_out, seed.in_syscall, seed.state) = (7, 1, 1, 1);
        (seed.user_stack, seed.kernel_stack) = (-1, -1);
        let mut made = zeroed();
        made.tid = 9;
        made.span.index = 1;
        assert!(adopt(&mut made, &seed));
        assert_eq!(
            (
                made.tid,
                made.tgid,
                made.last_out,
                made.in_syscall,
                made.state
            ),
            (9, 7, 1, 1, 1)
        );
        assert_eq!((made.span.index, made.user_stack), (1, -1));
        // One that switched counted since: it keeps what it counted.
        let mut switched = zeroed();
        switched.last_in = 5;
        assert!(!adopt(&mut switched, &seed));
        assert_eq!(switched.tgid, 0);
    }
}
