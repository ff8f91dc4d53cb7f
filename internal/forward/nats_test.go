package forward

import (
	"context"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"net"
	"os"
	"slices"
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
	o := testOptions()
	o.Site = site
	q := openQueue(t, t.TempDir(), o, sink)
	enqueue(t, q, 0, 20000, 1000)
	waitUntil(t, "backlog sent", func() bool { return q.Stats().Backlog == 0 })
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	ids, pts := streamMessages(t, url, sink.Subject())
	if len(ids) != 20 {
		t.Errorf("stream holds %d messages, want 20", len(ids))
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
	o := testOptions()
	o.Site = site
	down := newNATSSink(t, closed, site)
	q := openQueue(t, dir, o, down)
	enqueue(t, q, 0, 10000, 1000)
	waitUntil(t, "failed sends", func() bool { return q.Stats().Errors >= 2 })
	if st := q.Stats(); st.Backlog != 10000 {
		t.Errorf("backlog during outage = %d, want 10000", st.Backlog)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	up := newNATSSink(t, url, site)
	defer up.Close()
	q = openQueue(t, dir, o, up)
	enqueue(t, q, 10000, 10000, 1000)
	waitUntil(t, "backlog sent", func() bool { return q.Stats().Backlog == 0 })
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	ids, pts := streamMessages(t, url, up.Subject())
	if len(ids) != 20 {
		t.Errorf("stream holds %d messages, want 20", len(ids))
	}
	checkUniqueIDs(t, ids)
	checkSeq(t, pts, 20000)
}

func TestNATSRestartMidBacklog(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	dir := t.TempDir()
	o := testOptions()
	o.Site = site
	o.CursorInterval = time.Hour // a crash loses the record of what was sent
	sink := newNATSSink(t, url, site)
	q := openQueue(t, dir, o, sink)
	enqueue(t, q, 0, 30000, 1000)
	waitUntil(t, "some batches sent", func() bool { return q.Stats().SentBatches >= 5 })
	q.abort()
	sink.Close()

	sink = newNATSSink(t, url, site)
	defer sink.Close()
	q = openQueue(t, dir, o, sink)
	waitUntil(t, "backlog sent", func() bool { return q.Stats().Backlog == 0 })
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if sink.Duplicates() < 5 {
		t.Errorf("stream reported %d duplicates, want the >= 5 batches resent after the crash", sink.Duplicates())
	}
	ids, pts := streamMessages(t, url, sink.Subject())
	if len(ids) != 30 {
		t.Errorf("stream holds %d messages, want 30", len(ids))
	}
	checkUniqueIDs(t, ids)
	checkSeq(t, pts, 30000)
}

func TestConsume(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	sink := newNATSSink(t, url, site)
	defer sink.Close()
	o := testOptions()
	o.Site = site
	q := openQueue(t, t.TempDir(), o, sink)
	enqueue(t, q, 0, 5000, 1000)
	waitUntil(t, "backlog sent", func() bool { return q.Stats().Backlog == 0 })
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

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
	go func() { done <- Consume(ctx, url, []string{sink.Subject()}, durable, consume, nil) }()
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
