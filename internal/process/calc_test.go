package process

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/expr-lang/expr/vm"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

func TestCompileCalc(t *testing.T) {
	cases := []struct {
		expr   string
		inputs string // comma-separated, "" for an error
		want   float64
		err    string
	}{
		{expr: "(hx.t_out - hx.t_in) * hx.flow * 4.186", inputs: "hx.flow,hx.t_in,hx.t_out", want: 0},
		{expr: "max(a.b, c) + abs(x.y.z)", inputs: "a.b,c,x.y.z", want: 4},
		{expr: "hx + hx.a", inputs: "hx,hx.a", want: 4},
		{expr: `site["3phase"].l1 * 2`, inputs: "site.3phase.l1", want: 4},
		{expr: "a.b > 1 ? 10 : 0", inputs: "a.b", want: 10},
		{expr: "foo(a)", err: "unknown function"},
		{expr: `"text"`, err: "expected float64"},
		{expr: "let x = 1; x + a", err: "let is not supported"},
		{expr: "out + 1", err: "reads itself"},
		{expr: "(a.b", err: "compile calc"},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			c, err := CompileCalc(config.Calc{Tag: "out", Expr: tc.expr})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.Inputs, ","); got != tc.inputs {
				t.Fatalf("inputs %q, want %q", got, tc.inputs)
			}
			in := make([]model.Sample, len(c.Inputs))
			for i := range in {
				in[i].V = 2
			}
			v, q, err := c.Eval(&vm.VM{}, in)
			if err != nil || q != model.QualityGood || v != tc.want {
				t.Fatalf("eval = %v %v %v, want %v good", v, q, err, tc.want)
			}
		})
	}
}

func TestEvalQuality(t *testing.T) {
	c, err := CompileCalc(config.Calc{Tag: "out", Expr: "a.x / b.y"})
	if err != nil {
		t.Fatal(err)
	}
	g, u, b := model.QualityGood, model.QualityUncertain, model.QualityBad
	cases := []struct {
		in    []model.Sample
		wantQ model.Quality
	}{
		{[]model.Sample{{V: 1, Q: g}, {V: 2, Q: g}}, g},
		{[]model.Sample{{V: 1, Q: u}, {V: 2, Q: g}}, u},
		{[]model.Sample{{V: 1, Q: u}, {V: 2, Q: b}}, b},
		{[]model.Sample{{V: 1, Q: g}, {V: 0, Q: g}}, b}, // +Inf
	}
	for i, tc := range cases {
		if _, q, _ := c.Eval(&vm.VM{}, tc.in); q != tc.wantQ {
			t.Errorf("case %d: quality %v, want %v", i, q, tc.wantQ)
		}
	}
}

