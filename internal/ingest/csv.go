// Package ingest turns pushed data (CSV import, InfluxDB line protocol,
// emoncms input, Prometheus remote_write and MQTT) into store points,
// named by one tag-name rule (docs/design/0002-tag-names.md).
package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tagseq"
)

// Limits of the CSV import format.
const (
	// MaxTagLen is the longest tag name accepted, in bytes.
	MaxTagLen = 200
	// MaxLineLen is the longest CSV line accepted, in bytes. A longer line is
	// an error, which keeps the read buffer (and so memory) bounded whatever
	// the body holds.
	MaxLineLen = 64 << 10

	// readBufSize is the CSV read buffer: large enough that refills are rare
	// and always larger than MaxLineLen so a legal line fits.
	readBufSize = 256 << 10
	// maxInternedBytes bounds the tag name bytes a reader keeps for reuse.
	// Beyond it new names are still parsed, just allocated per row, so a
	// body of millions of distinct names cannot grow the table without
	// bound, nor can a pooled reader pin much memory (about twice this
	// with its map). It holds 100,000 names of 40 bytes: at 1 MB, an
	// import of 100,000 tags (1.2 MB of names) allocated a string for
	// 15% of its rows, and missed the next row's guess after each.
	maxInternedBytes = 4 << 20
	// maxEmptyReads is how many (0, nil) reads in a row are tolerated before
	// the reader is declared broken.
	maxEmptyReads = 100
)

// LineError is a CSV row that does not parse. Line is 1-based and counts
// every line of the body, blank ones included.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the problem with the row.
func (e *LineError) Unwrap() error { return e.Err }

// CSVReader parses the import format, one row per line:
//
//	tag,unix_ms,value[,quality]
//
// Tags use letters, digits and ._-:/ (at most MaxTagLen bytes); unix_ms is a
// decimal integer; value is a finite decimal float; quality is good, bad or
// uncertain (good when absent or empty). Blank lines, CRLF line ends, a UTF-8
// byte order mark and a first line that is exactly the header
// "tag,unix_ms,value" (or "tag,unix_ms,value,quality") are accepted.
//
// A value in double quotes is text (a text tag's value, at most
// model.MaxTextLen bytes of UTF-8 on one line; a quote inside is doubled,
// as in RFC 4180): `line.state,1700000000000,"RUN, fast"`. Next returns
// numbers; the text rows of the same lines are in Texts.
//
// The reader streams: it holds one fixed buffer and never the whole body.
// Parsing a row allocates nothing once its tag name has been seen. A
// CSVReader is not safe for concurrent use.
type CSVReader struct {
	r          io.Reader
	buf        []byte
	pos, end   int  // unread bytes are buf[pos:end]
	line       int  // lines consumed so far
	eof        bool // r has reported io.EOF
	err        error
	tags       map[string]uint32 // interned names: their index in names
	names      []string
	guess      tagseq.Guess // saves most lookups in tags
	tagBytes   int          // name bytes held by tags
	emptyReads int
	texts      []model.TextPoint // text rows of the last Next
	textLines  []int             // their line numbers
	rows       int               // rows of the last Next, numbers and text
	text       string            // the text value of the row parseRow read last
}

// NewCSVReader returns a reader parsing r.
func NewCSVReader(r io.Reader) *CSVReader {
	c := &CSVReader{buf: make([]byte, readBufSize), tags: make(map[string]uint32)}
	c.Reset(r)
	return c
}

// Reset makes c parse r from its first line, reusing the buffer and the
// interned tag names, so pooled readers cost nothing per request. A full
// name table is emptied so the next body gets to intern its own names.
func (c *CSVReader) Reset(r io.Reader) {
	if c.tagBytes >= maxInternedBytes {
		clear(c.tags)
		clear(c.names)
		c.names = c.names[:0]
		c.guess.Reset()
		c.tagBytes = 0
	}
	c.r = r
	c.pos, c.end, c.line = 0, 0, 0
	c.eof, c.err, c.emptyReads = false, nil, 0
}

// Line returns the number of lines consumed so far; after an error it is
// the line the error is on.
func (c *CSVReader) Line() int { return c.line }

