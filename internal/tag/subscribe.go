package tag

import (
	"context"
	"sync"

	"github.com/pith-historian/pith/internal/model"
)

// Change is one change of a current value delivered to subscribers.
type Change struct {
	ID  ID
	Tag string
	T   int64
	V   float64
	Q   model.Quality
	Has bool // false when the tag has a quality but never had a value
	// Pushed marks a value that came by Write or Stored (push inputs,
	// imports), whose input chains already ran before it was stored.
	Pushed bool
	// IsText marks a change of a text tag: its value is Text and V is 0.
	// Consumers of numbers (alarms, calculated tags, the Modbus server)
	// skip it.
	IsText bool
	Text   string
}

// SubMode is how a subscription behaves when its consumer falls behind.
// The producer is never blocked in either mode.
type SubMode uint8

const (
	// Coalesce keeps only the newest change per tag: pending memory is
	// bounded by the number of tags, and a slow consumer sees the latest
	// values, never stale ones. Replaced changes are counted in
	// SubStats.Coalesced. For the Modbus server and the web live view.
	Coalesce SubMode = iota
	// Queue keeps every change in order up to MaxPending; beyond it new
	// changes are dropped and counted in SubStats.Overflow, which the
	// consumer must report. For consumers that want every change but
	// tolerate a visible gap.
	Queue
)

// SubOptions configures a subscription.
type SubOptions struct {
	Name       string  // shown in logs and stats
	Mode       SubMode // Coalesce by default
	MaxPending int     // Queue mode bound in changes; 0 means Options.SubscriberQueue
}

// SubStats are a subscription's counters.
type SubStats struct {
	Name      string
	Pending   int
	Delivered uint64 // changes taken by the consumer
	Coalesced uint64 // Coalesce mode: changes replaced by a newer one of the same tag
	Overflow  uint64 // Queue mode: changes dropped because MaxPending was reached
}

// Subscription receives the table's changes in batches. Take, Next, Ready
// and Stats may be called from any goroutine; a subscription normally has
// one consumer.
type Subscription struct {
	opts  SubOptions
	ready chan struct{} // capacity 1: "something is pending"

	mu        sync.Mutex
	pending   []Change
	pos       []int32 // Coalesce: index+1 into pending per tag ID, 0 when absent
	delivered uint64
	coalesced uint64
	overflow  uint64
}

// Subscribe registers a subscriber. Changes made after it returns are
// delivered; use Latest for the state before.
func (t *Table) Subscribe(opts SubOptions) *Subscription {
	if opts.MaxPending <= 0 {
		opts.MaxPending = t.opts.SubscriberQueue
	}
	s := &Subscription{opts: opts, ready: make(chan struct{}, 1)}
	t.mu.Lock()
	subs := make([]*Subscription, 0, len(t.subs)+1)
	t.subs = append(append(subs, t.subs...), s)
	t.mu.Unlock()
	return s
}

// Unsubscribe stops deliveries to s; pending changes can still be taken.
func (t *Table) Unsubscribe(s *Subscription) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.subs = without(t.subs, s)
}

// without returns a copy of subs without s; the table's lists are copied
// on write.
func without(subs []*Subscription, s *Subscription) []*Subscription {
	out := make([]*Subscription, 0, len(subs))
	for _, x := range subs {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// push appends a batch of changes; it is called with the table lock held
// and never blocks.
func (s *Subscription) push(cs []Change) {
	s.mu.Lock()
	switch s.opts.Mode {
	case Queue:
		room := s.opts.MaxPending - len(s.pending)
		if room < len(cs) {
			if room < 0 {
				room = 0
			}
			s.overflow += uint64(len(cs) - room)
			cs = cs[:room]
		}
		s.pending = append(s.pending, cs...)
	default:
		for _, c := range cs {
			if int(c.ID) >= len(s.pos) {
				s.pos = append(s.pos, make([]int32, int(c.ID)+1-len(s.pos))...)
			}
			if p := s.pos[c.ID]; p != 0 {
				s.pending[p-1] = c
				s.coalesced++
				continue
			}
			s.pending = append(s.pending, c)
			s.pos[c.ID] = int32(len(s.pending))
		}
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready returns a channel that receives a value when changes may be
// pending; follow it with Take.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take appends every pending change to buf, clears the pending list and
// returns buf. It never blocks on the producer.
func (s *Subscription) Take(buf []Change) []Change {
	s.mu.Lock()
	buf = append(buf, s.pending...)
	if s.opts.Mode == Coalesce {
		for _, c := range s.pending {
			s.pos[c.ID] = 0
		}
	}
	s.delivered += uint64(len(s.pending))
	s.pending = s.pending[:0]
	s.mu.Unlock()
	return buf
}

// Next waits until changes are pending or ctx is done, then takes them.
func (s *Subscription) Next(ctx context.Context, buf []Change) ([]Change, error) {
	for {
		if out := s.Take(buf); len(out) > len(buf) {
			return out, nil
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return buf, ctx.Err()
		}
	}
}

// Stats returns the subscription's counters.
func (s *Subscription) Stats() SubStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SubStats{Name: s.opts.Name, Pending: len(s.pending), Delivered: s.delivered,
		Coalesced: s.coalesced, Overflow: s.overflow}
}
