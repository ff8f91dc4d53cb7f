// Package rule evaluates automation rules on a scan: when a condition over
// tag values and schedule states holds for a duration, a value is written
// to a tag through the control path (so every write is logged and obeys
// the write limits of Guard); when the release condition holds, the
// release value is written.
//
// A rule has three states: unknown (just started), active and released.
// Its first judgement writes its output at once when the condition does
// not hold (the release value), so a restart leaves no output stuck on.
// A manual override writes a value and suspends the rule's writes until
// it expires; the rule then writes its own output again.
package rule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

// Clock tells the engine the time; tests pass a fake one.
type Clock = clock.Clock

// Table is the part of the tag table rules read; *tag.Table implements
// it. Both methods are safe for concurrent use.
type Table interface {
	Lookup(name string) (tag.ID, bool)
	Get(id tag.ID) (tag.Value, bool)
}

var _ Table = (*tag.Table)(nil)

// Schedules answers schedule("name"); *schedule.Engine implements it.
type Schedules interface {
	On(name string, now time.Time) (on, ok bool)
}

// Options tune an Engine.
type Options struct {
	Scan   time.Duration // between evaluations
	DryRun bool          // log writes instead of making them, for every rule
	Clock  Clock         // nil is the wall clock
	// WriteTimeout bounds one control write.
	WriteTimeout time.Duration
}

// Default option values.
const (
	defaultWriteTimeout = 10 * time.Second
	maxRetryWait        = time.Minute // longest wait between retries of a failed write
	maxExprLen          = 4096
)

// Rule is one compiled rule.
type Rule struct {
	def     config.RuleDef
	when    *vm.Program
	release *vm.Program // nil: not when

	state    int8 // 0 unknown, 1 active, -1 released
	pending  bool
	since    time.Time
	out      float64 // the output the rule wants written
	hasOut   bool
	written  bool // out reached the device (or the dry-run log)
	retryAt  time.Time
	retryGap time.Duration
	lastErr  string

	override      bool
	overrideValue float64
	overrideUntil time.Time
	overrideBy    string
}

// evalEnv is the state the expression functions read during one
// evaluation; the engine fills it before each scan.
type evalEnv struct {
	tab    Table
	sched  Schedules
	now    time.Time
	errTag string
}

// Engine evaluates rules. Its methods are safe for concurrent use; Run
// is called once.
type Engine struct {
	log  *slog.Logger
	opts Options
	ctl  api.Controller

	paused atomic.Bool // see Pause

	mu     sync.Mutex // serializes evaluations, overrides and reads
	rules  []*Rule
	dryRun bool // [rules] dry_run, reloadable
	env    *evalEnv
	vm     vm.VM
}

