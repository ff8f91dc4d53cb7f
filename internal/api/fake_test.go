package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// fakeStore is an in-memory Store following the contract closely enough
// to test the handlers: last write wins, buckets as docs/api.md defines them.
type fakeStore struct {
	mu        sync.Mutex
	data      map[string][]model.Sample // sorted by time
	begins    int                       // Begin calls
	adds      int                       // Tx.Add calls
	maxAdd    int                       // most points in one Add
	commits   int
	rollbacks int
	addErr    error // returned by Tx.Add when set
	commitErr error // returned by Tx.Commit when set
	discard   bool  // count points but keep none (benchmarks, big bodies)
	onAdd     func()
	labels    map[string]model.Labels // TagInfo.Labels by tag
}

func newFakeStore() *fakeStore { return &fakeStore{data: map[string][]model.Sample{}} }

var _ Store = (*fakeStore)(nil)

type fakeTx struct {
	s      *fakeStore
	staged []model.Point
	done   bool
}

var _ Tx = (*fakeTx)(nil)

func (s *fakeStore) Begin() Tx {
	s.mu.Lock()
	s.begins++
	s.mu.Unlock()
	return &fakeTx{s: s}
}

func (tx *fakeTx) Add(pts []model.Point) error {
	s := tx.s
	s.mu.Lock()
	s.adds++
	s.maxAdd = max(s.maxAdd, len(pts))
	err, discard, onAdd := s.addErr, s.discard, s.onAdd
	s.mu.Unlock()
	if onAdd != nil {
		onAdd()
	}
	if err != nil {
		return err
	}
	for _, p := range pts {
		if model.CheckValue(p.V) != nil || p.Tag == "" {
			return fmt.Errorf("bad point %+v", p)
		}
	}
	if !discard {
		tx.staged = append(tx.staged, pts...) // a copy: the caller reuses pts
	}
	return nil
}

func (tx *fakeTx) Commit(ctx context.Context) error {
	s := tx.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if tx.done {
		return errors.New("tx already done")
	}
	if s.commitErr != nil {
		return s.commitErr // the caller still rolls back
	}
	tx.done = true
	s.commits++
	for _, p := range tx.staged {
		ss := s.data[p.Tag]
		i := sort.Search(len(ss), func(i int) bool { return ss[i].T >= p.T })
		smp := model.Sample{T: p.T, V: p.V, Q: p.Q}
		if i < len(ss) && ss[i].T == p.T {
			ss[i] = smp
		} else {
			ss = slices.Insert(ss, i, smp)
		}
		s.data[p.Tag] = ss
	}
	return nil
}

func (tx *fakeTx) Rollback() {
	s := tx.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !tx.done {
		tx.done = true
		s.rollbacks++
	}
}

func (s *fakeStore) samples(tag string) ([]model.Sample, error) {
	ss, ok := s.data[tag]
	if !ok {
		return nil, fmt.Errorf("query %q: %w", tag, store.ErrUnknownTag)
	}
	return ss, nil
}

func (s *fakeStore) Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.samples(tag)
	if err != nil {
		return nil, err
	}
	out := make([]store.Bucket, n)
	cnt := make([]int, n)
	w := float64(to-from) / float64(n)
	for i := range out {
		out[i].T = from + int64(float64(i)*w)
	}
	for _, smp := range ss {
		if smp.T < from || smp.T >= to {
			continue
		}
		i := min(int(float64(smp.T-from)/w), n-1)
		b := &out[i]
		switch {
		case !b.OK:
			b.V = smp.V
			if agg == model.AggCount {
				b.V = 1
			}
		case agg == model.AggMin:
			b.V = min(b.V, smp.V)
		case agg == model.AggMax:
			b.V = max(b.V, smp.V)
		case agg == model.AggLast:
			b.V = smp.V
		case agg == model.AggSum, agg == model.AggMean:
			b.V += smp.V
		case agg == model.AggCount:
			b.V++
		}
		b.OK = true
		cnt[i]++
	}
	if agg == model.AggMean {
		for i := range out {
			if out[i].OK {
				out[i].V /= float64(cnt[i])
			}
		}
	}
	return out, nil
}

func (s *fakeStore) RawFunc(tag string, from, to int64, limit int, fn func(ts []int64, vs []float64, qs []model.Quality)) error {
	smp, err := s.Raw(tag, from, to, limit)
	if err != nil {
		return err
	}
	ts, vs, qs := make([]int64, len(smp)), make([]float64, len(smp)), make([]model.Quality, len(smp))
	for i, x := range smp {
		ts[i], vs[i], qs[i] = x.T, x.V, x.Q
	}
	fn(ts, vs, qs)
	return nil
}

func (s *fakeStore) Raw(tag string, from, to int64, limit int) ([]model.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.samples(tag)
	if err != nil {
		return nil, err
	}
	var out []model.Sample
	for _, smp := range ss {
		if smp.T >= from && smp.T < to && len(out) < limit {
			out = append(out, smp)
		}
	}
	return out, nil
}

func (s *fakeStore) Latest(tags ...string) ([]store.Latest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(tags) == 0 {
		for t := range s.data {
			tags = append(tags, t)
		}
		slices.Sort(tags)
	}
	var out []store.Latest
	for _, t := range tags {
		ss, err := s.samples(t)
		if err != nil {
			return nil, err
		}
		if len(ss) > 0 {
			out = append(out, store.Latest{Tag: t, Sample: ss[len(ss)-1]})
		}
	}
	return out, nil
}

func (s *fakeStore) Tags() []store.TagInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.TagInfo
	for t, ss := range s.data {
		ti := store.TagInfo{Name: t, Labels: s.labels[t]}
		if len(ss) > 0 {
			ti.First, ti.Last = ss[0].T, ss[len(ss)-1].T
		}
		out = append(out, ti)
	}
	return out
}

// concreteDB mimics *store.DB: Begin returns a concrete transaction type.
type concreteDB struct{ *fakeStore }

func (d concreteDB) Begin() *fakeTx { return &fakeTx{s: d.fakeStore} }

// WrapDB must accept it with inferred type arguments.
var _ Store = WrapDB(concreteDB{newFakeStore()})
