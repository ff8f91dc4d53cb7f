package store

import (
	"math"
	"slices"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/chunkenc"
)

// Rollup tiers: cell widths in ms, each dividing the next and the day, so a
// day partition is tiled exactly by the cells of every tier. A run keeps, per
// series, the tiers from the finest one whose cells hold about
// minCellSamples samples up to the coarsest; the whole day is the series'
// total in the run index. See docs/format/store.md.
var tierWidth = [...]int64{10_000, 60_000, 300_000, 1_800_000, 10_800_000}

const (
	numTiers       = len(tierWidth)
	partitionMs    = 86_400_000 // one UTC day
	minCellSamples = 64         // finest tier: cells hold at least this many samples on average
	maxChunk       = 1024       // samples per raw chunk at most
	chunkTarget    = 600        // a chunk takes whole finest cells up to this many samples
	noTier         = 0xff       // a sparse series keeps no tiers: its raw data is small
)

// partitionOf returns the day partition holding t.
func partitionOf(t int64) int64 {
	p := t / partitionMs
	if t < 0 && t%partitionMs != 0 {
		p--
	}
	return p
}

// floorTo rounds t down to a multiple of w (w > 0), also for negative t.
func floorTo(t, w int64) int64 {
	r := t % w
	if r < 0 {
		r += w
	}
	return t - r
}

// finestTier picks the first tier whose cells hold minCellSamples samples on
// average, or noTier when even the coarsest would hold fewer.
func finestTier(n int, minT, maxT int64) uint8 {
	if n < 2 {
		return noTier
	}
	interval := float64(maxT-minT) / float64(n-1)
	for i, w := range tierWidth {
		if float64(w) >= minCellSamples*interval {
			return uint8(i)
		}
	}
	return noTier
}

// acc accumulates the aggregates of disjoint pieces of a series. Pieces are
// ordered for first/last by a key no later than their first sample and no
// earlier than the samples of any piece before them (a sample's time, a
// cell's start, or for a run's first cell the run's first time): exact,
// because pieces never overlap.
type acc struct {
	n           int64
	sum         float64
	min, max    float64
	firstK      int64
	lastK       int64
	first, last float64
}

func (a *acc) addSample(t int64, v float64) {
	if a.n == 0 {
		a.n, a.sum, a.min, a.max = 1, v, v, v
		a.firstK, a.lastK, a.first, a.last = t, t, v, v
		return
	}
	a.n++
	a.sum += v
	if v < a.min {
		a.min = v
	}
	if v > a.max {
		a.max = v
	}
	if t < a.firstK {
		a.firstK, a.first = t, v
	}
	if t >= a.lastK {
		a.lastK, a.last = t, v
	}
}

// merge adds a piece whose samples all lie in an interval containing key.
func (a *acc) merge(b *acc) {
	if a.n > 0 && b.n > 0 {
		// Stored values are finite, so a comparison decides but for
		// equal ones (math.Min tells -0 from 0); math.Min and math.Max,
		// called for every cell a long chart merges, cost more than the
		// rest.
		if b.min <= a.min {
			a.min = math.Min(a.min, b.min)
		}
		if b.max >= a.max {
			a.max = math.Max(a.max, b.max)
		}
	}
	a.mergeSums(b)
}

// mergeSums is merge for mean, sum and count, which leave min and max
// unread: it adds the counts and sums and keeps first and last.
func (a *acc) mergeSums(b *acc) {
	if b.n == 0 {
		return
	}
	if a.n == 0 {
		*a = *b
		return
	}
	a.n += b.n
	a.sum += b.sum
	if b.firstK < a.firstK {
		a.firstK, a.first = b.firstK, b.first
	}
	if b.lastK >= a.lastK {
		a.lastK, a.last = b.lastK, b.last
	}
}

// value returns the aggregate agg of what was accumulated.
func (a *acc) value(agg model.Agg) (float64, bool) {
	if a.n == 0 {
		if agg == model.AggCount || agg == model.AggSum {
			return 0, false
		}
		return 0, false
	}
	switch agg {
	case model.AggMean:
		return a.sum / float64(a.n), true
	case model.AggMin:
		return a.min, true
	case model.AggMax:
		return a.max, true
	case model.AggFirst:
		return a.first, true
	case model.AggLast:
		return a.last, true
	case model.AggSum:
		return a.sum, true
	case model.AggCount:
		return float64(a.n), true
	}
	return 0, false
}

// cell is one rollup entry: the aggregates of a series over [start, start+width).
type cell struct {
	start int64
	acc
}

// tierCells is one decoded tier of one run series.
type tierCells struct {
	width int64
	cells []cell
}

