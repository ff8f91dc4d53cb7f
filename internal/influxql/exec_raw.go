package influxql

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// raw reads the samples of tag in [from, to), at most limit, counting
// them against the statement's budget.
func (e *run) raw(tag string, from, to int64, limit int, budget *int) ([]model.Sample, error) {
	if from >= to {
		return nil, nil
	}
	smp, err := e.st.Raw(tag, from, to, min(limit, *budget+1))
	if errors.Is(err, store.ErrUnknownTag) {
		return nil, nil
	} else if err != nil {
		return nil, &StoreError{Err: err}
	}
	if len(smp) > *budget {
		return nil, &UnsupportedError{fmt.Sprintf("the statement reads more than %d raw samples (raw SELECT, median(), first() and last() over several series, and field conditions read raw samples): narrow the time range or add a LIMIT", e.opts.MaxRawSamples)}
	}
	*budget -= len(smp)
	if err := e.take(int64(len(smp)) * rawSampleBytes); err != nil {
		return nil, err
	}
	return smp, nil
}

// rawColumn computes a function from raw samples: median, first and last
// over several series, and any function under a condition on the field's
// values (only the samples passing e.pred count).
func (e *run) rawColumn(fn string, members []Series, wd windows) ([]cell, error) {
	cs := make([]cell, wd.n)
	budget := e.opts.MaxRawSamples
	var vals [][]float64
	if fn == "median" {
		vals = make([][]float64, wd.n)
	}
	for _, se := range members {
		smp, err := e.raw(se.Tag, wd.from, wd.to, e.opts.MaxRawSamples+1, &budget)
		if err != nil {
			return nil, err
		}
		for _, x := range smp {
			if e.pred != nil && !e.pred(x.V) {
				continue
			}
			k := wd.index(x.T)
			c := &cs[k]
			first := !c.ok
			c.ok = true
			switch fn {
			case "median":
				vals[k] = append(vals[k], x.V)
			case "first":
				if first || x.T < c.t {
					c.t, c.v = x.T, x.V
				}
			case "last":
				if first || x.T > c.t {
					c.t, c.v = x.T, x.V
				}
			case "min":
				if first || x.V < c.v || x.V == c.v && x.T < c.t {
					c.t, c.v = x.T, x.V
				}
			case "max":
				if first || x.V > c.v || x.V == c.v && x.T < c.t {
					c.t, c.v = x.T, x.V
				}
			case "mean", "sum", "count":
				c.sum, c.n = c.sum+x.V, c.n+1
			case "spread":
				if first {
					c.lo, c.hi = x.V, x.V
				}
				c.lo, c.hi = math.Min(c.lo, x.V), math.Max(c.hi, x.V)
			}
		}
	}
	for k := range cs {
		c := &cs[k]
		if !c.ok {
			continue
		}
		switch fn {
		case "median":
			vs := vals[k]
			sort.Float64s(vs)
			m := len(vs) / 2
			if len(vs)%2 == 1 {
				c.v = vs[m]
			} else {
				c.v = (vs[m-1] + vs[m]) / 2
			}
		case "mean":
			c.v = c.sum / c.n
		case "sum":
			c.v = c.sum
		case "count":
			c.v = c.n
		case "spread":
			c.v = c.hi - c.lo
		}
	}
	return cs, nil
}

// selectorColumn answers first, last, min or max without GROUP BY time():
// the selected sample's value and time, found from the rollups and read
// raw only in its last narrow window.
func (e *run) selectorColumn(fn string, members []Series, wd windows) ([]cell, error) {
	cs := make([]cell, 1)
	c := &cs[0]
	for _, se := range members {
		var smp model.Sample
		var err error
		if fn == "first" {
			var got []model.Sample
			budget := 1
			got, err = e.raw(se.Tag, wd.from, wd.to, 1, &budget)
			if len(got) == 0 && err == nil {
				err = errNoData
			} else if err == nil {
				smp = got[0]
			}
		} else {
			smp, err = e.locate(se.Tag, wd.from, wd.to, fn)
		}
		if errors.Is(err, errNoData) {
			continue
		} else if err != nil {
			return nil, err
		}
		better := !c.ok
		switch fn {
		case "first":
			better = better || smp.T < c.t
		case "last":
			better = better || smp.T > c.t
		case "min":
			better = better || smp.V < c.v || smp.V == c.v && smp.T < c.t
		case "max":
			better = better || smp.V > c.v || smp.V == c.v && smp.T < c.t
		}
		if better {
			c.ok, c.t, c.v = true, smp.T, smp.V
		}
	}
	return cs, nil
}

// locateBuckets is how many buckets each step of locate splits its range
// into; a range of 2^62 ms is narrowed to one raw read in seven steps.
const locateBuckets = 1000

