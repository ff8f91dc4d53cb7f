package forward

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkForwardNATS measures values forwarded per second from one edge:
// Enqueue (relaxed WAL) of 10,000-point batches to publish acks from
// JetStream, including the drain at the end. Run it with
//
//	PITH_TEST_NATS=nats://127.0.0.1:4222 go test -run x -bench ForwardNATS -benchtime 200x ./internal/forward/
func BenchmarkForwardNATS(b *testing.B) {
	url := natsURL(b)
	site := testSite(b)
	sink := newNATSSink(b, url, site)
	defer sink.Close()
	o := DefaultOptions()
	o.Site = site
	q, err := Open(b.TempDir(), o, sink, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	pts := benchPoints()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := q.Enqueue(ctx, pts); err != nil {
			b.Fatal(err)
		}
	}
	for q.Stats().Backlog > 0 {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	st := q.Stats()
	b.ReportMetric(float64(st.Sent)/b.Elapsed().Seconds(), "values/s")
	b.ReportMetric(float64(st.Errors), "errors")
	b.ReportMetric(float64(st.Sent)/float64(b.N), "values/op")
	if ids, _ := streamMessages(b, url, sink.Subject()); len(ids) != b.N {
		b.Fatalf("stream holds %d batches, want %d", len(ids), b.N)
	}
}

// BenchmarkDrainBacklogNATS measures the catch-up after an outage: b.N
// batches of 10,000 points queued on disk while the upstream was away are
// read back from the WAL and sent after a restart. Run it with
//
//	PITH_TEST_NATS=nats://127.0.0.1:4222 go test -run x -bench DrainBacklogNATS -benchtime 600x ./internal/forward/
func BenchmarkDrainBacklogNATS(b *testing.B) {
	url := natsURL(b)
	site := testSite(b)
	dir := b.TempDir()
	o := DefaultOptions()
	o.Site = site
	q, err := Open(dir, o, &fakeSink{down: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	pts := benchPoints()
	for range b.N {
		if err := q.Enqueue(context.Background(), pts); err != nil {
			b.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		b.Fatal(err)
	}
	sink := newNATSSink(b, url, site)
	defer sink.Close()
	b.ReportAllocs()
	b.ResetTimer()
	q, err = Open(dir, o, sink, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	for q.Stats().Backlog > 0 {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(q.Stats().Sent)/b.Elapsed().Seconds(), "values/s")
	if ids, _ := streamMessages(b, url, sink.Subject()); len(ids) != b.N {
		b.Fatalf("stream holds %d batches, want %d", len(ids), b.N)
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
	payload := EncodeBatch(1, pts)
	for i := range b.N {
		if err := sink.Send(context.Background(), Batch{ID: fmt.Sprintf("%s-%d", site, i), Payload: payload, Points: len(pts)}); err != nil {
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
		done <- Consume(ctx, url, []string{sink.Subject()}, "bench"+site, func(_ string, p []model.Point) error {
			n.Add(int64(len(p)))
			return nil
		}, nil)
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

// BenchmarkEnqueue measures the edge's cost of queueing: encoding and a
// relaxed-durability WAL append of 10,000-point batches, with a sink that
// confirms at once. Run it with
//
//	go test -run x -bench Enqueue ./internal/forward/
func BenchmarkEnqueue(b *testing.B) {
	q, err := Open(b.TempDir(), func() Options { o := DefaultOptions(); o.Site = "bench"; return o }(), discardSink{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	pts := benchPoints()
	b.ReportAllocs()
	for b.Loop() {
		if err := q.Enqueue(context.Background(), pts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(pts))/b.Elapsed().Seconds(), "values/s")
}
