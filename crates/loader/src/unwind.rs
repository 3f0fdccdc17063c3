//! Keeps the kernel side's unwind tables in step with the followed processes: every code
//! mapping's object compiled once (switchyard-unwind), its rows written into the shared row
//! array, and each process's mapping list in `PROC_MAPS`. Refreshed as processes start,
//! exec and dlopen, from `/proc/<pid>/maps`.

use std::{
    collections::HashMap as StdHashMap,
    os::fd::{AsFd as _, AsRawFd as _},
    path::PathBuf,
    time::{Duration, Instant},
};

use aya::{
    Ebpf,
    maps::{Array, HashMap, Map, MapData},
};
use switchyard_common::{
    UnwindMapping, UnwindProc, UnwindRow, maps,
    unwind::{MAX_MAPPINGS, MAX_PROCS, NO_TABLE, ROW_SEARCH_STEPS, TABLE_FULL},
};
use switchyard_model::raw::MapsLine;
use switchyard_unwind::Table;

use crate::{Error, error::map_err};

/// What the unwind tables hold and cost, for the summary.
#[derive(Clone, Debug, Default)]
pub struct UnwindStats {
    /// Objects whose tables were built (each once, however many processes map it).
    pub objects: u64,
    /// Objects that had no CFI (frame pointers are walked in them).
    pub objects_without_cfi: u64,
    /// Objects whose table did not fit the row array.
    pub objects_not_loaded: u64,
    pub rows: u64,
    pub capacity_rows: u64,
    /// Time spent reading objects and compiling their tables.
    pub build: Duration,
    /// Objects that could not be read or parsed: (path, error).
    pub failures: Vec<(String, String)>,
}

/// What an object of a code mapping has.
enum Object {
    Placed(Placed),
    /// Its table could not be built.
    Failed,
    /// No file behind it (JIT code): frame pointers only, not listed.
    Anonymous,
}

/// A followed process's mapping list, as last loaded.
struct ProcState {
    /// The maps text it was built from.
    text: String,
    list: Vec<UnwindMapping>,
    /// Its pair of slots in `MAPPINGS` (slots `2 * pair` and `2 * pair + 1`).
    pair: u32,
    /// Which of the two the kernel side reads.
    active: u32,
}

/// An object placed in the row array.
struct Placed {
    table: Table,
    /// `TABLE_FULL` when it did not fit.
    first_row: u32,
}

/// The unwind tables of one recording.
pub struct Tables {
    rows: *mut UnwindRow,
    capacity: u32,
    len: u32,
    mmap_len: usize,
    /// By (device, inode, path) from the maps line.
    objects: StdHashMap<(String, u64, String), Object>,
    procs: StdHashMap<u32, ProcState>,
    /// Slot pairs given back by processes that have gone.
    free: Vec<u32>,
    next_pair: u32,
    /// The value last written to `UNWIND_GENERATION`.
    generation: u32,
    stats: UnwindStats,
}

// SAFETY: the mapping is owned by Tables and only written through &mut self.
unsafe impl Send for Tables {}

impl Tables {
    /// Maps the row array of a loaded object (created with `BPF_F_MMAPABLE`).
    pub fn new(ebpf: &Ebpf, capacity: u32) -> Result<Tables, Error> {
        let name = maps::UNWIND_ROWS;
        let data: &MapData = match ebpf.map(name) {
            Some(Map::Array(d)) => d,
            _ => return Err(Error::MissingMap(name)),
        };
        let mmap_len = (capacity as usize * std::mem::size_of::<UnwindRow>()).div_ceil(4096) * 4096;
        // SAFETY: a shared mapping of the map's own memory, as long as the map's size.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mmap_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                data.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::Mmap {
                name,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(Tables {
            rows: ptr as *mut UnwindRow,
            capacity,
            len: 0,
            mmap_len,
            objects: StdHashMap::new(),
            procs: StdHashMap::new(),
            free: Vec::new(),
            next_pair: 0,
            generation: 0,
            stats: UnwindStats {
                capacity_rows: capacity as u64,
                ..Default::default()
            },
        })
    }

