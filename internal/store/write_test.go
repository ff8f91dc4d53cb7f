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
// the private head seals blocks (of 128 samples with many series, 512
// with few) and at the new day, nothing is written before the commit, and
// the commit's runs hold the sealed blocks as chunks, large enough for a
// merge to copy, and every sample.
func TestBulkBlocksBecomeChunks(t *testing.T) {
	for _, c := range []struct {
		tags int
		want string // chunk sizes of the last series, by day
	}{
		// t0 is minute 1,333 of its day: 107 samples in the first day,
		// then 193 in the next.
		{bulkWideSeries + 52, "[[107] [128 65]]"},
		{50, "[[107] [193]]"},
	} {
		t.Run(strconv.Itoa(c.tags), func(t *testing.T) {
			o := testOptions()
			o.HeadMaxSamples = 1 << 15 // tails of 128 samples fit
			db, err := Open(t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			const steps = 300
			t0 := int64(1_700_000_000_000)
			tx := db.Begin()
			for s := range steps {
				pts := make([]model.Point, c.tags)
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
			if len(tx.runs) != 0 {
				t.Fatalf("before the commit: %d days of private runs, want 0", len(tx.runs))
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
			if fmt.Sprint(sizes) != c.want {
				t.Errorf("chunk sizes by day %v, want %s", sizes, c.want)
			}
			for i := range c.tags {
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
		})
	}
}

// TestBulkSpillAt is the rule itself: raw tails of HeadMaxSamples, or for
// a head of many series a block's worth a series (512 samples up to
// bulkWideSeries series, 128 beyond), at most bulkMaxRaw heads; or sealed
// blocks of bulkSealedPerSample bytes a head sample.
func TestBulkSpillAt(t *testing.T) {
	for _, c := range []struct {
		series, samples, sealedN, sealedBytes int
		full                                  bool
	}{
		{1, 99_999, 0, 0, false}, {1, 100_000, 0, 0, true},
		{100, 100_000, 0, 0, true}, // 100 x 512: HeadMaxSamples rules
		{500, 255_999, 0, 0, false}, {500, 256_000, 0, 0, true},
		{3000, 383_999, 0, 0, false}, {3000, 384_000, 0, 0, true}, // 3000 x 128
		{3000, 500_000, 116_001, 0, false},                                // the sealed samples do not count
		{20_000, 1_599_999, 0, 0, false}, {20_000, 1_600_000, 0, 0, true}, // 16 heads at most
		{3000, 1000, 900, 64*100_000 - 1, false}, // sealed bytes: 64 a head sample
		{3000, 1000, 900, 64 * 100_000, true},
	} {
		tx := &Tx{db: &DB{opts: Options{HeadMaxSamples: 100_000}}, private: &head{bulk: true, count: c.series, samples: c.samples, sealedN: c.sealedN, sealedBytes: c.sealedBytes}}
		if got := tx.full(); got != c.full {
			t.Errorf("%+v: full %v, want %v", c, got, c.full)
		}
	}
}
