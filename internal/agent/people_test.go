package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/audit"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/users"
)

const personPassword = "correct horse battery"

// person is a browser signed in as one account.
type person struct {
	t    testing.TB
	base string
	hc   *http.Client
	csrf string
}

func signIn(t testing.TB, base, name string) *person {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	p := &person{t: t, base: base, hc: &http.Client{Jar: jar}}
	code, body := p.do("POST", "/api/v1/session", fmt.Sprintf(`{"name":%q,"password":%q}`, name, personPassword))
	if code != 200 {
		t.Fatalf("sign in %s: %d %s", name, code, body)
	}
	var a struct{ CSRF string }
	json.Unmarshal([]byte(body), &a)
	p.csrf = a.CSRF
	return p
}

func (p *person) do(method, path, body string) (int, string) {
	p.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, p.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if p.csrf != "" {
		req.Header.Set(api.CSRFHeader, p.csrf)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	if path == "/api/v1/live" {
		return resp.StatusCode, "" // a stream: the status is enough
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// addPeople makes an admin, an engineer, an operator and a viewer in dir.
func addPeople(t testing.TB, dir string) {
	t.Helper()
	acc, err := users.OpenAccounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		name string
		role users.Role
	}{{"ada", users.RoleAdmin}, {"erin", users.RoleEngineer}, {"otto", users.RoleOperator}, {"vera", users.RoleViewer}} {
		if err := acc.Add(u.name, u.role, personPassword, false); err != nil {
			t.Fatal(err)
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestPeopleControlAndAudit runs a Pith with a Modbus server and a station
// polling it, and people of each role: the operator writes a tag its role
// may write (the device acknowledges), is refused one it may not, and
// acknowledges an alarm; the viewer cannot write; the admin reads each
// action, with the right person, in the audit journal.
func TestPeopleControlAndAudit(t *testing.T) {
	port := freePort(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
[[modbus.server]]
listen = "127.0.0.1:%d"
unit = 0
registers = [
  { register = "holding:0", tag = "srv.boiler", type = "float32", writable = true },
  { register = "holding:2", tag = "srv.turbine", type = "float32", writable = true },
]
[[modbus.client]]
name = "plc"
url = "tcp://127.0.0.1:%d"
unit = 1
period = "100ms"
tags = [
  { name = "boiler.setpoint", register = "holding:0", type = "float32" },
  { name = "turbine.setpoint", register = "holding:2", type = "float32" },
]
[alarms]
enabled = true
[[alarms.alarm]]
name = "boiler.high"
type = "hi"
tag = "boiler.setpoint"
limit = 50.0
[users]
operator_tags = ["boiler.*"]
`, port, port)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Log.Level = "warn"
	addPeople(t, cfg.Store.Dir)
	srv := startServe(t, context.Background(), cfg)
	otto, vera, ada := signIn(t, srv.URL, "otto"), signIn(t, srv.URL, "vera"), signIn(t, srv.URL, "ada")

	if code, body := otto.do("POST", "/api/v1/control", `{"tag":"boiler.setpoint","value":60}`); code != 200 {
		t.Fatalf("operator writes a permitted tag: %d %s", code, body)
	}
	code, body := otto.do("POST", "/api/v1/control", `{"tag":"turbine.setpoint","value":10}`)
	if code != 403 || !strings.Contains(body, `user \"otto\" (operator) may not write this tag`) {
		t.Fatalf("operator writes a forbidden tag: %d %s", code, body)
	}
	if code, body := vera.do("POST", "/api/v1/control", `{"tag":"boiler.setpoint","value":1}`); code != 403 || !strings.Contains(body, "control permission") {
		t.Fatalf("viewer writes: %d %s", code, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := otto.do("GET", "/api/v1/alarms", "")
		if strings.Contains(body, `"id":"boiler.high"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarm not raised: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := vera.do("POST", "/api/v1/alarms/ack", `{"id":"boiler.high"}`); code != 403 {
		t.Fatalf("viewer acks: %d %s", code, body)
	}
	if code, body := otto.do("POST", "/api/v1/alarms/ack", `{"id":"boiler.high"}`); code != 200 || !strings.Contains(body, `"acked_by":"otto"`) {
		t.Fatalf("operator acks: %d %s", code, body)
	}
	if code, _ := otto.do("GET", "/api/v1/audit", ""); code != 403 {
		t.Errorf("operator reads the audit journal: %d", code)
	}
	code, body = ada.do("GET", "/api/v1/audit?limit=100", "")
	if code != 200 {
		t.Fatalf("audit: %d %s", code, body)
	}
	var got struct{ Records []audit.Record }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	find := func(action, target, who string) *audit.Record {
		for i, r := range got.Records {
			if r.Action == action && r.Target == target && r.Who == who {
				return &got.Records[i]
			}
		}
		t.Errorf("no %s of %s by %s in the journal: %s", action, target, who, body)
		return nil
	}
	find(audit.ActionSignIn, "otto", "otto")
	if r := find(audit.ActionControl, "boiler.setpoint", "otto"); r != nil {
		if r.Result != "ok" || r.New == nil || *r.New != 60 || !strings.HasPrefix(r.From, "127.0.0.1:") || r.Role != "operator" {
			t.Errorf("control record %+v", *r)
		}
	}
	if r := find(audit.ActionControl, "turbine.setpoint", "otto"); r != nil && !strings.Contains(r.Result, "may not write") {
		t.Errorf("refused control record %+v", *r)
	}
	find(audit.ActionAck, "boiler.high", "otto")
	if r := find(audit.ActionRefused, "/api/v1/control", "vera"); r != nil && !strings.Contains(r.Result, "control permission") {
		t.Errorf("refused record %+v", *r)
	}
	// Forwarded like events: each record is an event pith.audit.<action>
	// in the event collector, whose sinks carry it upstream.
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, body := ada.do("GET", "/api/v1/events?name=pith.audit.control", "")
		if strings.Contains(body, `"target":"boiler.setpoint"`) && strings.Contains(body, `"who":"otto"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit records not in the event collector: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// CSV export.
	if code, body := ada.do("GET", "/api/v1/audit?format=csv&who=otto", ""); code != 200 || !strings.Contains(body, "boiler.setpoint") || strings.Contains(body, ",ada,") {
		t.Errorf("CSV: %d %s", code, body)
	}
}

func TestKeyChanges(t *testing.T) {
	old := []config.APIKey{{Name: "a", Hash: "h1", Scope: "read"}, {Name: "b", Hash: "h2", Scope: "write"}}
	cur := []config.APIKey{{Name: "a", Hash: "h1", Scope: "admin"}, {Name: "c", Hash: "h3", Scope: "read"}}
	if got, want := keyChanges(old, cur), "added c (read), changed a (admin), removed b"; got != want {
		t.Errorf("keyChanges: %q, want %q", got, want)
	}
	if got := keyChanges(old, old); got != "" {
		t.Errorf("no change: %q", got)
	}
}

// roleTable is who among people reaches each route (the weakest role not
// refused with 401 or 403), by method, like scopeTable for keys. A route
// missing here fails TestRouteRoles.
var roleTable = map[string]struct{ get, post string }{
	"/":                        {"none", "none"},
	"/-/":                      {"none", "none"},
	"/-/ready":                 {"none", "none"},
	"/metrics":                 {"viewer", "admin"},
	"/api/":                    {"viewer", "admin"},
	"/api/v1/import":           {"viewer", "admin"}, // pushing values is for keys (and admins)
	"/api/v1/data":             {"viewer", "admin"},
	"/api/v1/latest":           {"viewer", "admin"},
	"/api/v1/tags":             {"viewer", "admin"},
	"/api/v1/admin/freeze":     {"admin", "admin"},
	"/api/v1/admin/backup":     {"admin", "admin"},
	"/api/v1/admin/reload":     {"admin", "admin"},
	"/api/v1/control":          {"operator", "operator"}, // then the tag patterns of the role
	"/api/v1/alarms":           {"viewer", "admin"},
	"/api/v1/alarms/":          {"viewer", "admin"},
	"/api/v1/alarms/ack":       {"viewer", "operator"},
	"/api/v1/schedules":        {"viewer", "engineer"},
	"/api/v1/schedules/":       {"viewer", "engineer"},
	"/api/v1/rules":            {"viewer", "admin"},
	"/api/v1/rules/":           {"viewer", "admin"},
	"/api/v1/rules/override":   {"viewer", "engineer"},
	"/api/v1/events":           {"viewer", "admin"},
	"/api/v1/track":            {"viewer", "admin"},
	"/api/v1/live":             {"viewer", "admin"},
	"/api/v1/write":            {"viewer", "admin"},
	"/write":                   {"admin", "admin"},
	"/api/v2/write":            {"admin", "admin"},
	"/query":                   {"viewer", "viewer"}, // InfluxQL: reads
	"/api/v1/energy":           {"viewer", "admin"},
	"/api/v1/histogram":        {"viewer", "admin"},
	"/api/v1/report":           {"viewer", "admin"},
	"/api/v1/dashboards":       {"viewer", "engineer"}, // engineers edit dashboards
	"/api/v1/dashboards/":      {"viewer", "engineer"},
	"/d/":                      {"none", "none"},
	"/dashboard":               {"none", "none"},
	"/api/v1/pictures":         {"viewer", "engineer"}, // engineers edit pictures
	"/api/v1/pictures/":        {"viewer", "engineer"},
	"/pictures":                {"none", "none"}, // the pictures' page: no data in it
	"/display":                 {"none", "none"},
	"/ping":                    {"viewer", "admin"},
	"/input/":                  {"admin", "admin"},
	"/api/v1/query":            {"viewer", "viewer"},
	"/api/v1/query_range":      {"viewer", "viewer"},
	"/api/v1/labels":           {"viewer", "viewer"},
	"/api/v1/label/":           {"viewer", "viewer"},
	"/api/v1/series":           {"viewer", "viewer"},
	"/api/v1/status/buildinfo": {"viewer", "viewer"},
	"/api/v1/metadata":         {"viewer", "viewer"},
	"/api/v1/query_exemplars":  {"viewer", "viewer"},
	"/api/v1/session":          {"none", "none"},
	"/api/v1/setup":            {"none", "none"},
	"/api/v1/users":            {"admin", "admin"},
	"/api/v1/users/":           {"admin", "admin"},
	"/api/v1/audit":            {"admin", "admin"},
}

// TestRouteRoles walks every route the running agent mounted, as
// TestRouteScopes does for keys, with a session of each role: the weakest
// role that gets through must be the one roleTable gives. Requests carry
// the session's CSRF token, so that only the permission decides.
func TestRouteRoles(t *testing.T) {
	cfg, err := config.Parse([]byte("[http]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"error\"\n[alarms]\nenabled = true\n[schedules]\nenabled = true\n[rules]\nenabled = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	addPeople(t, cfg.Store.Dir)
	a := New(Options{Config: cfg, Logger: NewLogger("error")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	base := "http://" + a.http.addr
	jar, _ := cookiejar.New(nil)
	who := map[string]*person{"none": {t: t, base: base, hc: &http.Client{Jar: jar}}}
	names := map[string]string{"viewer": "vera", "operator": "otto", "engineer": "erin", "admin": "ada"}
	order := []string{"none", "viewer", "operator", "engineer", "admin"}
	for _, role := range order[1:] {
		who[role] = signIn(t, base, names[role])
	}
	patterns := append(slices.Clone(a.http.patterns), "/api/v1/import", "/api/v1/data", "/api/v1/latest", "/api/v1/tags",
		"/api/v1/alarms/ack", "/api/v1/rules/override")
	slices.Sort(patterns)
	reach := func(method, path string) string {
		for _, role := range order {
			body := ""
			if method == http.MethodPost {
				body = "{}"
			}
			code, _ := who[role].do(method, path, body)
			if code != http.StatusUnauthorized && code != http.StatusForbidden {
				return role
			}
		}
		return "nobody"
	}
	for _, p := range slices.Compact(patterns) {
		want, ok := roleTable[p]
		if !ok {
			t.Errorf("route %s is mounted but missing from roleTable: say who may reach it", p)
			continue
		}
		path := p
		if strings.HasSuffix(p, "/") {
			path += "probe"
		}
		if got := reach(http.MethodGet, path); got != want.get {
			t.Errorf("GET %s: reached by %s, want %s", path, got, want.get)
		}
		switch p {
		case "/api/v1/admin/freeze", "/api/v1/admin/reload", "/api/v1/admin/backup", "/api/v1/session", "/api/v1/setup":
			continue // an admin POST would act; a POST here signs in
		}
		if got := reach(http.MethodPost, path); got != want.post {
			t.Errorf("POST %s: reached by %s, want %s", path, got, want.post)
		}
	}
}
