//! Reading the kernel's maps into plain values: what each map holds, as it holds it (per-CPU
//! values unsummed, cumulative counts not yet windowed). [`crate::convert`] makes rows of it.

use std::collections::{BTreeMap, HashSet};

use aya::{
    Ebpf, Pod,
    maps::{Array, HashMap, Map, MapData, PerCpuArray, PerCpuHashMap},
};
use switchyard_common::{
    ErrnoKey, FutexKey, FutexStats, HeldKey, InFlight, OffCpuKey, OnCpuKey, PyCode, PyCodeKey,
    RunqueueHolderKey, RunqueueHolderStats, SpanHist, SyscallStackKey, SyscallStats, ThreadStats,
    UserStack, WaitStats, WakeupKey, gc, maps, sampling,
};

use switchyard_model::raw::PythonCode;

use crate::{Error, error::map_err};

/// One value per CPU, in CPU order.
pub(crate) type PerCpu<V> = Vec<V>;

/// The contents of every map a reading turns into rows (all but the stack maps, which are read
/// after, for the stacks the rows refer to: [`Stacks`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    /// `SYSCALLS`, by syscall number.
    pub syscalls: Vec<PerCpu<SyscallStats>>,
    /// `ERRNOS`.
    pub errnos: Vec<(ErrnoKey, PerCpu<u64>)>,
    /// `THREADS`, by tid.
    pub threads: Vec<(u32, ThreadStats)>,
    /// The names of the threads of `threads` that switched, from `/proc` (absent when it has
    /// gone): the kernel side reads a thread's name only now and then.
    pub comms: BTreeMap<u32, String>,
    /// `INFLIGHT`: the syscall each thread of `threads` is inside now, by tid.
    pub inflight: BTreeMap<u32, InFlight>,
    /// `RUNQUEUE_HOLDERS`.
    pub runqueue_holders: Vec<(RunqueueHolderKey, RunqueueHolderStats)>,
    /// `DROPS`, by [`switchyard_common::drops`] index.
    pub drops: Vec<PerCpu<u64>>,
    /// `SAMPLING`, by [`switchyard_common::sampling`] index.
    pub sampling: Vec<PerCpu<u64>>,
    /// `TARGETS`' keys: the processes followed.
    pub targets: Vec<u32>,
    /// `ONCPU`, `OFFCPU`, `WAKEUPS` and `SYSCALL_STACKS`: samples by stack.
    pub oncpu: Vec<(OnCpuKey, u64)>,
    pub offcpu: Vec<(OffCpuKey, u64)>,
    pub wakeups: Vec<(WakeupKey, u64)>,
    /// `HELD`: what the targets' wakers did while the threads they woke waited.
    pub held: Vec<(HeldKey, u64)>,
    pub syscall_stacks: Vec<(SyscallStackKey, u64)>,
    /// `FUTEXES`.
    pub futexes: Vec<(FutexKey, FutexStats)>,
    /// `FUTEX_WAITS`' one entry.
    pub futex_waits: PerCpu<WaitStats>,
    /// `LOCK_CONTENTION`'s one entry, when its tracepoints are attached.
    pub lock_contention: Option<PerCpu<WaitStats>>,
    /// Each span's durations as the figures count them (from `SPAN_HIST`), one entry per span.
    pub spans: Vec<PerCpu<WaitStats>>,
    /// `GC_COUNTS` by [`switchyard_common::gc`] kind, when the GC probes are attached (empty
    /// otherwise).
    pub gc_counts: Vec<PerCpu<u64>>,
}

/// What to read besides the maps every recording has.
pub(crate) struct Reading {
    pub spans: usize,
    pub contention: bool,
    pub gc: bool,
}

