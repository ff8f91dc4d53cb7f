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
