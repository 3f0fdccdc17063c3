// Requests with a known tail, in Go: the ground truth for a Go span's anatomy.
//
// Four workers serve requests through handle, paced at about 35 a second each. A request
// spins 100 µs, allocates 1 MiB of garbage in 1 KiB pieces (over a live heap of linked
// nodes, so that marking takes a while and allocation during it is drafted into assists),
// and takes the table's sync.Mutex for 20 µs of work. Every 400 ms a compactor sleeps 20 ms
// holding that mutex. Each request times its own lock wait (around Lock). At the end, the
// program prints one JSON line: the requests, their time and their lock waits', the lock
// wait's share of the slowest 1% and of the rest (by the request's own duration), the GC
// cycles, and the runtime's own GC assist CPU time (runtime/metrics).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"sync"
	"time"
)

type node struct {
	next *node
	pad  [48]byte
}

var (
	table sync.Mutex
	live  []*node
	sink  [][]byte
	sinkM sync.Mutex
)

func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}

// handle serves one request and returns its own duration (timed inside it, as the span
// times it: from its entry to its return) and its lock wait.
//
//go:noinline
func handle(i int) (time.Duration, time.Duration) {
	start := time.Now()
	spin(100 * time.Microsecond)
	garbage := make([][]byte, 0, 1024)
	for k := 0; k < 1024; k++ {
		garbage = append(garbage, make([]byte, 1024))
	}
	sinkM.Lock()
	sink = garbage
	sinkM.Unlock()
	t0 := time.Now()
	table.Lock()
	wait := time.Since(t0)
	spin(20 * time.Microsecond)
	table.Unlock()
	return time.Since(start), wait
}

// compact holds the table's lock while it sleeps, as a compaction would while it works.
//
//go:noinline
func compact() {
	table.Lock()
	time.Sleep(20 * time.Millisecond)
	table.Unlock()
}

type request struct {
	took, lock time.Duration
}

func main() {
	seconds := 4.0
	if len(os.Args) > 1 {
		seconds, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	// A live heap of about 40 MiB of pointers for the GC to mark.
	for i := 0; i < 16; i++ {
		var head *node
		for k := 0; k < 40000; k++ {
			head = &node{next: head}
		}
		live = append(live, head)
	}
	deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(400 * time.Millisecond):
			}
			compact()
		}
	}()
	startGC := readGC()
	var mu sync.Mutex
	var all []request
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var mine []request
			next := time.Now()
			for i := 0; time.Now().Before(deadline); i++ {
				took, lock := handle(i)
				mine = append(mine, request{took, lock})
				next = next.Add(28 * time.Millisecond)
				time.Sleep(time.Until(next))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	close(stop)
	endGC := readGC()

	sort.Slice(all, func(a, b int) bool { return all[a].took > all[b].took })
	nslow := (len(all) + 99) / 100
	share := func(rs []request) float64 {
		var took, lock time.Duration
		for _, r := range rs {
			took += r.took
			lock += r.lock
		}
		if took == 0 {
			return 0
		}
		return float64(lock) / float64(took)
	}
	var took, lock time.Duration
	for _, r := range all {
		took += r.took
		lock += r.lock
	}
	out := map[string]any{
		"requests":           len(all),
		"seconds":            took.Seconds(),
		"lock_seconds":       lock.Seconds(),
		"slow_count":         nslow,
		"slow_lock_share":    share(all[:nslow]),
		"typical_lock_share": share(all[nslow:]),
		"gc_cycles":          endGC.cycles - startGC.cycles,
		"assist_seconds":     endGC.assist - startGC.assist,
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

type gcState struct {
	cycles uint64
	assist float64
}

func readGC() gcState {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/mark/assist:cpu-seconds"}}
	metrics.Read(s)
	runtime.KeepAlive(live)
	return gcState{cycles: s[0].Value.Uint64(), assist: s[1].Value.Float64()}
}
