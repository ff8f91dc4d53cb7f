package config

import (
	"fmt"
	"math"
	"net/url"
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
	// Report lists the reports sent on a schedule to the alarm sinks.
	Report []ReportDef `toml:"report"`
	// Link is the address people open this Pith at (e.g.
	// "https://pith.example:8080"): sent reports link to their page there.
	// "" sends a link relative to the Pith.
	Link string `toml:"link"`
}

// ReportDef is a report sent after every week or month to the
// notification sinks of [alarms] (its webhooks and its MQTT broker), as a
// CSV file plus a link to its page.
type ReportDef struct {
	Name string `toml:"name"`
	// Every is "month" or "week" (ISO weeks, Monday to Monday), local.
	Every string `toml:"every"`
	// Energy lists the tags reported as energy; Tags those reported as
	// minimum, mean and maximum.
	Energy []string `toml:"energy"`
	Tags   []string `toml:"tags"`
	// Tariff names the tariff of costs; "" is the default, "none" none.
	Tariff string `toml:"tariff"`
	// Delay waits after the period's end before sending, for late data.
	Delay Duration `toml:"delay"`
	// Topic is the MQTT topic; "" is pith/<site>/reports/<name>.
	Topic string `toml:"topic"`
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
	e.validateReports(add)
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

// validateReports checks [[energy.report]].
func (e *Energy) validateReports(add func(key, format string, args ...any)) {
	if e.Link != "" {
		if u, err := url.Parse(e.Link); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("energy.link", "want an http or https address such as https://pith.example:8080, got %q", e.Link)
		}
	}
	tariffs := map[string]bool{"": true, "none": true}
	for _, t := range e.Tariff {
		tariffs[t.Name] = true
	}
	names := map[string]bool{}
	for i, r := range e.Report {
		at := fmt.Sprintf("energy.report[%d]", i)
		if err := checkSegment(r.Name); err != nil {
			add(at+".name", "%v", err)
		} else if names[r.Name] {
			add(at+".name", "duplicate report name %q", r.Name)
		}
		names[r.Name] = true
		if r.Every != "month" && r.Every != "week" {
			add(at+".every", "want month or week, got %q", r.Every)
		}
		if len(r.Energy)+len(r.Tags) == 0 {
			add(at+".energy", "name at least one tag in energy or tags")
		}
		if len(r.Energy)+len(r.Tags) > 50 {
			add(at+".energy", "at most 50 tags in one report")
		}
		if !tariffs[r.Tariff] {
			add(at+".tariff", "no tariff named %q", r.Tariff)
		}
		if r.Delay < 0 || r.Delay.Std() > 7*24*time.Hour {
			add(at+".delay", "want 0s to 168h")
		}
	}
}