// Next appends up to max points (at least one) to dst and returns the
// extended slice. It returns io.EOF, and no points, once the input is
// exhausted. A bad row
// gives a *LineError; a failing reader gives its error unchanged. Errors are
// sticky: every later call returns the same one.
func (c *CSVReader) Next(dst []model.Point, max int) ([]model.Point, error) {
	if c.err != nil {
		return dst, c.err
	}
	if max < 1 {
		max = 1 // a zero max would never make progress
	}
	n := 0
	c.texts, c.textLines, c.rows = c.texts[:0], c.textLines[:0], 0
	for n < max {
		line, ok := c.nextLine()
		if !ok {
			break
		}
		if isBlank(line) {
			continue
		}
		if c.line == 1 {
			line = bytes.TrimPrefix(line, utf8BOM)
			if isHeader(line) {
				continue
			}
		}
		p, text, err := c.parseRow(line)
		if err != nil {
			c.err = &LineError{Line: c.line, Err: err}
			return dst, c.err
		}
		n++
		if text {
			c.texts = append(c.texts, model.TextPoint{Tag: p.Tag, T: p.T, Q: p.Q, Text: c.text})
			c.textLines = append(c.textLines, c.line)
			continue
		}
		dst = append(dst, p)
	}
	c.rows = n
	if n == 0 && c.err != nil {
		return dst, c.err
	}
	return dst, nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

func isHeader(line []byte) bool {
	return string(line) == "tag,unix_ms,value" || string(line) == "tag,unix_ms,value,quality"
}

// isBlank reports a line holding only spaces and tabs.
func isBlank(line []byte) bool {
	for _, b := range line {
		if b != ' ' && b != '\t' {
			return false
		}
	}
	return true
}

// nextLine returns the next line without its line end. It returns false
// with c.err set at the end of input or on a read error.
func (c *CSVReader) nextLine() ([]byte, bool) {
	for {
		if i := bytes.IndexByte(c.buf[c.pos:c.end], '\n'); i >= 0 {
			line := c.buf[c.pos : c.pos+i]
			c.pos += i + 1
			c.line++
			if len(line) > MaxLineLen {
				c.err = &LineError{Line: c.line, Err: errLineTooLong}
				return nil, false
			}
			return trimCR(line), true
		}
		if c.eof {
			if c.pos == c.end {
				c.err = io.EOF
				return nil, false
			}
			line := c.buf[c.pos:c.end]
			c.pos = c.end
			c.line++
			return trimCR(line), true
		}
		if err := c.fill(); err != nil {
			c.err = err
			return nil, false
		}
	}
}

var errLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLineLen)

func trimCR(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		return line[:n-1]
	}
	return line
}

// fill moves the unread bytes to the front of the buffer and reads more.
func (c *CSVReader) fill() error {
	if c.end-c.pos > MaxLineLen {
		return &LineError{Line: c.line + 1, Err: errLineTooLong}
	}
	if c.pos > 0 {
		c.end = copy(c.buf, c.buf[c.pos:c.end])
		c.pos = 0
	}
	n, err := c.r.Read(c.buf[c.end:])
	c.end += n
	switch {
	case errors.Is(err, io.EOF):
		c.eof = true
	case err != nil:
		return err
	case n == 0:
		c.emptyReads++
		if c.emptyReads > maxEmptyReads {
			return io.ErrNoProgress
		}
		return nil
	}
	c.emptyReads = 0
	return nil
}

// intern returns the tag name spelled by b, shared between rows so that a
// known tag costs a comparison with the name guessed (tagseq) or a map
// lookup, neither of which allocates, and no string.
func (c *CSVReader) intern(b []byte) string {
	if id, ok := c.guess.NextBytes(c.names, b); ok {
		return c.names[id]
	}
	if id, ok := c.tags[string(b)]; ok {
		c.guess.Learn(id)
		return c.names[id]
	}
	s := string(b)
	if c.tagBytes < maxInternedBytes {
		id := uint32(len(c.names))
		c.tags[s] = id
		c.names = append(c.names, s)
		c.tagBytes += len(s)
		c.guess.Learn(id)
	} else {
		c.guess.Forget()
	}
	return s
}

