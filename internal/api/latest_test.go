package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// fakeCurrent is a Current holding fixed values; err fails every call.
type fakeCurrent struct {
	vals []tag.Value // sorted by name
	err  error
}

var _ Current = (*fakeCurrent)(nil)

func (c *fakeCurrent) Latest(names ...string) ([]tag.Value, error) {
	if c.err != nil {
		return nil, c.err
	}
	if len(names) == 0 {
		return c.vals, nil
	}
	var out []tag.Value
	for _, n := range names {
		i := 0
		for i < len(c.vals) && c.vals[i].Tag != n {
			i++
		}
		if i == len(c.vals) {
			return nil, fmt.Errorf("look up tag %q: %w", n, tag.ErrUnknownTag)
		}
		out = append(out, c.vals[i])
	}
	return out, nil
}

// TestLatestCurrent: with Options.Current, a tag the table holds a value
// of answers from the table, a tag it knows without a value answers the
// stored value with the table's newer quality, and every other tag
// answers from the store as before.
func TestLatestCurrent(t *testing.T) {
	// The store holds a.x (3000, 10, uncertain) and b.y (2000, -2.5, good).
	cur := &fakeCurrent{vals: []tag.Value{
		{Tag: "a.x", T: 9000, V: 42, Q: model.QualityGood, Has: true},
		{Tag: "b.y", T: 8000, Q: model.QualityBad},                   // dead station after a restart
		{Tag: "c.z", T: 7000, V: 5, Q: model.QualityGood, Has: true}, // not archived yet
		{Tag: "d.w", T: 6000, Q: model.QualityBad},                   // never had a value anywhere
	}}
	opts := DefaultOptions()
	opts.Current = cur
	_, h := loadedServer(t, opts)
	tests := []struct {
		query  string
		status int
		want   string // the body, or a substring of the error
	}{
		{"", 200, `{"values":[{"tag":"a.x","ts":9000,"value":42,"quality":"good"},` +
			`{"tag":"b.y","ts":8000,"value":-2.5,"quality":"bad"},` +
			`{"tag":"c.z","ts":7000,"value":5,"quality":"good"}]}`},
		{"?tag=a.x", 200, `{"values":[{"tag":"a.x","ts":9000,"value":42,"quality":"good"}]}`},
		{"?tag=c.z&tag=b.y&tag=a.x", 200, `{"values":[{"tag":"c.z","ts":7000,"value":5,"quality":"good"},` +
			`{"tag":"b.y","ts":8000,"value":-2.5,"quality":"bad"},{"tag":"a.x","ts":9000,"value":42,"quality":"good"}]}`},
		{"?tag=d.w", 404, "d.w"},
		{"?tag=a.x&tag=zz", 404, "zz"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := do(t, h, http.MethodGet, "/api/v1/latest"+tt.query, nil, nil)
			if tt.status == 200 {
				wantJSON(t, r, 200, tt.want)
			} else {
				wantError(t, r, tt.status, tt.want)
			}
		})
	}

	cur.err = errors.New("table on fire")
	wantError(t, do(t, h, http.MethodGet, "/api/v1/latest?tag=a.x", nil, nil), http.StatusInternalServerError, "on fire")
}

