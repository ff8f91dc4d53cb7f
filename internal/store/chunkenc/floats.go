package chunkenc

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"
)

// The float column header byte: bits 0-3 hold the decimal exponent, bit 4
// says a patch list follows the mantissas, bits 5-7 hold the mode (bits
// 0-4 are zero in the other modes).
const (
	modeDecimal = 0 // int column of mantissas m, value = float64(m) / 10^e
	modeXOR     = 1 // Gorilla-style XOR bit stream
	modeRaw     = 2 // 8 little-endian bytes per value
	modeBits    = 3 // the values' IEEE 754 bit patterns as an integer column
	patchFlag   = 0x10
)

// maxExp is the largest decimal exponent tried: 10^15 is still exact in a
// float64 and sensor values rarely carry more digits.
const maxExp = 15

// maxMantissa bounds the decimal mantissas so that they, and ten times them,
// convert to float64 exactly; the exponent search relies on it.
const maxMantissa = 1 << 50

// pow10 holds the exact powers of ten up to 10^maxExp.
var pow10 = [maxExp + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// patchCost is the approximate size in bytes of one value stored as a
// patch (gap varint and 8 raw bytes); digitCost is what one more decimal
// digit costs per value, in tenths of a byte (log2(10)/8 = 0.415 byte).
const (
	patchCost = 10
	digitCost = 4
)

// mantissaAt returns m with float64(m)/10^e == v bit for bit, if there is
// one with |m| < maxMantissa. Comparing bits keeps -0 (which has no
// mantissa: 0/10^e is +0) and NaN out.
func mantissaAt(v float64, e int) (int64, bool) {
	x := v * pow10[e]
	if !(x > -maxMantissa && x < maxMantissa) {
		return 0, false
	}
	m := int64(x) // truncates toward zero; round to nearest below
	if f := x - float64(m); f >= 0.5 {
		m++
	} else if f <= -0.5 {
		m--
	}
	return m, math.Float64bits(float64(m)/pow10[e]) == math.Float64bits(v)
}

// decimalOf returns the smallest e <= maxExp at which v is an exact decimal,
// with its mantissa, starting the search at hint (the previous value's
// exponent, usually right). If v is exact at e with mantissa m, it is exact
// at e-1 exactly when m is a multiple of ten (both describe the same real
// number, hence the same rounding), so trailing zeros of m are stripped
// instead of testing lower exponents.
func decimalOf(v float64, hint int) (m int64, e int, ok bool) {
	m, ok = mantissaAt(v, hint)
	e = hint
	if !ok && math.Abs(v*pow10[hint]) >= maxMantissa {
		// Too large at hint: a lower exponent may still hold it.
		for e = hint - 1; e >= 0; e-- {
			if m, ok = mantissaAt(v, e); ok {
				break
			}
		}
	}
	if ok {
		for e > 0 && m%10 == 0 {
			m /= 10
			e--
		}
		return m, e, true
	}
	for e = hint + 1; e <= maxExp; e++ {
		if m, ok = mantissaAt(v, e); ok {
			return m, e, true
		}
		if math.Abs(v*pow10[e]) >= maxMantissa {
			break
		}
	}
	return 0, 0, false
}

// DecimalExponent reports the smallest e such that every value of vs is an
// exact decimal with e digits after the point, that is float64(m)/10^e
// gives the value back bit for bit for some integer m (so -0, NaN, infinities
// and values needing more than 15 digits have none). ok is false if there is
// no such e <= 15. It is the test AppendFloats uses.
func DecimalExponent(vs []float64) (e int, ok bool) {
	return DecimalExponentFrom(0, vs)
}

// DecimalExponentFrom continues DecimalExponent over more values: e is
// what it returned for the values before vs, so that a column read a
// piece at a time gets the exponent of the whole.
func DecimalExponentFrom(e int, vs []float64) (int, bool) {
	for _, v := range vs {
		if _, ok := mantissaAt(v, e); ok {
			continue
		}
		_, ve, ok := decimalOf(v, e)
		if !ok {
			return 0, false
		}
		e = max(e, ve)
	}
	return e, true
}

// AppendFloats appends an encoding of vs to dst. Columns of decimals (most
// sensor data) are stored as integer mantissas in the integer column format,
// with the few values that are not decimals at the chosen exponent (-0,
// outliers with many digits) patched in raw. Other columns use a
// Gorilla-style XOR stream, their bit patterns as an integer column, or raw
// 8-byte values, whichever is smallest.
func AppendFloats(dst []byte, vs []float64) []byte {
	n := len(vs)
	if n == 0 {
		return dst
	}
	// Each value's smallest exponent and mantissa, -1 for none.
	var msStack [stackValues]int64
	var esStack [stackValues]int8
	ms, es := msStack[:0], esStack[:0]
	if n > stackValues {
		ms, es = make([]int64, 0, n), make([]int8, 0, n)
	}
	ms, es = ms[:n], es[:n]
	var hist [maxExp + 1]int
	hint := 0
	for i, v := range vs {
		m, e, ok := decimalOf(v, hint)
		if !ok {
			es[i] = -1
			continue
		}
		ms[i], es[i] = m, int8(e)
		hist[e]++
		hint = e
	}
	// Pick the exponent that minimises patches against extra digits.
	bestE, bestCost, patches := 0, math.MaxInt, 0
	above := n // values that are not decimals at exponent e
	for e := 0; e <= maxExp; e++ {
		above -= hist[e]
		cost := above*patchCost*10 + n*e*digitCost
		if cost < bestCost {
			bestE, bestCost, patches = e, cost, above
		}
	}
	start := len(dst)
	decimalLen := math.MaxInt
	if patches < n {
		// A patch costs about what a non-decimal value costs in the
		// fallbacks, so the decimal form is a candidate as long as some
		// values are decimals.
		dst, patches = appendDecimal(dst, vs, ms, es, bestE)
		decimalLen = len(dst) - start
		if patches*16 <= n && len(dst)-start <= 1+8*n {
			return dst
		}
	}
	// Too many patches to be sure decimal wins: try the others and keep the
	// smallest.
	alt := appendXOR(dst[len(dst):], vs)
	// The values' bit patterns as an integer column catch what XOR misses:
	// a constant or step-wise non-decimal value (a float32 setpoint) costs
	// a few bytes instead of a bit per value.
	if b := appendBits(alt[len(alt):], vs); len(b) < len(alt) {
		alt = b
	}
	if len(alt) < decimalLen && len(alt) <= 1+8*n {
		dst = append(dst[:start], alt...)
		return dst
	}
	if decimalLen <= 1+8*n {
		return dst
	}
	dst = append(dst[:start], modeRaw<<5)
	for _, v := range vs {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
	}
	return dst
}

// appendBits writes vs in bits mode: header, then the IEEE 754 bit
// patterns of the values as an integer column.
func appendBits(dst []byte, vs []float64) []byte {
	var stack [stackValues]int64
	bs := stack[:0]
	if len(vs) > stackValues {
		bs = make([]int64, 0, len(vs))
	}
	for _, v := range vs {
		bs = append(bs, int64(math.Float64bits(v)))
	}
	return appendIntColumn(append(dst, modeBits<<5), bs)
}

// pow10Int holds the powers of ten up to 10^maxExp as integers.
var pow10Int = [maxExp + 1]int64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// mantissaLimit[d] is maxMantissa / 10^d: a mantissa scaled by 10^d stays
// below maxMantissa if it is below this (a table, as a division per value
// would dominate the encoder).
var mantissaLimit = [maxExp + 1]int64{
	1125899906842624, 112589990684262, 11258999068426, 1125899906842,
	112589990684, 11258999068, 1125899906, 112589990,
	11258999, 1125899, 112589, 11258,
	1125, 112, 11, 1,
}

// appendDecimal writes vs in decimal mode at exponent e, given each value's
// smallest exponent es[i] (-1 for none) and mantissa ms[i] there, and
// returns the number of values it had to patch: those with no exponent up
// to e, and those whose mantissa at e would reach maxMantissa. ms is
// rewritten to the mantissas at e.
func appendDecimal(dst []byte, vs []float64, ms []int64, es []int8, e int) ([]byte, int) {
	// A patched position takes the previous mantissa so the integer column
	// stays smooth; leading patches take the first good one.
	first, patches := -1, 0
	var prev int64
	for i := range vs {
		k, m := int(es[i]), ms[i]
		ok := k >= 0 && k <= e
		if ok {
			lim := mantissaLimit[e-k]
			ok = m < lim && m > -lim
			m *= pow10Int[e-k]
		}
		if !ok {
			es[i] = -1
			ms[i] = prev
			patches++
			continue
		}
		if first < 0 {
			first = i
			for j := range i {
				ms[j] = m
			}
		}
		ms[i] = m
		prev = m
	}
	h := byte(modeDecimal<<5 | e)
	if patches > 0 {
		h |= patchFlag
	}
	dst = append(dst, h)
	dst = appendIntColumn(dst, ms)
	if patches == 0 {
		return dst, 0
	}
	dst = binary.AppendUvarint(dst, uint64(patches))
	last := -1
	for i, v := range vs {
		if es[i] >= 0 {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(i-last-1))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		last = i
	}
	return dst, patches
}

// DecodeFloats decodes n values written by AppendFloats from src, appending
// them to dst, and returns the rest of src after them.
func DecodeFloats(dst []float64, src []byte, n int) ([]float64, []byte, error) {
	if n <= 0 {
		return dst, src, nil
	}
	if len(src) == 0 {
		return dst, src, corrupt("floats: empty input")
	}
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	h := src[0]
	var rest []byte
	var err error
	switch h >> 5 {
	case modeDecimal:
		rest, err = decodeDecimal(out, src)
	case modeXOR:
		if h != modeXOR<<5 {
			return dst, src, corrupt("floats: bad header %#x", h)
		}
		rest, err = decodeXOR(out, src[1:])
	case modeBits:
		if h != modeBits<<5 {
			return dst, src, corrupt("floats: bad header %#x", h)
		}
		// The integer column is decoded straight into out's memory: the
		// bit patterns it yields are already the float64 values.
		bits := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(out))), len(out))
		rest, err = decodeIntsInto(bits, src[1:], "floats")
	case modeRaw:
		if h != modeRaw<<5 {
			return dst, src, corrupt("floats: bad header %#x", h)
		}
		if len(src)-1 < 8*n {
			return dst, src, corrupt("floats: truncated raw values")
		}
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(src[1+8*i:]))
		}
		rest = src[1+8*n:]
	default:
		return dst, src, corrupt("floats: bad header %#x", h)
	}
	if err != nil {
		return dst, src, err
	}
	return dst[:len(dst)+n], rest, nil
}

