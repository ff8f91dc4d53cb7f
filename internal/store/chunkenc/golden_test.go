package chunkenc

import (
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Run `go test ./internal/store/chunkenc -run Golden -update` to rewrite the
// golden files after an intended format change (and say so in the commit:
// chunks already on disk use the old bytes).
var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenColumn is one column whose encoding is pinned in testdata/golden.
type goldenColumn struct {
	name   string
	kind   string // timestamps, floats, ints or qualities
	ts     []int64
	vs     []float64
	qs     []uint8
	encode func() []byte
}

// goldenColumns builds the pinned columns from deterministic generators.
func goldenColumns() []goldenColumn {
	fts, fvs := feedChunks(7, 600)
	r := rand.New(rand.NewPCG(11, 12))
	analog := plantSignal(r, plantAnalog, 512)
	counter := plantSignal(r, plantCounter, 512)
	digital := plantSignal(r, plantDigital, 512)
	jitter := make([]int64, 300)
	for i := range jitter {
		jitter[i] = 1_700_000_000_000 + int64(i)*1000 + r.Int64N(20)
	}
	noise := make([]float64, 64)
	for i := range noise {
		noise[i] = math.Float64frombits(r.Uint64() &^ (0x7ff << 52)) // finite, random bits
	}
	edge := []float64{0, math.Copysign(0, -1), 1e300, 5e-324, -1e-300, 0.1, 123.456, math.MaxFloat64, 1}
	qs := make([]uint8, 512)
	for i := 200; i < 260; i++ {
		qs[i] = 1
	}
	qs[400] = 2
	counts := make([]int64, 256)
	for i := range counts {
		counts[i] = 60 - int64(r.IntN(3))
		if i%50 == 0 {
			counts[i] = 0
		}
	}
	cols := []goldenColumn{
		{name: "feed_ts", kind: "timestamps", ts: fts[0]},
		{name: "feed_values", kind: "floats", vs: fvs[0]},
		{name: "jitter_ts", kind: "timestamps", ts: jitter},
		{name: "analog", kind: "floats", vs: analog},
		{name: "counter", kind: "floats", vs: counter},
		{name: "digital", kind: "floats", vs: digital},
		{name: "constant", kind: "floats", vs: repeat(21.5, 512)},
		{name: "pi_bits", kind: "floats", vs: piRamp(100)},
		{name: "float32_xor", kind: "floats", vs: float32Wave(512)},
		{name: "float32_steps_bits", kind: "floats", vs: float32Steps(512)},
		{name: "noise_raw", kind: "floats", vs: noise},
		{name: "edge_patches", kind: "floats", vs: edge},
		{name: "counts", kind: "ints", ts: counts},
		{name: "qualities", kind: "qualities", qs: qs},
		{name: "qualities_good", kind: "qualities", qs: make([]uint8, 512)},
	}
	for i := range cols {
		c := &cols[i]
		switch c.kind {
		case "timestamps":
			c.encode = func() []byte { return AppendTimestamps(nil, c.ts) }
		case "ints":
			c.encode = func() []byte { return AppendInts(nil, c.ts) }
		case "floats":
			c.encode = func() []byte { return AppendFloats(nil, c.vs) }
		case "qualities":
			c.encode = func() []byte { return AppendQualities(nil, c.qs) }
		}
	}
	return cols
}

func (c goldenColumn) n() int { return max(len(c.ts), len(c.vs), len(c.qs)) }

func goldenPath(name string) string { return filepath.Join("testdata", "golden", name+".bin") }

// TestGolden pins the byte format: the encoders must keep producing the
// stored bytes, and the decoders must read them back.
func TestGolden(t *testing.T) {
	for _, c := range goldenColumns() {
		t.Run(c.name, func(t *testing.T) {
			enc := c.encode()
			path := goldenPath(c.name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, enc, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if string(enc) != string(want) {
				t.Errorf("encoding changed: got %d bytes, golden %d bytes", len(enc), len(want))
			}
			switch c.kind {
			case "timestamps", "ints":
				got, rest, err := DecodeInts(nil, want, c.n())
				if err != nil || len(rest) != 0 {
					t.Fatalf("decode: %v, %d bytes left", err, len(rest))
				}
				sameInts(t, got, c.ts)
			case "floats":
				got, rest, err := DecodeFloats(nil, want, c.n())
				if err != nil || len(rest) != 0 {
					t.Fatalf("decode: %v, %d bytes left", err, len(rest))
				}
				sameFloats(t, got, c.vs)
			case "qualities":
				got, rest, err := DecodeQualities(nil, want, c.n())
				if err != nil || len(rest) != 0 {
					t.Fatalf("decode: %v, %d bytes left", err, len(rest))
				}
				if string(got) != string(c.qs) {
					t.Fatal("qualities differ")
				}
			}
		})
	}
}

// addGoldenSeeds seeds a fuzz target with the golden files of one kind.
func addGoldenSeeds(f *testing.F, kinds ...string) {
	for _, c := range goldenColumns() {
		for _, k := range kinds {
			if c.kind != k {
				continue
			}
			data, err := os.ReadFile(goldenPath(c.name))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, uint16(c.n()))
			f.Add(data, uint16(c.n()+1))
			f.Add(data[:len(data)/2], uint16(c.n()))
		}
	}
}

// float32Wave is a slow wave read as float32 (a Modbus float register), so
// its values are not short decimals: the XOR mode wins on it.
func float32Wave(n int) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = float64(float32(20 + math.Sin(float64(i)*0.01)*3))
	}
	return vs
}

// float32Steps is a float32 setpoint changed now and then: the bits mode
// wins on it.
func float32Steps(n int) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = float64(float32(20.7 + float64(i/100)*0.1))
	}
	return vs
}
