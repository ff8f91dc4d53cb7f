package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// fakeSink records what it receives and fails on demand.
type fakeSink struct {
	mu      sync.Mutex
	ids     []string // entry ids, in the order received
	points  []model.Point
	texts   []model.TextPoint
	deletes []Delete
	down    bool            // every send fails with a retryable error
	refuse  map[string]bool // batches whose first entry has this id are refused permanently
	sendErr int
}

func (s *fakeSink) Send(ctx context.Context, b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		s.sendErr++
		return errors.New("upstream down")
	}
	if s.refuse[b.Entries[0].ID] {
		return fmt.Errorf("refuse: %w", ErrPermanent)
	}
	n := 0
	for _, e := range b.Entries {
		s.ids = append(s.ids, e.ID)
		s.points = append(s.points, e.Points...)
		s.texts = append(s.texts, e.Texts...)
		n += len(e.Points) + len(e.Texts)
		if e.Delete != nil {
			s.deletes = append(s.deletes, *e.Delete)
		}
	}
	if n != b.Points {
		return fmt.Errorf("got %d points, batch says %d: %w", n, b.Points, ErrPermanent)
	}
	return nil
}

func (s *fakeSink) setDown(d bool) {
	s.mu.Lock()
	s.down = d
	s.mu.Unlock()
}

func (s *fakeSink) got() ([]string, []model.Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids), slices.Clone(s.points)
}

// points returns n points numbered from first, over three tags.
func points(first, n int) []model.Point {
	pts := make([]model.Point, n)
	for i := range pts {
		k := first + i
		pts[i] = model.Point{Tag: fmt.Sprintf("t%d", k%3), T: int64(1_700_000_000_000 + k*1000), V: float64(k), Q: model.Quality(k % 3)}
	}
	return pts
}

// waitUntil polls cond; the deadline only guards against a hang.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkSeq checks that pts are the points numbered 0..n-1, in order.
func checkSeq(t testing.TB, pts []model.Point, n int) {
	t.Helper()
	if len(pts) != n {
		t.Fatalf("got %d points, want %d", len(pts), n)
	}
	want := points(0, n)
	for i := range pts {
		if pts[i] != want[i] {
			t.Fatalf("point %d = %+v, want %+v", i, pts[i], want[i])
		}
	}
}

// testOptions are forwarder options that retry quickly.
func testOptions(site string) Options {
	o := DefaultOptions()
	o.Site = site
	o.RetryMin = 5 * time.Millisecond
	o.RetryMax = 20 * time.Millisecond
	return o
}

// harness is a store in dir with a follower "fwd" and a Forwarder of it
// to a sink, as pith serve runs one.
type harness struct {
	t      testing.TB
	db     *store.DB
	fo     *store.Follower
	f      *Forwarder
	cancel context.CancelFunc
	done   chan struct{}
}

// openForwarder opens (or reopens) the store in dir and starts forwarding
// it to s with o.
func openForwarder(t testing.TB, dir string, o Options, s Sink) *harness {
	t.Helper()
	db, err := store.Open(dir, storeOptions())
	if err != nil {
		t.Fatal(err)
	}
	fo, err := db.Follow("fwd", store.FollowOptions{Start: store.FollowFromOldest})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	f, err := NewForwarder(fo, s, o, nil)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, db: db, fo: fo, f: f, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		f.Run(ctx)
	}()
	t.Cleanup(h.close)
	return h
}

// write stores the points numbered first..first+n-1, per points a write.
func (h *harness) write(first, n, per int) {
	h.t.Helper()
	for i := first; i < first+n; i += per {
		if err := h.db.Write(context.Background(), points(i, min(per, first+n-i))); err != nil {
			h.t.Fatal(err)
		}
	}
}

// lag returns the follower's unacknowledged WAL records.
func (h *harness) lag() int64 {
	for _, st := range h.db.Followers() {
		if st.Name == "fwd" {
			return st.LagRecords
		}
	}
	return -1
}

// drained waits until the follower acknowledged everything written: no
// lag, or a forwarder waiting for more since a while (the lag may count a
// trailing record without entries, see Stats.WaitingSince).
func (h *harness) drained() {
	h.t.Helper()
	waitUntil(h.t, "backlog sent", func() bool {
		if h.lag() == 0 {
			return true
		}
		w := h.f.Stats().WaitingSince
		return !w.IsZero() && time.Since(w) > 200*time.Millisecond
	})
}

// close stops the forwarder and closes the store; a second call does
// nothing. Stopping between a send and its Ack is what a crash does.
func (h *harness) close() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	<-h.done
	h.fo.Close()
	h.db.Close()
	h.cancel = nil
}

// pointsBatch is a batch of one entry id holding pts.
func pointsBatch(id string, pts []model.Point) Batch {
	return Batch{ID: id, Entries: []Entry{{ID: id, Points: pts}}, Points: len(pts)}
}

// twiceSink sends every batch twice, as a crash after the upstream
// confirmed a batch and before the follower's Ack makes it.
type twiceSink struct{ Sink }

func (s twiceSink) Send(ctx context.Context, b Batch) error {
	if err := s.Sink.Send(ctx, b); err != nil {
		return err
	}
	return s.Sink.Send(ctx, b)
}

// storeOptions are the store's defaults without its logs.
func storeOptions() store.Options {
	o := store.DefaultOptions()
	o.Logger = slog.New(slog.DiscardHandler)
	return o
}
