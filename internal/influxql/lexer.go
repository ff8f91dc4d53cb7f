package influxql

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tok is the kind of a lexical token.
type tok uint8

const (
	tEOF       tok = iota
	tIllegal       // a character that starts no token
	tIdent         // a bare or double-quoted identifier (keywords are bare identifiers)
	tString        // a single-quoted string
	tNumber        // a number with a fraction or exponent
	tInteger       // a whole number
	tDuration      // an integer followed by a unit: 10s, 1700000000000ms
	tRegex         // /.../, scanned only where the grammar expects one
	tEq            // =
	tNeq           // != or <>
	tLt            // <
	tLte           // <=
	tGt            // >
	tGte           // >=
	tEqRegex       // =~
	tNeqRegex      // !~
	tPlus          // +
	tMinus         // -
	tMul           // *
	tDiv           // /
	tLParen        // (
	tRParen        // )
	tComma         // ,
	tSemicolon     // ;
	tDot           // .
	tColon         // : (the ::field and ::tag casts)
)

var tokNames = [...]string{
	tEOF: "EOF", tIllegal: "illegal", tIdent: "identifier", tString: "string", tNumber: "number",
	tInteger: "integer", tDuration: "duration", tRegex: "regex", tEq: "=", tNeq: "!=", tLt: "<",
	tLte: "<=", tGt: ">", tGte: ">=", tEqRegex: "=~", tNeqRegex: "!~", tPlus: "+", tMinus: "-",
	tMul: "*", tDiv: "/", tLParen: "(", tRParen: ")", tComma: ",", tSemicolon: ";", tDot: ".", tColon: ":",
}

func (t tok) String() string {
	if int(t) < len(tokNames) {
		return tokNames[t]
	}
	return fmt.Sprintf("tok(%d)", uint8(t))
}

// token is one lexical token: its kind, its text (unquoted for strings and
// quoted identifiers) and the byte offset where it starts.
type token struct {
	kind   tok
	text   string
	pos    int
	quoted bool // a double-quoted identifier, never a keyword
}

// is reports whether the token is the bare keyword kw (case-insensitive).
func (t token) is(kw string) bool {
	return t.kind == tIdent && !t.quoted && strings.EqualFold(t.text, kw)
}

// describe names the token the way InfluxDB's parser errors do.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "EOF"
	case tIdent, tInteger, tNumber, tDuration:
		return t.text
	case tString:
		return "'" + t.text + "'"
	}
	return t.kind.String()
}

// lexer splits a query into tokens. Regular expressions are ambiguous
// with division, so the parser asks for one (scanRegex) where the grammar
// expects it, as InfluxDB's own scanner does.
type lexer struct {
	src string
	pos int
}

func (l *lexer) peekByte(off int) byte {
	if l.pos+off < len(l.src) {
		return l.src[l.pos+off]
	}
	return 0
}

// skip moves past white space and comments (-- to the end of the line,
// /* ... */).
func (l *lexer) skip() {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '-' && l.peekByte(1) == '-':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case c == '/' && l.peekByte(1) == '*':
			end := strings.Index(l.src[l.pos+2:], "*/")
			if end < 0 {
				l.pos = len(l.src)
			} else {
				l.pos += end + 4
			}
		default:
			return
		}
	}
}

