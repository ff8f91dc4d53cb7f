package wal

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// BenchmarkCommit measures Append+Sync throughput on the real disk (the
// temp dir, normally /tmp) with concurrent writers; group commit should
// make records/s grow with writers in fsync mode. Run with
// go test -run XXX -bench Commit -benchtime 2000x ./internal/store/wal
func BenchmarkCommit(b *testing.B) {
	for _, mode := range []Durability{DurabilityFsync, DurabilityRelaxed} {
		for _, size := range []int{100, 64 << 10} {
			for _, writers := range []int{1, 4, 16} {
				name := fmt.Sprintf("%s/%dB/writers=%d", mode, size, writers)
				b.Run(name, func(b *testing.B) { benchCommit(b, mode, size, writers) })
			}
		}
	}
}

func benchCommit(b *testing.B, mode Durability, size, writers int) {
	w, err := Open(b.TempDir(), Options{FS: vfs.OS{}, Durability: mode}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rec := bytes.Repeat([]byte{0xab}, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var left atomic.Int64
	left.Store(int64(b.N))
	start := w.Stats()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if _, err := w.Commit(context.Background(), rec); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	end := w.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(end.Fsyncs-start.Fsyncs)/float64(b.N), "fsyncs/record")
}

// BenchmarkAppend measures buffering alone (no Sync): the cost a writer
// pays under the WAL lock. Run with
// go test -run XXX -bench Append ./internal/store/wal
func BenchmarkAppend(b *testing.B) {
	w, err := Open(b.TempDir(), Options{FS: vfs.OS{}, Durability: DurabilityRelaxed}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rec := bytes.Repeat([]byte{0xab}, 100)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkEncodeRecord measures framing a 100-byte record.
func BenchmarkEncodeRecord(b *testing.B) {
	rec := bytes.Repeat([]byte{0xab}, 100)
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		buf = appendRecord(buf[:0], rec)
	}
}

// BenchmarkReadSegment measures decoding a segment of 100-byte records
// from memory, the replay hot path.
func BenchmarkReadSegment(b *testing.B) {
	rec := bytes.Repeat([]byte{0xab}, 100)
	seg := appendSegmentHeader(nil, 1)
	const n = 10000
	for range n {
		seg = appendRecord(seg, rec)
	}
	rd := bytes.NewReader(seg)
	b.SetBytes(int64(len(seg)))
	b.ReportAllocs()
	r := newSegmentReader(rd, int64(len(seg)), DefaultMaxRecordSize)
	for b.Loop() {
		r.off = headerSize
		for {
			if _, err := r.next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
}
