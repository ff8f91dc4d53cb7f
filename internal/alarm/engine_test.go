package alarm

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/tag"
)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// rig is an engine over a real tag table driven by a fake clock: tests
// feed samples with set and move time with at.
type rig struct {
	t   *testing.T
	clk *fakeClock
	tab *tag.Table
	e   *Engine
	ids map[string]tag.ID
	sub *tag.Subscription
}

func newRig(t *testing.T, dir string, defs ...Def) *rig {
	t.Helper()
	r := &rig{t: t, clk: &fakeClock{t: t0}, tab: tag.New(nil, tag.DefaultOptions(), nil), ids: map[string]tag.ID{}}
	for _, d := range defs {
		if d.Tag == "" {
			continue
		}
		id, err := r.tab.Define(tag.Def{Name: d.Tag})
		if err != nil {
			t.Fatal(err)
		}
		r.ids[d.Tag] = id
	}
	var hist *Log
	if dir != "" {
		var err error
		if hist, err = OpenLog(dir, 1<<20); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hist.Close() })
	}
	opts := DefaultOptions()
	opts.Clock = r.clk
	e, err := New(defs, hist, r.tab, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	r.sub = r.tab.Subscribe(tag.SubOptions{Name: "test", Mode: tag.Queue})
	return r
}

// at moves the clock to t0+ms and ticks.
func (r *rig) at(ms int64) {
	r.clk.t = t0.Add(time.Duration(ms) * time.Millisecond)
	r.e.Tick(r.clk.t)
}

// set writes a sample at t0+ms and lets the engine observe it.
func (r *rig) set(name string, ms int64, v float64, q model.Quality) {
	r.clk.t = t0.Add(time.Duration(ms) * time.Millisecond)
	r.tab.Update([]tag.Sample{{ID: r.ids[name], T: r.clk.t.UnixMilli(), V: v, Q: q}})
	r.e.Observe(r.sub.Take(nil), r.clk.t)
	r.e.Tick(r.clk.t)
}

func (r *rig) state(name string) string {
	for _, s := range r.e.All() {
		if s.Name == name {
			return s.State
		}
	}
	r.t.Fatalf("no alarm %q", name)
	return ""
}

// step is one action of a table test: a sample (tick false) or a clock
// move (tick true) at ms, and the state expected after it.
type step struct {
	ms   int64
	tick bool
	v    float64
	q    model.Quality
	want string
}

