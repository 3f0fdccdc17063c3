// A Go target with known garbage collection: it allocates steadily (so the runtime starts
// cycles on its own) and forces a few more with runtime.GC. Run it with GODEBUG=gctrace=1 and
// the runtime prints one line per completed cycle, to compare with what a tracer counts.
//
// With -churn-s, it is instead an allocating program the GC costs a known share of: workers
// replace the nodes of a large pointer-rich live set for that long, so each cycle has much to
// mark and cycles come often (gctrace's "P%" is the GC's share of the CPU).
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"time"
)

var sink [][]byte

type node struct {
	next *node
	vals [4]*int
	pad  [16]byte
}

// churn replaces random nodes of a live set of `live` nodes from `workers` goroutines for d.
func churn(d time.Duration, workers, live int) {
	set := make([]*node, live)
	for i := range set {
		set[i] = &node{}
	}
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			x := seed*2654435761 + 1
			for time.Now().Before(stop) {
				for i := 0; i < 1000; i++ {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					v := int(x)
					n := &node{next: set[int(x%uint64(live))]}
					n.vals[0] = &v
					set[int((x>>20)%uint64(live))] = n
				}
			}
		}(uint64(w + 1))
	}
	wg.Wait()
}

func main() {
	forced := flag.Int("forced", 5, "cycles to force with runtime.GC")
	mb := flag.Int("alloc-mb", 200, "megabytes to allocate in 64 KiB pieces")
	churnS := flag.Float64("churn-s", 0, "seconds to churn a pointer-rich live set instead")
	workers := flag.Int("workers", 2, "goroutines churning")
	live := flag.Int("live", 1<<20, "nodes in the live set")
	flag.Parse()
	if *churnS > 0 {
		churn(time.Duration(*churnS*float64(time.Second)), *workers, *live)
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Printf("{\"num_gc\":%d,\"gc_cpu_fraction\":%f}\n", m.NumGC, m.GCCPUFraction)
		return
	}
	for i := 0; i < *mb*16; i++ {
		sink = append(sink, make([]byte, 64<<10))
		if len(sink) > 64 {
			sink = sink[:0]
		}
	}
	for i := 0; i < *forced; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fmt.Printf("{\"num_gc\":%d}\n", m.NumGC)
}
