// Package events is Pith's event collector: it takes app and device events
// over HTTP (its own JSON/NDJSON, and Hamustro's protobuf or JSON
// collections), makes each accepted batch durable in a write-ahead log
// before acknowledging it, drops duplicates by event id, and delivers the
// log in order to rotated, compressed NDJSON or CSV files, optionally
// uploaded to S3-compatible object storage.
//
// The file layout and record format are documented in docs/format/events.md.
package events

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/jsonenc"
)

// Limits of one event, so that a hostile client cannot make one event cost
// unbounded memory or produce a name that is not a usable tag path.
const (
	MaxIDLen     = 64   // bytes of a client-chosen id
	MaxNameLen   = 128  // bytes of an event name
	MaxSourceLen = 256  // bytes of each source field
	MaxAttrs     = 64   // numeric plus string attributes of one event
	MaxKeyLen    = 128  // bytes of an attribute key
	MaxStrLen    = 4096 // bytes of a string attribute value
)

// Source says where an event comes from. Every field is optional.
type Source struct {
	Device  string `json:"device,omitempty"`
	Client  string `json:"client,omitempty"`
	Session string `json:"session,omitempty"`
}

// Event is one app or device event.
type Event struct {
	ID     string             `json:"id"`            // client's id, or 32 hex digits assigned at acceptance
	Time   int64              `json:"time"`          // Unix ms; now when the client sent none
	Name   string             `json:"name"`          // letters, digits, '_', '-' and '.'
	Source Source             `json:"source"`        // device, client, session
	Num    map[string]float64 `json:"num,omitempty"` // numeric attributes
	Str    map[string]string  `json:"str,omitempty"` // string attributes

	assigned bool // ID was assigned by the collector: random, so never remembered for dedup
}

// ValidationError reports a bad event in a request: which one (0-based,
// in request order) and which field. Nothing of that request is accepted.
type ValidationError struct {
	Index int    // index of the event in the request
	Field string // the offending field ("name", "num.temp", ...), or "" for the JSON syntax
	Msg   string // what is wrong
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("event %d: %s", e.Index, e.Msg)
	}
	return fmt.Sprintf("event %d: field %s: %s", e.Index, e.Field, e.Msg)
}

// wireEvent is the JSON form a client sends; Time is a pointer so that an
// absent time can be told from time 0.
type wireEvent struct {
	ID     string             `json:"id"`
	Time   *int64             `json:"time"`
	Name   string             `json:"name"`
	Source Source             `json:"source"`
	Num    map[string]float64 `json:"num"`
	Str    map[string]string  `json:"str"`
}

// Decode reads one JSON event, a JSON array of events, or NDJSON (events
// one after another, newline separated) from r, fills missing ids and
// times (nowMS), validates every event and appends them to dst. maxEvents
// bounds the count. On any error it returns a *ValidationError naming the
// event and field, and the caller must accept nothing.
func Decode(dst []Event, r io.Reader, nowMS int64, maxEvents int) ([]Event, error) {
	br := bufio.NewReader(r)
	first, err := firstByte(br)
	if err == io.EOF {
		return dst, &ValidationError{Msg: "no events"}
	}
	if err != nil {
		return dst, fmt.Errorf("read body: %w", err)
	}
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields()
	start := len(dst)
	add := func() error {
		i := len(dst) - start
		if i >= maxEvents {
			return &ValidationError{Index: i, Msg: fmt.Sprintf("more than %d events in one request", maxEvents)}
		}
		var w wireEvent
		if err := dec.Decode(&w); err != nil {
			return jsonError(i, err)
		}
		ev, err := w.event(nowMS)
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				ve.Index = i
			}
			return err
		}
		dst = append(dst, ev)
		return nil
	}
	switch first {
	case '[':
		if _, err := dec.Token(); err != nil {
			return dst, jsonError(0, err)
		}
		for dec.More() {
			if err := add(); err != nil {
				return dst, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return dst, jsonError(len(dst)-start, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return dst, &ValidationError{Index: len(dst) - start, Msg: "data after the array"}
		}
	case '{':
		// Decode reads one value at a time, so the same loop takes one
		// event and NDJSON alike.
		for dec.More() {
			if err := add(); err != nil {
				return dst, err
			}
		}
		if _, err := dec.Token(); err != io.EOF {
			return dst, &ValidationError{Index: len(dst) - start, Msg: "unexpected data after the events"}
		}
	default:
		return dst, &ValidationError{Msg: fmt.Sprintf("body must start with '{' or '[', not %q", first)}
	}
	if len(dst) == start {
		return dst, &ValidationError{Msg: "no events"}
	}
	return dst, nil
}

// firstByte returns the first non-space byte of br without consuming it.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c, br.UnreadByte()
	}
}

// jsonError turns a decoding error into a ValidationError for event i.
func jsonError(i int, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &ValidationError{Index: i, Field: te.Field, Msg: "must be a " + jsonType(te.Type.String())}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &ValidationError{Index: i, Msg: "unexpected end of body"}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &ValidationError{Index: i, Msg: "bad JSON at byte " + strconv.FormatInt(se.Offset, 10) + ": " + se.Error()}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &ValidationError{Index: i, Field: strings.Trim(f, `"`), Msg: "unknown field"}
	}
	if strings.HasPrefix(err.Error(), "json: ") {
		return &ValidationError{Index: i, Msg: err.Error()}
	}
	// Anything else is the body reader failing (a client gone, a body over
	// the size limit): not the client's event, so not a ValidationError.
	return fmt.Errorf("read body: %w", err)
}

