package store

import (
	"context"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/model"
	"io"
	"log/slog"
	"math"
	"math/rand"
	"sort"
	"sync/atomic"
	"testing"
	"time"
)

// bulkLoad writes pts in one transaction, batch points at a time, as an
// import does.
func bulkLoad(tb testing.TB, db *DB, pts []model.Point, batch int) {
	tb.Helper()
	tx := db.Begin()
	for k := 0; k < len(pts); k += batch {
		if err := tx.Add(pts[k:min(k+batch, len(pts))]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// model is the naive reference: every tag's samples in a map, last write wins.
type naive map[string]map[int64]model.Sample

func (m naive) write(pts []model.Point) {
	for _, p := range pts {
		if m[p.Tag] == nil {
			m[p.Tag] = make(map[int64]model.Sample)
		}
		m[p.Tag][p.T] = model.Sample{T: p.T, V: p.V, Q: p.Q}
	}
}

// sameRaw checks that db holds exactly m's samples of each tag.
func sameRaw(t *testing.T, db *DB, m naive, tags ...string) {
	t.Helper()
	for _, tag := range tags {
		got, err := db.Raw(tag, 0, 1<<62, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := m.sorted(tag)
		if len(got) != len(want) {
			t.Fatalf("%s: %d samples, want %d", tag, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s sample %d: got %+v, want %+v", tag, i, got[i], want[i])
			}
		}
	}
}

func (m naive) sorted(tag string) []model.Sample {
	var out []model.Sample
	for _, s := range m[tag] {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// aggregate computes buckets by scanning, as the API contract defines them.
func (m naive) aggregate(tag string, from, to int64, n int, agg model.Agg) []Bucket {
	out := make([]Bucket, n)
	accs := make([]acc, n)
	bb := newBounds(from, to, n)
	for _, s := range m.sorted(tag) {
		if s.T < from || s.T >= to {
			continue
		}
		// The definition: from + i*w <= t < from + (i+1)*w with real w.
		i := int(float64(s.T-from) * float64(n) / float64(to-from))
		for i > 0 && float64(s.T-from)*float64(n) < float64(i)*float64(to-from) {
			i--
		}
		for i < n-1 && float64(s.T-from)*float64(n) >= float64(i+1)*float64(to-from) {
			i++
		}
		accs[i].addSample(s.T, s.V)
	}
	for i := range out {
		out[i].T = bb.start(i)
		out[i].V, out[i].OK = accs[i].value(agg)
	}
	return out
}

// checkAggregate compares the store's answer to the model's, bucket by
// bucket; where says which query it was.
func checkAggregate(t *testing.T, db *DB, m naive, tag string, from, to int64, n int, agg model.Agg, where string) {
	t.Helper()
	got, err := db.Aggregate(tag, from, to, n, agg)
	if err != nil {
		t.Fatal(err)
	}
	want := m.aggregate(tag, from, to, n, agg)
	for i := range want {
		if got[i].T != want[i].T || got[i].OK != want[i].OK || (want[i].OK && !close1(got[i].V, want[i].V)) {
			t.Fatalf("%s: %s %s [%d,%d) n=%d bucket %d: got %+v want %+v", where, tag, agg, from, to, n, i, got[i], want[i])
		}
	}
}

func testOptions() Options {
	o := DefaultOptions()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.HeadMaxSamples = 700
	o.MaxRunsPerPart = 3
	o.BulkPoints = 150
	o.Durability = DurabilityRelaxed
	return o
}

func close1(a, b float64) bool {
	if a == b {
		return true
	}
	// Sums that cancel to zero keep a rounding residue: the test values
	// are hundredths, so an absolute floor of 1e-9 still tells them apart.
	return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b), 1)
}

// TestStoreMatchesModel writes random late, duplicate and out-of-order data
// across several days, flushing and reopening at random, and checks every
// aggregate over random windows and bucket counts against the naive model.
// Seeds 5 and 6 write live data only, dense and in order, so the runs of a
// day are disjoint and queries answer from their rollups.
func TestStoreMatchesModel(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testAgainstModel(t, seed, seed > 4) })
	}
}

func testAgainstModel(t *testing.T, seed int64, live bool) {
	rnd := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	db, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	m := naive{}
	tags := []string{"a.x", "b.y", "c.z"}
	const day = partitionMs
	t0 := int64(1_700_000_000_000)
	clock := t0
	for step := 0; step < 60; step++ {
		var pts []model.Point
		n := 1 + rnd.Intn(400)
		for i := 0; i < n; i++ {
			var ts int64
			switch r := rnd.Intn(10); {
			case live: // in order, ~70 ms apart
				clock += int64(20 + rnd.Intn(100))
				ts = clock
			case r < 6: // in order, ~1 s apart
				clock += int64(500 + rnd.Intn(1000))
				ts = clock
			case r < 8: // late, up to 3 days back
				ts = clock - rnd.Int63n(3*day)
			default: // a repeat of a recent timestamp
				ts = clock - int64(rnd.Intn(5))*1000
			}
			v := math.Round(rnd.NormFloat64()*1000) / 100
			pts = append(pts, model.Point{Tag: tags[rnd.Intn(len(tags))], T: ts, V: v, Q: model.Quality(rnd.Intn(3))})
		}
		switch rnd.Intn(4) {
		case 0: // a streamed transaction, in pieces
			tx := db.Begin()
			for len(pts) > 0 {
				k := 1 + rnd.Intn(len(pts))
				if err := tx.Add(pts[:k]); err != nil {
					t.Fatal(err)
				}
				m.write(pts[:k])
				pts = pts[k:]
			}
			if err := tx.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
		case 1: // a transaction rolled back: nothing of it may show
			tx := db.Begin()
			if err := tx.Add(pts); err != nil {
				t.Fatal(err)
			}
			tx.Rollback()
		default:
			if err := db.Write(context.Background(), pts); err != nil {
				t.Fatal(err)
			}
			m.write(pts)
		}
		switch rnd.Intn(8) {
		case 0:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(dir, testOptions()); err != nil {
				t.Fatal(err)
			}
		}
		lo := t0 - 3*day
		if live {
			lo = t0
		}
		checkModel(t, rnd, db, m, tags, lo, clock+1000)
	}
}

func checkModel(t *testing.T, rnd *rand.Rand, db *DB, m naive, tags []string, lo, hi int64) {
	t.Helper()
	for k := 0; k < 6; k++ {
		tag := tags[rnd.Intn(len(tags))]
		if len(m[tag]) == 0 {
			continue
		}
		from := lo + rnd.Int63n(hi-lo)
		to := from + 1 + rnd.Int63n(hi-from)
		n := 1 + rnd.Intn(300)
		switch rnd.Intn(4) {
		case 0:
			from, to = lo, hi
		case 1: // a dashboard's window: on whole minutes, a minute a bucket
			from = max(lo, floorTo(from, 60_000))
			to = from + 60_000*(1+rnd.Int63n(30))
			n = int((to - from) / 60_000)
		}
		checkAggregate(t, db, m, tag, from, to, n, model.Agg(rnd.Intn(int(model.AggRaw))), "query")
		raw, err := db.Raw(tag, from, to, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wantRaw []model.Sample
		for _, s := range m.sorted(tag) {
			if s.T >= from && s.T < to {
				wantRaw = append(wantRaw, s)
			}
		}
		if len(raw) != len(wantRaw) {
			t.Fatalf("raw %s [%d,%d): %d samples, want %d", tag, from, to, len(raw), len(wantRaw))
		}
		for i := range raw {
			if raw[i] != wantRaw[i] {
				t.Fatalf("raw %s sample %d: got %+v want %+v", tag, i, raw[i], wantRaw[i])
			}
		}
	}
	for _, tag := range tags {
		s := m.sorted(tag)
		if len(s) == 0 {
			continue
		}
		l, err := db.Latest(tag)
		if err != nil {
			t.Fatal(err)
		}
		if l[0].Sample != s[len(s)-1] {
			t.Fatalf("latest %s: got %+v want %+v", tag, l[0].Sample, s[len(s)-1])
		}
	}
}

func TestUnknownTag(t *testing.T) {
	db, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Aggregate("nope", 0, 10, 1, model.AggMean); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("got %v, want ErrUnknownTag", err)
	}
}

// TestAggregateRunsShareCell keeps two runs of one day whose samples meet
// inside one rollup cell: the earlier run lies whole in the bucket, the
// later one answers from that cell. First and last must come from the
// samples' times, not from the cell's start, which lies before the
// earlier run's end.
func TestAggregateRunsShareCell(t *testing.T) {
	o := testOptions()
	o.MaxRunsPerPart = 100
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	day := int64(20_000) * partitionMs
	m := naive{}
	write := func(from, to, step int64, v float64) {
		var pts []model.Point
		for ms := from; ms < to; ms += step {
			pts = append(pts, model.Point{Tag: "a.b", T: day + ms, V: v + float64(ms)/1e6})
		}
		if err := db.Write(t.Context(), pts); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		m.write(pts)
	}
	write(804_000, 806_001, 500, 1)   // wholly in the bucket
	write(807_000, 950_000, 100, 100) // from the same 10 s cell on, with tiers
	if n := len(db.parts[20_000]); n != 2 {
		t.Fatalf("%d runs in the day, want 2", n)
	}
	for _, hi := range []int64{810_000, 840_000, 900_000} {
		for _, agg := range []model.Agg{model.AggFirst, model.AggLast, model.AggCount, model.AggMin} {
			got, err := db.Aggregate("a.b", day, day+hi, 1, agg)
			if err != nil {
				t.Fatal(err)
			}
			want := m.aggregate("a.b", day, day+hi, 1, agg)
			if got[0].OK != want[0].OK || got[0].V != want[0].V {
				t.Errorf("%s to %d: got %+v, want %+v", agg, hi, got[0], want[0])
			}
		}
	}
}

// TestRetention drops raw days past retention_raw (their rollups still
// answer), removes days past retention_rollups, and refuses writes older
// than the raw horizon.
func TestRetention(t *testing.T) {
	day := int64(partitionMs)
	// The store's maintenance goroutine reads the clock too.
	var now atomic.Int64
	now.Store(100 * day)
	o := testOptions()
	o.Now = func() time.Time { return time.UnixMilli(now.Load()) }
	o.RetentionRaw = 10 * 24 * time.Hour
	o.RetentionRollups = 30 * 24 * time.Hour
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pts []model.Point
	for d := int64(95); d < 100; d++ {
		// From 7 s into the day: the first cell starts before the first sample.
		for s := int64(7); s < 86400; s += 10 {
			pts = append(pts, model.Point{Tag: "x", T: d*day + s*1000, V: float64(s % 100)})
		}
	}
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	before, _ := db.Aggregate("x", 95*day, 100*day, 5, model.AggMean)
	// Twenty days later: days 95..99 are past raw retention, not rollups.
	now.Store(120 * day)
	if err := db.enforceRetention(); err != nil {
		t.Fatal(err)
	}
	after, _ := db.Aggregate("x", 95*day, 100*day, 5, model.AggMean)
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("day %d: mean %v after raw retention, want %v", i, after[i], before[i])
		}
	}
	if raw, _ := db.Raw("x", 95*day, 100*day, 0); len(raw) != 0 {
		t.Fatalf("%d raw samples kept past retention", len(raw))
	}
	// Without raw samples a finest cell (30 minutes here) counts whole in
	// the bucket holding its start, also where bucket edges cut a day.
	from, to := 95*day+1_234_567, 100*day-777
	for _, n := range []int{7, 13, 1000} {
		bb := newBounds(from, to, n)
		want := make([]acc, n)
		for _, p := range pts {
			if cs := floorTo(p.T, tierWidth[3]); cs >= from && cs < to {
				want[bb.index(cs)].addSample(p.T, p.V)
			}
		}
		for _, agg := range []model.Agg{model.AggCount, model.AggSum} {
			got, _ := db.Aggregate("x", from, to, n, agg)
			for i := range got {
				w, ok := want[i].value(agg)
				if got[i].OK != ok || ok && !close1(got[i].V, w) {
					t.Fatalf("%s of %d buckets, bucket %d: got %+v, want %v", agg, n, i, got[i], w)
				}
			}
		}
	}
	err = db.Write(context.Background(), []model.Point{{Tag: "x", T: 105 * day, V: 1}})
	if !errors.Is(err, ErrTooOld) {
		t.Fatalf("write past retention: got %v, want ErrTooOld", err)
	}
	now.Store(140 * day)
	if err := db.enforceRetention(); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Aggregate("x", 95*day, 100*day, 1, model.AggCount); got[0].OK {
		t.Fatalf("count %v past rollup retention, want none", got[0].V)
	}
}
