package forward

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkForwardNATS measures values forwarded per second from one edge:
// store writes of 10,000-point batches read back by the follower and
// published to JetStream, including the drain at the end. Run it with
//
//	PITH_TEST_NATS=nats://127.0.0.1:4222 go test -run x -bench ForwardNATS -benchtime 200x ./internal/forward/
func BenchmarkForwardNATS(b *testing.B) {
	url := natsURL(b)
	site := testSite(b)
	sink := newNATSSink(b, url, site)
	defer sink.Close()
	h := openForwarder(b, b.TempDir(), testOptions(site), sink)
	pts := benchPoints()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := h.db.Write(ctx, pts); err != nil {
			b.Fatal(err)
		}
	}
	h.drained()
	b.StopTimer()
	st := h.f.Stats()
	b.ReportMetric(float64(st.Sent)/b.Elapsed().Seconds(), "values/s")
	b.ReportMetric(float64(st.Errors), "errors")
	h.close()
	if ids, _ := streamMessages(b, url, sink.Subject()); len(ids) != b.N {
		b.Fatalf("stream holds %d messages, want %d", len(ids), b.N)
	}
}

// BenchmarkDrainBacklogNATS measures the catch-up after an outage: b.N
// writes of 10,000 points held in the store's WAL while the upstream was
// away are read back by the follower and sent after a restart. Run it
// with
//
//	PITH_TEST_NATS=nats://127.0.0.1:4222 go test -run x -bench DrainBacklogNATS -benchtime 600x ./internal/forward/
func BenchmarkDrainBacklogNATS(b *testing.B) {
	url := natsURL(b)
	site := testSite(b)
	dir := b.TempDir()
	o := testOptions(site)
	h := openForwarder(b, dir, o, &fakeSink{down: true})
	pts := benchPoints()
	for i := range b.N {
		batch := slices.Clone(pts)
		for j := range batch {
			batch[j].T += int64(i) * 100_000
		}
		if err := h.db.Write(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	h.close()
	sink := newNATSSink(b, url, site)
	defer sink.Close()
	b.ReportAllocs()
	b.ResetTimer()
	h = openForwarder(b, dir, o, sink)
	h.drained()
	b.StopTimer()
	b.ReportMetric(float64(h.f.Stats().Sent)/b.Elapsed().Seconds(), "values/s")
	h.close()
	if ids, _ := streamMessages(b, url, sink.Subject()); len(ids) != b.N {
		b.Fatalf("stream holds %d messages, want %d", len(ids), b.N)
	}
}

// BenchmarkConsumeNATS measures the central side: b.N batches of 10,000
// points already in the stream are pulled, decoded, handed to a sink that
// only counts them, and acknowledged. Run it with
//
//	PITH_TEST_NATS=nats://127.0.0.1:4222 go test -run x -bench ConsumeNATS -benchtime 300x ./internal/forward/
func BenchmarkConsumeNATS(b *testing.B) {
	url := natsURL(b)
	site := testSite(b)
	sink := newNATSSink(b, url, site)
	defer sink.Close()
	pts := benchPoints()
	for i := range b.N {
		if err := sink.Send(context.Background(), pointsBatch(fmt.Sprintf("%s-%d", site, i), pts)); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int64
	done := make(chan error, 1)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		done <- Consume(ctx, url, []string{sink.Subject()}, "bench"+site, Handlers{Points: func(_ string, p []model.Point) error {
			n.Add(int64(len(p)))
			return nil
		}}, nil)
	}()
	for n.Load() < int64(b.N*len(pts)) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "values/s")
	nc, err := nats.Connect(url)
	if err == nil {
		js, _ := jetstream.New(nc)
		js.DeleteConsumer(context.Background(), DefaultNATSStream, "bench"+site)
		nc.Close()
	}
	streamMessages(b, url, sink.Subject()) // purge
}

// discardSink confirms every batch at once.
type discardSink struct{}

func (discardSink) Send(context.Context, Batch) error { return nil }

// BenchmarkForwarder measures the edge's cost of forwarding apart from
// the upstream: store writes of 10,000-point batches, read back from the
// WAL by the follower and acknowledged, with a sink that confirms at once.
// Run it with
//
//	go test -run x -bench 'Forwarder$' ./internal/forward/
func BenchmarkForwarder(b *testing.B) {
	h := openForwarder(b, b.TempDir(), testOptions("bench"), discardSink{})
	pts := benchPoints()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		batch := slices.Clone(pts)
		for j := range batch {
			batch[j].T += int64(i) * 100_000
		}
		if err := h.db.Write(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	h.drained()
	b.ReportMetric(float64(b.N)*float64(len(pts))/b.Elapsed().Seconds(), "values/s")
}
