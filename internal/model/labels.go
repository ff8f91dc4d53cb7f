package model

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Label is one key/value pair a tag arrived with: a remote_write label, a
// line-protocol tag key and value, or a key Pith assigns. Keys Pith
// reserves start with "_" (ReservedPrefix).
type Label struct {
	Name  string
	Value string
}

// Labels is a tag's small set of labels, sorted by Name with no name twice.
// Labels are metadata of the tag (kept once with its definition), never
// stored per sample. A nil Labels is a tag without labels.
type Labels []Label

// The keys Pith assigns. Line protocol gives a tag {_measurement, _field}
// and one label per tag key; remote_write keeps Prometheus's own labels,
// __name__ among them.
const (
	// ReservedPrefix starts every key Pith assigns.
	ReservedPrefix = "_"
	// LabelMeasurement holds the line-protocol measurement.
	LabelMeasurement = "_measurement"
	// LabelField holds the line-protocol field key.
	LabelField = "_field"
	// LabelMetricName is Prometheus's metric name label.
	LabelMetricName = "__name__"
	// LabelSite holds the site a central Pith received a tag from.
	LabelSite = "_site"
)

// Limits on the labels of one tag. They bound the metadata one sender can
// make Pith keep for every tag; beyond them a write is refused naming the
// tag, never truncated.
const (
	// MaxLabels is the most labels a tag carries.
	MaxLabels = 128
	// MaxLabelNameBytes bounds one label name (the inputs' bound on a tag
	// key or label name).
	MaxLabelNameBytes = 1024
	// MaxLabelValueBytes bounds one label value.
	MaxLabelValueBytes = 1024
	// MaxLabelsBytes bounds the sum of the lengths of a tag's names and values.
	MaxLabelsBytes = 8192
)

// ErrLabels is wrapped by every error Check returns.
var ErrLabels = errors.New("bad labels")

// LabelsFrom builds sorted Labels from name, value pairs; a repeated name
// keeps its last value. It panics on an odd count (a programming error).
func LabelsFrom(pairs ...string) Labels {
	if len(pairs)%2 != 0 {
		panic("model.LabelsFrom: odd number of strings")
	}
	ls := make(Labels, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		ls = append(ls, Label{Name: pairs[i], Value: pairs[i+1]})
	}
	return ls.Sorted()
}

// Sorted sorts ls in place by name, keeps the last of a repeated name, and
// returns it.
func (ls Labels) Sorted() Labels {
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	out := ls[:0]
	for i, l := range ls {
		if i+1 < len(ls) && ls[i+1].Name == l.Name {
			continue
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Get returns the value of name, or "" when ls has no such label.
func (ls Labels) Get(name string) string {
	v, _ := ls.Lookup(name)
	return v
}

// Lookup returns the value of name and whether ls has it.
func (ls Labels) Lookup(name string) (string, bool) {
	// Tags carry a handful of labels: a linear scan beats a binary search.
	for i := range ls {
		if ls[i].Name == name {
			return ls[i].Value, true
		}
	}
	return "", false
}

// Equal reports whether ls and o hold the same pairs.
func (ls Labels) Equal(o Labels) bool {
	if len(ls) != len(o) {
		return false
	}
	for i := range ls {
		if ls[i] != o[i] {
			return false
		}
	}
	return true
}

// Bytes is the sum of the lengths of every name and value.
func (ls Labels) Bytes() int {
	n := 0
	for _, l := range ls {
		n += len(l.Name) + len(l.Value)
	}
	return n
}

// Clone returns a copy that shares no backing array with ls.
func (ls Labels) Clone() Labels {
	if ls == nil {
		return nil
	}
	return append(Labels(nil), ls...)
}

// String formats ls as {a="x", b="y"}.
func (ls Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(l.Name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// Check reports whether ls is a valid label set within the limits: sorted,
// no name twice, names non-empty valid UTF-8 without control characters,
// values valid UTF-8, and within MaxLabels, MaxLabelNameBytes,
// MaxLabelValueBytes and MaxLabelsBytes. The error wraps ErrLabels and
// names the offending label.
func (ls Labels) Check() error {
	if len(ls) > MaxLabels {
		return fmt.Errorf("%w: %d labels, more than %d", ErrLabels, len(ls), MaxLabels)
	}
	total := 0
	for i, l := range ls {
		switch {
		case l.Name == "":
			return fmt.Errorf("%w: empty label name", ErrLabels)
		case len(l.Name) > MaxLabelNameBytes:
			return fmt.Errorf("%w: label name %.40q... longer than %d bytes", ErrLabels, l.Name, MaxLabelNameBytes)
		case len(l.Value) > MaxLabelValueBytes:
			return fmt.Errorf("%w: value of label %q longer than %d bytes", ErrLabels, l.Name, MaxLabelValueBytes)
		case !utf8.ValidString(l.Name) || !utf8.ValidString(l.Value):
			return fmt.Errorf("%w: label %q is not valid UTF-8", ErrLabels, l.Name)
		case strings.ContainsFunc(l.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return fmt.Errorf("%w: label name %q holds a control character", ErrLabels, l.Name)
		case i > 0 && ls[i-1].Name >= l.Name:
			return fmt.Errorf("%w: label %q out of order or repeated", ErrLabels, l.Name)
		}
		total += len(l.Name) + len(l.Value)
	}
	if total > MaxLabelsBytes {
		return fmt.Errorf("%w: %d bytes of labels, more than %d", ErrLabels, total, MaxLabelsBytes)
	}
	return nil
}

// Series names a tag together with its labels: what a push input hands the
// tag table so the labels are kept with the tag's definition.
type Series struct {
	Tag    string
	Labels Labels
}
