package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones resolve on boxes without /usr/share/zoneinfo
)

// Schedules is the [schedules] section: weekly schedules with holidays
// and one-off bookings, each driving a 0/1 tag.
type Schedules struct {
	// Enabled runs the schedules and serves /api/v1/schedules.
	Enabled bool `toml:"enabled"`
	// Timezone is the site's IANA zone, e.g. "Europe/London"; "" is the
	// machine's local zone.
	Timezone string `toml:"timezone"`
	// Scan is how often states are computed and written to their tags.
	Scan Duration `toml:"scan"`
	// Holidays are local dates ("2026-12-25") on which weekly periods do
	// not apply (bookings still do).
	Holidays []string `toml:"holidays"`
	// Schedule lists the schedules.
	Schedule []ScheduleDef `toml:"schedule"`
	// Booking lists one-off bookings from the file; the API adds more,
	// kept in DATA/schedules/bookings.json.
	Booking []BookingDef `toml:"booking"`
}

// ScheduleDef is one schedule.
type ScheduleDef struct {
	Name string `toml:"name"`
	// Tag receives the state, 1 in a period and 0 outside; "" is
	// pith.schedule.<name>.
	Tag string `toml:"tag"`
	// Lead starts every period this much earlier (pre-heat).
	Lead Duration `toml:"lead"`
	// Weekly periods: "mon-fri 08:00-18:00", "sat,sun 09:00-12:30",
	// "daily 22:00-06:00" (ends the next day), "sun 00:00-24:00".
	Weekly []string `toml:"weekly"`
	// Holidays, when false, keeps weekly periods on holidays too.
	Holidays bool `toml:"holidays"`
}

// BookingDef is one booking: the schedule is on from Start to End, local
// times of the site ("2026-12-03T08:00").
type BookingDef struct {
	Schedule string `toml:"schedule"`
	Start    string `toml:"start"`
	End      string `toml:"end"`
	Note     string `toml:"note"`
}

// Rules is the [rules] section: conditions evaluated on a scan that write
// tags through the control path, and the limits every control write obeys.
type Rules struct {
	// Enabled runs the rules and serves /api/v1/rules.
	Enabled bool `toml:"enabled"`
	// Scan is how often the rules are evaluated.
	Scan Duration `toml:"scan"`
	// DryRun logs the writes the rules would make instead of making them.
	DryRun bool `toml:"dry_run"`
	// Rule lists the rules.
	Rule []RuleDef `toml:"rule"`
	// Limit lists the write limits per tag; they apply to every control
	// write, from rules and from POST /api/v1/control.
	Limit []WriteLimit `toml:"limit"`
}

// RuleDef is one rule: when When holds for For, Value is written to Tag;
// when Release holds (default: When no longer holds) for ReleaseFor,
// ReleaseValue is written (when set).
type RuleDef struct {
	Name string `toml:"name"`
	// When is an expression over tag values: tag("room.b.temp") < 19 &&
	// schedule("roomB").
	When string `toml:"when"`
	// For is how long When must hold before the rule acts.
	For Duration `toml:"for"`
	// Release ends the rule's active state; "" is "not When". A separate
	// release condition gives hysteresis (on below 19, off above 21).
	Release string `toml:"release"`
	// ReleaseFor is how long Release must hold.
	ReleaseFor Duration `toml:"release_for"`
	// Tag is written through the control path.
	Tag string `toml:"tag"`
	// Value is written when the rule becomes active.
	Value float64 `toml:"value"`
	// ReleaseValue is written when the rule is released; NoRelease
	// leaves the tag as it is.
	ReleaseValue float64 `toml:"release_value"`
	NoRelease    bool    `toml:"no_release"`
	// DryRun logs this rule's writes instead of making them.
	DryRun bool `toml:"dry_run"`
}

// WriteLimit bounds the control writes of one tag.
type WriteLimit struct {
	Tag string `toml:"tag"`
	// Min and Max bound the value written; absent is unbounded.
	Min *float64 `toml:"min"`
	Max *float64 `toml:"max"`
	// MaxRate is the largest change per second between two writes, in
	// the tag's units; 0 is no rate limit.
	MaxRate float64 `toml:"max_rate"`
}

