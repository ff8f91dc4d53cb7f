package agent

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
)

// reloadRig is a running agent, reloadable from a config file, with the
// pieces a reload test changes: a Modbus device for a new station, two
// keys and an HTTP upstream counting what a forwarder sends it.
type reloadRig struct {
	t          *testing.T
	a          *Agent
	url        string
	dir, path  string
	dev        string // the device's address
	key1, key2 string
	hash1      string
	hash2      string
	up         *httptest.Server
	rows       atomic.Int64 // values the upstream got
	v          float64
}

// base is the running config: key one, forwarder "up", alarm a1.
func (r *reloadRig) base(key, hash string) string {
	return fmt.Sprintf(`
[log]
level = "error"
[http]
listen = "127.0.0.1:0"
keys = [ { name = %q, hash = %q, scope = "admin" } ]
[store]
dir = %q
[[forward.http]]
name = "up"
url = %q
[alarms]
enabled = true
[[alarms.alarm]]
name = "a1"
type = "hi"
tag = "demo.v"
limit = 1e9
`, key, hash, filepath.Join(r.dir, "data"), r.up.URL)
}

// next is base with key two, a station polling the device and a second
// alarm: every reloadable part changes.
func (r *reloadRig) next() string {
	return r.base("two", r.hash2) + fmt.Sprintf(`
[[alarms.alarm]]
name = "a2"
type = "hi"
tag = "demo.v"
limit = 1e9

[[modbus.client]]
name = "plc"
url = "tcp://%s"
period = "50ms"
tags = [ { name = "plc.v", register = "holding:5", type = "uint16" } ]
`, r.dev)
}

func newReloadRig(t *testing.T) *reloadRig {
	r := &reloadRig{t: t, dir: t.TempDir()}
	dev := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0", HoldingRegisters: 100})
	da, err := dev.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	_ = dev.Bank().SetRegisters(modbus.HoldingRegisters, 5, 42)
	r.dev = da.String()
	r.key1, r.hash1 = api.GenerateKey()
	r.key2, r.hash2 = api.GenerateKey()
	r.up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body := io.Reader(req.Body)
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		n := strings.Count(string(b), "demo.v,")
		r.rows.Add(int64(n))
		fmt.Fprintf(w, `{"points":%d}`, n)
	}))
	t.Cleanup(r.up.Close)
	r.path = filepath.Join(r.dir, "pith.toml")
	r.write(r.base("one", r.hash1))
	cfg, err := config.LoadFor(r.path, "", "")
	if err != nil {
		t.Fatal(err)
	}
	r.a = New(Options{Config: cfg, Logger: NewLogger("error"),
		Load: func() (*config.Config, error) { return config.LoadFor(r.path, "", "") }})
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.a.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); r.a.Stop() })
	r.url = "http://" + r.a.http.addr
	return r
}

