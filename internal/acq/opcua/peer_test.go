package opcua

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"
	"github.com/pith-historian/pith/internal/testpeer"
)

// peerEnv turns the interop tests on: they start a node-opcua server
// (testdata/server, installed with `npm ci` there).
const peerEnv = "PITH_TEST_OPCUA"

// serverDir holds the node-opcua server script and its package files.
const serverDir = "testdata/server"

// nodeServer is a running node-opcua test server.
type nodeServer struct {
	t     testing.TB
	port  int
	pki   string
	args  []string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	epoch int64 // Unix ms; the value k carries the time epoch + k*period
}

// needPeer ends the test unless the node-opcua server can run.
func needPeer(t testing.TB) {
	t.Helper()
	if os.Getenv(peerEnv) == "" {
		testpeer.Missing(t, "%s not set (set it to 1 and run `npm ci` in internal/acq/opcua/%s): OPC UA interop test skipped", peerEnv, serverDir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testpeer.Missing(t, "node missing (apt-get install nodejs npm): OPC UA interop test skipped")
	}
	if _, err := os.Stat(filepath.Join(serverDir, "node_modules", "node-opcua")); err != nil {
		testpeer.Missing(t, "node-opcua not installed (run `npm ci` in internal/acq/opcua/%s)", serverDir)
	}
}

// freePort returns a TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNodeServer starts the server with count variables changing at
// rate Hz and waits until it listens. It is stopped at the test's end.
func startNodeServer(t testing.TB, count int, rate float64) *nodeServer {
	t.Helper()
	needPeer(t)
	s := &nodeServer{t: t, port: freePort(t), pki: t.TempDir(),
		args: []string{strconv.Itoa(count), strconv.FormatFloat(rate, 'f', -1, 64)}}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *nodeServer) endpoint() string {
	return "opc.tcp://127.0.0.1:" + strconv.Itoa(s.port) + "/pith"
}

func (s *nodeServer) start() {
	t := s.t
	t.Helper()
	args := append([]string{"server.js", strconv.Itoa(s.port), s.pki}, s.args...)
	cmd := exec.Command("node", args...)
	cmd.Dir = serverDir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.stdin = cmd, stdin
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY ") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case line := <-ready:
		f := strings.Fields(line)
		s.epoch, _ = strconv.ParseInt(f[2], 10, 64)
	case <-time.After(90 * time.Second):
		s.stop()
		t.Fatal("node-opcua server did not start within 90 s")
	}
}

// stop ends the server (closing its stdin, then killing it).
func (s *nodeServer) stop() {
	if s.cmd == nil {
		return
	}
	s.stdin.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// kill ends the server at once, as a crash or power loss would.
func (s *nodeServer) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// recorder is a tag.Sink keeping every archived point.
type recorder struct {
	mu    sync.Mutex
	pts   []model.Point
	texts []model.TextPoint
}

var _ tag.Sink = (*recorder)(nil)

func (r *recorder) Enqueue(pts []model.Point) bool {
	r.mu.Lock()
	r.pts = append(r.pts, pts...)
	r.mu.Unlock()
	return true
}

func (r *recorder) Write(context.Context, []model.Point) error { return nil }

// WriteMixed keeps text points as the store would: it refuses a batch
// holding a text the store refuses.
func (r *recorder) WriteMixed(_ context.Context, pts []model.Point, texts []model.TextPoint) error {
	for i, p := range texts {
		if err := model.CheckText(p.Text); err != nil {
			return &model.PointError{Index: len(pts) + i, Tag: p.Tag, Err: err}
		}
	}
	r.mu.Lock()
	r.pts = append(r.pts, pts...)
	r.texts = append(r.texts, texts...)
	r.mu.Unlock()
	return nil
}

// textsOf returns the stored text points of tag, in order.
func (r *recorder) textsOf(tag string) []model.TextPoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []model.TextPoint
	for _, p := range r.texts {
		if p.Tag == tag {
			out = append(out, p)
		}
	}
	return out
}

// byTag returns the archived points of each tag, in archive order.
func (r *recorder) byTag() map[string][]model.Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string][]model.Point{}
	for _, p := range r.pts {
		m[p.Tag] = append(m[p.Tag], p)
	}
	return m
}

// proxy forwards TCP connections to a target and can cut the link: a
// cut closes every connection and refuses new ones until heal.
type proxy struct {
	t      testing.TB
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

// setCut cuts the link (closing every connection) or heals it.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}
