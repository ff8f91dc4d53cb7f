package users

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/audit"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rig is a server with the sign-in routes and two guarded routes behind
// api.Auth, the one check of the running agent: POST /act needs the
// acknowledge permission, POST /api/v1/admin/x needs admin.
type rig struct {
	t     testing.TB
	srv   *httptest.Server
	mgr   *Manager
	clock *clock
	j     *audit.Journal
	key   string // an admin API key
}

const pw = "correct horse battery"

func newRig(t testing.TB, tlsOn bool) *rig {
	t.Helper()
	dir := t.TempDir()
	acc, err := OpenAccounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		name string
		role Role
	}{{"ada", RoleAdmin}, {"otto", RoleOperator}, {"vera", RoleViewer}} {
		if err := acc.Add(u.name, u.role, pw, false); err != nil {
			t.Fatal(err)
		}
	}
	j, err := audit.Open(filepath.Join(dir, "audit"), audit.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	c := &clock{t: time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)}
	o := DefaultOptions()
	o.Now = c.now
	mgr, err := NewManager(acc, o, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, hash := api.GenerateKey()
	auth, err := api.NewAuth([]api.Key{{Name: "robot", Hash: hash, Scope: api.ScopeAdmin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	auth.SetSessions(mgr)
	mux := http.NewServeMux()
	mgr.Mount(mux)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.WriteValue(w, http.StatusOK, map[string]string{"who": api.KeyName(r.Context())})
	})
	mux.Handle("/api/v1/alarms/ack", ok)
	mux.Handle("/api/v1/admin/x", ok)
	var srv *httptest.Server
	if tlsOn {
		srv = httptest.NewTLSServer(auth.Wrap(mux))
	} else {
		srv = httptest.NewServer(auth.Wrap(mux))
	}
	t.Cleanup(srv.Close)
	return &rig{t: t, srv: srv, mgr: mgr, clock: c, j: j, key: plain}
}

// client is a browser: a cookie jar and the CSRF token of its session.
type client struct {
	r    *rig
	hc   *http.Client
	csrf string
}

func (r *rig) client() *client {
	jar, _ := cookiejar.New(nil)
	hc := *r.srv.Client() // a copy: the server's client is shared
	hc.Jar = jar
	return &client{r: r, hc: &hc}
}

func (c *client) do(method, path, body string, hdr map[string]string) (*http.Response, string) {
	c.r.t.Helper()
	req, _ := http.NewRequest(method, c.r.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.r.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (c *client) signIn(name, password string) *http.Response {
	c.r.t.Helper()
	b, _ := json.Marshal(map[string]string{"name": name, "password": password})
	resp, body := c.do("POST", "/api/v1/session", string(b), nil)
	var a sessionAnswer
	if resp.StatusCode == 200 {
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			c.r.t.Fatal(err)
		}
		c.csrf = a.CSRF
	}
	return resp
}

func (c *client) post(path string) int {
	c.r.t.Helper()
	resp, _ := c.do("POST", path, `{}`, map[string]string{api.CSRFHeader: c.csrf})
	return resp.StatusCode
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	return nil
}

func TestCookieFlags(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		r := newRig(t, tlsOn)
		resp := r.client().signIn("ada", pw)
		if resp.StatusCode != 200 {
			t.Fatalf("sign-in: %s", resp.Status)
		}
		c := sessionCookie(resp)
		if c == nil {
			t.Fatal("no session cookie")
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tlsOn || c.Path != "/" {
			t.Errorf("tls %v: cookie HttpOnly=%v SameSite=%v Secure=%v Path=%q, want HttpOnly, Strict, Secure=%v, /",
				tlsOn, c.HttpOnly, c.SameSite, c.Secure, c.Path, tlsOn)
		}
		if c.MaxAge <= 0 || time.Duration(c.MaxAge)*time.Second > DefaultOptions().MaxAge+time.Minute {
			t.Errorf("cookie Max-Age %d s, want about the session's maximum age", c.MaxAge)
		}
		if len(c.Value) < 40 {
			t.Errorf("session ID %q too short", c.Value)
		}
	}
}

func TestSessionFixation(t *testing.T) {
	r := newRig(t, false)
	// The attacker plants a session ID of its choosing, then its own real
	// one: neither may become the victim's session.
	attacker := r.client()
	if resp := attacker.signIn("vera", pw); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	planted := sessionCookie(attacker.signIn("vera", pw)).Value
	for _, fixed := range []string{"attacker-chosen-value-0123456789", planted} {
		req, _ := http.NewRequest("POST", r.srv.URL+"/api/v1/session", strings.NewReader(`{"name":"ada","password":"`+pw+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.AddCookie(&http.Cookie{Name: CookieName, Value: fixed})
		resp, err := r.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := sessionCookie(resp)
		if resp.StatusCode != 200 || got == nil || got.Value == fixed {
			t.Fatalf("sign-in with a planted cookie: %s, cookie %v: want a new session ID", resp.Status, got)
		}
		// The planted ID is not the admin's session.
		req, _ = http.NewRequest("GET", r.srv.URL+"/api/v1/session", nil)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: fixed})
		resp, _ = r.srv.Client().Do(req)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), `"ada"`) {
			t.Errorf("the planted session ID %q signs in as the admin: %s", fixed, b)
		}
	}
}