func (r *reloadRig) write(s string) {
	r.t.Helper()
	if err := os.WriteFile(r.path, []byte(s), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *reloadRig) do(method, path, key string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(method, r.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// put writes n values of demo.v into the tag table, as acquisition does.
func (r *reloadRig) put(n int) {
	r.t.Helper()
	for range n {
		r.v++
		pts := []model.Point{{Tag: "demo.v", T: time.Now().UnixMilli(), V: r.v}}
		if _, err := r.a.http.plant.p.Table().UpdatePoints(pts, true, "test"); err != nil {
			r.t.Fatal(err)
		}
	}
}

// alarms returns how many alarms the engine runs.
func (r *reloadRig) alarms() int { return r.a.http.automation.alarms.Stats().Alarms }

// checkOldConfig fails the test unless only the running config is in
// force: key one accepted and key two not, no station polling, alarm a1
// alone, and forwarder "up" still sending.
func (r *reloadRig) checkOldConfig() {
	r.t.Helper()
	if code, _ := r.do("GET", "/api/v1/tags", r.key2); code != http.StatusUnauthorized {
		r.t.Errorf("new key after a refused reload: %d, want 401", code)
	}
	if code, _ := r.do("GET", "/api/v1/tags", r.key1); code != http.StatusOK {
		r.t.Errorf("old key after a refused reload: %d, want 200", code)
	}
	time.Sleep(200 * time.Millisecond) // the new station polls every 50 ms
	if v, err := r.a.http.plant.p.Table().Latest("plc.v"); err == nil && v[0].Has {
		r.t.Errorf("the new station polled after a refused reload: plc.v = %v", v[0].V)
	}
	if got := r.alarms(); got != 1 {
		r.t.Errorf("alarms after a refused reload: %d, want 1", got)
	}
	before := r.rows.Load()
	r.put(3)
	waitUntil(r.t, "old forwarder still sending", func() bool { return r.rows.Load() >= before+3 })
}

// checkReloadRefused reloads and wants the running config kept.
func (r *reloadRig) checkReloadRefused(want string) {
	r.t.Helper()
	code, body := r.do("POST", "/api/v1/admin/reload", r.key1)
	if code != http.StatusBadRequest || !strings.Contains(body, "running config kept") || !strings.Contains(body, want) {
		r.t.Fatalf("reload: %d %s, want 400 refused with %q", code, body, want)
	}
	r.checkOldConfig()
}

// checkReloadApplies reloads the good next config and wants all of it in
// force: the refusals above were not because the config was bad.
func (r *reloadRig) checkReloadApplies() {
	r.t.Helper()
	r.write(r.next())
	if code, body := r.do("POST", "/api/v1/admin/reload", r.key1); code != http.StatusOK {
		r.t.Fatalf("good reload: %d %s", code, body)
	}
	if code, _ := r.do("GET", "/api/v1/tags", r.key2); code != http.StatusOK {
		r.t.Errorf("new key after reload: %d, want 200", code)
	}
	waitUntil(r.t, "plc.v = 42", func() bool {
		v, err := r.a.http.plant.p.Table().Latest("plc.v")
		return err == nil && v[0].Has && v[0].V == 42
	})
	if got := r.alarms(); got != 3 { // a1, a2 and the station's comm alarm
		r.t.Errorf("alarms after reload: %d, want 3", got)
	}
}

// TestReloadRefusedForwarderAppliesNothing reloads configs that pass
// `pith check-config` but whose new forwarder cannot start: its database
// unreachable, or its store follower's cursor file blocked by a directory.
// The
// reload is refused and nothing of the new config is in force.
func TestReloadRefusedForwarderAppliesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, forward, want string
		setup               func(r *reloadRig)
	}{
		{
			name:    "unreachable postgres",
			forward: "[[forward.postgres]]\nname = \"pg\"\nurl = \"postgres://postgres@127.0.0.1:1/test?connect_timeout=2\"\ntable = \"pith_reload\"\n",
			want:    "forward pg",
		},
		{
			name:    "follower cursor blocked",
			forward: "[[forward.http]]\nname = \"blocked\"\nurl = \"http://127.0.0.1:1/\"\n",
			want:    "forward blocked",
			setup: func(r *reloadRig) {
				if err := os.MkdirAll(filepath.Join(r.dir, "data", "followers", "forward.blocked", "x"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReloadRig(t)
			r.put(2)
			waitUntil(t, "forwarder up running", func() bool { return r.rows.Load() >= 2 })
			if tc.setup != nil {
				tc.setup(r)
			}
			next := r.next() + tc.forward
			if _, err := config.Parse([]byte(next)); err != nil { // what check-config checks
				t.Fatalf("the refused config must be valid: %v", err)
			}
			r.write(next)
			r.checkReloadRefused(tc.want)
			r.checkReloadApplies()
		})
	}
}

// failingPart makes a reloadable part's Prepare fail after the real one
// succeeded (which it aborts), as if the part had found a problem.
type failingPart struct {
	Reloadable
	prepared, aborted atomic.Int64
}

var errInjected = errors.New("injected failure")

func (f *failingPart) Prepare(cfg *config.Config) (Change, error) {
	ch, err := f.Reloadable.Prepare(cfg)
	if err != nil {
		return nil, err
	}
	f.prepared.Add(1)
	ch.Abort()
	f.aborted.Add(1)
	return nil, errInjected
}

// TestReloadFailureInEachPartAppliesNothing injects a failure into the
// Prepare of each reloadable part in turn, the others preparing real
// changes: the reload is refused and everything stays as it was.
func TestReloadFailureInEachPartAppliesNothing(t *testing.T) {
	r := newReloadRig(t)
	var names []string
	for _, p := range r.a.reloadable {
		names = append(names, p.Name())
	}
	if want := "users keys plant automation forwarders sparkplug"; strings.Join(names, " ") != want {
		t.Fatalf("reloadable parts %q, want %q", names, want)
	}
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			r.t = t
			real := r.a.reloadable[i]
			fp := &failingPart{Reloadable: real}
			r.a.reloadable[i] = fp
			defer func() { r.a.reloadable[i] = real }()
			// A new forwarder too, so that the forwarders have something
			// to open and abort.
			r.write(r.next() + fmt.Sprintf("[[forward.http]]\nname = \"up2\"\nurl = %q\n", r.up.URL))
			r.checkReloadRefused(errInjected.Error())
			if fp.prepared.Load() != 1 || fp.aborted.Load() != 1 {
				t.Errorf("%s prepared %d and aborted %d times, want 1", name, fp.prepared.Load(), fp.aborted.Load())
			}
			if v, err := r.a.http.plant.p.Table().Latest("pith.sys.forward.up2.backlog"); err == nil && v[0].Has {
				t.Error("the new forwarder ran after a refused reload")
			}
		})
	}
	r.t = t
	r.checkReloadApplies()
}
