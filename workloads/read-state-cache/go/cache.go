package main

// The read-state cache: an LRU of counters split into shards, each behind its own mutex,
// written behind to the Store on eviction and by periodic flush passes. The rules are the
// Rust server's (src/cache.rs), so both give the same answers and the same counts:
//
//   - a key belongs to shard mix(user, channel) % shards; shard i holds at most
//     capacity/shards entries, plus one for the first capacity%shards shards;
//   - every request on a cached key is a hit and makes it the most recently used; otherwise
//     it is a miss: the state is loaded from the store (zero when it has none); a full
//     shard first evicts its least recently used entry, writing it to the store if dirty;
//     then the key is inserted, clean;
//   - ack sets last read and zeroes mentions, mention adds one (saturating): both leave the
//     entry dirty; get changes nothing;
//   - a flush pass writes every dirty entry still cached, shard by shard (one write per
//     shard, under its lock), marks them clean, then syncs the store.
//
// Each shard is the classic Go shape: a map of pointers to heap entries threaded on an
// intrusive doubly linked list. Every entry is a separate object the garbage collector has
// to find and mark on every cycle: with millions of entries, that is the cost this workload
// exists to show.

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

const (
	maxAutoShards   = 64
	minShardEntries = 16384
	maxShards       = 4096
)

// autoShards is the shard count when none is given: capacity/16384, between 1 and 64.
func autoShards(capacity int) int {
	return min(max(capacity/minShardEntries, 1), maxAutoShards)
}

// shardOf is the splitmix64 finalizer of user*0x9E3779B97F4A7C15 ^ channel, modulo shards.
func shardOf(k Key, shards int) int {
	h := k.User*0x9E3779B97F4A7C15 ^ k.Channel
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	h *= 0x94D049BB133111EB
	h ^= h >> 31
	return int(h % uint64(shards))
}

func shardCapacity(capacity, shards, i int) int {
	c := capacity / shards
	if i < capacity%shards {
		c++
	}
	return c
}

// CacheStats is what the cache counted, summed over shards.
type CacheStats struct {
	Requests       uint64 `json:"requests"` // acks + mentions + gets
	Acks           uint64 `json:"acks"`
	Mentions       uint64 `json:"mentions"`
	Gets           uint64 `json:"gets"`
	Hits           uint64 `json:"hits"`
	Misses         uint64 `json:"misses"`
	Loaded         uint64 `json:"loaded"` // misses the store had a record for
	Evictions      uint64 `json:"evictions"`
	EvictedWritten uint64 `json:"evicted_written"` // evicted entries that were dirty
}

func (s *CacheStats) add(o *CacheStats) {
	s.Requests += o.Requests
	s.Acks += o.Acks
	s.Mentions += o.Mentions
	s.Gets += o.Gets
	s.Hits += o.Hits
	s.Misses += o.Misses
	s.Loaded += o.Loaded
	s.Evictions += o.Evictions
	s.EvictedWritten += o.EvictedWritten
}

type entry struct {
	key        Key
	lastRead   uint64
	mentions   uint32
	dirty      bool // changed since it was loaded or last written
	prev, next *entry
}

func (e *entry) state() ReadState {
	return ReadState{LastRead: e.lastRead, Mentions: e.mentions}
}

type shard struct {
	mu    sync.Mutex
	items map[Key]*entry
	// The list's sentinel: root.next is the most recently used entry, root.prev the least.
	root     entry
	capacity int
	// Keys that turned dirty since the last flush pass (a pass skips those no longer dirty).
	dirty []Key
	stats CacheStats
}

func (s *shard) unlink(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (s *shard) pushFront(e *entry) {
	e.prev = &s.root
	e.next = s.root.next
	s.root.next.prev = e
	s.root.next = e
}

// Cache is the sharded LRU and its store.
type Cache struct {
	shards         []*shard
	store          *Store
	flushes        atomic.Uint64
	flushedEntries atomic.Uint64
}

// NewCache makes a cache of capacity entries in shards shards (0: autoShards).
func NewCache(capacity, shards int, store *Store) (*Cache, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("--capacity must be at least 1")
	}
	if shards == 0 {
		shards = autoShards(capacity)
	}
	if shards < 1 || shards > maxShards || shards > capacity {
		return nil, fmt.Errorf("--shards %d is out of range: 1 to %d (and at most --capacity %d)", shards, maxShards, capacity)
	}
	c := &Cache{store: store, shards: make([]*shard, shards)}
	for i := range c.shards {
		n := shardCapacity(capacity, shards, i)
		s := &shard{items: make(map[Key]*entry, n), capacity: n}
		s.root.next = &s.root
		s.root.prev = &s.root
		c.shards[i] = s
	}
	return c, nil
}

