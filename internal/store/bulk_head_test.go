package store

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// bulkModel is what a store must answer after bulk loads: per tag, the
// last written value and quality of each timestamp.
type bulkModel map[string]map[int64]model.Sample

func (m bulkModel) add(pts []model.Point) {
	for _, p := range pts {
		if m[p.Tag] == nil {
			m[p.Tag] = make(map[int64]model.Sample)
		}
		m[p.Tag][p.T] = model.Sample{T: p.T, V: p.V, Q: p.Q}
	}
}

func (m bulkModel) samples(tag string) []model.Sample {
	var out []model.Sample
	for _, s := range m[tag] {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b model.Sample) int { return int(a.T - b.T) })
	return out
}

// check compares every tag's raw samples and a few bucketed aggregates
// (which read the runs' totals and rollup cells) with the model.
func (m bulkModel) check(t *testing.T, db *DB, when string, from, to int64) {
	t.Helper()
	for tag := range m {
		want := m.samples(tag)
		got, err := db.Raw(tag, from, to, 0)
		if err != nil {
			t.Fatalf("%s: %s: %v", when, tag, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %s: %d samples, want %d (first difference %v)", when, tag, len(got), len(want), firstDiff(got, want))
		}
		for _, n := range []int{1, 7, 96} {
			bs, err := db.Aggregate(tag, from, to, n, model.AggSum)
			if err != nil {
				t.Fatalf("%s: %s: %v", when, tag, err)
			}
			cs, err := db.Aggregate(tag, from, to, n, model.AggCount)
			if err != nil {
				t.Fatalf("%s: %s: %v", when, tag, err)
			}
			w := (to - from) / int64(n)
			for i := range bs {
				var sum float64
				cnt := 0
				for _, s := range want {
					if s.T >= from+int64(i)*w && s.T < from+int64(i+1)*w {
						sum += s.V
						cnt++
					}
				}
				if float64(cnt) != cs[i].V || (cnt > 0) != cs[i].OK {
					t.Fatalf("%s: %s: %d buckets: bucket %d counts %v, want %d", when, tag, n, i, cs[i], cnt)
				}
				if cnt > 0 && math.Abs(bs[i].V-sum) > 1e-6*max(1, math.Abs(sum)) {
					t.Fatalf("%s: %s: %d buckets: bucket %d sums %v, want %v", when, tag, n, i, bs[i].V, sum)
				}
			}
		}
	}
}

func firstDiff(got, want []model.Sample) any {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return [2]model.Sample{got[i], want[i]}
		}
	}
	return "one is a prefix of the other"
}

// TestBulkModel runs random bulk transactions against a naive model of
// what was committed: tags loaded in time order a few days at a time (as
// an import of many tags is), with late, repeated and out-of-order
// samples, decimal and full-precision values and every quality, so that
// the private heads seal blocks (of 512 samples with few tags, 128 with
// many), cross midnight, spill and are merged with what the days hold.
// Some transactions are rolled back after they spilled, or fail on a bad
// point: none of their samples may show. The store must answer as the
// model after every transaction, and after it is closed and opened again.
func TestBulkModel(t *testing.T) {
	t.Run("few tags", func(t *testing.T) {
		rounds := 40
		if testing.Short() {
			rounds = 12
		}
		testBulkModel(t, testOptions(), rounds, 1, 160, 400)
	})
	t.Run("many tags", func(t *testing.T) {
		o := testOptions()
		o.HeadMaxSamples = 1 << 15 // tails of 128 samples fit
		testBulkModel(t, o, 4, bulkWideSeries+1, 300, 300)
	})
}

