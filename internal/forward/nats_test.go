package forward

import (
	"context"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/testpeer"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsURL returns the test server's URL, or skips. Run the server with
//
//	nats-server -a 127.0.0.1 -p 4222 -js
//
// and PITH_TEST_NATS=nats://127.0.0.1:4222 go test ./internal/forward/
func natsURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("PITH_TEST_NATS")
	if u == "" {
		testpeer.Missing(tb, "PITH_TEST_NATS is not set (e.g. nats://127.0.0.1:4222 with a JetStream-enabled nats-server)")
	}
	return u
}

// testSite returns a site name of its own for one test, so that tests
// sharing the stream count only their own messages.
func testSite(tb testing.TB) string {
	return fmt.Sprintf("test%d", time.Now().UnixNano())
}

func newNATSSink(t testing.TB, url, site string) *NATSSink {
	t.Helper()
	o := DefaultNATSOptions()
	o.URL, o.Site = url, site
	o.Timeout = 5 * time.Second
	s, err := NewNATSSink(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// streamMessages reads every message of subject from the stream and
// purges them afterwards.
func streamMessages(t testing.TB, url, subject string) (ids []string, pts []model.Point) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, DefaultNATSStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.State.Subjects[subject])
	defer func() {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			t.Errorf("purge %s: %v", subject, err)
		}
	}()
	if n == 0 {
		return nil, nil
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	for len(ids) < n {
		batch, err := c.Fetch(n-len(ids), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			if m.Headers().Get(natsOpHeader) == natsOpDelete {
				continue
			}
			if _, pts, err = DecodeBatch(pts, m.Data()); err != nil {
				t.Fatal(err)
			}
		}
		if got == 0 {
			t.Fatalf("read %d of %d messages: %v", len(ids), n, batch.Error())
		}
	}
	return ids, pts
}

// checkUniqueIDs fails when a batch id occurs twice.
func checkUniqueIDs(t *testing.T, ids []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("batch %s is in the stream twice", id)
		}
		seen[id] = true
	}
}

func TestNATSInOrderOnce(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	sink := newNATSSink(t, url, site)
	defer sink.Close()
	h := openForwarder(t, t.TempDir(), testOptions(site), sink)
	h.write(0, 20000, 1000)
	h.drained()
	h.close()
	ids, pts := streamMessages(t, url, sink.Subject())
	if len(ids) != 20 {
		t.Errorf("stream holds %d messages, want 20 (one per store write)", len(ids))
	}
	checkUniqueIDs(t, ids)
	checkSeq(t, pts, 20000)
}

func TestNATSOutage(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "nats://" + l.Addr().String()
	l.Close()

	dir := t.TempDir()
	o := testOptions(site)
	down := newNATSSink(t, closed, site)
	h := openForwarder(t, dir, o, down)
	h.write(0, 10000, 1000)
	waitUntil(t, "failed sends", func() bool { return h.f.Stats().Errors >= 2 })
	if lag := h.lag(); lag < 10 {
		t.Errorf("follower lag during outage = %d records, want >= 10", lag)
	}
	if st := h.f.Stats(); st.OldestMs == 0 {
		t.Errorf("stats during outage = %+v, want the oldest value in flight", st)
	}
	h.close()
	up := newNATSSink(t, url, site)
	defer up.Close()
	h = openForwarder(t, dir, o, up)
	h.write(10000, 10000, 1000)
	h.drained()
	h.close()
	ids, pts := streamMessages(t, url, up.Subject())
	if len(ids) != 20 {
		t.Errorf("stream holds %d messages, want 20", len(ids))
	}
	checkUniqueIDs(t, ids)
	checkSeq(t, pts, 20000)
}

// crashSink passes the first n batches on, then publishes one more and
// never confirms it: the forwarder stops with it unacknowledged, as a
// crash after the publish and before the Ack leaves it.
type crashSink struct {
	Sink
	n    int
	sent atomic.Int32
}

