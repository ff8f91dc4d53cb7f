package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// LPTag is one tag of a line-protocol row. Key and Value are the raw bytes
// of the body, escapes (backslashes) included: the tag-name rule turns
// escaped and unescaped separators into the same '_', so unescaping would
// only cost a copy.
type LPTag struct {
	Key, Value []byte
}

// LPFieldKind says how a field value was written.
type LPFieldKind uint8

// The field kinds of line protocol. Integers, unsigned integers and
// booleans become numbers; strings become text values (or are skipped by
// an input whose sink keeps no text).
const (
	LPFloat LPFieldKind = iota
	LPInt
	LPUint
	LPBool
	LPString
)

// LPField is one field of a row. Value is set for every kind but
// LPString, whose raw content between the quotes (escapes included, see
// UnescapeString) is LPRow.Str of the field: its place in the line is
// kept as two offsets rather than a slice, so that numeric fields, the
// common case, stay small.
type LPField struct {
	Key            []byte
	Value          float64
	Kind           LPFieldKind
	strOff, strLen uint32 // LPString: the content's place in the line
}

// Str returns the raw content of f, a string field of r.
func (r *LPRow) Str(f *LPField) []byte {
	line := r.SeriesKey[:cap(r.SeriesKey)]
	return line[f.strOff : f.strOff+f.strLen]
}

// UnescapeString returns a string field's value: line protocol escapes
// '"' and '\' with a backslash inside string fields; any other backslash
// is kept as written.
func UnescapeString(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' && i+1 < len(raw) && (raw[i+1] == '"' || raw[i+1] == '\\') {
			i++
		}
		out = append(out, raw[i])
	}
	return string(out)
}

// LPRow is one parsed line: measurement[,tag=v...] field=v[,...] [timestamp].
type LPRow struct {
	SeriesKey   []byte // the raw measurement and tag set, as sent
	Measurement []byte
	Tags        []LPTag
	Fields      []LPField
	Timestamp   int64 // in the request's precision; valid when HasTime
	HasTime     bool
	Line        int // 1-based line number in the body
}

// LPRows holds the rows of one body. Rows reference the body's bytes, so
// the body must outlive them. Reuse one LPRows (Reset, Unmarshal) per
// request: once its slices have grown, parsing allocates nothing. Not safe
// for concurrent use.
type LPRows struct {
	Rows []LPRow

	tagsPool   []LPTag
	fieldsPool []LPField
}

// Reset forgets the rows, keeping the memory for the next body.
func (rs *LPRows) Reset() {
	clear(rs.Rows) // drop references to the old body
	rs.Rows = rs.Rows[:0]
	clear(rs.tagsPool)
	rs.tagsPool = rs.tagsPool[:0]
	clear(rs.fieldsPool)
	rs.fieldsPool = rs.fieldsPool[:0]
}

// Unmarshal appends the rows of body. Blank lines and comment lines (first
// non-blank byte '#') are skipped; CRLF line ends are accepted. A line that
// does not parse gives a *LineError naming it, and the rows parsed so far
// stay in rs.
func (rs *LPRows) Unmarshal(body []byte) error {
	defer rs.repoint()
	// Room for a row and a field per line up front: growing by appends
	// would hold every outgrown array of fields while the body is parsed.
	lines := bytes.Count(body, []byte{'\n'}) + 1
	rs.Rows = slices.Grow(rs.Rows, lines)
	rs.fieldsPool = slices.Grow(rs.fieldsPool, lines)
	line := 0
	for len(body) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			l, body = body[:i], body[i+1:]
		} else {
			l, body = body, nil
		}
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l = l[:n-1]
		}
		l = trimLeftSpace(l)
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		if len(l) > MaxLineLen {
			return &LineError{Line: line, Err: errLineTooLong}
		}
		nt, nf := len(rs.tagsPool), len(rs.fieldsPool)
		if err := rs.parseLine(l, line); err != nil {
			// The pools hold exactly the rows' tags and fields, in row
			// order (repoint relies on it).
			rs.tagsPool, rs.fieldsPool = rs.tagsPool[:nt], rs.fieldsPool[:nf]
			return &LineError{Line: line, Err: fmt.Errorf("unable to parse %q: %w", clip(l), err)}
		}
	}
	return nil
}

