package influxql

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ParseError is a query that is not InfluxQL (or not the part Pith
// reads): the whole request is refused, as InfluxDB does, with HTTP 400.
type ParseError struct {
	Msg   string
	Pos   int // byte offset in the query
	src   string
	noPos bool // InfluxDB's message names no position
}

func (e *ParseError) Error() string {
	if e.noPos {
		return e.Msg
	}
	line, char := 1, 1
	for i := 0; i < e.Pos; i++ {
		if i < len(e.src) && e.src[i] == '\n' {
			line, char = line+1, 1
		} else {
			char++
		}
	}
	return fmt.Sprintf("%s at line %d, char %d", e.Msg, line, char)
}

// UnsupportedError is a statement InfluxDB would run but Pith does not:
// it is refused on its own (its result carries the error) and the other
// statements of the request are answered.
type UnsupportedError struct{ Msg string }

func (e *UnsupportedError) Error() string { return e.Msg }

// MaxQueryBytes bounds the length of one query string.
const MaxQueryBytes = 1 << 20

// Parse reads the statements of q, separated by semicolons. now is the
// time now() stands for in every statement.
func Parse(q string, now time.Time) ([]Statement, error) {
	if len(q) > MaxQueryBytes {
		return nil, &ParseError{Msg: fmt.Sprintf("query is %d bytes, more than %d", len(q), MaxQueryBytes), src: q}
	}
	p := &parser{lx: lexer{src: q}, now: now.UnixNano()}
	var out []Statement
	for {
		for p.peek().kind == tSemicolon {
			p.scan()
		}
		if p.peek().kind == tEOF {
			break
		}
		st, err := p.statement()
		if err != nil {
			var ue *UnsupportedError
			if !errors.As(err, &ue) {
				return nil, err
			}
			p.skipStatement()
			st = &unsupportedStatement{what: ue.Msg}
		}
		out = append(out, st)
		if t := p.peek(); t.kind != tSemicolon && t.kind != tEOF {
			return nil, p.expected(t, ";")
		}
	}
	if len(out) == 0 {
		return nil, &ParseError{Msg: "found EOF, expected SELECT, SHOW, CREATE", src: q}
	}
	return out, nil
}

// parser reads tokens with one token of lookahead.
type parser struct {
	lx     lexer
	buf    token
	hasBuf bool
	now    int64
}

func (p *parser) scan() token {
	if p.hasBuf {
		p.hasBuf = false
		return p.buf
	}
	return p.lx.next()
}

func (p *parser) peek() token {
	if !p.hasBuf {
		p.buf, p.hasBuf = p.lx.next(), true
	}
	return p.buf
}

// regex reads a regular expression literal where the grammar expects one.
func (p *parser) regex() (token, bool) {
	if p.hasBuf {
		// The buffered token was read as something else: go back to it.
		p.lx.pos, p.hasBuf = p.buf.pos, false
	}
	return p.lx.scanRegex()
}

func (p *parser) errAt(pos int, format string, args ...any) *ParseError {
	return &ParseError{Msg: fmt.Sprintf(format, args...), Pos: pos, src: p.lx.src}
}

func (p *parser) expected(t token, what string) *ParseError {
	if t.kind == tIllegal {
		return p.errAt(t.pos, "found %s, expected %s", t.text, what)
	}
	return p.errAt(t.pos, "found %s, expected %s", t.describe(), what)
}

// keyword consumes the keyword kw or fails.
func (p *parser) keyword(kw string) error {
	if t := p.scan(); !t.is(kw) {
		return p.expected(t, strings.ToUpper(kw))
	}
	return nil
}

// accept consumes the keyword kw when it is next.
func (p *parser) accept(kw string) bool {
	if p.peek().is(kw) {
		p.scan()
		return true
	}
	return false
}

// skipStatement moves to the semicolon or end that closes the statement.
func (p *parser) skipStatement() {
	for {
		if t := p.peek(); t.kind == tSemicolon || t.kind == tEOF {
			return
		}
		p.scan()
	}
}

// unsupportedKeywords start statements InfluxDB knows and Pith refuses.
var unsupportedKeywords = []string{"DROP", "DELETE", "ALTER", "GRANT", "REVOKE", "KILL", "EXPLAIN", "INSERT", "SET"}

func (p *parser) statement() (Statement, error) {
	t := p.peek()
	switch {
	case t.is("SELECT"):
		return p.selectStatement()
	case t.is("SHOW"):
		return p.showStatement()
	case t.is("CREATE"):
		p.scan()
		if p.accept("DATABASE") {
			if n := p.scan(); n.kind != tIdent {
				return nil, p.expected(n, "identifier")
			}
			p.skipStatement() // WITH DURATION ... is accepted and ignored
			return &CreateDatabaseStatement{}, nil
		}
		return nil, &UnsupportedError{"only CREATE DATABASE is accepted by Pith (it has one namespace)"}
	}
	for _, kw := range unsupportedKeywords {
		if t.is(kw) {
			return nil, &UnsupportedError{fmt.Sprintf("%s statements are not supported by Pith", kw)}
		}
	}
	return nil, p.expected(t, "SELECT, DELETE, SHOW, CREATE, DROP, EXPLAIN, GRANT, REVOKE, ALTER, SET, KILL")
}

// supportedFuncs are the functions Pith answers; knownFuncs the others
// InfluxDB has, refused with a clearer message than "undefined".
var (
	supportedFuncs = map[string]bool{"mean": true, "min": true, "max": true, "sum": true, "count": true,
		"first": true, "last": true, "spread": true, "median": true}
	knownFuncs = map[string]bool{"distinct": true, "integral": true, "mode": true, "stddev": true,
		"bottom": true, "percentile": true, "sample": true, "top": true, "abs": true, "acos": true,
		"asin": true, "atan": true, "atan2": true, "ceil": true, "cos": true, "cumulative_sum": true,
		"derivative": true, "difference": true, "elapsed": true, "exp": true, "floor": true,
		"histogram": true, "ln": true, "log": true, "log2": true, "log10": true, "moving_average": true,
		"non_negative_derivative": true, "non_negative_difference": true, "pow": true, "round": true,
		"sin": true, "sqrt": true, "tan": true, "holt_winters": true, "holt_winters_with_fit": true,
		"chande_momentum_oscillator": true, "exponential_moving_average": true, "kaufmans_efficiency_ratio": true,
		"kaufmans_adaptive_moving_average": true, "triple_exponential_moving_average": true,
		"triple_exponential_derivative": true, "relative_strength_index": true, "double_exponential_moving_average": true}
)

func (p *parser) selectStatement() (Statement, error) {
	p.scan() // SELECT
	s := &SelectStatement{Start: MinTime, End: MaxTime, Now: p.now}
	for {
		f, err := p.selectField()
		if err != nil {
			return nil, err
		}
		s.Fields = append(s.Fields, f)
		if p.peek().kind != tComma {
			break
		}
		p.scan()
	}
	if p.peek().is("INTO") {
		return nil, &UnsupportedError{"SELECT ... INTO is not supported by Pith"}
	}
	if err := p.keyword("FROM"); err != nil {
		return nil, err
	}
	if err := p.sources(s); err != nil {
		return nil, err
	}
	if p.accept("WHERE") {
		cond, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		if s.Cond, err = s.splitTime(cond); err != nil {
			return nil, err
		}
	}
	if p.accept("GROUP") {
		if err := p.keyword("BY"); err != nil {
			return nil, err
		}
		if err := p.groupBy(s); err != nil {
			return nil, err
		}
	}
	if p.accept("FILL") {
		if err := p.fill(s); err != nil {
			return nil, err
		}
	}
	if p.accept("ORDER") {
		if err := p.keyword("BY"); err != nil {
			return nil, err
		}
		if t := p.scan(); !t.is("time") {
			return nil, p.expected(t, "time")
		}
		if p.accept("DESC") {
			s.Desc = true
		} else {
			p.accept("ASC")
		}
	}
	for _, lim := range []struct {
		kw  string
		dst *int
	}{{"LIMIT", &s.Limit}, {"OFFSET", &s.OffsetRows}, {"SLIMIT", &s.SLimit}, {"SOFFSET", &s.SOffset}} {
		if p.accept(lim.kw) {
			n, err := p.count()
			if err != nil {
				return nil, err
			}
			*lim.dst = n
		}
	}
	if p.peek().is("tz") {
		return nil, &UnsupportedError{"tz() is not supported by Pith: buckets are aligned in UTC"}
	}
	return s, s.check()
}

// selectField reads one column: f(key), key, or *, with an optional alias.
func (p *parser) selectField() (SelectField, error) {
	var f SelectField
	t := p.scan()
	switch {
	case t.kind == tMul:
		f.Wildcard = true
	case t.kind == tIdent && p.peek().kind == tLParen && !t.quoted:
		p.scan()
		name := strings.ToLower(t.text)
		if !supportedFuncs[name] {
			if knownFuncs[name] {
				return f, &UnsupportedError{fmt.Sprintf("function %s() is not supported by Pith", name)}
			}
			return f, &UnsupportedError{fmt.Sprintf("undefined function %s()", name)}
		}
		f.Func = name
		a := p.scan()
		switch {
		case a.kind == tMul:
			f.Wildcard = true
		case a.kind == tIdent:
			f.Arg = a.text
			p.cast()
		case a.kind == tRParen:
			return f, &UnsupportedError{fmt.Sprintf("invalid number of arguments for %s, expected 1, got 0", name)}
		case a.is("distinct") || a.kind == tDiv || a.kind == tLParen:
			return f, &UnsupportedError{fmt.Sprintf("%s() over an expression is not supported by Pith", name)}
		default:
			return f, p.expected(a, "field key")
		}
		if n := p.scan(); n.kind != tRParen {
			if n.kind == tComma {
				return f, &UnsupportedError{fmt.Sprintf("invalid number of arguments for %s, expected 1", name)}
			}
			return f, p.expected(n, ")")
		}
	case t.kind == tIdent:
		f.Arg = t.text
		p.cast()
	case t.kind == tInteger || t.kind == tNumber || t.kind == tString || t.kind == tLParen:
		return f, &UnsupportedError{"expressions in SELECT are not supported by Pith"}
	default:
		return f, p.expected(t, "identifier, string, number, bool")
	}
	switch p.peek().kind {
	case tPlus, tMinus, tMul, tDiv:
		return f, &UnsupportedError{"arithmetic in SELECT is not supported by Pith"}
	}
	if p.accept("AS") {
		a := p.scan()
		if a.kind != tIdent {
			return f, p.expected(a, "identifier")
		}
		f.Alias = a.text
	}
	return f, nil
}

// cast skips a ::field or ::tag type hint.
func (p *parser) cast() {
	if p.peek().kind != tColon {
		return
	}
	p.scan()
	if p.peek().kind == tColon {
		p.scan()
		if p.peek().kind == tIdent {
			p.scan()
		}
	}
}

// measurement reads a source: m, rp.m, db.rp.m or db..m, or a regular
// expression in their place; the database and retention policy are
// ignored (Pith has one of each).
func (p *parser) measurement() (string, *regexp.Regexp, error) {
	t := p.peek()
	if t.kind == tLParen {
		return "", nil, &UnsupportedError{"subqueries are not supported by Pith"}
	}
	if t.kind == tDiv {
		return p.measurementRegex()
	}
	p.scan()
	if t.kind != tIdent {
		return "", nil, p.expected(t, "identifier")
	}
	name := t.text
	for p.peek().kind == tDot {
		p.scan()
		if p.peek().kind == tDot {
			continue
		}
		if p.peek().kind == tDiv {
			return p.measurementRegex()
		}
		n := p.scan()
		if n.kind != tIdent {
			return "", nil, p.expected(n, "identifier")
		}
		name = n.text
	}
	return name, nil, nil
}

func (p *parser) measurementRegex() (string, *regexp.Regexp, error) {
	t, ok := p.regex()
	if !ok {
		return "", nil, p.expected(p.peek(), "regex")
	}
	re, err := regexp.Compile(t.text)
	if err != nil {
		return "", nil, p.errAt(t.pos, "invalid regular expression: %v", err)
	}
	return "", re, nil
}

// sources reads the FROM list of a SELECT: one measurement, several, or
// one regular expression.
func (p *parser) sources(s *SelectStatement) error {
	var names []string
	for {
		m, re, err := p.measurement()
		if err != nil {
			return err
		}
		if re != nil {
			if names != nil || p.peek().kind == tComma {
				return &UnsupportedError{"a regular expression beside other sources in FROM is not supported by Pith"}
			}
			s.Sources = &NameMatch{Regex: re}
			return nil
		}
		names = append(names, m)
		if p.peek().kind != tComma {
			break
		}
		p.scan()
	}
	if len(names) == 1 {
		s.Measurement = names[0]
	} else {
		s.Sources = &NameMatch{Names: names}
	}
	return nil
}

func (p *parser) groupBy(s *SelectStatement) error {
	for {
		t := p.scan()
		switch {
		case t.is("time") && p.peek().kind == tLParen:
			p.scan()
			d, err := p.duration()
			if err != nil {
				return err
			}
			if d <= 0 {
				return p.errAt(t.pos, "time dimension must have a positive duration")
			}
			s.Interval = d
			if p.peek().kind == tComma {
				p.scan()
				neg := false
				if p.peek().kind == tMinus {
					p.scan()
					neg = true
				}
				if p.peek().is("now") {
					return &UnsupportedError{"GROUP BY time() with a now() offset is not supported by Pith"}
				}
				o, err := p.duration()
				if err != nil {
					return err
				}
				if neg {
					o = -o
				}
				s.Offset = o
			}
			if n := p.scan(); n.kind != tRParen {
				return p.expected(n, ")")
			}
		case t.kind == tMul:
			s.GroupAll = true
		case t.kind == tIdent:
			s.GroupBy = append(s.GroupBy, t.text)
			p.cast()
		case t.kind == tDiv:
			return &UnsupportedError{"GROUP BY a regular expression is not supported by Pith"}
		default:
			return p.expected(t, "identifier, time(), *")
		}
		if p.peek().kind != tComma {
			return nil
		}
		p.scan()
	}
}

func (p *parser) fill(s *SelectStatement) error {
	if t := p.scan(); t.kind != tLParen {
		return p.expected(t, "(")
	}
	t := p.scan()
	neg := false
	if t.kind == tMinus {
		neg, t = true, p.scan()
	}
	switch {
	case t.is("null") && !neg:
		s.Fill = FillNull
	case t.is("none") && !neg:
		s.Fill = FillNone
	case t.is("previous") && !neg:
		s.Fill = FillPrevious
	case t.is("linear") && !neg:
		s.Fill = FillLinear
	case t.kind == tInteger || t.kind == tNumber:
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(v, 0) {
			return p.errAt(t.pos, "unable to parse number %s", t.text)
		}
		if neg {
			v = -v
		}
		s.Fill, s.FillValue = FillValue, v
	default:
		return &ParseError{Msg: "expected number argument in fill()", src: p.lx.src, noPos: true}
	}
	if t := p.scan(); t.kind != tRParen {
		return p.expected(t, ")")
	}
	return nil
}

// count reads the non-negative integer of LIMIT and OFFSET.
func (p *parser) count() (int, error) {
	t := p.scan()
	if t.kind != tInteger {
		return 0, p.expected(t, "integer")
	}
	n, err := strconv.Atoi(t.text)
	if err != nil || n > math.MaxInt32 {
		return 0, p.errAt(t.pos, "unable to parse integer %s", t.text)
	}
	return n, nil
}

// duration reads a duration literal.
func (p *parser) duration() (int64, error) {
	t := p.scan()
	if t.kind != tDuration {
		return 0, p.expected(t, "duration")
	}
	d, err := parseDuration(t.text)
	if err != nil {
		return 0, p.errAt(t.pos, "%v", err)
	}
	return d, nil
}

// unitNanos are the nanoseconds of each duration unit.
var unitNanos = map[string]int64{"ns": 1, "u": 1e3, "us": 1e3, "µ": 1e3, "µs": 1e3, "ms": 1e6,
	"s": 1e9, "m": 60e9, "h": 3600e9, "d": 86400e9, "w": 7 * 86400e9}

// parseDuration reads an InfluxQL duration literal (an integer and a
// unit) in nanoseconds, refusing one that overflows int64.
func parseDuration(s string) (int64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	mul, ok := unitNanos[s[i:]]
	if i == 0 || !ok {
		return 0, fmt.Errorf("invalid duration %s", s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || n > math.MaxInt64/mul {
		return 0, fmt.Errorf("overflowed duration %s: choose a smaller duration or use a larger unit", s)
	}
	return n * mul, nil
}

// check refuses what parses but has no meaning.
func (s *SelectStatement) check() error {
	agg, raw := false, false
	for _, f := range s.Fields {
		if f.Func != "" {
			agg = true
		} else {
			raw = true
		}
	}
	if agg && raw {
		return &UnsupportedError{"mixing aggregate and non-aggregate queries is not supported"}
	}
	if raw && s.Interval > 0 {
		return &UnsupportedError{"GROUP BY requires at least one aggregate function"}
	}
	if agg {
		for _, f := range s.Fields {
			if f.Wildcard {
				return &UnsupportedError{fmt.Sprintf("%s(*) is not supported by Pith: name the field", f.Func)}
			}
		}
	}
	return nil
}
