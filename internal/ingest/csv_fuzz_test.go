package ingest

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzCSVReader checks that no input panics, that errors carry a line
// number inside the input, and that every parsed row round-trips: printing
// the points back as CSV and parsing again yields the same points.
// Run with: go test -run '^$' -fuzz FuzzCSVReader ./internal/ingest/
func FuzzCSVReader(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/csv/*/input.csv")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a,1,2,bad\r\n\n,x\n"))
	f.Add([]byte("a,-9223372036854775808,1e308\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pts, err := readAll(bytes.NewReader(data), 5)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("non-line error from a bytes.Reader: %v", err)
			}
			if lines := bytes.Count(data, []byte("\n")) + 1; le.Line < 1 || le.Line > lines {
				t.Fatalf("error on line %d of a %d-line input", le.Line, lines)
			}
		}
		var out strings.Builder
		for _, p := range pts {
			if math.IsNaN(p.V) || math.IsInf(p.V, 0) {
				t.Fatalf("non-finite value parsed: %+v", p)
			}
			out.WriteString(formatPoint(p) + "\n")
		}
		again, err := readAll(strings.NewReader(out.String()), 1000)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", out.String(), err)
		}
		checkPoints(t, again, pts)
	})
}

// FuzzParseValue checks the float fast path against strconv.ParseFloat:
// same acceptance of finite values and bit-identical results.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{"123.45", "-0", "9007199254740993", "0.1", "1e5", "1.", ".5", "+3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseValue([]byte(s))
		want, werr := strconv.ParseFloat(s, 64)
		finite := werr == nil && !math.IsNaN(want) && !math.IsInf(want, 0)
		if (err == nil) != finite {
			t.Fatalf("%q: parseValue err %v, strconv %v, %v", s, err, want, werr)
		}
		if err == nil && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q: got %v, want %v", s, got, want)
		}
	})
}
