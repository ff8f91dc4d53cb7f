package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/pith-historian/pith/internal/model"
)

// maxInt64Digits is the most decimal digits (after leading zeros) an int64
// can need; a uint64 holds any 19-digit number without overflow.
const maxInt64Digits = 19

// parseMillis parses the timestamp field at the start of b, which must be
// followed by a comma, and returns the bytes after that comma. It is written
// by hand because strconv needs a string and this is the per-row hot path.
func parseMillis(b []byte) (int64, []byte, error) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	start := i
	for i < len(b) && b[i] == '0' {
		i++
	}
	leadingZeros := i > start
	digits := i
	var u uint64
	for ; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		u = u*10 + uint64(d)
	}
	n := i - digits
	end := i
	if i < len(b) && b[i] != ',' {
		return 0, nil, badTimestamp(b)
	}
	if i == len(b) {
		if end == 0 {
			return 0, nil, errMissingFields
		}
		if n == 0 && !leadingZeros {
			return 0, nil, badTimestamp(b)
		}
		return 0, nil, errMissingValue
	}
	if n == 0 && !leadingZeros {
		if end == 0 {
			return 0, nil, errEmptyTimestamp
		}
		return 0, nil, badTimestamp(b)
	}
	if n > maxInt64Digits || (!neg && u > math.MaxInt64) || (neg && u > 1<<63) {
		return 0, nil, fmt.Errorf("timestamp %q out of range", b[:end])
	}
	v := int64(u)
	if neg {
		v = -v // for u == 1<<63 this wraps to MinInt64, which is right
	}
	return v, b[i+1:], nil
}

var (
	errMissingValue   = errors.New("missing value (want tag,unix_ms,value[,quality])")
	errEmptyTimestamp = errors.New("empty timestamp")
	errEmptyValue     = errors.New("empty value")
)

func badTimestamp(b []byte) error {
	if j := bytes.IndexByte(b, ','); j >= 0 {
		b = b[:j]
	}
	return fmt.Errorf("bad timestamp %q (want integer Unix milliseconds)", b)
}

// exactPow10 holds the powers of ten a float64 represents exactly.
var exactPow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

// maxExactMantissa bounds the integers a float64 holds exactly.
const maxExactMantissa = 1 << 53

// parseValue parses a sample value. Plain decimals such as 123.45 with up to
// 15 or so significant digits take a fast path: when the digits m fit in 53
// bits and there are k <= 22 of them after the point, m and 10^k are exact
// float64s and one IEEE division rounds correctly, so the result is the one
// strconv.ParseFloat gives. Everything else (exponents, long mantissas,
// syntax errors) goes to strconv.
func parseValue(b []byte) (float64, error) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	var m uint64
	nd, k := 0, 0
	dot := false
	for ; i < len(b); i++ {
		c := b[i]
		if d := c - '0'; d <= 9 {
			if nd == maxInt64Digits {
				return parseValueSlow(b)
			}
			m = m*10 + uint64(d)
			nd++
			if dot {
				k++
			}
			continue
		}
		if c == '.' && !dot {
			dot = true
			continue
		}
		return parseValueSlow(b)
	}
	if nd == 0 || m >= maxExactMantissa || k >= len(exactPow10) {
		return parseValueSlow(b)
	}
	f := float64(m)
	if k > 0 {
		f /= exactPow10[k]
	}
	if neg {
		f = -f
	}
	return f, nil
}

// parseValueSlow is the strconv fallback of parseValue.
func parseValueSlow(b []byte) (float64, error) {
	if len(b) == 0 {
		return 0, errEmptyValue
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("value %q out of range", b)
		}
		return 0, fmt.Errorf("bad value %q (want a decimal number)", b)
	}
	if model.CheckValue(f) != nil {
		return 0, fmt.Errorf("value %q is not finite", b)
	}
	return f, nil
}