// locate finds the sample last, min or max selects in [from, to): it
// splits the range into buckets, keeps the bucket holding the answer (the
// last non-empty one, or the earliest holding the extreme) and repeats
// until the range is small enough to read raw.
func (e *run) locate(tag string, from, to int64, fn string) (model.Sample, error) {
	agg := map[string]model.Agg{"last": model.AggCount, "min": model.AggMin, "max": model.AggMax}[fn]
	better := func(a, b float64) bool {
		switch fn {
		case "min":
			return a < b
		case "max":
			return a > b
		}
		return true // last: every later non-empty bucket wins
	}
	for to-from > locateBuckets {
		bs, err := e.st.Aggregate(tag, from, to, locateBuckets, agg)
		if errors.Is(err, store.ErrUnknownTag) {
			return model.Sample{}, errNoData
		} else if err != nil {
			return model.Sample{}, &StoreError{Err: err}
		}
		pick := -1
		for i, b := range bs {
			if b.OK && (agg != model.AggCount || b.V > 0) && (pick < 0 || better(b.V, bs[pick].V)) {
				pick = i
			}
		}
		if pick < 0 {
			return model.Sample{}, errNoData
		}
		span := uint64(to - from)
		lo := from + mulDivCeil(uint64(pick), span, locateBuckets)
		hi := from + mulDivCeil(uint64(pick+1), span, locateBuckets)
		from, to = lo, hi
	}
	smp, err := e.st.Raw(tag, from, to, locateBuckets+1)
	if errors.Is(err, store.ErrUnknownTag) {
		return model.Sample{}, errNoData
	} else if err != nil {
		return model.Sample{}, &StoreError{Err: err}
	}
	pick := -1
	for i, x := range smp {
		if pick < 0 || fn == "last" || better(x.V, smp[pick].V) {
			pick = i
		}
	}
	if pick < 0 {
		return model.Sample{}, errNoData
	}
	return smp[pick], nil
}

// rawColumnSpec is one column of a raw SELECT: a field or a tag key.
type rawColumnSpec struct {
	name  string
	key   string
	isTag bool
}

// rawRows answers a raw SELECT: one row per point (tag set and time) with
// the selected fields and tags, in time order.
func (e *run) rawRows(ctx context.Context, s *SelectStatement, keys []string, groups []group) ([]Row, error) {
	fieldSet, tagSet := map[string]bool{}, map[string]bool{}
	for _, g := range groups {
		for _, se := range g.series {
			fieldSet[se.Field] = true
			for _, k := range se.Keys {
				tagSet[k] = true
			}
		}
	}
	var specs []rawColumnSpec
	for _, f := range s.Fields {
		if f.Wildcard {
			var all []rawColumnSpec
			for k := range fieldSet {
				all = append(all, rawColumnSpec{name: k, key: k})
			}
			for k := range tagSet {
				if !fieldSet[k] && !contains(keys, k) {
					all = append(all, rawColumnSpec{name: k, key: k, isTag: true})
				}
			}
			sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
			specs = append(specs, all...)
			continue
		}
		specs = append(specs, rawColumnSpec{name: f.Name(), key: f.Arg, isTag: !fieldSet[f.Arg] && tagSet[f.Arg]})
	}
	hasField := false
	for _, sp := range specs {
		hasField = hasField || !sp.isTag
	}
	if !hasField {
		return nil, &UnsupportedError{"statement must have at least one field in select clause"}
	}
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.name
	}
	cols := columnNames(toFields(names))
	from, to := msRange(s.Start, s.End)
	limit := e.opts.MaxRawSamples + 1
	if s.Limit > 0 && !s.Desc {
		limit = min(limit, s.Limit+s.OffsetRows)
	}
	budget := e.opts.MaxRawSamples
	var rows []Row
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Points: the series of one tag set at one time form one row.
		type point struct {
			t    int64
			set  int // index of the tag set, to order equal times
			vals []Value
		}
		bySet := map[string][]Series{}
		for _, se := range g.series {
			id := strings.Join(se.Keys, "\x00") + "\x01" + strings.Join(se.Values, "\x00")
			bySet[id] = append(bySet[id], se)
		}
		setIDs := sortedKeys(func() map[string]bool {
			m := map[string]bool{}
			for id := range bySet {
				m[id] = true
			}
			return m
		}())
		var pts []point
		for si, id := range setIDs {
			members := bySet[id]
			at := map[int64]int{} // time -> index in pts
			for c, sp := range specs {
				if sp.isTag {
					continue
				}
				for _, se := range members {
					if se.Field != sp.key {
						continue
					}
					smp, err := e.raw(se.Tag, from, to, limit, &budget)
					if err != nil {
						return nil, err
					}
					for _, x := range smp {
						i, ok := at[x.T]
						if !ok {
							i = len(pts)
							at[x.T] = i
							vals := make([]Value, len(specs))
							for c2, sp2 := range specs {
								if sp2.isTag && members[0].has(sp2.key) {
									vals[c2] = stringV(members[0].Get(sp2.key))
								}
							}
							pts = append(pts, point{t: x.T, set: si, vals: vals})
						}
						pts[i].vals[c] = floatV(x.V)
					}
				}
			}
		}
		if e.rowCond != nil {
			kept := pts[:0]
			for _, p := range pts {
				ok, err := matchFields(e.rowCond, func(k string) (float64, bool) {
					for c, sp := range specs {
						if !sp.isTag && sp.key == k && p.vals[c].kind == vFloat {
							return p.vals[c].f, true
						}
					}
					return 0, false
				})
				if err != nil {
					return nil, err
				}
				if ok {
					kept = append(kept, p)
				}
			}
			pts = kept
		}
		if len(pts) == 0 {
			continue
		}
		sort.SliceStable(pts, func(i, j int) bool {
			if pts[i].t != pts[j].t {
				return pts[i].t < pts[j].t
			}
			return pts[i].set < pts[j].set
		})
		if s.Desc {
			reverse(pts)
		}
		lo, hi := window(len(pts), s.Limit, s.OffsetRows)
		row := Row{Name: s.Measurement, TagKeys: keys, TagVals: g.vals, Columns: append([]string{"time"}, cols...), timeCol: true}
		for _, p := range pts[lo:hi] {
			row.Values = append(row.Values, append([]Value{timeV(p.t)}, p.vals...))
		}
		if len(row.Values) > 0 {
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func toFields(names []string) []SelectField {
	out := make([]SelectField, len(names))
	for i, n := range names {
		out[i] = SelectField{Arg: n}
	}
	return out
}
