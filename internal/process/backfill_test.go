package process

import (
	"context"
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
)

// memStore is a naive store: samples per tag in time order, the last
// write of a time wins.
type memStore map[string][]model.Sample

func (m memStore) Raw(tag string, from, to int64, limit int) ([]model.Sample, error) {
	s, ok := m[tag]
	if !ok {
		return nil, fmt.Errorf("raw %q: %w", tag, store.ErrUnknownTag)
	}
	var out []model.Sample
	for _, x := range s {
		if x.T >= from && x.T < to {
			out = append(out, x)
		}
	}
	return out, nil
}

func (m memStore) Write(_ context.Context, pts []model.Point) error {
	for _, p := range pts {
		s := m[p.Tag]
		i := sort.Search(len(s), func(i int) bool { return s[i].T >= p.T })
		x := model.Sample{T: p.T, V: p.V, Q: p.Q}
		if i < len(s) && s[i].T == p.T {
			s[i] = x
		} else {
			s = append(s, model.Sample{})
			copy(s[i+1:], s[i:])
			s[i] = x
		}
		m[p.Tag] = s
	}
	return nil
}

func (m memStore) at(tag string, t int64) (model.Sample, bool) {
	for _, x := range m[tag] {
		if x.T == t {
			return x, true
		}
	}
	return model.Sample{}, false
}

