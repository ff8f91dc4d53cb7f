package events

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeHamustroJSON parses the JSON form of a Collection as Hamustro's
// jsonpb and Go's protojson (with AllowPartial) do, without a protobuf
// runtime: a field is named as in the .proto (device_id) or in
// lowerCamelCase (deviceId); an unknown or repeated field is an error; a
// null leaves a field unset; the 64- and 32-bit numbers are JSON numbers
// or strings holding one, integral (1e3 is 1000) and in range; the enum is
// a name or an int32; strings are UTF-8 with JSON escapes (a lone
// surrogate is an error). Required fields and the session are checked by
// events, as for the protobuf form. hamustro_test.go checks it against
// protojson.
func decodeHamustroJSON(b []byte) (*hamCollection, error) {
	d := &hamJSON{in: b}
	c := &hamCollection{}
	err := d.object(func(name string) (uint32, error) {
		n := hamFieldNumber(hamCollectionNames[:], name)
		if n == 0 {
			return 0, fmt.Errorf("unknown field %q", name)
		}
		return n, nil
	}, func(n uint32) error {
		switch n {
		case 6:
			e, err := d.enum()
			if err != nil {
				return err
			}
			c.env = e
		case 15:
			return d.array(func() error {
				p, err := d.payload()
				if err != nil {
					return err
				}
				c.payloads = append(c.payloads, p)
				c.has |= 1 << 15
				return nil
			})
		default:
			s, err := d.str()
			if err != nil {
				return err
			}
			c.str[n] = s
		}
		c.has |= 1 << n
		return nil
	})
	if err != nil {
		return nil, err
	}
	if d.skipSpace(); len(d.in) > 0 {
		return nil, d.errorf("unexpected %q after the collection", d.in[0])
	}
	return c, nil
}

// hamPayloadNames and hamParamNames are the field names of Payload and
// Parameter, by number.
var (
	hamPayloadNames = [10]string{"", "at", "event", "nr", "timezone", "tenant_id", "user_id", "ip", "country", "parameters"}
	hamParamNames   = [3]string{"", "name", "value"}
)

// hamFieldNumber is the number of the field called name (its .proto name
// or its lowerCamelCase JSON name) in names, or 0.
func hamFieldNumber(names []string, name string) uint32 {
	for n, f := range names {
		if f != "" && (name == f || name == hamJSONName(f)) {
			return uint32(n)
		}
	}
	return 0
}

// hamJSONName is protobuf's JSON name of a field: device_id is deviceId.
func hamJSONName(f string) string {
	if !strings.Contains(f, "_") {
		return f
	}
	var b strings.Builder
	up := false
	for i := 0; i < len(f); i++ {
		switch c := f[i]; {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			up = false
		default:
			b.WriteByte(c)
			up = false
		}
	}
	return b.String()
}

// hamJSON reads a JSON document left to right.
type hamJSON struct {
	in  []byte
	pos int // bytes consumed, for errors
}

func (d *hamJSON) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

func (d *hamJSON) advance(n int) {
	d.in = d.in[n:]
	d.pos += n
}

func (d *hamJSON) skipSpace() {
	for len(d.in) > 0 {
		switch d.in[0] {
		case ' ', '\n', '\r', '\t':
			d.advance(1)
		default:
			return
		}
	}
}

// peek is the next byte after white space, or 0 at the end.
func (d *hamJSON) peek() byte {
	d.skipSpace()
	if len(d.in) == 0 {
		return 0
	}
	return d.in[0]
}

func (d *hamJSON) expect(c byte) error {
	if got := d.peek(); got != c {
		if got == 0 {
			return d.errorf("unexpected end, want %q", c)
		}
		return d.errorf("unexpected %q, want %q", got, c)
	}
	d.advance(1)
	return nil
}

// null consumes a null literal if one is next.
func (d *hamJSON) null() bool {
	if d.peek() == 'n' && hamLiteral(d.in, "null") {
		d.advance(4)
		return true
	}
	return false
}

// hamLiteral reports whether b starts with the literal word followed by
// a delimiter or the end (protojson reads "nullx" as an error, not null).
func hamLiteral(b []byte, word string) bool {
	return len(b) >= len(word) && string(b[:len(word)]) == word && (len(b) == len(word) || !hamWordByte(b[len(word)]))
}

