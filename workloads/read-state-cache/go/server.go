package main

// The Go server: a goroutine per connection, the Cache shared by all of them, and a flusher
// goroutine that runs a flush pass every flush interval. A connection reads frames through
// a 64 KiB buffer, applies each request under its shard's mutex and writes the response into
// a buffer flushed once no further request is waiting, as the Rust server does.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	pollInterval = 50 * time.Millisecond
	bufferSize   = 64 << 10
)

type config struct {
	port          int
	capacity      int
	shards        int
	flushInterval time.Duration
	dataDir       string
	exitAfterIdle time.Duration // 0: never
	gcInterval    time.Duration // 0: off
	missLatency   time.Duration // 0: a miss is answered at once
}

type server struct {
	cache *Cache
	// How long the answer to a miss waits, as if the state came from a database.
	missLatency time.Duration

	badRequests         atomic.Uint64
	storeErrors         atomic.Uint64
	storeErrorReported  atomic.Bool
	connectionErrors    atomic.Uint64
	connections         uint64
	active              atomic.Int64
	mu                  sync.Mutex
	lastClose           time.Time // zero until a connection closed
	conns               map[uint64]net.Conn
	connectionsFinished sync.WaitGroup
}

func (s *server) storeError(err error) {
	s.storeErrors.Add(1)
	if !s.storeErrorReported.Swap(true) {
		fmt.Fprintf(os.Stderr, "read-state-cache-go: error: %v\n", err)
	}
}

// idleFor is how long no client has been connected, once one has been.
func (s *server) idleFor() (time.Duration, bool) {
	if s.active.Load() > 0 {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastClose.IsZero() {
		return 0, false
	}
	return time.Since(s.lastClose), true
}

// respond answers one request body into out, and says whether it missed the cache.
func (s *server) respond(body []byte, out *[responseLen]byte) bool {
	req, status := decodeRequest(body)
	if status != statusOK {
		s.badRequests.Add(1)
		encodeResponse(out, status, ReadState{})
		return false
	}
	state, hit, err := s.cache.ApplyHit(&req)
	if err != nil {
		s.storeError(err)
		encodeResponse(out, statusStoreError, ReadState{})
		return false
	}
	encodeResponse(out, statusOK, state)
	return !hit
}

func (s *server) serve(conn net.Conn) error {
	if tcp, ok := conn.(*net.TCPConn); ok {
		if err := tcp.SetNoDelay(true); err != nil {
			return err
		}
	}
	r := bufio.NewReaderSize(conn, bufferSize)
	w := bufio.NewWriterSize(conn, bufferSize)
	if s.missLatency > 0 {
		return s.serveDelayed(conn, r, w)
	}
	err := s.readFrames(r, func(out *[responseLen]byte, _ bool) error {
		if _, err := w.Write(out[:]); err != nil {
			return err
		}
		if r.Buffered() == 0 {
			return w.Flush()
		}
		return nil
	})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// readFrames reads requests until the connection ends, handing each answer to answer in
// order (with whether it missed the cache). A clean end between frames returns nil; an
// oversized frame is answered, then ends the connection with an error.
func (s *server) readFrames(r *bufio.Reader, answer func(out *[responseLen]byte, miss bool) error) error {
	var lenBuf [4]byte
	body := make([]byte, maxBody)
	var out [responseLen]byte
	for {
		if _, err := r.Peek(1); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
			return err
		}
		n := binary.LittleEndian.Uint32(lenBuf[:])
		if n > maxBody {
			s.badRequests.Add(1)
			encodeResponse(&out, statusBadLength, ReadState{})
			if err := answer(&out, false); err != nil {
				return err
			}
			return fmt.Errorf("request body of %d bytes, the limit is %d", n, maxBody)
		}
		if _, err := io.ReadFull(r, body[:n]); err != nil {
			return err
		}
		miss := s.respond(body[:n], &out)
		if err := answer(&out, miss); err != nil {
			return err
		}
	}
}

// answer is a response waiting for its time to be written.
type answer struct {
	due time.Time
	out [responseLen]byte
}

// pendingAnswers bounds the answers a connection holds back; a client pipelining more waits.
const pendingAnswers = 4096

// serveDelayed serves a connection whose misses wait missLatency, as a round trip to a
// database would: the request is applied at once (the shard lock is not held while it
// waits), and a writer goroutine writes each answer, in order, once it is due, sleeping
// rather than spinning until then. Answers are in order (PROTOCOL.md), so a hit pipelined
// behind a miss on the same connection waits for it.
func (s *server) serveDelayed(conn net.Conn, r *bufio.Reader, w *bufio.Writer) error {
	answers := make(chan answer, pendingAnswers)
	written := make(chan error, 1)
	go func() {
		var err error
		for a := range answers {
			if err != nil {
				continue // drain, so the reader never blocks
			}
			if wait := time.Until(a.due); wait > 0 {
				if err = w.Flush(); err != nil {
					conn.Close()
					continue
				}
				time.Sleep(wait)
			}
			if _, err = w.Write(a.out[:]); err == nil && len(answers) == 0 {
				err = w.Flush()
			}
			if err != nil {
				// The reader's next read fails and ends the connection.
				conn.Close()
			}
		}
		if err == nil {
			err = w.Flush()
		}
		written <- err
	}()
	err := s.readFrames(r, func(out *[responseLen]byte, miss bool) error {
		a := answer{due: time.Now(), out: *out}
		if miss {
			a.due = a.due.Add(s.missLatency)
		}
		answers <- a
		return nil
	})
	close(answers)
	if werr := <-written; err == nil {
		err = werr
	}
	return err
}

func (s *server) connectionEnded(id uint64, err error, shuttingDown bool) {
	if err != nil && !shuttingDown {
		s.connectionErrors.Add(1)
		fmt.Fprintf(os.Stderr, "read-state-cache-go: connection %d: %v\n", id, err)
	}
	s.mu.Lock()
	delete(s.conns, id)
	s.lastClose = time.Now()
	s.mu.Unlock()
	s.active.Add(-1)
	s.connectionsFinished.Done()
}

// flusher runs a flush pass every interval until stop is closed.
func (s *server) flusher(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-time.After(interval):
			if _, err := s.cache.Flush(); err != nil {
				s.storeError(err)
			}
		}
	}
}

