package ingest

import (
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/pith-historian/pith/internal/model"
)

// readAll parses the whole input in batches of batch points.
func readAll(r io.Reader, batch int) ([]model.Point, error) {
	c := NewCSVReader(r)
	var all []model.Point
	for {
		var err error
		all, err = c.Next(all, batch)
		if err == io.EOF {
			return all, nil
		}
		if err != nil {
			return all, err
		}
	}
}

func TestCSVValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []model.Point
	}{
		{"empty", "", nil},
		{"blank lines", "\n\r\n  \n\t\n", nil},
		{"one row", "plant.ai00,1700000000000,123.45\n",
			[]model.Point{{Tag: "plant.ai00", T: 1700000000000, V: 123.45}}},
		{"no final newline", "a,1,2", []model.Point{{Tag: "a", T: 1, V: 2}}},
		{"crlf", "a,1,2\r\nb,2,3\r\n", []model.Point{{Tag: "a", T: 1, V: 2}, {Tag: "b", T: 2, V: 3}}},
		{"qualities", "a,1,2,good\na,2,3,bad\na,3,4,uncertain\na,4,5,\n", []model.Point{
			{Tag: "a", T: 1, V: 2}, {Tag: "a", T: 2, V: 3, Q: model.QualityBad},
			{Tag: "a", T: 3, V: 4, Q: model.QualityUncertain}, {Tag: "a", T: 4, V: 5}}},
		{"header", "tag,unix_ms,value\na,1,2\n", []model.Point{{Tag: "a", T: 1, V: 2}}},
		{"header with quality and bom", "\xef\xbb\xbftag,unix_ms,value,quality\na,1,2\n",
			[]model.Point{{Tag: "a", T: 1, V: 2}}},
		{"bom", "\xef\xbb\xbfa,1,2\n", []model.Point{{Tag: "a", T: 1, V: 2}}},
		{"tag characters", "Site_1.dev-2:x/y,1,2\n", []model.Point{{Tag: "Site_1.dev-2:x/y", T: 1, V: 2}}},
		{"signs and zeros", "a,-5,-0.5\na,+7,+3\na,000,007.250\na,0,-0\n", []model.Point{
			{Tag: "a", T: -5, V: -0.5}, {Tag: "a", T: 7, V: 3}, {Tag: "a", T: 0, V: 7.25},
			{Tag: "a", T: 0, V: math.Copysign(0, -1)}}},
		{"int64 limits", "a,9223372036854775807,1\na,-9223372036854775808,1\n", []model.Point{
			{Tag: "a", T: math.MaxInt64, V: 1}, {Tag: "a", T: math.MinInt64, V: 1}}},
		{"slow path floats", "a,1,1e3\na,1,1.5E-300\na,1,12345678901234567890.5\na,1,.5\na,1,5.\n", []model.Point{
			{Tag: "a", T: 1, V: 1000}, {Tag: "a", T: 1, V: 1.5e-300}, {Tag: "a", T: 1, V: 12345678901234567890.5},
			{Tag: "a", T: 1, V: 0.5}, {Tag: "a", T: 1, V: 5}}},
		{"max tag", strings.Repeat("x", MaxTagLen) + ",1,2\n",
			[]model.Point{{Tag: strings.Repeat("x", MaxTagLen), T: 1, V: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, batch := range []int{1, 2, 1000} {
				got, err := readAll(strings.NewReader(tt.in), batch)
				if err != nil {
					t.Fatalf("batch %d: %v", batch, err)
				}
				checkPoints(t, got, tt.want)
			}
			// One byte per read exercises every refill boundary.
			got, err := readAll(iotest.OneByteReader(strings.NewReader(tt.in)), 3)
			if err != nil {
				t.Fatalf("one byte reads: %v", err)
			}
			checkPoints(t, got, tt.want)
		})
	}
}