    pub fn stats(&self) -> &UnwindStats {
        &self.stats
    }

    /// Loads the tables of every code mapping of `pid` that changed since the last call, from
    /// the text of its `/proc/<pid>/maps` (`None`: it has gone, and gives its slots back).
    pub fn refresh(&mut self, ebpf: &mut Ebpf, pid: u32, text: Option<&str>) -> Result<(), Error> {
        let Some(text) = text else {
            return self.release(ebpf, pid);
        };
        if self.procs.get(&pid).is_some_and(|p| p.text == text) {
            return Ok(());
        }
        let list = self.mappings(pid, text);
        let state = match self.procs.get_mut(&pid) {
            // Heap and stack mappings come and go; the code did not change.
            Some(p) if p.list == list => {
                p.text = text.to_string();
                return Ok(());
            }
            Some(p) => p,
            None => {
                // More processes than slots: the rest walk frame pointers.
                let Some(pair) = self.free.pop().or_else(|| {
                    (self.next_pair < MAX_PROCS).then(|| {
                        self.next_pair += 1;
                        self.next_pair - 1
                    })
                }) else {
                    return Ok(());
                };
                self.procs.entry(pid).or_insert(ProcState {
                    text: String::new(),
                    list: Vec::new(),
                    pair,
                    active: 1,
                })
            }
        };
        // Write the idle slot of the pair, then point the process at it: a walk reads either
        // the old list or the new one, never one half-written.
        let slot = state.pair * 2 + (1 - state.active);
        let name = maps::MAPPINGS;
        let map = ebpf.map_mut(name).ok_or(Error::MissingMap(name))?;
        let mut mappings: Array<&mut MapData, UnwindMapping> =
            Array::try_from(map).map_err(map_err(name))?;
        for (i, m) in list.iter().enumerate() {
            mappings
                .set(slot * MAX_MAPPINGS + i as u32, m, 0)
                .map_err(map_err(name))?;
        }
        let name = maps::PROC_MAPS;
        let map = ebpf.map_mut(name).ok_or(Error::MissingMap(name))?;
        let mut procs: HashMap<&mut MapData, u32, UnwindProc> =
            HashMap::try_from(map).map_err(map_err(name))?;
        let value = UnwindProc {
            slot,
            count: list.len() as u32,
        };
        procs.insert(pid, value, 0).map_err(map_err(name))?;
        state.active = 1 - state.active;
        state.list = list;
        state.text = text.to_string();
        // Rules cached for this process's pcs may now be wrong (exec, dlopen, munmap).
        self.bump_generation(ebpf)
    }

    /// The code mappings of `pid` from its maps text, with their objects' tables (built on
    /// first sight), sorted by start.
    fn mappings(&mut self, pid: u32, text: &str) -> Vec<UnwindMapping> {
        let mut list: Vec<UnwindMapping> = Vec::new();
        for line in text.lines() {
            let Some(m) = MapsLine::parse(line) else {
                continue;
            };
            if !m.perms.contains('x') {
                continue;
            }
            let key = (m.dev.to_string(), m.inode, m.path.to_string());
            if !self.objects.contains_key(&key) {
                let object = self.build(pid, &m);
                self.objects.insert(key.clone(), object);
            }
            let mapping = match self.objects.get(&key) {
                Some(Object::Placed(placed)) => match placed.table.bias(m.start, m.offset) {
                    Some(bias) => UnwindMapping {
                        start: m.start,
                        end: m.end,
                        bias,
                        first_row: placed.first_row,
                        rows: placed.table.rows.len() as u32,
                    },
                    None => no_table(&m),
                },
                Some(Object::Failed) => no_table(&m),
                Some(Object::Anonymous) | None => continue,
            };
            list.push(mapping);
        }
        list.sort_by_key(|m| m.start);
        list.truncate(MAX_MAPPINGS as usize);
        list
    }

