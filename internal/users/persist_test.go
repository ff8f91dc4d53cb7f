package users

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSessionsSurviveRestart: a session opened before a restart (a new
// Manager on the same folder) still signs its person in, with the same
// CSRF token; the file holds no cookie; a signed-out, an idle-expired, a
// too-old session and one of a disabled account stay ended; a damaged
// file signs everybody out without stopping the start.
func TestSessionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	acc, err := OpenAccounts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.Add("ada", RoleAdmin, pw, false); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"otto", "olga", "oscar", "ida"} {
		if err := acc.Add(n, RoleOperator, pw, false); err != nil {
			t.Fatal(err)
		}
	}
	c := &clock{t: time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)}
	o := DefaultOptions()
	o.Now = c.now
	start := func() *Manager {
		m, err := NewManager(acc, o, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := start()
	cookies := map[string]string{}
	csrf := map[string]string{}
	for _, n := range []string{"otto", "olga", "oscar", "ida"} {
		ck, cs, _, err := m.signIn(n, pw, "127.0.0.1", "")
		if err != nil {
			t.Fatal(err)
		}
		cookies[n], csrf[n] = ck, cs
	}
	req := func(n string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: cookies[n]})
		return r
	}
	b, err := os.ReadFile(filepath.Join(dir, Dir, sessionsFile))
	if err != nil {
		t.Fatal(err)
	}
	for n, ck := range cookies {
		if strings.Contains(string(b), ck) {
			t.Fatalf("the sessions file holds %s's cookie", n)
		}
	}
	m.EndSession(sessionKey(cookies["olga"]), false) // signs out
	if _, err := acc.Update("ida", Change{Disabled: ptrBool(true)}); err != nil {
		t.Fatal(err)
	}
	c.add(20 * time.Minute)
	if _, ok := m.Session(req("otto")); !ok { // used: otto stays within the idle timeout
		t.Fatal("otto's session ended before the restart")
	}
	c.add(2 * time.Minute)
	m.Session(req("otto"))  // a use within usedPersistEvery of the last write may not be written
	c.add(15 * time.Minute) // oscar idle for 37 min: over 30
	m2 := start()
	p, ok := m2.Session(req("otto"))
	if !ok || p.Name != "otto" || p.CSRF != csrf["otto"] || p.Role != "operator" {
		t.Fatalf("after the restart otto's session: %v %+v", ok, p)
	}
	for _, n := range []string{"olga", "oscar", "ida"} {
		if _, ok := m2.Session(req(n)); ok {
			t.Errorf("%s's ended session came back after the restart", n)
		}
	}
	// The absolute age holds across restarts.
	for range 24 {
		c.add(29 * time.Minute)
		m2.Session(req("otto"))
	}
	if _, ok := start().Session(req("otto")); ok {
		t.Error("a session older than MaxAge came back after a restart")
	}
	os.WriteFile(filepath.Join(dir, Dir, sessionsFile), []byte("{not json"), 0o600)
	if _, err := NewManager(acc, o, nil, nil); err != nil {
		t.Fatalf("a damaged sessions file stops the start: %v", err)
	}
}

func ptrBool(b bool) *bool { return &b }
