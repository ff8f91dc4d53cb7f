package chunkenc

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// randomFloats makes a column exercising the decimal path and its escapes:
// a random exponent, negatives, outliers, constant runs, -0 and the odd
// non-decimal value.
func randomFloats(r *rand.Rand, n int) []float64 {
	e := r.IntN(maxExp + 1)
	scale := math.Pow10(r.IntN(12))
	vs := make([]float64, n)
	v := (r.Float64() - 0.5) * scale
	for i := range vs {
		switch x := r.IntN(100); {
		case x < 3: // outlier
			v = (r.Float64() - 0.5) * 1e9
		case x < 4:
			v = math.Copysign(0, -1)
		case x < 5:
			v = [...]float64{math.Pi, 1e300, -1e300, 5e-324, math.MaxFloat64, math.SmallestNonzeroFloat64, 1e-300}[r.IntN(7)]
		case x < 30: // keep the value: constant runs
		default:
			v += r.NormFloat64() * scale / 100
		}
		p := math.Pow10(e)
		if r.IntN(20) > 0 && math.Abs(v*p) < 1e15 {
			vs[i] = math.Round(v*p) / p
		} else {
			vs[i] = v
		}
	}
	if r.IntN(4) == 0 { // a purely non-decimal column
		for i := range vs {
			vs[i] = math.Pi * float64(i) * (r.Float64() + 0.5)
		}
	}
	return vs
}

// randomInts makes integers with trends, noise, constant runs and extremes.
func randomInts(r *rand.Rand, n int) []int64 {
	vs := make([]int64, n)
	v := r.Int64() >> r.IntN(64)
	step := r.Int64N(1000) - 500
	noise := int64(1) << r.IntN(40)
	for i := range vs {
		switch x := r.IntN(100); {
		case x < 2:
			v = [...]int64{math.MinInt64, math.MaxInt64, 0, -1}[r.IntN(4)]
		case x < 5:
			v = int64(r.Uint64())
		case x < 40:
		default:
			v += step + r.Int64N(noise) - noise/2
		}
		vs[i] = v
	}
	return vs
}

func sameFloats(t *testing.T, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("value %d: got %v (%#x), want %v (%#x)", i, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
		}
	}
}

func sameInts(t *testing.T, got, want []int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: got %d, want %d", i, got[i], want[i])
		}
	}
}

// trailer is appended after every column in the tests to check that the
// decoders return exactly the rest of the input.
var trailer = []byte{0xde, 0xad}

func checkRest(t *testing.T, rest []byte) {
	t.Helper()
	if string(rest) != string(trailer) {
		t.Fatalf("rest = %x, want %x", rest, trailer)
	}
}

func TestFloatsRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		vs := randomFloats(r, 1+r.IntN(600))
		prefix := []float64{42}
		enc := append(AppendFloats([]byte{7}, vs), trailer...)
		got, rest, err := DecodeFloats(prefix, enc[1:], len(vs))
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkRest(t, rest)
		sameFloats(t, got[1:], vs)
		if got[0] != 42 {
			t.Fatal("prefix lost")
		}
	}
}

func TestIntsRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 3000 {
		vs := randomInts(r, 1+r.IntN(600))
		enc := append(AppendInts(nil, vs), trailer...)
		got, rest, err := DecodeInts(nil, enc, len(vs))
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkRest(t, rest)
		sameInts(t, got, vs)
	}
}

func TestTimestampsRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 2000 {
		n := 1 + r.IntN(600)
		ts := make([]int64, n)
		cur := r.Int64N(1 << 42)
		step := 1 + r.Int64N(100_000)
		jitter := r.Int64N(50)
		for i := range ts {
			ts[i] = cur
			cur += step + r.Int64N(jitter+1)
			if r.IntN(100) == 0 {
				cur += r.Int64N(1 << 30) // a gap
			}
		}
		enc := append(AppendTimestamps(nil, ts), trailer...)
		got, rest, err := DecodeTimestamps(nil, enc, n)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkRest(t, rest)
		sameInts(t, got, ts)
	}
}

func TestQualitiesRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 2000 {
		qs := make([]uint8, 1+r.IntN(600))
		q := uint8(0)
		for i := range qs {
			if r.IntN(30) == 0 {
				q = uint8(r.IntN(3))
				if r.IntN(10) == 0 {
					q = uint8(r.IntN(256))
				}
			}
			qs[i] = q
		}
		enc := append(AppendQualities(nil, qs), trailer...)
		got, rest, err := DecodeQualities(nil, enc, len(qs))
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkRest(t, rest)
		if string(got) != string(qs) {
			t.Fatalf("iter %d: qualities differ", iter)
		}
	}
}

func TestFloatsEdgeCases(t *testing.T) {
	negZero := math.Copysign(0, -1)
	tests := []struct {
		name    string
		vs      []float64
		maxSize int // bytes, 0 for no check
	}{
		{"single", []float64{1.5}, 4},
		{"negative zero alone", []float64{negZero}, 0},
		{"negative zero among decimals", []float64{1.25, negZero, 0, -3.5, negZero}, 0},
		{"tiny", []float64{5e-324, -5e-324, math.SmallestNonzeroFloat64}, 0},
		{"huge", []float64{1e300, -1e300, math.MaxFloat64, -math.MaxFloat64}, 0},
		{"constant 512", repeat(21.5, 512), 5},
		{"constant zero 512", repeat(0, 512), 4},
		{"two values", []float64{0.1, 0.2}, 6},
		{"15 digits", []float64{0.123456789012345, 1e-15, 123.000000000001}, 0},
		{"mantissa limit", []float64{1 << 50, -(1 << 50), 1<<50 - 1, 1 << 53}, 0},
		{"pi ramp", piRamp(512), 8*512 + 1},
		{"large and fine mixed", []float64{0.01, 1e14, 0.02, 1e14 + 1, -1e14}, 0},
		{"infinities", []float64{math.Inf(1), math.Inf(-1), 1}, 0},
		{"constant float32 setpoint", repeat(float64(float32(0.1)), 512), 12},
		{"negative zero column", repeat(math.Copysign(0, -1), 512), 12},
		{"float32 steps", append(repeat(float64(float32(20.7)), 200), repeat(float64(float32(21.3)), 300)...), 24},
		{"one outlier digit", append(repeat(1.25, 300), 1.23456789), 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := AppendFloats(nil, tt.vs)
			if tt.maxSize > 0 && len(enc) > tt.maxSize {
				t.Errorf("size = %d bytes, want <= %d", len(enc), tt.maxSize)
			}
			got, rest, err := DecodeFloats(nil, enc, len(tt.vs))
			if err != nil {
				t.Fatal(err)
			}
			if len(rest) != 0 {
				t.Fatalf("%d bytes left", len(rest))
			}
			sameFloats(t, got, tt.vs)
		})
	}
}

func TestTimestampsRegularAreSmall(t *testing.T) {
	for _, n := range []int{1, 2, 3, 100, 512, 65536} {
		ts := regularTimestamps(n, 10_000)
		enc := AppendTimestamps(nil, ts)
		if len(enc) > 12 {
			t.Errorf("n=%d: %d bytes, want <= 12", n, len(enc))
		}
		got, _, err := DecodeTimestamps(nil, enc, n)
		if err != nil {
			t.Fatal(err)
		}
		sameInts(t, got, ts)
	}
}

func TestQualitiesAllGoodIsOneByte(t *testing.T) {
	enc := AppendQualities(nil, make([]uint8, 512))
	if len(enc) != 1 {
		t.Errorf("all good: %d bytes, want 1", len(enc))
	}
}

