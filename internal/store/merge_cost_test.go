package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// TestMergeCostOfALongBackfill writes one past day in order, one flush at
// a time, the way a central Pith takes an edge's hour-long backlog: the
// samples written to run files (flushes and merges) must stay within a
// logarithmic factor of the day's size. Merging the whole day at every
// flush (a closed day compacted while still written) or every
// MaxRunsPerPart flushes makes the factor grow with the number of flushes.
// With late samples, every flush's run meets the one before it (a
// central Pith's consumers deliver messages slightly out of order): only
// the runs it meets may be merged with it, not the whole day.
func TestMergeCostOfALongBackfill(t *testing.T) {
	for _, c := range []struct {
		name        string
		late, small bool
	}{{"bulk writes in order", false, false}, {"small writes in order", false, true}, {"small writes with late samples", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			testMergeCostOfALongBackfill(t, c.late, c.small)
		})
	}
}

// testMergeCostOfALongBackfill: small writes go through the WAL and the
// head (a central Pith's path), others are bulk loads.
func testMergeCostOfALongBackfill(t *testing.T, late, small bool) {
	o := testOptions()
	if small {
		o.BulkPoints = 1 << 16
	}
	o.MaxRunsPerPart = 8
	o.HeadMaxSamples = 1 << 20 // flushed by the test
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const flushes, tags, perTag = 512, 10, 100
	day := time.Now().Add(-48 * time.Hour).Truncate(24 * time.Hour).UnixMilli()
	// A sample of today: the backfilled day is closed, not the newest.
	if err := db.Write(context.Background(), []model.Point{{Tag: "now", T: time.Now().UnixMilli(), V: 1}}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var written, final int64
	pts := make([]model.Point, 0, tags*perTag)
	var held []model.Point // late samples, written with the next flush
	for f := range flushes {
		pts = append(pts[:0], held...)
		held = held[:0]
		for k := range perTag {
			for i := range tags {
				ts := day + int64(f*perTag+k)*100
				p := model.Point{Tag: "m" + string(rune('a'+i)), T: ts, V: float64(f*perTag + k)}
				if late && k >= perTag-10 && k%2 == 1 && f < flushes-1 {
					held = append(held, p)
					continue
				}
				pts = append(pts, p)
			}
		}
		if err := db.Write(context.Background(), pts); err != nil {
			t.Fatal(err)
		}
		if err := db.flushAll(false); err != nil {
			t.Fatal(err)
		}
		db.settleMerges()
		db.mu.RLock()
		final = 0
		for _, rs := range db.parts {
			for _, r := range rs {
				n := r.samples()
				if !seen[r.path] {
					seen[r.path] = true
					written += n
				}
				final += n
			}
		}
		runs := len(db.parts[partitionOf(day)])
		apart := disjoint(db.parts[partitionOf(day)])
		db.mu.RUnlock()
		if !apart {
			t.Fatalf("after flush %d the day's runs meet", f)
		}
		if runs > o.MaxRunsPerPart {
			t.Fatalf("after flush %d the day has %d runs, want at most %d", f, runs, o.MaxRunsPerPart)
		}
	}
	amp := float64(written) / float64(final)
	t.Logf("%d flushes: %d samples written to runs for a day of %d (%.1fx)", flushes, written, final, amp)
	// log2(512) = 9 rewrites; merging the whole day every 8 flushes
	// writes 32x, at every flush 256x.
	if amp > 14 {
		t.Errorf("runs written %.1f times the day's size, want at most 14 (n log n)", amp)
	}
	for i := range tags {
		tag := "m" + string(rune('a'+i))
		n, err := db.Aggregate(tag, day, day+int64(flushes*perTag)*100, 1, model.AggCount)
		if err != nil || len(n) != 1 || n[0].V != flushes*perTag {
			t.Fatalf("count of %s: %v, %v; want %d", tag, n, err, flushes*perTag)
		}
		s, err := db.Aggregate(tag, day, day+int64(flushes*perTag)*100, 1, model.AggSum)
		if want := float64(flushes*perTag) * float64(flushes*perTag-1) / 2; err != nil || len(s) != 1 || s[0].V != want {
			t.Fatalf("sum of %s: %v, %v; want %v", tag, s, err, want)
		}
	}
}

// TestLateWritesModel writes samples of a past day in a random order,
// overwriting some timestamps, with flushes (and so merges of late
// samples with the runs they meet) between; after each flush the day's
// runs are disjoint and every series reads as a naive map of the last
// value written at each time.
func TestLateWritesModel(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 22))
			o := testOptions()
			o.BulkPoints = 1 << 16
			o.HeadMaxSamples = 1 << 20
			o.MaxRunsPerPart = 2 + int(seed%4)
			db, err := Open(t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			day := time.Now().Add(-48 * time.Hour).Truncate(24 * time.Hour).UnixMilli()
			tags := []string{"a", "b", "c"}
			want := map[string]map[int64]float64{}
			for _, tag := range tags {
				want[tag] = map[int64]float64{}
			}
			front := int64(0) // writes move forward, with stragglers behind
			for op := range 400 {
				var pts []model.Point
				for range 1 + rng.IntN(30) {
					tag := tags[rng.IntN(len(tags))]
					ts := front + rng.Int64N(50)
					if rng.IntN(4) == 0 {
						ts = max(0, front-rng.Int64N(400)) // late, maybe an overwrite
					}
					v := float64(op*1000 + rng.IntN(1000))
					pts = append(pts, model.Point{Tag: tag, T: day + ts, V: v})
				}
				if err := db.Write(context.Background(), pts); err != nil {
					t.Fatal(err)
				}
				for _, p := range pts {
					want[p.Tag][p.T-day] = p.V
				}
				front += rng.Int64N(40)
				if rng.IntN(8) == 0 {
					if err := db.flushAll(false); err != nil {
						t.Fatal(err)
					}
					db.mu.RLock()
					apart := disjoint(db.parts[partitionOf(day)])
					db.mu.RUnlock()
					if !apart {
						t.Fatalf("op %d: the day's runs meet", op)
					}
				}
			}
			for _, tag := range tags {
				got, err := db.Raw(tag, day, day+partitionMs, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want[tag]) {
					t.Fatalf("%s: %d samples, want %d", tag, len(got), len(want[tag]))
				}
				for _, s := range got {
					if w, ok := want[tag][s.T-day]; !ok || w != s.V {
						t.Fatalf("%s at %d: %v, want %v (%v)", tag, s.T-day, s.V, w, ok)
					}
				}
			}
		})
	}
}
