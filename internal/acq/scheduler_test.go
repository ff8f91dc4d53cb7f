package acq

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 300e6, time.UTC)

func TestNextTick(t *testing.T) {
	tests := []struct {
		at     time.Time
		period time.Duration
		want   time.Time
	}{
		{t0, time.Second, t0.Truncate(time.Second).Add(time.Second)},
		{t0, 20 * time.Millisecond, t0.Add(20 * time.Millisecond)},
		{t0.Add(time.Nanosecond), 20 * time.Millisecond, t0.Add(20 * time.Millisecond)},
		{t0, time.Minute, time.Date(2024, 1, 1, 0, 1, 0, 0, time.UTC)},
		{t0, 7 * time.Second, time.Unix(0, (t0.UnixNano()/7e9+1)*7e9)},
	}
	for _, tc := range tests {
		if got := nextTick(tc.at, tc.period); !got.Equal(tc.want) {
			t.Errorf("nextTick(%v, %v) = %v, want %v", tc.at, tc.period, got, tc.want)
		}
	}
}

// TestNextTickPhase: a phase moves the ticks after the period's
// multiples (a redundant pair's boxes poll half a period apart).
func TestNextTickPhase(t *testing.T) {
	tests := []struct {
		at            time.Time
		period, phase time.Duration
		want          time.Time
	}{
		{t0, time.Second, 0, t0.Truncate(time.Second).Add(time.Second)},
		{t0, time.Second, 500 * time.Millisecond, t0.Truncate(time.Second).Add(500 * time.Millisecond)},
		{t0.Add(200 * time.Millisecond), time.Second, 500 * time.Millisecond, t0.Truncate(time.Second).Add(1500 * time.Millisecond)},
		{t0, 200 * time.Millisecond, 100 * time.Millisecond, t0.Add(200 * time.Millisecond)}, // t0 is on a tick: the next
		{t0.Add(time.Millisecond), 200 * time.Millisecond, 100 * time.Millisecond, t0.Add(200 * time.Millisecond)},
		{t0, 200 * time.Millisecond, 0, t0.Add(100 * time.Millisecond)},
	}
	for _, tc := range tests {
		if got := nextTickPhase(tc.at, tc.period, tc.phase); !got.Equal(tc.want) {
			t.Errorf("nextTickPhase(%v, %v, %v) = %v, want %v", tc.at, tc.period, tc.phase, got, tc.want)
		}
	}
}

func TestStationOptionsFill(t *testing.T) {
	tests := []struct {
		in       StationOptions
		wantSpin time.Duration
		wantErr  bool
	}{
		{StationOptions{Period: 20 * time.Millisecond, Spin: -1}, DefaultSpin, false},
		{StationOptions{Period: time.Second, Spin: -1}, 0, false},
		{StationOptions{Period: 0, Spin: -1}, 0, false},
		{StationOptions{Period: 20 * time.Millisecond, Spin: 0}, 0, false},
		{StationOptions{Period: 100 * time.Microsecond, Spin: time.Millisecond}, 50 * time.Microsecond, false},
		{StationOptions{Period: -time.Second}, 0, true},
	}
	for _, tc := range tests {
		o := tc.in
		err := o.fill()
		if (err != nil) != tc.wantErr || (err == nil && o.Spin != tc.wantSpin) {
			t.Errorf("fill(%+v) = spin %v, err %v; want spin %v, err %v", tc.in, o.Spin, err, tc.wantSpin, tc.wantErr)
		}
		if err == nil && (o.Timeout != DefaultTimeout || o.RetryPause != DefaultRetryPause) {
			t.Errorf("fill(%+v) left zero defaults: %+v", tc.in, o)
		}
	}
}

