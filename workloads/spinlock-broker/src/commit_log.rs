//! The commit log: messages appended to segment files, with an in-memory index from offset to
//! position. Everything here runs under the broker's one lock.
//!
//! A record on disk is `[payload length: u32 LE][offset: u64 LE][payload]`, written with one
//! `write(2)` into the active segment, named after its first offset (`00000000000000000000.log`,
//! as Kafka names them). A segment rolls when the next record would take it past
//! `segment_bytes`; only the newest `retain_segments` sealed segments are kept (older files
//! are deleted, their index dropped), so a long run's disk and memory stay bounded. The
//! flush policy says when appended data is forced to disk (`fdatasync`): never (the page
//! cache only), every N messages, or once an interval has passed, checked on append; a roll
//! flushes the segment it seals unless the policy is `never`.

use std::{
    collections::VecDeque,
    fmt, fs,
    io::{self, Write as _},
    os::unix::fs::FileExt as _,
    path::{Path, PathBuf},
    str::FromStr,
    time::{Duration, Instant},
};

use serde::Serialize;

/// Bytes before the payload in a record: payload length (u32) and offset (u64).
pub const RECORD_HEADER: usize = 12;

/// When appended data is forced to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Never; the kernel writes the page cache back when it likes.
    Never,
    /// After every N messages.
    Every(u64),
    /// When this long has passed since the last flush (checked on append).
    Interval(Duration),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("flush policy `{0}` is not `never`, `every:N` (N ≥ 1) or `interval:MS`")]
pub struct FlushPolicyError(String);

impl FromStr for FlushPolicy {
    type Err = FlushPolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || FlushPolicyError(s.to_owned());
        if s == "never" {
            return Ok(Self::Never);
        }
        if let Some(n) = s.strip_prefix("every:") {
            return match n.parse() {
                Ok(n) if n >= 1 => Ok(Self::Every(n)),
                _ => Err(err()),
            };
        }
        if let Some(ms) = s.strip_prefix("interval:") {
            // Milliseconds, or any duration with a unit (`interval:2s`).
            let interval = match ms.parse::<u64>() {
                Ok(ms) => Duration::from_millis(ms),
                Err(_) => switchyard_harness::parse_duration(ms).map_err(|_| err())?,
            };
            return if interval.is_zero() {
                Err(err())
            } else {
                Ok(Self::Interval(interval))
            };
        }
        Err(err())
    }
}

impl fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Never => f.write_str("never"),
            Self::Every(n) => write!(f, "every:{n}"),
            Self::Interval(d) => write!(f, "interval:{}", d.as_millis()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    pub dir: PathBuf,
    pub segment_bytes: u64,
    pub retain_segments: usize,
    pub flush: FlushPolicy,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("failed to create log directory `{}`", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to create segment `{}`", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to append to segment `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to flush segment `{}`", path.display())]
    Flush {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to delete segment `{}`", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to read segment `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("segment size {0} is out of range (16 bytes to 4 GiB)")]
    SegmentSize(u64),
    #[error("record of {0} bytes has no room for its header")]
    ShortRecord(usize),
}

/// What the log did, for the server's summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LogStats {
    /// Messages appended (the next offset).
    pub messages: u64,
    /// Payload bytes appended.
    pub payload_bytes: u64,
    /// Bytes written to segments (payloads and headers).
    pub written_bytes: u64,
    pub segments_rolled: u64,
    pub segments_deleted: u64,
    pub flushes: u64,
}

#[derive(Debug)]
struct Segment {
    base_offset: u64,
    path: PathBuf,
    /// Position of each record, by `offset - base_offset`.
    index: Vec<u32>,
}

#[derive(Debug)]
pub struct CommitLog {
    config: LogConfig,
    active: Segment,
    file: fs::File,
    len: u64,
    sealed: VecDeque<Segment>,
    unflushed: u64,
    last_flush: Instant,
    stats: LogStats,
}

