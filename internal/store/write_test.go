package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestBulkSpillSizedToSeries loads many tags with a few samples each in
// time order, as an import of 100,000 tags sends them: the private head
// is written out once its series average spillPerSeries samples, not at
// every HeadMaxSamples, its runs do not hold their indexes until the
// commit, and every sample reads back.
func TestBulkSpillSizedToSeries(t *testing.T) {
	o := testOptions() // HeadMaxSamples 700
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const tags, steps = 200, 30 // 6,000 samples: 8 spills at 700
	t0 := int64(1_700_000_000_000)
	tx := db.Begin()
	for s := range steps {
		pts := make([]model.Point, tags)
		for i := range pts {
			pts[i] = model.Point{Tag: "t" + strconv.Itoa(i), T: t0 + int64(s)*60_000, V: float64(s*tags + i)}
		}
		if err := tx.Add(pts); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.wait(); err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, rs := range tx.runs {
		runs += len(rs)
		for _, r := range rs {
			// 200 entries: dropped once written (the commit needs only
			// what tx.seen took of them).
			if r.idx.Load() != nil {
				t.Errorf("private run %s holds its index before the commit", r.path)
			}
		}
	}
	// 200 series x 48 is beyond 8 heads of 700: one spill at 5,600.
	if want := tags*steps - spillMaxHeads*o.HeadMaxSamples; runs != 1 || tx.private.samples != want {
		t.Errorf("before the commit: %d private runs and %d samples staged, want 1 and %d", runs, tx.private.samples, want)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range tags {
		got, err := db.Raw("t"+strconv.Itoa(i), t0, t0+steps*60_000, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != steps {
			t.Fatalf("t%d: %d samples, want %d", i, len(got), steps)
		}
		for s, x := range got {
			if x.T != t0+int64(s)*60_000 || x.V != float64(s*tags+i) {
				t.Fatalf("t%d sample %d: %+v", i, s, x)
			}
		}
	}
}

// TestBulkSpillAt is the rule itself: HeadMaxSamples, or for a head of
// many series spillPerSeries samples a series, at most spillMaxHeads heads.
func TestBulkSpillAt(t *testing.T) {
	for _, c := range []struct {
		series, samples int
		full            bool
	}{
		{1, 699, false}, {1, 700, true},
		{14, 700, true},  // 14 x 48 = 672: HeadMaxSamples rules
		{20, 700, false}, // 20 x 48 = 960
		{20, 959, false}, {20, 960, true},
		{1000, 5599, false}, {1000, 5600, true}, // 8 heads of 700 at most
	} {
		tx := &Tx{db: &DB{opts: Options{HeadMaxSamples: 700}}, private: &head{raw: true, count: c.series, samples: c.samples}}
		if got := tx.full(); got != c.full {
			t.Errorf("%d series, %d samples: full %v, want %v", c.series, c.samples, got, c.full)
		}
	}
}

// TestBulkLatest checks the first time and the latest sample of every tag
// after bulk transactions, against a naive model: transactions of many
// tags spill several private heads each (so indexes of 64 series or more
// are dropped before the commit), some bring late samples that meet the
// day's runs (so the install merges their runs away), some repeat a
// timestamp (the sample written last wins), and a few tags hold text.
func TestBulkLatest(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewSource(seed))
			o := testOptions()
			o.HeadMaxSamples = 100
			db, err := Open(t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			type want struct {
				first int64
				last  model.Sample
				text  string
			}
			model_ := map[string]*want{}
			all := map[string]map[int64]model.Sample{} // every numeric sample, the last write of each time
			note := func(tag string, ts int64, v float64, q model.Quality, text string) {
				if text == "" {
					if all[tag] == nil {
						all[tag] = map[int64]model.Sample{}
					}
					all[tag][ts] = model.Sample{T: ts, V: v, Q: q}
				}
				w := model_[tag]
				if w == nil {
					w = &want{first: ts, last: model.Sample{T: ts - 1}}
					model_[tag] = w
				}
				w.first = min(w.first, ts)
				if ts >= w.last.T {
					w.last, w.text = model.Sample{T: ts, V: v, Q: q}, text
				}
			}
			const tags, texts = 150, 5
			base := int64(20_000) * partitionMs
			for txn := range 12 {
				tx := db.Begin()
				var pts []model.Point
				var tpts []model.TextPoint
				// Mostly the next hours in time order; some transactions
				// go back into the hours already written.
				from := base + int64(12+txn)*1800_000
				if txn > 2 && rnd.Intn(3) == 0 {
					// Possibly before the first samples, and through the
					// newest, as a correction does.
					from = base + rnd.Int63n(int64(12+txn)*1800_000)
				}
				for m := range 30 {
					ts := from + int64(m)*60_000
					if rnd.Intn(10) == 0 && m > 0 {
						ts -= 60_000 // a repeat of the minute before
					}
					for _, i := range rnd.Perm(tags) {
						if rnd.Intn(4) == 0 {
							continue
						}
						tag := fmt.Sprintf("bulk.t%d", i)
						if i < texts {
							x := fmt.Sprintf("s%d", rnd.Intn(1000))
							tpts = append(tpts, model.TextPoint{Tag: tag, T: ts, Text: x, Q: model.QualityGood})
							note(tag, ts, 0, model.QualityGood, x)
							continue
						}
						v, q := float64(rnd.Intn(10000))/100, model.QualityGood
						if rnd.Intn(20) == 0 {
							q = model.QualityBad
						}
						pts = append(pts, model.Point{Tag: tag, T: ts, V: v, Q: q})
						note(tag, ts, v, q, "")
					}
				}
				if err := tx.AddText(tpts); err != nil {
					t.Fatal(err)
				}
				for len(pts) > 0 {
					n := min(len(pts), 1+rnd.Intn(400))
					if err := tx.Add(pts[:n]); err != nil {
						t.Fatal(err)
					}
					pts = pts[n:]
				}
				if err := tx.Commit(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			check := func(when string) {
				t.Helper()
				got, err := db.Latest()
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(model_) {
					t.Fatalf("%s: %d tags with a latest sample, want %d", when, len(got), len(model_))
				}
				for _, l := range got {
					w := model_[l.Tag]
					if w == nil || l.Sample != w.last || l.Text != w.text {
						t.Errorf("%s: latest of %s = %+v %q, want %+v", when, l.Tag, l.Sample, l.Text, w)
					}
				}
				for _, ti := range db.Tags() {
					if w := model_[ti.Name]; w == nil || ti.First != w.first || ti.Last != w.last.T {
						t.Errorf("%s: %s spans %d..%d, want %+v", when, ti.Name, ti.First, ti.Last, w)
					}
				}
				// Every sample, through the heads each spill took its
				// series from the one written before (seriesPool).
				for tag, byT := range all {
					want := make([]model.Sample, 0, len(byT))
					for _, smp := range byT {
						want = append(want, smp)
					}
					slices.SortFunc(want, func(a, b model.Sample) int { return cmp.Compare(a.T, b.T) })
					got, err := db.Raw(tag, math.MinInt64, math.MaxInt64, 0)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s: %s holds %d samples, want %d (first %v, want %v)", when, tag, len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
					}
				}
			}
			check("after the commits")
			dir := db.Dir()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(dir, o); err != nil {
				t.Fatal(err)
			}
			check("after a reopen")
		})
	}
}

// TestBulkSpillsApart: a bulk load of points in time order, staged in
// batches that end in the middle of a timestamp's tags, spills runs whose
// bounds do not overlap (carry), so that installing and merging them
// reads none of their indexes (apart).
func TestBulkSpillsApart(t *testing.T) {
	o := testOptions()
	o.HeadMaxSamples = 100
	o.MaxRunsPerPart = 1000
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const tags = 100
	base := int64(20_000) * partitionMs
	var pts []model.Point
	for m := range 300 {
		for i := range tags {
			pts = append(pts, model.Point{Tag: fmt.Sprintf("bulk.t%d", i), T: base + int64(m)*60_000, V: float64(i + m)})
		}
	}
	tx := db.Begin()
	for rest := pts; len(rest) > 0; {
		n := min(len(rest), 777)
		if err := tx.Add(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.mu.RLock()
	runs := slices.Clone(db.parts[20_000])
	db.mu.RUnlock()
	if len(runs) < 3 {
		t.Fatalf("%d runs, want the spills' (at least 3)", len(runs))
	}
	if !apart(runs) {
		for _, r := range runs {
			t.Logf("run %s: %d..%d", r.path, r.lo, r.hi)
		}
		t.Fatal("the spills' runs overlap in time")
	}
	var n int64
	for _, r := range runs {
		n += r.samples()
	}
	if n != int64(len(pts)) {
		t.Fatalf("runs hold %d samples, want %d", n, len(pts))
	}
}
