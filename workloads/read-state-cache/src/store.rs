//! The embedded store: an append-only log of fixed-size records with an in-memory index
//! (key → offset of its newest record), the same file format as the Go server's (PROTOCOL.md,
//! "Store"), so either server opens a data directory the other wrote.
//!
//! Writes are `pwrite`s at the end of the log, made durable by [`Store::sync`]
//! (`fdatasync`), which the cache calls after every flush pass. Reads look the offset up under
//! the index lock and `pread` the record outside it: records never change once written.
//! Opening replays the log; a torn tail (a short record or a bad checksum, what a crash in
//! the middle of a write leaves) ends the log there and is cut off.

use std::{
    collections::HashMap,
    fs::{self, File, OpenOptions},
    io::{self, BufReader, Read as _},
    os::unix::fs::FileExt as _,
    path::{Path, PathBuf},
    sync::Mutex,
};

use serde::Serialize;

use crate::protocol::{Key, ReadState};

/// The log's file name inside the data directory.
pub const LOG_FILE: &str = "read-states.log";
/// The first 8 bytes of a log.
pub const MAGIC: &[u8; 8] = b"RSTATLOG";
pub const VERSION: u32 = 1;
/// Magic, version (u32 LE), record size (u32 LE).
pub const HEADER_LEN: u64 = 16;
/// user u64, channel u64, last read u64, mentions u32, CRC-32 of the first 28 bytes (u32);
/// all little-endian.
pub const RECORD_LEN: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("failed to create data directory `{}`", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to open read-state log `{}`", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` is not a read-state log (bad header)", path.display())]
    Header { path: PathBuf },
    #[error("failed to write read-state log `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to read read-state log `{}` at offset {offset}", path.display())]
    Read {
        path: PathBuf,
        offset: u64,
        #[source]
        source: io::Error,
    },
    #[error("read-state log `{}` has a corrupt record at offset {offset}", path.display())]
    Corrupt { path: PathBuf, offset: u64 },
}

/// What opening found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// Valid records replayed.
    pub records: u64,
    /// Bytes of a torn tail that were cut off.
    pub dropped_bytes: u64,
}

/// Size of the store, for the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StoreStats {
    /// Distinct keys with a record.
    pub keys: u64,
    /// Records appended by this run.
    pub records_written: u64,
    /// Size of the log file.
    pub bytes: u64,
}

struct Index {
    offsets: HashMap<Key, u64>,
    /// End of the log: where the next record goes.
    len: u64,
    records_written: u64,
}

pub struct Store {
    path: PathBuf,
    file: File,
    index: Mutex<Index>,
}

/// The record bytes for `key` in state `state`.
pub fn encode_record(key: Key, state: ReadState) -> [u8; RECORD_LEN] {
    let mut r = [0u8; RECORD_LEN];
    r[0..8].copy_from_slice(&key.user.to_le_bytes());
    r[8..16].copy_from_slice(&key.channel.to_le_bytes());
    r[16..24].copy_from_slice(&state.last_read.to_le_bytes());
    r[24..28].copy_from_slice(&state.mentions.to_le_bytes());
    let crc = crc32fast::hash(&r[..28]);
    r[28..32].copy_from_slice(&crc.to_le_bytes());
    r
}

/// The key and state of a record, `None` when its checksum does not match.
pub fn decode_record(r: &[u8; RECORD_LEN]) -> Option<(Key, ReadState)> {
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&r[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let crc = u32::from_le_bytes([r[28], r[29], r[30], r[31]]);
    if crc32fast::hash(&r[..28]) != crc {
        return None;
    }
    Some((
        Key::new(word(0), word(8)),
        ReadState {
            last_read: word(16),
            mentions: u32::from_le_bytes([r[24], r[25], r[26], r[27]]),
        },
    ))
}

fn header() -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(RECORD_LEN as u32).to_le_bytes());
    h
}

