package chunkenc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// randomTexts draws n values the way plants write text: a few states held
// for a while, batch ids counting up, and now and then free text.
func randomTexts(r *rand.Rand, n int) []string {
	states := []string{"RUN", "STOP", "CIP", "FAULT: motor overload", ""}
	xs := make([]string, n)
	cur := states[0]
	batch := 1000
	for i := range xs {
		switch r.IntN(10) {
		case 0:
			cur = states[r.IntN(len(states))]
		case 1:
			batch++
			cur = fmt.Sprintf("B-2026-%06d", batch)
		case 2:
			b := make([]byte, r.IntN(40))
			for j := range b {
				b[j] = byte(r.IntN(256))
			}
			cur = string(b)
		case 3:
			cur = strings.Repeat("é", r.IntN(300))
		}
		xs[i] = cur
	}
	return xs
}

// TestStringsRoundTripRandom checks the codec against the naive model of a
// text column: the list of values itself.
func TestStringsRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 500; trial++ {
		n := r.IntN(1100)
		want := randomTexts(r, n)
		enc := AppendStrings([]byte{0xaa}, want)
		got, rest, err := DecodeStrings([]string{"junk"}, append(enc[1:], 0x77), n)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if len(rest) != 1 || rest[0] != 0x77 {
			t.Fatalf("trial %d: %d bytes after the column, want 1", trial, len(rest))
		}
		got = got[1:]
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d values, want %d", trial, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("trial %d value %d: %q, want %q", trial, i, got[i], want[i])
			}
		}
	}
}

// TestStringsStatesAreSmall: a state column costs its distinct values plus
// one run per change, not a copy of every value.
func TestStringsStatesAreSmall(t *testing.T) {
	xs := make([]string, 1024)
	for i := range xs {
		xs[i] = []string{"RUNNING", "STOPPED", "CLEANING"}[(i/100)%3]
	}
	if n := len(AppendStrings(nil, xs)); n > 64 {
		t.Fatalf("1024 states in 3 values take %d bytes, want <= 64", n)
	}
	ids := make([]string, 512)
	for i := range ids {
		ids[i] = fmt.Sprintf("BATCH-2026-11-%06d", i/2)
	}
	if n := len(AppendStrings(nil, ids)); n > 256*4+64 {
		t.Fatalf("256 batch ids take %d bytes, want <= %d (front coding)", n, 256*4+64)
	}
}

func TestDecodeStringsErrors(t *testing.T) {
	cases := map[string][]byte{
		"empty":           {},
		"no dictionary":   {0},
		"dict over n":     {5, 0, 1, 'a'},
		"prefix too long": {1, 3, 1, 'a', 0x04},
		"suffix past end": {1, 0, 9, 'a'},
		"index past dict": append([]byte{1, 0, 1, 'a'}, AppendInts(nil, []int64{0, 3})...),
		"negative index":  append([]byte{1, 0, 1, 'a'}, AppendInts(nil, []int64{0, -1})...),
		"indexes missing": {1, 0, 1, 'a'},
		"over MaxText":    append([]byte{1, 0, 0x81, 0x40}, make([]byte, MaxText+1)...),
	}
	for name, b := range cases {
		if _, _, err := DecodeStrings(nil, b, 2); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// goldenTexts is the text column pinned in testdata/golden/text_states.bin.
func goldenTexts() []string {
	return randomTexts(rand.New(rand.NewPCG(21, 22)), 300)
}

// TestStringsGolden pins the text column's bytes (-update rewrites them).
func TestStringsGolden(t *testing.T) {
	path := filepath.Join("testdata", "golden", "text_states.bin")
	enc := AppendStrings(nil, goldenTexts())
	if *update {
		if err := os.WriteFile(path, enc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, want) {
		t.Fatal("encoding differs from the golden file")
	}
	got, _, err := DecodeStrings(nil, want, 300)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range goldenTexts() {
		if got[i] != x {
			t.Fatalf("value %d: %q, want %q", i, got[i], x)
		}
	}
}

// FuzzDecodeStrings: on any bytes the text decoder returns values or an
// error, never panics, and what it accepts survives a re-encoding.
// Run: go test -run '^$' -fuzz FuzzDecodeStrings -fuzztime 60s ./internal/store/chunkenc/
func FuzzDecodeStrings(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "golden", "text_states.bin")); err == nil {
		f.Add(b, uint16(300))
	}
	f.Add(AppendStrings(nil, []string{"a", "ab", "ab", "b"}), uint16(4))
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		xs, _, err := DecodeStrings(nil, data, int(n))
		if err != nil {
			return
		}
		if len(xs) != int(n) {
			t.Fatalf("%d values, want %d", len(xs), n)
		}
		again, _, err := DecodeStrings(nil, AppendStrings(nil, xs), len(xs))
		if err != nil {
			t.Fatal(err)
		}
		for i := range xs {
			if again[i] != xs[i] {
				t.Fatalf("value %d changed on re-encoding", i)
			}
		}
	})
}

// BenchmarkStrings encodes and decodes a 512-value state column.
// Run: go test -run '^$' -bench Strings ./internal/store/chunkenc/
func BenchmarkStrings(b *testing.B) {
	xs := randomTexts(rand.New(rand.NewPCG(1, 2)), 512)
	enc := AppendStrings(nil, xs)
	b.ReportAllocs()
	b.ReportMetric(float64(len(enc))/512, "B/value")
	var out []string
	for i := 0; i < b.N; i++ {
		out, _, _ = DecodeStrings(out[:0], AppendStrings(enc[:0:0], xs), 512)
	}
}
