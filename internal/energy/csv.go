package energy

import (
	"encoding/csv"
	"io"
)

// SafeCell returns s as a spreadsheet reads it as text: a cell starting
// with =, +, -, @, a tab or a carriage return would be taken as a formula,
// so it is led by a single quote. Numbers are written without it by
// csvWriter.num, so a negative number stays a number.
func SafeCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// csvWriter writes rows whose text cells are made safe.
type csvWriter struct {
	w   *csv.Writer
	row []string
}

func newCSVWriter(w io.Writer) *csvWriter { return &csvWriter{w: csv.NewWriter(w)} }

// text adds a text cell, made safe.
func (c *csvWriter) text(s string) *csvWriter {
	c.row = append(c.row, SafeCell(s))
	return c
}

// num adds a number cell formatted by strconv: a plain decimal number
// (an optional minus, digits, a point, an exponent) is left as it is, so a
// spreadsheet reads -3.5 as a number; anything else is made safe as text.
func (c *csvWriter) num(s string) *csvWriter {
	if !plainNumber(s) {
		s = SafeCell(s)
	}
	c.row = append(c.row, s)
	return c
}

// plainNumber reports whether s is -?digits[.digits][e[+-]digits].
func plainNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > j
	}
	if !digits() {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// end writes the row.
func (c *csvWriter) end() {
	c.w.Write(c.row)
	c.row = c.row[:0]
}

func (c *csvWriter) flush() error {
	c.w.Flush()
	return c.w.Error()
}