func TestCyclesRefused(t *testing.T) {
	calcs := []config.Calc{
		{Tag: "a.x", Expr: "b.x + 1"},
		{Tag: "b.x", Expr: "c.x * 2"},
		{Tag: "c.x", Expr: "a.x - src.v"},
	}
	_, err := New(nil, calcs, tag.New(nil, tag.DefaultOptions(), nil), nil, nil)
	if !errors.Is(err, ErrCycle) || !strings.Contains(err.Error(), "a.x -> b.x -> c.x -> a.x") {
		t.Fatalf("got %v, want the cycle a.x -> b.x -> c.x -> a.x", err)
	}
	// Without the back edge it loads, in dependency order.
	calcs[2].Expr = "src.v - 1"
	e, err := New(nil, calcs, tag.New(nil, tag.DefaultOptions(), nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range e.calcs {
		got = append(got, c.Tag)
	}
	if s := strings.Join(got, " "); s != "c.x b.x a.x" {
		t.Fatalf("order %s, want c.x b.x a.x", s)
	}
}

// harness is a table and an engine fed by hand: Update the table, then
// Apply what the subscription took.
type harness struct {
	t   *testing.T
	tab *tag.Table
	e   *Engine
	sub *tag.Subscription
}

func newHarness(t *testing.T, inputs []config.Input, calcs []config.Calc) *harness {
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	e, err := New(inputs, calcs, tab, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, tab: tab, e: e, sub: tab.Subscribe(tag.SubOptions{Mode: tag.Queue})}
}

// put writes samples into the table and lets the engine run until quiet.
func (h *harness) put(pts ...model.Point) {
	h.t.Helper()
	if _, err := h.tab.UpdatePoints(pts, true, "test"); err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		cs := h.sub.Take(nil)
		if len(cs) == 0 {
			return
		}
		h.e.Apply(cs)
	}
}

func (h *harness) get(name string) tag.Value {
	h.t.Helper()
	v, err := h.tab.Latest(name)
	if err != nil {
		h.t.Fatal(err)
	}
	return v[0]
}

func TestEngineOnChange(t *testing.T) {
	h := newHarness(t, nil, []config.Calc{
		{Tag: "hx.power_kw", Expr: "(hx.t_out - hx.t_in) * hx.flow * 4.186"},
		{Tag: "hx.power_w", Expr: "hx.power_kw * 1000"}, // a calc of a calc
	})
	h.put(model.Point{Tag: "hx.t_out", T: 1000, V: 60}, model.Point{Tag: "hx.t_in", T: 1000, V: 40})
	if v := h.get("hx.power_kw"); v.Has {
		t.Fatalf("computed %v before every input had a value", v)
	}
	h.put(model.Point{Tag: "hx.flow", T: 2000, V: 0.5})
	if v := h.get("hx.power_w"); !v.Has || v.T != 2000 || v.Q != model.QualityGood || !near(v.V, 20*0.5*4.186*1000) {
		t.Fatalf("power_w = %+v, want %v at 2000 good", v, 20*0.5*4.186*1000)
	}
	// A bad input makes both results bad (values held), a good one heals.
	h.put(model.Point{Tag: "hx.flow", T: 3000, V: 0.5, Q: model.QualityBad})
	if kw, w := h.get("hx.power_kw"), h.get("hx.power_w"); kw.Q != model.QualityBad || w.Q != model.QualityBad || w.T != 3000 {
		t.Fatalf("after a bad input: %+v %+v, want both bad at 3000", kw, w)
	}
	h.put(model.Point{Tag: "hx.flow", T: 4000, V: 1, Q: model.QualityUncertain})
	if w := h.get("hx.power_w"); w.Q != model.QualityUncertain || !near(w.V, 20*4.186*1000) {
		t.Fatalf("after an uncertain input: %+v, want uncertain %v", w, 20*4.186*1000)
	}
	if st := h.e.Stats(); st.Evals == 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEnginePeriod(t *testing.T) {
	h := newHarness(t, nil, []config.Calc{{Tag: "avg.t", Expr: "(a.t + b.t) / 2", Period: config.Duration(time.Minute)}})
	h.put(model.Point{Tag: "a.t", T: 1000, V: 10}, model.Point{Tag: "b.t", T: 1000, V: 20})
	if v := h.get("avg.t"); v.Has {
		t.Fatalf("periodic calc ran on change: %+v", v)
	}
	h.e.EvalPeriod(time.Minute, 60_000)
	if v := h.get("avg.t"); v.V != 15 || v.T != 60_000 {
		t.Fatalf("got %+v, want 15 at 60000", v)
	}
}

func TestEngineChainOnTable(t *testing.T) {
	in := []config.Input{{Tag: "house.power", Process: []config.ProcessStep{
		{Scale: f64(0.001)}, {AllowPositive: yes()}, {PowerToKWh: str("house.energy_kwh")},
		{KWhPerDay: str("house.kwh_day"), TZ: "UTC"},
	}}}
	h := newHarness(t, in, []config.Calc{{Tag: "house.energy_wh", Expr: "house.energy_kwh * 1000"}})
	h.put(model.Point{Tag: "house.power", T: 0, V: 2000})
	h.put(model.Point{Tag: "house.power", T: 1_800_000, V: -500}) // 2 kW held 30 min: 1 kWh
	h.put(model.Point{Tag: "house.power", T: 3_600_000, V: 1000}) // clipped to 0 for 30 min
	if v := h.get("house.energy_kwh"); v.V != 1 || v.T != 3_600_000 {
		t.Fatalf("energy %+v, want 1 kWh at 3600000", v)
	}
	if v := h.get("house.kwh_day"); v.V != 1 || v.T != 0 {
		t.Fatalf("kwh_day %+v, want 1 at 0", v)
	}
	if v := h.get("house.energy_wh"); v.V != 1000 {
		t.Fatalf("calc over a chain output %+v, want 1000", v)
	}
}

// cpuTime returns the process's CPU time (user + system) in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

// BenchmarkCalcTags measures the CPU one simulated second costs with
// 10,000 calculated tags whose three inputs each change every second
// (30,000 input changes, 10,000 evaluations, results written back to the
// table). pct_core is the share of one core that second takes.
//
//	go test ./internal/process -run XXX -bench CalcTags -count 5
func BenchmarkCalcTags(b *testing.B) {
	const n = 10_000
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	calcs := make([]config.Calc, n)
	for i := range calcs {
		calcs[i] = config.Calc{Tag: fmt.Sprintf("hx%d.power", i), Expr: fmt.Sprintf("(hx%d.t_out - hx%d.t_in) * hx%d.flow * 4.186", i, i, i)}
	}
	e, err := New(nil, calcs, tab, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]tag.ID, 0, 3*n)
	for i := 0; i < n; i++ {
		for _, s := range []string{"t_out", "t_in", "flow"} {
			id, _ := tab.Lookup(fmt.Sprintf("hx%d.%s", i, s))
			ids = append(ids, id)
		}
	}
	cs := make([]tag.Change, len(ids))
	runtime.GC() // the compile's garbage is not the loop's cost
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for it := 0; it < b.N; it++ {
		t := int64(it+1) * 1000
		for j, id := range ids {
			cs[j] = tag.Change{ID: id, T: t, V: float64(it%50 + j%7), Has: true}
		}
		e.Apply(cs)
	}
	b.StopTimer()
	// CPU time (user + system, every thread: GC included) per simulated
	// second, as a share of one core; wall time on a shared machine would
	// count other processes' use of this core.
	perSec := float64(cpuTime()-cpu0) / float64(b.N)
	b.ReportMetric(perSec/1e9*100, "pct_core")
	b.ReportMetric(float64(n), "calcs")
}

func TestEngineStartStop(t *testing.T) {
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	e, err := New(nil, []config.Calc{
		{Tag: "out.x", Expr: "src.a * 2"},
		{Tag: "out.tick", Expr: "src.a + 1", Period: config.Duration(20 * time.Millisecond)},
	}, tab, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Start(context.Background())
	defer e.Stop()
	if _, err := tab.UpdatePoints([]model.Point{{Tag: "src.a", T: 1000, V: 21}}, true, "test"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		x, _ := tab.Latest("out.x", "out.tick")
		if x[0].V == 42 && x[0].T == 1000 && x[1].V == 22 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %+v, want out.x 42 at 1000 and out.tick 22", x)
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.Stop()
	e.Stop() // idempotent
}

// pushed turns points into the changes Table.Write delivers.
func (h *harness) pushed(pts ...model.Point) []tag.Change {
	var cs []tag.Change
	for _, p := range pts {
		id, ok := h.tab.Lookup(p.Tag)
		if !ok {
			h.t.Fatalf("tag %s not defined", p.Tag)
		}
		cs = append(cs, tag.Change{ID: id, Tag: p.Tag, T: p.T, V: p.V, Q: p.Q, Has: true, Pushed: true})
	}
	return cs
}

// TestEnginePushed checks pushed values as the table delivers them: calcs
// reading them are evaluated in time order even when the batch is not.
func TestEnginePushed(t *testing.T) {
	h := newHarness(t, nil, []config.Calc{{Tag: "c.x", Expr: "p.a - p.b"}})
	h.e.Apply(h.pushed(model.Point{Tag: "p.b", T: 2000, V: 1}, model.Point{Tag: "p.a", T: 1000, V: 5}))
	if v := h.get("c.x"); v.V != 4 || v.T != 2000 {
		t.Fatalf("c.x = %+v, want 4 at 2000", v)
	}
}

func TestEnginePushedPeriodic(t *testing.T) {
	h := newHarness(t, nil, []config.Calc{{Tag: "c.p", Expr: "p.a * 3", Period: config.Duration(time.Minute)}})
	h.e.Apply(h.pushed(model.Point{Tag: "p.a", T: 1000, V: 5}))
	h.e.EvalPeriod(time.Minute, 60_000)
	if v := h.get("c.p"); v.V != 15 || v.T != 60_000 {
		t.Fatalf("c.p = %+v, want 15 at 60000", v)
	}
}

// TestEnginePushedSkipsChains checks that a pushed value does not run its
// input chain a second time: the push road ran it before storing.
func TestEnginePushedSkipsChains(t *testing.T) {
	in := []config.Input{{Tag: "p.in", Process: []config.ProcessStep{{Scale: f64(2)}, {Log: str("p.out")}}}}
	h := newHarness(t, in, nil)
	h.e.Apply(h.pushed(model.Point{Tag: "p.in", T: 1000, V: 5}))
	if v := h.get("p.out"); v.Has {
		t.Fatalf("p.out written by the engine for a pushed value: %+v", v)
	}
	h.put(model.Point{Tag: "p.in", T: 2000, V: 5}) // acquired: the engine runs the chain
	if v := h.get("p.out"); v.V != 10 {
		t.Fatalf("p.out = %+v, want 10 from the acquired value", v)
	}
}

// TestEnginePause: a paused engine computes nothing, on change or by
// period, but keeps its inputs; resumed, the next change computes from
// every input's latest value.
func TestEnginePause(t *testing.T) {
	h := newHarness(t, nil, []config.Calc{
		{Tag: "p.sum", Expr: "p.a + p.b"},
		{Tag: "p.avg", Expr: "(p.a + p.b) / 2", Period: config.Duration(time.Minute)},
	})
	h.e.Pause(true)
	h.put(model.Point{Tag: "p.a", T: 1000, V: 1}, model.Point{Tag: "p.b", T: 1000, V: 2})
	h.e.EvalPeriod(time.Minute, 60_000)
	if s, a := h.get("p.sum"), h.get("p.avg"); s.Has || a.Has {
		t.Fatalf("paused engine computed %+v %+v", s, a)
	}
	h.e.Pause(false)
	h.put(model.Point{Tag: "p.b", T: 2000, V: 5})
	if s := h.get("p.sum"); s.V != 6 || s.T != 2000 {
		t.Fatalf("resumed: p.sum %+v, want 6 at 2000", s)
	}
	h.e.EvalPeriod(time.Minute, 120_000)
	if a := h.get("p.avg"); a.V != 3 || a.T != 120_000 {
		t.Fatalf("resumed: p.avg %+v, want 3 at 120000", a)
	}
}