func TestAdd(t *testing.T) {
	tab := newRecTable()
	s := NewScheduler(tab, newFakeClock(t0), nil)
	if err := s.Add(&fakeStation{name: "p"}, DefaultStationOptions()); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*fakeStation{{name: "p"}, {name: "bad name"}, {name: ""}} {
		if err := s.Add(st, DefaultStationOptions()); err == nil {
			t.Errorf("Add(%q) accepted", st.name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.Add(&fakeStation{name: "q"}, DefaultStationOptions()); err == nil {
		t.Error("Add after Start accepted")
	}
	if err := s.Start(ctx); err == nil {
		t.Error("second Start accepted")
	}
}

// run starts a scheduler on a fake clock with one station and returns a
// function advancing the clock by d and waiting for the resulting work.
func run(t *testing.T, st *fakeStation, o StationOptions) (*Scheduler, *recTable, *fakeClock, func(d time.Duration)) {
	t.Helper()
	clk := newFakeClock(t0)
	st.clk = clk
	tab := newRecTable()
	s := NewScheduler(tab, clk, nil)
	if err := s.Add(st, o); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	clk.waitSleepers(t, 2)
	step := func(d time.Duration) {
		clk.Advance(d)
		clk.waitSleepers(t, 2)
	}
	return s, tab, clk, step
}

func TestAlignedTicksAndStats(t *testing.T) {
	st := &fakeStation{name: "plc1"}
	s, tab, _, step := run(t, st, DefaultStationOptions())
	step(700 * time.Millisecond) // to 00:00:01
	for range 19 {
		step(time.Second)
	}
	polls := st.polls()
	if len(polls) != 20 {
		t.Fatalf("%d polls, want 20", len(polls))
	}
	for i, p := range polls {
		if want := t0.Truncate(time.Second).Add(time.Duration(i+1) * time.Second); !p.Equal(want) {
			t.Errorf("poll %d at %v, want %v", i, p.Format(time.StampMicro), want.Format(time.StampMicro))
		}
	}
	if v := tab.current(t, "plc1.a"); v.V != 20 || v.Q != model.QualityGood {
		t.Errorf("plc1.a = %+v, want 20 good", v)
	}
	if v := tab.current(t, StatTag("plc1", TagComm)); v.V != 1 {
		t.Errorf("comm = %+v, want 1", v)
	}
	// polls_per_s at 00:00:01 counts second 0, which had no poll.
	want := "[0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1]"
	if got := fmt.Sprint(tab.values(StatTag("plc1", TagPolls))); got != want {
		t.Errorf("polls_per_s = %s, want %s", got, want)
	}
	// Polls 1..9 (seconds 1..9): the first changes a, b and comm, the
	// others only a. Then polls 10..19.
	if got := fmt.Sprint(tab.values(StatTag("plc1", TagChanges))); got != "[11 10]" {
		t.Errorf("changes_per_10s = %s, want [11 10]", got)
	}
	if got := fmt.Sprint(tab.values(StatTag("plc1", TagRTT))); got != "[0 0]" {
		t.Errorf("rtt_ms = %s, want [0 0]", got)
	}
	ss := s.Stats()[0]
	if ss.Polls != 20 || ss.Errors != 0 || !ss.Comm || ss.Late.Max != 0 || ss.Late.N != 20 {
		t.Errorf("stats = %+v", ss)
	}
}

func TestFailedPollMarksBad(t *testing.T) {
	st := &fakeStation{name: "plc", fail: map[int]bool{3: true, 4: true}}
	s, tab, _, step := run(t, st, DefaultStationOptions())
	step(700 * time.Millisecond)
	step(time.Second) // poll 2 ok: a = 2
	step(time.Second) // poll 3 fails
	if v := tab.current(t, "plc.a"); v.V != 2 || v.Q != model.QualityBad || v.T != t0.Truncate(time.Second).Add(3*time.Second).UnixMilli() {
		t.Errorf("after failure plc.a = %+v, want last value 2, bad, at 3 s", v)
	}
	if v := tab.current(t, StatTag("plc", TagComm)); v.V != 0 {
		t.Errorf("comm = %v, want 0", v.V)
	}
	step(time.Second) // poll 4 fails
	step(time.Second) // poll 5 ok
	if v := tab.current(t, "plc.a"); v.V != 5 || v.Q != model.QualityGood {
		t.Errorf("after recovery plc.a = %+v, want 5 good", v)
	}
	if v := tab.current(t, StatTag("plc", TagComm)); v.V != 1 {
		t.Errorf("comm = %v, want 1", v.V)
	}
	step(time.Second)
	// errors at 1..6 s: polls at 3 and 4 failed; each is counted at the
	// emission after it started.
	if got := fmt.Sprint(tab.values(StatTag("plc", TagErrors))); got != "[0 0 0 1 2 2]" {
		t.Errorf("errors = %s, want [0 0 0 1 2 2]", got)
	}
	if ss := s.Stats()[0]; ss.Errors != 2 || ss.LastError != "no answer" || !ss.Comm {
		t.Errorf("stats = %+v", ss)
	}
}

func TestOverrunSkipsTicks(t *testing.T) {
	st := &fakeStation{name: "slow"}
	var clk *fakeClock
	st.during = func(_ context.Context, n int) error {
		if n == 1 {
			clk.Advance(2500 * time.Millisecond) // the poll takes 2.5 s
		}
		return nil
	}
	s, _, c, step := run(t, st, DefaultStationOptions())
	clk = c
	step(700 * time.Millisecond) // poll 1 at 1 s, ends at 3.5 s
	step(500 * time.Millisecond) // poll 2 at 4 s, not a burst at 2 and 3
	base := t0.Truncate(time.Second)
	got := st.polls()
	if len(got) != 2 || !got[0].Equal(base.Add(time.Second)) || !got[1].Equal(base.Add(4*time.Second)) {
		t.Errorf("polls at %v, want 1 s and 4 s", got)
	}
	if ss := s.Stats()[0]; ss.Overruns != 1 {
		t.Errorf("overruns = %d, want 1", ss.Overruns)
	}
}

func TestBackToBackWithPause(t *testing.T) {
	st := &fakeStation{name: "b2b"}
	_, _, _, step := run(t, st, StationOptions{Pause: 100 * time.Millisecond, Spin: -1})
	step(100 * time.Millisecond)
	step(100 * time.Millisecond)
	got := st.polls()
	if len(got) != 3 || !got[0].Equal(t0) || !got[2].Equal(t0.Add(200*time.Millisecond)) {
		t.Errorf("polls at %v, want 0, 100 and 200 ms after start", got)
	}
}

// TestDeadStationDoesNotSlowOthers runs, on the real clock, a fast station
// and a dead one that hangs every poll until its timeout, both on one
// shared "line" that serializes requests like a shared Modbus client. The
// fast station must keep polling while the dead one times out.
func TestDeadStationDoesNotSlowOthers(t *testing.T) {
	line := make(chan struct{}, 1) // the shared connection's lock
	tab := newRecTable()
	s := NewScheduler(tab, nil, nil)
	var deadPolls atomic.Int64
	fast := &fakeStation{name: "fast", clk: RealClock{}, during: func(ctx context.Context, _ int) error {
		select {
		case line <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-line
		return nil
	}}
	dead := &fakeStation{name: "dead", clk: RealClock{}, during: func(ctx context.Context, _ int) error {
		deadPolls.Add(1)
		// Per-request timeout: hold the line at most 30 ms.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		select {
		case line <- struct{}{}:
		case <-rctx.Done():
			return rctx.Err()
		}
		<-rctx.Done()
		<-line
		return rctx.Err()
	}}
	o := StationOptions{Period: 10 * time.Millisecond, Timeout: time.Second, RetryPause: 100 * time.Millisecond, Spin: -1}
	if err := s.Add(fast, o); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(dead, o); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for len(fast.polls()) < 50 || deadPolls.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("fast station polled %d times, dead %d, in 30 s", len(fast.polls()), deadPolls.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Stop()
	st := s.Stats()
	if st[0].Errors != 0 || st[1].Errors == 0 || st[1].Comm {
		t.Errorf("stats fast %+v, dead %+v", st[0], st[1])
	}
	if v := tab.current(t, "dead.a"); v.Has || v.Q != model.QualityBad {
		t.Errorf("dead.a = %+v, want no value, bad", v)
	}
}

func TestRealClockSleepUntil(t *testing.T) {
	var c RealClock
	for _, spin := range []time.Duration{0, DefaultSpin, time.Hour} {
		at := time.Now().Add(3 * time.Millisecond)
		if err := c.SleepUntil(context.Background(), at, spin); err != nil {
			t.Fatal(err)
		}
		if now := time.Now(); now.Before(at) {
			t.Errorf("spin %v: woke %v early", spin, at.Sub(now))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.SleepUntil(ctx, time.Now().Add(time.Hour), 0); err == nil {
		t.Error("SleepUntil on a cancelled context returned nil")
	}
	if err := c.SleepUntil(ctx, time.Now().Add(time.Hour), time.Hour); err == nil {
		t.Error("spinning SleepUntil on a cancelled context returned nil")
	}
}
