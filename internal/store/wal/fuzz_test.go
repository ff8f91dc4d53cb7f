package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/store/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden segment in testdata")

// goldenRecords are the records of testdata/golden/00000001.wal, a
// segment of format version 1 (no padding), and the first records of
// testdata/golden-v2/00000001.wal.
var goldenRecords = []string{"", "a", "temperature=21.5", string(bytes.Repeat([]byte{0, 1, 2, 0xff}, 100))}

// goldenRecordsV2 are the records of testdata/golden-v2/00000001.wal,
// each committed alone: the round of the large one is padded to the page
// boundary, so the last record starts at offset 4096.
var goldenRecordsV2 = append(slices.Clone(goldenRecords), string(bytes.Repeat([]byte{9, 8, 7}, 1000)), "after the padding")

// writeGolden writes recs with the real WAL into dir, a Commit each.
func writeGolden(t testing.TB, dir string, recs []string) {
	w := openWAL(t, vfs.OS{}, dir, nil)
	for _, r := range recs {
		if _, err := w.Commit(context.Background(), []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenSegment checks that the format stays readable: the checked-in
// segments must decode to their records, at the offsets the format gives.
// Run with -update after a deliberate format change (and bump
// formatVersion); it rewrites the newest version's segment.
func TestGoldenSegment(t *testing.T) {
	for _, g := range []struct {
		dir     string
		version byte
		recs    []string
		last    int64 // offset of the last record
	}{
		{"golden", 1, goldenRecords, headerSize + 9 + 10 + 25},
		{"golden-v2", 2, goldenRecordsV2, padPage},
	} {
		t.Run(g.dir, func(t *testing.T) {
			golden := filepath.Join("testdata", g.dir, segmentName(1))
			if *update && g.version == formatVersion {
				dir := t.TempDir()
				writeGolden(t, dir, g.recs)
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
			if b[4] != g.version {
				t.Fatalf("version %d, want %d", b[4], g.version)
			}
			r := newSegmentReader(bytes.NewReader(b), int64(len(b)), DefaultMaxRecordSize)
			if err := r.header(1); err != nil {
				t.Fatal(err)
			}
			for i, want := range g.recs {
				got, err := r.next()
				if err != nil || string(got) != want {
					t.Fatalf("record %d: got %d bytes, %v; want %d bytes", i, len(got), err, len(want))
				}
			}
			if r.at != g.last {
				t.Errorf("last record at %d, want %d", r.at, g.last)
			}
			if _, err := r.next(); err != io.EOF {
				t.Fatalf("after last: %v", err)
			}
		})
	}
}

// pads reports whether b is a sequence of whole, valid padding records.
func pads(b []byte) bool {
	for len(b) > 0 {
		if len(b) < recHeaderSize || b[8] != recordTypePad {
			return false
		}
		n := int(recordSize(int(binary.LittleEndian.Uint32(b))))
		if n > len(b) || crc32c.Checksum(b[8:n]) != binary.LittleEndian.Uint32(b[4:]) {
			return false
		}
		b = b[n:]
	}
	return true
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
	writeGolden(f, dir, goldenRecords)
	if b, err := os.ReadFile(filepath.Join(dir, segmentName(1))); err == nil {
		f.Add(b)
		f.Add(b[:len(b)-2])
		f.Add(append(bytes.Clone(b), make([]byte, 30)...))
	}
	f.Add(segmentBytes(1))
	if b, err := os.ReadFile(filepath.Join("testdata", "golden-v2", segmentName(1))); err == nil {
		f.Add(b)
		f.Add(b[:len(b)-20])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newSegmentReader(bytes.NewReader(b), int64(len(b)), 1<<16)
		if r.header(1) != nil {
			return
		}
		// What the reader accepts must be records it returned and
		// padding records between them, nothing else.
		prev := int64(headerSize)
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
			end := r.at + recordSize(len(rec))
			if !pads(b[prev:r.at]) || !bytes.Equal(b[r.at:end], appendRecord(nil, rec)) || !pads(b[end:r.off]) {
				t.Fatalf("accepted bytes %d-%d that are not the framing of the record returned and padding", prev, r.off)
			}
			prev = r.off
		}
		if !pads(b[prev:r.off]) {
			t.Fatalf("accepted bytes %d-%d that are not padding", prev, r.off)
		}
	})
}
