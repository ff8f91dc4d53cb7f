package promapi

import (
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// hasSubquery reports whether expr holds a subquery.
func hasSubquery(expr parser.Expr) bool {
	found := false
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if _, ok := n.(*parser.SubqueryExpr); ok {
			found = true
		}
		return nil
	})
	return found
}

// rewriteCounts turns count_over_time(sel[r]) into
// sum_over_time(sel{__pith_count__=""}[r]): the marked selector's series
// carry, per window, the sample count from the rollups (or 1 per raw
// sample), so the sum is the count and the rollups can answer it. A
// synthetic sample cannot stand for a count any other way: the engine
// counts samples, not values. It reports whether expr changed.
func rewriteCounts(expr parser.Expr) bool {
	changed := false
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		call, ok := n.(*parser.Call)
		if !ok || call.Func.Name != "count_over_time" || len(call.Args) != 1 {
			return nil
		}
		ms, ok := call.Args[0].(*parser.MatrixSelector)
		if !ok {
			return nil
		}
		vs, ok := ms.VectorSelector.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		call.Func = parser.Functions["sum_over_time"]
		// An equality matcher with the empty value matches every series,
		// which lack the label; the querier drops it after noting it.
		vs.LabelMatchers = append(vs.LabelMatchers, labels.MustNewMatcher(labels.MatchEqual, countLabel, ""))
		changed = true
		return nil
	})
	return changed
}