func TestCSRF(t *testing.T) {
	r := newRig(t, false)
	c := r.client()
	if resp := c.signIn("otto", pw); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// The right token with its first character changed (to one it is not:
	// "x" + the rest was the right token one time in 64).
	wrong := "x" + c.csrf[1:]
	if c.csrf[0] == 'x' {
		wrong = "y" + c.csrf[1:]
	}
	for _, tt := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", nil, 403},
		{"wrong token", map[string]string{api.CSRFHeader: wrong}, 403},
		{"empty token", map[string]string{api.CSRFHeader: ""}, 403},
		{"right token", map[string]string{api.CSRFHeader: c.csrf}, 200},
	} {
		resp, body := c.do("POST", "/api/v1/alarms/ack", `{}`, tt.hdr)
		if resp.StatusCode != tt.want {
			t.Errorf("%s: %s %s, want %d", tt.name, resp.Status, body, tt.want)
		}
	}
	// Safe methods need no token; a key needs none (no cookie to forge).
	if resp, _ := c.do("GET", "/api/v1/alarms/ack", "", nil); resp.StatusCode != 200 {
		t.Errorf("GET without token: %s", resp.Status)
	}
	machine := r.client()
	if resp, _ := machine.do("POST", "/api/v1/admin/x", `{}`, map[string]string{"Authorization": "Bearer " + r.key}); resp.StatusCode != 200 {
		t.Errorf("key POST without token: %s", resp.Status)
	}
	// Sign-out changes state: it needs the token too.
	if resp, body := c.do("DELETE", "/api/v1/session", "", nil); resp.StatusCode != 403 {
		t.Errorf("sign-out without token: %s %s, want 403", resp.Status, body)
	}
	// A cross-site form post cannot sign in (login CSRF): no JSON type, or
	// another Origin.
	f := r.client()
	resp, _ := f.do("POST", "/api/v1/session", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if resp.StatusCode != 400 {
		t.Errorf("form sign-in: %s, want 400", resp.Status)
	}
	b := `{"name":"otto","password":"` + pw + `"}`
	resp, _ = f.do("POST", "/api/v1/session", b, map[string]string{"Origin": "https://evil.example"})
	if resp.StatusCode != 403 {
		t.Errorf("sign-in from another origin: %s, want 403", resp.Status)
	}
}

func TestRolesAndKeysOneCheck(t *testing.T) {
	r := newRig(t, false)
	for _, tt := range []struct {
		user       string
		ack, admin int
	}{{"vera", 403, 403}, {"otto", 200, 403}, {"ada", 200, 200}} {
		c := r.client()
		if resp := c.signIn(tt.user, pw); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		if got := c.post("/api/v1/alarms/ack"); got != tt.ack {
			t.Errorf("%s ack: %d, want %d", tt.user, got, tt.ack)
		}
		if got := c.post("/api/v1/admin/x"); got != tt.admin {
			t.Errorf("%s admin: %d, want %d", tt.user, got, tt.admin)
		}
	}
	// No credentials at all: 401 once accounts exist.
	if resp, _ := r.client().do("GET", "/api/v1/alarms/ack", "", nil); resp.StatusCode != 401 {
		t.Errorf("anonymous: %s, want 401", resp.Status)
	}
}

