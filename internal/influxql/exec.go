package influxql

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Options bound what one statement may cost.
type Options struct {
	// MaxRawSamples is the number of raw samples one statement may read:
	// raw SELECTs, median(), first()/last() over several series and
	// functions under a field condition are answered from raw samples,
	// everything else from the rollups.
	MaxRawSamples int
	// MaxBuckets is the number of buckets (GROUP BY time() intervals times
	// series) one statement may compute.
	MaxBuckets int
	// Budget, when set, is the memory budget every request reserves what
	// it holds from; one that does not fit now is answered 503.
	Budget Reserver
}

// DefaultOptions returns the limits of /query.
func DefaultOptions() Options {
	return Options{MaxRawSamples: 1_000_000, MaxBuckets: 1_000_000}
}

// Engine executes statements against a store through a catalog. It is
// safe for concurrent use.
type Engine struct {
	st   Store
	cat  Catalog
	opts Options
}

// NewEngine returns an engine reading st, naming series through cat.
func NewEngine(st Store, cat Catalog, opts Options) *Engine {
	def := DefaultOptions()
	if opts.MaxRawSamples <= 0 {
		opts.MaxRawSamples = def.MaxRawSamples
	}
	if opts.MaxBuckets <= 0 {
		opts.MaxBuckets = def.MaxBuckets
	}
	return &Engine{st: st, cat: cat, opts: opts}
}

// Answer is the result of a request's statements. Release returns the
// memory they reserved once the answer is written.
type Answer struct {
	Results []Result
	// Busy is set when a statement was refused because the memory budget
	// is full now; the statements after it were not run.
	Busy bool
	// Failed is the store's failure (not the query's) that stopped a
	// statement; the statements after it were not run.
	Failed error
	run    *run
}

// Release returns the memory the statements reserved.
func (a *Answer) Release() { a.run.release() }

// Execute answers every statement, each on its own: a refused statement
// carries its error and the others are still answered.
func (e *Engine) Execute(ctx context.Context, stmts []Statement) *Answer {
	a := &Answer{Results: make([]Result, len(stmts)), run: &run{Engine: e, budget: e.opts.Budget}}
	for i, s := range stmts {
		out := &a.Results[i]
		out.StatementID = i
		if err := ctx.Err(); err != nil {
			out.Err = "query interrupted: " + err.Error()
			continue
		}
		rows, err := a.run.execute(ctx, s)
		if errors.Is(err, errBusy{}) {
			a.Busy = true
			out.Err = err.Error()
			break
		}
		var se *StoreError
		if errors.As(err, &se) {
			a.Failed = se.Err
			out.Err = err.Error()
			break
		}
		if err != nil {
			out.Err = err.Error()
			continue
		}
		out.Series = rows
	}
	return a
}

// StoreError is a failure of the store (not of the query), which the
// handler answers with a server error status.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

func (e *run) execute(ctx context.Context, s Statement) ([]Row, error) {
	switch s := s.(type) {
	case *SelectStatement:
		return e.selectRows(ctx, s)
	case *ShowMeasurementsStatement:
		return e.showMeasurements(s)
	case *ShowTagKeysStatement:
		return e.showTagKeys(s)
	case *ShowTagValuesStatement:
		return e.showTagValues(s)
	case *ShowFieldKeysStatement:
		return e.showFieldKeys(s)
	case *ShowSeriesStatement:
		return e.showSeries(s)
	case *ShowDatabasesStatement:
		return []Row{{Name: "databases", Columns: []string{"name"}, Values: [][]Value{{stringV("pith")}}}}, nil
	case *ShowRetentionPoliciesStatement:
		return []Row{{Columns: []string{"name", "duration", "shardGroupDuration", "replicaN", "default"},
			Values: [][]Value{{stringV("autogen"), stringV("0s"), stringV("168h0m0s"), intV(1), boolV(true)}}}}, nil
	case *CreateDatabaseStatement:
		return nil, nil
	case *unsupportedStatement:
		return nil, errors.New(s.what)
	}
	return nil, fmt.Errorf("statement %T not supported", s)
}

// window applies LIMIT and OFFSET to n items: the [lo, hi) to keep.
func window(n, limit, off int) (int, int) {
	lo := min(off, n)
	hi := n
	if limit > 0 && lo+limit < hi {
		hi = lo + limit
	}
	return lo, hi
}

// measurementsOf returns the measurements a FROM selects (all without one).
func (e *run) measurementsOf(from *NameMatch) []string {
	if from != nil && from.Regex == nil && !from.Not {
		out := append([]string(nil), from.Names...)
		sort.Strings(out)
		return out
	}
	var out []string
	for _, m := range e.snapshot().Measurements() {
		if from.Match(m) {
			out = append(out, m)
		}
	}
	return out
}

