package acq

import (
	"context"
	"testing"
	"time"
)

// TestHeartbeat checks the watchdog's view of the scheduler: it beats at
// every statistics tick, stops beating while a station is stuck in a
// poll past twice its timeout (a driver ignoring its deadline), and beats
// again once the poll returns.
func TestHeartbeat(t *testing.T) {
	inPoll, release := make(chan struct{}), make(chan struct{})
	st := &fakeStation{name: "plc", during: func(_ context.Context, n int) error {
		if n == 2 {
			inPoll <- struct{}{}
			<-release // ignores its context, as a broken driver would
		}
		return nil
	}}
	s, _, clk, step := run(t, st, DefaultStationOptions()) // Timeout 1 s
	base := t0.Truncate(time.Second)
	check := func(want time.Time) {
		t.Helper()
		if got := s.Heartbeat(); !got.Equal(want) {
			t.Errorf("heartbeat %v, want %v", got.Format(time.StampMilli), want.Format(time.StampMilli))
		}
	}
	check(t0) // Start counts as a beat
	step(700 * time.Millisecond)
	check(base.Add(time.Second))

	clk.Advance(time.Second) // poll 2 starts at 2 s and hangs
	<-inPoll
	clk.waitSleepers(t, 1) // only the stats loop sleeps now
	check(base.Add(2 * time.Second))
	clk.Advance(time.Second) // 1 s into the poll: not stuck yet
	clk.waitSleepers(t, 1)
	check(base.Add(3 * time.Second))
	clk.Advance(2 * time.Second) // 3 s into a poll with a 1 s timeout: stuck
	clk.waitSleepers(t, 1)
	check(base.Add(3 * time.Second))

	close(release)
	clk.waitSleepers(t, 2)
	step(time.Second)
	check(base.Add(6 * time.Second))
}

// TestHeartbeatNoStations checks that a scheduler without stations still
// beats, so that a plant with only pushed inputs passes the watchdog.
func TestHeartbeatNoStations(t *testing.T) {
	clk := newFakeClock(t0)
	s := NewScheduler(newRecTable(), clk, nil)
	if !s.Heartbeat().IsZero() {
		t.Error("heartbeat before Start")
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	clk.waitSleepers(t, 1)
	clk.Advance(700 * time.Millisecond)
	clk.waitSleepers(t, 1)
	if got, want := s.Heartbeat(), t0.Truncate(time.Second).Add(time.Second); !got.Equal(want) {
		t.Errorf("heartbeat %v, want %v", got, want)
	}
}
