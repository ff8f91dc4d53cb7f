package config

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Energy is the [energy] section: the zone whose days energy is summed
// in, and the tariffs that price it (GET /api/v1/energy and /report).
type Energy struct {
	// Timezone is the IANA zone of local days, e.g. "Europe/London"; ""
	// takes schedules.timezone, and when that is empty too the machine's.
	Timezone string `toml:"timezone"`
	// Tariff lists the tariffs; the first is the default.
	Tariff []TariffDef `toml:"tariff"`
}

// TariffDef prices energy in Currency per kWh.
type TariffDef struct {
	Name     string `toml:"name"`
	Currency string `toml:"currency"`
	// Price is per kWh imported outside every band.
	Price float64 `toml:"price"`
	// StandingCharge is per local day.
	StandingCharge float64 `toml:"standing_charge"`
	// ExportPrice is paid per kWh exported.
	ExportPrice float64 `toml:"export_price"`
	// Band lists time-of-use prices; the first band holding an instant wins.
	Band []TariffBand `toml:"band"`
}

// TariffBand is a time-of-use price from From to To (local "HH:MM";
// To may be "24:00"; To before From wraps past midnight) on Days
// ("mon".."sun"; empty: every day).
type TariffBand struct {
	Days  []string `toml:"days"`
	From  string   `toml:"from"`
	To    string   `toml:"to"`
	Price float64  `toml:"price"`
}

// EnergyLocation returns the zone of local days: energy.timezone, else
// schedules.timezone, else the machine's.
func (c *Config) EnergyLocation() (*time.Location, error) {
	if c.Energy.Timezone != "" {
		return time.LoadLocation(c.Energy.Timezone)
	}
	return c.Schedules.Location()
}

// weekdays are the day names a band takes.
var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// Weekday parses a band's day name.
func Weekday(s string) (time.Weekday, bool) {
	d, ok := weekdays[strings.ToLower(s)]
	return d, ok
}

// BandMinutes parses a band's "HH:MM" into minutes after midnight.
func BandMinutes(s string) (int, error) { return parseClock(s) }

// validate checks the [energy] section.
func (e *Energy) validate(add func(key, format string, args ...any)) {
	if e.Timezone != "" {
		if _, err := time.LoadLocation(e.Timezone); err != nil {
			add("energy.timezone", "unknown time zone %q", e.Timezone)
		}
	}
	names := map[string]bool{}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	for i, t := range e.Tariff {
		at := fmt.Sprintf("energy.tariff[%d]", i)
		if err := checkSegment(t.Name); err != nil {
			add(at+".name", "%v", err)
		} else if names[t.Name] || t.Name == "none" {
			add(at+".name", "duplicate or reserved tariff name %q", t.Name)
		}
		names[t.Name] = true
		for k, f := range map[string]float64{"price": t.Price, "standing_charge": t.StandingCharge, "export_price": t.ExportPrice} {
			if !finite(f) {
				add(at+"."+k, "want a finite number")
			}
		}
		for j, b := range t.Band {
			bt := fmt.Sprintf("%s.band[%d]", at, j)
			from, err1 := parseClock(b.From)
			to, err2 := parseClock(b.To)
			if err1 != nil || from == 24*60 {
				add(bt+".from", "want a time of day such as 07:00, got %q", b.From)
			}
			if err2 != nil {
				add(bt+".to", "want a time of day such as 23:00 or 24:00, got %q", b.To)
			}
			if err1 == nil && err2 == nil && from == to {
				add(bt+".to", "equals from: a band needs some time")
			}
			if !finite(b.Price) {
				add(bt+".price", "want a finite number")
			}
			for _, d := range b.Days {
				if _, ok := Weekday(d); !ok {
					add(bt+".days", "unknown day %q (want mon, tue, wed, thu, fri, sat or sun)", d)
				}
			}
		}
	}
}
