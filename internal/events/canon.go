package events

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/pith-historian/pith/internal/jsonenc"
)

// canonEvent is what accept needs of one event besides its line.
type canonEvent struct {
	end      int    // offset just past the event's line (its '\n') in the batch buffer
	id       string // the event's id; "" when the canonical decoder assigned one (it is only in the line)
	assigned bool   // the collector drew the id: random, so never remembered for dedup
	name     string // the event name, for the per-minute counts
}

// batch is one request's events in canonical form, the way accept takes
// them: the WAL record being built and what accept needs of each event.
// Batches are reused from one request to the next (Collector.batches),
// so nothing may keep a reference into buf or evs once accept returned.
type batch struct {
	raw    []byte       // the request body (and then the answer), reused
	buf    []byte       // recHeaderSize bytes for the arrival time, then one canonical line per event
	evs    []canonEvent // in request order
	hashes []uint64     // per event, the dedup hash of its client id (accept's scratch)
	dec    canonDecoder // scratch of decode
}

// maxPooledBatch is the largest buffer a batch keeps for reuse; a batch
// that held a larger request is left to the GC, so that one big request
// does not pin its memory in the pool.
const maxPooledBatch = 256 << 10

// body returns a buffer of n bytes for a request body.
func (b *batch) body(n int) []byte {
	if cap(b.raw) < n {
		b.raw = make([]byte, n)
	}
	return b.raw[:n]
}

// reset empties b for the next request.
func (b *batch) reset() {
	b.buf = append(b.buf[:0], make([]byte, recHeaderSize)...)
	clear(b.evs) // the strings of the last request
	b.evs = b.evs[:0]
}

// addEvents appends evs as AppendJSON writes them: the path of bodies
// that are not in the plain shape, of Hamustro collections and of Accept.
func (b *batch) addEvents(evs []Event) {
	for i := range evs {
		ev := &evs[i]
		b.buf = AppendJSON(b.buf, ev)
		b.evs = append(b.evs, canonEvent{end: len(b.buf), id: ev.ID, assigned: ev.assigned, name: ev.Name})
	}
}

// decode fills b with the events of a POST body, like DecodeBytes
// followed by AppendJSON on each event. A body in the plain shape (see
// canonDecoder) goes straight to the canonical lines; any other body,
// valid or not, goes through DecodeBytes and AppendJSON, so that the
// lines and the errors are the same either way (FuzzCanon checks this).
// names maps known event names to themselves (it may be nil): a name
// found there costs no allocation.
func (b *batch) decode(body []byte, nowMS int64, maxEvents int, names map[string]string) error {
	b.reset()
	b.dec.names = names
	var ok bool
	b.buf, b.evs, ok = b.dec.appendCanon(b.buf, b.evs, body, nowMS, maxEvents)
	b.dec.names = nil
	if ok {
		return nil
	}
	b.reset()
	evs, err := DecodeBytes(nil, body, nowMS, maxEvents)
	if err != nil {
		return err
	}
	b.addEvents(evs)
	return nil
}

// canonDecoder turns a request body straight into canonical lines,
// without building Events: no maps, and no strings but one for all the
// client ids of a body and one for each event name it does not know. It
// takes the plain shape only (the shape of fastDecode: no escapes in
// strings, no null, known keys in lower case) and, beyond fastDecode, no
// key twice in one object: Decode keeps the last of repeated keys (and
// merges repeated "num" or "str" objects), which this decoder leaves to
// the slow path rather than mimic. Its scratch is reused from one body to
// the next; it is not safe for concurrent use.
type canonDecoder struct {
	scanner

	nums, strs []canonAttr       // the attributes of the event being read
	ids        []byte            // the client ids of the body, one after the other
	idEnds     []int             // per event of the body, the end of its id in ids, or -1 when assigned
	rnd        [512]byte         // random bytes for assigned ids, drawn 32 ids at a time
	rndLeft    int               // unused bytes at the end of rnd
	lastName   string            // the last name made into a string, reused while events repeat it
	names      map[string]string // known event names, each mapped to itself; read only, may be nil
}

// span is a string of the body: its contents b[start:end] and whether
// its canonical form needs jsonenc.AppendString.
type span struct {
	start, end int
	esc        bool
}

// canonAttr is an attribute of the event being read: its key and its
// value (a string's contents, or a number's bytes; esc then says that
// the number is not a short integer, whose canonical form is its own
// bytes).
type canonAttr struct {
	key, val span
}