func (s *crashSink) Send(ctx context.Context, b Batch) error {
	if int(s.sent.Load()) < s.n {
		s.sent.Add(1)
		return s.Sink.Send(ctx, b)
	}
	if err := s.Sink.Send(ctx, b); err != nil {
		return err
	}
	s.sent.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestNATSRestartMidBacklog: a forwarder stopped between a publish and
// its Ack sends that batch again after the restart, with the same ids,
// and the stream drops it: every point is in the stream once.
func TestNATSRestartMidBacklog(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	dir := t.TempDir()
	o := testOptions(site)
	o.BatchPoints = 3000
	first := newNATSSink(t, url, site)
	crash := &crashSink{Sink: first, n: 5}
	h := openForwarder(t, dir, o, crash)
	h.write(0, 30000, 1000)
	waitUntil(t, "the unconfirmed batch published", func() bool { return crash.sent.Load() > 5 })
	h.close()
	first.Close()

	sink := newNATSSink(t, url, site)
	defer sink.Close()
	h = openForwarder(t, dir, o, sink)
	h.drained()
	h.close()
	if sink.Duplicates() < 1 {
		t.Errorf("stream reported %d duplicates, want the messages of the unconfirmed batch", sink.Duplicates())
	}
	ids, pts := streamMessages(t, url, sink.Subject())
	if len(ids) != 30 {
		t.Errorf("stream holds %d messages, want 30", len(ids))
	}
	checkUniqueIDs(t, ids)
	checkSeq(t, pts, 30000)
}

// TestNATSDelete: a delete the store commits reaches the stream as a
// delete message, which Consume hands to its delete handler.
func TestNATSDelete(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	sink := newNATSSink(t, url, site)
	defer sink.Close()
	h := openForwarder(t, t.TempDir(), testOptions(site), sink)
	h.write(0, 30, 30)
	if _, err := h.db.Delete(context.Background(), "t1", 1_700_000_000_000, 1_700_000_010_000); err != nil {
		t.Fatal(err)
	}
	h.drained()
	h.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type del struct {
		site, tag string
		from, to  int64
	}
	dels := make(chan del, 1)
	durable := "del" + site
	done := make(chan error, 1)
	go func() {
		done <- Consume(ctx, url, []string{sink.Subject()}, durable, Handlers{
			Points: func(string, []model.Point) error { return nil },
			Delete: func(s, tag string, from, to int64) error {
				dels <- del{s, tag, from, to}
				return nil
			},
		}, nil)
	}()
	select {
	case d := <-dels:
		if want := (del{site, "t1", 1_700_000_000_000, 1_700_000_010_000}); d != want {
			t.Errorf("delete = %+v, want %+v", d, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no delete consumed")
	}
	cancel()
	<-done
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	js.DeleteConsumer(context.Background(), DefaultNATSStream, durable)
	streamMessages(t, url, sink.Subject()) // purge
}

func TestConsume(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	sink := newNATSSink(t, url, site)
	defer sink.Close()
	h := openForwarder(t, t.TempDir(), testOptions(site), sink)
	h.write(0, 5000, 1000)
	h.drained()
	h.close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []model.Point, 10)
	failed := false
	consume := func(s string, pts []model.Point) error {
		if s != site {
			t.Errorf("site = %q, want %q", s, site)
		}
		if !failed { // the first batch fails once and must come again
			failed = true
			return errors.New("disk full")
		}
		got <- slices.Clone(pts)
		return nil
	}
	durable := "test" + site
	done := make(chan error, 1)
	go func() { done <- Consume(ctx, url, []string{sink.Subject()}, durable, Handlers{Points: consume}, nil) }()
	var all []model.Point
	seen := map[int64]bool{}
	for len(seen) < 5000 {
		select {
		case pts := <-got:
			for _, p := range pts {
				seen[int64(p.V)] = true
			}
			all = append(all, pts...)
		case err := <-done:
			t.Fatalf("consume returned early: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("got %d of 5000 points", len(seen))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(all) != 5000 {
		t.Errorf("sink saw %d points, want 5000 (each batch acked once)", len(all))
	}
	// Every message is acknowledged: nothing pending on the durable.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	c, err := js.Consumer(context.Background(), DefaultNATSStream, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("consumer has %d unacked and %d pending messages", info.NumAckPending, info.NumPending)
	}
	js.DeleteConsumer(context.Background(), DefaultNATSStream, durable)
	streamMessages(t, url, sink.Subject()) // purge
}

// TestConsumeGroupUnderBulk: a group of consumed messages is stored as
// one write that stays a small write for the store (WAL and head), not a
// bulk load that writes a run file of its own and flushes the head at
// every group: a central Pith draining an edge's backlog paid for it.
func TestConsumeGroupUnderBulk(t *testing.T) {
	if most, bulk := consumeGroupPoints-1+natsMaxEntryPoints, store.DefaultOptions().BulkPoints; most > bulk {
		t.Fatalf("a consumed group holds up to %d points, past the store's BulkPoints %d", most, bulk)
	}
}
