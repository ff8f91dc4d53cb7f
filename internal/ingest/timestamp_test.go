package ingest

import (
	"math"
	"strings"
	"testing"
)

func TestMillisFromSeconds(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want int64
		ok   bool
	}{
		{0, 0, true},
		{1700000000.25, 1_700_000_000_250, true},
		{1700000000.0004, 1_700_000_000_000, true},
		{1700000000.0006, 1_700_000_000_001, true},
		{-1.5, -1500, true},
		{9.2e15, 9_200_000_000_000_000_000, true},
		{-9.2e15, -9_200_000_000_000_000_000, true},
		{9.3e15, 0, false},
		{-9.3e15, 0, false},
		{1e300, 0, false},
		{math.MaxFloat64, 0, false},
		{math.Inf(1), 0, false},
		{math.Inf(-1), 0, false},
		{math.NaN(), 0, false},
	} {
		got, err := millisFromSeconds(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("millisFromSeconds(%g) = %d, %v, want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "out of range") {
			t.Errorf("millisFromSeconds(%g) error %q does not say out of range", tt.in, err)
		}
	}
}

func TestMillisFromUnits(t *testing.T) {
	for _, tt := range []struct {
		ts, mul, div int64
		want         int64
		ok           bool
	}{
		{1_700_000_000_123_456_789, 1, 1_000_000, 1_700_000_000_123, true},
		{-1, 1, 1_000_000, -1, true},
		{math.MaxInt64, 1, 1_000_000, math.MaxInt64 / 1_000_000, true},
		{1_700_000_000, 1000, 1, 1_700_000_000_000, true},
		{math.MaxInt64 / 1000, 1000, 1, math.MaxInt64 / 1000 * 1000, true},
		{math.MaxInt64/1000 + 1, 1000, 1, 0, false},
		{math.MinInt64/3_600_000 - 1, 3_600_000, 1, 0, false},
		{math.MinInt64, 1, 1, math.MinInt64, true},
	} {
		got, err := millisFromUnits(tt.ts, tt.mul, tt.div)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("millisFromUnits(%d, %d, %d) = %d, %v, want %d, ok %v", tt.ts, tt.mul, tt.div, got, err, tt.want, tt.ok)
		}
	}
}

func TestAddMillis(t *testing.T) {
	for _, tt := range []struct {
		a, b, want int64
		ok         bool
	}{
		{1000, -250, 750, true},
		{math.MaxInt64 - 1, 1, math.MaxInt64, true},
		{math.MaxInt64, 1, 0, false},
		{math.MinInt64, -1, 0, false},
		{1_700_000_000_000, 9_223_372_000_000_000_000, 0, false},
	} {
		got, err := addMillis(tt.a, tt.b)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("addMillis(%d, %d) = %d, %v, want %d, ok %v", tt.a, tt.b, got, err, tt.want, tt.ok)
		}
	}
}