// next returns the next token.
func (l *lexer) next() token {
	l.skip()
	start := l.pos
	if l.pos >= len(l.src) {
		// InfluxDB reports the end one character past the last.
		return token{kind: tEOF, pos: start + 1}
	}
	c := l.src[l.pos]
	two := func(second byte, yes, no tok) token {
		if l.peekByte(1) == second {
			l.pos += 2
			return token{kind: yes, pos: start, text: l.src[start:l.pos]}
		}
		l.pos++
		return token{kind: no, pos: start, text: l.src[start:l.pos]}
	}
	switch {
	case c == '"':
		s, ok := l.quoted('"')
		if !ok {
			return token{kind: tIllegal, pos: start, text: "unterminated quoted identifier"}
		}
		return token{kind: tIdent, pos: start, text: s, quoted: true}
	case c == '\'':
		s, ok := l.quoted('\'')
		if !ok {
			return token{kind: tIllegal, pos: start, text: "unterminated string"}
		}
		return token{kind: tString, pos: start, text: s}
	case c >= '0' && c <= '9' || c == '.' && l.peekByte(1) >= '0' && l.peekByte(1) <= '9':
		return l.number()
	case isIdentStart(c) || c >= utf8.RuneSelf:
		r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
		if c >= utf8.RuneSelf && !unicode.IsLetter(r) {
			l.pos += utf8.RuneLen(r)
			return token{kind: tIllegal, pos: start, text: string(r)}
		}
		for l.pos < len(l.src) {
			r, n := utf8.DecodeRuneInString(l.src[l.pos:])
			if !(r < utf8.RuneSelf && isIdentChar(byte(r)) || r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
				break
			}
			l.pos += n
		}
		return token{kind: tIdent, pos: start, text: l.src[start:l.pos]}
	case c == '=':
		return two('~', tEqRegex, tEq)
	case c == '!':
		if l.peekByte(1) == '=' {
			return two('=', tNeq, tIllegal)
		}
		return two('~', tNeqRegex, tIllegal)
	case c == '<':
		if l.peekByte(1) == '>' {
			l.pos += 2
			return token{kind: tNeq, pos: start, text: "<>"}
		}
		return two('=', tLte, tLt)
	case c == '>':
		return two('=', tGte, tGt)
	}
	l.pos++
	k := tIllegal
	switch c {
	case '+':
		k = tPlus
	case '-':
		k = tMinus
	case '*':
		k = tMul
	case '/':
		k = tDiv
	case '(':
		k = tLParen
	case ')':
		k = tRParen
	case ',':
		k = tComma
	case ';':
		k = tSemicolon
	case '.':
		k = tDot
	case ':':
		k = tColon
	}
	return token{kind: k, pos: start, text: l.src[start:l.pos]}
}

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// quoted reads a string quoted by q (at l.pos), with backslash escapes
// \\, \q, \n and \t as InfluxDB reads them.
func (l *lexer) quoted(q byte) (string, bool) {
	l.pos++
	var b strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == q:
			l.pos++
			return b.String(), true
		case c == '\\' && l.pos+1 < len(l.src):
			e := l.src[l.pos+1]
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\\', '"', '\'':
				b.WriteByte(e)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
			l.pos += 2
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
	return "", false
}

// durationUnits are the units of InfluxQL durations, longest first so that
// "ms" is not read as "m".
var durationUnits = []string{"ns", "ms", "us", "µs", "µ", "u", "s", "m", "h", "d", "w"}

// number reads an integer, a decimal number or a duration literal.
func (l *lexer) number() token {
	start := l.pos
	for l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '9' {
		l.pos++
	}
	frac := false
	if l.peekByte(0) == '.' && l.peekByte(1) >= '0' && l.peekByte(1) <= '9' {
		frac = true
		l.pos++
		for l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '9' {
			l.pos++
		}
	}
	if c := l.peekByte(0); (c == 'e' || c == 'E') && (l.peekByte(1) >= '0' && l.peekByte(1) <= '9' ||
		(l.peekByte(1) == '+' || l.peekByte(1) == '-') && l.peekByte(2) >= '0' && l.peekByte(2) <= '9') {
		frac = true
		l.pos += 2
		for l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '9' {
			l.pos++
		}
	}
	if frac {
		return token{kind: tNumber, pos: start, text: l.src[start:l.pos]}
	}
	rest := l.src[l.pos:]
	for _, u := range durationUnits {
		if strings.HasPrefix(rest, u) {
			// A unit glued to more letters ("10min", "5seconds") is not a
			// duration; InfluxDB reads it as a bad token too.
			after := rest[len(u):]
			if after != "" && isIdentChar(after[0]) {
				continue
			}
			l.pos += len(u)
			return token{kind: tDuration, pos: start, text: l.src[start:l.pos]}
		}
	}
	return token{kind: tInteger, pos: start, text: l.src[start:l.pos]}
}

// scanRegex reads a regular expression /.../ starting at the next non-blank
// byte, where \/ stands for a slash.
func (l *lexer) scanRegex() (token, bool) {
	l.skip()
	start := l.pos
	if l.peekByte(0) != '/' {
		return token{}, false
	}
	l.pos++
	var b strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '/':
			l.pos++
			return token{kind: tRegex, pos: start, text: b.String()}, true
		case c == '\\' && l.peekByte(1) == '/':
			b.WriteByte('/')
			l.pos += 2
		case c == '\\' && l.pos+1 < len(l.src):
			b.WriteByte(c)
			b.WriteByte(l.src[l.pos+1])
			l.pos += 2
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
	l.pos = start
	return token{}, false
}
