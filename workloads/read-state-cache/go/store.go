package main

// The embedded store: an append-only log of fixed-size records with an in-memory index
// (key -> offset of its newest record), the same file format as the Rust server's
// (PROTOCOL.md, "Store"). Writes are pwrites at the end of the log, made durable by Sync
// (fdatasync) after every flush pass; reads look the offset up under the index lock and
// pread the record outside it. Opening replays the log and cuts off a torn tail.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

const (
	logFile   = "read-states.log"
	logMagic  = "RSTATLOG"
	logVer    = 1
	headerLen = 16 // magic, version u32 LE, record size u32 LE
	// user u64, channel u64, last read u64, mentions u32, CRC-32/IEEE of the first 28 bytes;
	// all little-endian.
	recordLen = 32
)

// Opened says what opening a log found.
type Opened struct {
	Records      uint64
	DroppedBytes int64
}

// StoreStats is the size of the store, for the summary.
type StoreStats struct {
	Keys           uint64 `json:"keys"`
	RecordsWritten uint64 `json:"records_written"`
	Bytes          uint64 `json:"bytes"`
}

// KeyState is one record to write.
type KeyState struct {
	Key   Key
	State ReadState
}

// Store is the log and its index.
type Store struct {
	path string
	f    *os.File
	fd   int

	mu             sync.Mutex
	offsets        map[Key]int64
	length         int64 // where the next record goes
	recordsWritten uint64
}

func logHeader() []byte {
	h := make([]byte, headerLen)
	copy(h, logMagic)
	binary.LittleEndian.PutUint32(h[8:12], logVer)
	binary.LittleEndian.PutUint32(h[12:16], recordLen)
	return h
}

func encodeRecord(r *[recordLen]byte, k Key, s ReadState) {
	binary.LittleEndian.PutUint64(r[0:8], k.User)
	binary.LittleEndian.PutUint64(r[8:16], k.Channel)
	binary.LittleEndian.PutUint64(r[16:24], s.LastRead)
	binary.LittleEndian.PutUint32(r[24:28], s.Mentions)
	binary.LittleEndian.PutUint32(r[28:32], crc32.ChecksumIEEE(r[:28]))
}

// decodeRecord returns the key and state of a record; ok is false when its checksum does
// not match.
func decodeRecord(r []byte) (k Key, s ReadState, ok bool) {
	if crc32.ChecksumIEEE(r[:28]) != binary.LittleEndian.Uint32(r[28:32]) {
		return Key{}, ReadState{}, false
	}
	k = Key{User: binary.LittleEndian.Uint64(r[0:8]), Channel: binary.LittleEndian.Uint64(r[8:16])}
	s = ReadState{LastRead: binary.LittleEndian.Uint64(r[16:24]), Mentions: binary.LittleEndian.Uint32(r[24:28])}
	return k, s, true
}

// OpenStore opens (or creates) the log in dir, replaying it into the index.
func OpenStore(dir string) (*Store, Opened, error) {
	var opened Opened
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, opened, fmt.Errorf("failed to create data directory `%s`: %w", dir, err)
	}
	path := filepath.Join(dir, logFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, opened, fmt.Errorf("failed to open read-state log `%s`: %w", path, err)
	}
	fail := func(what string, err error) (*Store, Opened, error) {
		f.Close()
		return nil, opened, fmt.Errorf("failed to %s read-state log `%s`: %w", what, path, err)
	}
	info, err := f.Stat()
	if err != nil {
		return fail("open", err)
	}
	size := info.Size()
	offsets := make(map[Key]int64)
	var end int64
	if size < headerLen {
		// New (or cut short before its header was whole): start it over.
		if err := f.Truncate(0); err != nil {
			return fail("write", err)
		}
		if _, err := f.WriteAt(logHeader(), 0); err != nil {
			return fail("write", err)
		}
		if err := f.Sync(); err != nil {
			return fail("write", err)
		}
		opened.DroppedBytes = size
		end = headerLen
	} else {
		r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20)
		h := make([]byte, headerLen)
		if _, err := io.ReadFull(r, h); err != nil {
			return fail("read", err)
		}
		if !bytes.Equal(h, logHeader()) {
			f.Close()
			return nil, opened, fmt.Errorf("`%s` is not a read-state log (bad header)", path)
		}
		end = headerLen
		rec := make([]byte, recordLen)
		for end+recordLen <= size {
			if _, err := io.ReadFull(r, rec); err != nil {
				return fail("read", err)
			}
			k, _, ok := decodeRecord(rec)
			if !ok {
				break
			}
			offsets[k] = end
			opened.Records++
			end += recordLen
		}
		if end < size {
			opened.DroppedBytes = size - end
			if err := f.Truncate(end); err != nil {
				return fail("write", err)
			}
			if err := f.Sync(); err != nil {
				return fail("write", err)
			}
		}
	}
	return &Store{path: path, f: f, fd: int(f.Fd()), offsets: offsets, length: end}, opened, nil
}

// Get returns the newest stored state of k; found is false when it was never written.
func (s *Store) Get(k Key) (state ReadState, found bool, err error) {
	s.mu.Lock()
	off, ok := s.offsets[k]
	s.mu.Unlock()
	if !ok {
		return ReadState{}, false, nil
	}
	rec := make([]byte, recordLen)
	if _, err := s.f.ReadAt(rec, off); err != nil {
		return ReadState{}, false, fmt.Errorf("failed to read read-state log `%s` at offset %d: %w", s.path, off, err)
	}
	got, state, ok := decodeRecord(rec)
	if !ok || got != k {
		return ReadState{}, false, fmt.Errorf("read-state log `%s` has a corrupt record at offset %d", s.path, off)
	}
	return state, true, nil
}

// PutBatch appends one record per entry (one pwrite), then points the index at them.
func (s *Store) PutBatch(entries []KeyState) error {
	if len(entries) == 0 {
		return nil
	}
	buf := make([]byte, len(entries)*recordLen)
	for i, e := range entries {
		encodeRecord((*[recordLen]byte)(buf[i*recordLen:]), e.Key, e.State)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.length
	if _, err := s.f.WriteAt(buf, start); err != nil {
		return fmt.Errorf("failed to write read-state log `%s`: %w", s.path, err)
	}
	for i, e := range entries {
		s.offsets[e.Key] = start + int64(i*recordLen)
	}
	s.length += int64(len(buf))
	s.recordsWritten += uint64(len(entries))
	return nil
}

// Put appends one record.
func (s *Store) Put(k Key, state ReadState) error {
	return s.PutBatch([]KeyState{{Key: k, State: state}})
}

// Sync makes everything written so far durable (fdatasync).
func (s *Store) Sync() error {
	for {
		err := syscall.Fdatasync(s.fd)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to write read-state log `%s`: %w", s.path, err)
		}
		return nil
	}
}

// Stats reports the index size and the log length.
func (s *Store) Stats() StoreStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return StoreStats{Keys: uint64(len(s.offsets)), RecordsWritten: s.recordsWritten, Bytes: uint64(s.length)}
}

// Close closes the log file.
func (s *Store) Close() error {
	return s.f.Close()
}
