package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "nl\n\r\t", "\x00\x1f", "é€😀", "bad\xffutf8\xc3", "\u2028"} {
		checkAppendString(t, s)
	}
}

// checkAppendString compares AppendString with encoding/json: both must
// decode to the same string.
func checkAppendString(t *testing.T, s string) {
	t.Helper()
	b := AppendString(nil, s)
	if !json.Valid(b) {
		t.Fatalf("%q: invalid JSON %s", s, b)
	}
	var got string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	ref, _ := json.Marshal(s)
	var want string
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%q: decodes to %q, encoding/json gives %q", s, got, want)
	}
	if bytes.ContainsAny(b, "<>&") {
		t.Errorf("%q: raw markup in %s", s, b)
	}
}

// FuzzAppendString checks the hand-written JSON string encoder against
// encoding/json on any input, and that markup never appears raw.
// Run with: go test -run '^$' -fuzz FuzzAppendString ./internal/jsonenc/
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"plant.ai00", `a"b`, "\xff", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkAppendString(t, s) })
}

func TestAppendFloat(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{1.5, "1.5"}, {-0.25, "-0.25"}, {1e21, "1e+21"}, {123.45, "123.45"},
		{math.NaN(), "null"}, {math.Inf(1), "null"},
	}
	for _, tt := range tests {
		if got := string(AppendFloat(nil, tt.v)); got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.v, got, tt.want)
		}
	}
}
