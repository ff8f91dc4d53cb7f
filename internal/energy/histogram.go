package energy

import (
	"fmt"
	"math"

	"github.com/pith-historian/pith/internal/model"
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
	Res    int64 // slot width in ms; 0 picks the finest rollup tier giving at most MaxSlots slots
}

// MaxSlots bounds the slots of one histogram.
const MaxSlots = 200_000

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
			if span/w <= MaxSlots {
				res = w
				break
			}
		}
	}
	if res < 1000 {
		return nil, fmt.Errorf("res must be at least 1000 ms, got %d", res)
	}
	n := int(ceilDiv(span, res))
	if n > MaxSlots {
		return nil, fmt.Errorf("%d slots of %d ms: more than %d, choose a larger res or a shorter period", n, res, MaxSlots)
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
	mins, err := q.Aggregate(tag, from, to, n, model.AggMin)
	if err != nil {
		return nil, err
	}
	maxs, err := q.Aggregate(tag, from, to, n, model.AggMax)
	if err != nil {
		return nil, err
	}
	edge := func(i int) int64 { return from + ceilDiv(int64(i)*span, int64(n)) }
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
