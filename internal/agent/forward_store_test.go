package agent

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"

	"github.com/pith-historian/pith/internal/store"
)

func testPoints(tag string, n int, t0 int64) []model.Point {
	pts := make([]model.Point, n)
	for i := range pts {
		pts[i] = model.Point{Tag: tag, T: t0 + int64(i), V: float64(i)}
	}
	return pts
}

// TestImportTakesTheRoad checks the road of imports and pushed points:
// they reach the store's log, which the forwarders follow, only once the
// store committed them, in order; a rolled-back or refused import reaches
// nobody; and the table's current values follow.
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
	fo, err := db.Follow("forward.test", store.FollowOptions{Start: store.FollowFromEnd})
	if err != nil {
		t.Fatal(err)
	}
	defer fo.Close()
	r := newRoad(db, tab)
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
	// Committed in three parts.
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
	for len(got) < len(want) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		b, err := fo.Next(wctx, 0)
		cancel()
		if err != nil {
			t.Fatalf("follower after %d points: %v", len(got), err)
		}
		for _, e := range b.Entries {
			got = append(got, e.Points...)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("store log delivered %d points, want %d (first %v)", len(got), len(want), got[:min(3, len(got))])
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
	if n, err := db.Raw("imp", 0, 6000, 0); err != nil || len(n) != 6000 {
		t.Errorf("store holds %d imported samples (%v), want 6000", len(n), err)
	}
	if n, err := db.Raw("push", 0, 10, 0); err != nil || len(n) != 10 {
		t.Errorf("store holds %d pushed samples (%v), want 10", len(n), err)
	}

	// The table gets each tag's newest point of an import.
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

// TestStoreForwardMaxBytes: store.forward_max_bytes is the store's budget
// of WAL kept for followers; 0 keeps the store's default.
func TestStoreForwardMaxBytes(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tt := range []struct{ key, want int64 }{
		{0, store.DefaultFollowMaxBytes},
		{64 << 20, 64 << 20},
	} {
		if got := storeOptions(config.Store{ForwardMaxBytes: tt.key}, log).FollowMaxBytes; got != tt.want {
			t.Errorf("forward_max_bytes %d: FollowMaxBytes = %d, want %d", tt.key, got, tt.want)
		}
	}
}
