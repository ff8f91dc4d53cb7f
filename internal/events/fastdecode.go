package events

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"
)

// errSlow makes fastDecode give up; the caller then runs Decode, which
// handles every input and words the errors.
var errSlow = errors.New("not on the fast path")

// DecodeBytes is Decode over a body already in memory. Bodies in the
// plain shape (no escapes in strings, no null, known keys in lower case)
// take a hand-written parser without reflection; anything else, valid or
// not, is handed to Decode, so both give the same events and errors (the
// fuzz target FuzzDecodeBytes checks this).
func DecodeBytes(dst []Event, body []byte, nowMS int64, maxEvents int) ([]Event, error) {
	start := len(dst)
	out, err := fastDecode(dst, body, nowMS, maxEvents)
	if err == nil {
		return out, nil
	}
	return Decode(dst[:start], bytes.NewReader(body), nowMS, maxEvents)
}

// fastParser walks a body by hand.
type fastParser struct {
	scanner
}

func (p *fastParser) expect(c byte) error {
	if !p.consume(c) {
		return errSlow
	}
	return nil
}

// str reads a string without escapes, control bytes or invalid UTF-8,
// the cases where its bytes are its value.
func (p *fastParser) str() (string, error) {
	if err := p.expect('"'); err != nil {
		return "", err
	}
	j := p.i
	ascii := true
	for j < len(p.b) {
		c := p.b[j]
		if c == '"' {
			break
		}
		if c == '\\' || c < 0x20 {
			return "", errSlow
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		j++
	}
	if j == len(p.b) {
		return "", errSlow
	}
	s := p.b[p.i:j]
	if !ascii && !utf8.Valid(s) {
		return "", errSlow
	}
	p.i = j + 1
	return string(s), nil
}

// number returns the bytes of a JSON number and whether it is an integer.
func (p *fastParser) number() ([]byte, bool, error) {
	start, end, isInt, ok := p.scanner.number()
	if !ok {
		return nil, false, errSlow
	}
	return p.b[start:end], isInt, nil
}

// object calls fn for each key of an object; fn reads the value.
func (p *fastParser) object(fn func(key string) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	if p.peek() == '}' {
		p.i++
		return nil
	}
	for {
		k, err := p.str()
		if err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return errSlow
		}
	}
}

func (p *fastParser) event(w *wireEvent) error {
	return p.object(func(key string) error {
		var err error
		switch key {
		case "id":
			w.ID, err = p.str()
		case "name":
			w.Name, err = p.str()
		case "time":
			n, isInt, err := p.number()
			if err != nil || !isInt {
				return errSlow
			}
			t, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil {
				return errSlow
			}
			w.Time = &t
		case "source":
			err = p.object(func(k string) error {
				var err error
				switch k {
				case "device":
					w.Source.Device, err = p.str()
				case "client":
					w.Source.Client, err = p.str()
				case "session":
					w.Source.Session, err = p.str()
				default:
					return errSlow
				}
				return err
			})
		case "num":
			if w.Num == nil {
				w.Num = map[string]float64{}
			}
			err = p.object(func(k string) error {
				n, _, err := p.number()
				if err != nil {
					return err
				}
				v, err := strconv.ParseFloat(string(n), 64)
				if err != nil {
					return errSlow
				}
				w.Num[k] = v
				return nil
			})
		case "str":
			if w.Str == nil {
				w.Str = map[string]string{}
			}
			err = p.object(func(k string) error {
				v, err := p.str()
				w.Str[k] = v
				return err
			})
		default:
			return errSlow
		}
		return err
	})
}

// fastDecode parses the plain shape of a body; any error means "use
// Decode".
func fastDecode(dst []Event, body []byte, nowMS int64, maxEvents int) ([]Event, error) {
	p := fastParser{scanner{b: body}}
	start := len(dst)
	one := func() error {
		if len(dst)-start >= maxEvents {
			return errSlow
		}
		var w wireEvent
		if err := p.event(&w); err != nil {
			return err
		}
		ev, err := w.event(nowMS)
		if err != nil {
			return errSlow
		}
		dst = append(dst, ev)
		return nil
	}
	switch p.peek() {
	case '[':
		p.i++
		if p.peek() != ']' {
			for {
				if err := one(); err != nil {
					return dst, err
				}
				if p.peek() != ',' {
					break
				}
				p.i++
			}
		}
		if err := p.expect(']'); err != nil {
			return dst, err
		}
	case '{':
		for p.peek() == '{' {
			if err := one(); err != nil {
				return dst, err
			}
		}
	default:
		return dst, errSlow
	}
	p.ws()
	if p.i != len(p.b) || len(dst) == start {
		return dst, errSlow
	}
	return dst, nil
}
