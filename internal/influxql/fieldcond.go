package influxql

import (
	"fmt"
	"math"
)

// splitFieldCond separates the conjuncts of a SELECT's condition that
// compare field values (`"temp" > 20`) from the tag conditions. A
// conjunct mixing tags and fields is refused. fields and tags are the
// measurement's keys.
func splitFieldCond(cond Expr, fields, tags map[string]bool) (tagCond, fieldCond Expr, err error) {
	and := func(a, b Expr) Expr {
		if a == nil {
			return b
		}
		return &BinaryExpr{Op: tAnd, LHS: a, RHS: b}
	}
	for _, c := range conjuncts(cond, nil) {
		onFields, onTags := false, false
		for _, k := range condKeys(c, nil) {
			if fields[k] && !tags[k] {
				onFields = true
			} else {
				onTags = true
			}
		}
		switch {
		case onFields && onTags:
			return nil, nil, &UnsupportedError{"a condition mixing tags and field values with OR is not supported by Pith"}
		case onFields:
			fieldCond = and(fieldCond, c)
		default:
			tagCond = and(tagCond, c)
		}
	}
	return tagCond, fieldCond, nil
}

// fieldKeys returns the distinct field keys a field condition compares.
func fieldKeys(e Expr) []string {
	set := map[string]bool{}
	for _, k := range condKeys(e, nil) {
		set[k] = true
	}
	return sortedKeys(set)
}

// matchFields evaluates a field condition on one point: get returns a
// field's value and whether the point has it. A comparison with a missing
// field is false, as in InfluxDB.
func matchFields(e Expr, get func(string) (float64, bool)) (bool, error) {
	b, ok := e.(*BinaryExpr)
	if !ok {
		if l, ok := e.(*BoolLit); ok {
			return l.Val, nil
		}
		return false, &UnsupportedError{"field conditions must compare a field with a number"}
	}
	switch b.Op {
	case tAnd, tOr:
		x, err := matchFields(b.LHS, get)
		if err != nil || x == (b.Op == tOr) {
			return x, err
		}
		return matchFields(b.RHS, get)
	}
	op, ref, lit := b.Op, b.LHS, b.RHS
	if _, ok := ref.(*VarRef); !ok {
		op, ref, lit = flip(op), b.RHS, b.LHS
	}
	r, ok := ref.(*VarRef)
	n, ok2 := lit.(*NumberLit)
	if !ok || !ok2 {
		return false, &UnsupportedError{"field conditions must compare a field with a number"}
	}
	v, has := get(r.Name)
	if !has {
		return false, nil
	}
	switch op {
	case tEq:
		return v == n.Val, nil
	case tNeq:
		return v != n.Val, nil
	case tLt:
		return v < n.Val, nil
	case tLte:
		return v <= n.Val, nil
	case tGt:
		return v > n.Val, nil
	case tGte:
		return v >= n.Val, nil
	}
	return false, &UnsupportedError{fmt.Sprintf("field conditions support =, !=, <, <=, >, >=, not %s", op)}
}

// samplePred turns a condition on one field into a test of its samples.
func samplePred(e Expr, field string) (func(float64) bool, error) {
	// Check the shape once, on a value that reaches every comparison.
	if _, err := matchFields(e, func(string) (float64, bool) { return math.NaN(), true }); err != nil {
		return nil, err
	}
	return func(v float64) bool {
		ok, _ := matchFields(e, func(k string) (float64, bool) { return v, k == field })
		return ok
	}, nil
}
