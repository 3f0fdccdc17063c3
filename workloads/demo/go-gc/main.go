// A Go target with known garbage collection: it allocates steadily (so the runtime starts
// cycles on its own) and forces a few more with runtime.GC. Run it with GODEBUG=gctrace=1 and
// the runtime prints one line per completed cycle, to compare with what a tracer counts.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"time"
)

var sink [][]byte

func main() {
	forced := flag.Int("forced", 5, "cycles to force with runtime.GC")
	mb := flag.Int("alloc-mb", 200, "megabytes to allocate in 64 KiB pieces")
	flag.Parse()
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
