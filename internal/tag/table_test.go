package tag

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// recSink records every point it is handed, copying as the contract asks.
type recSink struct {
	mu       sync.Mutex
	pts      []model.Point // Enqueue's
	written  []model.Point // Write's
	refuse   bool
	failWith error
}

func (r *recSink) Enqueue(pts []model.Point) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse {
		return false
	}
	r.pts = append(r.pts, pts...)
	return true
}

// Write records pts as durable, or fails the whole batch with failWith.
func (r *recSink) Write(_ context.Context, pts []model.Point) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failWith != nil {
		return r.failWith
	}
	r.written = append(r.written, pts...)
	return nil
}

func (r *recSink) take() []model.Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.pts
	r.pts = nil
	return out
}

const (
	good = model.QualityGood
	bad  = model.QualityBad
)

func TestArchivePolicies(t *testing.T) {
	type step struct {
		v    float64
		q    model.Quality
		want bool // archived
	}
	tests := []struct {
		name  string
		def   Def
		steps []step
	}{
		{"change", Def{Archive: ArchiveChange}, []step{
			{1, good, true}, {1, good, false}, {2, good, true}, {1, good, true}, {1, bad, true}, {1, bad, false}, {1, good, true},
		}},
		{"all", Def{Archive: ArchiveAll}, []step{
			{1, good, true}, {1, good, true}, {1, bad, true}, {1, bad, true},
		}},
		{"deadband", Def{Archive: ArchiveDeadband, Deadband: 0.5}, []step{
			{10, good, true}, {10.4, good, false}, {10.5, good, true}, {10.6, good, false}, {10.2, good, false}, {10.0, good, true},
			{10.0, bad, true}, {10.1, good, true},
		}},
		{"deadband zero is all", Def{Archive: ArchiveDeadband}, []step{
			{1, good, true}, {1, good, true}, {1.0000001, good, true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recSink{}
			tab := New(nil, DefaultOptions(), sink)
			tc.def.Name = "a.b"
			id, err := tab.Define(tc.def)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				tab.Update([]Sample{{ID: id, T: int64(i + 1), V: s.v, Q: s.q}})
				got := len(sink.take()) == 1
				if got != s.want {
					t.Errorf("step %d (%v %v): archived %v, want %v", i, s.v, s.q, got, s.want)
				}
			}
		})
	}
}

func TestUpdateRules(t *testing.T) {
	sink := &recSink{}
	tab := New(nil, DefaultOptions(), sink)
	a, _ := tab.Define(Def{Name: "p.a"})
	b, _ := tab.Define(Def{Name: "p.b"})

	if n := tab.Update([]Sample{{ID: a, T: 10, V: 1}, {ID: b, T: 10, V: 2}}); n != 2 {
		t.Errorf("changes = %d, want 2", n)
	}
	// A late sample is archived but does not become current.
	tab.Update([]Sample{{ID: a, T: 5, V: 7}})
	if v, _ := tab.Get(a); v.V != 1 || v.T != 10 {
		t.Errorf("after late sample current = %+v, want V 1 at 10", v)
	}
	// A non-finite value becomes bad quality with the last value kept.
	tab.Update([]Sample{{ID: b, T: 11, V: math.NaN()}})
	if v, _ := tab.Get(b); v.V != 2 || v.Q != bad || v.T != 11 {
		t.Errorf("after NaN current = %+v, want V 2 bad at 11", v)
	}
	// MarkBad keeps values; a never-valued tag only gets its quality.
	c, _ := tab.Define(Def{Name: "p.c"})
	tab.MarkBad([]ID{a, c}, 12)
	if v, _ := tab.Get(a); v.V != 1 || v.Q != bad || !v.Has {
		t.Errorf("after MarkBad a = %+v, want V 1 bad", v)
	}
	if v, _ := tab.Get(c); v.Has || v.Q != bad || v.T != 12 {
		t.Errorf("after MarkBad c = %+v, want no value, bad at 12", v)
	}
	got := sink.take()
	want := []model.Point{
		{Tag: "p.a", T: 10, V: 1}, {Tag: "p.b", T: 10, V: 2},
		{Tag: "p.a", T: 5, V: 7},
		{Tag: "p.b", T: 11, V: 2, Q: bad},
		{Tag: "p.a", T: 12, V: 1, Q: bad},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("archived\n got %v\nwant %v", got, want)
	}
	st := tab.Stats()
	if st.Late != 1 || st.NonFinite != 1 || st.Tags != 3 {
		t.Errorf("stats = %+v", st)
	}
	// An unknown ID is counted, not a panic.
	tab.Update([]Sample{{ID: 99, T: 1, V: 1}})
	if tab.Stats().UnknownIDs != 1 {
		t.Errorf("unknown IDs not counted")
	}
	// A refused archive batch is counted.
	sink.refuse = true
	tab.Update([]Sample{{ID: a, T: 20, V: 3}})
	if tab.Stats().Refused != 1 {
		t.Errorf("refused not counted: %+v", tab.Stats())
	}
}