func TestDecimalExponent(t *testing.T) {
	tests := []struct {
		vs     []float64
		e      int
		wantOK bool
	}{
		{nil, 0, true},
		{[]float64{1, 2, 300}, 0, true},
		{[]float64{1, 2.5, 300}, 1, true},
		{[]float64{0.1, 0.25, 0.001}, 3, true},
		{[]float64{0.3, 0.30000000000000004}, 0, false}, // 0.1+0.2 is not a short decimal
		{[]float64{math.Copysign(0, -1)}, 0, false},
		{[]float64{1e-15}, 15, true},
		{[]float64{1e-16}, 0, false},
		{[]float64{math.Pi}, 0, false},
		{[]float64{1e300}, 0, false},
		{[]float64{-273.15, 1013.25, 0.5}, 2, true},
	}
	for _, tt := range tests {
		e, ok := DecimalExponent(tt.vs)
		if ok != tt.wantOK || (ok && e != tt.e) {
			t.Errorf("DecimalExponent(%v) = %d, %v, want %d, %v", tt.vs, e, ok, tt.e, tt.wantOK)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := AppendFloats(nil, []float64{1.5, 2.25, 3, 4, 5.5, 100})
	// Every truncation of a valid column must fail cleanly, not panic.
	for i := range len(good) {
		if _, _, err := DecodeFloats(nil, good[:i], 6); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d: err = %v, want ErrCorrupt", i, err)
		}
	}
	ints := AppendInts(nil, []int64{5, 9, 1000, -4, 7, 7, 7})
	for i := range len(ints) {
		if _, _, err := DecodeInts(nil, ints[:i], 7); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ints truncated to %d: err = %v, want ErrCorrupt", i, err)
		}
	}
	if _, _, err := DecodeQualities(nil, []byte{1 << 2}, 5); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short quality run: err = %v", err)
	}
	for _, h := range []byte{0x03, 0x10, 0x40, 0xf0} {
		if _, _, err := DecodeInts(nil, []byte{h, 2, 2, 2, 2}, 3); !errors.Is(err, ErrCorrupt) {
			t.Errorf("int column header %#x: err = %v, want ErrCorrupt", h, err)
		}
	}
	if _, _, err := DecodeFloats(nil, []byte{0xff}, 3); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad float header: err = %v", err)
	}
}

func TestZeroLength(t *testing.T) {
	if got := AppendFloats(nil, nil); len(got) != 0 {
		t.Errorf("AppendFloats(nil) = %x", got)
	}
	vs, rest, err := DecodeFloats(nil, trailer, 0)
	if err != nil || len(vs) != 0 || len(rest) != 2 {
		t.Errorf("DecodeFloats n=0: %v %v %v", vs, rest, err)
	}
}

func repeat(v float64, n int) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = v
	}
	return vs
}

func piRamp(n int) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = math.Pi * float64(i)
	}
	return vs
}

// TestDecimalOfMatchesBruteForce checks the shortcuts of decimalOf (trailing
// zeros instead of lower exponents, any starting hint) against trying every
// exponent in turn.
func TestDecimalOfMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 200000 {
		var v float64
		switch r.IntN(4) {
		case 0:
			v = float64(r.Int64N(1<<52)-1<<51) / math.Pow10(r.IntN(18))
		case 1:
			v = math.Round(r.NormFloat64()*math.Pow10(r.IntN(16))) / math.Pow10(r.IntN(16))
		case 2:
			v = float64(r.Int64N(2000)-1000) * math.Pow10(r.IntN(12))
		default:
			v = math.Float64frombits(r.Uint64())
		}
		wantE, wantOK := -1, false
		var wantM int64
		for e := 0; e <= maxExp; e++ {
			if m, ok := mantissaAt(v, e); ok {
				wantE, wantM, wantOK = e, m, true
				break
			}
		}
		hint := r.IntN(maxExp + 1)
		m, e, ok := decimalOf(v, hint)
		if ok != wantOK || (ok && (e != wantE || m != wantM)) {
			t.Fatalf("decimalOf(%v, %d) = %d, %d, %v; brute force %d, %d, %v", v, hint, m, e, ok, wantM, wantE, wantOK)
		}
	}
}

func TestMantissaLimitTable(t *testing.T) {
	for d, lim := range mantissaLimit {
		if want := int64(maxMantissa) / pow10Int[d]; lim != want {
			t.Errorf("mantissaLimit[%d] = %d, want %d", d, lim, want)
		}
	}
}
