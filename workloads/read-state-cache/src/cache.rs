//! The read-state cache: an LRU of counters split into shards, each behind its own mutex,
//! written behind to the [`Store`] on eviction and by periodic flush passes.
//!
//! The rules (the Go server follows the same ones, so both give the same answers and counts):
//!
//! - A key belongs to shard `mix(user, channel) % shards` ([`shard_of`]); shard `i` holds at
//!   most `capacity / shards` entries, plus one for the first `capacity % shards` shards.
//! - Every request (ack, mention, get) on a key in its shard is a *hit* and makes it the most
//!   recently used. Otherwise it is a *miss*: the state is *loaded* from the store (zero when
//!   the store has none); when the shard is full its least recently used entry is *evicted*
//!   first, and written to the store if it is dirty; then the key is inserted, clean.
//! - `ack` sets last read and zeroes mentions, `mention` adds one (saturating): both leave the
//!   entry dirty. `get` changes nothing.
//! - A flush pass ([`Cache::flush`]) writes every dirty entry still cached, shard by shard
//!   (one write per shard, under its lock), marks them clean, then syncs the store.

use std::{
    mem,
    num::NonZeroUsize,
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
};

use lru::LruCache;
use serde::Serialize;

use crate::{
    protocol::{Key, ReadState, Request},
    store::{Store, StoreError},
};

/// Most shards [`auto_shards`] chooses.
pub const MAX_AUTO_SHARDS: usize = 64;
/// Entries per shard below which [`auto_shards`] uses fewer shards.
pub const MIN_SHARD_ENTRIES: usize = 16_384;
/// Most shards `--shards` accepts.
pub const MAX_SHARDS: usize = 4096;

/// The shard count when none is given: `capacity / 16384`, between 1 and 64. Tiny caches
/// have one shard, so they are one exact LRU.
pub fn auto_shards(capacity: usize) -> usize {
    (capacity / MIN_SHARD_ENTRIES).clamp(1, MAX_AUTO_SHARDS)
}

/// The shard of `key`: the splitmix64 finalizer of `user * 0x9E3779B97F4A7C15 ^ channel`,
/// modulo `shards` (the Go server computes the same).
pub fn shard_of(key: Key, shards: usize) -> usize {
    let mut h = key.user.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.channel;
    h ^= h >> 30;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    (h % shards as u64) as usize
}

/// The capacity of shard `i`.
pub fn shard_capacity(capacity: usize, shards: usize, i: usize) -> usize {
    capacity / shards + usize::from(i < capacity % shards)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--capacity must be at least 1")]
    ZeroCapacity,
    #[error("--shards {shards} is out of range: 1 to {max} (and at most --capacity {capacity})")]
    Shards {
        shards: usize,
        capacity: usize,
        max: usize,
    },
}

/// What the cache counted, summed over shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Well-formed requests (acks + mentions + gets).
    pub requests: u64,
    pub acks: u64,
    pub mentions: u64,
    pub gets: u64,
    pub hits: u64,
    pub misses: u64,
    /// Misses the store had a record for.
    pub loaded: u64,
    pub evictions: u64,
    /// Evicted entries that were dirty, written to the store.
    pub evicted_written: u64,
}

impl CacheStats {
    fn add(&mut self, o: &Self) {
        self.requests += o.requests;
        self.acks += o.acks;
        self.mentions += o.mentions;
        self.gets += o.gets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.loaded += o.loaded;
        self.evictions += o.evictions;
        self.evicted_written += o.evicted_written;
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    last_read: u64,
    mentions: u32,
    /// Changed since it was loaded or last written.
    dirty: bool,
}

impl Entry {
    fn state(&self) -> ReadState {
        ReadState {
            last_read: self.last_read,
            mentions: self.mentions,
        }
    }
}

struct Shard {
    lru: LruCache<Key, Entry>,
    /// Keys that turned dirty since the last flush pass (an evicted or re-cleaned key may
    /// still be listed: the pass skips what is no longer dirty).
    dirty: Vec<Key>,
    stats: CacheStats,
}

pub struct Cache {
    shards: Box<[Mutex<Shard>]>,
    store: Store,
    flushes: AtomicU64,
    flushed_entries: AtomicU64,
}

/// Flush passes and the entries they wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushStats {
    pub flushes: u64,
    pub flushed_entries: u64,
}

