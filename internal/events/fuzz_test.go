package events

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
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

// FuzzCanon checks the canonical decoder against Decode and AppendJSON:
// when it takes a body, the same lines byte for byte (assigned ids
// aside, which are random) and the right ids and names for accept;
// through batch.decode, which falls back to the slow path, the same
// lines or the same error. Seeds are the golden bodies in
// testdata/decode and the cases of TestCanon.
//
// Run with: go test -run '^$' -fuzz FuzzCanon -parallel 1 ./internal/events/
func FuzzCanon(f *testing.F) {
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
	f.Add([]byte(batchBody(3)))
	for _, tt := range canonTests {
		f.Add([]byte(tt.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkCanon(t, body) })
}

// checkCanon compares the canonical decoder on body with Decode and
// AppendJSON, and reports whether it took the body itself.
func checkCanon(t *testing.T, body []byte) (fast bool) {
	t.Helper()
	const now, maxEvents = 1700000000000, 5
	want, werr := Decode(nil, bytes.NewReader(body), now, maxEvents)
	var wantLines []byte
	wantAssigned := make([]bool, len(want))
	for i := range want {
		wantLines = AppendJSON(wantLines, &want[i])
		wantAssigned[i] = want[i].assigned
	}
	check := func(path string, lines []byte, evs []canonEvent) {
		t.Helper()
		if len(evs) != len(want) {
			t.Fatalf("%s: %d events, Decode %d: %q", path, len(evs), len(want), body)
		}
		assigned := make([]bool, len(evs))
		start := 0
		for i, ev := range evs {
			if ev.end <= start || ev.end > len(lines) || lines[ev.end-1] != '\n' || bytes.IndexByte(lines[start:ev.end-1], '\n') >= 0 {
				t.Fatalf("%s: event %d ends at %d, not after its line: %q", path, i, ev.end, lines)
			}
			start = ev.end
			if ev.assigned != want[i].assigned || ev.name != want[i].Name || !ev.assigned && ev.id != want[i].ID {
				t.Fatalf("%s: event %d: got id %q assigned %v name %q, Decode %q %v %q",
					path, i, ev.id, ev.assigned, ev.name, want[i].ID, want[i].assigned, want[i].Name)
			}
			assigned[i] = ev.assigned
		}
		if start != len(lines) {
			t.Fatalf("%s: %d bytes after the last event", path, len(lines)-start)
		}
		if got, w := maskAssigned(t, lines, assigned), maskAssigned(t, wantLines, wantAssigned); got != w {
			t.Fatalf("%s: lines differ for %q:\ngot  %s\nwant %s", path, body, got, w)
		}
	}

	var d canonDecoder
	lines, evs, ok := d.appendCanon(nil, nil, body, now, maxEvents)
	if ok {
		if werr != nil {
			t.Fatalf("canonical path takes what Decode refuses (%v): %q", werr, body)
		}
		check("canonical path", lines, evs)
	}

	var b batch
	err := b.decode(body, now, maxEvents, nil)
	if !sameError(err, werr) {
		t.Fatalf("batch.decode: error %v, Decode %v: %q", err, werr, body)
	}
	if err == nil {
		check("batch.decode", b.buf[recHeaderSize:], shift(b.evs, -recHeaderSize))
	}
	return ok
}

// sameError reports whether a and b are both nil, both ValidationErrors
// saying the same, or both other errors with the same text.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	var va, vb *ValidationError
	if errors.As(a, &va) != errors.As(b, &vb) {
		return false
	}
	if va != nil {
		return va.Index == vb.Index && va.Field == vb.Field && va.Msg == vb.Msg
	}
	return a.Error() == b.Error()
}

// shift returns evs with their ends moved by d.
func shift(evs []canonEvent, d int) []canonEvent {
	out := slices.Clone(evs)
	for i := range out {
		out[i].end += d
	}
	return out
}

// maskAssigned returns lines with the ids of the assigned events
// replaced by "?", after checking that each is 32 hex digits as NewID
// draws them.
func maskAssigned(t *testing.T, lines []byte, assigned []bool) string {
	t.Helper()
	var out []byte
	i := 0
	for line := range bytes.Lines(lines) {
		if i < len(assigned) && assigned[i] {
			const prefix = `{"id":"`
			id, ok := bytes.CutPrefix(line, []byte(prefix))
			if !ok || len(id) < 33 || id[32] != '"' {
				t.Fatalf("line %d: no assigned id: %s", i, line)
			}
			if _, err := hex.DecodeString(string(id[:32])); err != nil || bytes.ContainsAny(id[:32], "ABCDEF") {
				t.Fatalf("line %d: assigned id %s is not 32 lower-case hex digits", i, id[:32])
			}
			line = append([]byte(prefix+`?`), id[32:]...)
		}
		out = append(out, line...)
		i++
	}
	return string(out)
}