func TestDefineAndLatest(t *testing.T) {
	tab := New(nil, DefaultOptions(), nil)
	for _, bad := range []string{"", "a b", "a,b", ".a", "a.", "a..b", "a\nb", string(make([]byte, 300))} {
		if _, err := tab.Define(Def{Name: bad}); err == nil {
			t.Errorf("Define(%q) accepted", bad)
		}
	}
	if _, err := tab.Define(Def{Name: "x", Deadband: -1}); err == nil {
		t.Error("negative deadband accepted")
	}
	id1, _ := tab.Define(Def{Name: "z.y", Unit: "m"})
	id2, _ := tab.Define(Def{Name: "z.y", Unit: "km"})
	if id1 != id2 {
		t.Errorf("redefine gave new ID %d != %d", id2, id1)
	}
	if d, _ := tab.Def(id1); d.Unit != "km" {
		t.Errorf("redefine did not update metadata: %+v", d)
	}
	tab.Define(Def{Name: "a.b"})
	if defs := tab.Defs(); len(defs) != 2 || defs[0].Name != "a.b" {
		t.Errorf("Defs = %+v", defs)
	}
	tab.Update([]Sample{{ID: id1, T: 3, V: 4}})
	vals, err := tab.Latest()
	if err != nil || len(vals) != 2 || vals[0].Has || !vals[1].Has || vals[1].V != 4 {
		t.Errorf("Latest() = %+v, %v", vals, err)
	}
	if _, err := tab.Latest("nope"); !errors.Is(err, ErrUnknownTag) {
		t.Errorf("Latest(nope) err = %v, want ErrUnknownTag", err)
	}
	if _, err := tab.UpdatePoints([]model.Point{{Tag: "new.one", T: 1, V: 1}}, false, "x"); !errors.Is(err, ErrUnknownTag) {
		t.Errorf("UpdatePoints unknown without create: %v", err)
	}
	if n, err := tab.UpdatePoints([]model.Point{{Tag: "new.one", T: 1, V: 1}}, true, "import"); err != nil || n != 1 {
		t.Errorf("UpdatePoints create: %d, %v", n, err)
	}
	if d, _ := tab.Def(2); d.Source != "import" {
		t.Errorf("created def = %+v", d)
	}
}

func TestPolicyParse(t *testing.T) {
	for _, p := range []Policy{ArchiveChange, ArchiveAll, ArchiveDeadband} {
		got, err := ParsePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p, got, err)
		}
	}
	if p, err := ParsePolicy(""); err != nil || p != ArchiveChange {
		t.Errorf("default policy = %v, %v", p, err)
	}
	if _, err := ParsePolicy("sometimes"); err == nil {
		t.Error("bad policy accepted")
	}
}

func TestSubscriptions(t *testing.T) {
	tab := New(nil, DefaultOptions(), nil)
	a, _ := tab.Define(Def{Name: "a"})
	b, _ := tab.Define(Def{Name: "b"})
	co := tab.Subscribe(SubOptions{Name: "live"})
	qu := tab.Subscribe(SubOptions{Name: "fwd", Mode: Queue, MaxPending: 3})

	tab.Update([]Sample{{ID: a, T: 1, V: 1}, {ID: b, T: 1, V: 1}})
	tab.Update([]Sample{{ID: a, T: 2, V: 2}})
	tab.Update([]Sample{{ID: a, T: 3, V: 2}}) // not a change: same value and quality
	tab.Update([]Sample{{ID: a, T: 4, V: 3}})

	got := co.Take(nil)
	if len(got) != 2 || got[0].Tag != "a" || got[0].V != 3 || got[1].Tag != "b" {
		t.Errorf("coalesced = %+v", got)
	}
	if s := co.Stats(); s.Coalesced != 2 || s.Delivered != 2 {
		t.Errorf("coalesce stats = %+v", s)
	}
	got = qu.Take(nil)
	if len(got) != 3 || got[2].V != 2 {
		t.Errorf("queued = %+v", got)
	}
	if s := qu.Stats(); s.Overflow != 1 {
		t.Errorf("queue stats = %+v", s)
	}
	// After Take, coalescing starts afresh.
	tab.Update([]Sample{{ID: a, T: 5, V: 9}})
	ctx, cancel := context.WithCancel(context.Background())
	got, err := co.Next(ctx, nil)
	if err != nil || len(got) != 1 || got[0].V != 9 {
		t.Errorf("Next = %+v, %v", got, err)
	}
	cancel()
	if _, err := co.Next(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Next on cancelled ctx err = %v", err)
	}
	tab.Unsubscribe(co)
	tab.Update([]Sample{{ID: a, T: 6, V: 10}})
	if got := co.Take(nil); len(got) != 0 {
		t.Errorf("delivered after Unsubscribe: %+v", got)
	}
}

