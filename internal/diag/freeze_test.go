package diag

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// freezeRig is a real store behind a real queue and tag table, with a
// producer updating every tag each millisecond until stopped.
type freezeRig struct {
	db    *store.DB
	q     *archive.Queue
	tab   *tag.Table
	ids   []tag.ID
	round atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
}

const rigT0 = int64(1_700_000_000_000)

func newFreezeRig(t *testing.T, tags int) *freezeRig {
	db, err := store.Open(t.TempDir(), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &freezeRig{db: db, stop: make(chan struct{})}
	r.q = archive.New(db, nil, archive.Options{MaxBatch: 500, Writers: 3})
	r.tab = tag.New(nil, tag.DefaultOptions(), r.q)
	for i := range tags {
		id, err := r.tab.Define(tag.Def{Name: fmt.Sprintf("f.t%02d", i), Archive: tag.ArchiveAll})
		if err != nil {
			t.Fatal(err)
		}
		r.ids = append(r.ids, id)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		batch := make([]tag.Sample, tags)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-tk.C:
			}
			n := r.round.Load()
			for i := range batch {
				batch[i] = tag.Sample{ID: r.ids[i], T: rigT0 + n, V: float64(n*100 + int64(i))}
			}
			r.tab.Update(batch)
			r.round.Add(1)
		}
	}()
	return r
}

// finish stops the producer, closes the queue and checks that every
// produced sample is in the store, in order, with its value.
func (r *freezeRig) finish(t *testing.T) {
	t.Helper()
	close(r.stop)
	r.wg.Wait()
	if err := r.q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rounds := r.round.Load()
	for i := range r.ids {
		got, err := r.db.Raw(fmt.Sprintf("f.t%02d", i), rigT0, rigT0+rounds, 0)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != rounds {
			t.Fatalf("tag %d: %d samples in the store, want %d", i, len(got), rounds)
		}
		for n, s := range got {
			if s.T != rigT0+int64(n) || s.V != float64(int64(n)*100+int64(i)) {
				t.Fatalf("tag %d sample %d = %+v", i, n, s)
			}
		}
	}
	if st := r.q.Stats(); st.Dropped != 0 {
		t.Fatalf("dropped %d", st.Dropped)
	}
}

func TestRunFreezeNothingLost(t *testing.T) {
	r := newFreezeRig(t, 10)
	time.Sleep(50 * time.Millisecond)
	var events []FreezeEvent
	sum, err := RunFreeze(context.Background(), r.q, FreezeOptions{
		Freeze: 400 * time.Millisecond, Watch: 10 * time.Second, Tick: 100 * time.Millisecond,
	}, func(ev FreezeEvent) error { events = append(events, ev); return nil })
	if err != nil {
		t.Fatal(err)
	}
	r.finish(t)
	if !sum.Drained || sum.Dropped != 0 || sum.Accumulated <= 0 || sum.DrainPerSec <= 0 {
		t.Fatalf("summary %+v", sum)
	}
	var frozen, drain int
	var lastPending int64 = -1
	for _, ev := range events {
		switch ev.Phase {
		case "frozen":
			frozen++
			// The queue only grows while frozen.
			if ev.Pending < lastPending {
				t.Fatalf("pending fell while frozen: %+v", events)
			}
			lastPending = ev.Pending
		case "drain":
			drain++
		default:
			t.Fatalf("phase %q", ev.Phase)
		}
	}
	if frozen < 3 || drain < 1 {
		t.Fatalf("%d frozen and %d drain events: %+v", frozen, drain, events)
	}
}

func TestFreezeHandlerStreams(t *testing.T) {
	r := newFreezeRig(t, 5)
	h := NewFreezeHandler(r.q, nil)
	h.tick = 100 * time.Millisecond
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, tc := range []struct{ body, want string }{
		{`{"seconds": 0}`, "seconds 0"},
		{`{"seconds": 1, "watch_seconds": -1}`, "watch_seconds"},
		{`{"seconds": 1, "bogus": 1}`, "unknown field"},
	} {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s: %s %q", tc.body, resp.Status, e.Error)
		}
	}

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"seconds": 0.3, "watch_seconds": 10}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	// A second FREEZE while one runs is refused.
	resp2, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"seconds": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusConflict {
		t.Errorf("second freeze: %s, want 409", resp2.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) < 3 || lines[0]["phase"] != "frozen" || lines[len(lines)-1]["phase"] != "summary" {
		t.Fatalf("lines %v", lines)
	}
	last := lines[len(lines)-1]
	if last["drained"] != true || last["dropped"] != 0.0 {
		t.Fatalf("summary %v", last)
	}
	r.finish(t)
}