impl Cache {
    /// A cache of `capacity` entries in `shards` shards (`None`: [`auto_shards`]).
    pub fn new(capacity: usize, shards: Option<usize>, store: Store) -> Result<Self, ConfigError> {
        if capacity == 0 {
            return Err(ConfigError::ZeroCapacity);
        }
        let n = shards.unwrap_or_else(|| auto_shards(capacity));
        if n == 0 || n > MAX_SHARDS || n > capacity {
            return Err(ConfigError::Shards {
                shards: n,
                capacity,
                max: MAX_SHARDS,
            });
        }
        let shards = (0..n)
            .map(|i| {
                let cap =
                    NonZeroUsize::new(shard_capacity(capacity, n, i)).unwrap_or(NonZeroUsize::MIN);
                Mutex::new(Shard {
                    lru: LruCache::new(cap),
                    dirty: Vec::new(),
                    stats: CacheStats::default(),
                })
            })
            .collect();
        Ok(Self {
            shards,
            store,
            flushes: AtomicU64::new(0),
            flushed_entries: AtomicU64::new(0),
        })
    }

    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    fn lock(&self, i: usize) -> MutexGuard<'_, Shard> {
        // A shard's invariants hold between statements that could panic.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies one request and returns the read state after it. A store error leaves the
    /// cache as it was.
    pub fn apply(&self, req: &Request) -> Result<ReadState, StoreError> {
        self.apply_hit(req).map(|(state, _)| state)
    }

    /// [`Cache::apply`] that also says whether the key was cached (`true`, a hit) or not.
    pub fn apply_hit(&self, req: &Request) -> Result<(ReadState, bool), StoreError> {
        let key = req.key();
        let mut guard = self.lock(shard_of(key, self.shards.len()));
        let shard = &mut *guard;
        shard.stats.requests += 1;
        match req {
            Request::Ack { .. } => shard.stats.acks += 1,
            Request::Mention { .. } => shard.stats.mentions += 1,
            Request::Get { .. } => shard.stats.gets += 1,
        }
        let hit = shard.lru.contains(&key);
        if hit {
            shard.stats.hits += 1;
        } else {
            shard.stats.misses += 1;
            let loaded = self.store.get(key)?;
            if shard.lru.len() == shard.lru.cap().get()
                && let Some((&old, entry)) = shard.lru.peek_lru()
                && entry.dirty
            {
                self.store.put(old, entry.state())?;
                shard.stats.evicted_written += 1;
            }
            let state = loaded.unwrap_or_default();
            if loaded.is_some() {
                shard.stats.loaded += 1;
            }
            let entry = Entry {
                last_read: state.last_read,
                mentions: state.mentions,
                dirty: false,
            };
            if shard.lru.push(key, entry).is_some() {
                shard.stats.evictions += 1;
            }
        }
        let Some(entry) = shard.lru.get_mut(&key) else {
            unreachable!("the key was just found or inserted")
        };
        let was_dirty = entry.dirty;
        match *req {
            Request::Ack { message_id, .. } => {
                entry.last_read = message_id;
                entry.mentions = 0;
                entry.dirty = true;
            }
            Request::Mention { .. } => {
                entry.mentions = entry.mentions.saturating_add(1);
                entry.dirty = true;
            }
            Request::Get { .. } => {}
        }
        let state = entry.state();
        if entry.dirty && !was_dirty {
            shard.dirty.push(key);
        }
        Ok((state, hit))
    }

    /// One flush pass: writes the dirty entries of every shard and syncs the store. Returns
    /// the number of entries written.
    pub fn flush(&self) -> Result<u64, StoreError> {
        let mut batch = Vec::new();
        let mut written = 0;
        for i in 0..self.shards.len() {
            let mut guard = self.lock(i);
            let shard = &mut *guard;
            let keys = mem::take(&mut shard.dirty);
            batch.clear();
            for &key in &keys {
                if let Some(e) = shard.lru.peek_mut(&key)
                    && e.dirty
                {
                    batch.push((key, e.state()));
                    // Listed once: a duplicate later in `keys` now finds it clean.
                    e.dirty = false;
                }
            }
            if let Err(e) = self.store.put_batch(&batch) {
                // Nothing was written: dirty again, listed again.
                for &(key, _) in &batch {
                    if let Some(entry) = shard.lru.peek_mut(&key) {
                        entry.dirty = true;
                    }
                }
                shard.dirty = keys;
                return Err(e);
            }
            written += batch.len() as u64;
            // Keep the list's allocation for the next pass.
            shard.dirty = keys;
            shard.dirty.clear();
        }
        self.store.sync()?;
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.flushed_entries.fetch_add(written, Ordering::Relaxed);
        Ok(written)
    }

    pub fn stats(&self) -> CacheStats {
        let mut total = CacheStats::default();
        for i in 0..self.shards.len() {
            total.add(&self.lock(i).stats);
        }
        total
    }

    pub fn flush_stats(&self) -> FlushStats {
        FlushStats {
            flushes: self.flushes.load(Ordering::Relaxed),
            flushed_entries: self.flushed_entries.load(Ordering::Relaxed),
        }
    }