    /// Forgets a process that has gone: its entry and its slots.
    fn release(&mut self, ebpf: &mut Ebpf, pid: u32) -> Result<(), Error> {
        let Some(state) = self.procs.remove(&pid) else {
            return Ok(());
        };
        let name = maps::PROC_MAPS;
        let map = ebpf.map_mut(name).ok_or(Error::MissingMap(name))?;
        let mut procs: HashMap<&mut MapData, u32, UnwindProc> =
            HashMap::try_from(map).map_err(map_err(name))?;
        // Already gone is fine.
        let _ = procs.remove(&pid);
        self.free.push(state.pair);
        self.bump_generation(ebpf)
    }

    fn bump_generation(&mut self, ebpf: &mut Ebpf) -> Result<(), Error> {
        self.generation = self.generation.wrapping_add(1);
        let name = maps::UNWIND_GENERATION;
        let map = ebpf.map_mut(name).ok_or(Error::MissingMap(name))?;
        let mut generation: Array<&mut MapData, u32> =
            Array::try_from(map).map_err(map_err(name))?;
        generation.set(0, self.generation, 0).map_err(map_err(name))
    }

    /// Builds and places the table of one mapping's object.
    fn build(&mut self, pid: u32, m: &MapsLine<'_>) -> Object {
        let started = Instant::now();
        let table = if m.path == "[vdso]" {
            // The vDSO is a whole ELF image in the process's memory.
            read_memory(pid, m.start, m.end - m.start)
                .and_then(|bytes| Table::from_bytes(&bytes, "[vdso]").map_err(|e| format!("{e}")))
        } else if m.path.starts_with('/') {
            let path = PathBuf::from(format!("/proc/{pid}/root{}", m.path));
            Table::from_path(&path).map_err(|e| format!("{e}"))
        } else {
            // Anonymous code (JIT) and other pseudo-mappings: frame pointers only.
            return Object::Anonymous;
        };
        self.stats.build += started.elapsed();
        let table = match table {
            Ok(t) => t,
            Err(e) => {
                self.stats.failures.push((m.path.to_string(), e));
                return Object::Failed;
            }
        };
        self.stats.objects += 1;
        let n = table.rows.len() as u32;
        if n == 0 {
            self.stats.objects_without_cfi += 1;
            return Object::Placed(Placed {
                table,
                first_row: 0,
            });
        }
        // The kernel side's search covers 2^ROW_SEARCH_STEPS rows per object.
        if self.len as u64 + n as u64 > self.capacity as u64 || n >= 1 << ROW_SEARCH_STEPS {
            self.stats.objects_not_loaded += 1;
            return Object::Placed(Placed {
                table,
                first_row: TABLE_FULL,
            });
        }
        let first_row = self.len;
        // SAFETY: [len, len + n) lies inside the mapped array (checked above); the kernel side
        // reads these rows only once a process's mapping list names them, written after.
        unsafe {
            std::ptr::copy_nonoverlapping(
                table.rows.as_ptr(),
                self.rows.add(first_row as usize),
                n as usize,
            )
        };
        self.len += n;
        self.stats.rows += n as u64;
        Object::Placed(Placed { table, first_row })
    }
}

/// A mapping whose object has no table: the walker counts a stack that ends there.
fn no_table(m: &MapsLine<'_>) -> UnwindMapping {
    UnwindMapping {
        start: m.start,
        end: m.end,
        bias: 0,
        first_row: NO_TABLE,
        rows: 0,
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.rows as *mut libc::c_void, self.mmap_len) };
    }
}

fn read_memory(pid: u32, addr: u64, len: u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::FileExt as _;
    let file =
        std::fs::File::open(format!("/proc/{pid}/mem")).map_err(|e| format!("[vdso]: {e}"))?;
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, addr)
        .map_err(|e| format!("[vdso]: {e}"))?;
    Ok(buf)
}
