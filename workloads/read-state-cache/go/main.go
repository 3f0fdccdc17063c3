// Command read-state-cache-go is the Go server of the read-state-cache workload, the `go`
// build: the same wire protocol, cache rules, store format and summary as the Rust server
// (`read-state-cache`), so the two differ only in their language runtime.
//
//	read-state-cache-go [--port 0] [--capacity N] [--shards N] [--flush-interval 30s]
//	                    [--data-dir DIR] [--exit-after-idle MS] [--gc-interval DURATION]
//	                    [--gogc PERCENT] [--miss-latency DURATION]
//
// It prints `ready <port>` once listening on 127.0.0.1, and one JSON summary line when it
// ends (SIGINT/SIGTERM, or --exit-after-idle), after a final flush pass. Build it unstripped
// (plain `go build`): switchyard puts uprobes on runtime functions such as runtime.gcStart.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"
)

// millis is a flag value: milliseconds as a plain number, or a duration with a unit.
type millis struct{ d *time.Duration }

func (m millis) String() string {
	if m.d == nil || *m.d == 0 {
		return ""
	}
	return m.d.String()
}

func (m millis) Set(s string) error {
	if ms, err := strconv.ParseUint(s, 10, 63); err == nil {
		*m.d = time.Duration(ms) * time.Millisecond
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("not milliseconds or a duration: %q", s)
	}
	*m.d = d
	return nil
}

// latency is a flag value: a duration of 0 or more with a unit, such as 1ms or 500us.
type latency struct{ d *time.Duration }

func (l latency) String() string {
	if l.d == nil {
		return "0s"
	}
	return l.d.String()
}

func (l latency) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("not a duration of 0 or more with a unit, such as 1ms: %q", s)
	}
	*l.d = d
	return nil
}

// GCStats is what runtime.ReadMemStats says about the collector, read once at exit.
type GCStats struct {
	NumGC          uint32  `json:"num_gc"`
	NumForcedGC    uint32  `json:"num_forced_gc"`
	PauseTotalNs   uint64  `json:"pause_total_ns"`
	PauseMaxNs     uint64  `json:"pause_max_ns"` // over the last 256 cycles
	GCCPUFraction  float64 `json:"gc_cpu_fraction"`
	HeapAllocBytes uint64  `json:"heap_alloc_bytes"`
	HeapObjects    uint64  `json:"heap_objects"`
}

// ProcessUsage is getrusage(RUSAGE_SELF).
type ProcessUsage struct {
	UserNs              uint64 `json:"user_ns"`
	SystemNs            uint64 `json:"system_ns"`
	VoluntarySwitches   uint64 `json:"voluntary_switches"`
	InvoluntarySwitches uint64 `json:"involuntary_switches"`
	MaxRssKiB           uint64 `json:"max_rss_kib"`
}

// Summary is the line printed at exit: the Rust server's fields, in its order, plus gc.
type Summary struct {
	Format          string `json:"format"`
	SchemaVersion   uint32 `json:"schema_version"`
	Server          string `json:"server"`
	EndedBy         string `json:"ended_by"`
	Capacity        uint64 `json:"capacity"`
	Shards          uint64 `json:"shards"`
	FlushIntervalMs uint64 `json:"flush_interval_ms"`
	CacheStats
	Flushes          uint64       `json:"flushes"`
	FlushedEntries   uint64       `json:"flushed_entries"`
	BadRequests      uint64       `json:"bad_requests"`
	StoreErrors      uint64       `json:"store_errors"`
	Entries          uint64       `json:"entries"`
	Store            StoreStats   `json:"store"`
	Connections      uint64       `json:"connections"`
	ConnectionErrors uint64       `json:"connection_errors"`
	UptimeNs         uint64       `json:"uptime_ns"`
	Process          ProcessUsage `json:"process"`
	GC               GCStats      `json:"gc"`
}

