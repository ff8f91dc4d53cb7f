package promapi

import (
	"context"

	"github.com/pith-historian/pith/internal/model"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// seriesSet reads one tag's samples per Next, so a failing or huge read
// stops the query before the rest are read.
type seriesSet struct {
	ctx        context.Context
	q          *queryable
	tags       []match
	count      bool
	plan       *windowPlan
	mint, maxt int64

	i   int
	cur *series
	err error
}

func (s *seriesSet) Next() bool {
	if s.err != nil || s.i >= len(s.tags) {
		return false
	}
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return false
	}
	m := s.tags[s.i]
	s.i++
	tag := m.tag
	sr := &series{lbls: m.lbls}
	if s.plan != nil {
		sr.pts, s.err = s.plan.read(s.q.st, tag)
		s.q.stats.add(true, 0)
	} else {
		s.err = s.readRaw(tag, sr)
	}
	if s.err != nil {
		return false
	}
	s.cur = sr
	return true
}

// readRaw reads the samples in [mint, maxt]; for a count selector every
// value is 1, so sum_over_time counts them.
func (s *seriesSet) readRaw(tag string, sr *series) error {
	limit := s.q.opts.MaxRawSamples
	n := 0
	err := s.q.st.RawFunc(tag, s.mint, s.maxt+1, limit+1, func(ts []int64, vs []float64, _ []model.Quality) {
		if n = len(ts); n > limit {
			return
		}
		sr.pts = make(points, n)
		for i := range sr.pts {
			sr.pts[i] = point{t: ts[i], f: vs[i]}
			if s.count {
				sr.pts[i].f = 1
			}
		}
	})
	if err != nil {
		return err
	}
	if n > limit {
		return rawLimitError(tag, limit)
	}
	s.q.stats.add(false, n)
	return nil
}

func (s *seriesSet) At() storage.Series                { return s.cur }
func (s *seriesSet) Err() error                        { return s.err }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// series holds one tag's samples in time order.
type series struct {
	lbls labels.Labels
	pts  points
}

func (s *series) Labels() labels.Labels { return s.lbls }

// Iterator uses the upstream list iterator; a hand-written one would
// need a method named Seek, which go vet reserves for io.Seeker.
func (s *series) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	return storage.NewListSeriesIterator(s.pts)
}

// points are float samples; Get hands out pointers into the slice, so
// iterating allocates nothing.
type points []point

func (p points) Get(i int) chunks.Sample { return &p[i] }
func (p points) Len() int                { return len(p) }

type point struct {
	t int64
	f float64
}

var _ chunks.Sample = (*point)(nil)

func (p *point) T() int64                      { return p.t }
func (p *point) F() float64                    { return p.f }
func (p *point) H() *histogram.Histogram       { return nil }
func (p *point) FH() *histogram.FloatHistogram { return nil }
func (p *point) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (p *point) Copy() chunks.Sample           { c := *p; return &c }
