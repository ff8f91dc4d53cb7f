package process

import (
	"context"
	"sort"
	"sync"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/config"
)

// Writer is the store's atomic write (ingest.Sink's method): all points
// or none, durable when it returns; called from many goroutines at once.
type Writer interface {
	Write(ctx context.Context, pts []model.Point) error
}

// Sink runs input chains on points written through it (the push inputs,
// which go to the store without the tag table) and writes the chain
// outputs in the same atomic write as the inputs. Chains see every
// posted sample, so they integrate with the trapezoid rule (Linear). A
// failed write puts the chains' state back, so a retried post is not
// counted twice. Points are taken in time order per tag; a point not
// newer than its tag's previous one is late and skips the stateful steps.
type Sink struct {
	next Writer
	// After, when set, is called after every successful write with the
	// points written (inputs and chain outputs); it must not keep the
	// slice and may be called concurrently (for writes without chain
	// tags). Engine.Feed goes here.
	After func(written []model.Point)

	mu     sync.Mutex // serialises writes touching chains; next.Write runs under it
	chains map[string]*Chain
	buf    []model.Point
	idx    []int
}

var _ Writer = (*Sink)(nil)

// NewSink wraps next with the chains of inputs (nil or empty: Write passes
// through).
func NewSink(next Writer, inputs []config.Input, seed Seeder) (*Sink, error) {
	s := &Sink{next: next, chains: make(map[string]*Chain)}
	for _, in := range inputs {
		ch, err := NewChain(in, Linear, seed)
		if err != nil {
			return nil, err
		}
		s.chains[in.Tag] = ch
	}
	return s, nil
}

// Write processes pts and writes them with the chains' outputs. Inputs
// are run in time order (stable for equal times), whatever the order of
// the request.
func (s *Sink) Write(ctx context.Context, pts []model.Point) error {
	if !s.touches(pts) {
		// No chain state involved: writes run concurrently, as the
		// store's group commit wants.
		return s.after(s.next.Write(ctx, pts), pts)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idx = s.idx[:0]
	for i := range pts {
		if _, ok := s.chains[pts[i].Tag]; ok {
			s.idx = append(s.idx, i)
		}
	}
	sort.SliceStable(s.idx, func(a, b int) bool { return pts[s.idx[a]].T < pts[s.idx[b]].T })
	saved := make(map[*Chain][]step)
	s.buf = append(s.buf[:0], pts...)
	for _, i := range s.idx {
		p := pts[i]
		ch := s.chains[p.Tag]
		if _, ok := saved[ch]; !ok {
			saved[ch] = ch.state()
		}
		s.buf = ch.Push(model.Sample{T: p.T, V: p.V, Q: p.Q}, s.buf)
	}
	err := s.after(s.next.Write(ctx, s.buf), s.buf)
	if err != nil {
		for ch, st := range saved {
			ch.restore(st)
		}
	}
	clear(s.buf)
	return err
}

// touches reports whether any point has a chain. The map is only read
// after NewSink, so no lock is needed.
func (s *Sink) touches(pts []model.Point) bool {
	if len(s.chains) == 0 {
		return false
	}
	for i := range pts {
		if _, ok := s.chains[pts[i].Tag]; ok {
			return true
		}
	}
	return false
}

// after calls After once a write succeeded.
func (s *Sink) after(err error, written []model.Point) error {
	if err == nil && s.After != nil {
		s.After(written)
	}
	return err
}

// Shift adds delta to the running total of every power_to_kwh step that
// writes tag: a backfill moved the stored totals (Recomputer.Shift).
func (s *Sink) Shift(tag string, delta float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.chains {
		ch.shift(tag, delta)
	}
}
