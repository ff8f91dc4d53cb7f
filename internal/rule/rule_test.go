package rule

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// recorder is a Controller that records writes and fails while fail is
// set.
type recorder struct {
	mu     sync.Mutex
	writes []string
	fail   error
}

func (r *recorder) Control(_ context.Context, name string, v float64, who string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.writes = append(r.writes, fmt.Sprintf("%s=%v by %s", name, v, who))
	return nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

type fakeSchedules map[string]bool

func (f fakeSchedules) On(name string, _ time.Time) (bool, bool) { on, ok := f[name]; return on, ok }

// ruleRig runs one engine over a real table with a fake clock.
type ruleRig struct {
	t   *testing.T
	clk *fakeClock
	tab *tag.Table
	rec *recorder
	e   *Engine
}

func newRuleRig(t *testing.T, c config.Rules, sched Schedules, tags ...string) *ruleRig {
	t.Helper()
	r := &ruleRig{t: t, clk: &fakeClock{t: t0}, tab: tag.New(nil, tag.DefaultOptions(), nil), rec: &recorder{}}
	for _, n := range tags {
		if _, err := r.tab.Define(tag.Def{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	r.e, err = New(c, r.tab, sched, r.rec, Options{Scan: time.Second, Clock: r.clk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *ruleRig) set(name string, v float64) {
	id, _ := r.tab.Lookup(name)
	r.tab.Update([]tag.Sample{{ID: id, T: r.clk.t.UnixMilli(), V: v}})
}

// at moves the clock to t0+sec and evaluates.
func (r *ruleRig) at(sec float64) {
	r.clk.t = t0.Add(time.Duration(sec * float64(time.Second)))
	r.e.Evaluate(context.Background(), r.clk.t)
}

func TestRuleHysteresisAndFor(t *testing.T) {
	c := config.Rules{Rule: []config.RuleDef{{Name: "heat", When: `tag("room.t") < 19`, For: config.Duration(time.Minute),
		Release: `tag("room.t") > 21`, ReleaseFor: config.Duration(10 * time.Second), Tag: "heater", Value: 1, ReleaseValue: 0}}}
	r := newRuleRig(t, c, nil, "room.t")
	type step struct {
		sec  float64
		temp float64 // NaN: unchanged
		want string  // writes expected at this step, joined by ";"
	}
	nan := math.NaN()
	steps := []step{
		{0, 20, "heater=0 by rule:heat"}, // first judgement: released, output written
		{1, 18, ""},                      // below 19: For starts
		{30, 19.5, ""},                   // back above 19: For restarts
		{31, 18.5, ""},
		{90, nan, ""},
		{91, nan, "heater=1 by rule:heat"}, // 60 s below 19
		{92, 20, ""},                       // inside the hysteresis band: stays on
		{200, nan, ""},
		{201, 21.5, ""}, // above 21: release_for starts
		{210, nan, ""},
		{211, nan, "heater=0 by rule:heat"},
		{212, 20, ""}, // band: stays off
	}
	for i, s := range steps {
		r.clk.t = t0.Add(time.Duration(s.sec * float64(time.Second)))
		if !math.IsNaN(s.temp) {
			r.set("room.t", s.temp)
		}
		r.at(s.sec)
		if got := strings.Join(r.rec.take(), ";"); got != s.want {
			t.Fatalf("step %d (t=%vs temp=%v): writes %q, want %q", i, s.sec, s.temp, got, s.want)
		}
	}
}

func TestRuleScheduleUnknownTagAndDryRun(t *testing.T) {
	sched := fakeSchedules{"roomB": false}
	c := config.Rules{Rule: []config.RuleDef{
		{Name: "sched", When: `schedule("roomB")`, Tag: "heater", Value: 1, ReleaseValue: 0},
		{Name: "missing", When: `tag("no.such.tag") > 1`, Tag: "x", Value: 1, ReleaseValue: 0},
		{Name: "dry", When: `schedule("roomB")`, Tag: "y", Value: 5, NoRelease: true, DryRun: true},
	}}
	r := newRuleRig(t, c, sched)
	r.at(0)
	if got := r.rec.take(); len(got) != 1 || got[0] != "heater=0 by rule:sched" {
		t.Fatalf("first scan writes %q", got)
	}
	sched["roomB"] = true
	r.at(1)
	if got := r.rec.take(); len(got) != 1 || got[0] != "heater=1 by rule:sched" {
		t.Fatalf("schedule on: writes %q (the dry-run rule must not write)", got)
	}
	var missing, dry Status
	for _, s := range r.e.Statuses() {
		switch s.Name {
		case "missing":
			missing = s
		case "dry":
			dry = s
		}
	}
	if missing.State != "unknown" || !strings.Contains(missing.Error, "unknown tag") {
		t.Errorf("missing-tag rule: %+v", missing)
	}
	if dry.State != "active" || !dry.Written || !dry.DryRun {
		t.Errorf("dry-run rule: %+v", dry)
	}
}

func TestRuleOverrideExpires(t *testing.T) {
	sched := fakeSchedules{"s": true}
	c := config.Rules{Rule: []config.RuleDef{{Name: "r", When: `schedule("s")`, Tag: "valve", Value: 1, ReleaseValue: 0}}}
	r := newRuleRig(t, c, sched)
	r.at(0)
	r.rec.take()
	if err := r.e.Override(context.Background(), "r", 0, time.Hour, "ann"); err != nil {
		t.Fatal(err)
	}
	if got := r.rec.take(); len(got) != 1 || got[0] != "valve=0 by override:ann" {
		t.Fatalf("override writes %q", got)
	}
	sched["s"] = false
	r.at(60)
	sched["s"] = true
	r.at(120)
	if got := r.rec.take(); len(got) != 0 {
		t.Fatalf("rule wrote during its override: %q", got)
	}
	r.at(3600)
	if got := r.rec.take(); len(got) != 1 || got[0] != "valve=1 by rule:r" {
		t.Fatalf("after the override expired: %q", got)
	}
	if err := r.e.Override(context.Background(), "nope", 0, time.Hour, "ann"); !errors.Is(err, ErrUnknownRule) {
		t.Fatal(err)
	}
	// Ending an override early gives the rule back at the next scan.
	if err := r.e.Override(context.Background(), "r", 0, time.Hour, "bob"); err != nil {
		t.Fatal(err)
	}
	r.rec.take()
	if err := r.e.EndOverride("r"); err != nil {
		t.Fatal(err)
	}
	r.at(3601)
	if got := r.rec.take(); len(got) != 1 || got[0] != "valve=1 by rule:r" {
		t.Fatalf("after EndOverride: %q", got)
	}
}

type alarmRecorder struct {
	mu    sync.Mutex
	state map[string]bool
}

func (a *alarmRecorder) Set(name string, active bool, _ string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state[name] = active
}

func (a *alarmRecorder) get(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state[name]
}

func TestRuleFailedWriteRetriesAndAlarms(t *testing.T) {
	sched := fakeSchedules{"s": true}
	clk := &fakeClock{t: t0}
	rec := &recorder{fail: errors.New("device timeout")}
	alarms := &alarmRecorder{state: map[string]bool{}}
	g := NewGuard(rec, nil, alarms, clk.Now, nil)
	c := config.Rules{Rule: []config.RuleDef{{Name: "r", When: `schedule("s")`, Tag: "pump", Value: 1}}}
	e, err := New(c, tag.New(nil, tag.DefaultOptions(), nil), sched, g, Options{Scan: time.Second, Clock: clk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eval := func(sec int) {
		clk.t = t0.Add(time.Duration(sec) * time.Second)
		e.Evaluate(context.Background(), clk.t)
	}
	eval(0)
	if !alarms.get(WriteAlarm("pump")) {
		t.Fatal("failed write raised no alarm")
	}
	rec.mu.Lock()
	rec.fail = nil
	rec.mu.Unlock()
	eval(0) // before the retry time: no attempt
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("retried before its backoff: %q", got)
	}
	eval(1)
	if got := rec.take(); len(got) != 1 {
		t.Fatalf("retry writes %q", got)
	}
	if alarms.get(WriteAlarm("pump")) {
		t.Fatal("successful write did not clear the alarm")
	}
}

func TestGuardLimits(t *testing.T) {
	lo, hi := 5.0, 80.0
	clk := &fakeClock{t: t0}
	rec := &recorder{}
	alarms := &alarmRecorder{state: map[string]bool{}}
	g := NewGuard(rec, Limits([]config.WriteLimit{{Tag: "sp", Min: &lo, Max: &hi, MaxRate: 0.5}, {Tag: "open", Max: &hi}}), alarms, clk.Now, nil)
	tests := []struct {
		sec  int
		tag  string
		v    float64
		okay bool
	}{
		{0, "sp", 4.9, false}, // below min
		{0, "sp", 80.1, false},
		{0, "sp", 20, true},     // first write: only the bounds apply
		{10, "sp", 25.1, false}, // 5.1 in 10 s > 0.5/s
		{10, "sp", 25, true},    // exactly 0.5/s
		{10, "sp", 25, true},    // no change, no time: fine
		{10, "open", -1e9, true},
		{10, "open", 81, false},
		{10, "free", 1e9, true}, // no limits
	}
	for i, tc := range tests {
		clk.t = t0.Add(time.Duration(tc.sec) * time.Second)
		err := g.Control(context.Background(), tc.tag, tc.v, "test")
		if (err == nil) != tc.okay {
			t.Fatalf("case %d %+v: err %v", i, tc, err)
		}
		if err != nil && !errors.Is(err, api.ErrControlValue) {
			t.Fatalf("case %d: refusal %v is not ErrControlValue", i, err)
		}
		if alarms.get(WriteAlarm(tc.tag)) == tc.okay {
			t.Fatalf("case %d: write alarm %v after ok=%v", i, alarms.get(WriteAlarm(tc.tag)), tc.okay)
		}
	}
	// An unknown tag is the caller's typo, not a plant alarm.
	rec.fail = fmt.Errorf("write tag %q: %w", "typo", store.ErrUnknownTag)
	_ = g.Control(context.Background(), "typo", 1, "test")
	if alarms.get(WriteAlarm("typo")) {
		t.Fatal("unknown tag raised a write alarm")
	}
}

func TestRuleCompileErrors(t *testing.T) {
	for _, when := range []string{`room.t < 19`, `tag("a")`, `tag(1) > 2`, `nosuch("a")`, `tag("a") <`} {
		c := config.Rules{Rule: []config.RuleDef{{Name: "r", When: when, Tag: "x"}}}
		if _, err := New(c, tag.New(nil, tag.DefaultOptions(), nil), nil, &recorder{}, Options{}, nil); err == nil {
			t.Errorf("when = %q compiled", when)
		}
	}
	c := config.Rules{Rule: []config.RuleDef{{Name: "r", When: `good("a") && age("a") < 5 && !schedule("s")`, Tag: "x"}}}
	if _, err := New(c, tag.New(nil, tag.DefaultOptions(), nil), nil, &recorder{}, Options{}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRuleHTTP(t *testing.T) {
	sched := fakeSchedules{"s": true}
	c := config.Rules{Rule: []config.RuleDef{{Name: "r", When: `schedule("s")`, Tag: "valve", Value: 1, ReleaseValue: 0}}}
	r := newRuleRig(t, c, sched)
	r.at(0)
	r.rec.take()
	h := r.e.Handler()
	do := func(method, path, body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		return w
	}
	if w := do("GET", "/api/v1/rules", ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"state":"active"`) {
		t.Fatalf("GET rules: %d %s", w.Code, w.Body)
	}
	for body, want := range map[string]int{
		`{"rule":"r","value":0,"for":"30m"}`:    200,
		`{"rule":"nope","value":0,"for":"30m"}`: 404,
		`{"rule":"r","for":"30m"}`:              400,
		`{"rule":"r","value":0,"for":"0s"}`:     400,
		`{"rule":"r","value":0,"for":"1000h"}`:  400,
		`{"rule":"r","value":0,"for":"x"}`:      400,
	} {
		if w := do("POST", "/api/v1/rules/override", body); w.Code != want {
			t.Errorf("POST %s: %d %s, want %d", body, w.Code, w.Body, want)
		}
	}
	if got := r.rec.take(); len(got) != 1 || !strings.HasPrefix(got[0], "valve=0 by override:") {
		t.Fatalf("override writes %q", got)
	}
	if w := do("GET", "/api/v1/rules", ""); !strings.Contains(w.Body.String(), `"override_value":0`) {
		t.Fatalf("override not shown: %s", w.Body)
	}
	if w := do("DELETE", "/api/v1/rules/override/r", ""); w.Code != 200 {
		t.Fatalf("DELETE override: %d", w.Code)
	}
	if w := do("DELETE", "/api/v1/rules/override/nope", ""); w.Code != 404 {
		t.Fatalf("DELETE unknown override: %d", w.Code)
	}
	r.at(1)
	if got := r.rec.take(); len(got) != 1 || got[0] != "valve=1 by rule:r" {
		t.Fatalf("after override ended: %q", got)
	}
}

func TestRuleReload(t *testing.T) {
	sched := fakeSchedules{"s": true}
	c := config.Rules{Rule: []config.RuleDef{
		{Name: "same", When: `schedule("s")`, Tag: "a", Value: 1},
		{Name: "changed", When: `schedule("s")`, Tag: "b", Value: 1},
		{Name: "gone", When: `schedule("s")`, Tag: "c", Value: 1},
	}}
	r := newRuleRig(t, c, sched)
	r.at(0)
	if got := r.rec.take(); len(got) != 3 {
		t.Fatalf("first writes %q", got)
	}
	c2 := config.Rules{Rule: []config.RuleDef{
		{Name: "same", When: `schedule("s")`, Tag: "a", Value: 1},
		{Name: "changed", When: `schedule("s")`, Tag: "b", Value: 2},
		{Name: "new", When: `schedule("s")`, Tag: "d", Value: 1},
	}}
	if err := r.e.Reload(c2); err != nil {
		t.Fatal(err)
	}
	r.at(1)
	if got := strings.Join(r.rec.take(), ";"); got != "b=2 by rule:changed;d=1 by rule:new" {
		t.Fatalf("after reload: %q", got)
	}
	bad := config.Rules{Rule: []config.RuleDef{{Name: "x", When: `nosuch()`, Tag: "a"}}}
	if err := r.e.Reload(bad); err == nil {
		t.Fatal("bad rule accepted")
	}
	if got := len(r.e.Statuses()); got != 3 {
		t.Fatalf("a refused reload changed the rules: %d", got)
	}
}
