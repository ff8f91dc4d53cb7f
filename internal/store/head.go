package store

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// headSeries holds one tag's unflushed samples in arrival order. While
// sorted is true the samples are strictly increasing in time; a late or
// repeated timestamp clears it and sortDedup restores the order, keeping
// the last written value of each timestamp.
type headSeries struct {
	ts     []int64
	vs     []float64
	qs     []model.Quality
	sorted bool
	// xs holds the values of a text series (vs then holds zeros, so that
	// code moving samples around treats both kinds alike); nil for a
	// numeric series.
	xs []string
}

// appendText adds a text sample.
func (s *headSeries) appendText(t int64, x string, q model.Quality) {
	s.append(t, 0, q)
	s.xs = append(s.xs, x)
}

func (s *headSeries) append(t int64, v float64, q model.Quality) {
	n := len(s.ts)
	if n > 0 && t <= s.ts[n-1] {
		s.sorted = false
	}
	if n == cap(s.ts) {
		s.grow()
	}
	s.ts = append(s.ts, t)
	s.vs = append(s.vs, v)
	s.qs = append(s.qs, q)
}

// grow doubles the capacity: append's own growth slows to 1.25x for large
// slices, which copies a big head many times over.
func (s *headSeries) grow() {
	c := 2 * cap(s.ts)
	if c < 64 {
		c = 64
	}
	ts := make([]int64, len(s.ts), c)
	copy(ts, s.ts)
	vs := make([]float64, len(s.vs), c)
	copy(vs, s.vs)
	qs := make([]model.Quality, len(s.qs), c)
	copy(qs, s.qs)
	s.ts, s.vs, s.qs = ts, vs, qs
}

// sortDedup orders the samples by time; of equal timestamps the one written
// last wins.
func (s *headSeries) sortDedup() {
	if s.sorted {
		return
	}
	sort.Stable(byTime{s})
	w := 0
	for i := range s.ts {
		if i+1 < len(s.ts) && s.ts[i+1] == s.ts[i] {
			continue // a later write of the same timestamp follows
		}
		s.ts[w], s.vs[w], s.qs[w] = s.ts[i], s.vs[i], s.qs[i]
		if s.xs != nil {
			s.xs[w] = s.xs[i]
		}
		w++
	}
	s.ts, s.vs, s.qs = s.ts[:w], s.vs[:w], s.qs[:w]
	if s.xs != nil {
		s.xs = s.xs[:w]
	}
	s.sorted = true
}

type byTime struct{ s *headSeries }

func (b byTime) Len() int           { return len(b.s.ts) }
func (b byTime) Less(i, j int) bool { return b.s.ts[i] < b.s.ts[j] }
func (b byTime) Swap(i, j int) {
	s := b.s
	s.ts[i], s.ts[j] = s.ts[j], s.ts[i]
	s.vs[i], s.vs[j] = s.vs[j], s.vs[i]
	s.qs[i], s.qs[j] = s.qs[j], s.qs[i]
	if s.xs != nil {
		s.xs[i], s.xs[j] = s.xs[j], s.xs[i]
	}
}

// head is the in-memory part of the store. The active head takes applied
// writes under mu; a frozen head is sorted, immutable and read without locks.
type head struct {
	mu      sync.RWMutex
	series  []*headSeries // by series id; nil where the head has nothing
	samples int
	born    time.Time // when its first sample arrived
	frozen  bool
}

func newHead() *head { return &head{} }

// appendLocked adds a sample; the caller holds h.mu for writing.
func (h *head) appendLocked(id uint32, t int64, v float64, q model.Quality, now func() time.Time) {
	if int(id) >= len(h.series) {
		n := make([]*headSeries, int(id)+1+len(h.series)/2)
		copy(n, h.series)
		h.series = n
	}
	s := h.series[id]
	if s == nil {
		s = &headSeries{sorted: true}
		h.series[id] = s
	}
	s.append(t, v, q)
	if s.xs != nil {
		// A numeric sample raced the first text of the tag: it is kept,
		// as its text.
		s.xs = append(s.xs, strconv.FormatFloat(v, 'g', -1, 64))
	}
	if h.samples == 0 {
		h.born = now()
	}
	h.samples++
}

// appendTextLocked adds a text sample; the caller holds h.mu for writing.
// It counts for 1 + len(x)/textWeight samples, so that HeadMaxSamples
// bounds the memory of text as it does that of numbers.
func (h *head) appendTextLocked(id uint32, t int64, x string, q model.Quality, now func() time.Time) {
	if int(id) >= len(h.series) {
		n := make([]*headSeries, int(id)+1+len(h.series)/2)
		copy(n, h.series)
		h.series = n
	}
	s := h.series[id]
	if s == nil {
		s = &headSeries{sorted: true, xs: []string{}}
		h.series[id] = s
	}
	if s.xs == nil {
		// A numeric sample raced the first text of the tag (write.go
		// refuses mixed kinds before the WAL; this is the rare race).
		s.xs = make([]string, len(s.ts))
	}
	s.appendText(t, x, q)
	if h.samples == 0 {
		h.born = now()
	}
	h.samples += 1 + len(x)/textWeight
}

// textWeight is how many bytes of text count as one more head sample: a
// numeric sample costs about 17 bytes of head memory.
const textWeight = 16

// size returns the sample count and when the first sample arrived.
func (h *head) size() (int, time.Time) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.samples, h.born
}

// freeze sorts every series so the head can be read without locks.
func (h *head) freeze() {
	h.mu.Lock()
	for _, s := range h.series {
		if s != nil {
			s.sortDedup()
		}
	}
	h.frozen = true
	h.mu.Unlock()
}

// get returns the sorted samples of id; for the active head the caller holds
// h.mu for writing (sorting may be needed) and must copy what it keeps.
func (h *head) getSorted(id uint32) *headSeries {
	if int(id) >= len(h.series) {
		return nil
	}
	s := h.series[id]
	if s != nil && !s.sorted {
		s.sortDedup()
	}
	return s
}
