package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func newTestServer(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := New(opts, nil)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, h http.Handler, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestStatic(t *testing.T) {
	h := newTestServer(t, DefaultOptions()).Handler()
	for _, tc := range []struct {
		path, ctype string
		status      int
		contains    string
	}{
		{"/", "text/html; charset=utf-8", 200, `<script type="module" src="/static/js/app.js">`},
		{"/index.html", "text/html; charset=utf-8", 200, "<title>Pith</title>"},
		{"/static/js/app.js", "text/javascript; charset=utf-8", 200, "hashchange"},
		{"/static/style.css", "text/css; charset=utf-8", 200, ".live-row"},
		{"/vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8", 200, "uPlot"},
		{"/vendor/README.md", "", 404, ""},
		{"/vendor/LICENSE.uPlot", "", 404, ""},
		{"/static/nope.js", "", 404, ""},
		{"/api/v1/nope", "", 404, ""},
		{"/display", "", 404, "no public display"},
		{"/display/data", "", 404, "no public display"},
	} {
		w := get(t, h, tc.path, nil)
		if w.Code != tc.status {
			t.Errorf("GET %s: status %d, want %d", tc.path, w.Code, tc.status)
			continue
		}
		if got := w.Header().Get("Content-Security-Policy"); got != ContentSecurityPolicy {
			t.Errorf("GET %s: CSP %q", tc.path, got)
		}
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q", tc.path, got)
		}
		if tc.status != 200 {
			if !strings.Contains(w.Body.String(), tc.contains) {
				t.Errorf("GET %s: body %q lacks %q", tc.path, w.Body.String(), tc.contains)
			}
			continue
		}
		if got := w.Header().Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if !strings.Contains(w.Body.String(), tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
	}
}

// inlineHandler matches an HTML event-handler attribute such as onload=.
var inlineHandler = regexp.MustCompile(`\son[a-z]+\s*=`)

// TestCSPStrict keeps the policy free of the escapes that would void it.
func TestCSPStrict(t *testing.T) {
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "https:"} {
		if strings.Contains(ContentSecurityPolicy, bad) {
			t.Errorf("CSP allows %s", bad)
		}
	}
	// No page may rely on inline script or inline style attributes.
	for p, a := range newTestServer(t, DefaultOptions()).assets {
		if !strings.HasSuffix(p, ".html") {
			continue
		}
		body := string(a.raw)
		if strings.Contains(body, "<script>") || strings.Contains(body, "style=") || inlineHandler.MatchString(body) {
			t.Errorf("%s has inline script or style", p)
		}
	}
}

func TestGzipAndETag(t *testing.T) {
	h := newTestServer(t, DefaultOptions()).Handler()
	plain := get(t, h, "/static/js/trend.js", nil)
	if plain.Header().Get("Content-Encoding") != "" {
		t.Fatalf("gzip sent without Accept-Encoding")
	}
	gz := get(t, h, "/static/js/trend.js", map[string]string{"Accept-Encoding": "br, gzip"})
	if gz.Header().Get("Content-Encoding") != "gzip" || gz.Header().Get("Vary") != "Accept-Encoding" {
		t.Fatalf("headers %v, want gzip and Vary", gz.Header())
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain.Body.Bytes()) {
		t.Fatalf("gunzipped body differs from the plain one")
	}
	if gz.Body.Len() >= plain.Body.Len() {
		t.Errorf("gzip %d bytes, plain %d", gz.Body.Len(), plain.Body.Len())
	}
	if q := get(t, h, "/static/js/trend.js", map[string]string{"Accept-Encoding": "gzip;q=0"}); q.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip sent although refused with q=0")
	}
	etag := plain.Header().Get("ETag")
	if nm := get(t, h, "/static/js/trend.js", map[string]string{"If-None-Match": "W/" + etag}); nm.Code != http.StatusNotModified || nm.Body.Len() != 0 {
		t.Errorf("If-None-Match: status %d, %d bytes; want 304, none", nm.Code, nm.Body.Len())
	}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d", w.Code)
	}
}

// TestFirstLoadBudget adds up the gzip size of what index.html loads, a
// cheap guard of the 150 KB first-load target that the browser test
// measures on the wire.
func TestFirstLoadBudget(t *testing.T) {
	const budget = 150 << 10
	s := newTestServer(t, DefaultOptions())
	total := 0
	for p, a := range s.assets {
		if strings.HasPrefix(p, "/static/display") || strings.HasSuffix(p, "/js/display.js") {
			continue
		}
		n := len(a.raw)
		if a.gz != nil {
			n = len(a.gz)
		}
		total += n
	}
	t.Logf("dashboard assets: %d bytes gzip", total)
	if total > budget {
		t.Errorf("dashboard assets %d bytes gzip, budget %d", total, budget)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"", false}, {"gzip", true}, {"deflate, gzip;q=0.5", true}, {"GZIP", true},
		{"gzip;q=0", false}, {"gzip; q=0", false}, {"br", false}, {"*", true}, {"x-gzip", false},
	} {
		if got := acceptsGzip(tc.in); got != tc.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
