package testpeer

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// NATSServer returns the nats-server binary, or ends the test through
// Missing when PITH_TEST_NATS is unset or the binary is not installed:
// tests that start their own servers run with the other NATS tests.
func NATSServer(t testing.TB) string {
	t.Helper()
	if os.Getenv("PITH_TEST_NATS") == "" {
		Missing(t, "PITH_TEST_NATS not set: test starting its own nats-server skipped with the other NATS tests")
	}
	for _, p := range []string{"nats-server", "/usr/sbin/nats-server"} {
		if bin, err := exec.LookPath(p); err == nil {
			return bin
		}
	}
	Missing(t, "nats-server not installed (Debian package nats-server): test skipped")
	return ""
}

// NATSCluster is a JetStream cluster of nats-server processes on
// loopback, started by a test. Its servers do not advertise their
// addresses to clients, so a client reaches only the URLs it was given
// (a Proxy in front of them can cut it off).
type NATSCluster struct {
	Ports []int // client ports, by server index
	mu    sync.Mutex
	procs map[int]*exec.Cmd
	args  map[int][]string
	bin   string
	t     testing.TB
}

// StartNATSCluster starts n servers (n = 1 is a single JetStream server),
// named n0, n1..., and stops them when the test ends. conf, when given, is
// the text of a config file every server reads (e.g. subject mappings)
// before its flags.
func StartNATSCluster(t testing.TB, bin string, n int, conf ...string) *NATSCluster {
	ports := FreePorts(t, 2*n)
	cl := &NATSCluster{Ports: ports[:n], procs: map[int]*exec.Cmd{}, args: map[int][]string{}, bin: bin, t: t}
	dir := t.TempDir()
	var confArgs []string
	if len(conf) > 0 {
		f := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(f, []byte(strings.Join(conf, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		confArgs = []string{"-c", f}
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		args := append(slices.Clone(confArgs), "-a", "127.0.0.1", "-p", strconv.Itoa(ports[i]), "-js", "-sd", filepath.Join(dir, name), "-n", name)
		if n > 1 {
			var routes []string
			for j := range n {
				if j != i {
					routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+j]))
				}
			}
			args = append(args, "--cluster_name", "pithtest", "--no_advertise",
				"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]), "--routes", strings.Join(routes, ","))
		}
		cl.args[i] = append(args, "-l", filepath.Join(dir, name+".log"))
		cl.Start(i)
	}
	t.Cleanup(func() {
		for i := range n {
			cl.Kill(i)
		}
	})
	return cl
}

// Start starts server i (again, after Kill).
func (cl *NATSCluster) Start(i int) {
	cmd := exec.Command(cl.bin, cl.args[i]...)
	if err := cmd.Start(); err != nil {
		cl.t.Fatal(err)
	}
	cl.mu.Lock()
	cl.procs[i] = cmd
	cl.mu.Unlock()
}

// Kill stops server i abruptly.
func (cl *NATSCluster) Kill(i int) {
	cl.mu.Lock()
	cmd := cl.procs[i]
	delete(cl.procs, i)
	cl.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// URL is the client URL of server i.
func (cl *NATSCluster) URL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", cl.Ports[i]) }

// URLs is the comma-separated client URL list of the cluster.
func (cl *NATSCluster) URLs() string {
	var us []string
	for i := range cl.Ports {
		us = append(us, cl.URL(i))
	}
	return strings.Join(us, ",")
}

// FreePorts returns n TCP ports free on loopback right now.
func FreePorts(t testing.TB, n int) []int {
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// Proxy relays TCP connections to a target and can stall them: Cut stops
// relaying bytes in both directions without closing anything (a network
// split: the peers' TCP waits), Heal lets the held bytes through again.
type Proxy struct {
	Addr   string
	target string
	l      net.Listener
	mu     sync.Mutex
	cond   *sync.Cond
	cut    bool
}

// NewProxy listens on a free loopback port and relays to target
// (host:port) until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, l: l}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { l.Close(); p.Heal() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go p.relay(s, c)
			go p.relay(c, s)
		}
	}()
	return p
}

// URL is the proxy's address as a NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr }

func (p *Proxy) relay(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.cut {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// Cut stalls every relayed byte until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Heal relays again, the held bytes first.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