// TestConcurrentProducers checks with -race that producers, readers and a
// subscriber can run together and that each producer's per-tag order
// reaches the sink intact.
func TestConcurrentProducers(t *testing.T) {
	sink := &recSink{}
	tab := New(nil, DefaultOptions(), sink)
	sub := tab.Subscribe(SubOptions{Name: "s"})
	const producers, tags, rounds = 4, 50, 200
	var wg sync.WaitGroup
	for p := range producers {
		ids := make([]ID, tags)
		for i := range ids {
			ids[i], _ = tab.Define(Def{Name: fmt.Sprintf("p%d.t%d", p, i), Archive: ArchiveAll})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]Sample, tags)
			for r := range rounds {
				for i, id := range ids {
					batch[i] = Sample{ID: id, T: int64(r), V: float64(r)}
				}
				tab.Update(batch)
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf []Change
		for ctx.Err() == nil {
			buf, _ = sub.Next(ctx, buf[:0])
			tab.Latest()
		}
	}()
	wg.Wait()
	cancel()
	<-done
	last := map[string]int64{}
	pts := sink.take()
	if len(pts) != producers*tags*rounds {
		t.Fatalf("archived %d points, want %d", len(pts), producers*tags*rounds)
	}
	for _, p := range pts {
		if prev, ok := last[p.Tag]; ok && p.T != prev+1 {
			t.Fatalf("tag %s: %d after %d", p.Tag, p.T, prev)
		}
		last[p.Tag] = p.T
	}
}

func TestSetUnit(t *testing.T) {
	tab := New(nil, DefaultOptions(), nil)
	id, err := tab.Define(Def{Name: "a.b", Description: "kept", Source: "push"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.SetUnit("a.b", "degC", "x"); err != nil {
		t.Fatal(err)
	}
	if d, _ := tab.Def(id); d.Unit != "degC" || d.Description != "kept" || d.Source != "push" {
		t.Errorf("def after SetUnit: %+v", d)
	}
	if err := tab.SetUnit("new.tag", "bar", "sparkplug"); err != nil {
		t.Fatal(err)
	}
	if id, ok := tab.Lookup("new.tag"); !ok {
		t.Error("new tag not defined")
	} else if d, _ := tab.Def(id); d.Unit != "bar" || d.Source != "sparkplug" {
		t.Errorf("new def: %+v", d)
	}
	if err := tab.SetUnit("bad..name", "x", "y"); err == nil {
		t.Error("bad name accepted")
	}
}

// TestLatestAllSorted: Latest of every tag is sorted by name while tags are
// defined between reads in any order (the sorted list is extended, not
// rebuilt), and holds each tag once with its value.
func TestLatestAllSorted(t *testing.T) {
	tab := New(nil, DefaultOptions(), nil)
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]float64{}
	for round := range 20 {
		for range rng.IntN(50) {
			name := fmt.Sprintf("s%d.t%d", rng.IntN(10), rng.IntN(1000))
			v := float64(round)
			if _, err := tab.UpdatePoints([]model.Point{{Tag: name, T: int64(round), V: v}}, true, "test"); err != nil {
				t.Fatal(err)
			}
			want[name] = v
		}
		got, err := tab.Latest()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %d values, want %d", round, len(got), len(want))
		}
		for i, v := range got {
			if i > 0 && got[i-1].Tag >= v.Tag {
				t.Fatalf("round %d: %q before %q", round, got[i-1].Tag, v.Tag)
			}
			if w, ok := want[v.Tag]; !ok || w != v.V || !v.Has {
				t.Fatalf("round %d: %+v, want value %v", round, v, w)
			}
		}
	}
}