/// Every map but the stack maps.
pub(crate) fn snapshot(ebpf: &Ebpf, what: &Reading) -> Result<Snapshot, Error> {
    let threads: Vec<(u32, ThreadStats)> = crate::threads::read(ebpf)?;
    // Every thread's, the ones that never switched too (their entries were seeded with the
    // tgid).
    let comms = threads
        .iter()
        .filter_map(|(tid, t)| {
            let comm = std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", t.tgid)).ok()?;
            Some((*tid, comm.trim_end().to_string()))
        })
        .collect();
    let errnos: PerCpuHashMap<&MapData, ErrnoKey, u64> =
        PerCpuHashMap::try_from(map(ebpf, maps::ERRNOS)?).map_err(map_err(maps::ERRNOS))?;
    let errnos = errnos
        .iter()
        .map(|item| {
            item.map(|(k, v)| (k, v.to_vec()))
                .map_err(map_err(maps::ERRNOS))
        })
        .collect::<Result<_, _>>()?;
    let targets: HashMap<&MapData, u32, u8> =
        HashMap::try_from(map(ebpf, maps::TARGETS)?).map_err(map_err(maps::TARGETS))?;
    let targets = targets.keys().filter_map(Result::ok).collect();
    let runqueue_holders = with_held_rows(hash(ebpf, maps::RUNQUEUE_HOLDERS)?, &threads);
    let inflight = inflight(ebpf, &threads)?;
    Ok(Snapshot {
        inflight,
        syscalls: per_cpu_array(ebpf, maps::SYSCALLS)?,
        errnos,
        threads,
        comms,
        runqueue_holders,
        drops: per_cpu_array(ebpf, maps::DROPS)?,
        sampling: (0..sampling::COUNT)
            .map(|i| per_cpu_entry(ebpf, maps::SAMPLING, i))
            .collect::<Result<_, _>>()?,
        targets,
        oncpu: hash(ebpf, maps::ONCPU)?,
        offcpu: hash(ebpf, maps::OFFCPU)?,
        wakeups: hash(ebpf, maps::WAKEUPS)?,
        held: hash(ebpf, maps::HELD)?,
        syscall_stacks: hash(ebpf, maps::SYSCALL_STACKS)?,
        futexes: hash(ebpf, maps::FUTEXES)?,
        futex_waits: per_cpu_entry(ebpf, maps::FUTEX_WAITS, 0)?,
        lock_contention: match what.contention {
            true => Some(per_cpu_entry(ebpf, maps::LOCK_CONTENTION, 0)?),
            false => None,
        },
        spans: (0..what.spans as u32)
            .map(|i| {
                let hists: PerCpu<SpanHist> = per_cpu_entry(ebpf, maps::SPAN_HIST, i)?;
                Ok::<_, Error>(hists.iter().map(SpanHist::wait_stats).collect())
            })
            .collect::<Result<_, _>>()?,
        gc_counts: match what.gc {
            true => (0..gc::KINDS)
                .map(|i| per_cpu_entry(ebpf, maps::GC_COUNTS, i))
                .collect::<Result<_, _>>()?,
            false => Vec::new(),
        },
    })
}

/// The `INFLIGHT` slot of each thread of `threads` that is inside a syscall (its slot holds
/// its id and an entry time).
fn inflight(ebpf: &Ebpf, threads: &[(u32, ThreadStats)]) -> Result<BTreeMap<u32, InFlight>, Error> {
    let array: Array<&MapData, InFlight> =
        Array::try_from(map(ebpf, maps::INFLIGHT)?).map_err(map_err(maps::INFLIGHT))?;
    // Sized to a power of two.
    let mask = array.len().saturating_sub(1);
    Ok(threads
        .iter()
        .filter_map(|&(tid, _)| {
            let e = array.get(&(tid & mask), 0).ok()?;
            (e.pid_tgid as u32 == tid && e.ts != 0).then_some((tid, e))
        })
        .collect())
}

/// Entries of the stack maps, by id.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stacks {
    pub kernel: Vec<(i32, UserStack)>,
    pub user: Vec<(i32, UserStack)>,
}

/// The stacks of the given ids (user ids, kernel ids), or every stack when `None`. An id the
/// map lacks is left out.
pub(crate) fn stacks(
    ebpf: &Ebpf,
    ids: Option<(HashSet<i32>, HashSet<i32>)>,
) -> Result<Stacks, Error> {
    let Some((user_ids, kernel_ids)) = ids else {
        return Ok(Stacks {
            kernel: hash(ebpf, maps::KERNEL_STACKS)?,
            user: hash(ebpf, maps::USER_STACKS)?,
        });
    };
    let some = |name: &'static str, ids: HashSet<i32>| -> Result<Vec<(i32, UserStack)>, Error> {
        let stacks: HashMap<&MapData, i32, UserStack> =
            HashMap::try_from(map(ebpf, name)?).map_err(map_err(name))?;
        Ok(ids
            .into_iter()
            .filter(|&id| id >= 0)
            .filter_map(|id| Some((id, stacks.get(&id, 0).ok()?)))
            .collect())
    };
    Ok(Stacks {
        kernel: some(maps::KERNEL_STACKS, kernel_ids)?,
        user: some(maps::USER_STACKS, user_ids)?,
    })
}

/// The code objects that the Python frames of `raw`'s user stacks refer to, as the kernel
/// side copied them. A process gone before its stacks were read is looked up all the same.
pub(crate) fn python_codes(
    ebpf: &Ebpf,
    raw: &switchyard_model::raw::Raw,
) -> Result<std::collections::HashMap<(u32, u64), PythonCode>, Error> {
    use switchyard_common::python::{ASCII, CODE_MASK, TAG};
    let name = maps::PY_CODES;
    let codes: HashMap<&MapData, PyCodeKey, PyCode> =
        HashMap::try_from(map(ebpf, name)?).map_err(map_err(name))?;
    // Which process each stack belongs to: the samples say.
    let mut wanted = HashSet::new();
    let mut stack_tgid = std::collections::HashMap::new();
    for s in raw.samples() {
        stack_tgid.insert(s.user_stack, s.tgid);
        if let Some(w) = &s.waker {
            stack_tgid.insert(w.user_stack, w.tgid);
        }
    }
    for (id, ips) in &raw.user_stacks {
        let Some(&tgid) = stack_tgid.get(id) else {
            continue;
        };
        for ip in ips.iter().filter(|ip| *ip & TAG != 0) {
            wanted.insert((tgid, ip & CODE_MASK));
        }
    }
    let text = |kind: u8, bytes: &[u8]| {
        (kind == ASCII).then(|| {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        })
    };
    Ok(wanted
        .into_iter()
        .filter_map(|(tgid, code)| {
            let key = PyCodeKey {
                code,
                tgid,
                _pad: 0,
            };
            let c = codes.get(&key, 0).ok()?;
            let len = (c.linetable_len as usize).min(c.linetable.len());
            Some((
                (tgid, code),
                PythonCode {
                    name: text(c.name_kind, &c.name),
                    file: text(c.file_kind, &c.file),
                    firstlineno: c.firstlineno,
                    linetable: c.linetable[..len].to_vec(),
                },
            ))
        })
        .collect())
}

