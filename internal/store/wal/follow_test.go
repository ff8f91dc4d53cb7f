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

// TestReaderMatchesRead reads a log that grows, is synced in steps and
// loses its oldest segments, with one Reader going on where it stopped
// (and now and then jumping back or stopping early, as a follower does
// after a full batch or a reset) and with WAL.Read: both see the same
// records at the same positions, and never a record past the durable end.
func TestReaderMatchesRead(t *testing.T) {
	fs := vfs.NewFaultFS()
	w := openWAL(t, fs, "/wal", func(o *Options) { o.SegmentSize = 1 << 10 })
	rd := w.NewReader()
	defer rd.Close()
	type rec struct {
		pos, end Pos
		data     string
	}
	collect := func(read func(from, to Pos, fn func(pos, end Pos, rec []byte) error) error, from, to Pos, limit int) ([]rec, error) {
		var out []rec
		err := read(from, to, func(pos, end Pos, b []byte) error {
			if limit >= 0 && len(out) == limit {
				return errStop
			}
			out = append(out, rec{pos, end, string(b)})
			return nil
		})
		if errors.Is(err, errStop) {
			err = nil
		}
		return out, err
	}
	var all []Pos
	cur := Pos{}
	for round := range 200 {
		for i := range round%7 + 1 {
			p, err := w.Append(fmt.Appendf(nil, "round %d record %d %s", round, i, make([]byte, (round*13+i*7)%90)))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, p)
		}
		if round%3 != 2 {
			if err := w.Sync(context.Background(), all[len(all)-1]); err != nil {
				t.Fatal(err)
			}
		}
		durable := w.Durable()
		if round%50 == 49 {
			// Release the segments before the cursor's.
			if err := w.TruncateBefore(cur.Segment); err != nil {
				t.Fatal(err)
			}
		}
		from := cur
		if round%11 == 10 && len(all) > 20 {
			from = all[len(all)-20] // back, as after a reset
			if from.Less(cur) && from.Segment < cur.Segment {
				from = cur // its segment may be released
			}
		}
		limit := -1
		if round%4 == 0 {
			limit = 3 // a full batch stops the read
		}
		want, err := collect(w.Read, from, durable, limit)
		if err != nil {
			t.Fatal(err)
		}
		got, err := collect(rd.Read, from, durable, limit)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d from %v to %v: Reader read\n%v\nwant\n%v", round, from, durable, got, want)
		}
		for _, r := range got {
			if !r.pos.Less(durable) {
				t.Fatalf("round %d: record at %v, past the durable end %v", round, r.pos, durable)
			}
		}
		if len(got) > 0 {
			cur = got[len(got)-1].end
		} else if cur.Less(durable) && limit < 0 {
			cur = durable
		}
	}
}

var errStop = errors.New("stop")
