package forward

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/testpeer"
)

// memDocs is a DocSource in memory.
type memDocs struct {
	mu   sync.Mutex
	docs map[string]Doc
}

func (m *memDocs) Docs() []Doc {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Doc
	for _, d := range m.docs {
		out = append(out, d)
	}
	return out
}

func (m *memDocs) set(d Doc) {
	m.mu.Lock()
	if d.JSON == nil {
		delete(m.docs, d.ID)
	} else {
		m.docs[d.ID] = d
	}
	m.mu.Unlock()
}

// privateNATS runs a JetStream nats-server of its own on a free port,
// which the test can kill and start again on the same storage.
type privateNATS struct {
	bin, dir, port string
	cmd            *exec.Cmd
}

func startPrivateNATS(t *testing.T) *privateNATS {
	natsURL(t) // the NATS tests run with the other peers
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nats-server"); err != nil {
			testpeer.Missing(t, "nats-server not installed")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	s := &privateNATS{bin: bin, dir: t.TempDir(), port: port}
	s.start(t)
	t.Cleanup(func() {
		if s.cmd != nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
	return s
}

func (s *privateNATS) url() string { return "nats://127.0.0.1:" + s.port }

func (s *privateNATS) start(t *testing.T) {
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", s.port, "-js", "-sd", filepath.Join(s.dir, "js"))
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if nc, err := nats.Connect(s.url()); err == nil {
			nc.Close()
			return
		}
	}
	t.Fatal("private nats-server did not start")
}

func (s *privateNATS) kill() {
	s.cmd.Process.Kill() // SIGKILL
	s.cmd.Wait()
	s.cmd = nil
}

// docMessages reads every message of subject in the stream, decoded.
func docMessages(t *testing.T, url, subject string) (ids []string, docs []Doc) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	for len(ids) < n {
		batch, err := c.Fetch(n-len(ids), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			d, err := decodeDoc(m.Headers(), m.Data())
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, d)
		}
	}
	return ids, docs
}

// TestDocPublisherOutage publishes documents to a private nats-server,
// kills it (SIGKILL) while documents change, restarts it, and checks that
// every version reached the stream once, in order, a restarted publisher
// sends nothing already confirmed, and a removed document goes as a
// tombstone.
func TestDocPublisherOutage(t *testing.T) {
	srv := startPrivateNATS(t)
	o := DefaultNATSOptions()
	o.URL, o.Site, o.Timeout = srv.url(), "dashsite", 2*time.Second
	state := filepath.Join(t.TempDir(), "fleet", "documents.json")
	src := &memDocs{docs: map[string]Doc{}}
	src.set(Doc{ID: "a", Version: 1, Updated: 100, JSON: []byte(`{"v":1}`)})
	open := func() *DocPublisher {
		p, err := NewDocPublisher(DocOptions{NATS: o, StateFile: state}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Register("dashboard", src)
		return p
	}
	ctx := context.Background()
	p := open()
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	srv.kill()
	src.set(Doc{ID: "a", Version: 2, Updated: 200, JSON: []byte(`{"v":2}`)})
	src.set(Doc{ID: "b", Version: 1, Updated: 210, JSON: []byte(`{"b":1}`)})
	if err := p.Sync(ctx); err == nil {
		t.Fatal("sync with the server killed returned nil")
	}
	srv.start(t)
	// The client reconnects on its own; until then a publish fails and is
	// retried, as Run does every few seconds.
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := p.Sync(ctx)
		if err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("sync after the restart: %v", err)
		}
	}
	p.sink.Close()
	// A new publisher on the same state (a restarted Pith) has nothing to send.
	p = open()
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	src.set(Doc{ID: "a"}) // deleted
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	p.sink.Close()
	ids, docs := docMessages(t, srv.url(), "pith.dashsite.samples")
	var got []string
	for _, d := range docs {
		got = append(got, fmt.Sprintf("%s/%s v%d %s deleted=%v", d.Kind, d.ID, d.Version, d.JSON, d.Deleted))
	}
	want := []string{`dashboard/a v1 {"v":1} deleted=false`, `dashboard/a v2 {"v":2} deleted=false`, `dashboard/b v1 {"b":1} deleted=false`, `dashboard/a v2  deleted=true`}
	// a v2 and b v1 went in one Sync: their order is the source's.
	slices.Sort(got[1:3])
	if !slices.Equal(got, want) {
		t.Fatalf("stream holds\n%q\nwant\n%q", got, want)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("message id %s twice", id)
		}
		seen[id] = true
	}
}

// FuzzDecodeDoc: a document message from the network never panics, and a
// decoded one has safe names and JSON.
func FuzzDecodeDoc(f *testing.F) {
	f.Add("dashboard", "plant", "3", "1700000000000", "", []byte(`{"title":"x"}`))
	f.Add("dashboard", "../etc", "1", "1", "", []byte(`{}`))
	f.Add("picture", "p1", "2", "5", "1", []byte(nil))
	f.Fuzz(func(t *testing.T, kind, id, ver, upd, del string, data []byte) {
		h := nats.Header{}
		h.Set(natsDocKindHeader, kind)
		h.Set(natsDocIDHeader, id)
		h.Set(natsDocVerHeader, ver)
		h.Set(natsDocTimeHeader, upd)
		h.Set(natsDocDeleted, del)
		d, err := decodeDoc(h, data)
		if err != nil {
			return
		}
		if !ValidDocName(d.Kind) || !ValidDocName(d.ID) || (!d.Deleted && d.JSON == nil && len(data) > 0) {
			t.Fatalf("decoded %+v", d)
		}
	})
}
