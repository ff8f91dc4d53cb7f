package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/forward"
)

// The tags the forwarding crash test checks, as the edge names them.
const (
	crashCounterTag = "mb.counter" // a Modbus counter: every poll a new value
	crashPushTag    = "lp.v"       // line protocol pushes
)

// TestKillForwarding proves that nothing the edge's store holds is missing
// upstream, nor anything there twice: an edge pith (a real process) polls a
// Modbus counter that changes before every poll and takes line-protocol
// pushes, forwarding to PostgreSQL (through a proxy the test cuts and
// restores) and to NATS JetStream (the test's own nats-server, stopped and
// restarted), consumed by a central pith. The edge is killed with SIGKILL
// at random moments and restarted, the upstreams go away and come back at
// random. At the end every value of the edge's store is in PostgreSQL
// (one row per tag and time, same value), in the stream (every message id
// once) and in the central pith, and nothing is upstream that the edge
// does not hold. 100 cycles, 1,000 with PITH_LONG=1:
//
//	PITH_TEST_PG=postgres://postgres@127.0.0.1:5432/test go test -run KillForwarding -v ./cmd/pith/
func TestKillForwarding(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pith and kills it repeatedly; skipped with -short")
	}
	pgURL := os.Getenv("PITH_TEST_PG")
	if pgURL == "" {
		t.Skip("PITH_TEST_PG not set (e.g. postgres://postgres@127.0.0.1:5432/test): forwarding crash test skipped")
	}
	natsBin := natsServerBin(t)
	bin := buildPith(t)
	cycles := 100
	if os.Getenv("PITH_LONG") == "1" {
		cycles = 1000
	}
	tmp := t.TempDir()
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	site := fmt.Sprintf("crash%d", time.Now().UnixNano()%1_000_000_000)
	table := "pith_crash_" + site

	pu, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	px := newCutProxy(t, pu.Host)
	proxied := *pu
	proxied.Host = px.addr
	pg, err := pgx.Connect(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	defer pg.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)

	ns := startNATSServer(t, natsBin, filepath.Join(tmp, "nats"))
	defer ns.stop()
	// The stream's duplicate window is one second, not the forwarder's
	// ten minutes: a batch resent after a restart is past it, so only the
	// forwarder's read-back of what the stream holds keeps each message
	// id once.
	createShortWindowStream(t, ns.url)

	dev := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0", HoldingRegisters: 10})
	da, err := dev.Listen()
	if err != nil {
		t.Fatal(err)
	}
	devCtx, stopDev := context.WithCancel(context.Background())
	go func() { // a new value well before every poll
		var c uint32
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-devCtx.Done():
				return
			case <-tick.C:
				c++
				dev.Bank().SetRegisters(modbus.HoldingRegisters, 0, uint16(c>>16), uint16(c))
			}
		}
	}()
	defer dev.Close()
	defer stopDev()

	central := filepath.Join(tmp, "central.toml")
	writeFile(t, central, fmt.Sprintf("[log]\nlevel = \"warn\"\n[site]\nname = \"central\"\n[central]\nnats = %q\nsubjects = [\"pith.%s.samples\"]\ndurable = \"c%s\"\n", ns.url, site, site))
	cp := startPith(t, bin, filepath.Join(tmp, "central-data"), central, filepath.Join(tmp, "central.log"))
	defer cp.stop(t)

	edge := filepath.Join(tmp, "edge.toml")
	writeFile(t, edge, fmt.Sprintf(`[log]
level = "warn"
[site]
name = %q
[[modbus.client]]
name = "dev"
url = "tcp://%s"
unit = 1
period = "50ms"
timeout = "500ms"
tags = [ { name = %q, register = "holding:0", type = "uint32", archive = "all" } ]
[[forward.postgres]]
name = "db"
url = %q
table = %q
[[forward.nats]]
name = "bus"
url = %q
`, site, da, crashCounterTag, proxied.String(), table, ns.url))
	data := filepath.Join(tmp, "edge-data")

	var pushT atomic.Int64
	pushT.Store(time.Now().UnixMilli())
	var pgCuts, natsRestarts int
	for cycle := range cycles {
		ep := startPith(t, bin, data, edge, filepath.Join(tmp, fmt.Sprintf("edge-%d.log", cycle)))
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pushLines(ctx, ep.base, &pushT)
		}()
		// Cut or restore the upstreams at a random moment of the cycle.
		run := time.Duration(300+rnd.IntN(1500)) * time.Millisecond
		time.Sleep(run / 2)
		if rnd.IntN(3) == 0 {
			if px.isUp() {
				px.down()
				pgCuts++
			} else {
				px.up()
			}
		}
		if rnd.IntN(4) == 0 {
			ns.stop()
			ns.start(t)
			natsRestarts++
		}
		time.Sleep(run / 2)
		ep.kill(t)
		cancel()
		wg.Wait()
	}

	// The end: upstreams up, no new values; the edge drains its backlog.
	px.up()
	stopDev()
	dev.Close()
	ep := startPith(t, bin, data, edge, filepath.Join(tmp, "edge-final.log"))
	var want map[string]map[int64]float64
	drained := time.Now()
	for deadline := time.Now().Add(60 * time.Second); ; {
		want = map[string]map[int64]float64{}
		for _, tag := range []string{crashCounterTag, crashPushTag} {
			want[site+"."+tag] = rawSamples(t, ep.base, tag)
		}
		pgRows := pgSamples(t, pg, table, site)
		centralRows := map[string]map[int64]float64{}
		for tag := range want {
			centralRows[tag] = rawSamples(t, cp.base, tag)
		}
		if sameSamples(want, pgRows) == "" && sameSamples(want, centralRows) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("PostgreSQL: %s", sameSamples(want, pgRows))
			t.Errorf("central: %s", sameSamples(want, centralRows))
			t.Fatalf("upstreams not equal to the edge 60 s after the last restart\n%s", readLog(ep.log))
		}
		time.Sleep(500 * time.Millisecond)
	}
	drain := time.Since(drained)
	ep.stop(t)

	// Exactly once upstream: one row per (tag, ts) in PostgreSQL, one
	// message per id in the stream, and every point of the stream held by
	// the edge.
	var dupRows int
	if err := pg.QueryRow(context.Background(), "SELECT count(*) FROM (SELECT tag, ts FROM "+table+" GROUP BY tag, ts HAVING count(*) > 1) d").Scan(&dupRows); err != nil {
		t.Fatal(err)
	}
	if dupRows != 0 {
		t.Errorf("PostgreSQL holds %d (tag, ts) more than once", dupRows)
	}
	msgs, dupIDs, stray := streamCheck(t, ns.url, "pith."+site+".samples", site, want)
	if dupIDs != 0 || stray != "" {
		t.Errorf("stream: %d message ids more than once; %s", dupIDs, stray)
	}
	n := 0
	for _, s := range want {
		n += len(s)
	}
	t.Logf("%d cycles (SIGKILL each), %d PostgreSQL cuts, %d NATS restarts: the edge holds %d values; PostgreSQL, the stream (%d messages) and the central pith hold each once; drained %s after the last restart",
		cycles, pgCuts, natsRestarts, n, msgs, drain.Round(100*time.Millisecond))
	if n == 0 {
		t.Fatal("the edge stored nothing: the test proved nothing")
	}
}