impl Store {
    /// Opens (or creates) the log in `dir`, replaying it into the index.
    pub fn open(dir: &Path) -> Result<(Self, Opened), StoreError> {
        fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(LOG_FILE);
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(open_err)?;
        let size = file.metadata().map_err(open_err)?.len();
        let mut opened = Opened::default();
        let mut offsets = HashMap::new();
        let len = if size < HEADER_LEN {
            // New (or cut short before its header was whole): start it over.
            let h = header();
            file.set_len(0)
                .and_then(|()| file.write_all_at(&h, 0))
                .and_then(|()| file.sync_all())
                .map_err(|source| StoreError::Write {
                    path: path.clone(),
                    source,
                })?;
            opened.dropped_bytes = size;
            HEADER_LEN
        } else {
            let mut reader = BufReader::with_capacity(1 << 20, &file);
            let mut h = [0u8; HEADER_LEN as usize];
            reader.read_exact(&mut h).map_err(open_err)?;
            if h != header() {
                return Err(StoreError::Header { path });
            }
            let mut end = HEADER_LEN;
            let mut record = [0u8; RECORD_LEN];
            while end + RECORD_LEN as u64 <= size {
                reader.read_exact(&mut record).map_err(open_err)?;
                let Some((key, _)) = decode_record(&record) else {
                    break;
                };
                offsets.insert(key, end);
                opened.records += 1;
                end += RECORD_LEN as u64;
            }
            if end < size {
                opened.dropped_bytes = size - end;
                file.set_len(end)
                    .and_then(|()| file.sync_all())
                    .map_err(|source| StoreError::Write {
                        path: path.clone(),
                        source,
                    })?;
            }
            end
        };
        let store = Self {
            path,
            file,
            index: Mutex::new(Index {
                offsets,
                len,
                records_written: 0,
            }),
        };
        Ok((store, opened))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        // The index is updated only after a write succeeded: consistent even after a panic.
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest stored state of `key`, `None` when it has never been written.
    pub fn get(&self, key: Key) -> Result<Option<ReadState>, StoreError> {
        let Some(offset) = self.index().offsets.get(&key).copied() else {
            return Ok(None);
        };
        let mut record = [0u8; RECORD_LEN];
        self.file
            .read_exact_at(&mut record, offset)
            .map_err(|source| StoreError::Read {
                path: self.path.clone(),
                offset,
                source,
            })?;
        match decode_record(&record) {
            Some((k, state)) if k == key => Ok(Some(state)),
            _ => Err(StoreError::Corrupt {
                path: self.path.clone(),
                offset,
            }),
        }
    }

    /// Appends one record per entry (one `pwrite`), then points the index at them.
    pub fn put_batch(&self, entries: &[(Key, ReadState)]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(entries.len() * RECORD_LEN);
        for &(key, state) in entries {
            buf.extend_from_slice(&encode_record(key, state));
        }
        let mut index = self.index();
        let start = index.len;
        self.file
            .write_all_at(&buf, start)
            .map_err(|source| StoreError::Write {
                path: self.path.clone(),
                source,
            })?;
        for (i, &(key, _)) in entries.iter().enumerate() {
            index.offsets.insert(key, start + (i * RECORD_LEN) as u64);
        }
        index.len += buf.len() as u64;
        index.records_written += entries.len() as u64;
        Ok(())
    }

    pub fn put(&self, key: Key, state: ReadState) -> Result<(), StoreError> {
        self.put_batch(&[(key, state)])
    }

    /// Makes everything written so far durable (`fdatasync`).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(|source| StoreError::Write {
            path: self.path.clone(),
            source,
        })
    }

    pub fn stats(&self) -> StoreStats {
        let index = self.index();
        StoreStats {
            keys: index.offsets.len() as u64,
            records_written: index.records_written,
            bytes: index.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Key = Key::new(1, 10);
    const B: Key = Key::new(2, 20);

    fn state(last_read: u64, mentions: u32) -> ReadState {
        ReadState {
            last_read,
            mentions,
        }
    }

    #[test]
    fn records_round_trip_and_checksums_catch_damage() {
        let r = encode_record(A, state(5, 6));
        assert_eq!(decode_record(&r), Some((A, state(5, 6))));
        let mut bad = r;
        bad[17] ^= 1;
        assert_eq!(decode_record(&bad), None);
    }

    /// The checksum is CRC-32/IEEE, as Go's `crc32.ChecksumIEEE`: the check value of
    /// "123456789" is 0xCBF43926.
    #[test]
    fn checksum_is_crc32_ieee() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn newest_record_wins_and_survives_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, opened) = Store::open(dir.path()).expect("open");
        assert_eq!(opened, Opened::default());
        assert_eq!(store.get(A).expect("get"), None);
        store
            .put_batch(&[(A, state(1, 1)), (B, state(2, 2))])
            .expect("put");
        store.put(A, state(3, 0)).expect("put");
        store.sync().expect("sync");
        assert_eq!(store.get(A).expect("get"), Some(state(3, 0)));
        assert_eq!(
            store.stats(),
            StoreStats {
                keys: 2,
                records_written: 3,
                bytes: HEADER_LEN + 3 * RECORD_LEN as u64,
            }
        );
        drop(store);

        let (store, opened) = Store::open(dir.path()).expect("reopen");
        assert_eq!(opened.records, 3);
        assert_eq!(store.get(A).expect("get"), Some(state(3, 0)));
        assert_eq!(store.get(B).expect("get"), Some(state(2, 2)));
    }

    #[test]
    fn a_torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open(dir.path()).expect("open");
        store.put(A, state(1, 0)).expect("put");
        store.put(B, state(2, 0)).expect("put");
        drop(store);
        let path = dir.path().join(LOG_FILE);
        let mut bytes = fs::read(&path).expect("read");
        // Damage B's record and leave half a record after it.
        let b_at = HEADER_LEN as usize + RECORD_LEN;
        bytes[b_at + 20] ^= 0xff;
        bytes.extend_from_slice(&[7; 10]);
        fs::write(&path, &bytes).expect("write");

        let (store, opened) = Store::open(dir.path()).expect("reopen");
        assert_eq!(opened.records, 1);
        assert_eq!(opened.dropped_bytes, RECORD_LEN as u64 + 10);
        assert_eq!(store.get(A).expect("get"), Some(state(1, 0)));
        assert_eq!(store.get(B).expect("get"), None);
        // New records go where the damage was.
        store.put(B, state(9, 9)).expect("put");
        assert_eq!(
            fs::metadata(&path).expect("stat").len(),
            HEADER_LEN + 2 * RECORD_LEN as u64
        );
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(LOG_FILE), b"definitely not a log file").expect("write");
        assert!(matches!(
            Store::open(dir.path()),
            Err(StoreError::Header { .. })
        ));
    }
}
