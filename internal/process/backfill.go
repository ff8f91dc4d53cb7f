package process

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/expr-lang/expr/vm"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
)

// Reader is the store's raw read (*store.DB): at most limit samples of tag
// in [from, to), in time order; limit <= 0 for all. A tag never stored
// gives an error wrapping store.ErrUnknownTag.
type Reader interface {
	Raw(tag string, from, to int64, limit int) ([]model.Sample, error)
}

// Range is the span of late samples of one tag, Unix ms, both ends
// included.
type Range struct{ From, To int64 }

// DefaultLookback is how far before (and after) a late range Recompute
// reads inputs: the value in force at the range's start, and the sample
// that ends the range's influence.
const DefaultLookback = time.Hour

// Recomputer redoes, from the store, what depends on late samples: the
// input chains of the late tags (every step's output over the range;
// kwh_per_day is redone for every local day the range touches; a
// power_to_kwh running total is redone over the range from the stored
// total before it, and every stored total after the range is moved by
// the difference, as is the running total of the live chains through
// Shift) and the calculated tags that read them, transitively, in
// dependency order. It is safe for concurrent use (calls are serialised).
type Recomputer struct {
	// Shift, when set, is told how much a backfill moved a running total
	// (power_to_kwh output tag, kWh), so that the live chains continue
	// from the corrected total.
	Shift func(tag string, delta float64)

	read     Reader
	write    Writer
	interp   Interp
	lookback int64
	inputs   map[string]config.Input
	calcs    []*Calc          // dependency order
	readers  map[string][]int // tag -> indexes of calcs reading it
	mu       chan struct{}
	m        vm.VM
}

// NewRecomputer compiles the calcs (refusing cycles) for recomputation.
// interp is how the stored input samples are joined: Linear when the
// store holds every sample (imports, push inputs), Hold for tags archived
// on change only.
func NewRecomputer(inputs []config.Input, calcs []config.Calc, r Reader, w Writer, interp Interp, lookback time.Duration) (*Recomputer, error) {
	if lookback <= 0 {
		lookback = DefaultLookback
	}
	rc := &Recomputer{read: r, write: w, interp: interp, lookback: lookback.Milliseconds(),
		inputs: make(map[string]config.Input), readers: make(map[string][]int), mu: make(chan struct{}, 1)}
	for _, in := range inputs {
		rc.inputs[in.Tag] = in
	}
	var compiled []*Calc
	for i, cc := range calcs {
		c, err := CompileCalc(cc)
		if err != nil {
			return nil, fmt.Errorf("calc[%d]: %w", i, err)
		}
		compiled = append(compiled, c)
	}
	var err error
	if rc.calcs, err = order(compiled); err != nil {
		return nil, err
	}
	for i, c := range rc.calcs {
		for _, in := range c.Inputs {
			rc.readers[in] = append(rc.readers[in], i)
		}
	}
	return rc, nil
}

// Affects reports whether late samples of tag have anything to recompute.
func (rc *Recomputer) Affects(tag string) bool {
	_, ok := rc.inputs[tag]
	return ok || len(rc.readers[tag]) > 0
}