// collector runs a full GC cycle every interval until stop is closed: what the runtime's
// own forced GC does every 2 minutes, brought within reach of a short run.
func collector(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			runGC()
		}
	}
}

// run serves until SIGINT/SIGTERM or the idle timer, then makes a final flush pass and
// returns the summary.
func run(cfg config, started time.Time) (*Summary, error) {
	if cfg.flushInterval <= 0 {
		return nil, errors.New("--flush-interval must be longer than zero")
	}
	store, opened, err := OpenStore(cfg.dataDir)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if opened.DroppedBytes > 0 {
		fmt.Fprintf(os.Stderr, "read-state-cache-go: warning: cut a torn tail of %d bytes off `%s` (%d records kept)\n",
			opened.DroppedBytes, store.path, opened.Records)
	}
	cache, err := NewCache(cfg.capacity, cfg.shards, store)
	if err != nil {
		return nil, err
	}
	s := &server{cache: cache, missLatency: cfg.missLatency, conns: make(map[uint64]net.Conn)}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)

	addr := fmt.Sprintf("127.0.0.1:%d", cfg.port)
	listener, err := net.Listen("tcp4", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", addr, err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	if _, err := fmt.Fprintf(os.Stdout, "ready %d\n", port); err != nil {
		listener.Close()
		return nil, fmt.Errorf("failed to announce readiness: %w", err)
	}

	stop := make(chan struct{})
	flusherDone := make(chan struct{})
	go s.flusher(cfg.flushInterval, stop, flusherDone)
	if cfg.gcInterval > 0 {
		go collector(cfg.gcInterval, stop)
	}

	var shuttingDown atomic.Bool
	accepted := make(chan net.Conn)
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				// Out of descriptors and the like: say so, let clients retry.
				fmt.Fprintf(os.Stderr, "read-state-cache-go: accept failed: %v\n", err)
				time.Sleep(pollInterval)
				continue
			}
			select {
			case accepted <- conn:
			case <-stop:
				conn.Close()
				return
			}
		}
	}()

	ticker := time.NewTicker(pollInterval)
	endedBy := ""
	for endedBy == "" {
		select {
		case <-signals:
			endedBy = "signal"
		case conn := <-accepted:
			id := s.connections
			s.connections++
			s.active.Add(1)
			s.connectionsFinished.Add(1)
			s.mu.Lock()
			s.conns[id] = conn
			s.mu.Unlock()
			go func() {
				err := s.serve(conn)
				conn.Close()
				s.connectionEnded(id, err, shuttingDown.Load())
			}()
		case <-ticker.C:
			if cfg.exitAfterIdle > 0 {
				if idle, ok := s.idleFor(); ok && idle >= cfg.exitAfterIdle {
					endedBy = "idle"
				}
			}
		}
	}
	ticker.Stop()
	// End the connections: their reads fail; every request already applied has been
	// counted, and its state is in the cache for the final flush.
	shuttingDown.Store(true)
	close(stop)
	listener.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.connectionsFinished.Wait()
	<-flusherDone

	if _, err := cache.Flush(); err != nil {
		return nil, fmt.Errorf("final flush failed: %w", err)
	}
	return s.summary(cfg, endedBy, started), nil
}
