package agent

import (
	"context"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/api"
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

// TestImportForwardedAfterCommit checks the store wrapper of the import
// API and the push inputs: points reach the forwarders only once the
// store committed them, in order, whether held in memory or spooled to a
// file; a rolled-back or refused import forwards nothing.
func TestImportForwardedAfterCommit(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sink := &recordSink{}
	qo := forward.DefaultOptions()
	qo.Site = "s"
	q, err := forward.Open(t.TempDir(), qo, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	log := slog.New(slog.DiscardHandler)
	fw := &forwarders{list: []*forwarder{{name: "rec", q: q}}, log: log}
	spool := t.TempDir()
	// A tiny memory budget sends most of an import through the spool file.
	ws := &forwardingStore{Store: api.WrapDB(db), db: db, fw: fw, spoolDir: spool, memBytes: 4 << 10}
	ctx := context.Background()

	// Rolled back: nothing is forwarded.
	tx := ws.Begin()
	if err := tx.Add(testPoints("rb", 1000, 0)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	// Refused (a non-finite value): nothing is forwarded.
	tx = ws.Begin()
	if err := tx.Add(testPoints("bad", 1000, 0)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Add([]model.Point{{Tag: "bad", T: 5000, V: math.NaN()}}); err == nil {
		t.Fatal("NaN accepted")
	}
	tx.Rollback()
	// Committed in three parts, most of it spooled.
	var want []model.Point
	tx = ws.Begin()
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
	if err := ws.Write(ctx, push); err != nil {
		t.Fatal(err)
	}

	end := time.Now().Add(10 * time.Second)
	for len(sink.points()) < len(want) && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
	got := sink.points()
	if !slices.Equal(got, want) {
		t.Fatalf("forwarded %d points, want %d (first %v)", len(got), len(want), got[:min(3, len(got))])
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Errorf("spool dir holds %d files after the import", len(ents))
	}
	if n, err := db.Raw("imp", 0, 6000, 0); err != nil || len(n) != 6000 {
		t.Errorf("store holds %d imported samples (%v), want 6000", len(n), err)
	}
}