// pushLines posts line-protocol points of crashPushTag, five a request at
// increasing times from *next, until ctx ends or the server is gone.
func pushLines(ctx context.Context, base string, next *atomic.Int64) {
	c := &http.Client{Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		var b bytes.Buffer
		for range 5 {
			ts := next.Add(1)
			fmt.Fprintf(&b, "lp v=%d %d\n", ts%1_000_000, ts)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/write?precision=ms", &b)
		resp, err := c.Do(req)
		if err != nil {
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		time.Sleep(10 * time.Millisecond)
	}
}

// rawSamples returns every stored sample of tag at the pith at base,
// read in pages of 100,000 samples.
func rawSamples(t *testing.T, base, tag string) map[int64]float64 {
	t.Helper()
	const page = 100000
	out := map[int64]float64{}
	from := int64(0)
	for {
		q := url.Values{"tag": {tag}, "from": {fmt.Sprint(from)}, "to": {fmt.Sprint(int64(1) << 50)}, "agg": {"raw"}, "points": {fmt.Sprint(page)}}
		resp, err := http.Get(base + "/api/v1/data?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return out
		}
		var r struct {
			Points [][2]float64 `json:"points"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("read %s: status %d, %v", tag, resp.StatusCode, err)
		}
		for _, p := range r.Points {
			out[int64(p[0])] = p[1]
		}
		if len(r.Points) < page {
			return out
		}
		from = int64(r.Points[len(r.Points)-1][0]) + 1
	}
}

// pgSamples returns the rows of table of site's tags, by tag and time.
func pgSamples(t *testing.T, pg *pgx.Conn, table, site string) map[string]map[int64]float64 {
	t.Helper()
	out := map[string]map[int64]float64{}
	rows, err := pg.Query(context.Background(), "SELECT tag, ts, value FROM "+table+" WHERE tag LIKE $1 AND tag NOT LIKE $2", site+".%", site+".pith.%")
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return out
		}
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var tag string
		var ts time.Time
		var v float64
		if err := rows.Scan(&tag, &ts, &v); err != nil {
			t.Fatal(err)
		}
		if out[tag] == nil {
			out[tag] = map[int64]float64{}
		}
		out[tag][ts.UnixMilli()] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameSamples describes how got differs from want, or returns "".
func sameSamples(want, got map[string]map[int64]float64) string {
	var missing, wrong, stray int
	for tag, ws := range want {
		for ts, v := range ws {
			g, ok := got[tag][ts]
			switch {
			case !ok:
				missing++
			case g != v:
				wrong++
			}
		}
	}
	for tag, gs := range got {
		for ts := range gs {
			if _, ok := want[tag][ts]; !ok {
				stray++
			}
		}
	}
	if missing+wrong+stray == 0 {
		return ""
	}
	return fmt.Sprintf("%d values missing, %d with another value, %d not held by the edge", missing, wrong, stray)
}

// streamCheck reads every message of subject and returns how many there
// are, how many message ids occur more than once, and a description of
// points of want's tags that the edge does not hold ("" when none).
func streamCheck(t *testing.T, natsURL, subject, site string, want map[string]map[int64]float64) (msgs, dupIDs int, stray string) {
	t.Helper()
	js := jetStream(t, natsURL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, forward.DefaultNATSStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.State.Subjects[subject])
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var strays int
	for msgs < n {
		batch, err := c.Fetch(min(n-msgs, 1000), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if seen[id] {
				dupIDs++
			}
			seen[id] = true
			if len(m.Data()) == 0 || m.Headers().Get("Pith-Op") == "labels" {
				continue // a delete, or the labels of the pushed tag
			}
			_, pts, err := forward.DecodeBatch(nil, m.Data())
			if err != nil {
				t.Fatalf("message %s: %v", id, err)
			}
			for _, p := range pts {
				ws, checked := want[site+"."+p.Tag]
				if !checked {
					continue
				}
				if v, ok := ws[p.T]; !ok || v != p.V {
					strays++
				}
			}
		}
		msgs += got
		if got == 0 {
			t.Fatalf("read %d of %d messages: %v", msgs, n, batch.Error())
		}
	}
	if strays > 0 {
		stray = fmt.Sprintf("%d points of the stream not held by the edge", strays)
	}
	return msgs, dupIDs, stray
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// createShortWindowStream creates the forwarders' stream with a duplicate
// window of one second.
func createShortWindowStream(t *testing.T, natsURL string) {
	t.Helper()
	js := jetStream(t, natsURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: forward.DefaultNATSStream,
		Subjects: []string{forward.DefaultNATSSubjects}, Storage: jetstream.FileStorage, Duplicates: time.Second}); err != nil {
		t.Fatal(err)
	}
}

// jetStream connects to urls for the test's checks; the connection is
// closed when the test ends.
func jetStream(t *testing.T, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// natsServerBin returns the nats-server binary, or skips.
func natsServerBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	t.Skip("nats-server not installed: forwarding crash test skipped")
	return ""
}

// natsServer is the test's own nats-server -js, restartable on its port
// with its store directory.
type natsServer struct {
	bin, dir, url string
	port          int
	cmd           *exec.Cmd
}

func startNATSServer(t *testing.T, bin, dir string) *natsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &natsServer{bin: bin, dir: dir, port: port, url: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	s.start(t)
	return s
}

// start runs the server and waits until it accepts connections.
func (s *natsServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-js", "-sd", s.dir)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		nc, err := nats.Connect(s.url, nats.Timeout(time.Second))
		if err != nil {
			continue
		}
		js, err := jetstream.New(nc)
		if err == nil {
			_, err = js.AccountInfo(context.Background())
		}
		nc.Close()
		if err == nil {
			return
		}
	}
	t.Fatal("nats-server did not start within 20 s")
}

// stop ends the server gracefully (it flushes its store) and waits.
func (s *natsServer) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Wait()
	s.cmd = nil
}

// cutProxy forwards TCP connections to target; down closes the listener
// and every connection, up listens again on the same address.
type cutProxy struct {
	target, addr string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *cutProxy) isUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln != nil
}

func (p *cutProxy) up() {
	if p.isUp() {
		return
	}
	for range 100 { // the port may linger a moment after down
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	panic("proxy cannot listen again on " + p.addr)
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln {
				p.mu.Unlock()
				c.Close()
				u.Close()
				return
			}
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close(); c.Close() }()
			go func() { io.Copy(c, u); u.Close(); c.Close() }()
		}
	}()
}

func (p *cutProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}