// plainByte marks the bytes that stand for themselves both inside a JSON
// string of a body and in the canonical form jsonenc.AppendString writes:
// printable ASCII but '"', '\\', '<', '>' and '&'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// bstr views b as a string without copying, for reading only: the
// string must not outlive the call it is passed to, nor b change while
// it is used.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// appendCanon appends the canonical line of each event of body to dst,
// and to evs what accept needs of it. It returns false when body is not
// in the plain shape, or holds no event, more than maxEvents events or an
// invalid one: the caller then takes the slow path, which also words the
// error. After false, dst and evs hold a partial result to drop.
func (d *canonDecoder) appendCanon(dst []byte, evs []canonEvent, body []byte, nowMS int64, maxEvents int) ([]byte, []canonEvent, bool) {
	d.b, d.i = body, 0
	d.ids, d.idEnds = d.ids[:0], d.idEnds[:0]
	first := len(evs)
	ok := false
	dst, evs, ok = d.body(dst, evs, nowMS, maxEvents)
	d.b = nil // not to pin the body while the decoder waits in the pool
	if !ok || len(evs) == first {
		return dst, evs, false
	}
	if len(d.ids) > 0 {
		// One string holds every client id of the body: the ids are
		// remembered together for the dedup window and forgotten
		// together, so one allocation serves them all.
		all, start := string(d.ids), 0
		for k, end := range d.idEnds {
			if end >= 0 {
				evs[first+k].id, start = all[start:end], end
			}
		}
	}
	return dst, evs, true
}

// body reads one JSON object, a JSON array of objects, or objects one
// after another (NDJSON), up to the end of the body.
func (d *canonDecoder) body(dst []byte, evs []canonEvent, nowMS int64, maxEvents int) ([]byte, []canonEvent, bool) {
	first := len(evs)
	ok := true
	switch d.peek() {
	case '[':
		d.i++
		if d.peek() != ']' {
			for {
				if len(evs)-first >= maxEvents {
					return dst, evs, false
				}
				if dst, evs, ok = d.event(dst, evs, nowMS); !ok {
					return dst, evs, false
				}
				if d.peek() != ',' {
					break
				}
				d.i++
			}
		}
		if !d.consume(']') {
			return dst, evs, false
		}
	case '{':
		for d.peek() == '{' {
			if len(evs)-first >= maxEvents {
				return dst, evs, false
			}
			if dst, evs, ok = d.event(dst, evs, nowMS); !ok {
				return dst, evs, false
			}
		}
	default:
		return dst, evs, false
	}
	d.ws()
	return dst, evs, d.i == len(d.b)
}

// Bits of the keys an event object had, to refuse a repeated key.
const (
	keyID = 1 << iota
	keyTime
	keyName
	keySource
	keyNum
	keyStr
)