// Default scans of schedules and rules.
const (
	DefaultScheduleScan = Duration(time.Second)
	DefaultRuleScan     = Duration(time.Second)
)

// BookingLayout is the local time format of bookings.
const BookingLayout = "2006-01-02T15:04"

// WeeklyPeriod is a parsed weekly entry: on the weekdays in Days
// (bit 0 = Sunday), from Start to End minutes after local midnight. End
// may exceed 24h when the period runs past midnight.
type WeeklyPeriod struct {
	Days       uint8
	Start, End int // minutes; 0 <= Start < 1440, Start < End <= Start+1440
}

var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseWeekly parses "mon-fri 08:00-18:00", "sat,sun 9:00-12:30",
// "daily 22:00-06:00" (the period ends the next day) or
// "sun 00:00-24:00".
func ParseWeekly(s string) (WeeklyPeriod, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return WeeklyPeriod{}, fmt.Errorf("want \"DAYS HH:MM-HH:MM\", got %q", s)
	}
	var p WeeklyPeriod
	for _, part := range strings.Split(strings.ToLower(f[0]), ",") {
		if part == "daily" {
			p.Days = 0x7f
			continue
		}
		a, b, isRange := strings.Cut(part, "-")
		i, j := dayIndex(a), dayIndex(b)
		if i < 0 || (isRange && j < 0) {
			return WeeklyPeriod{}, fmt.Errorf("unknown day %q in %q (want mon..sun, ranges like mon-fri, or daily)", part, s)
		}
		if !isRange {
			j = i
		}
		for d := i; ; d = (d + 1) % 7 {
			p.Days |= 1 << d
			if d == j {
				break
			}
		}
	}
	a, b, ok := strings.Cut(f[1], "-")
	if !ok {
		return WeeklyPeriod{}, fmt.Errorf("want HH:MM-HH:MM, got %q", f[1])
	}
	var err error
	if p.Start, err = parseClock(a); err != nil || p.Start >= 1440 {
		return WeeklyPeriod{}, fmt.Errorf("bad start time %q in %q", a, s)
	}
	if p.End, err = parseClock(b); err != nil {
		return WeeklyPeriod{}, fmt.Errorf("bad end time %q in %q", b, s)
	}
	if p.End == p.Start {
		return WeeklyPeriod{}, fmt.Errorf("empty period in %q", s)
	}
	if p.End < p.Start {
		p.End += 1440 // runs past midnight
	}
	return p, nil
}

func dayIndex(s string) int {
	for i, n := range dayNames {
		if s == n {
			return i
		}
	}
	return -1
}

// parseClock parses H:MM or HH:MM (24:00 allowed) into minutes.
func parseClock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(m) != 2 || len(h) < 1 || len(h) > 2 {
		return 0, errors.New("bad time")
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 || hh > 24 || (hh == 24 && mm != 0) {
		return 0, errors.New("bad time")
	}
	return hh*60 + mm, nil
}

// Location returns the schedules' time zone.
func (s *Schedules) Location() (*time.Location, error) {
	if s.Timezone == "" {
		return time.Local, nil
	}
	return time.LoadLocation(s.Timezone)
}

