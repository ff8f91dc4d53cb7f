package ingest

import (
	"errors"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

func TestLineProtocolConvert(t *testing.T) {
	const now = 1_700_000_000_000
	tests := []struct {
		name      string
		body      string
		precision string
		want      []model.Point
		skipped   int
	}{
		{"plain", "cpu,host=a value=1.5 1700000000000000000\n", "",
			[]model.Point{{Tag: "cpu.a.value", T: 1_700_000_000_000, V: 1.5}}, 0},
		{"bench shape ms", "plant,tag=plant.ai00 value=11.71 1700000000000\n", "ms",
			[]model.Point{{Tag: "plant.plant.ai00.value", T: 1_700_000_000_000, V: 11.71}}, 0},
		{"tags sorted by key", "m,z=1,a=2 f=3 5\n", "s",
			[]model.Point{{Tag: "m.2.1.f", T: 5000, V: 3}}, 0},
		{"int uint bool string", "m i=-3i,u=7u,b=t,B=FALSE,s=\"x y\" 1\n", "ms",
			[]model.Point{{Tag: "m.i", T: 1, V: -3}, {Tag: "m.u", T: 1, V: 7}, {Tag: "m.b", T: 1, V: 1}, {Tag: "m.B", T: 1, V: 0}}, 1},
		{"no timestamp takes now", "m f=1\n", "",
			[]model.Point{{Tag: "m.f", T: now, V: 1}}, 0},
		{"escapes and illegal bytes", "my\\ meas,k=us\\,mid\\ west f\\=x=2 3\n", "h",
			[]model.Point{{Tag: "my_meas.us_mid_west.f_x", T: 3 * 3_600_000, V: 2}}, 0},
		{"negative ns floors", "m f=1 -1\n", "ns",
			[]model.Point{{Tag: "m.f", T: -1, V: 1}}, 0},
		{"comments blank crlf", "# c\r\n\r\n  m f=1 1\r\n", "s",
			[]model.Point{{Tag: "m.f", T: 1000, V: 1}}, 0},
		{"exponent", "m f=1e3 1", "u", []model.Point{{Tag: "m.f", T: 0, V: 1000}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mul, div, ok := precisionScale(tc.precision)
			if !ok {
				t.Fatalf("precision %q refused", tc.precision)
			}
			var st lpState
			got, skipped, err := st.convert([]byte(tc.body), mul, div, now, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("point %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			if skipped != tc.skipped {
				t.Errorf("skipped %d, want %d", skipped, tc.skipped)
			}
		})
	}
}

func TestLineProtocolErrors(t *testing.T) {
	tests := []struct {
		body string
		line int
		want string
	}{
		{"m f=1 1\nm\n", 2, "missing fields"},
		{"m f= 1\n", 1, "empty field value"},
		{"m,t f=1\n", 1, "missing '='"},
		{"m,t= f=1\n", 1, "empty tag value"},
		{"m f=abc\n", 1, "bad value"},
		{"m f=NaN\n", 1, "not finite"},
		{"m f=\"open\n", 1, "unterminated"},
		{"m f=1 12x\n", 1, "bad timestamp"},
		{"m f=1 1 2\n", 1, "unexpected bytes"},
		{"m f=1i2\n", 1, "bad value"},
		{"m f=99999999999999999999i\n", 1, "bad integer"},
		{",t=1 f=1\n", 1, "empty measurement"},
		{"m " + strings.Repeat("f", 201) + "=1\n", 1, "max 200"},
	}
	for _, tc := range tests {
		var st lpState
		_, _, err := st.convert([]byte(tc.body), 1, 1, 0, false)
		var le *LineError
		if !errors.As(err, &le) {
			t.Errorf("%q: got %v, want a LineError", tc.body, err)
			continue
		}
		if le.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v (line %d), want %q on line %d", tc.body, err, le.Line, tc.want, tc.line)
		}
	}
}

func TestNameRule(t *testing.T) {
	tests := []struct {
		parts []string
		want  string
	}{
		{[]string{"plant", "ai00"}, "plant.ai00"},
		{[]string{"a b", "c,d"}, "a_b.c_d"},
		{[]string{"a  ,b"}, "a_b"},
		{[]string{"", "x", ""}, "x"},
		{[]string{".a..b.", "c"}, "a.b.c"},
		{[]string{"Température", "°C"}, "Temp_rature._C"},
		{[]string{"x:y/z-w_v"}, "x:y/z-w_v"},
		{[]string{"_", "a"}, "_.a"},
		{[]string{"é", "é"}, "_._"},
	}
	for _, tc := range tests {
		var nb NameBuilder
		for _, p := range tc.parts {
			nb.AddString(p)
		}
		if got := string(nb.Bytes()); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.parts, got, tc.want)
		}
	}
	var nb NameBuilder
	nb.AddPath("emon/emontx/power1")
	if got := string(nb.Bytes()); got != "emon.emontx.power1" {
		t.Errorf("AddPath: got %q", got)
	}
	if _, err := CleanName(""); err == nil {
		t.Error("empty name accepted")
	}
	if _, err := CleanName(strings.Repeat("a", MaxTagLen+1)); err == nil {
		t.Error("long name accepted")
	}
}
