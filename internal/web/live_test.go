package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

var _ Table = (*tag.Table)(nil)
var _ Source = (*store.DB)(nil)
var _ History = (*store.DB)(nil)

// event is one parsed server-sent event of the live stream.
type event struct {
	name   string
	now    int64
	values [][4]any
}

// readEvents parses events from a live stream and sends them on a channel
// until the body ends.
func readEvents(t *testing.T, resp *http.Response) <-chan event {
	ch := make(chan event, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				var d struct {
					Now    int64    `json:"now"`
					Values [][4]any `json:"values"`
				}
				if err := json.Unmarshal([]byte(line[len("data: "):]), &d); err != nil {
					t.Errorf("bad event data %q: %v", line, err)
					return
				}
				ch <- event{name, d.Now, d.Values}
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan event) event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return event{}
}

func openLive(t *testing.T, s *Server, query string) (*http.Response, func()) {
	t.Helper()
	srv := httptest.NewServer(s.LiveHandler())
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/live"+query, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	return resp, func() { s.Close(); resp.Body.Close(); srv.Close() }
}

func TestLivePush(t *testing.T) {
	tb := tag.New(nil, tag.DefaultOptions(), nil)
	a, _ := tb.Define(tag.Def{Name: "a.x"})
	b, _ := tb.Define(tag.Def{Name: "b.<i>y</i>"})
	c, _ := tb.Define(tag.Def{Name: "c.never"})
	tb.Update([]tag.Sample{{ID: a, T: 1000, V: 1}, {ID: b, T: 1000, V: 2, Q: model.QualityUncertain}})
	tb.Update([]tag.Sample{{ID: c, T: 900, Q: model.QualityBad, Hold: true}})

	opts := DefaultOptions()
	opts.Table = tb
	opts.FlushInterval = 10 * time.Millisecond
	s := newTestServer(t, opts)
	resp, done := openLive(t, s, "")
	defer done()
	ch := readEvents(t, resp)

	snap := next(t, ch)
	if snap.name != "snapshot" || len(snap.values) != 3 {
		t.Fatalf("first event %+v, want a snapshot of 3 tags", snap)
	}
	want := [][4]any{{"a.x", 1000.0, 1.0, "good"}, {"b.<i>y</i>", 1000.0, 2.0, "uncertain"}, {"c.never", 900.0, nil, "bad"}}
	for i, w := range want {
		if snap.values[i] != w {
			t.Errorf("snapshot[%d] = %v, want %v", i, snap.values[i], w)
		}
	}
	if now := time.Now().UnixMilli(); snap.now < now-10_000 || snap.now > now+1000 {
		t.Errorf("now = %d, not the server's clock", snap.now)
	}
	// Many changes of one tag arrive coalesced to the newest.
	for i := range 50 {
		tb.Update([]tag.Sample{{ID: a, T: 2000 + int64(i), V: float64(i)}})
	}
	got := map[string]float64{}
	for got["a.x"] != 49 {
		e := next(t, ch)
		if e.name != "update" {
			t.Fatalf("event %q, want update", e.name)
		}
		for _, v := range e.values {
			got[v[0].(string)] = v[2].(float64)
		}
	}
	if len(got) != 1 {
		t.Errorf("updates named %v, want only a.x", got)
	}
}

func TestLiveFilterAndClose(t *testing.T) {
	tb := tag.New(nil, tag.DefaultOptions(), nil)
	a, _ := tb.Define(tag.Def{Name: "a"})
	b, _ := tb.Define(tag.Def{Name: "b"})
	opts := DefaultOptions()
	opts.Table = tb
	opts.FlushInterval = time.Millisecond
	s := newTestServer(t, opts)
	resp, done := openLive(t, s, "?tag=b")
	defer done()
	ch := readEvents(t, resp)
	if e := next(t, ch); len(e.values) != 1 || e.values[0][0] != "b" {
		t.Fatalf("snapshot %v, want only b", e.values)
	}
	tb.Update([]tag.Sample{{ID: a, T: 1, V: 1}})
	tb.Update([]tag.Sample{{ID: b, T: 2, V: 5}})
	if e := next(t, ch); len(e.values) != 1 || e.values[0][0] != "b" || e.values[0][2] != 5.0 {
		t.Fatalf("update %v, want only b = 5", e.values)
	}
	// Close ends the stream, so a graceful HTTP shutdown is not held up.
	s.Close()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream still open after Close")
	}
}

