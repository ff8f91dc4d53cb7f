package agent

import (
	"context"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
)

// TestCentralEndToEnd runs an edge Pith forwarding to JetStream and a
// central Pith consuming from it, both through the real serve: values
// changed in the edge's tag table and values imported into the edge arrive
// in the central store under "<site>.", and so do the edge forwarder's
// system tags.
func TestCentralEndToEnd(t *testing.T) {
	nurl := testNATS(t)
	site := testSiteName("e2e")
	durable := "c-" + site
	t.Cleanup(func() { deleteConsumer(t, nurl, durable) })
	ccfg := fwdConfig(t, "central", t.TempDir())
	ccfg.Central = config.Central{NATS: nurl, Subjects: []string{"pith." + site + ".samples"}, Durable: durable, Workers: 2}
	ecfg := fwdConfig(t, site, t.TempDir())
	ecfg.Forward.NATS = []config.ForwardNATS{{Name: "fleet", URL: nurl}}
	edge := startInstance(t, ecfg)
	central := startInstance(t, ccfg)

	now := time.Now().UnixMilli()
	for i := range 100 {
		edge.update(t, []model.Point{
			{Tag: "hx.t_out", T: now - 1000 + int64(i), V: float64(i)},
			{Tag: "hx.t_in", T: now - 1000 + int64(i), V: float64(-i)},
		})
	}
	var csv strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&csv, "imp.flow,%d,%d\n", now-5000+int64(i), i)
	}
	edge.importCSV(t, csv.String())

	eventually(t, 20*time.Second, "edge values at the central Pith", func() bool {
		return central.count(t, site+".hx.t_out", now-1000, now) == 100 &&
			central.count(t, site+".hx.t_in", now-1000, now) == 100 &&
			central.count(t, site+".imp.flow", now-5000, now) == 1000
	})
	for tag, want := range map[string]float64{site + ".hx.t_out": 99, site + ".hx.t_in": -99, site + ".imp.flow": 999} {
		if v, ok := central.latest(t, tag); !ok || v != want {
			t.Errorf("central latest %s = %v (%v), want %v", tag, v, ok, want)
		}
	}
	if n := central.count(t, "hx.t_out", now-1000, now); n != 0 {
		t.Errorf("central stored %d samples of the unprefixed tag", n)
	}
	eventually(t, 10*time.Second, "forwarder system tags at the edge and the central Pith", func() bool {
		_, atEdge := edge.latest(t, "pith.sys.forward.fleet.backlog")
		_, atCentral := central.latest(t, site+".pith.sys.forward.fleet.sent_per_s")
		return atEdge && atCentral
	})
}

// producer changes tags out.0 ... out.<n-1> of an edge every 10 ms, each
// tick at its own timestamp, as a scan of n registers would.
type producer struct {
	n      int
	prefix string // tag names start with it; "" is "out."
	base   int64  // timestamp of tick 0
	ticks  int64  // ticks produced
}

// run produces for d.
func (pr *producer) run(t testing.TB, in *instance, d time.Duration) {
	t.Helper()
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	pr.runUntil(t, in, stop)
}

// runUntil produces until stop is closed. A tick that takes longer than
// 10 ms delays the next one: the achieved rate is ticks over the time.
func (pr *producer) runUntil(t testing.TB, in *instance, stop <-chan struct{}) {
	t.Helper()
	prefix := pr.prefix
	if prefix == "" {
		prefix = "out."
	}
	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	pts := make([]model.Point, pr.n)
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		for i := range pts {
			pts[i] = model.Point{Tag: prefix + strconv.Itoa(i), T: pr.base + pr.ticks, V: float64(pr.ticks)}
		}
		in.update(t, pts)
		pr.ticks++
	}
}

// arrived reports whether the central Pith holds every produced sample of
// site, once each.
func (pr *producer) arrived(t testing.TB, central *instance, site string) bool {
	for i := range pr.n {
		if central.count(t, site+".out."+strconv.Itoa(i), pr.base, pr.base+pr.ticks) != int(pr.ticks) {
			return false
		}
	}
	return true
}