func (s *server) summary(cfg config, endedBy string, started time.Time) *Summary {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var pauseMax uint64
	for _, p := range ms.PauseNs {
		pauseMax = max(pauseMax, p)
	}
	var ru syscall.Rusage
	var usage ProcessUsage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		usage = ProcessUsage{
			UserNs:              uint64(ru.Utime.Nano()),
			SystemNs:            uint64(ru.Stime.Nano()),
			VoluntarySwitches:   uint64(ru.Nvcsw),
			InvoluntarySwitches: uint64(ru.Nivcsw),
			MaxRssKiB:           uint64(ru.Maxrss),
		}
	}
	return &Summary{
		Format:           "read-state-cache-summary",
		SchemaVersion:    1,
		Server:           "go",
		EndedBy:          endedBy,
		Capacity:         uint64(cfg.capacity),
		Shards:           uint64(len(s.cache.shards)),
		FlushIntervalMs:  uint64(cfg.flushInterval.Milliseconds()),
		CacheStats:       s.cache.Stats(),
		Flushes:          s.cache.flushes.Load(),
		FlushedEntries:   s.cache.flushedEntries.Load(),
		BadRequests:      s.badRequests.Load(),
		StoreErrors:      s.storeErrors.Load(),
		Entries:          uint64(s.cache.Len()),
		Store:            s.cache.store.Stats(),
		Connections:      s.connections,
		ConnectionErrors: s.connectionErrors.Load(),
		UptimeNs:         uint64(time.Since(started).Nanoseconds()),
		Process:          usage,
		GC: GCStats{
			NumGC:          ms.NumGC,
			NumForcedGC:    ms.NumForcedGC,
			PauseTotalNs:   ms.PauseTotalNs,
			PauseMaxNs:     pauseMax,
			GCCPUFraction:  ms.GCCPUFraction,
			HeapAllocBytes: ms.HeapAlloc,
			HeapObjects:    ms.HeapObjects,
		},
	}
}

// runGC is a named function so a profile shows the forced cycles for what they are.
func runGC() {
	runtime.GC()
}

func main() {
	os.Exit(realMain())
}

func realMain() int {
	started := time.Now()
	// A reader that went away before the summary makes its write fail with EPIPE (handled
	// below) rather than kill the process.
	signal.Ignore(syscall.SIGPIPE)
	fs := flag.NewFlagSet("read-state-cache-go", flag.ContinueOnError)
	var cfg config
	fs.IntVar(&cfg.port, "port", 0, "port on 127.0.0.1; 0 lets the kernel choose (printed as `ready <port>`)")
	fs.IntVar(&cfg.capacity, "capacity", 1_000_000, "most read states kept in memory")
	fs.IntVar(&cfg.shards, "shards", 0, "shards of the cache, each with its own lock and LRU (0: capacity/16384, between 1 and 64)")
	fs.DurationVar(&cfg.flushInterval, "flush-interval", 30*time.Second, "how often dirty entries are written to the store")
	fs.StringVar(&cfg.dataDir, "data-dir", "", "directory of the store (default: a temporary one, removed at exit)")
	fs.Var(millis{&cfg.exitAfterIdle}, "exit-after-idle", "exit once no client has been connected for `MS` milliseconds (after at least one was)")
	fs.DurationVar(&cfg.gcInterval, "gc-interval", 0, "run a GC cycle (runtime.GC) this often, as the runtime's forced GC does every 2 minutes; 0: off")
	fs.Var(latency{&cfg.missLatency}, "miss-latency", "how long the answer to a cache miss waits, as a database read would (e.g. 1ms); 0: at once")
	gogc := fs.Int("gogc", 0, "the GC percentage (debug.SetGCPercent; GOGC's meaning); 0: leave the runtime's (GOGC, else 100)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "read-state-cache-go: error: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *gogc < 0 {
		fmt.Fprintf(os.Stderr, "read-state-cache-go: error: --gogc %d: give a percentage above 0 (0 keeps the runtime's)\n", *gogc)
		return 2
	}
	if *gogc > 0 {
		debug.SetGCPercent(*gogc)
	}
	if cfg.port < 0 || cfg.port > 65535 {
		fmt.Fprintf(os.Stderr, "read-state-cache-go: error: --port %d is out of range\n", cfg.port)
		return 2
	}
	if cfg.dataDir == "" {
		dir, err := os.MkdirTemp("", "read-state-cache-go-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "read-state-cache-go: error: failed to create a temporary data directory (use --data-dir): %v\n", err)
			return 2
		}
		// Removed after the summary.
		defer os.RemoveAll(dir)
		cfg.dataDir = dir
	}
	summary, err := run(cfg, started)
	if err != nil {
		fmt.Fprintf(os.Stderr, "read-state-cache-go: error: %v\n", err)
		return 2
	}
	line, err := json.Marshal(summary)
	if err != nil {
		fmt.Fprintf(os.Stderr, "read-state-cache-go: error: failed to encode the summary: %v\n", err)
		return 2
	}
	line = append(line, '\n')
	if _, err := os.Stdout.Write(line); err != nil && !errors.Is(err, syscall.EPIPE) {
		fmt.Fprintf(os.Stderr, "read-state-cache-go: error: failed to print the summary: %v\n", err)
		return 2
	}
	return 0
}
