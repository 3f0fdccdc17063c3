package main

import (
	"bytes"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// The checksum is CRC-32/IEEE, as the Rust server's crc32fast::hash.
func TestChecksumIsCRC32IEEE(t *testing.T) {
	if got := crc32.ChecksumIEEE([]byte("123456789")); got != 0xCBF43926 {
		t.Fatalf("check value %#x", got)
	}
}

func TestNewestRecordWinsAndSurvivesReopening(t *testing.T) {
	dir := t.TempDir()
	s, opened, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if opened != (Opened{}) {
		t.Fatalf("opened %+v", opened)
	}
	a, b := Key{1, 10}, Key{2, 20}
	if err := s.PutBatch([]KeyState{{a, ReadState{1, 1}}, {b, ReadState{2, 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(a, ReadState{3, 0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st != (StoreStats{Keys: 2, RecordsWritten: 3, Bytes: headerLen + 3*recordLen}) {
		t.Fatalf("stats %+v", st)
	}
	s.Close()
	s, opened, err = OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if opened.Records != 3 {
		t.Fatalf("opened %+v", opened)
	}
	if st, ok, err := s.Get(a); err != nil || !ok || st != (ReadState{3, 0}) {
		t.Fatalf("get a: %v %v %v", st, ok, err)
	}
	if st, ok, err := s.Get(b); err != nil || !ok || st != (ReadState{2, 2}) {
		t.Fatalf("get b: %v %v %v", st, ok, err)
	}
	if _, ok, err := s.Get(Key{9, 9}); err != nil || ok {
		t.Fatalf("get missing: %v %v", ok, err)
	}
}

func TestATornTailIsCutOff(t *testing.T) {
	dir := t.TempDir()
	s, _, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Key{1, 10}, Key{2, 20}
	if err := s.Put(a, ReadState{1, 0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(b, ReadState{2, 0}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, logFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[headerLen+recordLen+20] ^= 0xff
	data = append(data, bytes.Repeat([]byte{7}, 10)...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, opened, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if opened.Records != 1 || opened.DroppedBytes != recordLen+10 {
		t.Fatalf("opened %+v", opened)
	}
	if _, ok, _ := s.Get(b); ok {
		t.Fatal("the damaged record was kept")
	}
	if err := s.Put(b, ReadState{9, 9}); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != headerLen+2*recordLen {
		t.Fatalf("log size after a new record: %v %v", info.Size(), err)
	}
}

func TestAForeignFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, logFile), []byte("definitely not a log file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenStore(dir); err == nil {
		t.Fatal("a foreign file was opened")
	}
}
