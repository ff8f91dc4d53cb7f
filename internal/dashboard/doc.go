// Package dashboard keeps the dashboards people build in the browser:
// versioned JSON documents in the data directory (one atomic file each),
// served at /api/v1/dashboards, and read-only public pages addressed by a
// token at /d/<token> for wall displays (docs/api.md, "Dashboards";
// docs/format/dashboard.md).
package dashboard

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/pith-historian/pith/internal/docstore"
)

// DocKind names dashboards among the documents forwarded to a central Pith.
const DocKind = "dashboard"

// Schema is the version of the document format this package writes.
const Schema = 1

// Limits of one document.
const (
	MaxBytes   = 256 << 10 // the JSON of one dashboard
	MaxWidgets = 200
	MaxTags    = 16 // per widget
	Columns    = 12 // grid columns; widget x and w are in columns
	MaxRows    = 1000
	MaxHeight  = 24 // rows
	MaxText    = 20_000
	MaxTitle   = 200
)

// Dashboard is one document.
type Dashboard struct {
	Schema  int      `json:"schema"`
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	Version int64    `json:"version"` // bumped by every save; a PUT names the version it replaces
	Updated int64    `json:"updated"` // Unix ms of the last save
	Public  bool     `json:"public"`  // served read-only at /d/<token>
	Token   string   `json:"token,omitempty"`
	Display bool     `json:"display"`         // /display opens this dashboard (public ones only)
	Range   string   `json:"range,omitempty"` // default time range of its charts, e.g. "24h"
	Widgets []Widget `json:"widgets"`
}

// Widget is one tile of the grid.
type Widget struct {
	ID    string   `json:"id"`
	Type  string   `json:"type"`
	X     int      `json:"x"`
	Y     int      `json:"y"`
	W     int      `json:"w"`
	H     int      `json:"h"`
	Title string   `json:"title,omitempty"`
	Tags  []string `json:"tags,omitempty"`

	Unit     string   `json:"unit,omitempty"`
	Decimals *int     `json:"decimals,omitempty"`
	Min      *float64 `json:"min,omitempty"` // gauge scale, histogram band range
	Max      *float64 `json:"max,omitempty"`
	Low      *float64 `json:"low,omitempty"` // lamp and gauge limits
	High     *float64 `json:"high,omitempty"`
	Range    string   `json:"range,omitempty"`    // trend, bars, histogram: "24h", "7d", "1y"
	Bucket   string   `json:"bucket,omitempty"`   // bars and energy: hour, day, week, month, year
	Agg      string   `json:"agg,omitempty"`      // bars: sum (default), mean, max, ...
	Stacked  bool     `json:"stacked,omitempty"`  // multigraph
	Text     string   `json:"text,omitempty"`     // text: markdown, rendered as safe text
	Tariff   string   `json:"tariff,omitempty"`   // energy: the tariff of costs
	Kind     string   `json:"kind,omitempty"`     // energy: power or counter (default from the unit)
	Bins     int      `json:"bins,omitempty"`     // histogram
	Step     *float64 `json:"step,omitempty"`     // setpoint
	OnValue  *float64 `json:"on_value,omitempty"` // switch: the value written for on (default 1)
	Confirm  *bool    `json:"confirm,omitempty"`  // setpoint and switch: ask before writing (default true)
	View     string   `json:"view,omitempty"`     // energy: energy, solar, heatpump
	ColorBy  string   `json:"color_by,omitempty"` // lamp: limits (default) or alarm (the state of the tag's alarms)
}

// Types are the widget types.
var Types = []string{"value", "gauge", "lamp", "trend", "multigraph", "bars", "table", "text",
	"setpoint", "switch", "energy", "histogram"}

// singleTag are the types showing one tag.
var singleTag = map[string]bool{"value": true, "gauge": true, "lamp": true, "setpoint": true, "switch": true, "histogram": true}

// writers are the types that write a tag through the control path; they
// are not shown on public pages.
var writers = map[string]bool{"setpoint": true, "switch": true}

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidID reports whether id may name a dashboard (and its file).
// "import" is the route of imports, not a dashboard.
func ValidID(id string) bool { return idRE.MatchString(id) && id != "import" }

var durRE = regexp.MustCompile(`^[0-9]{1,5}(m|h|d|w|mo|y)$`)

// Decode reads a document strictly: unknown fields are errors naming them.
func Decode(b []byte) (*Dashboard, error) {
	return docstore.Decode[Dashboard](b, "dashboard", MaxBytes)
}