// doubled returns s with room for one more element, doubling its
// capacity when full (append grows large slices by a quarter, so rows
// parsed meanwhile would keep many outgrown arrays alive until repoint).
func doubled[T any](s []T) []T {
	if len(s) == cap(s) {
		return slices.Grow(s, max(len(s), 16))
	}
	return s
}

// repoint makes every row's Tags and Fields slices of the pools' current
// arrays. A row points into the array its pool had when it was parsed;
// once the pool has grown, each earlier array stays alive through the
// rows parsed while it was current, about four times the final pool in
// all (a maximal body's fields took 64 MB for 13 MB of fields).
func (rs *LPRows) repoint() {
	var t, f int
	for i := range rs.Rows {
		r := &rs.Rows[i]
		if n := len(r.Tags); n > 0 {
			r.Tags = rs.tagsPool[t : t+n : t+n]
			t += n
		}
		if n := len(r.Fields); n > 0 {
			r.Fields = rs.fieldsPool[f : f+n : f+n]
			f += n
		}
	}
}

// clip shortens a line quoted in an error message.
func clip(b []byte) []byte {
	const max = 120
	if len(b) > max {
		return b[:max]
	}
	return b
}

func trimLeftSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

var (
	errNoFields       = errors.New("missing fields")
	errEmptyKey       = errors.New("empty key")
	errMissingEquals  = errors.New("missing '=' after key")
	errEmptyTagValue  = errors.New("empty tag value")
	errEmptyFieldVal  = errors.New("empty field value")
	errUnterminated   = errors.New("unterminated string field value")
	errTrailingBytes  = errors.New("unexpected bytes after timestamp")
	errEmptyMeasure   = errors.New("empty measurement")
	errBadTimestampLP = errors.New("bad timestamp (want an integer)")
	errTooManyTags    = fmt.Errorf("more than %d tags on one line (MaxLineTags)", MaxLineTags)
)

// scanKey returns the index of the first unescaped byte of l at or after
// start that is one of the stops (',' ' ' and, when eq, '='), or len(l).
func scanKey(l []byte, start int, eq bool) int {
	for i := start; i < len(l); i++ {
		switch l[i] {
		case '\\':
			i++ // the next byte is escaped, whatever it is
		case ',', ' ':
			return i
		case '=':
			if eq {
				return i
			}
		}
	}
	return len(l)
}

