package agent

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
)

// TestReloadConfig runs serve from a config file, changes the file and
// reloads it by API and by SIGHUP: a station added, a key replaced, a bad
// file refused with the running config kept.
func TestReloadConfig(t *testing.T) {
	dev := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0", HoldingRegisters: 100})
	da, err := dev.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	_ = dev.Bank().SetRegisters(modbus.HoldingRegisters, 5, 42)

	dir := t.TempDir()
	path := filepath.Join(dir, "pith.toml")
	key1, hash1 := api.GenerateKey()
	key2, hash2 := api.GenerateKey()
	base := fmt.Sprintf(`
[log]
level = "warn"
[http]
listen = "127.0.0.1:0"
keys = [ { name = "%%s", hash = "%%s", scope = "admin" } ]
[store]
dir = %q
`, filepath.Join(dir, "data"))
	station := fmt.Sprintf(`
[[modbus.client]]
name = "plc"
url = "tcp://%s"
period = "50ms"
tags = [ { name = "plc.v", register = "holding:5", type = "uint16" } ]
`, da)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf(base, "one", hash1))
	cfg, err := config.LoadFor(path, "", "")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, withConfigLoader(context.Background(), func() (*config.Config, error) { return config.LoadFor(path, "", "") }), cfg)
	url, p := srv.URL, srv.Plant
	do := func(method, path, key string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// A station and a second key, by API.
	write(fmt.Sprintf(base, "two", hash2) + station)
	if code, body := do("POST", "/api/v1/admin/reload", key1); code != 200 || !strings.Contains(body, `"acquisition_restarted":true`) {
		t.Fatalf("reload: %d %s", code, body)
	}
	if code, _ := do("GET", "/api/v1/tags", key1); code != http.StatusUnauthorized {
		t.Errorf("old key after reload: %d, want 401", code)
	}
	waitUntil(t, "plc.v = 42", func() bool {
		v, err := p.Table().Latest("plc.v")
		return err == nil && v[0].Has && v[0].V == 42
	})

	// A broken file is refused; the running config stays.
	write("[http]\nlisten = 5\n")
	if code, body := do("POST", "/api/v1/admin/reload", key2); code != 400 || !strings.Contains(body, "running config kept") {
		t.Fatalf("bad reload: %d %s", code, body)
	}
	if code, _ := do("GET", "/api/v1/tags", key2); code != 200 {
		t.Errorf("key after refused reload: %d, want 200", code)
	}

	// SIGHUP applies the first key again.
	write(fmt.Sprintf(base, "one", hash1) + station)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "key one accepted after SIGHUP", func() bool { c, _ := do("GET", "/api/v1/tags", key1); return c == 200 })

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReloadForwarders adds, changes and removes a forwarder by reload:
// each upstream (a fake Pith import endpoint) gets the values of the
// time its forwarder ran.
func TestReloadForwarders(t *testing.T) {
	type upstream struct {
		srv  *httptest.Server
		rows atomic.Int64
	}
	newUp := func() *upstream {
		u := &upstream{}
		u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := io.Reader(r.Body)
			if r.Header.Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(r.Body)
				if err != nil {
					http.Error(w, err.Error(), 400)
					return
				}
				body = zr
			}
			b, _ := io.ReadAll(body)
			n := strings.Count(string(b), "demo.v,")
			u.rows.Add(int64(n))
			fmt.Fprintf(w, `{"points":%d}`, n)
		}))
		t.Cleanup(u.srv.Close)
		return u
	}
	a, b := newUp(), newUp()
	dir := t.TempDir()
	path := filepath.Join(dir, "pith.toml")
	base := fmt.Sprintf("[log]\nlevel = \"warn\"\n[http]\nlisten = \"127.0.0.1:0\"\n[store]\ndir = %q\n", filepath.Join(dir, "data"))
	fwd := func(url string) string {
		return fmt.Sprintf("[[forward.http]]\nname = \"up\"\nurl = %q\n", url)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(base)
	cfg, err := config.LoadFor(path, "", "")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, withConfigLoader(context.Background(), func() (*config.Config, error) { return config.LoadFor(path, "", "") }), cfg)
	url, p := srv.URL, srv.Plant
	reload := func() {
		t.Helper()
		resp, err := http.Post(url+"/api/v1/admin/reload", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("reload: %d %s", resp.StatusCode, body)
		}
	}
	v := 0.0
	t0 := time.Now().UnixMilli()
	put := func(n int) {
		t.Helper()
		for range n {
			v++
			// One millisecond apart: each value is a sample of its own.
			if _, err := p.Table().UpdatePoints([]model.Point{{Tag: "demo.v", T: t0 + int64(v), V: v}}, true, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}

	put(3) // no forwarder yet
	// A forwarder added by a reload forwards what the store commits from
	// then on: wait until these are stored (the archive writes behind the
	// table).
	stored := &instance{base: url}
	waitUntil(t, "3 values stored", func() bool { return stored.count(t, "demo.v", t0, t0+1000) == 3 })
	write(base + fwd(a.srv.URL))
	reload()
	put(5)
	waitUntil(t, "5 values at a", func() bool { return a.rows.Load() >= 5 })

	write(base + fwd(b.srv.URL)) // changed: same queue, new upstream
	reload()
	put(7)
	waitUntil(t, "7 values at b", func() bool { return b.rows.Load() >= 7 })

	cursor := filepath.Join(dir, "data", "followers", "forward.up")
	if _, err := os.Stat(cursor); err != nil {
		t.Errorf("changed forwarder's follower cursor: %v", err)
	}

	write(base) // removed
	reload()
	if _, err := os.Stat(cursor); !os.IsNotExist(err) {
		t.Errorf("removed forwarder's follower cursor still there (%v): it holds the WAL", err)
	}
	before := b.rows.Load()
	put(4)
	time.Sleep(300 * time.Millisecond)
	if got := b.rows.Load(); got != before {
		t.Errorf("removed forwarder still sent: %d rows, had %d", got, before)
	}
	if got := a.rows.Load(); got != 5 {
		t.Errorf("first upstream got %d rows, want the 5 of its time", got)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
}
