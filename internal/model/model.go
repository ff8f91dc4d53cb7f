// Package model holds the vocabulary every part of Pith shares to name a
// value: a Sample of one tag, a Point addressed by tag name, its Quality and
// the bucket aggregates (Agg) that queries ask for. It imports nothing of
// Pith, so acquisition, inputs, the tag table and the dashboard can name a
// value without importing the storage engine.
package model

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Quality says how far a sample can be trusted.
type Quality uint8

// The qualities a sample can carry. Good is the zero value.
const (
	QualityGood Quality = iota
	QualityBad
	QualityUncertain
)

// String returns the name used by the HTTP API.
func (q Quality) String() string {
	switch q {
	case QualityGood:
		return "good"
	case QualityBad:
		return "bad"
	case QualityUncertain:
		return "uncertain"
	}
	return fmt.Sprintf("quality(%d)", uint8(q))
}

// Sample is one stored value of one tag.
type Sample struct {
	T int64   // Unix milliseconds
	V float64 // always finite
	Q Quality
}

// Point is a sample addressed by tag name, the unit of a write.
type Point struct {
	Tag string
	T   int64
	V   float64
	Q   Quality
}

// CheckValue reports whether v may be stored: non-finite values are refused.
func CheckValue(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("value %v is not finite", v)
	}
	return nil
}

// Agg names a bucket aggregate.
type Agg uint8

// The aggregates of GET /api/v1/data. AggRaw is not a bucket aggregate:
// it asks for every stored sample.
const (
	AggMean Agg = iota
	AggMin
	AggMax
	AggFirst
	AggLast
	AggSum
	AggCount
	AggRaw
)

var aggNames = [...]string{"mean", "min", "max", "first", "last", "sum", "count", "raw"}

// String returns the API name of the aggregate.
func (a Agg) String() string {
	if int(a) < len(aggNames) {
		return aggNames[a]
	}
	return fmt.Sprintf("agg(%d)", uint8(a))
}

// ParseAgg is the inverse of Agg.String.
func ParseAgg(s string) (Agg, error) {
	for i, n := range aggNames {
		if n == s {
			return Agg(i), nil
		}
	}
	return 0, fmt.Errorf("unknown aggregate %q (want mean, min, max, first, last, sum, count or raw)", s)
}

// PointError reports the refused point of a write, whichever layer refused
// it (the tag table for its name, the store for its value or time); Index
// is its position in the slice given to the write.
type PointError struct {
	Index int
	Tag   string
	Err   error
}

func (e *PointError) Error() string {
	return fmt.Sprintf("point %d (%s): %v", e.Index, e.Tag, e.Err)
}

func (e *PointError) Unwrap() error { return e.Err }

// MaxTextLen is the longest text value a tag may hold, in bytes of UTF-8.
// Longer text is refused, so that memory stays bounded wherever values
// are kept (the store's head, the tag table, the live stream).
const MaxTextLen = 1024

// TextSample is one stored value of a text tag: a state, a batch id, an
// operator name, a string field.
type TextSample struct {
	T    int64 // Unix milliseconds
	Text string
	Q    Quality
}

// TextPoint is a text sample addressed by tag name, the unit of a text
// write. A tag holds numbers or text, never both: its first stored value
// decides, and a value of the other kind is refused.
type TextPoint struct {
	Tag  string
	T    int64
	Text string
	Q    Quality
}

// CheckText reports whether s may be stored as a text value: one line
// (no CR or LF, so that every CSV import and export keeps one row per
// line) of valid UTF-8, at most MaxTextLen bytes.
func CheckText(s string) error {
	if len(s) > MaxTextLen {
		return fmt.Errorf("text of %d bytes is longer than %d", len(s), MaxTextLen)
	}
	if !utf8.ValidString(s) {
		return errors.New("text is not valid UTF-8")
	}
	if strings.ContainsAny(s, "\r\n") {
		return errors.New("text holds a line break (a text value is one line)")
	}
	return nil
}

// ErrTextAgg is wrapped by the error of a numeric aggregate (mean, min,
// max, sum) asked of a text tag: only first, last, count and raw apply.
var ErrTextAgg = errors.New("text tags answer only first, last, count and raw")

// TextAgg reports whether agg applies to text values.
func TextAgg(agg Agg) bool {
	return agg == AggFirst || agg == AggLast || agg == AggCount || agg == AggRaw
}
