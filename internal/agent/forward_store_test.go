package agent

import (
	"context"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"

	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/store"
)

// recordSink is a forward.Sink keeping every point it is sent.
type recordSink struct {
	mu  sync.Mutex
	pts []model.Point
}

func (s *recordSink) Send(_ context.Context, b forward.Batch) error {
	_, pts, err := forward.DecodeBatch(nil, b.Payload)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pts = append(s.pts, pts...)
	s.mu.Unlock()
	return nil
}

func (s *recordSink) points() []model.Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pts)
}

func testPoints(tag string, n int, t0 int64) []model.Point {
	pts := make([]model.Point, n)
	for i := range pts {
		pts[i] = model.Point{Tag: tag, T: t0 + int64(i), V: float64(i)}
	}
	return pts
}

// TestImportTakesTheRoad checks the road of imports and pushed points:
// they reach the tag table's Every subscribers (the forwarders) only once
// the store committed them, in order, whether an import was held in memory
// or spooled to a file; a rolled-back or refused import reaches nobody;
// and the table's current values follow.
func TestImportTakesTheRoad(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log := slog.New(slog.DiscardHandler)
	q := archive.New(db, log, archive.DefaultOptions())
	defer q.Close(context.Background())
	tab := tag.New(log, tag.DefaultOptions(), q)
	every := tab.Subscribe(tag.SubOptions{Name: "forward", Mode: tag.Every, MaxPending: 1 << 20})
	spool := t.TempDir()
	r := newRoad(db, tab, spool, log)
	r.memBytes = 4 << 10 // most of an import goes through the spool file
	ctx := context.Background()

	// Rolled back: nothing reaches the table.
	tx := r.Begin()
	if err := tx.Add(testPoints("rb", 1000, 0)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	// Refused (a non-finite value): nothing reaches the table.
	tx = r.Begin()
	if err := tx.Add(testPoints("bad", 1000, 0)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Add([]model.Point{{Tag: "bad", T: 5000, V: math.NaN()}}); err == nil {
		t.Fatal("NaN accepted")
	}
	tx.Rollback()
	// Committed in three parts, most of it spooled.
	var want []model.Point
	tx = r.Begin()
	for i := range 3 {
		pts := testPoints("imp", 2000, int64(i)*2000)
		want = append(want, pts...)
		if err := tx.Add(pts); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx.Rollback() // as the handler's deferred clean-up does: a no-op
	// A push input's write.
	push := testPoints("push", 10, 0)
	want = append(want, push...)
	if err := r.Write(ctx, push); err != nil {
		t.Fatal(err)
	}

	var got []model.Point
	for _, c := range every.Take(nil) {
		got = append(got, model.Point{Tag: c.Tag, T: c.T, V: c.V, Q: c.Q})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("table delivered %d stored points, want %d (first %v)", len(got), len(want), got[:min(3, len(got))])
	}
	for _, name := range []string{"rb", "bad"} {
		if _, ok := tab.Lookup(name); ok {
			t.Errorf("tag %s of a refused import is in the table", name)
		}
	}
	cur, err := tab.Latest("imp", "push")
	if err != nil {
		t.Fatal(err)
	}
	if cur[0].T != 5999 || cur[1].T != 9 {
		t.Errorf("current values %+v, want imp at 5999 and push at 9", cur)
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Errorf("spool dir holds %d files after the import", len(ents))
	}
	if n, err := db.Raw("imp", 0, 6000, 0); err != nil || len(n) != 6000 {
		t.Errorf("store holds %d imported samples (%v), want 6000", len(n), err)
	}
	if n, err := db.Raw("push", 0, 10, 0); err != nil || len(n) != 10 {
		t.Errorf("store holds %d pushed samples (%v), want 10", len(n), err)
	}

	// Without an Every subscriber an import keeps only each tag's newest
	// point for the table, and spools nothing.
	tab.Unsubscribe(every)
	tx = r.Begin()
	if err := tx.Add(append(testPoints("imp", 100, 10_000), testPoints("imp2", 5, 3)...)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, _ = tab.Latest("imp", "imp2"); cur[0].T != 10_099 || cur[1].T != 7 {
		t.Errorf("current values %+v, want imp at 10099 and imp2 at 7", cur)
	}
}
