package process

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/expr-lang/expr/vm"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// Table is what the engine needs of the tag table (*tag.Table).
// Its methods are safe for concurrent use.
type Table interface {
	Define(d tag.Def) (tag.ID, error)
	Lookup(name string) (tag.ID, bool)
	Get(id tag.ID) (tag.Value, bool)
	Update(batch []tag.Sample) int
	Subscribe(opts tag.SubOptions) *tag.Subscription
	Unsubscribe(s *tag.Subscription)
}

var _ Table = (*tag.Table)(nil)

// Stats are the engine's counters.
type Stats struct {
	Evals      uint64 // calculated-tag evaluations
	EvalErrors uint64 // evaluations that failed (result marked bad)
	Samples    uint64 // input samples run through chains
	Late       uint64 // samples the chains' stateful steps skipped as late
}

// Engine runs the chains of [[input]] on the tag table's changes and
// evaluates the [[calc]] tags, writing results back into the table. Build
// it with New, run it with Start and Stop; Stats may be called concurrently.
type Engine struct {
	log    *slog.Logger
	tab    Table
	chains map[tag.ID]*Chain
	calcs  []*Calc         // dependency order
	deps   [][]int         // per tag ID: indexes into calcs of on-change readers
	read   []bool          // per tag ID: read by some calc
	inIDs  [][]tag.ID      // per calc: its inputs' IDs
	outIDs []tag.ID        // per calc: its tag's ID
	own    map[tag.ID]bool // calc outputs: their changes are already propagated
	names  map[string]tag.ID
	m      vm.VM

	// state of the loop, touched only by its goroutine
	cur   []model.Sample // per tag ID: newest value seen (Q bad when none)
	has   []bool
	dirty []bool // per calc
	out   []tag.Sample
	pts   []model.Point
	in    []model.Sample

	evals, evalErrs, samples atomic.Uint64
	late                     atomic.Uint64
	paused                   atomic.Bool // see Pause
	mu                       sync.Mutex  // serialises evaluation between the loop and the tickers

	cancel context.CancelFunc
	done   chan struct{}
}

// New compiles the calculated tags, refuses dependency cycles, defines
// every output tag in the table (source "process") and builds the input
// chains of tags that reach the table (Hold interpolation: the table
// reports changes only). seed gives stored totals to continue (nil for
// none).
func New(inputs []config.Input, calcs []config.Calc, tab Table, seed Seeder, log *slog.Logger) (*Engine, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{log: log, tab: tab, chains: make(map[tag.ID]*Chain), own: make(map[tag.ID]bool),
		names: make(map[string]tag.ID)}
	if err := Check(calcs); err != nil {
		return nil, err
	}
	var compiled []*Calc
	for _, cc := range calcs {
		c, _ := CompileCalc(cc) // Check compiled it
		compiled = append(compiled, c)
	}
	ordered, _ := order(compiled)
	e.calcs = ordered
	for _, in := range inputs {
		ch, err := NewChain(in, Hold, seed)
		if err != nil {
			return nil, err
		}
		id, err := e.define(in.Tag, "", "")
		if err != nil {
			return nil, err
		}
		for _, o := range ch.Outputs() {
			if _, err := e.define(o, "", "input "+in.Tag); err != nil {
				return nil, err
			}
		}
		e.chains[id] = ch
	}
	for i, c := range e.calcs {
		id, err := e.define(c.Tag, c.Unit, c.Desc)
		if err != nil {
			return nil, err
		}
		e.outIDs = append(e.outIDs, id)
		e.own[id] = true
		ids := make([]tag.ID, len(c.Inputs))
		for j, n := range c.Inputs {
			if ids[j], err = e.define(n, "", ""); err != nil {
				return nil, fmt.Errorf("calc %q input: %w", c.Tag, err)
			}
			e.read[ids[j]] = true
			if c.Period == 0 {
				e.deps[ids[j]] = append(e.deps[ids[j]], i)
			}
		}
		e.inIDs = append(e.inIDs, ids)
	}
	e.dirty = make([]bool, len(e.calcs))
	return e, nil
}

