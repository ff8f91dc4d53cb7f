package agent

import (
	"context"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"os"
	"runtime"
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
// exactly once, and every message id once: the edge's resends were
// dropped as duplicates. It reads the subject with an ordered consumer in
// batches and counts each sample in one byte per (tag, tick), so that the
// 36 million samples of the long outage take seconds and 36 MB.
func (pr *producer) checkStreamOnce(t testing.TB, natsURL, site string) {
	t.Helper()
	prefix := pr.prefix
	if prefix == "" {
		prefix = "out."
	}
	subject := "pith." + site + ".samples"
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// Every request is bounded on its own and retried: a loaded server
	// may drop a JetStream API request, and an unbounded wait for its
	// answer would hang the test until the binary's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var st jetstream.Stream
	retry(t, ctx, "open stream", func(ctx context.Context) (err error) {
		st, err = js.Stream(ctx, forward.DefaultNATSStream)
		return err
	})
	var info *jetstream.StreamInfo
	retry(t, ctx, "stream info", func(ctx context.Context) (err error) {
		info, err = st.Info(ctx, jetstream.WithSubjectFilter(subject))
		return err
	})
	total := info.State.Subjects[subject]
	ticks := int(pr.ticks)
	seen := make([]uint8, pr.n*ticks) // tag i, tick k at i*ticks+k
	ids := make(map[string]struct{}, total)
	var pts []model.Point
	var read uint64
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	add := func(h nats.Header, data []byte) {
		read++
		id := h.Get(jetstream.MsgIDHeader)
		if _, dup := ids[id]; dup || id == "" {
			report("stream holds message id %q twice (or none)", id)
		}
		ids[id] = struct{}{}
		if len(data) == 0 || h.Get("Pith-Op") != "" || h.Get("Pith-Kind") != "" {
			return // a delete, labels or text message
		}
		var err error
		if _, pts, err = forward.DecodeBatch(pts[:0], data); err != nil {
			t.Fatal(err)
		}
		for _, p := range pts {
			name, ok := strings.CutPrefix(p.Tag, prefix)
			if !ok {
				continue
			}
			i, err := strconv.Atoi(name)
			k := p.T - pr.base
			if err != nil || i < 0 || i >= pr.n || k < 0 || k >= int64(ticks) {
				report("stream holds %s@%d, which was not produced", p.Tag, p.T)
				continue
			}
			if seen[i*ticks+int(k)]++; seen[i*ticks+int(k)] == 2 {
				report("stream holds %s@%d twice", p.Tag, p.T)
			}
		}
	}
	if total <= 10000 {
		// Few messages: one direct get each, bounded by ctx (a consumer
		// keeps retrying while a cluster that lost a node recovers).
		for seq := uint64(1); ; {
			var m *jetstream.RawStreamMsg
			var notFound bool
			retry(t, ctx, fmt.Sprintf("read stream message %d of %s", seq, subject), func(ctx context.Context) (err error) {
				m, err = st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					notFound, err = true, nil
				}
				return err
			})
			if notFound {
				break
			}
			add(m.Header, m.Data)
			seq = m.Sequence + 1
		}
	} else {
		var cons jetstream.Consumer
		retry(t, ctx, "create ordered consumer", func(ctx context.Context) (err error) {
			cons, err = st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
			return err
		})
		for read < total {
			batch, err := cons.Fetch(int(min(4096, total-read)), jetstream.FetchMaxWait(10*time.Second))
			if err != nil {
				t.Fatalf("read %s after %d of %d messages: %v", subject, read, total, err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				add(m.Headers(), m.Data())
			}
			if err := batch.Error(); err != nil {
				t.Fatalf("read %s after %d of %d messages: %v", subject, read, total, err)
			}
			if n == 0 {
				t.Fatalf("read %s: no message after %d of %d", subject, read, total)
			}
		}
	}
	for i := range pr.n {
		for k := range ticks {
			if seen[i*ticks+k] == 0 {
				report("stream lacks %s%d@%d", prefix, i, pr.base+int64(k))
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d problems in all", bad)
	}
	t.Logf("stream checked: %d messages, %d samples each once", read, pr.n*ticks)
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
	cl := testpeer.StartNATSCluster(t, testpeer.NATSServer(t), 3)
	urls := cl.URLs()
	createReplicatedStream(t, urls)

	ccfg := fwdConfig(t, "central", t.TempDir())
	ccfg.Central = config.Central{NATS: urls, Subjects: []string{"pith.*.samples"}, Durable: "central", Workers: 2}
	central := startInstance(t, ccfg)
	ecfg := fwdConfig(t, "site1", t.TempDir())
	ecfg.Forward.NATS = []config.ForwardNATS{{Name: "cluster", URL: urls}}
	edge := startInstance(t, ecfg)

	pr := &producer{n: 20, base: time.Now().UnixMilli() - 60_000}
	pr.run(t, edge, 1500*time.Millisecond)
	leader := streamLeader(t, urls)
	var n int
	if _, err := fmt.Sscanf(leader, "n%d", &n); err != nil {
		t.Fatalf("stream leader %q is none of the cluster's servers", leader)
	}
	cl.Kill(n)
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

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// streamLeader returns the name of the server leading stream PITH. The
// cluster may be slow to answer while it is busy, so it asks again.
func streamLeader(t testing.TB, urls string) string {
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
//
// subjects, when given, replace the stream's subjects.
func createReplicatedStream(t testing.TB, urls string, subjects ...string) {
	if len(subjects) == 0 {
		subjects = []string{forward.DefaultNATSSubjects}
	}
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
				Name: forward.DefaultNATSStream, Subjects: subjects,
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

// errRecorder is a testing.TB that records failures instead of failing.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Helper()                   {}
func (r *errRecorder) Logf(string, ...any)       {}
func (r *errRecorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *errRecorder) Fatalf(f string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(f, a...))
	runtime.Goexit()
}

// TestCheckStreamOnceFails shows that the stream check of the outage tests
// can fail: a sample published twice (under two message ids) and a sample
// never published are both reported; the whole set once passes.
func TestCheckStreamOnceFails(t *testing.T) {
	nurl := testNATS(t)
	pr := &producer{n: 3, base: 1_700_000_000_000, ticks: 4}
	all := func() []model.Point {
		var pts []model.Point
		for k := range pr.ticks {
			for i := range pr.n {
				pts = append(pts, model.Point{Tag: "out." + strconv.Itoa(i), T: pr.base + k, V: float64(k)})
			}
		}
		return pts
	}
	for _, c := range []struct {
		name string
		msgs [][]model.Point
		want int // problems reported
	}{
		{"once", [][]model.Point{all()[:5], all()[5:]}, 0},
		{"twice", [][]model.Point{all()[:7], all()[6:]}, 1},
		{"missing", [][]model.Point{all()[:5], all()[6:]}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			site := testSiteName("check")
			t.Cleanup(func() { purgeSubject(t, nurl, "pith."+site+".samples") })
			sink, err := forward.NewNATSSink(forward.NATSOptions{URL: nurl, Site: site}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			for i, pts := range c.msgs {
				id := fmt.Sprintf("%s-%d", site, i)
				b := forward.Batch{ID: id, Entries: []forward.Entry{{ID: id, Points: pts}}, Points: len(pts)}
				if err := sink.Send(context.Background(), b); err != nil {
					t.Fatal(err)
				}
			}
			rec := &errRecorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				pr.checkStreamOnce(rec, nurl, site)
			}()
			<-done
			if len(rec.errs) != c.want {
				t.Errorf("reported %d problems, want %d: %q", len(rec.errs), c.want, rec.errs)
			}
		})
	}
}
