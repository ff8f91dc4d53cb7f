package influxql

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// binop returns the operator a token stands for between two operands and
// its precedence (0 when it is none).
func binop(t token) (tok, int) {
	switch {
	case t.is("OR"):
		return tOr, 1
	case t.is("AND"):
		return tAnd, 2
	}
	switch t.kind {
	case tEq, tNeq, tLt, tLte, tGt, tGte, tEqRegex, tNeqRegex:
		return t.kind, 3
	case tPlus, tMinus:
		return t.kind, 4
	case tMul, tDiv:
		return t.kind, 5
	}
	return 0, 0
}

// maxExprDepth bounds the nesting of a condition, so a hostile query
// cannot exhaust the stack.
const maxExprDepth = 256

// expr reads a condition by precedence climbing; operators of the same
// precedence group to the left.
func (p *parser) expr(minPrec int) (Expr, error) {
	return p.exprDepth(minPrec, 0)
}

func (p *parser) exprDepth(minPrec, depth int) (Expr, error) {
	if depth > maxExprDepth {
		return nil, p.errAt(p.peek().pos, "condition nested too deeply")
	}
	lhs, err := p.operand(depth)
	if err != nil {
		return nil, err
	}
	for {
		op, prec := binop(p.peek())
		if prec == 0 || prec <= minPrec {
			return lhs, nil
		}
		p.scan()
		var rhs Expr
		if op == tEqRegex || op == tNeqRegex {
			t, ok := p.regex()
			if !ok {
				return nil, p.expected(p.peek(), "regex")
			}
			re, err := regexp.Compile(t.text)
			if err != nil {
				return nil, p.errAt(t.pos, "invalid regular expression: %v", err)
			}
			rhs = &RegexLit{Re: re}
		} else if rhs, err = p.exprDepth(prec, depth+1); err != nil {
			return nil, err
		}
		lhs = &BinaryExpr{Op: op, LHS: lhs, RHS: rhs}
	}
}

func (p *parser) operand(depth int) (Expr, error) {
	t := p.scan()
	switch t.kind {
	case tIdent:
		switch {
		case t.is("now") && p.peek().kind == tLParen:
			p.scan()
			if n := p.scan(); n.kind != tRParen {
				return nil, p.expected(n, ")")
			}
			return &CallExpr{Name: "now"}, nil
		case t.is("true"):
			return &BoolLit{Val: true}, nil
		case t.is("false"):
			return &BoolLit{Val: false}, nil
		case p.peek().kind == tLParen && !t.quoted:
			return nil, &UnsupportedError{fmt.Sprintf("function %s() in WHERE is not supported by Pith", strings.ToLower(t.text))}
		}
		p.cast()
		return &VarRef{Name: t.text}, nil
	case tString:
		return &StringLit{Val: t.text}, nil
	case tInteger:
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			f, _ := strconv.ParseFloat(t.text, 64)
			return &NumberLit{Val: f}, nil
		}
		return &NumberLit{Val: float64(n), Int: true, IntV: n}, nil
	case tNumber:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, p.errAt(t.pos, "unable to parse number %s", t.text)
		}
		return &NumberLit{Val: f}, nil
	case tDuration:
		d, err := parseDuration(t.text)
		if err != nil {
			return nil, p.errAt(t.pos, "%v", err)
		}
		return &DurationLit{Val: d}, nil
	case tMinus:
		e, err := p.operand(depth + 1)
		if err != nil {
			return nil, err
		}
		switch v := e.(type) {
		case *NumberLit:
			v.Val, v.IntV = -v.Val, -v.IntV
			return v, nil
		case *DurationLit:
			v.Val = -v.Val
			return v, nil
		}
		return nil, p.expected(t, "identifier, string, number, bool")
	case tLParen:
		e, err := p.exprDepth(0, depth+1)
		if err != nil {
			return nil, err
		}
		if n := p.scan(); n.kind != tRParen {
			return nil, p.expected(n, ")")
		}
		return e, nil
	case tDiv:
		return nil, p.expected(t, "identifier, string, number, bool (a regex follows =~ or !~)")
	}
	return nil, p.expected(t, "identifier, string, number, bool")
}

// conjuncts flattens the top-level ANDs of e.
func conjuncts(e Expr, out []Expr) []Expr {
	if b, ok := e.(*BinaryExpr); ok && b.Op == tAnd {
		return conjuncts(b.RHS, conjuncts(b.LHS, out))
	}
	return append(out, e)
}

// refersTime reports whether e mentions the time column.
func refersTime(e Expr) bool {
	switch v := e.(type) {
	case *VarRef:
		return strings.EqualFold(v.Name, "time")
	case *BinaryExpr:
		return refersTime(v.LHS) || refersTime(v.RHS)
	}
	return false
}

// splitTime takes the time comparisons out of cond's top-level ANDs into
// the statement's range and returns what is left: the tag condition.
func (s *SelectStatement) splitTime(cond Expr) (Expr, error) {
	var rest Expr
	for _, c := range conjuncts(cond, nil) {
		if !refersTime(c) {
			if rest == nil {
				rest = c
			} else {
				rest = &BinaryExpr{Op: tAnd, LHS: rest, RHS: c}
			}
			continue
		}
		b, ok := c.(*BinaryExpr)
		if !ok {
			return nil, &UnsupportedError{"invalid time condition"}
		}
		op, other := b.Op, b.RHS
		if v, ok := b.RHS.(*VarRef); ok && strings.EqualFold(v.Name, "time") {
			op, other = flip(op), b.LHS
		} else if v, ok := b.LHS.(*VarRef); !ok || !strings.EqualFold(v.Name, "time") {
			return nil, &UnsupportedError{"time conditions combined with OR or nested in expressions are not supported by Pith"}
		}
		t, err := s.timeValue(other)
		if err != nil {
			return nil, err
		}
		switch op {
		case tGt:
			s.Start = max(s.Start, sat(t, 1))
		case tGte:
			s.Start = max(s.Start, t)
		case tLt:
			s.End, s.HasEnd = min(s.End, sat(t, -1)), true
		case tLte:
			s.End, s.HasEnd = min(s.End, t), true
		case tEq:
			s.Start, s.End, s.HasEnd = max(s.Start, t), min(s.End, t), true
		default:
			return nil, &UnsupportedError{"invalid time comparison operator: " + op.String()}
		}
	}
	return rest, nil
}

