package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/config"
)

// scopeTable is who reaches each route of the running agent, by method:
// the weakest credential whose request is not refused with 401 or 403.
// "none" means no key at all. docs/security.md quotes it. A route the
// agent mounts that is missing here fails TestRouteScopes: a new route
// cannot be left open by accident.
var scopeTable = map[string]struct{ get, post string }{
	"/":                        {"none", "none"}, // the dashboard's static files: no data in them
	"/-/":                      {"none", "none"}, // probes
	"/-/ready":                 {"none", "none"},
	"/metrics":                 {"read", "admin"},
	"/api/":                    {"read", "admin"}, // the native API's own routes below; unknown writes fail closed
	"/api/v1/import":           {"read", "write"}, // under /api/: GET is a 405
	"/api/v1/data":             {"read", "admin"}, // DELETE needs admin too
	"/api/v1/latest":           {"read", "admin"},
	"/api/v1/tags":             {"read", "admin"},
	"/api/v1/admin/freeze":     {"admin", "admin"},
	"/api/v1/admin/backup":     {"admin", "admin"},
	"/api/v1/admin/reload":     {"admin", "admin"},
	"/api/v1/control":          {"admin", "admin"}, // a leaked write key must not move a valve
	"/api/v1/alarms":           {"read", "admin"},
	"/api/v1/alarms/":          {"read", "admin"},
	"/api/v1/schedules":        {"read", "admin"},
	"/api/v1/schedules/":       {"read", "admin"},
	"/api/v1/rules":            {"read", "admin"},
	"/api/v1/rules/":           {"read", "admin"},
	"/api/v1/events":           {"read", "write"},
	"/api/v1/track":            {"read", "write"},
	"/api/v1/live":             {"read", "admin"},
	"/api/v1/energy":           {"read", "admin"}, // GET only: other methods are a 405 after the key check
	"/api/v1/histogram":        {"read", "admin"},
	"/api/v1/report":           {"read", "admin"},
	"/api/v1/dashboards":       {"read", "admin"},
	"/api/v1/dashboards/":      {"read", "admin"},
	"/d/":                      {"none", "none"}, // public dashboards: an unknown token is a 404, writes a 405
	"/dashboard":               {"none", "none"}, // the editor's page: no data in it
	"/api/v1/pictures":         {"read", "admin"},
	"/api/v1/pictures/":        {"read", "admin"},
	"/pictures":                {"none", "none"}, // the pictures' page: no data in it
	"/display":                 {"none", "none"},
	"/api/v1/write":            {"read", "write"},
	"/write":                   {"write", "write"},
	"/api/v2/write":            {"write", "write"},
	"/query":                   {"read", "read"},
	"/ping":                    {"read", "admin"},
	"/input/":                  {"write", "write"},
	"/api/v1/query":            {"read", "read"},
	"/api/v1/query_range":      {"read", "read"},
	"/api/v1/labels":           {"read", "read"},
	"/api/v1/label/":           {"read", "read"},
	"/api/v1/series":           {"read", "read"},
	"/api/v1/status/buildinfo": {"read", "read"},
	"/api/v1/metadata":         {"read", "read"},
	"/api/v1/query_exemplars":  {"read", "read"},
	"/api/v1/session":          {"none", "none"}, // sign-in: the handler checks the password
	"/api/v1/setup":            {"none", "none"}, // first admin: the handler checks the one-time token
	"/api/v1/users":            {"admin", "admin"},
	"/api/v1/users/":           {"admin", "admin"},
	"/api/v1/audit":            {"admin", "admin"},
}

// TestRouteScopes walks every route the running agent mounted and sends a
// GET and a POST with no key and with a read, a write and an admin key:
// the weakest that gets through must be the one scopeTable gives.
func TestRouteScopes(t *testing.T) {
	keys := map[string]string{"read": "k-read-0123456789", "write": "k-write-0123456789", "admin": "k-admin-0123456789"}
	var toml strings.Builder
	toml.WriteString("[http]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"error\"\n[alarms]\nenabled = true\n[schedules]\nenabled = true\n[rules]\nenabled = true\n")
	for scope, k := range keys {
		sum := sha256.Sum256([]byte(k))
		toml.WriteString("[[http.keys]]\nname = \"" + scope + "\"\nscope = \"" + scope + "\"\nhash = \"sha256:" + hex.EncodeToString(sum[:]) + "\"\n")
	}
	cfg, err := config.Parse([]byte(toml.String()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	a := New(Options{Config: cfg, Logger: NewLogger("error")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	base := "http://" + a.http.addr
	// The native API under /api/ routes on its own mux: its paths are
	// walked too.
	patterns := append(slices.Clone(a.http.patterns), "/api/v1/import", "/api/v1/data", "/api/v1/latest", "/api/v1/tags")
	slices.Sort(patterns)
	if len(patterns) < 20 {
		t.Fatalf("only %d routes mounted: %v", len(patterns), patterns)
	}
	reach := func(method, path string) string {
		for _, who := range []string{"none", "read", "write", "admin"} {
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader("{}")
			}
			req, _ := http.NewRequest(method, base+path, body)
			if who != "none" {
				req.Header.Set("Authorization", "Bearer "+keys[who])
			}
			if path == "/api/v1/live" {
				// Ask for one answer, not a stream.
				req.Header.Set("Accept", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s as %s: %v", method, path, who, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				return who
			}
		}
		return "nobody"
	}
	for _, p := range patterns {
		want, ok := scopeTable[p]
		if !ok {
			t.Errorf("route %s is mounted but missing from scopeTable: say who may reach it", p)
			continue
		}
		path := p
		if strings.HasSuffix(p, "/") {
			path += "probe"
		}
		if p == "/api/v1/admin/freeze" || p == "/api/v1/admin/reload" || p == "/api/v1/admin/backup" {
			// An admin POST would freeze, reload or back up: the GET
			// already shows nothing weaker than admin gets in.
			if got := reach(http.MethodGet, path); got != want.get {
				t.Errorf("GET %s: reached by %s, want %s", path, got, want.get)
			}
			continue
		}
		if got := reach(http.MethodGet, path); got != want.get {
			t.Errorf("GET %s: reached by %s, want %s", path, got, want.get)
		}
		if got := reach(http.MethodPost, path); got != want.post {
			t.Errorf("POST %s: reached by %s, want %s", path, got, want.post)
		}
	}
}