// Recompute redoes what depends on the late samples described by late
// (tag -> span of its new samples) and writes the results; it returns how
// many points it wrote.
func (rc *Recomputer) Recompute(ctx context.Context, late map[string]Range) (int, error) {
	rc.mu <- struct{}{}
	defer func() { <-rc.mu }()
	changed := make(map[string]Range, len(late))
	for t, r := range late {
		changed[t] = r
	}
	written := 0
	// Chains first: their outputs may be calc inputs.
	tags := make([]string, 0, len(late))
	for t := range late {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	for _, t := range tags {
		in, ok := rc.inputs[t]
		if !ok {
			continue
		}
		n, err := rc.chain(ctx, in, late[t], changed)
		written += n
		if err != nil {
			return written, err
		}
	}
	for i, c := range rc.calcs {
		var r Range
		hit := false
		for _, in := range c.Inputs {
			if x, ok := changed[in]; ok {
				if !hit {
					r, hit = x, true
				}
				r.From, r.To = min(r.From, x.From), max(r.To, x.To)
			}
		}
		if !hit {
			continue
		}
		n, err := rc.calc(ctx, i, r, changed)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// put writes pts and records the span of each tag written in changed.
func (rc *Recomputer) put(ctx context.Context, pts []model.Point, changed map[string]Range) error {
	if len(pts) == 0 {
		return nil
	}
	if err := rc.write.Write(ctx, pts); err != nil {
		return fmt.Errorf("write recomputed points: %w", err)
	}
	for _, p := range pts {
		r, ok := changed[p.Tag]
		if !ok {
			r = Range{From: p.T, To: p.T}
		}
		r.From, r.To = min(r.From, p.T), max(r.To, p.T)
		changed[p.Tag] = r
	}
	return nil
}

// raw reads a tag's samples in [from, to); an unknown tag has none.
func (rc *Recomputer) raw(tag string, from, to int64, limit int) ([]model.Sample, error) {
	s, err := rc.read.Raw(tag, from, to, limit)
	if errors.Is(err, store.ErrUnknownTag) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %q for recompute: %w", tag, err)
	}
	return s, nil
}

// recomputeWindow is how much of an input Recompute reads at a time, so
// that a year-long import is recomputed in bounded memory (a day of 1 s
// samples is 2 MB).
const recomputeWindow = 24 * 60 * 60 * 1000 // ms

// chain reruns one input's chain, fresh, over the late range widened to
// whole local days for kwh_per_day, and writes the outputs that belong to
// the range, one window at a time.
func (rc *Recomputer) chain(ctx context.Context, in config.Input, r Range, changed map[string]Range) (int, error) {
	ch, err := NewChain(in, rc.interp, nil)
	if err != nil {
		return 0, err
	}
	from, to := r.From, r.To
	days := make(map[string][2]int64)        // kwh_per_day tag -> first, last day start kept
	totals := make(map[string]*runningTotal) // power_to_kwh output tag -> its correction
	for i := range ch.steps {
		st := &ch.steps[i]
		switch st.kind {
		case kPowerToKWh:
			totals[st.out] = &runningTotal{st: st}
		case kKWhPerDay:
			d0, _ := dayBounds(r.From, st.loc)
			d1, end := dayBounds(r.To, st.loc)
			days[st.out] = [2]int64{d0, d1}
			from, to = min(from, d0), max(to, end)
		}
	}
	// The late samples influence the outputs at the first sample after
	// them (rates, differences), which is kept too.
	until, after := r.To, false
	written := 0
	var out, buf []model.Point
	for a := from - rc.lookback; a < to+rc.lookback; a += recomputeWindow {
		b := min(a+recomputeWindow, to+rc.lookback)
		samples, err := rc.raw(in.Tag, a, b, 0)
		if err != nil {
			return written, err
		}
		for tag, rt := range totals {
			// The stored totals of this window, read before its
			// outputs overwrite them.
			if rt.old, err = rc.raw(tag, a, b, 0); err != nil {
				return written, err
			}
		}
		for _, x := range samples {
			if x.T > r.To && !after {
				until, after = x.T, true
			}
			for tag, rt := range totals {
				if rt.seeded {
					continue
				}
				// The fresh chain continues the stored total in force
				// at its first sample (0 when there is none: the live
				// chain started from 0 too).
				v, _, err := rc.lastAt(tag, x.T)
				if err != nil {
					return written, err
				}
				rt.st.total, rt.oldEnd, rt.seeded = v, v, true
			}
			buf = ch.Push(x, buf[:0])
			for _, rt := range totals {
				if rt.seeded && x.T <= until {
					rt.newEnd, rt.end = rt.st.total, x.T
				}
			}
			for _, p := range buf {
				if d, ok := days[p.Tag]; ok {
					if p.T >= d[0] && p.T <= d[1] {
						out = append(out, p)
					}
					continue
				}
				if p.T >= r.From && p.T <= until {
					out = append(out, p)
				}
			}
		}
		for _, rt := range totals {
			for _, o := range rt.old {
				if rt.seeded && o.T <= rt.end {
					rt.oldEnd = o.V // the stored total in force at end
				}
			}
		}
		out = dedupe(out)
		if err := rc.put(ctx, out, changed); err != nil {
			return written, err
		}
		written += len(out)
		out = out[:0]
	}
	for tag, rt := range totals {
		if !rt.seeded {
			continue
		}
		n, err := rc.shiftAfter(ctx, tag, rt.end, rt.newEnd-rt.oldEnd, changed)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// runningTotal is the correction of one power_to_kwh output during a
// recompute: the fresh chain starts from the stored total in force at its
// first sample; at the last output the recompute writes (end), the
// difference between the new total and the stored one in force there
// (read before it was overwritten) moves every stored total after end.
type runningTotal struct {
	st             *step
	seeded         bool
	end            int64          // time of the last output written
	oldEnd, newEnd float64        // total in force at end, stored before and recomputed
	old            []model.Sample // the current window's stored totals, before the put
}

// lastReader is the store's bucketed query (*store.DB), which finds the
// last value before a time from its rollups, however old.
type lastReader interface {
	Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error)
}

// lastAt returns tag's stored value in force at t: the last at or before
// it; none when the tag has no sample up to t.
func (rc *Recomputer) lastAt(tag string, t int64) (float64, bool, error) {
	if lr, ok := rc.read.(lastReader); ok {
		b, err := lr.Aggregate(tag, 0, t+1, 1, model.AggLast)
		if errors.Is(err, store.ErrUnknownTag) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("read %q for recompute: %w", tag, err)
		}
		return b[0].V, b[0].OK, nil
	}
	s, err := rc.raw(tag, math.MinInt64, t+1, 0)
	if err != nil || len(s) == 0 {
		return 0, false, err
	}
	return s[len(s)-1].V, true, nil
}

// shiftAfter adds delta to every stored sample of tag after end, one
// window at a time up to the newest, then tells Shift.
func (rc *Recomputer) shiftAfter(ctx context.Context, tag string, end int64, delta float64, changed map[string]Range) (int, error) {
	if delta == 0 {
		return 0, nil
	}
	written := 0
	var pts []model.Point
	horizon := time.Now().Add(24 * time.Hour).UnixMilli()
	for a := end + 1; a < horizon; a += recomputeWindow {
		s, err := rc.raw(tag, a, min(a+recomputeWindow, horizon), 0)
		if err != nil {
			return written, err
		}
		pts = pts[:0]
		for _, x := range s {
			pts = append(pts, model.Point{Tag: tag, T: x.T, V: x.V + delta, Q: x.Q})
		}
		if err := rc.put(ctx, pts, changed); err != nil {
			return written, err
		}
		written += len(pts)
	}
	if rc.Shift != nil {
		rc.Shift(tag, delta)
	}
	return written, nil
}

// dedupe keeps the last point per tag and time (the store would keep it
// too), so a day's running totals become one point.
func dedupe(pts []model.Point) []model.Point {
	type key struct {
		tag string
		t   int64
	}
	last := make(map[key]int, len(pts))
	for i, p := range pts {
		last[key{p.Tag, p.T}] = i
	}
	out := pts[:0]
	for i, p := range pts {
		if last[key{p.Tag, p.T}] == i {
			out = append(out, p)
		}
	}
	return out
}

// calc recomputes one calculated tag over r and writes the results, one
// window at a time: on change, at every input sample time from r.From up
// to the next sample after r.To of each input that changed (the end of
// the lookback window when it has none), each input taken as of that
// time; on a period, at every aligned period time in that span.
func (rc *Recomputer) calc(ctx context.Context, i int, r Range, changed map[string]Range) (int, error) {
	c := rc.calcs[i]
	until := r.To
	for _, in := range c.Inputs {
		if _, ok := changed[in]; !ok {
			continue
		}
		next := r.To + rc.lookback
		s, err := rc.raw(in, r.To+1, r.To+rc.lookback, 1)
		if err != nil {
			return 0, err
		}
		if len(s) > 0 {
			next = s[0].T
		}
		until = max(until, next-1)
	}
	n := len(c.Inputs)
	cur := make([]model.Sample, n) // each input as of the time evaluated
	has := make([]bool, n)
	series := make([][]model.Sample, n)
	pos := make([]int, n)
	var times []int64
	var out []model.Point
	var lastV float64
	written := 0
	for a := r.From - rc.lookback; a <= until; a += recomputeWindow {
		b := min(a+recomputeWindow, until+1)
		times = times[:0]
		for j, in := range c.Inputs {
			s, err := rc.raw(in, a, b, 0)
			if err != nil {
				return written, err
			}
			series[j], pos[j] = s, 0
			if c.Period == 0 {
				for _, x := range s {
					if x.T >= r.From {
						times = append(times, x.T)
					}
				}
			}
		}
		if c.Period > 0 {
			p := c.Period.Milliseconds()
			lo := max(a, r.From)
			for t := (lo + p - 1) / p * p; t < b; t += p {
				times = append(times, t)
			}
		}
		slices.Sort(times)
		times = slices.Compact(times)
		for _, t := range times {
			ready := true
			for j, s := range series {
				for pos[j] < len(s) && s[pos[j]].T <= t {
					cur[j], has[j] = s[pos[j]], true
					pos[j]++
				}
				ready = ready && has[j]
			}
			if !ready {
				continue
			}
			v, q, _ := c.Eval(&rc.m, cur)
			if q == model.QualityBad {
				v = lastV // the store refuses non-finite values; hold the last one
			}
			lastV = v
			out = append(out, model.Point{Tag: c.Tag, T: t, V: v, Q: q})
		}
		// The rest of the window moves the inputs' values on for the next.
		for j, s := range series {
			if len(s) > 0 {
				cur[j], has[j] = s[len(s)-1], true
			}
		}
		if err := rc.put(ctx, out, changed); err != nil {
			return written, err
		}
		written += len(out)
		out = out[:0]
	}
	return written, nil
}
