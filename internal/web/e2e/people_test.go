package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/agent"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
)

// syncBuffer is a log sink read while the agent writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var setupLinkRE = regexp.MustCompile(`link="?(http://[^"\s]+)`)

// TestBrowserPeople runs people.mjs against a whole running Pith: a
// Modbus server publishing two setpoints, a station polling them, an alarm
// on one, operators allowed to write boiler.* only, and no account yet.
//
// Run: cd internal/web/e2e && npm ci && go test -v -run BrowserPeople .
func TestBrowserPeople(t *testing.T) {
	node, chromium := tools(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
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
period = "200ms"
tags = [
  { name = "boiler.setpoint", register = "holding:0", type = "float32", unit = "°C" },
  { name = "turbine.setpoint", register = "holding:2", type = "float32", unit = "rpm" },
]
[alarms]
enabled = true
[[alarms.alarm]]
name = "boiler.high"
type = "hi"
tag = "boiler.setpoint"
limit = 50.0
message = "boiler setpoint high"
[users]
operator_tags = ["boiler.*"]
`, port, port)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	addr := make(chan string, 1)
	a := agent.New(agent.Options{Config: cfg, Logger: log, Ready: func(ad string, _ *plant.Plant) { addr <- ad }})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	base := "http://" + <-addr
	m := setupLinkRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no set-up link in the log:\n%s", logs.String())
	}
	cmd := exec.CommandContext(ctx, node, "people.mjs")
	cmd.Env = append(os.Environ(), "PITH_URL="+base, "PITH_SETUP_LINK="+m[1], "PITH_CHROMIUM="+chromium)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	n := 0
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Logf("people.mjs: %s", sc.Text())
			continue
		}
		n++
		status := "ok"
		if !r.OK {
			status = "FAIL"
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
		t.Logf("%-4s %-58s %s", status, r.Name, r.Detail)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("people.mjs: %v\n%s", err, stderr.String())
	}
	if n < 9 {
		t.Errorf("people.mjs reported %d results, want 9\n%s", n, stderr.String())
	}
}