// matching returns the series of m that satisfy cond.
func (e *run) matching(m string, cond Expr) ([]Series, error) {
	all := e.snapshot().Series(m)
	if cond == nil {
		return all, nil
	}
	if err := e.checkCond(all, cond); err != nil {
		return nil, err
	}
	var out []Series
	for i := range all {
		ok, err := matchCond(cond, &all[i])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// checkCond refuses a condition on field values where only tags can be
// compared (SHOW statements; SELECT takes them apart first).
func (e *run) checkCond(all []Series, cond Expr) error {
	for _, k := range condKeys(cond, nil) {
		tag, field := false, false
		for i := range all {
			if all[i].has(k) {
				tag = true
				break
			}
			if all[i].Field == k {
				field = true
			}
		}
		if field && !tag {
			return &UnsupportedError{fmt.Sprintf("conditions on field values (%q) are not supported here: filter on tags", k)}
		}
	}
	return nil
}

func (e *run) showMeasurements(s *ShowMeasurementsStatement) ([]Row, error) {
	var names []string
	for _, m := range e.snapshot().Measurements() {
		if !s.Match.Match(m) {
			continue
		}
		if s.Cond != nil {
			ss, err := e.matching(m, s.Cond)
			if err != nil {
				return nil, err
			}
			if len(ss) == 0 {
				continue
			}
		}
		names = append(names, m)
	}
	lo, hi := window(len(names), s.Limit, s.Off)
	if lo >= hi {
		return nil, nil
	}
	row := Row{Name: "measurements", Columns: []string{"name"}}
	for _, n := range names[lo:hi] {
		row.Values = append(row.Values, []Value{stringV(n)})
	}
	return []Row{row}, nil
}

func (e *run) showTagKeys(s *ShowTagKeysStatement) ([]Row, error) {
	var rows []Row
	for _, m := range e.measurementsOf(s.From) {
		ss, err := e.matching(m, s.Cond)
		if err != nil {
			return nil, err
		}
		set := map[string]bool{}
		for _, se := range ss {
			for _, k := range se.Keys {
				set[k] = true
			}
		}
		keys := sortedKeys(set)
		lo, hi := window(len(keys), s.Limit, s.Off)
		if lo >= hi {
			continue
		}
		row := Row{Name: m, Columns: []string{"tagKey"}}
		for _, k := range keys[lo:hi] {
			row.Values = append(row.Values, []Value{stringV(k)})
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (e *run) showTagValues(s *ShowTagValuesStatement) ([]Row, error) {
	var rows []Row
	for _, m := range e.measurementsOf(s.From) {
		ss, err := e.matching(m, s.Cond)
		if err != nil {
			return nil, err
		}
		type kv struct{ k, v string }
		set := map[kv]bool{}
		for _, se := range ss {
			for i, k := range se.Keys {
				if s.Key.Match(k) {
					set[kv{k, se.Values[i]}] = true
				}
			}
		}
		pairs := make([]kv, 0, len(set))
		for p := range set {
			pairs = append(pairs, p)
		}
		sort.Slice(pairs, func(i, j int) bool {
			if pairs[i].k != pairs[j].k {
				return pairs[i].k < pairs[j].k
			}
			return pairs[i].v < pairs[j].v
		})
		lo, hi := window(len(pairs), s.Limit, s.Off)
		if lo >= hi {
			continue
		}
		row := Row{Name: m, Columns: []string{"key", "value"}}
		for _, p := range pairs[lo:hi] {
			row.Values = append(row.Values, []Value{stringV(p.k), stringV(p.v)})
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (e *run) showFieldKeys(s *ShowFieldKeysStatement) ([]Row, error) {
	var rows []Row
	for _, m := range e.measurementsOf(s.From) {
		set := map[string]bool{}
		for _, se := range e.snapshot().Series(m) {
			set[se.Field] = true
		}
		fields := sortedKeys(set)
		lo, hi := window(len(fields), s.Limit, s.Off)
		if lo >= hi {
			continue
		}
		row := Row{Name: m, Columns: []string{"fieldKey", "fieldType"}}
		for _, f := range fields[lo:hi] {
			row.Values = append(row.Values, []Value{stringV(f), stringV("float")})
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (e *run) showSeries(s *ShowSeriesStatement) ([]Row, error) {
	var keys []string
	for _, m := range e.measurementsOf(s.From) {
		ss, err := e.matching(m, s.Cond)
		if err != nil {
			return nil, err
		}
		set := map[string]bool{}
		for _, se := range ss {
			var b strings.Builder
			b.WriteString(escapeMeasurement(m))
			for i, k := range se.Keys {
				b.WriteByte(',')
				b.WriteString(escapeTag(k))
				b.WriteByte('=')
				b.WriteString(escapeTag(se.Values[i]))
			}
			set[b.String()] = true
		}
		keys = append(keys, sortedKeys(set)...)
	}
	lo, hi := window(len(keys), s.Limit, s.Off)
	if lo >= hi {
		return nil, nil
	}
	row := Row{Columns: []string{"key"}}
	for _, k := range keys[lo:hi] {
		row.Values = append(row.Values, []Value{stringV(k)})
	}
	return []Row{row}, nil
}

// escapeMeasurement escapes a measurement name as line protocol does.
func escapeMeasurement(s string) string {
	return strings.NewReplacer(",", `\,`, " ", `\ `).Replace(s)
}