// checkStreamOnce checks that the stream holds every produced sample
// exactly once: the edge's resends were dropped as duplicates.
func (pr *producer) checkStreamOnce(t testing.TB, natsURL, site string) {
	t.Helper()
	counts := streamCounts(t, natsURL, "pith."+site+".samples", "out.")
	if got, want := len(counts), pr.n*int(pr.ticks); got != want {
		t.Errorf("stream holds %d distinct samples, want %d", got, want)
	}
	for k, n := range counts {
		if n != 1 {
			t.Errorf("stream holds %s@%d %d times", k.tag, k.t, n)
		}
	}
}

// TestForwardOutageRestart cuts the edge's link to JetStream while values
// are produced at 1,000 values/s and imported, restarts the edge during the
// outage, then restores the link: every value arrives at the central Pith,
// and the stream holds each exactly once.
func TestForwardOutageRestart(t *testing.T) {
	nurl := testNATS(t)
	site := testSiteName("outage")
	durable := "c-" + site
	t.Cleanup(func() { deleteConsumer(t, nurl, durable) })
	px := newTCPProxy(t, hostPort(t, nurl))
	ccfg := fwdConfig(t, "central", t.TempDir())
	ccfg.Central = config.Central{NATS: nurl, Subjects: []string{"pith." + site + ".samples"}, Durable: durable, Workers: 2}
	central := startInstance(t, ccfg)
	ecfg := fwdConfig(t, site, t.TempDir())
	ecfg.Forward.NATS = []config.ForwardNATS{{Name: "up", URL: "nats://" + px.addr}}
	edge := startInstance(t, ecfg)

	pr := &producer{n: 10, base: time.Now().UnixMilli() - 60_000}
	pr.run(t, edge, time.Second)
	px.down()
	pr.run(t, edge, 1500*time.Millisecond)
	var csv strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&csv, "imp.x,%d,%d\n", pr.base+int64(i), i)
	}
	edge.importCSV(t, csv.String())
	eventually(t, 5*time.Second, "backlog shown at the edge", func() bool {
		v, ok := edge.latest(t, "pith.sys.forward.up.backlog")
		return ok && v > 0
	})
	edge.stop(t)
	edge = startInstance(t, ecfg)
	pr.run(t, edge, 1500*time.Millisecond)
	px.up()
	eventually(t, 25*time.Second, "every value at the central Pith", func() bool {
		return pr.arrived(t, central, site) && central.count(t, site+".imp.x", pr.base, pr.base+5000) == 5000
	})
	pr.checkStreamOnce(t, nurl, site)
	t.Logf("%d values produced at %d/s, 5000 imported", pr.ticks*int64(pr.n), 100*pr.n)
}

