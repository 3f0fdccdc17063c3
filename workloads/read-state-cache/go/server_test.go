package main

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// mention is the wire form of a mention request on (user, channel).
func mention(user, channel uint64) []byte {
	b := make([]byte, 4+17)
	binary.LittleEndian.PutUint32(b, 17)
	b[4] = opMention
	binary.LittleEndian.PutUint64(b[5:], user)
	binary.LittleEndian.PutUint64(b[13:], channel)
	return b
}

// mentionsIn reads one response and returns its mention count, failing on a bad status.
func mentionsIn(t *testing.T, conn net.Conn) uint32 {
	t.Helper()
	var out [responseLen]byte
	if _, err := io.ReadFull(conn, out[:]); err != nil {
		t.Fatal(err)
	}
	if out[4] != statusOK {
		t.Fatalf("status %d", out[4])
	}
	return binary.LittleEndian.Uint32(out[13:])
}

// connect serves one end of a pipe and returns the other.
func connect(t *testing.T, s *server) net.Conn {
	t.Helper()
	client, end := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serve(end)
		end.Close()
	}()
	t.Cleanup(func() {
		client.Close()
		<-done
	})
	return client
}

func TestApplyHitSaysWhetherTheKeyWasCached(t *testing.T) {
	c := newTestCache(t, 1, 1)
	var hits []bool
	for _, user := range []uint64{1, 1, 2, 1} {
		_, hit, err := c.ApplyHit(&Request{Op: opGet, Key: Key{user, 1}})
		if err != nil {
			t.Fatal(err)
		}
		hits = append(hits, hit)
	}
	// Capacity 1: user 2 evicts user 1, so its third request misses again.
	if want := []bool{false, true, false, false}; !equal(hits, want) {
		t.Fatalf("hits %v, want %v", hits, want)
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A miss's answer waits the miss latency, in order, with the request already applied and
// the shard unlocked: another connection's request on the same key (one shard) is answered
// while the miss still waits, and sees its effect.
func TestAMissWaitsWithoutHoldingTheCache(t *testing.T) {
	const latency = 400 * time.Millisecond
	s := &server{cache: newTestCache(t, 16, 1), missLatency: latency}
	slow, fast := connect(t, s), connect(t, s)

	started := time.Now()
	go slow.Write(append(mention(7, 1), mention(7, 1)...))
	// Let the first connection's miss be applied before the second asks.
	for s.cache.Stats().Requests < 2 {
		time.Sleep(time.Millisecond)
	}
	if _, err := fast.Write(mention(7, 1)); err != nil {
		t.Fatal(err)
	}
	if got := mentionsIn(t, fast); got != 3 {
		t.Fatalf("the hit on the other connection saw %d mentions, want 3", got)
	}
	if waited := time.Since(started); waited >= latency {
		t.Fatalf("the hit was answered after %v, not before the miss's %v", waited, latency)
	}
	first, second := mentionsIn(t, slow), mentionsIn(t, slow)
	if waited := time.Since(started); waited < latency {
		t.Fatalf("the miss was answered after %v, before its latency of %v", waited, latency)
	}
	if first != 1 || second != 2 {
		t.Fatalf("answers out of order: %d then %d mentions", first, second)
	}
	stats := s.cache.Stats()
	if stats.Hits != 2 || stats.Misses != 1 {
		t.Fatalf("%d hits and %d misses, want 2 and 1", stats.Hits, stats.Misses)
	}
}

// With no miss latency a miss is answered at once: the same order, no wait.
func TestNoMissLatencyAnswersAtOnce(t *testing.T) {
	s := &server{cache: newTestCache(t, 16, 1)}
	conn := connect(t, s)
	go conn.Write(append(mention(7, 1), mention(8, 1)...))
	if a, b := mentionsIn(t, conn), mentionsIn(t, conn); a != 1 || b != 1 {
		t.Fatalf("answers %d and %d, want 1 and 1", a, b)
	}
}
