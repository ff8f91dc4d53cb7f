package ingest

import (
	"fmt"
	"math"
)

// Every input turns its clients' times into Unix milliseconds through the
// functions below, so that one range applies to all: a time is accepted
// when it is finite and its milliseconds fit an int64 (model.Point.T), and
// refused with an error otherwise, never wrapped. The CSV and remote_write
// inputs carry integer milliseconds already: parsing them as int64 is that
// same range check, and they need no conversion.

// millisFromUnits turns ts, counted in units of mul/div milliseconds (the
// line protocol's precision: see precisionScale), into milliseconds. It
// floors, so that 1 ns before the epoch is in ms -1.
func millisFromUnits(ts, mul, div int64) (int64, error) {
	if div > 1 {
		q := ts / div
		if ts%div < 0 {
			q--
		}
		return q, nil
	}
	if mul > 1 && (ts > math.MaxInt64/mul || ts < math.MinInt64/mul) {
		return 0, fmt.Errorf("timestamp %d out of range for its precision", ts)
	}
	return ts * mul, nil
}

// millisFromSeconds turns Unix seconds, maybe fractional (emoncms, MQTT),
// into milliseconds rounded to the nearest.
func millisFromSeconds(s float64) (int64, error) {
	ms := math.Round(s * 1000)
	// The comparisons are false for NaN; ±Inf and anything from 2^63 on
	// fail them too, so the conversion below cannot wrap.
	if !(ms >= math.MinInt64 && ms < math.MaxInt64) {
		return 0, fmt.Errorf("timestamp %g s out of range (want finite Unix seconds within ±9.2e15)", s)
	}
	return int64(ms), nil
}

// addMillis returns a+b, for times given relative to another (emoncms
// bulk's offsets), refusing a sum that does not fit.
func addMillis(a, b int64) (int64, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, fmt.Errorf("timestamp %d ms %+d ms out of range", a, b)
	}
	return s, nil
}

// precisionScale returns how to turn a line protocol timestamp of the
// given precision into milliseconds: multiply by mul, or floor-divide by
// div.
func precisionScale(p string) (mul, div int64, ok bool) {
	switch p {
	case "", "n", "ns":
		return 1, 1_000_000, true
	case "u", "us", "µ", "µs":
		return 1, 1000, true
	case "ms":
		return 1, 1, true
	case "s":
		return 1000, 1, true
	case "m":
		return 60_000, 1, true
	case "h":
		return 3_600_000, 1, true
	}
	return 0, 0, false
}
