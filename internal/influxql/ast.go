// Package influxql answers the subset of InfluxDB 1.x's query language
// that Grafana's InfluxDB datasource and Chronograf send for charts and
// variables, from Pith's store and its rollups (docs/api.md, "InfluxQL").
//
// A query goes through three steps, one file each: the parser (lexer.go,
// parser.go, parser_show.go, cond.go) turns the text into statements with
// their time ranges resolved against one now(); the executor (exec*.go)
// resolves measurements, fields and tag sets to Pith tags through a
// Catalog and reads bucketed aggregates or raw samples from a Store; the
// handler (handler.go, format.go) writes InfluxDB's JSON or CSV answer.
// What the parser reads but Pith does not answer is refused per statement
// with InfluxDB's error shape.
package influxql

import "regexp"

// Statement is one parsed statement.
type Statement interface{ statement() }

func (*SelectStatement) statement()                {}
func (*ShowMeasurementsStatement) statement()      {}
func (*ShowTagKeysStatement) statement()           {}
func (*ShowTagValuesStatement) statement()         {}
func (*ShowSeriesStatement) statement()            {}
func (*ShowFieldKeysStatement) statement()         {}
func (*ShowDatabasesStatement) statement()         {}
func (*ShowRetentionPoliciesStatement) statement() {}
func (*CreateDatabaseStatement) statement()        {}
func (*unsupportedStatement) statement()           {}

// Time bounds: a statement's range is [Start, End] in nanoseconds, both
// inclusive, as InfluxDB keeps it. MinTime and MaxTime stand for no bound.
const (
	MinTime = int64(-1 << 62)
	MaxTime = int64(1 << 62)
)

// FillMode says what a GROUP BY time() bucket without samples answers.
type FillMode uint8

// The fill modes of fill(...).
const (
	FillNull     FillMode = iota // null (the default)
	FillNone                     // the bucket is left out
	FillPrevious                 // the previous bucket's value
	FillValue                    // a number
	FillLinear                   // linear interpolation between neighbours
)

// SelectStatement is SELECT ... FROM one measurement.
type SelectStatement struct {
	Fields      []SelectField
	Measurement string     // the source; a retention policy or database prefix is dropped
	Sources     *NameMatch // several sources or a regular expression; Measurement is then empty
	Cond        Expr       // the tag condition, time comparisons removed; nil selects every series
	Start, End  int64      // the time range in ns, inclusive
	HasEnd      bool       // the query named an upper bound (otherwise GROUP BY time() ends at now())
	Interval    int64      // GROUP BY time(Interval) in ns; 0 without it
	Offset      int64      // GROUP BY time(Interval, Offset) in ns
	GroupBy     []string   // GROUP BY tag keys
	GroupAll    bool       // GROUP BY *
	Fill        FillMode
	FillValue   float64
	Limit       int   // LIMIT (0: none)
	OffsetRows  int   // OFFSET
	SLimit      int   // SLIMIT
	SOffset     int   // SOFFSET
	Desc        bool  // ORDER BY time DESC
	Now         int64 // the now() the statement's times were resolved against, ns
}

// SelectField is one column of a SELECT: a function of a field (Func set)
// or a bare field or tag (Func empty), or * (Wildcard).
type SelectField struct {
	Func     string // mean, min, max, sum, count, first, last, spread, median; empty for a raw column
	Arg      string // the field (or tag) key
	Wildcard bool   // SELECT * (or f(*))
	Alias    string // AS alias
}

// Name is the column name InfluxDB gives the field: its alias, the
// function name, or the key.
func (f SelectField) Name() string {
	switch {
	case f.Alias != "":
		return f.Alias
	case f.Func != "":
		return f.Func
	}
	return f.Arg
}

// Aggregate reports whether the statement computes functions (one row per
// bucket) rather than returning raw samples.
func (s *SelectStatement) Aggregate() bool {
	return len(s.Fields) > 0 && s.Fields[0].Func != ""
}