// buildTiers computes the tiers fine..numTiers-1 of sorted samples. Sums of
// decimal data are rounded to the data's decimals so they stay exact and
// compress as well as the samples do.
func buildTiers(fine uint8, ts []int64, vs []float64) [][]cell {
	if fine == noTier {
		return nil
	}
	e, decimal := chunkenc.DecimalExponent(vs)
	w := tierWidth[fine]
	var cur []cell
	for i, t := range ts {
		s := floorTo(t, w)
		if len(cur) == 0 || cur[len(cur)-1].start != s {
			cur = append(cur, cell{start: s})
		}
		cur[len(cur)-1].addSample(t, vs[i])
	}
	return rollUp(fine, cur, e, decimal)
}

// rollUp returns the tiers fine..numTiers-1 from the cells of tier fine
// (which it rounds in place): each coarser tier merges the cells of the
// one below it. With decimal, sums are rounded to e decimals.
func rollUp(fine uint8, cur []cell, e int, decimal bool) [][]cell {
	out := make([][]cell, numTiers)
	for l := int(fine); l < numTiers; l++ {
		if l > int(fine) {
			w := tierWidth[l]
			var up []cell
			for i := range cur {
				s := floorTo(cur[i].start, w)
				if len(up) == 0 || up[len(up)-1].start != s {
					up = append(up, cell{start: s})
				}
				c := cur[i].acc
				c.firstK, c.lastK = cur[i].start, cur[i].start
				up[len(up)-1].merge(&c)
			}
			cur = up
		}
		if decimal {
			for i := range cur {
				cur[i].sum = roundDecimal(cur[i].sum, e)
			}
		}
		out[l] = cur
	}
	return out
}

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// roundDecimal rounds x to e decimals when that is exact in float64.
func roundDecimal(x float64, e int) float64 {
	if e < 0 || e >= len(pow10) {
		return x
	}
	m := x * pow10[e]
	if math.Abs(m) >= 1<<53 {
		return x
	}
	return math.Round(m) / pow10[e]
}

// appendTier encodes cells as columns: start index within the partition,
// count, sum, min, max, first, last.
func appendTier(dst []byte, partStart, width int64, cells []cell, scratchI []int64, scratchF []float64) []byte {
	scratchI = scratchI[:0]
	for i := range cells {
		scratchI = append(scratchI, (cells[i].start-partStart)/width)
	}
	dst = chunkenc.AppendInts(dst, scratchI)
	scratchI = scratchI[:0]
	for i := range cells {
		scratchI = append(scratchI, cells[i].n)
	}
	dst = chunkenc.AppendInts(dst, scratchI)
	for col := 0; col < 5; col++ {
		scratchF = scratchF[:0]
		for i := range cells {
			c := &cells[i]
			scratchF = append(scratchF, [5]float64{c.sum, c.min, c.max, c.first, c.last}[col])
		}
		dst = chunkenc.AppendFloats(dst, scratchF)
	}
	return dst
}

// tierScratch holds the arrays of decoded tiers for a caller that decodes
// many, one at a time: a merge copying chunks decodes the finest tier of
// every series of every run.
type tierScratch struct {
	cells []cell
	ints  []int64
	fl    []float64
}

// decode is the inverse of appendTier for n cells, into the scratch
// arrays: the cells are valid until the next call.
func (sc *tierScratch) decode(src []byte, n int, partStart, width int64) ([]cell, error) {
	ints := slices.Grow(sc.ints[:0], n)
	var err error
	ints, src, err = chunkenc.DecodeInts(ints, src, n)
	sc.ints = ints
	if err != nil {
		return nil, err
	}
	cells := slices.Grow(sc.cells[:0], n)[:n]
	sc.cells = cells
	for i := range cells {
		cells[i].start = partStart + ints[i]*width
		cells[i].firstK, cells[i].lastK = cells[i].start, cells[i].start
	}
	ints, src, err = chunkenc.DecodeInts(ints[:0], src, n)
	if err != nil {
		return nil, err
	}
	for i := range cells {
		cells[i].n = ints[i]
	}
	fl := slices.Grow(sc.fl[:0], n)
	for col := 0; col < 5; col++ {
		fl, src, err = chunkenc.DecodeFloats(fl[:0], src, n)
		sc.fl = fl
		if err != nil {
			return nil, err
		}
		for i := range cells {
			c := &cells[i]
			switch col {
			case 0:
				c.sum = fl[i]
			case 1:
				c.min = fl[i]
			case 2:
				c.max = fl[i]
			case 3:
				c.first = fl[i]
			case 4:
				c.last = fl[i]
			}
		}
	}
	return cells, nil
}