// define looks a tag up, defining it when absent. Outputs get source
// "process"; inputs nobody produced yet are defined so that their IDs are
// stable (their producer later fills in the metadata).
func (e *Engine) define(name, unit, desc string) (tag.ID, error) {
	if id, ok := e.names[name]; ok {
		return id, nil
	}
	id, ok := e.tab.Lookup(name)
	if !ok || unit != "" || desc != "" {
		var err error
		id, err = e.tab.Define(tag.Def{Name: name, Unit: unit, Description: desc, Source: "process"})
		if err != nil {
			return 0, err
		}
	}
	e.names[name] = id
	e.grow(id)
	return id, nil
}

// grow sizes the per-tag slices to hold id.
func (e *Engine) grow(id tag.ID) {
	for int(id) >= len(e.deps) {
		e.deps = append(e.deps, nil)
		e.read = append(e.read, false)
		e.cur = append(e.cur, model.Sample{Q: model.QualityBad})
		e.has = append(e.has, false)
	}
}

// Latester is the store's newest-value read (*store.DB).
type Latester interface {
	Latest(tags ...string) ([]store.Latest, error)
}

// SeedFrom returns a Seeder reading the store's newest values, so that
// running totals (power_to_kwh, kwh_per_day) continue after a restart.
func SeedFrom(l Latester) Seeder {
	return func(name string) (model.Sample, bool) {
		v, err := l.Latest(name)
		if err != nil || len(v) != 1 {
			return model.Sample{}, false
		}
		return v[0].Sample, true
	}
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{Evals: e.evals.Load(), EvalErrors: e.evalErrs.Load(), Samples: e.samples.Load(), Late: e.late.Load()}
}

// Start subscribes to the table (so that no change made after it
// returns is missed) and runs the engine in a goroutine until ctx ends or
// Stop is called.
func (e *Engine) Start(ctx context.Context) {
	sub := e.tab.Subscribe(tag.SubOptions{Name: "process", Mode: tag.Queue})
	ctx, e.cancel = context.WithCancel(ctx)
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		e.run(ctx, sub)
	}()
}

// Stop ends the goroutine Start began and waits for it.
func (e *Engine) Stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	<-e.done
}

// run processes the table's changes until ctx ends. It reads the current
// values first, so calculated tags start from the table's state, and
// starts one ticker per distinct calc period.
func (e *Engine) run(ctx context.Context, sub *tag.Subscription) {
	defer e.tab.Unsubscribe(sub)
	e.mu.Lock()
	for id := range e.cur {
		if v, ok := e.tab.Get(tag.ID(id)); ok && v.Has {
			e.cur[id], e.has[id] = model.Sample{T: v.T, V: v.V, Q: v.Q}, true
		}
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range e.periods() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.tick(ctx, p)
		}()
	}
	defer wg.Wait()
	var buf []tag.Change
	for {
		var err error
		buf, err = sub.Next(ctx, buf[:0])
		if err != nil {
			return
		}
		e.Apply(buf)
	}
}

