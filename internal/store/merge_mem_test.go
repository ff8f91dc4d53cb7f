package store

import (
	"context"
	"math"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// mergeDay writes a day of runs*per samples of one tag in time order over
// runs runs and merges them, returning what the merge allocated. It checks
// that the merged run holds every sample in order.
func mergeDay(t *testing.T, runs, per int) float64 {
	t.Helper()
	opts := DefaultOptions()
	opts.MaxRunsPerPart = 100
	opts.HeadMaxAge = time.Hour
	opts.Durability = DurabilityRelaxed
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	day := int64(20_000) * partitionMs
	for k := range runs {
		for off := 0; off < per; off += 50_000 {
			pts := make([]model.Point, min(50_000, per-off))
			for i := range pts {
				n := int64(k*per + off + i)
				pts[i] = model.Point{Tag: "m.a", T: day + n, V: float64(n)}
			}
			if err := db.Write(context.Background(), pts); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	p := day / partitionMs
	in := db.parts[p]
	if len(in) != runs {
		t.Fatalf("%d runs in the day, want %d", len(in), runs)
	}
	// The least of three merges: TotalAlloc counts every goroutine's
	// allocations, and the store's own maintenance runs meanwhile.
	alloc := math.MaxFloat64
	var r *runFile
	for range 3 {
		if r != nil {
			r.close()
			os.Remove(r.path)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var err error
		r, err = db.mergeRuns(p, in, false, nil)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		alloc = min(alloc, float64(after.TotalAlloc-before.TotalAlloc))
	}
	defer r.close()
	var got runInput
	rs := r.find(r.index()[0].id)
	if err := r.readAll(rs, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ts) != runs*per {
		t.Fatalf("merged run holds %d samples, want %d", len(got.ts), runs*per)
	}
	for i, ts := range got.ts {
		if ts != day+int64(i) || got.vs[i] != float64(i) {
			t.Fatalf("sample %d: %d=%v, want %d=%d", i, ts, got.vs[i], day+int64(i), i)
		}
	}
	return alloc
}

// TestMergeRunsMemory merges a day written in time order over 8 runs, then
// a day four times larger, and checks that a merge streams the series from
// the runs to the new one: what it allocates stays a small part of the
// series (raw, 17 bytes a sample) and hardly grows with the day. A merge
// that decodes the day's series whole allocates at least the series: for
// the larger day, at least the raw size of its extra samples more.
func TestMergeRunsMemory(t *testing.T) {
	const runs, per = 8, 50_000
	small := mergeDay(t, runs, per)
	large := mergeDay(t, runs, 4*per)
	series := float64(runs * per * 17)
	t.Logf("merge of %d samples allocated %.2f MB (%.2f times the raw series), of %d samples %.2f MB (%.2f times)",
		runs*per, small/1e6, small/series, 4*runs*per, large/1e6, large/(4*series))
	if raceEnabled { // the race detector allocates its own (2.2x in CI)
		return
	}
	if small > series/2 {
		t.Errorf("merge of %d samples allocated %.2f MB, over half the %.2f MB of the raw series", runs*per, small/1e6, series/2e6)
	}
	// Compared by growth, not ratio: the fixed part (write buffer, index
	// compressor) is pooled, so the smaller day's figure can be near 0.
	if extra := 3 * series; large-small > extra/4 {
		t.Errorf("merge of a day 4 times larger allocated %.2f MB more than the smaller day's %.2f MB, over a quarter of the %.2f MB its extra samples take raw", (large-small)/1e6, small/1e6, extra/1e6)
	}
}

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
	tx := db.Begin()
	for k := 0; k < len(pts); k += 1 << 14 {
		if err := tx.Add(pts[k:min(k+1<<14, len(pts))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
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