    /// Entries cached now.
    pub fn len(&self) -> usize {
        (0..self.shards.len()).map(|i| self.lock(i).lru.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(capacity: usize, shards: Option<usize>) -> (Cache, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open(dir.path()).expect("store");
        (Cache::new(capacity, shards, store).expect("cache"), dir)
    }

    fn ack(user: u64, channel: u64, message_id: u64) -> Request {
        Request::Ack {
            key: Key::new(user, channel),
            message_id,
        }
    }

    fn get(user: u64, channel: u64) -> Request {
        Request::Get {
            key: Key::new(user, channel),
        }
    }

    fn mention(user: u64, channel: u64) -> Request {
        Request::Mention {
            key: Key::new(user, channel),
        }
    }

    fn rs(last_read: u64, mentions: u32) -> ReadState {
        ReadState {
            last_read,
            mentions,
        }
    }

    #[test]
    fn apply_hit_says_whether_the_key_was_cached() {
        let (c, _dir) = cache(1, Some(1));
        let hits: Vec<bool> = [1, 1, 2, 1]
            .map(|user| c.apply_hit(&get(user, 1)).expect("apply").1)
            .to_vec();
        // Capacity 1: user 2 evicts user 1, so its third request misses again.
        assert_eq!(hits, [false, true, false, false]);
    }

    #[test]
    fn shard_counts_and_capacities() {
        assert_eq!(auto_shards(1), 1);
        assert_eq!(auto_shards(40_000), 2);
        assert_eq!(auto_shards(2_000_000), 64);
        let caps: Vec<_> = (0..3).map(|i| shard_capacity(10, 3, i)).collect();
        assert_eq!(caps, [4, 3, 3]);
        // The values the Go server's tests check too.
        assert_eq!(shard_of(Key::new(1, 10), 64), 10);
        assert_eq!(shard_of(Key::new(u64::MAX, 0), 64), 0);
        assert_eq!(shard_of(Key::new(12_345, 678), 1000), 448);
        assert!(matches!(
            Cache::new(
                0,
                None,
                Store::open(tempfile::tempdir().expect("t").path())
                    .expect("s")
                    .0
            ),
            Err(ConfigError::ZeroCapacity)
        ));
    }

    #[test]
    fn counters_and_lru_order() {
        let (c, _dir) = cache(2, None);
        assert_eq!(c.apply(&ack(1, 1, 100)).expect("ack"), rs(100, 0));
        for n in 1..=3 {
            assert_eq!(c.apply(&mention(1, 1)).expect("mention"), rs(100, n));
        }
        assert_eq!(c.apply(&get(2, 2)).expect("get"), rs(0, 0));
        // (1,1) is the most recently used: (2,2) goes, clean, so nothing is written.
        assert_eq!(c.apply(&get(1, 1)).expect("get"), rs(100, 3));
        assert_eq!(c.apply(&mention(3, 3)).expect("mention"), rs(0, 1));
        let s = c.stats();
        assert_eq!(
            (s.hits, s.misses, s.evictions, s.evicted_written),
            (4, 3, 1, 0)
        );
        // Now (1,1) is the oldest and dirty: written when (2,2) comes back.
        assert_eq!(c.apply(&get(2, 2)).expect("get"), rs(0, 0));
        assert_eq!(c.stats().evicted_written, 1);
        assert_eq!(c.apply(&get(1, 1)).expect("reload"), rs(100, 3));
        let s = c.stats();
        assert_eq!((s.loaded, s.evictions, s.evicted_written), (1, 3, 2));
        assert_eq!(c.store().stats().keys, 2);
    }

    #[test]
    fn flush_writes_dirty_entries_once() {
        let (c, _dir) = cache(100, Some(3));
        for u in 0..10 {
            c.apply(&ack(u, 1, u)).expect("ack");
            c.apply(&mention(u, 1)).expect("mention");
            c.apply(&get(u, 2)).expect("get");
        }
        assert_eq!(c.flush().expect("flush"), 10);
        assert_eq!(c.flush().expect("flush"), 0);
        c.apply(&mention(4, 1)).expect("mention");
        assert_eq!(c.flush().expect("flush"), 1);
        assert_eq!(
            c.flush_stats(),
            FlushStats {
                flushes: 3,
                flushed_entries: 11
            }
        );
        assert_eq!(c.store().get(Key::new(4, 1)).expect("get"), Some(rs(4, 2)));
        assert_eq!(c.store().get(Key::new(4, 2)).expect("get"), None);
    }

    #[test]
    fn mentions_saturate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open(dir.path()).expect("store");
        store.put(Key::new(1, 1), rs(7, u32::MAX)).expect("put");
        let c = Cache::new(1, None, store).expect("cache");
        assert_eq!(c.apply(&mention(1, 1)).expect("mention"), rs(7, u32::MAX));
    }
}
