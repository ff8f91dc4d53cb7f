package promapi

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// The bounds Prometheus itself uses for "no start" and "no end", so
// clients that send them (Grafana's label browser does) are understood.
var (
	minTime = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	maxTime = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()
)

// parseTime reads a Prometheus API time: Unix seconds with an optional
// fraction, or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("missing")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f > 9.2e15 || f < -9.2e15 {
			return time.Time{}, fmt.Errorf("time %q out of range", s)
		}
		// Rounded to milliseconds, as Prometheus does: 1700000000.123 is
		// 1700000000.12299990654 as a float64.
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1000))*int64(time.Millisecond)).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// parseDuration reads seconds with an optional fraction, or a Prometheus
// duration such as "5m" or "1h30m".
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("missing")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		ns := f * float64(time.Second)
		if math.IsNaN(ns) || ns >= math.MaxInt64 || ns <= math.MinInt64 {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		return time.Duration(ns), nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
	}
	return time.Duration(d), nil
}

// fieldError names the parameter err is about, as Prometheus does.
func fieldError(name string, err error) error {
	return fmt.Errorf("invalid parameter %q: %w", name, err)
}

// timeRange reads the optional start and end of the metadata endpoints.
func timeRange(get func(string) string) (int64, int64, error) {
	mint, maxt := int64(math.MinInt64), int64(math.MaxInt64)
	if s := get("start"); s != "" {
		t, err := parseTime(s)
		if err != nil {
			return 0, 0, fieldError("start", err)
		}
		mint = t.UnixMilli()
	}
	if s := get("end"); s != "" {
		t, err := parseTime(s)
		if err != nil {
			return 0, 0, fieldError("end", err)
		}
		maxt = t.UnixMilli()
	}
	return mint, maxt, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
