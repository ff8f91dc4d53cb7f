package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/agent"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
)

// TestServeRoutes runs `pith serve` in-process with an API key and checks
// that every part answers on its path: the native API, the compatibility
// inputs and queries, diagnostics and the dashboard, behind the key.
func TestServeRoutes(t *testing.T) {
	plain, hash := api.GenerateKey()
	cfg := config.Default()
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Keys = []config.APIKey{{Name: "test", Hash: hash, Scope: "admin"}}
	cfg.Log.Level = "warn"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, context.Background(), cfg)
	base := srv.URL
	do := func(method, path, body string, key bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if key {
			req.Header.Set("Authorization", "Bearer "+plain)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do("GET", "/api/v1/tags", "", false); code != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", code)
	}
	// The dashboard's pages load without a key (they fetch data with it).
	if code, body := do("GET", "/", "", false); code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("dashboard without a key: %d", code)
	}
	now := time.Now().UnixMilli()
	lines := "boiler,room=b temp=21.5 " + itoa(now) + "000000\n"
	if code, body := do("POST", "/write?db=x", lines, true); code != http.StatusNoContent {
		t.Errorf("line protocol write: %d %s", code, body)
	}
	if code, body := do("POST", "/api/v1/import", "site.a,"+itoa(now)+",1.5\n", true); code != 200 {
		t.Errorf("import: %d %s", code, body)
	}
	if code, body := do("POST", "/api/v1/events", `{"name":"door.open","source":{"device":"d1"}}`, true); code != 200 || !strings.Contains(body, `"accepted":1`) {
		t.Errorf("event post: %d %s", code, body)
	}
	checks := []struct{ path, want string }{
		{"/api/v1/events?limit=10", "door.open"},
		{"/api/v1/latest", `"site.a"`},
		{"/api/v1/tags", `boiler.b.temp`},
		{"/api/v1/data?tag=site.a&from=0&to=" + itoa(now+1) + "&points=1&agg=max", `1.5`},
		{"/api/v1/query?query=site_a&time=" + itoa(now/1000), `"success"`},
		{"/api/v1/status/buildinfo", `"success"`},
		{"/metrics", "pith_"},
		{"/-/healthy", ""},
		{"/", "<html"},
		{"/api/v1/alarms", `"enabled":false`}, // [alarms] off: the dashboard stops asking
	}
	for _, c := range checks {
		code, body := do("GET", c.path, "", true)
		if code != 200 || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %.200s (want 200 containing %q)", c.path, code, body, c.want)
		}
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// testServer is `pith serve` running in-process for a test.
type testServer struct {
	URL   string // http://host:port
	Plant *plant.Plant
	stop  func() error
}

// startServe runs `pith serve` with cfg under ctx and returns once it
// serves; the test fails when it does
// not come up. The server stops at Stop or at the end of the test, which
// then fails if serve returned an error.
func startServe(t testing.TB, ctx context.Context, cfg *config.Config) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	type up struct {
		addr string
		p    *plant.Plant
	}
	upc := make(chan up, 1)
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Options{Config: cfg, Logger: agent.NewLogger("warn"),
			Ready: func(addr string, p *plant.Plant) { upc <- up{addr, p} }})
	}()
	s := &testServer{}
	select {
	case u := <-upc:
		s.URL, s.Plant = "http://"+u.addr, u.p
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	var once sync.Once
	var err error
	s.stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// Stop stops the server and returns its error.
func (s *testServer) Stop() error { return s.stop() }