// fakeSource is a Source whose values the test changes.
type fakeSource struct {
	mu   sync.Mutex
	vals []store.Latest
	err  error
}

func (f *fakeSource) Latest(tags ...string) ([]store.Latest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if len(tags) == 0 {
		return append([]store.Latest(nil), f.vals...), nil
	}
	var out []store.Latest
	for _, v := range f.vals {
		for _, n := range tags {
			if v.Tag == n {
				out = append(out, v)
			}
		}
	}
	if len(out) == 0 {
		return nil, store.ErrUnknownTag
	}
	return out, nil
}

func (f *fakeSource) set(i int, v float64) {
	f.mu.Lock()
	f.vals[i].V, f.vals[i].T = v, f.vals[i].T+1
	f.mu.Unlock()
}

func TestLivePoll(t *testing.T) {
	src := &fakeSource{vals: []store.Latest{{Tag: "p", Sample: model.Sample{T: 1, V: 1}}, {Tag: "q", Sample: model.Sample{T: 1, V: 2}}}}
	opts := DefaultOptions()
	opts.Source = src
	opts.PollInterval = 5 * time.Millisecond
	s := newTestServer(t, opts)
	resp, done := openLive(t, s, "")
	defer done()
	ch := readEvents(t, resp)
	if e := next(t, ch); e.name != "snapshot" || len(e.values) != 2 {
		t.Fatalf("snapshot %+v", e)
	}
	src.set(1, 7)
	e := next(t, ch)
	if e.name != "update" || len(e.values) != 1 || e.values[0][0] != "q" || e.values[0][2] != 7.0 {
		t.Fatalf("update %+v, want only q = 7", e)
	}
}

func TestLiveRefusals(t *testing.T) {
	if w := get(t, newTestServer(t, DefaultOptions()).LiveHandler(), "/api/v1/live", nil); w.Code != http.StatusNotFound {
		t.Errorf("no source: status %d, want 404", w.Code)
	}
	opts := DefaultOptions()
	opts.Source = &fakeSource{}
	opts.MaxStreams = 1
	s := newTestServer(t, opts)
	s.streams <- struct{}{} // the one slot is taken
	if w := get(t, s.LiveHandler(), "/api/v1/live", nil); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("full: status %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	<-s.streams
	r := httptest.NewRequest(http.MethodPost, "/api/v1/live", nil)
	w := httptest.NewRecorder()
	s.LiveHandler().ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d", w.Code)
	}
	// A source error ends the stream before any event.
	opts.Source = &fakeSource{err: errors.New("disk on fire")}
	s2 := newTestServer(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r = httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/live", nil)
	w = httptest.NewRecorder()
	s2.LiveHandler().ServeHTTP(w, r)
	if strings.Contains(w.Body.String(), "event:") {
		t.Errorf("events sent despite the source error: %q", w.Body.String())
	}
}

// TestLivePushSnapshotFromStore: with a tag table pushing changes, the
// snapshot still holds the tags only the store knows (values imported
// before a restart), and the table's value wins for tags in both.
func TestLivePushSnapshotFromStore(t *testing.T) {
	tb := tag.New(nil, tag.DefaultOptions(), nil)
	a, _ := tb.Define(tag.Def{Name: "a.x"})
	tb.Update([]tag.Sample{{ID: a, T: 2000, V: 5}})
	src := &fakeSource{vals: []store.Latest{{Tag: "a.x", Sample: model.Sample{T: 1000, V: 1}}, {Tag: "old.y", Sample: model.Sample{T: 500, V: 3}}}}
	opts := DefaultOptions()
	opts.Table, opts.Source = tb, src
	s := newTestServer(t, opts)
	resp, done := openLive(t, s, "?tag=a.x&tag=old.y")
	defer done()
	snap := next(t, readEvents(t, resp))
	got := map[string]any{}
	for _, v := range snap.values {
		got[v[0].(string)] = v[2]
	}
	if snap.name != "snapshot" || len(got) != 2 || got["a.x"] != 5.0 || got["old.y"] != 3.0 {
		t.Fatalf("snapshot %+v, want a.x = 5 (table) and old.y = 3 (store)", snap)
	}
}