// flip mirrors a comparison: a < b is b > a.
func flip(op tok) tok {
	switch op {
	case tLt:
		return tGt
	case tLte:
		return tGte
	case tGt:
		return tLt
	case tGte:
		return tLte
	}
	return op
}

// sat adds d to t, saturating at the time bounds.
func sat(t, d int64) int64 {
	r := t + d
	switch {
	case d > 0 && r < t, r > MaxTime:
		return MaxTime
	case d < 0 && r > t, r < MinTime:
		return MinTime
	}
	return r
}

// timeValue resolves the time side of a comparison to ns: now(), an RFC
// 3339 string, an integer (ns) or duration (since the epoch: Grafana's
// 1700000000000ms), plus or minus durations.
func (s *SelectStatement) timeValue(e Expr) (int64, error) {
	switch v := e.(type) {
	case *CallExpr:
		return s.Now, nil
	case *TimeLit:
		return v.Val, nil
	case *StringLit:
		return parseTime(v.Val)
	case *DurationLit:
		return v.Val, nil
	case *NumberLit:
		if v.Int {
			return v.IntV, nil
		}
		if math.Abs(v.Val) > float64(MaxTime) {
			return 0, &UnsupportedError{"time out of range: " + strconv.FormatFloat(v.Val, 'g', -1, 64)}
		}
		return int64(v.Val), nil
	case *BinaryExpr:
		if v.Op != tPlus && v.Op != tMinus {
			break
		}
		t, err := s.timeValue(v.LHS)
		if err != nil {
			return 0, err
		}
		var d int64
		switch r := v.RHS.(type) {
		case *DurationLit:
			d = r.Val
		case *NumberLit:
			if !r.Int {
				return 0, &UnsupportedError{"invalid time arithmetic: add or subtract a duration"}
			}
			d = r.IntV
		default:
			return 0, &UnsupportedError{"invalid time arithmetic: add or subtract a duration"}
		}
		if v.Op == tMinus {
			d = -d
		}
		r := t + d
		if (d > 0 && r < t) || (d < 0 && r > t) || r > MaxTime || r < MinTime {
			return 0, &UnsupportedError{"time out of range"}
		}
		return r, nil
	}
	return 0, &UnsupportedError{"invalid time condition: compare time with now(), a time string, a number or a duration"}
}

// timeLayouts are the time strings InfluxQL accepts.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02"}

func parseTime(s string) (int64, error) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			if t.Year() < 1678 || t.Year() > 2261 {
				return 0, &UnsupportedError{"time " + strconv.Quote(s) + " out of range"}
			}
			return t.UnixNano(), nil
		}
	}
	return 0, &UnsupportedError{"invalid time string " + strconv.Quote(s) + ": use RFC 3339 (2006-01-02T15:04:05Z)"}
}

// Labels give a series' tag values by key; a missing key reads "".
type Labels interface {
	Get(key string) string
}

// matchCond evaluates a tag condition for one series.
func matchCond(e Expr, l Labels) (bool, error) {
	if e == nil {
		return true, nil
	}
	switch v := e.(type) {
	case *BoolLit:
		return v.Val, nil
	case *BinaryExpr:
		switch v.Op {
		case tAnd, tOr:
			a, err := matchCond(v.LHS, l)
			if err != nil {
				return false, err
			}
			if a == (v.Op == tOr) {
				return a, nil
			}
			return matchCond(v.RHS, l)
		}
		ref, ok := v.LHS.(*VarRef)
		other := v.RHS
		if !ok {
			if ref, ok = v.RHS.(*VarRef); !ok {
				return false, &UnsupportedError{"conditions must compare a tag key with a value"}
			}
			other = v.LHS
		}
		got := l.Get(ref.Name)
		switch v.Op {
		case tEq, tNeq:
			var want string
			switch o := other.(type) {
			case *StringLit:
				want = o.Val
			case *NumberLit:
				want = strconv.FormatFloat(o.Val, 'f', -1, 64)
			case *BoolLit:
				want = strconv.FormatBool(o.Val)
			default:
				return false, &UnsupportedError{"tag " + strconv.Quote(ref.Name) + " must be compared with a string"}
			}
			return (got == want) == (v.Op == tEq), nil
		case tEqRegex, tNeqRegex:
			re, ok := other.(*RegexLit)
			if !ok {
				return false, &UnsupportedError{"=~ and !~ need a regular expression"}
			}
			return re.Re.MatchString(got) == (v.Op == tEqRegex), nil
		}
		return false, &UnsupportedError{"tag conditions support =, !=, =~ and !~, not " + v.Op.String()}
	}
	return false, &UnsupportedError{"conditions must compare a tag key with a value"}
}

// condKeys appends the keys a condition mentions.
func condKeys(e Expr, out []string) []string {
	switch v := e.(type) {
	case *VarRef:
		return append(out, v.Name)
	case *BinaryExpr:
		return condKeys(v.RHS, condKeys(v.LHS, out))
	}
	return out
}
