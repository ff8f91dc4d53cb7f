// Package picture keeps process pictures: SVG drawings of a plant (drawn
// in any editor and uploaded, or composed in Pith's own editor from its
// symbol library) whose elements are bound to tags. The SVG is sanitised
// (sanitize.go) when it is stored and again when it is served; the
// documents live in dataDir/pictures as versioned JSON files
// (internal/docstore), backed up with the store, and are served at
// /api/v1/pictures (docs/pictures.md, docs/api.md "Pictures").
package picture

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pith-historian/pith/internal/docstore"
)

// Schema is the version of the document format this package writes.
const Schema = 1

// Dir is the folder of the pictures in the data directory.
const Dir = "pictures"

// Limits of one document.
const (
	MaxBytes    = MaxSVG + 1<<20 // the JSON of one picture
	MaxBindings = 5000
	MaxStates   = 16
	MaxTitle    = 200
)

// Picture is one process picture.
type Picture struct {
	Schema   int       `json:"schema"`
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Version  int64     `json:"version"` // bumped by every save; a PUT names the version it replaces
	Updated  int64     `json:"updated"` // Unix ms of the last save
	SVG      string    `json:"svg"`     // the drawing, sanitised
	Bindings []Binding `json:"bindings"`
}

// Binding ties one element of the drawing (by its id) to a tag.
type Binding struct {
	Element string `json:"element"` // the id of the SVG element
	Tag     string `json:"tag"`
	// Kind is what the value drives: text (the value with its unit),
	// fill or stroke (the colour of the state the value is in), visible
	// (shown while the value is within min..max), rotate (min..max turns
	// the element through 0..degrees about its centre) or level (min..max
	// fills the element from the bottom: a tank's content).
	Kind     string   `json:"kind"`
	Unit     string   `json:"unit,omitempty"`
	Decimals *int     `json:"decimals,omitempty"`
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	Degrees  *float64 `json:"degrees,omitempty"` // rotate: the turn at max (default 360)
	States   []State  `json:"states,omitempty"`  // fill and stroke
	// Control offers a write of the tag on the faceplate, to people
	// whose role may write it (the server checks on every write).
	Control bool `json:"control,omitempty"`
}

// State is one colour of a fill or stroke binding: it applies from its
// value up to the next state's.
type State struct {
	From  float64 `json:"from"`
	Color string  `json:"color"`
	Label string  `json:"label,omitempty"`
}

// Kinds are the binding kinds.
var Kinds = []string{"text", "fill", "stroke", "visible", "rotate", "level"}

var (
	elemRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$`)
	colorRE = regexp.MustCompile(`^(#[0-9a-fA-F]{3,8}|[a-zA-Z]{1,30})$`)
	tagRE   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,199}$`)
)

// Decode reads a document strictly: unknown fields are errors naming them.
func Decode(b []byte) (*Picture, error) { return docstore.Decode[Picture](b, "picture", MaxBytes) }

// Check reports the first problem of p, naming its field. It also
// sanitises p.SVG in place: what is stored is what Sanitize keeps.
func (p *Picture) Check() error {
	if p.Schema != 0 && p.Schema != Schema {
		return fmt.Errorf("schema %d: this Pith reads schema %d", p.Schema, Schema)
	}
	p.Schema = Schema
	if p.ID != "" && !ValidID(p.ID) {
		return fmt.Errorf("id %q: want 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit, and not \"sanitize\"", p.ID)
	}
	if err := docstore.CheckText("title", p.Title, MaxTitle); err != nil {
		return err
	}
	if strings.TrimSpace(p.SVG) == "" {
		return fmt.Errorf("svg: empty; upload a drawing or compose one in the editor")
	}
	clean, err := Sanitize([]byte(p.SVG))
	if err != nil {
		return fmt.Errorf("svg: %w", err)
	}
	p.SVG = string(clean)
	if len(p.Bindings) > MaxBindings {
		return fmt.Errorf("bindings: %d, at most %d", len(p.Bindings), MaxBindings)
	}
	if p.Bindings == nil {
		p.Bindings = []Binding{}
	}
	for i := range p.Bindings {
		if err := p.Bindings[i].check(); err != nil {
			return fmt.Errorf("bindings[%d]: %w", i, err)
		}
	}
	return nil
}

func (b *Binding) check() error {
	if !elemRE.MatchString(b.Element) {
		return fmt.Errorf("element %q: want the id of an element of the drawing", b.Element)
	}
	if !tagRE.MatchString(b.Tag) {
		return fmt.Errorf("tag %q: want a tag name", b.Tag)
	}
	known := false
	for _, k := range Kinds {
		known = known || k == b.Kind
	}
	if !known {
		return fmt.Errorf("kind %q: want one of %s", b.Kind, strings.Join(Kinds, ", "))
	}
	if err := docstore.CheckText("unit", b.Unit, 32); err != nil {
		return err
	}
	if b.Decimals != nil && (*b.Decimals < 0 || *b.Decimals > 10) {
		return fmt.Errorf("decimals %d: want 0 to 10", *b.Decimals)
	}
	for _, f := range []*float64{b.Min, b.Max, b.Degrees} {
		if f != nil && (math.IsNaN(*f) || math.IsInf(*f, 0)) {
			return fmt.Errorf("min, max and degrees must be finite numbers")
		}
	}
	if (b.Kind == "rotate" || b.Kind == "level") && (b.Min == nil || b.Max == nil || *b.Max <= *b.Min) {
		return fmt.Errorf("kind %s needs min and max with min < max", b.Kind)
	}
	if (b.Kind == "fill" || b.Kind == "stroke") && len(b.States) == 0 {
		return fmt.Errorf("kind %s needs states (from, color)", b.Kind)
	}
	if len(b.States) > MaxStates {
		return fmt.Errorf("states: %d, at most %d", len(b.States), MaxStates)
	}
	for i, s := range b.States {
		if !colorRE.MatchString(s.Color) {
			return fmt.Errorf("states[%d].color %q: want #rgb, #rrggbb or a colour name", i, s.Color)
		}
		if math.IsNaN(s.From) || math.IsInf(s.From, 0) || (i > 0 && s.From <= b.States[i-1].From) {
			return fmt.Errorf("states[%d].from: want finite values in increasing order", i)
		}
		if err := docstore.CheckText("label", s.Label, 64); err != nil {
			return fmt.Errorf("states[%d]: %w", i, err)
		}
	}
	return nil
}

// ValidID reports whether id may name a picture: "sanitize" is a route.
func ValidID(id string) bool { return docstore.ValidID(id) && id != "sanitize" }

// Tags returns the tags the picture shows.
func (p *Picture) Tags() map[string]bool {
	out := map[string]bool{}
	for _, b := range p.Bindings {
		out[b.Tag] = true
	}
	return out
}

// Store keeps the pictures of a data directory.
type Store = docstore.Store[Picture]

// DocKind names pictures among the documents forwarded to a central Pith.
const DocKind = "picture"

// Open loads the pictures of dataDir/pictures, creating the folder.
func Open(dataDir string) (*Store, error) {
	return docstore.Open(docstore.Options[Picture]{
		Dir:      filepath.Join(dataDir, Dir),
		Kind:     "picture",
		MaxBytes: MaxBytes,
		Decode:   Decode,
		Check:    (*Picture).Check,
		Meta: func(p *Picture) docstore.Meta {
			return docstore.Meta{ID: &p.ID, Version: &p.Version, Updated: &p.Updated}
		},
		Title:   func(p *Picture) string { return p.Title },
		ValidID: ValidID,
	})
}