func TestRecomputeKWhPerDay(t *testing.T) {
	loc, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	in := []config.Input{{Tag: "p", Process: []config.ProcessStep{
		{Scale: f64(0.001)}, {KWhPerDay: str("p.kwh_day"), TZ: "Europe/London"}, {PowerToKWh: str("p.kwh")},
	}}}
	// 2024-10-26 .. 10-28 (the 25-hour day in the middle), 10 s samples of
	// a 1500 W load; the middle day's samples from 09:00 to 15:00 arrive
	// late.
	d0 := time.Date(2024, 10, 26, 0, 0, 0, 0, loc)
	d1, d2, d3 := d0.AddDate(0, 0, 1), d0.AddDate(0, 0, 2), d0.AddDate(0, 0, 3)
	lateFrom, lateTo := d1.Add(9*time.Hour).UnixMilli(), d1.Add(15*time.Hour).UnixMilli()
	db := memStore{}
	sink, err := NewSink(db, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var late []model.Point
	for ms := d0.UnixMilli(); ms <= d3.UnixMilli(); ms += 10_000 {
		p := model.Point{Tag: "p", T: ms, V: 1500}
		if ms >= lateFrom && ms <= lateTo {
			late = append(late, p)
			continue
		}
		if err := sink.Write(context.Background(), []model.Point{p}); err != nil {
			t.Fatal(err)
		}
	}
	// Without the late samples the middle day lacks 6 hours (the chain's
	// trapezoid spans the hole: no max_gap).
	if err := db.Write(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	rc, err := NewRecomputer(in, nil, db, db, Linear, 0)
	if err != nil {
		t.Fatal(err)
	}
	kwhBefore := db["p.kwh"]
	if _, err := rc.Recompute(context.Background(), map[string]Range{"p": {lateFrom, lateTo}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		day  time.Time
		want float64
	}{{d0, 24 * 1.5}, {d1, 25 * 1.5}, {d2, 24 * 1.5}} {
		got, ok := db.at("p.kwh_day", c.day.UnixMilli())
		if !ok || math.Abs(got.V-c.want) > 1e-9 {
			t.Errorf("%s: got %v (%v), want %v", c.day.Format("2006-01-02"), got.V, ok, c.want)
		}
	}
	// The running total is redone over the late range (the trapezoid had
	// spanned the hole, so nothing after it moves): 1.5 kWh an hour.
	if len(db["p.kwh"]) != len(db["p"]) || len(kwhBefore) >= len(db["p.kwh"]) {
		t.Errorf("power_to_kwh: %d points for %d inputs, had %d", len(db["p.kwh"]), len(db["p"]), len(kwhBefore))
	}
	for _, x := range db["p.kwh"] {
		if want := 1.5 * float64(x.T-d0.UnixMilli()) / 3_600_000; math.Abs(x.V-want) > 1e-6 {
			t.Fatalf("p.kwh at %d = %v, want %v", x.T, x.V, want)
		}
	}
}

// TestRecomputePowerToKWhShift: with max_gap the live chain integrated
// nothing over a 6-hour hole; the backfill fills the hole, moves every
// stored total after it by the missing energy, and the live chain
// continues from the corrected total.
func TestRecomputePowerToKWhShift(t *testing.T) {
	in := []config.Input{{Tag: "p", Process: []config.ProcessStep{
		{Scale: f64(0.001)}, {PowerToKWh: str("p.kwh"), MaxGap: config.Duration(5 * time.Minute)},
	}}}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	const hour = 3_600_000
	lateFrom, lateTo := t0+9*hour, t0+15*hour
	db := memStore{}
	sink, err := NewSink(db, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var late []model.Point
	end := t0 + 48*hour
	for ms := t0; ms <= end; ms += 10_000 {
		p := model.Point{Tag: "p", T: ms, V: 2000} // 2 kW
		if ms > lateFrom && ms < lateTo {
			late = append(late, p)
			continue
		}
		if err := sink.Write(context.Background(), []model.Point{p}); err != nil {
			t.Fatal(err)
		}
	}
	last := db["p.kwh"][len(db["p.kwh"])-1]
	if want := 2.0 * (48 - 6); math.Abs(last.V-want) > 1e-6 {
		t.Fatalf("before the backfill the total is %v, want %v (the hole not integrated)", last.V, want)
	}
	if err := db.Write(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	rc, err := NewRecomputer(in, nil, db, db, Linear, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc.Shift = sink.Shift
	if _, err := rc.Recompute(context.Background(), map[string]Range{"p": {late[0].T, late[len(late)-1].T}}); err != nil {
		t.Fatal(err)
	}
	for _, x := range db["p.kwh"] {
		if want := 2.0 * float64(x.T-t0) / hour; math.Abs(x.V-want) > 1e-6 {
			t.Fatalf("p.kwh at +%.3f h = %v, want %v", float64(x.T-t0)/hour, x.V, want)
		}
	}
	// The live chain continues from the corrected total.
	if err := sink.Write(context.Background(), []model.Point{{Tag: "p", T: end + 3_600_000/360, V: 2000}}); err != nil {
		t.Fatal(err)
	}
	got := db["p.kwh"][len(db["p.kwh"])-1]
	if want := 2.0 * float64(got.T-t0) / hour; math.Abs(got.V-want) > 1e-6 {
		t.Errorf("live total after the backfill %v, want %v", got.V, want)
	}
}

func TestRecomputeCalcs(t *testing.T) {
	calcs := []config.Calc{
		{Tag: "c.sum", Expr: "a.x + b.y"},
		{Tag: "c.double", Expr: "c.sum * 2"},
		{Tag: "c.avg", Expr: "(a.x + b.y) / 2", Period: config.Duration(10 * time.Second)},
	}
	db := memStore{}
	w := func(tag string, t int64, v float64, q model.Quality) {
		db.Write(context.Background(), []model.Point{{Tag: tag, T: t, V: v, Q: q}})
	}
	for i := int64(0); i < 10; i++ {
		w("b.y", i*10_000+5_000, float64(100*i), model.QualityGood)
	}
	// a.x arrives late, one sample of it bad.
	for i := int64(0); i < 10; i++ {
		q := model.QualityGood
		if i == 4 {
			q = model.QualityBad
		}
		w("a.x", i*10_000, float64(i), q)
	}
	rc, err := NewRecomputer(nil, calcs, db, db, Linear, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Recompute(context.Background(), map[string]Range{"a.x": {0, 90_000}}); err != nil {
		t.Fatal(err)
	}
	// Naive model: at every sample time of either input, a.x and b.y as of
	// that time.
	asOf := func(tag string, t int64) (model.Sample, bool) {
		var out model.Sample
		ok := false
		for _, x := range db[tag] {
			if x.T <= t {
				out, ok = x, true
			}
		}
		return out, ok
	}
	checked := 0
	for ts := int64(0); ts < 100_000; ts += 5_000 {
		a, okA := asOf("a.x", ts)
		b, okB := asOf("b.y", ts)
		sum, okS := db.at("c.sum", ts)
		dbl, okD := db.at("c.double", ts)
		if !okA || !okB {
			if okS {
				t.Errorf("t=%d: c.sum computed before every input had a value", ts)
			}
			continue
		}
		if !okS || !okD {
			t.Fatalf("t=%d: no c.sum/c.double", ts)
		}
		wantQ := worse(a.Q, b.Q)
		if sum.Q != wantQ || dbl.Q != wantQ {
			t.Errorf("t=%d: qualities %v %v, want %v", ts, sum.Q, dbl.Q, wantQ)
		}
		if wantQ != model.QualityBad && (sum.V != a.V+b.V || dbl.V != 2*(a.V+b.V)) {
			t.Errorf("t=%d: c.sum %v c.double %v, want %v %v", ts, sum.V, dbl.V, a.V+b.V, 2*(a.V+b.V))
		}
		checked++
	}
	if checked < 15 {
		t.Fatalf("checked only %d times", checked)
	}
	if avg, ok := db.at("c.avg", 30_000); !ok || avg.V != (3+200)/2.0 {
		t.Errorf("periodic c.avg at 30000 = %v %v, want %v", avg, ok, (3+200)/2.0)
	}
}

// TestRecomputeCalcWindows recomputes a calc over several read windows and
// checks every result against the naive as-of model.
func TestRecomputeCalcWindows(t *testing.T) {
	db := memStore{}
	const step = 7 * 60_000 // 7 min
	var pts []model.Point
	for ts := int64(0); ts < 3*recomputeWindow; ts += step {
		pts = append(pts, model.Point{Tag: "a.x", T: ts, V: float64(ts / step)})
		if (ts/step)%3 == 0 {
			pts = append(pts, model.Point{Tag: "b.y", T: ts + 1000, V: float64(ts/step) * 10})
		}
	}
	db.Write(context.Background(), pts)
	rc, err := NewRecomputer(nil, []config.Calc{{Tag: "c.z", Expr: "a.x * 1000 + b.y"}}, db, db, Linear, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Recompute(context.Background(), map[string]Range{"a.x": {0, 3*recomputeWindow - 1}}); err != nil {
		t.Fatal(err)
	}
	var a, b model.Sample
	hasB := false
	want := map[int64]float64{}
	// Walk all samples in time order (a.x and b.y never share a time).
	all := append(append([]model.Sample(nil), db["a.x"]...), db["b.y"]...)
	sort.Slice(all, func(i, j int) bool { return all[i].T < all[j].T })
	for _, x := range all {
		if x.T%step == 0 {
			a = x
		} else {
			b, hasB = x, true
		}
		if hasB && a.T <= x.T {
			want[x.T] = a.V*1000 + b.V
		}
	}
	got := db["c.z"]
	if len(got) != len(want) {
		for _, x := range got {
			delete(want, x.T)
		}
		t.Fatalf("%d results, want %d; missing %v", len(got), len(got)+len(want), want)
	}
	for _, x := range got {
		if w, ok := want[x.T]; !ok || x.V != w {
			t.Fatalf("t=%d: got %v, want %v (%v)", x.T, x.V, w, ok)
		}
	}
}
