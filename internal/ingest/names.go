package ingest

import (
	"errors"
	"fmt"
)

// The tag-name rule shared by every push input (line protocol, emoncms,
// MQTT, remote_write); docs/design/0002-tag-names.md is its reference.
//
// A name is built from an ordered list of components (a measurement, tag
// values, a field; a node and a key; topic levels; a metric name and label
// values). Each component is cleaned: bytes outside tagChars (letters,
// digits and ._-:/, the set the CSV import accepts) become '_', a run of
// them becoming a single '_'. Components are joined with '.'; empty
// components and empty dot-separated segments are dropped, so a name never
// starts or ends with '.' and never holds "..". A result longer than
// MaxTagLen bytes is refused, never truncated, because truncation would
// silently merge distinct series.

// NameBuilder assembles one tag name from components without allocating.
// The zero value is ready; Reset starts the next name. Not safe for
// concurrent use.
type NameBuilder struct {
	buf        []byte
	pendingDot bool // a '.' is due before the next byte written
	illegalEnd int  // len(buf) just after the '_' of an illegal run, else 0
}

// Reset empties the builder for the next name.
func (nb *NameBuilder) Reset() {
	nb.buf = nb.buf[:0]
	nb.pendingDot = false
	nb.illegalEnd = 0
}

// Add appends one component, cleaned per the rule.
func (nb *NameBuilder) Add(c []byte) {
	for _, b := range c {
		nb.addByte(b, false)
	}
	nb.endComponent()
}

// AddString is Add for a string.
func (nb *NameBuilder) AddString(c string) {
	for i := 0; i < len(c); i++ {
		nb.addByte(c[i], false)
	}
	nb.endComponent()
}

// AddValue appends a component in which '.' is an ordinary illegal byte,
// not a separator: a remote_write label value such as an address
// (127.0.0.1:9100) stays one readable segment (127_0_0_1:9100).
func (nb *NameBuilder) AddValue(c []byte) {
	for _, b := range c {
		if b == '.' {
			b = ' ' // any illegal byte: cleaned to '_' like one
		}
		nb.addByte(b, false)
	}
	nb.endComponent()
}

// AddPath appends a component in which '/' separates levels as '.' does
// (an MQTT topic).
func (nb *NameBuilder) AddPath(c string) {
	for i := 0; i < len(c); i++ {
		nb.addByte(c[i], true)
	}
	nb.endComponent()
}

// Bytes returns the name built so far; it is valid until the next call.
func (nb *NameBuilder) Bytes() []byte { return nb.buf }

// Check reports whether the name built is acceptable: not empty and at
// most MaxTagLen bytes.
func (nb *NameBuilder) Check() error {
	return checkNameLen(nb.buf)
}

func checkNameLen(b []byte) error {
	switch {
	case len(b) == 0:
		return errEmptyName
	case len(b) > MaxTagLen:
		return fmt.Errorf("tag name %.40q... is %d bytes long (max %d)", b, len(b), MaxTagLen)
	}
	return nil
}

var errEmptyName = errors.New("empty tag name (every component is empty)")

func (nb *NameBuilder) addByte(b byte, slashIsDot bool) {
	switch {
	case b == '.' || (b == '/' && slashIsDot):
		nb.pendingDot = len(nb.buf) > 0
	case !tagChars[b]:
		if nb.illegalEnd > 0 && len(nb.buf) == nb.illegalEnd && !nb.pendingDot {
			return // one '_' stands for the whole run
		}
		nb.write('_')
		nb.illegalEnd = len(nb.buf)
	default:
		nb.write(b)
	}
}

func (nb *NameBuilder) write(b byte) {
	if nb.pendingDot {
		nb.buf = append(nb.buf, '.')
		nb.pendingDot = false
	}
	nb.buf = append(nb.buf, b)
}

// endComponent makes the next component start a new segment; nothing is
// written yet, so an empty component leaves no trace.
func (nb *NameBuilder) endComponent() {
	nb.pendingDot = len(nb.buf) > 0
}

// CleanName applies the rule to a single already dotted name (for example a
// tag name given in configuration) and returns the result or an error.
func CleanName(s string) (string, error) {
	var nb NameBuilder
	nb.Reset()
	nb.AddString(s)
	if err := nb.Check(); err != nil {
		return "", err
	}
	return string(nb.buf), nil
}

// namer builds tag names and caches them by a source key (the raw bytes
// a source names a series with), so a series met before costs a map lookup
// (which does not allocate) instead of applying the rule and a new string.
// Each entry also remembers whether its tag's labels were stored
// (names_labels.go), so labels are built once per series, not per point.
type namer struct {
	NameBuilder
	names     map[string]*nameEntry
	nameBytes int
}

// nameEntry is one cached name.
type nameEntry struct {
	name string
	// labelled is set once the labels of this source key were stored
	// with the tag; a write that failed leaves it unset, so the next one
	// sends them again.
	labelled bool
	// pending is set while the labels are in the current request's
	// pendingLabels.
	pending bool
}

// lookup returns the name cached for key.
func (n *namer) lookup(key []byte) (string, bool) {
	e, ok := n.names[string(key)]
	if !ok {
		return "", false
	}
	return e.name, true
}

// lookupEntry returns the entry cached for key.
func (n *namer) lookupEntry(key []byte) (*nameEntry, bool) {
	e, ok := n.names[string(key)]
	return e, ok
}

// remember checks the name built and caches it under key.
func (n *namer) remember(key []byte) (string, error) {
	e, err := n.rememberEntry(key)
	if err != nil {
		return "", err
	}
	return e.name, nil
}

// rememberEntry checks the name built and caches it under key.
func (n *namer) rememberEntry(key []byte) (*nameEntry, error) {
	b := n.Bytes()
	if err := checkNameLen(b); err != nil {
		return nil, err
	}
	e := &nameEntry{name: string(b)}
	if n.names == nil || n.nameBytes >= maxInternedBytes {
		// A full cache is emptied so that new series get their turn; the
		// bound keeps a pooled namer from pinning much memory.
		n.names = make(map[string]*nameEntry)
		n.nameBytes = 0
	}
	n.names[string(key)] = e
	n.nameBytes += len(key) + len(e.name)
	return e, nil
}
