// Package process runs input-processing chains and calculated tags.
//
// An input chain (config [[input]]) is the emoncms idea: every sample of
// one input tag goes through an ordered list of steps (scale, offset,
// allow positive/negative, power to kWh, kWh to power, pulse count to
// rate, kWh per local day, log to a tag). The value travels from step to
// step; steps that write a tag pass it on unchanged. A calculated tag
// (config [[calc]]) is an expression over other tags, compiled once with
// expr-lang and evaluated when an input changes or on a period.
//
// Data flows acquire -> tag table -> process -> tag table -> archive: the
// Engine subscribes to the table (Queue mode, every change in order),
// runs the chains of the changed inputs and the calculated tags that
// depend on them, and writes the results back with one Table.Update per
// batch. Push inputs that bypass the table (emoncms) are processed by
// Sink, which wraps the store's Write and adds the chain outputs to the
// same atomic write. Late data imported for a range is recomputed by
// Recompute.
package process

import (
	"fmt"
	"math"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/config"
)

// Interp is how an integrating step models the signal between two samples.
type Interp uint8

const (
	// Linear joins samples with straight lines (the trapezoid rule): the
	// right model when every sample is seen, as on the push paths.
	Linear Interp = iota
	// Hold keeps a value until the next sample: the right model for the
	// tag table's changes, which leave out repeats of an unchanged value.
	// Integration stops at a bad sample instead of at max_gap.
	Hold
)

type kind uint8

const (
	kScale kind = iota
	kOffset
	kAllowPos
	kAllowNeg
	kPowerToKWh
	kKWhToPower
	kPulseToRate
	kKWhPerDay
	kLog
)

// msPerHour converts kW x ms into kWh.
const msPerHour = 3_600_000

// step is one step with its state. It is a plain value so that a chain's
// state can be saved and restored by copying the slice (Sink does so when
// a write fails).
type step struct {
	kind   kind
	k      float64 // scale or offset
	out    string  // output tag
	maxGap int64   // ms; 0 = none
	wrap   float64
	per    float64 // ms of the rate unit
	loc    *time.Location

	prev  model.Sample // previous input sample of an integrating/diff step
	has   bool
	total float64 // power_to_kwh running total, kwh_per_day day total
	seed  bool    // total was seeded from the store
	day   int64   // kwh_per_day: start of the current day (ms)
	next  int64   // kwh_per_day: start of the next day (ms)
}

// Chain is one input's steps with their state. It is not safe for
// concurrent use.
type Chain struct {
	Tag    string
	interp Interp
	steps  []step
	// Late counts samples not newer than the previous one, which the
	// stateful steps skip (Recompute handles backfills).
	Late uint64
}

// Seeder returns the newest stored sample of a tag, so that running
// totals continue across restarts. It may be nil.
type Seeder func(tag string) (model.Sample, bool)

// NewChain builds the chain of one [[input]] (already validated by
// config).
func NewChain(in config.Input, interp Interp, seed Seeder) (*Chain, error) {
	c := &Chain{Tag: in.Tag, interp: interp}
	for i := range in.Process {
		ps := &in.Process[i]
		name, n := ps.Action()
		if n != 1 {
			return nil, fmt.Errorf("build input %q step %d: want exactly one action", in.Tag, i)
		}
		s := step{out: ps.OutputTag(), maxGap: ps.MaxGap.Std().Milliseconds(), wrap: ps.Wrap}
		switch name {
		case "scale":
			s.kind, s.k = kScale, *ps.Scale
		case "offset":
			s.kind, s.k = kOffset, *ps.Offset
		case "allow_positive":
			s.kind = kAllowPos
		case "allow_negative":
			s.kind = kAllowNeg
		case "power_to_kwh":
			s.kind = kPowerToKWh
			if seed != nil {
				if last, ok := seed(s.out); ok {
					s.total, s.seed = last.V, true
				}
			}
		case "kwh_to_power":
			s.kind = kKWhToPower
		case "pulse_to_rate":
			s.kind = kPulseToRate
			s.per = float64(time.Second.Milliseconds())
			if ps.Per > 0 {
				s.per = float64(ps.Per.Std().Milliseconds())
			}
		case "kwh_per_day":
			s.kind = kKWhPerDay
			s.loc = time.UTC
			if ps.TZ != "" {
				loc, err := time.LoadLocation(ps.TZ)
				if err != nil {
					return nil, fmt.Errorf("build input %q step %d: %w", in.Tag, i, err)
				}
				s.loc = loc
			}
			if seed != nil {
				if last, ok := seed(s.out); ok {
					// Continue the day the stored total belongs to, if the
					// first sample falls in it (checked in kwhPerDay).
					s.day, s.total, s.seed = last.T, last.V, true
				}
			}
		default:
			s.kind = kLog
		}
		c.steps = append(c.steps, s)
	}
	return c, nil
}

// Outputs lists the tags the chain writes, in step order.
func (c *Chain) Outputs() []string {
	var out []string
	for i := range c.steps {
		if c.steps[i].out != "" {
			out = append(out, c.steps[i].out)
		}
	}
	return out
}

// state returns a copy of the chain's state; restore puts it back.
func (c *Chain) state() []step { return append([]step(nil), c.steps...) }

func (c *Chain) restore(s []step) { copy(c.steps, s) }

