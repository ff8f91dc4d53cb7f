package energy

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// openStore returns a real store holding pts, flushed to run files so
// that queries go through the rollup tiers.
func openStore(t testing.TB, pts []model.Point) *store.DB {
	t.Helper()
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	for i := 0; i < len(pts); i += 50_000 {
		if err := db.Write(context.Background(), pts[i:min(i+50_000, len(pts))]); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return db
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("time zone %s not available: %v", name, err)
	}
	return loc
}

func ms(t *testing.T, loc *time.Location, s string) int64 {
	t.Helper()
	tm, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

func near(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	s := max(1, a, -a, b, -b)
	return d <= 1e-9*s
}

func timeIn(t int64, loc *time.Location) time.Time { return time.UnixMilli(t).In(loc) }
