package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/store"
)

// countingWriter counts the points a central Pith stored.
type countingWriter struct {
	db *store.DB
	n  atomic.Int64
}

func (w *countingWriter) Write(ctx context.Context, pts []model.Point) error {
	if err := w.db.Write(ctx, pts); err != nil {
		return err
	}
	w.n.Add(int64(len(pts)))
	return nil
}

func (w *countingWriter) Delete(ctx context.Context, tag string, from, to int64) (int64, error) {
	return w.db.Delete(ctx, tag, from, to)
}

func (w *countingWriter) SetLabels(context.Context, []model.Series) error { return nil }

// benchBatch is batch i of 10,000 points: 100 tags, 100 samples each.
func benchBatch(i int, names []string) []model.Point {
	pts := make([]model.Point, 0, 10000)
	t0 := int64(1_700_000_000_000) + int64(i)*100_000
	for s := range 100 {
		for k, name := range names {
			pts = append(pts, model.Point{Tag: name, T: t0 + int64(s)*1000, V: float64(i*100 + s + k)})
		}
	}
	return pts
}

// BenchmarkCentralConsume measures a central Pith's intake in values/s:
// b.N batches of 10,000 points (100 tags) already in the stream are
// consumed by startCentral, renamed under the site and written into a
// store with the default (fsync) durability before each ack. Run it with
//
//	PITH_TEST_NATS=nats://127.0.0.1:4222 go test -run x -bench CentralConsume -benchtime 200x ./cmd/pith/
func BenchmarkCentralConsume(b *testing.B) {
	nurl := testNATS(b)
	for _, workers := range []int{1, 2, 4} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			site := testSiteName("bench")
			subject := "pith." + site + ".samples"
			sink, err := forward.NewNATSSink(forward.NATSOptions{URL: nurl, Site: site}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer sink.Close()
			ctx := context.Background()
			names := make([]string, 100)
			for k := range names {
				names[k] = fmt.Sprintf("plant.unit%02d.value", k)
			}
			for i := range b.N {
				pts := benchBatch(i, names)
				id := fmt.Sprintf("%s-%d", site, i)
				b1 := forward.Batch{ID: id, Entries: []forward.Entry{{ID: id, Points: pts}}, Points: len(pts)}
				if err := sink.Send(ctx, b1); err != nil {
					b.Fatal(err)
				}
			}
			defer purgeSubject(b, nurl, subject)
			durable := "b-" + site
			defer deleteConsumer(b, nurl, durable)
			log := slog.New(slog.DiscardHandler)
			db, err := store.Open(b.TempDir(), storeOptions(config.Default().Store, log))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			w := &countingWriter{db: db}
			want := int64(b.N) * 10000
			b.ResetTimer()
			stop := startCentral(ctx, config.Central{NATS: nurl, Subjects: []string{subject}, Durable: durable, Workers: workers}, w, log)
			for w.n.Load() < want {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			stop()
			b.ReportMetric(float64(want)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// purgeSubject drops a benchmark's messages from the shared stream.
func purgeSubject(t testing.TB, natsURL, subject string) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, forward.DefaultNATSStream)
	if err != nil {
		return
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		t.Logf("purge %s: %v", subject, err)
	}
}

// TestForwardLongOutage is the long outage: an edge produces 10,000
// values/s (100 tags every 10 ms) while its link to JetStream is down,
// then the link comes back. The central Pith must then hold every value,
// and the stream each value once: 0 lost, 0 duplicated. With PITH_LONG=1
// the outage lasts PITH_LONG_OUTAGE (default 60m, 36 million values in the
// store's log) and the drain must take at most 60 s, 1 s per minute of
// outage (at least 10 s), while the edge goes on producing at the rate it
// held during the outage (at least 90% of it). Without PITH_LONG, a 15 s
// outage checks the same with the bounds only logged:
//
//	PITH_LONG=1 PITH_TEST_NATS=nats://127.0.0.1:4222 go test -run LongOutage -v -timeout 90m ./internal/agent/
func TestForwardLongOutage(t *testing.T) {
	nurl := testNATS(t)
	long := os.Getenv("PITH_LONG") == "1"
	outage := 15 * time.Second
	if long {
		outage = time.Hour
	}
	if s := os.Getenv("PITH_LONG_OUTAGE"); s != "" && long {
		var err error
		if outage, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	site := testSiteName("long")
	durable := "c-" + site
	t.Cleanup(func() { deleteConsumer(t, nurl, durable) })
	t.Cleanup(func() { purgeSubject(t, nurl, "pith."+site+".samples") })
	px := newTCPProxy(t, hostPort(t, nurl))
	// PITH_LONG_DURABILITY=default runs both with the binary's default
	// durability (fsync) instead of relaxed.
	durability := config.DurabilityRelaxed
	if os.Getenv("PITH_LONG_DURABILITY") == "default" {
		durability = config.Default().Store.Durability
	}
	ccfg := fwdConfig(t, "central", t.TempDir())
	ccfg.Store.Durability = durability
	ccfg.Central = config.Central{NATS: nurl, Subjects: []string{"pith." + site + ".samples"}, Durable: durable, Workers: 2}
	central := startInstance(t, ccfg)
	ecfg := fwdConfig(t, site, t.TempDir())
	ecfg.Store.Durability = durability
	ecfg.Forward.NATS = []config.ForwardNATS{{Name: "up", URL: "nats://" + px.addr}}
	edge := startInstance(t, ecfg)
	t.Logf("durability %s", durability)

	base := time.Now().UnixMilli() - 24*3600*1000
	pr := &producer{n: 100, base: base}
	pr.run(t, edge, 2*time.Second)
	px.down()
	start, ticks0 := time.Now(), pr.ticks
	pr.run(t, edge, outage)
	outageRate := float64(pr.ticks-ticks0) * float64(pr.n) / time.Since(start).Seconds()
	t.Logf("outage of %s: %d values produced (%.0f/s)", outage, pr.ticks*int64(pr.n), outageRate)

	// The drain: the link is back while another producer goes on at the
	// same pace, on tags of its own so that the backlog is a fixed set.
	live := &producer{n: 100, prefix: "live.", base: base + pr.ticks + 1000}
	stopLive, liveDone := make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	endLive := func() {
		stopOnce.Do(func() { close(stopLive) })
		<-liveDone
	}
	// Registered after the instances: it runs before they stop, also
	// when the drain check fails, so that no producer writes into a
	// stopping Pith.
	t.Cleanup(endLive)
	px.up()
	up := time.Now()
	go func() {
		defer close(liveDone)
		live.runUntil(t, edge, stopLive)
	}()
	eventually(t, outage+time.Minute, "every value at the central Pith", func() bool {
		return pr.arrived(t, central, site)
	})
	drain := time.Since(up)
	endLive()
	liveRate := float64(live.ticks) * float64(live.n) / time.Since(up).Seconds()
	target := max(10*time.Second, time.Duration(outage.Minutes()*float64(time.Second)))
	t.Logf("drained %d values in %s (target %s); acquisition during the drain %.0f values/s, %.1f%% of its rate during the outage",
		pr.ticks*int64(pr.n), drain.Round(100*time.Millisecond), target, liveRate, 100*liveRate/outageRate)
	if long && drain > target {
		t.Errorf("drain took %s, want at most %s", drain.Round(100*time.Millisecond), target)
	}
	if long && liveRate < 0.9*outageRate {
		t.Errorf("acquisition fell to %.0f values/s during the drain, want at least 90%% of %.0f", liveRate, outageRate)
	}
	pr.checkStreamOnce(t, nurl, site)
}

// TestForwardDrainScale (PITH_DRAIN_FILL=values, e.g. 36000000) fills the
// edge's WAL as fast as the edge takes values while the link is down,
// then times the drain. PITH_DRAIN_PROF=file writes a CPU profile of the
// drain; PITH_LONG_DURABILITY=default runs both Piths with the binary's
// default durability (fsync) instead of relaxed.
func TestForwardDrainScale(t *testing.T) {
	fill, _ := strconv.Atoi(os.Getenv("PITH_DRAIN_FILL"))
	if fill == 0 {
		t.Skip("PITH_DRAIN_FILL not set")
	}
	nurl := testNATS(t)
	site := testSiteName("drain")
	durable := "c-" + site
	t.Cleanup(func() { deleteConsumer(t, nurl, durable) })
	t.Cleanup(func() { purgeSubject(t, nurl, "pith."+site+".samples") })
	px := newTCPProxy(t, hostPort(t, nurl))
	durability := config.DurabilityRelaxed
	if os.Getenv("PITH_LONG_DURABILITY") == "default" {
		durability = config.Default().Store.Durability
	}
	ccfg := fwdConfig(t, "central", t.TempDir())
	ccfg.Store.Durability = durability
	workers := 2
	if w, _ := strconv.Atoi(os.Getenv("PITH_DRAIN_WORKERS")); w > 0 {
		workers = w
	}
	ccfg.Central = config.Central{NATS: nurl, Subjects: []string{"pith." + site + ".samples"}, Durable: durable, Workers: workers}
	central := startInstance(t, ccfg)
	ecfg := fwdConfig(t, site, t.TempDir())
	ecfg.Store.Durability = durability
	ecfg.Forward.NATS = []config.ForwardNATS{{Name: "up", URL: "nats://" + px.addr}}
	edge := startInstance(t, ecfg)
	base := time.Now().UnixMilli() - 24*3600*1000
	pr := &producer{n: 100, base: base}
	px.down()
	start := time.Now()
	pts := make([]model.Point, pr.n)
	for pr.ticks*int64(pr.n) < int64(fill) {
		for i := range pts {
			pts[i] = model.Point{Tag: "out." + strconv.Itoa(i), T: pr.base + pr.ticks, V: float64(pr.ticks)}
		}
		edge.update(t, pts)
		pr.ticks++
		if pr.ticks%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	t.Logf("filled %d values in %s", pr.ticks*int64(pr.n), time.Since(start).Round(time.Second))
	time.Sleep(3 * time.Second)
	if p := os.Getenv("PITH_DRAIN_PROF"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	px.up()
	up := time.Now()
	eventually(t, time.Hour, "every value at the central Pith", func() bool {
		return pr.arrived(t, central, site)
	})
	t.Logf("drained %d values in %s (central workers %d, durability %s)", pr.ticks*int64(pr.n), time.Since(up).Round(100*time.Millisecond), workers, durability)
}
