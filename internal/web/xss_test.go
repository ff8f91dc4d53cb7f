package web

import (
	"regexp"
	"strings"
	"testing"
)

// htmlSinks are the ways a script can make the browser parse a string as
// HTML or code. Tag names, units, descriptions and alarm texts come from
// clients (a line-protocol writer names its tags), so the pages must put
// every data string into the document as text (util.js el, textContent),
// never through one of these.
var htmlSinks = regexp.MustCompile(`\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|\beval\s*\(|new\s+Function\s*\(|\.srcdoc\b|createContextualFragment|DOMParser|setAttribute\(\s*['"]on|\.setHTMLUnsafe|javascript:`)

// svgParse is the one markup parse allowed: picture.js reads the SVG of a
// process picture, sanitised by the server (internal/picture), as XML, in
// which nothing runs.
var svgParse = regexp.MustCompile(`^\s*const doc = new DOMParser\(\)\.parseFromString\(text, 'image/svg\+xml'\);$`)

// TestNoHTMLSinks checks every page and script of the dashboard for a
// stored-XSS path: with the strict CSP (TestCSPStrict) forbidding inline
// script, a data string could only run if a script parsed it as HTML.
func TestNoHTMLSinks(t *testing.T) {
	checked := 0
	for p, a := range newTestServer(t, DefaultOptions()).assets {
		if !strings.HasSuffix(p, ".js") && !strings.HasSuffix(p, ".html") {
			continue
		}
		checked++
		for i, line := range strings.Split(string(a.raw), "\n") {
			if p == "/static/js/picture.js" && svgParse.MatchString(line) {
				continue // the one XML parse of a process picture's server-sanitised SVG
			}
			if m := htmlSinks.FindString(line); m != "" {
				t.Errorf("%s:%d uses %s, which parses a string as HTML or code: %s", p, i+1, m, strings.TrimSpace(line))
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d pages and scripts", checked)
	}
}

// TestSinkPattern keeps htmlSinks honest: each sink is caught, the
// text-only ways of filling a page are not.
func TestSinkPattern(t *testing.T) {
	for _, tt := range []struct {
		line string
		sink bool
	}{
		{"e.innerHTML = tag.name;", true},
		{"row.insertAdjacentHTML('beforeend', s);", true},
		{"document.write(x)", true},
		{"a.setAttribute('onclick', s)", true},
		{"a.href = 'javascript:' + s", true},
		{"e.textContent = tag.name;", false},
		{"el('td', null, tag.unit)", false},
		{"e.append(String(v))", false},
	} {
		if got := htmlSinks.MatchString(tt.line); got != tt.sink {
			t.Errorf("%q: sink %v, want %v", tt.line, got, tt.sink)
		}
	}
}