fn segment_path(dir: &Path, base_offset: u64) -> PathBuf {
    dir.join(format!("{base_offset:020}.log"))
}

fn is_segment_name(name: &str) -> bool {
    name.len() == 24 && name.ends_with(".log") && name[..20].bytes().all(|b| b.is_ascii_digit())
}

impl CommitLog {
    /// Starts a new log in `config.dir` (created if missing). Segment files left there by an
    /// earlier run are deleted: every run starts at offset 0.
    pub fn open(config: LogConfig) -> Result<Self, LogError> {
        if !(16..=u64::from(u32::MAX)).contains(&config.segment_bytes) {
            return Err(LogError::SegmentSize(config.segment_bytes));
        }
        fs::create_dir_all(&config.dir).map_err(|source| LogError::CreateDir {
            path: config.dir.clone(),
            source,
        })?;
        let entries = fs::read_dir(&config.dir).map_err(|source| LogError::CreateDir {
            path: config.dir.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            if entry.file_name().to_str().is_some_and(is_segment_name) {
                let path = entry.path();
                fs::remove_file(&path).map_err(|source| LogError::Remove { path, source })?;
            }
        }
        let (active, file) = Self::create_segment(&config.dir, 0)?;
        Ok(Self {
            config,
            active,
            file,
            len: 0,
            sealed: VecDeque::new(),
            unflushed: 0,
            last_flush: Instant::now(),
            stats: LogStats::default(),
        })
    }

    fn create_segment(dir: &Path, base_offset: u64) -> Result<(Segment, fs::File), LogError> {
        let path = segment_path(dir, base_offset);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(|source| LogError::Create {
                path: path.clone(),
                source,
            })?;
        Ok((
            Segment {
                base_offset,
                path,
                index: Vec::new(),
            },
            file,
        ))
    }

    /// Appends one record: `record` is `[len][8 bytes for the offset][payload]` as
    /// [`crate::protocol::read_record`] fills it; the offset is written into it here. Returns
    /// the offset assigned.
    pub fn append(&mut self, record: &mut [u8]) -> Result<u64, LogError> {
        if record.len() < RECORD_HEADER {
            return Err(LogError::ShortRecord(record.len()));
        }
        let size = record.len() as u64;
        if self.len > 0 && self.len + size > self.config.segment_bytes {
            self.roll()?;
        }
        let offset = self.stats.messages;
        record[4..RECORD_HEADER].copy_from_slice(&offset.to_le_bytes());
        self.file
            .write_all(record)
            .map_err(|source| LogError::Write {
                path: self.active.path.clone(),
                source,
            })?;
        // Positions fit: a segment rolls before passing segment_bytes (≤ 4 GiB), so every
        // record starts below it.
        self.active.index.push(self.len as u32);
        self.len += size;
        self.stats.messages += 1;
        self.stats.payload_bytes += size - RECORD_HEADER as u64;
        self.stats.written_bytes += size;
        self.unflushed += 1;
        let flush = match self.config.flush {
            FlushPolicy::Never => false,
            FlushPolicy::Every(n) => self.unflushed >= n,
            FlushPolicy::Interval(d) => self.last_flush.elapsed() >= d,
        };
        if flush {
            self.flush()?;
        }
        Ok(offset)
    }

    fn flush(&mut self) -> Result<(), LogError> {
        self.file.sync_data().map_err(|source| LogError::Flush {
            path: self.active.path.clone(),
            source,
        })?;
        self.unflushed = 0;
        self.last_flush = Instant::now();
        self.stats.flushes += 1;
        Ok(())
    }

    fn roll(&mut self) -> Result<(), LogError> {
        if self.config.flush != FlushPolicy::Never && self.unflushed > 0 {
            self.flush()?;
        }
        let (segment, file) = Self::create_segment(&self.config.dir, self.stats.messages)?;
        let sealed = std::mem::replace(&mut self.active, segment);
        self.file = file;
        self.len = 0;
        self.sealed.push_back(sealed);
        self.stats.segments_rolled += 1;
        while self.sealed.len() > self.config.retain_segments {
            if let Some(old) = self.sealed.pop_front() {
                fs::remove_file(&old.path).map_err(|source| LogError::Remove {
                    path: old.path.clone(),
                    source,
                })?;
                self.stats.segments_deleted += 1;
            }
        }
        Ok(())
    }

    pub fn stats(&self) -> LogStats {
        self.stats
    }

    /// The segment file and position of `offset`, while its segment is retained.
    pub fn locate(&self, offset: u64) -> Option<(&Path, u64)> {
        self.sealed
            .iter()
            .chain(std::iter::once(&self.active))
            .find(|s| offset >= s.base_offset && offset - s.base_offset < s.index.len() as u64)
            .map(|s| {
                let i = (offset - s.base_offset) as usize;
                (s.path.as_path(), u64::from(s.index[i]))
            })
    }

    /// Reads the payload of `offset` back from its segment file (`None` once deleted or
    /// never written), checking the record's header against the index.
    pub fn read(&self, offset: u64) -> Result<Option<Vec<u8>>, LogError> {
        let Some((path, position)) = self.locate(offset) else {
            return Ok(None);
        };
        let read_err = |source| LogError::Read {
            path: path.to_owned(),
            source,
        };
        let file = fs::File::open(path).map_err(read_err)?;
        let mut header = [0u8; RECORD_HEADER];
        file.read_exact_at(&mut header, position)
            .map_err(read_err)?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let mut stored = [0u8; 8];
        stored.copy_from_slice(&header[4..]);
        if u64::from_le_bytes(stored) != offset {
            return Err(read_err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("record at position {position} is not offset {offset}"),
            )));
        }
        let mut payload = vec![0; len];
        file.read_exact_at(&mut payload, position + RECORD_HEADER as u64)
            .map_err(read_err)?;
        Ok(Some(payload))
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(payload: &[u8]) -> Vec<u8> {
        let mut r = vec![0; RECORD_HEADER];
        r[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        r.extend_from_slice(payload);
        r
    }

    fn config(dir: &Path, segment_bytes: u64, flush: FlushPolicy) -> LogConfig {
        LogConfig {
            dir: dir.to_owned(),
            segment_bytes,
            retain_segments: 2,
            flush,
        }
    }

    fn segment_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn flush_policies_parse() {
        assert_eq!("never".parse(), Ok(FlushPolicy::Never));
        assert_eq!("every:8".parse(), Ok(FlushPolicy::Every(8)));
        assert_eq!(
            "interval:250".parse(),
            Ok(FlushPolicy::Interval(Duration::from_millis(250)))
        );
        assert_eq!(
            "interval:2s".parse(),
            Ok(FlushPolicy::Interval(Duration::from_secs(2)))
        );
        for bad in [
            "",
            "always",
            "every:0",
            "every:x",
            "interval:0",
            "interval:",
        ] {
            assert!(bad.parse::<FlushPolicy>().is_err(), "`{bad}` accepted");
        }
        assert_eq!(FlushPolicy::Every(3).to_string(), "every:3");
    }

    #[test]
    fn appends_assign_dense_offsets_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log =
            CommitLog::open(config(dir.path(), 1 << 20, FlushPolicy::Never)).expect("open");
        for i in 0..100u64 {
            let payload = format!("message {i}");
            assert_eq!(
                log.append(&mut record(payload.as_bytes())).expect("append"),
                i
            );
        }
        assert_eq!(log.read(42).expect("read"), Some(b"message 42".to_vec()));
        assert_eq!(log.read(100).expect("read"), None);
        let stats = log.stats();
        assert_eq!(stats.messages, 100);
        assert_eq!(
            stats.payload_bytes,
            (0..100)
                .map(|i| format!("message {i}").len() as u64)
                .sum::<u64>()
        );
        assert_eq!(
            stats.written_bytes,
            stats.payload_bytes + 100 * RECORD_HEADER as u64
        );
        assert_eq!(stats.flushes, 0);
        let size = fs::metadata(dir.path().join("00000000000000000000.log"))
            .expect("segment")
            .len();
        assert_eq!(size, stats.written_bytes);
    }

