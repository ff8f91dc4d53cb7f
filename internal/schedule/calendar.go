// Package schedule runs weekly schedules and one-off bookings, each
// driving a 0/1 tag in the tag table.
//
// A schedule is on during its weekly periods (skipped on holidays when it
// says so) and during its bookings, each started Lead earlier (pre-heat).
// Periods are wall-clock times of the site's time zone: "08:00" is 08:00
// local on every day, across daylight-saving changes, and a period whose
// end is before its start runs past midnight. Bookings made through the
// API are kept in DATA/schedules/bookings.json, written atomically.
package schedule

import (
	"fmt"
	"time"

	"github.com/pith-historian/pith/internal/config"
)

// Schedule is one compiled schedule.
type Schedule struct {
	Name         string
	Tag          string // the state tag
	Lead         time.Duration
	Weekly       []config.WeeklyPeriod
	SkipHolidays bool
}

// Booking is a one-off period of a schedule, in the site's local time.
type Booking struct {
	ID       string `json:"id"`
	Schedule string `json:"schedule"`
	Start    string `json:"start"` // "2026-12-03T08:00", local
	End      string `json:"end"`
	Note     string `json:"note,omitempty"`
	Source   string `json:"source"` // "config" or "api"

	start, end time.Time
}

// Calendar answers whether a schedule is on at a time. It is immutable
// once built; the Engine swaps whole calendars on reload.
type Calendar struct {
	loc      *time.Location
	holidays map[string]bool // local dates "2006-01-02"
	scheds   map[string]*Schedule
	order    []string
}

// NewCalendar compiles the [schedules] section (without bookings).
func NewCalendar(c config.Schedules) (*Calendar, error) {
	loc, err := c.Location()
	if err != nil {
		return nil, fmt.Errorf("schedules.timezone: %w", err)
	}
	cal := &Calendar{loc: loc, holidays: map[string]bool{}, scheds: map[string]*Schedule{}}
	for _, h := range c.Holidays {
		cal.holidays[h] = true
	}
	for i, d := range c.Schedule {
		s := &Schedule{Name: d.Name, Tag: d.Tag, Lead: d.Lead.Std(), SkipHolidays: d.Holidays}
		if s.Tag == "" {
			s.Tag = "pith.schedule." + d.Name
		}
		for j, w := range d.Weekly {
			p, err := config.ParseWeekly(w)
			if err != nil {
				return nil, fmt.Errorf("schedules.schedule[%d].weekly[%d]: %w", i, j, err)
			}
			s.Weekly = append(s.Weekly, p)
		}
		if _, dup := cal.scheds[d.Name]; dup {
			return nil, fmt.Errorf("schedules.schedule[%d].name: duplicate %q", i, d.Name)
		}
		cal.scheds[d.Name] = s
		cal.order = append(cal.order, d.Name)
	}
	return cal, nil
}

// Location returns the calendar's time zone.
func (c *Calendar) Location() *time.Location { return c.loc }

// Schedule returns the named schedule.
func (c *Calendar) Schedule(name string) (*Schedule, bool) {
	s, ok := c.scheds[name]
	return s, ok
}

// Names returns the schedule names in configuration order.
func (c *Calendar) Names() []string { return c.order }

// parseBooking checks b against the calendar and fills its times.
func (c *Calendar) parseBooking(b *Booking) error {
	if _, ok := c.scheds[b.Schedule]; !ok {
		b.start, b.end = time.Time{}, time.Time{}
		return fmt.Errorf("booking: no schedule named %q", b.Schedule)
	}
	// The parsed times are set only when the whole booking is good: a
	// booking with zero times is inert.
	b.start, b.end = time.Time{}, time.Time{}
	start, err := time.ParseInLocation(config.BookingLayout, b.Start, c.loc)
	if err != nil {
		return fmt.Errorf("booking start: want a local time such as 2026-12-03T08:00, got %q", b.Start)
	}
	end, err := time.ParseInLocation(config.BookingLayout, b.End, c.loc)
	if err != nil {
		return fmt.Errorf("booking end: want a local time such as 2026-12-03T12:00, got %q", b.End)
	}
	if !end.After(start) {
		return fmt.Errorf("booking: end %s is not after start %s", b.End, b.Start)
	}
	b.start, b.end = start, end
	return nil
}

// On reports whether schedule s is on at now, given the bookings (which
// parseBooking filled).
func (c *Calendar) On(s *Schedule, bookings []Booking, now time.Time) bool {
	for i := range bookings {
		b := &bookings[i]
		if b.Schedule == s.Name && !now.Before(b.start.Add(-s.Lead)) && now.Before(b.end) {
			return true
		}
	}
	if len(s.Weekly) == 0 {
		return false
	}
	local := now.In(c.loc)
	y, m, d := local.Date()
	// A period that started yesterday may run past midnight into today;
	// one starting tomorrow may already be on through its lead (<= 24 h).
	for off := -1; off <= 1; off++ {
		day := time.Date(y, m, d+off, 12, 0, 0, 0, c.loc) // noon: never a DST gap
		dy, dm, dd := day.Date()
		if s.SkipHolidays && c.holidays[day.Format(time.DateOnly)] {
			continue
		}
		wd := uint8(1) << day.Weekday()
		for _, p := range s.Weekly {
			if p.Days&wd == 0 {
				continue
			}
			// time.Date normalizes minutes past 24 h onto the next day's
			// wall clock, so 22:00-06:00 ends at 06:00 local next day.
			start := time.Date(dy, dm, dd, 0, p.Start, 0, 0, c.loc)
			end := time.Date(dy, dm, dd, 0, p.End, 0, 0, c.loc)
			if !now.Before(start.Add(-s.Lead)) && now.Before(end) {
				return true
			}
		}
	}
	return false
}
