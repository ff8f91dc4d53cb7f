package acq

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/tag"
)

// fakeClock only moves when the test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters map[*fakeWaiter]struct{}
}

type fakeWaiter struct {
	t  time.Time
	ch chan struct{}
}

func newFakeClock(t time.Time) *fakeClock {
	return &fakeClock{now: t, waiters: map[*fakeWaiter]struct{}{}}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) SleepUntil(ctx context.Context, t time.Time, _ time.Duration) error {
	f.mu.Lock()
	if !f.now.Before(t) {
		f.mu.Unlock()
		return ctx.Err()
	}
	w := &fakeWaiter{t: t, ch: make(chan struct{})}
	f.waiters[w] = struct{}{}
	f.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		delete(f.waiters, w)
		f.mu.Unlock()
		return ctx.Err()
	}
}

// Advance moves the clock and wakes the sleepers whose time has come.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	for w := range f.waiters {
		if !f.now.Before(w.t) {
			close(w.ch)
			delete(f.waiters, w)
		}
	}
}

// waitSleepers waits until n goroutines sleep on the clock, i.e. until
// everything the last Advance started has finished.
func (f *fakeClock) waitSleepers(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		got := len(f.waiters)
		f.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines sleep on the clock, want %d", got, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// fakeStation reads the clock at each poll and returns {poll number, 10}.
// fail says which polls (1-based) fail; during, if set, runs inside Poll.
type fakeStation struct {
	name   string
	clk    Clock
	fail   map[int]bool
	during func(ctx context.Context, n int) error

	mu    sync.Mutex
	n     int
	times []time.Time
}

func (s *fakeStation) Name() string { return s.name }

func (s *fakeStation) Tags() []tag.Def {
	return []tag.Def{{Name: s.name + ".a"}, {Name: s.name + ".b"}}
}

func (s *fakeStation) Poll(ctx context.Context, vals []Value) error {
	s.mu.Lock()
	s.n++
	n := s.n
	s.times = append(s.times, s.clk.Now())
	s.mu.Unlock()
	if s.during != nil {
		if err := s.during(ctx, n); err != nil {
			return err
		}
	}
	if s.fail[n] {
		return errors.New("no answer")
	}
	vals[0] = Value{V: float64(n)}
	vals[1] = Value{V: 10}
	return nil
}

func (s *fakeStation) polls() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...)
}

// recTable is a tag table that records every sample written, by name.
type recTable struct {
	*tag.Table
	mu  sync.Mutex
	log map[string][]tag.Sample
}

func newRecTable() *recTable {
	return &recTable{Table: tag.New(nil, tag.DefaultOptions(), nil), log: map[string][]tag.Sample{}}
}

func (r *recTable) Update(batch []tag.Sample) int {
	r.mu.Lock()
	for _, s := range batch {
		d, _ := r.Def(s.ID)
		r.log[d.Name] = append(r.log[d.Name], s)
	}
	r.mu.Unlock()
	return r.Table.Update(batch)
}

// values returns the values written to a tag.
func (r *recTable) values(name string) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []float64
	for _, s := range r.log[name] {
		out = append(out, s.V)
	}
	return out
}

func (r *recTable) current(t *testing.T, name string) tag.Value {
	t.Helper()
	v, err := r.Latest(name)
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}
