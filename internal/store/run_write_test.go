package store

import (
	"runtime"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// TestBulkRunsAllocation loads one tag over 300 days (a run a day) and
// checks what the load allocates beyond its samples: a run's write
// buffer and index compressor are reused, not made for each run (they
// were 1.3 MiB a run, most of what a load of years allocated).
func TestBulkRunsAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates its own")
	}
	const days, perDay = 300, 1440
	opts := quietOptions(nil)
	opts.HeadMaxSamples = 1 << 16 // several spills, as a load of years makes
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	pts := make([]model.Point, 0, days*perDay)
	for i := range days * perDay {
		pts = append(pts, model.Point{Tag: "feed", T: t0 + int64(i)*60_000, V: float64(i%1000) / 10})
	}
	runsBefore := db.stats.RunBytes.Load()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	bulkLoad(t, db, pts, 1<<14)
	runtime.ReadMemStats(&after)
	if db.stats.RunBytes.Load() == runsBefore {
		t.Fatal("the load wrote no run")
	}
	db.mu.RLock()
	runs := 0
	for _, rs := range db.parts {
		runs += len(rs)
	}
	db.mu.RUnlock()
	if runs < days {
		t.Fatalf("%d runs, want one a day (%d)", runs, days)
	}
	alloc := float64(after.TotalAlloc - before.TotalAlloc)
	raw := float64(len(pts) * 17)
	perRun := (alloc - 2*raw) / float64(runs) // the heads' arrays: at most twice the samples
	t.Logf("a load of %d runs allocated %.1f MB (%.1f kB a run beyond twice its %.1f MB of raw samples)", runs, alloc/1e6, perRun/1e3, raw/1e6)
	if perRun > 256<<10 {
		t.Errorf("%.1f kB allocated a run beyond the samples: over 256 KiB, as if each run made its own buffers", perRun/1e3)
	}
}
