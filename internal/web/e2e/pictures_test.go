package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/agent"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
)

// hostileSVG is written into the data directory behind Pith's back (so it
// never went through the upload path): the page must still render it
// inert, sanitised when served and fenced by the page's policy.
const hostileSVG = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" onload="window.pwned='onload'" viewBox="0 0 200 100">
<script>window.pwned='script'</script>
<rect id="r" width="50" height="50" onclick="window.pwned='onclick'" onmouseover="window.pwned='hover'" style="fill:url(PROBE/css)"/>
<foreignObject width="100" height="100"><body xmlns="http://www.w3.org/1999/xhtml"><img src="PROBE/img" onerror="window.pwned='onerror'"/><iframe src="javascript:parent.pwned='iframe'"></iframe></body></foreignObject>
<use xlink:href="PROBE/use.svg#x"/>
<image href="PROBE/image.png" width="10" height="10"/>
<a xlink:href="javascript:window.pwned='link'"><text id="t" x="10" y="80">click me</text></a>
<animate attributeName="onload" to="window.pwned='animate'"/>
<style>@import url(PROBE/import.css); rect { fill: red }</style>
</svg>`

// runScript runs a node script against base and reports its JSON lines as
// test results; it returns the metrics of each result by name.
func runScript(t *testing.T, ctx context.Context, node, script string, env []string, want int) map[string]map[string]float64 {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	metrics := map[string]map[string]float64{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Logf("%s: %s", script, sc.Text())
			continue
		}
		metrics[r.Name] = r.Metrics
		status := "ok"
		if !r.OK {
			status = "FAIL"
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
		t.Logf("%-4s %-58s %s", status, r.Name, r.Detail)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%s: %v\n%s", script, err, stderr.String())
	}
	if len(metrics) < want {
		t.Errorf("%s reported %d results, want %d\n%s", script, len(metrics), want, stderr.String())
	}
	return metrics
}

// TestBrowserPictures runs pictures.mjs against a whole running Pith: a
// Modbus server publishing two setpoints, a station polling them,
// operators allowed to write boiler.* only, a picture binding both, and a
// hostile picture planted in the data directory.
//
// Run: cd internal/web/e2e && npm ci && go test -v -run BrowserPictures .
func TestBrowserPictures(t *testing.T) {
	node, chromium := tools(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// A probe server: any request reaching it means the hostile picture
	// loaded something.
	probeHits := make(chan string, 16)
	probe := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { probeHits <- r.URL.Path })}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go probe.Serve(pl)
	defer probe.Close()
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
[users]
operator_tags = ["boiler.*"]
`, port, port)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	doc, _ := json.Marshal(map[string]any{"schema": 1, "id": "evil", "title": "Hostile", "version": 1,
		"svg":      strings.ReplaceAll(hostileSVG, "PROBE", "http://"+pl.Addr().String()),
		"bindings": []map[string]any{{"element": "t", "tag": "boiler.setpoint", "kind": "text"}}})
	os.MkdirAll(filepath.Join(cfg.Store.Dir, "pictures"), 0o755)
	if err := os.WriteFile(filepath.Join(cfg.Store.Dir, "pictures", "evil.json"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
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
	runScript(t, ctx, node, "pictures.mjs", []string{"PITH_URL=" + base, "PITH_SETUP_LINK=" + m[1], "PITH_CHROMIUM=" + chromium}, 9)
	select {
	case p := <-probeHits:
		t.Errorf("the hostile picture made the browser load %s", p)
	default:
	}
}

// TestBrowserPicturePerf measures the browser's CPU while a picture of
// 1,000 bound elements (1,000 tags) is updated twice a second through the
// live stream, against the same page with no value changing. The budget
// is 20% of one core. Long: set PITH_LONG=1.
//
// Run: cd internal/web/e2e && npm ci && PITH_LONG=1 go test -v -run BrowserPicturePerf .
func TestBrowserPicturePerf(t *testing.T) {
	if os.Getenv("PITH_LONG") == "" {
		t.Skip("a 50 s measurement; set PITH_LONG=1")
	}
	node, chromium := tools(t)
	// Relaxed durability: an import is answered from the WAL's buffer, so
	// the feed keeps its pace on a loaded machine (the picture, not the
	// disk, is measured).
	cfg, err := config.Parse([]byte("[store]\ndurability = \"relaxed\"\ncommit_interval = \"200ms\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	addr := make(chan string, 1)
	a := agent.New(agent.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Ready: func(ad string, _ *plant.Plant) { addr <- ad }})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	base := "http://" + <-addr

	const n = 1000
	var svg strings.Builder
	var binds []map[string]any
	svg.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 2000 1000">`)
	for i := range n {
		x, y := (i%40)*50, (i/40)*40
		id, tag := "e"+strconv.Itoa(i), fmt.Sprintf("perf.t%04d", i)
		switch i % 4 {
		case 0, 1:
			fmt.Fprintf(&svg, `<text id="%s" x="%d" y="%d" font-size="10">0</text>`, id, x, y+20)
			binds = append(binds, map[string]any{"element": id, "tag": tag, "kind": "text", "unit": "°C", "decimals": 1})
		case 2:
			fmt.Fprintf(&svg, `<rect id="%s" x="%d" y="%d" width="40" height="30" fill="#ccc"/>`, id, x, y)
			binds = append(binds, map[string]any{"element": id, "tag": tag, "kind": "fill",
				"states": []map[string]any{{"from": 0, "color": "#2a2"}, {"from": 50, "color": "#c22"}}})
		case 3:
			fmt.Fprintf(&svg, `<rect id="%s" x="%d" y="%d" width="40" height="30" fill="#48c"/>`, id, x, y)
			binds = append(binds, map[string]any{"element": id, "tag": tag, "kind": "level", "min": 0, "max": 100})
		}
	}
	svg.WriteString(`</svg>`)
	body, _ := json.Marshal(map[string]any{"id": "perf", "title": "1000 elements", "svg": svg.String(), "bindings": binds})
	resp, err := http.Post(base+"/api/v1/pictures", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create picture: %d", resp.StatusCode)
	}
	// feed writes every tag a new value, or (paused) the same ones again.
	var step, fed atomic.Int64
	feed := func(change bool) error {
		var b bytes.Buffer
		now := time.Now().UnixMilli()
		s := step.Load()
		if change {
			s = step.Add(1)
		}
		for i := range n {
			fmt.Fprintf(&b, "perf.t%04d,%d,%d.%d\n", i, now, (int(s)*7+i)%100, s%10)
		}
		r, err := http.Post(base+"/api/v1/import", "text/csv", &b)
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			return fmt.Errorf("import: %d", r.StatusCode)
		}
		fed.Add(1)
		return nil
	}
	if err := feed(true); err != nil {
		t.Fatal(err)
	}
	// The script asks for phases on stdin-less signals: it writes files.
	phase := filepath.Join(t.TempDir(), "phase")
	os.WriteFile(phase, []byte("idle"), 0o644)
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed() // before the agent stops
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-feedCtx.Done():
				return
			case <-tick.C:
				b, _ := os.ReadFile(phase)
				if string(b) == "busy" {
					// Not waiting for the answer keeps the pace on a loaded machine.
					go func() {
						if err := feed(true); err != nil && feedCtx.Err() == nil {
							t.Logf("feed: %v", err)
						}
					}()
				}
			}
		}
	}()
	start := time.Now()
	ms := runScript(t, ctx, node, "picture_perf.mjs", []string{"PITH_URL=" + base, "PITH_CHROMIUM=" + chromium, "PITH_PHASE=" + phase}, 3)
	t.Logf("imports of 1,000 values: %d in %s", fed.Load(), time.Since(start).Round(time.Second))
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("load average: %s", strings.TrimSpace(string(load)))
	for name, m := range ms {
		t.Logf("%s: %v", name, m)
	}
}
