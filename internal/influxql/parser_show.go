package influxql

import (
	"fmt"
	"regexp"
	"strings"
)

func (p *parser) showStatement() (Statement, error) {
	p.scan() // SHOW
	t := p.scan()
	switch {
	case t.is("MEASUREMENTS"):
		s := &ShowMeasurementsStatement{}
		p.onDatabase()
		if p.accept("WITH") {
			if err := p.keyword("MEASUREMENT"); err != nil {
				return nil, err
			}
			m, err := p.nameMatch(false)
			if err != nil {
				return nil, err
			}
			s.Match = m
		}
		var err error
		if s.Cond, err = p.showWhere(); err != nil {
			return nil, err
		}
		s.Limit, s.Off, err = p.limitOffset()
		return s, err
	case t.is("TAG"):
		n := p.scan()
		switch {
		case n.is("KEYS"):
			s := &ShowTagKeysStatement{}
			p.onDatabase()
			var err error
			if s.From, err = p.showFrom(); err != nil {
				return nil, err
			}
			if s.Cond, err = p.showWhere(); err != nil {
				return nil, err
			}
			s.Limit, s.Off, err = p.limitOffset()
			return s, err
		case n.is("VALUES"):
			s := &ShowTagValuesStatement{}
			p.onDatabase()
			var err error
			if s.From, err = p.showFrom(); err != nil {
				return nil, err
			}
			if err := p.keyword("WITH"); err != nil {
				return nil, err
			}
			if err := p.keyword("KEY"); err != nil {
				return nil, err
			}
			if s.Key, err = p.nameMatch(true); err != nil {
				return nil, err
			}
			if s.Cond, err = p.showWhere(); err != nil {
				return nil, err
			}
			s.Limit, s.Off, err = p.limitOffset()
			return s, err
		}
		return nil, p.expected(n, "KEYS, VALUES")
	case t.is("FIELD"):
		if err := p.keyword("KEYS"); err != nil {
			return nil, err
		}
		s := &ShowFieldKeysStatement{}
		p.onDatabase()
		var err error
		if s.From, err = p.showFrom(); err != nil {
			return nil, err
		}
		s.Limit, s.Off, err = p.limitOffset()
		return s, err
	case t.is("DATABASES"):
		return &ShowDatabasesStatement{}, nil
	case t.is("RETENTION"):
		if err := p.keyword("POLICIES"); err != nil {
			return nil, err
		}
		p.onDatabase()
		return &ShowRetentionPoliciesStatement{}, nil
	case t.is("SERIES"):
		s := &ShowSeriesStatement{}
		p.onDatabase()
		var err error
		if s.From, err = p.showFrom(); err != nil {
			return nil, err
		}
		if s.Cond, err = p.showWhere(); err != nil {
			return nil, err
		}
		s.Limit, s.Off, err = p.limitOffset()
		return s, err
	case t.is("USERS"), t.is("STATS"), t.is("DIAGNOSTICS"), t.is("SHARDS"), t.is("SHARD"),
		t.is("QUERIES"), t.is("CONTINUOUS"), t.is("SUBSCRIPTIONS"), t.is("GRANTS"), t.is("MEASUREMENT"), t.is("TAG"):
		return nil, &UnsupportedError{fmt.Sprintf("SHOW %s is not supported by Pith", strings.ToUpper(t.text))}
	}
	return nil, p.expected(t, "CONTINUOUS, DATABASES, DIAGNOSTICS, FIELD, GRANTS, MEASUREMENTS, QUERIES, RETENTION, SERIES, SHARD, SHARDS, STATS, SUBSCRIPTIONS, TAG, USERS")
}

// onDatabase skips ON db: Pith has one namespace.
func (p *parser) onDatabase() {
	if p.accept("ON") {
		if p.peek().kind == tIdent {
			p.scan()
		}
	}
}

// showFrom reads an optional FROM of a SHOW statement: one measurement
// (rp.m accepted) or a regular expression.
func (p *parser) showFrom() (*NameMatch, error) {
	if !p.accept("FROM") {
		return nil, nil
	}
	var names []string
	for {
		m, re, err := p.measurement()
		if err != nil {
			return nil, err
		}
		if re != nil {
			return &NameMatch{Regex: re}, nil
		}
		names = append(names, m)
		if p.peek().kind != tComma {
			return &NameMatch{Names: names}, nil
		}
		p.scan()
	}
}

// nameMatch reads the operator and operand of WITH MEASUREMENT or WITH
// KEY: = name, != name, =~ /re/, !~ /re/, or (keys only) IN (a, b).
func (p *parser) nameMatch(allowIn bool) (*NameMatch, error) {
	t := p.scan()
	switch {
	case t.kind == tEq || t.kind == tNeq:
		n := p.scan()
		if n.kind != tIdent && n.kind != tString {
			return nil, p.expected(n, "identifier")
		}
		return &NameMatch{Names: []string{n.text}, Not: t.kind == tNeq}, nil
	case t.kind == tEqRegex || t.kind == tNeqRegex:
		r, ok := p.regex()
		if !ok {
			return nil, p.expected(p.peek(), "regex")
		}
		re, err := regexp.Compile(r.text)
		if err != nil {
			return nil, p.errAt(r.pos, "invalid regular expression: %v", err)
		}
		return &NameMatch{Regex: re, Not: t.kind == tNeqRegex}, nil
	case allowIn && t.is("IN"):
		if l := p.scan(); l.kind != tLParen {
			return nil, p.expected(l, "(")
		}
		m := &NameMatch{}
		for {
			n := p.scan()
			if n.kind != tIdent && n.kind != tString {
				return nil, p.expected(n, "identifier")
			}
			m.Names = append(m.Names, n.text)
			if s := p.scan(); s.kind == tRParen {
				return m, nil
			} else if s.kind != tComma {
				return nil, p.expected(s, ", or )")
			}
		}
	}
	if allowIn {
		return nil, p.expected(t, "=, !=, =~, !~, IN")
	}
	return nil, p.expected(t, "=, =~")
}

// showWhere reads an optional WHERE of a SHOW statement; time conditions
// are accepted and ignored (series are listed whatever their time range).
func (p *parser) showWhere() (Expr, error) {
	if !p.accept("WHERE") {
		return nil, nil
	}
	cond, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	var rest Expr
	for _, c := range conjuncts(cond, nil) {
		if refersTime(c) {
			continue
		}
		if rest == nil {
			rest = c
		} else {
			rest = &BinaryExpr{Op: tAnd, LHS: rest, RHS: c}
		}
	}
	return rest, nil
}

func (p *parser) limitOffset() (limit, off int, err error) {
	if p.accept("LIMIT") {
		if limit, err = p.count(); err != nil {
			return
		}
	}
	if p.accept("OFFSET") {
		off, err = p.count()
	}
	return
}