// validate checks the [schedules] section.
func (s *Schedules) validate(add func(key, format string, args ...any)) {
	loc, err := s.Location()
	if err != nil {
		add("schedules.timezone", "unknown time zone %q", s.Timezone)
		loc = time.UTC
	}
	if s.Scan < Duration(10*time.Millisecond) || s.Scan > Duration(time.Minute) {
		add("schedules.scan", "want 10ms to 1m, got %s", s.Scan)
	}
	for i, h := range s.Holidays {
		if _, err := time.ParseInLocation(time.DateOnly, h, loc); err != nil {
			add(fmt.Sprintf("schedules.holidays[%d]", i), "want a date such as 2026-12-25, got %q", h)
		}
	}
	names := map[string]bool{}
	for i, d := range s.Schedule {
		at := fmt.Sprintf("schedules.schedule[%d]", i)
		if err := checkSegment(d.Name); err != nil {
			add(at+".name", "%v", err)
		} else if names[d.Name] {
			add(at+".name", "duplicate schedule name %q", d.Name)
		}
		names[d.Name] = true
		if d.Tag != "" {
			if err := checkTagName(d.Tag); err != nil {
				add(at+".tag", "%v", err)
			}
		}
		if d.Lead < 0 || d.Lead > Duration(24*time.Hour) {
			add(at+".lead", "want 0 to 24h")
		}
		for j, w := range d.Weekly {
			if _, err := ParseWeekly(w); err != nil {
				add(fmt.Sprintf("%s.weekly[%d]", at, j), "%v", err)
			}
		}
	}
	for i, b := range s.Booking {
		at := fmt.Sprintf("schedules.booking[%d]", i)
		if !names[b.Schedule] {
			add(at+".schedule", "no schedule named %q", b.Schedule)
		}
		st, err1 := time.ParseInLocation(BookingLayout, b.Start, loc)
		if err1 != nil {
			add(at+".start", "want a local time such as 2026-12-03T08:00, got %q", b.Start)
		}
		en, err2 := time.ParseInLocation(BookingLayout, b.End, loc)
		if err2 != nil {
			add(at+".end", "want a local time such as 2026-12-03T12:00, got %q", b.End)
		}
		if err1 == nil && err2 == nil && !en.After(st) {
			add(at+".end", "must be after start")
		}
	}
}

// validate checks the [rules] section.
func (r *Rules) validate(add func(key, format string, args ...any)) {
	if r.Scan < Duration(10*time.Millisecond) || r.Scan > Duration(time.Minute) {
		add("rules.scan", "want 10ms to 1m, got %s", r.Scan)
	}
	names := map[string]bool{}
	for i, d := range r.Rule {
		at := fmt.Sprintf("rules.rule[%d]", i)
		if err := checkSegment(d.Name); err != nil {
			add(at+".name", "%v", err)
		} else if names[d.Name] {
			add(at+".name", "duplicate rule name %q", d.Name)
		}
		names[d.Name] = true
		if strings.TrimSpace(d.When) == "" {
			add(at+".when", "empty condition")
		}
		if err := checkTagName(d.Tag); err != nil {
			add(at+".tag", "%v", err)
		}
		if d.For < 0 || d.ReleaseFor < 0 {
			add(at+".for", "durations must be >= 0")
		}
		if math.IsNaN(d.Value) || math.IsInf(d.Value, 0) || math.IsNaN(d.ReleaseValue) || math.IsInf(d.ReleaseValue, 0) {
			add(at+".value", "must be finite")
		}
	}
	tags := map[string]bool{}
	for i, l := range r.Limit {
		at := fmt.Sprintf("rules.limit[%d]", i)
		if err := checkTagName(l.Tag); err != nil {
			add(at+".tag", "%v", err)
		} else if tags[l.Tag] {
			add(at+".tag", "duplicate limit for tag %q", l.Tag)
		}
		tags[l.Tag] = true
		if l.Min != nil && l.Max != nil && !(*l.Min <= *l.Max) {
			add(at+".max", "max must be >= min")
		}
		if !(l.MaxRate >= 0) {
			add(at+".max_rate", "must be >= 0")
		}
	}
}

// String writes the period back in the ParseWeekly form, days listed.
func (p WeeklyPeriod) String() string {
	var days []string
	for i, n := range dayNames {
		if p.Days&(1<<i) != 0 {
			days = append(days, n)
		}
	}
	end := p.End % 1440
	if p.End == 1440 {
		end = 1440
	}
	return fmt.Sprintf("%s %02d:%02d-%02d:%02d", strings.Join(days, ","), p.Start/60, p.Start%60, end/60, end%60)
}