func hamWordByte(c byte) bool {
	return c == '-' || c == '+' || c == '.' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// object reads an object: field maps a member name to a field number
// (or fails), value reads the value of field n (not null: a null member
// is skipped). A field may appear once, under either of its names.
func (d *hamJSON) object(field func(name string) (uint32, error), value func(n uint32) error) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	var seen uint32
	if d.peek() == '}' {
		d.advance(1)
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.errorf("want a member name")
		}
		name, err := d.rawString()
		if err != nil {
			return err
		}
		n, err := field(name)
		if err != nil {
			return d.errorf("%v", err)
		}
		if seen&(1<<n) != 0 {
			return d.errorf("duplicate field %q", name)
		}
		seen |= 1 << n
		if err := d.expect(':'); err != nil {
			return err
		}
		if !d.null() {
			if err := value(n); err != nil {
				return err
			}
		}
		switch d.peek() {
		case ',':
			d.advance(1)
		case '}':
			d.advance(1)
			return nil
		default:
			return d.errorf("want ',' or '}' after a member")
		}
	}
}

// array reads an array, calling elem for each element.
func (d *hamJSON) array(elem func() error) error {
	if err := d.expect('['); err != nil {
		return err
	}
	if d.peek() == ']' {
		d.advance(1)
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.advance(1)
		case ']':
			d.advance(1)
			return nil
		default:
			return d.errorf("want ',' or ']' after an element")
		}
	}
}

func (d *hamJSON) payload() (hamPayload, error) {
	var p hamPayload
	err := d.object(func(name string) (uint32, error) {
		if n := hamFieldNumber(hamPayloadNames[:], name); n != 0 {
			return n, nil
		}
		return 0, fmt.Errorf("unknown payload field %q", name)
	}, func(n uint32) error {
		var err error
		switch n {
		case 1:
			p.at, err = d.uint(64)
		case 2:
			p.event, err = d.str()
		case 3:
			var x uint64
			x, err = d.uint(32)
			p.nr = uint32(x)
		case 9:
			return d.array(func() error {
				var q hamParam
				err := d.object(func(name string) (uint32, error) {
					if n := hamFieldNumber(hamParamNames[:], name); n != 0 {
						return n, nil
					}
					return 0, fmt.Errorf("unknown parameter field %q", name)
				}, func(n uint32) error {
					s, err := d.str()
					if n == 1 {
						q.name = s
					} else {
						q.value = s
					}
					q.has |= 1 << n
					return err
				})
				if err != nil {
					return err
				}
				p.params = append(p.params, q)
				p.has |= 1 << 9
				return nil
			})
		default:
			p.str[n], err = d.str()
		}
		if err != nil {
			return err
		}
		p.has |= 1 << n
		return nil
	})
	return p, err
}

// str reads a string value.
func (d *hamJSON) str() (string, error) {
	if d.peek() != '"' {
		return "", d.errorf("want a string")
	}
	return d.rawString()
}

// enum reads an Environment: a name, or an int32 number.
func (d *hamJSON) enum() (int32, error) {
	if d.peek() == '"' {
		s, err := d.rawString()
		if err != nil {
			return 0, err
		}
		for i, n := range hamEnvs {
			if s == n {
				return int32(i), nil
			}
		}
		return 0, d.errorf("invalid env %q", s)
	}
	tok, ok := d.number()
	if !ok {
		return 0, d.errorf("invalid env")
	}
	s, ok := hamIntString(tok)
	if !ok {
		return 0, d.errorf("invalid env %s", tok)
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, d.errorf("invalid env %s", tok)
	}
	return int32(n), nil
}

// uint reads an unsigned integer of bits bits: a number, or a string
// holding exactly one.
func (d *hamJSON) uint(bits int) (uint64, error) {
	var tok []byte
	if d.peek() == '"' {
		s, err := d.rawString()
		if err != nil {
			return 0, err
		}
		if n, ok := hamNumberLen([]byte(s)); !ok || n != len(s) {
			return 0, d.errorf("invalid number %q", s)
		}
		tok = []byte(s)
	} else {
		var ok bool
		if tok, ok = d.number(); !ok {
			return 0, d.errorf("want a number")
		}
	}
	s, ok := hamIntString(tok)
	if !ok {
		return 0, d.errorf("%s is not an integer", tok)
	}
	x, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, d.errorf("%s is not a %d-bit unsigned integer", tok, bits)
	}
	return x, nil
}

// number consumes a number token.
func (d *hamJSON) number() ([]byte, bool) {
	if c := d.peek(); c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	n, ok := hamNumberLen(d.in)
	if !ok {
		return nil, false
	}
	tok := d.in[:n]
	d.advance(n)
	return tok, true
}

