package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
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
	cfg, err := loadConfig(path, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(withConfigLoader(context.Background(), func() (*config.Config, error) { return loadConfig(path, "", "") }))
	defer cancel()
	addrc := make(chan string, 1)
	pc := make(chan *plant.Plant, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, newLogger("warn"), func(addr string, p *plant.Plant) { addrc <- addr; pc <- p })
	}()
	var url string
	select {
	case a := <-addrc:
		url = "http://" + a
	case err := <-done:
		t.Fatal(err)
	}
	p := <-pc
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

	cancel()
	if err := <-done; err != nil {
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