// Apply applies one request and returns the read state after it. A store error leaves the
// cache as it was.
func (c *Cache) Apply(req *Request) (ReadState, error) {
	state, _, err := c.ApplyHit(req)
	return state, err
}

// ApplyHit is Apply that also says whether the key was cached (a hit) or not (a miss).
func (c *Cache) ApplyHit(req *Request) (ReadState, bool, error) {
	s := c.shards[shardOf(req.Key, len(c.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	switch req.Op {
	case opAck:
		s.stats.Acks++
	case opMention:
		s.stats.Mentions++
	default:
		s.stats.Gets++
	}
	e, ok := s.items[req.Key]
	if ok {
		s.stats.Hits++
		s.unlink(e)
		s.pushFront(e)
	} else {
		s.stats.Misses++
		loaded, found, err := c.store.Get(req.Key)
		if err != nil {
			return ReadState{}, false, err
		}
		if len(s.items) == s.capacity {
			old := s.root.prev
			if old.dirty {
				if err := c.store.Put(old.key, old.state()); err != nil {
					return ReadState{}, false, err
				}
				s.stats.EvictedWritten++
			}
			s.unlink(old)
			delete(s.items, old.key)
			s.stats.Evictions++
		}
		if found {
			s.stats.Loaded++
		}
		e = &entry{key: req.Key, lastRead: loaded.LastRead, mentions: loaded.Mentions}
		s.items[req.Key] = e
		s.pushFront(e)
	}
	wasDirty := e.dirty
	switch req.Op {
	case opAck:
		e.lastRead = req.MessageID
		e.mentions = 0
		e.dirty = true
	case opMention:
		if e.mentions < math.MaxUint32 {
			e.mentions++
		}
		e.dirty = true
	}
	if e.dirty && !wasDirty {
		s.dirty = append(s.dirty, req.Key)
	}
	return e.state(), ok, nil
}

// Flush is one flush pass: it writes the dirty entries of every shard and syncs the store,
// returning the number of entries written.
func (c *Cache) Flush() (uint64, error) {
	var batch []KeyState
	var written uint64
	for _, s := range c.shards {
		s.mu.Lock()
		keys := s.dirty
		s.dirty = nil
		batch = batch[:0]
		for _, k := range keys {
			if e, ok := s.items[k]; ok && e.dirty {
				batch = append(batch, KeyState{Key: k, State: e.state()})
				// Listed once: a duplicate later in keys now finds it clean.
				e.dirty = false
			}
		}
		if err := c.store.PutBatch(batch); err != nil {
			// Nothing was written: dirty again, listed again.
			for _, ks := range batch {
				if e, ok := s.items[ks.Key]; ok {
					e.dirty = true
				}
			}
			s.dirty = keys
			s.mu.Unlock()
			return written, err
		}
		written += uint64(len(batch))
		// Keep the list's backing array for the next pass.
		s.dirty = keys[:0]
		s.mu.Unlock()
	}
	if err := c.store.Sync(); err != nil {
		return written, err
	}
	c.flushes.Add(1)
	c.flushedEntries.Add(written)
	return written, nil
}

// Stats sums the shards' counters.
func (c *Cache) Stats() CacheStats {
	var total CacheStats
	for _, s := range c.shards {
		s.mu.Lock()
		total.add(&s.stats)
		s.mu.Unlock()
	}
	return total
}

// Len is the number of entries cached now.
func (c *Cache) Len() int {
	n := 0
	for _, s := range c.shards {
		s.mu.Lock()
		n += len(s.items)
		s.mu.Unlock()
	}
	return n
}
