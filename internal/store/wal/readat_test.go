package wal

import (
	"context"
	"fmt"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// TestReadAt reads single records back by position, across segments and
// after a reopen, and refuses a position past what is written.
func TestReadAt(t *testing.T) {
	dir := t.TempDir()
	small := func(o *Options) { o.SegmentSize = 4 << 10; o.Durability = DurabilityRelaxed }
	w := openWAL(t, vfs.OS{}, dir, small)
	var pos []Pos
	var recs []string
	for i := range 200 {
		rec := fmt.Sprintf("record %d %s", i, make([]byte, i%97))
		p, err := w.Append([]byte(rec))
		if err != nil {
			t.Fatal(err)
		}
		pos, recs = append(pos, p), append(recs, rec)
	}
	if err := w.Sync(context.Background(), pos[len(pos)-1]); err != nil {
		t.Fatal(err)
	}
	check := func(w *WAL) {
		t.Helper()
		if pos[0].Segment == pos[len(pos)-1].Segment {
			t.Fatal("want records in several segments")
		}
		for _, i := range []int{0, 1, 57, 120, 199} {
			var got string
			if err := w.ReadAt(pos[i], func(rec []byte) error { got = string(rec); return nil }); err != nil {
				t.Fatalf("ReadAt(%v): %v", pos[i], err)
			}
			if got != recs[i] {
				t.Fatalf("ReadAt(%v) = %q, want %q", pos[i], got, recs[i])
			}
		}
	}
	check(w)
	last := pos[len(pos)-1]
	past := Pos{Segment: last.Segment, Offset: last.Offset + recordSize(len(recs[len(recs)-1]))}
	if err := w.ReadAt(past, func([]byte) error { return nil }); err == nil {
		t.Errorf("ReadAt(%v) past the written records: no error", past)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = openWAL(t, vfs.OS{}, dir, small)
	defer w.Close()
	check(w)
}
