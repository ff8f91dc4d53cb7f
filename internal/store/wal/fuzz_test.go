package wal

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden segment in testdata")

// goldenRecords are the records of testdata/golden/00000001.wal.
var goldenRecords = []string{"", "a", "temperature=21.5", string(bytes.Repeat([]byte{0, 1, 2, 0xff}, 100))}

// writeGolden writes goldenRecords with the real WAL into dir.
func writeGolden(t testing.TB, dir string) {
	w := openWAL(t, vfs.OS{}, dir, nil)
	for _, r := range goldenRecords {
		if _, err := w.Commit(context.Background(), []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenSegment checks that the format stays readable: the checked-in
// segment must decode to goldenRecords. Run with -update after a deliberate
// format change (and bump formatVersion).
func TestGoldenSegment(t *testing.T) {
	golden := filepath.Join("testdata", "golden", segmentName(1))
	if *update {
		dir := t.TempDir()
		writeGolden(t, dir)
		b, err := os.ReadFile(filepath.Join(dir, segmentName(1)))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(golden), 0o755)
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	r := newSegmentReader(bytes.NewReader(b), int64(len(b)), DefaultMaxRecordSize)
	if err := r.header(1); err != nil {
		t.Fatal(err)
	}
	for i, want := range goldenRecords {
		got, err := r.next()
		if err != nil || string(got) != want {
			t.Fatalf("record %d: got %q, %v", i, got, err)
		}
	}
	if _, err := r.next(); err != io.EOF {
		t.Fatalf("after last: %v", err)
	}
}

// FuzzSegmentReader feeds arbitrary bytes to the segment reader. It must
// not panic, and what it accepts must be exactly the framing of the
// records it returned. Seeded from real segments. Run with
// go test -fuzz FuzzSegmentReader ./internal/store/wal
func FuzzSegmentReader(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "golden", segmentName(1))); err == nil {
		f.Add(b)
	}
	dir := f.TempDir()
	writeGolden(f, dir)
	if b, err := os.ReadFile(filepath.Join(dir, segmentName(1))); err == nil {
		f.Add(b)
		f.Add(b[:len(b)-2])
		f.Add(append(bytes.Clone(b), make([]byte, 30)...))
	}
	f.Add(segmentBytes(1))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newSegmentReader(bytes.NewReader(b), int64(len(b)), 1<<16)
		if r.header(1) != nil {
			return
		}
		framed := appendSegmentHeader(nil, 1)
		for {
			rec, err := r.next()
			if err != nil {
				if err != io.EOF {
					if _, rerr := r.resync(r.off + 1); rerr != nil {
						t.Fatalf("resync: %v", rerr)
					}
				}
				break
			}
			framed = appendRecord(framed, rec)
		}
		if !bytes.Equal(framed, b[:r.off]) {
			t.Fatal(fmt.Sprintf("accepted %d bytes that are not the framing of the records returned", r.off))
		}
	})
}
