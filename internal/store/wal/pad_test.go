package wal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// padRecords are records of a live writer (3 kB rounds, padded) and then
// of a slow one (100-byte rounds, not padded), each committed alone.
func padRecords() [][]byte {
	var recs [][]byte
	for i := range 12 {
		recs = append(recs, bytes.Repeat([]byte{byte('a' + i)}, 3000))
	}
	for i := range 12 {
		recs = append(recs, bytes.Repeat([]byte{byte('A' + i)}, 100))
	}
	return recs
}

// writePadded commits recs one at a time into a WAL in dir and returns
// their positions.
func writePadded(t *testing.T, dir string, recs [][]byte) []Pos {
	w := openWAL(t, vfs.OS{}, dir, nil)
	var pos []Pos
	for _, r := range recs {
		p, err := w.Commit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return pos
}

// TestPadRounds: a fsynced round of a large record ends on a page
// boundary, so the next record starts one; a round of a small record is
// not padded. Every reader returns the records at the positions Append
// gave, with end the next record's position.
func TestPadRounds(t *testing.T) {
	dir := t.TempDir()
	recs := padRecords()
	pos := writePadded(t, dir, recs)
	for i := 1; i < len(recs); i++ {
		prevEnd := pos[i-1].Offset + recordSize(len(recs[i-1]))
		padded := len(recs[i-1]) == 3000
		switch {
		case padded && pos[i].Offset != pageEnd(prevEnd):
			t.Errorf("record %d at %d, want %d: the round of record %d (3 kB) was not padded", i, pos[i].Offset, pageEnd(prevEnd), i-1)
		case !padded && pos[i].Offset != prevEnd:
			t.Errorf("record %d at %d, want %d: the round of record %d (100 bytes) was padded", i, pos[i].Offset, prevEnd, i-1)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	var payload int64
	for _, r := range recs {
		payload += recordSize(len(r))
	}
	if fi.Size() > headerSize+2*payload {
		t.Errorf("segment of %d bytes for %d bytes of records: padding more than doubled the log", fi.Size(), payload)
	}

	w := openWAL(t, vfs.OS{}, dir, nil)
	defer w.Close()
	check := func(name string, i int, p, end Pos, rec []byte) {
		t.Helper()
		if i >= len(recs) || !p.Equal(pos[i]) || !bytes.Equal(rec, recs[i]) {
			t.Fatalf("%s: record %d at %v (%d bytes), want %v", name, i, p, len(rec), pos[i])
		}
		want := Pos{Segment: 1, Offset: fi.Size()}
		if i+1 < len(recs) {
			want = pos[i+1]
		}
		if !end.Equal(want) {
			t.Fatalf("%s: record %d ends at %v, want %v (the next record's position)", name, i, end, want)
		}
	}
	i := 0
	if err := w.Replay(Pos{}, func(p, end Pos, rec []byte) error {
		check("Replay", i, p, end, rec)
		i++
		return nil
	}); err != nil || i != len(recs) {
		t.Fatalf("Replay: %d records, %v", i, err)
	}
	// A reader starting at a record's end, where padding is, and one
	// reading a record at a time, as a follower does.
	i = 1
	if err := w.Read(Pos{Segment: 1, Offset: pos[0].Offset + recordSize(len(recs[0]))}, w.Durable(), func(p, end Pos, rec []byte) error {
		check("Read from the padding", i, p, end, rec)
		i++
		return nil
	}); err != nil || i != len(recs) {
		t.Fatalf("Read: %d records, %v", i, err)
	}
	rd := w.NewReader()
	defer rd.Close()
	for i := range recs {
		n := 0
		to := w.Durable()
		if i+1 < len(recs) {
			to = pos[i+1]
		}
		if err := rd.Read(pos[i], to, func(p, end Pos, rec []byte) error {
			check("Reader", i, p, end, rec)
			n++
			return nil
		}); err != nil || n != 1 {
			t.Fatalf("Reader at record %d: %d records, %v", i, n, err)
		}
		got, err := w.ReadRecord(pos[i])
		if err != nil || !bytes.Equal(got, recs[i]) {
			t.Fatalf("ReadRecord %d: %d bytes, %v", i, len(got), err)
		}
	}
}

// TestPadDamage: damaged padding is damage like any record's, reported
// strictly and skipped without losing a record with SkipCorrupt; a torn
// padding at the end of the last segment is cut at open.
func TestPadDamage(t *testing.T) {
	recs := padRecords()
	t.Run("middle", func(t *testing.T) {
		dir := t.TempDir()
		pos := writePadded(t, dir, recs)
		path := filepath.Join(dir, segmentName(1))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		padAt := pos[3].Offset + recordSize(len(recs[3]))
		b[padAt+20] ^= 0x40
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		w := openWAL(t, vfs.OS{}, dir, nil)
		_, err = replayAll(t, w)
		w.Close()
		var cerr *CorruptionError
		if !errors.As(err, &cerr) || cerr.Offset != padAt || !errors.Is(err, ErrChecksum) {
			t.Fatalf("replay of damaged padding: %v, want a checksum error at %d", err, padAt)
		}
		w = openWAL(t, vfs.OS{}, dir, func(o *Options) { o.SkipCorrupt = true })
		defer w.Close()
		got, err := replayAll(t, w)
		if err != nil || len(got) != len(recs) {
			t.Fatalf("replay skipping damage: %d records, %v; want all %d", len(got), err, len(recs))
		}
	})
	t.Run("torn tail", func(t *testing.T) {
		dir := t.TempDir()
		pos := writePadded(t, dir, recs[:5])
		path := filepath.Join(dir, segmentName(1))
		padAt := pos[4].Offset + recordSize(len(recs[4]))
		if err := os.Truncate(path, padAt+100); err != nil {
			t.Fatal(err)
		}
		w := openWAL(t, vfs.OS{}, dir, nil)
		defer w.Close()
		got, err := replayAll(t, w)
		if err != nil || len(got) != 5 {
			t.Fatalf("replay after a torn padding: %d records, %v; want 5", len(got), err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() != padAt {
			t.Fatalf("segment cut to %v, want %d (%v)", fi.Size(), padAt, err)
		}
	})
}
