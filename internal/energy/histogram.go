package energy

import (
	"fmt"
	"math"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// Histogram is the time a tag spent in each band of its value.
type Histogram struct {
	From, To int64
	Res      int64     // slot width in ms (the time resolution)
	Edges    []float64 // len(Ms)+1 band edges, lowest first
	Ms       []int64   // time in each band, ms
	NoData   int64     // time in slots holding no sample, ms
	Exact    int       // slots answered from the rollups alone
	Split    int       // slots split by their raw samples
}

// HistogramOptions shape a histogram. Zero Lo and Hi take the period's
// minimum and maximum.
type HistogramOptions struct {
	Bins   int
	Lo, Hi float64
	Range  bool  // Lo and Hi are set
	Res    int64 // slot width in ms; 0 picks the finest rollup tier giving at most DefaultSlots slots
}

// MaxSlots bounds the slots of one histogram.
const MaxSlots = 200_000

// DefaultSlots bounds the slots of the default resolution: the finest
// rollup tier giving fewer slots. A year is cut into 30-minute slots,
// 17,520 rollup cells per aggregate read, which a small board reads in
// tens of milliseconds; a finer res= asks for more.
const DefaultSlots = 20_000

// slotWidths are the rollup tiers' cell widths: slots of these widths
// answer from whole cells.
var slotWidths = [...]int64{10_000, 60_000, 300_000, 1_800_000, 10_800_000, 86_400_000}

// rawPage bounds the samples read at once when splitting slots.
const rawPage = 100_000

// ComputeHistogram returns how long tag spent in each of o.Bins equal bands
// over [from, to). The period is cut into slots of o.Res: a slot whose
// samples all fall in one band counts whole in it, read from the rollups
// (its minimum and maximum); a slot whose samples straddle bands is split
// by its raw samples, each holding its value until the next one, the first
// also covering the slot's start; a slot without samples is NoData.
func ComputeHistogram(q Queries, tag string, from, to int64, o HistogramOptions) (*Histogram, error) {
	if to <= from {
		return nil, fmt.Errorf("to must be greater than from")
	}
	if o.Bins < 1 || o.Bins > 1000 {
		return nil, fmt.Errorf("bins must be from 1 to 1000, got %d", o.Bins)
	}
	span := to - from
	res := o.Res
	if res == 0 {
		res = slotWidths[len(slotWidths)-1]
		for _, w := range slotWidths {
			if span/w < DefaultSlots { // one more slot when from is not on a multiple of w
				res = w
				break
			}
		}
	}
	if res < 1000 {
		return nil, fmt.Errorf("res must be at least 1000 ms, got %d", res)
	}
	// Slots lie on multiples of res (Unix ms), as rollup cells do, so
	// that a whole slot is whole cells; the first and last are cut by
	// from and to.
	base := floorDiv(from, res) * res
	n := int(ceilDiv(to-base, res))
	if n > MaxSlots {
		return nil, fmt.Errorf("%d slots of %d ms: more than %d, choose a larger res or a shorter period", n, res, MaxSlots)
	}
	edge := func(i int) int64 {
		if i == 0 {
			return from
		}
		return min(to, base+int64(i)*res)
	}
	lo, hi := o.Lo, o.Hi
	if !o.Range {
		mn, err := q.Aggregate(tag, from, to, 1, model.AggMin)
		if err != nil {
			return nil, err
		}
		mx, err := q.Aggregate(tag, from, to, 1, model.AggMax)
		if err != nil {
			return nil, err
		}
		lo, hi = mn[0].V, mx[0].V
	}
	if !(hi > lo) {
		hi = lo + 1
	}
	h := &Histogram{From: from, To: to, Res: res, Edges: make([]float64, o.Bins+1), Ms: make([]int64, o.Bins)}
	for i := range h.Edges {
		h.Edges[i] = lo + (hi-lo)*float64(i)/float64(o.Bins)
	}
	h.Edges[o.Bins] = hi
	bin := func(v float64) int { return binOf(v, lo, hi, o.Bins) }
	mins, maxs, err := slotRange(q, tag, n, edge)
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; {
		a, b := edge(i), edge(i+1)
		if !mins[i].OK {
			h.NoData += b - a
			i++
			continue
		}
		if k := bin(mins[i].V); k == bin(maxs[i].V) {
			h.Ms[k] += b - a
			h.Exact++
			i++
			continue
		}
		// A run of split slots is read in one go.
		j := i + 1
		for j < n && mins[j].OK && bin(mins[j].V) != bin(maxs[j].V) {
			j++
		}
		if err := h.split(q, tag, i, j, edge, bin); err != nil {
			return nil, err
		}
		h.Split += j - i
		i = j
	}
	return h, nil
}

// slotRange returns the minimum and maximum of each of the n slots whose
// edges edge gives: the whole slots between the first and the last in
// one equal-width read of each aggregate, the first and last alone.
func slotRange(q Queries, tag string, n int, edge func(int) int64) (mins, maxs []store.Bucket, err error) {
	mins, maxs = make([]store.Bucket, 0, n), make([]store.Bucket, 0, n)
	read := func(i, j int) error { // slots [i, j) of equal width
		a, err := q.Aggregate(tag, edge(i), edge(j), j-i, model.AggMin)
		if err != nil {
			return err
		}
		b, err := q.Aggregate(tag, edge(i), edge(j), j-i, model.AggMax)
		if err != nil {
			return err
		}
		mins, maxs = append(mins, a...), append(maxs, b...)
		return nil
	}
	if err := read(0, 1); err != nil || n == 1 {
		return mins, maxs, err
	}
	if n > 2 {
		if err := read(1, n-1); err != nil {
			return nil, nil, err
		}
	}
	return mins, maxs, read(n-1, n)
}

// floorDiv is a / b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// split adds slots [i, j) from their raw samples.
func (h *Histogram) split(q Queries, tag string, i, j int, edge func(int) int64, bin func(float64) int) error {
	slot := i
	a, b := edge(slot), edge(slot+1)
	held, has := 0, false // band of the sample holding at the cursor
	cur := a
	from, to := a, edge(j)
	for from < to {
		smp, err := q.Raw(tag, from, to, rawPage)
		if err != nil {
			return err
		}
		for _, s := range smp {
			for s.T >= b { // close the slots before this sample
				h.Ms[held] += b - cur
				slot++
				a, b = edge(slot), edge(slot+1)
				cur, has = a, false
			}
			if !has {
				// The first sample of a slot also covers its start.
				held, has = bin(s.V), true
				continue
			}
			h.Ms[held] += s.T - cur
			held, cur = bin(s.V), s.T
		}
		if len(smp) < rawPage {
			break
		}
		from = smp[len(smp)-1].T + 1
	}
	for slot < j {
		h.Ms[held] += b - cur
		slot++
		a, b = edge(slot), edge(slot+1)
		cur = a
	}
	return nil
}

// binOf returns the band of v among bins equal bands from lo to hi; values
// below lo count in the first band, values at or above hi in the last.
func binOf(v, lo, hi float64, bins int) int {
	k := int(math.Floor((v - lo) / (hi - lo) * float64(bins)))
	return max(0, min(k, bins-1))
}
