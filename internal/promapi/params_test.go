package promapi

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	tests := []struct {
		in   string
		want int64 // ms
		ok   bool
	}{
		{"1700000000", 1_700_000_000_000, true},
		{"1700000000.123", 1_700_000_000_123, true},
		{"2023-11-14T22:13:20Z", 1_700_000_000_000, true},
		{"2023-11-14T23:13:20.5+01:00", 1_700_000_000_500, true},
		{"-1.5", -1500, true},
		{"", 0, false},
		{"NaN", 0, false},
		{"1e300", 0, false},
		{"now", 0, false},
	}
	for _, tt := range tests {
		got, err := parseTime(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got.UnixMilli() != tt.want) {
			t.Errorf("parseTime(%q) = %v (%d), %v", tt.in, got, got.UnixMilli(), err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"15", 15 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"1m30s", 90 * time.Second, true},
		{"1d", 24 * time.Hour, true},
		{"", 0, false},
		{"1e30", 0, false},
		{"5 minutes", 0, false},
	}
	for _, tt := range tests {
		got, err := parseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseDuration(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// FuzzParams feeds the parameter parsers what clients send; they must
// not panic, and a time must survive the answer writer's format
// (appendTime) unchanged while it fits a float64 exactly.
func FuzzParams(f *testing.F) {
	for _, s := range []string{"1700000000", "1700000000.123", "2023-11-14T22:13:20Z", "1m30s", "15", "-1.5", "1e308", "NaN", "5y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if tm, err := parseTime(s); err == nil {
			ms := tm.UnixMilli()
			if ms > -1<<53 && ms < 1<<53 {
				back, err := parseTime(string(appendTime(nil, ms)))
				if err != nil || back.UnixMilli() != ms {
					t.Errorf("parseTime(%q) = %d ms, written %s, read back %v, %v", s, ms, appendTime(nil, ms), back, err)
				}
			}
		}
		_, _ = parseDuration(s)
	})
}
