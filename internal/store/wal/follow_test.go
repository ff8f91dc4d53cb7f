package wal

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// TestReadDurable appends records across segments and reads them back in
// ranges: Read sees only what is durable, positions chain (end of one is
// the start of the next, or a segment start), and ReadRecord returns a
// record by position.
func TestReadDurable(t *testing.T) {
	fs := vfs.NewFaultFS()
	w := openWAL(t, fs, "/wal", func(o *Options) { o.SegmentSize = 1 << 10 })
	var pos []Pos
	var recs []string
	for i := range 60 {
		rec := fmt.Sprintf("record %d %s", i, make([]byte, i*3))
		p, err := w.Append([]byte(rec))
		if err != nil {
			t.Fatal(err)
		}
		pos, recs = append(pos, p), append(recs, rec)
	}
	if got := w.Durable(); got.Less(pos[0]) || pos[0].Less(got) {
		// Nothing was synced yet: the durable end is the first record.
		t.Fatalf("durable before sync: %v, want %v", got, pos[0])
	}
	if err := w.Sync(context.Background(), pos[39]); err != nil {
		t.Fatal(err)
	}
	durable := w.Durable()
	if !pos[39].Less(durable) {
		t.Fatalf("durable %v, want past %v", durable, pos[39])
	}
	var got []string
	var prevEnd Pos
	err := w.Read(Pos{}, durable, func(p, end Pos, rec []byte) error {
		i := len(got)
		if !p.Equal(pos[i]) {
			return fmt.Errorf("record %d at %v, want %v", i, p, pos[i])
		}
		if i > 0 && !p.Equal(prevEnd) && !p.Equal(Pos{Segment: prevEnd.Segment + 1, Offset: FirstOffset}) {
			return fmt.Errorf("record %d at %v does not follow the end %v of the one before", i, p, prevEnd)
		}
		prevEnd = end
		got = append(got, string(rec))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 40 || got[39] != recs[39] {
		t.Fatalf("read %d records up to the durable end, want at least 40", len(got))
	}
	// A range starting in the middle, in a later segment.
	var n int
	if err := w.Read(pos[20], pos[30], func(p, _ Pos, rec []byte) error {
		if string(rec) != recs[20+n] {
			return fmt.Errorf("record %d: %q", 20+n, rec)
		}
		n++
		return nil
	}); err != nil || n != 10 {
		t.Fatalf("read [20, 30): %d records, %v", n, err)
	}
	rec, err := w.ReadRecord(pos[33])
	if err != nil || string(rec) != recs[33] {
		t.Fatalf("ReadRecord: %q, %v", rec, err)
	}
	segs, err := w.Segments()
	if err != nil || len(segs) < 3 || segs[0].Segment != pos[0].Segment {
		t.Fatalf("segments: %v, %v", segs, err)
	}
	// A released segment is skipped.
	if err := w.TruncateBefore(pos[30].Segment); err != nil {
		t.Fatal(err)
	}
	n = 0
	if err := w.Read(Pos{}, durable, func(p, _ Pos, _ []byte) error {
		if p.Segment < pos[30].Segment {
			return fmt.Errorf("read released segment %d", p.Segment)
		}
		n++
		return nil
	}); err != nil || n == 0 {
		t.Fatalf("read after release: %d records, %v", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWaitDurable blocks until a Sync by someone else makes a record
// durable, returns the context's error when nothing comes, and ErrClosed
// after Close.
func TestWaitDurable(t *testing.T) {
	w := openWAL(t, vfs.NewFaultFS(), "/wal", nil)
	start := w.Durable()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := w.WaitDurable(ctx, start); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with nothing appended: %v", err)
	}
	p, _ := w.Append([]byte("one"))
	done := make(chan Pos)
	go func() {
		d, err := w.WaitDurable(context.Background(), start)
		if err != nil {
			t.Error(err)
		}
		done <- d
	}()
	select {
	case <-done:
		t.Fatal("WaitDurable returned before the record was synced")
	case <-time.After(20 * time.Millisecond):
	}
	if err := w.Sync(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if d := <-done; !p.Less(d) {
		t.Fatalf("durable %v, want past %v", d, p)
	}
	go func() {
		_, err := w.WaitDurable(context.Background(), w.Durable())
		if !errors.Is(err, ErrClosed) {
			t.Errorf("wait across Close: %v", err)
		}
		close(done)
	}()
	time.Sleep(10 * time.Millisecond)
	w.Close()
	<-done
}

// TestWaitDurableDuringCommit: a WaitDurable that begins while the
// committer writes the record it waits for returns once that round
// publishes it, without a later write. Before the round's channel was
// swapped together with the publish, such a waiter slept until the next
// write.
func TestWaitDurableDuringCommit(t *testing.T) {
	w := openWAL(t, vfs.NewFaultFS(), "/wal", nil)
	defer w.Close()
	for i := range 300 {
		start := w.Durable()
		p, err := w.Append([]byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := w.WaitDurable(ctx, start)
			done <- err
		}()
		if err := w.Sync(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("round %d: wait for a synced record: %v", i, err)
		}
	}
}
