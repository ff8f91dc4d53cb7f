package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/plant"
)

// httpc bounds every request of these tests, so that a stuck server fails
// the test instead of hanging it.
var httpc = &http.Client{Timeout: 15 * time.Second}

// testNATS returns PITH_TEST_NATS or skips.
func testNATS(t testing.TB) string {
	u := os.Getenv("PITH_TEST_NATS")
	if u == "" {
		testpeer.Missing(t, "PITH_TEST_NATS not set (e.g. nats://127.0.0.1:4222 with JetStream): central/forwarding test skipped")
	}
	return u
}

// testSiteName is a site name no other run uses, so that tests sharing
// the development server see only their own subjects.
func testSiteName(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano())
}

// fwdConfig is a quiet config serving on a free loopback port.
func fwdConfig(t testing.TB, site, dir string) *config.Config {
	cfg := config.Default()
	cfg.Site.Name = site
	cfg.Store.Dir = dir
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Events.Enabled = false
	cfg.Log.Level = "error" // retries during the outages are expected
	return cfg
}

// instance is one in-process `pith serve`.
type instance struct {
	base   string
	p      *plant.Plant
	cancel context.CancelFunc
	done   chan error
}

// startInstance runs serve with cfg until stop (or the test's end).
func startInstance(t testing.TB, cfg *config.Config) *instance {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		in.done <- serve(ctx, cfg, NewLogger(cfg.Log.Level), func(addr string, p *plant.Plant) {
			in.base, in.p = "http://"+addr, p
			close(ready)
		})
	}()
	select {
	case <-ready:
	case err := <-in.done:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	t.Cleanup(func() { in.stop(t) })
	return in
}

// stop ends serve and checks it returned cleanly; later calls do nothing.
// A serve that does not return within two minutes fails the test with
// every goroutine's stack, rather than hanging the test binary until its
// timeout.
func (in *instance) stop(t testing.TB) {
	t.Helper()
	if in.done == nil {
		return
	}
	in.cancel()
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(2 * time.Minute):
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("serve did not return within 2 minutes of its stop; goroutines:\n%s", buf)
	}
	in.done = nil
}

// update writes points into the instance's tag table, as acquisition does.
func (in *instance) update(t testing.TB, pts []model.Point) {
	t.Helper()
	if _, err := in.p.Table().UpdatePoints(pts, true, "test"); err != nil {
		t.Fatal(err)
	}
}

// importCSV posts CSV rows to /api/v1/import.
func (in *instance) importCSV(t testing.TB, body string) {
	t.Helper()
	resp, err := httpc.Post(in.base+"/api/v1/import", "text/csv", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("import: %d %s", resp.StatusCode, b)
	}
}

// count returns the number of samples of tag stored in [from, to), 0 for
// an unknown tag.
func (in *instance) count(t testing.TB, tag string, from, to int64) int {
	t.Helper()
	q := url.Values{"tag": {tag}, "from": {itoa(from)}, "to": {itoa(to)}, "points": {"1"}, "agg": {"count"}}
	resp, err := httpc.Get(in.base + "/api/v1/data?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0
	}
	var r struct {
		Points [][2]*float64 `json:"points"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("count %s: status %d, %v", tag, resp.StatusCode, err)
	}
	if len(r.Points) != 1 || r.Points[0][1] == nil {
		return 0
	}
	return int(*r.Points[0][1])
}

// latest returns the current value of tag at the instance, and whether it
// has one.
func (in *instance) latest(t testing.TB, tag string) (float64, bool) {
	t.Helper()
	resp, err := httpc.Get(in.base + "/api/v1/latest?tag=" + url.QueryEscape(tag))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Values []struct {
			Tag   string  `json:"tag"`
			Value float64 `json:"value"`
		} `json:"values"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&r) != nil {
		return 0, false
	}
	for _, v := range r.Values {
		if v.Tag == tag {
			return v.Value, true
		}
	}
	return 0, false
}

// retry runs call with a context of 15 s, up to 5 times while it times
// out, within ctx; any other error, or the fifth time-out, fails the test.
func retry(t testing.TB, ctx context.Context, what string, call func(context.Context) error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := call(cctx)
		cancel()
		if err == nil {
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) || attempt == 5 || ctx.Err() != nil {
			t.Fatalf("%s: %v (attempt %d)", what, err, attempt)
		}
		t.Logf("%s: %v; again", what, err)
	}
}

// eventually polls cond every 100 ms until it holds or d passed.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleteConsumer removes a durable consumer a test made on a shared server.
func deleteConsumer(t testing.TB, natsURL, durable string) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := js.DeleteConsumer(ctx, forward.DefaultNATSStream, durable); err != nil {
		t.Logf("delete consumer %s: %v", durable, err)
	}
}

// tcpProxy relays TCP to a server; the test cuts and restores it to play
// a network outage.
type tcpProxy struct {
	t      testing.TB
	addr   string // fixed listen address, kept across outages
	target string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
}

func newTCPProxy(t testing.TB, target string) *tcpProxy {
	p := &tcpProxy{t: t, addr: "127.0.0.1:0", target: target}
	p.up()
	p.addr = p.l.Addr().String()
	t.Cleanup(p.down)
	return p
}

// up listens again.
func (p *tcpProxy) up() {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.l != l { // cut while dialling
				p.mu.Unlock()
				c.Close()
				s.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
}

// down closes the listener and every relayed connection.
func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// hostPort returns the host:port of a nats:// URL.
func hostPort(t testing.TB, u string) string {
	x, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return x.Host
}
