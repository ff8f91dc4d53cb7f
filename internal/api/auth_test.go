package api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// okHandler answers 200 with the key name that reached it.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusOK, "key="+KeyName(r.Context()))
})

func TestGenerateKey(t *testing.T) {
	p1, h1 := GenerateKey()
	p2, h2 := GenerateKey()
	if p1 == p2 || h1 == h2 {
		t.Fatal("two generated keys are equal")
	}
	if !strings.HasPrefix(p1, "pith_") || len(p1) != len("pith_")+43 {
		t.Errorf("plain key %q", p1)
	}
	if h1 != HashKey(p1) || !strings.HasPrefix(h1, "sha256:") || len(h1) != 7+64 {
		t.Errorf("hash %q", h1)
	}
	// The well-known SHA-256 of "abc" pins the stored form.
	if got, want := HashKey("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("HashKey(abc) = %s, want %s", got, want)
	}
}

func TestNewAuthErrors(t *testing.T) {
	_, h := GenerateKey()
	plain, _ := GenerateKey()
	tests := []struct {
		name string
		keys []Key
		want string
	}{
		{"no name", []Key{{Hash: h, Scope: ScopeRead}}, "empty name"},
		{"twice", []Key{{"a", h, ScopeRead}, {"a", h, ScopeRead}}, "used twice"},
		{"no scope", []Key{{"a", h, 0}}, "no scope"},
		{"plain stored", []Key{{"a", plain, ScopeRead}}, "plain key"},
		{"bad prefix", []Key{{"a", "md5:00", ScopeRead}}, "must start with"},
		{"short", []Key{{"a", "sha256:00ff", ScopeRead}}, "64 hex"},
	}
	for _, tt := range tests {
		_, err := NewAuth(tt.keys, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestAuthWrap(t *testing.T) {
	rp, rh := GenerateKey()
	wp, wh := GenerateKey()
	ap, ah := GenerateKey()
	a, err := NewAuth([]Key{{"grafana", rh, ScopeRead}, {"telegraf", wh, ScopeWrite}, {"ops", ah, ScopeAdmin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(okHandler)
	basic := func(pw string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+pw)) }
	tests := []struct {
		name, method, target, auth string
		status                     int
		want                       string
	}{
		{"no key", "GET", "/api/v1/data", "", 401, "no API key"},
		{"unknown key", "GET", "/api/v1/data", "Bearer pith_nope", 401, "unknown API key"},
		{"bad scheme", "GET", "/api/v1/data", "Digest x", 401, "unsupported"},
		{"read ok", "GET", "/api/v1/data", "Bearer " + rp, 200, "key=grafana"},
		{"promql post is read", "POST", "/api/v1/query_range", "Bearer " + rp, 200, "key=grafana"},
		{"read cannot import", "POST", "/api/v1/import", "Bearer " + rp, 403, `"grafana" has scope read; POST /api/v1/import needs write`},
		{"write imports", "POST", "/api/v1/import", "Bearer " + wp, 200, "key=telegraf"},
		{"influx v2 token", "POST", "/api/v2/write", "Token " + wp, 200, "key=telegraf"},
		{"influx v1 basic", "POST", "/write", basic(wp), 200, "key=telegraf"},
		{"write reads", "GET", "/api/v1/latest", "Bearer " + wp, 200, "key=telegraf"},
		{"write cannot control", "POST", "/api/v1/control", "Bearer " + wp, 403, "needs admin"},
		{"admin controls", "POST", "/api/v1/control", "Bearer " + ap, 200, "key=ops"},
		{"unknown post needs admin", "POST", "/api/v1/something", "Bearer " + wp, 403, "needs admin"},
		{"apikey on input", "GET", "/input/post?node=1&apikey=" + url.QueryEscape(wp), "", 200, "key=telegraf"},
		{"apikey elsewhere ignored", "GET", "/api/v1/data?apikey=" + url.QueryEscape(rp), "", 401, "no API key"},
	}
	for _, tt := range tests {
		r := do(t, h, tt.method, tt.target, nil, map[string]string{"Authorization": tt.auth})
		if tt.auth == "" {
			r = do(t, h, tt.method, tt.target, nil, nil)
		}
		wantError(t, r, tt.status, tt.want)
		if tt.status == 401 && r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tt.name)
		}
	}
}

func TestAuthApikeyInFormBody(t *testing.T) {
	wp, wh := GenerateKey()
	a, err := NewAuth([]Key{{"emonhub", wh, ScopeWrite}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var gotData string
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotData = r.FormValue("data") // the handler still sees the form
		writeError(w, http.StatusOK, KeyName(r.Context()))
	}))
	body := "data=" + url.QueryEscape("[[0,16,1137]]") + "&apikey=" + url.QueryEscape(wp)
	r := do(t, h, "POST", "/input/bulk", strings.NewReader(body),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	wantError(t, r, 200, "emonhub")
	if gotData != "[[0,16,1137]]" {
		t.Errorf("handler saw data %q", gotData)
	}
}

func TestAuthNoKeysPassesThrough(t *testing.T) {
	a, err := NewAuth(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Enabled() {
		t.Fatal("enabled with no keys")
	}
	wantError(t, do(t, a.Wrap(okHandler), "POST", "/api/v1/control", nil, nil), 200, "key=")
	wantError(t, do(t, a.Require(ScopeAdmin, okHandler), "POST", "/x", nil, nil), 200, "key=")
}

func TestScopeParse(t *testing.T) {
	for _, s := range []Scope{ScopeRead, ScopeWrite, ScopeAdmin} {
		got, err := ParseScope(s.String())
		if err != nil || got != s {
			t.Errorf("ParseScope(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseScope("root"); err == nil {
		t.Error("ParseScope(root) succeeded")
	}
}

func TestCheckExposure(t *testing.T) {
	tests := []struct {
		addr             string
		haveKeys, noAuth bool
		ok               bool
	}{
		{"127.0.0.1:8080", false, false, true},
		{"127.3.4.5:8080", false, false, true},
		{"[::1]:8080", false, false, true},
		{"localhost:8080", false, false, true},
		{":8080", false, false, false},
		{"0.0.0.0:8080", false, false, false},
		{"[::]:8080", false, false, false},
		{"192.168.1.10:8080", false, false, false},
		{"pith.local:8080", false, false, false},
		{":8080", true, false, true},
		{":8080", false, true, true},
		{"nonsense", false, false, false},
	}
	for _, tt := range tests {
		err := CheckExposure(tt.addr, tt.haveKeys, tt.noAuth)
		if (err == nil) != tt.ok {
			t.Errorf("CheckExposure(%q, %v, %v) = %v, want ok=%v", tt.addr, tt.haveKeys, tt.noAuth, err, tt.ok)
		}
	}
	if err := CheckExposure(":8080", false, false); !strings.Contains(err.Error(), `auth = "none"`) {
		t.Errorf("error does not say how to fix it: %v", err)
	}
}

// BenchmarkAuthCheck measures the per-request cost of a key check with
// ten keys configured: go test -bench AuthCheck ./internal/api/
func BenchmarkAuthCheck(b *testing.B) {
	var keys []Key
	var plain string
	for i := range 10 {
		p, h := GenerateKey()
		keys = append(keys, Key{Name: string(rune('a' + i)), Hash: h, Scope: ScopeRead})
		plain = p
	}
	a, err := NewAuth(keys, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := a.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req, _ := http.NewRequest("GET", "/api/v1/data", nil)
	req.Header.Set("Authorization", "Bearer "+plain)
	w := discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
