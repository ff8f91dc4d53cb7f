// Package diag is Pith's self-diagnostics: the system tags (pith.sys.*)
// built from every part's counters, the /metrics, /-/healthy and /-/ready
// endpoints and the FREEZE command: what runs inside `pith serve`. The
// `pith bench` harness, which measures Pith from outside, is in
// internal/bench (docs/diag.md says which package holds what).
//
// The Collector reads its sources on two clocks: every FastInterval (1 s)
// the figures that move quickly and matter during a FREEZE (the archive
// queue, request and update rates), every Interval (10 s) the rest (store
// size, process figures). Each reading becomes ordinary tags in the tag
// table (current values every second, archived on change at every slow
// reading), and the same values are served at /metrics in the Prometheus
// text format.
package diag

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// StoreSource is the store as the collector reads it, implemented by
// *store.DB. Stats returns live atomic counters and may be called at any
// time; DiskBytes walks the data directory and is called only on the slow
// (10 s) clock.
type StoreSource interface {
	Stats() *store.Stats
	DiskBytes() int64
}

var _ StoreSource = (*store.DB)(nil)

// QueueSource is the archive queue, implemented by *archive.Queue. Stats
// takes the queue's lock briefly and is safe for concurrent use.
type QueueSource interface {
	Stats() archive.Stats
}

var _ QueueSource = (*archive.Queue)(nil)

// TableSource is the tag table's counters, implemented by *tag.Table; safe
// for concurrent use.
type TableSource interface {
	Stats() tag.Stats
}

var _ TableSource = (*tag.Table)(nil)

// TagSink receives the system tags, implemented by *tag.Table. Define is
// called once per system tag when the collector starts; Update once per
// reading with every tag of that reading. Both are safe for concurrent use
// and must not block on consumers.
type TagSink interface {
	Define(d tag.Def) (tag.ID, error)
	Update(batch []tag.Sample) int
}

var _ TagSink = (*tag.Table)(nil)

// BudgetSource is the HTTP server's memory budget for bodies and answers
// in flight, implemented by *api.Budget (not imported here: diag stays
// below the API). Its methods are safe for concurrent use.
type BudgetSource interface {
	// InUse returns the bytes reserved now.
	InUse() int64
	// Refused returns how many requests the budget refused since start.
	Refused() int64
}

// Sources are the parts the collector reads; nil ones are skipped (their
// tags are neither defined nor served).
type Sources struct {
	Store   StoreSource
	Archive QueueSource
	Tags    TableSource
	Budget  BudgetSource
	// Sink receives the readings as pith.sys.* tags; nil keeps them on
	// /metrics only.
	Sink TagSink
}

// Options tune a Collector. Zero fields take DefaultOptions' values.
type Options struct {
	Interval     time.Duration    // the slow clock: store size and process figures
	FastInterval time.Duration    // the fast clock: archive queue and rates
	Now          func() time.Time // the clock, replaceable in tests
}

// Default option values.
const (
	defaultInterval     = 10 * time.Second // slow readings
	defaultFastInterval = time.Second      // fast readings
	sysSource           = "pith"           // Def.Source of system tags
)

// DefaultOptions returns 10 s for the slow readings and 1 s for the fast
// ones.
func DefaultOptions() Options {
	return Options{Interval: defaultInterval, FastInterval: defaultFastInterval, Now: time.Now}
}

func (o *Options) fill() {
	d := DefaultOptions()
	if o.Interval <= 0 {
		o.Interval = d.Interval
	}
	if o.FastInterval <= 0 || o.FastInterval > o.Interval {
		o.FastInterval = min(d.FastInterval, o.Interval)
	}
	if o.Now == nil {
		o.Now = d.Now
	}
}

// Metric is one system figure: a tag under pith.sys. and a Prometheus
// series of the same value.
type Metric struct {
	Name  string  // tag name, e.g. "pith.sys.archive.pending"
	Unit  string  // engineering unit shown with the tag
	Help  string  // one-line meaning
	Value float64 // the latest reading; NaN before the first one
	Fast  bool    // read on the fast clock
	// Counter marks a cumulative count (Prometheus "counter"); the others
	// are gauges, rates included.
	Counter bool
}

// Collector turns counters into system tags and /metrics. All methods are
// safe for concurrent use.
type Collector struct {
	src  Sources
	log  *slog.Logger
	opts Options
	defs []metricDef

	httpRequests atomic.Uint64
	httpErrors   atomic.Uint64 // 5xx answers
	started      time.Time
	ready        atomic.Bool

	mu     sync.Mutex // guards the fields below
	vals   []float64  // by index into defs
	ids    []tag.ID   // by index into defs, valid when the sink is set
	prev   [2]reading // the previous fast and slow readings
	hasPrv [2]bool
	batch  []tag.Sample
	cost   time.Duration // wall time of the last slow reading, for pith.sys.diag.collect_us
	proc   procReader

	stop chan struct{}
	done chan struct{}
}

