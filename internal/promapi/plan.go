package promapi

import (
	"github.com/pith-historian/pith/internal/model"
	"github.com/prometheus/prometheus/storage"
)

// A window plan answers the range selector of an *_over_time function
// from the store's rollups instead of its raw samples.
//
// The engine evaluates f(x[r]) at the times t_i = t_0 + i*step and
// reads the samples in (t_i - r, t_i]; the select hints give r (Range),
// step (Step), and Start = t_0 - r + 1, End = t_last (offsets are already
// applied). When the windows do not overlap (step a multiple of r), one
// store.Aggregate call with buckets of width r starting at t_0 - r + 1
// gives every window's aggregate exactly (buckets are [from+k*r,
// from+(k+1)*r), the same integer milliseconds as (t_i - r, t_i]). Each
// window becomes one synthetic sample at t_i carrying its aggregate; f
// over one sample is that sample for avg, min, max, sum and last, and 1
// for present, so the engine's answer equals the one over raw samples.
// count_over_time is rewritten to sum_over_time over series whose values
// are counts (see rewriteCounts).
type windowPlan struct {
	agg   model.Agg
	from  int64 // start of bucket 0
	width int64 // bucket width, the range r
	every int   // buckets per step: window i is bucket i*every
	n     int   // evaluation steps
}

// pushdownAggs maps the functions a window plan can answer to the bucket
// aggregate that answers them.
var pushdownAggs = map[string]model.Agg{
	"avg_over_time":     model.AggMean,
	"min_over_time":     model.AggMin,
	"max_over_time":     model.AggMax,
	"sum_over_time":     model.AggSum,
	"last_over_time":    model.AggLast,
	"present_over_time": model.AggCount,
}

// plan returns the window plan for hints, or nil when the selector must be
// answered from raw samples.
func (q *queryable) plan(h *storage.SelectHints, count bool) *windowPlan {
	if !q.pushdown || h == nil || h.Range <= 0 {
		return nil
	}
	agg, ok := pushdownAggs[h.Func]
	if !ok {
		return nil
	}
	if count {
		if h.Func != "sum_over_time" {
			return nil
		}
		agg = model.AggCount
	}
	r, step := h.Range, h.Step
	t0 := h.Start + r - 1
	if h.End < t0 {
		return nil
	}
	var n, every int64
	switch {
	case step <= 0 || h.End == t0:
		// An instant query, or one evaluation time (an @ modifier).
		n, every = 1, 1
	case step%r == 0:
		n, every = (h.End-t0)/step+1, step/r
	default:
		return nil
	}
	if buckets := (n-1)*every + 1; buckets > int64(q.opts.MaxPushdownBuckets) {
		return nil
	}
	return &windowPlan{agg: agg, from: h.Start, width: r, every: int(every), n: int(n)}
}

// read answers the plan for one tag: the synthetic samples, one per
// non-empty window, at the window's evaluation time.
func (p *windowPlan) read(st Store, tag string) (points, error) {
	buckets := (p.n-1)*p.every + 1
	bs, err := st.Aggregate(tag, p.from, p.from+int64(buckets)*p.width, buckets, p.agg)
	if err != nil {
		return nil, err
	}
	pts := make(points, 0, p.n)
	for i := 0; i < p.n; i++ {
		b := bs[i*p.every]
		if !b.OK {
			continue
		}
		// Bucket k spans [from+k*r, from+(k+1)*r): its window's
		// evaluation time is its last millisecond.
		pts = append(pts, point{t: p.from + int64(i*p.every+1)*p.width - 1, f: b.V})
	}
	return pts, nil
}
