package influxql

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

const nsPerMs = int64(1e6)

// group is one output series: the series sharing the values of the GROUP
// BY tag keys.
type group struct {
	vals   []string
	series []Series
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// msRange converts the statement's inclusive ns range to [from, to) in ms.
func msRange(start, end int64) (int64, int64) {
	return ceilDiv(start, nsPerMs), floorDiv(end, nsPerMs) + 1
}

func (e *run) selectRows(ctx context.Context, s *SelectStatement) ([]Row, error) {
	if s.Sources == nil {
		return e.selectFrom(ctx, s)
	}
	// Several measurements: each answers on its own, in name order.
	var rows []Row
	for _, m := range e.measurementsOf(s.Sources) {
		one := *s
		one.Measurement, one.Sources = m, nil
		r, err := e.selectFrom(ctx, &one)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// selectFrom answers a SELECT from one measurement.
func (e *run) selectFrom(ctx context.Context, s *SelectStatement) ([]Row, error) {
	e.pred, e.rowCond = nil, nil
	fields, tags := map[string]bool{}, map[string]bool{}
	for _, se := range e.snapshot().Series(s.Measurement) {
		fields[se.Field] = true
		for _, k := range se.Keys {
			tags[k] = true
		}
	}
	tagCond, fieldCond, err := splitFieldCond(s.Cond, fields, tags)
	if err != nil {
		return nil, err
	}
	if fieldCond != nil {
		// A condition on field values is answered from raw samples: on
		// the aggregated field itself, or on the fields a raw SELECT
		// returns.
		fks := fieldKeys(fieldCond)
		if s.Aggregate() {
			for _, f := range s.Fields {
				if len(fks) != 1 || f.Arg != fks[0] {
					return nil, &UnsupportedError{"a condition on field values must be on the field the functions aggregate"}
				}
			}
			if e.pred, err = samplePred(fieldCond, fks[0]); err != nil {
				return nil, err
			}
		} else {
			e.rowCond = fieldCond
		}
	}
	all, err := e.matching(s.Measurement, tagCond)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	keys := s.GroupBy
	if s.GroupAll {
		set := map[string]bool{}
		for _, se := range all {
			for _, k := range se.Keys {
				set[k] = true
			}
		}
		keys = sortedKeys(set)
	} else {
		keys = dedupSorted(keys)
	}
	groups := groupSeries(all, keys)
	lo, hi := window(len(groups), s.SLimit, s.SOffset)
	groups = groups[lo:hi]
	if s.Desc {
		reverse(groups) // InfluxDB lists the series in reverse too, after SLIMIT
	}
	if s.Aggregate() {
		return e.aggregateRows(ctx, s, keys, groups)
	}
	return e.rawRows(ctx, s, keys, groups)
}

func dedupSorted(in []string) []string {
	set := map[string]bool{}
	for _, k := range in {
		set[k] = true
	}
	return sortedKeys(set)
}

// groupSeries splits series by their values of keys, sorted by those values.
func groupSeries(all []Series, keys []string) []group {
	byKey := map[string]*group{}
	var order []string
	for _, se := range all {
		vals := make([]string, len(keys))
		for i, k := range keys {
			vals[i] = se.Get(k)
		}
		id := strings.Join(vals, "\x00")
		g := byKey[id]
		if g == nil {
			g = &group{vals: vals}
			byKey[id] = g
			order = append(order, id)
		}
		g.series = append(g.series, se)
	}
	sort.Strings(order)
	out := make([]group, len(order))
	for i, id := range order {
		out[i] = *byKey[id]
	}
	return out
}

// windows are the buckets of an aggregate: bucket k starts at b0+k*w and
// holds the samples of [max(b0+k*w, from), min(b0+(k+1)*w, to)). Without
// GROUP BY time() there is one bucket, [from, to).
type windows struct {
	from, to int64
	b0, w    int64
	n        int
}

func (wd windows) start(k int) int64 {
	if wd.w == 0 {
		return wd.b0
	}
	return wd.b0 + int64(k)*wd.w
}

// index returns the bucket of time t (from <= t < to).
func (wd windows) index(t int64) int {
	if wd.w == 0 {
		return 0
	}
	return int(floorDiv(t-wd.b0, wd.w))
}

// cell is one bucket's aggregate of one column.
type cell struct {
	ok  bool
	v   float64
	t   int64   // the selected sample's time (first, last, min, max without GROUP BY time())
	sum float64 // mean over several series: sum and count, divided at the end
	n   float64
	lo  float64 // spread: min and max
	hi  float64
}

// errNoData ends a search that found no sample.
var errNoData = errors.New("no data")

func (e *run) aggregateRows(ctx context.Context, s *SelectStatement, keys []string, groups []group) ([]Row, error) {
	start, end := s.Start, s.End
	if s.Interval > 0 && !s.HasEnd {
		end = min(end, s.Now)
	}
	if s.Interval%nsPerMs != 0 || s.Offset%nsPerMs != 0 {
		return nil, &UnsupportedError{"GROUP BY time() intervals and offsets must be whole milliseconds in Pith (its samples are stamped in ms)"}
	}
	// One selector without GROUP BY time() answers with its sample's time.
	selector := s.Interval == 0 && len(s.Fields) == 1 && isSelector(s.Fields[0].Func)
	cols := columnNames(s.Fields)
	var rows []Row
	cells := 0
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		from, to := msRange(start, end)
		if from >= to {
			return nil, nil
		}
		// Without GROUP BY time() the row is stamped with the range's
		// start as InfluxDB truncates it to the epoch (0 without one).
		wd := windows{from: from, to: to, n: 1, b0: floorDiv(start, nsPerMs)}
		if start == MinTime {
			wd.b0 = 0
		}
		if s.Interval > 0 {
			if start == MinTime {
				// No lower bound: InfluxDB starts at the first sample.
				first, err := e.firstTime(g.series, to)
				if errors.Is(err, errNoData) {
					continue
				} else if err != nil {
					return nil, err
				}
				wd.from = first
			}
			iv, off := s.Interval/nsPerMs, s.Offset/nsPerMs
			wd.w = iv
			wd.b0 = floorDiv(wd.from-off, iv)*iv + off
			last := floorDiv(wd.to-1-off, iv)*iv + off
			n := (last-wd.b0)/iv + 1
			cells += int(min(n, math.MaxInt32))
			if n <= 0 || cells > e.opts.MaxBuckets {
				return nil, &UnsupportedError{fmt.Sprintf("GROUP BY time() gives more than %d buckets in one statement: use a wider interval or a shorter range", e.opts.MaxBuckets)}
			}
			wd.n = int(n)
		}
		if err := e.take(int64(wd.n) * (int64(len(s.Fields))*bucketBytes + rowBytes)); err != nil {
			return nil, err
		}
		colCells := make([][]cell, len(s.Fields))
		any := false
		for c, f := range s.Fields {
			var members []Series
			for _, se := range g.series {
				if se.Field == f.Arg {
					members = append(members, se)
				}
			}
			cs, err := e.column(f.Func, members, wd, selector)
			if err != nil {
				return nil, err
			}
			for _, x := range cs {
				any = any || x.ok
			}
			colCells[c] = cs
		}
		if !any {
			continue // a series without a sample in the range is left out, as InfluxDB does
		}
		row := Row{Name: s.Measurement, TagKeys: keys, TagVals: g.vals, Columns: append([]string{"time"}, cols...), timeCol: true}
		row.Values = fillRows(s, wd, colCells, selector)
		if s.Desc {
			reverse(row.Values)
		}
		lo, hi := window(len(row.Values), s.Limit, s.OffsetRows)
		row.Values = row.Values[lo:hi]
		if len(row.Values) > 0 {
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func isSelector(fn string) bool { return fn == "first" || fn == "last" || fn == "min" || fn == "max" }

// columnNames names the columns as InfluxDB does: alias, function or key,
// with _1, _2 ... for repeats.
func columnNames(fields []SelectField) []string {
	seen := map[string]int{}
	out := make([]string, len(fields))
	for i, f := range fields {
		n := f.Name()
		if k := seen[n]; k > 0 {
			out[i] = fmt.Sprintf("%s_%d", n, k)
		} else {
			out[i] = n
		}
		seen[n]++
	}
	return out
}

// fillRows turns the columns' cells into rows, applying fill().
func fillRows(s *SelectStatement, wd windows, cols [][]cell, selector bool) [][]Value {
	vals := make([][]Value, len(cols))
	for c, cs := range cols {
		vs := make([]Value, wd.n)
		fn := s.Fields[c].Func
		for k, x := range cs {
			switch {
			case x.ok && fn == "count":
				vs[k] = intV(int64(x.v))
			case x.ok:
				vs[k] = floatV(x.v)
			}
		}
		switch s.Fill {
		case FillNull:
			if fn == "count" {
				for k := range vs {
					if vs[k].isNull() {
						vs[k] = intV(0)
					}
				}
			}
		case FillPrevious:
			for k := 1; k < len(vs); k++ {
				if vs[k].isNull() {
					vs[k] = vs[k-1]
				}
			}
		case FillValue:
			for k := range vs {
				if vs[k].isNull() {
					vs[k] = floatV(s.FillValue)
					if fn == "count" && s.FillValue == math.Trunc(s.FillValue) {
						vs[k] = intV(int64(s.FillValue))
					}
				}
			}
		case FillLinear:
			prev := -1
			for k := range vs {
				if vs[k].isNull() {
					continue
				}
				if prev >= 0 && k-prev > 1 {
					a, b := num(vs[prev]), num(vs[k])
					for j := prev + 1; j < k; j++ {
						vs[j] = floatV(a + (b-a)*float64(j-prev)/float64(k-prev))
					}
				}
				prev = k
			}
		}
		vals[c] = vs
	}
	out := make([][]Value, 0, wd.n)
	flat := make([]Value, wd.n*(1+len(cols))) // one allocation for every row
	for k := 0; k < wd.n; k++ {
		row := flat[k*(1+len(cols)) : (k+1)*(1+len(cols)) : (k+1)*(1+len(cols))]
		t := wd.start(k)
		if selector && cols[0][k].ok {
			t = cols[0][k].t
		}
		row[0] = timeV(t)
		empty := true
		for c := range cols {
			row[1+c] = vals[c][k]
			empty = empty && !cols[c][k].ok
		}
		if empty && s.Fill == FillNone {
			continue
		}
		out = append(out, row)
	}
	return out
}

func num(v Value) float64 {
	if v.kind == vInt {
		return float64(v.i)
	}
	return v.f
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// column computes one function over the member series of a group, bucket
// by bucket, from the rollups where the function allows it.
func (e *run) column(fn string, members []Series, wd windows, selector bool) ([]cell, error) {
	cs := make([]cell, wd.n)
	if len(members) == 0 {
		return cs, nil
	}
	if e.pred != nil || fn == "median" || (len(members) > 1 && (fn == "first" || fn == "last") && !selector) {
		return e.rawColumn(fn, members, wd)
	}
	if selector {
		return e.selectorColumn(fn, members, wd)
	}
	merge := func(agg model.Agg, f func(c *cell, v float64)) error {
		for _, se := range members {
			bs, err := e.aggTag(se.Tag, wd, agg)
			if err != nil {
				return err
			}
			for k, b := range bs {
				if b.OK {
					f(&cs[k], b.V)
				}
			}
		}
		return nil
	}
	var err error
	switch {
	case len(members) == 1 && fn != "spread":
		agg, _ := model.ParseAgg(fn)
		err = merge(agg, func(c *cell, v float64) { c.ok, c.v = true, v })
	case fn == "mean":
		if err = merge(model.AggSum, func(c *cell, v float64) { c.sum += v }); err == nil {
			err = merge(model.AggCount, func(c *cell, v float64) { c.ok = c.ok || v > 0; c.n += v })
		}
		for k := range cs {
			if cs[k].ok {
				cs[k].v = cs[k].sum / cs[k].n
			}
		}
	case fn == "sum", fn == "count":
		agg, _ := model.ParseAgg(fn)
		err = merge(agg, func(c *cell, v float64) { c.ok, c.v = true, c.v+v })
	case fn == "min":
		err = merge(model.AggMin, func(c *cell, v float64) {
			if !c.ok || v < c.v {
				c.ok, c.v = true, v
			}
		})
	case fn == "max":
		err = merge(model.AggMax, func(c *cell, v float64) {
			if !c.ok || v > c.v {
				c.ok, c.v = true, v
			}
		})
	case fn == "spread":
		err = merge(model.AggMin, func(c *cell, v float64) {
			if !c.ok || v < c.lo {
				c.ok, c.lo = true, v
			}
		})
		if err == nil {
			err = merge(model.AggMax, func(c *cell, v float64) {
				if c.n == 0 || v > c.hi {
					c.n, c.hi = 1, v
				}
			})
		}
		for k := range cs {
			if cs[k].ok {
				cs[k].v = cs[k].hi - cs[k].lo
			}
		}
	default:
		return nil, fmt.Errorf("function %s() over several series not supported", fn)
	}
	return cs, err
}

// aggTag reads one aggregate of one tag for every bucket: the whole
// buckets in one store call, the partial first and last bucket (cut by the
// time range) each in their own.
func (e *run) aggTag(tag string, wd windows, agg model.Agg) ([]store.Bucket, error) {
	out := make([]store.Bucket, wd.n)
	one := func(k int, lo, hi int64) error {
		if lo >= hi {
			return nil
		}
		bs, err := e.st.Aggregate(tag, lo, hi, 1, agg)
		if err != nil {
			return err
		}
		out[k] = bs[0]
		return nil
	}
	var err error
	if wd.w == 0 {
		err = one(0, wd.from, wd.to)
	} else {
		kLo, kHi := 0, wd.n
		if wd.from > wd.b0 {
			kLo = 1
			err = one(0, wd.from, min(wd.b0+wd.w, wd.to))
		}
		if err == nil && wd.to < wd.start(wd.n) && kHi > kLo {
			kHi = wd.n - 1
			err = one(wd.n-1, wd.start(wd.n-1), wd.to)
		}
		if err == nil && kHi > kLo {
			var bs []store.Bucket
			bs, err = e.st.Aggregate(tag, wd.start(kLo), wd.start(kHi), kHi-kLo, agg)
			copy(out[kLo:], bs)
		}
	}
	if errors.Is(err, store.ErrUnknownTag) {
		// The catalog knows a tag the store has not stored yet.
		return make([]store.Bucket, wd.n), nil
	}
	if err != nil {
		return nil, &StoreError{Err: err}
	}
	return out, nil
}

// firstTime returns the time of the earliest sample before to among the
// series.
func (e *run) firstTime(series []Series, to int64) (int64, error) {
	first, found := int64(0), false
	from, _ := msRange(MinTime, MaxTime)
	for _, se := range series {
		smp, err := e.st.Raw(se.Tag, from, to, 1)
		if errors.Is(err, store.ErrUnknownTag) {
			continue
		} else if err != nil {
			return 0, &StoreError{Err: err}
		}
		if len(smp) > 0 && (!found || smp[0].T < first) {
			first, found = smp[0].T, true
		}
	}
	if !found {
		return 0, errNoData
	}
	return first, nil
}

// mulDivCeil returns ceil(a*b/c) for a*b/c < 2^63.
func mulDivCeil(a, b, c uint64) int64 {
	hi, lo := bits.Mul64(a, b)
	q, r := bits.Div64(hi, lo, c)
	if r != 0 {
		q++
	}
	return int64(q)
}
