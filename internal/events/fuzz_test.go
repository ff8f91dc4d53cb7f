package events

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bodies to the request decoder. A body it
// accepts must round-trip: its canonical lines decode again to the same
// lines. Seeds are the golden bodies in testdata/decode.
//
// Run with: go test -run '^$' -fuzz FuzzDecode ./internal/events/
func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/decode/*.json")
	if len(seeds) == 0 {
		f.Fatal("no seeds in testdata/decode")
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := Decode(nil, bytes.NewReader(body), 1, 100)
		if err != nil {
			if len(evs) != 0 && len(evs) >= 100 {
				t.Fatalf("error %v with %d events", err, len(evs))
			}
			return
		}
		var lines []byte
		for i := range evs {
			lines = AppendJSON(lines, &evs[i])
		}
		again, err := Decode(nil, bytes.NewReader(lines), 2, 100)
		if err != nil {
			t.Fatalf("canonical form does not decode: %v\n%s", err, lines)
		}
		var lines2 []byte
		for i := range again {
			lines2 = AppendJSON(lines2, &again[i])
		}
		if !bytes.Equal(lines, lines2) {
			t.Fatalf("round trip changed the events:\n%s\n%s", lines, lines2)
		}
	})
}

// TestGoldenDecode checks the golden bodies: all but invalid.json decode.
func TestGoldenDecode(t *testing.T) {
	seeds, _ := filepath.Glob("testdata/decode/*.json")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decode(nil, bytes.NewReader(b), 1, 100)
		if bad := filepath.Base(p) == "invalid.json"; (err != nil) != bad {
			t.Errorf("%s: got error %v, want error %v", p, err, bad)
		}
	}
}

// masked returns the canonical lines of evs with assigned ids blanked,
// since the two decoders draw different random ids.
func masked(evs []Event) string {
	var b []byte
	for _, ev := range evs {
		if len(ev.ID) == 32 {
			ev.ID = "?"
		}
		b = AppendJSON(b, &ev)
	}
	return string(b)
}

// FuzzDecodeBytes checks the fast decoder against Decode: the same events
// when Decode accepts a body, an error when it does not. Seeds are the
// golden bodies in testdata/decode.
//
// Run with: go test -run '^$' -fuzz FuzzDecodeBytes ./internal/events/
func FuzzDecodeBytes(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/decode/*.json")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("{\"name\":\"a\"}\x00"))
	f.Add([]byte(`{"name":"a","num":{"x":1e-400,"y":-0}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		want, werr := Decode(nil, bytes.NewReader(body), 1, 5)
		fast, ferr := fastDecode(nil, body, 1, 5)
		if ferr != nil {
			return // DecodeBytes falls back to Decode
		}
		if werr != nil {
			t.Fatalf("fast path accepted what Decode refuses (%v): %q", werr, body)
		}
		if a, b := masked(fast), masked(want); a != b {
			t.Fatalf("fast path differs:\n%s\n%s", a, b)
		}
	})
}

func TestFastPathTaken(t *testing.T) {
	for _, p := range []string{"testdata/decode/one.json", "testdata/decode/array.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fastDecode(nil, b, 1, 100); err != nil {
			t.Errorf("%s: fast path not taken: %v", p, err)
		}
	}
}