func checkPoints(t *testing.T, got, want []model.Point) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d points %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Tag != w.Tag || g.T != w.T || math.Float64bits(g.V) != math.Float64bits(w.V) || g.Q != w.Q {
			t.Errorf("point %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestCSVErrors(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantLine int
		wantErr  string
	}{
		{"empty tag", "a,1,2\n,1,2\n", 2, "empty tag"},
		{"bad tag char", "a,1,2\n\na b,1,2\n", 3, `tag contains " "`},
		{"non ascii tag", "caf\xc3\xa9,1,2\n", 1, "tag contains byte 0xc3"},
		{"tag too long", strings.Repeat("x", MaxTagLen+1) + ",1,2\n", 1, "201 bytes long"},
		{"only tag", "a\n", 1, "missing fields"},
		{"tag and comma", "a,\n", 1, "missing fields"},
		{"missing value", "a,1\n", 1, "missing value"},
		{"empty timestamp", "a,,1\n", 1, "empty timestamp"},
		{"bad timestamp", "a,12x,1\n", 1, `bad timestamp "12x"`},
		{"float timestamp", "a,1.5,1\n", 1, `bad timestamp "1.5"`},
		{"timestamp overflow", "a,9223372036854775808,1\n", 1, "out of range"},
		{"timestamp huge", "a,99999999999999999999999,1\n", 1, "out of range"},
		{"empty value", "a,1,\n", 1, "empty value"},
		{"bad value", "a,1,1.2.3\n", 1, `bad value "1.2.3"`},
		{"value words", "a,1,abc\n", 1, `bad value "abc"`},
		{"nan", "a,1,NaN\n", 1, "not finite"},
		{"inf", "a,1,-Inf\n", 1, "not finite"},
		{"value overflow", "a,1,1e400\n", 1, "out of range"},
		{"bad quality", "a,1,2,great\n", 1, "unknown quality"},
		{"too many fields", "a,1,2,good,x\n", 1, "too many fields"},
		{"crlf line count", "a,1,2\r\n\r\nb,1,x\r\n", 3, "bad value"},
		{"last line without newline", "a,1,2\nb,1,x", 2, "bad value"},
		{"line too long", "a,1,2\n" + strings.Repeat("y", MaxLineLen+10) + "\n", 2, "line longer"},
		{"line too long at eof", "a,1,2\n" + strings.Repeat("y", readBufSize+10), 2, "line longer"},
		{"header not first", "a,1,2\ntag,unix_ms,value\n", 2, "bad timestamp"},
		{"space in number", "a, 1,2\n", 1, "bad timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readAll(strings.NewReader(tt.in), 1000)
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("got error %v, want a *LineError", err)
			}
			if le.Line != tt.wantLine {
				t.Errorf("line %d, want %d (%v)", le.Line, tt.wantLine, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestCSVErrorIsSticky(t *testing.T) {
	c := NewCSVReader(strings.NewReader("a,1,2\nb,x,1\nc,1,2\n"))
	pts, err := c.Next(nil, 10)
	if err == nil || len(pts) != 1 {
		t.Fatalf("got %d points, %v; want 1 point and an error", len(pts), err)
	}
	if _, err2 := c.Next(nil, 10); err2 != err {
		t.Fatalf("second call: %v, want %v", err2, err)
	}
}

func TestCSVReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("a,1,2\n"), iotest.ErrReader(boom))
	_, err := readAll(r, 1)
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the read error", err)
	}
	var le *LineError
	if errors.As(err, &le) {
		t.Fatalf("read error reported as a row error: %v", err)
	}
}

func TestCSVReset(t *testing.T) {
	c := NewCSVReader(strings.NewReader("a,1,x\n"))
	if _, err := c.Next(nil, 10); err == nil {
		t.Fatal("want an error")
	}
	c.Reset(strings.NewReader("a,1,2\n"))
	pts, err := c.Next(nil, 10)
	if err != nil || len(pts) != 1 {
		t.Fatalf("after Reset got %v, %v", pts, err)
	}
}

// TestCSVInternsTags checks that rows of a known tag share one string.
func TestCSVInternsTags(t *testing.T) {
	pts, err := readAll(strings.NewReader("a.b,1,2\na.b,2,3\n"), 10)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(pts[0].Tag) != unsafe.StringData(pts[1].Tag) {
		t.Fatal("tag strings not shared")
	}
}

func TestParseValueMatchesStrconv(t *testing.T) {
	for _, s := range []string{
		"0", "1", "0.1", "0.3", "123.45", "9007199254740991", "9007199254740992", "9007199254740993",
		"0.1234567890123456789", "1.7976931348623157", "4.9406564584124654", "2.2250738585072014",
		"0.0000000000000000000001", "0.00000000000000000000001", "-987654.321", "3.14159265358979",
		"100000000000000000000000", "1.00000000000000000000",
	} {
		got, err := parseValue([]byte(s))
		want, werr := strconv.ParseFloat(s, 64)
		if err != nil || werr != nil {
			t.Fatalf("%s: %v %v", s, err, werr)
		}
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("%s: got %v, want %v", s, got, want)
		}
	}
}

// TestCSVGolden walks testdata/csv/<case>/: input.csv is parsed and the
// points, one "tag,ms,value,quality" line each, or the error must equal
// want.txt.
func TestCSVGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/csv/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(dir, "input.csv"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, "want.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if got := renderParse(in); got != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// renderParse parses in and renders the points, then the error if any.
func renderParse(in []byte) string {
	pts, err := readAll(strings.NewReader(string(in)), 7)
	var b strings.Builder
	for _, p := range pts {
		b.WriteString(formatPoint(p))
		b.WriteByte('\n')
	}
	if err != nil {
		b.WriteString("error: " + err.Error() + "\n")
	}
	return b.String()
}

func formatPoint(p model.Point) string {
	return p.Tag + "," + strconv.FormatInt(p.T, 10) + "," +
		strconv.FormatFloat(p.V, 'g', -1, 64) + "," + p.Q.String()
}

func TestCSVZeroMax(t *testing.T) {
	c := NewCSVReader(strings.NewReader("a,1,2\n"))
	pts, err := c.Next(nil, 0)
	if err != nil || len(pts) != 1 {
		t.Fatalf("got %v, %v; want one point", pts, err)
	}
}

// TestCSVInternLimit checks that a body of many distinct names still
// parses once the intern table is full, and that Reset empties a full table.
func TestCSVInternLimit(t *testing.T) {
	var b strings.Builder
	name := strings.Repeat("n", 150)
	rows := maxInternedBytes/150 + 100
	for i := 0; i < rows; i++ {
		b.WriteString(name + strconv.Itoa(i) + ",1,2\n")
	}
	c := NewCSVReader(strings.NewReader(b.String()))
	var pts []model.Point
	for {
		var err error
		pts, err = c.Next(pts, 1<<20)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(pts) != rows || pts[rows-1].Tag != name+strconv.Itoa(rows-1) {
		t.Fatalf("got %d points, want %d", len(pts), rows)
	}
	if c.tagBytes > maxInternedBytes+MaxTagLen {
		t.Errorf("interned %d bytes, limit %d", c.tagBytes, maxInternedBytes)
	}
	c.Reset(strings.NewReader(""))
	if len(c.tags) != 0 {
		t.Errorf("full table kept %d names after Reset", len(c.tags))
	}
}
