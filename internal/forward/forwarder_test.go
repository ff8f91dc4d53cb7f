package forward

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// TestForwarderInOrderOnce: every point written reaches the sink once, in
// order, with entry ids that never repeat.
func TestForwarderInOrderOnce(t *testing.T) {
	s := &fakeSink{}
	h := openForwarder(t, t.TempDir(), testOptions("s1"), s)
	h.write(0, 5000, 100)
	h.drained()
	ids, pts := s.got()
	checkSeq(t, pts, 5000)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("entry id %s sent twice", id)
		}
		seen[id] = true
	}
	if st := h.f.Stats(); st.Sent != 5000 || st.Dropped != 0 {
		t.Errorf("stats = %+v, want 5000 sent, none dropped", st)
	}
	// Once the log has nothing more, the last batch is acknowledged
	// within AckInterval: the follower's cursor is at the end.
	waitUntil(t, "the last batch acknowledged", func() bool { return h.lag() == 0 })
}

// TestForwarderOutageAndRestart: values written while the upstream is
// down, and across a restart, wait in the store's log and all arrive once
// it is back; a batch neither confirmed nor acknowledged comes again with
// the same entry ids.
func TestForwarderOutageAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := &fakeSink{down: true}
	h := openForwarder(t, dir, testOptions("s1"), s)
	h.write(0, 1000, 100)
	waitUntil(t, "failed sends", func() bool { return h.f.Stats().Errors >= 2 })
	if lag := h.lag(); lag < 10 {
		t.Errorf("lag during the outage = %d records, want >= 10", lag)
	}
	h.close()
	s.setDown(false)
	h = openForwarder(t, dir, testOptions("s1"), s)
	h.write(1000, 1000, 100)
	h.drained()
	_, pts := s.got()
	checkSeq(t, pts, 2000)
}

// TestForwarderDeletes: a committed delete reaches the sink in commit
// order, after the points written before it.
func TestForwarderDeletes(t *testing.T) {
	s := &fakeSink{}
	h := openForwarder(t, t.TempDir(), testOptions("s1"), s)
	h.write(0, 30, 30)
	if _, err := h.db.Delete(context.Background(), "t0", 0, 1_800_000_000_000); err != nil {
		t.Fatal(err)
	}
	h.write(30, 3, 3)
	h.drained()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.deletes) != 1 || s.deletes[0] != (Delete{Tag: "t0", From: 0, To: 1_800_000_000_000}) {
		t.Fatalf("deletes = %+v", s.deletes)
	}
	if len(s.ids) != 3 || s.ids[0] >= s.ids[1] && len(s.ids[0]) == len(s.ids[1]) {
		t.Errorf("entries = %v, want points, delete, points", s.ids)
	}
	if st := h.f.Stats(); st.Deletes != 1 {
		t.Errorf("stats = %+v, want 1 delete", st)
	}
}

// TestForwarderRelease: while the upstream fails, a batch past MaxAge
// (its newest value) or past MaxBytes (the log lag) is released unsent
// and counted as dropped; newer ones wait.
func TestForwarderRelease(t *testing.T) {
	for _, tt := range []struct {
		name  string
		set   func(*Options)
		lag   int64
		old   bool // the values are a day old
		wantD bool
	}{
		{"young values wait", func(o *Options) { o.MaxAge = time.Hour }, 0, false, false},
		{"old values released", func(o *Options) { o.MaxAge = time.Hour }, 0, true, true},
		{"lag under max_bytes waits", func(o *Options) { o.MaxBytes = 1 << 20 }, 1 << 10, false, false},
		{"lag past max_bytes released", func(o *Options) { o.MaxBytes = 1 << 20 }, 2 << 20, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &fakeSink{down: true}
			o := testOptions("s1")
			tt.set(&o)
			h := openForwarder(t, t.TempDir(), o, s)
			h.f.SetLag(tt.lag)
			ts := time.Now().UnixMilli()
			if tt.old {
				ts -= 24 * time.Hour.Milliseconds()
			}
			if err := h.db.Write(context.Background(), []model.Point{{Tag: "a", T: ts, V: 1}}); err != nil {
				t.Fatal(err)
			}
			if tt.wantD {
				h.drained()
				if st := h.f.Stats(); st.Dropped != 1 || st.Sent != 0 {
					t.Errorf("stats = %+v, want 1 dropped", st)
				}
				return
			}
			waitUntil(t, "failed sends", func() bool { return h.f.Stats().Errors >= 3 })
			if st := h.f.Stats(); st.Dropped != 0 || h.lag() == 0 {
				t.Errorf("stats = %+v, lag %d: want nothing dropped, the value waiting", st, h.lag())
			}
		})
	}
}

// TestForwarderPoison: a batch the upstream refuses is set aside in the
// poison directory, counted as dropped, and the next ones go on.
func TestForwarderPoison(t *testing.T) {
	dir := t.TempDir()
	// The first record of a new store is at segment 1, offset 16.
	s := &fakeSink{refuse: map[string]bool{"s1-1-16": true}}
	o := testOptions("s1")
	o.PoisonDir = filepath.Join(dir, "poison")
	h := openForwarder(t, filepath.Join(dir, "db"), o, s)
	h.write(0, 10, 10)
	h.write(10, 10, 10)
	h.drained()
	if st := h.f.Stats(); st.Dropped != 10 || st.Sent != 10 {
		t.Errorf("stats = %+v, want the 10 refused points dropped, 10 sent", st)
	}
	b, err := os.ReadFile(filepath.Join(o.PoisonDir, "s1-1-16.batch"))
	if err != nil {
		t.Fatal(err)
	}
	if _, pts, err := DecodeBatch(nil, b); err != nil || len(pts) != 10 {
		t.Errorf("poison batch: %d points, %v", len(pts), err)
	}
}

// wakingSink is a fakeSink that says when its upstream is back (Waker).
type wakingSink struct {
	*fakeSink
	woken chan struct{}
}

func (s wakingSink) Woken() <-chan struct{} { return s.woken }

// TestForwarderWokenByReconnect: a sink whose client reconnects by itself
// (NATS) is tried again as soon as it says its upstream is back, not at
// the end of the forwarder's wait between retries.
func TestForwarderWokenByReconnect(t *testing.T) {
	s := wakingSink{fakeSink: &fakeSink{down: true}, woken: make(chan struct{}, 1)}
	o := testOptions("s1")
	o.RetryMin, o.RetryMax = time.Hour, time.Hour
	h := openForwarder(t, t.TempDir(), o, s)
	h.write(0, 100, 100)
	waitUntil(t, "a failed send", func() bool { return h.f.Stats().Errors >= 1 })
	s.setDown(false)
	s.woken <- struct{}{}
	waitUntil(t, "the send after the wake-up", func() bool {
		_, pts := s.got()
		return len(pts) == 100
	})
}