// New compiles the rules of the [rules] section. ctl is the control path
// (a Guard); sched may be nil when no schedules run.
func New(c config.Rules, tab Table, sched Schedules, ctl api.Controller, opts Options, log *slog.Logger) (*Engine, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Scan <= 0 {
		opts.Scan = config.DefaultRuleScan.Std()
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = defaultWriteTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{log: log, opts: opts, ctl: ctl, env: &evalEnv{tab: tab, sched: sched}}
	rules, err := e.compileAll(c)
	if err != nil {
		return nil, err
	}
	e.rules, e.dryRun = rules, c.DryRun
	return e, nil
}

func (e *Engine) compileAll(c config.Rules) ([]*Rule, error) {
	var rules []*Rule
	for i, d := range c.Rule {
		r := &Rule{def: d}
		var err error
		if r.when, err = e.compile(d.When); err != nil {
			return nil, fmt.Errorf("rules.rule[%d].when: %w", i, err)
		}
		if d.Release != "" {
			if r.release, err = e.compile(d.Release); err != nil {
				return nil, fmt.Errorf("rules.rule[%d].release: %w", i, err)
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// Reload replaces the rules (the scan stays). A rule whose definition is
// unchanged keeps its state; a changed one starts unknown (its first
// judgement writes its output again) but keeps an override of the same
// tag; a removed one stops writing.
func (e *Engine) Reload(c config.Rules) error {
	apply, err := e.PrepareReload(c)
	if err != nil {
		return err
	}
	apply()
	return nil
}

// PrepareReload compiles c's rules and returns how to make them the
// running ones, changing nothing yet; apply cannot fail. A config reload
// calls it only once every part of the new config was prepared.
func (e *Engine) PrepareReload(c config.Rules) (apply func(), err error) {
	rules, err := e.compileAll(c)
	if err != nil {
		return nil, err
	}
	return func() { e.apply(c, rules) }, nil
}

// apply swaps in compiled rules, carrying over the state of unchanged ones.
func (e *Engine) apply(c config.Rules, rules []*Rule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range rules {
		o := e.find(r.def.Name)
		switch {
		case o == nil:
		case o.def == r.def:
			r.state, r.pending, r.since, r.out, r.hasOut, r.written = o.state, o.pending, o.since, o.out, o.hasOut, o.written
			r.retryAt, r.retryGap, r.lastErr = o.retryAt, o.retryGap, o.lastErr
			fallthrough
		case o.def.Tag == r.def.Tag:
			r.override, r.overrideValue, r.overrideUntil, r.overrideBy = o.override, o.overrideValue, o.overrideUntil, o.overrideBy
		}
	}
	e.rules, e.dryRun = rules, c.DryRun
}

// compile compiles a condition with the rule functions:
// tag(name) the value, good(name) whether it is good, age(name) its age
// in seconds, schedule(name) a schedule's state.
func (e *Engine) compile(src string) (*vm.Program, error) {
	if len(src) > maxExprLen {
		return nil, fmt.Errorf("expression longer than %d bytes", maxExprLen)
	}
	env := e.env
	value := func(name string) (tag.Value, error) {
		id, ok := env.tab.Lookup(name)
		if !ok {
			return tag.Value{}, fmt.Errorf("tag %q: %w", name, tag.ErrUnknownTag)
		}
		v, _ := env.tab.Get(id)
		return v, nil
	}
	str := func(params []any) string { s, _ := params[0].(string); return s }
	return expr.Compile(src, expr.Env(noVars), expr.AsBool(),
		expr.Function("tag", func(params ...any) (any, error) {
			v, err := value(str(params))
			if err != nil {
				return nil, err
			}
			if !v.Has {
				return nil, fmt.Errorf("tag %q has no value yet", v.Tag)
			}
			if v.Q == model.QualityBad {
				return nil, fmt.Errorf("tag %q is bad", v.Tag)
			}
			return v.V, nil
		}, new(func(string) float64)),
		expr.Function("good", func(params ...any) (any, error) {
			v, err := value(str(params))
			return err == nil && v.Has && v.Q == model.QualityGood, nil
		}, new(func(string) bool)),
		expr.Function("age", func(params ...any) (any, error) {
			v, err := value(str(params))
			if err != nil {
				return nil, err
			}
			if v.T == 0 {
				return nil, fmt.Errorf("tag %q has no sample yet", v.Tag)
			}
			return float64(env.now.UnixMilli()-v.T) / 1000, nil
		}, new(func(string) float64)),
		expr.Function("schedule", func(params ...any) (any, error) {
			name := str(params)
			if env.sched == nil {
				return nil, fmt.Errorf("schedule %q: no schedules run", name)
			}
			on, ok := env.sched.On(name, env.now)
			if !ok {
				return nil, fmt.Errorf("unknown schedule %q", name)
			}
			return on, nil
		}, new(func(string) bool)),
	)
}

// noVars is the empty environment: conditions read tags through
// functions only, so a bare name is a compile error.
var noVars = map[string]any{}

// run evaluates one program; a run-time error (an unknown or bad tag)
// makes the condition unknown.
func (e *Engine) run(p *vm.Program) (bool, error) {
	out, err := e.vm.Run(p, noVars)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, errors.New("condition is not a boolean")
	}
	return b, nil
}

// Run evaluates the rules every scan until ctx ends.
func (e *Engine) Run(ctx context.Context) error {
	t := time.NewTicker(e.opts.Scan)
	defer t.Stop()
	for {
		if !e.paused.Load() {
			e.Evaluate(ctx, e.opts.Clock.Now())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pause stops (true) or resumes (false) Run's evaluations: a paused
// engine judges no rule and writes nothing (the standby box of a
// redundant pair). Each rule keeps its state for the resume.
func (e *Engine) Pause(p bool) { e.paused.Store(p) }

// Evaluate judges every rule at now and makes the writes due.
func (e *Engine) Evaluate(ctx context.Context, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.env.now = now
	for _, r := range e.rules {
		e.judge(r, now)
		e.act(ctx, r, now)
	}
}

// judge moves r's state machine.
func (e *Engine) judge(r *Rule, now time.Time) {
	var cond bool
	var err error
	var delay time.Duration
	var next int8
	if r.state == 1 {
		delay, next = r.def.ReleaseFor.Std(), -1
		if r.release != nil {
			cond, err = e.run(r.release)
		} else {
			cond, err = e.run(r.when)
			cond = !cond
		}
	} else {
		delay, next = r.def.For.Std(), 1
		cond, err = e.run(r.when)
		if err == nil && !cond && r.state == 0 {
			// The first judgement of a rule whose condition does not
			// hold: released at once.
			r.state = -1
			r.setOut(r.def.ReleaseValue, !r.def.NoRelease)
			return
		}
	}
	if err != nil {
		if msg := err.Error(); msg != r.lastErr {
			e.log.Warn("rule condition unknown", "rule", r.def.Name, "err", err)
			r.lastErr = msg
		}
		r.pending = false
		return
	}
	r.lastErr = ""
	if !cond {
		r.pending = false
		return
	}
	if !r.pending {
		r.pending, r.since = true, now
	}
	if now.Sub(r.since) < delay {
		return
	}
	r.pending, r.state = false, next
	if next == 1 {
		e.log.Info("rule active", "rule", r.def.Name)
		r.setOut(r.def.Value, true)
	} else {
		e.log.Info("rule released", "rule", r.def.Name)
		r.setOut(r.def.ReleaseValue, !r.def.NoRelease)
	}
}

func (r *Rule) setOut(v float64, write bool) {
	if !write {
		r.hasOut = false
		return
	}
	r.out, r.hasOut, r.written, r.retryAt, r.retryGap = v, true, false, time.Time{}, 0
}

// act makes r's pending write, unless an override holds it.
func (e *Engine) act(ctx context.Context, r *Rule, now time.Time) {
	if r.override {
		if now.Before(r.overrideUntil) {
			return
		}
		e.log.Info("rule override expired", "rule", r.def.Name, "by", r.overrideBy)
		r.override = false
		r.written = false // write the rule's own output again
		r.retryAt = time.Time{}
	}
	if !r.hasOut || r.written || now.Before(r.retryAt) {
		return
	}
	who := "rule:" + r.def.Name
	if e.opts.DryRun || e.dryRun || r.def.DryRun {
		e.log.Info("rule dry run: would write", "rule", r.def.Name, "tag", r.def.Tag, "value", r.out)
		r.written = true
		return
	}
	wctx, cancel := context.WithTimeout(ctx, e.opts.WriteTimeout)
	err := e.ctl.Control(wctx, r.def.Tag, r.out, who)
	cancel()
	if err != nil {
		r.retryGap = min(max(2*r.retryGap, e.opts.Scan), maxRetryWait)
		r.retryAt = now.Add(r.retryGap)
		e.log.Warn("rule write failed", "rule", r.def.Name, "tag", r.def.Tag, "value", r.out, "retry_in", r.retryGap, "err", err)
		return
	}
	r.written, r.retryGap = true, 0
}

// ErrUnknownRule is returned for a rule name that is not configured.
var ErrUnknownRule = errors.New("unknown rule")

// Override writes value to the rule's tag now, on behalf of who, and
// suspends the rule's writes until now+d. The write goes through the
// control path; if it fails, no override is set.
func (e *Engine) Override(ctx context.Context, name string, value float64, d time.Duration, who string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.find(name)
	if r == nil {
		return fmt.Errorf("override rule %q: %w", name, ErrUnknownRule)
	}
	if d <= 0 {
		return fmt.Errorf("override rule %q: duration must be > 0", name)
	}
	now := e.opts.Clock.Now()
	wctx, cancel := context.WithTimeout(ctx, e.opts.WriteTimeout)
	defer cancel()
	if err := e.ctl.Control(wctx, r.def.Tag, value, "override:"+who); err != nil {
		return fmt.Errorf("override rule %q: %w", name, err)
	}
	r.override, r.overrideValue, r.overrideUntil, r.overrideBy = true, value, now.Add(d), who
	e.log.Info("rule overridden", "rule", name, "value", value, "until", r.overrideUntil, "by", who)
	return nil
}

// EndOverride ends an override at once; the rule writes its own output
// at the next evaluation.
func (e *Engine) EndOverride(name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.find(name)
	if r == nil {
		return fmt.Errorf("end override of rule %q: %w", name, ErrUnknownRule)
	}
	r.overrideUntil = time.Time{}
	return nil
}

func (e *Engine) find(name string) *Rule {
	for _, r := range e.rules {
		if r.def.Name == name {
			return r
		}
	}
	return nil
}

// Status is one rule as GET /api/v1/rules shows it.
type Status struct {
	Name          string   `json:"name"`
	State         string   `json:"state"` // unknown, active, released
	Tag           string   `json:"tag"`
	Output        *float64 `json:"output,omitempty"` // the value the rule wants written
	Written       bool     `json:"written"`
	DryRun        bool     `json:"dry_run"`
	Error         string   `json:"error,omitempty"` // why the condition is unknown
	OverrideValue *float64 `json:"override_value,omitempty"`
	OverrideUntil int64    `json:"override_until,omitempty"` // Unix ms
	OverrideBy    string   `json:"override_by,omitempty"`
}

// Statuses returns every rule's state.
func (e *Engine) Statuses() []Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Status, 0, len(e.rules))
	for _, r := range e.rules {
		st := Status{Name: r.def.Name, State: [...]string{"released", "unknown", "active"}[r.state+1], Tag: r.def.Tag,
			Written: r.written, DryRun: e.opts.DryRun || e.dryRun || r.def.DryRun, Error: r.lastErr}
		if r.hasOut {
			v := r.out
			st.Output = &v
		}
		if r.override {
			v := r.overrideValue
			st.OverrideValue, st.OverrideUntil, st.OverrideBy = &v, r.overrideUntil.UnixMilli(), r.overrideBy
		}
		out = append(out, st)
	}
	return out
}
