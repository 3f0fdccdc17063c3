package main

import (
	"math"
	"testing"
)

func newTestCache(t *testing.T, capacity, shards int) *Cache {
	t.Helper()
	store, _, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	c, err := NewCache(capacity, shards, store)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func apply(t *testing.T, c *Cache, op byte, user, channel, id uint64) ReadState {
	t.Helper()
	state, err := c.Apply(&Request{Op: op, Key: Key{user, channel}, MessageID: id})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// The same values as the Rust server's tests: both put a key in the same shard.
func TestShardsMatchTheRustServer(t *testing.T) {
	cases := []struct {
		key    Key
		shards int
		want   int
	}{
		{Key{1, 10}, 64, 10},
		{Key{math.MaxUint64, 0}, 64, 0},
		{Key{12345, 678}, 1000, 448},
	}
	for _, c := range cases {
		if got := shardOf(c.key, c.shards); got != c.want {
			t.Errorf("shardOf(%v, %d) = %d, want %d", c.key, c.shards, got, c.want)
		}
	}
	if autoShards(1) != 1 || autoShards(40_000) != 2 || autoShards(2_000_000) != 64 {
		t.Error("autoShards differs from the Rust server's")
	}
	if got := []int{shardCapacity(10, 3, 0), shardCapacity(10, 3, 1), shardCapacity(10, 3, 2)}; got[0] != 4 || got[1] != 3 || got[2] != 3 {
		t.Errorf("shard capacities %v, want [4 3 3]", got)
	}
	if _, err := NewCache(0, 0, nil); err == nil {
		t.Error("a capacity of 0 was accepted")
	}
}

func TestCountersAndLRUOrder(t *testing.T) {
	c := newTestCache(t, 2, 0)
	if got := apply(t, c, opAck, 1, 1, 100); got != (ReadState{100, 0}) {
		t.Fatalf("ack: %v", got)
	}
	for n := uint32(1); n <= 3; n++ {
		if got := apply(t, c, opMention, 1, 1, 0); got != (ReadState{100, n}) {
			t.Fatalf("mention %d: %v", n, got)
		}
	}
	apply(t, c, opGet, 2, 2, 0)
	// (1,1) is the most recently used: (2,2) goes, clean, so nothing is written.
	if got := apply(t, c, opGet, 1, 1, 0); got != (ReadState{100, 3}) {
		t.Fatalf("get: %v", got)
	}
	apply(t, c, opMention, 3, 3, 0)
	s := c.Stats()
	if s.Hits != 4 || s.Misses != 3 || s.Evictions != 1 || s.EvictedWritten != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Now (1,1) is the oldest and dirty: written when (2,2) comes back.
	apply(t, c, opGet, 2, 2, 0)
	if got := apply(t, c, opGet, 1, 1, 0); got != (ReadState{100, 3}) {
		t.Fatalf("reload: %v", got)
	}
	s = c.Stats()
	if s.Loaded != 1 || s.Evictions != 3 || s.EvictedWritten != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestFlushWritesDirtyEntriesOnce(t *testing.T) {
	c := newTestCache(t, 100, 3)
	for u := uint64(0); u < 10; u++ {
		apply(t, c, opAck, u, 1, u)
		apply(t, c, opMention, u, 1, 0)
		apply(t, c, opGet, u, 2, 0)
	}
	for _, want := range []uint64{10, 0} {
		if n, err := c.Flush(); err != nil || n != want {
			t.Fatalf("flush: %d, %v; want %d", n, err, want)
		}
	}
	apply(t, c, opMention, 4, 1, 0)
	if n, err := c.Flush(); err != nil || n != 1 {
		t.Fatalf("flush: %d, %v", n, err)
	}
	if c.flushes.Load() != 3 || c.flushedEntries.Load() != 11 {
		t.Fatalf("flushes %d, entries %d", c.flushes.Load(), c.flushedEntries.Load())
	}
	if st, ok, err := c.store.Get(Key{4, 1}); err != nil || !ok || st != (ReadState{4, 2}) {
		t.Fatalf("stored (4,1): %v %v %v", st, ok, err)
	}
}

func TestMentionsSaturate(t *testing.T) {
	store, _, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Put(Key{1, 1}, ReadState{7, math.MaxUint32}); err != nil {
		t.Fatal(err)
	}
	c, err := NewCache(1, 0, store)
	if err != nil {
		t.Fatal(err)
	}
	if got := apply(t, c, opMention, 1, 1, 0); got != (ReadState{7, math.MaxUint32}) {
		t.Fatalf("mention: %v", got)
	}
}
