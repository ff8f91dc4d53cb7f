package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// writeRounds writes rounds of ten small writes of ten points, each round
// followed by a flush (a checkpoint in a new WAL segment).
func writeRounds(t *testing.T, db *DB, rounds int, next *int) {
	t.Helper()
	for r := 0; r < rounds; r++ {
		for w := 0; w < 10; w++ {
			pts := make([]model.Point, 10)
			for i := range pts {
				*next++
				pts[i] = model.Point{Tag: "r.a", T: 1_700_000_000_000 + int64(*next), V: float64(*next)}
			}
			if err := db.Write(context.Background(), pts); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

func walSegments(t *testing.T, db *DB) int {
	t.Helper()
	segs, err := db.wal.Segments()
	if err != nil {
		t.Fatal(err)
	}
	return len(segs)
}

// TestFollowRetention checks that segments a follower has not acknowledged
// outlive the checkpoint, that an Ack or Unfollow releases them, and that
// without followers they go at the checkpoint as before.
func TestFollowRetention(t *testing.T) {
	fs := vfs.NewFaultFS()
	db, err := Open("/data", followOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	writeRounds(t, db, 5, &next)
	if n := walSegments(t, db); n > 2 {
		t.Fatalf("without followers: %d wal segments after flushes, want at most 2", n)
	}
	slow, err := db.Follow("slow", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := db.Follow("fast", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeRounds(t, db, 6, &next)
	if n := walSegments(t, db); n < 6 {
		t.Fatalf("with a follower that acknowledged nothing: %d wal segments, want at least 6", n)
	}
	for {
		b, err := fast.Next(drained(), 0)
		if errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := fast.Ack(b.End); err != nil {
			t.Fatal(err)
		}
	}
	if n := walSegments(t, db); n < 6 {
		t.Fatalf("one follower still holds them: %d wal segments, want at least 6", n)
	}
	if err := db.Unfollow("slow"); !errors.Is(err, ErrFollowerOpen) {
		t.Fatalf("unfollow of an open follower: %v", err)
	}
	slow.Close()
	if err := db.Unfollow("slow"); err != nil {
		t.Fatal(err)
	}
	if n := walSegments(t, db); n > 2 {
		t.Fatalf("after unfollow: %d wal segments, want at most 2", n)
	}
	if err := db.Unfollow("slow"); !errors.Is(err, ErrUnknownFollower) {
		t.Fatalf("second unfollow: %v", err)
	}
	fast.Close()
	db.Close()
}

// TestFollowBudget fills the WAL past FollowMaxBytes while a follower
// reads nothing: the oldest segments go, the follower counts exactly what
// it lost (logged, persisted across a reopen), and delivered plus dropped
// is everything written.
func TestFollowBudget(t *testing.T) {
	fs := vfs.NewFaultFS()
	logs := &logCapture{}
	opts := followOptions(fs)
	opts.Logger = quietOptions(logs).Logger
	opts.FollowMaxBytes = 2 << 10 // about four segments of writeRounds
	db, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := db.Follow("f", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	writeRounds(t, db, 12, &next)
	written := int64(next)
	st := db.Followers()[0]
	if st.Dropped.Events == 0 || st.Dropped.Records == 0 || st.Dropped.Points != 10*st.Dropped.Records {
		t.Fatalf("dropped %+v, want records of ten points each", st.Dropped)
	}
	if segs, _ := db.wal.Segments(); len(segs) > 6 {
		t.Fatalf("%d wal segments kept over a 2 KiB budget", len(segs))
	}
	warned := 0
	logs.mu.Lock()
	for _, r := range logs.recs {
		if strings.Contains(r.Message, "over the follower budget") {
			warned++
		}
	}
	logs.mu.Unlock()
	if int64(warned) != st.Dropped.Events {
		t.Fatalf("%d warnings for %d drop events", warned, st.Dropped.Events)
	}
	f.Close()
	db.Close()
	if db, err = Open("/data", opts); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	after := db.Followers()[0]
	if after.Dropped != st.Dropped {
		t.Fatalf("dropped after reopen %+v, want %+v", after.Dropped, st.Dropped)
	}
	if f, err = db.Follow("f", FollowOptions{}); err != nil {
		t.Fatal(err)
	}
	var delivered, records int64
	for {
		b, err := f.Next(drained(), 0)
		if errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		delivered += int64(b.Points)
		records += int64(len(b.Entries))
	}
	t.Logf("wrote %d points, delivered %d, dropped %+v", written, delivered, after.Dropped)
	if delivered+after.Dropped.Points != written || records+after.Dropped.Records != written/10 {
		t.Fatalf("delivered %d points in %d records, dropped %+v; wrote %d points", delivered, records, after.Dropped, written)
	}
}