// ShowMeasurementsStatement is SHOW MEASUREMENTS [WITH MEASUREMENT op
// name|/re/] [WHERE tag condition] [LIMIT n] [OFFSET m].
type ShowMeasurementsStatement struct {
	Match      *NameMatch
	Cond       Expr
	Limit, Off int
}

// ShowTagKeysStatement is SHOW TAG KEYS [FROM m] [WHERE ...] [LIMIT] [OFFSET].
type ShowTagKeysStatement struct {
	From       *NameMatch
	Cond       Expr
	Limit, Off int
}

// ShowTagValuesStatement is SHOW TAG VALUES [FROM m] WITH KEY op ... [WHERE]
// [LIMIT] [OFFSET].
type ShowTagValuesStatement struct {
	From       *NameMatch
	Key        *NameMatch
	Cond       Expr
	Limit, Off int
}

// ShowFieldKeysStatement is SHOW FIELD KEYS [FROM m] [LIMIT] [OFFSET].
type ShowFieldKeysStatement struct {
	From       *NameMatch
	Limit, Off int
}

// ShowSeriesStatement is SHOW SERIES [FROM m] [WHERE ...] [LIMIT] [OFFSET]:
// the series keys (measurement and tag set) of the stored series.
type ShowSeriesStatement struct {
	From       *NameMatch
	Cond       Expr
	Limit, Off int
}

// ShowDatabasesStatement is SHOW DATABASES: Pith has one namespace, "pith".
type ShowDatabasesStatement struct{}

// ShowRetentionPoliciesStatement is SHOW RETENTION POLICIES [ON db]: one,
// "autogen", which Grafana's query editor lists.
type ShowRetentionPoliciesStatement struct{}

// CreateDatabaseStatement is CREATE DATABASE name, which Telegraf sends at
// start; it succeeds and changes nothing.
type CreateDatabaseStatement struct{}

// unsupportedStatement is a statement InfluxDB knows and Pith does not
// answer (DROP, DELETE, SHOW SERIES, ...): refused when executed.
type unsupportedStatement struct{ what string }

// NameMatch selects names: one of them (= or IN), all but one (!=), or
// those matching (=~) or not matching (!~) a regular expression.
type NameMatch struct {
	Names []string
	Regex *regexp.Regexp
	Not   bool
}

// Match reports whether name is selected.
func (m *NameMatch) Match(name string) bool {
	if m == nil {
		return true
	}
	var ok bool
	if m.Regex != nil {
		ok = m.Regex.MatchString(name)
	} else {
		for _, n := range m.Names {
			if n == name {
				ok = true
				break
			}
		}
	}
	return ok != m.Not
}

// Expr is a node of a WHERE condition.
type Expr interface{ expr() }

// BinaryExpr is LHS Op RHS, with Op one of AND, OR and the comparisons.
type BinaryExpr struct {
	Op       tok // tEq ... tNeqRegex, or tAnd / tOr below
	LHS, RHS Expr
}

// Op values beyond the lexer's tokens, for AND and OR.
const (
	tAnd tok = 100 + iota
	tOr
)

// VarRef is an identifier: a tag or field key, or time.
type VarRef struct{ Name string }

// StringLit is a single-quoted string.
type StringLit struct{ Val string }

// NumberLit is a number.
type NumberLit struct {
	Val  float64
	Int  bool  // an integer literal (then IntV is exact)
	IntV int64 // its value when Int
}

// DurationLit is a duration in ns.
type DurationLit struct{ Val int64 }

// RegexLit is /.../.
type RegexLit struct{ Re *regexp.Regexp }

// BoolLit is true or false.
type BoolLit struct{ Val bool }

// CallExpr is a function call in a condition: now().
type CallExpr struct{ Name string }

// TimeLit is a point in time the parser already resolved (now(), a time
// string or arithmetic on them), in ns.
type TimeLit struct{ Val int64 }

func (*BinaryExpr) expr()  {}
func (*VarRef) expr()      {}
func (*StringLit) expr()   {}
func (*NumberLit) expr()   {}
func (*DurationLit) expr() {}
func (*RegexLit) expr()    {}
func (*BoolLit) expr()     {}
func (*CallExpr) expr()    {}
func (*TimeLit) expr()     {}
