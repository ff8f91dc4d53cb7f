package picture

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
)

// hostile are SVG documents that try to run script, load something or
// leave the document; the sanitised output must hold none of the markers.
var hostile = []struct {
	name, svg string
	banned    []string // substrings (lower-case) the output must not hold
}{
	{"script element", `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script><rect id="r"/></svg>`, []string{"script", "alert"}},
	{"script in namespace-less svg", `<svg><script type="text/javascript">alert(1)</script></svg>`, []string{"script", "alert"}},
	{"onload on root", `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`, []string{"onload", "alert"}},
	{"onclick on shape", `<svg xmlns="http://www.w3.org/2000/svg"><rect onclick="alert(1)" onmouseover="x()" width="5"/></svg>`, []string{"onclick", "onmouseover", "alert"}},
	{"upper-case handler", `<svg xmlns="http://www.w3.org/2000/svg"><rect ONLOAD="alert(1)"/></svg>`, []string{"onload", "alert"}},
	{"foreignObject with html", `<svg xmlns="http://www.w3.org/2000/svg"><foreignObject><body xmlns="http://www.w3.org/1999/xhtml"><img src="x" onerror="alert(1)"/><iframe src="javascript:alert(1)"/></body></foreignObject></svg>`, []string{"foreignobject", "img", "onerror", "iframe", "javascript"}},
	{"external xlink:href on use", `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"><use xlink:href="http://evil.example/s.svg#x"/></svg>`, []string{"evil"}},
	{"external href on use", `<svg xmlns="http://www.w3.org/2000/svg"><use href="other.svg#a"/></svg>`, []string{"other.svg"}},
	{"data svg on use", `<svg xmlns="http://www.w3.org/2000/svg"><use href="data:image/svg+xml;base64,PHN2Zz48c2NyaXB0PmFsZXJ0KDEpPC9zY3JpcHQ+PC9zdmc+#x"/></svg>`, []string{"data:"}},
	{"javascript link", `<svg xmlns="http://www.w3.org/2000/svg"><a href="javascript:alert(1)"><rect/></a></svg>`, []string{"javascript", "alert", "<a"}},
	{"xlink javascript", `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"><a xlink:href="JaVaScRiPt:alert(1)"><text>x</text></a></svg>`, []string{"javascript", "alert"}},
	{"image from the network", `<svg xmlns="http://www.w3.org/2000/svg"><image href="https://evil.example/track.png"/></svg>`, []string{"evil", "https"}},
	{"image svg data url", `<svg xmlns="http://www.w3.org/2000/svg"><image href="data:image/svg+xml,&lt;svg onload=alert(1)&gt;"/></svg>`, []string{"onload", "alert", "data:"}},
	{"animate href to javascript", `<svg xmlns="http://www.w3.org/2000/svg"><a><animate attributeName="href" values="javascript:alert(1)"/><text>x</text></a></svg>`, []string{"animate", "javascript"}},
	{"set onload", `<svg xmlns="http://www.w3.org/2000/svg"><set attributeName="onmouseover" to="alert(1)"/></svg>`, []string{"<set", "alert"}},
	{"css url in style attribute", `<svg xmlns="http://www.w3.org/2000/svg"><rect style="fill:url(http://evil.example/x);stroke:red"/></svg>`, []string{"evil"}},
	{"css import in style element", `<svg xmlns="http://www.w3.org/2000/svg"><style>@import url(//evil.example/x.css); rect{fill:red}</style></svg>`, []string{"import", "evil"}},
	{"css escape spelling url", `<svg xmlns="http://www.w3.org/2000/svg"><style>rect{background:\75rl(//evil.example/x)}</style><rect style="fill:\75rl(//evil.example)"/></svg>`, []string{"evil", `\`}},
	{"css unterminated url", `<svg xmlns="http://www.w3.org/2000/svg"><rect style="fill:url(//evil.example/x"/></svg>`, []string{"evil"}},
	{"css comment splitting url", `<svg xmlns="http://www.w3.org/2000/svg"><style>rect{fill:u/**/rl(//evil.example)}</style></svg>`, []string{"evil"}},
	{"presentation attribute url", `<svg xmlns="http://www.w3.org/2000/svg"><rect fill="url(https://evil.example/p#g)" filter="url('//evil.example/f')"/></svg>`, []string{"evil"}},
	{"presentation attribute escape", `<svg xmlns="http://www.w3.org/2000/svg"><rect fill="\75rl(//evil.example)"/></svg>`, []string{"evil"}},
	{"css expression", `<svg xmlns="http://www.w3.org/2000/svg"><rect style="width:expression(alert(1))"/></svg>`, []string{"expression", "alert"}},
	{"style closing tag", `<svg xmlns="http://www.w3.org/2000/svg"><style>&lt;/style&gt;&lt;script&gt;alert(1)&lt;/script&gt;</style></svg>`, []string{"script", "alert"}},
	{"entity in DTD", `<!DOCTYPE svg [<!ENTITY x "<script>alert(1)</script>">]><svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>`, nil}, // refused
	{"external entity", `<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>`, nil},
	{"processing instruction stylesheet", `<?xml-stylesheet href="http://evil.example/x.css"?><svg xmlns="http://www.w3.org/2000/svg"/>`, []string{"evil", "stylesheet"}},
	{"html root", `<html><body><script>alert(1)</script></body></html>`, nil},
	{"svg in another namespace", `<svg xmlns="http://evil.example/ns"><script>alert(1)</script></svg>`, nil},
	{"prefixed svg script", `<svg xmlns="http://www.w3.org/2000/svg" xmlns:s="http://www.w3.org/2000/svg"><s:script>alert(1)</s:script></svg>`, []string{"script", "alert"}},
	{"iframe and object", `<svg xmlns="http://www.w3.org/2000/svg"><iframe src="https://evil.example"/><object data="x"/><embed src="y"/></svg>`, []string{"iframe", "object", "embed", "evil"}},
	{"feImage", `<svg xmlns="http://www.w3.org/2000/svg"><filter id="f"><feImage href="https://evil.example/x"/></filter></svg>`, []string{"feimage", "evil"}},
	{"mask and clip url external", `<svg xmlns="http://www.w3.org/2000/svg"><rect mask="url(https://evil.example/m.svg#m)" clip-path="url(data:image/svg+xml,x)"/></svg>`, []string{"evil", "data:"}},
	{"handler in inkscape namespace", `<svg xmlns="http://www.w3.org/2000/svg" xmlns:inkscape="http://www.inkscape.org/namespaces/inkscape"><rect inkscape:onload="alert(1)"/></svg>`, []string{"alert"}},
}

func TestSanitizeHostile(t *testing.T) {
	for _, c := range hostile {
		t.Run(c.name, func(t *testing.T) {
			out, err := Sanitize([]byte(c.svg))
			if c.banned == nil {
				if err == nil {
					t.Fatalf("accepted, want an error; got %s", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("Sanitize: %v", err)
			}
			low := strings.ToLower(string(out))
			for _, b := range c.banned {
				if strings.Contains(low, b) {
					t.Errorf("output holds %q:\n%s", b, out)
				}
			}
			checkSafe(t, out)
		})
	}
}

// TestSanitizeKeeps checks that what a drawing needs survives: shapes,
// gradients by local url(), local <use>, text, inline raster images,
// styles without external references.
func TestSanitizeKeeps(t *testing.T) {
	in := `<?xml version="1.0"?>
<!-- drawn in Inkscape -->
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:inkscape="http://www.inkscape.org/namespaces/inkscape" viewBox="0 0 100 50" inkscape:version="1.2">
<defs><linearGradient id="g"><stop offset="0" stop-color="#fff"/></linearGradient><symbol id="s"><circle r="2"/></symbol></defs>
<inkscape:namedview id="nv"/>
<style>.hot{fill:red}</style>
<g id="tank1" transform="translate(1,2)"><rect id="lvl" x="1" y="2" width="10" height="20" fill="url(#g)" style="stroke:#000;stroke-width:2"/></g>
<use xlink:href="#s" x="5"/>
<text id="t1" x="3" y="4" xml:space="preserve">P &amp; ID</text>
<image href="data:image/png;base64,iVBORw0KGgo=" width="1" height="1"/>
</svg>`
	out, err := Sanitize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`viewBox="0 0 100 50"`, `fill="url(#g)"`, `style="stroke:#000;stroke-width:2"`, `<use href="#s" x="5">`,
		`<text id="t1" x="3" y="4" xml:space="preserve">P &amp; ID</text>`, `.hot{fill:red}`, `<stop offset="0" stop-color="#fff">`,
		`href="data:image/png;base64,iVBORw0KGgo="`, `<rect id="lvl"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lost %s:\n%s", want, out)
		}
	}
	for _, gone := range []string{"inkscape", "namedview", "<!--", "<?xml"} {
		if strings.Contains(string(out), gone) {
			t.Errorf("output keeps %s:\n%s", gone, out)
		}
	}
	again, err := Sanitize(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("not idempotent (%v):\n%s\n%s", err, out, again)
	}
}

func TestSanitizeLimits(t *testing.T) {
	deep := strings.Repeat("<g>", maxDepth+1) + strings.Repeat("</g>", maxDepth+1)
	for name, in := range map[string]string{
		"too deep":  `<svg xmlns="http://www.w3.org/2000/svg">` + deep + `</svg>`,
		"too large": `<svg xmlns="http://www.w3.org/2000/svg">` + strings.Repeat(" ", MaxSVG) + `</svg>`,
		"malformed": `<svg xmlns="http://www.w3.org/2000/svg"><rect></svg>`,
		"empty":     ``,
		"two roots": `<svg xmlns="http://www.w3.org/2000/svg"/><svg xmlns="http://www.w3.org/2000/svg"/>`,
		"latin1":    `<?xml version="1.0" encoding="ISO-8859-1"?><svg/>`,
	} {
		if _, err := Sanitize([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// checkSafe parses sanitised output independently and checks each
// element and attribute against the allow-lists and each reference
// against the rules: the property the fuzz target holds for any input.
func checkSafe(t *testing.T, out []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(out))
	dec.Strict = true
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, out)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			if !elements[x.Name.Local] || x.Name.Space != svgNS {
				t.Fatalf("element %v kept:\n%s", x.Name, out)
			}
			for _, a := range x.Attr {
				n := a.Name.Local
				if a.Name.Space == "xmlns" || (a.Name.Space == "" && n == "xmlns") {
					continue
				}
				if a.Name.Space == "xml" && n == "space" {
					continue
				}
				if a.Name.Space != "" || !attributes[n] || strings.HasPrefix(strings.ToLower(n), "on") {
					t.Fatalf("attribute %v kept:\n%s", a.Name, out)
				}
				v := strings.ToLower(a.Value)
				if strings.Contains(v, "javascript:") || strings.Contains(v, `\`) {
					t.Fatalf("attribute %s=%q kept", n, a.Value)
				}
				if n == "href" && !fragRE.MatchString(a.Value) && !(x.Name.Local == "image" && imageRE.MatchString(a.Value)) {
					t.Fatalf("href %q kept on %s", a.Value, x.Name.Local)
				}
				if foreignURL(a.Value) {
					t.Fatalf("url() outside the document kept: %s=%q", n, a.Value)
				}
			}
		case xml.CharData:
			s := strings.ToLower(string(x))
			if foreignURL(s) || strings.Contains(s, "@import") {
				// Text of <text> may say anything; only <style> matters, and
				// its text went through cleanCSS: check it the strict way.
				if strings.Contains(s, "{") {
					t.Fatalf("style text loads something: %q", x)
				}
			}
		case xml.ProcInst, xml.Directive, xml.Comment:
			t.Fatalf("kept %T:\n%s", tok, out)
		}
	}
}

// FuzzSanitize holds for any input: the output parses, holds only allowed
// elements, attributes and references, and sanitising it again changes
// nothing. Run: go test -run XXX -fuzz FuzzSanitize ./internal/picture
func FuzzSanitize(f *testing.F) {
	for _, c := range hostile {
		f.Add([]byte(c.svg))
	}
	f.Add([]byte(`<svg xmlns="http://www.w3.org/2000/svg"><style>a{fill:url(#x)}b{c:d}</style><rect fill="url(#a)"/></svg>`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Sanitize(in)
		if err != nil {
			return
		}
		checkSafe(t, out)
		again, err := Sanitize(out)
		if err != nil {
			t.Fatalf("sanitised output refused: %v\n%s", err, out)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n%s\n%s", out, again)
		}
	})
}

// BenchmarkSanitize measures a picture of 1,000 bound elements.
// Run: go test -run XXX -bench Sanitize ./internal/picture
func BenchmarkSanitize(b *testing.B) {
	var s strings.Builder
	s.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1000 1000">`)
	for i := range 1000 {
		s.WriteString(`<g transform="translate(1,2)"><rect id="r` + strconv.Itoa(i) + `" x="1" y="2" width="10" height="20" style="fill:#ccc;stroke:#000"/><text id="t` + strconv.Itoa(i) + `" x="1" y="1">0.0</text></g>`)
	}
	s.WriteString(`</svg>`)
	in := []byte(s.String())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sanitize(in); err != nil {
			b.Fatal(err)
		}
	}
}
