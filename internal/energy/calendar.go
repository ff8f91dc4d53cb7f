// Package energy turns stored series into the answers people ask of a
// meter: kWh per local hour, day, week, month or year (from a power tag or a
// cumulative energy counter), what it cost under a tariff, how long a value
// spent in each band (a histogram), and reports of a period beside the one
// before. It reads the store through the small Queries interface and
// answers from rollups wherever they are exact (docs/api.md).
package energy

import (
	"fmt"
	"time"
)

// Unit is the calendar width of an energy bucket.
type Unit uint8

// The bucket units, finest first.
const (
	Hour Unit = iota + 1
	Day
	Week // ISO weeks: Monday to Monday
	Month
	Year
)

var unitNames = [...]string{Hour: "hour", Day: "day", Week: "week", Month: "month", Year: "year"}

// String returns the API name of the unit.
func (u Unit) String() string {
	if u >= Hour && u <= Year {
		return unitNames[u]
	}
	return fmt.Sprintf("unit(%d)", uint8(u))
}

// ParseUnit is the inverse of Unit.String.
func ParseUnit(s string) (Unit, error) {
	for i, n := range unitNames {
		if i > 0 && n == s {
			return Unit(i), nil
		}
	}
	return 0, fmt.Errorf("unknown bucket %q (want hour, day, week, month or year)", s)
}

// floorLocal returns the start of the local calendar bucket holding t.
func floorLocal(t time.Time, u Unit, loc *time.Location) time.Time {
	t = t.In(loc)
	y, m, d := t.Date()
	switch u {
	case Hour:
		// Offsets are whole quarters of an hour: step back by quarters to
		// the last instant at a local :00. The two 01:00 hours of a DST
		// fall-back stay apart.
		c := t.Truncate(15 * time.Minute)
		for c.In(loc).Minute() != 0 {
			c = c.Add(-15 * time.Minute)
		}
		return c
	case Day:
		return time.Date(y, m, d, 0, 0, 0, 0, loc)
	case Week:
		wd := (int(t.Weekday()) + 6) % 7 // Monday = 0
		return time.Date(y, m, d-wd, 0, 0, 0, 0, loc)
	case Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc)
	default:
		return time.Date(y, 1, 1, 0, 0, 0, 0, loc)
	}
}

// nextLocal returns the start of the bucket after the one starting at s.
func nextLocal(s time.Time, u Unit, loc *time.Location) time.Time {
	y, m, d := s.Date()
	switch u {
	case Hour:
		// The next instant at a local :00: an hour later, except across a
		// half-hour DST change (Lord Howe), where the hour is 30 or 90 minutes.
		c := s.Add(15 * time.Minute)
		for c.In(loc).Minute() != 0 {
			c = c.Add(15 * time.Minute)
		}
		return c
	case Day:
		return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case Week:
		return time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	case Month:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		return time.Date(y+1, 1, 1, 0, 0, 0, 0, loc)
	}
}

// MaxBuckets bounds the buckets of one energy answer.
const MaxBuckets = 100_000

// Edges returns the edges of the local calendar buckets covering [from,
// to), in Unix ms: bucket i is [e[i], e[i+1]). The first edge is the start
// of the bucket holding from, the last the end of the bucket holding to-1.
// Local days are 23, 24 or 25 hours long across DST.
func Edges(from, to int64, u Unit, loc *time.Location) ([]int64, error) {
	if to <= from {
		return nil, fmt.Errorf("to must be greater than from")
	}
	if u < Hour || u > Year {
		return nil, fmt.Errorf("unknown bucket unit %d", u)
	}
	s := floorLocal(time.UnixMilli(from), u, loc)
	e := []int64{s.UnixMilli()}
	for e[len(e)-1] < to {
		if len(e) > MaxBuckets {
			return nil, fmt.Errorf("more than %d %s buckets: choose a wider bucket or a shorter period", MaxBuckets, u)
		}
		s = nextLocal(s, u, loc)
		e = append(e, s.UnixMilli())
	}
	return e, nil
}

// Period returns the local calendar bucket of unit u holding t, as Unix
// ms [start, end): a day, an ISO week from Monday, a month, ... in loc.
func Period(t time.Time, u Unit, loc *time.Location) (int64, int64) {
	s := floorLocal(t, u, loc)
	return s.UnixMilli(), nextLocal(s, u, loc).UnixMilli()
}