func TestLimitAlarms(t *testing.T) {
	tests := []struct {
		name  string
		def   Def
		steps []step
	}{
		{"hi no delay", Def{Kind: KindHi, Limit: 80}, []step{
			{ms: 0, v: 79, want: "normal"},
			{ms: 10, v: 80, want: "normal"}, // not above
			{ms: 20, v: 80.1, want: "active"},
			{ms: 30, v: 70, want: "cleared"},
		}},
		{"hi on delay", Def{Kind: KindHi, Limit: 80, OnDelay: time.Second}, []step{
			{ms: 0, v: 90, want: "normal"},
			{ms: 999, tick: true, want: "normal"},
			{ms: 1000, tick: true, want: "active"},
		}},
		{"hi on delay interrupted", Def{Kind: KindHi, Limit: 80, OnDelay: time.Second}, []step{
			{ms: 0, v: 90, want: "normal"},
			{ms: 500, v: 70, want: "normal"}, // back below: the delay restarts
			{ms: 600, v: 90, want: "normal"},
			{ms: 1500, tick: true, want: "normal"},
			{ms: 1600, tick: true, want: "active"},
		}},
		{"hi deadband", Def{Kind: KindHi, Limit: 80, Deadband: 5}, []step{
			{ms: 0, v: 81, want: "active"},
			{ms: 10, v: 79, want: "active"}, // inside the deadband
			{ms: 20, v: 75.5, want: "active"},
			{ms: 30, v: 75, want: "cleared"}, // at limit - deadband
			{ms: 40, v: 79, want: "cleared"}, // below the limit: not raised again
			{ms: 50, v: 80.5, want: "active"},
		}},
		{"hi off delay", Def{Kind: KindHi, Limit: 80, OffDelay: 2 * time.Second}, []step{
			{ms: 0, v: 90, want: "active"},
			{ms: 100, v: 70, want: "active"},
			{ms: 1000, v: 85, want: "active"}, // back above: the off delay restarts
			{ms: 1100, v: 70, want: "active"},
			{ms: 3099, tick: true, want: "active"},
			{ms: 3100, tick: true, want: "cleared"},
		}},
		{"lolo deadband and delays", Def{Kind: KindLoLo, Limit: 10, Deadband: 1, OnDelay: 100 * time.Millisecond, OffDelay: 100 * time.Millisecond}, []step{
			{ms: 0, v: 9, want: "normal"},
			{ms: 100, tick: true, want: "active"},
			{ms: 150, v: 10.5, want: "active"}, // in the deadband: still low
			{ms: 300, tick: true, want: "active"},
			{ms: 310, v: 11, want: "active"}, // out, off delay running
			{ms: 409, tick: true, want: "active"},
			{ms: 410, tick: true, want: "cleared"},
		}},
		{"lo bad quality holds", Def{Kind: KindLo, Limit: 10, OnDelay: time.Second}, []step{
			{ms: 0, v: 5, want: "normal"},
			{ms: 500, v: 5, q: model.QualityBad, want: "normal"}, // no judgement: delay reset
			{ms: 1200, tick: true, want: "normal"},
			{ms: 1300, v: 4, want: "normal"},
			{ms: 2300, tick: true, want: "active"},
		}},
		{"state", Def{Kind: KindState, Value: 1, OnDelay: 50 * time.Millisecond}, []step{
			{ms: 0, v: 0, want: "normal"},
			{ms: 10, v: 1, want: "normal"},
			{ms: 60, tick: true, want: "active"},
			{ms: 70, v: 0, want: "cleared"},
		}},
		{"comm", Def{Kind: KindComm, OnDelay: 2 * time.Second}, []step{
			{ms: 0, v: 1, want: "normal"},
			{ms: 1000, v: 0, want: "normal"},
			{ms: 3000, tick: true, want: "active"},
			{ms: 3500, v: 1, want: "cleared"},
			{ms: 4000, v: 1, q: model.QualityBad, want: "cleared"}, // bad comm: pending again
			{ms: 6000, tick: true, want: "active"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.def.Name, tc.def.Tag = "a", "x.v"
			r := newRig(t, "", tc.def)
			for i, s := range tc.steps {
				if s.tick {
					r.at(s.ms)
				} else {
					r.set("x.v", s.ms, s.v, s.q)
				}
				if got := r.state("a"); got != s.want {
					t.Fatalf("step %d (%+v): state %s, want %s", i, s, got, s.want)
				}
			}
		})
	}
}

// TestDelayDeadlineExact checks the target "raised within one scan of its
// delay": Tick reports the delay's deadline, and a tick at that deadline
// raises the alarm with that time.
func TestDelayDeadlineExact(t *testing.T) {
	r := newRig(t, "", Def{Name: "a", Kind: KindHi, Tag: "x.v", Limit: 1, OnDelay: 1500 * time.Millisecond})
	r.set("x.v", 0, 5, model.QualityGood)
	next := r.e.Tick(r.clk.t)
	if want := t0.Add(1500 * time.Millisecond); !next.Equal(want) {
		t.Fatalf("next deadline %v, want %v", next, want)
	}
	r.at(1500)
	st := r.e.Current()
	if len(st) != 1 || st[0].Raised != t0.Add(1500*time.Millisecond).UnixMilli() {
		t.Fatalf("current = %+v", st)
	}
}

func TestStaleAlarm(t *testing.T) {
	r := newRig(t, "", Def{Name: "s", Kind: KindStale, Tag: "x.v", MaxAge: 10 * time.Second})
	r.at(0)
	if got := r.state("s"); got != "normal" {
		t.Fatal(got)
	}
	r.at(10_001) // never seen since start
	if got := r.state("s"); got != "active" {
		t.Fatalf("never-seen tag: %s", got)
	}
	r.set("x.v", 11_000, 1, model.QualityGood)
	if got := r.state("s"); got != "cleared" {
		t.Fatalf("after a sample: %s", got)
	}
	// Same value again: no change event, but the table's time moves, so
	// the tag is not stale.
	r.set("x.v", 20_000, 1, model.QualityGood)
	r.at(29_000)
	if got := r.state("s"); got != "cleared" {
		t.Fatalf("steady updates: %s", got)
	}
	if next := r.e.Tick(r.clk.t); !next.Equal(time.UnixMilli(t0.Add(30_001 * time.Millisecond).UnixMilli())) {
		t.Fatalf("stale deadline %v", next)
	}
	r.at(30_001)
	if got := r.state("s"); got != "active" {
		t.Fatalf("after max_age: %s", got)
	}
}

func TestAckLogAndRestart(t *testing.T) {
	dir := t.TempDir()
	def := Def{Name: "hi", Kind: KindHi, Tag: "x.v", Limit: 10, Message: "too hot"}
	r := newRig(t, dir, def)
	if _, err := r.e.Ack("hi", "bob"); err == nil {
		t.Fatal("ack of a normal alarm succeeded")
	}
	if _, err := r.e.Ack("nope", "bob"); err == nil {
		t.Fatal("ack of an unknown alarm succeeded")
	}
	r.set("x.v", 0, 20, model.QualityGood)
	st, err := r.e.Ack("hi", "bob")
	if err != nil || st.State != "acknowledged" || st.AckedBy != "bob" {
		t.Fatalf("ack = %+v, %v", st, err)
	}
	r.set("x.v", 100, 5, model.QualityGood) // acknowledged and cleared: normal
	if got := r.state("hi"); got != "normal" {
		t.Fatal(got)
	}
	r.set("x.v", 200, 30, model.QualityGood) // raised again, left unacknowledged
	r.e.Set("write.plc.heater", true, "write refused")

	evs, err := r.e.History(math.MinInt64, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Alarm+":"+ev.Event+":"+ev.State)
	}
	want := []string{"hi:raised:active", "hi:acknowledged:acknowledged", "hi:cleared:normal",
		"hi:raised:active", "write.plc.heater:raised:active"}
	if len(got) != len(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] || evs[i].Seq != uint64(i+1) {
			t.Fatalf("history %v (seq %d), want %v", got, evs[i].Seq, want)
		}
	}
	if evs[1].Who != "bob" || evs[0].Value == nil || *evs[0].Value != 20 {
		t.Errorf("event fields: %+v", evs[:2])
	}
	if h, _ := r.e.History(t0.Add(150*time.Millisecond).UnixMilli(), math.MaxInt64, 1); len(h) != 1 || h[0].Alarm != "write.plc.heater" {
		t.Errorf("history window+limit = %+v", h)
	}

	// A restart restores both the active limit alarm and the external one.
	r2 := newRig(t, dir, def)
	cur := r2.e.Current()
	if len(cur) != 2 {
		t.Fatalf("after restart: %+v", cur)
	}
	r2.e.Set("write.plc.heater", false, "")
	if _, err := r2.e.Ack("write.plc.heater", "ann"); err != nil {
		t.Fatal(err)
	}
	r2.set("x.v", 300, 1, model.QualityGood)
	if evs, _ := r2.e.History(math.MinInt64, math.MaxInt64, 0); len(evs) != 8 || evs[7].Seq != 8 {
		t.Fatalf("after restart history has %d events: %+v", len(evs), evs)
	}
}

