package store

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// importDayRuns writes the runs a bulk import in time order leaves in one
// day: tags at one value a minute, a run every perRun minutes (200 as
// `pith bench scale` posts 100,000 tags, 48 as the bulk path spills
// them), so that the runs meet inside 3-hour cells. It returns them
// oldest first.
func importDayRuns(tb testing.TB, db *DB, p int64, tags, perRun int) []*runFile {
	tb.Helper()
	var runs []*runFile
	for m0 := 0; m0 < 1440; m0 += perRun {
		series := make([]runInput, tags)
		for id := range series {
			in := &series[id]
			in.id = uint32(id)
			for m := m0; m < min(m0+perRun, 1440); m++ {
				in.ts = append(in.ts, p*partitionMs+int64(m)*60_000)
				in.vs = append(in.vs, float64((id*7+m)%977)/10)
				in.qs = append(in.qs, model.QualityGood)
			}
		}
		runs = append(runs, writeTestRun(tb, db, p, series))
	}
	return runs
}

// BenchmarkMergeDay merges the runs a bulk import leaves in a day of
// tags at one value a minute (8 of 200 minutes, whose chunks are copied,
// or 30 of 48, whose chunks are too small to copy) into one, as the merge
// loop does once the day is quiet:
//
//	go test -run '^$' -bench MergeDay -count 5 ./internal/store
func BenchmarkMergeDay(b *testing.B) {
	for _, perRun := range []int{48, 200} {
		const tags = 10_000
		b.Run(strconv.Itoa(perRun)+"min", func(b *testing.B) {
			db := openHeadDB(b)
			defer db.Close()
			p := int64(20_000)
			runs := importDayRuns(b, db, p, tags, perRun)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m, err := db.mergeRuns(p, runs, false, nil)
				if err != nil {
					b.Fatal(err)
				}
				m.close()
				db.fs.Remove(m.path)
			}
			b.ReportMetric(float64(tags*1440*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// writeTestRun writes series (ids increasing) as one run of day p and
// opens it.
func writeTestRun(tb testing.TB, db *DB, p int64, series []runInput) *runFile {
	tb.Helper()
	rw, err := createRun(db.fs, filepath.Join(db.dir, "runs"), p, db.allocSeq(), false)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range series {
		rw.add(&series[i], false)
	}
	path, err := rw.finish(false)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := db.openWritten(rw, path)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestMergeCopyModel merges days of disjoint runs, which copies their
// large chunks as they are, and checks every series of the merge against
// a run written from all its samples at once: the same samples, totals
// and cells at every tier (sums equal for decimal data, within rounding
// for full floats), whatever the rate, the decimals, the qualities, where
// the runs meet (inside cells or not) and in which order they were
// written. It also checks that chunks were copied, not all encoded again.
func TestMergeCopyModel(t *testing.T) {
	db := openHeadDB(t)
	defer db.Close()
	p := int64(20_000)
	day := p * partitionMs
	copiedSeries := 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 11))
		const nSeries = 4
		whole := make([]runInput, nSeries)
		decimal := make([]bool, nSeries)
		for k := range whole {
			in := &whole[k]
			in.id = uint32(k + 1)
			step := []int64{100, 1000, 10_000, 60_000}[rng.IntN(4)]
			jitter := rng.IntN(2) == 0
			dec := rng.IntN(4) // decimals, 3: full floats
			decimal[k] = dec < 3
			n := min(int(partitionMs/step)-2, 200+rng.IntN(20_000))
			t0 := day + rng.Int64N(partitionMs-int64(n+1)*step)
			q := model.QualityGood
			for i := 0; i < n; i++ {
				ts := t0 + int64(i)*step
				if jitter && i > 0 {
					ts += rng.Int64N(step / 2)
				}
				v := 20 + 5*math.Sin(float64(i)/50) + rng.Float64()
				if dec < 3 {
					v = math.Round(v*math.Pow10(dec)) / math.Pow10(dec)
				}
				if rng.IntN(500) == 0 {
					q = model.Quality(rng.IntN(3))
				}
				in.ts, in.vs, in.qs = append(in.ts, ts), append(in.vs, v), append(in.qs, q)
			}
		}
		// Cut each series into pieces, one per run, at random places
		// (some pieces small enough to be encoded again).
		nRuns := 2 + rng.IntN(6)
		runsIn := make([][]runInput, nRuns)
		for k := range whole {
			in := &whole[k]
			cuts := []int{0, len(in.ts)}
			for range nRuns - 1 {
				cuts = append(cuts, rng.IntN(len(in.ts)))
			}
			slices.Sort(cuts)
			for r := 0; r < nRuns; r++ {
				a, b := cuts[r], cuts[r+1]
				if a == b {
					continue
				}
				// Runs are written in a shuffled time order: a backfill of
				// a morning after the afternoon.
				runsIn[(r+int(seed))%nRuns] = append(runsIn[(r+int(seed))%nRuns], runInput{id: in.id, ts: in.ts[a:b], vs: in.vs[a:b], qs: in.qs[a:b]})
			}
		}
		var runs []*runFile
		for _, series := range runsIn {
			if len(series) > 0 {
				runs = append(runs, writeTestRun(t, db, p, series))
			}
		}
		if seed%2 == 1 {
			// The merge then walks the indexes as bytes (indexCursor),
			// as it does a bulk load's runs.
			for _, r := range runs {
				r.dropIndex()
			}
		}
		got, err := db.mergeRuns(p, runs, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := writeTestRun(t, db, p, whole)
		for k := range whole {
			gs, ws := got.find(whole[k].id), want.find(whole[k].id)
			where := "seed " + strconv.Itoa(int(seed)) + " series " + strconv.Itoa(k+1)
			compareMergedSeries(t, where, got, gs, want, ws, decimal[k])
			if len(gs.chunks) != len(ws.chunks) {
				copiedSeries++
			}
		}
		for _, r := range append(runs, got, want) {
			r.close()
			db.fs.Remove(r.path)
		}
	}
	if copiedSeries == 0 {
		t.Fatal("no merge copied chunks: the model did not test copySeries")
	}
	t.Logf("%d series merged with copied chunks", copiedSeries)
}

// compareMergedSeries checks series gs of merged run got against ws of a
// run written from the same samples at once; with exact (decimal data)
// sums must be equal too, else within rounding.
func compareMergedSeries(t *testing.T, where string, got *runFile, gs *runSeries, want *runFile, ws *runSeries, exact bool) {
	t.Helper()
	sumOK := func(a, b float64) bool {
		return a == b || !exact && math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
	}
	if gs.n != ws.n || gs.minT != ws.minT || gs.maxT != ws.maxT || gs.fine != ws.fine ||
		gs.lastV != ws.lastV || gs.lastQ != ws.lastQ || gs.min != ws.min || gs.max != ws.max || gs.first != ws.first || !sumOK(gs.sum, ws.sum) {
		t.Fatalf("%s: index entry %+v, want %+v", where, *gs, *ws)
	}
	var a, b runInput
	if err := got.readAll(gs, &a); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := want.readAll(ws, &b); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.ts, b.ts) || !slices.Equal(a.qs, b.qs) || len(a.vs) != len(b.vs) {
		t.Fatalf("%s: merged samples differ", where)
	}
	for i := range a.vs {
		if math.Float64bits(a.vs[i]) != math.Float64bits(b.vs[i]) {
			t.Fatalf("%s: sample %d is %v, want %v", where, i, a.vs[i], b.vs[i])
		}
	}
	if ws.fine == noTier {
		return
	}
	for l := int(ws.fine); l < numTiers; l++ {
		gc, err := got.decodeTier(gs, l)
		if err != nil {
			t.Fatalf("%s: tier %d: %v", where, l, err)
		}
		wc, _ := want.decodeTier(ws, l)
		if len(gc) != len(wc) {
			t.Fatalf("%s: tier %d has %d cells, want %d", where, l, len(gc), len(wc))
		}
		for i := range gc {
			g, w := gc[i], wc[i]
			if g.start != w.start || g.n != w.n || g.min != w.min || g.max != w.max || g.first != w.first || g.last != w.last || !sumOK(g.sum, w.sum) {
				t.Fatalf("%s: tier %d cell %d is %+v, want %+v", where, l, i, g, w)
			}
		}
	}
}