    #[test]
    fn segments_roll_at_their_size_and_old_ones_are_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        // 4 records of 12 + 20 bytes fit in 128 bytes.
        let mut log = CommitLog::open(config(dir.path(), 128, FlushPolicy::Never)).expect("open");
        for _ in 0..20 {
            log.append(&mut record(&[7; 20])).expect("append");
        }
        // Segments start at 0, 4, 8, 12, 16; two sealed ones are retained besides the active.
        assert_eq!(
            segment_files(dir.path()),
            [
                "00000000000000000008.log",
                "00000000000000000012.log",
                "00000000000000000016.log"
            ]
        );
        let stats = log.stats();
        assert_eq!((stats.segments_rolled, stats.segments_deleted), (4, 2));
        assert_eq!(log.read(3).expect("read"), None, "deleted with its segment");
        assert_eq!(log.read(9).expect("read"), Some(vec![7; 20]));
        assert_eq!(log.locate(13).map(|(_, pos)| pos), Some(32));
        // A record larger than a segment gets a segment of its own.
        log.append(&mut record(&[1; 500])).expect("append big");
        assert_eq!(log.read(20).expect("read"), Some(vec![1; 500]));
    }

    #[test]
    fn flush_every_n_messages_and_on_roll() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log =
            CommitLog::open(config(dir.path(), 1 << 20, FlushPolicy::Every(10))).expect("open");
        for _ in 0..35 {
            log.append(&mut record(b"x")).expect("append");
        }
        assert_eq!(log.stats().flushes, 3);

        let dir = tempfile::tempdir().expect("tempdir");
        let mut log =
            CommitLog::open(config(dir.path(), 64, FlushPolicy::Every(1_000))).expect("open");
        for _ in 0..5 {
            log.append(&mut record(&[0; 20])).expect("append");
        }
        // 32-byte records, 2 per segment: rolls after 2 and 4 records flush what they seal.
        assert_eq!(log.stats().segments_rolled, 2);
        assert_eq!(log.stats().flushes, 2);
    }

    #[test]
    fn flush_on_interval() {
        let dir = tempfile::tempdir().expect("tempdir");
        let policy = FlushPolicy::Interval(Duration::from_millis(1));
        let mut log = CommitLog::open(config(dir.path(), 1 << 20, policy)).expect("open");
        std::thread::sleep(Duration::from_millis(2));
        log.append(&mut record(b"a")).expect("append");
        assert_eq!(
            log.stats().flushes,
            1,
            "the interval had passed before this append"
        );
    }

    #[test]
    fn open_clears_segments_of_an_earlier_run_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("00000000000000000099.log"), b"old").expect("old segment");
        fs::write(dir.path().join("notes.txt"), b"keep").expect("other file");
        let _log = CommitLog::open(config(dir.path(), 1 << 20, FlushPolicy::Never)).expect("open");
        assert_eq!(
            segment_files(dir.path()),
            ["00000000000000000000.log", "notes.txt"]
        );
    }

    #[test]
    fn refuses_bad_sizes_and_short_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            CommitLog::open(config(dir.path(), 8, FlushPolicy::Never)),
            Err(LogError::SegmentSize(8))
        ));
        let mut log =
            CommitLog::open(config(dir.path(), 1 << 20, FlushPolicy::Never)).expect("open");
        assert!(matches!(
            log.append(&mut [0; 4]),
            Err(LogError::ShortRecord(4))
        ));
    }
}