// event reads one event object, validates it as wireEvent.event does and
// appends its canonical line, as AppendJSON writes it.
func (d *canonDecoder) event(dst []byte, evs []canonEvent, nowMS int64) ([]byte, []canonEvent, bool) {
	var (
		seen       uint8
		id, name   span
		tim        span // the time's digits, when the event has a time
		src        [3]span
		srcSeen    uint8
		ok, isInt  bool
		key        span
		sep        byte
		assignedID bool
	)
	d.nums, d.strs = d.nums[:0], d.strs[:0]
	if !d.consume('{') {
		return dst, evs, false
	}
	if d.peek() == '}' {
		d.i++
	} else {
		for {
			if key, ok = d.str(); !ok || key.esc || !d.consume(':') {
				return dst, evs, false
			}
			var bit uint8
			switch string(d.b[key.start:key.end]) {
			case "id":
				bit = keyID
				id, ok = d.str()
			case "time":
				bit = keyTime
				tim, isInt, ok = d.number()
				ok = ok && isInt
			case "name":
				bit = keyName
				name, ok = d.str()
			case "source":
				bit = keySource
				ok = d.source(&src, &srcSeen)
			case "num":
				bit = keyNum
				ok = d.attrs(&d.nums, true)
			case "str":
				bit = keyStr
				ok = d.attrs(&d.strs, false)
			}
			if !ok || bit == 0 || seen&bit != 0 {
				return dst, evs, false
			}
			seen |= bit
			if sep, ok = d.sep(); !ok {
				return dst, evs, false
			}
			if sep == '}' {
				break
			}
		}
	}

	// Validation: any failure goes to the slow path, which reports it,
	// so only the verdict has to agree with wireEvent.event.
	if seen&keyTime != 0 && !positiveInt(d.b[tim.start:tim.end]) {
		return dst, evs, false
	}
	if id.end == id.start {
		assignedID = true
	} else if checkText(bstr(d.b[id.start:id.end]), MaxIDLen) != "" {
		return dst, evs, false
	}
	if name.end == name.start || name.esc || checkName(bstr(d.b[name.start:name.end])) != "" {
		return dst, evs, false
	}
	for _, s := range src {
		if checkText(bstr(d.b[s.start:s.end]), MaxSourceLen) != "" {
			return dst, evs, false
		}
	}
	if !d.sortAttrs(d.nums) || !d.sortAttrs(d.strs) {
		return dst, evs, false
	}
	for _, a := range d.strs {
		if a.val.end-a.val.start > MaxStrLen {
			return dst, evs, false
		}
	}

	// The line, in AppendJSON's order.
	dst = append(dst, `{"id":`...)
	if assignedID {
		dst = d.appendNewID(dst)
		d.idEnds = append(d.idEnds, -1)
	} else {
		dst = d.appendStr(dst, id)
		d.ids = append(d.ids, d.b[id.start:id.end]...)
		d.idEnds = append(d.idEnds, len(d.ids))
	}
	dst = append(dst, `,"time":`...)
	if seen&keyTime != 0 {
		// A positive JSON integer has no sign and no leading zero: its
		// bytes are what strconv.AppendInt writes.
		dst = append(dst, d.b[tim.start:tim.end]...)
	} else {
		dst = strconv.AppendInt(dst, nowMS, 10)
	}
	dst = append(dst, `,"name":`...)
	dst = d.appendStr(dst, name) // a valid name needs no escaping
	dst = append(dst, `,"source":{`...)
	comma := false
	for f, k := range [...]string{`"device":`, `"client":`, `"session":`} {
		if src[f].end == src[f].start {
			continue
		}
		if comma {
			dst = append(dst, ',')
		}
		comma = true
		dst = append(dst, k...)
		dst = d.appendStr(dst, src[f])
	}
	dst = append(dst, '}')
	if len(d.nums) > 0 {
		dst = append(dst, `,"num":{`...)
		for j, a := range d.nums {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = d.appendStr(dst, a.key)
			dst = append(dst, ':')
			n := d.b[a.val.start:a.val.end]
			if !a.val.esc {
				dst = append(dst, n...)
				continue
			}
			v, err := strconv.ParseFloat(bstr(n), 64)
			if err != nil {
				// Out of range: Decode refuses it.
				return dst, evs, false
			}
			dst = jsonenc.AppendFloat(dst, v)
		}
		dst = append(dst, '}')
	}
	if len(d.strs) > 0 {
		dst = append(dst, `,"str":{`...)
		for j, a := range d.strs {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = d.appendStr(dst, a.key)
			dst = append(dst, ':')
			dst = d.appendStr(dst, a.val)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, '}', '\n')
	evs = append(evs, canonEvent{end: len(dst), assigned: assignedID, name: d.name(d.b[name.start:name.end])})
	return dst, evs, true
}

// source reads the source object into src.
func (d *canonDecoder) source(src *[3]span, seen *uint8) bool {
	if !d.consume('{') {
		return false
	}
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		key, ok := d.str()
		if !ok || key.esc || !d.consume(':') {
			return false
		}
		f := 0
		switch string(d.b[key.start:key.end]) {
		case "device":
			f = 0
		case "client":
			f = 1
		case "session":
			f = 2
		default:
			return false
		}
		if *seen&(1<<f) != 0 {
			return false
		}
		*seen |= 1 << f
		if src[f], ok = d.str(); !ok {
			return false
		}
		sep, ok := d.sep()
		if !ok {
			return false
		}
		if sep == '}' {
			return true
		}
	}
}

