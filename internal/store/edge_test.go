package store

import (
	"context"
	"io"
	"log/slog"
	"math"
	"math/rand"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestEdgeBaseMatchesModel checks bucket edges read as a chunk's base
// (the count and sum of the run series before it, from the tiers) plus
// its prefix sums: four days of one tag at about 10 s, a late write that
// gives one day a second run, and bucketed aggregates over random
// windows (many edges in a day, and one edge in several days) against a
// naive scan of the samples. It fails unless some chunk's base was used.
func TestEdgeBaseMatchesModel(t *testing.T) {
	rnd := rand.New(rand.NewSource(7))
	opts := DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Durability = DurabilityRelaxed
	dir := t.TempDir()
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	const tag = "edge"
	const days = 4
	t0 := int64(1_700_000_000_000) - 1_700_000_000_000%partitionMs
	end := t0 + days*partitionMs
	value := func() float64 { return math.Round(rnd.NormFloat64()*10000) / 100 }
	m := naive{}
	var pts []model.Point
	for ts := t0 + rnd.Int63n(5_000); ts < end; ts += 5_000 + rnd.Int63n(10_000) {
		pts = append(pts, model.Point{Tag: tag, T: ts, V: value()})
	}
	m.write(pts)
	// The second day is written in four pieces, flushed one by one, that
	// meet inside cells: four runs until Close merges them into one whose
	// copied chunks end and begin inside a cell (no base there).
	day1 := t0 + partitionMs
	cuts := []int64{day1, day1 + 18_000_000 + 7*60_000 + 13_000, day1 + 41_000_000 + 1_234, day1 + 70_000_000 + 999_999, day1 + partitionMs}
	var rest []model.Point
	pieces := make([][]model.Point, len(cuts)-1)
	for _, p := range pts {
		k := 0
		for k < len(pieces) && p.T >= cuts[k+1] {
			k++
		}
		if p.T < day1 || k == len(pieces) {
			rest = append(rest, p)
		} else {
			pieces[k] = append(pieces[k], p)
		}
	}
	tx := db.Begin()
	if err := tx.Add(rest); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, piece := range append([][]model.Point{nil}, pieces...) {
		if err := db.Write(context.Background(), piece); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(db.parts[partitionOf(day1)]); n != 4 {
		t.Fatalf("%d runs in the second day, want 4", n)
	}
	// Merge them now, as compactAll does: the merge copies their chunks,
	// so that some begin in a cell the one before ends in.
	db.flushMu.Lock()
	db.awaitMerge()
	old := db.parts[partitionOf(day1)]
	merged, err := db.mergeRuns(partitionOf(day1), old, false, nil)
	if err == nil {
		err = db.replaceRuns(partitionOf(day1), old, merged)
	}
	db.flushMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		for k := 0; k < 300; k++ {
			from := t0 - partitionMs/4 + rnd.Int63n(end-t0)
			to := from + 1 + rnd.Int63n(end+partitionMs/4-from)
			n := 1 + rnd.Intn(2000)
			agg := []model.Agg{model.AggMean, model.AggSum, model.AggCount}[rnd.Intn(3)]
			if k%5 == 0 {
				agg = model.Agg(rnd.Intn(int(model.AggRaw)))
			}
			checkAggregate(t, db, m, tag, from, to, n, agg, step)
		}
	}
	// based counts the cached chunks past the first of their run series
	// with a base and without one.
	based := func() (with, without int) {
		db.cache.chunks.mu.Lock()
		defer db.cache.chunks.mu.Unlock()
		for _, g := range []map[blockKey]*decodedChunk{db.cache.chunks.young, db.cache.chunks.old} {
			for k, d := range g {
				switch {
				case k.index > 0 && d.baseOK && d.baseN > 0:
					with++
				case k.index > 0 && !d.baseOK:
					without++
				}
			}
		}
		return with, without
	}
	check("one run a day, the second merged from four")
	if with, without := based(); with == 0 || without == 0 {
		t.Fatalf("%d chunks read with a base, %d without: want both", with, without)
	}
	// Late samples into the fourth day, some at stored times: that day
	// gets a second run that overlaps the first.
	var late []model.Point
	s := m.sorted(tag)
	for i := 0; i < 500; i++ {
		ts := t0 + 3*partitionMs + rnd.Int63n(partitionMs)
		if i%3 == 0 {
			ts = s[rnd.Intn(len(s))].T
		}
		late = append(late, model.Point{Tag: tag, T: ts, V: value()})
	}
	if err := db.Write(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	m.write(late)
	check("late samples unflushed")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("late samples flushed")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	if n := len(db.parts[partitionOf(day1)]); n != 1 {
		t.Fatalf("%d runs in the second day after Close, want 1", n)
	}
	check("reopened")
}