// Push runs one sample through the chain and appends the points the
// steps write to out. Samples must come in time order; one that is not
// newer than the previous sample still goes through the stateless steps
// and log, but the stateful steps skip it and count it in Late.
func (c *Chain) Push(s model.Sample, out []model.Point) []model.Point {
	v := s.V
	for i := range c.steps {
		st := &c.steps[i]
		switch st.kind {
		case kScale:
			v *= st.k
		case kOffset:
			v += st.k
		case kAllowPos:
			v = max(v, 0)
		case kAllowNeg:
			v = min(v, 0)
		case kLog:
			out = append(out, model.Point{Tag: st.out, T: s.T, V: v, Q: s.Q})
		default:
			cur := model.Sample{T: s.T, V: v, Q: s.Q}
			if st.has && cur.T <= st.prev.T {
				c.Late++
				continue
			}
			out = c.stateful(st, cur, out)
			st.prev, st.has = cur, true
		}
	}
	return out
}

// stateful runs the steps that look at the previous sample.
func (c *Chain) stateful(st *step, cur model.Sample, out []model.Point) []model.Point {
	prev, has := st.prev, st.has
	switch st.kind {
	case kPowerToKWh:
		if has {
			st.total += c.area(st, prev, cur, prev.T, cur.T)
		}
		if cur.Q != model.QualityBad {
			out = append(out, model.Point{Tag: st.out, T: cur.T, V: st.total, Q: cur.Q})
		}
	case kKWhToPower:
		if has && prev.Q != model.QualityBad && cur.Q != model.QualityBad && cur.V >= prev.V {
			p := (cur.V - prev.V) * msPerHour / float64(cur.T-prev.T)
			out = append(out, model.Point{Tag: st.out, T: cur.T, V: p, Q: worse(prev.Q, cur.Q)})
		}
	case kPulseToRate:
		if has && prev.Q != model.QualityBad && cur.Q != model.QualityBad {
			d := cur.V - prev.V
			if d < 0 && st.wrap > 0 {
				d += st.wrap
			}
			if d >= 0 {
				r := d * st.per / float64(cur.T-prev.T)
				out = append(out, model.Point{Tag: st.out, T: cur.T, V: r, Q: worse(prev.Q, cur.Q)})
			}
		}
	case kKWhPerDay:
		out = c.kwhPerDay(st, prev, has, cur, out)
	}
	return out
}

// integrates reports whether the interval from prev to cur counts.
func (c *Chain) integrates(st *step, prev, cur model.Sample) bool {
	if prev.Q == model.QualityBad {
		return false
	}
	if c.interp == Hold {
		return true
	}
	return cur.Q != model.QualityBad && (st.maxGap == 0 || cur.T-prev.T <= st.maxGap)
}

// area is the energy (kWh) of the part [a, b] of the interval from prev
// to cur, or 0 when the interval does not count.
func (c *Chain) area(st *step, prev, cur model.Sample, a, b int64) float64 {
	if !c.integrates(st, prev, cur) || b <= a {
		return 0
	}
	if c.interp == Hold {
		return prev.V * float64(b-a) / msPerHour
	}
	va, vb := lerp(prev, cur, a), lerp(prev, cur, b)
	return (va + vb) / 2 * float64(b-a) / msPerHour
}

// lerp is the straight line from p to q at time t.
func lerp(p, q model.Sample, t int64) float64 {
	if t == p.T {
		return p.V
	}
	if t == q.T {
		return q.V
	}
	f := float64(t-p.T) / float64(q.T-p.T)
	return p.V + (q.V-p.V)*f
}

// worse returns the worse of two qualities (bad over uncertain over good).
func worse(a, b model.Quality) model.Quality {
	if a == model.QualityBad || b == model.QualityBad {
		return model.QualityBad
	}
	if a == model.QualityUncertain || b == model.QualityUncertain {
		return model.QualityUncertain
	}
	return model.QualityGood
}

// dayBounds returns the start of the local day holding t and the start of
// the next one, in Unix ms. Days are 23, 24 or 25 hours long across DST.
func dayBounds(t int64, loc *time.Location) (int64, int64) {
	lt := time.UnixMilli(t).In(loc)
	y, m, d := lt.Date()
	start := time.Date(y, m, d, 0, 0, 0, 0, loc)
	next := time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	return start.UnixMilli(), next.UnixMilli()
}

// kwhPerDay adds the interval prev..cur to the local days it spans and
// writes the total of each day touched at that day's local midnight (the
// store keeps the last write, so a day's point ends as its final total).
func (c *Chain) kwhPerDay(st *step, prev model.Sample, has bool, cur model.Sample, out []model.Point) []model.Point {
	if st.next == 0 {
		// First sample: open its day, continuing a seeded total only if it
		// belongs to that day.
		start, next := dayBounds(cur.T, st.loc)
		if !(st.seed && st.day == start) {
			st.total = 0
		}
		st.seed = false
		st.day, st.next = start, next
	}
	if has {
		a := prev.T
		for cur.T >= st.next {
			st.total += c.area(st, prev, cur, a, st.next)
			if st.total != 0 || c.integrates(st, prev, cur) {
				out = append(out, model.Point{Tag: st.out, T: st.day, V: st.total, Q: model.QualityGood})
			}
			a = st.next
			st.total = 0
			st.day, st.next = dayBounds(st.next, st.loc)
		}
		st.total += c.area(st, prev, cur, a, cur.T)
	}
	if cur.Q != model.QualityBad && !math.IsNaN(st.total) {
		out = append(out, model.Point{Tag: st.out, T: st.day, V: st.total, Q: cur.Q})
	}
	return out
}

// shift adds delta to the running total of the power_to_kwh steps that
// write tag.
func (c *Chain) shift(tag string, delta float64) {
	for i := range c.steps {
		if st := &c.steps[i]; st.kind == kPowerToKWh && st.out == tag {
			st.total += delta
		}
	}
}
