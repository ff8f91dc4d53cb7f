package store

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// TestQueryCacheSlidingWindow runs the query of a dashboard showing the
// last 10 minutes, refreshed every 10 s, over two hours of stored data,
// and checks that the chunk cache stays at what the last few minutes of
// queries used instead of growing with time: every refresh reaches new
// chunks, and a cache bounded by bytes alone grew until its budget (32
// MiB by default), hours later.
func TestQueryCacheSlidingWindow(t *testing.T) {
	start := time.UnixMilli(int64(20_000)*partitionMs + 3_600_000)
	var clock atomic.Int64
	clock.Store(start.UnixMilli())
	opts := DefaultOptions()
	opts.Durability = DurabilityRelaxed
	opts.MaxRunsPerPart = 100
	opts.HeadMaxAge = 0
	opts.Now = func() time.Time { return time.UnixMilli(clock.Load()) }
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const span = 2 * time.Hour
	t0 := start.UnixMilli()
	for from := int64(0); from < span.Milliseconds(); from += 600_000 { // a run per 10 minutes
		var pts []model.Point
		for ms := from; ms < from+600_000; ms += 50 {
			pts = append(pts, model.Point{Tag: "d.a", T: t0 + ms, V: float64(ms / 50)})
		}
		if err := db.Write(t.Context(), pts); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var level, peak int
	for now := t0 + 600_000; now <= t0+span.Milliseconds(); now += 10_000 {
		clock.Store(now)
		got, err := db.Raw("d.a", now-600_000, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 12_000 {
			t.Fatalf("at %d: %d samples, want 12000", now, len(got))
		}
		b := db.cache.chunks.bytes()
		switch el := now - t0; {
		case el == 30*60_000:
			level = b
		case el > 30*60_000:
			peak = max(peak, b)
		}
	}
	t.Logf("chunk cache after 30 minutes of refreshes: %d kB; at most %d kB over the next 90", level/1000, peak/1000)
	if peak > level*3/2 {
		t.Errorf("the chunk cache grew from %d kB to %d kB as the window slid: it keeps chunks no query uses any more", level/1000, peak/1000)
	}
}
