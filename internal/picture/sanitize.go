package picture

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Limits of an SVG picture.
const (
	MaxSVG      = 2 << 20 // bytes of the SVG text
	maxDepth    = 64      // nesting of elements
	maxElements = 50_000
)

const svgNS = "http://www.w3.org/2000/svg"

// elements are the SVG elements a picture may hold: shapes, text, paint
// servers, clipping, markers and the common filter primitives. Everything
// else (script, foreignObject, animate, set, iframe, a, ...) is dropped
// with its content. Names are SVG's, case-sensitive.
var elements = set("svg", "g", "defs", "title", "desc", "symbol", "use", "switch",
	"path", "rect", "circle", "ellipse", "line", "polyline", "polygon",
	"text", "tspan", "textPath", "image", "style",
	"linearGradient", "radialGradient", "stop", "pattern", "clipPath", "mask", "marker",
	"filter", "feGaussianBlur", "feOffset", "feBlend", "feColorMatrix", "feFlood",
	"feComposite", "feMerge", "feMergeNode", "feDropShadow", "feMorphology")

// attributes are the attributes kept, on any allowed element. Event
// handlers (on*), and anything not listed, are dropped. href is further
// limited to a fragment of this document (and, on image, to an inline
// raster data: URL); every value naming url() may point only inside the
// document.
var attributes = set("id", "class", "style", "transform", "x", "y", "x1", "y1", "x2", "y2",
	"cx", "cy", "r", "rx", "ry", "fx", "fy", "fr", "width", "height", "d", "points", "pathLength",
	"viewBox", "preserveAspectRatio", "version",
	"fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-opacity", "stroke-linecap",
	"stroke-linejoin", "stroke-dasharray", "stroke-dashoffset", "stroke-miterlimit", "opacity",
	"visibility", "display", "color", "paint-order", "vector-effect", "shape-rendering", "text-rendering",
	"font-family", "font-size", "font-weight", "font-style", "text-anchor", "dominant-baseline",
	"alignment-baseline", "letter-spacing", "word-spacing", "text-decoration", "textLength", "lengthAdjust",
	"dx", "dy", "rotate", "startOffset",
	"gradientUnits", "gradientTransform", "spreadMethod", "offset", "stop-color", "stop-opacity",
	"clip-path", "clip-rule", "clipPathUnits", "mask", "maskUnits", "maskContentUnits",
	"patternUnits", "patternContentUnits", "patternTransform",
	"marker-start", "marker-mid", "marker-end", "markerWidth", "markerHeight", "markerUnits", "refX", "refY", "orient",
	"filter", "filterUnits", "primitiveUnits", "in", "in2", "result", "stdDeviation", "mode", "type", "values",
	"operator", "k1", "k2", "k3", "k4", "radius", "flood-color", "flood-opacity",
	"href")

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

var (
	fragRE  = regexp.MustCompile(`^#[A-Za-z_][A-Za-z0-9_.:-]{0,127}$`)
	imageRE = regexp.MustCompile(`^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$`)
	// urlRE finds url( ... ) in attribute values and CSS; only url(#id)
	// (with optional quotes) survives.
	urlRE      = regexp.MustCompile(`(?i)url\s*\(\s*(?:"[^"]*"|'[^']*'|[^)]*)\s*\)`)
	localURLRE = regexp.MustCompile(`^(?i:url)\(\s*["']?#[A-Za-z_][A-Za-z0-9_.:-]{0,127}["']?\s*\)$`)
	// badCSS are CSS constructs that load or run something, or hide
	// a construct from the checks (escapes, comments).
	badCSS = regexp.MustCompile(`(?i)@import|expression\s*\(|javascript:|vbscript:|behavior\s*:|-moz-binding|\\|/\*|image-set|@font-face|@namespace`)
)

// ErrNotSVG is returned for input that is not an SVG document.
var ErrNotSVG = errors.New("not an SVG document: the root element must be <svg>")