func TestLogRotationAndTornLine(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := l.Append(Event{Seq: uint64(i + 1), T: int64(i), Alarm: "a", Event: EventRaised, State: "active"}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	// A torn write at the end of the file.
	if err := appendRaw(filepath.Join(dir, logName), `{"seq":101,"t":100,"alar`); err != nil {
		t.Fatal(err)
	}
	l, err = OpenLog(dir, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Append(Event{Seq: 101, T: 100, Alarm: "a", Event: EventCleared, State: "cleared"}); err != nil {
		t.Fatal(err)
	}
	var n int
	var last int64 = -1
	skipped, err := l.Read(math.MinInt64, math.MaxInt64, func(ev Event) {
		if ev.T <= last {
			t.Fatalf("out of order: %d after %d", ev.T, last)
		}
		last = ev.T
		n++
	})
	if err != nil || skipped != 1 {
		t.Fatalf("read: skipped %d, %v", skipped, err)
	}
	if n == 0 || n >= 100 || last != 100 {
		t.Fatalf("after rotation read %d events ending at %d; want the newest ones", n, last)
	}
}

func appendRaw(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}

// TestPushedValues checks that values of the push road (Table.Write, here
// its second half Stored) reach alarms through the same subscription as
// acquired ones, a late one changing nothing.
func TestPushedValues(t *testing.T) {
	r := newRig(t, "", Def{Name: "p", Kind: KindLo, Tag: "pushed.v", Limit: 10, OnDelay: time.Second},
		Def{Name: "s", Kind: KindStale, Tag: "pushed.v", MaxAge: 5 * time.Second})
	ms := func(d int64) int64 { return t0.UnixMilli() + d }
	push := func(pts ...model.Point) {
		r.tab.Stored(pts, "push")
		r.e.Observe(r.sub.Take(nil), r.clk.t)
	}
	push(model.Point{Tag: "other", T: ms(0), V: 1}, model.Point{Tag: "pushed.v", T: ms(0), V: 5})
	r.at(999)
	if got := r.state("p"); got != "normal" {
		t.Fatal(got)
	}
	push(model.Point{Tag: "pushed.v", T: ms(-100), V: 50}) // late: ignored
	r.at(1000)
	if got := r.state("p"); got != "active" {
		t.Fatalf("pushed low value: %s", got)
	}
	r.at(5001)
	if got := r.state("s"); got != "active" {
		t.Fatalf("pushed tag gone quiet: %s", got)
	}
	r.clk.t = t0.Add(5100 * time.Millisecond)
	push(model.Point{Tag: "pushed.v", T: ms(5100), V: 50})
	r.e.Tick(r.clk.t)
	if r.state("p") != "cleared" || r.state("s") != "cleared" {
		t.Fatalf("after a good push: %s %s", r.state("p"), r.state("s"))
	}
}

func TestReload(t *testing.T) {
	r := newRig(t, "", Def{Name: "a", Kind: KindHi, Tag: "x.v", Limit: 10}, Def{Name: "b", Kind: KindLo, Tag: "x.v", Limit: 0})
	r.set("x.v", 0, 20, model.QualityGood)
	r.e.Set("write.y", true, "failed")
	if r.state("a") != "active" {
		t.Fatal(r.state("a"))
	}
	// a keeps its state under a new limit and message; b is dropped; c is new.
	err := r.e.Reload([]Def{{Name: "a", Kind: KindHi, Tag: "x.v", Limit: 15, Message: "new"}, {Name: "c", Kind: KindHi, Tag: "x.v", Limit: 30}})
	if err != nil {
		t.Fatal(err)
	}
	if r.state("a") != "active" || r.state("c") != "normal" || r.state("write.y") != "active" {
		t.Fatalf("after reload: a %s, c %s, write.y %s", r.state("a"), r.state("c"), r.state("write.y"))
	}
	for _, s := range r.e.All() {
		if s.Name == "b" {
			t.Fatal("removed alarm still listed")
		}
	}
	r.set("x.v", 10, 14, model.QualityGood) // below the new limit
	if r.state("a") != "cleared" {
		t.Fatalf("new limit not applied: %s", r.state("a"))
	}
	r.set("x.v", 20, 31, model.QualityGood)
	if r.state("c") != "active" {
		t.Fatalf("new alarm not watching: %s", r.state("c"))
	}
	if err := r.e.Reload([]Def{{Name: "a", Kind: KindHi}}); err == nil {
		t.Fatal("alarm without tag accepted")
	}
}

// countNotifier counts the events it is handed.
type countNotifier struct{ n atomic.Int64 }

func (c *countNotifier) Name() string                        { return "count" }
func (c *countNotifier) Notify(context.Context, Event) error { c.n.Add(1); return nil }

type unmutedNotifier struct{ countNotifier }

func (*unmutedNotifier) Unmuted() {}

// TestMute: a muted engine keeps judging (its alarm states move) but
// hands events to the Unmuted notifiers only; restored, it notifies again
// without resending what happened while muted.
func TestMute(t *testing.T) {
	r := newRig(t, "", Def{Name: "hi", Kind: KindHi, Tag: "x", Limit: 10})
	out, pair := &countNotifier{}, &unmutedNotifier{}
	for _, n := range []Notifier{out, pair} {
		q := &notifyQueue{n: n, ch: make(chan queued, 8)}
		_, q.always = n.(Unmuted)
		r.e.queues = append(r.e.queues, q)
	}
	drain := func() {
		for _, q := range r.e.queues {
			for len(q.ch) > 0 {
				_ = q.n.Notify(context.Background(), (<-q.ch).ev)
			}
		}
	}
	r.e.Mute(true)
	r.set("x", 1000, 20, model.QualityGood)
	if _, err := r.e.Ack("hi", "op"); err != nil {
		t.Fatal(err)
	}
	drain()
	if st := r.state("hi"); st != "acknowledged" || out.n.Load() != 0 || pair.n.Load() != 2 {
		t.Fatalf("muted: state %s, notified %d (outside) %d (pair); want acknowledged, 0, 2", st, out.n.Load(), pair.n.Load())
	}
	r.e.Mute(false)
	r.set("x", 2000, 0, model.QualityGood)
	drain()
	if out.n.Load() != 1 || pair.n.Load() != 3 {
		t.Fatalf("restored: notified %d (outside) %d (pair); want 1, 3", out.n.Load(), pair.n.Load())
	}
}

type inlineNotifier struct{ countNotifier }

func (*inlineNotifier) Inline()  {}
func (*inlineNotifier) Unmuted() {}

// TestInlineNotifier: an Inline notifier holds each event by the time the
// call that caused it returns, with no Run draining queues, and a queue
// bound never drops one; a muted engine still hands it events when it is
// also Unmuted.
func TestInlineNotifier(t *testing.T) {
	r := newRig(t, "", Def{Name: "hi", Kind: KindHi, Tag: "x", Limit: 10})
	in, queued := &inlineNotifier{}, &countNotifier{}
	opts := DefaultOptions()
	opts.Clock = r.clk
	opts.NotifyQueue = 1
	opts.Notifiers = []Notifier{in, queued}
	e, err := New([]Def{{Name: "hi", Kind: KindHi, Tag: "x", Limit: 10}}, nil, r.tab, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	want := int64(0)
	for i := range 50 {
		r.e.Mute(i%2 == 1)
		r.set("x", int64(1000*i), 20, model.QualityGood)
		if _, err := r.e.Ack("hi", "op"); err != nil {
			t.Fatal(err)
		}
		r.set("x", int64(1000*i+500), 0, model.QualityGood)
		want += 3
		if got := in.n.Load(); got != want {
			t.Fatalf("round %d: inline notifier has %d events, want %d", i, got, want)
		}
	}
	if s := r.e.Stats(); s.NotifyDrops == 0 {
		t.Fatalf("the queued notifier (bound 1, never drained) dropped nothing: %+v", s)
	}
}
