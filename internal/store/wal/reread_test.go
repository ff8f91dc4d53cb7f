package wal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// TestReadWritten reads back ranges of this run's records, across
// segments and after a reopen, and checks them against what was appended.
func TestReadWritten(t *testing.T) {
	dir := t.TempDir()
	small := func(o *Options) { o.SegmentSize = 4 << 10; o.Durability = DurabilityRelaxed }
	w := openWAL(t, vfs.OS{}, dir, small)
	type appended struct {
		pos Pos
		rec string
	}
	var all []appended
	add := func(w *WAL, n int) {
		for i := range n {
			rec := fmt.Sprintf("record %d of run %d: %s", len(all), i, make([]byte, rand.IntN(300)))
			pos, err := w.Append([]byte(rec))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, appended{pos, rec})
		}
		if err := w.Sync(context.Background(), all[len(all)-1].pos); err != nil {
			t.Fatal(err)
		}
	}
	check := func(w *WAL, after Pos, from, to int) {
		t.Helper()
		var got []string
		err := w.ReadWritten(after, all[to].pos, func(pos Pos, rec []byte) error {
			if i := from + len(got); i >= len(all) || !pos.Equal(all[i].pos) {
				return fmt.Errorf("record %d at %v, want %v", i, pos, all[i].pos)
			}
			got = append(got, string(rec))
			return nil
		})
		if err != nil {
			t.Fatalf("ReadWritten(%v, %v): %v", after, all[to].pos, err)
		}
		if len(got) != to-from+1 {
			t.Fatalf("ReadWritten(%v, %v): %d records, want %d", after, all[to].pos, len(got), to-from+1)
		}
		for i, rec := range got {
			if rec != all[from+i].rec {
				t.Fatalf("record %d: %q, want %q", from+i, rec, all[from+i].rec)
			}
		}
	}
	add(w, 100)
	check(w, Pos{}, 0, 99)
	check(w, all[0].pos, 1, 99)
	check(w, all[40].pos, 41, 60)
	check(w, all[98].pos, 99, 99)
	if all[99].pos.Segment == all[0].pos.Segment {
		t.Fatal("records did not span segments")
	}
	// Records of an earlier run and of this one.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = openWAL(t, vfs.OS{}, dir, small)
	defer w.Close()
	add(w, 50)
	check(w, all[80].pos, 81, 149)
	for range 50 {
		a := rand.IntN(len(all) - 1)
		b := a + 1 + rand.IntN(len(all)-a-1)
		check(w, all[a].pos, a+1, b)
	}
	// After a TruncateBefore, the remaining segments still read.
	keep := all[120].pos.Segment
	if err := w.TruncateBefore(keep); err != nil {
		t.Fatal(err)
	}
	check(w, all[120].pos, 121, 149)

	// Past the written end, only what is written is read.
	n := 0
	err := w.ReadWritten(all[140].pos, Pos{Segment: all[149].pos.Segment + 5, Offset: headerSize}, func(Pos, []byte) error {
		n++
		return nil
	})
	if err != nil || n != 9 {
		t.Fatalf("reading past the written end: %d records, %v; want 9", n, err)
	}
}