// decodeDecimal decodes a decimal-mode column (src starts at its header)
// into out.
func decodeDecimal(out []float64, src []byte) ([]byte, error) {
	h := src[0]
	e := int(h & 0x0f)
	if e > maxExp {
		return src, corrupt("floats: exponent %d", e)
	}
	// The mantissas are decoded in place: out's memory, viewed as int64s,
	// has exactly the room they need, and each is then replaced by its
	// float at the same index. This spares a scratch buffer and a copy on
	// the query hot path.
	ms := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(out))), len(out))
	src, err := decodeIntsInto(ms, src[1:], "floats")
	if err != nil {
		return src, err
	}
	if e == 0 {
		for i, m := range ms {
			out[i] = float64(m)
		}
	} else {
		p := pow10[e]
		for i, m := range ms {
			out[i] = float64(m) / p
		}
	}
	if h&patchFlag == 0 {
		return src, nil
	}
	k, l := binary.Uvarint(src)
	if l <= 0 || k == 0 || k > uint64(len(out)) {
		return src, corrupt("floats: bad patch count")
	}
	src = src[l:]
	last := -1
	for range k {
		gap, l := binary.Uvarint(src)
		if l <= 0 || gap >= uint64(len(out)-last-1) || len(src)-l < 8 {
			return src, corrupt("floats: bad patch")
		}
		last += int(gap) + 1
		out[last] = math.Float64frombits(binary.LittleEndian.Uint64(src[l:]))
		src = src[l+8:]
	}
	return src, nil
}
