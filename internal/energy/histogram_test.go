package energy

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// naiveHistogram is the model: every slot (on multiples of res, the first
// and last cut by from and to) from its raw samples alone.
func naiveHistogram(pts []model.Point, from, to, res int64, vlo, vhi float64, bins int) (ms []int64, noData int64) {
	ms = make([]int64, bins)
	base := from / res * res // from > 0 in these tests
	n := int(ceilDiv(to-base, res))
	edge := func(i int) int64 {
		if i == 0 {
			return from
		}
		return min(to, base+int64(i)*res)
	}
	for i := 0; i < n; i++ {
		a, b := edge(i), edge(i+1)
		lo := sort.Search(len(pts), func(k int) bool { return pts[k].T >= a })
		hi := sort.Search(len(pts), func(k int) bool { return pts[k].T >= b })
		in := pts[lo:hi]
		if len(in) == 0 {
			noData += b - a
			continue
		}
		for j, p := range in {
			start, end := p.T, b
			if j == 0 {
				start = a
			}
			if j+1 < len(in) {
				end = in[j+1].T
			}
			ms[binOf(p.V, vlo, vhi, bins)] += end - start
		}
	}
	return ms, noData
}

// TestHistogramAgainstModel checks the rollup-and-raw histogram against
// the slot-by-slot model: a slowly moving value (most slots whole from the
// rollups) and a noisy one (most slots split).
func TestHistogramAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const day = 24 * hourMs
	from, to := int64(1_780_000_000_000), int64(1_780_000_000_000+3*day)
	v := 50.0
	slow := series("boiler.load", from, to, 5_000, rng, func(int, int64) float64 {
		v += rng.NormFloat64() * 0.3
		return v
	})
	noisy := series("noise", from, to, 7_000, rng, func(int, int64) float64 { return rng.Float64() * 100 })
	db := openStore(t, append(slow, noisy...))
	for _, tc := range []struct {
		tag    string
		pts    []model.Point
		res    int64
		lo, hi float64
		bins   int
	}{
		{"boiler.load", slow, 60_000, 0, 100, 10},
		{"boiler.load", slow, 0, 0, 100, 20},
		{"noise", noisy, 300_000, 0, 100, 4},
		{"noise", noisy, 10_000, 20, 80, 3},
		{"boiler.load", slow, 7 * 60_000, 0, 100, 10}, // slots of no rollup tier
	} {
		h, err := ComputeHistogram(db, tc.tag, from, to, HistogramOptions{Bins: tc.bins, Lo: tc.lo, Hi: tc.hi, Range: true, Res: tc.res})
		if err != nil {
			t.Fatal(err)
		}
		ms, noData := naiveHistogram(tc.pts, from, to, h.Res, tc.lo, tc.hi, tc.bins)
		var total int64
		for i := range ms {
			if h.Ms[i] != ms[i] {
				t.Errorf("%s res %d bin %d: %d ms, want %d", tc.tag, h.Res, i, h.Ms[i], ms[i])
			}
			total += h.Ms[i]
		}
		if h.NoData != noData || total+h.NoData != to-from {
			t.Errorf("%s: no data %d (want %d), total %d of %d", tc.tag, h.NoData, noData, total+h.NoData, to-from)
		}
		t.Logf("%s res %d: %d slots from rollups, %d split", tc.tag, h.Res, h.Exact, h.Split)
	}
}

// BenchmarkHistogramYear is the histogram widget's read: a year of a
// value stepping every hour, one sample a minute, 10 bins, the default
// resolution, the period ending at an instant not on a slot edge (as a
// browser's Date.now()). Run: go test -run x -bench HistogramYear ./internal/energy
func BenchmarkHistogramYear(b *testing.B) {
	const minute = 60_000
	to := int64(1_780_000_000_000) + 12_345
	from := to - 365*24*hourMs
	var pts []model.Point
	for ts := from / minute * minute; ts < to; ts += minute {
		pts = append(pts, model.Point{Tag: "room.temp", T: ts, V: 18 + float64((ts/hourMs)%24)/4})
	}
	db := openStore(b, pts)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := ComputeHistogram(db, "room.temp", from, to, HistogramOptions{Bins: 10})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(h.Split), "split_slots")
	}
}