func testBulkModel(t *testing.T, o Options, rounds, minTags, moreTags, maxSteps int) {
	dir := t.TempDir()
	db, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 22))
	m := bulkModel{}
	t0 := int64(20_000)*partitionMs + 1_000*60_000 // minute 1,000 of a day
	from, to := t0-2*partitionMs, t0+6*partitionMs
	next := make(map[string]int64) // each tag's next minute in time order
	for round := range rounds {
		tags := minTags + rng.IntN(moreTags)
		steps := 1 + rng.IntN(maxSteps)
		var pts []model.Point
		for s := range steps {
			for i := range tags {
				tag := "m" + strconv.Itoa(i)
				k := next[tag] + int64(s)
				switch r := rng.IntN(100); {
				case r < 3:
					k -= int64(rng.IntN(600)) // late, maybe into committed data
				case r < 5:
					k = int64(rng.IntN(8 * 1440)) // anywhere
				}
				p := model.Point{Tag: tag, T: t0 + k*60_000, V: float64(rng.IntN(20_000)-10_000) / 100}
				if rng.IntN(20) == 0 {
					p.V = rng.NormFloat64() * 1e6
				}
				if rng.IntN(30) == 0 {
					p.Q = model.Quality(rng.IntN(3))
				}
				if p.T >= from && p.T < to {
					pts = append(pts, p)
				}
			}
		}
		if rng.IntN(4) == 0 {
			rng.Shuffle(len(pts), func(i, j int) { pts[i], pts[j] = pts[j], pts[i] })
		}
		outcome := rng.IntN(10) // 0: rolled back, 1: a bad point, else committed
		bad := -1
		if outcome == 1 && len(pts) > 0 {
			bad = rng.IntN(len(pts))
			pts[bad].V = math.NaN()
		}
		tx := db.Begin()
		failed := false
		for rest := pts; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(3000))
			if err := tx.Add(rest[:n]); err != nil {
				if bad < 0 {
					t.Fatalf("round %d: add: %v", round, err)
				}
				failed = true
				break
			}
			rest = rest[n:]
		}
		switch {
		case failed:
			tx.Rollback()
		case outcome == 0:
			tx.Rollback()
		default:
			if err := tx.Commit(context.Background()); err != nil {
				t.Fatalf("round %d: commit: %v", round, err)
			}
			m.add(pts)
			for i := range tags {
				next["m"+strconv.Itoa(i)] += int64(steps)
			}
		}
		m.check(t, db, "round "+strconv.Itoa(round), from, to)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, o); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m.check(t, db, "after reopening", from, to)
}

// TestBulkCrashMidway copies the store's directory while a bulk load has
// spilled private runs, as a crash would leave it: the copy opens without
// any sample of the load and without its runs, and the load then commits
// in the original.
func TestBulkCrashMidway(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	db, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := int64(20_000)*partitionMs + 1_300*60_000
	var before []model.Point
	for i := range 40 {
		before = append(before, model.Point{Tag: "c" + strconv.Itoa(i), T: t0 - 60_000, V: 1})
	}
	if err := db.Write(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	tx := db.Begin()
	var pts []model.Point
	for s := range 600 {
		for i := range 40 {
			// Full-precision values: 9 bytes a sample sealed, so that the
			// sealed blocks spill.
			pts = append(pts, model.Point{Tag: "c" + strconv.Itoa(i), T: t0 + int64(s)*60_000, V: math.Sqrt(float64(s*40 + i))})
		}
	}
	for k := 0; k < len(pts); k += 1000 {
		if err := tx.Add(pts[k:min(k+1000, len(pts))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.wait(); err != nil {
		t.Fatal(err)
	}
	if len(tx.runs) == 0 {
		t.Fatal("no private run written: the test needs a spill")
	}
	crash := t.TempDir()
	copyTree(t, dir, crash)
	c, err := Open(crash, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		got, err := c.Raw("c"+strconv.Itoa(i), t0-partitionMs, t0+partitionMs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("after the crash: c%d holds %d samples, want the 1 written before the load", i, len(got))
		}
	}
	runs, _ := os.ReadDir(filepath.Join(crash, "runs"))
	listed := 0
	c.mu.RLock()
	for _, rs := range c.parts {
		listed += len(rs)
	}
	c.mu.RUnlock()
	if len(runs) != listed {
		t.Errorf("after the crash: %d files in runs/, %d runs listed: the private runs were kept", len(runs), listed)
	}
	c.Close()
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := bulkModel{}
	want.add(before)
	want.add(pts)
	want.check(t, db, "after the commit", t0-partitionMs, t0+2*partitionMs)
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