// TestLatestCurrentWhileArchiveFrozen runs the real chain: a tag table
// whose samples go to an archive queue writing a real store. While the
// queue is frozen, latest must still show the value the table just took,
// not the one the store last received; without Options.Current it shows
// the stored one (the lag this option removes).
func TestLatestCurrentWhileArchiveFrozen(t *testing.T) {
	sopts := store.DefaultOptions()
	sopts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), sopts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	qopts := archive.DefaultOptions()
	qopts.MaxDelay = time.Millisecond
	q := archive.New(db, nil, qopts)
	defer q.Close(context.Background())
	table := tag.New(nil, tag.DefaultOptions(), q)
	id, err := table.Define(tag.Def{Name: "boiler.temp"})
	if err != nil {
		t.Fatal(err)
	}
	table.Update([]tag.Sample{{ID: id, T: 1000, V: 20, Q: model.QualityGood}})
	waitStored(t, db, "boiler.temp", 1000)

	q.Freeze(time.Hour)
	table.Update([]tag.Sample{{ID: id, T: 2000, V: 85.5, Q: model.QualityGood}})
	table.MarkBad([]tag.ID{id}, 3000)

	opts := DefaultOptions()
	opts.Current = table
	current := NewServer(WrapDB(db), opts, nil).Handler()
	storeOnly := NewServer(WrapDB(db), DefaultOptions(), nil).Handler()
	want := `{"values":[{"tag":"boiler.temp","ts":3000,"value":85.5,"quality":"bad"}]}`
	wantJSON(t, do(t, current, http.MethodGet, "/api/v1/latest?tag=boiler.temp", nil, nil), http.StatusOK, want)
	wantJSON(t, do(t, current, http.MethodGet, "/api/v1/latest", nil, nil), http.StatusOK, want)
	r := do(t, storeOnly, http.MethodGet, "/api/v1/latest?tag=boiler.temp", nil, nil)
	if !strings.Contains(r.body, `"ts":1000`) {
		t.Errorf("store-only latest %s: the queue is frozen, the store should still hold ts 1000", r.body)
	}

	// A tag only imported (never acquired) still answers from the store.
	if err := db.Write(context.Background(), []model.Point{{Tag: "lab.ph", T: 500, V: 7.1}}); err != nil {
		t.Fatal(err)
	}
	wantJSON(t, do(t, current, http.MethodGet, "/api/v1/latest", nil, nil), http.StatusOK,
		`{"values":[{"tag":"boiler.temp","ts":3000,"value":85.5,"quality":"bad"},{"tag":"lab.ph","ts":500,"value":7.1,"quality":"good"}]}`)
}

// waitStored waits until the store's newest sample of tag is at ts.
func waitStored(t *testing.T, db *store.DB, name string, ts int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if l, err := db.Latest(name); err == nil && l[0].T == ts {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s never reached the store at %d", name, ts)
}

// TestLatestAllModel: latest of every tag, over a real store (which lists
// tags in the order they were created) and a table of current values,
// equals a naive model (a map and a sort) while tags are added between
// reads, so the kept order of the store's tags is both reused and found
// stale.
func TestLatestAllModel(t *testing.T) {
	sopts := store.DefaultOptions()
	sopts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), sopts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	cur := &fakeCurrent{}
	opts := DefaultOptions()
	opts.Current = cur
	srv := NewServer(WrapDB(db), opts, nil)
	stored := map[string]store.Latest{}
	for round := range 30 {
		var pts []model.Point
		for range rng.IntN(3) * rng.IntN(20) { // some rounds add nothing
			p := model.Point{Tag: fmt.Sprintf("t%d.x", rng.IntN(200)), T: int64(1000 + round), V: float64(rng.IntN(100))}
			pts = append(pts, p)
			stored[p.Tag] = store.Latest{Tag: p.Tag, Sample: model.Sample{T: p.T, V: p.V}}
		}
		if len(pts) > 0 {
			if err := db.Write(context.Background(), pts); err != nil {
				t.Fatal(err)
			}
		}
		cur.vals = cur.vals[:0]
		for k := range 250 {
			if rng.IntN(4) == 0 {
				v := tag.Value{Tag: fmt.Sprintf("t%d.x", k), T: int64(5000 + k), V: float64(k), Q: model.QualityGood, Has: rng.IntN(2) == 0}
				if !v.Has {
					v.V, v.Q = 0, model.QualityBad
				}
				cur.vals = append(cur.vals, v)
			}
		}
		slices.SortFunc(cur.vals, func(a, b tag.Value) int { return strings.Compare(a.Tag, b.Tag) })

		want := map[string]store.Latest{}
		maps.Copy(want, stored)
		for _, v := range cur.vals {
			l, ok := want[v.Tag]
			switch {
			case v.Has:
				want[v.Tag] = fromCurrent(v)
			case ok:
				want[v.Tag] = merge(l, store.Latest{Tag: v.Tag, Sample: model.Sample{T: v.T, Q: v.Q}})
			}
		}
		var wantList []store.Latest
		for _, l := range want {
			wantList = append(wantList, l)
		}
		slices.SortFunc(wantList, func(a, b store.Latest) int { return strings.Compare(a.Tag, b.Tag) })

		got, err := srv.latest(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, wantList) {
			t.Fatalf("round %d:\ngot  %v\nwant %v", round, got, wantList)
		}
	}
}