// New returns a collector over src. Start runs its clocks; without Start,
// /metrics reads the sources on demand.
func New(src Sources, log *slog.Logger, opts Options) *Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.fill()
	c := &Collector{src: src, log: log, opts: opts, started: opts.Now()}
	c.defs = metricDefs(src)
	c.vals = make([]float64, len(c.defs))
	for i := range c.vals {
		c.vals[i] = math.NaN()
	}
	return c
}

// Start defines the system tags in the sink and starts the clocks. It is
// called once, after the sources are open.
func (c *Collector) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		return errors.New("start diagnostics: already started")
	}
	if c.src.Sink != nil {
		c.ids = make([]tag.ID, len(c.defs))
		for i, d := range c.defs {
			id, err := c.src.Sink.Define(tag.Def{Name: d.name, Unit: d.unit, Description: d.help, Source: sysSource})
			if err != nil {
				return err
			}
			c.ids[i] = id
		}
	}
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.loop()
	c.ready.Store(true)
	return nil
}

// Stop ends the clocks and marks the process not ready, so that a load
// balancer stops sending requests while the rest shuts down.
func (c *Collector) Stop() {
	c.ready.Store(false)
	c.mu.Lock()
	stop, done := c.stop, c.done
	c.mu.Unlock()
	if stop == nil {
		return
	}
	select {
	case <-stop:
	default:
		close(stop)
	}
	<-done
}

// SetReady overrides readiness, e.g. false while a long recovery runs.
func (c *Collector) SetReady(ok bool) { c.ready.Store(ok) }

func (c *Collector) loop() {
	defer close(c.done)
	fast := clock.NewAligned(c.opts.FastInterval)
	defer fast.Stop()
	every := int(c.opts.Interval / c.opts.FastInterval)
	c.Collect(true)
	for n := 1; ; n++ {
		select {
		case <-c.stop:
			return
		case <-fast.C:
			fast.Next()
		}
		c.Collect(n%every == 0)
	}
}

// Collect takes one reading now, the fast figures and, when slow is set,
// all of them, stores the values and hands them to the sink. The clocks
// call it; tests and benchmarks call it directly.
func (c *Collector) Collect(slow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := time.Now()
	r := c.read(slow)
	c.batch = c.batch[:0]
	c.pass(&r, 0, false)
	if slow {
		c.pass(&r, 1, true)
		c.cost = time.Since(start)
	} else {
		// Between slow readings the fast figures only set the current
		// values: archiving them every second was two WAL commits (each
		// with its fsync) per second of an idle Pith, and the rates
		// counted those very writes, so they never settled. The slow
		// reading archives every figure that changed.
		for i := range c.batch {
			c.batch[i].NoArchive = true
		}
	}
	if c.src.Sink != nil && len(c.batch) > 0 {
		c.src.Sink.Update(c.batch)
	}
}

// pass computes the figures of one clock from reading r and that clock's
// previous reading, then makes r the previous one; c.mu is held.
func (c *Collector) pass(r *reading, clock int, slow bool) {
	var prev *reading
	if c.hasPrv[clock] {
		prev = &c.prev[clock]
	}
	ms := r.t.UnixMilli()
	for i, d := range c.defs {
		if d.fast == slow {
			continue
		}
		v := d.value(r, prev, c)
		c.vals[i] = v
		if c.ids != nil && !math.IsNaN(v) {
			c.batch = append(c.batch, tag.Sample{ID: c.ids[i], T: ms, V: v, Q: model.QualityGood})
		}
	}
	c.prev[clock], c.hasPrv[clock] = *r, true
}

// Metrics returns the latest readings in a stable order.
func (c *Collector) Metrics() []Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Metric, len(c.defs))
	for i, d := range c.defs {
		out[i] = Metric{Name: d.name, Unit: d.unit, Help: d.help, Value: c.vals[i], Fast: d.fast, Counter: d.counter}
	}
	return out
}

// Value returns the latest reading of one system tag by name.
func (c *Collector) Value(name string) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, d := range c.defs {
		if d.name == name {
			return c.vals[i], !math.IsNaN(c.vals[i])
		}
	}
	return math.NaN(), false
}

// hasReading reports whether a slow reading was taken.
func (c *Collector) hasReading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hasPrv[1]
}
