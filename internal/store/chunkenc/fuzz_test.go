package chunkenc

import (
	"encoding/binary"
	"math"
	"testing"
)

// The decoders read bytes from disk: on any input they must return values
// or an error, never panic, write every value they return (decoding into a
// buffer full of junk gives the same result), and what they accept must
// survive a re-encoding.
// Run one with e.g. `go test -run '^$' -fuzz FuzzDecodeFloats -fuzztime 60s
// ./internal/store/chunkenc/`.

func FuzzDecodeTimestamps(f *testing.F) {
	addGoldenSeeds(f, "timestamps", "ints")
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		ts, _, err := DecodeTimestamps(nil, data, int(n))
		if err != nil {
			return
		}
		junk, _, _ := DecodeTimestamps(junkInts(int(n)), data, int(n))
		sameInts(t, junk, ts)
		again, _, err := DecodeTimestamps(nil, AppendTimestamps(nil, ts), len(ts))
		if err != nil {
			t.Fatal(err)
		}
		sameInts(t, again, ts)
	})
}

func FuzzDecodeInts(f *testing.F) {
	addGoldenSeeds(f, "ints", "timestamps")
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		vs, _, err := DecodeInts(nil, data, int(n))
		if err != nil {
			return
		}
		junk, _, _ := DecodeInts(junkInts(int(n)), data, int(n))
		sameInts(t, junk, vs)
		again, _, err := DecodeInts(nil, AppendInts(nil, vs), len(vs))
		if err != nil {
			t.Fatal(err)
		}
		sameInts(t, again, vs)
	})
}

func FuzzDecodeFloats(f *testing.F) {
	addGoldenSeeds(f, "floats")
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		vs, _, err := DecodeFloats(nil, data, int(n))
		if err != nil {
			return
		}
		junk := make([]float64, n)
		for i := range junk {
			junk[i] = float64(i) + 0.5
		}
		junk, _, _ = DecodeFloats(junk[:0], data, int(n))
		sameFloats(t, junk, vs)
		again, _, err := DecodeFloats(nil, AppendFloats(nil, vs), len(vs))
		if err != nil {
			t.Fatal(err)
		}
		sameFloats(t, again, vs)
	})
}

func FuzzDecodeQualities(f *testing.F) {
	addGoldenSeeds(f, "qualities")
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		qs, _, err := DecodeQualities(nil, data, int(n))
		if err != nil {
			return
		}
		junk := make([]uint8, n)
		for i := range junk {
			junk[i] = 0xa5
		}
		junk, _, _ = DecodeQualities(junk[:0], data, int(n))
		if string(junk) != string(qs) {
			t.Fatal("decoding into a used buffer differs")
		}
		again, _, err := DecodeQualities(nil, AppendQualities(nil, qs), len(qs))
		if err != nil || string(again) != string(qs) {
			t.Fatalf("re-encoding: %v", err)
		}
	})
}

// FuzzFloatsRoundTrip drives the encoder with values built from the input:
// three bytes make a short decimal (int16 mantissa, exponent), a 0xff byte
// makes the next eight bytes a raw float, so both the decimal and the
// fallback paths are reached.
func FuzzFloatsRoundTrip(f *testing.F) {
	f.Add([]byte{1, 0, 2, 5, 0, 2, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x80})
	f.Add([]byte{0xff, 0x18, 0x2d, 0x44, 0x54, 0xfb, 0x21, 0x09, 0x40})
	f.Fuzz(func(t *testing.T, data []byte) {
		var vs []float64
		for len(data) >= 3 {
			if data[0] == 0xff && len(data) >= 9 {
				vs = append(vs, math.Float64frombits(binary.LittleEndian.Uint64(data[1:])))
				data = data[9:]
				continue
			}
			m := int16(binary.LittleEndian.Uint16(data))
			vs = append(vs, float64(m)/math.Pow10(int(data[2]%16)))
			data = data[3:]
		}
		got, rest, err := DecodeFloats(nil, AppendFloats(nil, vs), len(vs))
		if err != nil || len(rest) != 0 {
			t.Fatalf("decode: %v, %d bytes left", err, len(rest))
		}
		sameFloats(t, got, vs)
	})
}

// FuzzIntsRoundTrip drives the integer encoder with arbitrary int64s.
func FuzzIntsRoundTrip(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var vs []int64
		for ; len(data) >= 8; data = data[8:] {
			vs = append(vs, int64(binary.LittleEndian.Uint64(data)))
		}
		got, rest, err := DecodeInts(nil, AppendInts(nil, vs), len(vs))
		if err != nil || len(rest) != 0 {
			t.Fatalf("decode: %v, %d bytes left", err, len(rest))
		}
		sameInts(t, got, vs)
	})
}

// junkInts returns an empty slice whose spare capacity holds non-zero junk.
func junkInts(n int) []int64 {
	junk := make([]int64, n)
	for i := range junk {
		junk[i] = int64(i)*7919 + 13
	}
	return junk[:0]
}