// attrs reads a "num" (numeric values) or "str" (string values) object
// into *dst. Keys must be 1 to MaxKeyLen bytes, and the event's
// attributes at most MaxAttrs.
func (d *canonDecoder) attrs(dst *[]canonAttr, num bool) bool {
	if !d.consume('{') {
		return false
	}
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if len(d.nums)+len(d.strs) >= MaxAttrs {
			return false
		}
		var a canonAttr
		var ok bool
		if a.key, ok = d.str(); !ok || a.key.end == a.key.start || a.key.end-a.key.start > MaxKeyLen || !d.consume(':') {
			return false
		}
		if num {
			var isInt bool
			if a.val, isInt, ok = d.number(); !ok {
				return false
			}
			// AppendFloat writes an integer of up to 6 digits as its own
			// digits (from 1e6 on, 'g' takes an exponent): "-0" too
			// stays "-0". Those skip strconv.
			digits := a.val.end - a.val.start
			if d.b[a.val.start] == '-' {
				digits--
			}
			a.val.esc = !isInt || digits > 6
		} else if a.val, ok = d.str(); !ok {
			return false
		}
		*dst = append(*dst, a)
		sep, ok := d.sep()
		if !ok {
			return false
		}
		if sep == '}' {
			return true
		}
	}
}

// sortAttrs sorts attrs by key (insertion sort: an event has at most
// MaxAttrs of them, usually a few) and reports whether the keys are
// distinct.
func (d *canonDecoder) sortAttrs(attrs []canonAttr) bool {
	for i := 1; i < len(attrs); i++ {
		a := attrs[i]
		k := d.b[a.key.start:a.key.end]
		j := i
		for ; j > 0; j-- {
			c := bytes.Compare(d.b[attrs[j-1].key.start:attrs[j-1].key.end], k)
			if c == 0 {
				return false
			}
			if c < 0 {
				break
			}
			attrs[j] = attrs[j-1]
		}
		attrs[j] = a
	}
	return true
}

// positiveInt reports whether the digits of a JSON integer are a
// positive int64, the times Decode takes.
func positiveInt(n []byte) bool {
	if len(n) == 0 || n[0] == '-' || n[0] == '0' || len(n) > 19 {
		return false
	}
	var v uint64
	for _, c := range n {
		v = v*10 + uint64(c-'0') // 19 digits fit in a uint64
	}
	return v <= 1<<63-1
}

// appendStr appends the string s of the body as jsonenc.AppendString
// writes it.
func (d *canonDecoder) appendStr(dst []byte, s span) []byte {
	b := d.b[s.start:s.end]
	if s.esc {
		return jsonenc.AppendString(dst, bstr(b))
	}
	dst = append(dst, '"')
	dst = append(dst, b...)
	return append(dst, '"')
}

// appendNewID appends a new random id as NewID draws it, quoted. The
// random bytes are read for 32 ids at once: one call of crypto/rand per
// batch of events rather than per event.
func (d *canonDecoder) appendNewID(dst []byte) []byte {
	if d.rndLeft < 16 {
		rand.Read(d.rnd[:]) // crypto/rand.Read never fails (Go 1.24+)
		d.rndLeft = len(d.rnd)
	}
	r := d.rnd[len(d.rnd)-d.rndLeft:][:16]
	d.rndLeft -= 16
	dst = append(dst, '"')
	dst = hex.AppendEncode(dst, r)
	clear(r) // used once only
	return append(dst, '"')
}

// name returns b as a string, without allocating when it is a known name
// or the name of the previous event.
func (d *canonDecoder) name(b []byte) string {
	if s, ok := d.names[string(b)]; ok {
		return s
	}
	if d.lastName != string(b) {
		d.lastName = string(b)
	}
	return d.lastName
}

// sep reads the ',' or '}' after a member of an object.
func (d *canonDecoder) sep() (byte, bool) {
	c := d.peek()
	if c != ',' && c != '}' {
		return 0, false
	}
	d.i++
	return c, true
}

// str reads a string without escapes or control bytes, in valid UTF-8:
// the strings whose bytes are their value.
func (d *canonDecoder) str() (span, bool) {
	if !d.consume('"') {
		return span{}, false
	}
	b := d.b
	s := span{start: d.i}
	ascii := true
	for j := d.i; j < len(b); j++ {
		c := b[j]
		if plainByte[c] {
			continue
		}
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(b[s.start:j]) {
				return span{}, false
			}
			s.end = j
			d.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return span{}, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.esc = true // '<', '>', '&' or non-ASCII, which AppendString may escape
	}
	return span{}, false
}

// number reads a JSON number and reports whether it is an integer.
func (d *canonDecoder) number() (span, bool, bool) {
	start, end, isInt, ok := d.scanner.number()
	return span{start: start, end: end}, isInt, ok
}