// Check reports the first problem of d, naming its field.
func (d *Dashboard) Check() error {
	if d.Schema != 0 && d.Schema != Schema {
		return fmt.Errorf("schema %d: this Pith reads schema %d", d.Schema, Schema)
	}
	if d.ID != "" && !ValidID(d.ID) {
		return fmt.Errorf("id %q: want 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit, and not \"import\"", d.ID)
	}
	if err := docstore.CheckText("title", d.Title, MaxTitle); err != nil {
		return err
	}
	if d.Range != "" && !durRE.MatchString(d.Range) {
		return fmt.Errorf("range %q: want a number and m, h, d, w, mo or y, such as 24h", d.Range)
	}
	if len(d.Widgets) > MaxWidgets {
		return fmt.Errorf("widgets: %d, at most %d", len(d.Widgets), MaxWidgets)
	}
	ids := map[string]bool{}
	for i := range d.Widgets {
		if err := d.Widgets[i].check(); err != nil {
			return fmt.Errorf("widgets[%d]: %w", i, err)
		}
		if ids[d.Widgets[i].ID] {
			return fmt.Errorf("widgets[%d].id: %q used twice", i, d.Widgets[i].ID)
		}
		ids[d.Widgets[i].ID] = true
	}
	return nil
}

func (w *Widget) check() error {
	if !idRE.MatchString(w.ID) {
		return fmt.Errorf("id %q: want 1 to 64 of a-z, 0-9, _ and -", w.ID)
	}
	known := false
	for _, t := range Types {
		known = known || t == w.Type
	}
	if !known {
		return fmt.Errorf("type %q: want one of %s", w.Type, strings.Join(Types, ", "))
	}
	if w.X < 0 || w.W < 1 || w.X+w.W > Columns {
		return fmt.Errorf("x %d, w %d: the widget must fit the %d columns", w.X, w.W, Columns)
	}
	if w.Y < 0 || w.Y >= MaxRows || w.H < 1 || w.H > MaxHeight {
		return fmt.Errorf("y %d, h %d: want y from 0 to %d and h from 1 to %d", w.Y, w.H, MaxRows-1, MaxHeight)
	}
	if err := docstore.CheckText("title", w.Title, MaxTitle); err != nil {
		return err
	}
	if err := docstore.CheckText("text", w.Text, MaxText); err != nil {
		return err
	}
	if err := docstore.CheckText("unit", w.Unit, 32); err != nil {
		return err
	}
	if len(w.Tags) > MaxTags {
		return fmt.Errorf("tags: %d, at most %d", len(w.Tags), MaxTags)
	}
	for i, t := range w.Tags {
		if t == "" || len(t) > 256 || strings.ContainsFunc(t, unicode.IsControl) {
			return fmt.Errorf("tags[%d]: %q is not a tag name", i, t)
		}
	}
	if w.Type != "text" && len(w.Tags) == 0 {
		return fmt.Errorf("tags: a %s widget needs a tag", w.Type)
	}
	if singleTag[w.Type] && len(w.Tags) > 1 {
		return fmt.Errorf("tags: a %s widget shows one tag", w.Type)
	}
	if w.Decimals != nil && (*w.Decimals < 0 || *w.Decimals > 10) {
		return fmt.Errorf("decimals %d: want 0 to 10", *w.Decimals)
	}
	if w.Range != "" && !durRE.MatchString(w.Range) {
		return fmt.Errorf("range %q: want a number and m, h, d, w, mo or y, such as 24h", w.Range)
	}
	switch w.Bucket {
	case "", "hour", "day", "week", "month", "year":
	default:
		return fmt.Errorf("bucket %q: want hour, day, week, month or year", w.Bucket)
	}
	switch w.Agg {
	case "", "sum", "mean", "min", "max", "count", "first", "last":
	default:
		return fmt.Errorf("agg %q: want sum, mean, min, max, count, first or last", w.Agg)
	}
	switch w.Kind {
	case "", "power", "counter":
	default:
		return fmt.Errorf("kind %q: want power or counter", w.Kind)
	}
	switch w.View {
	case "", "energy", "solar", "heatpump":
	default:
		return fmt.Errorf("view %q: want energy, solar or heatpump", w.View)
	}
	switch w.ColorBy {
	case "", "limits":
	case "alarm":
		if w.Type != "lamp" {
			return fmt.Errorf("color_by %q: only a lamp takes its colour from alarms", w.ColorBy)
		}
	default:
		return fmt.Errorf("color_by %q: want limits or alarm", w.ColorBy)
	}
	if w.Bins < 0 || w.Bins > 100 {
		return fmt.Errorf("bins %d: want 0 to 100", w.Bins)
	}
	if w.Min != nil && w.Max != nil && !(*w.Max > *w.Min) {
		return fmt.Errorf("max must be greater than min")
	}
	return nil
}

// Tags returns every tag the dashboard reads, each once.
func (d *Dashboard) Tags() map[string]bool {
	out := map[string]bool{}
	for _, w := range d.Widgets {
		for _, t := range w.Tags {
			out[t] = true
		}
	}
	return out
}

// PublicView returns the read-only view served at /d/<token>: no token, no
// writing widgets.
func (d *Dashboard) PublicView() *Dashboard {
	c := *d
	c.Token = ""
	c.Widgets = nil
	for _, w := range d.Widgets {
		if !writers[w.Type] {
			c.Widgets = append(c.Widgets, w)
		}
	}
	return &c
}