fn map<'a>(ebpf: &'a Ebpf, name: &'static str) -> Result<&'a Map, Error> {
    ebpf.map(name).ok_or(Error::MissingMap(name))
}

/// `RUNQUEUE_HOLDERS`' rows with each thread's first CPU holder's row, which its entry keeps. A
/// key is in one place or the other for a thread's life; a row left in the map by an exited
/// thread whose tid came back with the same holder is added to, so the sum stays cumulative.
fn with_held_rows(
    rows: Vec<(RunqueueHolderKey, RunqueueHolderStats)>,
    threads: &[(u32, ThreadStats)],
) -> Vec<(RunqueueHolderKey, RunqueueHolderStats)> {
    let mut rows = rows;
    let mut at: std::collections::HashMap<RunqueueHolderKey, usize> =
        rows.iter().enumerate().map(|(i, (k, _))| (*k, i)).collect();
    for (_, t) in threads.iter().filter(|(_, t)| t.held.count != 0) {
        match at.get(&t.held_by) {
            Some(&i) => {
                rows[i].1.count += t.held.count;
                rows[i].1.ns += t.held.ns;
            }
            None => {
                at.insert(t.held_by, rows.len());
                rows.push((t.held_by, t.held));
            }
        }
    }
    rows
}

/// Every entry of the hash map `name`.
fn hash<K: Pod, V: Pod>(ebpf: &Ebpf, name: &'static str) -> Result<Vec<(K, V)>, Error> {
    let entries: HashMap<&MapData, K, V> =
        HashMap::try_from(map(ebpf, name)?).map_err(map_err(name))?;
    entries
        .iter()
        .map(|item| item.map_err(map_err(name)))
        .collect()
}

/// Every entry of the per-CPU array `name`, in index order.
fn per_cpu_array<V: Pod>(ebpf: &Ebpf, name: &'static str) -> Result<Vec<PerCpu<V>>, Error> {
    let array: PerCpuArray<&MapData, V> =
        PerCpuArray::try_from(map(ebpf, name)?).map_err(map_err(name))?;
    array
        .iter()
        .map(|item| item.map(|v| v.to_vec()).map_err(map_err(name)))
        .collect()
}

/// Entry `index` of the per-CPU array `name`.
fn per_cpu_entry<V: Pod>(ebpf: &Ebpf, name: &'static str, index: u32) -> Result<PerCpu<V>, Error> {
    let array: PerCpuArray<&MapData, V> =
        PerCpuArray::try_from(map(ebpf, name)?).map_err(map_err(name))?;
    Ok(array.get(&index, 0).map_err(map_err(name))?.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tid: u32, holder_tid: u32) -> RunqueueHolderKey {
        RunqueueHolderKey {
            tgid: 1,
            tid,
            holder_tgid: 2,
            holder_tid,
            cpu: 0,
            _pad: 0,
        }
    }

    fn held(count: u64, ns: u64) -> RunqueueHolderStats {
        RunqueueHolderStats {
            count,
            ns,
            comm: [0; 2],
            prio: 120,
            _pad: 0,
        }
    }

    #[test]
    fn each_threads_held_row_joins_the_maps_rows_once() {
        // SAFETY: ThreadStats is plain integers; all-zero is a valid value.
        let mut a: ThreadStats = unsafe { std::mem::zeroed() };
        a.held_by = key(10, 20);
        a.held = held(3, 300);
        // A row the map still has for the same key (an exited thread whose tid came back):
        // added to, not listed twice.
        let mut b: ThreadStats = unsafe { std::mem::zeroed() };
        b.held_by = key(11, 21);
        b.held = held(2, 50);
        // No holder seen yet: no row.
        let c: ThreadStats = unsafe { std::mem::zeroed() };
        let rows = with_held_rows(
            vec![(key(11, 21), held(5, 500)), (key(10, 99), held(1, 1))],
            &[(10, a), (11, b), (12, c)],
        );
        let find = |k: RunqueueHolderKey| {
            let found: Vec<_> = rows.iter().filter(|(r, _)| *r == k).collect();
            assert_eq!(found.len(), 1, "{k:?} in {rows:?}");
            (found[0].1.count, found[0].1.ns)
        };
        assert_eq!(rows.len(), 3);
        assert_eq!(find(key(10, 20)), (3, 300));
        assert_eq!(find(key(11, 21)), (7, 550));
        assert_eq!(find(key(10, 99)), (1, 1));
    }
}