// Sanitize parses an SVG document and writes it anew holding only the
// allowed elements and attributes: no script, no event handlers, no
// foreignObject, no animation, no reference outside the document (href,
// url() and CSS), no javascript: URLs, no DTD, comments or processing
// instructions. Unknown namespaces (an editor's own, such as Inkscape's)
// are dropped. It fails on malformed XML and on documents past the limits,
// naming the problem. Sanitize(Sanitize(x)) == Sanitize(x).
func Sanitize(src []byte) ([]byte, error) {
	if len(src) > MaxSVG {
		return nil, fmt.Errorf("svg is %d bytes, at most %d", len(src), MaxSVG)
	}
	dec := xml.NewDecoder(bytes.NewReader(src))
	dec.Strict = true
	dec.Entity = nil // only XML's five: no entity of a DTD is expanded
	dec.CharsetReader = func(label string, r io.Reader) (io.Reader, error) {
		return nil, fmt.Errorf("svg encoding %q: only UTF-8 is read", label)
	}
	var out bytes.Buffer
	var stack []string // open kept elements, "" for a skipped subtree's root
	skip := 0          // depth inside a dropped subtree
	count, root := 0, false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse svg: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			count++
			if count > maxElements {
				return nil, fmt.Errorf("svg has more than %d elements", maxElements)
			}
			if len(stack)+skip >= maxDepth {
				return nil, fmt.Errorf("svg nests deeper than %d elements", maxDepth)
			}
			if !root {
				if t.Name.Local != "svg" || (t.Name.Space != svgNS && t.Name.Space != "") {
					return nil, ErrNotSVG
				}
				root = true
			} else if len(stack) == 0 && skip == 0 {
				return nil, errors.New("parse svg: content after the root element")
			}
			if skip > 0 || !elements[t.Name.Local] || (t.Name.Space != svgNS && t.Name.Space != "") {
				skip++
				continue
			}
			writeStart(&out, t, len(stack) == 0)
			stack = append(stack, t.Name.Local)
		case xml.EndElement:
			if skip > 0 {
				skip--
				continue
			}
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			out.WriteString("</" + name + ">")
		case xml.CharData:
			if skip > 0 || len(stack) == 0 {
				continue
			}
			text := []byte(t)
			if stack[len(stack)-1] == "style" {
				text = []byte(cleanCSS(string(text), true))
			}
			out.WriteString(escape(string(text)))
		}
		// Comments, processing instructions and directives (DTDs) are dropped.
	}
	if !root {
		return nil, ErrNotSVG
	}
	return out.Bytes(), nil
}

// writeStart writes the start tag of an allowed element with its allowed
// attributes; the root declares the SVG namespace.
func writeStart(out *bytes.Buffer, t xml.StartElement, isRoot bool) {
	out.WriteString("<" + t.Name.Local)
	if isRoot {
		out.WriteString(` xmlns="` + svgNS + `"`)
	}
	seen := map[string]bool{}
	for _, a := range t.Attr {
		name := a.Name.Local
		switch a.Name.Space {
		case "", svgNS:
		case "http://www.w3.org/1999/xlink":
			if name != "href" {
				continue
			}
		case "xml", "http://www.w3.org/XML/1998/namespace":
			if name != "space" {
				continue
			}
			name = "xml:space"
		default:
			continue
		}
		if seen[name] || (!attributes[name] && name != "xml:space") {
			continue
		}
		v, ok := cleanValue(t.Name.Local, name, a.Value)
		if !ok {
			continue
		}
		seen[name] = true
		out.WriteString(" " + name + `="`)
		out.WriteString(escape(v))
		out.WriteString(`"`)
	}
	out.WriteString(">")
}

// cleanValue checks one attribute value; false drops the attribute.
func cleanValue(elem, name, v string) (string, bool) {
	if strings.ContainsRune(v, 0) {
		return "", false
	}
	switch name {
	case "href":
		v = strings.TrimSpace(v)
		if elem == "image" {
			return v, imageRE.MatchString(v)
		}
		return v, fragRE.MatchString(v)
	case "style":
		return cleanCSS(v, false), true
	}
	lv := strings.ToLower(v)
	// Presentation attributes are CSS values: an escape could spell url(.
	if strings.Contains(lv, "javascript:") || strings.Contains(lv, "data:") || strings.ContainsAny(v, "\\<>") {
		return "", false
	}
	return v, !foreignURL(v)
}

// anyURL finds the start of a url( in any case and spacing.
var anyURL = regexp.MustCompile(`(?i)url\s*\(`)

// foreignURL reports whether s names a url() other than url(#id),
// including an unterminated one.
func foreignURL(s string) bool {
	rest := urlRE.ReplaceAllStringFunc(s, func(u string) string {
		if localURLRE.MatchString(u) {
			return ""
		}
		return "url("
	})
	return anyURL.MatchString(rest)
}

// cleanCSS keeps the declarations (of a style attribute) or the rules (of
// a <style> element) that load nothing and run nothing: any url() but
// url(#id) becomes none, and a declaration or rule holding an import,
// an expression, an escape or a comment is dropped whole.
func cleanCSS(css string, sheet bool) string {
	css = urlRE.ReplaceAllStringFunc(css, func(u string) string {
		if localURLRE.MatchString(u) {
			return u
		}
		return "none"
	})
	sep := ";"
	if sheet {
		sep = "}"
	}
	parts := strings.Split(css, sep)
	kept := parts[:0]
	for _, p := range parts {
		if badCSS.MatchString(p) || strings.ContainsAny(p, "<>\x00") || foreignURL(p) {
			continue
		}
		if strings.TrimSpace(p) != "" {
			kept = append(kept, strings.TrimSpace(p))
		}
	}
	if sheet {
		// A rule whose braces do not balance after the drop is dropped too.
		out := kept[:0]
		for _, p := range kept {
			if strings.Count(p, "{") == 1 {
				out = append(out, p)
			}
		}
		if len(out) == 0 {
			return ""
		}
		return strings.Join(out, "}\n") + "}"
	}
	return strings.Join(kept, ";")
}

// escaper writes text and attribute values: the XML specials as entities,
// newlines and tabs as they are (sanitised drawings stay readable).
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "\r", "&#xD;")

func escape(s string) string { return escaper.Replace(s) }
