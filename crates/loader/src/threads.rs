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
    let _ = spill.insert(tid, entry, BPF_NOEXIST);
    Ok(())
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
