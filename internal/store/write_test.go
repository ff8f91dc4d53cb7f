package store

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestBulkSpillSizedToSeries loads many tags with a few samples each in
// time order, as an import of 100,000 tags sends them: when their raw
// tails reach bulkMaxRaw heads before they seal, the private head is
// written out, its runs do not hold their indexes until the commit, and
// every sample reads back.
func TestBulkSpillSizedToSeries(t *testing.T) {
	o := testOptions() // HeadMaxSamples 700
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// 200 tails of at most 127 samples: the raw bound, 16 heads of 700,
	// is reached at 11,200, before they seal.
	const tags, steps = 200, 60
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
	if runs != 1 || tx.private.samples != tags*steps-bulkMaxRaw*o.HeadMaxSamples {
		t.Errorf("before the commit: %d private runs and %d samples staged, want 1 and %d", runs, tx.private.samples, tags*steps-bulkMaxRaw*o.HeadMaxSamples)
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

// TestBulkBlocksBecomeChunks loads tags in time order across midnight:
// the private head seals blocks of bulkBlockSamples and at the new day,
// nothing is written before the commit, and the commit's runs hold the
// sealed blocks as chunks (large enough for a merge to copy) and every
// sample.
func TestBulkBlocksBecomeChunks(t *testing.T) {
	o := testOptions() // HeadMaxSamples 700
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// t0 is minute 1,333 of its day: 107 samples in the first day, then
	// a block of 128 and a tail of 65 in the next.
	const tags, steps = 50, 300
	t0 := int64(1_700_000_000_000)
	tx := db.Begin()
	for s := range steps {
		pts := make([]model.Point, tags)
		for i := range pts {
			pts[i] = model.Point{Tag: "t" + strconv.Itoa(i), T: t0 + int64(s)*60_000, V: float64(s%97) / 4}
		}
		if err := tx.Add(pts); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.wait(); err != nil {
		t.Fatal(err)
	}
	if len(tx.runs) != 0 || tx.private.sealedN != tags*(107+128) {
		t.Fatalf("before the commit: %d days of private runs, %d samples sealed, want 0 and %d", len(tx.runs), tx.private.sealedN, tags*(107+128))
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	db.mu.RLock()
	var sizes [][]int32
	for _, p := range []int64{partitionOf(t0), partitionOf(t0) + 1} {
		if len(db.parts[p]) != 1 {
			t.Fatalf("day %d: %d runs, want 1", p, len(db.parts[p]))
		}
		ss := db.parts[p][0].index()
		x := &ss[len(ss)-1]
		var n []int32
		for _, c := range x.chunks {
			n = append(n, int32(c.n))
		}
		sizes = append(sizes, n)
	}
	db.mu.RUnlock()
	if fmt.Sprint(sizes) != "[[107] [128 65]]" {
		t.Errorf("chunk sizes by day %v, want [[107] [128 65]]", sizes)
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
			if x.T != t0+int64(s)*60_000 || x.V != float64(s%97)/4 {
				t.Fatalf("t%d sample %d: %+v", i, s, x)
			}
		}
	}
}

// TestBulkSpillAt is the rule itself: raw tails of HeadMaxSamples, or for
// a head of many series bulkBlockSamples a series, at most bulkMaxRaw
// heads; or sealed blocks of bulkSealedPerSample bytes a head sample.
func TestBulkSpillAt(t *testing.T) {
	for _, c := range []struct {
		series, samples, sealedN, sealedBytes int
		full                                  bool
	}{
		{1, 699, 0, 0, false}, {1, 700, 0, 0, true},
		{5, 700, 0, 0, true},   // 5 x 128 = 640: HeadMaxSamples rules
		{20, 700, 0, 0, false}, // 20 x 128 = 2560
		{20, 2559, 0, 0, false}, {20, 2560, 0, 0, true},
		{20, 5000, 2441, 3000, false},                         // the sealed samples do not count
		{1000, 11199, 0, 0, false}, {1000, 11200, 0, 0, true}, // 16 heads of 700 at most
		{1000, 1000, 900, 64*700 - 1, false}, // sealed bytes: 64 a head sample
		{1000, 1000, 900, 64 * 700, true},
	} {
		tx := &Tx{db: &DB{opts: Options{HeadMaxSamples: 700}}, private: &head{bulk: true, count: c.series, samples: c.samples, sealedN: c.sealedN, sealedBytes: c.sealedBytes}}
		if got := tx.full(); got != c.full {
			t.Errorf("%+v: full %v, want %v", c, got, c.full)
		}
	}
}