// tagChars marks the bytes allowed in a tag name.
var tagChars = func() (t [256]bool) {
	for b := 'a'; b <= 'z'; b++ {
		t[b] = true
	}
	for b := 'A'; b <= 'Z'; b++ {
		t[b] = true
	}
	for b := '0'; b <= '9'; b++ {
		t[b] = true
	}
	for _, b := range "._-:/" {
		t[b] = true
	}
	return t
}()

// parseRow parses one non-blank line; a text value is left in c.text.
func (c *CSVReader) parseRow(line []byte) (model.Point, bool, error) {
	var p model.Point
	i := 0
	for i < len(line) && tagChars[line[i]] {
		i++
	}
	switch {
	case i == len(line):
		return p, false, errMissingFields
	case line[i] != ',':
		return p, false, fmt.Errorf("tag contains %s (allowed: letters, digits and ._-:/)", describeByte(line[i]))
	case i == 0:
		return p, false, errEmptyTag
	case i > MaxTagLen:
		return p, false, fmt.Errorf("tag is %d bytes long (max %d)", i, MaxTagLen)
	}
	p.Tag = c.intern(line[:i])

	t, rest, err := parseMillis(line[i+1:])
	if err != nil {
		return p, false, err
	}
	p.T = t

	text := len(rest) > 0 && rest[0] == '"'
	vf, qf, hasQ := rest, []byte(nil), false
	if text {
		var tail []byte
		if c.text, tail, err = parseQuoted(rest); err != nil {
			return p, false, err
		}
		if len(tail) > 0 {
			if tail[0] != ',' {
				return p, false, errAfterQuote
			}
			qf, hasQ = tail[1:], true
		}
	} else {
		if j := bytes.IndexByte(rest, ','); j >= 0 {
			vf, qf, hasQ = rest[:j], rest[j+1:], true
		}
		if p.V, err = parseValue(vf); err != nil {
			return p, false, err
		}
	}
	if hasQ {
		switch string(qf) {
		case "good", "":
			p.Q = model.QualityGood
		case "bad":
			p.Q = model.QualityBad
		case "uncertain":
			p.Q = model.QualityUncertain
		default:
			if bytes.IndexByte(qf, ',') >= 0 {
				return p, false, errTooManyFields
			}
			return p, false, fmt.Errorf("unknown quality %q (want good, bad or uncertain)", qf)
		}
	}
	return p, text, nil
}

// Texts returns the text rows read by the last Next, in line order. The
// slice is reused by the next call.
func (c *CSVReader) Texts() []model.TextPoint { return c.texts }

// TextLine returns the line of text row i of the last Next.
func (c *CSVReader) TextLine(i int) int { return c.textLines[i] }

// PointLine returns the line of numeric point i of the last Next (rows
// are one per line; blank lines within the batch are not counted).
func (c *CSVReader) PointLine(i int) int {
	first := c.line - (c.rows - 1) // the batch's first row
	k := 0                         // text rows before the point
	for k < len(c.textLines) && c.textLines[k] <= first+i+k {
		k++
	}
	return first + i + k
}

// parseQuoted reads a double-quoted text value at the start of b (a quote
// inside is doubled) and returns it and the bytes after the closing quote.
func parseQuoted(b []byte) (string, []byte, error) {
	var out []byte
	i := 1
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return "", nil, errOpenQuote
		}
		out = append(out, b[i:i+j]...)
		i += j + 1
		if i < len(b) && b[i] == '"' {
			out = append(out, '"')
			i++
			continue
		}
		break
	}
	s := string(out)
	if err := model.CheckText(s); err != nil {
		return "", nil, err
	}
	return s, b[i:], nil
}

var (
	errMissingFields = errors.New("missing fields (want tag,unix_ms,value[,quality])")
	errTooManyFields = errors.New("too many fields (want tag,unix_ms,value[,quality])")
	errEmptyTag      = errors.New("empty tag")
	errOpenQuote     = errors.New("text value has no closing quote (text must end on its line)")
	errAfterQuote    = errors.New("text value: want a comma or the line end after the closing quote")
)

// describeByte names a byte for an error message; a raw non-ASCII byte
// would print as a misleading rune.
func describeByte(b byte) string {
	if b >= 0x20 && b < 0x7f {
		return fmt.Sprintf("%q", string(rune(b)))
	}
	return fmt.Sprintf("byte 0x%02x", b)
}