func jsonType(goType string) string {
	switch goType {
	case "float64":
		return "number"
	case "int64":
		return "integer (Unix ms)"
	case "string":
		return "string"
	}
	return goType
}

// event validates w and returns it as an Event, filling id and time.
func (w *wireEvent) event(nowMS int64) (Event, error) {
	ev := Event{ID: w.ID, Name: w.Name, Source: w.Source, Num: w.Num, Str: w.Str, Time: nowMS}
	if w.Time != nil {
		if *w.Time <= 0 {
			return ev, &ValidationError{Field: "time", Msg: "must be positive Unix ms"}
		}
		ev.Time = *w.Time
	}
	if ev.ID == "" {
		ev.ID, ev.assigned = NewID(), true
	} else if err := checkText(ev.ID, MaxIDLen); err != "" {
		return ev, &ValidationError{Field: "id", Msg: err}
	}
	if ev.Name == "" {
		return ev, &ValidationError{Field: "name", Msg: "is required"}
	}
	if err := checkName(ev.Name); err != "" {
		return ev, &ValidationError{Field: "name", Msg: err}
	}
	for _, f := range [...]struct{ name, v string }{
		{"source.device", ev.Source.Device}, {"source.client", ev.Source.Client}, {"source.session", ev.Source.Session},
	} {
		if err := checkText(f.v, MaxSourceLen); err != "" {
			return ev, &ValidationError{Field: f.name, Msg: err}
		}
	}
	if len(ev.Num)+len(ev.Str) > MaxAttrs {
		return ev, &ValidationError{Field: "num", Msg: fmt.Sprintf("more than %d attributes", MaxAttrs)}
	}
	for k := range ev.Num {
		if k == "" || len(k) > MaxKeyLen {
			return ev, &ValidationError{Field: "num." + k, Msg: fmt.Sprintf("key must be 1 to %d bytes", MaxKeyLen)}
		}
	}
	for k, v := range ev.Str {
		if k == "" || len(k) > MaxKeyLen {
			return ev, &ValidationError{Field: "str." + k, Msg: fmt.Sprintf("key must be 1 to %d bytes", MaxKeyLen)}
		}
		if len(v) > MaxStrLen {
			return ev, &ValidationError{Field: "str." + k, Msg: fmt.Sprintf("longer than %d bytes", MaxStrLen)}
		}
	}
	return ev, nil
}

// checkName reports what is wrong with an event name, or "". Names become
// parts of tag paths (pith.events.<name>.per_min), hence the narrow set.
func checkName(s string) string {
	if len(s) > MaxNameLen {
		return fmt.Sprintf("longer than %d bytes", MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' {
			continue
		}
		return fmt.Sprintf("byte %d (%q) is not a letter, digit, '_', '-' or '.'", i, c)
	}
	if s[0] == '.' || s[len(s)-1] == '.' {
		return "must not start or end with '.'"
	}
	return ""
}

// checkText reports what is wrong with an id or source field, or "".
func checkText(s string, maxLen int) string {
	if len(s) > maxLen {
		return fmt.Sprintf("longer than %d bytes", maxLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return fmt.Sprintf("control byte at %d", i)
		}
	}
	return ""
}

// NewID returns 16 random bytes as 32 hex digits.
func NewID() string {
	var b [16]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// AppendJSON appends ev as one line of canonical JSON (keys in a fixed
// order, attribute keys sorted) followed by '\n'. It is the form kept in
// the WAL and written to sink files.
func AppendJSON(b []byte, ev *Event) []byte {
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, ev.ID)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, ev.Time, 10)
	b = append(b, `,"name":`...)
	b = jsonenc.AppendString(b, ev.Name)
	b = append(b, `,"source":{`...)
	sep := byte(0)
	for _, f := range [...]struct{ k, v string }{
		{`"device":`, ev.Source.Device}, {`"client":`, ev.Source.Client}, {`"session":`, ev.Source.Session},
	} {
		if f.v == "" {
			continue
		}
		if sep != 0 {
			b = append(b, sep)
		}
		sep = ','
		b = append(b, f.k...)
		b = jsonenc.AppendString(b, f.v)
	}
	b = append(b, '}')
	if len(ev.Num) > 0 {
		b = append(b, `,"num":{`...)
		for i, k := range sortedKeys(ev.Num) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, k)
			b = append(b, ':')
			b = jsonenc.AppendFloat(b, ev.Num[k])
		}
		b = append(b, '}')
	}
	if len(ev.Str) > 0 {
		b = append(b, `,"str":{`...)
		for i, k := range sortedKeys(ev.Str) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, k)
			b = append(b, ':')
			b = jsonenc.AppendString(b, ev.Str[k])
		}
		b = append(b, '}')
	}
	return append(b, '}', '\n')
}

// sortedKeys returns m's keys in order; a map of one key skips the sort.
func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 1 {
		for k := range m {
			return []string{k}
		}
	}
	return slices.Sorted(maps.Keys(m))
}
