package events

// scanner is the cursor both hand-written JSON decoders share (fastParser
// for Events, canonDecoder for canonical lines): spaces, the next byte,
// one expected byte and the extent of a number. What a string holds, and
// what a decoder makes of it, is each decoder's own.
type scanner struct {
	b []byte // the body being read
	i int    // read position in b
}

// ws skips spaces.
func (s *scanner) ws() {
	// Most calls find no space: one comparison for them.
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// consume reads the byte c after optional spaces.
func (s *scanner) consume(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// number reads a JSON number after optional spaces and returns where it
// starts and ends, whether it is an integer, and false when the next
// bytes are not a number.
func (s *scanner) number() (start, end int, isInt, ok bool) {
	s.ws()
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return 0, 0, false, false
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		i++
		isInt = false
		if digits() == 0 {
			return 0, 0, false, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		isInt = false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, 0, false, false
		}
	}
	start, s.i = s.i, i
	return start, i, isInt, true
}
