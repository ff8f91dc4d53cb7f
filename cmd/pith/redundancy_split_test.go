package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/testpeer"
)

// writeLog is the device's record of the control writes it received.
type writeLog struct {
	mu     sync.Mutex
	values []uint16
	at     []time.Time
}

func (l *writeLog) hook(w modbus.Write) error {
	if w.Area == modbus.HoldingRegisters && w.Address == 20 {
		l.mu.Lock()
		l.values = append(l.values, w.Register(0))
		l.at = append(l.at, time.Now())
		l.mu.Unlock()
	}
	return nil
}

// runs returns the writes as runs of one writer: [writer, count] pairs.
func (l *writeLog) runs() [][2]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][2]int
	for _, v := range l.values {
		if n := len(out); n > 0 && out[n-1][0] == int(v) {
			out[n-1][1]++
			continue
		}
		out = append(out, [2]int{int(v), 1})
	}
	return out
}

// TestRedundancySplits runs the pair with both boxes' HTTP clients
// writing to a device tag all the time (box a writes 1, box b writes 2;
// the standby refuses), and makes the active box lose its role at random:
// its connections to NATS stalled by a proxy (a split), the process
// stopped (SIGSTOP), or killed (SIGKILL and restart). The device's log of
// writes must show one writer at a time: the writers' runs are at most
// the handovers plus one. After the last event both archives hold the same
// counter samples. A handful of events by default, 50 with PITH_LONG=1.
func TestRedundancySplits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pith, splits, stops and kills it; skipped with -short")
	}
	natsBin := testpeer.NATSServer(t)
	bin := buildPith(t)
	events := 4
	if os.Getenv("PITH_LONG") == "1" {
		events = 50
	}
	cl := testpeer.StartNATSCluster(t, natsBin, 3)
	var wl writeLog
	srv := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0", HoldingRegisters: 32, InputRegisters: -1, Coils: -1, DiscreteInputs: -1, OnWrite: wl.hook})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dev := &counterDevice{srv: srv, addr: ln.Addr().String()}
	go srv.Serve(&counterListener{Listener: ln, d: dev})
	defer srv.Close()

	tmp := t.TempDir()
	site := fmt.Sprintf("rsp%d", time.Now().UnixNano()%1_000_000_000)
	const ttl, period = 2 * time.Second, 200 * time.Millisecond
	type splitBox struct {
		redundancyBox
		id      int
		proxies []*testpeer.Proxy
	}
	boxes := []*splitBox{{redundancyBox: redundancyBox{name: "a"}, id: 1}, {redundancyBox: redundancyBox{name: "b"}, id: 2}}
	for _, b := range boxes {
		var urls []string
		for i := range cl.Ports {
			px := testpeer.NewProxy(t, strings.TrimPrefix(cl.URL(i), "nats://"))
			b.proxies = append(b.proxies, px)
			urls = append(urls, px.URL())
		}
		b.cfg = filepath.Join(tmp, b.name+".toml")
		b.data = filepath.Join(tmp, b.name+"-data")
		writeFile(t, b.cfg, fmt.Sprintf(`[log]
level = "info"
[site]
name = %q
[redundancy]
group = %q
node = %q
nats = %q
lease_ttl = %q
[[modbus.client]]
name = "dev"
url = "tcp://%s"
unit = 1
period = %q
timeout = "500ms"
tags = [ { name = %q, register = "holding:0", type = "uint32", archive = "all" },
         { name = "mb.out", register = "holding:20", type = "uint16" } ]
`, site, site, b.name, strings.Join(urls, ","), ttl, dev.addr, period, crashCounterTag))
	}
	var mu sync.Mutex // guards the boxes' processes against the writers
	start := func(b *splitBox) {
		p := startPith(t, bin, b.data, b.cfg, filepath.Join(tmp, fmt.Sprintf("%s-%d.log", b.name, b.starts)))
		mu.Lock()
		b.p = p
		b.starts++
		mu.Unlock()
	}
	for _, b := range boxes {
		start(b)
	}
	defer func() {
		for _, b := range boxes {
			if b.p != nil {
				syscall.Kill(b.p.pid, syscall.SIGCONT)
				b.p.stop(t)
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, b := range boxes {
		wg.Add(1)
		go func() { // the box's writer: an operator hammering its dashboard
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				base := ""
				if b.p != nil {
					base = b.p.base
				}
				mu.Unlock()
				if base != "" {
					c, cancelReq := context.WithTimeout(ctx, time.Second)
					req, _ := newControlRequest(c, base, "mb.out", b.id)
					if resp, err := controlClient.Do(req); err == nil {
						resp.Body.Close()
					}
					cancelReq()
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	activeBox := func(within time.Duration, not *splitBox) *splitBox {
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			for _, b := range boxes {
				mu.Lock()
				p := b.p
				mu.Unlock()
				if b == not || p == nil {
					continue
				}
				if v, ok := redLatest(p.base, "pith.sys.redundancy.role"); ok && v == 1 {
					return b
				}
			}
		}
		return nil
	}
	act := activeBox(30*time.Second, nil)
	if act == nil {
		t.Fatal("no box active 30 s after start")
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 19))
	kinds := map[string]int{}
	for ev := range events {
		time.Sleep(time.Duration(1000+rnd.IntN(1500)) * time.Millisecond)
		kind := []string{"split", "sigstop", "kill"}[rnd.IntN(3)]
		kinds[kind]++
		hold := time.Duration(3000+rnd.IntN(3000)) * time.Millisecond
		switch kind {
		case "split":
			for _, px := range act.proxies {
				px.Cut()
			}
		case "sigstop":
			syscall.Kill(act.p.pid, syscall.SIGSTOP)
		case "kill":
			mu.Lock()
			p := act.p
			act.p = nil
			mu.Unlock()
			p.kill(t)
		}
		next := activeBox(10*time.Second, act)
		if next == nil {
			t.Fatalf("event %d (%s): the other box not active within 10 s", ev, kind)
		}
		time.Sleep(hold - min(hold, 3*time.Second))
		switch kind {
		case "split":
			for _, px := range act.proxies {
				px.Heal()
			}
		case "sigstop":
			syscall.Kill(act.p.pid, syscall.SIGCONT)
		case "kill":
			start(act)
		}
		act = next
	}
	time.Sleep(3 * time.Second)
	cancel()
	wg.Wait()
	runs := wl.runs()
	if len(runs) > events+1 {
		t.Errorf("the device saw %d runs of one writer for %d handovers: two writers at once (runs %v)", len(runs), events, runs)
	}
	if len(runs) < 2 {
		t.Errorf("the device saw %d runs of writes: the writers did not write (runs %v)", len(runs), runs)
	}
	var a, b map[int64]float64
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		a = rawSamples(t, boxes[0].p.base, crashCounterTag)
		b = rawSamples(t, boxes[1].p.base, crashCounterTag)
		if diff := sampleDiff(a, b); diff == "" {
			break
		} else if time.Now().After(end) {
			t.Fatalf("archives differ 60 s after the last event: %s", diff)
		}
	}
	t.Logf("%d events %v: the device saw %d runs of one writer (%d writes); both archives hold the same %d counter samples",
		events, kinds, len(runs), len(wl.values), len(a))
}

var controlClient = &http.Client{Timeout: 2 * time.Second}

// newControlRequest is POST /api/v1/control writing v to tag.
func newControlRequest(ctx context.Context, base, tag string, v int) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/control", strings.NewReader(fmt.Sprintf(`{"tag":%q,"value":%d}`, tag, v)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}