// hamNumberLen is the length of the number at the start of b: JSON's
// grammar, except that, as in protojson, an exponent may have no digits
// ("1e" followed by a delimiter). The number must end at a delimiter.
func hamNumberLen(b []byte) (int, bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i - j
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		digits()
	default:
		return 0, false
	}
	if i+1 < len(b) && b[i] == '.' && '0' <= b[i+1] && b[i+1] <= '9' {
		i++
		digits()
	}
	if i+1 < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if b[i] == '+' || b[i] == '-' {
			i++
			if i == len(b) {
				return 0, false
			}
		}
		digits()
	}
	if i < len(b) && hamWordByte(b[i]) {
		return 0, false
	}
	return i, true
}

// hamIntString writes the number tok (valid for hamNumberLen) as a
// decimal integer, or reports that it is not one: 1.5e1 is "15", 1.5 is
// not an integer, and at most 20 digits are written.
func hamIntString(tok []byte) (string, bool) {
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	var intp, frac, exp []byte
	i := 0
	for i < len(tok) && '0' <= tok[i] && tok[i] <= '9' {
		i++
	}
	intp, tok = tok[:i], tok[i:]
	if len(intp) == 1 && intp[0] == '0' {
		intp = nil
	}
	if len(tok) > 0 && tok[0] == '.' {
		i = 1
		for i < len(tok) && '0' <= tok[i] && tok[i] <= '9' {
			i++
		}
		frac, tok = tok[1:i], tok[i:]
		for len(frac) > 0 && frac[len(frac)-1] == '0' {
			frac = frac[:len(frac)-1]
		}
	}
	if len(tok) > 0 {
		exp = tok[1:] // after e or E
	}
	if len(intp) == 0 && len(frac) == 0 {
		return "0", true
	}
	e := 0
	if len(exp) > 0 {
		x, err := strconv.ParseInt(string(exp), 10, 32)
		if err != nil {
			return "", false
		}
		e = int(x)
	}
	var num []byte
	if e >= 0 {
		if len(frac) > e || len(intp)+e > 20 {
			return "", false
		}
		num = append(append(num, intp...), frac...)
		for range e - len(frac) {
			num = append(num, '0')
		}
	} else {
		at := len(intp) + e
		if len(frac) > 0 || at < 0 {
			return "", false
		}
		for _, c := range intp[at:] {
			if c != '0' {
				return "", false
			}
		}
		num = intp[:at]
	}
	if neg {
		return "-" + string(num), true
	}
	return string(num), true
}

// rawString reads a string at the start of the input (after white
// space): UTF-8, no control characters, JSON's escapes, and \u escapes of
// surrogates only in valid pairs.
func (d *hamJSON) rawString() (string, error) {
	if len(d.in) == 0 || d.in[0] != '"' {
		return "", d.errorf("want a string")
	}
	d.advance(1)
	var out []byte
	for {
		if len(d.in) == 0 {
			return "", d.errorf("unterminated string")
		}
		r, n := utf8.DecodeRune(d.in)
		switch {
		case r == utf8.RuneError && n == 1:
			return "", d.errorf("invalid UTF-8 in string")
		case r < ' ':
			return "", d.errorf("control character %q in string", r)
		case r == '"':
			d.advance(1)
			return string(out), nil
		case r == '\\':
			if len(d.in) < 2 {
				return "", d.errorf("unterminated string")
			}
			c := d.in[1]
			if c == 'u' {
				r, n, err := d.unicodeEscape()
				if err != nil {
					return "", err
				}
				out = utf8.AppendRune(out, r)
				d.advance(n)
				continue
			}
			e := strings.IndexByte(`"\/bfnrt`, c)
			if e < 0 {
				return "", d.errorf("invalid escape \\%c", c)
			}
			out = append(out, "\"\\/\b\f\n\r\t"[e])
			d.advance(2)
		default:
			out = append(out, d.in[:n]...)
			d.advance(n)
		}
	}
}

// unicodeEscape decodes \uXXXX (and the low half of a surrogate pair) at
// the start of the input, returning the rune and the bytes it took.
func (d *hamJSON) unicodeEscape() (rune, int, error) {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[2:6]), 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex4(d.in)
	if !ok {
		return 0, 0, d.errorf("invalid \\u escape")
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, nil
	}
	lo, ok := hex4(d.in[6:])
	if !ok {
		return 0, 0, d.errorf("invalid surrogate pair")
	}
	if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
		return 0, 0, d.errorf("invalid surrogate pair")
	}
	return r, 12, nil
}