func TestBruteForceThrottled(t *testing.T) {
	r := newRig(t, false)
	c := r.client()
	for i := 0; i < 5; i++ {
		if resp := c.signIn("otto", "wrong password!"); resp.StatusCode != 401 {
			t.Fatalf("attempt %d: %s, want 401", i+1, resp.Status)
		}
	}
	// The account is throttled now, even with the right password.
	resp := c.signIn("otto", pw)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("6th attempt: %s Retry-After %q, want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	r.clock.add(time.Minute + time.Second)
	if resp := c.signIn("otto", pw); resp.StatusCode != 200 {
		t.Fatalf("after a minute: %s, want 200", resp.Status)
	}
	// Per address: 20 failures over many names (real or not) throttle the
	// address.
	for i := 0; i < 20; i++ {
		if resp := c.signIn("nobody"+strings.Repeat("x", i), "wrong password!"); resp.StatusCode != 401 {
			t.Fatalf("address attempt %d: %s", i+1, resp.Status)
		}
	}
	if resp := c.signIn("ada", pw); resp.StatusCode != 429 {
		t.Fatalf("address after 20 failures: %s, want 429", resp.Status)
	}
	// Every failure is on record.
	recs, err := r.j.Query(audit.Filter{Action: audit.ActionSignInFailed, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 25 {
		t.Errorf("%d failed sign-ins recorded, want at least 25", len(recs))
	}
}

func TestTimeoutsAndSignOutEverywhere(t *testing.T) {
	r := newRig(t, false)
	c := r.client()
	c.signIn("otto", pw)
	r.clock.add(29 * time.Minute)
	if got := c.post("/api/v1/alarms/ack"); got != 200 {
		t.Fatalf("after 29 min: %d", got)
	}
	r.clock.add(31 * time.Minute)
	if got := c.post("/api/v1/alarms/ack"); got != 401 {
		t.Fatalf("after 31 idle minutes: %d, want 401", got)
	}
	// Absolute: used every 20 minutes, the session still ends at 12 h.
	c.signIn("otto", pw)
	for i := 0; i < 35; i++ {
		r.clock.add(20 * time.Minute)
		if got := c.post("/api/v1/alarms/ack"); got != 200 {
			t.Fatalf("used every 20 min, at %d min: %d", (i+1)*20, got)
		}
	}
	r.clock.add(21 * time.Minute)
	if got := c.post("/api/v1/alarms/ack"); got != 401 {
		t.Fatalf("after 12 h: %d, want 401", got)
	}
	// Sign-out everywhere ends the other browsers' sessions.
	a, b := r.client(), r.client()
	a.signIn("otto", pw)
	b.signIn("otto", pw)
	resp, body := a.do("DELETE", "/api/v1/session?everywhere=1", "", map[string]string{api.CSRFHeader: a.csrf})
	if resp.StatusCode != 200 || !strings.Contains(body, `"ended":2`) {
		t.Fatalf("sign out everywhere: %s %s", resp.Status, body)
	}
	if got := b.post("/api/v1/alarms/ack"); got != 401 {
		t.Errorf("other browser after sign-out everywhere: %d, want 401", got)
	}
	// A disabled account's sessions end at once.
	c = r.client()
	c.signIn("otto", pw)
	dis := true
	if _, err := r.mgr.acc.Update("otto", Change{Disabled: &dis}); err != nil {
		t.Fatal(err)
	}
	r.clock.add(2 * time.Second) // past the re-read interval
	if got := c.post("/api/v1/alarms/ack"); got != 401 {
		t.Errorf("disabled account: %d, want 401", got)
	}
	if resp := c.signIn("otto", pw); resp.StatusCode != 401 {
		t.Errorf("disabled account signs in: %s", resp.Status)
	}
}

func TestSetupLinkOnce(t *testing.T) {
	dir := t.TempDir()
	acc, _ := OpenAccounts(dir)
	mgr, err := NewManager(acc, DefaultOptions(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	auth, _ := api.NewAuth(nil, nil)
	auth.SetSessions(mgr)
	mux := http.NewServeMux()
	mgr.Mount(mux)
	srv := httptest.NewServer(auth.Wrap(mux))
	defer srv.Close()
	tok := mgr.SetupToken()
	if tok == "" {
		t.Fatal("no set-up token without accounts")
	}
	post := func(token, name string) int {
		b, _ := json.Marshal(map[string]string{"token": token, "name": name, "password": pw})
		resp, err := http.Post(srv.URL+"/api/v1/setup", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("wrong", "eve"); got != 403 {
		t.Errorf("wrong token: %d", got)
	}
	if got := post(tok, "ada"); got != 200 {
		t.Fatalf("set-up: %d", got)
	}
	if got := post(tok, "eve"); got != 403 {
		t.Errorf("token used twice: %d, want 403", got)
	}
	if mgr.SetupToken() != "" {
		t.Error("a set-up token is made while an account exists")
	}
	a, err := acc.Get("ada")
	if err != nil || a.Role != RoleAdmin {
		t.Errorf("first account %+v %v, want an admin", a, err)
	}
}

func TestPassword(t *testing.T) {
	h := HashPassword(pw)
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q", h)
	}
	if h == HashPassword(pw) {
		t.Error("two hashes of one password are equal: no salt")
	}
	for _, tt := range []struct {
		hash, pw string
		ok       bool
		err      bool
	}{
		{h, pw, true, false},
		{h, pw + " ", false, false},
		{"$argon2i$v=19$m=8,t=1,p=1$AAAA$AAAA", pw, false, true},
		{"$argon2id$v=19$m=99999999,t=1,p=1$AAAA$AAAA", pw, false, true},
		{"plain", pw, false, true},
	} {
		ok, err := VerifyPassword(tt.hash, tt.pw)
		if ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("VerifyPassword(%.30q): %v %v, want %v err %v", tt.hash, ok, err, tt.ok, tt.err)
		}
	}
	if CheckPassword("short") == nil || CheckPassword(strings.Repeat("x", MaxPassword+1)) == nil {
		t.Error("CheckPassword accepts a bad length")
	}
}

func TestAccountsFile(t *testing.T) {
	dir := t.TempDir()
	acc, _ := OpenAccounts(dir)
	if err := acc.Add("otto", RoleOperator, pw, false); err == nil {
		t.Error("first account not an admin: accepted")
	}
	if err := acc.Add("ada", RoleAdmin, pw, false); err != nil {
		t.Fatal(err)
	}
	if err := acc.Add("ada", RoleViewer, pw, false); err == nil {
		t.Error("name used twice: accepted")
	}
	if err := acc.Add("bad name", RoleViewer, pw, false); err == nil {
		t.Error("bad name: accepted")
	}
	viewer := RoleViewer
	if _, err := acc.Update("ada", Change{Role: &viewer}); err == nil {
		t.Error("the last admin lost the role")
	}
	// A flipped byte is found.
	path := acc.Path()
	buf, _ := os.ReadFile(path)
	buf[20] ^= 1
	os.WriteFile(path, buf, 0o600)
	if _, err := acc.List(); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("corrupt file read: %v", err)
	}
}

func TestMatchTags(t *testing.T) {
	pats := []string{"boiler.*", "!boiler.safety.*", "pump1.speed"}
	for tag, want := range map[string]bool{
		"boiler.setpoint": true, "boiler.zone.a.sp": true, "boiler.safety.trip": false,
		"turbine.speed": false, "pump1.speed": true, "pump1.speedx": false,
	} {
		if got := api.MatchTags(pats, tag); got != want {
			t.Errorf("MatchTags(%q): %v, want %v", tag, got, want)
		}
	}
	p := api.Principal{Perms: RoleViewer.Perms(), Tags: []string{"*"}}
	if p.MayWrite("boiler.setpoint") {
		t.Error("a viewer may write")
	}
}

// BenchmarkCheck measures the one permission check of a request that
// carries a session cookie, beside one that carries an API key (the
// reference), through api.Auth to a handler that does nothing.
// Run: go test -run NONE -bench Check ./internal/users/
func BenchmarkCheck(b *testing.B) {
	r := newRig(b, false)
	c := r.client()
	c.signIn("otto", pw)
	u, _ := url.Parse(r.srv.URL)
	cookie := c.hc.Jar.Cookies(u)[0]
	auth, _ := api.NewAuth(nil, nil)
	_, hash := api.GenerateKey()
	plain, hash2 := api.GenerateKey()
	auth.SetKeys([]api.Key{{Name: "x", Hash: hash, Scope: api.ScopeRead}, {Name: "robot", Hash: hash2, Scope: api.ScopeRead}})
	auth.SetSessions(r.mgr)
	h := auth.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tt := range []struct {
		name string
		set  func(*http.Request)
	}{
		{"session", func(q *http.Request) { q.AddCookie(cookie) }},
		{"key", func(q *http.Request) { q.Header.Set("Authorization", "Bearer "+plain) }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/v1/latest", nil)
			tt.set(req)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				w.Code = 0
				h.ServeHTTP(w, req)
			}
			if w.Code != 0 && w.Code != 200 {
				b.Fatalf("status %d", w.Code)
			}
		})
	}
}