// periods lists the distinct calc periods.
func (e *Engine) periods() []time.Duration {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	for _, c := range e.calcs {
		if c.Period > 0 && !seen[c.Period] {
			seen[c.Period] = true
			out = append(out, c.Period)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// tick evaluates the calcs of one period at aligned times.
func (e *Engine) tick(ctx context.Context, p time.Duration) {
	for {
		now := time.Now()
		next := now.Truncate(p).Add(p)
		select {
		case <-ctx.Done():
			return
		case <-time.After(next.Sub(now)):
		}
		e.EvalPeriod(p, next.UnixMilli())
	}
}

// EvalPeriod evaluates every calc of period p at time ms and writes the
// results. The tickers call it; tests call it directly.
func (e *Engine) EvalPeriod(p time.Duration, ms int64) {
	if e.paused.Load() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, c := range e.calcs {
		if c.Period == p {
			e.dirty[i] = true
		}
	}
	e.evalDirty(ms)
	e.flush()
}

// Pause stops (true) or resumes (false) the chains and calculated tags:
// a paused engine keeps its inputs' current values but computes and
// writes nothing (the standby box of a redundant pair mirrors the active
// box's results instead). After a resume, the calcs whose inputs changed
// meanwhile are evaluated with their inputs' next change.
func (e *Engine) Pause(p bool) { e.paused.Store(p) }

// Apply handles one batch of table changes: chains run on their inputs'
// samples, then the on-change calcs whose inputs changed are evaluated,
// one group of equal timestamps at a time, and everything produced is
// written back in one Update per group. The loop calls it; tests and
// benchmarks call it directly.
func (e *Engine) Apply(cs []tag.Change) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// A pushed batch may interleave times across tags: evaluate in time
	// order, keeping the order of equal times.
	byT := func(a, b tag.Change) int { return cmp.Compare(a.T, b.T) }
	if !slices.IsSortedFunc(cs, byT) {
		cs = slices.Clone(cs)
		slices.SortStableFunc(cs, byT)
	}
	for i := 0; i < len(cs); {
		t := cs[i].T
		j := i
		for ; j < len(cs) && cs[j].T == t; j++ {
			e.change(cs[j])
		}
		if e.paused.Load() {
			i = j
			continue
		}
		e.evalDirty(t)
		e.flush()
		i = j
	}
}

// change takes one table change.
func (e *Engine) change(c tag.Change) {
	if e.own[c.ID] || c.IsText {
		return // a calc result (already propagated), or text (chains compute numbers)
	}
	s := model.Sample{T: c.T, V: c.V, Q: c.Q}
	if !c.Has {
		s.Q = model.QualityBad
	}
	// Pushed values ran their chains on the push road, before they were
	// stored with the chains' outputs.
	if ch, ok := e.chains[c.ID]; ok && c.Has && !c.Pushed && !e.paused.Load() {
		e.samples.Add(1)
		late := ch.Late
		e.pts = ch.Push(s, e.pts)
		e.late.Add(ch.Late - late)
	}
	e.set(c.ID, s, c.Has)
}

// set records a tag's new value and marks its on-change readers dirty.
func (e *Engine) set(id tag.ID, s model.Sample, has bool) {
	if int(id) >= len(e.cur) {
		return // not an input of anything
	}
	e.cur[id], e.has[id] = s, has
	for _, ci := range e.deps[id] {
		e.dirty[ci] = true
	}
}

// evalDirty evaluates the dirty calcs in dependency order at time t; a
// result is visible to the calcs after it at once.
func (e *Engine) evalDirty(t int64) {
	for i, c := range e.calcs {
		if !e.dirty[i] {
			continue
		}
		e.dirty[i] = false
		ready := true
		e.in = e.in[:0]
		for _, id := range e.inIDs[i] {
			if !e.has[id] {
				ready = false
				break
			}
			e.in = append(e.in, e.cur[id])
		}
		if !ready {
			continue // an input never had a value: nothing to compute yet
		}
		e.evals.Add(1)
		v, q, err := c.Eval(&e.m, e.in)
		if err != nil {
			e.evalErrs.Add(1)
			e.log.Debug("calculated tag", "tag", c.Tag, "err", err)
		}
		id := e.outIDs[i]
		if q == model.QualityBad {
			e.out = append(e.out, tag.Sample{ID: id, Q: q, Hold: true, T: t})
		} else {
			e.out = append(e.out, tag.Sample{ID: id, Q: q, T: t, V: v})
		}
		e.set(id, model.Sample{T: t, V: v, Q: q}, q != model.QualityBad || e.has[id])
	}
}

// flush writes the chains' points and the calcs' results to the table.
func (e *Engine) flush() {
	for _, p := range e.pts {
		id, ok := e.names[p.Tag]
		if !ok {
			continue
		}
		e.out = append(e.out, tag.Sample{ID: id, Q: p.Q, T: p.T, V: p.V})
	}
	if len(e.out) > 0 {
		e.tab.Update(e.out)
	}
	e.out, e.pts = e.out[:0], e.pts[:0]
}
