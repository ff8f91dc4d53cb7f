package store

import (
	"context"
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
			// 200 entries: read again at the commit, not held till then.
			if r.idx.Load() != nil {
				t.Errorf("private run %s holds its index before the commit", r.path)
			}
		}
	}
	// 200 series x 48 is beyond 8 heads of 700: one spill at 5,600.
	if runs != 1 || tx.private.samples != tags*steps-spillMaxHeads*o.HeadMaxSamples {
		t.Errorf("before the commit: %d private runs and %d samples staged, want 1 and %d", runs, tx.private.samples, tags*steps-spillMaxHeads*o.HeadMaxSamples)
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