// TestCentralClusterNodeKilled runs a three-node JetStream cluster, an
// edge forwarding to it and a central Pith consuming from it, and kills
// the stream's leader mid-stream: nothing is lost and nothing duplicated.
func TestCentralClusterNodeKilled(t *testing.T) {
	if os.Getenv("PITH_TEST_NATS") == "" {
		testpeer.Missing(t, "PITH_TEST_NATS not set: cluster test skipped with the other NATS tests")
	}
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nats-server"); err != nil {
			testpeer.Missing(t, "nats-server not installed (Debian package nats-server): cluster test skipped")
		}
	}
	cl := startNATSCluster(t, bin, 3)
	urls := cl.urls()
	createReplicatedStream(t, urls)

	ccfg := fwdConfig(t, "central", t.TempDir())
	ccfg.Central = config.Central{NATS: urls, Subjects: []string{"pith.*.samples"}, Durable: "central", Workers: 2}
	central := startInstance(t, ccfg)
	ecfg := fwdConfig(t, "site1", t.TempDir())
	ecfg.Forward.NATS = []config.ForwardNATS{{Name: "cluster", URL: urls}}
	edge := startInstance(t, ecfg)

	pr := &producer{n: 20, base: time.Now().UnixMilli() - 60_000}
	pr.run(t, edge, 1500*time.Millisecond)
	leader := cl.streamLeader(t, urls)
	cl.kill(t, leader)
	pr.run(t, edge, 2*time.Second)
	killed := time.Now()
	end := killed.Add(40 * time.Second)
	for !pr.arrived(t, central, "site1") {
		if time.Now().After(end) {
			backlog, _ := edge.latest(t, "pith.sys.forward.cluster.backlog")
			errs, _ := edge.latest(t, "pith.sys.forward.cluster.errors")
			t.Fatalf("not every value at the central Pith 40 s after the kill: edge backlog %v, send errors %v, central holds %d of %d samples of out.0",
				backlog, errs, central.count(t, "site1.out.0", pr.base, pr.base+pr.ticks), pr.ticks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("all values at the central Pith %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	pr.checkStreamOnce(t, urls, "site1")
	t.Logf("killed %s; %d values produced at %d/s", leader, pr.ticks*int64(pr.n), 100*pr.n)
}

// natsCluster is a JetStream cluster of nats-server processes on loopback.
type natsCluster struct {
	ports []int
	procs map[string]*exec.Cmd // by server name
}

// freePorts returns n TCP ports free on loopback right now.
func freePorts(t testing.TB, n int) []int {
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

func startNATSCluster(t testing.TB, bin string, n int) *natsCluster {
	ports := freePorts(t, 2*n)
	cl := &natsCluster{ports: ports[:n], procs: map[string]*exec.Cmd{}}
	dir := t.TempDir()
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+j]))
			}
		}
		name := fmt.Sprintf("n%d", i)
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(ports[i]), "-js",
			"-sd", filepath.Join(dir, name), "-n", name, "--cluster_name", "pithtest",
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]), "--routes", strings.Join(routes, ","))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cl.procs[name] = cmd
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("%s log tail:\n%s", name, tail(string(b), 2000))
			}
		})
	}
	return cl
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// urls is the comma-separated client URL list of the cluster.
func (cl *natsCluster) urls() string {
	var us []string
	for _, p := range cl.ports {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(us, ",")
}

// kill stops one server abruptly.
func (cl *natsCluster) kill(t testing.TB, name string) {
	cmd, ok := cl.procs[name]
	if !ok {
		t.Fatalf("no server %q", name)
	}
	cmd.Process.Kill()
}

// streamLeader returns the name of the server leading stream PITH. The
// cluster may be slow to answer while it is busy, so it asks again.
func (cl *natsCluster) streamLeader(t testing.TB, urls string) string {
	t.Helper()
	var last error
	for range 10 {
		leader, err := func() (string, error) {
			nc, err := nats.Connect(urls, nats.Timeout(2*time.Second))
			if err != nil {
				return "", err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return "", err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			st, err := js.Stream(ctx, forward.DefaultNATSStream)
			if err != nil {
				return "", err
			}
			info := st.CachedInfo()
			if info.Cluster == nil || info.Cluster.Leader == "" {
				return "", fmt.Errorf("no leader in %+v", info.Cluster)
			}
			return info.Cluster.Leader, nil
		}()
		if err == nil {
			return leader
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("find the stream leader: %v", last)
	return ""
}

// createReplicatedStream creates stream PITH with three replicas, as an
// operator does before pointing edges at a cluster, once the cluster has
// elected its JetStream leader.
func createReplicatedStream(t testing.TB, urls string) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		err := func() error {
			nc, err := nats.Connect(urls, nats.Timeout(2*time.Second))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err = js.CreateStream(ctx, jetstream.StreamConfig{
				Name: forward.DefaultNATSStream, Subjects: []string{forward.DefaultNATSSubjects},
				Storage: jetstream.FileStorage, Replicas: 3, Duplicates: forward.DefaultNATSDupWindow,
			})
			return err
		}()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("create replicated stream: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
