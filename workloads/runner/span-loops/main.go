// The Go loop of bench-overhead's span section: main.work called RATE times a second (paced by
// spinning on the clock between calls), for half a second untimed (a recorder's start is behind
// it: a span's thresholds are set from its first instances), then CALLS times, each call timed
// on its own; prints {"calls":…,"rate":…,"per_s":…,"ns_per_call":…}, the mean time a call took
// from just before it to just after it returned.
//
//	span-loop-go RATE CALLS
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink int

// work has a frame (it calls leaf), so it starts with the stack check a span's entry is
// placed past.
//
//go:noinline
func work(n int) int {
	return leaf(n) + 1
}

//go:noinline
func leaf(n int) int {
	sink += n
	return sink
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: span-loop-go RATE CALLS")
		os.Exit(2)
	}
	rate, _ := strconv.Atoi(os.Args[1])
	calls, _ := strconv.Atoi(os.Args[2])
	if rate <= 0 || calls <= 0 {
		fmt.Fprintln(os.Stderr, "RATE and CALLS must be positive")
		os.Exit(2)
	}
	period := time.Second / time.Duration(rate)
	const warm = 500 * time.Millisecond
	base := time.Now()
	next := time.Duration(0)
	var inCalls, first time.Duration
	timed := 0
	for i := 0; timed < calls; i++ {
		var t0 time.Duration
		for t0 = time.Since(base); t0 < next; t0 = time.Since(base) {
		}
		// Behind (a call slower than the period): the next one goes at once, no burst.
		if next+period > t0 {
			next += period
		} else {
			next = t0 + period
		}
		work(i)
		t1 := time.Since(base)
		if t0 >= warm {
			if timed == 0 {
				first = t0
			}
			timed++
			inCalls += t1 - t0
		}
	}
	seconds := (time.Since(base) - first).Seconds()
	fmt.Printf("{\"calls\":%d,\"rate\":%d,\"per_s\":%.0f,\"ns_per_call\":%.1f}\n", calls, rate,
		float64(calls)/seconds, float64(inCalls.Nanoseconds())/float64(calls))
}
