package store

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestLongSpanMatchesModel loads 120 days of one tag (most days dense
// enough for rollup tiers, some sparse), then writes late samples into
// old days (some left unflushed), deletes ranges, flushes and reopens at
// random, and after each step checks bucketed aggregates over windows of
// more than minSpanDays days with buckets of a day or more, which the
// summary above the day answers, against a naive scan of the samples.
func TestLongSpanMatchesModel(t *testing.T) {
	for seed := int64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testLongSpan(t, seed) })
	}
}

func testLongSpan(t *testing.T, seed int64) {
	rnd := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	opts := testOptions()
	opts.HeadMaxSamples = 2000
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	const day = partitionMs
	const tag = "plant.power"
	t0 := int64(1_700_000_000_000)
	const days = 120
	end := t0 + days*day
	value := func() float64 { return math.Round(rnd.NormFloat64()*1000) / 100 }
	m := naive{}
	var pts []model.Point
	for d := int64(0); d < days; d++ {
		step := int64(150_000) // 576 a day: 3-hour cells hold 72
		if rnd.Intn(5) == 0 {
			step = 3_600_000 // sparse: no tiers
		}
		for ts := t0 + d*day + rnd.Int63n(step); ts < t0+(d+1)*day; ts += step {
			pts = append(pts, model.Point{Tag: tag, T: ts, V: value()})
		}
	}
	tx := db.Begin()
	if err := tx.Add(pts); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.write(pts)
	check := func(step int) {
		t.Helper()
		for k := 0; k < 5; k++ {
			span := int64(minSpanDays+rnd.Intn(days-minSpanDays)) * day
			from := t0 - day/2 + rnd.Int63n(end+day-t0-span)
			if k == 0 {
				from, span = t0-rnd.Int63n(day), end-t0+day
			}
			to := from + span
			n := 1 + rnd.Intn(int(span/day))
			checkAggregate(t, db, m, tag, from, to, n, model.Agg(rnd.Intn(int(model.AggRaw))), fmt.Sprintf("step %d", step))
		}
	}
	check(-1)
	id, _ := db.series.lookup(tag)
	if _, ok := db.cache.sums.get(id); !ok {
		t.Fatal("no summary above the day was built")
	}
	for step := 0; step < 25; step++ {
		switch r := rnd.Intn(10); {
		case r < 5: // late writes into old days, repeats of stored times among them
			var late []model.Point
			s := m.sorted(tag)
			for i, n := 0, 1+rnd.Intn(300); i < n; i++ {
				ts := t0 + rnd.Int63n(end-t0)
				if rnd.Intn(3) == 0 && len(s) > 0 {
					ts = s[rnd.Intn(len(s))].T
				}
				late = append(late, model.Point{Tag: tag, T: ts, V: value()})
			}
			if err := db.Write(context.Background(), late); err != nil {
				t.Fatal(err)
			}
			m.write(late)
		case r < 8: // a delete of up to three days
			from := t0 + rnd.Int63n(end-t0)
			to := from + 1 + rnd.Int63n(3*day)
			if _, err := db.Delete(context.Background(), tag, from, to); err != nil {
				t.Fatal(err)
			}
			m.delete(tag, from, to)
		case r < 9:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		default:
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(dir, opts); err != nil {
				t.Fatal(err)
			}
		}
		check(step)
	}
}