func (rs *LPRows) parseLine(l []byte, line int) error {
	// Measurement: up to an unescaped ',' or ' '.
	i := scanKey(l, 0, false)
	if i == 0 {
		return errEmptyMeasure
	}
	if i == len(l) {
		return errNoFields
	}
	row := LPRow{Measurement: l[:i], Line: line}

	// Tag set.
	tagStart := len(rs.tagsPool)
	for l[i] == ',' {
		k0 := i + 1
		k1 := scanKey(l, k0, true)
		if k1 == k0 {
			return errEmptyKey
		}
		if k1 == len(l) || l[k1] != '=' {
			return errMissingEquals
		}
		if len(rs.tagsPool)-tagStart == MaxLineTags {
			return errTooManyTags
		}
		if k1-k0 > MaxKeyLen {
			return fmt.Errorf("tag key of %d bytes is longer than the limit of %d (MaxKeyLen)", k1-k0, MaxKeyLen)
		}
		v0 := k1 + 1
		v1 := scanKey(l, v0, true)
		if v1 == v0 {
			return errEmptyTagValue
		}
		if v1 == len(l) {
			return errNoFields
		}
		if l[v1] == '=' {
			return fmt.Errorf("unescaped '=' in tag value %q", l[v0:v1])
		}
		rs.tagsPool = append(doubled(rs.tagsPool), LPTag{Key: l[k0:k1], Value: l[v0:v1]})
		i = v1
	}
	row.SeriesKey = l[:i]
	row.Tags = rs.tagsPool[tagStart:len(rs.tagsPool):len(rs.tagsPool)]
	sortTags(row.Tags)

	// l[i] is ' ': the field set follows (more spaces are tolerated).
	for i < len(l) && l[i] == ' ' {
		i++
	}
	if i == len(l) {
		return errNoFields
	}
	fieldStart := len(rs.fieldsPool)
	for {
		k0 := i
		k1 := scanKey(l, k0, true)
		if k1 == k0 {
			return errEmptyKey
		}
		if k1 == len(l) || l[k1] != '=' {
			return errMissingEquals
		}
		f := LPField{Key: l[k0:k1]}
		v0 := k1 + 1
		var v1 int
		if v0 < len(l) && l[v0] == '"' {
			v1 = scanString(l, v0+1)
			if v1 < 0 {
				return errUnterminated
			}
			f.Kind = LPString
			f.strOff, f.strLen = uint32(v0+1), uint32(v1-1-(v0+1))
		} else {
			v1 = v0
			for v1 < len(l) && l[v1] != ',' && l[v1] != ' ' {
				v1++
			}
			if v1 == v0 {
				return errEmptyFieldVal
			}
			var err error
			if f.Value, f.Kind, err = parseFieldValue(l[v0:v1]); err != nil {
				return fmt.Errorf("field %q: %w", f.Key, err)
			}
		}
		rs.fieldsPool = append(doubled(rs.fieldsPool), f)
		i = v1
		if i == len(l) || l[i] == ' ' {
			break
		}
		i++ // ','
	}
	row.Fields = rs.fieldsPool[fieldStart:len(rs.fieldsPool):len(rs.fieldsPool)]

	// Optional timestamp.
	for i < len(l) && l[i] == ' ' {
		i++
	}
	if i < len(l) {
		j := i
		for j < len(l) && l[j] != ' ' {
			j++
		}
		ts, ok := parseInt(l[i:j])
		if !ok {
			return fmt.Errorf("%w: %q", errBadTimestampLP, l[i:j])
		}
		for j < len(l) && (l[j] == ' ' || l[j] == '\t') {
			j++
		}
		if j != len(l) {
			return errTrailingBytes
		}
		row.Timestamp, row.HasTime = ts, true
	}
	rs.Rows = append(rs.Rows, row)
	return nil
}

// scanString returns the index just past the closing quote of a string
// field whose content starts at i, or -1. Backslash escapes '"' and '\'.
func scanString(l []byte, i int) int {
	for ; i < len(l); i++ {
		switch l[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// sortTags orders tags by key, keeping the order of equal keys. Telegraf
// sends tag sets sorted already, so the check comes first; MaxLineTags
// bounds the sort.
func sortTags(t []LPTag) {
	if !slices.IsSortedFunc(t, compareTags) {
		slices.SortStableFunc(t, compareTags)
	}
}

func compareTags(a, b LPTag) int { return bytes.Compare(a.Key, b.Key) }

// parseInt parses a decimal int64 with an optional sign.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, b = b[0] == '-', b[1:]
	}
	if len(b) == 0 || len(b) > maxInt64Digits {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		u = u*10 + uint64(d)
	}
	if (!neg && u > math.MaxInt64) || (neg && u > 1<<63) {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// parseFieldValue parses a non-string field value: 1.5, 1i, 1u, t/f.
func parseFieldValue(b []byte) (float64, LPFieldKind, error) {
	switch last := b[len(b)-1]; {
	case last == 'i':
		v, ok := parseInt(b[:len(b)-1])
		if !ok {
			return 0, 0, fmt.Errorf("bad integer %q", b)
		}
		return float64(v), LPInt, nil
	case last == 'u':
		u, err := strconv.ParseUint(string(b[:len(b)-1]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bad unsigned integer %q", b)
		}
		return float64(u), LPUint, nil
	}
	switch string(b) { // the conversion in a switch does not allocate
	case "t", "T", "true", "True", "TRUE":
		return 1, LPBool, nil
	case "f", "F", "false", "False", "FALSE":
		return 0, LPBool, nil
	}
	v, err := parseValue(b)
	if err != nil {
		return 0, 0, err
	}
	return v, LPFloat, nil
}
